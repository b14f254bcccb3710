//! Shared by the kernel tests: network namespaces joined by a bridge, Linux VTEPs, tshark on
//! the bridge, ping and a UDP sink inside a namespace.

#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Runs a command that must succeed.
pub fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Why the kernel tests cannot run here, if they cannot.
pub fn unable() -> Option<String> {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    });
    if !root {
        return Some("needs root for network namespaces".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("needs iproute2 (`ip`)".into());
    }
    None
}

/// Network namespaces joined by a Linux bridge (in namespace `br`): each member has a veth
/// `v0` (MTU 9000, or as given) whose peer is a bridge port. Removed when dropped.
pub struct Lab {
    tag: String,
    members: Vec<String>,
}

impl Lab {
    pub fn ns(&self, n: &str) -> String {
        format!("{}{n}", self.tag)
    }

    pub fn exec(&self, ns: &str, args: &[&str]) {
        let ns = self.ns(ns);
        let mut v = vec!["ip", "netns", "exec", &ns];
        v.extend_from_slice(args);
        sh(&v);
    }

    pub fn new(members: &[&str]) -> Lab {
        Lab::with_mtu(members, 9000)
    }

    pub fn with_mtu(members: &[&str], mtu: u32) -> Lab {
        let mtu = mtu.to_string();
        static N: AtomicU32 = AtomicU32::new(0);
        let lab = Lab {
            tag: format!(
                "vlk{}.{}-",
                std::process::id() % 100_000,
                N.fetch_add(1, Ordering::Relaxed)
            ),
            members: members.iter().map(|m| m.to_string()).collect(),
        };
        sh(&["ip", "netns", "add", &lab.ns("br")]);
        lab.exec("br", &["ip", "link", "add", "br0", "type", "bridge"]);
        lab.exec("br", &["ip", "link", "set", "br0", "up"]);
        for (k, n) in members.iter().enumerate() {
            sh(&["ip", "netns", "add", &lab.ns(n)]);
            let peer = format!("p{k}");
            let (ns, br) = (lab.ns(n), lab.ns("br"));
            sh(&[
                "ip", "-n", &ns, "link", "add", "v0", "mtu", &mtu, "type", "veth", "peer", "name",
                &peer, "mtu", &mtu, "netns", &br,
            ]);
            lab.exec("br", &["ip", "link", "set", &peer, "master", "br0", "up"]);
            lab.exec(n, &["ip", "link", "set", "v0", "up"]);
            lab.exec(n, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        }
        lab
    }

    /// A Linux VTEP in member `n`: underlay `ip`/24 on `v0`, a `vxlan` device `vx` with `vni`
    /// towards `remote`, and `inner` (address/length) on it.
    pub fn linux_vtep(&self, n: &str, vni: u32, ip: &str, remote: &str, inner: &str) {
        self.exec(n, &["ip", "addr", "add", &format!("{ip}/24"), "dev", "v0"]);
        let vni = vni.to_string();
        self.exec(
            n,
            &[
                "ip", "link", "add", "vx", "type", "vxlan", "id", &vni, "dstport", "4789", "local",
                ip, "remote", remote, "dev", "v0",
            ],
        );
        self.exec(n, &["ip", "addr", "add", inner, "dev", "vx"]);
        self.exec(n, &["ip", "link", "set", "vx", "up"]);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for n in self.members.iter().map(String::as_str).chain(["br"]) {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(n)])
                .status();
        }
    }
}

/// tshark on the bridge, capturing VXLAN.
pub struct Capture {
    child: std::process::Child,
    file: std::path::PathBuf,
}

impl Capture {
    pub fn start(lab: &Lab, file: std::path::PathBuf) -> Capture {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &lab.ns("br"), "tshark", "-q", "-i", "br0"])
            .args(["-f", "udp port 4789", "-w"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // tshark says "Capturing on 'br0'" once it is.
        let mut r = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut r, &mut line).unwrap() > 0 {
            if line.contains("Capturing on") {
                break;
            }
            line.clear();
        }
        std::thread::spawn(move || std::io::copy(&mut r, &mut std::io::sink()));
        Capture { child, file }
    }

    /// Stops the capture; one line per VXLAN packet: VNI, IPv4 sources, destinations (outer
    /// then inner, comma-separated), outer UDP source port. tshark decodes the outer headers;
    /// the UDP payload, taken raw, is cut every `datagram` bytes (each VXLAN packet's UDP
    /// payload), or when `None` at the size its first packet's inner IPv4 length gives (a
    /// piece too short for the headers is that packet's padding): a UDP super-packet
    /// (datagrams of one UDP flow the kernel carries as one frame, `GSO_UDP_L4`, all of one
    /// size but the last) gives a line for each datagram it carries.
    pub fn stop(mut self, datagram: Option<usize>) -> Vec<String> {
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&self.file)
            .args(["-d", "udp.port==4789,data", "-Y", "udp.dstport == 4789"])
            .args(["-T", "fields", "-e", "ip.src", "-e", "ip.dst"])
            .args(["-e", "udp.srcport", "-e", "data.data"])
            .output()
            .unwrap();
        let mut lines = Vec::new();
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = l.split('\t').collect();
            let hex = f[3].as_bytes();
            let payload: Vec<u8> = hex
                .chunks(2)
                .map(|h| u8::from_str_radix(std::str::from_utf8(h).unwrap(), 16).unwrap())
                .collect();
            // VXLAN (8 bytes: the VNI in 4..7), then the inner Ethernet and IPv4 headers.
            const HDRS: usize = 8 + 14 + 20;
            assert!(payload.len() >= HDRS, "{l}: too short for VXLAN");
            let size = datagram.unwrap_or_else(|| {
                8 + 14 + usize::from(u16::from_be_bytes([payload[24], payload[25]]))
            });
            if datagram.is_some() {
                assert_eq!(
                    payload.len() % size,
                    0,
                    "{l}: not whole datagrams of {size}"
                );
            }
            let mut pieces: Vec<&[u8]> = payload.chunks(size).collect();
            if pieces.len() > 1 && pieces.last().is_some_and(|p| p.len() < HDRS) {
                pieces.pop();
            }
            for d in pieces {
                let vni = u32::from_be_bytes([0, d[4], d[5], d[6]]);
                let ip =
                    |at: usize| std::net::Ipv4Addr::new(d[at], d[at + 1], d[at + 2], d[at + 3]);
                let (src, dst) = (ip(8 + 14 + 12), ip(8 + 14 + 16));
                lines.push(format!("{vni}\t{},{src}\t{},{dst}\t{}", f[0], f[1], f[2]));
            }
        }
        lines
    }
}

/// `ping -c N` in namespace `ns`: how many replies came.
pub fn ping_from(lab: &Lab, ns: &str, dst: &str, n: u32) -> u32 {
    ping_size_from(lab, ns, dst, n, 56)
}

/// As [`ping_from`], with `size` bytes of ICMP data (more than the MTU allows: the kernel
/// sends the request in fragments and reassembles the reply).
pub fn ping_size_from(lab: &Lab, ns: &str, dst: &str, n: u32, size: usize) -> u32 {
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.ns(ns), "ping", "-c", &n.to_string()])
        .args(["-s", &size.to_string()])
        .args(["-i", "0.2", "-W", "1", dst])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(", ")
        .find_map(|p| p.strip_suffix(" received")?.parse().ok())
        .unwrap_or_else(|| panic!("{text}"))
}

/// UDP datagrams to `port` counted in namespace `ns` while `send` runs.
pub fn udp_sink(lab: &Lab, ns: &str, port: u16, want: usize) -> std::process::Child {
    let code = format!(
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         s.bind(('0.0.0.0',{port}))\ns.settimeout(3)\nn=0\n\
         print('ready',flush=True)\n\
         try:\n  while n<{want}:\n    d,a=s.recvfrom(4096)\n    n+=1 if d.startswith(b'pod') else 0\n\
         except Exception:\n  pass\nprint(n,flush=True)\n"
    );
    let mut c = Command::new("ip")
        .args(["netns", "exec", &lab.ns(ns), "python3", "-c", &code])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(c.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    c
}
