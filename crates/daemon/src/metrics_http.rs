//! The metrics endpoint's HTTP server: one thread, bounded whatever clients do.
//!
//! A scrape is one short request a few times a minute, so the server is one thread that polls
//! the listener and at most [`MAX_CONNECTIONS`] connections, each given [`DEADLINE`] from its
//! accept to its last byte written, a request head of at most [`MAX_HEAD`] bytes, and one
//! answer (`Connection: close`). A client that connects and says nothing, sends slowly, reads
//! slowly or opens connections by the hundred costs a slot until its deadline and nothing else:
//! no thread, no unbounded buffer; when every slot is taken the oldest connection is closed
//! for the new one, so a flood cannot lock a scraper out for longer than it keeps flooding
//! faster than the scraper connects. (`tiny_http`, used before, started a thread per
//! connection.)

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 32;
/// From accept to the answer's last byte.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// The longest request head (request line and headers) read.
pub const MAX_HEAD: usize = 8192;
/// How often the loop looks at its stop flag when nothing happens.
const TICK: Duration = Duration::from_millis(100);

/// A request: its method and path (without the query).
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
}

/// An answer: status code, content type and body.
#[derive(Debug)]
pub struct Response {
    pub code: u16,
    pub content_type: &'static str,
    pub body: String,
}

/// The listening server; [`Server::serve`] runs it until [`Server::stopper`]'s flag is set.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    stop: Arc<AtomicBool>,
}

struct Conn {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    /// The answer, and how much of it is written; `None` while the request is read.
    out: Option<(Vec<u8>, usize)>,
}

impl Server {
    pub fn bind(addr: &str) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The flag that ends [`Server::serve`] (within [`TICK`]).
    pub fn stopper(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Serves until stopped, answering each request with `answer`.
    pub fn serve(&self, mut answer: impl FnMut(&Request<'_>) -> Response) {
        let mut conns: Vec<Conn> = Vec::with_capacity(MAX_CONNECTIONS);
        while !self.stop.load(Ordering::Relaxed) {
            self.wait(&conns);
            self.accept(&mut conns);
            let now = Instant::now();
            conns.retain_mut(|c| now.duration_since(c.since) < DEADLINE && step(c, &mut answer));
        }
    }

    /// Sleeps until the listener or a connection is ready, or [`TICK`] passes.
    fn wait(&self, conns: &[Conn]) {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = Vec::with_capacity(conns.len() + 1);
        fds.push(PollFd::new(&self.listener, PollFlags::IN));
        for c in conns {
            let want = if c.out.is_some() {
                PollFlags::OUT
            } else {
                PollFlags::IN
            };
            fds.push(PollFd::from_borrowed_fd(c.stream.as_fd(), want));
        }
        let tick = Timespec {
            tv_sec: 0,
            tv_nsec: TICK.as_nanos() as i64,
        };
        let _ = poll(&mut fds, Some(&tick));
    }

    /// Takes every pending connection, closing the oldest when all slots are taken.
    fn accept(&self, conns: &mut Vec<Conn>) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if conns.len() == MAX_CONNECTIONS {
                        conns.remove(0);
                    }
                    conns.push(Conn {
                        stream,
                        since: Instant::now(),
                        head: Vec::new(),
                        out: None,
                    });
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // WouldBlock: none left; anything else (EMFILE, a reset before accept): try
                // again next turn rather than spin here.
                Err(_) => return,
            }
        }
    }
}

/// Moves one connection on as far as it can without blocking; false when it is done (answered,
/// closed by the client, or broken).
fn step(c: &mut Conn, answer: &mut impl FnMut(&Request<'_>) -> Response) -> bool {
    if c.out.is_none() {
        let mut buf = [0u8; 2048];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    c.head.extend_from_slice(&buf[..n]);
                    if let Some(end) = head_end(&c.head) {
                        let r = respond(&c.head[..end], answer);
                        c.out = Some((r, 0));
                        break;
                    }
                    if c.head.len() > MAX_HEAD {
                        let r = encode(&Response {
                            code: 431,
                            content_type: "text/plain; charset=utf-8",
                            body: "veclane: request head too long\n".into(),
                        });
                        c.out = Some((r, 0));
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
    }
    let Some((out, at)) = c.out.as_mut() else {
        return true;
    };
    while *at < out.len() {
        match c.stream.write(&out[*at..]) {
            Ok(0) => return false,
            Ok(n) => *at += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
    false
}

/// Where the request head ends (after its blank line), if it has.
fn head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The request a head (what a client sent up to and with its blank line) starts with: its
/// request line's method and target (without the query), or `None` for anything that is not
/// an HTTP/1 request line (not UTF-8, fewer than three parts, another version).
pub fn parse_request(head: &[u8]) -> Option<Request<'_>> {
    let line = std::str::from_utf8(head).ok()?.lines().next()?;
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(target), Some(v)) if v.starts_with("HTTP/1.") => Some(Request {
            method,
            path: target.split('?').next().unwrap_or(""),
        }),
        _ => None,
    }
}

/// The answer to a request head, encoded: 400 for one that is no HTTP request.
fn respond(head: &[u8], answer: &mut impl FnMut(&Request<'_>) -> Response) -> Vec<u8> {
    let r = match parse_request(head) {
        Some(req) => answer(&req),
        None => Response {
            code: 400,
            content_type: "text/plain; charset=utf-8",
            body: "veclane: not an HTTP/1 request\n".into(),
        },
    };
    encode(&r)
}

fn encode(r: &Response) -> Vec<u8> {
    let reason = match r.code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        r.code,
        r.content_type,
        r.body.len()
    )
    .into_bytes();
    out.extend_from_slice(r.body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    fn start() -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
        let s = Server::bind("127.0.0.1:0").unwrap();
        let (addr, stop) = (s.local_addr().unwrap(), s.stopper());
        let j = std::thread::spawn(move || {
            s.serve(|r| Response {
                code: if r.path == "/metrics" { 200 } else { 404 },
                content_type: "text/plain",
                body: format!("{} {}\n", r.method, r.path),
            })
        });
        (addr, stop, j)
    }

    fn get(addr: SocketAddr, path: &str) -> (String, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {path}?x=1 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        let mut status = String::new();
        r.read_line(&mut status).unwrap();
        let mut all = String::new();
        r.read_to_string(&mut all).unwrap();
        let body = all.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
        (status.trim().to_string(), body)
    }

    #[test]
    fn answers_and_stays_answering_through_a_flood_of_idle_connections() {
        let (addr, stop, j) = start();
        assert_eq!(
            get(addr, "/metrics"),
            ("HTTP/1.1 200 OK".into(), "GET /metrics\n".into())
        );
        assert_eq!(get(addr, "/x").0, "HTTP/1.1 404 Not Found");
        // Ten times the slots, connected and silent (a slowloris): the newest take the
        // oldest's places, and a scrape still gets its answer at once.
        let idle: Vec<TcpStream> = (0..10 * MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let t = Instant::now();
        assert_eq!(get(addr, "/metrics").0, "HTTP/1.1 200 OK");
        assert!(t.elapsed() < DEADLINE, "{:?}", t.elapsed());
        // The oldest of them were closed (read returns EOF rather than blocking).
        let mut first = &idle[0];
        first
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(first.read(&mut [0u8; 16]).unwrap(), 0);
        stop.store(true, Ordering::Relaxed);
        j.join().unwrap();
    }

    #[test]
    fn request_lines_that_lie_are_no_requests() {
        let r = parse_request(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        assert_eq!((r.method, r.path), ("GET", "/metrics"));
        for bad in [
            &b""[..],
            b"\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/2\r\n\r\n",
            b"GET  HTTP/1.1\r\n\r\n",
            b"\xff\xfe / HTTP/1.1\r\n\r\n",
        ] {
            let p = parse_request(bad);
            assert!(
                p.as_ref().is_none_or(|r| r.path.is_empty()),
                "{bad:?}: {p:?}"
            );
        }
    }

    #[test]
    fn a_silent_client_is_closed_at_its_deadline_and_bad_requests_get_4xx() {
        let (addr, stop, j) = start();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(DEADLINE * 3)).unwrap();
        let t = Instant::now();
        assert_eq!(s.read(&mut [0u8; 16]).unwrap(), 0);
        assert!(t.elapsed() >= DEADLINE - TICK, "{:?}", t.elapsed());
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"hello\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
        let mut s = TcpStream::connect(addr).unwrap();
        // One byte over, all of it read before the answer (unread data would turn the close
        // into a reset).
        s.write_all(&vec![b'a'; MAX_HEAD + 1]).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
        stop.store(true, Ordering::Relaxed);
        j.join().unwrap();
    }
}
