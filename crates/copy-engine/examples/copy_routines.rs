//! Which routine copies a packet into a memif peer's buffer fastest on this CPU (issue: the
//! instruction diet's "fastest routine for the CPU ... and measure which").
//!
//! It models memif transmit across two cores: a producer (pinned to `--producer-cpu`, the
//! DUT's) copies packets of one size from a small set of local buffers (hot, as a frame's are)
//! into a ring of 2048-byte buffers (the peer's, `--ring` of them; larger for jumbo frames), publishes each batch of 64
//! with a release store, and a consumer (pinned to `--consumer-cpu`, the peer's) reads a byte
//! of every cache line of each published buffer, as a peer that forwards or checks them does,
//! and frees the slots. The producer's time per packet, median of `--rounds` rounds, for each routine:
//! libc `memcpy` (glibc picks by CPU features: AVX / ERMS), `rep movsb` (fast with FSRM),
//! and AVX2 non-temporal stores (bypassing this core's caches; the destination is read by the
//! other core). A measurement tool, not a test: run it on the machine you want to know about.
//!
//! ```text
//! cargo run --release -p copy-engine --example copy_routines -- [--sizes 64,512,1500]
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const BATCH: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Routine {
    Libc,
    RepMovsb,
    NonTemporal,
}

/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping.
#[inline(always)]
unsafe fn copy(r: Routine, src: *const u8, dst: *mut u8, len: usize) {
    match r {
        // SAFETY: as the function's contract.
        Routine::Libc => unsafe { std::ptr::copy_nonoverlapping(src, dst, len) },
        Routine::RepMovsb => {
            // SAFETY: `rep movsb` copies rcx bytes from rsi to rdi: the contract above.
            unsafe {
                std::arch::asm!(
                    "rep movsb",
                    inout("rcx") len => _,
                    inout("rsi") src => _,
                    inout("rdi") dst => _,
                    options(nostack, preserves_flags)
                )
            }
        }
        // SAFETY: as the function's contract; the CPU has AVX2 (checked in `main`).
        Routine::NonTemporal => unsafe { copy_nt(src, dst, len) },
    }
}

/// # Safety
/// As [`copy`], and the CPU has AVX2. The stores are weakly ordered: an `sfence` must come
/// before the store that publishes them.
#[target_feature(enable = "avx2")]
unsafe fn copy_nt(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::*;
    // Up to the first 32-byte boundary of the destination, and the tail, with plain copies.
    let head = dst.align_offset(32).min(len);
    // SAFETY: within the ranges of the contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut off = head;
        while off + 32 <= len {
            let v = _mm256_loadu_si256(src.add(off).cast());
            _mm256_stream_si256(dst.add(off).cast(), v);
            off += 32;
        }
        std::ptr::copy_nonoverlapping(src.add(off), dst.add(off), len - off);
    }
}

/// One-way cache-line transfer time between the two CPUs, median of 1001 ping-pongs: about
/// 40-110 ns when they share an L3, 150 and more when the host has put them on different dies
/// (the placement that makes every figure here move; compare only rows of one placement).
fn probe(cpus: (usize, usize)) -> f64 {
    let ball = Arc::new(AtomicU64::new(0));
    let other = {
        let ball = ball.clone();
        std::thread::spawn(move || {
            pin(cpus.1);
            for i in 0..1001u64 {
                while ball.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                ball.store(2 * i + 2, Ordering::Release);
            }
        })
    };
    pin(cpus.0);
    let mut rtt = Vec::with_capacity(1001);
    for i in 0..1001u64 {
        let t = Instant::now();
        ball.store(2 * i + 1, Ordering::Release);
        while ball.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
        rtt.push(t.elapsed().as_nanos() as f64 / 2.0);
    }
    let _ = other.join();
    rtt.sort_by(f64::total_cmp);
    rtt[rtt.len() / 2]
}

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).expect("sched_setaffinity");
}

struct Ring {
    mem: Vec<u8>,
    n: usize,
    /// Packets published by the producer, and consumed by the consumer.
    head: AtomicU64,
    tail: AtomicU64,
}

// SAFETY: the producer writes a slot only between the consumer's release of it (`tail`) and
// its own publication (`head`); the consumer reads it only between the two: the indices
// order every access.
unsafe impl Sync for Ring {}

fn run(r: Routine, size: usize, ring: usize, packets: u64, cpus: (usize, usize)) -> f64 {
    // The peer's buffers: 2048 bytes, or as large as a jumbo frame needs.
    let buf = size.next_multiple_of(64).max(2048);
    let ringbuf = Arc::new(Ring {
        mem: vec![0u8; ring * buf],
        n: ring,
        head: AtomicU64::new(0),
        tail: AtomicU64::new(0),
    });
    let consumer = {
        let ring = ringbuf.clone();
        std::thread::spawn(move || {
            pin(cpus.1);
            let mut sum = 0u64;
            let mut done = 0u64;
            while done < packets {
                let head = ring.head.load(Ordering::Acquire);
                while done < head {
                    let at = (done as usize % ring.n) * buf;
                    // A byte of every cache line of the packet.
                    let p = ring.mem.as_ptr();
                    for k in (0..size).step_by(64) {
                        // SAFETY: inside the slot, published by `head` (see `Ring`).
                        sum = sum.wrapping_add(u64::from(unsafe { p.add(at + k).read_volatile() }));
                    }
                    done += 1;
                }
                ring.tail.store(done, Ordering::Release);
                std::hint::spin_loop();
            }
            sum
        })
    };
    pin(cpus.0);
    let src: Vec<u8> = (0..buf * 8).map(|i| i as u8).collect();
    let base = ringbuf.mem.as_ptr() as *mut u8;
    let t0 = Instant::now();
    let mut sent = 0u64;
    while sent < packets {
        let free = ringbuf.n as u64 - (sent - ringbuf.tail.load(Ordering::Acquire));
        let n = free.min(BATCH as u64).min(packets - sent);
        if n == 0 {
            std::hint::spin_loop();
            continue;
        }
        for k in 0..n {
            let i = sent + k;
            let at = (i as usize % ringbuf.n) * buf;
            let s = (i as usize % 8) * buf;
            // SAFETY: the slot is free (below `tail + n`), inside `mem`; the source is ours.
            unsafe { copy(r, src.as_ptr().add(s), base.add(at), size) };
        }
        if r == Routine::NonTemporal {
            // SAFETY: SSE is baseline on x86_64; orders the streaming stores before `head`.
            unsafe { std::arch::x86_64::_mm_sfence() };
        }
        sent += n;
        ringbuf.head.store(sent, Ordering::Release);
    }
    let ns = t0.elapsed().as_nanos() as f64 / packets as f64;
    let _ = consumer.join();
    ns
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
            .unwrap_or_else(|| default.to_string())
    };
    let sizes: Vec<usize> = arg("--sizes", "64,512,1500")
        .split(',')
        .map(|s| s.parse().expect("--sizes"))
        .collect();
    let ring: usize = arg("--ring", "4096").parse().expect("--ring");
    let rounds: usize = arg("--rounds", "5").parse().expect("--rounds");
    let cpus = (
        arg("--producer-cpu", "1").parse().expect("--producer-cpu"),
        arg("--consumer-cpu", "0").parse().expect("--consumer-cpu"),
    );
    let mut routines = vec![Routine::Libc, Routine::RepMovsb];
    if std::arch::is_x86_feature_detected!("avx2") {
        routines.push(Routine::NonTemporal);
    }
    println!(
        "ns per packet copied into a ring of {ring} buffers (2048 B, or the frame's size) read by CPU {}, producer on CPU {} (median of {rounds} rounds, routines interleaved)",
        cpus.1, cpus.0
    );
    for &size in &sizes {
        let packets = (200_000_000 / size.max(64)) as u64;
        let mut results: Vec<Vec<f64>> = vec![Vec::new(); routines.len()];
        let before = probe(cpus);
        for _ in 0..rounds {
            for (k, &r) in routines.iter().enumerate() {
                results[k].push(run(r, size, ring, packets, cpus));
            }
        }
        let line: Vec<String> = routines
            .iter()
            .zip(&mut results)
            .map(|(r, v)| {
                v.sort_by(f64::total_cmp);
                format!("{r:?} {:.1}", v[v.len() / 2])
            })
            .collect();
        let after = probe(cpus);
        println!(
            "{size:>5} B  {}   (cross-CPU line {before:.0}/{after:.0} ns)",
            line.join("  ")
        );
    }
}
