//! The established-flow fast path's view of a session: what one packet of it needs to be
//! rewritten and forwarded, read under the record's seqlock and observed in one step, in
//! the form the packet's headers take it (no unpacking into a [`crate::Key`] and back).

use core::sync::atomic::{Ordering, fence};

use super::{DEAD, Dir, NONE, Record, Verdict, next_flags, tcp_flags, verdict_of};
use crate::checksum::Deltas;
use crate::key::PROTO_TCP;
use crate::table::Handle;

/// A live session as one packet of the matched direction leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarding {
    /// The addresses the packet leaves with, source in the high half (as the header's
    /// eight bytes from offset 12 read big-endian).
    pub addrs: u64,
    /// The ports it leaves with, source in the high half (as the L4 header's first four
    /// bytes read big-endian).
    pub ports: u32,
    /// Both checksums' change for this direction.
    pub deltas: Deltas,
    /// The VRF slot the packet is routed in once rewritten.
    pub vrf: u32,
    /// Whether a service translates the session (else it only holds a verdict).
    pub translated: bool,
    /// The session, and which of its directions the packet is.
    pub handle: Handle,
    pub dir: Dir,
    proto: u8,
    status: u64,
}

impl Forwarding {
    /// The cached verdict if it was made in policy `epoch` (as [`crate::Session::verdict`]).
    #[inline]
    pub const fn verdict(&self, epoch: u32) -> Option<Verdict> {
        verdict_of(self.status, epoch)
    }

    /// Whether the session was killed (its backend removed): nothing was observed, and the
    /// packet is for the general path.
    #[inline]
    pub const fn killed(&self) -> bool {
        self.status & DEAD != 0
    }

    /// The session's status word as read: what [`crate::Records::refresh`] compares with.
    #[inline]
    pub const fn status(&self) -> u64 {
        self.status
    }

    /// Whether the packet read with it (TCP flags `flags`) left the session's state as it
    /// was, and so would any packet of its direction that carries no SYN, FIN or RST (any
    /// packet, for a protocol other than TCP): then, while the status stays the same, such
    /// a packet needs nothing of the session but this copy and its last-seen time
    /// ([`crate::Records::refresh`]).
    #[inline]
    pub const fn steady(&self, flags: u8) -> bool {
        let ack = if self.proto == PROTO_TCP {
            tcp_flags::ACK
        } else {
            0
        };
        let st = self.status;
        !self.killed()
            && next_flags(self.proto, st, self.dir, flags) == st
            && next_flags(self.proto, st, self.dir, ack) == st
    }
}

impl Record {
    /// The session `h` as a packet of `dir` with TCP `flags` (0 for other protocols) at
    /// `now` leaves it, observed unless killed; `None` if the record no longer holds that
    /// session.
    #[inline(always)]
    pub(crate) fn read_forwarding(
        &self,
        h: Handle,
        dir: Dir,
        flags: u8,
        now: u32,
    ) -> Option<Forwarding> {
        let gen_ = h.gen_;
        if self.seq.load(Ordering::Acquire) != gen_ {
            return None;
        }
        let k1 = self.key[1].load(Ordering::Relaxed);
        let (addrs, ports, vrf) = match dir {
            Dir::Forward => (
                self.xaddr.load(Ordering::Relaxed),
                self.xports.load(Ordering::Relaxed),
                self.xvrf_backend.load(Ordering::Relaxed) >> 16,
            ),
            // A reply leaves with the client's key reversed, in the client's VRF.
            Dir::Reverse => (
                self.key[0].load(Ordering::Relaxed).rotate_left(32),
                (k1 as u32).rotate_left(16),
                (k1 >> 48) as u32,
            ),
        };
        let deltas = Deltas::unpack(self.deltas.load(Ordering::Relaxed));
        let translated = self.service.load(Ordering::Relaxed) != NONE;
        let status = self.status.load(Ordering::Relaxed);
        let last_seen = self.last_seen.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != gen_ {
            return None;
        }
        let f = Forwarding {
            addrs,
            ports,
            deltas: match dir {
                Dir::Forward => deltas,
                Dir::Reverse => deltas.neg(),
            },
            vrf,
            translated,
            handle: h,
            dir,
            proto: (k1 >> 32) as u8,
            status,
        };
        if f.killed() {
            return Some(f);
        }
        self.observe_seen((gen_, f.proto, status, last_seen), dir, flags, now);
        Some(f)
    }

    /// [`crate::Records::refresh`] on this record. The status word carries a tag of the
    /// generation, so a status that matches after the generation did is the same session's
    /// (a record freed and reused between the two loads has another tag).
    #[inline(always)]
    pub(crate) fn refresh(&self, gen_: u32, status: u64, now: u32) -> bool {
        if self.seq.load(Ordering::Acquire) != gen_ || self.status.load(Ordering::Relaxed) != status
        {
            return false;
        }
        let last_seen = self.last_seen.load(Ordering::Relaxed);
        if now.wrapping_sub(last_seen) as i32 >= super::LAST_SEEN_GRAIN as i32 {
            self.last_seen.store(now, Ordering::Relaxed);
        }
        true
    }
}
