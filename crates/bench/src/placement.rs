//! Where the host put our two vCPUs right now.
//!
//! On this class of machine the host moves the vCPUs between cores that share an L3 (a cache
//! line crosses in ~60 ns) and cores on different dies (~330 ns), every few seconds to minutes.
//! memif is nothing but cross-core traffic, so every pipeline runs several times slower in the
//! far state. The probe bounces one cache line between a thread pinned to each CPU and reports
//! the one-way time; trials are tagged by the probes taken before and after them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// One-way cache-line transfer times that separate the states seen on this machine class:
/// about 60-110 ns (the CPUs share an L3), 150-215 ns (a middle state), 360-400 ns (different
/// dies).
pub const NEAR_BELOW_NS: f64 = 130.0;
pub const FAR_ABOVE_NS: f64 = 280.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Both probes near: the CPUs share an L3.
    Near,
    /// Both probes in the middle band.
    Mid,
    /// Both probes far: different dies.
    Far,
    /// The state changed during the trial (or a probe failed).
    Mixed,
}

impl Placement {
    /// The first of near, mid and far (in that order) for which `holds` is true: the
    /// placement a result is taken from. Near is the state memif is meant to run in, and the
    /// one the harness waits for; mixed results were cut by a flip.
    pub fn preferred(holds: impl Fn(Placement) -> bool) -> Option<Placement> {
        [Placement::Near, Placement::Mid, Placement::Far]
            .into_iter()
            .find(|p| holds(*p))
    }

    /// The class of one probe.
    pub fn class(ns: f64) -> Placement {
        if !ns.is_finite() {
            Placement::Mixed
        } else if ns < NEAR_BELOW_NS {
            Placement::Near
        } else if ns <= FAR_ABOVE_NS {
            Placement::Mid
        } else {
            Placement::Far
        }
    }

    /// The class of a trial from the probes before and after it.
    pub fn of(before_ns: f64, after_ns: f64) -> Placement {
        let (a, b) = (Placement::class(before_ns), Placement::class(after_ns));
        if a == b { a } else { Placement::Mixed }
    }
}

impl core::fmt::Display for Placement {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Placement::Near => "near",
            Placement::Mid => "mid",
            Placement::Far => "far",
            Placement::Mixed => "mixed",
        })
    }
}

#[repr(align(128))]
struct Line(AtomicU64);

fn pin(cpu: usize) -> bool {
    trafgen::pin_to_cpu(cpu).is_ok()
}

/// Median one-way cache-line transfer time between `a` and `b` in ns, over three runs of
/// `hops` transfers; NaN if a thread could not be pinned.
pub fn probe(a: usize, b: usize, hops: u64) -> f64 {
    probe_with(a, b, hops, false)
}

/// As [`probe`], with both threads at real-time priority, so that the probe runs between
/// trials while a busy-polling DUT holds one of the CPUs (a normal thread would get the CPU
/// only in time slices and measure the scheduler); `None` when this process may not use
/// real-time priority (see [`can_preempt`]).
pub fn probe_preempting(a: usize, b: usize, hops: u64) -> Option<f64> {
    can_preempt().then(|| probe_with(a, b, hops, true))
}

/// Whether threads of this process may take real-time priority (root or `CAP_SYS_NICE`);
/// tried once, on a thread of its own.
pub fn can_preempt() -> bool {
    static CAN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CAN.get_or_init(|| {
        std::thread::spawn(|| crate::sched::make_current_thread_fifo(RT_PRIORITY).is_ok())
            .join()
            .unwrap_or(false)
    })
}

/// Above every normal thread, below the kernel's own real-time threads (50 and up).
const RT_PRIORITY: u8 = 10;

fn probe_with(a: usize, b: usize, hops: u64, rt: bool) -> f64 {
    let mut runs: Vec<f64> = (0..3).map(|_| probe_once(a, b, hops, rt)).collect();
    runs.sort_by(|x, y| x.total_cmp(y));
    runs[1]
}

fn probe_once(a: usize, b: usize, hops: u64, rt: bool) -> f64 {
    // Both sides run on threads of their own: pinning the caller would leave the harness (and
    // every process it starts afterwards) confined to one CPU.
    let line = Arc::new(Line(AtomicU64::new(0)));
    let ready = Arc::new(Line(AtomicU64::new(0)));
    let deadline = Instant::now() + Duration::from_secs(2);
    // Side 0 starts the ball (even values), side 1 returns it (odd values).
    let side = |cpu: usize, first: u64, line: Arc<Line>, ready: Arc<Line>| {
        std::thread::spawn(move || -> Option<Duration> {
            // Real-time first, then the move: a real-time thread arriving on a CPU preempts
            // the thread there at once, where a normal one waits for the end of its slice.
            if (rt && crate::sched::make_current_thread_fifo(RT_PRIORITY).is_err()) || !pin(cpu) {
                ready.0.fetch_add(2, Ordering::AcqRel);
                return None;
            }
            // The clock starts once both sides run on their CPUs.
            ready.0.fetch_add(1, Ordering::AcqRel);
            while ready.0.load(Ordering::Acquire) < 2 {
                if Instant::now() > deadline {
                    return None;
                }
                std::hint::spin_loop();
            }
            if ready.0.load(Ordering::Acquire) > 2 {
                return None;
            }
            let t = Instant::now();
            let mut v = first;
            while v < hops {
                if line.0.load(Ordering::Acquire) == v {
                    line.0.store(v + 1, Ordering::Release);
                    v += 2;
                } else if Instant::now() > deadline {
                    return None;
                }
                std::hint::spin_loop();
            }
            Some(t.elapsed())
        })
    };
    let peer = side(b, 1, line.clone(), ready.clone());
    let starter = side(a, 0, line, ready);
    match (starter.join().ok().flatten(), peer.join().ok().flatten()) {
        (Some(d), Some(_)) => d.as_nanos() as f64 / hops as f64,
        _ => f64::NAN,
    }
}

/// Probes until the CPUs are near or `max_wait` passes; returns the last probe.
pub fn wait_near(a: usize, b: usize, max_wait: Duration) -> f64 {
    wait_near_with(max_wait, Duration::from_millis(250), || {
        Some(probe(a, b, 20_000))
    })
    .unwrap_or(f64::NAN)
}

/// Calls `probe` every `every` until it reads near or `max_wait` passes (at once for zero);
/// returns the last reading, or `None` as soon as `probe` cannot read.
pub fn wait_near_with(
    max_wait: Duration,
    every: Duration,
    mut probe: impl FnMut() -> Option<f64>,
) -> Option<f64> {
    let t = Instant::now();
    loop {
        let ns = probe()?;
        if ns < NEAR_BELOW_NS || t.elapsed() >= max_wait {
            return Some(ns);
        }
        std::thread::sleep(every);
    }
}

/// How often the host took a CPU away: gaps in a tight clock-reading loop pinned to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Stalls {
    pub cpu: usize,
    pub secs: f64,
    /// Gaps longer than 100 µs and than 1 ms, and the longest, in µs.
    pub over_100us: u64,
    pub over_1ms: u64,
    pub max_us: f64,
}

impl core::fmt::Display for Stalls {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "CPU {}: {} stalls > 100 us, {} > 1 ms, longest {:.0} us in {:.1} s",
            self.cpu, self.over_100us, self.over_1ms, self.max_us, self.secs
        )
    }
}

/// Measures [`Stalls`] on every CPU in `cpus` at once (each busy, as in a benchmark) for
/// `dur`.
pub fn stalls(cpus: &[usize], dur: Duration) -> Vec<Stalls> {
    let hs: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            std::thread::spawn(move || {
                let mut st = Stalls {
                    cpu,
                    secs: dur.as_secs_f64(),
                    ..Default::default()
                };
                if !pin(cpu) {
                    st.max_us = f64::NAN;
                    return st;
                }
                let start = Instant::now();
                let mut prev = start;
                let mut max = Duration::ZERO;
                while prev - start < dur {
                    let now = Instant::now();
                    let gap = now - prev;
                    if gap > Duration::from_micros(100) {
                        st.over_100us += 1;
                        if gap > Duration::from_millis(1) {
                            st.over_1ms += 1;
                        }
                    }
                    max = max.max(gap);
                    prev = now;
                }
                st.max_us = max.as_secs_f64() * 1e6;
                st
            })
        })
        .collect();
    hs.into_iter().filter_map(|h| h.join().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(Placement::of(60.0, 70.0), Placement::Near);
        assert_eq!(Placement::of(175.0, 200.0), Placement::Mid);
        assert_eq!(Placement::of(330.0, 390.0), Placement::Far);
        assert_eq!(Placement::of(60.0, 330.0), Placement::Mixed);
        assert_eq!(Placement::of(100.0, 180.0), Placement::Mixed);
        assert_eq!(Placement::of(f64::NAN, 60.0), Placement::Mixed);
    }

    #[test]
    fn stalls_are_counted_per_cpu() {
        let v = stalls(&[0], Duration::from_millis(50));
        assert_eq!(v.len(), 1);
        assert!(
            v[0].max_us > 0.0 && v[0].over_1ms <= v[0].over_100us,
            "{:?}",
            v[0]
        );
        assert!(v[0].to_string().contains("CPU 0"));
    }

    #[test]
    fn a_preempting_probe_measures_through_a_busy_cpu() {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        if cpus < 2 || !can_preempt() {
            println!("skipped: needs two CPUs and real-time priority (root or CAP_SYS_NICE)");
            return;
        }
        // A normal thread spinning on CPU 1, as a polling DUT does between trials.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin(1);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        let ns: Vec<f64> = (0..3)
            .map(|_| probe_preempting(0, 1, 2000).unwrap())
            .collect();
        stop.store(true, Ordering::Relaxed);
        spin.join().unwrap();
        // The far state is ~400 ns; a probe that waited for the spinner's time slice (up to
        // a scheduler tick, 4 ms) would read microseconds per hop at 2000 hops.
        println!("preempting probe beside a busy thread: {ns:?} ns");
        assert!(ns.iter().all(|&x| x > 0.0 && x < 600.0), "{ns:?}");
    }

    #[test]
    fn probe_measures_something_plausible() {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let ns = probe(0, 1 % cpus, 2000);
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
    }
}
