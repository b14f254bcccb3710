//! Terminal table and JSON file for a p2p run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Dut;
use crate::p2p::{P2pConfig, Row, Trial};

/// Everything a run produced, with its configuration echoed.
#[derive(Debug, Serialize)]
pub struct P2pReport<'a> {
    pub scenario: &'static str,
    pub conventions: &'static str,
    pub config: &'a P2pConfig,
    pub environment: Environment,
    pub rows: Vec<Row>,
    pub trials: &'a [Trial],
}

#[derive(Debug, Serialize, Default)]
pub struct Environment {
    pub veclane_version: String,
    pub testpmd_version: Option<String>,
    pub kernel: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub unix_time: u64,
}

pub const CONVENTIONS: &str = "frame size S = bytes in the memif buffer (Ethernet header to payload end, no FCS, as testpmd --txpkts); \
Gbps L2 = S x 8 x pps; Gbps L1 = (S + 20) x 8 x pps (preamble, SFD, inter-frame gap); Mpps = median of the trials, receiver-measured; \
loss = frames the sender counted as sent minus frames received";

impl Environment {
    pub fn probe(testpmd_version: Option<String>) -> Environment {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Environment {
            veclane_version: env!("CARGO_PKG_VERSION").into(),
            testpmd_version,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            cpu_model,
            unix_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }
}

/// The comparison table: one line per frame size, DUTs side by side.
pub fn table(cfg: &P2pConfig, rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "memif p2p throughput: sender on CPU {}, receiver on CPU {}, ring 2^{}, buffer {} B, {} trial(s) of {} s per DUT and size, DUTs interleaved",
        cfg.sender_cpu, cfg.receiver_cpu, cfg.ring_log2, cfg.buffer_size, cfg.reps, cfg.trial_secs
    );
    let _ = writeln!(
        s,
        "Mpps = median (min-max) of the trials in the placement shown: near/mid/far = one-way cache-line transfer between the two CPUs <130 / 130-280 / >280 ns, probed before and after every trial"
    );
    let _ = writeln!(s, "{CONVENTIONS}");
    if cfg.sizes.iter().any(|&z| z > cfg.buffer_size as usize) {
        let _ = writeln!(
            s,
            "frames larger than {} B use 9216-byte memif buffers in both DUTs (no chains: DPDK 22.11 corrupts chained tx)",
            cfg.buffer_size
        );
    }
    let _ = writeln!(s);
    let mut header = format!("{:>6}", "size");
    for d in &cfg.duts {
        let _ = write!(
            header,
            " | {:<8} {:>21} {:>8} {:>8} {:>7} {:>9}",
            d, "Mpps (min-max)", "Gbps L2", "Gbps L1", "loss", "placement"
        );
    }
    if cfg.duts.len() == 2 {
        let _ = write!(header, " | {}/{}", cfg.duts[0], cfg.duts[1]);
    }
    let _ = writeln!(s, "{header}");
    let _ = writeln!(s, "{}", "-".repeat(header.len()));
    for &size in &cfg.sizes {
        let mut line = format!("{size:>6}");
        let mut m = Vec::new();
        for &d in &cfg.duts {
            match rows.iter().find(|r| r.dut == d && r.size == size) {
                Some(r) => {
                    let place = format!("{} {}/{}", r.basis, r.trials, r.trials_run);
                    let _ = write!(
                        line,
                        " | {:<8} {:>7.3} ({:>5.2}-{:>5.2}) {:>8.2} {:>8.2} {:>7.0e} {:>9}",
                        "",
                        r.mpps,
                        r.mpps_min,
                        r.mpps_max,
                        r.gbps_l2,
                        r.gbps_l1,
                        r.loss_ratio,
                        place
                    );
                    m.push((r.mpps, r.basis));
                }
                None => {
                    let _ = write!(
                        line,
                        " | {:<8} {:>21} {:>8} {:>8} {:>7} {:>9}",
                        "", "failed", "", "", "", ""
                    );
                }
            }
        }
        // A ratio only between medians taken in the same placement.
        if m.len() == 2 && m[1].0 > 0.0 && m[0].1 == m[1].1 {
            let _ = write!(line, " | {:.2}x", m[0].0 / m[1].0);
        } else if cfg.duts.len() == 2 {
            let _ = write!(line, " | n/a (placements differ)");
        }
        let _ = writeln!(s, "{line}");
    }
    s
}

pub fn write_json(dir: &Path, report: &P2pReport<'_>) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("p2p-{}.json", report.environment.unix_time));
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(report).map_err(std::io::Error::other)?,
    )?;
    Ok(path)
}

pub fn has(duts: &[Dut], d: Dut) -> bool {
    duts.contains(&d)
}
