//! `veclane bench`.

use anyhow::bail;
use bench::l3fwd::{self, L3fwdConfig};
use bench::p2p::{self, P2pConfig};
use bench::report::{self, Environment, Report};
use bench::trial::Trial;
use bench::{CopyMode, Dut, Subject};
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Scenario {
    /// One memif: generator (secondary) → receiver (primary).
    P2p,
    /// Generator → memif → DUT (routes between two memif interfaces) → memif → generator.
    L3fwd,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CopyArg {
    /// Payload copied once, peer to peer.
    Single,
    /// Payload copied into local buffers and out again (VPP's path).
    Two,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DutArg {
    Veclane,
    Testpmd,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(value_enum, default_value = "p2p")]
    scenario: Scenario,
    /// Frame sizes in bytes (no FCS) [default: p2p 64,128,256,512,1024,1500,9000; l3fwd
    /// 64,128,256,512,1024,1500].
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Devices under test, interleaved in this order.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [DutArg::Veclane, DutArg::Testpmd])]
    dut: Vec<DutArg>,
    /// Seconds of traffic per trial.
    #[arg(long, default_value_t = 2.0)]
    trial_secs: f64,
    /// Trials per (DUT, size); the table shows the median.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// veclane's copy modes to measure (l3fwd), each a column of its own.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [CopyArg::Single, CopyArg::Two])]
    copy: Vec<CopyArg>,
    /// CPU of the sender (p2p) or the generator (l3fwd).
    #[arg(long, visible_alias = "gen-cpu", default_value_t = 0)]
    sender_cpu: usize,
    /// CPU of the receiver (p2p) or the device under test (l3fwd).
    #[arg(long, visible_alias = "dut-cpu", default_value_t = 1)]
    receiver_cpu: usize,
    /// Generator frames per burst (l3fwd).
    #[arg(long, default_value_t = 64)]
    burst: usize,
    #[arg(long, default_value_t = 10)]
    ring_log2: u8,
    #[arg(long, default_value_t = 2048)]
    buffer_size: u32,
    /// Directory for the JSON report.
    #[arg(long, default_value = "results")]
    out: std::path::PathBuf,
    /// Before each trial, wait up to this many seconds for the two CPUs to share a cache
    /// (0: do not wait; every trial is tagged near, far or mixed either way).
    #[arg(long, default_value_t = 10.0)]
    wait_near: f64,
    /// Skip testpmd (instead of failing) when it is not installed.
    #[arg(long)]
    allow_missing_peer: bool,
}

fn print_trial(done: usize, total: usize, t: &Trial) {
    match &t.error {
        None => eprintln!(
            "[{done}/{total}] {:<14} {:>5} B  rep {}  {:>7.3} Mpps  tx {} rx {} lost {}  {} ({:.0}/{:.0} ns){}",
            t.dut.to_string(),
            t.size,
            t.rep,
            t.mpps,
            t.tx_packets,
            t.rx_packets,
            t.lost,
            t.placement,
            t.probe_before_ns,
            t.probe_after_ns,
            if t.disagreements.is_empty() {
                String::new()
            } else {
                format!("  COUNTERS DISAGREE: {}", t.disagreements.join("; "))
            }
        ),
        Some(e) => eprintln!(
            "[{done}/{total}] {:<14} {:>5} B  rep {}  FAILED: {e}",
            t.dut.to_string(),
            t.size,
            t.rep
        ),
    }
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    if a.reps == 0 || !a.trial_secs.is_finite() || a.trial_secs <= 0.0 {
        bail!("--reps must be at least 1 and --trial-secs positive");
    }
    let sizes = if a.sizes.is_empty() {
        match a.scenario {
            Scenario::P2p => vec![64, 128, 256, 512, 1024, 1500, 9000],
            Scenario::L3fwd => vec![64, 128, 256, 512, 1024, 1500],
        }
    } else {
        a.sizes.clone()
    };
    if let Some(s) = sizes.iter().find(|&&s| !(64..=9216).contains(&s)) {
        bail!("--sizes: {s} is outside 64..=9216");
    }
    if a.sender_cpu == a.receiver_cpu {
        bail!(
            "--sender-cpu and --receiver-cpu must differ (both are {})",
            a.sender_cpu
        );
    }
    if a.burst == 0 || a.burst > 256 {
        bail!("--burst {} must be 1..=256", a.burst);
    }
    if a.copy.is_empty() {
        bail!("--copy needs at least one of single, two");
    }
    let testpmd_bin = bench::testpmd::find();
    let mut duts: Vec<Dut> = a
        .dut
        .iter()
        .map(|d| match d {
            DutArg::Veclane => Dut::Veclane,
            DutArg::Testpmd => Dut::Testpmd,
        })
        .collect();
    if duts.contains(&Dut::Testpmd) && testpmd_bin.is_none() {
        if !a.allow_missing_peer {
            bail!(
                "dpdk-testpmd is not installed (apt-get install dpdk librte-net-memif23), or pass --dut veclane"
            );
        }
        eprintln!("note: dpdk-testpmd not installed; measuring veclane only");
        duts.retain(|d| *d != Dut::Testpmd);
    }
    match a.scenario {
        Scenario::P2p => run_p2p(&a, sizes, duts, testpmd_bin),
        Scenario::L3fwd => run_l3fwd(&a, sizes, duts, testpmd_bin),
    }
}

/// Writes the JSON report of a run (its configuration, rows and trials) and fails the command
/// if any trial failed.
fn finish<C: serde::Serialize>(
    out: &std::path::Path,
    scenario: &'static str,
    config: &C,
    rows: Vec<bench::trial::Row>,
    trials: &[Trial],
) -> anyhow::Result<()> {
    let rep = Report {
        scenario,
        conventions: report::CONVENTIONS,
        config,
        environment: Environment::probe(bench::testpmd::version()),
        rows,
        trials,
    };
    let path = report::write_json(out, &rep)?;
    println!("\nJSON: {}", path.display());
    let failed: Vec<_> = trials
        .iter()
        .filter_map(|t| t.error.as_ref().map(|e| (t.dut, t.size, e)))
        .collect();
    if !failed.is_empty() {
        for (d, s, e) in &failed {
            eprintln!("failed: {d} {s} B: {e}");
        }
        bail!("{} of {} trials failed", failed.len(), trials.len());
    }
    Ok(())
}

fn run_l3fwd(
    a: &BenchArgs,
    sizes: Vec<usize>,
    duts: Vec<Dut>,
    testpmd_bin: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let mut subjects = Vec::new();
    if duts.contains(&Dut::Veclane) {
        for c in &a.copy {
            subjects.push(Subject {
                dut: Dut::Veclane,
                copy: Some(match c {
                    CopyArg::Single => CopyMode::Single,
                    CopyArg::Two => CopyMode::Two,
                }),
            });
        }
    }
    if duts.contains(&Dut::Testpmd) {
        subjects.push(Subject::plain(Dut::Testpmd));
    }
    let cfg = L3fwdConfig {
        sizes,
        trial_secs: a.trial_secs,
        reps: a.reps,
        duts: subjects,
        gen_cpu: a.sender_cpu,
        dut_cpu: a.receiver_cpu,
        ring_log2: a.ring_log2,
        buffer_size: a.buffer_size,
        burst: a.burst,
        wait_near_secs: a.wait_near.max(0.0),
        veclane_bin: bench::veclane_bin(),
        testpmd_bin,
    };
    let total = cfg.reps * cfg.sizes.len() * cfg.duts.len();
    let mut done = 0;
    let trials = l3fwd::run(&cfg, |t| {
        done += 1;
        print_trial(done, total, t);
    });
    let rows = bench::trial::rows(&trials, &cfg.sizes, &cfg.duts);
    print!(
        "\n{}",
        report::grid(&l3fwd::head(&cfg), &cfg.sizes, &cfg.duts, &rows)
    );
    print!("\n{}", l3fwd::node_table(&cfg, &rows));
    finish(&a.out, "l3fwd", &cfg, rows, &trials)
}

fn run_p2p(
    a: &BenchArgs,
    sizes: Vec<usize>,
    duts: Vec<Dut>,
    testpmd_bin: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let cfg = P2pConfig {
        sizes,
        trial_secs: a.trial_secs,
        reps: a.reps,
        duts,
        sender_cpu: a.sender_cpu,
        receiver_cpu: a.receiver_cpu,
        ring_log2: a.ring_log2,
        buffer_size: a.buffer_size,
        wait_near_secs: a.wait_near.max(0.0),
        veclane_bin: bench::veclane_bin(),
        testpmd_bin,
    };
    let total = cfg.reps * cfg.sizes.len() * cfg.duts.len();
    let mut done = 0;
    let trials = p2p::run(&cfg, |t| {
        done += 1;
        print_trial(done, total, t);
    });
    let subjects = p2p::subjects(&cfg);
    let rows = bench::trial::rows(&trials, &cfg.sizes, &subjects);
    print!("\n{}", report::table(&cfg, &rows));
    finish(&a.out, "p2p", &cfg, rows, &trials)
}
