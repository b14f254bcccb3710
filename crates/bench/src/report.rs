//! Terminal tables and JSON files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Subject;
use crate::p2p::P2pConfig;
use crate::trial::{Row, Trial};

/// Everything a run produced, with its configuration echoed.
#[derive(Debug, Serialize)]
pub struct Report<'a, C: Serialize> {
    pub scenario: &'static str,
    pub conventions: &'static str,
    pub config: &'a C,
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
loss = frames the sender counted as sent minus frames received; \
size 0 = IMIX (64, 570 and 1518 B frames 7:4:1, S = their mean 353.8 B in Gbps)";

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

/// The p2p comparison table.
pub fn table(cfg: &P2pConfig, rows: &[Row]) -> String {
    let mut head = vec![
        format!(
            "memif p2p throughput: sender on CPU {}, receiver on CPU {}, ring 2^{}, buffer {} B, {} trial(s) of {} s per DUT and size, DUTs interleaved",
            cfg.sender_cpu,
            cfg.receiver_cpu,
            cfg.ring_log2,
            cfg.buffer_size,
            cfg.reps,
            cfg.trial_secs
        ),
        PLACEMENT_LEGEND.to_string(),
        CONVENTIONS.to_string(),
    ];
    if cfg.sizes.iter().any(|&z| z > cfg.buffer_size as usize) {
        head.push(format!(
            "frames larger than {} B use 9216-byte memif buffers in both DUTs (no chains: DPDK 22.11 corrupts chained tx)",
            cfg.buffer_size
        ));
    }
    grid(&head, &cfg.sizes, &crate::p2p::subjects(cfg), rows)
}

pub const PLACEMENT_LEGEND: &str = "Mpps = median (min-max) of the trials in the placement shown: near/mid/far = one-way cache-line transfer between the two CPUs <130 / 130-280 / >280 ns, probed before and after every trial";

/// Heading lines, then one line per frame size with the DUTs side by side, each DUT's rate
/// divided by the last DUT's where both medians come from the same placement.
pub fn grid(head: &[String], sizes: &[usize], duts: &[Subject], rows: &[Row]) -> String {
    let mut s = String::new();
    for h in head {
        let _ = writeln!(s, "{h}");
    }
    let _ = writeln!(s);
    let names: Vec<String> = duts.iter().map(|d| d.to_string()).collect();
    let w = names.iter().map(String::len).max().unwrap_or(8).max(8);
    let mut header = format!("{:>6}", "size");
    for n in &names {
        let _ = write!(
            header,
            " | {n:<w$} {:>21} {:>8} {:>8} {:>7} {:>9}",
            "Mpps (min-max)", "Gbps L2", "Gbps L1", "loss", "placement"
        );
    }
    let base = names.last().filter(|_| names.len() >= 2);
    if let Some(b) = base {
        for n in &names[..names.len() - 1] {
            let _ = write!(header, " | {n}/{b}");
        }
    }
    let _ = writeln!(s, "{header}");
    let _ = writeln!(s, "{}", "-".repeat(header.len()));
    for &size in sizes {
        let mut line = format!("{size:>6}");
        let mut m = Vec::new();
        for &d in duts {
            match rows.iter().find(|r| r.dut == d && r.size == size) {
                Some(r) => {
                    let mut place = format!("{} {}/{}", r.basis, r.trials, r.trials_run);
                    if r.disagreeing > 0 {
                        place.push('!');
                    }
                    let _ = write!(
                        line,
                        " | {:<w$} {:>7.3} ({:>5.2}-{:>5.2}) {:>8.2} {:>8.2} {:>7.0e} {:>9}",
                        "",
                        r.mpps,
                        r.mpps_min,
                        r.mpps_max,
                        r.gbps_l2,
                        r.gbps_l1,
                        r.loss_ratio,
                        place
                    );
                    m.push(Some((r.mpps, r.basis)));
                }
                None => {
                    let _ = write!(
                        line,
                        " | {:<w$} {:>21} {:>8} {:>8} {:>7} {:>9}",
                        "", "failed", "", "", "", ""
                    );
                    m.push(None);
                }
            }
        }
        if base.is_some() {
            let last = m[m.len() - 1];
            for (i, n) in names[..names.len() - 1].iter().enumerate() {
                let cell = match (m[i], last) {
                    // A ratio only between medians taken in the same placement.
                    (Some((a, pa)), Some((b, pb))) if b > 0.0 && pa == pb => {
                        format!("{:.2}x", a / b)
                    }
                    (Some(_), Some(_)) => "n/a (placement)".into(),
                    _ => "n/a".into(),
                };
                let _ = write!(
                    line,
                    " | {cell:>width$}",
                    width = n.len() + 1 + names[names.len() - 1].len()
                );
            }
        }
        let _ = writeln!(s, "{line}");
    }
    if rows.iter().any(|r| r.disagreeing > 0) {
        let _ = writeln!(
            s,
            "! = some trials' counts disagree with the DUT's own counters (see the JSON)"
        );
    }
    s
}

pub fn write_json<C: Serialize>(dir: &Path, report: &Report<'_, C>) -> std::io::Result<PathBuf> {
    write_named_json(
        dir,
        &format!("{}-{}", report.scenario, report.environment.unix_time),
        report,
    )
}

/// Writes `value` as pretty JSON to `DIR/STEM.json` (the directory made if missing); its path.
pub fn write_named_json(
    dir: &Path,
    stem: &str,
    value: &impl Serialize,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{stem}.json"));
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?,
    )?;
    Ok(path)
}

/// Columns named by the values of several rows (`(name, value)` pairs), in first-seen order,
/// with the names in `last` moved to the end.
pub fn named_columns<'a>(
    rows: impl IntoIterator<Item = &'a [(String, f64)]>,
    last: &[&str],
) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for row in rows {
        for (n, _) in row {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let (mut head, tail): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| !last.contains(&n.as_str()));
    head.extend(tail);
    head
}

/// Appends one right-aligned cell per column: its name (`values` = `None`, a header), the
/// row's value to one decimal, or `-` where the row has none.
pub fn push_named_cells(line: &mut String, names: &[String], values: Option<&[(String, f64)]>) {
    for n in names {
        let w = n.len().max(7);
        let _ = match values {
            None => write!(line, " {n:>w$}"),
            Some(v) => match v.iter().find(|(m, _)| m == n) {
                Some((_, x)) => write!(line, " {x:>w$.1}"),
                None => write!(line, " {:>w$}", "-"),
            },
        };
    }
}

#[cfg(test)]
mod named_tests {
    use super::*;

    #[test]
    fn named_columns_union_rows_and_cells_fill_the_gaps() {
        let a = vec![("total".to_string(), 36.0), ("lookup".to_string(), 4.5)];
        let b = vec![("input".to_string(), 9.0), ("total".to_string(), 40.0)];
        let names = named_columns([a.as_slice(), b.as_slice()], &["total"]);
        assert_eq!(names, ["lookup", "input", "total"]);
        let mut h = String::new();
        push_named_cells(&mut h, &names, None);
        assert_eq!(h, "  lookup   input   total");
        let mut l = String::new();
        push_named_cells(&mut l, &names, Some(&a));
        assert_eq!(l, "     4.5       -    36.0");
    }
}
