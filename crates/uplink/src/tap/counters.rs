//! A tap queue's counters: one writer (the queue's worker), any reader, and plain copies.

use std::sync::atomic::{AtomicU64, Ordering};

/// A receive queue's counters: one writer (the queue's worker), any reader.
#[derive(Debug, Default)]
pub struct RxCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames read and dropped because the pool had too few buffers.
    pub no_buffer: AtomicU64,
    /// Segmentation-offload super-frames that are not TCP/IPv4, or cut into segments under
    /// 536 bytes, dropped (never expected: only TCP/IPv4 segmentation is announced).
    pub gso: AtomicU64,
    /// Frames shorter than an Ethernet header or with an offload header pointing outside
    /// them, dropped.
    pub bad_frame: AtomicU64,
    /// Checksums the pod's stack left to offload, completed here.
    pub csum_completed: AtomicU64,
    /// TCP segmentation-offload super-frames taken whole.
    pub super_frames: AtomicU64,
    /// Reads that failed for another reason than an empty queue.
    pub read_errors: AtomicU64,
}

/// A plain copy of [`RxCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxStats {
    pub packets: u64,
    pub bytes: u64,
    pub no_buffer: u64,
    pub gso: u64,
    pub bad_frame: u64,
    pub csum_completed: u64,
    pub super_frames: u64,
    pub read_errors: u64,
}

impl RxCounters {
    pub fn snapshot(&self) -> RxStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RxStats {
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            no_buffer: l(&self.no_buffer),
            gso: l(&self.gso),
            bad_frame: l(&self.bad_frame),
            csum_completed: l(&self.csum_completed),
            super_frames: l(&self.super_frames),
            read_errors: l(&self.read_errors),
        }
    }
}

/// A transmit queue's counters: one writer (the queue's worker), any reader.
#[derive(Debug, Default)]
pub struct TxCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames shorter than an Ethernet header, or whose external part could not be read.
    pub malformed: AtomicU64,
    /// Writes the device refused for lack of room (`EAGAIN`, `ENOBUFS`).
    pub tx_no_room: AtomicU64,
    /// Frames not sent because the device was down (`EIO`) or gone.
    pub link_down: AtomicU64,
    /// Writes that failed for another reason.
    pub write_errors: AtomicU64,
}

/// A plain copy of [`TxCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TxStats {
    pub packets: u64,
    pub bytes: u64,
    pub malformed: u64,
    pub tx_no_room: u64,
    pub link_down: u64,
    pub write_errors: u64,
}

impl TxCounters {
    pub fn snapshot(&self) -> TxStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TxStats {
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            malformed: l(&self.malformed),
            tx_no_room: l(&self.tx_no_room),
            link_down: l(&self.link_down),
            write_errors: l(&self.write_errors),
        }
    }
}
