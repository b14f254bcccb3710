//! Driving DPDK's `dpdk-testpmd` with `net_memif` ports, interactively over pipes.
//!
//! EAL runs with `--no-huge -m 1024 --no-pci` and the app with `--no-mlockall
//! --total-num-mbufs=16384`; each instance gets two lcores (`-l A,B`) with the main lcore on
//! the other instance's core, so that its forwarding lcore sits alone on the core we name.
//! The main lcore only waits on its command line.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use crate::p2p::{P2pConfig, Trial};
use crate::{BenchError, Dut, Subject};

/// `dpdk-testpmd` on PATH, if installed.
pub fn find() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("dpdk-testpmd"))
        .find(|p| p.is_file())
}

/// The installed DPDK version, as the package manager states it.
pub fn version() -> Option<String> {
    let o = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "dpdk"])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// One memif port's options.
#[derive(Debug, Clone)]
pub struct MemifPort {
    pub server: bool,
    pub socket: PathBuf,
    pub id: u32,
    pub rsize_log2: u8,
    pub bsize: u32,
    pub secret: Option<String>,
}

impl MemifPort {
    pub fn vdev(&self, name: &str) -> String {
        let mut v = format!(
            "{name},role={},socket={},socket-abstract=no,id={},rsize={},bsize={}",
            if self.server { "server" } else { "client" },
            self.socket.display(),
            self.id,
            self.rsize_log2,
            self.bsize
        );
        if let Some(s) = &self.secret {
            v.push_str(&format!(",secret={s}"));
        }
        v
    }
}

/// The EAL arguments of every DPDK application we start: no hugepages (`--no-huge -m 1024`),
/// no PCI scan, memif PMD logs at info (connections show in the log), the file prefix `prefix`
/// (one per process, so that instances do not share runtime files), lcores on CPUs
/// `main_lcore` and `other_lcores` with `main_lcore` as the main one, and `ports` as vdevs
/// `net_memif0..` in order (DPDK port ids follow). Lcore ids are the CPU numbers (`-l`), unless
/// a forwarding lcore must share the main lcore's CPU: then the lcores are numbered from 0, the
/// main one first, and mapped onto their CPUs (`--lcores 0@M,1@A,...`).
pub fn eal_args(
    prefix: &str,
    main_lcore: usize,
    other_lcores: &[usize],
    ports: &[MemifPort],
) -> Vec<String> {
    let shared = other_lcores.contains(&main_lcore);
    let mut v: Vec<String> = [
        "--no-huge",
        "-m",
        "1024",
        "--no-pci",
        "--log-level",
        "pmd.net.memif:info",
    ]
    .map(String::from)
    .to_vec();
    v.push(format!("--file-prefix={prefix}"));
    if shared {
        let map: Vec<String> = std::iter::once(main_lcore)
            .chain(other_lcores.iter().copied())
            .enumerate()
            .map(|(id, cpu)| format!("{id}@{cpu}"))
            .collect();
        v.push(format!("--lcores={}", map.join(",")));
        v.push("--main-lcore=0".into());
    } else {
        let mut lcores = vec![main_lcore];
        lcores.extend_from_slice(other_lcores);
        lcores.sort_unstable();
        lcores.dedup();
        let lcores: Vec<String> = lcores.iter().map(usize::to_string).collect();
        v.push("-l".into());
        v.push(lcores.join(","));
        v.push(format!("--main-lcore={main_lcore}"));
    }
    for (i, p) in ports.iter().enumerate() {
        v.push(format!("--vdev={}", p.vdev(&format!("net_memif{i}"))));
    }
    v
}

/// A running interactive testpmd.
#[derive(Debug)]
pub struct Testpmd {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<Vec<u8>>,
    log: Vec<u8>,
}

/// `show port stats` numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_missed: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
}

impl Testpmd {
    /// Starts testpmd with `ports` (vdevs `net_memif0..`) and app arguments `app`; waits for
    /// its prompt.
    pub fn spawn(
        bin: &Path,
        prefix: &str,
        fwd_cpu: usize,
        main_cpu: usize,
        ports: &[MemifPort],
        app: &[String],
    ) -> Result<Testpmd, String> {
        Testpmd::spawn_under(&[], bin, prefix, &[fwd_cpu], main_cpu, ports, app)
    }

    /// As [`spawn`](Self::spawn), run under `wrapper` (valgrind and its options, for
    /// `--cost`); with a wrapper the first prompt may take two minutes.
    pub fn spawn_under(
        wrapper: &[String],
        bin: &Path,
        prefix: &str,
        fwd_cpus: &[usize],
        main_cpu: usize,
        ports: &[MemifPort],
        app: &[String],
    ) -> Result<Testpmd, String> {
        // testpmd's stdout is a pipe, so printf output would be block-buffered and arrive
        // after the prompt that cmdline writes directly: stdbuf makes it line-buffered. stdbuf
        // execs what follows, so the child's pid is testpmd's (or the wrapper's).
        let mut c = Command::new("stdbuf");
        c.args(["-oL", "-eL"])
            .args(wrapper)
            .arg(bin)
            .args(eal_args(prefix, main_cpu, fwd_cpus, ports))
            .args(["--", "-i", "--no-mlockall", "--total-num-mbufs=16384"])
            .args(app);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let (tx, rx) = channel();
        for mut s in [
            Box::new(child.stdout.take().ok_or("no stdout")?) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().ok_or("no stderr")?),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || tx.send(b[..n].to_vec()).is_err() {
                        break;
                    }
                }
            });
        }
        let stdin = child.stdin.take();
        let mut t = Testpmd {
            child,
            stdin,
            out: rx,
            log: Vec::new(),
        };
        let first = if wrapper.is_empty() { 20 } else { 120 };
        t.until_prompt_after(b"", Duration::from_secs(first))?;
        Ok(t)
    }

    /// The process id (the wrapper's, which runs testpmd in-process, under valgrind).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads output until a `testpmd> ` prompt that follows `after` (the echo of the command
    /// we typed; empty for the first prompt); returns the text between them. Log lines that
    /// testpmd prints asynchronously (link up, connected) may carry prompts of their own, so
    /// a prompt only counts once our command's echo has been seen.
    fn until_prompt_after(&mut self, after: &[u8], timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let start = if after.is_empty() {
                Some(0)
            } else {
                find_sub(&self.log, after).map(|i| i + after.len())
            };
            if let Some(start) = start
                && let Some(i) = find_sub(&self.log[start..], b"testpmd> ")
            {
                let text = String::from_utf8_lossy(&self.log[start..start + i]).into_owned();
                self.log.drain(..start + i + 9);
                return Ok(text);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(b) => self.log.extend_from_slice(&b),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "testpmd gave no prompt in {timeout:?}; output: {}",
                        self.tail()
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("testpmd exited; output: {}", self.tail()));
                }
            }
        }
    }

    fn tail(&self) -> String {
        let s = String::from_utf8_lossy(&self.log);
        let v: Vec<&str> = s.lines().rev().take(15).collect();
        v.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Runs one command and returns its output.
    pub fn cmd(&mut self, line: &str) -> Result<String, String> {
        let w = self.stdin.as_mut().ok_or("stdin closed")?;
        w.write_all(format!("{line}\n").as_bytes())
            .map_err(|e| format!("testpmd stdin: {e}"))?;
        w.flush().map_err(|e| e.to_string())?;
        self.until_prompt_after(format!("{line}\r\n").as_bytes(), Duration::from_secs(20))
    }

    pub fn port_stats(&mut self, port: u16) -> Result<PortStats, String> {
        let out = self.cmd(&format!("show port stats {port}"))?;
        parse_port_stats(&out).ok_or_else(|| format!("cannot parse port stats: {out}"))
    }

    /// Waits until port `port` reports link up.
    pub fn wait_link_up(&mut self, port: u16, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let out = self.cmd(&format!("show port info {port}"))?;
            if out
                .lines()
                .any(|l| l.contains("Link status") && l.contains("up"))
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("port {port} link not up after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Quits and reaps the process (killing it if it does not leave).
    pub fn quit(self) {
        let _ = self.quit_within(Duration::from_secs(5));
    }

    /// Quits, waiting up to `timeout` for testpmd to exit on its own (under valgrind it
    /// writes its profile then) before killing it; says whether it exited on its own.
    pub fn quit_within(mut self, timeout: Duration) -> Result<(), String> {
        if let Some(mut w) = self.stdin.take() {
            let _ = w.write_all(b"quit\n");
        }
        if crate::dut::stop_child(&mut self.child, None, timeout) {
            Ok(())
        } else {
            Err(format!(
                "testpmd did not exit within {timeout:?} of quit; killed"
            ))
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn find_sub(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn field(out: &str, key: &str) -> Option<u64> {
    let i = out.find(key)?;
    out[i + key.len()..].split_whitespace().next()?.parse().ok()
}

/// Parses `show port stats N`.
pub fn parse_port_stats(out: &str) -> Option<PortStats> {
    Some(PortStats {
        rx_packets: field(out, "RX-packets:")?,
        rx_bytes: field(out, "RX-bytes:").unwrap_or(0),
        rx_missed: field(out, "RX-missed:").unwrap_or(0),
        rx_errors: field(out, "RX-errors:").unwrap_or(0),
        tx_packets: field(out, "TX-packets:")?,
        tx_errors: field(out, "TX-errors:").unwrap_or(0),
    })
}

/// testpmd txonly (client, sender CPU) → testpmd rxonly (server, receiver CPU).
pub fn p2p_trial(cfg: &P2pConfig, size: usize, rep: usize) -> Result<Trial, BenchError> {
    let fail = |msg: String| BenchError::Trial {
        dut: Subject::plain(Dut::Testpmd),
        size,
        msg,
    };
    let bin = cfg
        .testpmd_bin
        .clone()
        .ok_or_else(|| fail("dpdk-testpmd not installed".into()))?;
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("tp.sock");
    let port = |server| MemifPort {
        server,
        socket: sock.clone(),
        id: 0,
        rsize_log2: cfg.ring_log2,
        bsize: crate::p2p::buffer_size_for(cfg, size),
        secret: None,
    };
    let tag = format!("vl{}", std::process::id());
    // Jumbo frames need one mbuf per frame on both sides (txonly gives up on frames larger
    // than its mbuf and quietly sends 64-byte frames instead).
    let mbuf_size =
        (size > 2048).then(|| format!("--mbuf-size={}", (size + 1024).next_multiple_of(1024)));
    let mut rx_app = vec!["--forward-mode=rxonly".to_string()];
    rx_app.extend(mbuf_size.clone());
    let mut rx = Testpmd::spawn(
        &bin,
        &format!("{tag}rx"),
        cfg.receiver_cpu,
        cfg.sender_cpu,
        &[port(true)],
        &rx_app,
    )
    .map_err(fail)?;
    rx.cmd("start").map_err(fail)?;
    // --mbuf-size must come before --txpkts: testpmd checks the segment lengths against the
    // mbuf size when it parses --txpkts.
    let mut app = vec!["--forward-mode=txonly".to_string()];
    app.extend(mbuf_size);
    app.push(format!("--txpkts={size}"));
    let mut tx = Testpmd::spawn(
        &bin,
        &format!("{tag}tx"),
        cfg.sender_cpu,
        cfg.receiver_cpu,
        &[port(false)],
        &app,
    )
    .map_err(fail)?;
    tx.wait_link_up(0, Duration::from_secs(10)).map_err(fail)?;
    tx.cmd("start").map_err(fail)?;
    std::thread::sleep(Duration::from_millis(300));
    let s1 = rx.port_stats(0).map_err(fail)?;
    let t1 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(cfg.trial_secs));
    let s2 = rx.port_stats(0).map_err(fail)?;
    let window = t1.elapsed().as_secs_f64();
    tx.cmd("stop").map_err(fail)?;
    std::thread::sleep(Duration::from_millis(200));
    let txs = tx.port_stats(0).map_err(fail)?;
    let rxs = rx.port_stats(0).map_err(fail)?;
    tx.quit();
    rx.quit();
    let mpps = (s2.rx_packets - s1.rx_packets) as f64 / window / 1e6;
    crate::p2p::check_frame_size(
        s2.rx_bytes - s1.rx_bytes,
        s2.rx_packets - s1.rx_packets,
        size,
    )
    .map_err(fail)?;
    Ok(Trial {
        tx_packets: txs.tx_packets,
        rx_packets: rxs.rx_packets,
        mpps,
        window_s: window,
        lost: txs.tx_packets as i64 - rxs.rx_packets as i64,
        note: format!("rx_missed={} rx_errors={}", rxs.rx_missed, rxs.rx_errors),
        ..Trial::new(Subject::plain(Dut::Testpmd), size, rep)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eal_arguments() {
        let port = |id| MemifPort {
            server: true,
            socket: "/tmp/x/memif.sock".into(),
            id,
            rsize_log2: 10,
            bsize: 2048,
            secret: None,
        };
        assert_eq!(
            eal_args("p1", 1, &[0], &[port(0), port(1)]).join(" "),
            "--no-huge -m 1024 --no-pci --log-level pmd.net.memif:info --file-prefix=p1 \
             -l 0,1 --main-lcore=1 \
             --vdev=net_memif0,role=server,socket=/tmp/x/memif.sock,socket-abstract=no,id=0,rsize=10,bsize=2048 \
             --vdev=net_memif1,role=server,socket=/tmp/x/memif.sock,socket-abstract=no,id=1,rsize=10,bsize=2048"
        );
        assert!(
            eal_args("p", 1, &[], &[])
                .join(" ")
                .contains("-l 1 --main-lcore=1")
        );
        // A forwarding lcore on the main lcore's CPU: lcores numbered, then mapped.
        assert!(
            eal_args("p", 0, &[1, 0], &[])
                .join(" ")
                .contains("--lcores=0@0,1@1,2@0 --main-lcore=0")
        );
    }

    #[test]
    fn parses_show_port_stats() {
        let out = "
  ######################## NIC statistics for port 0  ########################
  RX-packets: 40127680   RX-missed: 0          RX-bytes:  2568171520
  RX-errors: 0
  RX-nombuf:  0
  TX-packets: 0          TX-errors: 0          TX-bytes:  0

  Throughput (since last show)
  Rx-pps:     13375855          Rx-bps:   6848437936
  Tx-pps:            0          Tx-bps:            0
  ############################################################################
";
        let s = parse_port_stats(out).unwrap();
        assert_eq!((s.rx_packets, s.tx_packets, s.rx_missed), (40127680, 0, 0));
        assert!(parse_port_stats("garbage").is_none());
    }
}
