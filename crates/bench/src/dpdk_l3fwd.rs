//! Driving DPDK's `l3fwd` example (LPM lookup) with two `net_memif` server ports.
//!
//! The binary is built from Debian's `dpdk-doc` example source by
//! `scripts/build-dpdk-l3fwd.sh` (setup.sh runs it), patched only to mask the Rx offloads it
//! asks for with what the device offers (net_memif has no checksum offload).
//!
//! The command line [`spawn`] runs, with `L` the DUT CPU and `DIR` a directory of its own:
//!
//! ```text
//! stdbuf -oL -eL dpdk-l3fwd --no-huge -m 1024 --no-pci --log-level pmd.net.memif:info
//!   --file-prefix=PREFIX -l L --main-lcore=L
//!   --vdev=net_memif0,role=server,socket=DIR/memif.sock,socket-abstract=no,id=0,rsize=R,bsize=B
//!   --vdev=net_memif1,role=server,socket=DIR/memif.sock,socket-abstract=no,id=1,rsize=R,bsize=B
//!   -- -p 0x3 -P --lookup=lpm --parse-ptype --config=(0,0,L),(1,0,L)
//!   --eth-dest=0,GEN_MAC --eth-dest=1,GEN_MAC
//!   --rule_ipv4=DIR/route-v4.cfg --rule_ipv6=DIR/route-v6.cfg
//! ```
//!
//! Routes: DPDK 22.11's l3fwd takes routes from `--rule_ipv4`/`--rule_ipv6` files, and only
//! when both are given (otherwise it uses its built-in table, 198.18.N.0/24 → port N). We
//! write `R10.10.1.0/24 0` and `R10.10.2.0/24 1` (the veclane l3fwd topology, so the
//! generator's default 10.10.1.2 → 10.10.2.2 frames leave on port 1), and two documentation
//! prefixes for IPv6 (the file must hold at least one route). l3fwd has no neighbours: every
//! frame leaving port N gets `--eth-dest` N as destination and port N's MAC as source; a lookup
//! miss sends the frame back out of the port it came in on.
//!
//! With N workers the lcores are the N DUT CPUs, `-l L1,L2 --main-lcore=L1` and
//! `--config=(0,0,L1),(0,1,L2),(1,0,L1),(1,1,L2)`: lcore i polls queue i of both ports (and
//! l3fwd gives every lcore a transmit queue of its own on each port).
//!
//! No lcore besides the forwarding ones, unlike testpmd's extra main lcore: l3fwd's main
//! lcore, when it has no queue, returns and then busy-waits for the others
//! (`rte_eal_mp_wait_lcore` spins, and so does the link check's `rte_delay_ms`), which would
//! take the generator's CPU. With `-l L` alone the
//! forwarding loop runs on the main lcore on the DUT CPU, and EAL's control threads (memif
//! connection handling, telemetry; they sleep) get the remaining CPUs: the generator's CPU
//! then holds only sleeping threads, as with testpmd, whose main lcore waits on its prompt.
//!
//! l3fwd has no interactive statistics and prints none, so l3fwd itself cannot be asked what it
//! forwarded or dropped (no per-cause drop counters, as testpmd and veclane have). The ports'
//! ethdev counters are still there: [`DpdkL3fwd::port_stats`] reads them over EAL's telemetry
//! socket, which is what the harness cross-checks against the generator. net_memif reports
//! zero once its peer has gone, so read them while the generator is still connected.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::dpdk::{MemifPort, PortStats, eal_args};
use crate::dut::{Counts, RunningDut};
use crate::proc::DutError;

/// The program, as errors name it.
const DUT: &str = "dpdk-l3fwd";

/// Where the build script puts the binary, relative to a cargo target directory.
const BUILT: &str = "dpdk-l3fwd/dpdk-l3fwd";

/// Printed by l3fwd once its ports are started and it begins to wait for their links (the
/// memif socket is listening by then).
const PORTS_STARTED: &str = "Checking link status";
/// Printed by the forwarding lcore when its loop starts.
const FORWARDING: &str = "entering main loop on lcore";

/// The built `dpdk-l3fwd`: `$VECLANE_DPDK_L3FWD` if set, else `dpdk-l3fwd/dpdk-l3fwd` in the
/// nearest `target` directory above the running executable (where
/// `scripts/build-dpdk-l3fwd.sh` puts it by default).
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VECLANE_DPDK_L3FWD") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .map(|d| d.join(BUILT))
        .find(|p| p.is_file())
}

/// What an l3fwd instance is given.
#[derive(Debug, Clone)]
pub struct DpdkL3fwdConfig {
    /// The CPUs of l3fwd's lcores, one forwarding lcore each, polling queue `i` of both ports
    /// on `cpus[i]`; the first is also the main lcore.
    pub cpus: Vec<usize>,
    pub ring_log2: u8,
    pub buffer_size: u32,
    /// The generator's MAC: the destination of every frame l3fwd sends, on both ports.
    pub gen_mac: [u8; 6],
    /// EAL's `--file-prefix`: unique per running instance.
    pub file_prefix: String,
}

impl DpdkL3fwdConfig {
    /// The harness's defaults for the DUT on `dut_cpu`: 1024-slot rings, 2048-byte buffers,
    /// the generator's default source MAC, a prefix unique to this instance.
    pub fn new(dut_cpu: usize) -> DpdkL3fwdConfig {
        DpdkL3fwdConfig {
            cpus: vec![dut_cpu],
            ring_log2: 10,
            buffer_size: 2048,
            gen_mac: trafgen::FrameSpec::default().src_mac.0,
            file_prefix: crate::proc::instance_tag("l3fwd"),
        }
    }
}

/// The IPv4 routes file: 10.10.1.0/24 → port 0, 10.10.2.0/24 → port 1.
pub const ROUTES_V4: &str = "R10.10.1.0/24 0\nR10.10.2.0/24 1\n";
/// The IPv6 routes file (l3fwd refuses an empty one; the generator sends no IPv6).
pub const ROUTES_V6: &str = "R2001:db8:1::/64 0\nR2001:db8:2::/64 1\n";

fn mac_str(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

/// Everything after the binary: EAL arguments, `--`, l3fwd's own. `dir` holds the memif
/// socket and the route files.
pub fn arguments(cfg: &DpdkL3fwdConfig, dir: &Path) -> Vec<String> {
    let sock = dir.join("memif.sock");
    let port = |id| MemifPort::new(true, &sock, id, cfg.ring_log2, cfg.buffer_size);
    let main = cfg.cpus.first().copied().unwrap_or(0);
    let others = cfg.cpus.get(1..).unwrap_or(&[]);
    let mut v = eal_args(&cfg.file_prefix, main, others, &[port(0), port(1)]);
    v.extend(
        [
            "--",
            "-p",
            "0x3",
            "-P",
            "--lookup=lpm",
            // net_memif does not set the mbuf packet type, which l3fwd's lookup needs.
            "--parse-ptype",
        ]
        .map(String::from),
    );
    let queues: Vec<String> = (0..2)
        .flat_map(|port| {
            cfg.cpus
                .iter()
                .enumerate()
                .map(move |(q, l)| format!("({port},{q},{l})"))
        })
        .collect();
    v.push(format!("--config={}", queues.join(",")));
    for p in 0..2 {
        v.push(format!("--eth-dest={p},{}", mac_str(cfg.gen_mac)));
    }
    v.push(format!(
        "--rule_ipv4={}",
        dir.join("route-v4.cfg").display()
    ));
    v.push(format!(
        "--rule_ipv6={}",
        dir.join("route-v6.cfg").display()
    ));
    v
}

/// `args` as one line a shell would split back into the same words.
pub fn shell_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_=,./:+@%".contains(&b))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A running l3fwd; stopped with SIGINT (then SIGKILL) when dropped.
#[derive(Debug)]
pub struct DpdkL3fwd {
    child: Child,
    command_line: String,
    file_prefix: String,
    dir: tempfile::TempDir,
}

/// Sends one telemetry command to the DPDK process with `file_prefix` and returns the value of
/// its reply (`{"<command>": value}`).
pub fn telemetry(file_prefix: &str, command: &str) -> Result<serde_json::Value, DutError> {
    use rustix::net::{
        AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketType, connect, recv, send,
        socket,
    };
    let path = crate::dpdk::runtime_dir(file_prefix).join("dpdk_telemetry.v2");
    let err = |e: rustix::io::Errno| {
        DutError::io(format!("telemetry socket {}", path.display()))(e.into())
    };
    let fd = socket(AddressFamily::UNIX, SocketType::SEQPACKET, None).map_err(err)?;
    connect(&fd, &SocketAddrUnix::new(&path).map_err(err)?).map_err(err)?;
    let mut buf = vec![0u8; 64 * 1024];
    // The first message is the greeting: version, pid, max_output_len.
    recv(&fd, &mut buf[..], RecvFlags::empty()).map_err(err)?;
    send(&fd, command.as_bytes(), SendFlags::empty()).map_err(err)?;
    let (n, _) = recv(&fd, &mut buf[..], RecvFlags::empty()).map_err(err)?;
    let v: serde_json::Value = serde_json::from_slice(&buf[..n])
        .map_err(|e| DutError::reply(DUT, format!("telemetry reply to {command}: {e}")))?;
    let key = command.split(',').next().unwrap_or(command);
    v.get(key).cloned().ok_or_else(|| {
        DutError::reply(
            DUT,
            format!("telemetry reply to {command} lacks {key}: {v}"),
        )
    })
}

/// The counters of a `/ethdev/stats,N` telemetry reply.
pub fn parse_ethdev_stats(v: &serde_json::Value) -> Option<PortStats> {
    let f = |k: &str| v.get(k)?.as_u64();
    Some(PortStats {
        rx_packets: f("ipackets")?,
        rx_bytes: f("ibytes")?,
        rx_missed: f("imissed").unwrap_or(0),
        rx_errors: f("ierrors").unwrap_or(0),
        tx_packets: f("opackets")?,
        tx_errors: f("oerrors").unwrap_or(0),
    })
}

/// Starts l3fwd and waits (up to 20 s) until both ports are started and its memif socket is
/// listening. The links come up when the generator connects; l3fwd then starts its forwarding
/// loop within 100 ms (frames sent before that wait in the memif rings). If nothing connects
/// within 9 s it starts forwarding anyway and the links come up later.
pub fn spawn(bin: &Path, cfg: &DpdkL3fwdConfig) -> Result<DpdkL3fwd, DutError> {
    if !bin.is_file() {
        return Err(DutError::Missing(format!(
            "dpdk-l3fwd not found at {}; build it with scripts/build-dpdk-l3fwd.sh (needs Debian's dpdk-doc and libdpdk-dev)",
            bin.display()
        )));
    }
    let dir = tempfile::Builder::new()
        .prefix("veclane-l3fwd")
        .tempdir()
        .map_err(DutError::io("cannot make a directory for l3fwd"))?;
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).map_err(DutError::io(format!("writing {}", p.display())))
    };
    write("route-v4.cfg", ROUTES_V4)?;
    write("route-v6.cfg", ROUTES_V6)?;
    let args = arguments(cfg, dir.path());
    let log_path = dir.path().join("l3fwd.log");
    let log_err = || DutError::io(format!("creating {}", log_path.display()));
    let log = File::create(&log_path).map_err(log_err())?;
    let log2 = log.try_clone().map_err(log_err())?;
    // stdout is a file: stdbuf makes l3fwd's printf output line-buffered, so the log is
    // current when we read it.
    let mut full = vec!["stdbuf".to_string(), "-oL".into(), "-eL".into()];
    full.push(bin.display().to_string());
    full.extend(args.iter().cloned());
    let child = Command::new("stdbuf")
        .args(["-oL", "-eL"])
        .arg(bin)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(DutError::io(format!("cannot start {}", bin.display())))?;
    let mut l = DpdkL3fwd {
        child,
        command_line: shell_line(&full),
        file_prefix: cfg.file_prefix.clone(),
        dir,
    };
    l.wait_for(PORTS_STARTED, Duration::from_secs(20))?;
    let sock = l.memif_socket();
    if !sock.exists() {
        return Err(DutError::reply(
            DUT,
            format!(
                "started its ports but {} does not exist; log: {}",
                sock.display(),
                l.log_tail(20)
            ),
        ));
    }
    Ok(l)
}

impl DpdkL3fwd {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The socket both memif ports listen on (ids 0 and 1).
    pub fn memif_socket(&self) -> PathBuf {
        self.dir.path().join("memif.sock")
    }

    /// The command that was run, shell-quoted, for reports.
    pub fn command_line(&self) -> &str {
        &self.command_line
    }

    /// Waits until the forwarding loop has started (after the generator connected, or after
    /// l3fwd's own 9 s link wait).
    pub fn wait_forwarding(&mut self, timeout: Duration) -> Result<(), DutError> {
        self.wait_for(FORWARDING, timeout)
    }

    fn wait_for(&mut self, what: &str, timeout: Duration) -> Result<(), DutError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.log().contains(what) {
                return Ok(());
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(DutError::Exited {
                    dut: DUT,
                    log: format!(
                        "({st}) before \"{what}\"; command: {}\nlog:\n{}",
                        self.command_line,
                        self.log_tail(20)
                    ),
                });
            }
            if Instant::now() > deadline {
                return Err(DutError::Timeout {
                    dut: DUT,
                    what: format!("no \"{what}\""),
                    waited: timeout,
                    log: format!(
                        "command: {}\nlog:\n{}",
                        self.command_line,
                        self.log_tail(20)
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Port `port`'s ethdev counters (`/ethdev/stats,N` over EAL's telemetry socket).
    pub fn port_stats(&self, port: u16) -> Result<PortStats, DutError> {
        let v = telemetry(&self.file_prefix, &format!("/ethdev/stats,{port}"))?;
        parse_ethdev_stats(&v)
            .ok_or_else(|| DutError::reply(DUT, format!("unexpected telemetry reply: {v}")))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("l3fwd.log")).unwrap_or_default()
    }

    /// The last `n` lines l3fwd printed.
    pub fn log_tail(&self, n: usize) -> String {
        let s = self.log();
        let v: Vec<&str> = s.lines().rev().take(n).collect();
        v.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Stops l3fwd (SIGINT: it closes its ports and leaves; SIGKILL after 5 s) and returns
    /// its log.
    pub fn stop(mut self) -> String {
        self.terminate();
        self.log()
    }

    fn terminate(&mut self) {
        crate::proc::stop_child(
            &mut self.child,
            Some(rustix::process::Signal::INT),
            Duration::from_secs(5),
        );
    }
}

impl RunningDut for DpdkL3fwd {
    fn pid(&self) -> u32 {
        DpdkL3fwd::pid(self)
    }

    fn ready(&mut self) -> Result<(), DutError> {
        self.wait_forwarding(Duration::from_secs(15))
    }

    /// EAL telemetry: l3fwd has no command line of its own.
    fn counts(&mut self) -> Result<Option<Counts>, DutError> {
        Ok(Some(Counts {
            rx: self.port_stats(0)?.rx_packets,
            tx: self.port_stats(1)?.tx_packets,
        }))
    }

    fn drops(&mut self) -> String {
        match (self.port_stats(0), self.port_stats(1)) {
            (Ok(p0), Ok(p1)) => format!(
                "port0 rx_missed={} port1 tx_errors={}",
                p0.rx_missed, p1.tx_errors
            ),
            _ => String::new(),
        }
    }

    fn stop(self: Box<Self>, _timeout: Duration) -> Result<(), DutError> {
        drop(DpdkL3fwd::stop(*self));
        Ok(())
    }
}

impl Drop for DpdkL3fwd {
    fn drop(&mut self) {
        self.terminate();
        crate::dpdk::remove_runtime_dir(&self.file_prefix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line() {
        let cfg = DpdkL3fwdConfig {
            file_prefix: "t1".into(),
            ..DpdkL3fwdConfig::new(1)
        };
        let args = arguments(&cfg, Path::new("/tmp/d"));
        assert_eq!(
            shell_line(&args),
            "--no-huge -m 1024 --no-pci --log-level pmd.net.memif:info --file-prefix=t1 \
             -l 1 --main-lcore=1 \
             --vdev=net_memif0,role=server,socket=/tmp/d/memif.sock,socket-abstract=no,id=0,rsize=10,bsize=2048 \
             --vdev=net_memif1,role=server,socket=/tmp/d/memif.sock,socket-abstract=no,id=1,rsize=10,bsize=2048 \
             -- -p 0x3 -P --lookup=lpm --parse-ptype '--config=(0,0,1),(1,0,1)' \
             --eth-dest=0,02:00:00:00:00:01 --eth-dest=1,02:00:00:00:00:01 \
             --rule_ipv4=/tmp/d/route-v4.cfg --rule_ipv6=/tmp/d/route-v6.cfg"
        );
        assert_eq!(shell_line(&["it's".into()]), r"'it'\''s'");
        // Two workers: one lcore per CPU, each polling its queue of both ports.
        let two = shell_line(&arguments(
            &DpdkL3fwdConfig {
                cpus: vec![1, 3],
                ..cfg
            },
            Path::new("/tmp/d"),
        ));
        assert!(two.contains("-l 1,3 --main-lcore=1"), "{two}");
        assert!(
            two.contains("'--config=(0,0,1),(0,1,3),(1,0,1),(1,1,3)'"),
            "{two}"
        );
    }

    #[test]
    fn parses_ethdev_stats() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"ipackets":100,"opackets":99,"ibytes":6400,"obytes":6336,"imissed":1,"ierrors":0,"oerrors":2,"rx_nombuf":0,"q_ipackets":[100,0]}"#,
        )
        .unwrap();
        let s = parse_ethdev_stats(&v).unwrap();
        assert_eq!(
            (
                s.rx_packets,
                s.rx_bytes,
                s.rx_missed,
                s.tx_packets,
                s.tx_errors
            ),
            (100, 6400, 1, 99, 2)
        );
        assert!(parse_ethdev_stats(&serde_json::json!({"ipackets": 1})).is_none());
    }

    #[test]
    fn missing_binary_is_named() {
        let e = spawn(
            Path::new("/nonexistent/dpdk-l3fwd"),
            &DpdkL3fwdConfig::new(0),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/nonexistent/dpdk-l3fwd"), "{e}");
        assert!(e.contains("build-dpdk-l3fwd.sh"), "{e}");
    }
}
