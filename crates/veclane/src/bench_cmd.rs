//! `veclane bench`.

use anyhow::bail;
use bench::Dut;
use bench::p2p::{self, P2pConfig};
use bench::report::{self, Environment, P2pReport};
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Scenario {
    /// One memif: generator (secondary) → receiver (primary).
    P2p,
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
    /// Frame sizes in bytes (no FCS).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 128, 256, 512, 1024, 1500, 9000])]
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
    #[arg(long, default_value_t = 0)]
    sender_cpu: usize,
    #[arg(long, default_value_t = 1)]
    receiver_cpu: usize,
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

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let Scenario::P2p = a.scenario;
    if a.reps == 0 || !a.trial_secs.is_finite() || a.trial_secs <= 0.0 {
        bail!("--reps must be at least 1 and --trial-secs positive");
    }
    if let Some(s) = a.sizes.iter().find(|&&s| !(64..=9216).contains(&s)) {
        bail!("--sizes: {s} is outside 64..=9216");
    }
    if a.sender_cpu == a.receiver_cpu {
        bail!(
            "--sender-cpu and --receiver-cpu must differ (both are {})",
            a.sender_cpu
        );
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
    let cfg = P2pConfig {
        sizes: a.sizes,
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
        match &t.error {
            None => eprintln!(
                "[{done}/{total}] {:<8} {:>5} B  rep {}  {:>7.3} Mpps  tx {} rx {} lost {}  {} ({:.0}/{:.0} ns)",
                t.dut,
                t.size,
                t.rep,
                t.mpps,
                t.tx_packets,
                t.rx_packets,
                t.lost,
                t.placement,
                t.probe_before_ns,
                t.probe_after_ns
            ),
            Some(e) => eprintln!(
                "[{done}/{total}] {:<8} {:>5} B  rep {}  FAILED: {e}",
                t.dut, t.size, t.rep
            ),
        }
    })?;
    let rows = p2p::rows(&trials, &cfg);
    let env = Environment::probe(bench::testpmd::version());
    print!("\n{}", report::table(&cfg, &rows));
    let rep = P2pReport {
        scenario: "p2p",
        conventions: report::CONVENTIONS,
        config: &cfg,
        environment: env,
        rows,
        trials: &trials,
    };
    let path = report::write_json(&a.out, &rep)?;
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
