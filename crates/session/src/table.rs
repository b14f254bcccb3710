//! The shared table: two hash entries per session, the session records, and what every
//! thread may do with them (look up, observe, decide policy, kill).

use core::hint::spin_loop;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::sync::Arc;

use crate::key::{Key, hash_words, random_seed};
use crate::owner::{OWNER_BYTES_PER_SESSION, Owner};
use crate::record::{Dir, Established, Forwarding, Record, Session, Verdict};
use crate::timeouts::{State, Timeouts};

/// Slots per bucket: a 64-bit sequence word and five 24-byte slots fill two cache lines.
pub const SLOTS: usize = 5;

/// Hash entries per slot on average when the table is full: two entries per session and one
/// bucket of five slots per session, 40% full. Two-choice insertion (no moves) then overflows
/// a bucket pair about never (none in 2M entries into 1M buckets in simulation, over several
/// seeds); a full pair still has a rule (see the crate's documentation).
const BUCKETS_PER_SESSION: usize = 1;

/// The largest capacity: session ids are 31 bits in a hash entry, and rounding the owners'
/// shares up may add a few.
pub const MAX_SESSIONS: u32 = 1 << 30;

// A hash entry's value: bit 63 marks it used, bits 32..63 the generation halved (generations
// are even), bits 1..32 the session id, bit 0 the direction.
const USED: u64 = 1 << 63;
/// An empty slot's second key word: real keys have bits 56..64 clear, so it never matches.
const EMPTY_K1: u64 = u64::MAX;

#[inline]
pub(crate) const fn entry(id: u32, gen_: u32, dir: Dir) -> u64 {
    USED | ((gen_ >> 1) as u64) << 32
        | (id as u64) << 1
        | match dir {
            Dir::Forward => 0,
            Dir::Reverse => 1,
        }
}

#[inline]
pub(crate) const fn entry_parts(v: u64) -> (u32, u32, Dir) {
    let id = ((v >> 1) as u32) & 0x7fff_ffff;
    let gen_ = ((v >> 32) as u32) << 1;
    let dir = if v & 1 == 0 {
        Dir::Forward
    } else {
        Dir::Reverse
    };
    (id, gen_, dir)
}

#[repr(C)]
#[derive(Debug)]
struct Slot {
    k: [AtomicU64; 2],
    v: AtomicU64,
}

/// Two cache lines: readers validate their probe against `seq` (a seqlock; odd while a
/// writer holds the bucket), writers lock by moving `seq` from even to odd.
#[repr(C, align(64))]
#[derive(Debug)]
struct Bucket {
    seq: AtomicU64,
    slots: [Slot; SLOTS],
}

const _: () = assert!(size_of::<Bucket>() == 128);

impl Default for Bucket {
    fn default() -> Bucket {
        Bucket {
            seq: AtomicU64::new(0),
            slots: core::array::from_fn(|_| Slot {
                k: [AtomicU64::new(0), AtomicU64::new(EMPTY_K1)],
                v: AtomicU64::new(0),
            }),
        }
    }
}

impl Bucket {
    /// The value stored under `w`, read without writing anything.
    #[inline(always)]
    fn find(&self, w: [u64; 2]) -> Option<u64> {
        match self.try_find(w) {
            Ok(v) => v,
            Err(()) => self.find_contended(w),
        }
    }

    /// [`Bucket::find`] while a writer holds the bucket for a few stores (out of line: the
    /// retry loop kept in line costs every probe its hoisted slot addresses).
    #[cold]
    #[inline(never)]
    fn find_contended(&self, w: [u64; 2]) -> Option<u64> {
        loop {
            spin_loop();
            if let Ok(v) = self.try_find(w) {
                return v;
            }
        }
    }

    /// One seqlocked probe: `Err` if a writer held the bucket meanwhile.
    #[inline(always)]
    fn try_find(&self, w: [u64; 2]) -> Result<Option<u64>, ()> {
        let s = self.seq.load(Ordering::Acquire);
        if s & 1 != 0 {
            return Err(());
        }
        let mut v = 0;
        for slot in &self.slots {
            if slot.k[0].load(Ordering::Relaxed) == w[0]
                && slot.k[1].load(Ordering::Relaxed) == w[1]
            {
                v = slot.v.load(Ordering::Relaxed);
                break;
            }
        }
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != s {
            return Err(());
        }
        Ok((v != 0).then_some(v))
    }

    fn lock(&self) {
        loop {
            let s = self.seq.load(Ordering::Relaxed);
            if s & 1 == 0
                && self
                    .seq
                    .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                // The seqlock writer's fence: readers that see any store below also see the
                // odd sequence.
                fence(Ordering::Release);
                return;
            }
            spin_loop();
        }
    }

    fn unlock(&self) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Release);
    }

    /// Locked: the slot holding `w`, if any.
    fn slot_of(&self, w: [u64; 2]) -> Option<&Slot> {
        self.slots.iter().find(|s| {
            s.k[0].load(Ordering::Relaxed) == w[0] && s.k[1].load(Ordering::Relaxed) == w[1]
        })
    }
}

/// A table's size and timeouts, fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Sessions the table holds at most, split evenly between the owners (rounded up).
    pub max_sessions: u32,
    /// Owners (one per worker).
    pub workers: u32,
    pub timeouts: Timeouts,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("max_sessions is {0}: it must be between 1 and {MAX_SESSIONS}")]
    Sessions(u32),
    #[error("workers is 0: a table needs one owner or more")]
    NoWorkers,
    #[error("a timeout of {0} ms is too long: idle times are compared within 2^31 ms")]
    Timeout(u32),
}

/// [`Table::records`].
#[derive(Debug, Clone, Copy)]
pub struct Records<'a>(&'a [Record]);

impl Records<'_> {
    /// The check behind a copy of a session's [`Forwarding`] kept for packets that change
    /// nothing in it ([`Forwarding::steady`]): whether the session `h` still lives with the
    /// status word `status` the copy was made with (not killed, freed, re-judged or moved
    /// on in its state since). If so it is observed as such a packet at `now` would be (its
    /// last-seen time), and the copy still holds.
    #[inline(always)]
    pub fn refresh(self, h: Handle, status: u64, now: u32) -> bool {
        self.0
            .get(h.id as usize)
            .is_some_and(|r| r.refresh(h.gen_, status, now))
    }
}

/// A session as a worker refers to it after a lookup or a creation: its id and the
/// generation of the record it was found in, so that acting on it after the record was reused
/// does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    pub(crate) id: u32,
    pub(crate) gen_: u32,
}

impl Handle {
    pub const fn id(&self) -> u32 {
        self.id
    }
}

/// A handle of no session: an odd generation, which no live record has.
impl Default for Handle {
    fn default() -> Handle {
        Handle { id: 0, gen_: 1 }
    }
}

/// A hash hit: the session and which of its keys matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub handle: Handle,
    pub dir: Dir,
    pub session: Session,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Miss,
    Live(Hit),
    /// The session was killed by the control thread (its backend went away, a policy
    /// changed): the node drops or resets the packet rather than creating a new session in
    /// its place, which its owner's next sweep removes.
    Killed(Hit),
}

/// What [`Table::established`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Miss,
    /// A live session, the packet observed in it.
    Live(Established),
    /// As [`Lookup::Killed`]; nothing observed.
    Killed(Handle),
}

/// Why an insertion of a session's two entries did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Exists,
    ReverseInUse,
    /// No room in a key's two buckets.
    Full,
}

/// The session table every worker reads. Created with its owners by [`Table::new`].
#[derive(Debug)]
pub struct Table {
    seed: [u64; 2],
    buckets: Box<[Bucket]>,
    records: Box<[Record]>,
    timeouts: Timeouts,
    epoch: AtomicU32,
}

impl Table {
    /// A table for `config.max_sessions` sessions and one [`Owner`] per worker, each owning
    /// an equal range of session ids. All memory is allocated here, none later.
    pub fn new(config: Config) -> Result<(Arc<Table>, Vec<Owner>), ConfigError> {
        if config.workers == 0 {
            return Err(ConfigError::NoWorkers);
        }
        if config.max_sessions == 0 || config.max_sessions > MAX_SESSIONS {
            return Err(ConfigError::Sessions(config.max_sessions));
        }
        let max_timeout = config.timeouts.max();
        if max_timeout >= 1 << 31 {
            return Err(ConfigError::Timeout(max_timeout));
        }
        let per_owner = config.max_sessions.div_ceil(config.workers);
        let capacity = per_owner as usize * config.workers as usize;
        // At least two buckets, so that the two choices can differ.
        Ok(Table::build(
            config,
            (capacity * BUCKETS_PER_SESSION).max(2),
        ))
    }

    /// [`Table::new`] with a chosen number of buckets (tests fill buckets on purpose).
    pub(crate) fn build(config: Config, buckets: usize) -> (Arc<Table>, Vec<Owner>) {
        let per_owner = config.max_sessions.div_ceil(config.workers);
        let capacity = per_owner as usize * config.workers as usize;
        let t = Arc::new(Table {
            seed: random_seed(),
            buckets: (0..buckets).map(|_| Bucket::default()).collect(),
            records: (0..capacity).map(|_| Record::default()).collect(),
            timeouts: config.timeouts,
            epoch: AtomicU32::new(1),
        });
        let owners = (0..config.workers)
            .map(|w| Owner::new(t.clone(), w * per_owner, per_owner))
            .collect();
        (t, owners)
    }

    /// Sessions the table can hold.
    pub fn capacity(&self) -> usize {
        self.records.len()
    }

    /// Bytes allocated for the table and its owners' bookkeeping.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Table>()
            + size_of_val(&*self.buckets)
            + size_of_val(&*self.records)
            + self.records.len() * OWNER_BYTES_PER_SESSION
            // The owners' live bits (a word more for each owner at most).
            + self.records.len().div_ceil(64) * size_of::<u64>()
    }

    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// The two candidate buckets of a key.
    #[inline]
    fn buckets_of(&self, w: [u64; 2]) -> (usize, usize) {
        let h = hash_words(w[0], w[1], self.seed);
        let n = self.buckets.len() as u64;
        // Lemire's multiply-shift maps 32 hash bits onto 0..n without a division.
        (
            (((h & 0xffff_ffff) * n) >> 32) as usize,
            (((h >> 32) * n) >> 32) as usize,
        )
    }

    #[inline(always)]
    fn find(&self, w: [u64; 2]) -> Option<u64> {
        let (a, b) = self.buckets_of(w);
        // Entries never move between a key's buckets, so each probe stands on its own.
        self.buckets[a].find(w).or_else(|| self.buckets[b].find(w))
    }

    /// The first read `read` makes of the record a live entry for `key` leads to (given the
    /// record, the entry's handle and direction), or `None` on a miss. A read that fails means
    /// the record was freed (and maybe reused) between the hash probe and the copy: the key is
    /// probed again, which then misses or finds the new session.
    #[inline(always)]
    fn probe<T>(
        &self,
        w: [u64; 2],
        mut read: impl FnMut(&Record, Handle, Dir) -> Option<T>,
    ) -> Option<T> {
        for _ in 0..4 {
            let (id, gen_, dir) = entry_parts(self.find(w)?);
            if let Some(t) = read(&self.records[id as usize], Handle { id, gen_ }, dir) {
                return Some(t);
            }
        }
        None
    }

    /// The session a packet with `key` belongs to. Writes nothing and never waits for a
    /// lock (only for a writer's few stores into the same bucket).
    #[inline]
    pub fn lookup(&self, key: &Key) -> Lookup {
        self.probe(key.words(), |r, handle, dir| {
            let session = r.read(handle.gen_)?;
            let hit = Hit {
                handle,
                dir,
                session,
            };
            Some(if session.killed() {
                Lookup::Killed(hit)
            } else {
                Lookup::Live(hit)
            })
        })
        .unwrap_or(Lookup::Miss)
    }

    /// The packet path's [`Table::lookup`] and [`Table::observe`] in one: the session a
    /// packet with `key` (TCP flags `tcp_flags`, 0 for other protocols) belongs to, seen at
    /// `now`, copied only as far as forwarding it needs.
    #[inline]
    pub fn established(&self, key: &Key, tcp_flags: u8, now: u32) -> Seen {
        self.probe(key.words(), |r, handle, dir| {
            let (e, last_seen) = r.read_established(handle, dir)?;
            if e.killed() {
                return Some(Seen::Killed(e.handle));
            }
            r.observe_read(&e, last_seen, tcp_flags, now);
            Some(Seen::Live(e))
        })
        .unwrap_or(Seen::Miss)
    }

    /// The fast path's [`Table::established`]: the live session of the packed key `w` as a
    /// packet of it with TCP `tcp_flags` at `now` leaves it ([`Forwarding`], observed unless
    /// killed), or `None` on a miss.
    #[inline(always)]
    pub fn forwarding(&self, w: [u64; 2], tcp_flags: u8, now: u32) -> Option<Forwarding> {
        self.probe(w, |r, h, dir| r.read_forwarding(h, dir, tcp_flags, now))
    }

    /// The table's records, for [`Records::refresh`] (a view a caller keeps for a pass
    /// over many packets: the slice, not the table, in its registers).
    #[inline]
    pub fn records(&self) -> Records<'_> {
        Records(&self.records)
    }

    /// [`Table::established`]'s copy of the session `h` refers to, for a packet of `dir`,
    /// if it still lives (nothing observed).
    pub fn established_of(&self, h: Handle, dir: Dir) -> Option<Established> {
        let r = self.records.get(h.id as usize)?;
        r.read_established(h, dir).map(|(e, _)| e)
    }

    /// A consistent copy of the session `h` refers to, if it still lives.
    pub fn session(&self, h: Handle) -> Option<Session> {
        self.records.get(h.id as usize)?.read(h.gen_)
    }

    /// A packet of direction `dir` (TCP flags `tcp_flags`, 0 for other protocols) seen at
    /// `now`: updates the session's state and last-seen time, storing nothing that would not
    /// change. The state after it, or `None` if the session is gone or killed.
    #[inline]
    pub fn observe(&self, h: Handle, dir: Dir, tcp_flags: u8, now: u32) -> Option<State> {
        self.records
            .get(h.id as usize)?
            .observe(h.gen_, dir, tcp_flags, now)
    }

    /// The global policy epoch: a session whose cached verdict is of another epoch is
    /// evaluated again.
    #[inline]
    pub fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Moves to a new policy epoch (the control thread, after changing a policy); every
    /// cached verdict becomes stale. Epochs are 31 bits and skip 0 ("never evaluated").
    pub fn bump_epoch(&self) -> u32 {
        let next = |e: u32| match (e + 1) & ((1 << crate::record::EPOCH_BITS) - 1) {
            0 => 1,
            n => n,
        };
        let mut e = self.epoch.load(Ordering::Relaxed);
        loop {
            match self
                .epoch
                .compare_exchange_weak(e, next(e), Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return next(e),
                Err(cur) => e = cur,
            }
        }
    }

    /// Caches `verdict` as made in `epoch`; `false` if the session is gone or killed.
    pub fn set_verdict(&self, h: Handle, epoch: u32, verdict: Verdict) -> bool {
        self.records
            .get(h.id as usize)
            .is_some_and(|r| r.set_verdict(h.gen_, epoch, verdict))
    }

    /// Marks every live session for which `pred` holds as killed (the control thread); the
    /// owners free them on their next sweeps. Returns how many were killed. Scans every
    /// record: not for the packet path.
    pub fn kill(&self, mut pred: impl FnMut(&Session) -> bool) -> usize {
        self.records
            .iter()
            .filter(|r| match r.read_any() {
                Some((g, s)) if !s.killed() && pred(&s) => r.kill(g),
                _ => false,
            })
            .count()
    }

    /// Kills the sessions of one backend of one service.
    pub fn kill_backend(&self, service: u32, backend: u32) -> usize {
        self.kill(|s| s.service == service && s.backend == backend)
    }

    /// A copy of every live session, killed ones included (a scan, for the control thread's
    /// `show`; not for the packet path).
    pub fn live(&self) -> impl Iterator<Item = Session> + '_ {
        self.records
            .iter()
            .filter_map(|r| r.read_any().map(|(_, s)| s))
    }

    /// Live sessions, killed ones included (a scan, for the control thread and tests).
    pub fn count_live(&self) -> usize {
        self.records
            .iter()
            .filter(|r| r.read_any().is_some())
            .count()
    }

    pub(crate) fn record(&self, id: u32) -> &Record {
        &self.records[id as usize]
    }

    /// Inserts both entries of a session, or neither: `fwd` must be absent (else another
    /// worker created the same flow first) and so must `rev` (else, say, the SNAT port is
    /// taken). Holds the (up to four) buckets involved at once, locked in index order so that
    /// two inserters never wait on each other in a circle.
    pub(crate) fn insert_pair(
        &self,
        fwd: Key,
        rev: Key,
        id: u32,
        gen_: u32,
    ) -> Result<(), Refused> {
        let (wf, wr) = (fwd.words(), rev.words());
        let (fa, fb) = self.buckets_of(wf);
        let (ra, rb) = self.buckets_of(wr);
        let mut held = [fa, fb, ra, rb];
        held.sort_unstable();
        let mut n = 0;
        for i in 0..4 {
            if i == 0 || held[i] != held[n - 1] {
                held[n] = held[i];
                n += 1;
            }
        }
        let held = &held[..n];
        for &b in held {
            self.buckets[b].lock();
        }
        let r = self.insert_locked((wf, fa, fb), (wr, ra, rb), id, gen_);
        for &b in held.iter().rev() {
            self.buckets[b].unlock();
        }
        r
    }

    fn insert_locked(
        &self,
        (wf, fa, fb): ([u64; 2], usize, usize),
        (wr, ra, rb): ([u64; 2], usize, usize),
        id: u32,
        gen_: u32,
    ) -> Result<(), Refused> {
        let b = &self.buckets;
        if b[fa].slot_of(wf).is_some() || b[fb].slot_of(wf).is_some() {
            return Err(Refused::Exists);
        }
        if b[ra].slot_of(wr).is_some() || b[rb].slot_of(wr).is_some() {
            return Err(Refused::ReverseInUse);
        }
        // The emptier of each key's two buckets; the reverse entry's choice sees the slot
        // the forward entry is about to take.
        let sf = self.free_slot(fa, fb, None);
        let (Some(sf), Some(sr)) = (sf, self.free_slot(ra, rb, sf)) else {
            return Err(Refused::Full);
        };
        for ((bi, si), w, dir) in [(sf, wf, Dir::Forward), (sr, wr, Dir::Reverse)] {
            let s = &b[bi].slots[si];
            s.k[0].store(w[0], Ordering::Relaxed);
            s.k[1].store(w[1], Ordering::Relaxed);
            s.v.store(entry(id, gen_, dir), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Locked: a free (bucket, slot) in the emptier of buckets `x` and `y`, not `taken`.
    fn free_slot(
        &self,
        x: usize,
        y: usize,
        taken: Option<(usize, usize)>,
    ) -> Option<(usize, usize)> {
        let b = &self.buckets;
        let free = |bi: usize, si: usize| {
            b[bi].slots[si].v.load(Ordering::Relaxed) == 0 && taken != Some((bi, si))
        };
        let used = |bi: usize| (0..SLOTS).filter(|&si| !free(bi, si)).count();
        let first_free = |bi: usize| (0..SLOTS).find(|&si| free(bi, si)).map(|si| (bi, si));
        let (p, q) = if used(y) < used(x) { (y, x) } else { (x, y) };
        first_free(p).or_else(|| first_free(q))
    }

    /// The values of the entries in the candidate buckets of `keys` (eviction candidates
    /// after a [`Refused::Full`]). Read without the lock: the caller only trusts the entries
    /// of its own sessions, which no one else removes.
    pub(crate) fn entries_near(&self, keys: [Key; 2]) -> impl Iterator<Item = u64> + '_ {
        keys.into_iter()
            .flat_map(|k| {
                let (a, b) = self.buckets_of(k.words());
                [a, b]
            })
            .flat_map(|i| self.buckets[i].slots.iter())
            .map(|s| s.v.load(Ordering::Relaxed))
            .filter(|&v| v != 0)
    }

    /// Removes the entry `key → value`, if present (the owner, freeing a session).
    pub(crate) fn remove_entry(&self, key: Key, value: u64) -> bool {
        let w = key.words();
        let (a, b) = self.buckets_of(w);
        for i in [a, b] {
            let bucket = &self.buckets[i];
            bucket.lock();
            let slot = bucket
                .slot_of(w)
                .filter(|s| s.v.load(Ordering::Relaxed) == value);
            if let Some(s) = slot {
                s.v.store(0, Ordering::Relaxed);
                s.k[0].store(0, Ordering::Relaxed);
                s.k[1].store(EMPTY_K1, Ordering::Relaxed);
            }
            bucket.unlock();
            if slot.is_some() {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests;
