//! Per-queue counters: written by the queue's one owner thread, read by anyone.

use std::sync::atomic::{AtomicU64, Ordering};

/// Per-queue counters. One thread writes (the queue's owner), any thread reads.
#[derive(Debug, Default)]
pub struct QueueCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Descriptor pointing outside a region, zero length, or longer than allowed.
    pub drop_bad_desc: AtomicU64,
    /// Whole packet larger than `max_frame`.
    pub drop_oversize: AtomicU64,
    /// No local buffer for a received packet (it stays in the ring).
    pub no_buffer: AtomicU64,
    /// A send found the ring full (or too few slots for the next packet).
    pub ring_full: AtomicU64,
    /// Packets a send could not place because of `ring_full`.
    pub tx_no_room: AtomicU64,
    pub interrupts_sent: AtomicU64,
    pub interrupts_received: AtomicU64,
}

#[inline]
pub(super) fn bump(c: &AtomicU64, n: u64) {
    // Single writer: a load and a store are enough and cost no locked instruction.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// A plain copy of [`QueueCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    pub packets: u64,
    pub bytes: u64,
    pub drop_bad_desc: u64,
    pub drop_oversize: u64,
    pub no_buffer: u64,
    pub ring_full: u64,
    pub tx_no_room: u64,
    pub interrupts_sent: u64,
    pub interrupts_received: u64,
}

impl QueueCounters {
    pub fn snapshot(&self) -> QueueStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        QueueStats {
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            drop_bad_desc: l(&self.drop_bad_desc),
            drop_oversize: l(&self.drop_oversize),
            no_buffer: l(&self.no_buffer),
            ring_full: l(&self.ring_full),
            tx_no_room: l(&self.tx_no_room),
            interrupts_sent: l(&self.interrupts_sent),
            interrupts_received: l(&self.interrupts_received),
        }
    }
}
