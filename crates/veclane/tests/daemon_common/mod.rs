//! Shared by the daemon tests: start `veclane run` on a configuration in a private runtime
//! directory, talk to it over its API, and play memif pods against it.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use memif::{Client, Event, InterfaceConfig, SecondaryQueues, SocketPath};

pub const BIN: &str = env!("CARGO_BIN_EXE_veclane");

/// A running daemon, killed (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Daemon {
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
}

impl Daemon {
    pub fn start(config: &str) -> Daemon {
        Daemon::start_in(None, config)
    }

    /// Starts the daemon inside network namespace `netns` (`ip netns exec`), if given. Its
    /// runtime directory is on the shared file system, so the test reaches its sockets.
    pub fn start_in(netns: Option<&str>, config: &str) -> Daemon {
        Daemon::start_with(netns, config, &[])
    }

    /// Starts the daemon with `env` added to its environment.
    pub fn start_env(config: &str, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_with(None, config, env)
    }

    fn start_with(netns: Option<&str>, config: &str, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_opts(netns, config, &[], env, None)
    }

    /// Starts the daemon with `args` after `run` and `env` added, its stderr written to
    /// `log` (else inherited). Its configuration file is `veclane.toml` in its runtime
    /// directory.
    pub fn start_opts(
        netns: Option<&str>,
        config: &str,
        args: &[&str],
        env: &[(&str, &str)],
        log: Option<&Path>,
    ) -> Daemon {
        let prefix: Vec<String> = match netns {
            Some(ns) => ["ip", "netns", "exec", ns].map(String::from).into(),
            None => Vec::new(),
        };
        Daemon::spawn(&prefix, config, args, env, log)
    }

    /// Starts the daemon as its packaged unit would, with what of the unit's hardening and
    /// limits can be had without systemd (as `scripts/package-check.sh` does): no new
    /// privileges, the unit's capability bounding set, its open-file and locked-memory
    /// limits, its umask. Its stderr is written to `log`.
    pub fn start_as_unit(config: &str, log: &Path) -> Daemon {
        let unit = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../packaging/veclane.service"
        ))
        .unwrap();
        let key = |k: &str| {
            let v = unit
                .lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix('='));
            v.unwrap_or_else(|| panic!("the unit sets no {k}"))
                .to_string()
        };
        let caps: Vec<String> = key("CapabilityBoundingSet")
            .split_whitespace()
            .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
            .collect();
        // The unit's limit, or this process's hard limit where that is lower (raising it
        // takes CAP_SYS_RESOURCE, which systemd has and a test may lack).
        let limit = |k: &str, r: rustix::process::Resource| {
            let unit = key(k);
            let hard = rustix::process::getrlimit(r).maximum;
            let v = match (unit.parse::<u64>().ok(), hard) {
                (Some(u), Some(h)) if h < u => h,
                (Some(u), _) => u,
                (None, Some(h)) => h,
                (None, None) => return "unlimited".to_string(),
            };
            if v.to_string() != unit {
                eprintln!("{k}={unit} in the unit; {v} here (this process's hard limit)");
            }
            v.to_string()
        };
        use rustix::process::Resource::{Memlock, Nofile};
        // prlimit first: the limits are set while the capabilities to raise them are held.
        let prefix = [
            "prlimit",
            &format!("--nofile={}", limit("LimitNOFILE", Nofile)),
            &format!("--memlock={}", limit("LimitMEMLOCK", Memlock)),
            "setpriv",
            "--no-new-privs",
            "--bounding-set",
            &format!("-all,{}", caps.join(",")),
            "sh",
            "-c",
            "umask \"$1\"; shift; exec \"$@\"",
            "sh",
            &key("UMask"),
        ]
        .map(String::from);
        Daemon::spawn(&prefix, config, &[], &[], Some(log))
    }

    /// Starts `prefix BIN run ...` (the prefix execs what follows it, so the child's pid is
    /// the daemon's).
    fn spawn(
        prefix: &[String],
        config: &str,
        args: &[&str],
        env: &[(&str, &str)],
        log: Option<&Path>,
    ) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("veclane.toml");
        std::fs::write(&cfg, config).unwrap();
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        let stderr = match log {
            Some(p) => Stdio::from(std::fs::File::create(p).unwrap()),
            None => Stdio::inherit(),
        };
        let child = cmd
            .args(["run", "--config"])
            .arg(&cfg)
            .arg("--runtime-dir")
            .arg(dir.path())
            .args(args)
            .env("VECLANE_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let d = Daemon {
            child: Some(child),
            dir,
        };
        // The socket takes connections before the configuration is applied; a request is
        // answered only after (its interfaces are up then).
        let deadline = Instant::now() + Duration::from_secs(20);
        let answered = || {
            api::Client::connect(&d.ctl_path())
                .and_then(|mut c| c.call(&api::Request::ShowInterface { name: None }))
                .is_ok()
        };
        while !answered() {
            assert!(Instant::now() < deadline, "daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn ctl_path(&self) -> PathBuf {
        self.path("ctl.sock")
    }

    pub fn api(&self) -> api::Client {
        api::Client::connect(&self.ctl_path()).unwrap()
    }

    /// `veclane ctl WORDS`: (success, stdout, stderr).
    pub fn ctl(&self, line: &str) -> (bool, String, String) {
        let out = Command::new(BIN)
            .arg("ctl")
            .arg("--socket")
            .arg(self.ctl_path())
            .args(line.split_whitespace())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `veclane ctl` that must succeed; its output.
    pub fn ok(&self, line: &str) -> String {
        let (ok, out, err) = self.ctl(line);
        assert!(ok, "`{line}` failed: {err}");
        out
    }

    /// The first number after `after` in `show ip neighbors`' summary line ("" for its
    /// first: the learned count; "asked again " for the probes).
    pub fn neighbour_summary(&self, after: &str) -> u64 {
        let s = self.ok("show ip neighbors");
        let first = s.lines().next().unwrap_or_default();
        let i = first.find(after).unwrap_or_else(|| panic!("{after}: {s}")) + after.len();
        first[i..]
            .split(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{after}: {s}"))
    }

    /// `show interface` over the API.
    pub fn interfaces(&self) -> Vec<api::InterfaceInfo> {
        let r = self
            .api()
            .call(&api::Request::ShowInterface { name: None })
            .unwrap();
        let api::Reply::Interfaces { interfaces } = r else {
            panic!("{r:?}")
        };
        interfaces
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits until the daemon itself reports `n` interfaces connected. A pod sees CONNECTED
    /// as soon as the listener sends it, a moment before the control thread has handed the
    /// interface's queues to the workers; frames routed to it in that moment are dropped
    /// (`interface not connected`). Once the daemon says connected, its workers have them.
    pub fn wait_connected(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let interfaces = self.interfaces();
            if interfaces.iter().filter(|i| i.connected).count() >= n {
                return;
            }
            assert!(Instant::now() < deadline, "not connected: {interfaces:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGTERM and wait; the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().unwrap();
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("daemon ignored SIGTERM for 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
    }
}

/// Memif secondaries ("pods") on one socket.
#[derive(Debug)]
pub struct Pods {
    pub client: Client,
    pub queues: HashMap<u32, SecondaryQueues>,
}

impl Pods {
    pub fn connect(socket: &Path, ids: &[u32]) -> Pods {
        let modes: Vec<_> = ids.iter().map(|&id| (id, memif::Mode::Ethernet)).collect();
        Pods::connect_modes(socket, &modes)
    }

    /// As [`Pods::connect`], each interface in its own mode (Ethernet or ip).
    pub fn connect_modes(socket: &Path, ids: &[(u32, memif::Mode)]) -> Pods {
        let path = SocketPath::File(socket.to_path_buf());
        let cfgs = ids
            .iter()
            .map(|&(id, mode)| InterfaceConfig {
                id,
                name: format!("pod{id}"),
                mode,
                ..Default::default()
            })
            .collect();
        let mut p = Pods {
            client: Client::new(&path, cfgs).unwrap(),
            queues: HashMap::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while p.queues.len() < ids.len() {
            assert!(
                Instant::now() < deadline,
                "pods did not connect: {:?}",
                p.client.interfaces()
            );
            p.client.poll(Duration::from_millis(10)).unwrap();
            while let Some(e) = p.client.next_event() {
                if let Event::Connected { id, queues, .. } = e {
                    p.queues.insert(id, queues);
                }
            }
        }
        p
    }

    pub fn send(&mut self, id: u32, frames: &[Vec<u8>]) {
        let q = &mut self.queues.get_mut(&id).unwrap().tx[0];
        let mut done = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while done < frames.len() {
            assert!(Instant::now() < deadline, "cannot send");
            let lens: Vec<u32> = frames[done..].iter().map(|f| f.len() as u32).collect();
            let rest = &frames[done..];
            done += q.send_with(&lens, |i, w| w.write(0, &rest[i])).unwrap();
            if done < frames.len() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// Receives until `want` frames arrived or `timeout` passed.
    pub fn recv(&mut self, id: u32, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
        let q = &mut self.queues.get_mut(&id).unwrap().rx[0];
        let mut out = Vec::new();
        let deadline = Instant::now() + timeout;
        while out.len() < want && Instant::now() < deadline {
            let n = q.recv_with(256, |p| out.push(p.to_vec())).unwrap();
            if n == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        out
    }

    /// Waits until interface `id` is disconnected by the daemon; the reason.
    pub fn await_disconnect(&mut self, id: u32) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "{id} was not disconnected");
            self.client.poll(Duration::from_millis(10)).unwrap();
            while let Some(e) = self.client.next_event() {
                if let Event::Disconnected { id: i, reason } = e
                    && i == id
                {
                    self.queues.remove(&id);
                    return reason;
                }
            }
        }
    }
}

/// Open file descriptors of process `pid`.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

pub fn mac(s: &str) -> [u8; 6] {
    api::parse_mac(s).unwrap().0
}

/// An Ethernet + IPv4 + UDP frame.
pub fn udp(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    payload: &[u8],
) -> Vec<u8> {
    let macs = testkit::Macs {
        src: src_mac,
        dst: dst_mac,
    };
    testkit::udp4_frame(macs, src, dst, ttl, payload)
}

/// An ICMP echo request.
pub fn ping(src_mac: [u8; 6], dst_mac: [u8; 6], src: [u8; 4], dst: [u8; 4], seq: u16) -> Vec<u8> {
    let macs = testkit::Macs {
        src: src_mac,
        dst: dst_mac,
    };
    let t = testkit::echo_request(0x4242, seq);
    testkit::icmp4_frame(macs, src, dst, 64, t, b"veclane ping payload")
}

/// A pod's answer (from `pod_mac`) to an ICMP echo request, if `f` is one.
pub fn echo_reply(f: &[u8], pod_mac: [u8; 6]) -> Option<Vec<u8>> {
    let p = etherparse::SlicedPacket::from_ethernet(f).ok()?;
    let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
        return None;
    };
    let Some(etherparse::TransportSlice::Icmpv4(icmp)) = &p.transport else {
        return None;
    };
    let etherparse::Icmpv4Type::EchoRequest(e) = icmp.icmp_type() else {
        return None;
    };
    let macs = testkit::Macs {
        src: pod_mac,
        dst: f[6..12].try_into().ok()?,
    };
    let (src, dst) = (ip.header().destination(), ip.header().source());
    let t = etherparse::Icmpv4Type::EchoReply(e);
    Some(testkit::icmp4_frame(macs, src, dst, 64, t, icmp.payload()))
}

/// An ARP packet (op 1 request, 2 reply).
pub fn arp(
    op: u16,
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
    dst: [u8; 6],
) -> Vec<u8> {
    let mut v = Vec::with_capacity(60);
    v.extend_from_slice(&dst);
    v.extend_from_slice(&sha);
    v.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4]);
    v.extend_from_slice(&op.to_be_bytes());
    v.extend_from_slice(&sha);
    v.extend_from_slice(&spa);
    v.extend_from_slice(&tha);
    v.extend_from_slice(&tpa);
    v.resize(60, 0);
    v
}

/// The CPU time (user + system, seconds) process `pid` has used.
pub fn cpu_seconds(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime) are 12 and 13 after the command.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

// What the memif forwarding tests share: two routed ports and a check of what they sent.

pub const MAC0: &str = "02:00:00:00:00:a0";
pub const MAC1: &str = "02:00:00:00:00:a1";
pub const POD0: [u8; 6] = [2, 0, 0, 0, 0xb0, 0];
pub const POD1: [u8; 6] = [2, 0, 0, 0, 0xb1, 0];

/// Two memif masters on `memif.sock`, ids 0 and 1, 10.0.0.1/24 and 10.0.1.1/24, single-copy
/// on the CPU, in `mode`.
pub fn two_port_config(mode: &str) -> String {
    two_port_config_copy(mode, "single", "cpu")
}

/// [`two_port_config`] with its copy mode and copy engine.
pub fn two_port_config_copy(mode: &str, copy: &str, engine: &str) -> String {
    format!(
        r#"
[daemon]
mode = "{mode}"
buffers = 4096
copy = "{copy}"
copy-engine = "{engine}"

[[interface]]
socket = "memif.sock"
id = 0
role = "master"
mac = "{MAC0}"
addresses = ["10.0.0.1/24"]

[[interface]]
socket = "memif.sock"
id = 1
role = "master"
mac = "{MAC1}"
addresses = ["10.0.1.1/24"]
"#
    )
}

/// Checks that `f` is frame `i` routed: the MACs `(src, dst)`, TTL 63, a valid IPv4
/// checksum, UDP carrying `want`.
pub fn assert_routed_udp(f: &[u8], macs: ([u8; 6], [u8; 6]), want: &[u8], i: usize) {
    let p = etherparse::SlicedPacket::from_ethernet(f).unwrap();
    let Some(etherparse::LinkSlice::Ethernet2(e)) = &p.link else {
        panic!("frame {i}: not Ethernet II")
    };
    assert_eq!((e.source(), e.destination()), macs, "frame {i}: MACs");
    let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
        panic!("frame {i}: not IPv4")
    };
    assert_eq!(ip.header().ttl(), 63, "frame {i}: TTL");
    assert_eq!(
        ip.header().to_header().calc_header_checksum(),
        ip.header().header_checksum(),
        "frame {i}: IPv4 checksum"
    );
    let Some(etherparse::TransportSlice::Udp(u)) = &p.transport else {
        panic!("frame {i}: not UDP")
    };
    assert_eq!(u.payload(), want, "frame {i}: payload");
}

/// Frame `i`'s UDP payload: 22 to 1471 bytes, a pattern of `i`.
pub fn payload(i: usize) -> Vec<u8> {
    let len = 22 + (i * 37) % 1450;
    (0..len).map(|k| (k as u8) ^ (i as u8)).collect()
}
