//! The data path: four queue kinds, one per (role, direction).
//!
//! | role      | ring | queue          | what it does                                           |
//! |-----------|------|----------------|--------------------------------------------------------|
//! | primary   | S2M  | [`PrimaryRx`]  | validates each descriptor, copies into local buffers   |
//! | primary   | M2S  | [`PrimaryTx`]  | copies local buffers into buffers the peer posted      |
//! | secondary | S2M  | [`SecondaryTx`]| writes frames in place into its own shared buffers     |
//! | secondary | M2S  | [`SecondaryRx`]| reads frames in place, then reposts the buffers        |
//!
//! The primary trusts nothing in the ring: each descriptor is snapshotted once and checked
//! (region index, `offset + length` against the mapped size in u64, length > 0, whole chains);
//! the distance between the peer's index and ours is checked against the ring size, and a
//! peer that breaks that rule is faulted: the control thread then sends DISCONNECT with the
//! reason. Bad packets are dropped and counted by reason; they never stall the queue.
//!
//! One file per queue kind (`primary_rx`, `primary_tx`, `secondary_tx`, `secondary_rx`), and
//! what they share: `counters`, `interrupt` (the eventfd and `MASK_INT`), `regions` (the peer's
//! regions and single copy's view of them) and `copy` (batches for a copy engine).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::ring::Ring;

pub use counters::{QueueCounters, QueueStats};
pub use primary_rx::PrimaryRx;
pub use primary_tx::{PrimaryTx, TxRun};
pub(crate) use regions::Regions;
pub use regions::{PeerMemory, PeerTable, Peers};
pub use secondary_rx::{RxPacket, SecondaryRx};
pub(crate) use secondary_tx::SlotBuffers;
pub use secondary_tx::{PacketWriter, SecondaryTx};

/// Link state shared by the control thread and the queues of one connection.
#[derive(Debug, Default)]
pub struct Link {
    up: AtomicBool,
    fault: Mutex<Option<String>>,
}

impl Link {
    pub(crate) fn new_up() -> Arc<Link> {
        Arc::new(Link {
            up: AtomicBool::new(true),
            fault: Mutex::new(None),
        })
    }

    #[inline]
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    pub(crate) fn set_down(&self) {
        self.up.store(false, Ordering::Release);
    }

    /// Marks the peer as broken; the first reason wins and is sent in DISCONNECT.
    pub fn fault(&self, reason: String) {
        let mut f = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(reason);
        }
        self.set_down();
    }

    pub(crate) fn take_fault(&self) -> Option<String> {
        self.fault.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The connection is gone; drop the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memif link is down")]
pub struct LinkDown;

/// What every queue has: its ring, interrupt eventfd, link and counters.
#[derive(Debug)]
pub(crate) struct QueueBase {
    pub ring: Ring,
    pub irq: OwnedFd,
    pub link: Arc<Link>,
    pub counters: Arc<QueueCounters>,
    pub index: u16,
    pub interrupt_mode: bool,
}

impl QueueBase {
    pub(crate) fn new(ring: Ring, irq: OwnedFd, link: Arc<Link>, index: u16) -> QueueBase {
        QueueBase {
            ring,
            irq,
            link,
            counters: Arc::default(),
            index,
            interrupt_mode: false,
        }
    }
}

macro_rules! queue_common {
    ($t:ty) => {
        impl $t {
            /// Queue (ring) index within its direction.
            pub fn index(&self) -> u16 {
                self.base.index
            }
            pub fn ring_size(&self) -> u16 {
                self.base.ring.size()
            }
            pub fn counters(&self) -> &::std::sync::Arc<$crate::queue::QueueCounters> {
                &self.base.counters
            }
            pub fn stats(&self) -> $crate::queue::QueueStats {
                self.base.counters.snapshot()
            }
            pub fn is_up(&self) -> bool {
                self.base.link.is_up()
            }
            /// The eventfd this queue's peer signals (or that we signal, for tx queues).
            pub fn interrupt_fd(&self) -> ::std::os::fd::BorrowedFd<'_> {
                ::std::os::fd::AsFd::as_fd(&self.base.irq)
            }
        }
    };
}

/// The consumer side of both receive queues: interrupt mode, sleeping, arming; "work" is a
/// published packet or a link gone down.
macro_rules! rx_common {
    ($t:ty) => {
        impl $t {
            fn has_work(&self) -> bool {
                matches!(self.pending(), Ok(n) if n > 0) || !self.is_up()
            }

            pub fn set_interrupt_mode(&mut self, on: bool) {
                self.base.set_interrupt_mode(on);
            }

            /// Sleeps until the peer signals packets or `timeout_ms` passes; true if packets
            /// wait.
            pub fn wait(&self, timeout_ms: i32) -> bool {
                self.base.wait(timeout_ms, || self.has_work())
            }

            /// For a worker sleeping on many queues (see `interrupt_fd`): `arm(true)` unmasks
            /// the peer's signals and returns true if packets already wait (or the link is
            /// down); `arm(false)` after the sleep clears the eventfd and masks signals again.
            pub fn arm(&self, on: bool) -> bool {
                self.base.arm(on, || self.has_work())
            }
        }
    };
}

// After the macros, which the queue modules use.
mod copy;
mod counters;
mod interrupt;
mod primary_rx;
mod primary_tx;
mod regions;
mod secondary_rx;
mod secondary_tx;
