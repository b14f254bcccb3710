//! Per-queue counters: written by the queue's one owner (a worker), read by anyone (the
//! control thread, through the `Arc` it kept before handing the queue over).

use std::sync::atomic::{AtomicU64, Ordering};

#[inline]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    // Single writer: a load and a store are enough and cost no locked instruction.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// A receive queue's counters. One thread writes (the queue's owner), any thread reads.
#[derive(Debug, Default)]
pub struct RxCounters {
    /// Frames delivered into pool buffers.
    pub packets: AtomicU64,
    /// Their bytes (a restored VLAN tag included).
    pub bytes: AtomicU64,
    /// Frames dropped because the pool had too few buffers; their ring space was released.
    pub no_buffer: AtomicU64,
    /// Frames the kernel cut short (`tp_snaplen < tp_len`: larger than a ring block allows,
    /// or than a slot while the socket's receive buffer had no room for a copy), dropped. A
    /// UDP super-packet counts as the datagrams it stood for, here and in `no_buffer`.
    pub truncated: AtomicU64,
    /// Segmentation-offload super-frames (TCP ones from a local stack or GRO, UDP ones we
    /// cannot cut), dropped. UDP super-packets are cut into their datagrams, which `packets`
    /// counts.
    pub gso: AtomicU64,
    /// Frames whose L4 checksum the sender had left to offload, completed here.
    pub csum_completed: AtomicU64,
    /// Frames whose ring header was inconsistent (offsets outside the block, a bad offload
    /// header): dropped, and the rest of their block skipped. Never expected.
    pub bad_frame: AtomicU64,
    /// Frames the kernel dropped because the ring was full (PACKET_STATISTICS `tp_drops`).
    pub kernel_drops: AtomicU64,
    /// Times the kernel found every block in user hands and froze the queue
    /// (`tp_freeze_q_cnt`).
    pub kernel_freezes: AtomicU64,
}

/// A plain copy of [`RxCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxStats {
    pub packets: u64,
    pub bytes: u64,
    pub no_buffer: u64,
    pub truncated: u64,
    pub gso: u64,
    pub csum_completed: u64,
    pub bad_frame: u64,
    pub kernel_drops: u64,
    pub kernel_freezes: u64,
}

impl RxCounters {
    /// The counters now. The kernel's two lag: the owner folds them in every few thousand
    /// polls and before its worker sleeps ([`crate::af_packet::RxQueue::refresh_kernel_stats`]).
    pub fn snapshot(&self) -> RxStats {
        RxStats {
            packets: load(&self.packets),
            bytes: load(&self.bytes),
            no_buffer: load(&self.no_buffer),
            truncated: load(&self.truncated),
            gso: load(&self.gso),
            csum_completed: load(&self.csum_completed),
            bad_frame: load(&self.bad_frame),
            kernel_drops: load(&self.kernel_drops),
            kernel_freezes: load(&self.kernel_freezes),
        }
    }
}

/// A transmit queue's counters. One thread writes (the queue's owner), any thread reads.
#[derive(Debug, Default)]
pub struct TxCounters {
    /// Frames written to the ring for the kernel to send (`link_down` counts those of them
    /// later discarded unsent).
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames larger than a tx frame slot or than the MTU plus the Ethernet header (plus 4
    /// for an 802.1Q-tagged frame, as the kernel allows), dropped.
    pub oversize: AtomicU64,
    /// Frames shorter than an Ethernet header, or whose external segment could not be read,
    /// dropped.
    pub malformed: AtomicU64,
    /// Sends that found the ring full (or too few free slots for the whole batch).
    pub ring_full: AtomicU64,
    /// Frames a send could not place because of `ring_full` (not consumed: the caller drops
    /// or retries them).
    pub tx_no_room: AtomicU64,
    /// Slots the kernel returned with `TP_STATUS_WRONG_FORMAT` (older kernels; current ones
    /// skip bad frames silently under PACKET_LOSS, which is why frames are checked first).
    pub wrong_format: AtomicU64,
    /// Kicks (`send`) that failed for a passing reason (no socket buffer, device busy); the
    /// frames stay queued and the next kick retries them.
    pub kick_errors: AtomicU64,
    /// Queued frames discarded because the interface went down or vanished.
    pub link_down: AtomicU64,
    /// UDP super-packets sent (runs of one flow's datagrams, in one system call and one
    /// skb); their datagrams are in `packets`.
    pub gso_sends: AtomicU64,
    /// Datagrams that left in them.
    pub gso_segments: AtomicU64,
    /// Runs the kernel would not take as a super-packet (no socket buffer, or the offload
    /// refused, after which the queue sends plainly); sent through the ring instead.
    pub gso_refused: AtomicU64,
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
    pub wrong_format: u64,
    pub kick_errors: u64,
    pub link_down: u64,
    pub gso_sends: u64,
    pub gso_segments: u64,
    pub gso_refused: u64,
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
            wrong_format: load(&self.wrong_format),
            kick_errors: load(&self.kick_errors),
            link_down: load(&self.link_down),
            gso_sends: load(&self.gso_sends),
            gso_segments: load(&self.gso_segments),
            gso_refused: load(&self.gso_refused),
        }
    }
}
