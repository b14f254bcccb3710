//! The [`Topology`] trait a searched scenario implements: how each DUT is configured and
//! started, what the generator sends, which counters face it. The scenarios themselves are
//! [`crate::l3fwd`], [`crate::node`] and [`crate::pvp`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Plan;
use super::config::L3fwdConfig;
use crate::daemon::Daemon;
use crate::dut::{Counts, DutError, Running};
use crate::trial::check_frame_size;
use crate::{Dut, Shape, Subject};
use trafgen::GenReport;

/// What a searched scenario puts between the generator's two interfaces.
pub trait Topology: Sync + core::fmt::Debug {
    /// Its name on the command line (`veclane bench NAME`) and in reports.
    fn name(&self) -> &'static str;
    /// One line for `--help`.
    fn about(&self) -> &'static str;
    /// Whether `dut` can be configured this way.
    fn supports(&self, dut: Dut) -> bool;
    /// What every DUT does in it, for the report's heading.
    fn describe(&self) -> String;
    /// The report's and plots' title.
    fn heading(&self) -> &'static str {
        "L3 forwarding over memif"
    }
    /// Lines the report's heading adds for this scenario under `cfg` (a CPU shared, say).
    fn notes(&self, _cfg: &L3fwdConfig) -> Vec<String> {
        Vec::new()
    }
    /// The memif rings a trial keeps busy at once (per queue pair), whose frames share the
    /// cache and so size the rings ([`crate::trial::ring_log2_for`]): here the generator's
    /// transmit ring into the DUT and its receive ring out of it.
    fn busy_rings(&self, _cfg: &L3fwdConfig) -> usize {
        2
    }
    /// Starts the DUT `s` names; returns it and the memif socket the generator connects to.
    fn start_dut(&self, s: &DutStart<'_>) -> Result<(Running, PathBuf), DutError>;
    /// The generator's configuration as `plan` says against `dut` listening on `sock` (the
    /// same plan the DUT was started with).
    fn gen_config(
        &self,
        cfg: &L3fwdConfig,
        dut: Subject,
        sock: &Path,
        plan: &Plan,
    ) -> trafgen::GenConfig;
    /// The DUT's counters of the frames it took from the generator and sent back to it.
    fn counts(&self, dut: &mut Running) -> Result<Option<Counts>, DutError> {
        dut.counts()
    }
    /// The shapes each DUT is measured in, interleaved (`multinet`: singlenet and multinet);
    /// none for a scenario of one shape.
    fn shapes(&self) -> &'static [Shape] {
        &[]
    }
    /// Whether `dut` can be configured in `shape` (one of [`Topology::shapes`]).
    fn supports_shape(&self, _dut: Dut, _shape: Shape) -> bool {
        true
    }
    /// Refuses a trial whose received frames are not the size they should be at `size`
    /// (a DUT that fell back to other frames).
    fn check_rx(&self, _dut: Subject, size: usize, g: &GenReport) -> Result<(), String> {
        if g.rx_packets == 0 {
            return Ok(());
        }
        check_frame_size(g.rx_bytes, g.rx_packets, size).map_err(|e| e.to_string())
    }
    /// Frames sent and received per network in a generator run (none for a scenario without
    /// networks).
    fn networks(&self, _g: &GenReport) -> Vec<NetworkCount> {
        Vec::new()
    }
}

/// What [`Topology::start_dut`] starts: `dut` as `plan` says (its frame size, rings, buffers
/// and CPUs) in `dir`, under `wrapper` if not empty (valgrind, for `--cost`).
#[derive(Debug, Clone, Copy)]
pub struct DutStart<'a> {
    pub cfg: &'a L3fwdConfig,
    pub dut: Subject,
    pub plan: &'a Plan,
    pub dir: &'a Path,
    pub wrapper: &'a [String],
}

impl DutStart<'_> {
    /// How long the DUT may take to be ready: under a wrapper (valgrind) start-up is far
    /// slower.
    pub fn ready_timeout(&self) -> Duration {
        Duration::from_secs(if self.wrapper.is_empty() { 10 } else { 120 })
    }

    /// Starts veclane with `conf`, given the subject's copy engine and the run's `dsa-queue`,
    /// in `dir`, its command line after `prefix` (entering a namespace, or nothing) and the
    /// wrapper.
    pub(crate) fn veclane(
        &self,
        mut conf: api::Config,
        dir: &Path,
        prefix: Vec<String>,
    ) -> Result<Daemon, DutError> {
        conf.daemon.copy_engine = self.dut.engine.unwrap_or(api::CopyEngine::Cpu);
        conf.daemon.dsa_queue = self.cfg.dsa_queue.clone();
        let wrapper: Vec<String> = prefix
            .into_iter()
            .chain(self.wrapper.iter().cloned())
            .collect();
        let bin = &self.cfg.veclane_bin;
        Daemon::start_under(&wrapper, bin, dir, &conf.to_toml(), self.ready_timeout())
    }
}

/// One network's share of a trial: frames the generator sent into it and frames that came
/// back out of it, in all and by direction (`in`: from the remote node to the pod; `out`:
/// from the pod to the remote node).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetworkCount {
    pub network: u16,
    pub sent: u64,
    pub received: u64,
    pub sent_in: u64,
    pub received_in: u64,
    pub sent_out: u64,
    pub received_out: u64,
}
