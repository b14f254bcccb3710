//! A session's record: what was decided when it was created, and the state every worker
//! that sees one of its packets keeps current.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use crate::checksum::Deltas;
use crate::key::{Key, PROTO_ICMP, PROTO_TCP};
use crate::timeouts::{State, Timeouts};

mod forwarding;
pub use forwarding::Forwarding;

/// An opaque slot (service, backend) that is not set.
pub const NONE: u32 = u32::MAX;

/// TCP header flags as `observe` reads them.
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const ACK: u8 = 0x10;
}

/// Which of a session's two keys a packet matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// As the client sent it (the key the session was created with).
    Forward,
    /// A reply, as it arrives after the forward direction's translation.
    Reverse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    Allow,
    Deny,
}

/// The forward direction's rewrite: the addresses and ports a forward packet leaves with,
/// and the VRF slot it is routed in from here (replies come back in it). Fields that are not
/// translated hold the key's own values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Translation {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    /// Another VRF than the key's for a service reached from outside its network (a
    /// NodePort from the underlay's table to a network's backends).
    pub vrf: u16,
}

impl Translation {
    /// No rewrite (a policy-only session).
    pub const fn identity(k: &Key) -> Translation {
        Translation {
            src: k.src,
            dst: k.dst,
            sport: k.sport,
            dport: k.dport,
            vrf: k.vrf,
        }
    }
}

/// The most backend ids a session can name (they are stored in 16 bits; `0xffff` is
/// [`NONE`]).
pub const MAX_BACKEND_ID: u32 = 0xfffe;

/// What a session is created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewSession {
    pub key: Key,
    pub xlate: Translation,
    pub service: u32,
    /// At most [`MAX_BACKEND_ID`], or [`NONE`].
    pub backend: u32,
    /// The interface the forward direction came in on.
    pub owner_if: u32,
    /// The policy decision made at creation and the epoch it was made in; `None` leaves the
    /// first packet that reads it to evaluate.
    pub verdict: Option<(u32, Verdict)>,
}

impl NewSession {
    /// An untranslated session with no service and no verdict yet.
    pub const fn plain(key: Key) -> NewSession {
        NewSession {
            key,
            xlate: Translation::identity(&key),
            service: NONE,
            backend: NONE,
            owner_if: NONE,
            verdict: None,
        }
    }

    /// What replies look like: the translated packet, reversed.
    pub const fn reverse_key(&self) -> Key {
        reverse_key(&self.key, &self.xlate)
    }
}

const fn reverse_key(k: &Key, x: &Translation) -> Key {
    Key {
        vrf: x.vrf,
        proto: k.proto,
        src: x.dst,
        dst: x.src,
        sport: x.dport,
        dport: x.sport,
    }
}

/// How stale (ms) a session's last-seen time may be before a packet refreshes it.
pub const LAST_SEEN_GRAIN: u32 = 64;

/// Whether `last_seen` is more than `timeout` ms before `now`, on a wrapping clock. A
/// `last_seen` slightly ahead of `now` (another worker read the clock later) is not idle.
#[inline]
pub const fn idle_longer_than(now: u32, last_seen: u32, timeout: u32) -> bool {
    (now.wrapping_sub(last_seen) as i32) > timeout as i32
}

// The status word: flags, the cached policy verdict and its epoch, and a tag of the record's
// generation so that a compare-and-swap by a worker holding a stale handle fails instead of
// writing into the session that reuses the record.
const REPLIED: u64 = 1;
const FIN_FWD: u64 = 2;
const FIN_REV: u64 = 4;
const RST: u64 = 8;
const DEAD: u64 = 16;
/// Traffic both ways and then the client again: TCP's handshake completed (an ACK without
/// SYN or RST after the reply), a UDP or ICMP request after a reply. Only such a session is
/// protected from eviction: a SYN flood the backend answers, or a scan, never gets here.
const ESTABLISHED: u64 = 32;
const ALLOW: u64 = 1 << 16;
const EPOCH_SHIFT: u32 = 17;
const EPOCH_MASK: u64 = ((1 << 31) - 1) << EPOCH_SHIFT;
const TAG_SHIFT: u32 = 48;

/// Policy epochs are 31 bits; 0 means "never evaluated".
pub const EPOCH_BITS: u32 = 31;

const fn tag(gen_: u32) -> u64 {
    ((gen_ >> 1) as u64 & 0xffff) << TAG_SHIFT
}

const fn policy_bits(epoch: u32, v: Verdict) -> u64 {
    ((epoch as u64) << EPOCH_SHIFT) & EPOCH_MASK
        | match v {
            Verdict::Allow => ALLOW,
            Verdict::Deny => 0,
        }
}

/// The flags after one packet in `dir` with TCP `flags` (ignored for other protocols).
const fn next_flags(proto: u8, st: u64, dir: Dir, flags: u8) -> u64 {
    let mut st = st;
    if proto == PROTO_TCP {
        let closing = st & (FIN_FWD | FIN_REV | RST) != 0;
        if closing
            && matches!(dir, Dir::Forward)
            && flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN
        {
            // A new connection on the same four-tuple (a port reused after TIME_WAIT): start
            // over as embryonic, keeping the translation and backend.
            st &= !(FIN_FWD | FIN_REV | RST | REPLIED | ESTABLISHED);
        }
        if flags & tcp_flags::RST != 0 {
            st |= RST;
        }
        if flags & tcp_flags::FIN != 0 {
            st |= match dir {
                Dir::Forward => FIN_FWD,
                Dir::Reverse => FIN_REV,
            };
        }
    }
    let assures = proto != PROTO_TCP
        || flags & (tcp_flags::SYN | tcp_flags::RST) == 0 && flags & tcp_flags::ACK != 0;
    match dir {
        Dir::Reverse => st |= REPLIED,
        Dir::Forward if st & REPLIED != 0 && assures => st |= ESTABLISHED,
        Dir::Forward => {}
    }
    st
}

const fn state_of(proto: u8, st: u64) -> State {
    match proto {
        PROTO_TCP if st & (FIN_FWD | FIN_REV | RST) != 0 => State::TcpClosing,
        PROTO_TCP if st & ESTABLISHED != 0 => State::TcpEstablished,
        PROTO_TCP => State::TcpEmbryonic,
        PROTO_ICMP => State::Icmp,
        _ if st & REPLIED != 0 => State::UdpReplied,
        _ => State::UdpUnreplied,
    }
}

/// A consistent copy of a live session's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    pub key: Key,
    pub xlate: Translation,
    pub service: u32,
    pub backend: u32,
    pub owner_if: u32,
    pub created: u32,
    pub last_seen: u32,
    deltas: Deltas,
    status: u64,
}

impl Session {
    /// The key replies arrive with.
    pub const fn reverse_key(&self) -> Key {
        reverse_key(&self.key, &self.xlate)
    }

    /// The checksum deltas of rewriting a packet of direction `dir`.
    #[inline]
    pub const fn deltas(&self, dir: Dir) -> Deltas {
        match dir {
            Dir::Forward => self.deltas,
            Dir::Reverse => self.deltas.neg(),
        }
    }

    /// The (src, dst, sport, dport) a packet of direction `dir` leaves with.
    #[inline]
    pub const fn rewrite(&self, dir: Dir) -> (u32, u32, u16, u16) {
        let (k, x) = (&self.key, &self.xlate);
        match dir {
            Dir::Forward => (x.src, x.dst, x.sport, x.dport),
            Dir::Reverse => (k.dst, k.src, k.dport, k.sport),
        }
    }

    #[inline]
    pub const fn state(&self) -> State {
        state_of(self.key.proto, self.status)
    }

    /// Whether a packet was ever seen in the reverse direction.
    #[inline]
    pub const fn replied(&self) -> bool {
        self.status & REPLIED != 0
    }

    /// Whether the session is established: traffic both ways, then the client again (for
    /// TCP, the handshake's last ACK). Only those are never evicted.
    #[inline]
    pub const fn established(&self) -> bool {
        self.status & ESTABLISHED != 0
    }

    #[inline]
    pub const fn killed(&self) -> bool {
        self.status & DEAD != 0
    }

    /// The cached verdict if it was made in policy `epoch`; `None` means evaluate again (and
    /// store with [`crate::Table::set_verdict`]). One compare on the fast path.
    #[inline]
    pub const fn verdict(&self, epoch: u32) -> Option<Verdict> {
        verdict_of(self.status, epoch)
    }
}

/// A live session as a forwarded packet needs it ([`crate::Table::established`]): the
/// record's words as stored, copied under its seqlock, unpacked only when asked. Copying the
/// whole [`Session`] field by field cost more than the rest of the lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Established {
    pub handle: crate::Handle,
    /// Which of the session's keys the packet matched.
    pub dir: Dir,
    key: [u64; 2],
    xaddr: u64,
    xports: u32,
    deltas: u32,
    service: u32,
    /// The forward direction's VRF (high half) and the backend (low half), as stored.
    xvrf_backend: u32,
    owner_if: u32,
    status: u64,
}

impl Established {
    /// The VRF slot the matched direction's packet is routed in once rewritten: the
    /// translation's for a client's packet, the key's for a reply.
    #[inline]
    pub const fn vrf_out(&self) -> u32 {
        self.vrf_after(self.dir)
    }

    /// The VRF slot a packet of direction `dir` is routed in once rewritten.
    #[inline]
    pub const fn vrf_after(&self, dir: Dir) -> u32 {
        match dir {
            Dir::Forward => self.xvrf_backend >> 16,
            Dir::Reverse => (self.key[1] >> 48) as u32,
        }
    }

    /// The key the session was created with.
    #[inline]
    pub const fn key(&self) -> Key {
        Key::from_words(self.key)
    }

    /// The interface the forward direction came in on.
    #[inline]
    pub const fn owner_if(&self) -> u32 {
        self.owner_if
    }

    /// Whether a service translates the session (else it only holds a verdict).
    #[inline]
    pub const fn translated(&self) -> bool {
        self.service != NONE
    }

    /// The (src, dst, sport, dport) a packet of direction `dir` leaves with, as
    /// [`Session::rewrite`].
    #[inline]
    pub const fn rewrite(&self, dir: Dir) -> (u32, u32, u16, u16) {
        match dir {
            Dir::Forward => (
                (self.xaddr >> 32) as u32,
                self.xaddr as u32,
                (self.xports >> 16) as u16,
                self.xports as u16,
            ),
            Dir::Reverse => (
                self.key[0] as u32,
                (self.key[0] >> 32) as u32,
                self.key[1] as u16,
                (self.key[1] >> 16) as u16,
            ),
        }
    }

    /// The checksum deltas of rewriting the matched direction's packet.
    #[inline]
    pub const fn deltas(&self) -> Deltas {
        let d = Deltas::unpack(self.deltas);
        match self.dir {
            Dir::Forward => d,
            Dir::Reverse => d.neg(),
        }
    }

    /// As [`Session::verdict`].
    #[inline]
    pub const fn verdict(&self, epoch: u32) -> Option<Verdict> {
        verdict_of(self.status, epoch)
    }

    pub(crate) const fn killed(&self) -> bool {
        self.status & DEAD != 0
    }
}

/// The cached verdict in status word `st` if it was made in policy `epoch`.
#[inline]
const fn verdict_of(st: u64, epoch: u32) -> Option<Verdict> {
    if (st & EPOCH_MASK) >> EPOCH_SHIFT != epoch as u64 {
        return None;
    }
    Some(if st & ALLOW != 0 {
        Verdict::Allow
    } else {
        Verdict::Deny
    })
}

/// One session's record: 64 bytes, one cache line. `xvrf_backend` packs the translation's
/// VRF (high half) and the backend id (low half, `0xffff` for none).
///
/// `seq` is the record's seqlock and its generation at once: odd while the record is free or
/// being written by its owner, even (the generation) while a session lives in it. Hash
/// entries carry the generation they were made for, and a reader accepts a record only if
/// `seq` equals it before and after copying, so it never acts on a half-old, half-new record.
/// The fields written once at creation are atomics only because readers race with their
/// reuse; `last_seen` and `status` are updated in place by any worker, without the seqlock.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Record {
    seq: AtomicU32,
    owner_if: AtomicU32,
    key: [AtomicU64; 2],
    xaddr: AtomicU64,
    xports: AtomicU32,
    deltas: AtomicU32,
    service: AtomicU32,
    xvrf_backend: AtomicU32,
    last_seen: AtomicU32,
    created: AtomicU32,
    status: AtomicU64,
}

const _: () = assert!(size_of::<Record>() == 64);

impl Default for Record {
    fn default() -> Record {
        Record {
            seq: AtomicU32::new(1),
            owner_if: AtomicU32::new(0),
            key: [AtomicU64::new(0), AtomicU64::new(0)],
            xaddr: AtomicU64::new(0),
            xports: AtomicU32::new(0),
            deltas: AtomicU32::new(0),
            service: AtomicU32::new(0),
            xvrf_backend: AtomicU32::new(0),
            last_seen: AtomicU32::new(0),
            created: AtomicU32::new(0),
            status: AtomicU64::new(0),
        }
    }
}

impl Record {
    /// The generation, if a session lives here (owner's view: it is the only writer).
    pub(crate) fn live_gen(&self) -> Option<u32> {
        let s = self.seq.load(Ordering::Relaxed);
        (s & 1 == 0).then_some(s)
    }

    /// Owner only, on a free record: the generation its next session gets, one past the odd
    /// sequence it was freed with (wrapping after 2^31 sessions).
    pub(crate) fn next_gen(&self) -> u32 {
        let s = self.seq.load(Ordering::Relaxed);
        debug_assert!(s & 1 == 1, "record {s} is not free");
        s.wrapping_add(1)
    }

    /// Owner only, on a free record: fills it and publishes generation `gen_` (even).
    pub(crate) fn publish(&self, s: &NewSession, gen_: u32, now: u32) {
        debug_assert!(self.seq.load(Ordering::Relaxed) & 1 == 1 && gen_ & 1 == 0);
        // Orders the freeing store of `seq` (odd) before these writes, for readers that
        // validate with an acquire fence.
        fence(Ordering::Release);
        let [k0, k1] = s.key.words();
        let x = &s.xlate;
        let k = &s.key;
        self.key[0].store(k0, Ordering::Relaxed);
        self.key[1].store(k1, Ordering::Relaxed);
        self.xaddr
            .store(u64::from(x.src) << 32 | u64::from(x.dst), Ordering::Relaxed);
        self.xports.store(
            u32::from(x.sport) << 16 | u32::from(x.dport),
            Ordering::Relaxed,
        );
        let d = Deltas::of_rewrite(
            k.proto,
            (k.src, k.dst, k.sport, k.dport),
            (x.src, x.dst, x.sport, x.dport),
        );
        self.deltas.store(d.pack(), Ordering::Relaxed);
        self.service.store(s.service, Ordering::Relaxed);
        debug_assert!(s.backend == NONE || s.backend <= MAX_BACKEND_ID);
        self.xvrf_backend.store(
            u32::from(x.vrf) << 16 | (s.backend & 0xffff),
            Ordering::Relaxed,
        );
        self.owner_if.store(s.owner_if, Ordering::Relaxed);
        self.last_seen.store(now, Ordering::Relaxed);
        self.created.store(now, Ordering::Relaxed);
        let policy = s.verdict.map_or(0, |(e, v)| policy_bits(e, v));
        self.status.store(tag(gen_) | policy, Ordering::Relaxed);
        self.seq.store(gen_, Ordering::Release);
    }

    /// Owner only: the session is gone; readers holding its generation now miss.
    pub(crate) fn retire(&self, gen_: u32) {
        self.seq.store(gen_ | 1, Ordering::Release);
    }

    /// A consistent copy of the session of generation `gen_`, if it still lives here.
    #[inline]
    pub(crate) fn read(&self, gen_: u32) -> Option<Session> {
        if self.seq.load(Ordering::Acquire) != gen_ {
            return None;
        }
        let s = self.copy();
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == gen_).then_some(s)
    }

    /// [`Record::read`] of what the established path needs (see [`Established`]), with the
    /// last-seen time.
    #[inline]
    pub(crate) fn read_established(
        &self,
        h: crate::Handle,
        dir: Dir,
    ) -> Option<(Established, u32)> {
        if self.seq.load(Ordering::Acquire) != h.gen_ {
            return None;
        }
        let e = Established {
            handle: h,
            dir,
            key: [
                self.key[0].load(Ordering::Relaxed),
                self.key[1].load(Ordering::Relaxed),
            ],
            xaddr: self.xaddr.load(Ordering::Relaxed),
            xports: self.xports.load(Ordering::Relaxed),
            deltas: self.deltas.load(Ordering::Relaxed),
            service: self.service.load(Ordering::Relaxed),
            xvrf_backend: self.xvrf_backend.load(Ordering::Relaxed),
            owner_if: self.owner_if.load(Ordering::Relaxed),
            status: self.status.load(Ordering::Relaxed),
        };
        let last_seen = self.last_seen.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == h.gen_).then_some((e, last_seen))
    }

    /// A consistent copy of whatever session lives here, with its generation (control
    /// thread's scans; retried while the owner writes).
    pub(crate) fn read_any(&self) -> Option<(u32, Session)> {
        loop {
            let g = self.seq.load(Ordering::Acquire);
            if g & 1 == 1 {
                return None;
            }
            if let Some(s) = self.read(g) {
                return Some((g, s));
            }
        }
    }

    #[inline]
    fn copy(&self) -> Session {
        let xaddr = self.xaddr.load(Ordering::Relaxed);
        let xports = self.xports.load(Ordering::Relaxed);
        let xb = self.xvrf_backend.load(Ordering::Relaxed);
        Session {
            key: Key::from_words([
                self.key[0].load(Ordering::Relaxed),
                self.key[1].load(Ordering::Relaxed),
            ]),
            xlate: Translation {
                src: (xaddr >> 32) as u32,
                dst: xaddr as u32,
                sport: (xports >> 16) as u16,
                dport: xports as u16,
                vrf: (xb >> 16) as u16,
            },
            service: self.service.load(Ordering::Relaxed),
            backend: match xb & 0xffff {
                0xffff => NONE,
                b => b,
            },
            owner_if: self.owner_if.load(Ordering::Relaxed),
            created: self.created.load(Ordering::Relaxed),
            last_seen: self.last_seen.load(Ordering::Relaxed),
            deltas: Deltas::unpack(self.deltas.load(Ordering::Relaxed)),
            status: self.status.load(Ordering::Relaxed),
        }
    }

    /// Changes the status word of generation `gen_` by `f`, storing only when it changes
    /// (an unchanged word stays shared in every worker's cache). `None` if the session is
    /// gone, killed, or `f` declines.
    fn update_status(&self, gen_: u32, f: impl Fn(u64) -> Option<u64>) -> Option<u64> {
        let mut st = self.status.load(Ordering::Relaxed);
        loop {
            if st & (0xffff << TAG_SHIFT) != tag(gen_) || st & DEAD != 0 {
                return None;
            }
            let new = f(st)?;
            if new == st {
                return Some(st);
            }
            match self
                .status
                .compare_exchange_weak(st, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(new),
                Err(cur) => st = cur,
            }
        }
    }

    /// A packet of direction `dir` seen at `now`: the state after it, or `None` if the
    /// session is gone or killed.
    #[inline]
    pub(crate) fn observe(&self, gen_: u32, dir: Dir, flags: u8, now: u32) -> Option<State> {
        let proto = (self.key[1].load(Ordering::Relaxed) >> 32) as u8;
        let st = self.update_status(gen_, |st| Some(next_flags(proto, st, dir, flags)))?;
        // A racing reuse may let this store land in the next session: it is then refreshed
        // at its own creation time, which is harmless. Stored at most every
        // [`LAST_SEEN_GRAIN`] ms: the line is written rarely, whichever workers see the
        // flow, and a timeout (10 s at least) comes that much early at most.
        let last = self.last_seen.load(Ordering::Relaxed);
        if now.wrapping_sub(last) as i32 >= LAST_SEEN_GRAIN as i32 {
            self.last_seen.store(now, Ordering::Relaxed);
        }
        Some(state_of(proto, st))
    }

    /// [`Record::observe`] of the live session `e` just read (its status word and
    /// `last_seen`): stores nothing, and reads nothing again, when the packet changes no flag
    /// and the time is fresh enough, as for nearly every packet of an established flow.
    #[inline]
    pub(crate) fn observe_read(&self, e: &Established, last_seen: u32, flags: u8, now: u32) {
        let seen = (e.handle.gen_, (e.key[1] >> 32) as u8, e.status, last_seen);
        self.observe_seen(seen, e.dir, flags, now);
    }

    /// [`Record::observe_read`] of what a reader copied of generation `gen_`: its protocol,
    /// status word and last-seen time.
    #[inline(always)]
    fn observe_seen(
        &self,
        (gen_, proto, status, last_seen): (u32, u8, u64, u32),
        dir: Dir,
        flags: u8,
        now: u32,
    ) {
        if next_flags(proto, status, dir, flags) != status {
            self.observe_changed(gen_, dir, flags, now);
        } else if now.wrapping_sub(last_seen) as i32 >= LAST_SEEN_GRAIN as i32 {
            self.last_seen.store(now, Ordering::Relaxed);
        }
    }

    #[cold]
    fn observe_changed(&self, gen_: u32, dir: Dir, flags: u8, now: u32) {
        self.observe(gen_, dir, flags, now);
    }

    pub(crate) fn set_verdict(&self, gen_: u32, epoch: u32, v: Verdict) -> bool {
        let bits = policy_bits(epoch, v);
        self.update_status(gen_, |st| Some(st & !(EPOCH_MASK | ALLOW) | bits))
            .is_some()
    }

    /// Marks the session dead; `false` if it was gone or already dead.
    pub(crate) fn kill(&self, gen_: u32) -> bool {
        self.update_status(gen_, |st| Some(st | DEAD)).is_some()
    }

    /// The owner's sweep: whether the session is dead or idle past its state's timeout.
    pub(crate) fn due(&self, now: u32, t: &Timeouts) -> Option<Due> {
        let st = self.status.load(Ordering::Relaxed);
        if st & DEAD != 0 {
            return Some(Due::Killed);
        }
        let proto = (self.key[1].load(Ordering::Relaxed) >> 32) as u8;
        let timeout = t.of(state_of(proto, st));
        idle_longer_than(now, self.last_seen.load(Ordering::Relaxed), timeout)
            .then_some(Due::Expired)
    }

    /// Whether the session is established (the eviction rule protects those).
    pub(crate) fn established(&self) -> bool {
        self.status.load(Ordering::Relaxed) & ESTABLISHED != 0
    }

    pub(crate) fn created(&self) -> u32 {
        self.created.load(Ordering::Relaxed)
    }

    /// Owner only: the two keys of the live session (to remove its hash entries).
    pub(crate) fn keys(&self) -> (Key, Key) {
        let s = self.copy();
        (s.key, s.reverse_key())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    Expired,
    Killed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::PROTO_UDP;
    use tcp_flags::{ACK, FIN, SYN};
    const RST: u8 = tcp_flags::RST;

    fn tcp(st: u64, steps: &[(Dir, u8)]) -> State {
        let st = steps
            .iter()
            .fold(st, |s, &(d, f)| next_flags(PROTO_TCP, s, d, f));
        state_of(PROTO_TCP, st)
    }

    #[test]
    fn tcp_states_follow_replies_fins_and_resets() {
        use Dir::*;
        assert_eq!(tcp(0, &[(Forward, SYN)]), State::TcpEmbryonic);
        assert_eq!(
            tcp(0, &[(Forward, SYN), (Forward, SYN)]),
            State::TcpEmbryonic
        );
        // A SYN-ACK alone is half open (a SYN flood the backend answers); the client's ACK
        // completes the handshake, its RST does not.
        assert_eq!(
            tcp(0, &[(Forward, SYN), (Reverse, SYN | ACK)]),
            State::TcpEmbryonic
        );
        assert_eq!(
            tcp(0, &[(Forward, SYN), (Reverse, SYN | ACK), (Forward, ACK)]),
            State::TcpEstablished
        );
        assert_eq!(
            tcp(0, &[(Forward, SYN), (Reverse, SYN | ACK), (Forward, RST)]),
            State::TcpClosing
        );
        assert_eq!(
            tcp(
                0,
                &[(Forward, SYN), (Reverse, SYN | ACK), (Forward, FIN | ACK)]
            ),
            State::TcpClosing
        );
        assert_eq!(
            tcp(0, &[(Forward, SYN), (Reverse, RST | ACK)]),
            State::TcpClosing
        );
        // A fresh SYN on a closed four-tuple starts a new embryonic connection.
        assert_eq!(
            tcp(0, &[(Reverse, ACK), (Forward, RST), (Forward, SYN)]),
            State::TcpEmbryonic
        );
        // ... but a SYN-ACK or a reply does not reopen it.
        assert_eq!(
            tcp(0, &[(Forward, FIN), (Reverse, SYN | ACK)]),
            State::TcpClosing
        );
    }

    #[test]
    fn udp_and_icmp_states() {
        let r = next_flags(PROTO_UDP, 0, Dir::Reverse, 0);
        assert_eq!(state_of(PROTO_UDP, 0), State::UdpUnreplied);
        assert_eq!(state_of(PROTO_UDP, r), State::UdpReplied);
        assert_eq!(
            state_of(PROTO_UDP, next_flags(PROTO_UDP, 0, Dir::Forward, FIN)),
            State::UdpUnreplied
        );
        assert_eq!(state_of(PROTO_ICMP, r), State::Icmp);
        assert_eq!(state_of(47, r), State::UdpReplied, "other protocols as UDP");
    }

    #[test]
    fn idle_time_wraps_and_tolerates_a_clock_slightly_ahead() {
        assert!(!idle_longer_than(1000, 0, 1000));
        assert!(idle_longer_than(1001, 0, 1000));
        assert!(
            idle_longer_than(5, u32::MAX - 1000, 1000),
            "across the wrap"
        );
        assert!(!idle_longer_than(5, 10, 1000), "last_seen ahead of now");
    }

    #[test]
    fn a_stale_handle_cannot_write_into_the_next_session() {
        let r = Record::default();
        let s = NewSession::plain(Key::new(0, PROTO_TCP, 1, 2, 3, 4));
        r.publish(&s, 2, 100);
        r.observe(2, Dir::Reverse, ACK, 150);
        assert_eq!(
            r.observe(2, Dir::Forward, ACK, 150),
            Some(State::TcpEstablished)
        );
        assert!(r.set_verdict(2, 5, Verdict::Allow));
        assert_eq!(r.read(2).unwrap().verdict(5), Some(Verdict::Allow));
        assert_eq!(r.read(2).unwrap().verdict(6), None);
        r.retire(2);
        assert_eq!(r.read(2), None);
        r.publish(&s, 4, 200);
        assert!(!r.set_verdict(2, 7, Verdict::Allow));
        assert_eq!(r.observe(2, Dir::Reverse, ACK, 250), None);
        let now = r.read(4).unwrap();
        assert_eq!(now.state(), State::TcpEmbryonic);
        assert_eq!(now.verdict(7), None);
        assert!(r.kill(4));
        assert!(!r.kill(4), "killed once");
        assert_eq!(
            r.observe(4, Dir::Forward, 0, 300),
            None,
            "dead sessions stay dead"
        );
        assert_eq!(r.due(300, &Timeouts::default()), Some(Due::Killed));
    }
}
