//! The control socket: a unix stream socket; each request is one JSON object on one line and
//! gets one JSON reply on one line. Many clients may be connected; requests are served in the
//! control thread, one at a time, so they never race each other.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use api::{Reply, Request};

use crate::control::Control;

/// Longest request line accepted.
const MAX_LINE: usize = 64 * 1024;

#[derive(Debug)]
struct Conn {
    s: UnixStream,
    buf: Vec<u8>,
}

/// Why the control socket cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("another veclane daemon is serving {0}; stop it or set [daemon] runtime-dir")]
    InUse(String),
    #[error("cannot listen on {path}: {source}")]
    Listen {
        path: String,
        source: std::io::Error,
    },
    #[error("control socket {path}: {why}")]
    Access { path: String, why: String },
}

/// A group's id: a number, or a name looked up in /etc/group.
fn group_id(g: &str) -> Result<u32, String> {
    if let Ok(n) = g.parse() {
        return Ok(n);
    }
    let text = std::fs::read_to_string("/etc/group")
        .map_err(|e| format!("cannot read /etc/group to find group {g}: {e}"))?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let gid = f.nth(1)?.parse().ok()?;
            Some((name, gid))
        })
        .find(|(name, _)| *name == g)
        .map(|(_, gid)| gid)
        .ok_or_else(|| format!("no group named {g} in /etc/group"))
}

/// The API server.
#[derive(Debug)]
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    conns: Vec<Conn>,
}

impl Server {
    /// Binds the control socket, replacing a stale one (a socket nobody answers on), and
    /// gives it the configured group and mode.
    pub fn bind(path: &Path, access: &api::config::ControlSocket) -> Result<Server, ServerError> {
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(ServerError::InUse(path.display().to_string()));
            }
            let _ = std::fs::remove_file(path);
        }
        let listen = |source| ServerError::Listen {
            path: path.display().to_string(),
            source,
        };
        let listener = UnixListener::bind(path).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        let refuse = |why: String| ServerError::Access {
            path: path.display().to_string(),
            why,
        };
        if let Some(g) = &access.group {
            let gid = group_id(g).map_err(refuse)?;
            rustix::fs::chown(path, None, Some(rustix::fs::Gid::from_raw(gid)))
                .map_err(|e| refuse(format!("cannot give it to group {g}: {e}")))?;
        }
        if let Some(bits) = access.mode_bits() {
            let bits = bits.map_err(refuse)?;
            rustix::fs::chmod(path, rustix::fs::Mode::from_raw_mode(bits))
                .map_err(|e| refuse(format!("cannot set mode {bits:o}: {e}")))?;
        }
        Ok(Server {
            listener,
            path: path.to_path_buf(),
            conns: Vec::new(),
        })
    }

    /// Waits up to `timeout_ms` for API traffic and serves every complete request.
    pub fn serve(&mut self, control: &mut Control, timeout_ms: i32) {
        {
            let mut fds = vec![
                rustix::event::PollFd::from_borrowed_fd(
                    self.listener.as_fd(),
                    rustix::event::PollFlags::IN,
                ),
                // A worker learned a neighbour: return at once so the tick installs it.
                rustix::event::PollFd::from_borrowed_fd(
                    control.wake_fd(),
                    rustix::event::PollFlags::IN,
                ),
            ];
            for c in &self.conns {
                fds.push(rustix::event::PollFd::from_borrowed_fd(
                    c.s.as_fd(),
                    rustix::event::PollFlags::IN,
                ));
            }
            let ts = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: i64::from(timeout_ms) * 1_000_000,
            };
            let _ = rustix::event::poll(&mut fds, Some(&ts));
        }
        while let Ok((s, _)) = self.listener.accept() {
            if s.set_nonblocking(true).is_ok() {
                self.conns.push(Conn { s, buf: Vec::new() });
            }
        }
        let mut k = 0;
        while k < self.conns.len() {
            if serve_conn(&mut self.conns[k], control) {
                k += 1;
            } else {
                self.conns.swap_remove(k);
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads what the client sent and answers each complete line; false when it is gone.
fn serve_conn(c: &mut Conn, control: &mut Control) -> bool {
    let mut chunk = [0u8; 4096];
    loop {
        match c.s.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => c.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    while let Some(nl) = c.buf.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = c.buf.drain(..=nl).collect();
        let reply = match api::split_version(&line[..line.len() - 1]) {
            // A client that names no version predates them (and the Go agent names none):
            // served, as the request's own shape is checked below anyway.
            Ok((Some(v), _)) if v != u64::from(api::API_VERSION) => Reply::Error {
                code: api::ErrorCode::Version,
                message: format!(
                    "this daemon speaks control API {} and the client speaks {v}: use the \
                     veclane binary of the daemon's build",
                    api::API_VERSION
                ),
            },
            Ok((_, j)) => match serde_json::from_value::<Request>(j) {
                Ok(req) => control.handle(req),
                Err(e) => Reply::Error {
                    code: api::ErrorCode::Malformed,
                    message: format!("malformed request: {e}"),
                },
            },
            Err(e) => Reply::Error {
                code: api::ErrorCode::Malformed,
                message: format!("malformed request: {e}"),
            },
        };
        if !send(&c.s, &reply) {
            return false;
        }
    }
    if c.buf.len() > MAX_LINE {
        let _ = send(
            &c.s,
            &Reply::Error {
                code: api::ErrorCode::Malformed,
                message: format!("request longer than {MAX_LINE} bytes"),
            },
        );
        return false;
    }
    true
}

fn send(s: &UnixStream, r: &Reply) -> bool {
    let mut line = match api::with_version(r) {
        Ok(l) => l.into_bytes(),
        Err(_) => return false,
    };
    line.push(b'\n');
    // Replies are written whole; a client that does not read for a second is dropped.
    let mut s = s;
    let _ = s.set_nonblocking(false);
    let _ = s.set_write_timeout(Some(std::time::Duration::from_secs(1)));
    let ok = s.write_all(&line).is_ok();
    let _ = s.set_nonblocking(true);
    ok
}
