//! The inline backend: `submit` copies on the calling thread, `poll` reports.

use std::collections::VecDeque;

use crate::{Caps, CopyReq, Kind, Retired, Stats, SubmitError, Ticket, copy_now};

/// Copies inline in `submit`; tickets wait in a ready queue until `poll` reports them, so a
/// caller's code is the same as for an asynchronous backend.
#[derive(Debug)]
pub struct CpuEngine {
    /// `cpu_copies` of each copied, unreported batch, oldest first. Never grows past
    /// `max_inflight`, so it never reallocates after construction.
    ready: VecDeque<u32>,
    /// The newest ticket reported, 0 before the first.
    retired: u64,
    max_inflight: usize,
    stats: Stats,
}

impl Default for CpuEngine {
    fn default() -> Self {
        CpuEngine::new()
    }
}

impl CpuEngine {
    /// Unreported batches a default engine holds before `submit` returns `Full`. The queue
    /// costs 4 bytes a batch; the bound only stops a caller that never polls from growing it.
    pub const DEFAULT_MAX_INFLIGHT: usize = 1024;

    pub fn new() -> CpuEngine {
        CpuEngine::with_max_inflight(Self::DEFAULT_MAX_INFLIGHT)
    }

    /// # Panics
    ///
    /// If `max_inflight` is 0.
    pub fn with_max_inflight(max_inflight: usize) -> CpuEngine {
        assert!(
            max_inflight > 0,
            "copy engine max_inflight must be at least 1, not 0"
        );
        CpuEngine {
            ready: VecDeque::with_capacity(max_inflight),
            retired: 0,
            max_inflight,
            stats: Stats::default(),
        }
    }

    pub fn caps(&self) -> Caps {
        Caps {
            kind: Kind::Cpu,
            asynchronous: false,
            max_batch: usize::MAX,
            inline_below: u32::MAX,
            max_inflight: self.max_inflight,
        }
    }

    /// Copy `reqs` now and queue the ticket for `poll`.
    ///
    /// # Safety
    ///
    /// As for [`Engine::submit`](crate::Engine::submit); the memory is no longer touched once
    /// this returns, but the caller's bookkeeping should still wait for the report.
    pub unsafe fn submit(&mut self, reqs: &[CopyReq]) -> Result<Ticket, SubmitError> {
        if self.ready.len() == self.max_inflight {
            self.stats.full += 1;
            return Err(SubmitError::Full);
        }
        // SAFETY: the caller promises every request is valid and that the destinations
        // overlap nothing else in the batch (the `submit` contract includes `copy_now`'s).
        unsafe { copy_now(reqs) };
        self.stats.count_batch(reqs);
        self.ready
            .push_back(u32::try_from(reqs.len()).unwrap_or(u32::MAX));
        Ok(Ticket(self.retired + self.ready.len() as u64))
    }

    /// Report every queued ticket, oldest first. Never blocks.
    pub fn poll(&mut self, mut f: impl FnMut(Retired)) -> usize {
        let mut n = 0;
        while let Some(cpu_copies) = self.ready.pop_front() {
            self.retired += 1;
            n += 1;
            f(Retired {
                ticket: Ticket(self.retired),
                hw_copies: 0,
                cpu_copies,
            });
        }
        n
    }

    /// The same as `poll`: every accepted batch is already copied.
    pub fn drain(&mut self, f: impl FnMut(Retired)) -> usize {
        self.poll(f)
    }

    pub fn quiesce(&mut self) {
        self.drain(|_| {});
    }

    pub fn inflight(&self) -> usize {
        self.ready.len()
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
}
