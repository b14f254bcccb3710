//! Cheap timestamps for per-node accounting: monotonic nanoseconds, read once per node call
//! (per frame, never per packet).

use std::sync::OnceLock;
use std::time::Instant;

/// Nanoseconds since the first call in this process.
#[inline]
pub fn ticks() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
