//! `veclane copy-engine check`: copies patterned buffers of every size class through each
//! backend asked for, verifies every byte, and measures throughput and batch latency beside
//! the CPU engine. On a host with DSA it is the proof that the device path works; without
//! one it says exactly why DSA was not tested.

use std::time::{Duration, Instant};

use crate::dsa::{DsaPool, Source};
use crate::{CopyReq, Engine, Kind};

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// Backends, in order (`auto` is resolved; the CPU is always measured as the reference).
    pub kinds: Vec<Kind>,
    /// Where a DSA engine's work queue comes from.
    pub dsa: Source,
    /// Copy sizes in bytes.
    pub sizes: Vec<u32>,
    /// Copies per batch.
    pub batch: usize,
    /// Time spent measuring each size on each backend.
    pub time: Duration,
    /// DSA: copies shorter than this are made on the CPU (the daemon's `dsa-inline-below`).
    pub inline_below: u32,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            kinds: vec![Kind::Cpu, Kind::Thread, Kind::Dsa],
            dsa: Source::Discover,
            sizes: vec![64, 256, 512, 1500, 4096, 9000, 65536],
            batch: 32,
            time: Duration::from_millis(200),
            inline_below: crate::dsa::engine::DsaConfig::default().inline_max,
        }
    }
}

/// One backend's result for one size.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SizeResult {
    pub size: u32,
    pub batches: u64,
    /// Payload bytes copied per second, in GB/s (10^9).
    pub gbytes_per_s: f64,
    /// Copies per second, in millions.
    pub mcopies_per_s: f64,
    /// Submit-to-retire time of a batch, median and 99th percentile, in microseconds.
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    /// Bytes that did not match their source (0, or the check failed).
    pub mismatched: u64,
}

/// One backend's results, or why it was not tested.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BackendResult {
    pub kind: Kind,
    /// What the engine ran on (`wq0.0 dedicated write`, `software model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Why it was not tested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub sizes: Vec<SizeResult>,
    /// DSA: copies made on the CPU for being short, finished on the CPU after faults, and
    /// the breaker's reason if it tripped.
    pub inline: u64,
    pub recovered: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tripped: Option<String>,
}

impl BackendResult {
    pub fn passed(&self) -> bool {
        self.sizes.iter().all(|s| s.mismatched == 0)
    }
}

/// Runs the check.
pub fn run(cfg: &CheckConfig) -> Vec<BackendResult> {
    let mut kinds = vec![Kind::Cpu];
    for &k in &cfg.kinds {
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    let mut pool = DsaPool::new(cfg.dsa.clone());
    pool.set_inline_below(cfg.inline_below);
    kinds
        .into_iter()
        .map(|kind| {
            let mut r = BackendResult {
                kind,
                device: None,
                notes: Vec::new(),
                skipped: None,
                sizes: Vec::new(),
                inline: 0,
                recovered: 0,
                tripped: None,
            };
            let sel = match Engine::select(kind, &mut pool) {
                Ok(s) => s,
                Err(e) => {
                    r.skipped = Some(e.to_string());
                    return r;
                }
            };
            if let Some(why) = sel.why_not_dsa {
                r.notes.push(format!("auto chose the CPU: {why}"));
            }
            if let Some(a) = &sel.dsa {
                r.device = Some(format!("{} {} {} ({})", a.wq, a.mode, a.how, a.path));
                r.notes.extend(a.notes.iter().cloned());
            }
            let mut engine = sel.engine;
            r.kind = engine.caps().kind;
            for &size in &cfg.sizes {
                r.sizes
                    .push(measure(&mut engine, size, cfg.batch, cfg.time));
            }
            if let Engine::Dsa(d) = &engine {
                let s = d.dsa_stats();
                (r.inline, r.recovered) = (s.inline, s.recovered);
                r.tripped = d.tripped().map(str::to_string);
            }
            r
        })
        .collect()
}

fn pattern(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// Copies `batch` buffers of `size` bytes per batch through `e` for about `time` (at least
/// 8 batches), a new pattern each round, every byte checked after every batch.
fn measure(e: &mut Engine, size: u32, batch: usize, time: Duration) -> SizeResult {
    let n = size as usize;
    // Two rounds of buffers, so that one can be checked while the next is in flight.
    let mut src = vec![0u8; n * batch];
    let mut dst = vec![0u8; n * batch];
    let mut lat = Vec::new();
    let (mut batches, mut mismatched, mut busy) = (0u64, 0u64, Duration::ZERO);
    let start = Instant::now();
    while batches < 8 || start.elapsed() < time {
        pattern(
            &mut src,
            batches.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(size),
        );
        dst.fill(0);
        let reqs: Vec<CopyReq> = (0..batch)
            .map(|k| CopyReq {
                src: src[k * n..].as_ptr(),
                dst: dst[k * n..].as_mut_ptr(),
                len: size,
            })
            .collect();
        let t0 = Instant::now();
        let ticket = loop {
            // SAFETY: `src` and `dst` are this function's own buffers, apart; the requests
            // are disjoint `size`-byte pieces of them; neither is touched until the ticket
            // has retired (waited for just below).
            match unsafe { e.submit(&reqs) } {
                Ok(t) => break t,
                Err(_) => {
                    e.poll(|_| {});
                }
            }
        };
        while !e.is_retired(ticket) {
            e.poll(|_| {});
            std::hint::spin_loop();
        }
        let dt = t0.elapsed();
        busy += dt;
        lat.push(dt);
        mismatched += src.iter().zip(&dst).filter(|(a, b)| a != b).count() as u64;
        batches += 1;
    }
    lat.sort();
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
    let secs = busy.as_secs_f64().max(1e-9);
    let copies = batches * batch as u64;
    SizeResult {
        size,
        batches,
        gbytes_per_s: (copies * u64::from(size)) as f64 / secs / 1e9,
        mcopies_per_s: copies as f64 / secs / 1e6,
        latency_p50_us: pct(0.5),
        latency_p99_us: pct(0.99),
        mismatched,
    }
}

/// The results as the text `veclane copy-engine check` prints.
pub fn render(results: &[BackendResult]) -> String {
    let mut s = String::new();
    let cpu: Vec<&SizeResult> = results
        .iter()
        .find(|r| r.kind == Kind::Cpu)
        .map(|r| r.sizes.iter().collect())
        .unwrap_or_default();
    for r in results {
        match &r.skipped {
            Some(why) => {
                s.push_str(&format!("{}: not tested: {why}\n", r.kind));
                continue;
            }
            None => s.push_str(&format!(
                "{}{}: {}\n",
                r.kind,
                r.device
                    .as_deref()
                    .map(|d| format!(" on {d}"))
                    .unwrap_or_default(),
                if r.passed() {
                    "every byte verified"
                } else {
                    "MISMATCHED BYTES"
                }
            )),
        }
        for n in &r.notes {
            s.push_str(&format!("  note: {n}\n"));
        }
        s.push_str(&format!(
            "  {:>7} {:>8} {:>9} {:>10} {:>10} {:>8} {:>10}\n",
            "size", "batches", "GB/s", "Mcopies/s", "p50 us", "p99 us", "vs cpu"
        ));
        for z in &r.sizes {
            let vs = cpu
                .iter()
                .find(|c| c.size == z.size)
                .map_or("-".to_string(), |c| {
                    format!("{:.2}x", z.gbytes_per_s / c.gbytes_per_s.max(1e-12))
                });
            s.push_str(&format!(
                "  {:>7} {:>8} {:>9.2} {:>10.2} {:>10.2} {:>8.2} {:>10}{}\n",
                z.size,
                z.batches,
                z.gbytes_per_s,
                z.mcopies_per_s,
                z.latency_p50_us,
                z.latency_p99_us,
                vs,
                if z.mismatched > 0 {
                    format!("  {} bytes wrong", z.mismatched)
                } else {
                    String::new()
                }
            ));
        }
        if r.kind == Kind::Dsa {
            s.push_str(&format!(
                "  {} copies inline (short), {} finished on the CPU after a fault\n",
                r.inline, r.recovered
            ));
            if let Some(t) = &r.tripped {
                s.push_str(&format!("  the breaker tripped: {t}\n"));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick(kinds: Vec<Kind>, dsa: Source) -> Vec<BackendResult> {
        run(&CheckConfig {
            kinds,
            dsa,
            sizes: vec![64, 1500, 9000],
            batch: 8,
            time: Duration::from_millis(5),
            ..CheckConfig::default()
        })
    }

    #[test]
    fn an_inline_threshold_of_zero_sends_every_copy_to_the_device() {
        let r = run(&CheckConfig {
            kinds: vec![Kind::Dsa],
            dsa: Source::Model { fault_every: 0 },
            sizes: vec![64],
            batch: 8,
            time: Duration::from_millis(5),
            inline_below: 0,
        });
        assert!(r[1].passed() && r[1].inline == 0, "{:?}", r[1]);
        let r = quick(vec![Kind::Dsa], Source::Model { fault_every: 0 });
        assert!(
            r[1].inline > 0,
            "64 B copies under the default 256: {:?}",
            r[1]
        );
    }

    #[test]
    fn every_backend_copies_every_byte() {
        let r = quick(
            vec![Kind::Thread, Kind::Dsa],
            Source::Model { fault_every: 4 },
        );
        assert_eq!(
            r.iter().map(|b| b.kind).collect::<Vec<_>>(),
            [Kind::Cpu, Kind::Thread, Kind::Dsa]
        );
        for b in &r {
            assert!(b.skipped.is_none() && b.passed(), "{b:?}");
            assert_eq!(b.sizes.len(), 3);
            assert!(
                b.sizes
                    .iter()
                    .all(|s| s.batches >= 8 && s.gbytes_per_s > 0.0)
            );
        }
        let dsa = &r[2];
        assert!(dsa.device.as_deref().unwrap().contains("model"), "{dsa:?}");
        assert!(dsa.recovered > 0 && dsa.inline > 0, "{dsa:?}");
        let text = render(&r);
        assert!(text.contains("dsa on model0"), "{text}");
        assert!(text.contains("every byte verified"), "{text}");
        assert!(!text.contains("MISMATCHED"), "{text}");
    }

    #[test]
    fn dsa_without_a_queue_says_why_it_was_not_tested() {
        let r = quick(
            vec![Kind::Dsa],
            Source::Queue("/nonexistent/dev/dsa/wq9.9".into()),
        );
        assert_eq!(r.len(), 2);
        let why = r[1].skipped.as_deref().unwrap();
        assert!(why.contains("wq9.9"), "{why}");
        assert!(render(&r).contains("dsa: not tested: "), "{}", render(&r));
    }
}
