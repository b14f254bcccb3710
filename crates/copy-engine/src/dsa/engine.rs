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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use super::hw::{
    BATCH_FLAGS, BATCH_MEMMOVE_FLAGS, CompletionRecord, Descriptor, MEMMOVE_FLAGS, status,
};
use super::model::{Portal, Refused};
use crate::{Caps, CopyReq, Kind, Retired, Stats, SubmitError, Ticket, copy_now};

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

    /// # Safety
    ///
    /// As [`Engine::submit`](crate::Engine::submit).
    pub unsafe fn submit(&mut self, reqs: &[CopyReq]) -> Result<Ticket, SubmitError> {
        // The pieces the hardware takes: every long copy, split at the transfer limit.
        let max = self.cfg.max_transfer_size;
        let (mut pieces, mut hw_copies) = (0usize, 0u32);
        if self.tripped.is_none() {
            for r in reqs.iter().filter(|r| r.len >= self.cfg.inline_max.max(1)) {
                pieces += r.len.div_ceil(max) as usize;
                hw_copies += 1;
            }
        }
        let mut top = match pieces {
            0 => 0,
            1 => 1,
            n => n.div_ceil(self.cfg.max_batch_size as usize),
        };
        // A batch that could never fit (more descriptors than credits, more pieces than the
        // ring) is not back-pressure: it is copied on the CPU, whatever is in flight.
        let oversize = top > self.cfg.credits || pieces > self.cfg.ring;
        if oversize {
            (pieces, hw_copies, top) = (0, 0, 0);
        }
        let slots = if pieces > 1 { pieces } else { 0 };
        if self.pending.len() >= self.cfg.credits
            || self.credits_used + top > self.cfg.credits
            || self.used + slots > self.cfg.ring
        {
            self.stats.full += 1;
            return Err(SubmitError::Full);
        }
        let cpu_copies = reqs.len() as u32 - hw_copies;
        // The short ones (or all, once tripped) now, on the CPU.
        let all_cpu = self.tripped.is_some() || oversize;
        for r in reqs
            .iter()
            .filter(|r| all_cpu || r.len < self.cfg.inline_max.max(1))
        {
            // SAFETY: the caller's contract for every request.
            unsafe { copy_now(std::slice::from_ref(r)) };
        }
        if all_cpu {
            self.dsa.fallback += 1;
        } else {
            self.dsa.inline += u64::from(cpu_copies);
        }
        let mut hw = Vec::with_capacity(top);
        if pieces == 1 {
            let r = reqs
                .iter()
                .find(|r| r.len >= self.cfg.inline_max.max(1))
                .expect("one long request");
            let rec = self.take_record();
            let d =
                Descriptor::memmove(MEMMOVE_FLAGS, rec as u64, r.src as u64, r.dst as u64, r.len);
            // SAFETY: the caller lends the request's memory until the ticket retires, and the
            // record is this engine's, free (its credit was counted above).
            unsafe { self.send(&d) };
            hw.push((usize::MAX, 1, self.next_record - 1));
        } else if pieces > 1 {
            let start = self.head % self.cfg.ring;
            let mut at = start;
            for r in reqs.iter().filter(|r| r.len >= self.cfg.inline_max.max(1)) {
                let mut off = 0u32;
                while off < r.len {
                    let len = (r.len - off).min(max);
                    // SAFETY: `at` < start + ring ≤ 2 * ring: inside the arena; the slot is
                    // free (counted in `used`).
                    unsafe {
                        let sub = self.sub_records.add(at);
                        sub.write(CompletionRecord::default());
                        self.descs.add(at).write(Descriptor::memmove(
                            BATCH_MEMMOVE_FLAGS,
                            sub as u64,
                            r.src.wrapping_add(off as usize) as u64,
                            r.dst.wrapping_add(off as usize) as u64,
                            len,
                        ));
                    }
                    at += 1;
                    off += len;
                }
            }
            let mut first = start;
            while first < at {
                let n = (at - first).min(self.cfg.max_batch_size as usize);
                let rec = self.take_record();
                // A lone remainder goes as a plain memmove (a batch holds at least two).
                let d = if n == 1 {
                    // SAFETY: slot `first` was written above.
                    let one = unsafe { self.descs.add(first).read() };
                    Descriptor::memmove(
                        MEMMOVE_FLAGS,
                        rec as u64,
                        one.src_addr,
                        one.dst_addr,
                        one.xfer_size,
                    )
                } else {
                    // SAFETY: inside the arena.
                    let list = unsafe { self.descs.add(first) } as u64;
                    Descriptor::batch(BATCH_FLAGS, rec as u64, list, n as u32)
                };
                // SAFETY: as above: the caller's memory, our list and records.
                unsafe { self.send(&d) };
                hw.push((first, n, self.next_record - 1));
                first += n;
            }
            self.head += slots;
            self.used += slots;
        }
        self.stats.count_batch(reqs);
        self.issued += 1;
        self.pending.push_back(Pending {
            ticket: self.issued,
            hw,
            slots,
            hw_copies,
            cpu_copies,
            at: Instant::now(),
        });
        Ok(Ticket(self.issued))
    }

    /// The next top-level record, its status cleared: a credit taken.
    fn take_record(&mut self) -> *mut CompletionRecord {
        // SAFETY: `next_record % credits` is inside the record array; the credit it stands
        // for was free (checked by `submit`), so the device is done with it.
        let rec = unsafe { self.records.add(self.next_record % self.cfg.credits) };
        // SAFETY: as above.
        unsafe { rec.write(CompletionRecord::default()) };
        self.next_record += 1;
        self.credits_used += 1;
        rec
    }

    /// # Safety
    ///
    /// As [`Portal::submit`].
    unsafe fn send(&mut self, d: &Descriptor) {
        self.tops[(self.next_record - 1) % self.cfg.credits] = *d;
        self.dsa.descriptors += 1;
        self.dsa.hw_pieces += u64::from(if d.opcode() == super::hw::opcode::BATCH {
            d.xfer_size
        } else {
            1
        });
        let accepted = match self.portal.as_mut() {
            // SAFETY: the caller's contract. A dedicated queue never refuses (credits are
            // counted).
            Some(p) => match unsafe { p.submit(d) } {
                Ok(()) => true,
                Err(Refused::Full) => false,
                Err(Refused::Failed(why)) => {
                    self.trip(format!("the work queue refused a descriptor: {why}"));
                    false
                }
            },
            None => false,
        };
        if !accepted {
            // A shared queue that was full (or no portal): the device never saw it, so the
            // CPU does it now and the record says so at once.
            // SAFETY: the caller's contract covers the descriptor's memory (for a batch, the
            // list in our arena and its members' memory).
            unsafe { self.redo_descriptor(d) };
            let rec = d.completion_addr as *mut CompletionRecord;
            // SAFETY: one of this engine's records, which the device never received.
            unsafe { AtomicU8::from_ptr(rec.cast::<u8>()) }
                .store(status::SUCCESS, Ordering::Release);
        }
    }

    /// The status byte of a record, with Acquire ordering.
    fn status_of(rec: *mut CompletionRecord) -> u8 {
        // SAFETY: `rec` is one of this engine's records; the status is its first byte, and
        // the device writes it last with Release ordering.
        unsafe { AtomicU8::from_ptr(rec.cast::<u8>()) }.load(Ordering::Acquire)
    }

    /// Reports finished batches, oldest first; never blocks.
    pub fn poll(&mut self, mut f: impl FnMut(Retired)) -> usize {
        if let Some(p) = self.portal.as_mut() {
            p.progress();
        }
        let mut n = 0;
        while let Some(p) = self.pending.front() {
            let done = p.hw.iter().all(|&(_, _, r)| {
                // SAFETY: record slot `r % credits` is inside the array.
                Self::status_of(unsafe { self.records.add(r % self.cfg.credits) }) != 0
            });
            if !done {
                let waited = p.at.elapsed();
                if waited < self.cfg.timeout {
                    break;
                }
                if waited < self.cfg.timeout + self.cfg.redo_after {
                    // Suspect: nothing more goes to the device, but nothing of this batch
                    // is redone while the device might still write it.
                    self.trip(format!(
                        "a completion record was not written within {:?}",
                        self.cfg.timeout
                    ));
                    break;
                }
                // The device has had more than long enough: redo everything of the batch
                // on the CPU (see the module doc), and stop using it.
                self.dsa.watchdog += 1;
                let mut p = self.pending.pop_front().expect("front");
                // Every copy of it was the CPU's in the end.
                (p.cpu_copies, p.hw_copies) = (p.cpu_copies + p.hw_copies, 0);
                // SAFETY: the pieces' memory is still lent (the ticket has not retired).
                unsafe { self.redo_all(&p) };
                self.finish(p, &mut f);
                n += 1;
                continue;
            }
            let p = self.pending.pop_front().expect("front");
            // SAFETY: every record of the batch is written; its memory is still lent.
            unsafe { self.recover(&p) };
            self.finish(p, &mut f);
            n += 1;
        }
        n
    }

    fn finish(&mut self, p: Pending, f: &mut impl FnMut(Retired)) {
        self.used -= p.slots;
        self.credits_used -= p.hw.len();
        self.retired = p.ticket;
        f(Retired {
            ticket: Ticket(p.ticket),
            hw_copies: p.hw_copies,
            cpu_copies: p.cpu_copies,
        });
    }

    /// The top-level descriptor sent with record slot `r`.
    fn top(&self, r: usize) -> Descriptor {
        self.tops[r % self.cfg.credits]
    }

    /// Finishes on the CPU whatever of `p` the device did not do, from its records.
    ///
    /// # Safety
    ///
    /// Every record of `p` is written, and its copies' memory is still lent.
    unsafe fn recover(&mut self, p: &Pending) {
        for &(first, n, r) in &p.hw {
            // SAFETY: inside the record array; written (the caller checked its status).
            let rec = unsafe { self.records.add(r % self.cfg.credits).read_volatile() };
            let d = self.top(r);
            match (d.opcode(), rec.code()) {
                (_, status::SUCCESS) => {}
                (super::hw::opcode::BATCH, status::BATCH_FAIL) => {
                    for k in first..first + n {
                        // SAFETY: a member slot of this batch; its memory is lent.
                        unsafe { self.recover_member(k) };
                    }
                }
                (super::hw::opcode::BATCH, status::BATCH_PAGE_FAULT) => {
                    let read = (rec.bytes_completed as usize).min(n);
                    for k in first..first + read {
                        // SAFETY: as above.
                        unsafe { self.recover_member(k) };
                    }
                    for k in first + read..first + n {
                        // SAFETY: never read by the device; the memory is lent.
                        unsafe { self.redo(&self.descs.add(k).read()) };
                    }
                }
                (super::hw::opcode::BATCH, code) => {
                    self.trip(format!(
                        "the device answered a batch with status {code:#04x}"
                    ));
                    for k in first..first + n {
                        // SAFETY: as above.
                        unsafe { self.redo(&self.descs.add(k).read()) };
                    }
                }
                _ => {
                    // SAFETY: the memmove's memory is lent.
                    unsafe { self.finish_piece(&d, &rec) };
                }
            }
        }
    }

    /// A batch member: its record is written only if it failed.
    ///
    /// # Safety
    ///
    /// Slot `k` holds a member of a batch whose record is written; its memory is lent.
    unsafe fn recover_member(&mut self, k: usize) {
        // SAFETY: inside the arena and its records.
        let (d, rec) = unsafe {
            (
                self.descs.add(k).read(),
                self.sub_records.add(k).read_volatile(),
            )
        };
        if rec.code() != status::NONE && rec.code() != status::SUCCESS {
            // SAFETY: the caller's contract.
            unsafe { self.finish_piece(&d, &rec) };
        }
    }

    /// A memmove that did not succeed: the rest after a page fault, else all of it again
    /// (and the breaker trips: the device was given something it refused, or failed).
    ///
    /// # Safety
    ///
    /// `d`'s memory is lent and the device is done with it.
    unsafe fn finish_piece(&mut self, d: &Descriptor, rec: &CompletionRecord) {
        match rec.code() {
            status::PAGE_FAULT_NOBOF | status::PAGE_FAULT_IR => {
                // A record that does not describe this copy (progress past its end, a
                // fault outside both buffers) comes from a device that cannot be trusted:
                // the whole copy again, and no more descriptors for it.
                let inside = |base: u64| rec.fault_addr.wrapping_sub(base) < u64::from(d.xfer_size);
                if rec.bytes_completed >= d.xfer_size || !(inside(d.src_addr) || inside(d.dst_addr))
                {
                    self.trip(format!(
                        "the device reported a page fault at {:#x} after {} of {} bytes, \
                         outside the copy",
                        rec.fault_addr, rec.bytes_completed, d.xfer_size
                    ));
                    // SAFETY: the caller's contract.
                    unsafe { self.redo(d) };
                    return;
                }
                // Ascending (memif copies never overlap): the first bytes are there.
                let done = rec.bytes_completed;
                // Copied descending (`result` 1, overlapping buffers): the done bytes are at
                // the end, and the rest starts where the copy did (the Intel DSA Architecture
                // Specification; idxd-config's `dsa_reprep_memcpy` resumes the same way).
                let skip = if rec.result == 1 { 0 } else { done };
                self.dsa.recovered += 1;
                let rest = CopyReq {
                    src: (d.src_addr as *const u8).wrapping_add(skip as usize),
                    dst: (d.dst_addr as *mut u8).wrapping_add(skip as usize),
                    len: d.xfer_size - done,
                };
                // SAFETY: within the lent request.
                unsafe { copy_now(&[rest]) };
            }
            code => {
                self.trip(format!(
                    "the device answered a copy with status {code:#04x}"
                ));
                // SAFETY: the caller's contract.
                unsafe { self.redo(d) };
            }
        }
    }

    /// Copies all of memmove `d` on the CPU.
    ///
    /// # Safety
    ///
    /// As [`DsaEngine::finish_piece`].
    unsafe fn redo(&mut self, d: &Descriptor) {
        self.dsa.recovered += 1;
        let all = CopyReq {
            src: d.src_addr as *const u8,
            dst: d.dst_addr as *mut u8,
            len: d.xfer_size,
        };
        // SAFETY: the caller's contract.
        unsafe { copy_now(&[all]) };
    }

    /// A top-level descriptor's copies, on the CPU (one the portal refused).
    ///
    /// # Safety
    ///
    /// As [`DsaEngine::redo`]; a batch's list is in this engine's arena.
    unsafe fn redo_descriptor(&mut self, d: &Descriptor) {
        if d.opcode() == super::hw::opcode::BATCH {
            let list = d.src_addr as *const Descriptor;
            for k in 0..d.xfer_size as usize {
                // SAFETY: the list is `xfer_size` descriptors of our arena.
                unsafe { self.redo(&list.add(k).read()) };
            }
        } else {
            // SAFETY: the caller's contract.
            unsafe { self.redo(d) };
        }
    }

    /// Everything of `p` again on the CPU (the watchdog's case).
    ///
    /// # Safety
    ///
    /// `p`'s memory is lent, and the device is taken to be done with it.
    unsafe fn redo_all(&mut self, p: &Pending) {
        for &(first, n, r) in &p.hw {
            let d = self.top(r);
            if d.opcode() == super::hw::opcode::BATCH {
                for k in first..first + n {
                    // SAFETY: a member slot; the caller's contract.
                    unsafe { self.redo(&self.descs.add(k).read()) };
                }
            } else {
                // SAFETY: the caller's contract.
                unsafe { self.redo(&d) };
            }
        }
    }

    /// Waits until every batch has retired, reporting them.
    pub fn drain(&mut self, mut f: impl FnMut(Retired)) -> usize {
        let mut n = 0;
        while !self.pending.is_empty() {
            n += self.poll(&mut f);
            if !self.pending.is_empty() {
                std::thread::yield_now();
            }
        }
        n
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsa::model::{Fault, Model, ModelConfig};

    /// A small deterministic generator.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    const LEN: usize = 1 << 16;

    /// Random batches through the engine over `model`, against a reference copy; every
    /// ticket reported once, in order, with its batch's count.
    fn rounds(model: Model, cfg: DsaConfig, seed: u64, batches: usize) -> DsaEngine {
        let mut e = DsaEngine::new(Box::new(model), cfg);
        let mut rng = Rng(seed);
        let src: Vec<u8> = (0..LEN).map(|_| rng.next() as u8).collect();
        let mut dst = vec![0u8; LEN];
        let mut reference = vec![0u8; LEN];
        let mut submitted = Vec::new();
        let mut retired = Vec::new();
        for b in 0..batches {
            // Each batch writes its own 64 KiB / batches slice of dst, in pieces.
            let span = LEN / batches;
            let base = b * span;
            let mut reqs = Vec::new();
            let mut at = 0;
            while at < span {
                let len = (1 + rng.below(3000) as usize).min(span - at);
                let s = rng.below((LEN - len) as u64) as usize;
                reqs.push(CopyReq {
                    src: src.as_ptr().wrapping_add(s),
                    dst: dst.as_mut_ptr().wrapping_add(base + at),
                    len: len as u32,
                });
                reference[base + at..base + at + len].copy_from_slice(&src[s..s + len]);
                at += len;
            }
            loop {
                // SAFETY: every range is inside `src` or `dst`, alive until the drain below;
                // each batch writes its own span of `dst`.
                match unsafe { e.submit(&reqs) } {
                    Ok(t) => {
                        submitted.push((t, reqs.len()));
                        break;
                    }
                    Err(SubmitError::Full) => {
                        e.poll(|r| retired.push(r));
                    }
                }
            }
            if rng.below(2) == 0 {
                e.poll(|r| retired.push(r));
            }
        }
        e.drain(|r| retired.push(r));
        assert_eq!(dst, reference, "seed {seed}");
        assert_eq!(retired.len(), submitted.len());
        for (k, (r, &(t, n))) in retired.iter().zip(&submitted).enumerate() {
            assert_eq!((r.ticket, t.get()), (t, k as u64 + 1));
            assert_eq!((r.hw_copies + r.cpu_copies) as usize, n);
        }
        assert_eq!(e.inflight(), 0);
        e
    }

    fn small() -> DsaConfig {
        DsaConfig {
            ring: 64,
            credits: 4,
            max_batch_size: 8,
            max_transfer_size: 1024,
            inline_max: 64,
            timeout: Duration::from_millis(1),
            redo_after: Duration::from_millis(1),
        }
    }

    fn model() -> Model {
        Model::new(ModelConfig {
            depth: 4,
            max_batch_size: 8,
            max_transfer_size: 1024,
            ..ModelConfig::default()
        })
    }

    #[test]
    fn batches_retire_in_order_with_the_right_bytes() {
        let e = rounds(model(), small(), 7, 64);
        let s = e.dsa_stats();
        assert!(s.descriptors >= 64 && s.hw_pieces > s.descriptors, "{s:?}");
        assert_eq!((s.recovered, s.watchdog, s.fallback), (0, 0, 0));
        assert!(e.tripped().is_none());
    }

    #[test]
    fn page_faults_and_list_faults_are_finished_on_the_cpu() {
        let mut m = model();
        for k in (0..200).step_by(3) {
            m.inject_at(
                k,
                Fault::Partial {
                    index: (k % 5) as u32,
                    at: 100,
                    write: k % 2 == 0,
                },
            );
        }
        for k in (1..200).step_by(7) {
            m.inject_at(k, Fault::ListFault { after: 1 });
        }
        let e = rounds(m, small(), 11, 64);
        let s = e.dsa_stats();
        assert!(s.recovered > 10, "{s:?}");
        assert!(e.tripped().is_none(), "{:?}", e.tripped());
    }

    #[test]
    fn a_lost_record_waits_then_is_redone_and_trips_the_breaker() {
        let mut m = model();
        m.inject_at(3, Fault::Lost);
        let e = rounds(m, small(), 13, 16);
        let s = e.dsa_stats();
        assert_eq!(s.watchdog, 1, "{s:?}");
        assert!(s.fallback > 0, "later batches went to the CPU: {s:?}");
        assert!(
            e.tripped().unwrap().contains("not written"),
            "{:?}",
            e.tripped()
        );
    }

    #[test]
    fn a_fault_outside_the_copy_is_redone_and_trips_the_breaker() {
        let mut m = model();
        m.inject_at(2, Fault::Stray { at: 10 });
        let e = rounds(m, small(), 19, 16);
        let why = e.tripped().expect("tripped");
        assert!(why.contains("0x1000") && why.contains("outside"), "{why}");
        assert!(e.dsa_stats().recovered >= 1);
    }

    #[test]
    fn a_hardware_error_is_redone_and_trips_the_breaker() {
        let mut m = model();
        m.inject_at(2, Fault::HwError);
        let e = rounds(m, small(), 17, 16);
        assert!(e.tripped().unwrap().contains("0x20"), "{:?}", e.tripped());
    }

    #[test]
    fn a_batch_too_big_for_the_queue_is_copied_on_the_cpu() {
        let mut e = DsaEngine::new(Box::new(model()), small());
        let src = vec![9u8; 40 * 512];
        let mut dst = vec![0u8; 40 * 512];
        let reqs: Vec<CopyReq> = (0..40)
            .map(|k| CopyReq {
                src: src.as_ptr().wrapping_add(k * 512),
                dst: dst.as_mut_ptr().wrapping_add(k * 512),
                len: 512,
            })
            .collect();
        // 40 pieces need 5 batches of 8: more than the 4 credits there will ever be.
        // SAFETY: both buffers outlive the engine's use of them (drained below).
        let t = unsafe { e.submit(&reqs) }.expect("never Full for a batch that cannot fit");
        let mut got = Vec::new();
        e.drain(|r| got.push(r));
        assert_eq!(
            (got[0].ticket, got[0].hw_copies, got[0].cpu_copies),
            (t, 0, 40)
        );
        assert_eq!(dst, src);
        assert_eq!(e.dsa_stats().fallback, 1);
        assert!(e.tripped().is_none());
    }

    #[test]
    fn a_full_shared_queue_sends_its_copies_to_the_cpu() {
        let m = Model::new(ModelConfig {
            depth: 1,
            dedicated: false,
            max_batch_size: 8,
            max_transfer_size: 1024,
            ..ModelConfig::default()
        });
        let e = rounds(m, small(), 23, 32);
        assert!(e.dsa_stats().recovered > 0, "{:?}", e.dsa_stats());
        assert!(e.tripped().is_none(), "{:?}", e.tripped());
    }

    #[test]
    fn no_credit_no_copy() {
        // A model that never executes: every credit stays taken.
        struct Hold;
        impl Portal for Hold {
            unsafe fn submit(
                &mut self,
                _: &Descriptor,
            ) -> Result<(), super::super::model::Refused> {
                Ok(())
            }
        }
        let cfg = DsaConfig {
            timeout: Duration::from_secs(3600),
            ..small()
        };
        let mut e = DsaEngine::new(Box::new(Hold), cfg);
        let src = vec![1u8; 4096];
        let mut dst = vec![0u8; 4096];
        let req = [CopyReq {
            src: src.as_ptr(),
            dst: dst.as_mut_ptr(),
            len: 512,
        }];
        for _ in 0..4 {
            // SAFETY: both buffers outlive the engine (it is forgotten below, never dropped
            // while a copy could land).
            assert!(unsafe { e.submit(&req) }.is_ok());
        }
        // SAFETY: as above.
        assert_eq!(unsafe { e.submit(&req) }, Err(SubmitError::Full));
        assert_eq!(e.stats().full, 1);
        assert_eq!(e.poll(|_| {}), 0);
        assert_eq!(e.inflight(), 4);
        // Dropping would wait (forever) for records this portal never writes.
        std::mem::forget(e);
        assert_eq!(dst[0], 0);
    }
}
