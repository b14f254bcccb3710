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
//!
//! With `VECLANE_ABTIME_CLOCK=N` as well, the mode follows bit N of the time-stamp counter
//! instead of the call count (2^N cycles a phase; 24 is a few milliseconds): every process on
//! the machine switches at the same moments. A loop of another process, the consumer of what
//! the changed loop wrote, is then timed against the same switch, and a cost the memory
//! charges later (a non-temporal store's write-back) falls in the mode that caused it except
//! near a switch. Its change need not be wired to its timer: it reads on/off near 1 unless
//! the other process's change reaches it.

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
            let t0 = now();
            AbCall {
                on: mode(call, t0, clock_bit()),
                call,
                t0,
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

/// Whether call number `call`, started at `t0`, has the change on: by the call count, or by
/// bit `clock` of the clock.
#[cfg(feature = "abtime")]
#[inline(always)]
fn mode(call: u64, t0: u64, clock: Option<u32>) -> bool {
    match clock {
        Some(bit) => (t0 >> bit) & 1 == 1,
        None => (call / SPAN) % 2 == 1,
    }
}

/// `VECLANE_ABTIME_CLOCK`, read once: the clock bit that switches the mode (10 to 40), or
/// none (switch by calls). Any other value is ignored with a line on stderr.
#[cfg(feature = "abtime")]
fn clock_bit() -> Option<u32> {
    static BIT: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *BIT.get_or_init(|| {
        let v = std::env::var("VECLANE_ABTIME_CLOCK").ok()?;
        match v.parse::<u32>() {
            Ok(b) if (10..=40).contains(&b) => Some(b),
            _ => {
                eprintln!("VECLANE_ABTIME_CLOCK={v}: not a bit from 10 to 40; switching by calls");
                None
            }
        }
    })
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

    #[cfg(feature = "abtime")]
    #[test]
    fn by_clock_the_mode_is_the_clock_s_bit_whatever_the_call() {
        for call in [0, 1, SPAN, 3 * SPAN + 5] {
            assert!(!mode(call, 0b0111_1111, Some(8)));
            assert!(mode(call, 0b1_0000_0000, Some(8)));
            assert!(mode(call, 0b1_1111_1111, Some(8)));
            assert!(!mode(call, 0b10_0000_0000, Some(8)));
        }
        // Without a clock bit, the calls decide.
        assert!(!mode(SPAN - 1, 1 << 8, None));
        assert!(mode(SPAN, 0, None));
    }
}
