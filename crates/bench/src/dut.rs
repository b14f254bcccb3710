//! Devices under test as child processes, behind one interface: start one for a scenario,
//! read its own counters between trials, stop it.
//!
//! Every DUT listens on one memif socket with interfaces (ports) 0 and 1; the generator sends
//! on 0 and receives on 1. A DUT that keeps counters (veclane's `show interface`, testpmd's
//! `show port stats`) reports what it received on port 0 and sent on port 1, so the harness
//! can compare them with its own counts after every trial.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::dpdk_l3fwd::DpdkL3fwd;
use crate::testpmd::Testpmd;
use crate::vpp::Vpp;

/// A DUT's own cumulative counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames received on port 0 (from the generator).
    pub rx: u64,
    /// Frames sent on port 1 (to the generator).
    pub tx: u64,
}

/// A running DUT.
#[derive(Debug)]
pub enum Running {
    Veclane(Daemon),
    Testpmd(Testpmd),
    DpdkL3fwd(DpdkL3fwd),
    Vpp(Vpp),
}

impl Running {
    /// The DUT's process.
    pub fn pid(&self) -> u32 {
        match self {
            Running::Veclane(d) => d.pid(),
            Running::Testpmd(t) => t.pid(),
            Running::DpdkL3fwd(l) => l.pid(),
            Running::Vpp(v) => v.pid(),
        }
    }

    /// Each of the DUT's threads' time so far on its CPU and runnable but waiting for it
    /// (`/proc/PID/task/TID/schedstat`, first and second fields): the time the host's other
    /// threads took from it. `None` where the kernel does not say.
    pub fn thread_times(&self) -> Option<Vec<ThreadTime>> {
        let dir = format!("/proc/{}/task", self.pid());
        let v: Vec<ThreadTime> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| {
                let e = e.ok()?;
                let tid = e.file_name().to_str()?.parse().ok()?;
                let s = std::fs::read_to_string(e.path().join("schedstat")).ok()?;
                let mut f = s.split_whitespace().map(|x| x.parse::<u64>().ok());
                Some(ThreadTime {
                    tid,
                    run_ns: f.next()??,
                    wait_ns: f.next()??,
                })
            })
            .collect();
        (!v.is_empty()).then_some(v)
    }

    /// Waits until the DUT forwards, once the generator is connected (l3fwd starts its loop
    /// only when both links are up).
    pub fn ready(&mut self) -> Result<(), String> {
        match self {
            Running::DpdkL3fwd(l) => l.wait_forwarding(Duration::from_secs(15)),
            _ => Ok(()),
        }
    }

    /// The DUT's counters, or `None` for a DUT that has none to read.
    pub fn counts(&mut self) -> Result<Option<Counts>, String> {
        match self {
            Running::Veclane(d) => {
                let ifs = match d.call(&api::Request::ShowInterface { name: None })? {
                    api::Reply::Interfaces { interfaces } => interfaces,
                    other => return Err(format!("show interface: {other:?}")),
                };
                let by = |id: u32| ifs.iter().find(|i| i.id == id);
                Ok(Some(Counts {
                    rx: by(0).map_or(0, |i| i.rx_packets),
                    tx: by(1).map_or(0, |i| i.tx_packets),
                }))
            }
            Running::Testpmd(t) => Ok(Some(Counts {
                rx: t.port_stats(0)?.rx_packets,
                tx: t.port_stats(1)?.tx_packets,
            })),
            // EAL telemetry: l3fwd has no command line of its own.
            Running::DpdkL3fwd(l) => Ok(Some(Counts {
                rx: l.port_stats(0)?.rx_packets,
                tx: l.port_stats(1)?.tx_packets,
            })),
            Running::Vpp(v) => {
                let ifs = v.interfaces()?;
                let by = |name: &str| {
                    ifs.iter()
                        .find(|i| i.name == name)
                        .ok_or_else(|| format!("VPP has no {name}"))
                };
                Ok(Some(Counts {
                    rx: by(crate::vpp::IF_IN)?.rx_packets,
                    tx: by(crate::vpp::IF_OUT)?.tx_packets,
                }))
            }
        }
    }

    /// Compares the generator's counts over one trial with the DUT's counters before and
    /// after it; returns what disagrees.
    pub fn check(
        before: Option<Counts>,
        after: Option<Counts>,
        gen_sent: u64,
        gen_received: u64,
    ) -> Vec<String> {
        let (Some(b), Some(a)) = (before, after) else {
            return Vec::new();
        };
        let mut v = Vec::new();
        let rx = a.rx.wrapping_sub(b.rx);
        let tx = a.tx.wrapping_sub(b.tx);
        if rx != gen_sent {
            v.push(format!(
                "generator sent {gen_sent} but the DUT received {rx} on port 0"
            ));
        }
        if tx != gen_received {
            v.push(format!(
                "generator received {gen_received} but the DUT sent {tx} on port 1"
            ));
        }
        v
    }

    /// Resets per-node clocks (veclane), so that the next [`runtime`](Self::runtime) covers
    /// what follows.
    pub fn clear_runtime(&mut self) {
        if let Running::Veclane(d) = self {
            let _ = d.call(&api::Request::Clear {
                what: api::Clear::Runtime,
            });
        }
    }

    /// veclane's `show runtime` since the last clear, per worker (empty for the other DUTs);
    /// see [`node_costs`] and [`worker_packets`].
    pub fn runtime(&mut self) -> Vec<api::WorkerRuntime> {
        match self {
            Running::Veclane(d) => match d.call(&api::Request::ShowRuntime) {
                Ok(api::Reply::Runtime { workers }) => workers,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Named drop counters that are not zero (veclane), as `node:reason=count`.
    pub fn drops(&mut self) -> String {
        match self {
            Running::Veclane(d) => match d.call(&api::Request::ShowErrors) {
                Ok(api::Reply::Errors { errors }) => errors
                    .iter()
                    .filter(|e| e.count > 0)
                    .map(|e| format!("{}:{}={}", e.node, e.reason, e.count))
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => String::new(),
            },
            Running::Testpmd(t) => match (t.port_stats(0), t.port_stats(1)) {
                (Ok(p0), Ok(p1)) => format!(
                    "port0 rx_missed={} port1 tx_errors={}",
                    p0.rx_missed, p1.tx_errors
                ),
                _ => String::new(),
            },
            Running::DpdkL3fwd(l) => match (l.port_stats(0), l.port_stats(1)) {
                (Ok(p0), Ok(p1)) => format!(
                    "port0 rx_missed={} port1 tx_errors={}",
                    p0.rx_missed, p1.tx_errors
                ),
                _ => String::new(),
            },
            Running::Vpp(v) => v
                .interfaces()
                .map(|ifs| {
                    ifs.iter()
                        .filter(|i| i.drops + i.rx_miss + i.tx_error > 0)
                        .map(|i| {
                            format!(
                                "{}: drops={} rx-miss={} tx-error={}",
                                i.name, i.drops, i.rx_miss, i.tx_error
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
        }
    }

    /// Stops the DUT and reaps it.
    pub fn stop(self) {
        match self {
            Running::Veclane(d) => drop(d),
            Running::Testpmd(t) => t.quit(),
            Running::DpdkL3fwd(l) => drop(l.stop()),
            Running::Vpp(v) => v.stop(),
        }
    }
}

/// A `veclane run` child, stopped with SIGTERM (then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    dir: PathBuf,
}

impl Daemon {
    /// Starts `bin run` with `config` in runtime directory `dir`, and waits for its control
    /// socket and its memif socket.
    pub fn start(bin: &Path, dir: &Path, config: &str) -> Result<Daemon, String> {
        Daemon::start_under(&[], bin, dir, config, Duration::from_secs(10))
    }

    /// As [`start`](Self::start), run under `wrapper` (e.g. valgrind and its options), which
    /// may take `timeout` to bring the sockets up.
    pub fn start_under(
        wrapper: &[String],
        bin: &Path,
        dir: &Path,
        config: &str,
        timeout: Duration,
    ) -> Result<Daemon, String> {
        let conf = dir.join("veclane.toml");
        std::fs::write(&conf, config).map_err(|e| format!("writing {}: {e}", conf.display()))?;
        let log = std::fs::File::create(dir.join("daemon.log")).map_err(|e| e.to_string())?;
        let mut cmd = match wrapper.split_first() {
            Some((w, args)) => {
                let mut c = Command::new(w);
                c.args(args).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let child = cmd
            .arg("run")
            .arg("--config")
            .arg(&conf)
            .arg("--runtime-dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut d = Daemon {
            child,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + timeout;
        while !(dir.join("ctl.sock").exists() && dir.join("memif.sock").exists()) {
            if let Ok(Some(st)) = d.child.try_wait() {
                return Err(format!("daemon exited ({st}): {}", d.log()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "daemon made no sockets in {timeout:?}: {}",
                    d.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(d)
    }

    /// The process id (valgrind's, when run under it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `timeout` for the daemon to exit (it is killed after).
    pub fn stop_within(mut self, timeout: Duration) -> Result<(), String> {
        if stop_child(&mut self.child, Some(Signal::TERM), timeout) {
            Ok(())
        } else {
            Err(format!(
                "daemon still running {timeout:?} after SIGTERM; killed"
            ))
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log"))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    pub fn call(&self, req: &api::Request) -> Result<api::Reply, String> {
        api::Client::connect(&self.dir.join("ctl.sock"))
            .and_then(|mut c| c.call(req))
            .map_err(|e| e.to_string())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop_child(&mut self.child, Some(Signal::TERM), Duration::from_secs(5));
    }
}

/// Stops a DUT process: sends `signal` (if any, and if it still runs), gives it `timeout` to
/// exit on its own (a DUT under valgrind writes its profile then), and kills it after that.
/// Returns whether it exited on its own.
pub fn stop_child(child: &mut Child, signal: Option<Signal>, timeout: Duration) -> bool {
    if let Ok(Some(_)) = child.try_wait() {
        return true;
    }
    if let (Some(sig), Some(pid)) = (signal, rustix::process::Pid::from_raw(child.id() as i32)) {
        let _ = rustix::process::kill_process(pid, sig);
    }
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// One thread's scheduler times (see [`Running::thread_times`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadTime {
    pub tid: u32,
    pub run_ns: u64,
    pub wait_ns: u64,
}

/// The longest any polling thread of the DUT waited for its CPU between two snapshots `wall_ns`
/// apart. A polling thread wants its CPU all the time, so its time running plus waiting
/// covers at least half the interval; sleeping threads (control, telemetry) are left out.
pub fn worker_wait_between(before: &[ThreadTime], after: &[ThreadTime], wall_ns: u64) -> u64 {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| b.tid == a.tid)?;
            let run = a.run_ns.saturating_sub(b.run_ns);
            let wait = a.wait_ns.saturating_sub(b.wait_ns);
            (2 * (run + wait) >= wall_ns).then_some(wait)
        })
        .max()
        .unwrap_or(0)
}

/// Packets each worker took in (what its input nodes produced), in worker order: how the DUT
/// spread the load over its workers.
pub fn worker_packets(workers: &[api::WorkerRuntime]) -> Vec<u64> {
    workers
        .iter()
        .map(|w| {
            w.nodes
                .iter()
                .filter(|n| n.kind == "input")
                .map(|n| n.vectors)
                .sum()
        })
        .collect()
}

/// Nanoseconds per packet in each node that saw packets, summed over workers, with the total
/// last (empty without workers). Polling input nodes include their empty polls (as VPP's
/// `show runtime` does).
pub fn node_costs(workers: &[api::WorkerRuntime]) -> Vec<(String, f64)> {
    if workers.is_empty() {
        return Vec::new();
    }
    let mut acc: Vec<(String, u64, u64)> = Vec::new();
    for w in workers {
        for n in &w.nodes {
            if n.vectors == 0 {
                continue;
            }
            match acc.iter_mut().find(|(name, _, _)| *name == n.name) {
                Some(e) => {
                    e.1 += n.clocks;
                    e.2 += n.vectors;
                }
                None => acc.push((n.name.clone(), n.clocks, n.vectors)),
            }
        }
    }
    // Packets through the graph: what the input nodes produced.
    let packets = worker_packets(workers).iter().sum::<u64>().max(1);
    let mut v: Vec<(String, f64)> = acc
        .iter()
        .map(|(n, c, vec)| (n.clone(), *c as f64 / *vec as f64))
        .collect();
    let total: u64 = acc.iter().map(|e| e.1).sum();
    v.push(("total".into(), total as f64 / packets as f64));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_the_longest_of_the_polling_threads() {
        let t = |tid, run_ns, wait_ns| ThreadTime {
            tid,
            run_ns,
            wait_ns,
        };
        // Over 100 ms: worker 11 ran 97 and waited 3; worker 12 (on a shared CPU) ran 40 and
        // waited 55; the control thread 10 ran 1 and waited 9 (it sleeps); thread 13 is new.
        let before = [t(10, 0, 0), t(11, 0, 0), t(12, 0, 0)];
        let after = [
            t(10, 1_000_000, 9_000_000),
            t(11, 97_000_000, 3_000_000),
            t(12, 40_000_000, 55_000_000),
            t(13, 90_000_000, 80_000_000),
        ];
        assert_eq!(
            worker_wait_between(&before, &after, 100_000_000),
            55_000_000
        );
        assert_eq!(
            worker_wait_between(&before, &after[..2], 100_000_000),
            3_000_000
        );
        assert_eq!(worker_wait_between(&before, &after[..1], 100_000_000), 0);
    }
}
