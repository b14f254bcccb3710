//! `submit`: short copies made on the CPU at once, the rest split into memmove descriptors
//! and batches of them, each top-level descriptor taking a credit and a record.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use super::{DsaEngine, Pending};
use crate::dsa::hw::{
    BATCH_FLAGS, BATCH_MEMMOVE_FLAGS, CompletionRecord, Descriptor, MEMMOVE_FLAGS, opcode, status,
};
use crate::dsa::model::Refused;
use crate::{CopyReq, SubmitError, Ticket, copy_now};

impl DsaEngine {
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
        self.dsa.hw_pieces += u64::from(if d.opcode() == opcode::BATCH {
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
}
