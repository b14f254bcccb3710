//! Cheap timestamps for per-node accounting: monotonic nanoseconds, read once per node call
//! (per frame, never per packet).

use std::sync::OnceLock;

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
}
