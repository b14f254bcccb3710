//! Driving DPDK's `dpdk-testpmd` with `net_memif` ports, interactively over pipes, and as a
//! device under test (`io` or `mac` forwarding between two ports).
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

pub use crate::dpdk::{MemifPort, PortStats, eal_args};
use crate::dut::{Counts, RunningDut};
use crate::proc::DutError;

/// The program, as errors name it.
const DUT: &str = "testpmd";

/// `dpdk-testpmd` on PATH, if installed.
pub fn find() -> Option<PathBuf> {
    crate::proc::on_path("dpdk-testpmd")
}

/// A running interactive testpmd.
#[derive(Debug)]
pub struct Testpmd {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Output as it comes: (from stdout, bytes).
    out: Receiver<(bool, Vec<u8>)>,
    /// stdout (command echoes, answers, prompts), kept apart from stderr (DPDK's logs):
    /// both are written a few bytes at a time, and a log line landing between the `t` and
    /// the `estpmd> ` of a prompt hid that prompt when the two were one stream.
    log: Vec<u8>,
    /// The end of stderr, for error reports.
    err: Vec<u8>,
    /// EAL's `--file-prefix`, ours alone: its runtime files go with the instance.
    prefix: String,
    /// Ports that must be up before [`RunningDut::ready`] starts forwarding (see
    /// [`Testpmd::start_when_ready`]); none: the caller starts it.
    start_on_ready: u16,
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
    ) -> Result<Testpmd, DutError> {
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
    ) -> Result<Testpmd, DutError> {
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
            .map_err(DutError::io(format!("cannot start {}", bin.display())))?;
        let (tx, rx) = channel();
        for (is_out, mut s) in [
            (
                true,
                Box::new(
                    child
                        .stdout
                        .take()
                        .ok_or(DutError::reply(DUT, "no stdout pipe"))?,
                ) as Box<dyn Read + Send>,
            ),
            (
                false,
                Box::new(
                    child
                        .stderr
                        .take()
                        .ok_or(DutError::reply(DUT, "no stderr pipe"))?,
                ),
            ),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || tx.send((is_out, b[..n].to_vec())).is_err() {
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
            err: Vec::new(),
            prefix: prefix.to_string(),
            start_on_ready: 0,
        };
        let first = if wrapper.is_empty() { 20 } else { 120 };
        t.until_prompt_after(b"", Duration::from_secs(first))?;
        Ok(t)
    }

    /// Forwarding starts in [`RunningDut::ready`], once ports `0..ports` are up, instead of
    /// before the generator connects. DPDK 22.11's `net_memif` maps a peer's regions and
    /// marks the port connected on its interrupt thread while the forwarding lcores poll,
    /// with nothing ordering the two: a worker that read the region's address before the
    /// mapping and its flag after it reads a ring at a null base (a SIGSEGV in
    /// `eth_memif_rx`; every rx queue but the first, whose ring sits at offset 0 and is
    /// caught). Connecting before the lcores poll leaves no such window.
    pub fn start_when_ready(mut self, ports: u16) -> Testpmd {
        self.start_on_ready = ports;
        self
    }

    /// The process id (the wrapper's, which runs testpmd in-process, under valgrind).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads output until a `testpmd> ` prompt that follows `after` (the echo of the command
    /// we typed; empty for the first prompt); returns the text between them. Log lines that
    /// testpmd prints asynchronously (link up, connected) may carry prompts of their own, so
    /// a prompt only counts once our command's echo has been seen.
    fn until_prompt_after(&mut self, after: &[u8], timeout: Duration) -> Result<String, DutError> {
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
                Ok((true, b)) => self.log.extend_from_slice(&b),
                Ok((false, b)) => {
                    self.err.extend_from_slice(&b);
                    let over = self.err.len().saturating_sub(64 << 10);
                    self.err.drain(..over);
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(DutError::Timeout {
                        dut: DUT,
                        what: "no prompt".into(),
                        waited: timeout,
                        log: self.tail(),
                    });
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.gone()),
            }
        }
    }

    /// The last lines of stderr, then of stdout.
    fn tail(&self) -> String {
        let last = |b: &[u8]| {
            let s = String::from_utf8_lossy(b);
            let v: Vec<&str> = s.lines().rev().take(15).collect();
            v.into_iter().rev().collect::<Vec<_>>().join("\n")
        };
        format!("{}\n{}", last(&self.err), last(&self.log))
    }

    /// Runs one command and returns its output.
    pub fn cmd(&mut self, line: &str) -> Result<String, DutError> {
        let w = self
            .stdin
            .as_mut()
            .ok_or(DutError::reply(DUT, "stdin closed"))?;
        if let Err(e) = w
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| w.flush())
        {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(DutError::io("testpmd stdin")(e));
            }
            // testpmd is gone: how it left, and what it said last, say why.
            return Err(self.gone());
        }
        self.until_prompt_after(format!("{line}\r\n").as_bytes(), Duration::from_secs(20))
    }

    /// The error for a testpmd that has exited: its exit status and the last of its output
    /// (read until its pipes close, at most a second).
    fn gone(&mut self) -> DutError {
        let deadline = Instant::now() + Duration::from_secs(1);
        while let Ok((out, b)) = self
            .out
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            if out { &mut self.log } else { &mut self.err }.extend_from_slice(&b);
        }
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s.to_string(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => break "still running, its pipes closed".into(),
            }
        };
        DutError::Exited {
            dut: DUT,
            log: format!("{status}; {}", self.tail()),
        }
    }

    /// `e`, a failure to reach the process, unless testpmd has exited: then what
    /// [`gone`](Self::gone) says.
    fn or_gone(&mut self, e: DutError) -> DutError {
        match self.child.try_wait() {
            Ok(None) => e,
            _ => self.gone(),
        }
    }

    pub fn port_stats(&mut self, port: u16) -> Result<PortStats, DutError> {
        let out = self.cmd(&format!("show port stats {port}"))?;
        parse_port_stats(&out)
            .ok_or_else(|| DutError::reply(DUT, format!("cannot parse port stats: {out}")))
    }

    /// Waits until port `port` reports link up.
    pub fn wait_link_up(&mut self, port: u16, timeout: Duration) -> Result<(), DutError> {
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
                return Err(DutError::Timeout {
                    dut: DUT,
                    what: format!("port {port} link not up"),
                    waited: timeout,
                    log: self.tail(),
                });
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
    pub fn quit_within(mut self, timeout: Duration) -> Result<(), DutError> {
        if let Some(mut w) = self.stdin.take() {
            let _ = w.write_all(b"quit\n");
        }
        if crate::proc::stop_child(&mut self.child, None, timeout) {
            Ok(())
        } else {
            Err(DutError::Killed {
                dut: DUT,
                waited: timeout,
            })
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // One prefix per instance (`proc::instance_tag`) would otherwise leave a directory
        // per search.
        crate::dpdk::remove_runtime_dir(&self.prefix);
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

impl RunningDut for Testpmd {
    fn pid(&self) -> u32 {
        Testpmd::pid(self)
    }

    /// With [`Testpmd::start_when_ready`]: waits for the generator's links, then starts
    /// forwarding.
    fn ready(&mut self) -> Result<(), DutError> {
        if self.start_on_ready == 0 {
            return Ok(());
        }
        for p in 0..self.start_on_ready {
            self.wait_link_up(p, Duration::from_secs(20))?;
        }
        self.cmd("start")?;
        Ok(())
    }

    /// Both ports face the generator: what they took from it and sent back, whichever way
    /// the frames went.
    fn counts(&mut self) -> Result<Option<Counts>, DutError> {
        let (p0, p1) = (self.port_stats(0)?, self.port_stats(1)?);
        Ok(Some(Counts {
            rx: p0.rx_packets + p1.rx_packets,
            tx: p0.tx_packets + p1.tx_packets,
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

    /// `SIGSTOP`, as every DUT; a testpmd that is no longer there is reported as any other
    /// that died (how it ended, the end of its output), not as a signal that found no process.
    fn pause(&mut self) -> Result<(), DutError> {
        crate::proc::signal(self.pid(), rustix::process::Signal::STOP).map_err(|e| self.or_gone(e))
    }

    /// `SIGCONT`, reported as [`pause`](Self::pause) is.
    fn resume(&mut self) -> Result<(), DutError> {
        crate::proc::signal(self.pid(), rustix::process::Signal::CONT).map_err(|e| self.or_gone(e))
    }

    fn stop(self: Box<Self>, timeout: Duration) -> Result<(), DutError> {
        self.quit_within(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
