//! `poll`: batches retire strictly in ticket order once their records are written, a failed
//! one finished on the CPU first; the watchdog gives up on a record that never comes.

use std::sync::atomic::{AtomicU8, Ordering};

use super::{DsaEngine, Pending};
use crate::dsa::hw::CompletionRecord;
use crate::{Retired, Ticket};

impl DsaEngine {
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
