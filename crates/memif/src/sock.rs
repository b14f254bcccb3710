//! The control channel: AF_UNIX SOCK_SEQPACKET, one 128-byte message per datagram, at most
//! one fd per message, received with `MSG_CMSG_CLOEXEC` into owned fds so that none can leak.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

use crate::msg::{MSG_LEN, Msg};

/// Where a memif socket lives: a filesystem path, or an abstract name written `@name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketPath {
    File(PathBuf),
    Abstract(Vec<u8>),
}

impl SocketPath {
    /// `@name` is abstract (the libmemif and gomemif convention); anything else is a path.
    pub fn parse(s: &str) -> SocketPath {
        match s.strip_prefix('@') {
            Some(name) => SocketPath::Abstract(name.as_bytes().to_vec()),
            None => SocketPath::File(PathBuf::from(s)),
        }
    }

    fn addr(&self) -> io::Result<SocketAddrUnix> {
        Ok(match self {
            SocketPath::File(p) => SocketAddrUnix::new(p.as_path())?,
            SocketPath::Abstract(n) => SocketAddrUnix::new_abstract_name(n)?,
        })
    }
}

impl core::fmt::Display for SocketPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SocketPath::File(p) => write!(f, "{}", p.display()),
            SocketPath::Abstract(n) => write!(f, "@{}", String::from_utf8_lossy(n)),
        }
    }
}

fn seqpacket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?)
}

/// Binds and listens. A stale socket file (nobody listening) is replaced; a live one, or a
/// path that is not a socket, is an error that says so.
pub fn listen(path: &SocketPath) -> io::Result<OwnedFd> {
    let fd = seqpacket()?;
    let addr = path.addr()?;
    if let SocketPath::File(p) = path {
        if let Ok(meta) = std::fs::symlink_metadata(p) {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", p.display()),
                ));
            }
            let probe = seqpacket()?;
            match rustix::net::connect(&probe, &addr) {
                Ok(()) | Err(Errno::AGAIN) | Err(Errno::INPROGRESS) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("{} already has a listener", p.display()),
                    ));
                }
                Err(_) => std::fs::remove_file(p)?,
            }
        }
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
    }
    rustix::net::bind(&fd, &addr)
        .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("bind {path}: {e}")))?;
    rustix::net::sockopt::set_socket_passcred(&fd, true)?;
    rustix::net::listen(&fd, 64)?;
    Ok(fd)
}

/// Accepts one pending connection, if any.
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<Option<Channel>> {
    match rustix::net::accept_with(listener, SocketFlags::CLOEXEC | SocketFlags::NONBLOCK) {
        Ok(fd) => Ok(Some(Channel { fd })),
        Err(Errno::AGAIN) | Err(Errno::INTR) | Err(Errno::CONNABORTED) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// One message as it came off the socket.
#[derive(Debug)]
pub struct Received {
    /// The datagram, if it was exactly 128 bytes; otherwise the size that arrived.
    pub data: Result<[u8; MSG_LEN], usize>,
    /// Every fd that came with it, owned (closed on drop).
    pub fds: Vec<OwnedFd>,
    /// The kernel had to drop control data (too many fds): they were closed for us.
    pub control_truncated: bool,
}

/// A connected control socket.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// Connects to a listener (non-blocking socket, but unix connects complete at once or fail).
    pub fn connect(path: &SocketPath) -> io::Result<Channel> {
        let fd = seqpacket()?;
        match rustix::net::connect(&fd, &path.addr()?) {
            Ok(()) => Ok(Channel { fd }),
            Err(e) => Err(io::Error::new(
                io::Error::from(e).kind(),
                format!("connect {path}: {e}"),
            )),
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Sends one message with an optional fd. A full socket buffer is an error: the protocol is
    /// lock-step, so a peer that lets 200 KiB of our replies pile up is not following it.
    pub fn send(&self, msg: &Msg, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let bytes = msg.encode();
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds;
        if let Some(fd) = fd {
            fds = [fd];
            if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
                return Err(io::Error::other("control buffer too small for one fd"));
            }
        }
        let n = rustix::net::sendmsg(
            &self.fd,
            &[io::IoSlice::new(&bytes)],
            &mut control,
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        )?;
        if n != MSG_LEN {
            return Err(io::Error::other(format!(
                "short send: {n} of {MSG_LEN} bytes"
            )));
        }
        Ok(())
    }

    /// Receives one datagram. `Ok(None)`: nothing pending. `Err(UnexpectedEof)`: peer closed.
    pub fn recv(&self) -> io::Result<Option<Received>> {
        let mut buf = [0u8; MSG_LEN + 1];
        // Room for a few fds plus credentials: extra fds arrive owned and are closed by the
        // caller instead of being silently dropped by the kernel.
        let mut space =
            [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4), ScmCredentials(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut reset = false;
        let r = loop {
            match rustix::net::recvmsg(
                &self.fd,
                &mut [io::IoSliceMut::new(&mut buf)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
            ) {
                Ok(r) => break r,
                // A peer that closes with our messages unread makes the kernel report
                // ECONNRESET once, ahead of whatever the peer queued before closing (its
                // DISCONNECT and reason): read on to get those.
                Err(Errno::CONNRESET) if !reset => reset = true,
                Err(Errno::AGAIN) | Err(Errno::INTR) if !reset => return Ok(None),
                Err(Errno::AGAIN) | Err(Errno::CONNRESET) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "peer reset the control socket",
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        };
        let mut fds = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(it) = m {
                fds.extend(it);
            }
        }
        if r.bytes == 0 && fds.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the control socket",
            ));
        }
        let data = if r.bytes == MSG_LEN && !r.flags.contains(ReturnFlags::TRUNC) {
            let mut m = [0u8; MSG_LEN];
            m.copy_from_slice(&buf[..MSG_LEN]);
            Ok(m)
        } else {
            Err(r.bytes)
        };
        Ok(Some(Received {
            data,
            fds,
            control_truncated: r.flags.contains(ReturnFlags::CTRUNC),
        }))
    }

    /// Sends raw bytes (tests and the hostile-peer suite speak the protocol badly on purpose).
    pub fn send_raw(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("too many fds"));
        }
        Ok(rustix::net::sendmsg(
            &self.fd,
            &[io::IoSlice::new(bytes)],
            &mut control,
            SendFlags::NOSIGNAL,
        )?)
    }
}

/// Waits until `fd` is readable or `timeout_ms` passes (negative: forever).
pub fn wait_readable(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<_> = fds
        .iter()
        .map(|f| rustix::event::PollFd::new(f, rustix::event::PollFlags::IN))
        .collect();
    let ts = (timeout_ms >= 0).then(|| rustix::event::Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    });
    match rustix::event::poll(&mut pfds, ts.as_ref()) {
        Ok(_) | Err(Errno::INTR) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(pfds.iter().map(|p| !p.revents().is_empty()).collect())
}

/// Whether `fd` is an eventfd, as the kernel names it (`/proc/self/fd/N` links to
/// `anon_inode:[eventfd]`); `None` when `/proc` cannot say. A ring's interrupt fd comes from
/// the peer: a pipe or socket in its place would make our reads and writes block.
pub fn is_eventfd(fd: BorrowedFd<'_>) -> Option<bool> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    Some(link.as_os_str() == "anon_inode:[eventfd]")
}
