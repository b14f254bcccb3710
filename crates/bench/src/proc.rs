//! Child processes of the harness: stopping them without leaving any behind, and reading how
//! the kernel scheduled their threads. Every DUT driver builds on this; it knows no DUT.

use std::process::Child;
use std::time::{Duration, Instant};

use rustix::process::Signal;

/// What went wrong with a device under test (or a peer the harness drives), in the terms of
/// the driver that saw it. `dut` names the program: `veclane`, `testpmd`, `dpdk-l3fwd`, `vpp`.
#[derive(Debug, thiserror::Error)]
pub enum DutError {
    /// A file, directory, pipe or process the driver needs could not be made.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The program is not there to run.
    #[error("{0}")]
    Missing(String),
    /// The program cannot be run the way asked (e.g. under valgrind).
    #[error("{0}")]
    Unsupported(String),
    /// The program exited while the driver waited for it.
    #[error("{dut} exited: {log}")]
    Exited { dut: &'static str, log: String },
    /// Something the driver waits for did not happen in time.
    #[error("{dut}: {what} within {waited:?}; {log}")]
    Timeout {
        dut: &'static str,
        what: String,
        waited: Duration,
        log: String,
    },
    /// The program answered with something the driver cannot use, or refused a command.
    #[error("{dut}: {detail}")]
    Reply { dut: &'static str, detail: String },
    /// The program did not exit on its own when asked and was killed.
    #[error("{dut} did not exit within {waited:?} of being asked to; killed")]
    Killed { dut: &'static str, waited: Duration },
}

impl DutError {
    /// A constructor for `map_err` on an I/O result: the error with what was being done.
    pub fn io(context: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> DutError {
        move |source| DutError::Io {
            context: context.to_string(),
            source,
        }
    }

    /// A reply the driver cannot use.
    pub fn reply(dut: &'static str, detail: impl Into<String>) -> DutError {
        DutError::Reply {
            dut,
            detail: detail.into(),
        }
    }
}

/// Program `name` in a directory of `PATH`, if there is one.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// A name for one running instance of a peer, `kind` saying which (DPDK's `--file-prefix`,
/// VPP's api-segment prefix): unique across processes by the pid and within this one by a
/// count, so that instances alive at once (`--interleave trials`, a DUT at several worker
/// counts) never share their runtime files.
pub fn instance_tag(kind: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("vl{}{kind}{n}", std::process::id())
}

/// Sends `sig` to process `pid`, a DUT's: never to the harness itself (a DUT that runs on a
/// thread of the harness pauses its own way).
pub fn signal(pid: u32, sig: Signal) -> Result<(), DutError> {
    if pid == std::process::id() {
        return Err(DutError::Unsupported(format!(
            "{sig:?} to the harness's own process"
        )));
    }
    let p = rustix::process::Pid::from_raw(pid as i32)
        .ok_or_else(|| DutError::Unsupported(format!("no process {pid}")))?;
    rustix::process::kill_process(p, sig).map_err(|e| DutError::Io {
        context: format!("{sig:?} to process {pid}"),
        source: e.into(),
    })
}

/// Stops a child process: sends `signal` (if any, and if it still runs), gives it `timeout` to
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

/// Each of process `pid`'s threads' time so far on its CPU and runnable but waiting for it
/// (`/proc/PID/task/TID/schedstat`, first and second fields): the time the host's other
/// threads took from it. `None` where the kernel does not say.
pub fn thread_times(pid: u32) -> Option<Vec<ThreadTime>> {
    let dir = format!("/proc/{pid}/task");
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

/// One thread's scheduler times (see [`thread_times`]).
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
