//! `veclane bench`: the arguments, checked and turned into a scenario's configuration; the
//! scenario run with its progress shown; its reports written.

/// The arguments: clap definitions, value parsers, environment defaults.
mod args;
/// `--cost`: instructions per packet under callgrind.
mod cost;
/// Writing the reports and failing on failures.
mod output;
/// The p2p scenario.
mod p2p;
/// The pods scenario.
mod pods;
/// What a run prints while it goes.
mod progress;
/// The searched scenarios (l3fwd, the node scenarios, pvp).
mod searched;

use anyhow::bail;
use bench::Dut;
use bench::scenario::Kind;

pub use args::BenchArgs;
use args::DutArg;

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let scenario = bench::scenario::find(&a.scenario).map_err(anyhow::Error::msg)?;
    let topology = match scenario.kind {
        Kind::Continuous => None,
        Kind::Searched(t) => Some(t),
        Kind::Pods => return pods::run(&a),
    };
    let trial_secs = a.trial_secs.unwrap_or(match topology {
        None => 2.0,
        Some(_) => 0.25,
    });
    if a.reps == 0 || !trial_secs.is_finite() || trial_secs <= 0.0 {
        bail!("--reps must be at least 1 and --trial-secs positive");
    }
    let sizes = if a.sizes.is_empty() {
        match topology {
            None => vec![64, 128, 256, 512, 1024, 1500, 9000],
            Some(_) => vec![64, 128, 256, 512, 1024, 1500],
        }
    } else {
        a.sizes.clone()
    };
    if topology.is_none() && sizes.contains(&bench::trial::IMIX) {
        bail!("--sizes imix: the searched scenarios only (p2p sends one size)");
    }
    if let Some(s) = sizes
        .iter()
        .find(|&&s| !(64..=9216).contains(&s) && s != bench::trial::IMIX)
    {
        bail!("--sizes: {s} is outside 64..=9216");
    }
    // With --dut-cpus the DUT's CPUs are checked against the generator's (L3fwdConfig::check).
    if a.dut_cpus.is_empty() && a.sender_cpu == a.receiver_cpu {
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
    let dut_args = if a.dut.is_empty() {
        match topology {
            Some(t) if !t.supports(Dut::Testpmd) || !t.shapes().is_empty() => {
                vec![DutArg::Veclane]
            }
            _ => vec![DutArg::Veclane, DutArg::Testpmd],
        }
    } else {
        a.dut.clone()
    };
    let mut duts: Vec<Dut> = dut_args
        .iter()
        .map(|d| match d {
            DutArg::Veclane => Dut::Veclane,
            DutArg::Testpmd => Dut::Testpmd,
            DutArg::DpdkL3fwd => Dut::DpdkL3fwd,
            DutArg::Vpp => Dut::Vpp,
            DutArg::None => Dut::None,
        })
        .collect();
    if topology.is_none()
        && let Some(d) = duts
            .iter()
            .find(|d| matches!(d, Dut::DpdkL3fwd | Dut::Vpp | Dut::None))
    {
        bail!(
            "--dut {d} runs in searched scenarios (l3fwd) only; {} measures veclane and testpmd",
            scenario.name
        );
    }
    if let Some(t) = topology
        && let Some(d) = duts.iter().find(|d| !t.supports(**d))
    {
        bail!("the {} scenario cannot configure --dut {d}", t.name());
    }
    if duts.contains(&Dut::Testpmd) && testpmd_bin.is_none() {
        if !a.allow_missing_peer {
            bail!(
                "dpdk-testpmd is not installed (apt-get install dpdk librte-net-memif23), or pass --dut veclane"
            );
        }
        eprintln!("note: dpdk-testpmd not installed; measuring veclane only");
        duts.retain(|d| *d != Dut::Testpmd);
    }
    match topology {
        None => p2p::run_p2p(&a, trial_secs, sizes, duts, testpmd_bin),
        Some(t) => searched::run_l3fwd(&a, t, trial_secs, sizes, duts, testpmd_bin),
    }
}
