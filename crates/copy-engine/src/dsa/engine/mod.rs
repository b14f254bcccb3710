//! The DSA backend: batches of copies become hardware descriptors
//! handed to a work queue through a [`Portal`], and retire in ticket order when the device's
//! completion records say so.
//!
//! - Memory: one arena of `2 * ring` descriptors (a batch's list never wraps: it starts in
//!   the first half and may run into the second, as DPDK's), a completion record per
//!   descriptor (written by the device only on failure: no RCR in a batch), and one record
//!   per work-queue credit for the top-level descriptors (written always). Both are raw
//!   allocations the device writes behind our back: they are only ever read through raw
//!   pointers, the status byte with Acquire ordering.
//! - `submit`: copies shorter than `inline_max` are made on the CPU at once (counted as CPU
//!   copies); the rest become memmove descriptors, split at the queue's `max_transfer_size`,
//!   one top-level memmove if there is one, else batches of at most `max_batch_size`, one
//!   credit each. Without enough credits or ring room it returns `Full`, having done nothing.
//! - `poll`: the oldest batch retires when its records are written; a failure is finished on
//!   the CPU from the records (a page fault: the rest after `bytes_completed`; a batch whose
//!   list could not be read: the descriptors from `descs_completed` on; anything else: the
//!   whole copy again), counted. A programming or hardware error trips the breaker: from then
//!   on every batch is copied on the CPU, and the reason is kept. Tickets retire strictly in
//!   order, a CPU-only one behind any older hardware one.
//! - The watchdog: a batch whose record is not written within `timeout` is suspect; the
//!   device might still write its destinations, so nothing is redone until `redo_after`
//!   more has passed; then it is copied on the CPU, retired, and the breaker trips.

/// Finishing on the CPU what the device did not do.
mod recover;
/// Retiring batches in ticket order; the watchdog.
mod retire;
/// Turning a batch of copies into descriptors.
mod submit;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::hw::{CompletionRecord, Descriptor};
use super::model::Portal;
use crate::{Caps, Kind, Stats, Ticket};

/// How the engine uses its work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DsaConfig {
    /// Copies shorter than this are made on the CPU at submit time.
    pub inline_max: u32,
    /// Descriptors in the arena's ring (a power of two).
    pub ring: usize,
    /// The work queue's depth (`size`): top-level descriptors in flight at most.
    pub credits: usize,
    /// Descriptors in one batch descriptor; 1 sends every copy as its own descriptor (the
    /// `write()` path, which takes no batches).
    pub max_batch_size: u32,
    pub max_transfer_size: u32,
    /// A record not written after this makes the batch suspect.
    pub timeout: Duration,
    /// And this much more makes the engine redo it on the CPU and trip the breaker.
    pub redo_after: Duration,
}

impl Default for DsaConfig {
    fn default() -> Self {
        DsaConfig {
            inline_max: 256,
            // A burst of 256 jumbo frames is 1280 pieces of 2 KiB buffers: it must fit.
            ring: 4096,
            credits: 32,
            max_batch_size: 128,
            max_transfer_size: 2 << 20,
            timeout: Duration::from_millis(10),
            redo_after: Duration::from_secs(1),
        }
    }
}

/// What only the DSA engine counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DsaStats {
    /// Top-level descriptors submitted (a batch counts one).
    pub descriptors: u64,
    /// Hardware copies (descriptors) inside them.
    pub hw_pieces: u64,
    /// Copies made inline for being short.
    pub inline: u64,
    /// Hardware copies finished or redone on the CPU after a fault or an error.
    pub recovered: u64,
    /// Batches whose record came too late: redone on the CPU.
    pub watchdog: u64,
    /// Batches copied on the CPU because the breaker had tripped.
    pub fallback: u64,
}

/// One submitted batch, oldest first.
#[derive(Debug)]
struct Pending {
    ticket: u64,
    /// Top-level descriptors: (first arena slot, pieces, record slot); empty for a batch
    /// made wholly on the CPU.
    hw: Vec<(usize, usize, usize)>,
    /// Arena slots it holds (freed in order when it retires).
    slots: usize,
    hw_copies: u32,
    cpu_copies: u32,
    at: Instant,
}

/// The DSA engine over a work queue's portal.
pub struct DsaEngine {
    cfg: DsaConfig,
    /// `None` only while dropping (it goes first: closing a device's fd drains its queue).
    portal: Option<Box<dyn Portal + Send>>,
    /// `2 * ring` descriptors, 64-byte aligned.
    descs: *mut Descriptor,
    /// A record per descriptor slot (failures of batch members).
    sub_records: *mut CompletionRecord,
    /// A record per credit (top-level descriptors).
    records: *mut CompletionRecord,
    /// The top-level descriptor sent with each record slot (what recovery redoes).
    tops: Vec<Descriptor>,
    /// Next free ring position (monotonic) and slots in use.
    head: usize,
    used: usize,
    /// Next record slot (monotonic; `credits` slots) and credits in use.
    next_record: usize,
    credits_used: usize,
    pending: VecDeque<Pending>,
    /// The newest ticket handed out, and reported.
    issued: u64,
    retired: u64,
    stats: Stats,
    dsa: DsaStats,
    /// Why the engine copies on the CPU from now on, once it has tripped.
    tripped: Option<String>,
}

// SAFETY: the raw pointers are this engine's own allocations, reached only through `&mut self`
// (and by the device, which the engine owns through `portal`); the portal is `Send`.
unsafe impl Send for DsaEngine {}

impl std::fmt::Debug for DsaEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DsaEngine")
            .field("cfg", &self.cfg)
            .field("inflight", &self.pending.len())
            .field("tripped", &self.tripped)
            .finish_non_exhaustive()
    }
}

fn alloc<T: Default + Copy>(n: usize) -> *mut T {
    Box::into_raw(vec![T::default(); n].into_boxed_slice()).cast::<T>()
}

/// # Safety
///
/// `p` came from `alloc::<T>(n)` and is not used afterwards.
unsafe fn free<T>(p: *mut T, n: usize) {
    // SAFETY: as the caller promises, `p` is the boxed slice `alloc` leaked.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) });
}

impl DsaEngine {
    /// An engine over `portal`, a work queue with the limits in `cfg`.
    ///
    /// # Panics
    ///
    /// If `ring` is not a power of two or a limit is 0.
    pub fn new(portal: Box<dyn Portal + Send>, cfg: DsaConfig) -> DsaEngine {
        assert!(
            cfg.ring.is_power_of_two()
                && cfg.credits > 0
                && cfg.max_batch_size >= 1
                && cfg.max_transfer_size > 0,
            "DSA engine limits: {cfg:?}"
        );
        DsaEngine {
            descs: alloc(2 * cfg.ring),
            sub_records: alloc(2 * cfg.ring),
            records: alloc(cfg.credits),
            tops: vec![Descriptor::default(); cfg.credits],
            cfg,
            portal: Some(portal),
            head: 0,
            used: 0,
            next_record: 0,
            credits_used: 0,
            pending: VecDeque::new(),
            issued: 0,
            retired: 0,
            stats: Stats::default(),
            dsa: DsaStats::default(),
            tripped: None,
        }
    }

    pub fn caps(&self) -> Caps {
        Caps {
            kind: Kind::Dsa,
            asynchronous: true,
            max_batch: usize::MAX,
            inline_below: if self.tripped.is_some() {
                u32::MAX
            } else {
                self.cfg.inline_max
            },
            max_inflight: self.cfg.credits,
        }
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// See [`crate::Engine::note_short`].
    pub fn note_short(&mut self, n: u64) {
        self.stats.short += n;
    }

    pub fn dsa_stats(&self) -> DsaStats {
        self.dsa
    }

    /// Why the engine has fallen back to the CPU for good, if it has.
    pub fn tripped(&self) -> Option<&str> {
        self.tripped.as_deref()
    }

    pub fn inflight(&self) -> usize {
        self.pending.len()
    }

    pub fn retired_through(&self) -> Option<Ticket> {
        (self.retired > 0).then_some(Ticket(self.retired))
    }

    fn trip(&mut self, why: String) {
        if self.tripped.is_none() {
            self.tripped = Some(why);
        }
    }
}

impl Drop for DsaEngine {
    fn drop(&mut self) {
        // No device write may land after this returns (the contract's teardown).
        self.drain(|_| {});
        // The portal first: closing a device's fd makes the kernel drain its queue.
        drop(self.portal.take());
        if self.dsa.watchdog > 0 {
            // A descriptor given up on might still be written by the device: its records
            // and list stay allocated (leaked), never reused by anyone.
            return;
        }
        // SAFETY: the three allocations of `new`, not used again.
        unsafe {
            free(self.descs, 2 * self.cfg.ring);
            free(self.sub_records, 2 * self.cfg.ring);
            free(self.records, self.cfg.credits);
        }
    }
}
