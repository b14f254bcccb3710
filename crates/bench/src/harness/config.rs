//! The configuration of a searched run: sizes, DUTs, CPUs, rings, search method, trial
//! lengths and the binaries of the peers, checked before anything starts.

use std::path::PathBuf;

use serde::Serialize;

use super::topology::Topology;
use crate::Subject;
use crate::search::Method;

/// How the searches of several DUTs at one (repetition, size) share the time (`--interleave`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Interleave {
    /// One whole search after another, the DUTs in turn.
    Searches,
    /// Every DUT's search at once, their trials taking turns, each DUT stopped outside its
    /// own (see `harness::turns`).
    Trials,
}

/// The configuration of every searched scenario (see [`crate::scenario`]): the
/// [`Topology`] the DUTs run in, and everything the searches, trials and reports need.
#[derive(Debug, Clone, Serialize)]
pub struct L3fwdConfig {
    /// What the DUTs are configured as between the generator's interfaces.
    #[serde(skip)]
    pub topology: &'static dyn Topology,
    pub sizes: Vec<usize>,
    pub reps: usize,
    pub duts: Vec<Subject>,
    pub gen_cpu: usize,
    /// The DUT's CPUs, in the order its workers take them: a DUT with N workers (its
    /// [`Subject::workers`]) runs them on the first N. The first is the one the placement probe
    /// pairs with the generator's.
    pub dut_cpus: Vec<usize>,
    /// Let DUT workers run on the generator's CPU (`--share-gen-cpu`), so that a machine with
    /// few CPUs can still exercise N workers; such DUTs' rates measure two busy loops taking
    /// turns on one CPU, and the table says so.
    pub share_gen_cpu: bool,
    /// log2 of the memif rings' size (`--ring-log2`); `None`: each size's own
    /// ([`crate::trial::ring_log2_for`]).
    pub ring_log2: Option<u8>,
    pub buffer_size: u32,
    /// The generator reads every frame that comes back whole and fails the trial when the
    /// bytes after the probe are not what was sent (`--check-payload`).
    pub check_payload: bool,
    /// Frames per generator burst.
    pub burst: usize,
    /// The node scenarios' own options (`singlenet`, `multinet`), their keys at this level of
    /// the report.
    #[serde(flatten)]
    pub node: crate::node::NodeOptions,
    /// `pvp`'s own options, their keys at this level of the report.
    #[serde(flatten)]
    pub pvp: crate::pvp::PvpOptions,
    /// Before each search, wait up to this long for the CPUs to be near (0: do not wait);
    /// within a search, before each trial (see the trial guard, `harness::guard`).
    pub wait_near_secs: f64,
    /// Trials a search may run again because the host disturbed them (see the trial guard, `harness::guard`).
    pub max_redo: usize,
    /// How the searches of several DUTs share the time.
    pub interleave: Interleave,
    /// The search and every parameter it uses.
    pub method: Method,
    /// The flat-out trial before each search; its receive rate (MRR) times
    /// `max_load_factor` is the search's maximum load.
    pub mrr_secs: f64,
    pub max_load_factor: f64,
    /// Every trial first sends this long at its load, uncounted (see
    /// `trafgen::GenConfig::warmup`): after the pause between trials the DUT starts with cold
    /// caches, and on this host its first milliseconds forward at a third of its rate.
    pub warmup_secs: f64,
    /// `l3fwd`'s own options, their keys at this level of the report.
    #[serde(flatten)]
    pub l3fwd: crate::l3fwd::L3fwdOptions,
    /// Fractions of the first goal's result at which latency is measured, and for how long.
    pub latency_at: Vec<f64>,
    pub latency_secs: f64,
    /// veclane's workers sleep once their queues have been idle for a millisecond (adaptive
    /// rx mode) instead of polling without end. Only `--cost` sets it: the empty polls after
    /// the last frame, while the harness switches callgrind off, then stay out of the count.
    #[serde(skip)]
    pub dut_idle_sleep: bool,
    /// veclane's `dsa-queue` (`model`: the software model of a work queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dsa_queue: Option<String>,
    #[serde(skip)]
    pub veclane_bin: PathBuf,
    #[serde(skip)]
    pub testpmd_bin: Option<PathBuf>,
    #[serde(skip)]
    pub l3fwd_bin: Option<PathBuf>,
    #[serde(skip)]
    pub vpp_bin: Option<PathBuf>,
}

impl L3fwdConfig {
    /// log2 of every memif ring's size for frames of `size`, in l3fwd and the node scenarios
    /// alike, for the rings the scenario keeps busy ([`Topology::busy_rings`]; see
    /// [`crate::trial::ring_log2_for`]).
    pub(crate) fn ring_log2_at(&self, size: usize) -> u8 {
        crate::trial::ring_log2_for(
            self.ring_log2,
            size,
            buffer_size_for(self, size),
            self.topology.busy_rings(self),
        )
    }

    /// How a veclane DUT's workers wait: polling, except under `--cost` ([`Self::dut_idle_sleep`]).
    pub fn veclane_rx_mode(&self) -> api::RxMode {
        if self.dut_idle_sleep {
            api::RxMode::Adaptive
        } else {
            api::RxMode::Polling
        }
    }

    /// The CPU of the DUT's first worker.
    pub fn dut_cpu(&self) -> usize {
        self.dut_cpus.first().copied().unwrap_or(self.gen_cpu)
    }

    /// dpdk-testpmd's binary, or why there is none.
    pub fn testpmd_bin_or_missing(&self) -> Result<PathBuf, crate::dut::DutError> {
        self.testpmd_bin
            .clone()
            .ok_or_else(|| crate::dut::DutError::Missing("dpdk-testpmd not installed".into()))
    }

    /// VPP's binary, or why there is none.
    pub fn vpp_bin_or_missing(&self) -> Result<PathBuf, crate::dut::DutError> {
        self.vpp_bin.clone().ok_or_else(|| {
            crate::dut::DutError::Missing(
                "VPP not found; build it with scripts/build-vpp.sh, install it, or pass --vpp-bin"
                    .into(),
            )
        })
    }

    /// The CPUs of a DUT with `workers` workers.
    pub fn worker_cpus(&self, workers: u16) -> &[usize] {
        &self.dut_cpus[..usize::from(workers).min(self.dut_cpus.len())]
    }

    /// Whether a DUT with `workers` workers has one on the generator's CPU.
    pub fn shares_gen_cpu(&self, workers: u16) -> bool {
        self.worker_cpus(workers).contains(&self.gen_cpu)
    }

    /// Refuses a configuration that cannot be run as asked: sizes, burst, durations or
    /// latency fractions out of range, DUTs without CPUs to run on (more workers than DUT
    /// CPUs, a CPU listed twice), or a worker on the generator's CPU unless `share_gen_cpu`.
    pub fn check(&self) -> Result<(), ConfigError> {
        use ConfigError as E;
        if self.reps == 0 {
            return Err(E::NoReps);
        }
        if let Some(&s) = self
            .sizes
            .iter()
            .find(|&&s| !FRAME_SIZES.contains(&s) && s != crate::trial::IMIX)
        {
            return Err(E::Size(s));
        }
        if !(1..=256).contains(&self.burst) {
            return Err(E::Burst(self.burst));
        }
        if !(1..=crate::node::MAX_NETWORKS).contains(&self.node.networks) {
            return Err(E::Networks(self.node.networks));
        }
        for (what, secs) in [
            ("--mrr-secs", self.mrr_secs),
            ("--latency-secs", self.latency_secs),
        ] {
            if !(secs > 0.0 && secs.is_finite()) {
                return Err(E::Duration { what, secs });
            }
        }
        if !(0.0..=10.0).contains(&self.warmup_secs) {
            return Err(E::Warmup(self.warmup_secs));
        }
        if let Some(&f) = self.latency_at.iter().find(|f| !(**f > 0.0 && **f <= 1.0)) {
            return Err(E::LatencyFraction(f));
        }
        if self.node.underlay.is_kernel() {
            self.check_underlay()?;
        }
        if let Some(what) = crate::stateful::required(&self.l3fwd) {
            let scenario = self.topology.name();
            if scenario != "l3fwd" {
                return Err(E::StatefulScenario { what, scenario });
            }
            if let Some(d) = self.duts.iter().find(|d| {
                !matches!(
                    d.dut,
                    crate::Dut::Veclane | crate::Dut::Vpp | crate::Dut::None
                )
            }) {
                return Err(E::StatefulDut { what, dut: d.dut });
            }
            if self.l3fwd.new_flows && !self.l3fwd.service {
                return Err(E::NewFlowsWithoutService);
            }
            if self.l3fwd.service_flows > 1 && (!self.l3fwd.service || self.l3fwd.new_flows) {
                return Err(E::ServiceFlows);
            }
        }
        if self.dut_cpus.is_empty() {
            return Err(E::NoDutCpu);
        }
        if self.dut_cpu() == self.gen_cpu {
            return Err(E::FirstDutCpuIsGenerators(self.gen_cpu));
        }
        for (i, c) in self.dut_cpus.iter().enumerate() {
            if self.dut_cpus[..i].contains(c) {
                return Err(E::DutCpuTwice(*c));
            }
        }
        for &d in &self.duts {
            let n = usize::from(d.workers);
            if n == 0 {
                return Err(E::NoWorkers(d));
            }
            if n > self.dut_cpus.len() {
                return Err(E::TooFewCpus {
                    dut: d,
                    cpus: self.dut_cpus.clone(),
                    machine: std::thread::available_parallelism().map_or(0, |p| p.get()),
                });
            }
            if self.shares_gen_cpu(d.workers) && !self.share_gen_cpu {
                return Err(E::SharesGenCpu {
                    dut: d,
                    gen_cpu: self.gen_cpu,
                    cpus: self.worker_cpus(d.workers).to_vec(),
                });
            }
        }
        Ok(())
    }

    /// A kernel underlay: node scenarios, veclane only, frames (with VXLAN) the veth carries.
    fn check_underlay(&self) -> Result<(), ConfigError> {
        use ConfigError as E;
        let scenario = self.topology.name();
        if !matches!(scenario, "singlenet" | "multinet") {
            return Err(E::UnderlayScenario(scenario));
        }
        if let Some(d) = self.duts.iter().find(|d| d.dut != crate::Dut::Veclane) {
            return Err(E::UnderlayDut(d.dut));
        }
        // The largest frame the generator sends at each size (the IMIX's largest for it).
        let largest = crate::trial::largest_frame;
        let underlay = self.node.underlay;
        if let Some(&size) = self
            .sizes
            .iter()
            .find(|&&s| largest(s) + trafgen::frame::VXLAN_OVERHEAD > underlay.max_frame())
        {
            return Err(E::UnderlaySize {
                size: largest(size),
                underlay,
                mtu: underlay.mtu(),
            });
        }
        Ok(())
    }
}

/// Frame sizes the generator and every DUT handle.
pub const FRAME_SIZES: std::ops::RangeInclusive<usize> = 64..=9216;

/// A searched run that cannot be run as configured.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("--reps must be at least 1")]
    NoReps,
    #[error("--sizes: {0} is outside 64..=9216 (or imix)")]
    Size(usize),
    #[error("--burst {0} must be 1..=256")]
    Burst(usize),
    #[error("--networks {0} must be 1..={max}", max = crate::node::MAX_NETWORKS)]
    Networks(u16),
    #[error("{what} {secs}: must be positive")]
    Duration { what: &'static str, secs: f64 },
    #[error("--warmup-ms {}: must be 0..=10000", .0 * 1e3)]
    Warmup(f64),
    #[error("--latency-at {0}: fractions must be in (0, 1]")]
    LatencyFraction(f64),
    #[error("--underlay: only the singlenet and multinet scenarios have an uplink, not {0}")]
    UnderlayScenario(&'static str),
    #[error("{what}: only the l3fwd scenario has services and policies, not {scenario}")]
    StatefulScenario {
        what: &'static str,
        scenario: &'static str,
    },
    #[error(
        "{what}: {dut} has no services or policies (veclane and vpp have, VPP through its cnat and acl plugins; none, the bare reflector, bounds the generator)"
    )]
    StatefulDut { what: &'static str, dut: crate::Dut },
    #[error("--new-flows needs --service: the new flows are new sessions of services")]
    NewFlowsWithoutService,
    #[error("--service-flows needs --service, and makes no sense with --new-flows")]
    ServiceFlows,
    #[error(
        "--underlay: the harness configures veclane on a kernel underlay, not {0} (leave it out of --dut)"
    )]
    UnderlayDut(crate::Dut),
    #[error(
        "--sizes: {size} B with VXLAN's 50 is more than the {underlay} underlay's veth carries (MTU {mtu})"
    )]
    UnderlaySize {
        size: usize,
        underlay: crate::underlay::Underlay,
        mtu: u32,
    },
    #[error("no DUT CPU given")]
    NoDutCpu,
    #[error(
        "the first DUT CPU is the generator's CPU {0}: the placement probe pairs the generator's CPU with the first DUT CPU, so list another first (e.g. --dut-cpus 1,0)"
    )]
    FirstDutCpuIsGenerators(usize),
    #[error("DUT CPU {0} is listed twice")]
    DutCpuTwice(usize),
    #[error("{0}: a DUT needs at least one worker")]
    NoWorkers(Subject),
    #[error(
        "{dut} needs {} DUT CPUs, one per worker: list them with --dut-cpus; {} given ({cpus:?}), and this machine has {machine} CPUs, one of them the generator's",
        dut.workers,
        cpus.len()
    )]
    TooFewCpus {
        dut: Subject,
        cpus: Vec<usize>,
        machine: usize,
    },
    #[error(
        "{dut} would run a worker on the generator's CPU {gen_cpu} (DUT CPUs {cpus:?}): two busy loops taking turns measure the scheduler, not the DUT; allow it with --share-gen-cpu"
    )]
    SharesGenCpu {
        dut: Subject,
        gen_cpu: usize,
        cpus: Vec<usize>,
    },
}

/// The memif buffer size for frames of `size` (see [`crate::trial::buffer_size_for`]).
pub(super) fn buffer_size_for(cfg: &L3fwdConfig, size: usize) -> u32 {
    crate::trial::buffer_size_for(cfg.buffer_size, size)
}

/// The rings of a run, for its table's heading: `2^12`, or `2^12 (2^11 at 1500 B)` when
/// sizes differ.
pub(crate) fn rings_text(cfg: &L3fwdConfig) -> String {
    let at: Vec<(usize, u8)> = cfg
        .sizes
        .iter()
        .map(|&s| (s, cfg.ring_log2_at(s)))
        .collect();
    let first = at.first().map_or(crate::trial::RING_LOG2_MAX, |a| a.1);
    let others: Vec<String> = at
        .iter()
        .filter(|a| a.1 != first)
        .map(|&(s, r)| format!("2^{r} at {}", crate::trial::size_label(s)))
        .collect();
    if others.is_empty() {
        format!("2^{first}")
    } else {
        format!("2^{first} ({})", others.join(", "))
    }
}

/// A configuration for unit tests that run nothing: one size (64), the given DUTs.
#[cfg(test)]
pub(crate) fn test_config(duts: Vec<Subject>) -> L3fwdConfig {
    L3fwdConfig {
        topology: &crate::l3fwd::TOPOLOGY,
        sizes: vec![64],
        reps: 1,
        duts,
        gen_cpu: 0,
        dut_cpus: vec![1],
        share_gen_cpu: false,
        ring_log2: None,
        check_payload: false,
        node: crate::node::NodeOptions::default(),
        pvp: crate::pvp::PvpOptions::default(),
        buffer_size: 2048,
        burst: 64,
        wait_near_secs: 0.0,
        method: Method::continuous_default(0.1),
        l3fwd: crate::l3fwd::L3fwdOptions::default(),
        mrr_secs: 1.0,
        warmup_secs: 0.01,
        max_load_factor: 1.1,
        max_redo: 0,
        interleave: Interleave::Searches,
        latency_at: vec![],
        latency_secs: 1.0,
        dut_idle_sleep: false,
        veclane_bin: PathBuf::new(),
        testpmd_bin: None,
        l3fwd_bin: None,
        vpp_bin: None,
        dsa_queue: None,
    }
}
