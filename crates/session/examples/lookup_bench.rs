//! Nanoseconds per established-flow lookup over a million sessions with random keys:
//! `cargo run --release -p session --example lookup_bench [lookups]`.
//!
//! Prints the figure; asserts nothing about time. Lookups go in a random order over the whole
//! table, so most of them miss the caches (a bucket line and a record line each): the cost a
//! worker sees under many flows, not the best case.

use std::hint::black_box;
use std::time::Instant;

use session::{Config, Key, Lookup, NewSession, PROTO_TCP, Table, Timeouts};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn main() {
    let lookups: usize = std::env::args()
        .nth(1)
        .map_or(10_000_000, |s| s.parse().expect("lookups: a number"));
    let n = 1_000_000u32;
    let (t, mut owners) = Table::new(Config {
        max_sessions: n,
        workers: 2,
        timeouts: Timeouts::default(),
    })
    .expect("config");
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let mut keys = Vec::with_capacity(n as usize);
    for o in &mut owners {
        while o.live() < n / 2 {
            let v = r.next();
            let k = Key::new(
                (v >> 60) as u16,
                PROTO_TCP,
                v as u32,
                (v >> 32) as u32,
                (v >> 8) as u16,
                443,
            );
            if o.create(&NewSession::plain(k), 0).is_ok() {
                keys.push(k);
            }
        }
    }
    // Random over all sessions (mostly cache misses), then over 4096 of them (cached).
    for (what, span) in [("all", n), ("4096 hot", 4096)] {
        let order: Vec<u32> = (0..lookups)
            .map(|_| (r.next() % u64::from(span)) as u32)
            .collect();
        let start = Instant::now();
        let mut sum = 0u64;
        for &i in &order {
            if let Lookup::Live(h) = t.lookup(black_box(&keys[i as usize])) {
                sum += u64::from(h.session.xlate.dport);
            }
        }
        let el = start.elapsed();
        assert_eq!(sum, 443 * lookups as u64, "every lookup hits");
        println!(
            "{lookups} lookups, random over {what} of {} sessions ({} MiB): {:.1} ns a lookup",
            keys.len(),
            t.memory_bytes() >> 20,
            el.as_nanos() as f64 / lookups as f64
        );
    }
}
