//! A software DSA work queue: it takes descriptors through the same [`Portal`] a device's
//! portal would, and executes them as the Intel DSA Architecture Specification says:
//! memmove, batch, no-op and drain; the checks a device makes (reserved bits, flags the queue
//! does not allow, transfer and batch sizes, record and list alignment); the completion
//! record written when asked or on failure, its status byte last; page faults that stop a
//! copy part way (`bytes_completed`, `fault_addr`, the write bit), a failed descriptor inside
//! a batch, a fault reading a batch's list, a record never written, a hardware error; and a
//! dedicated queue that overflows when given more descriptors than its depth (the device
//! would drop them: the model records it, for tests to catch credit bugs).
//!
//! It is what the DSA engine is verified against on hosts without a device, and it is only
//! as good as this reading of the specification: on real hardware `veclane copy-engine
//! check` is the proof.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU8, Ordering};

use super::hw::{CompletionRecord, Descriptor, flag, opcode, status};

/// Why a portal did not take a descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A shared queue was full (ENQCMD's retry); a dedicated one would have dropped it.
    Full,
    /// The kernel refused the descriptor (`write()`'s error): the queue cannot be used.
    Failed(Box<str>),
}

/// Where descriptors go: a device's portal (MOVDIR64B, ENQCMD), `write()` on its character
/// device, or the [`Model`].
pub trait Portal {
    /// Hands one descriptor to the work queue.
    ///
    /// # Safety
    ///
    /// Every address the descriptor names (its completion record, its source and
    /// destination, for a batch its list and what the list's descriptors name) must stay
    /// valid for what the descriptor does, and untouched by anyone else, until its
    /// completion record says it is done (or, for a record the descriptor does not ask for,
    /// until a later descriptor's record says the queue has moved past it).
    unsafe fn submit(&mut self, d: &Descriptor) -> Result<(), Refused>;

    /// Lets the work queue make progress: nothing for a device, which runs on its own; the
    /// model executes what it holds.
    fn progress(&mut self) {}
}

/// A fault the model applies to the next descriptor it executes (top-level; a batch's fault
/// applies inside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A memmove stops after `at` bytes with a page fault (status 0x03), on the source or,
    /// with `write`, the destination. In a batch: its sub-descriptor `index` does.
    Partial { index: u32, at: u32, write: bool },
    /// A batch's list cannot be read past descriptor `after` (status 0x06).
    ListFault { after: u32 },
    /// No completion record is ever written (the watchdog's case).
    Lost,
    /// The device reports a hardware error (status 0x20) and copies nothing.
    HwError,
    /// A memmove stops after `at` bytes with a page fault whose `fault_addr` lies outside
    /// both of its buffers: a record no correct device writes.
    Stray { at: u32 },
}

/// A [`Fault::Stray`] page fault's record: its address moved outside the copy.
fn stray(fault: Option<Fault>, r: &mut CompletionRecord) {
    if matches!(fault, Some(Fault::Stray { .. })) && r.code() != status::SUCCESS {
        r.fault_addr = 0x1000;
    }
}

/// The work queue's limits, as its sysfs attributes give them.
#[derive(Debug, Clone, Copy)]
pub struct ModelConfig {
    /// Descriptors that may be queued at once (`size`).
    pub depth: usize,
    pub max_transfer_size: u32,
    pub max_batch_size: u32,
    pub block_on_fault: bool,
    /// Dedicated (an overflow is dropped) or shared (an overflow is refused).
    pub dedicated: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            depth: 16,
            max_transfer_size: 2 << 20,
            max_batch_size: 32,
            block_on_fault: false,
            dedicated: true,
        }
    }
}

/// The software work queue.
#[derive(Debug)]
pub struct Model {
    cfg: ModelConfig,
    queue: VecDeque<Descriptor>,
    /// Faults by the index (counting from 0) of the top-level descriptor they hit.
    faults: BTreeMap<u64, Fault>,
    /// Descriptors a dedicated queue had no room for: dropped, as the device would.
    pub overflowed: u64,
    /// Descriptors executed (a batch counts one).
    pub executed: u64,
    /// Records the device could not write (misaligned or lost): on hardware, a software
    /// error logged, and a wait that never ends.
    pub records_lost: u64,
}

impl Model {
    pub fn new(cfg: ModelConfig) -> Model {
        Model {
            cfg,
            queue: VecDeque::new(),
            faults: BTreeMap::new(),
            overflowed: 0,
            executed: 0,
            records_lost: 0,
        }
    }

    /// The next descriptor executed gets fault `f`.
    pub fn inject(&mut self, f: Fault) {
        self.faults.insert(self.executed, f);
    }

    /// The `n`th descriptor executed (counting from 0, batches as one) gets fault `f`.
    pub fn inject_at(&mut self, n: u64, f: Fault) {
        self.faults.insert(n, f);
    }

    /// Descriptors queued and not executed.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Executes up to `n` queued descriptors in order; how many it executed.
    ///
    /// # Safety
    ///
    /// As [`Portal::submit`] of each: the memory they name is valid and not used by
    /// anyone else while this runs.
    // Never inlined: `--cost` finds the model's work by this symbol and leaves it out.
    #[inline(never)]
    pub unsafe fn step(&mut self, n: usize) -> usize {
        let mut done = 0;
        while done < n
            && let Some(d) = self.queue.pop_front()
        {
            let fault = self.faults.remove(&self.executed);
            // SAFETY: the caller's contract, passed on.
            unsafe { self.execute_top(&d, fault) };
            self.executed += 1;
            done += 1;
        }
        done
    }

    /// # Safety
    ///
    /// As [`Model::step`].
    unsafe fn execute_top(&mut self, d: &Descriptor, fault: Option<Fault>) {
        if fault == Some(Fault::Lost) {
            self.records_lost += 1;
            return;
        }
        let mut r = CompletionRecord::default();
        if fault == Some(Fault::HwError) {
            r.status = status::HW_ERR1;
        } else if let Some(bad) = self.check_common(d, true, &mut r) {
            r.status = bad;
        } else {
            match d.opcode() {
                opcode::MEMMOVE => {
                    let partial = match fault {
                        Some(Fault::Partial { at, write, .. }) => Some((at, write)),
                        Some(Fault::Stray { at }) => Some((at, false)),
                        _ => None,
                    };
                    // SAFETY: the caller's contract.
                    unsafe { self.memmove(d, partial, &mut r) };
                    stray(fault, &mut r);
                }
                opcode::BATCH => {
                    // SAFETY: the caller's contract.
                    unsafe { self.batch(d, fault, &mut r) };
                }
                opcode::NOOP | opcode::DRAIN => r.status = status::SUCCESS,
                _ => r.status = status::BAD_OPCODE,
            }
        }
        // SAFETY: the caller's contract.
        unsafe { self.write_record(d, &r) };
    }

    /// The checks every descriptor gets: reserved and privilege bits, flags the queue does
    /// not allow, a misaligned record. `top`: not inside a batch.
    fn check_common(&self, d: &Descriptor, top: bool, r: &mut CompletionRecord) -> Option<u8> {
        if d.w0 >> 20 != 0 || d.rsvd1 != 0 || d.int_handle != 0 {
            return Some(status::NOZERO_RESERVE);
        }
        let f = d.flags();
        let bof_illegal = !self.cfg.block_on_fault
            || matches!(d.opcode(), opcode::BATCH | opcode::DRAIN)
            || (!top && d.opcode() == opcode::BATCH);
        if f & flag::BOF != 0 && bof_illegal {
            r.invalid_flags = flag::BOF;
            return Some(status::INVALID_FLAGS);
        }
        if f & flag::RCI != 0 {
            r.invalid_flags = flag::RCI;
            return Some(status::INVALID_FLAGS);
        }
        None
    }

    /// # Safety
    ///
    /// `d`'s source and destination are valid for `xfer_size` bytes.
    unsafe fn memmove(
        &self,
        d: &Descriptor,
        partial: Option<(u32, bool)>,
        r: &mut CompletionRecord,
    ) {
        let len = d.xfer_size;
        if len == 0 || len > self.cfg.max_transfer_size {
            r.status = status::XFER_ERANGE;
            return;
        }
        let n = partial.map_or(len, |(at, _)| at.min(len));
        let (src, dst) = (d.src_addr as *const u8, d.dst_addr as *mut u8);
        // SAFETY: the caller guarantees both ranges for `len` bytes; `ptr::copy` allows
        // overlap, as a device with overlapping-copy support does (ascending here).
        unsafe { std::ptr::copy(src, dst, n as usize) };
        match partial {
            Some((_, write)) if n < len => {
                r.status = status::PAGE_FAULT_NOBOF | if write { status::WRITE_FAULT } else { 0 };
                r.bytes_completed = n;
                r.fault_addr = if write { d.dst_addr } else { d.src_addr } + u64::from(n);
            }
            _ => r.status = status::SUCCESS,
        }
    }

    /// # Safety
    ///
    /// `d`'s list holds `xfer_size` descriptors, each valid as for [`Model::step`].
    unsafe fn batch(&mut self, d: &Descriptor, fault: Option<Fault>, r: &mut CompletionRecord) {
        let count = d.xfer_size;
        if !d.src_addr.is_multiple_of(64) {
            r.status = status::DESCLIST_ALIGN;
            return;
        }
        if count < 2 || count > self.cfg.max_batch_size {
            r.status = status::DESC_CNT_ERANGE;
            return;
        }
        let readable = match fault {
            Some(Fault::ListFault { after }) => after.min(count),
            _ => count,
        };
        let mut failed = false;
        for k in 0..readable {
            let at = (d.src_addr + 64 * u64::from(k)) as *const Descriptor;
            // SAFETY: the caller guarantees the list; it is 64-byte aligned (checked) and
            // holds `count` descriptors.
            let sub = unsafe { at.read() };
            let mut sr = CompletionRecord::default();
            if let Some(bad) = self.check_common(&sub, false, &mut sr) {
                sr.status = bad;
            } else {
                match sub.opcode() {
                    opcode::MEMMOVE => {
                        let partial = match fault {
                            Some(Fault::Partial { index, at, write }) if index == k => {
                                Some((at, write))
                            }
                            Some(Fault::Stray { at }) if k == 0 => Some((at, false)),
                            _ => None,
                        };
                        // SAFETY: the caller's contract for each listed descriptor.
                        unsafe { self.memmove(&sub, partial, &mut sr) };
                        if k == 0 {
                            stray(fault, &mut sr);
                        }
                    }
                    opcode::NOOP | opcode::DRAIN => sr.status = status::SUCCESS,
                    // A batch inside a batch, or anything else.
                    _ => sr.status = status::BAD_OPCODE,
                }
            }
            failed |= sr.code() != status::SUCCESS;
            // SAFETY: the caller's contract.
            unsafe { self.write_record(&sub, &sr) };
        }
        if readable < count {
            r.status = status::BATCH_PAGE_FAULT;
            r.bytes_completed = readable;
            r.fault_addr = d.src_addr + 64 * u64::from(readable);
            return;
        }
        r.bytes_completed = count;
        if failed {
            r.status = status::BATCH_FAIL;
            r.result = 1;
        } else {
            r.status = status::SUCCESS;
        }
    }

    /// Writes `r` to `d`'s record if it has one and asks for it (or failed), the status byte
    /// last and with Release ordering, as the device makes the record visible.
    ///
    /// # Safety
    ///
    /// `d`'s completion address, when valid and 32-byte aligned, points at 32 writable bytes.
    unsafe fn write_record(&mut self, d: &Descriptor, r: &CompletionRecord) {
        let f = d.flags();
        if f & flag::CRAV == 0 {
            return;
        }
        if f & flag::RCR == 0 && r.code() == status::SUCCESS {
            return;
        }
        if !d.completion_addr.is_multiple_of(32) {
            // The device cannot write it: a software error, and no record.
            self.records_lost += 1;
            return;
        }
        let bytes = r.to_bytes();
        let at = d.completion_addr as *mut u8;
        // SAFETY: the caller guarantees 32 writable bytes at the (aligned) address.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().add(1), at.add(1), 31) };
        // SAFETY: as above; an AtomicU8 has the alignment of a u8. The Release store makes
        // the rest of the record, and the copies before it, visible to an Acquire load of
        // the status.
        unsafe { AtomicU8::from_ptr(at) }.store(bytes[0], Ordering::Release);
    }
}

impl Portal for Model {
    fn progress(&mut self) {
        let n = self.queue.len();
        // SAFETY: every queued descriptor was submitted through `Portal::submit`, whose
        // caller promised its memory until its record is written: executing it now is
        // what that promise covers.
        unsafe { self.step(n) };
    }

    unsafe fn submit(&mut self, d: &Descriptor) -> Result<(), Refused> {
        if self.queue.len() >= self.cfg.depth {
            if self.cfg.dedicated {
                self.overflowed += 1;
                return Ok(());
            }
            return Err(Refused::Full);
        }
        self.queue.push_back(*d);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsa::hw::{BATCH_FLAGS, BATCH_MEMMOVE_FLAGS, MEMMOVE_FLAGS};

    #[repr(C, align(64))]
    struct List([Descriptor; 4]);

    fn record(r: &CompletionRecord) -> u64 {
        r as *const CompletionRecord as u64
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
    }

    #[test]
    fn memmove_copies_and_writes_its_record_last() {
        let mut m = Model::new(ModelConfig::default());
        let src = pattern(1500, 7);
        let mut dst = vec![0u8; 1500];
        let rec = CompletionRecord::default();
        let d = Descriptor::memmove(
            MEMMOVE_FLAGS,
            record(&rec),
            src.as_ptr() as u64,
            dst.as_mut_ptr() as u64,
            1500,
        );
        // SAFETY: every address names memory alive for the whole test.
        unsafe {
            m.submit(&d).unwrap();
            assert_eq!(m.step(8), 1);
        }
        assert_eq!(dst, src);
        assert_eq!(rec.code(), status::SUCCESS);
    }

    #[test]
    fn a_page_fault_stops_the_copy_where_it_says() {
        let mut m = Model::new(ModelConfig::default());
        let src = pattern(4096, 1);
        let mut dst = vec![0u8; 4096];
        let rec = CompletionRecord::default();
        let d = Descriptor::memmove(
            MEMMOVE_FLAGS,
            record(&rec),
            src.as_ptr() as u64,
            dst.as_mut_ptr() as u64,
            4096,
        );
        m.inject(Fault::Partial {
            index: 0,
            at: 1000,
            write: true,
        });
        // SAFETY: as above.
        unsafe {
            m.submit(&d).unwrap();
            m.step(1);
        }
        assert_eq!(rec.code(), status::PAGE_FAULT_NOBOF);
        assert_eq!(rec.status & status::WRITE_FAULT, status::WRITE_FAULT);
        assert_eq!(rec.bytes_completed, 1000);
        assert_eq!(rec.fault_addr, dst.as_ptr() as u64 + 1000);
        assert_eq!(dst[..1000], src[..1000]);
        assert!(dst[1000..].iter().all(|&b| b == 0));
    }

    #[test]
    fn batches_write_sub_records_only_on_failure() {
        let mut m = Model::new(ModelConfig::default());
        let srcs: Vec<Vec<u8>> = (0..4).map(|k| pattern(100 + k, k as u8)).collect();
        let mut dsts: Vec<Vec<u8>> = (0..4).map(|k| vec![0u8; 100 + k]).collect();
        let subs: Vec<CompletionRecord> = vec![CompletionRecord::default(); 4];
        let mut list = List([Descriptor::default(); 4]);
        for k in 0..4 {
            list.0[k] = Descriptor::memmove(
                BATCH_MEMMOVE_FLAGS,
                record(&subs[k]),
                srcs[k].as_ptr() as u64,
                dsts[k].as_mut_ptr() as u64,
                (100 + k) as u32,
            );
        }
        let rec = CompletionRecord::default();
        let b = Descriptor::batch(BATCH_FLAGS, record(&rec), list.0.as_ptr() as u64, 4);
        m.inject(Fault::Partial {
            index: 2,
            at: 10,
            write: false,
        });
        // SAFETY: as above.
        unsafe {
            m.submit(&b).unwrap();
            m.step(1);
        }
        assert_eq!(
            (rec.code(), rec.result, rec.bytes_completed),
            (status::BATCH_FAIL, 1, 4)
        );
        for k in 0..4 {
            if k == 2 {
                assert_eq!(
                    (subs[k].code(), subs[k].bytes_completed),
                    (status::PAGE_FAULT_NOBOF, 10)
                );
                assert_eq!(dsts[k][..10], srcs[k][..10]);
            } else {
                assert!(!subs[k].done(), "sub {k} wrote a record on success");
                assert_eq!(dsts[k], srcs[k]);
            }
        }
    }

    #[test]
    fn the_device_checks_what_it_is_given() {
        let cfg = ModelConfig {
            depth: 2,
            max_batch_size: 4,
            max_transfer_size: 4096,
            ..ModelConfig::default()
        };
        let src = [1u8; 64];
        let mut dst = [0u8; 64];
        let cases: Vec<(Descriptor, u8)> = vec![
            (
                Descriptor::memmove(
                    MEMMOVE_FLAGS,
                    0,
                    src.as_ptr() as u64,
                    dst.as_mut_ptr() as u64,
                    0,
                ),
                status::XFER_ERANGE,
            ),
            (
                Descriptor::memmove(
                    MEMMOVE_FLAGS,
                    0,
                    src.as_ptr() as u64,
                    dst.as_mut_ptr() as u64,
                    8192,
                ),
                status::XFER_ERANGE,
            ),
            (
                Descriptor::memmove(
                    MEMMOVE_FLAGS | flag::BOF,
                    0,
                    src.as_ptr() as u64,
                    dst.as_mut_ptr() as u64,
                    8,
                ),
                status::INVALID_FLAGS,
            ),
            (
                Descriptor {
                    w0: 1 << 25,
                    ..Descriptor::memmove(
                        MEMMOVE_FLAGS,
                        0,
                        src.as_ptr() as u64,
                        dst.as_mut_ptr() as u64,
                        8,
                    )
                },
                status::NOZERO_RESERVE,
            ),
            (
                Descriptor::batch(BATCH_FLAGS, 0, 64, 1),
                status::DESC_CNT_ERANGE,
            ),
            (
                Descriptor::batch(BATCH_FLAGS, 0, 64, 5),
                status::DESC_CNT_ERANGE,
            ),
            (
                Descriptor::batch(BATCH_FLAGS, 0, 65, 2),
                status::DESCLIST_ALIGN,
            ),
            (
                Descriptor {
                    w1: 0x7f << 24 | MEMMOVE_FLAGS,
                    ..Descriptor::default()
                },
                status::BAD_OPCODE,
            ),
        ];
        for (k, (mut d, want)) in cases.into_iter().enumerate() {
            let mut m = Model::new(cfg);
            let rec = CompletionRecord::default();
            d.completion_addr = record(&rec);
            // SAFETY: as above; a failing descriptor touches only its record.
            unsafe {
                m.submit(&d).unwrap();
                m.step(1);
            }
            assert_eq!(rec.code(), want, "case {k}");
        }
        assert_eq!(dst, [0u8; 64], "a refused descriptor copied");
    }

    #[test]
    fn lost_records_list_faults_and_overflow() {
        let cfg = ModelConfig {
            depth: 1,
            ..ModelConfig::default()
        };
        let mut m = Model::new(cfg);
        let rec = CompletionRecord::default();
        let noop = Descriptor {
            w1: MEMMOVE_FLAGS,
            completion_addr: record(&rec),
            ..Descriptor::default()
        };
        // SAFETY: a no-op touches only its record.
        unsafe {
            m.submit(&noop).unwrap();
            m.submit(&noop).unwrap(); // over the depth: dropped
        }
        assert_eq!(m.overflowed, 1);
        m.inject(Fault::Lost);
        // SAFETY: as above.
        unsafe { m.step(4) };
        assert!(!rec.done());
        assert_eq!(m.records_lost, 1);
        let mut shared = Model::new(ModelConfig {
            depth: 1,
            dedicated: false,
            ..ModelConfig::default()
        });
        // SAFETY: as above.
        unsafe {
            shared.submit(&noop).unwrap();
            assert_eq!(shared.submit(&noop), Err(Refused::Full));
        }
        let mut m = Model::new(ModelConfig::default());
        let list = List(
            [Descriptor {
                w1: BATCH_MEMMOVE_FLAGS,
                ..Descriptor::default()
            }; 4],
        );
        let rec = CompletionRecord::default();
        let b = Descriptor::batch(BATCH_FLAGS, record(&rec), list.0.as_ptr() as u64, 4);
        m.inject(Fault::ListFault { after: 3 });
        // SAFETY: the list's no-ops touch nothing.
        unsafe {
            m.submit(&b).unwrap();
            m.step(1);
        }
        assert_eq!(
            (rec.code(), rec.bytes_completed),
            (status::BATCH_PAGE_FAULT, 3)
        );
    }
}
