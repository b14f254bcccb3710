//! What a searched run prints and writes: the table, the per-node table, CSV, and the SVG
//! plots over frame size and worker count.

use super::config::L3fwdConfig;
use super::rows::{SearchRow, reference_for};
use crate::plot::PlotError;
use crate::search::Method;
use crate::trial::{IMIX, size_label};
use crate::{Shape, Subject};

/// The heading of an l3fwd table.
pub fn head(cfg: &L3fwdConfig) -> Vec<String> {
    let mut h = vec![
        format!(
            "{}: generator (zero-copy memif secondary, sending and receiving in one loop) on CPU {}, DUT on CPU {}; ring {}, buffer {} B, burst {}; {} search(es) per DUT and size, {}",
            cfg.topology.heading(),
            cfg.gen_cpu,
            match cfg.dut_cpus.as_slice() {
                [one] => one.to_string(),
                more => format!("{more:?} (worker i on the i-th)"),
            },
            super::config::rings_text(cfg),
            cfg.buffer_size,
            cfg.burst,
            cfg.reps,
            match cfg.interleave {
                super::Interleave::Searches => "DUTs interleaved search by search",
                super::Interleave::Trials =>
                    "DUTs interleaved trial by trial (--interleave trials: every DUT's search at once, each DUT stopped outside its own trials)",
            },
        ),
        cfg.topology.describe(),
        format!("search: {}", search_summary(&cfg.method)),
        "xN after a DUT: N workers (lcores), each on a CPU of its own polling one queue pair of every interface; the generator opens N queue pairs and sends its bursts to them in turn; the ratio column divides by the last DUT with as many workers (in the same shape; a multinet row: by the same DUT in singlenet, the seeds' multinet/singlenet ratio)".into(),
        format!(
            "MRR = receive rate of a {} s flat-out trial (the generator held back by a full ring); the search runs between MRR/1000 and {} x MRR, the generator acting as a port on a wire: frames a full ring refuses are lost",
            cfg.mrr_secs, cfg.max_load_factor
        ),
        "result Mpps = the search's result (the highest load that passed), median (min-max) over the searches in the basis placement: near/mid/far = one-way cache-line transfer between the two CPUs <130 / 130-280 / >280 ns, probed before the DUT starts and after it stops: near searches when there are any, else mid, else far ('all' when every search was cut by a flip), 'x3 (of 5)' how many; the ratio column pairs each repetition's searches of two DUTs (run at once with --interleave trials, back to back with --interleave searches), when both ran in one placement (near pairs first)".into(),
        "frame size S = bytes in the memif buffer (Ethernet header to payload end, no FCS); Gbps L2 = S x 8 x pps; Gbps L1 = (S + 20) x 8 x pps (preamble, SFD, inter-frame gap); loss = frames offered minus frames received (refused by a full ring or short from the generator included); imix = frames of 64, 570 and 1518 B in turn, 7:4:1, S their mean (353.8 B; size 0 in the JSON, 'imix' in tables and CSV)".into(),
    ];
    h.extend(cfg.topology.notes(cfg));
    if !cfg.topology.shapes().is_empty() {
        h.push("node scenarios: S is the pod's frame; Mpps, loss and Gbps count both directions together; uplink L1 = (S + 50 + 20) x 8 x pps for multinet (its frames carry 50 bytes of VXLAN on the uplink), (S + 20) x 8 x pps for singlenet; seed = the seeds' multinet formula L2 x (1 + 56/S) = (S + 56) x 8 x pps, printed for comparison with their tables (their Gbps fit L1 at the pod's frame, S + 20, better)".into());
    }
    if cfg.sizes.iter().any(|&z| z > cfg.buffer_size as usize) {
        h.push(format!(
            "frames larger than {} B use 9216-byte memif buffers in every DUT",
            cfg.buffer_size
        ));
    }
    h
}

/// The method and its parameters on one line.
pub fn search_summary(m: &Method) -> String {
    serde_json::to_string(m).unwrap_or_default()
}

/// The result table: one line per (size, DUT).
pub fn table(cfg: &L3fwdConfig, rows: &[SearchRow]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for l in head(cfg) {
        let _ = writeln!(s, "{l}");
    }
    let cols = Columns::new(cfg, rows);
    let _ = writeln!(s, "\n{}", cols.header());
    for &size in &cfg.sizes {
        for r in rows.iter().filter(|r| r.size == size) {
            let _ = writeln!(s, "{}{}", cols.cells(cfg, r), flags(cfg, r));
        }
    }
    s
}

/// The columns of [`table`]: what every row has cells for.
struct Columns {
    goal_names: Vec<String>,
    /// The latency column's fraction of the first goal's result.
    lat_at: Option<f64>,
    /// The DUT paired ratios are over.
    reference: Option<Subject>,
    /// Whether a multinet column is in the run (the uplink and seed-formula column).
    shaped: bool,
    /// The DUT multinet rows are paired with, beside another's.
    peer: Option<Subject>,
    /// The DUT column's width.
    w: usize,
}

impl Columns {
    fn new(cfg: &L3fwdConfig, rows: &[SearchRow]) -> Columns {
        let goal_names: Vec<String> = rows
            .iter()
            .find(|r| !r.goals.is_empty())
            .map(|r| r.goals.iter().map(|g| g.goal.clone()).collect())
            .unwrap_or_default();
        let lat_at = cfg
            .latency_at
            .iter()
            .copied()
            .find(|&f| (f - 0.5).abs() < 1e-9)
            .or(cfg.latency_at.first().copied());
        let reference = cfg
            .duts
            .iter()
            .rev()
            .find(|d| d.dut != crate::Dut::None)
            .copied();
        let shaped = cfg.duts.iter().any(|d| d.shape == Some(Shape::Multinet));
        let w = cfg
            .duts
            .iter()
            .map(|d| d.to_string().len())
            .max()
            .unwrap_or(0)
            .max(18);
        // Multinet rows beside another DUT's: over that DUT's multinet too.
        let peer = cfg.duts.iter().find_map(|d| super::peer_for(&cfg.duts, *d));
        Columns {
            goal_names,
            lat_at,
            reference,
            shaped,
            peer,
            w,
        }
    }

    /// The table's header line.
    fn header(&self) -> String {
        use std::fmt::Write as _;
        let (lat_at, reference, shaped, peer, w) =
            (self.lat_at, self.reference, self.shaped, self.peer, self.w);
        let mut header = format!("{:>5}  {:<w$}", "size", "dut");
        for (i, g) in self.goal_names.iter().enumerate() {
            let _ = write!(header, "  {:>22}", format!("{g} Mpps (min-max)"));
            if i == 0 {
                let _ = write!(header, "  {:>13}  {:>8}", "Gbps L2/L1", "loss");
                if shaped {
                    let _ = write!(header, "  {:>17}", "uplink L1/seed Gb");
                }
            }
        }
        let _ = write!(header, "  {:>8}", "MRR Mpps");
        if let Some(f) = lat_at {
            let _ = write!(
                header,
                "  {:>20}",
                format!("lat@{:.0}% p50/p99 us", f * 100.0)
            );
        }
        if let Some(r) = reference {
            let name = if shaped {
                "paired ratio".to_string()
            } else {
                format!("/{} paired", r.dut)
            };
            let _ = write!(header, "  {name:>26}");
            let _ = write!(header, "  {:>26}", "MRR paired");
        }
        if let Some(p) = peer {
            let _ = write!(header, "  {:>26}", format!("/{} multinet paired", p.dut));
        }
        let _ = write!(header, "  basis");
        header
    }

    /// `r`'s cells, up to its basis.
    fn cells(&self, cfg: &L3fwdConfig, r: &SearchRow) -> String {
        use std::fmt::Write as _;
        let (lat_at, reference, shaped, peer, w) =
            (self.lat_at, self.reference, self.shaped, self.peer, self.w);
        let size = r.size;
        let mut line = format!("{:>5}  {:<w$}", size_label(size), r.dut.to_string());
        for (i, g) in r.goals.iter().enumerate() {
            let _ = write!(
                line,
                "  {:>22}",
                format!("{:.3} ({:.3}-{:.3})", g.mpps, g.mpps_min, g.mpps_max)
            );
            if i == 0 {
                let _ = write!(
                    line,
                    "  {:>13}  {:>8.1e}",
                    format!("{:.1}/{:.1}", g.gbps_l2, g.gbps_l1),
                    g.measured_loss
                );
                if shaped {
                    let cell = match (g.gbps_l1_uplink, g.gbps_seed_formula) {
                        (Some(u), Some(s)) => format!("{u:.1}/{s:.1}"),
                        (Some(u), None) => format!("{u:.1}/-"),
                        _ => "-".into(),
                    };
                    let _ = write!(line, "  {cell:>17}");
                }
            }
        }
        let _ = write!(line, "  {:>8.3}", r.mrr_mpps);
        if let Some(f) = lat_at {
            let cell = r
                .latency
                .iter()
                .find(|(x, _)| *x == f)
                .map(|(_, l)| format!("{:.1}/{:.1}", l.p50_ns as f64 / 1e3, l.p99_ns as f64 / 1e3))
                .unwrap_or_else(|| "-".into());
            let _ = write!(line, "  {cell:>20}");
        }
        if reference.is_some() {
            let ratio = match r.paired_ratio {
                Some(p) => ratio_cell(p),
                None if Some(r.dut) == reference_for(&cfg.duts, r.dut) => "1".into(),
                None => "-".into(),
            };
            let _ = write!(line, "  {ratio:>26}");
            let mrr = match r.paired_mrr {
                Some(p) => ratio_cell(p),
                None if Some(r.dut) == reference_for(&cfg.duts, r.dut) => "1".into(),
                None => "-".into(),
            };
            let _ = write!(line, "  {mrr:>26}");
        }
        if peer.is_some() {
            let cell = match (r.peer_ratio, super::peer_for(&cfg.duts, r.dut)) {
                (Some(p), _) => ratio_cell(p),
                (None, None)
                    if r.dut.shape == Some(Shape::Multinet)
                        && peer.is_some_and(|p| p.dut == r.dut.dut) =>
                {
                    "1".into()
                }
                _ => "-".into(),
            };
            let _ = write!(line, "  {cell:>26}");
        }
        line
    }
}

/// `r`'s basis, its searches and what the reader should be warned of.
fn flags(cfg: &L3fwdConfig, r: &SearchRow) -> String {
    use std::fmt::Write as _;
    let basis = r.basis.map_or("all".to_string(), |b| b.to_string());
    let mut flags = format!("  {basis} x{}", r.searches);
    if cfg.shares_gen_cpu(r.dut.workers) {
        let _ = write!(
            flags,
            " ! a worker shares the generator's CPU {}: not the DUT's rate",
            cfg.gen_cpu
        );
    }
    if r.searches < r.searches_run {
        let _ = write!(flags, " (of {})", r.searches_run);
    }
    if r.disagreeing > 0 {
        let _ = write!(
            flags,
            " ! {} trial(s) disagree with the DUT's counters",
            r.disagreeing
        );
    }
    if r.foreign > 0 {
        let _ = write!(
            flags,
            " ! {} trial(s) got frames back the generator did not send (fragments? not counted)",
            r.foreign
        );
    }
    if r.generator_bound {
        let _ = write!(
            flags,
            " ! generator-bound: MRR within 10% of the generator's ceiling (none)"
        );
    }
    if r.generator_short > 0 {
        let _ = write!(
            flags,
            " ({} trial(s) with generator shortfall)",
            r.generator_short
        );
    }
    if r.redone > 0 {
        let _ = write!(flags, " ({} disturbed trial(s) run again)", r.redone);
    }
    let irregular: usize = r.goals.iter().map(|g| g.irregular).sum();
    if irregular > 0 {
        let _ = write!(flags, " ({irregular} irregular)");
    }
    flags
}

/// A paired ratio as a table cell: median (min-max), the placement of its pairs, how many.
fn ratio_cell(p: super::PairedRatio) -> String {
    format!(
        "{:.2} ({:.2}-{:.2}) {} x{}",
        p.median,
        p.min,
        p.max,
        p.placement.map_or("all".to_string(), |b| b.to_string()),
        p.pairs
    )
}

/// Where each DUT's time goes: nanoseconds per packet per node in the flat-out trial
/// (veclane's and VPP's `show runtime`).
pub fn node_table(cfg: &L3fwdConfig, rows: &[SearchRow]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let names = crate::report::named_columns(rows.iter().map(|r| r.node_ns.as_slice()), &["total"]);
    if names.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "show runtime over the flat-out trial, ns per packet (median; memif-input includes empty polls; VPP: its clocks at the TSC rate `show cpu` gives, memifX/Y-output and -tx summed as interface-output and memif-tx):"
    );
    let mut header = format!("{:>6} {:<16}", "size", "dut");
    crate::report::push_named_cells(&mut header, &names, None);
    let _ = writeln!(s, "{header}");
    for &size in &cfg.sizes {
        for r in rows
            .iter()
            .filter(|r| r.size == size && !r.node_ns.is_empty())
        {
            let mut line = format!("{:>6} {:<16}", size_label(size), r.dut.to_string());
            crate::report::push_named_cells(&mut line, &names, Some(&r.node_ns));
            let _ = writeln!(s, "{line}");
        }
    }
    s
}

/// CSV: one line per (size, DUT, goal).
pub fn csv(cfg: &L3fwdConfig, rows: &[SearchRow]) -> String {
    let header = [
        "scenario",
        "size",
        "dut",
        "goal",
        "loss_ratio",
        "measured_loss",
        "mpps",
        "mpps_min",
        "mpps_max",
        "gbps_l2",
        "gbps_l1",
        "gbps_l1_uplink",
        "gbps_seed_formula",
        "forwarding_mpps",
        "mrr_mpps",
        "lat50_p50_ns",
        "lat50_p99_ns",
        "searches",
        "basis",
        "disagreeing",
        "paired_ratio",
        "paired_pairs",
        "paired_placement",
        "paired_mrr_ratio",
        "peer_ratio",
        "workers",
        "gen_cpu",
        "dut_cpus",
        "ring_log2",
        "buffer_size",
        "method",
    ];
    let method = search_summary(&cfg.method);
    let mut out = Vec::new();
    for r in rows {
        let lat = r
            .latency
            .iter()
            .find(|(f, _)| (f - 0.5).abs() < 1e-9)
            .map(|(_, l)| *l);
        for g in &r.goals {
            out.push(vec![
                cfg.topology.name().to_string(),
                size_label(r.size),
                r.dut.to_string(),
                g.goal.clone(),
                g.loss_ratio.to_string(),
                format!("{:.3e}", g.measured_loss),
                format!("{:.4}", g.mpps),
                format!("{:.4}", g.mpps_min),
                format!("{:.4}", g.mpps_max),
                format!("{:.3}", g.gbps_l2),
                format!("{:.3}", g.gbps_l1),
                g.gbps_l1_uplink
                    .map(|v| format!("{v:.3}"))
                    .unwrap_or_default(),
                g.gbps_seed_formula
                    .map(|v| format!("{v:.3}"))
                    .unwrap_or_default(),
                format!("{:.4}", g.forwarding_mpps),
                format!("{:.4}", r.mrr_mpps),
                lat.map(|l| l.p50_ns.to_string()).unwrap_or_default(),
                lat.map(|l| l.p99_ns.to_string()).unwrap_or_default(),
                r.searches.to_string(),
                r.basis.map_or("all".to_string(), |b| b.to_string()),
                r.disagreeing.to_string(),
                r.paired_ratio
                    .map(|p| format!("{:.4}", p.median))
                    .unwrap_or_default(),
                r.paired_ratio
                    .map(|p| p.pairs.to_string())
                    .unwrap_or_default(),
                r.paired_ratio
                    .map(|p| p.placement.map_or("all".to_string(), |b| b.to_string()))
                    .unwrap_or_default(),
                r.paired_mrr
                    .map(|p| format!("{:.4}", p.median))
                    .unwrap_or_default(),
                r.peer_ratio
                    .map(|p| format!("{:.4}", p.median))
                    .unwrap_or_default(),
                r.dut.workers.to_string(),
                cfg.gen_cpu.to_string(),
                cfg.worker_cpus(r.dut.workers)
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
                cfg.ring_log2_at(r.size).to_string(),
                cfg.buffer_size.to_string(),
                method.clone(),
            ]);
        }
    }
    crate::csv::to_csv(&header, &out)
}

/// Throughput of the first goal against frame size, one line per DUT with the fewest workers
/// measured (one, normally: seed 000's figure 5).
pub fn size_plot(cfg: &L3fwdConfig, rows: &[SearchRow]) -> Result<String, PlotError> {
    let fewest = cfg.duts.iter().map(|d| d.workers).min().unwrap_or(1);
    let series: Vec<crate::plot::Series> = cfg
        .duts
        .iter()
        .filter(|d| d.workers == fewest)
        .map(|&d| {
            // An IMIX has no place on a size axis.
            let sized = rows.iter().filter(|r| r.dut == d && r.size != IMIX);
            goal_series(d.to_string(), sized, |r| r.size as f64)
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let goal = first_goal_name(rows);
    let ticks: Vec<f64> = cfg
        .sizes
        .iter()
        .filter(|&&s| s != IMIX)
        .map(|&s| s as f64)
        .collect();
    let title = format!(
        "{}: {goal} against frame size, {}",
        cfg.topology.heading(),
        match fewest {
            1 => "one DUT core".to_string(),
            n => format!("{n} DUT cores"),
        }
    );
    let subtitle = format!(
        "generator CPU {}, DUT CPUs {:?}; median of {} search(es), bars min-max",
        cfg.gen_cpu,
        cfg.worker_cpus(fewest),
        cfg.reps
    );
    crate::plot::svg(&crate::plot::Plot {
        title: &title,
        subtitle: &subtitle,
        x_label: "frame size (bytes, no FCS)",
        y_label: "Mpps",
        x_ticks: Some(&ticks),
        series: &series,
    })
}

/// A plot line named `name`: each row's first goal (median, bars min-max) at `x` of the row.
pub(super) fn goal_series<'r>(
    name: String,
    rows: impl Iterator<Item = &'r SearchRow>,
    x: impl Fn(&SearchRow) -> f64,
) -> crate::plot::Series {
    crate::plot::Series {
        name,
        points: rows
            .filter_map(|r| {
                r.goals.first().map(|g| crate::plot::Point {
                    x: x(r),
                    y: g.mpps,
                    y_min: g.mpps_min,
                    y_max: g.mpps_max,
                })
            })
            .collect(),
    }
}

pub(super) fn first_goal_name(rows: &[SearchRow]) -> String {
    rows.iter()
        .find_map(|r| r.goals.first().map(|g| g.goal.clone()))
        .unwrap_or_else(|| "throughput".into())
}

/// The worker counts measured, ascending.
pub fn worker_counts(cfg: &L3fwdConfig) -> Vec<u16> {
    let mut w: Vec<u16> = cfg.duts.iter().map(|d| d.workers).collect();
    w.sort_unstable();
    w.dedup();
    w
}

/// Throughput of the first goal at frames of `size` against the DUT's worker count, one line
/// per DUT (seed 000's figure 6). Points whose workers share the generator's CPU are drawn,
/// and the subtitle says which.
pub fn worker_plot(
    cfg: &L3fwdConfig,
    rows: &[SearchRow],
    size: usize,
) -> Result<String, PlotError> {
    let mut lines: Vec<Subject> = Vec::new();
    for d in &cfg.duts {
        if !lines.contains(&d.line()) {
            lines.push(d.line());
        }
    }
    let series: Vec<crate::plot::Series> = lines
        .iter()
        .map(|&l| {
            goal_series(
                l.to_string(),
                rows.iter().filter(|r| r.size == size && r.dut.line() == l),
                |r| f64::from(r.dut.workers),
            )
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let ticks: Vec<f64> = worker_counts(cfg).iter().map(|&w| f64::from(w)).collect();
    let title = format!(
        "{}: {} against DUT cores, {size} B frames",
        cfg.topology.heading(),
        first_goal_name(rows)
    );
    let shared: Vec<String> = worker_counts(cfg)
        .into_iter()
        .filter(|&w| cfg.shares_gen_cpu(w))
        .map(|w| w.to_string())
        .collect();
    let mut subtitle = format!(
        "generator CPU {}, DUT CPUs {:?} in order; median of {} search(es), bars min-max",
        cfg.gen_cpu, cfg.dut_cpus, cfg.reps
    );
    if !shared.is_empty() {
        subtitle.push_str(&format!(
            "; at {} worker(s) a worker shares the generator's CPU",
            shared.join(", ")
        ));
    }
    crate::plot::svg(&crate::plot::Plot {
        title: &title,
        subtitle: &subtitle,
        x_label: "DUT worker cores",
        y_label: "Mpps",
        x_ticks: Some(&ticks),
        series: &series,
    })
}
