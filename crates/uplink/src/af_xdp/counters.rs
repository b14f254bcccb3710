//! Per-queue counters of an AF_XDP uplink: written by the queue's one owner (a worker), read
//! by anyone (the control thread, through the `Arc` it kept before handing the queue over).
//! Named as the AF_PACKET uplink's where they mean the same.

use std::sync::atomic::{AtomicU64, Ordering};

fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// A receive queue's counters.
#[derive(Debug, Default)]
pub struct RxCounters {
    /// Frames delivered into pool buffers.
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames dropped because the pool had too few buffers; their UMEM frames went back to
    /// the fill ring.
    pub no_buffer: AtomicU64,
    /// Descriptors whose address or length lay outside our receive frames, dropped. Never
    /// expected: the kernel is trusted, but checked.
    pub bad_desc: AtomicU64,
    /// Frames the kernel dropped at this socket for want of a fill buffer or because they do
    /// not fit a UMEM frame (`XDP_STATISTICS` `rx_dropped`; includes `fill_empty`).
    pub kernel_drops: AtomicU64,
    /// Frames the kernel dropped because our rx ring was full (`rx_ring_full`).
    pub rx_ring_full: AtomicU64,
    /// Times the kernel found the fill ring empty (`rx_fill_ring_empty_descs`): the worker
    /// was too slow to give frames back.
    pub fill_empty: AtomicU64,
    /// Descriptors the kernel refused on the rx or fill ring (`rx_invalid_descs`).
    pub invalid_descs: AtomicU64,
}

/// A plain copy of [`RxCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxStats {
    pub packets: u64,
    pub bytes: u64,
    pub no_buffer: u64,
    pub bad_desc: u64,
    pub kernel_drops: u64,
    pub rx_ring_full: u64,
    pub fill_empty: u64,
    pub invalid_descs: u64,
}

impl RxCounters {
    /// The counters now. The kernel's four lag: the owner reads them every few thousand
    /// polls and before its worker sleeps ([`super::RxQueue::refresh_kernel_stats`]).
    pub fn snapshot(&self) -> RxStats {
        RxStats {
            packets: load(&self.packets),
            bytes: load(&self.bytes),
            no_buffer: load(&self.no_buffer),
            bad_desc: load(&self.bad_desc),
            kernel_drops: load(&self.kernel_drops),
            rx_ring_full: load(&self.rx_ring_full),
            fill_empty: load(&self.fill_empty),
            invalid_descs: load(&self.invalid_descs),
        }
    }
}

/// A transmit queue's counters.
#[derive(Debug, Default)]
pub struct TxCounters {
    /// Frames placed on the tx ring for the kernel to send.
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames larger than a UMEM frame or than the MTU plus the Ethernet header (plus 4 for
    /// an 802.1Q-tagged frame), dropped.
    pub oversize: AtomicU64,
    /// Frames shorter than an Ethernet header, or whose external segment could not be read,
    /// dropped.
    pub malformed: AtomicU64,
    /// Sends that found no free transmit frame (or too few for the whole batch).
    pub ring_full: AtomicU64,
    /// Frames a send could not place because of `ring_full` (not consumed: the caller drops
    /// or retries them).
    pub tx_no_room: AtomicU64,
    /// Kicks (`sendto`) that failed for a passing reason (the device dropped a frame or was
    /// busy, no socket buffer); queued frames stay queued and the next send kicks again.
    pub kick_errors: AtomicU64,
    /// Frames handed to a send while the interface was down or gone, not placed.
    pub link_down: AtomicU64,
    /// Completion addresses outside our transmit frames, ignored. Never expected.
    pub bad_completion: AtomicU64,
    /// Descriptors the kernel refused on the tx ring (`tx_invalid_descs`).
    pub invalid_descs: AtomicU64,
}

/// A plain copy of [`TxCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TxStats {
    pub packets: u64,
    pub bytes: u64,
    pub oversize: u64,
    pub malformed: u64,
    pub ring_full: u64,
    pub tx_no_room: u64,
    pub kick_errors: u64,
    pub link_down: u64,
    pub bad_completion: u64,
    pub invalid_descs: u64,
}

impl TxCounters {
    pub fn snapshot(&self) -> TxStats {
        TxStats {
            packets: load(&self.packets),
            bytes: load(&self.bytes),
            oversize: load(&self.oversize),
            malformed: load(&self.malformed),
            ring_full: load(&self.ring_full),
            tx_no_room: load(&self.tx_no_room),
            kick_errors: load(&self.kick_errors),
            link_down: load(&self.link_down),
            bad_completion: load(&self.bad_completion),
            invalid_descs: load(&self.invalid_descs),
        }
    }
}
