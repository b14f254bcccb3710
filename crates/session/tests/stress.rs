//! Readers racing an owner that creates, evicts and frees sessions (reusing records for other
//! flows all the time) and a control thread that kills them: every hit must be one whole
//! session, never a mix of the old and the new occupant of a record.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use session::{
    Config, Dir, Key, Lookup, NewSession, PROTO_TCP, Table, Timeouts, Translation, Verdict,
    tcp_flags,
};

const FLOWS: u32 = 512;
const SNAT: u32 = 0xc0a8_0001;

fn key(i: u32) -> Key {
    Key::new(
        (i % 3) as u16,
        PROTO_TCP,
        0x0a00_0000 | i,
        0x0a63_0001,
        10_000 + (i % 50_000) as u16,
        443,
    )
}

/// A value derived from the key, stored in the record: a reader that copied the key of one
/// session and the service of another would see them disagree.
fn check(k: &Key) -> u32 {
    let [a, b] = k.words();
    ((a ^ b.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33) as u32
}

fn session(i: u32) -> NewSession {
    let k = key(i);
    NewSession {
        xlate: Translation {
            src: SNAT,
            sport: 1024 + i as u16,
            ..Translation::identity(&k)
        },
        service: check(&k),
        backend: i % 60_000,
        ..NewSession::plain(k)
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

fn reader(t: Arc<Table>, stop: Arc<AtomicBool>, done: Arc<AtomicU64>, seed: u64) -> (u64, u64) {
    let mut r = Rng(seed);
    let (mut lookups, mut hits) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let i = r.next() % FLOWS;
        let s = session(i);
        for (k, dir) in [(s.key, Dir::Forward), (s.reverse_key(), Dir::Reverse)] {
            lookups += 1;
            let h = match t.lookup(&k) {
                Lookup::Miss => continue,
                Lookup::Live(h) | Lookup::Killed(h) => h,
            };
            hits += 1;
            let got = &h.session;
            assert_eq!(h.dir, dir, "{k:?}");
            assert_eq!(got.key, s.key, "a hit on {k:?} returned another flow");
            assert_eq!(got.service, check(&got.key), "half-old, half-new record");
            assert_eq!((got.backend, got.xlate), (i % 60_000, s.xlate));
            // Write through the handle: a stale one must land nowhere.
            t.observe(h.handle, dir, tcp_flags::ACK, lookups as u32);
            if lookups.is_multiple_of(16) {
                t.set_verdict(h.handle, 3, Verdict::Allow);
            }
        }
        done.fetch_add(2, Ordering::Relaxed);
    }
    (lookups, hits)
}

#[test]
fn readers_never_see_a_mixed_record() {
    let config = Config {
        max_sessions: 64,
        workers: 1,
        timeouts: Timeouts::default(),
    };
    let (t, mut owners) = Table::new(config).unwrap();
    let mut owner = owners.pop().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|n| {
            let (t, stop, done) = (t.clone(), stop.clone(), done.clone());
            thread::spawn(move || reader(t, stop, done, 0x1234_5678 + n))
        })
        .collect();
    let killer = {
        let (t, stop) = (t.clone(), stop.clone());
        thread::spawn(move || {
            let mut kills = 0;
            let mut round = 0u32;
            while !stop.load(Ordering::Relaxed) {
                kills += t.kill(|s| s.backend % 64 == round % 64);
                round += 1;
            }
            kills
        })
    };
    // The owner: create where absent, free where present, and sweep the killed, until both
    // it and the readers have done enough (no clock: the readers always progress).
    let mut r = Rng(0xdead_beef);
    let mut handles = vec![None; FLOWS as usize];
    let mut ops = 0u64;
    while ops < 100_000 || done.load(Ordering::Relaxed) < 400_000 {
        let i = r.next() % FLOWS;
        let gone = |h| t.session(h).is_none();
        match handles[i as usize] {
            Some(h) if !gone(h) => {
                owner.remove(h);
                handles[i as usize] = None;
            }
            _ => handles[i as usize] = owner.create(&session(i), ops as u32).ok(),
        }
        if ops.is_multiple_of(64) {
            owner.sweep(ops as u32, 256);
        }
        ops += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let kills = killer.join().unwrap();
    let c = owner.counters();
    for h in readers {
        let (lookups, hits) = h.join().unwrap();
        println!("reader: {lookups} lookups, {hits} hits");
    }
    println!("owner: {ops} operations, {c:?}; control: {kills} kills");
    assert!(
        c.created > 50_000 && c.evicted_embryonic > 0,
        "records were reused: {c:?}"
    );
    assert_eq!(t.count_live(), owner.live() as usize);
}
