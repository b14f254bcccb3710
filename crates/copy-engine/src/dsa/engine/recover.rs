//! Recovery: what a written record says the device did not do (a page fault part way, a
//! batch list it could not read, an error), finished or redone on the CPU; an error trips
//! the breaker.

use super::{DsaEngine, Pending};
use crate::dsa::hw::{CompletionRecord, Descriptor, opcode, status};
use crate::{CopyReq, copy_now};

impl DsaEngine {
    /// The top-level descriptor sent with record slot `r`.
    fn top(&self, r: usize) -> Descriptor {
        self.tops[r % self.cfg.credits]
    }

    /// Finishes on the CPU whatever of `p` the device did not do, from its records.
    ///
    /// # Safety
    ///
    /// Every record of `p` is written, and its copies' memory is still lent.
    pub(super) unsafe fn recover(&mut self, p: &Pending) {
        for &(first, n, r) in &p.hw {
            // SAFETY: inside the record array; written (the caller checked its status).
            let rec = unsafe { self.records.add(r % self.cfg.credits).read_volatile() };
            let d = self.top(r);
            match (d.opcode(), rec.code()) {
                (_, status::SUCCESS) => {}
                (opcode::BATCH, status::BATCH_FAIL) => {
                    for k in first..first + n {
                        // SAFETY: a member slot of this batch; its memory is lent.
                        unsafe { self.recover_member(k) };
                    }
                }
                (opcode::BATCH, status::BATCH_PAGE_FAULT) => {
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
                (opcode::BATCH, code) => {
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
    pub(super) unsafe fn redo_descriptor(&mut self, d: &Descriptor) {
        if d.opcode() == opcode::BATCH {
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
    pub(super) unsafe fn redo_all(&mut self, p: &Pending) {
        for &(first, n, r) in &p.hw {
            let d = self.top(r);
            if d.opcode() == opcode::BATCH {
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
}
