//! What a run leaves behind: the reports it writes (JSON, CSV, SVG), the seeds' tables
//! beside ours, and the failures that make the command fail.

use anyhow::bail;
use bench::harness;
use bench::report::{self, Environment, Report};
use bench::trial::Trial;

/// Writes the JSON report of a run (its configuration, rows and trials) and fails the command
/// if any trial failed.
pub(super) fn finish<C: serde::Serialize>(
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
        environment: Environment::probe(bench::dpdk::version()),
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

/// The seeds' published tables beside ours (`--compare-seed`): rates by frame size, and
/// worker scaling at 1024 B where the run measured more than one worker count.
pub(super) fn print_seed_comparison(run: &harness::RunReport<'_>) {
    let ours: Vec<bench::seed::Ours> = run
        .rows
        .iter()
        .filter(|r| r.size != bench::trial::IMIX)
        .filter_map(|r| {
            r.goals.first().map(|g| bench::seed::Ours {
                label: format!("{} {}", r.dut, g.goal),
                size: r.size,
                mpps: g.mpps,
            })
        })
        .collect();
    print!("\n{}", bench::seed::compare_table(&ours));
    // Worker scaling at 1024 B beside the seeds' core-scaling tables.
    let cores: Vec<bench::seed::Ours> = run
        .rows
        .iter()
        .filter(|r| r.size == bench::seed::CORE_SCALING_SIZE)
        .filter_map(|r| {
            r.goals.first().map(|g| bench::seed::Ours {
                label: format!("{} {}", r.dut.line(), g.goal),
                size: usize::from(r.dut.workers),
                mpps: g.mpps,
            })
        })
        .collect();
    if cores.iter().any(|o| o.size > 1) {
        print!("\n{}", bench::seed::compare_cores_table(&cores));
    }
}

/// Writes the reports of a run of searches, says where, and fails the command if any search
/// failed.
pub(super) fn write_searches(
    out: &std::path::Path,
    run: &harness::RunReport<'_>,
) -> anyhow::Result<()> {
    let w = run.write(out)?;
    println!("\nJSON: {}\nCSV: {}", w.json.display(), w.csv.display());
    for p in &w.svg {
        println!("SVG: {}", p.display());
    }
    for e in &w.skipped_plots {
        eprintln!("no {e}");
    }
    let failed = run.failures();
    if !failed.is_empty() {
        for (d, s, e) in &failed {
            eprintln!("failed: {d} {s} B: {e}");
        }
        bail!("{} of {} searches failed", failed.len(), run.searches.len());
    }
    Ok(())
}
