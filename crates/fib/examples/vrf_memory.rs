//! What VRFs cost: creates N tables (default 255, the daemon's table ids 1..=255) with 16
//! routes each, as many networks of a node would, and prints the process's resident memory
//! and the time to create and to drop one table.
//!
//! `cargo run --release -p fib --example vrf_memory [N] [GROUPS]`

use std::net::Ipv4Addr;
use std::time::Instant;

use fib::Lpm;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(255, |a| a.parse().unwrap());
    let groups: u32 = args.next().map_or(4096, |a| a.parse().unwrap());
    let before = rss_kib();
    let t0 = Instant::now();
    let mut tables = Vec::with_capacity(n);
    for v in 0..n {
        let mut t = Lpm::new(groups);
        // 16 routes: a /16 range, /24 subnets, host routes of neighbours.
        t.insert(Ipv4Addr::new(10, (v % 256) as u8, 0, 0), 16, 1)
            .unwrap();
        for k in 0..8u8 {
            t.insert(Ipv4Addr::new(10, (v % 256) as u8, k, 0), 24, 2)
                .unwrap();
        }
        for k in 0..7u8 {
            t.insert(Ipv4Addr::new(10, (v % 256) as u8, 0, 2 + k), 32, 3)
                .unwrap();
        }
        tables.push(t);
    }
    let made = t0.elapsed();
    let after = rss_kib();
    let t1 = Instant::now();
    let one = Lpm::new(groups);
    let create_one = t1.elapsed();
    let t2 = Instant::now();
    drop(one);
    let drop_one = t2.elapsed();
    println!(
        "{n} tables x 16 routes ({groups} second-level groups each): {:.1} MiB resident ({:.1} KiB per table), {:.1} ms to build them; one empty table: created in {:.3} ms, dropped in {:.3} ms",
        (after - before) as f64 / 1024.0,
        (after - before) as f64 / n as f64,
        made.as_secs_f64() * 1e3,
        create_one.as_secs_f64() * 1e3,
        drop_one.as_secs_f64() * 1e3
    );
    assert_eq!(
        tables[n - 1].lookup(Ipv4Addr::new(10, ((n - 1) % 256) as u8, 0, 2)),
        Some(3)
    );
}
