//! `--cost`: instructions per packet of a DUT (veclane, testpmd) under callgrind, a figure
//! that does not move with the neighbours' load (unlike every rate on a shared machine).
//!
//! The DUT runs the l3fwd topology under `valgrind --tool=callgrind --fair-sched=yes` with
//! instrumentation off; the generator (native, on its own CPU) connects, it is switched on
//! (`callgrind_control -i on`), a fixed number of frames is sent flat out (held back by a full
//! ring, so the daemon sees full vectors and no empty polls until the last one), and it is
//! switched off again once the DUT's counter shows every frame taken (a few milliseconds of
//! empty polls at most); the DUT exits, writing its profile. Instructions are divided by the
//! frames the DUT received: the whole process (every thread), and for veclane each graph
//! node's `process` (inclusive).

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;

use crate::dut::DutError;
use crate::harness::L3fwdConfig;
use crate::report;
use crate::{Dut, Subject};

/// A `--cost` run: the JSON file's shape.
#[derive(Debug, Serialize)]
pub struct CostReport<'a> {
    pub scenario: String,
    pub config: &'a L3fwdConfig,
    pub cost_frames: u64,
    /// `--cost-window`: at most this many frames in flight; none: flat out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_window: Option<u64>,
    pub environment: report::Environment,
    pub costs: Vec<Cost>,
}

impl CostReport<'_> {
    /// Writes `SCENARIO-cost-TIME.json` into `dir`; returns its path.
    pub fn write(&self, dir: &Path) -> std::io::Result<std::path::PathBuf> {
        let stem = format!("{}-{}", self.scenario, self.environment.unix_time);
        report::write_named_json(dir, &stem, self)
    }
}

/// Instructions per packet of one (DUT, size).
#[derive(Debug, Clone, Serialize)]
pub struct Cost {
    pub dut: Subject,
    pub size: usize,
    /// Frames the DUT received while collection was on.
    pub frames: u64,
    /// Frames the DUT sent back to the generator in that time: fewer than `frames` when it
    /// dropped some (a chain whose pod shares a CPU, say), whose work then stops part way and
    /// the per-frame figures undercount a whole frame's.
    pub returned: u64,
    /// Every instruction of the daemon while collecting, per frame, less the software DSA
    /// model's (below).
    pub total: f64,
    /// With `--copy-engine dsa --dsa-queue model`: the model's own instructions per frame
    /// (the device's work: executing descriptors, the copies themselves), left out of
    /// `total`, which is then the worker's share as on a real device.
    #[serde(skip_serializing_if = "is_zero")]
    pub device_model: f64,
    /// Inclusive instructions per frame of each graph node's `process` (`poll` for input
    /// nodes, empty polls included), by node type.
    pub nodes: Vec<(String, f64)>,
    /// Where the callgrind profile was kept (`--cost-profiles`), for `callgrind_annotate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<std::path::PathBuf>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// Why instructions per packet could not be counted.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// valgrind or one of its callgrind tools is missing, or the DUT cannot be counted.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Dut(#[from] DutError),
    #[error("generator: {0}")]
    Generator(String),
    /// The run did not deliver what it must to be divided by.
    #[error("{0}")]
    Run(String),
    /// callgrind_control or callgrind_annotate failed or printed what we cannot read.
    #[error("{0}")]
    Callgrind(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

/// Whether valgrind and its callgrind tools are installed.
pub fn available() -> Result<(), CostError> {
    for tool in ["valgrind", "callgrind_control", "callgrind_annotate"] {
        // callgrind_annotate 3.19 prints its version but exits 255: being found is enough.
        let ok = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| !o.stdout.is_empty() || !o.stderr.is_empty());
        if !ok {
            return Err(CostError::Unavailable(format!(
                "{tool} not found: --cost needs valgrind (apt-get install valgrind)"
            )));
        }
    }
    Ok(())
}

/// Measures `dut` at `size` over `frames` frames, with at most `window` of them in flight
/// (`None`: flat out); with `keep`, the callgrind profile (with per-instruction counts) is
/// kept in that directory as `callgrind.DUT.SIZE.out`.
pub fn measure(
    cfg: &L3fwdConfig,
    dut: Subject,
    size: usize,
    (frames, window): (u64, Option<u64>),
    keep: Option<&std::path::Path>,
) -> Result<Cost, CostError> {
    let dir = tempfile::tempdir().map_err(|source| CostError::Io {
        context: "a temporary directory".into(),
        source,
    })?;
    let out = dir.path().join("callgrind.out");
    let wrapper = vec![
        "valgrind".to_string(),
        "--tool=callgrind".into(),
        "--fair-sched=yes".into(),
        "--instr-atstart=no".into(),
        "--dump-instr=yes".into(),
        format!("--callgrind-out-file={}", out.display()),
    ];
    // Resolved once: the DUT's configuration and the generator's read the same numbers.
    let plan = crate::harness::Plan::new(cfg, size);
    if dut.dut == Dut::None {
        return measure_generator(cfg, dut, &plan, (frames, window), keep, dir.path());
    }
    if !matches!(dut.dut, Dut::Veclane | Dut::Testpmd) {
        return Err(CostError::Unavailable(format!(
            "--cost measures veclane, testpmd and the generator (none), not {dut}"
        )));
    }
    let (mut running, sock) = cfg.topology.start_dut(&crate::harness::DutStart {
        cfg,
        dut,
        plan: &plan,
        dir: dir.path(),
        wrapper: &wrapper,
    })?;
    let pid = running.pid();
    let gcfg = trafgen::GenConfig {
        count: Some(frames),
        duration: Duration::from_secs(600),
        connect_timeout: Duration::from_secs(60),
        // Frames still in the DUT are waited for on its counter instead (below).
        drain: Duration::from_millis(10),
        // Counted frames, under callgrind's own clock: nothing to warm up.
        warmup: Duration::ZERO,
        window,
        latency: false,
        ..cfg.topology.gen_config(cfg, dut, &sock, &plan)
    };
    let mut session = None;
    let counted = std::thread::scope(|s| {
        let (gcfg, running, session) = (&gcfg, &mut running, &mut session);
        s.spawn(move || -> Result<(u64, u64), CostError> {
            let stop = AtomicBool::new(false);
            let session = session.insert(
                trafgen::Session::connect(gcfg, &stop)
                    .map_err(|e| CostError::Generator(e.to_string()))?,
            );
            running.ready()?;
            let before = running.counts()?.unwrap_or_default();
            control(pid, "on")?;
            let r = session
                .run(gcfg, &stop)
                .map_err(|e| CostError::Generator(e.to_string()));
            // Instrumentation goes off as soon as the DUT has taken every frame, so that the
            // idle polls after the last one stay out of the count.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            let sent = r.as_ref().map_or(0, |g| g.tx_packets);
            while running
                .counts()?
                .unwrap_or_default()
                .rx
                .wrapping_sub(before.rx)
                < sent
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Frames still on their way back (a chain's second pass) finish under collection.
            // Checked before any wait: a DUT that sent every frame back goes off at once.
            let settle = std::time::Instant::now() + Duration::from_secs(10);
            let mut last = u64::MAX;
            loop {
                let back = running
                    .counts()?
                    .unwrap_or_default()
                    .tx
                    .wrapping_sub(before.tx);
                if back >= sent || back == last || std::time::Instant::now() >= settle {
                    break;
                }
                last = back;
                std::thread::sleep(Duration::from_millis(20));
            }
            control(pid, "off")?;
            let after = running.counts()?.unwrap_or_default();
            let g = r?;
            if g.tx_packets != frames || g.link_lost {
                return Err(CostError::Run(format!(
                    "the generator sent {} of {frames} frames{}",
                    g.tx_packets,
                    if g.link_lost { " (link lost)" } else { "" }
                )));
            }
            let rx = after
                .rx
                .checked_sub(before.rx)
                .ok_or_else(|| CostError::Run("the DUT's receive counter went backwards".into()))?;
            Ok((rx, after.tx.saturating_sub(before.tx)))
        })
        .join()
        .unwrap_or_else(|_| Err(CostError::Generator("its thread panicked".into())))
    });
    // The profile is written when the DUT exits on its own: give valgrind time. The DUT
    // stops before the generator leaves (see `harness::measure::search_one`).
    let stopped = running.stop(Duration::from_secs(120));
    if let Some(session) = session {
        session.close();
    }
    let (received, returned) = counted?;
    stopped?;
    if received == 0 {
        return Err(CostError::Run(
            "the DUT received nothing while collecting".into(),
        ));
    }
    let (total, nodes, model) = annotate(&out)?;
    let profile = keep_profile(keep, &out, dut, size)?;
    Ok(Cost {
        profile,
        dut,
        size,
        frames: received,
        returned,
        total: total.saturating_sub(model) as f64 / received as f64,
        device_model: model as f64 / received as f64,
        nodes: nodes
            .into_iter()
            .map(|(n, c)| (n, c as f64 / received as f64))
            .collect(),
    })
}

/// Copies the profile `out` of `dut` at `size` into `keep`, if given, as
/// `callgrind.DUT.SIZE.out`; where it went.
fn keep_profile(
    keep: Option<&Path>,
    out: &Path,
    dut: Subject,
    size: usize,
) -> Result<Option<std::path::PathBuf>, CostError> {
    let Some(dir) = keep else {
        return Ok(None);
    };
    let label = dut.to_string().replace('/', "-");
    let to = dir.join(format!(
        "callgrind.{label}.{}.out",
        crate::trial::size_label(size)
    ));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::copy(out, &to))
        .map_err(|source| CostError::Io {
            context: format!("keeping the profile as {}", to.display()),
            source,
        })?;
    Ok(Some(to))
}

/// The generator's run loop, where its instructions are counted (`--cost` of `none`).
const GEN_RUN: &str = "trafgen::run::Session::run";
/// Inside it, the control socket's polls (every few thousand passes, and on every pass that
/// neither sent nor received, as at the end): the session's upkeep, not the frames' work, left
/// out as a DUT's control thread is.
const GEN_CONTROL: &str = "trafgen::run::Endpoint::poll";
/// Its two halves, as columns: each the largest inclusive count of its functions. A run sends
/// through one of the three (`send_stamped` for frames of one size whose buffers hold all but
/// the probe, `send_uniform` for frames of one size otherwise, which hands chained frames to
/// `send_with` and then includes it; `send_with` for a mix), so the largest is the half.
const GEN_HALVES: [(&str, &[&str]); 2] = [
    (
        "Send",
        &[
            "memif::queue::secondary_tx::SecondaryTx::send_stamped",
            "memif::queue::secondary_tx::SecondaryTx::send_uniform",
            "memif::queue::secondary_tx::SecondaryTx::send_with",
        ],
    ),
    (
        "Receive",
        &["memif::queue::secondary_rx::SecondaryRx::recv_with"],
    ),
];

/// `--cost` of `none`: the generator's own instructions per frame, sent and received, which
/// is what bounds every DUT's measured rate (a DUT forwarding a frame costs the generator a
/// send and a receive on one CPU). `veclane gen` in loop mode runs under callgrind, collecting
/// only inside its run loop, against the bare memif reflector of the `none` DUT, native on the
/// DUT's CPU, twice; fixed frame sizes only. `frames` of the result: the difference of the two
/// runs.
fn measure_generator(
    cfg: &L3fwdConfig,
    dut: Subject,
    plan: &crate::harness::Plan,
    (frames, window): (u64, Option<u64>),
    keep: Option<&Path>,
    dir: &Path,
) -> Result<Cost, CostError> {
    let size = plan.size;
    if size == crate::trial::IMIX {
        return Err(CostError::Unavailable(
            "the generator's --cost (none) takes fixed frame sizes, not imix".into(),
        ));
    }
    // Two runs, of `frames` and three times as many: their difference is the frames' work
    // alone (connecting, the first passes and the drain at the end, a fixed cost, cancel).
    let short = run_generator(cfg, dut, plan, (frames, window), &dir.join("short.out"))?;
    let out = dir.join("callgrind.out");
    let long = run_generator(cfg, dut, plan, (3 * frames, window), &out)?;
    let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / (2 * frames) as f64;
    Ok(Cost {
        profile: keep_profile(keep, &out, dut, size)?,
        dut,
        size,
        frames: 2 * frames,
        returned: long.returned.saturating_sub(short.returned),
        total: per(short.total, long.total),
        device_model: 0.0,
        nodes: short
            .halves
            .iter()
            .zip(&long.halves)
            .map(|((name, a), (_, b))| (name.to_string(), per(*a, *b)))
            .collect(),
    })
}

/// One counted run of the generator (see [`measure_generator`]).
struct GenCount {
    /// Frames that came back.
    returned: u64,
    /// Instructions in its run loop, less the control socket's polls.
    total: u64,
    halves: Vec<(&'static str, u64)>,
}

/// Runs `veclane gen` in loop mode under callgrind for `frames` frames against the `none`
/// DUT, profile in `out`.
fn run_generator(
    cfg: &L3fwdConfig,
    dut: Subject,
    plan: &crate::harness::Plan,
    (frames, window): (u64, Option<u64>),
    out: &Path,
) -> Result<GenCount, CostError> {
    let dir = out.parent().unwrap_or(Path::new("."));
    let (running, sock) = cfg.topology.start_dut(&crate::harness::DutStart {
        cfg,
        dut,
        plan,
        dir,
        wrapper: &[],
    })?;
    let g = cfg.topology.gen_config(cfg, dut, &sock, plan);
    let o = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--dump-instr=yes",
            "--collect-atstart=no",
        ])
        .arg(format!("--toggle-collect={GEN_RUN}"))
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&cfg.veclane_bin)
        .arg("gen")
        .arg("--socket")
        .arg(&sock)
        .args(["--id", "0", "--rx-id", "1", "--json"])
        .args(["--count", &frames.to_string()])
        .args(["--size", &plan.size.to_string()])
        .args(["--ring-log2", &g.iface.log2_ring_size.to_string()])
        .args(["--buffer-size", &g.iface.buffer_size.to_string()])
        .args(["--queues", &g.iface.s2m_rings.to_string()])
        .args(["--burst", &g.burst.to_string()])
        .args(["--cpu", &cfg.gen_cpu.to_string()])
        .args(["--duration", "600", "--connect-timeout", "120"])
        // As in the throughput trials the generator bounds.
        .arg("--no-latency")
        .args(window.map(|w| format!("--window={w}")))
        .output();
    running.stop(Duration::from_secs(10))?;
    let o = o.map_err(|e| CostError::Callgrind(format!("valgrind: {e}")))?;
    if !o.status.success() {
        return Err(CostError::Generator(format!(
            "veclane gen under callgrind: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    let r: serde_json::Value = serde_json::from_slice(&o.stdout)
        .map_err(|e| CostError::Generator(format!("its report: {e}")))?;
    let count = |k: &str| r[k].as_u64().unwrap_or(0);
    if count("tx_packets") != frames {
        return Err(CostError::Run(format!(
            "the generator sent {} of {frames} frames",
            count("tx_packets")
        )));
    }
    let text = annotate_text(out)?;
    let (total, _, _) = parse_annotate(&text)?;
    Ok(GenCount {
        returned: count("rx_packets"),
        total: total.saturating_sub(inclusive(&text, GEN_CONTROL)),
        halves: GEN_HALVES
            .iter()
            .map(|&(name, syms)| {
                let n = syms.iter().map(|s| inclusive(&text, s)).max();
                (name, n.unwrap_or(0))
            })
            .collect(),
    })
}

/// The inclusive count of function `symbol` in `callgrind_annotate --inclusive=yes` output:
/// its largest entry (a function shows once per source file its inlined code came from, and
/// once more as a whole), not counting closures inside it (`symbol::{{closure}}`) or its
/// recursion levels (`symbol'2`).
fn inclusive(text: &str, symbol: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (num, rest) = l.split_once(' ')?;
            let i = rest.find(symbol)?;
            let after = &rest[i + symbol.len()..];
            (after.is_empty() || after.starts_with(' ')).then_some(())?;
            num.replace(',', "").parse::<u64>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// Switches callgrind's instrumentation of process `pid` on or off.
fn control(pid: u32, on_off: &str) -> Result<(), CostError> {
    let o = Command::new("callgrind_control")
        .arg("-i")
        .arg(on_off)
        .arg(pid.to_string())
        .output()
        .map_err(|e| CostError::Callgrind(format!("callgrind_control: {e}")))?;
    if !o.status.success() {
        return Err(CostError::Callgrind(format!(
            "callgrind_control -i {on_off} {pid}: {}",
            String::from_utf8_lossy(&o.stderr)
        )));
    }
    Ok(())
}

/// The profile's total instructions, the inclusive instructions of each graph node's
/// `process` (by the node's type name), and the software DSA model's.
fn annotate(out: &Path) -> Result<Annotated, CostError> {
    parse_annotate(&annotate_text(out)?)
}

/// `callgrind_annotate --inclusive=yes` of profile `out`.
fn annotate_text(out: &Path) -> Result<String, CostError> {
    let o = Command::new("callgrind_annotate")
        .args(["--inclusive=yes", "--threshold=100", "--auto=no"])
        .arg(out)
        .output()
        .map_err(|e| CostError::Callgrind(format!("callgrind_annotate: {e}")))?;
    if !o.status.success() {
        return Err(CostError::Callgrind(format!(
            "callgrind_annotate {}: {}",
            out.display(),
            String::from_utf8_lossy(&o.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The symbol endings of a node's work, as callgrind names them. The runtime's `AnyNode`
/// wrapper is generic (`<N as graph::node::AnyNode>::process`) and names no node.
const NODE_ENTRY_POINTS: [&str; 2] = [
    " as graph::node::Node>::process",
    " as graph::node::Node>::poll",
];

/// The software DSA model's work: executing what the engine submitted (a device's job).
const DEVICE_MODEL: &str = "copy_engine::dsa::model::Model::step";

/// What [`parse_annotate`] reads: the total, each node's inclusive count, the DSA model's.
pub type Annotated = (u64, Vec<(String, u64)>, u64);

/// Parses `callgrind_annotate --inclusive=yes` output.
pub fn parse_annotate(text: &str) -> Result<Annotated, CostError> {
    let count = |s: &str| s.trim().replace(',', "").parse::<u64>().ok();
    let mut total = None;
    let mut nodes: Vec<(String, u64)> = Vec::new();
    let mut model = 0u64;
    for line in text.lines() {
        let l = line.trim();
        let Some((num, rest)) = l.split_once(' ') else {
            continue;
        };
        let Some(n) = count(num) else { continue };
        if rest.contains("PROGRAM TOTALS") {
            total = Some(n);
            continue;
        }
        if let Some(i) = rest.find(DEVICE_MODEL)
            && !rest[i + DEVICE_MODEL.len()..].starts_with('\'')
        {
            model = model.max(n);
            continue;
        }
        // "123 (4.5%)  file.rs:<nodes::ip4::Ip4Lookup as graph::node::Node>::process [/path]"
        // A function shows once per source file its inlined code came from, and (inclusive)
        // once more as a whole: the largest entry is the whole. Input nodes work in `poll`,
        // the others in `process`.
        let Some((i, len)) = NODE_ENTRY_POINTS
            .iter()
            .find_map(|p| rest.find(p).map(|i| (i, p.len())))
        else {
            continue;
        };
        // `process'2` is a recursion level of the same function, already inside `process`.
        if rest[i + len..].starts_with('\'') {
            continue;
        }
        let head = &rest[..i];
        let ty = head.rsplit("::").next().unwrap_or(head);
        let name = ty.trim_start_matches('<').to_string();
        match nodes.iter_mut().find(|(m, _)| *m == name) {
            Some(e) => e.1 = e.1.max(n),
            None => nodes.push((name, n)),
        }
    }
    let total = total.ok_or_else(|| {
        CostError::Callgrind("callgrind_annotate printed no PROGRAM TOTALS".into())
    })?;
    Ok((total, nodes, model))
}

/// The cost table.
pub fn table(cfg: &L3fwdConfig, costs: &[Cost], window: Option<u64>) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let names = report::named_columns(costs.iter().map(|c| c.nodes.as_slice()), &[]);
    let pace = match window {
        Some(w) => format!("at most {w} frames in flight (frames of at most {w} packets)"),
        None => "flat out".into(),
    };
    let _ = writeln!(
        s,
        "instructions per packet under callgrind (whole process, every thread; for veclane also each node's process, inclusive); generator native on CPU {}, {pace}",
        cfg.gen_cpu
    );
    let mut header = format!(
        "{:>5}  {:<15} {:>9} {:>9}",
        "size", "dut", "frames", "total"
    );
    report::push_named_cells(&mut header, &names, None);
    let _ = writeln!(s, "{header}");
    for c in costs {
        let mut line = format!(
            "{:>5}  {:<15} {:>9} {:>9.1}",
            crate::trial::size_label(c.size),
            c.dut.to_string(),
            c.frames,
            c.total
        );
        report::push_named_cells(&mut line, &names, Some(&c.nodes));
        let _ = writeln!(s, "{line}");
    }
    for c in costs.iter().filter(|c| c.returned < c.frames) {
        let _ = writeln!(
            s,
            "! {} at {} B sent back {} of {} frames: the rest were dropped part way (see its drop counters), so its figures per frame undercount a whole frame's work",
            c.dut,
            crate::trial::size_label(c.size),
            c.returned,
            c.frames
        );
    }
    for c in costs.iter().filter(|c| c.device_model > 0.0) {
        let _ = writeln!(
            s,
            "{} at {} B: the software DSA model's own work ({:.1} per packet: executing the descriptors, the copies themselves) is left out of its total",
            c.dut,
            crate::trial::size_label(c.size),
            c.device_model
        );
    }
    if costs.iter().any(|c| c.dut.dut == Dut::None) {
        let _ = writeln!(
            s,
            "none: the generator itself under callgrind (its run loop, the difference of runs of N and 3N frames, so that connecting and the drain at the end cancel), per frame sent and received, against the bare memif reflector native on CPU {}; Send and Receive are its two halves",
            cfg.dut_cpu()
        );
    }
    for p in costs.iter().filter_map(|c| c.profile.as_ref()) {
        let _ = writeln!(s, "profile: callgrind_annotate {}", p.display());
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn annotate_output_gives_the_total_and_each_node() {
        let text = "\
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
900,000,000 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                    file:function
--------------------------------------------------------------------------------
400,000,000 (44.44%)  ???:graph::Worker::dispatch [/x/veclane]
120,000,000 (13.33%)  crates/memif/src/nodes.rs:<memif::nodes::MemifInput as graph::node::Node>::poll [/x/veclane]
  5,000,000 ( 0.55%)  /rustc/x/library/std/src/sync/mpsc.rs:<memif::nodes::MemifInput as graph::node::Node>::poll
 90,000,000 (10.00%)  crates/nodes/src/ip4_lookup.rs:<nodes::ip4_lookup::Ip4Lookup as graph::node::Node>::process [/x/veclane]
  1,000,000 ( 0.11%)  crates/nodes/src/ip4_lookup.rs:<nodes::ip4_lookup::Ip4Lookup as graph::node::Node>::process'2 [/x/veclane]
 80,000,000 ( 8.89%)  crates/nodes/src/ip4_rewrite.rs:<nodes::ip4_rewrite::Ip4Rewrite as graph::node::Node>::process [/x/veclane]
 70,000,000 ( 7.78%)  crates/graph/src/node.rs:<nodes::ip4_rewrite::Ip4Rewrite as graph::node::Node>::process [/x/veclane]
600,000,000 (66.67%)  /work/main/crates/graph/src/node.rs:<N as graph::node::AnyNode>::process [/x/veclane]
 30,000,000 ( 3.33%)  crates/copy-engine/src/dsa/model.rs:copy_engine::dsa::model::Model::step [/x/veclane]
  2,000,000 ( 0.22%)  /rustc/x/library/core/src/ptr/mod.rs:copy_engine::dsa::model::Model::step
";
        let (total, nodes, model) = super::parse_annotate(text).unwrap();
        assert_eq!(total, 900_000_000);
        assert_eq!(model, 30_000_000);
        assert_eq!(
            nodes,
            vec![
                ("MemifInput".to_string(), 120_000_000),
                ("Ip4Lookup".to_string(), 90_000_000),
                ("Ip4Rewrite".to_string(), 80_000_000),
            ]
        );
        assert!(super::parse_annotate("nothing").is_err());
    }
}
