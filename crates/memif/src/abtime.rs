//! In-process A/B timing of a hot loop, for changes that trade instructions for memory stalls
//! (a prefetch, another copy): `--cost` cannot see them, and whole runs of two builds on a
//! shared host cannot resolve a few nanoseconds, because its memory speed changes within
//! seconds. An [`AbTimer`] switches its loop's change on and off every [`SPAN`] calls inside
//! one process, so that both modes meet the same host milliseconds apart, and keeps cycles
//! and packets per mode.
//!
//! Only with the `abtime` feature (`cargo build --release -p veclane --features
//! memif/abtime`); without it [`AbTimer::start`] always says "on" and nothing is timed, so the
//! change under test is simply kept. With it, and `VECLANE_ABTIME_DIR` set, every process
//! writes `NAME-PID` there every 4096 calls: cycles and packets with the change off, then on.
//! `scripts/abtime-report` prints each file's ratio (see CONTRIBUTING.md).

#[cfg(feature = "abtime")]
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Calls in a row in one mode.
pub const SPAN: u64 = 16;

/// One loop's timer; a `static` beside the loop.
#[derive(Debug)]
pub struct AbTimer {
    #[cfg(feature = "abtime")]
    name: &'static str,
    #[cfg(feature = "abtime")]
    calls: AtomicU64,
    /// Cycles and packets with the change off, then on.
    #[cfg(feature = "abtime")]
    acc: [AtomicU64; 4],
}

/// One timed call: whether the change is on in it.
#[derive(Debug, Clone, Copy)]
pub struct AbCall {
    pub on: bool,
    #[cfg(feature = "abtime")]
    call: u64,
    #[cfg(feature = "abtime")]
    t0: u64,
}

impl AbTimer {
    #[allow(unused_variables)]
    pub const fn new(name: &'static str) -> AbTimer {
        AbTimer {
            #[cfg(feature = "abtime")]
            name,
            #[cfg(feature = "abtime")]
            calls: AtomicU64::new(0),
            #[cfg(feature = "abtime")]
            acc: [const { AtomicU64::new(0) }; 4],
        }
    }

    /// Starts a call of the loop. Without the feature: always on, nothing timed.
    #[inline(always)]
    pub fn start(&self) -> AbCall {
        #[cfg(feature = "abtime")]
        {
            let call = self.calls.fetch_add(1, Relaxed);
            AbCall {
                on: (call / SPAN) % 2 == 1,
                call,
                t0: now(),
            }
        }
        #[cfg(not(feature = "abtime"))]
        AbCall { on: true }
    }

    /// Ends the call `c`, which handled `packets` packets.
    #[inline(always)]
    #[allow(unused_variables)]
    pub fn finish(&self, c: AbCall, packets: usize) {
        #[cfg(feature = "abtime")]
        {
            let t = now().wrapping_sub(c.t0);
            if packets != 0 {
                let m = usize::from(c.on) * 2;
                self.acc[m].fetch_add(t, Relaxed);
                self.acc[m + 1].fetch_add(packets as u64, Relaxed);
            }
            if c.call.is_multiple_of(4096) {
                self.write();
            }
        }
    }

    /// Cycles and packets with the change off, then on (all zero without the feature).
    pub fn totals(&self) -> [u64; 4] {
        #[cfg(feature = "abtime")]
        {
            [0, 1, 2, 3].map(|i| self.acc[i].load(Relaxed))
        }
        #[cfg(not(feature = "abtime"))]
        [0; 4]
    }

    #[cfg(feature = "abtime")]
    #[cold]
    fn write(&self) {
        static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
        let Some(dir) = DIR.get_or_init(|| std::env::var_os("VECLANE_ABTIME_DIR").map(Into::into))
        else {
            return;
        };
        let [a, b, c, d] = self.totals();
        let _ = std::fs::write(
            dir.join(format!("{}-{}", self.name, std::process::id())),
            format!("{a} {b} {c} {d}\n"),
        );
    }
}

/// The time-stamp counter where there is one, else nanoseconds.
#[cfg(feature = "abtime")]
#[inline(always)]
fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions; it only reads the time-stamp counter.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(feature = "abtime"))]
    #[test]
    fn without_the_feature_the_change_is_always_on_and_nothing_is_timed() {
        static T: AbTimer = AbTimer::new("t");
        for _ in 0..100 {
            let c = T.start();
            assert!(c.on);
            T.finish(c, 3);
        }
        assert_eq!(T.totals(), [0; 4]);
    }

    #[cfg(feature = "abtime")]
    #[test]
    fn the_change_takes_turns_every_span_and_each_mode_counts_its_own() {
        static T: AbTimer = AbTimer::new("t");
        let mut modes = Vec::new();
        for _ in 0..4 * SPAN {
            let c = T.start();
            modes.push(c.on);
            // Off calls handle 1 packet, on calls 2: each mode's count must be its own.
            T.finish(c, if c.on { 2 } else { 1 });
        }
        let expect: Vec<bool> = (0..4 * SPAN).map(|i| (i / SPAN) % 2 == 1).collect();
        assert_eq!(modes, expect);
        let [off_t, off_n, on_t, on_n] = T.totals();
        assert_eq!((off_n, on_n), (2 * SPAN, 4 * SPAN));
        assert!(off_t > 0 && on_t > 0, "{off_t} {on_t}");
    }
}
