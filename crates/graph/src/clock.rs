//! Cheap timestamps for per-node accounting, read once per node call (per frame, never per
//! packet), and monotonic nanoseconds for the nodes' timers.
//!
//! The runtime charges each node call with the difference of two [`stamp`]s. On x86_64, when
//! Linux itself keeps time with the CPU's time-stamp counter (its clocksource is `tsc`, which
//! it chooses only when the counter runs at a constant rate and in step on every CPU), a stamp
//! is the counter as `rdtsc` reads it: about 10 ns a read on this project's machines, where
//! the vDSO's `clock_gettime` takes about 25 and a pass through the graph reads the clock
//! once per node it runs. Elsewhere, and on any other clocksource, a stamp is [`ticks`].
//! [`stamp_ns`] turns a difference of stamps into nanoseconds, by the rate the counter has
//! kept against the monotonic clock since the process first looked at it.

use std::sync::OnceLock;
use std::time::Duration;

use rustix::time::{ClockId, clock_gettime};

/// The monotonic clock in nanoseconds (the vDSO's `clock_gettime`, without `Instant`'s
/// conversions through `Duration`).
#[inline]
fn now() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// Nanoseconds since the first call in this process.
#[inline]
pub fn ticks() -> u64 {
    static START: OnceLock<u64> = OnceLock::new();
    let start = *START.get_or_init(now);
    now().wrapping_sub(start)
}

/// Where the time-stamp counter stood against the monotonic clock when the process first
/// asked for a stamp, if stamps are the counter's.
#[derive(Debug, Clone, Copy)]
struct Origin {
    counter: u64,
    ns: u64,
}

/// `Some` when stamps read the time-stamp counter, decided on the first call.
fn origin() -> Option<Origin> {
    static ORIGIN: OnceLock<Option<Origin>> = OnceLock::new();
    *ORIGIN.get_or_init(|| {
        counter_is_linux_clock().then(|| {
            let ns = ticks();
            Origin {
                counter: counter().unwrap_or(0),
                ns,
            }
        })
    })
}

/// Whether Linux keeps its own time with the time-stamp counter: then the counter is
/// constant-rate and in step across CPUs, as the kernel checked before choosing it.
fn counter_is_linux_clock() -> bool {
    counter().is_some()
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc")
}

#[inline(always)]
fn counter() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` reads the time-stamp counter into registers: no memory, no
        // precondition (every x86_64 CPU has it; a kernel that forbade it would fault the
        // process, which no Linux does by default).
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// A timestamp for differences only: the time-stamp counter, or [`ticks`] (see the module's
/// introduction). [`stamp_ns`] converts a difference.
#[inline]
pub fn stamp() -> u64 {
    match origin() {
        Some(_) => counter().unwrap_or(0),
        None => ticks(),
    }
}

/// Nanoseconds per [`stamp`]: 1 when stamps are [`ticks`]; with the counter, the rate it has
/// kept against the monotonic clock since the first stamp, the closer the longer the process
/// has run (a call within a millisecond of the first stamp waits out that millisecond, so
/// that the rate is never taken over less). One rate serves a whole listing of counters.
pub fn ns_per_stamp() -> f64 {
    let Some(o) = origin() else {
        return 1.0;
    };
    let mut ns = ticks().saturating_sub(o.ns);
    if ns < 1_000_000 {
        std::thread::sleep(Duration::from_nanos(1_000_000 - ns));
        ns = ticks().saturating_sub(o.ns);
    }
    let counted = counter().unwrap_or(0).wrapping_sub(o.counter);
    if counted == 0 {
        return 1.0;
    }
    ns as f64 / counted as f64
}

/// The nanoseconds a difference of two [`stamp`]s spans, at [`ns_per_stamp`]'s rate.
pub fn stamp_ns(d: u64) -> u64 {
    (d as f64 * ns_per_stamp()) as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn ticks_count_nanoseconds_from_the_first_call() {
        // Read inside an interval `Instant` measures on the same clock: never longer.
        let t = std::time::Instant::now();
        let a = super::ticks();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = super::ticks();
        let real = t.elapsed().as_nanos() as u64;
        assert!(b > a && b - a >= 20_000_000, "{a} {b}");
        assert!(b - a <= real, "{} against {real}", b - a);
    }

    #[test]
    fn stamps_convert_to_the_nanoseconds_between_them() {
        eprintln!(
            "stamps read the time-stamp counter: {}",
            super::origin().is_some()
        );
        let t = std::time::Instant::now();
        let a = super::stamp();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = super::stamp();
        let real = t.elapsed().as_nanos() as u64;
        let ns = super::stamp_ns(b.wrapping_sub(a));
        // The rate is an estimate over the test's own run so far: allow it 2%.
        assert!(ns >= 19_600_000, "{ns} ns for a sleep of 20 ms");
        assert!(
            ns <= real + real / 50,
            "{ns} ns against {real} measured around it"
        );
    }
}
