//! The p2p scenario: one memif, sender to receiver, no search.

use anyhow::bail;
use bench::Dut;
use bench::p2p::{self, P2pConfig};
use bench::report;

use super::args::BenchArgs;
use super::output::finish;
use super::progress::print_trial;

/// Trials of every DUT at every size, `--reps` times, each `trial_secs` long.
pub(super) fn run_p2p(
    a: &BenchArgs,
    trial_secs: f64,
    sizes: Vec<usize>,
    duts: Vec<Dut>,
    testpmd_bin: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    if a.workers != [1] || !a.dut_cpus.is_empty() || a.share_gen_cpu || a.check_payload {
        bail!(
            "--workers, --dut-cpus, --share-gen-cpu and --check-payload are for searched scenarios (l3fwd)"
        );
    }
    let cfg = P2pConfig {
        sizes,
        trial_secs,
        reps: a.reps,
        duts,
        sender_cpu: a.sender_cpu,
        receiver_cpu: a.receiver_cpu,
        ring_log2: a.ring_log2.unwrap_or(10),
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
    finish(&a.out_dir(), "p2p", &cfg, rows, &trials)
}
