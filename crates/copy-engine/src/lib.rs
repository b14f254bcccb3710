//! Batched memory copies, retired by in-order tickets.
//!
//! `copy-engine` owns the copying of payload bytes between memory the caller names with raw
//! pointers: memif slots in shared memory and local packet buffers. A caller hands over a batch
//! of [`CopyReq`]s with [`Engine::submit`], gets a [`Ticket`], and later learns from
//! [`Engine::poll`] that the batch is done. The shape follows DPDK dmadev (enqueue, submit,
//! poll completed) and VPP's `vlib_dma`, the two existing drivers of DSA from user space.
//!
//! It never validates addresses (memif does that before building requests), never blocks
//! outside [`Engine::drain`], [`Engine::quiesce`] and `Drop`, never takes a lock, and knows
//! nothing of rings or packets. One engine belongs to one dataplane thread; it is `Send` but not
//! `Sync`.
//!
//! # Backends
//!
//! - [`Kind::Cpu`] ([`CpuEngine`]): `submit` copies inline with `ptr::copy_nonoverlapping` and
//!   queues the ticket as ready; `poll` reports it. [`copy_now`] is the same copy without any
//!   ticket bookkeeping, for callers that know the engine is the CPU.
//! - [`Kind::Thread`] ([`ThreadEngine`]): a copy thread fed by a bounded single-producer,
//!   single-consumer ring of batches. It exists to exercise the asynchronous path on hosts
//!   without a copy device (and for hosts with idle cores and large copies); on a 2-core box
//!   it takes the other core, so it is never the default.
//!
//! The two are joined by the [`Engine`] enum and dispatched with a `match`, not `dyn`.
//!
//! # The contract
//!
//! 1. **Ordering.** Tickets are strictly increasing per engine, starting at 1, and
//!    [`Engine::poll`] reports them strictly in submission order, each exactly once, whatever
//!    order the work finishes in. An empty batch gets a ticket like any other and retires in
//!    its turn.
//! 2. **Visibility.** When `poll` reports a ticket, every byte of every copy in that batch has
//!    been written and the write is visible to the polling thread (the copy thread publishes
//!    its progress with a Release store that `poll` reads with Acquire; inline CPU copies
//!    happen-before by program order). A Release store the caller makes after that, such as
//!    a memif ring head or tail, therefore publishes the copied bytes to whoever
//!    Acquire-loads it, including a peer process.
//! 3. Copies within one batch are unordered with respect to each other.
//! 4. **Memory is lent, not copied.** From `submit` until its ticket is reported, the engine
//!    holds every `src` range as if through a `&[u8]` and every `dst` range as if through a
//!    `&mut [u8]`: the caller must not write a source or read or write a destination, and no
//!    other batch in flight may write those ranges either. See [`Engine::submit`].
//! 5. **Back-pressure.** At most `max_inflight` batches may be submitted and not yet
//!    reported; beyond that `submit` returns [`SubmitError::Full`] without copying, and the
//!    caller decides (poll and retry, stop receiving, or [`copy_now`]).
//! 6. **Teardown.** Dropping an engine waits until every accepted copy has finished, so no
//!    engine write lands after `drop` returns (the tickets are then never reported).
//!
//! # Where the DSA backend goes
//!
//! - [`Kind::Dsa`] lives in [`dsa`]: the descriptor and
//!   completion-record formats (checked against the kernel's `<linux/idxd.h>`), sysfs
//!   discovery of usable work queues with the reason for every unusable one, the CPU feature
//!   checks, opening a queue (MOVDIR64B, ENQCMD or `write()`), a software model of a work
//!   queue, and [`dsa::engine::DsaEngine`] (batches, in-order retirement, faults finished on
//!   the CPU, the watchdog and the breaker). [`Engine::new`] opens the first usable queue or
//!   says why there is none; [`dsa::DsaPool`] gives several engines a queue each.
//! - [`Kind::Auto`] is not a backend but a request: DSA where a queue is usable, else the
//!   CPU, with the reason ([`Engine::select`]).

pub mod check;
mod cpu;
pub mod dsa;
mod register;
mod thread;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

pub use cpu::CpuEngine;
pub use register::{Registered, describe as describe_registration, register, register_slice};
pub use thread::ThreadEngine;

/// One copy of `len` bytes from `src` to `dst`.
///
/// A plain value: building one is safe, handing it to an engine is not (see
/// [`Engine::submit`]). A zero-length request touches no memory, so its pointers may be
/// anything, null included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyReq {
    pub src: *const u8,
    pub dst: *mut u8,
    pub len: u32,
}

/// Names one submitted batch. Strictly increasing per engine, starting at 1; comparing tickets
/// of different engines means nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(u64);

impl Ticket {
    /// The sequence number: the first batch an engine accepts is 1, the next 2, and so on.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// What [`Engine::poll`] reports for one finished batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retired {
    pub ticket: Ticket,
    /// Copies done off the submitting thread: by a copy device, or by the thread backend's
    /// copy thread.
    pub hw_copies: u32,
    /// Copies the submitting thread did itself: every copy of the CPU backend (and, once it
    /// exists, a DSA batch's small items and fault redos).
    pub cpu_copies: u32,
}

/// Why [`Engine::submit`] refused a batch. Nothing was copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// `max_inflight` batches are submitted and not yet reported by `poll`.
    #[error("copy engine full: max_inflight batches are in flight; poll to retire some first")]
    Full,
}

/// The backends this build knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Inline copies on the calling thread.
    Cpu,
    /// Copies on a dedicated copy thread.
    Thread,
    /// Copies offloaded to an Intel DSA work queue.
    Dsa,
    /// DSA where a work queue is usable, the CPU otherwise: a choice made when the engine is
    /// built ([`Engine::select`]); no engine reports it as its kind.
    Auto,
}

impl Kind {
    /// Every kind, in the order error messages list them.
    pub const ALL: [Kind; 4] = [Kind::Cpu, Kind::Thread, Kind::Dsa, Kind::Auto];

    /// The configuration name: `"cpu"`, `"thread"`, `"dsa"` or `"auto"`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Thread => "thread",
            Kind::Dsa => "dsa",
            Kind::Auto => "auto",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = ParseKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|kind| kind.name() == s)
            .ok_or_else(|| ParseKindError {
                input: s.to_owned(),
            })
    }
}

/// A kind is its configuration name in every document (`copy-engine = "cpu"`).
impl serde::Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A copy engine name that is not one of [`Kind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseKindError {
    input: String,
}

impl fmt::Display for ParseKindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown copy engine {:?}: expected one of ", self.input)?;
        for (i, kind) in Kind::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{kind:?}", kind = kind.name())?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseKindError {}

/// What an engine can do, for callers that adapt to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub kind: Kind,
    /// Whether tickets can still be in flight after `submit` returns. `false` means every
    /// accepted batch is already copied and only waits for `poll` to report it.
    pub asynchronous: bool,
    /// The most requests one `submit` accepts; `usize::MAX` when there is no limit.
    pub max_batch: usize,
    /// Copies shorter than this the engine would make on the CPU at once anyway: a caller
    /// may make them itself and spare the batch (0: the engine takes every copy; `u32::MAX`:
    /// it makes them all on the CPU, as the DSA engine after its breaker tripped).
    pub inline_below: u32,
    /// The most batches submitted and not yet reported before `submit` returns `Full`.
    pub max_inflight: usize,
}

/// Counters since the engine was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Batches accepted by `submit`, empty ones included.
    pub batches: u64,
    /// Requests in those batches, zero-length ones included.
    pub copies: u64,
    /// Bytes in those requests.
    pub bytes: u64,
    /// `submit` calls refused with [`SubmitError::Full`].
    pub full: u64,
    /// Copies shorter than [`Caps::inline_below`] the caller made itself instead of
    /// submitting them, as it reported with [`Engine::note_short`].
    pub short: u64,
}

impl Stats {
    fn count_batch(&mut self, reqs: &[CopyReq]) {
        self.batches += 1;
        self.copies += reqs.len() as u64;
        self.bytes += reqs.iter().map(|r| u64::from(r.len)).sum::<u64>();
    }
}

/// Copy every request now, on the calling thread, with no tickets and no counters.
///
/// The fast path for callers that know the engine is [`Kind::Cpu`] (or that fall back after
/// [`SubmitError::Full`]).
///
/// # Safety
///
/// For every request with `len > 0`: `src` is valid for reads and `dst` valid for writes of
/// `len` bytes, and no `dst` range overlaps another request's `dst` or any request's `src`.
/// No other thread accesses the `dst` ranges or writes the `src` ranges during the call.
#[inline]
pub unsafe fn copy_now(reqs: &[CopyReq]) {
    for &req in reqs {
        // SAFETY: the caller promises each request is valid and non-overlapping (see above).
        unsafe { copy_one(req) };
    }
}

/// # Safety
///
/// As for [`copy_now`], for one request.
#[inline(always)]
unsafe fn copy_one(req: CopyReq) {
    if req.len != 0 {
        // SAFETY: the caller promises `src` is readable and `dst` writable for `len` bytes and
        // that the two ranges do not overlap; `len > 0`, so neither pointer is null.
        unsafe { std::ptr::copy_nonoverlapping(req.src, req.dst, req.len as usize) };
    }
}

/// What [`Engine::select`] chose.
#[derive(Debug)]
pub struct Selected {
    pub engine: Engine,
    /// The work queue a DSA engine was given.
    pub dsa: Option<dsa::Assigned>,
    /// Why `auto` is not DSA.
    pub why_not_dsa: Option<String>,
}

/// A copy engine of any kind, dispatched statically.
#[derive(Debug)]
pub enum Engine {
    Cpu(CpuEngine),
    Thread(ThreadEngine),
    Dsa(Box<dsa::engine::DsaEngine>),
}

impl Engine {
    /// An engine of `kind` with that backend's default `max_inflight`
    /// ([`CpuEngine::DEFAULT_MAX_INFLIGHT`], [`ThreadEngine::DEFAULT_MAX_INFLIGHT`]).
    ///
    /// # Errors
    ///
    /// The thread backend fails if the copy thread cannot be spawned.
    ///
    /// DSA (and `auto`) open the first usable work queue discovery finds; without one, `dsa`
    /// fails saying why and `auto` is the CPU engine (use [`Engine::select`] to learn why).
    pub fn new(kind: Kind) -> std::io::Result<Engine> {
        Ok(match kind {
            Kind::Cpu => Engine::Cpu(CpuEngine::new()),
            Kind::Thread => Engine::Thread(ThreadEngine::new()?),
            Kind::Dsa | Kind::Auto => {
                Engine::select(kind, &mut dsa::DsaPool::new(dsa::Source::Discover))?.engine
            }
        })
    }

    /// An engine of `kind`, its DSA work queue (if any) taken from `pool`: what was chosen,
    /// and why, for logs and `show copy-engine`.
    ///
    /// # Errors
    ///
    /// `thread`: the copy thread cannot be spawned. `dsa`: no work queue of the pool can be
    /// opened (the error says why for each). `auto` never fails for want of a device: it
    /// falls back to the CPU and says why.
    pub fn select(kind: Kind, pool: &mut dsa::DsaPool) -> std::io::Result<Selected> {
        Ok(match kind {
            Kind::Cpu | Kind::Thread => Selected {
                engine: Engine::new(kind)?,
                dsa: None,
                why_not_dsa: None,
            },
            Kind::Dsa | Kind::Auto => match pool.open() {
                Ok((e, a)) => Selected {
                    engine: Engine::Dsa(Box::new(e)),
                    dsa: Some(a),
                    why_not_dsa: None,
                },
                Err(why) if kind == Kind::Auto => Selected {
                    engine: Engine::Cpu(CpuEngine::new()),
                    dsa: None,
                    why_not_dsa: Some(why),
                },
                Err(why) => {
                    return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, why));
                }
            },
        })
    }

    /// An engine of `kind` that accepts at most `max_inflight` unreported batches.
    ///
    /// # Errors
    ///
    /// The thread backend fails if the copy thread cannot be spawned.
    ///
    /// # Panics
    ///
    /// If `max_inflight` is 0.
    pub fn with_max_inflight(kind: Kind, max_inflight: usize) -> std::io::Result<Engine> {
        Ok(match kind {
            Kind::Cpu => Engine::Cpu(CpuEngine::with_max_inflight(max_inflight)),
            Kind::Thread => Engine::Thread(ThreadEngine::with_max_inflight(max_inflight)?),
            // A device's depth is its own.
            Kind::Dsa | Kind::Auto => return Engine::new(kind),
        })
    }

    /// A DSA engine over `portal` (the software model in tests).
    pub fn dsa_over(
        portal: Box<dyn dsa::model::Portal + Send>,
        cfg: dsa::engine::DsaConfig,
    ) -> Engine {
        Engine::Dsa(Box::new(dsa::engine::DsaEngine::new(portal, cfg)))
    }

    pub fn caps(&self) -> Caps {
        match self {
            Engine::Cpu(e) => e.caps(),
            Engine::Thread(e) => e.caps(),
            Engine::Dsa(e) => e.caps(),
        }
    }

    /// Start copying `reqs` as one batch and return its ticket, or refuse the whole batch with
    /// [`SubmitError::Full`] when `max_inflight` batches are unreported. An empty batch gets a
    /// ticket that retires in its turn.
    ///
    /// # Safety
    ///
    /// For every request with `len > 0`:
    /// - `src` is valid for reads and `dst` valid for writes of `len` bytes, and both stay so
    ///   until the ticket is reported by [`poll`](Self::poll) (or [`drain`](Self::drain) or
    ///   [`quiesce`](Self::quiesce)), or the engine is dropped;
    /// - no `dst` range overlaps another `dst` or any `src` of the same batch, nor any `dst`
    ///   or `src` of another batch still in flight;
    /// - until then nobody else writes a `src` range or reads or writes a `dst` range.
    pub unsafe fn submit(&mut self, reqs: &[CopyReq]) -> Result<Ticket, SubmitError> {
        match self {
            // SAFETY: the caller upholds `submit`'s contract, which is the backend's.
            Engine::Cpu(e) => unsafe { e.submit(reqs) },
            // SAFETY: the caller upholds `submit`'s contract, which is the backend's.
            Engine::Thread(e) => unsafe { e.submit(reqs) },
            // SAFETY: the caller upholds `submit`'s contract, which is the backend's.
            Engine::Dsa(e) => unsafe { e.submit(reqs) },
        }
    }

    /// Report every finished batch not yet reported, oldest first, stopping at the first one
    /// still in flight; return how many were reported. Never blocks.
    pub fn poll(&mut self, f: impl FnMut(Retired)) -> usize {
        match self {
            Engine::Cpu(e) => e.poll(f),
            Engine::Thread(e) => e.poll(f),
            Engine::Dsa(e) => e.poll(f),
        }
    }

    /// Wait until every submitted batch has finished and report them all, as `poll` would;
    /// return how many were reported. Afterwards `inflight()` is 0.
    pub fn drain(&mut self, f: impl FnMut(Retired)) -> usize {
        match self {
            Engine::Cpu(e) => e.drain(f),
            Engine::Thread(e) => e.drain(f),
            Engine::Dsa(e) => e.drain(f),
        }
    }

    /// [`drain`](Self::drain) without the reports, for teardown and reconfiguration; callers
    /// that keep per-ticket state find what was retired with
    /// [`retired_through`](Self::retired_through).
    pub fn quiesce(&mut self) {
        self.drain(|_| {});
    }

    /// Batches submitted and not yet reported.
    pub fn inflight(&self) -> usize {
        match self {
            Engine::Cpu(e) => e.inflight(),
            Engine::Thread(e) => e.inflight(),
            Engine::Dsa(e) => e.inflight(),
        }
    }

    /// The newest ticket reported so far; every older one was reported too. `None` before the
    /// first report.
    pub fn retired_through(&self) -> Option<Ticket> {
        match self {
            Engine::Cpu(e) => e.retired_through(),
            Engine::Thread(e) => e.retired_through(),
            Engine::Dsa(e) => e.retired_through(),
        }
    }

    /// Whether `ticket` has been reported (so its memory is the caller's again).
    pub fn is_retired(&self, ticket: Ticket) -> bool {
        self.retired_through().is_some_and(|t| ticket <= t)
    }

    pub fn stats(&self) -> Stats {
        match self {
            Engine::Cpu(e) => e.stats(),
            Engine::Thread(e) => e.stats(),
            Engine::Dsa(e) => e.stats(),
        }
    }

    /// Counts `n` copies shorter than [`Caps::inline_below`] that the caller made itself
    /// rather than submit them ([`Stats::short`]), so that they show beside the engine's own.
    pub fn note_short(&mut self, n: u64) {
        match self {
            Engine::Cpu(e) => e.note_short(n),
            Engine::Thread(e) => e.note_short(n),
            Engine::Dsa(e) => e.note_short(n),
        }
    }
}
