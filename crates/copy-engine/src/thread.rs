//! The copy-thread backend: batches go through a bounded SPSC ring to a thread that copies
//! them in order and publishes its progress as one sequence number.
//!
//! The ring has `max_inflight` slots; ticket `t` uses slot `t % max_inflight`. Two counters
//! hand a slot back and forth:
//! - `published` (written by the engine): every ticket up to it is in its slot;
//! - `done_seq` (written by the copy thread): every ticket up to it is copied.
//!
//! The engine writes slot `t % max_inflight` only while ticket `t - max_inflight` has been
//! reported by `poll`, which needs `done_seq >= t - max_inflight` read with Acquire: the copy
//! thread is finished with the slot. It then stores `published = t`, and the copy thread reads
//! the slot only after loading `published >= t`. So each slot belongs to one thread at a time,
//! and the batch's bytes (source data, then copied data) follow the same handovers.
//!
//! The copy thread spins briefly when it runs out of work and then parks. Before parking it
//! sets `sleeping` and looks at `published` once more; the engine stores `published` and then
//! swaps `sleeping` back to false, unparking the thread if it was set. Both sides use SeqCst,
//! so at least one of them sees the other and no wake-up is lost.

use std::cell::UnsafeCell;
use std::fmt;
use std::io;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};

use crate::{Caps, CopyReq, Kind, Retired, Stats, SubmitError, Ticket, copy_one};

/// Idle spins of the copy thread before it parks.
const IDLE_SPINS: u32 = 1 << 12;
/// Spins of `drain` before it starts yielding the core to the copy thread.
const DRAIN_SPINS: u32 = 1 << 10;
/// Requests a slot's batch vector holds before its first growth.
const SLOT_CAPACITY: usize = 64;

/// A request on its way to the copy thread.
struct SendReq(CopyReq);

// SAFETY: a `CopyReq` is two addresses and a length; it is `!Send` only because raw pointers
// are. `submit`'s contract lends the named memory to the engine, copy thread included, until
// the ticket is reported (the sources for reading, the destinations exclusively for writing),
// and the ring hands each batch to one thread at a time (module docs).
unsafe impl Send for SendReq {}

/// One ring slot: the batch of one ticket.
struct Slot(UnsafeCell<Vec<SendReq>>);

// SAFETY: a slot is touched by one thread at a time. The engine writes slot `t % cap` only
// after `poll` has seen `done_seq >= t - cap` (Acquire), when the copy thread is done with the
// previous batch in it, and then publishes `t` (SeqCst store); the copy thread reads the slot
// only after loading `published >= t` (SeqCst, so Acquire) and stops before storing
// `done_seq = t` (Release).
unsafe impl Sync for Slot {}

/// Keeps the two counters on separate cache lines so the threads do not bounce one line.
#[repr(align(128))]
struct CacheLine<T>(T);

impl<T> Deref for CacheLine<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

struct Shared {
    slots: Box<[Slot]>,
    /// The newest ticket whose batch is in its slot; stored by the engine only.
    published: CacheLine<AtomicU64>,
    /// The newest ticket whose copies are all done; stored by the copy thread only.
    done_seq: CacheLine<AtomicU64>,
    /// The copy thread is parked or about to park.
    sleeping: AtomicBool,
    /// The engine is being dropped: finish what is published, then exit.
    shutdown: AtomicBool,
    /// Tests hold the copy thread before its next batch to observe in-flight states.
    #[cfg(test)]
    hold: AtomicBool,
}

impl Shared {
    fn slot_index(&self, ticket: u64) -> usize {
        (ticket % self.slots.len() as u64) as usize
    }
}

/// Copies on a dedicated thread, so tickets really are in flight after `submit` returns.
pub struct ThreadEngine {
    shared: Arc<Shared>,
    /// `None` only inside `drop`.
    worker: Option<JoinHandle<()>>,
    /// The request count of the batch in each slot, for `Retired`; engine-side only.
    copies: Box<[u32]>,
    /// The ticket the next `submit` returns.
    next: u64,
    /// The newest ticket reported, 0 before the first.
    retired: u64,
    stats: Stats,
}

impl fmt::Debug for ThreadEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadEngine")
            .field("max_inflight", &self.copies.len())
            .field("next", &self.next)
            .field("done_seq", &self.shared.done_seq.load(Ordering::Relaxed))
            .field("retired", &self.retired)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl ThreadEngine {
    /// Batches in flight before `submit` returns `Full`, by default.
    pub const DEFAULT_MAX_INFLIGHT: usize = 64;

    /// # Errors
    ///
    /// If the copy thread cannot be spawned.
    pub fn new() -> io::Result<ThreadEngine> {
        ThreadEngine::with_max_inflight(Self::DEFAULT_MAX_INFLIGHT)
    }

    /// # Errors
    ///
    /// If the copy thread cannot be spawned.
    ///
    /// # Panics
    ///
    /// If `max_inflight` is 0.
    pub fn with_max_inflight(max_inflight: usize) -> io::Result<ThreadEngine> {
        assert!(
            max_inflight > 0,
            "copy engine max_inflight must be at least 1, not 0"
        );
        let slots = (0..max_inflight)
            .map(|_| Slot(UnsafeCell::new(Vec::with_capacity(SLOT_CAPACITY))))
            .collect();
        let shared = Arc::new(Shared {
            slots,
            published: CacheLine(AtomicU64::new(0)),
            done_seq: CacheLine(AtomicU64::new(0)),
            sleeping: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            #[cfg(test)]
            hold: AtomicBool::new(false),
        });
        let worker_shared = Arc::clone(&shared);
        let worker = thread::Builder::new()
            .name("copy-engine".into())
            .spawn(move || copy_thread(&worker_shared))?;
        Ok(ThreadEngine {
            shared,
            worker: Some(worker),
            copies: vec![0; max_inflight].into_boxed_slice(),
            next: 1,
            retired: 0,
            stats: Stats::default(),
        })
    }

    pub fn caps(&self) -> Caps {
        Caps {
            kind: Kind::Thread,
            asynchronous: true,
            max_batch: usize::MAX,
            inline_below: 0,
            max_inflight: self.copies.len(),
        }
    }

    /// Hand `reqs` to the copy thread as one batch.
    ///
    /// The requests are copied into the slot's vector, which grows only when a batch is
    /// larger than every earlier batch in that slot.
    ///
    /// # Safety
    ///
    /// As for [`Engine::submit`](crate::Engine::submit).
    pub unsafe fn submit(&mut self, reqs: &[CopyReq]) -> Result<Ticket, SubmitError> {
        if self.inflight() == self.copies.len() {
            self.stats.full += 1;
            return Err(SubmitError::Full);
        }
        let ticket = self.next;
        let index = self.shared.slot_index(ticket);
        {
            // SAFETY: the slot last held ticket `ticket - max_inflight` (or nothing). Fewer
            // than `max_inflight` tickets are unreported, so that one has been reported, after
            // an Acquire load of `done_seq` covering it: the copy thread is done with the slot
            // and will not look at it again until we publish `ticket` below.
            let batch = unsafe { &mut *self.shared.slots[index].0.get() };
            batch.clear();
            batch.extend(reqs.iter().map(|&req| SendReq(req)));
        }
        self.copies[index] = u32::try_from(reqs.len()).unwrap_or(u32::MAX);
        self.stats.count_batch(reqs);
        self.next += 1;
        // Publishes the slot, and the caller's writes to the sources, to the copy thread.
        self.shared.published.store(ticket, Ordering::SeqCst);
        if self.shared.sleeping.swap(false, Ordering::SeqCst) {
            self.unpark_worker();
        }
        Ok(Ticket(ticket))
    }

    /// Report every batch the copy thread has finished, oldest first. Never blocks.
    pub fn poll(&mut self, mut f: impl FnMut(Retired)) -> usize {
        // Acquire: the copy thread's writes to the destinations of every ticket up to
        // `done_seq` happen-before what follows, including the caller's use of the bytes.
        let done = self.shared.done_seq.load(Ordering::Acquire);
        let mut n = 0;
        while self.retired < done {
            self.retired += 1;
            n += 1;
            f(Retired {
                ticket: Ticket(self.retired),
                hw_copies: self.copies[self.shared.slot_index(self.retired)],
                cpu_copies: 0,
            });
        }
        n
    }

    /// Wait for the copy thread to finish everything submitted, reporting as `poll` does.
    ///
    /// # Panics
    ///
    /// If the copy thread has died with batches in flight (it cannot finish them).
    pub fn drain(&mut self, mut f: impl FnMut(Retired)) -> usize {
        let mut n = 0;
        let mut spins = 0u32;
        loop {
            n += self.poll(&mut f);
            if self.inflight() == 0 {
                return n;
            }
            if spins < DRAIN_SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                assert!(
                    !self.worker.as_ref().is_some_and(JoinHandle::is_finished),
                    "copy-engine thread exited with {} batches in flight",
                    self.inflight()
                );
                thread::yield_now();
            }
        }
    }

    pub fn quiesce(&mut self) {
        self.drain(|_| {});
    }

    pub fn inflight(&self) -> usize {
        // At most `max_inflight`, so it fits.
        (self.next - 1 - self.retired) as usize
    }

    pub fn retired_through(&self) -> Option<Ticket> {
        (self.retired > 0).then_some(Ticket(self.retired))
    }

    pub fn is_retired(&self, ticket: Ticket) -> bool {
        ticket.0 <= self.retired
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// See [`crate::Engine::note_short`].
    pub fn note_short(&mut self, n: u64) {
        self.stats.short += n;
    }

    fn unpark_worker(&self) {
        if let Some(worker) = &self.worker {
            worker.thread().unpark();
        }
    }

    /// Stop (or let go of) the copy thread before its next batch.
    #[cfg(test)]
    pub(crate) fn hold(&self, hold: bool) {
        self.shared.hold.store(hold, Ordering::SeqCst);
        if !hold {
            self.unpark_worker();
        }
    }
}

impl Drop for ThreadEngine {
    /// Lets the copy thread finish every published batch, then joins it: no copy lands after
    /// the engine is gone.
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        #[cfg(test)]
        self.shared.hold.store(false, Ordering::SeqCst);
        self.unpark_worker();
        if let Some(worker) = self.worker.take() {
            // A panicked copy thread has nothing left to write; panicking again in `drop`
            // would only abort.
            let _ = worker.join();
        }
    }
}

/// The copy thread's loop: copy published batches in ticket order, publish `done_seq`, park
/// when idle, exit on shutdown once everything published is copied.
fn copy_thread(shared: &Shared) {
    let mut done = 0u64;
    let mut idle = 0u32;
    loop {
        if shared.published.load(Ordering::SeqCst) > done {
            let ticket = done + 1;
            #[cfg(test)]
            while shared.hold.load(Ordering::SeqCst) && !shared.shutdown.load(Ordering::SeqCst) {
                thread::park();
            }
            {
                // SAFETY: `published >= ticket` was loaded above, so the engine has filled
                // this slot and will not touch it until `done_seq >= ticket` (module docs).
                let batch = unsafe { &*shared.slots[shared.slot_index(ticket)].0.get() };
                for req in batch {
                    // SAFETY: `submit`'s caller promised each request is valid and that its
                    // destination overlaps nothing else until the ticket is reported, which
                    // cannot happen before the `done_seq` store below.
                    unsafe { copy_one(req.0) };
                }
            }
            done = ticket;
            // Release: the copies above happen-before `poll`'s Acquire load that sees `done`.
            shared.done_seq.store(done, Ordering::Release);
            idle = 0;
            continue;
        }
        if shared.shutdown.load(Ordering::SeqCst) {
            // `shutdown` is stored after the last `published`; look once more.
            if shared.published.load(Ordering::SeqCst) > done {
                continue;
            }
            return;
        }
        if idle < IDLE_SPINS {
            idle += 1;
            std::hint::spin_loop();
            continue;
        }
        shared.sleeping.store(true, Ordering::SeqCst);
        if shared.published.load(Ordering::SeqCst) == done
            && !shared.shutdown.load(Ordering::SeqCst)
        {
            thread::park();
        }
        shared.sleeping.store(false, Ordering::SeqCst);
    }
}
