//! A searched run as one typed value: what it measured, the host's noise around it, and the
//! environment, which the front end prints ([`RunReport::text`]) and writes
//! ([`RunReport::write`]) without knowing its shape.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::config::L3fwdConfig;
use super::outcome::Outcome;
use super::output::{csv, head, node_table, size_plot, table, worker_counts, worker_plot};
use super::rows::{SearchRow, rows};
use crate::Subject;
use crate::placement::Stalls;
use crate::report::Environment;
use crate::search::Measurement;

/// How long each CPU's stall probe runs before and after a run.
const STALL_PROBE: Duration = Duration::from_secs(1);

/// The host's own noise: a busy loop on each CPU, before and after the run.
#[derive(Debug, Clone, Serialize)]
pub struct HostStalls {
    pub before: Vec<Stalls>,
    pub after: Vec<Stalls>,
}

/// Everything a searched run produced, with its configuration echoed: the JSON file's shape.
#[derive(Debug, Serialize)]
pub struct RunReport<'a> {
    pub scenario: &'static str,
    /// The table's heading: topology, method, CPUs, conventions.
    pub conventions: Vec<String>,
    pub config: &'a L3fwdConfig,
    /// Each size's memif rings (`config.ring_log2` is null unless `--ring-log2` fixed them).
    pub rings: Vec<RingsAt>,
    pub environment: Environment,
    pub host_stalls: HostStalls,
    /// One per (DUT, size): medians over the repetitions.
    pub rows: Vec<SearchRow>,
    /// Every search, failed ones with their reason.
    pub searches: Vec<Outcome>,
}

/// The rings of one frame size's trials.
#[derive(Debug, Serialize)]
pub struct RingsAt {
    pub size: usize,
    /// log2 of every ring's slots.
    pub ring_log2: u8,
}

/// The files [`RunReport::write`] made, and the plots it could not draw (with why).
#[derive(Debug, Default)]
pub struct Written {
    pub json: PathBuf,
    pub csv: PathBuf,
    pub svg: Vec<PathBuf>,
    pub skipped_plots: Vec<String>,
}

impl<'a> RunReport<'a> {
    /// Runs every search of `cfg` (see [`super::run`]) between two stall probes.
    pub fn run(
        cfg: &'a L3fwdConfig,
        progress: impl FnMut(&Outcome),
        on_trial: impl FnMut(Subject, usize, &Measurement) + Send,
    ) -> RunReport<'a> {
        let mut cpus = vec![cfg.gen_cpu];
        cpus.extend(cfg.dut_cpus.iter().filter(|&&c| c != cfg.gen_cpu));
        let before = crate::placement::stalls(&cpus, STALL_PROBE);
        let searches = super::run(cfg, progress, on_trial);
        let after = crate::placement::stalls(&cpus, STALL_PROBE);
        RunReport {
            scenario: cfg.topology.name(),
            conventions: head(cfg),
            config: cfg,
            rings: cfg
                .sizes
                .iter()
                .map(|&size| RingsAt {
                    size,
                    ring_log2: cfg.ring_log2_at(size),
                })
                .collect(),
            environment: Environment::probe(crate::dpdk::version()),
            host_stalls: HostStalls { before, after },
            rows: rows(&searches, &cfg.sizes, &cfg.duts),
            searches,
        }
    }

    /// The result table, the host's stalls and the per-node table, as printed.
    pub fn text(&self) -> String {
        let cfg = self.config;
        let mut s = table(cfg, &self.rows);
        s.push_str(&format!(
            "host stalls (a busy loop on each CPU, {} s before and after the run; a ring of 2^N slots, here {}, rides out about 2^N / rate):\n",
            STALL_PROBE.as_secs(),
            super::config::rings_text(cfg),
        ));
        for (when, v) in [
            ("before", &self.host_stalls.before),
            ("after", &self.host_stalls.after),
        ] {
            for st in v {
                s.push_str(&format!("  {when:<6} {st}\n"));
            }
        }
        s.push('\n');
        s.push_str(&node_table(cfg, &self.rows));
        s
    }

    /// Writes `SCENARIO-TIME.json` (this report), `.csv` and the plots into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<Written> {
        let cfg = self.config;
        let name = format!("{}-{}", self.scenario, self.environment.unix_time);
        let stem = dir.join(&name);
        let mut w = Written {
            json: crate::report::write_named_json(dir, &name, self)?,
            csv: stem.with_extension("csv"),
            ..Written::default()
        };
        std::fs::write(&w.csv, csv(cfg, &self.rows))?;
        match size_plot(cfg, &self.rows) {
            Ok(svg) => {
                let p = stem.with_extension("svg");
                std::fs::write(&p, svg)?;
                w.svg.push(p);
            }
            Err(e) => w.skipped_plots.push(format!("size plot: {e}")),
        }
        if worker_counts(cfg).len() > 1 {
            for &size in &cfg.sizes {
                match worker_plot(cfg, &self.rows, size) {
                    Ok(svg) => {
                        let p = dir.join(format!(
                            "{}-{}-workers-{size}.svg",
                            self.scenario, self.environment.unix_time
                        ));
                        std::fs::write(&p, svg)?;
                        w.svg.push(p);
                    }
                    Err(e) => w
                        .skipped_plots
                        .push(format!("worker plot at {size} B: {e}")),
                }
            }
        }
        Ok(w)
    }

    /// The searches that failed: (DUT, size, reason).
    pub fn failures(&self) -> Vec<(Subject, usize, &str)> {
        self.searches
            .iter()
            .filter_map(|o| o.error.as_deref().map(|e| (o.dut, o.size, e)))
            .collect()
    }
}
