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
    /// then inner, comma-separated), outer UDP source port.
    pub fn stop(mut self) -> Vec<String> {
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&self.file)
            .args([
                "-Y",
                "vxlan",
                "-T",
                "fields",
                "-e",
                "vxlan.vni",
                "-e",
                "ip.src",
            ])
            .args(["-e", "ip.dst", "-e", "udp.srcport"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
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
