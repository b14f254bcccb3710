//! Network namespaces, veth pairs and frames for the uplink tests (and the rate example).
//!
//! Each test enters a namespace of its own on its own thread (`setns` changes only the calling
//! thread), so tests run in parallel without seeing each other's interfaces, and every socket
//! the thread opens lives in that namespace.
#![allow(dead_code)]

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use buffer::Pool;
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
use uplink::{PacketSocket, RxQueue};

pub use testkit::{TEST_ETHERTYPE, seq_of};

/// A network namespace the calling thread is in until this is dropped.
pub struct Netns {
    pub name: String,
    home: File,
}

fn ip_binary() -> &'static str {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("ip")
}

/// Runs `ip ARGS`, returning stdout or the reason it failed.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new(ip_binary())
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    /// Creates namespace `vl-up-<pid>-<n>` and moves this thread into it. `None`, with the
    /// reason printed, when that is impossible here (not root, no `ip`, no namespaces);
    /// under `CI` that is a failure instead.
    pub fn enter() -> Option<Netns> {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "vl-up-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let skip = |why: String| {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI: cannot create a network namespace: {why}"
            );
            eprintln!("SKIPPED: cannot create a network namespace: {why}");
            None
        };
        if !rustix::process::geteuid().is_root() {
            return skip("not root".into());
        }
        let home = match File::open("/proc/thread-self/ns/net") {
            Ok(f) => f,
            Err(e) => return skip(format!("/proc/thread-self/ns/net: {e}")),
        };
        if let Err(e) = ip(&["netns", "add", &name]) {
            return skip(e);
        }
        let ns = Netns { name, home };
        let f = ["/run/netns", "/var/run/netns"]
            .iter()
            .find_map(|d| File::open(format!("{d}/{}", ns.name)).ok())
            .expect("ip netns add made no /run/netns entry");
        move_into_link_name_space(f.as_fd(), Some(LinkNameSpaceType::Network))
            .expect("setns into the new namespace");
        // No IPv6 autoconfiguration chatter on the interfaces we make (proc/sys/net follows
        // the opening thread's namespace).
        for k in ["all", "default"] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{k}/disable_ipv6"), "1");
        }
        Some(ns)
    }

    /// `ip -n NS ARGS`, panicking on failure.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all).unwrap()
    }

    /// A veth pair `a`–`b` with this MTU, both up.
    pub fn veth(&self, a: &str, b: &str, mtu: u32) {
        let m = mtu.to_string();
        self.ip(&[
            "link", "add", "name", a, "mtu", &m, "type", "veth", "peer", "name", b, "mtu", &m,
        ]);
        self.ip(&["link", "set", a, "up"]);
        self.ip(&["link", "set", b, "up"]);
    }

    /// A veth pair `a`–`b` with this MTU and `queues` rx and tx queues on each end, both up.
    pub fn veth_queues(&self, a: &str, b: &str, mtu: u32, queues: u32) {
        let (m, q) = (mtu.to_string(), queues.to_string());
        self.ip(&[
            "link",
            "add",
            "name",
            a,
            "mtu",
            &m,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            b,
            "mtu",
            &m,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ]);
        self.ip(&["link", "set", a, "up"]);
        self.ip(&["link", "set", b, "up"]);
    }

    /// Whether `ip -d link show NAME` shows an XDP program attached.
    pub fn has_xdp(&self, name: &str) -> bool {
        self.ip(&["-d", "link", "show", name]).contains("prog/xdp")
    }

    pub fn ifindex(&self, name: &str) -> u32 {
        let out = self.ip(&["-o", "link", "show", name]);
        out.split(':').next().unwrap().trim().parse().unwrap()
    }

    pub fn mac(&self, name: &str) -> [u8; 6] {
        let out = self.ip(&["-o", "link", "show", name]);
        let at = out.find("link/ether ").unwrap() + "link/ether ".len();
        let mut mac = [0u8; 6];
        for (m, h) in mac.iter_mut().zip(out[at..at + 17].split(':')) {
            *m = u8::from_str_radix(h, 16).unwrap();
        }
        mac
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = move_into_link_name_space(self.home.as_fd(), Some(LinkNameSpaceType::Network));
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Whether this kernel has AF_XDP sockets; prints why not when it has none (the one reason,
/// with not being root, that the AF_XDP tests skip).
pub fn xdp_available() -> bool {
    use rustix::net::{AddressFamily, SocketType};
    match rustix::net::socket(AddressFamily::XDP, SocketType::RAW, None) {
        Err(rustix::io::Errno::AFNOSUPPORT) => {
            eprintln!("SKIPPED: socket(AF_XDP) fails with EAFNOSUPPORT: no CONFIG_XDP_SOCKETS");
            false
        }
        _ => true,
    }
}

/// A test frame of `len` bytes: broadcast destination, `TEST_ETHERTYPE`, then `seq` and a
/// pattern that depends on it.
pub fn frame(seq: u32, len: usize) -> Vec<u8> {
    let eth = testkit::Eth {
        dst: [0xff; 6],
        src: [2, 0, 0, 0, 0x77, 1],
        ethertype: TEST_ETHERTYPE,
    };
    let pattern = testkit::Pattern {
        fill: testkit::Fill::Xor { seq_step: 31 },
        eth: Some(eth),
        seq_width: 4,
    };
    testkit::seq_frame(seq.into(), len, pattern)
}

/// Receives until `want` test frames came (or `timeout`), returning their bytes and how many
/// buffers each took; every buffer goes back to the pool.
pub fn recv_frames(
    q: &mut RxQueue,
    pool: &mut Pool,
    want: usize,
    max: usize,
    timeout: Duration,
) -> Vec<(Vec<u8>, usize)> {
    recv_matching(q, pool, (want, max, timeout), |f| seq_of(f).is_some())
}

/// The one queue pair of a single-queue AF_PACKET uplink on `host_if`.
#[allow(dead_code)]
pub fn one_queue(host_if: &str, cfg: uplink::AfPacketConfig) -> (RxQueue, uplink::TxQueue) {
    uplink::AfPacket::open(host_if, cfg)
        .unwrap()
        .into_queues()
        .pop()
        .unwrap()
}

/// As [`recv_frames`], for the frames `keep` picks; `(want, max, timeout)`.
pub fn recv_matching(
    q: &mut RxQueue,
    pool: &mut Pool,
    (want, max, timeout): (usize, usize, Duration),
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<(Vec<u8>, usize)> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut heads = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        heads.clear();
        q.recv(pool, &mut heads, max);
        if heads.is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
        for &h in &heads {
            let mut v = Vec::new();
            pool.read_chain(h, &mut v);
            assert_eq!(v.len(), pool.meta(h).total_len as usize, "total_len");
            if keep(&v) {
                got.push((v, pool.chain_len(h)));
            }
        }
        pool.free_bulk(&heads);
    }
    got
}

/// Reads test frames from a plain socket until `want` came or `timeout` passed.
pub fn collect(sock: &PacketSocket, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    while got.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if !sock.wait(left.min(Duration::from_millis(50))) {
            continue;
        }
        while let Some(n) = sock.try_recv(&mut buf).unwrap() {
            let f = buf[..n.min(buf.len())].to_vec();
            if seq_of(&f).is_some() {
                got.push(f);
            }
        }
    }
    got
}
