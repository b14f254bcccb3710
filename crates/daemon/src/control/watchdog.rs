//! The worker watchdog. Every control-loop turn looks at each worker's progress (its dispatch
//! loops, and whether it sleeps on purpose): a worker awake that has not finished a loop for
//! [`STALL`] is stalled. Almost always that is a peer's eventfd holding it in write(2)
//! (memif::unblock), so the watchdog interrupts it, every [`STALL`] while it stays stalled (a
//! system call that does not wait is not interrupted by it: only one that waits gets EINTR,
//! and the queue that got it ends that peer's connection). Each stall is counted (`show
//! runtime`, the `worker_stalls` metric) and logged; a worker stalled for [`FATAL`] (a bug
//! looping without end, which no signal ends) makes the daemon unhealthy: the control loop no
//! longer feeds systemd's watchdog, which restarts the daemon. A worker whose thread ended (a
//! panic) stops the daemon with an error, for the service manager to start it again.

use std::time::{Duration, Instant};

/// How long a worker awake may go without finishing a dispatch loop.
pub const STALL: Duration = Duration::from_millis(100);
/// How long a stall may last before the daemon is declared unhealthy.
pub const FATAL: Duration = Duration::from_secs(10);

/// What the watchdog remembers of one worker.
#[derive(Debug)]
pub struct WorkerWatch {
    loops: u64,
    since: Instant,
    last_poke: Option<Instant>,
    fatal: bool,
}

/// What to do about a worker now.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    /// Interrupt it; `first` for the first time in this stall (count and log it).
    Interrupt {
        first: bool,
        stalled: Duration,
    },
    /// Stalled for FATAL: the daemon is unhealthy (said once).
    Fatal {
        stalled: Duration,
    },
    /// Stalled, interrupted less than STALL ago: wait.
    Waiting,
}

impl WorkerWatch {
    pub fn new(now: Instant) -> WorkerWatch {
        WorkerWatch {
            loops: 0,
            since: now,
            last_poke: None,
            fatal: false,
        }
    }

    /// Assesses a worker that has run `loops` dispatch loops and is `parked` (asleep on
    /// purpose) at `now`. A worker that moved, or sleeps, is fine, and a new stall starts
    /// from there.
    pub fn assess(&mut self, loops: u64, parked: bool, now: Instant) -> Verdict {
        if parked || loops != self.loops {
            self.loops = loops;
            self.since = now;
            self.last_poke = None;
            self.fatal = false;
            return Verdict::Fine;
        }
        let stalled = now.saturating_duration_since(self.since);
        if stalled < STALL {
            return Verdict::Fine;
        }
        if stalled >= FATAL && !self.fatal {
            self.fatal = true;
            return Verdict::Fatal { stalled };
        }
        match self.last_poke {
            Some(t) if now.saturating_duration_since(t) < STALL => Verdict::Waiting,
            last => {
                self.last_poke = Some(now);
                Verdict::Interrupt {
                    first: last.is_none(),
                    stalled,
                }
            }
        }
    }
}

impl super::Control {
    /// One look at every worker (from `tick`).
    pub(super) fn watch_workers(&mut self) {
        let now = Instant::now();
        for w in &mut self.workers {
            let a = &w.activity;
            let loops = a.loops.load(std::sync::atomic::Ordering::Acquire);
            let parked = a.parked.load(std::sync::atomic::Ordering::Acquire);
            match w.watch.assess(loops, parked, now) {
                Verdict::Fine | Verdict::Waiting => {}
                Verdict::Interrupt { first, stalled } => {
                    if first {
                        a.stalls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::warn!(
                            worker = w.index,
                            stalled_ms = stalled.as_millis() as u64,
                            "worker made no progress: interrupting it (a peer's eventfd \
                             holding it in write(2) is cut off)"
                        );
                    }
                    let tid = a.tid.load(std::sync::atomic::Ordering::Relaxed);
                    if tid > 0 {
                        let _ = memif::unblock::interrupt(tid);
                    }
                }
                Verdict::Fatal { stalled } => {
                    tracing::error!(
                        worker = w.index,
                        stalled_s = stalled.as_secs(),
                        "worker stuck: the systemd watchdog is no longer fed, for a restart"
                    );
                    self.unhealthy = true;
                }
            }
        }
    }

    /// A worker whose thread ended while the daemon runs (it panicked), if any.
    pub fn dead_worker(&self) -> Option<String> {
        self.workers
            .iter()
            .find(|w| !w.is_alive())
            .map(|w| format!("worker {} ended (it panicked)", w.index))
    }

    /// Whether the daemon works: false once a worker stayed stuck for [`FATAL`].
    pub fn healthy(&self) -> bool {
        !self.unhealthy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_are_interrupted_every_stall_and_fatal_once() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = WorkerWatch::new(t0);
        assert_eq!(w.assess(5, false, ms(0)), Verdict::Fine);
        assert_eq!(w.assess(5, false, ms(99)), Verdict::Fine);
        assert_eq!(
            w.assess(5, false, ms(100)),
            Verdict::Interrupt {
                first: true,
                stalled: Duration::from_millis(100)
            }
        );
        assert_eq!(w.assess(5, false, ms(150)), Verdict::Waiting);
        assert!(matches!(
            w.assess(5, false, ms(200)),
            Verdict::Interrupt { first: false, .. }
        ));
        // Progress ends the stall; a new one counts as first again.
        assert_eq!(w.assess(6, false, ms(210)), Verdict::Fine);
        assert!(matches!(
            w.assess(6, false, ms(310)),
            Verdict::Interrupt { first: true, .. }
        ));
        // Asleep on purpose is never a stall.
        let mut s = WorkerWatch::new(t0);
        assert_eq!(s.assess(0, true, ms(60_000)), Verdict::Fine);
        // Ten seconds without progress: fatal once, then interrupted on as before.
        let mut f = WorkerWatch::new(t0);
        f.assess(1, false, ms(0));
        assert!(matches!(
            f.assess(1, false, ms(10_000)),
            Verdict::Fatal { .. }
        ));
        assert!(matches!(
            f.assess(1, false, ms(10_100)),
            Verdict::Interrupt { first: true, .. }
        ));
        assert!(matches!(f.assess(1, false, ms(10_150)), Verdict::Waiting));
    }
}
