//! `p2p`: one memif, a sender pinned to one core and a receiver pinned to the other.
//!
//! veclane: `veclane gen --role secondary --tx-only` (frames written in place) →
//! `veclane gen --role primary --rx-only` (the primary copy path the switch uses).
//! testpmd: `dpdk-testpmd` txonly as `net_memif` client → rxonly as server.
//! Trials are interleaved DUT by DUT (A B A B ...) so that drift hits both alike.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::placement::{self, Placement};
use crate::{BenchError, Dut, median_min_max};

#[derive(Debug, Clone, Serialize)]
pub struct P2pConfig {
    pub sizes: Vec<usize>,
    /// Sending time per trial.
    pub trial_secs: f64,
    pub reps: usize,
    pub duts: Vec<Dut>,
    pub sender_cpu: usize,
    pub receiver_cpu: usize,
    pub ring_log2: u8,
    pub buffer_size: u32,
    /// Before each trial, wait up to this long for the CPUs to be near (0: do not wait).
    pub wait_near_secs: f64,
    #[serde(skip)]
    pub veclane_bin: PathBuf,
    #[serde(skip)]
    pub testpmd_bin: Option<PathBuf>,
}

/// The memif buffer size a trial at `size` uses: the configured one, or 9216 bytes for frames
/// that would not fit it, so that no DUT chains. DPDK 22.11's net_memif transmit path corrupts
/// chained frames once its ring nears full (a free-slot off-by-one), so a chained 9000-byte
/// trial would measure that bug rather than throughput. veclane's chains are covered by tests.
pub fn buffer_size_for(cfg: &P2pConfig, size: usize) -> u32 {
    if size > cfg.buffer_size as usize {
        9216.max(size as u32)
    } else {
        cfg.buffer_size
    }
}

/// One measured trial.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub dut: Dut,
    pub size: usize,
    pub rep: usize,
    pub tx_packets: u64,
    pub rx_packets: u64,
    /// Receive rate in Mpps over the receiver's measurement window.
    pub mpps: f64,
    pub window_s: f64,
    /// `tx - rx`, frames the sender counted as sent that never arrived.
    pub lost: i64,
    pub note: String,
    /// One-way cache-line transfer between the two CPUs, before and after the trial.
    pub probe_before_ns: f64,
    pub probe_after_ns: f64,
    pub placement: Placement,
    /// Why the trial produced no number.
    pub error: Option<String>,
}

impl Trial {
    /// A trial of `dut` at `size` with nothing measured yet: the DUT drivers fill in counts and
    /// rate, `run` fills in the placement probes (or the error).
    pub fn new(dut: Dut, size: usize, rep: usize) -> Trial {
        Trial {
            dut,
            size,
            rep,
            tx_packets: 0,
            rx_packets: 0,
            mpps: f64::NAN,
            window_s: 0.0,
            lost: 0,
            note: String::new(),
            probe_before_ns: 0.0,
            probe_after_ns: 0.0,
            placement: Placement::Mixed,
            error: None,
        }
    }
}

/// Median of the trials of one (DUT, size).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub dut: Dut,
    pub size: usize,
    pub mpps: f64,
    pub mpps_min: f64,
    pub mpps_max: f64,
    /// size × 8 × pps.
    pub gbps_l2: f64,
    /// (size + 20) × 8 × pps.
    pub gbps_l1: f64,
    pub loss_ratio: f64,
    /// Trials behind the median, and which placement they share.
    pub trials: usize,
    pub basis: Placement,
    /// Trials of this (DUT, size) in all, failed ones included.
    pub trials_run: usize,
}

pub fn rows(trials: &[Trial], cfg: &P2pConfig) -> Vec<Row> {
    let mut out = Vec::new();
    for &size in &cfg.sizes {
        for &dut in &cfg.duts {
            let all: Vec<&Trial> = trials
                .iter()
                .filter(|t| t.dut == dut && t.size == size)
                .collect();
            let ok: Vec<&Trial> = all.iter().copied().filter(|t| t.error.is_none()).collect();
            // Near trials when there are any (the state memif is meant to run in), else mid,
            // else far; mixed trials were cut by a flip and only count when nothing else exists.
            let basis = [
                Placement::Near,
                Placement::Mid,
                Placement::Far,
                Placement::Mixed,
            ]
            .into_iter()
            .find(|p| ok.iter().any(|t| t.placement == *p));
            let Some(basis) = basis else { continue };
            let t: Vec<&Trial> = ok
                .iter()
                .copied()
                .filter(|t| t.placement == basis)
                .collect();
            let (m, lo, hi) = median_min_max(&t.iter().map(|t| t.mpps).collect::<Vec<_>>());
            let tx: u64 = t.iter().map(|t| t.tx_packets).sum();
            let lost: i64 = t.iter().map(|t| t.lost.max(0)).sum();
            out.push(Row {
                dut,
                size,
                mpps: m,
                mpps_min: lo,
                mpps_max: hi,
                gbps_l2: m * 1e6 * size as f64 * 8.0 / 1e9,
                gbps_l1: m * 1e6 * (size as f64 + 20.0) * 8.0 / 1e9,
                loss_ratio: if tx > 0 { lost as f64 / tx as f64 } else { 0.0 },
                trials: t.len(),
                basis,
                trials_run: all.len(),
            });
        }
    }
    out
}

/// Runs every (rep, size, DUT) trial, DUTs interleaved; `progress` sees each finished trial.
/// A trial that fails is kept with its reason and the run goes on.
pub fn run(cfg: &P2pConfig, mut progress: impl FnMut(&Trial)) -> Result<Vec<Trial>, BenchError> {
    let mut trials = Vec::new();
    let (a, b) = (cfg.sender_cpu, cfg.receiver_cpu);
    for rep in 0..cfg.reps {
        for &size in &cfg.sizes {
            for &dut in &cfg.duts {
                let before = if cfg.wait_near_secs > 0.0 {
                    placement::wait_near(a, b, Duration::from_secs_f64(cfg.wait_near_secs))
                } else {
                    placement::probe(a, b, 20_000)
                };
                let r = match dut {
                    Dut::Veclane => veclane_trial(cfg, size, rep),
                    Dut::Testpmd => crate::testpmd::p2p_trial(cfg, size, rep),
                };
                let after = placement::probe(a, b, 20_000);
                let mut t = r.unwrap_or_else(|e| Trial {
                    error: Some(e.to_string()),
                    ..Trial::new(dut, size, rep)
                });
                t.probe_before_ns = before;
                t.probe_after_ns = after;
                t.placement = Placement::of(before, after);
                progress(&t);
                trials.push(t);
            }
        }
    }
    Ok(trials)
}

/// A trial is only valid if the receiver saw frames of the size asked for: a DUT that quietly
/// sends something else (testpmd's txonly falls back to 64-byte frames when a frame does not
/// fit its mbuf) must not produce a number.
pub fn check_frame_size(bytes: u64, packets: u64, size: usize) -> Result<(), String> {
    if packets == 0 {
        return Err("receiver counted no frames".into());
    }
    let avg = bytes as f64 / packets as f64;
    if (avg - size as f64).abs() > 0.5 {
        return Err(format!(
            "received frames average {avg:.1} B, not the {size} B asked for"
        ));
    }
    Ok(())
}

fn veclane_trial(cfg: &P2pConfig, size: usize, rep: usize) -> Result<Trial, BenchError> {
    let fail = |msg: String| BenchError::Trial {
        dut: Dut::Veclane,
        size,
        msg,
    };
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("p2p.sock");
    let common = |c: &mut Command| {
        c.arg("gen")
            .arg("--socket")
            .arg(&sock)
            .arg("--size")
            .arg(size.to_string())
            .arg("--ring-log2")
            .arg(cfg.ring_log2.to_string())
            .arg("--buffer-size")
            .arg(buffer_size_for(cfg, size).to_string())
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    };
    let mut rx = Command::new(&cfg.veclane_bin);
    common(&mut rx);
    rx.args(["--role", "primary", "--rx-only", "--duration"])
        .arg(format!("{}", cfg.trial_secs + 30.0))
        .arg("--cpu")
        .arg(cfg.receiver_cpu.to_string());
    let rx = rx.spawn().map_err(|e| {
        fail(format!(
            "cannot start receiver {}: {e}",
            cfg.veclane_bin.display()
        ))
    })?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sock.exists() {
        if Instant::now() > deadline {
            return Err(fail("receiver did not create its socket".into()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut tx = Command::new(&cfg.veclane_bin);
    common(&mut tx);
    tx.args(["--role", "secondary", "--tx-only", "--duration"])
        .arg(format!("{}", cfg.trial_secs))
        .arg("--cpu")
        .arg(cfg.sender_cpu.to_string());
    let txo = tx
        .output()
        .map_err(|e| fail(format!("cannot start sender: {e}")))?;
    let rxo = rx.wait_with_output()?;
    let parse = |o: &std::process::Output, who: &str| -> Result<serde_json::Value, BenchError> {
        if !o.status.success() {
            return Err(fail(format!(
                "{who} failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        serde_json::from_slice(&o.stdout).map_err(|e| fail(format!("{who} printed no report: {e}")))
    };
    let (t, r) = (parse(&txo, "sender")?, parse(&rxo, "receiver")?);
    let tx_packets = t["tx_packets"].as_u64().unwrap_or(0);
    let rx_packets = r["rx_packets"].as_u64().unwrap_or(0);
    check_frame_size(r["rx_bytes"].as_u64().unwrap_or(0), rx_packets, size).map_err(fail)?;
    Ok(Trial {
        tx_packets,
        rx_packets,
        mpps: r["rx_mpps"].as_f64().unwrap_or(0.0),
        window_s: r["rx_window_s"].as_f64().unwrap_or(0.0),
        lost: tx_packets as i64 - rx_packets as i64,
        note: format!("bad_desc={} gaps={}", r["rx_bad_desc"], r["rx_seq_gaps"]),
        ..Trial::new(Dut::Veclane, size, rep)
    })
}
