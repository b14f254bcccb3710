//! Traffic generation and measurement over memif (and AF_PACKET on Linux interfaces).
//!
//! `trafgen` owns the generator's frames (UDP/IPv4 with a probe: stream, sequence number and
//! send timestamp in the payload), rate control, and the sink's accounting: packets, bytes,
//! loss and reordering by sequence number, latency in a log-linear histogram. It runs over our
//! memif queues in either role: as secondary it writes frames in place into shared memory
//! (zero-copy); as primary it receives through the same copy path the switch uses. It never
//! parses command lines or prints progress (that is the `veclane` front end).

#![forbid(unsafe_code)]

pub mod frame;
pub mod run;
pub mod stats;

pub use frame::{FrameSpec, Probe, VxlanSpec};
pub use run::{GenConfig, KernelPort, Port, Role, Session, run};
pub use stats::{GenReport, RxStats, Sample, StreamInfo};
pub use wire::MacAddr;

/// Nanoseconds on CLOCK_MONOTONIC: comparable between processes on one machine.
#[inline]
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(Into::into)
}
