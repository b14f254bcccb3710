//! A worker's share of the table: its range of session ids, its free ids, its eviction
//! order and its sweep. Only the owner creates and frees the sessions of its range, so none
//! of this is shared or locked.

use std::sync::Arc;

use crate::record::{Due, NewSession};
use crate::table::{Handle, Refused, Table, entry, entry_parts};
use crate::{Dir, Key};

/// Bytes an owner keeps per session id: a free-ring slot and the eviction lists'.
pub(crate) const OWNER_BYTES_PER_SESSION: usize =
    size_of::<u32>() + crate::evict::BYTES_PER_SESSION;

/// What one owner did, for `show` and metrics (summed over workers when read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub created: u64,
    /// Refused: no free id and no session that is not established to evict.
    pub refused_full: u64,
    /// Sessions not established evicted to make room for a new one.
    pub evicted_embryonic: u64,
    pub expired: u64,
    /// Killed sessions freed by the sweep.
    pub killed: u64,
    /// Refused: both candidate buckets of a key full, nothing of ours evictable there.
    pub insert_collisions: u64,
    /// Refused: the forward key existed (another worker created the flow first).
    pub exists: u64,
    /// Refused: the reverse key existed (the caller retries with another port).
    pub reverse_in_use: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.created += o.created;
        self.refused_full += o.refused_full;
        self.evicted_embryonic += o.evicted_embryonic;
        self.expired += o.expired;
        self.killed += o.killed;
        self.insert_collisions += o.insert_collisions;
        self.exists += o.exists;
        self.reverse_in_use += o.reverse_in_use;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    #[error("a session with this forward key exists: look it up again")]
    Exists,
    #[error("the reverse key is in use: choose another translation (port)")]
    ReverseInUse,
    #[error("no free session and none that is not established to evict")]
    Full,
    #[error("both hash buckets of a key are full")]
    Collision,
    #[error("the key is its own reverse (same address and port at both ends)")]
    Looped,
}

/// What one sweep freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Swept {
    pub expired: u32,
    pub killed: u32,
}

/// Fixed-capacity FIFO of free local ids. FIFO rather than a stack: an id comes back only
/// after every other free id, so a reader holding a stale handle meets the same record
/// reused rarely, and generation tags take long to wrap.
#[derive(Debug)]
struct FreeRing {
    ids: Box<[u32]>,
    head: usize,
    len: usize,
}

impl FreeRing {
    fn full(n: u32) -> FreeRing {
        FreeRing {
            ids: (0..n).collect(),
            head: 0,
            len: n as usize,
        }
    }

    fn pop(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let i = self.ids[self.head];
        self.head = (self.head + 1) % self.ids.len();
        self.len -= 1;
        Some(i)
    }

    fn push(&mut self, i: u32) {
        debug_assert!(self.len < self.ids.len());
        let at = (self.head + self.len) % self.ids.len();
        self.ids[at] = i;
        self.len += 1;
    }
}

/// A worker's handle for creating and freeing sessions (not shared: one per worker).
#[derive(Debug)]
pub struct Owner {
    table: Arc<Table>,
    first: u32,
    len: u32,
    free: FreeRing,
    /// Live sessions that were not established when last looked at, per interface in
    /// creation order: the eviction candidates ([`crate::evict`]).
    evict: crate::evict::Lists,
    /// One bit per id, set while a session lives there: the sweep skips 64 free ids a word.
    used: Box<[u64]>,
    cursor: u32,
    live: u32,
    counters: Counters,
}

impl Owner {
    pub(crate) fn new(table: Arc<Table>, first: u32, len: u32) -> Owner {
        Owner {
            table,
            first,
            len,
            free: FreeRing::full(len),
            evict: crate::evict::Lists::new(len),
            used: vec![0; len.div_ceil(64) as usize].into_boxed_slice(),
            cursor: 0,
            live: 0,
            counters: Counters::default(),
        }
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// The session ids this owner allocates.
    pub fn ids(&self) -> core::ops::Range<u32> {
        self.first..self.first + self.len
    }

    /// Live sessions of this owner (killed ones included until swept).
    pub fn live(&self) -> u32 {
        self.live
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Creates a session for `s`, seen at `now`: both its keys enter the table, or neither.
    /// When the owner has no free id, or a key's two buckets are full, the oldest session
    /// not established (of this owner; in those buckets, for the latter) makes room; an
    /// established session is never evicted.
    pub fn create(&mut self, s: &NewSession, now: u32) -> Result<Handle, CreateError> {
        let rev = s.reverse_key();
        if rev == s.key {
            return Err(CreateError::Looped);
        }
        let Some(i) = self.alloc() else {
            self.counters.refused_full += 1;
            return Err(CreateError::Full);
        };
        let id = self.first + i;
        let gen_ = self.table.record(id).next_gen();
        self.table.record(id).publish(s, gen_, now);
        let mut evicted = false;
        let r = loop {
            match self.table.insert_pair(s.key, rev, id, gen_) {
                Ok(()) => break Ok(()),
                Err(Refused::Exists) => break Err(CreateError::Exists),
                Err(Refused::ReverseInUse) => break Err(CreateError::ReverseInUse),
                Err(Refused::Full) => match self.bucket_victim([s.key, rev]) {
                    Some(v) if !evicted => {
                        self.free_local(v);
                        self.counters.evicted_embryonic += 1;
                        evicted = true;
                    }
                    _ => break Err(CreateError::Collision),
                },
            }
        };
        if let Err(e) = r {
            self.table.record(id).retire(gen_);
            self.free.push(i);
            match e {
                CreateError::Exists => self.counters.exists += 1,
                CreateError::ReverseInUse => self.counters.reverse_in_use += 1,
                _ => self.counters.insert_collisions += 1,
            }
            return Err(e);
        }
        self.evict.push_back(i, s.owner_if);
        self.used[(i / 64) as usize] |= 1 << (i % 64);
        self.live += 1;
        self.counters.created += 1;
        Ok(Handle { id, gen_ })
    }

    /// A free local id, evicting the oldest session not established if there is none.
    fn alloc(&mut self) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            return Some(i);
        }
        let v = self.oldest_unestablished()?;
        self.free_local(v);
        self.counters.evicted_embryonic += 1;
        self.free.pop()
    }

    /// The session to evict: the oldest not established of the interface with the most
    /// such sessions ([`crate::evict`]).
    fn oldest_unestablished(&mut self) -> Option<u32> {
        let (table, first) = (&self.table, self.first);
        self.evict.victim(|i| table.record(first + i).established())
    }

    /// Among the entries of a full bucket pair, this owner's oldest session not established.
    fn bucket_victim(&self, keys: [Key; 2]) -> Option<u32> {
        self.table
            .entries_near(keys)
            .map(|v| entry_parts(v).0)
            .filter(|id| self.ids().contains(id))
            .map(|id| (id, self.table.record(id)))
            .filter(|(_, r)| r.live_gen().is_some() && !r.established())
            .min_by_key(|(_, r)| r.created())
            .map(|(id, _)| id - self.first)
    }

    /// Frees a session this owner created early (the packet path decided it is over). `false`
    /// if `h` is not this owner's or the session is already gone.
    pub fn remove(&mut self, h: Handle) -> bool {
        if !self.ids().contains(&h.id) || self.table.record(h.id).live_gen() != Some(h.gen_) {
            return false;
        }
        self.free_local(h.id - self.first);
        true
    }

    /// Looks at up to `budget` of this owner's session ids, continuing where the last sweep
    /// stopped, and frees the killed ones and those idle past their state's timeout. Called
    /// every dispatch loop with a small budget, it bounds the work of one call and visits
    /// every id once per `len / budget` calls. Free ids are passed over a word of 64 at a
    /// time.
    pub fn sweep(&mut self, now: u32, budget: u32) -> Swept {
        let mut out = Swept::default();
        let timeouts = *self.table.timeouts();
        let mut left = budget.min(self.len);
        while left > 0 {
            let i = self.cursor;
            let bits = self.used[(i / 64) as usize] >> (i % 64);
            if bits & 1 == 0 {
                // Free: on to the next live id of the word, or to the word's (or the
                // range's) end.
                let span = (64 - i % 64).min(self.len - i);
                let step = bits.trailing_zeros().min(span).min(left);
                left -= step;
                self.cursor = if i + step == self.len { 0 } else { i + step };
                continue;
            }
            left -= 1;
            self.cursor = if i + 1 == self.len { 0 } else { i + 1 };
            let rec = self.table.record(self.first + i);
            if rec.live_gen().is_none() {
                continue;
            }
            match rec.due(now, &timeouts) {
                Some(Due::Expired) => {
                    out.expired += 1;
                    self.counters.expired += 1;
                }
                Some(Due::Killed) => {
                    out.killed += 1;
                    self.counters.killed += 1;
                }
                None => continue,
            }
            self.free_local(i);
        }
        out
    }

    /// Removes a live session's two entries, then retires its record (a reader that found an
    /// entry before the removal copies a consistent old session or misses), and gives the id
    /// back.
    fn free_local(&mut self, i: u32) {
        let id = self.first + i;
        let rec = self.table.record(id);
        let Some(g) = rec.live_gen() else {
            return;
        };
        let (fwd, rev): (Key, Key) = rec.keys();
        let a = self.table.remove_entry(fwd, entry(id, g, Dir::Forward));
        let b = self.table.remove_entry(rev, entry(id, g, Dir::Reverse));
        debug_assert!(a && b, "a live session has both entries");
        rec.retire(g);
        self.evict.unlink(i);
        self.used[(i / 64) as usize] &= !(1 << (i % 64));
        self.free.push(i);
        self.live -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Config;
    use crate::{Lookup, PROTO_TCP, PROTO_UDP, Timeouts, tcp_flags::*};

    fn table(max: u32, buckets: Option<usize>) -> (Arc<Table>, Owner) {
        let c = Config {
            max_sessions: max,
            workers: 1,
            timeouts: Timeouts::default(),
        };
        let (t, mut o) = match buckets {
            Some(b) => Table::build(c, b),
            None => Table::new(c).unwrap(),
        };
        (t, o.pop().unwrap())
    }

    fn flow(n: u16) -> NewSession {
        NewSession::plain(Key::new(
            0,
            PROTO_TCP,
            0x0a00_0001,
            0x0a00_0002,
            1000 + n,
            80,
        ))
    }

    /// The reply and the handshake's last ACK: the session is established.
    fn reply(t: &Table, h: Handle) {
        assert!(t.observe(h, Dir::Reverse, SYN | ACK, 1).is_some());
        assert!(t.observe(h, Dir::Forward, ACK, 1).is_some());
    }

    #[test]
    fn a_full_owner_evicts_its_oldest_unreplied_session_and_never_a_replied_one() {
        let (t, mut o) = table(3, None);
        let a = o.create(&flow(1), 0).unwrap();
        let b = o.create(&flow(2), 0).unwrap();
        let c = o.create(&flow(3), 0).unwrap();
        reply(&t, a);
        // Full: b is the oldest without a reply (a has one).
        let d = o.create(&flow(4), 0).unwrap();
        assert_eq!(t.lookup(&flow(2).key), Lookup::Miss);
        assert!(t.session(b).is_none());
        assert!(matches!(t.lookup(&flow(1).key), Lookup::Live(_)));
        reply(&t, c);
        reply(&t, d);
        // Everything has seen a reply: refused.
        assert_eq!(o.create(&flow(5), 0), Err(CreateError::Full));
        let n = o.counters();
        assert_eq!((n.created, n.evicted_embryonic, n.refused_full), (4, 1, 1));
        assert_eq!(o.live(), 3);
    }

    #[test]
    fn a_full_bucket_pair_evicts_an_unreplied_session_found_there() {
        // One bucket of five slots: two sessions fill four, a third needs two.
        let (t, mut o) = table(8, Some(1));
        let a = o.create(&flow(1), 0).unwrap();
        let b = o.create(&flow(2), 5).unwrap();
        reply(&t, a);
        let c = o.create(&flow(3), 6).unwrap();
        assert!(t.session(b).is_none(), "b (unreplied) made room");
        reply(&t, c);
        assert_eq!(o.create(&flow(4), 7), Err(CreateError::Collision));
        assert_eq!(t.lookup(&flow(4).key), Lookup::Miss, "nothing left behind");
        let n = o.counters();
        assert_eq!(
            (n.created, n.evicted_embryonic, n.insert_collisions),
            (3, 1, 1)
        );
        assert_eq!(o.live(), 2);
    }

    #[test]
    fn a_taken_reverse_key_fails_cleanly() {
        let (t, mut o) = table(8, None);
        let snat = |sport: u16, n: u16| {
            let mut s = flow(n);
            s.xlate.src = 0xc0a8_0001;
            s.xlate.sport = sport;
            s
        };
        o.create(&snat(5000, 1), 0).unwrap();
        assert_eq!(o.create(&snat(5000, 2), 0), Err(CreateError::ReverseInUse));
        assert_eq!(
            t.lookup(&flow(2).key),
            Lookup::Miss,
            "no forward entry left"
        );
        o.create(&snat(5001, 2), 0).unwrap();
        assert_eq!(o.create(&snat(5002, 2), 0), Err(CreateError::Exists));
        let n = o.counters();
        assert_eq!((n.created, n.reverse_in_use, n.exists), (2, 1, 1));
        assert_eq!(t.count_live(), 2);
        let looped = NewSession::plain(Key::new(0, PROTO_UDP, 1, 1, 7, 7));
        assert_eq!(o.create(&looped, 0), Err(CreateError::Looped));
    }

    /// The sweep's budget counts ids, live or free, from where the last one stopped: free
    /// ones are passed over a word at a time, live ones looked at one by one, and the cursor
    /// wraps at the end of the range.
    #[test]
    fn a_sweep_visits_its_budget_of_ids_free_or_live_in_order() {
        let (t, mut o) = table(200, None);
        let len = o.ids().len() as u16;
        assert!(len >= 200, "{len}");
        for n in 0..200 {
            assert_eq!(o.create(&flow(n), 0).unwrap().id(), u32::from(n));
        }
        let port = |s: &crate::Session| s.key.sport - 1000;
        // Every third session dies, and every one from 64 to 191.
        let dies = |n: u16| n.is_multiple_of(3) || (64..192).contains(&n);
        t.kill(|s| dies(port(s)));
        let killed = |from: u16, to: u16| (from..to.min(200)).filter(|&n| dies(n)).count() as u32;
        assert_eq!(o.sweep(1, 50).killed, killed(0, 50));
        assert_eq!(o.sweep(1, 100).killed, killed(50, 150));
        // To the end of the range, and on from its start (nothing left there).
        let rest = len - 150;
        assert_eq!(o.sweep(1, u32::from(rest) + 50).killed, killed(150, 200));
        assert_eq!(o.live(), 200 - killed(0, 200));
        // Ids 64 to 191 are now free words: a sweep from 50 of 100 ids reaches 150 only.
        t.kill(|_| true);
        let live = o.live();
        assert_eq!(
            o.sweep(1, 100).killed,
            (50..64u16).filter(|n| !n.is_multiple_of(3)).count() as u32
        );
        let left = live - (50..64u16).filter(|n| !n.is_multiple_of(3)).count() as u32;
        assert_eq!(o.sweep(1, u32::from(len)).killed, left);
        assert_eq!(o.live(), 0);
        assert_eq!(t.count_live(), 0);
    }

    #[test]
    fn sweep_frees_expired_and_killed_sessions_within_its_budget() {
        let (t, mut o) = table(16, None);
        let to = Timeouts::default();
        let syn = o.create(&flow(1), 0).unwrap();
        let est = o.create(&flow(2), 0).unwrap();
        let dead = o.create(&flow(3), 0).unwrap();
        reply(&t, est);
        let udp = NewSession::plain(Key::new(1, PROTO_UDP, 1, 2, 3, 4));
        let u = o.create(&udp, 0).unwrap();
        t.observe(u, Dir::Reverse, 0, 0);
        assert_eq!(t.kill(|s| s.key == flow(3).key), 1);
        assert!(matches!(t.lookup(&flow(3).key), Lookup::Killed(_)));
        assert!(t.observe(dead, Dir::Forward, ACK, 5).is_none());
        // A small budget visits only part of the range.
        assert_eq!(o.sweep(1, 2), Swept::default());
        assert_eq!(
            o.sweep(1, 14),
            Swept {
                expired: 0,
                killed: 1
            }
        );
        assert_eq!(
            o.sweep(to.tcp_embryonic, 16),
            Swept::default(),
            "not idle longer yet"
        );
        assert_eq!(
            o.sweep(to.tcp_embryonic + 1, 16),
            Swept {
                expired: 1,
                killed: 0
            }
        );
        assert!(t.session(syn).is_none());
        assert_eq!(
            o.sweep(to.udp_replied + 1, 16),
            Swept {
                expired: 1,
                killed: 0
            }
        );
        assert!(t.session(u).is_none());
        // Established lasts, and every packet pushes its end back.
        t.observe(est, Dir::Forward, ACK, to.tcp_established);
        assert_eq!(o.sweep(to.tcp_established * 2, 16), Swept::default());
        assert_eq!(
            t.observe(est, Dir::Forward, FIN | ACK, to.tcp_established * 2),
            Some(crate::State::TcpClosing)
        );
        assert_eq!(
            o.sweep(to.tcp_established * 2 + to.tcp_closing + 1, 16)
                .expired,
            1
        );
        assert_eq!(o.live(), 0);
        let n = o.counters();
        assert_eq!((n.expired, n.killed), (3, 1));
        assert_eq!(t.lookup(&flow(2).key), Lookup::Miss);
    }

    #[test]
    fn an_owner_frees_only_its_own_live_sessions() {
        let c = Config {
            max_sessions: 4,
            workers: 2,
            timeouts: Timeouts::default(),
        };
        let (_t, mut owners) = Table::new(c).unwrap();
        let h = owners[0].create(&flow(1), 0).unwrap();
        assert_eq!(owners[1].ids(), 2..4);
        assert!(!owners[1].remove(h));
        assert!(owners[0].remove(h));
        assert!(!owners[0].remove(h), "already gone");
    }
}
