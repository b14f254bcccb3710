//! The harness of the searched scenarios ([`crate::scenario`] lists them): whatever a
//! [`Topology`] puts between the generator's interfaces, it is driven the same way.
//!
//! One *search* per (repetition, size, DUT): start the DUT, connect the generator, run a
//! flat-out trial (its receive rate, the MRR, sets the search's maximum load), run the search
//! ([`crate::search`]) with the generator acting as a port on a wire (a full ring loses
//! frames), measure latency at fractions of the result, stop the DUT. The DUT's own counters
//! are read before and after every trial, with the generator still connected, and compared
//! with the generator's counts. Searches of different DUTs are interleaved (A B A B ...), and
//! a placement probe runs before the DUT starts and after it stops. Each size's rings,
//! buffers and CPUs are resolved once per run ([`Plan`]).
//!
//! Here: the run's configuration (`config`), its plan (`plan`), driving a search (`measure`,
//! `guard`, `turns`), its result (`outcome`), and the report (`report`, `rows`, `output`).

mod config;
mod guard;
mod measure;
mod outcome;
mod output;
mod plan;
mod report;
mod rows;
#[cfg(test)]
mod tests;
mod topology;
mod turns;

use crate::Subject;
use crate::search::Measurement;
use crate::trial::{Placed, Schedule};

#[cfg(test)]
pub(crate) use config::test_config;
pub use config::{ConfigError, FRAME_SIZES, Interleave, L3fwdConfig};
use measure::search_one;
pub use outcome::{LatencyPoint, Outcome, TrialRecord};
pub use output::{
    csv, head, node_table, search_summary, size_plot, table, worker_counts, worker_plot,
};
pub use plan::Plan;
pub use report::{HostStalls, RunReport, Written};
pub use rows::{
    GoalRow, PairedRatio, SearchRow, paired_mrr_ratio, paired_ratio, peer_for, reference_for, rows,
};
pub use topology::{DutStart, NetworkCount, Topology};

/// Runs every (rep, size, DUT) search, DUTs interleaved; `progress` sees each finished one.
/// A search that fails is kept with its reason and the run goes on.
pub fn run(
    cfg: &L3fwdConfig,
    progress: impl FnMut(&Outcome),
    mut on_trial: impl FnMut(Subject, usize, &Measurement) + Send,
) -> Vec<Outcome> {
    measure::run_clock();
    if cfg.interleave == Interleave::Trials && cfg.duts.len() > 1 {
        return run_interleaved(cfg, progress, on_trial);
    }
    let schedule = Schedule {
        sizes: &cfg.sizes,
        duts: &cfg.duts,
        reps: cfg.reps,
        cpus: (cfg.gen_cpu, cfg.dut_cpu()),
        wait_near_secs: cfg.wait_near_secs,
    };
    // Each size's plan, resolved once for the run.
    let plans = Plan::all(cfg);
    let plan = |size: usize| {
        plans
            .iter()
            .find(|p| p.size == size)
            .expect("a size of the run")
    };
    crate::trial::run(
        schedule,
        |dut, size, rep| {
            let mut seen = |m: &Measurement| on_trial(dut, size, m);
            search_one(cfg, dut, plan(size), rep, &mut seen, None)
        },
        progress,
    )
}

/// `--interleave trials`: at each (rep, size) every DUT's search at once, on a thread of
/// its own, their trials taking turns (see [`turns`]); the placement is probed around the
/// whole group, as around one search otherwise.
fn run_interleaved(
    cfg: &L3fwdConfig,
    mut progress: impl FnMut(&Outcome),
    on_trial: impl FnMut(Subject, usize, &Measurement) + Send,
) -> Vec<Outcome> {
    let on_trial = std::sync::Mutex::new(on_trial);
    let cpus = (cfg.gen_cpu, cfg.dut_cpu());
    let mut out = Vec::new();
    let plans = Plan::all(cfg);
    for rep in 0..cfg.reps {
        for plan in &plans {
            let size = plan.size;
            let before = crate::trial::probe_before(cpus, cfg.wait_near_secs);
            let turns = turns::Turns::new(cfg.duts.len());
            let results: Vec<_> = std::thread::scope(|s| {
                let searches: Vec<_> = (cfg.duts.iter().enumerate())
                    .map(|(me, &dut)| {
                        let (turns, on_trial) = (&turns, &on_trial);
                        s.spawn(move || {
                            let mut seen = |m: &Measurement| {
                                let mut f = on_trial.lock().unwrap_or_else(|e| e.into_inner());
                                f(dut, size, m);
                            };
                            search_one(cfg, dut, plan, rep, &mut seen, Some((turns, me)))
                        })
                    })
                    .collect();
                searches.into_iter().map(|h| h.join()).collect()
            });
            let after = crate::trial::probe_after(cpus);
            for (r, &dut) in results.into_iter().zip(&cfg.duts) {
                let mut o = match r {
                    Ok(Ok(o)) => o,
                    Ok(Err(e)) => Outcome::failed(dut, size, rep, e.to_string()),
                    Err(_) => Outcome::failed(dut, size, rep, "its search panicked".into()),
                };
                o.set_placement(before, after);
                progress(&o);
                out.push(o);
            }
        }
    }
    out
}
