//! Devices under test as child processes, behind one trait: a scenario starts one, reads its
//! own counters between trials, and stops it.
//!
//! Every DUT listens on one memif socket with interfaces (ports) 0 and 1; the generator sends
//! on 0 and receives on 1. A DUT that keeps counters (veclane's `show interface`, testpmd's
//! `show port stats`) reports what it received on port 0 and sent on port 1, so the harness
//! can compare them with its own counts after every trial. The drivers ([`crate::daemon`],
//! [`crate::testpmd`], [`crate::dpdk_l3fwd`], [`crate::vpp`]) implement [`RunningDut`]; this
//! module knows none of them.

use std::time::Duration;

pub use crate::proc::DutError;
use crate::proc::ThreadTime;

/// A DUT's own cumulative counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames received on port 0 (from the generator).
    pub rx: u64,
    /// Frames sent on port 1 (to the generator).
    pub tx: u64,
}

/// A running DUT, whichever it is.
pub type Running = Box<dyn RunningDut>;

/// What the harness does with a running DUT.
pub trait RunningDut: std::fmt::Debug + Send {
    /// The DUT's process (valgrind's, when run under it).
    fn pid(&self) -> u32;

    /// Waits until the DUT forwards, once the generator is connected (l3fwd starts its loop
    /// only when both links are up).
    fn ready(&mut self) -> Result<(), DutError> {
        Ok(())
    }

    /// The DUT's counters, or `None` for a DUT that has none to read.
    fn counts(&mut self) -> Result<Option<Counts>, DutError>;

    /// Named drop counters that are not zero, as one line of text.
    fn drops(&mut self) -> String;

    /// Resets per-node clocks, so that the next [`runtime`](Self::runtime) covers what
    /// follows (veclane; a no-op elsewhere).
    fn clear_runtime(&mut self) {}

    /// `show runtime` since the last clear, per worker (empty for DUTs without one); see
    /// [`node_costs`] and [`worker_packets`].
    fn runtime(&mut self) -> Vec<api::WorkerRuntime> {
        Vec::new()
    }

    /// Stops every thread of the DUT until [`resume`](Self::resume), between its turns when
    /// DUTs take turns trial by trial (`--interleave trials`): nothing of it runs while
    /// another DUT is measured. `SIGSTOP` to its process.
    fn pause(&mut self) -> Result<(), DutError> {
        crate::proc::signal(self.pid(), rustix::process::Signal::STOP)
    }

    /// Lets a [`pause`](Self::pause)d DUT run again (`SIGCONT`); harmless on a running one.
    fn resume(&mut self) -> Result<(), DutError> {
        crate::proc::signal(self.pid(), rustix::process::Signal::CONT)
    }

    /// Each thread's scheduler times (see [`crate::proc::thread_times`]).
    fn thread_times(&self) -> Option<Vec<ThreadTime>> {
        crate::proc::thread_times(self.pid())
    }

    /// Stops the DUT and reaps it, giving it `timeout` to exit on its own (a DUT under
    /// valgrind writes its profile then); an error says it had to be killed.
    fn stop(self: Box<Self>, timeout: Duration) -> Result<(), DutError>;
}

/// How long the DUT's counters must hold still before [`settled_counts`] takes them as they
/// are, and how long it waits at most.
pub const SETTLE_QUIET: Duration = Duration::from_millis(50);
pub const SETTLE_MAX: Duration = Duration::from_secs(2);

/// The DUT's counters once they have caught up with a trial that just ended. Frames the
/// generator sent may still sit in the DUT's receive ring (on a busy host its worker may not
/// have run since), and frames it took may still be on their way out; read at once, the
/// counters then disagree with the generator's though nothing was lost. So `read` is called
/// again until the counters since `before` match what the generator sent (`want.rx`) and got
/// back (`want.tx`), or until they stop moving for `quiet`, or for `max` at most; what they
/// then say is what [`check_counts`] compares. A DUT whose counters agree at once is read once.
pub fn settled_counts(
    mut read: impl FnMut() -> Result<Option<Counts>, DutError>,
    before: Option<Counts>,
    want: Counts,
    quiet: Duration,
    max: Duration,
) -> Result<Option<Counts>, DutError> {
    let start = std::time::Instant::now();
    let (mut last, mut moved) = (read()?, start);
    loop {
        if last.is_none()
            || agrees(before, last, want)
            || moved.elapsed() >= quiet
            || start.elapsed() >= max
        {
            return Ok(last);
        }
        std::thread::sleep(Duration::from_millis(1));
        let now = read()?;
        if now != last {
            moved = std::time::Instant::now();
        }
        last = now;
    }
}

/// Whether the DUT's counters since `before` show what the generator sent (`want.rx`) and
/// got back (`want.tx`); a DUT without counters agrees.
pub fn agrees(before: Option<Counts>, after: Option<Counts>, want: Counts) -> bool {
    let (Some(b), Some(a)) = (before, after) else {
        return true;
    };
    a.rx.wrapping_sub(b.rx) == want.rx && a.tx.wrapping_sub(b.tx) == want.tx
}

/// Compares the generator's counts over one trial with the DUT's counters before and
/// after it; returns what disagrees.
pub fn check_counts(
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

    fn counts(rx: u64, tx: u64) -> Option<Counts> {
        Some(Counts { rx, tx })
    }

    /// Counters that lag the generator are read until they catch up; counters that agree
    /// are read once; counters that stop short are taken once they hold still.
    #[test]
    fn counters_are_read_until_they_catch_up_or_hold_still() {
        let want = Counts { rx: 100, tx: 90 };
        let long = Duration::from_secs(10);
        let before = counts(1000, 2000);
        // Lagging: the DUT's worker takes the last frames over three more reads.
        let mut seq = [
            (1090, 2080),
            (1095, 2085),
            (1100, 2088),
            (1100, 2090),
            (0, 0),
        ]
        .into_iter();
        let mut reads = 0;
        let got = settled_counts(
            || {
                reads += 1;
                let (rx, tx) = seq.next().unwrap();
                Ok(counts(rx, tx))
            },
            before,
            want,
            long,
            long,
        )
        .unwrap();
        assert_eq!((got, reads), (counts(1100, 2090), 4));
        assert!(check_counts(before, got, 100, 90).is_empty());
        // Agreeing at once: one read.
        let mut reads = 0;
        let got = settled_counts(
            || {
                reads += 1;
                Ok(counts(1100, 2090))
            },
            before,
            want,
            long,
            long,
        )
        .unwrap();
        assert_eq!((got, reads), (counts(1100, 2090), 1));
        // Short for good (a DUT that lost frames before counting them): taken once quiet,
        // and the disagreement is still reported.
        let got = settled_counts(
            || Ok(counts(1097, 2090)),
            before,
            want,
            Duration::from_millis(5),
            long,
        )
        .unwrap();
        assert_eq!(got, counts(1097, 2090));
        assert_eq!(check_counts(before, got, 100, 90).len(), 1);
        // A DUT without counters is read once.
        let got = settled_counts(|| Ok(None), before, want, long, long).unwrap();
        assert_eq!(got, None);
    }
}
