//! `--cost`: instructions per packet under callgrind instead of rates.

use anyhow::bail;
use bench::Dut;
use bench::harness::L3fwdConfig;
use bench::report::Environment;

use super::args::BenchArgs;

/// `--cost`: instructions per packet of every veclane copy mode at every size.
pub(super) fn run_cost(a: &BenchArgs, cfg: &L3fwdConfig) -> anyhow::Result<()> {
    bench::cost::available()?;
    if a.cost_frames < 1000 {
        bail!("--cost-frames {} is too few (at least 1000)", a.cost_frames);
    }
    if a.check_payload {
        bail!(
            "--check-payload is for searched runs: --cost counts the path's instructions as it is"
        );
    }
    if cfg.duts.iter().any(|s| s.dut == Dut::Vpp) {
        eprintln!("note: vpp is left out of --cost: {}", bench::vpp::NO_COST);
    }
    let mut costs = Vec::new();
    for &size in &cfg.sizes {
        for s in cfg
            .duts
            .iter()
            .filter(|s| matches!(s.dut, Dut::Veclane | Dut::Testpmd | Dut::None))
        {
            eprintln!(
                "cost: {s} at {} B, {} frames under callgrind",
                bench::trial::size_label(size),
                a.cost_frames
            );
            let c = bench::cost::measure(
                cfg,
                *s,
                size,
                (a.cost_frames, a.cost_window),
                a.cost_profiles.as_deref(),
            )
            .map_err(|e| anyhow::anyhow!("{s} at {} B: {e}", bench::trial::size_label(size)))?;
            costs.push(c);
        }
    }
    if costs.is_empty() {
        bail!(
            "--cost measures veclane, testpmd and the generator (none) under callgrind: include one in --dut{}",
            if cfg.duts.iter().any(|s| s.dut == Dut::Vpp) {
                format!(" ({})", bench::vpp::NO_COST)
            } else {
                String::new()
            }
        );
    }
    print!("\n{}", bench::cost::table(cfg, &costs, a.cost_window));
    let path = bench::cost::CostReport {
        scenario: format!("{}-cost", cfg.topology.name()),
        config: cfg,
        cost_frames: a.cost_frames,
        cost_window: a.cost_window,
        environment: Environment::probe(bench::dpdk::version()),
        costs,
    }
    .write(&a.out_dir())?;
    println!("\nJSON: {}", path.display());
    Ok(())
}
