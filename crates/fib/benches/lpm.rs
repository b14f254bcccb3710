//! Lookups per second against a 1M-route table (cargo bench -p fib).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fib::{Ipv4Addr, Lpm};

fn table() -> (Lpm, Vec<Ipv4Addr>) {
    // 1M routes shaped like an Internet table: mostly /24, some /16-/23, some /25-/32.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = Lpm::new(65536);
    let mut n = 0;
    while n < 1_000_000 {
        let v = rnd();
        let len = match v % 100 {
            0..=59 => 24,
            60..=89 => 16 + (v >> 8) as u8 % 8,
            _ => 25 + (v >> 8) as u8 % 8,
        };
        if t.insert(
            Ipv4Addr::from((v >> 16) as u32),
            len,
            (v >> 40) as u32 & 0xffff,
        )
        .is_ok()
        {
            n += 1;
        }
    }
    let addrs = (0..1 << 20).map(|_| Ipv4Addr::from(rnd() as u32)).collect();
    (t, addrs)
}

fn lookups(c: &mut Criterion) {
    let (t, addrs) = table();
    let r = t.reader();
    let mut out = vec![None; addrs.len()];
    let mut g = c.benchmark_group("lpm_1M_routes");
    // 4096 random addresses looked up again and again: their table lines stay in cache.
    g.throughput(Throughput::Elements(4096));
    g.bench_function("hot_4096_addresses", |b| {
        b.iter(|| {
            r.lookup_many(black_box(&addrs[..4096]), &mut out[..4096]);
            black_box(&out);
        })
    });
    // 1M distinct random addresses: mostly cache misses into the 64 MiB first-level table.
    g.throughput(Throughput::Elements(addrs.len() as u64));
    g.bench_function("cold_1M_addresses", |b| {
        b.iter(|| {
            r.lookup_many(black_box(&addrs), &mut out);
            black_box(&out);
        })
    });
    g.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
