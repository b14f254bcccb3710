//! `l3fwd`: generator → memif → device under test → memif → generator.
//!
//! The generator is a zero-copy memif secondary in this process, on a thread pinned to the
//! generator CPU, that sends on interface id 0 and receives on id 1 in one loop. The DUT
//! listens on one socket with both interfaces and has the other CPU to itself:
//! - veclane: `veclane run`, one polling worker, routing 10.10.1.0/24 (id 0) to 10.10.2.0/24
//!   (id 1) through a static neighbour: ethernet-input, ip4-input (checksum, length, TTL),
//!   ip4-lookup, ip4-rewrite (TTL, checksum, MACs); copy mode single or two.
//! - testpmd: `dpdk-testpmd --forward-mode=io` between two `net_memif` server ports: no lookup
//!   and no header change at all (or `mac`: MACs rewritten, still no lookup).
//!
//! One *search* per (repetition, size, DUT): start the DUT, connect the generator, run a
//! flat-out trial (its receive rate, the MRR, sets the search's maximum load), run the search
//! ([`crate::search`]) with the generator acting as a port on a wire (a full ring loses
//! frames), measure latency at fractions of the result, stop the DUT. The DUT's own counters
//! are read before and after every trial, with the generator still connected, and compared
//! with the generator's counts. Searches of different DUTs are interleaved (A B A B ...), and
//! a placement probe runs before the DUT starts and after it stops.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;

use crate::dut::{Counts, Daemon, Running};
use crate::placement::{self, Placement};
use crate::scenario::Topology;
use crate::search::{self, Measurement, Measurer, Method, SearchReport};
use crate::testpmd::{MemifPort, Testpmd};
use crate::trial::{Placed, Schedule, check_frame_size};
use crate::{BenchError, CopyMode, Dut, Subject, median_min_max};
use trafgen::GenReport;
use trafgen::stats::Latency;

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
    pub ring_log2: u8,
    pub buffer_size: u32,
    /// Frames per generator burst.
    pub burst: usize,
    /// Before each search, wait up to this long for the CPUs to be near (0: do not wait);
    /// within a search, before each trial (see [`TrialGuard`]).
    pub wait_near_secs: f64,
    /// Trials a search may run again because the host disturbed them (see [`TrialGuard`]).
    pub max_redo: usize,
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
    /// testpmd's forwarding: `io` (frames untouched) or `mac` (source and destination MACs
    /// rewritten, the destination being the generator's).
    pub testpmd_fwd: TestpmdFwd,
    /// Fractions of the first goal's result at which latency is measured, and for how long.
    pub latency_at: Vec<f64>,
    pub latency_secs: f64,
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
    /// The CPU of the DUT's first worker.
    pub fn dut_cpu(&self) -> usize {
        self.dut_cpus.first().copied().unwrap_or(self.gen_cpu)
    }

    /// The CPUs of a DUT with `workers` workers.
    pub fn worker_cpus(&self, workers: u16) -> &[usize] {
        &self.dut_cpus[..usize::from(workers).min(self.dut_cpus.len())]
    }

    /// Whether a DUT with `workers` workers has one on the generator's CPU.
    pub fn shares_gen_cpu(&self, workers: u16) -> bool {
        self.worker_cpus(workers).contains(&self.gen_cpu)
    }

    /// Refuses a configuration whose DUTs have no CPUs to run on: more workers than DUT CPUs,
    /// a CPU listed twice, or a worker on the generator's CPU unless `share_gen_cpu`.
    pub fn check(&self) -> Result<(), String> {
        if self.dut_cpus.is_empty() {
            return Err("no DUT CPU given".into());
        }
        if self.dut_cpu() == self.gen_cpu {
            return Err(format!(
                "the first DUT CPU is the generator's CPU {}: the placement probe pairs the generator's CPU with the first DUT CPU, so list another first (e.g. --dut-cpus 1,0)",
                self.gen_cpu
            ));
        }
        for (i, c) in self.dut_cpus.iter().enumerate() {
            if self.dut_cpus[..i].contains(c) {
                return Err(format!("DUT CPU {c} is listed twice"));
            }
        }
        for d in &self.duts {
            let n = usize::from(d.workers);
            if n == 0 {
                return Err(format!("{d}: a DUT needs at least one worker"));
            }
            if n > self.dut_cpus.len() {
                return Err(format!(
                    "{d} needs {n} DUT CPUs, one per worker: list them with --dut-cpus; {} given ({:?}){}",
                    self.dut_cpus.len(),
                    self.dut_cpus,
                    match std::thread::available_parallelism() {
                        Ok(p) =>
                            format!(", and this machine has {p} CPUs, one of them the generator's"),
                        Err(_) => String::new(),
                    }
                ));
            }
            if self.shares_gen_cpu(d.workers) && !self.share_gen_cpu {
                return Err(format!(
                    "{d} would run a worker on the generator's CPU {} (DUT CPUs {:?}): two busy loops taking turns measure the scheduler, not the DUT; allow it with --share-gen-cpu",
                    self.gen_cpu,
                    self.worker_cpus(d.workers)
                ));
            }
        }
        Ok(())
    }
}

/// testpmd's forwarding mode in the l3fwd scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TestpmdFwd {
    Io,
    Mac,
}

/// The memif buffer size for frames of `size` (see [`crate::trial::buffer_size_for`]).
fn buffer_size_for(cfg: &L3fwdConfig, size: usize) -> u32 {
    crate::trial::buffer_size_for(cfg.buffer_size, size)
}

/// One trial as the generator saw it, with what the DUT's counters said.
#[derive(Debug, Clone, Serialize)]
pub struct TrialRecord {
    /// `mrr` (flat out, held back by a full ring), `search`, or `latency`.
    pub kind: &'static str,
    pub m: Measurement,
    /// Frames lost to a full ring (the DUT's receive ring).
    pub refused: u64,
    pub latency: Latency,
    /// Receive rate in each sampling interval: a trial cut by a stall or a placement flip
    /// shows a dip.
    pub interval_rx_mpps: Vec<f64>,
    /// Frames refused in each sampling interval (where in the trial the ring overflowed).
    pub interval_refused: Vec<u64>,
    /// The warm-up before the counted window (`L3fwdConfig::warmup_secs`): frames sent in it
    /// and refused by a full ring. Neither counts; they show the cold start it absorbed.
    pub warmup_sent: u64,
    pub warmup_refused: u64,
    /// Frames received per generator stream (one per queue pair, so per DUT worker) when
    /// there are several: how the load was spread.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rx_streams: Vec<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<String>,
    /// One-way cache-line transfer between the CPUs just before and just after the trial,
    /// probed at real-time priority (`None` where the process may not use it).
    pub probe_before_ns: Option<f64>,
    pub probe_after_ns: Option<f64>,
    /// The longest pause of the generator's loop and the longest time without a received
    /// frame while sending, µs.
    pub max_stall_us: f64,
    pub max_rx_gap_us: f64,
    /// How long the DUT's worker thread waited for its CPU during the trial, µs in all (the
    /// longest of its workers' waits).
    pub dut_wait_us: Option<f64>,
    /// Why the search did not use this trial and ran it again (see [`TrialGuard`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redone: Option<String>,
}

/// Latency at one fraction of the first goal's result.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyPoint {
    pub fraction: f64,
    pub load_pps: f64,
    pub rx_pps: f64,
    pub loss_ratio: f64,
    pub latency: Latency,
}

/// One search: one (repetition, size, DUT).
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub dut: Subject,
    pub size: usize,
    pub rep: usize,
    /// Flat-out receive rate.
    pub mrr_pps: f64,
    pub search: Option<SearchReport>,
    pub latency: Vec<LatencyPoint>,
    /// veclane's nanoseconds per packet per node over the flat-out trial.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ns: Vec<(String, f64)>,
    /// veclane: packets each worker took in over the flat-out trial.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub worker_packets: Vec<u64>,
    /// The DUT's drop counters at the end.
    pub dut_drops: String,
    pub trials: Vec<TrialRecord>,
    pub probe_before_ns: f64,
    pub probe_after_ns: f64,
    pub placement: Placement,
    pub error: Option<String>,
}

impl Placed for Outcome {
    fn failed(dut: Subject, size: usize, rep: usize, e: String) -> Outcome {
        Outcome {
            dut,
            size,
            rep,
            mrr_pps: f64::NAN,
            search: None,
            latency: Vec::new(),
            node_ns: Vec::new(),
            worker_packets: Vec::new(),
            dut_drops: String::new(),
            trials: Vec::new(),
            probe_before_ns: 0.0,
            probe_after_ns: 0.0,
            placement: Placement::Mixed,
            error: Some(e),
        }
    }

    fn set_placement(&mut self, before_ns: f64, after_ns: f64) {
        self.probe_before_ns = before_ns;
        self.probe_after_ns = after_ns;
        self.placement = Placement::of(before_ns, after_ns);
    }
}

impl Outcome {
    /// Trials whose counts the DUT's counters contradict.
    pub fn disagreeing(&self) -> usize {
        self.trials
            .iter()
            .filter(|t| !t.disagreements.is_empty())
            .count()
    }
}

/// Runs every (rep, size, DUT) search, DUTs interleaved; `progress` sees each finished one.
/// A search that fails is kept with its reason and the run goes on.
pub fn run(
    cfg: &L3fwdConfig,
    progress: impl FnMut(&Outcome),
    mut on_trial: impl FnMut(Subject, usize, &Measurement) + Send,
) -> Vec<Outcome> {
    let schedule = Schedule {
        sizes: &cfg.sizes,
        duts: &cfg.duts,
        reps: cfg.reps,
        cpus: (cfg.gen_cpu, cfg.dut_cpu()),
        wait_near_secs: cfg.wait_near_secs,
    };
    crate::trial::run(
        schedule,
        |dut, size, rep| search_one(cfg, dut, size, rep, &mut |m| on_trial(dut, size, m)),
        progress,
    )
}

/// The `l3fwd` topology: two memif interfaces, 10.10.1.0/24 on id 0 and 10.10.2.0/24 on id 1,
/// the generator's frames (10.10.1.2 → 10.10.2.2) routed from one to the other.
#[derive(Debug)]
pub struct L3fwdTopology;

/// The one `l3fwd` topology.
pub static TOPOLOGY: L3fwdTopology = L3fwdTopology;

impl Topology for L3fwdTopology {
    fn name(&self) -> &'static str {
        "l3fwd"
    }

    fn about(&self) -> &'static str {
        "Generator → memif → DUT (routes between two memif interfaces) → memif → generator"
    }

    fn supports(&self, _dut: Dut) -> bool {
        true
    }

    fn describe(&self) -> String {
        "veclane/single and veclane/two: polling workers, ethernet-input, ip4-input, ip4-lookup, ip4-rewrite (TTL, checksum, MACs); payload copied once peer to peer (single) or into local buffers and out (two); testpmd: --forward-mode=io (no lookup, no header change) or mac (MACs rewritten, no lookup); dpdk-l3fwd: DPDK's l3fwd example, LPM, an lcore per worker, no IPv4 checksum check (left to hardware that net_memif lacks); vpp: workers, memif masters, ip4 routes as veclane's".into()
    }

    fn start_dut(
        &self,
        cfg: &L3fwdConfig,
        dut: Subject,
        size: usize,
        dir: &Path,
        wrapper: &[String],
    ) -> Result<(Running, PathBuf), String> {
        start_dut(cfg, dut, size, dir, wrapper)
    }

    fn gen_config(
        &self,
        cfg: &L3fwdConfig,
        sock: &Path,
        size: usize,
        workers: u16,
    ) -> trafgen::GenConfig {
        gen_config(cfg, sock, size, workers)
    }
}

/// The generator's configuration for frames of `size` against a DUT with `workers` workers
/// listening on `sock`: a queue pair per worker on both interfaces, sent to in turn, a burst
/// at a time.
fn gen_config(cfg: &L3fwdConfig, sock: &Path, size: usize, workers: u16) -> trafgen::GenConfig {
    let iface = |id: u32| memif::InterfaceConfig {
        id,
        name: format!("gen{id}"),
        log2_ring_size: cfg.ring_log2,
        buffer_size: buffer_size_for(cfg, size),
        s2m_rings: workers,
        m2s_rings: workers,
        ..Default::default()
    };
    trafgen::GenConfig {
        role: trafgen::Role::Secondary,
        socket: memif::SocketPath::File(sock.to_path_buf()),
        iface: iface(0),
        rx_iface: Some(iface(1)),
        spec: trafgen::FrameSpec {
            size,
            ..Default::default()
        },
        burst: cfg.burst,
        // Frames still in the DUT when sending stops come back within microseconds.
        drain: Duration::from_millis(50),
        warmup: Duration::from_secs_f64(cfg.warmup_secs),
        cpu: Some(cfg.gen_cpu),
        ..Default::default()
    }
}

/// Starts `dut` for frames of `size`, under `wrapper` if not empty (veclane and testpmd only);
/// returns it and the memif socket it listens on (in `dir` for the DUTs that take a
/// directory).
fn start_dut(
    cfg: &L3fwdConfig,
    dut: Subject,
    size: usize,
    dir: &Path,
    wrapper: &[String],
) -> Result<(Running, PathBuf), String> {
    let sock = dir.join("memif.sock");
    if !wrapper.is_empty() && !matches!(dut.dut, Dut::Veclane | Dut::Testpmd) {
        return Err(format!("{dut} cannot run under {}", wrapper.join(" ")));
    }
    // Under a wrapper (valgrind) start-up is far slower.
    let ready = Duration::from_secs(if wrapper.is_empty() { 10 } else { 120 });
    match dut.dut {
        Dut::Veclane => Daemon::start_under(
            wrapper,
            &cfg.veclane_bin,
            dir,
            &veclane_config(cfg, dut.copy.unwrap_or(CopyMode::Single), size, dut.workers).to_toml(),
            ready,
        )
        .map(|d| (Running::Veclane(d), sock)),
        Dut::DpdkL3fwd => {
            let bin = cfg.l3fwd_bin.clone().ok_or(
                "dpdk-l3fwd is not built (scripts/build-dpdk-l3fwd.sh, run by scripts/setup.sh)",
            )?;
            let l = crate::dpdk_l3fwd::spawn(
                &bin,
                &crate::dpdk_l3fwd::DpdkL3fwdConfig {
                    ring_log2: cfg.ring_log2,
                    buffer_size: buffer_size_for(cfg, size),
                    cpus: cfg.worker_cpus(dut.workers).to_vec(),
                    ..crate::dpdk_l3fwd::DpdkL3fwdConfig::new(cfg.dut_cpu())
                },
            )?;
            let sock = l.memif_socket();
            Ok((Running::DpdkL3fwd(l), sock))
        }
        Dut::Vpp => {
            let bin = cfg
                .vpp_bin
                .clone()
                .ok_or("VPP not found; install VPP or pass --vpp-bin")?;
            let v = crate::vpp::spawn(
                &bin,
                None,
                &crate::vpp::VppConfig {
                    ring_log2: cfg.ring_log2,
                    buffer_size: buffer_size_for(cfg, size),
                    workers: cfg.worker_cpus(dut.workers).to_vec(),
                    ..crate::vpp::VppConfig::new(cfg.gen_cpu, cfg.dut_cpu())
                },
            )?;
            let sock = v.memif_socket();
            Ok((Running::Vpp(v), sock))
        }
        Dut::Testpmd => {
            let bin = cfg
                .testpmd_bin
                .clone()
                .ok_or("dpdk-testpmd not installed")?;
            let port = |id| MemifPort {
                server: true,
                socket: sock.clone(),
                id,
                rsize_log2: cfg.ring_log2,
                bsize: buffer_size_for(cfg, size),
                secret: None,
            };
            // A queue pair per forwarding lcore on both ports; io and mac forwarding map rx
            // queue q of one port to tx queue q of the other.
            let n = dut.workers;
            let mut app = vec![
                format!("--nb-cores={n}"),
                format!("--rxq={n}"),
                format!("--txq={n}"),
            ];
            app.extend(match cfg.testpmd_fwd {
                TestpmdFwd::Io => vec!["--forward-mode=io".to_string()],
                // Frames leave port 1 addressed to the generator, as veclane's do.
                TestpmdFwd::Mac => vec![
                    "--forward-mode=mac".to_string(),
                    format!(
                        "--eth-peer=1,{}",
                        trafgen::FrameSpec::default()
                            .src_mac
                            .0
                            .map(|b| format!("{b:02x}"))
                            .join(":")
                    ),
                ],
            });
            if size > 2048 {
                app.push(format!(
                    "--mbuf-size={}",
                    (size + 1024).next_multiple_of(1024)
                ));
            }
            let mut tp = Testpmd::spawn_under(
                wrapper,
                &bin,
                &format!("vl{}fwd", std::process::id()),
                cfg.worker_cpus(dut.workers),
                cfg.gen_cpu,
                &[port(0), port(1)],
                &app,
            )?;
            tp.cmd("start")?;
            Ok((Running::Testpmd(tp), sock))
        }
    }
}

/// What a search does about the host, trial by trial. This machine's host takes a CPU away
/// for 0.1-8 ms several times a second and moves the two vCPUs between cores that share an L3
/// and cores that do not (memif runs 30-75% slower then). A trial the host disturbed says
/// nothing about the DUT when it failed because of the disturbance, so such a trial is run
/// again (up to `redo_left` times per search) when
/// - the CPUs were not near before and after it (probed at real-time priority, which
///   preempts the busy DUT between trials), while the search waits for the near state; or
/// - the generator fell behind its schedule (its CPU was taken away, or slowed down in the
///   far state), and the DUT lost no more than the pause would explain; or
/// - a pause on either side would fill half a ring (`ring_slots`) at the trial's load, and
///   the DUT lost no more than the pause explains. A pause counts only where the host caused
///   it: the generator's own loop stopping, or the DUT's worker waiting that long for its CPU
///   (its scheduler statistics). Nothing coming back while the DUT's worker had its CPU is the
///   DUT's own doing and stands as loss.
///
/// A trial that passes despite a disturbance stands: it passed under worse conditions. Every
/// trial run again stays in the JSON with its reason, and the table counts them.
#[derive(Debug, Clone)]
struct TrialGuard {
    cpus: (usize, usize),
    /// Wait up to this long for the near state before each trial (zero: do not wait, and do
    /// not run trials again for their placement).
    wait_near: Duration,
    ring_slots: u64,
    redo_left: usize,
}

impl TrialGuard {
    /// The probe before a trial, after waiting (bounded) for the near state. Once a wait has
    /// run out the host is settled elsewhere, and the rest of the search does not wait.
    fn before(&mut self) -> Option<f64> {
        let (a, b) = self.cpus;
        let ns = placement::wait_near_with(self.wait_near, Duration::from_millis(50), || {
            placement::probe_preempting(a, b, 5_000)
        })?;
        let near = ns < placement::NEAR_BELOW_NS;
        if !near {
            self.wait_near = Duration::ZERO;
        }
        Some(ns)
    }

    fn after(&self) -> Option<f64> {
        placement::probe_preempting(self.cpus.0, self.cpus.1, 5_000)
    }

    /// Why the host, not the DUT, may have failed this trial at `load` (flat out: `None`):
    /// `m` is the trial, `dut_wait_us` how long the DUT's worker waited for its CPU during it.
    fn disturbance(
        &self,
        load: Option<f64>,
        m: &Measurement,
        g: &GenReport,
        dut_wait_us: Option<f64>,
        before: Option<f64>,
        after: Option<f64>,
    ) -> Option<String> {
        if let (Some(b), Some(a)) = (before, after) {
            let p = Placement::of(b, a);
            if p != Placement::Near && !self.wait_near.is_zero() {
                return Some(format!("placement {p} ({b:.0}/{a:.0} ns)"));
            }
        }
        let load = load?;
        // What the DUT lost: offered minus received, less what the generator never sent.
        let dut_loss = m.offered.saturating_sub(m.received + m.shortfall) as f64;
        // The longest pause the host caused: ours, or nothing back while the DUT waited for
        // its CPU (the wait is a total over the trial, so it bounds the longest one).
        let dut_pause_us = g.max_rx_gap_us.min(dut_wait_us.unwrap_or(0.0));
        let (who, pause_us) = if g.max_stall_us >= dut_pause_us {
            ("generator paused", g.max_stall_us)
        } else {
            ("DUT's worker off its CPU", dut_pause_us)
        };
        let pause_frames = pause_us * 1e-6 * load;
        if dut_loss > pause_frames {
            return None;
        }
        if m.shortfall > 0 {
            return Some(format!(
                "generator {} frames behind its schedule ({who} {pause_us:.0} us)",
                m.shortfall
            ));
        }
        (pause_frames > self.ring_slots as f64 / 2.0).then(|| {
            format!(
                "{who} {pause_us:.0} us, {pause_frames:.0} frames at this load (ring {})",
                self.ring_slots
            )
        })
    }
}

/// The generator as a [`Measurer`]: one connected session, the DUT beside it.
struct GenMeasurer<'a> {
    topology: &'a dyn Topology,
    session: &'a mut trafgen::Session,
    base: &'a trafgen::GenConfig,
    dut: &'a mut Running,
    size: usize,
    kind: &'static str,
    records: Vec<TrialRecord>,
    on_trial: &'a mut (dyn FnMut(&Measurement) + Send),
    /// The DUT's counters as the last trial ended: nothing passes between trials, so they
    /// are also where the next one starts.
    counts: Option<Option<Counts>>,
    guard: TrialGuard,
}

impl GenMeasurer<'_> {
    /// One trial: `load` pps on a wire, or flat out (held back by a full ring) when `None`;
    /// run again while the host disturbed it and it failed (see [`TrialGuard`]). Latency
    /// trials are taken as they come.
    fn trial(&mut self, load: Option<f64>, duration: Duration) -> Result<Measurement, String> {
        loop {
            let before = self.guard.before();
            if load.is_none() {
                self.dut.clear_runtime();
            }
            let (t0, wait0) = (std::time::Instant::now(), self.dut.thread_times());
            let (m, g, mut record) = self.trial_once(load, duration)?;
            let dut_wait_us = match (wait0, self.dut.thread_times()) {
                (Some(a), Some(b)) => {
                    let wall = t0.elapsed().as_nanos() as u64;
                    Some(crate::dut::worker_wait_between(&a, &b, wall) as f64 / 1e3)
                }
                _ => None,
            };
            let after = self.guard.after();
            record.probe_before_ns = before;
            record.probe_after_ns = after;
            record.dut_wait_us = dut_wait_us;
            let failed = load.is_none() || m.offered > m.received;
            let why = self
                .guard
                .disturbance(load, &m, &g, dut_wait_us, before, after);
            if let Some(why) = why.filter(|_| failed && self.kind != "latency")
                && self.guard.redo_left > 0
            {
                self.guard.redo_left -= 1;
                record.redone = Some(why);
                self.records.push(record);
                continue;
            }
            (self.on_trial)(&m);
            self.records.push(record);
            return Ok(m);
        }
    }

    fn trial_once(
        &mut self,
        load: Option<f64>,
        duration: Duration,
    ) -> Result<(Measurement, GenReport, TrialRecord), String> {
        let before = match self.counts.take() {
            Some(c) => c,
            None => self.topology.counts(self.dut)?,
        };
        let cfg = trafgen::GenConfig {
            rate_pps: load,
            drop_when_full: load.is_some(),
            duration,
            sample_every: (duration / 5).max(Duration::from_millis(20)),
            ..self.base.clone()
        };
        let g = self
            .session
            .run(&cfg, &AtomicBool::new(false))
            .map_err(|e| e.to_string())?;
        if g.link_lost {
            // Counts of a cut trial would pass any loss test (nothing offered, nothing lost),
            // and the session has no queues left for the next one.
            return Err(format!(
                "the DUT's memif link went down during a trial at {:.3} Mpps ({} of {} frames back){}",
                load.unwrap_or(0.0) / 1e6,
                g.rx_packets,
                g.tx_packets,
                g.last_disconnect_reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ));
        }
        let after = self.topology.counts(self.dut)?;
        self.counts = Some(after);
        if g.rx_packets > 0 {
            check_frame_size(g.rx_bytes, g.rx_packets, self.size)?;
        }
        let m = measurement(load, duration, &g);
        let record = TrialRecord {
            kind: self.kind,
            m: m.clone(),
            refused: g.tx_refused,
            latency: g.latency,
            interval_rx_mpps: g.interval_rx_mpps(),
            interval_refused: g.interval_refused(),
            warmup_sent: g.warmup_tx_packets,
            warmup_refused: g.warmup_tx_refused,
            // One entry per queue pair, a queue that returned nothing included.
            rx_streams: match usize::from(self.base.iface.s2m_rings) {
                0 | 1 => Vec::new(),
                n => {
                    let mut v = g.rx_stream_packets.clone();
                    v.resize(n.max(v.len()), 0);
                    v
                }
            },
            // The DUT's counters saw the warm-up too.
            disagreements: Running::check(before, after, g.tx_total(), g.rx_total()),
            probe_before_ns: None,
            probe_after_ns: None,
            max_stall_us: g.max_stall_us,
            max_rx_gap_us: g.max_rx_gap_us,
            dut_wait_us: None,
            redone: None,
        };
        Ok((m, g, record))
    }
}

impl Measurer for GenMeasurer<'_> {
    fn measure(&mut self, load_pps: f64, duration: Duration) -> Result<Measurement, String> {
        self.trial(Some(load_pps), duration)
    }
}

/// What a generator run measured, in the search's terms. A paced run that offered less than
/// half its schedule ended early: it counts as offering the whole schedule (and losing what
/// never went out), never as a loss-free trial of a few frames.
fn measurement(load: Option<f64>, duration: Duration, g: &GenReport) -> Measurement {
    let scheduled = load.map_or(0, |l| (l * duration.as_secs_f64()) as u64);
    Measurement {
        load_pps: load.unwrap_or(g.tx_mpps * 1e6),
        duration_s: duration.as_secs_f64(),
        offered: if g.tx_offered < scheduled / 2 {
            scheduled
        } else {
            g.tx_offered
        },
        sent: g.tx_packets,
        received: g.rx_packets,
        shortfall: g.tx_shortfall,
        tx_pps: g.tx_mpps * 1e6,
        rx_pps: g.rx_mpps * 1e6,
    }
}

/// One search of `dut` at `size`.
fn search_one(
    cfg: &L3fwdConfig,
    dut: Subject,
    size: usize,
    rep: usize,
    on_trial: &mut (dyn FnMut(&Measurement) + Send),
) -> Result<Outcome, BenchError> {
    let fail = |msg: String| BenchError::Trial { dut, size, msg };
    let dir = tempfile::tempdir()?;
    if !cfg.topology.supports(dut.dut) {
        return Err(fail(format!(
            "the {} scenario cannot configure {}",
            cfg.topology.name(),
            dut.dut
        )));
    }
    let (mut running, sock) = cfg
        .topology
        .start_dut(cfg, dut, size, dir.path(), &[])
        .map_err(fail)?;
    let gcfg = cfg.topology.gen_config(cfg, &sock, size, dut.workers);
    let (r, trials, dut_drops) = std::thread::scope(|s| {
        let (gcfg, running) = (&gcfg, &mut running);
        s.spawn(move || {
            let stop = AtomicBool::new(false);
            let mut session = match trafgen::Session::connect(gcfg, &stop) {
                Ok(s) => s,
                Err(e) => return (Err(e.to_string()), Vec::new(), String::new()),
            };
            let mut m = GenMeasurer {
                topology: cfg.topology,
                session: &mut session,
                base: gcfg,
                dut: running,
                size,
                kind: "mrr",
                records: Vec::new(),
                on_trial,
                counts: None,
                guard: TrialGuard {
                    cpus: (cfg.gen_cpu, cfg.dut_cpu()),
                    wait_near: Duration::from_secs_f64(cfg.wait_near_secs),
                    // The generator spreads its bursts over one ring per worker.
                    ring_slots: (1 << cfg.ring_log2) * u64::from(dut.workers),
                    redo_left: cfg.max_redo,
                },
            };
            let r = measure_all(cfg, &mut m);
            let records = std::mem::take(&mut m.records);
            let drops = m.dut.drops();
            session.close();
            (r, records, drops)
        })
        .join()
        .unwrap_or_else(|_| {
            (
                Err("generator thread panicked".into()),
                Vec::new(),
                String::new(),
            )
        })
    });
    running.stop();
    // A search that failed part way keeps the trials it ran, as evidence.
    let mut o = Outcome::failed(dut, size, rep, String::new());
    o.trials = trials;
    o.dut_drops = dut_drops;
    match r {
        Ok((mrr_pps, search, latency, node_ns, worker_packets)) => {
            o.mrr_pps = mrr_pps;
            o.search = Some(search);
            o.latency = latency;
            o.node_ns = node_ns;
            o.worker_packets = worker_packets;
            o.error = None;
        }
        Err(e) => o.error = Some(fail(e).to_string()),
    }
    Ok(o)
}

/// MRR, search, latency, veclane's ns per node and packets per worker (flat out).
type Measured = (
    f64,
    SearchReport,
    Vec<LatencyPoint>,
    Vec<(String, f64)>,
    Vec<u64>,
);

/// The flat-out trial, the search, and the latency trials, on one connection.
fn measure_all(cfg: &L3fwdConfig, m: &mut GenMeasurer<'_>) -> Result<Measured, String> {
    m.dut.ready()?;
    let flat = m.trial(None, Duration::from_secs_f64(cfg.mrr_secs))?;
    let runtime = m.dut.runtime();
    let node_ns = crate::dut::node_costs(&runtime);
    let worker_packets = crate::dut::worker_packets(&runtime);
    if flat.received == 0 {
        return Err("nothing came back in the flat-out trial".into());
    }
    let max = flat.rx_pps * cfg.max_load_factor;
    let min = (max / 1000.0).max(1000.0);
    m.kind = "search";
    let report = search::search(&cfg.method, min, max, m, &mut |_| {})
        .map_err(|e| format!("search: {e}"))?;
    m.kind = "latency";
    let mut latency = Vec::new();
    let base = report.goals.first().and_then(|g| g.result_pps());
    if let Some(base) = base {
        for &f in &cfg.latency_at {
            let load = base * f;
            if load < 1000.0 {
                continue;
            }
            let t = m.trial(Some(load), Duration::from_secs_f64(cfg.latency_secs))?;
            let lat = m.records.last().map(|r| r.latency).unwrap_or_default();
            latency.push(LatencyPoint {
                fraction: f,
                load_pps: load,
                rx_pps: t.rx_pps,
                loss_ratio: t.loss_ratio(),
                latency: lat,
            });
        }
    }
    Ok((flat.rx_pps, report, latency, node_ns, worker_packets))
}

/// The daemon configuration a veclane trial runs: the embedded default's topology (the
/// same interfaces, addresses and neighbour), a polling worker on each of the DUT's first
/// `workers` CPUs, rings and buffers sized for the trial. The daemon hands worker `i` rx
/// queue `i` of both interfaces and transmits from it on queue `i`.
pub fn veclane_config(cfg: &L3fwdConfig, copy: CopyMode, size: usize, workers: u16) -> api::Config {
    let mut c = api::Config::embedded_default();
    c.daemon.workers = cfg.worker_cpus(workers).to_vec();
    c.daemon.main_core = Some(cfg.gen_cpu);
    c.daemon.mode = api::RxMode::Polling;
    c.daemon.copy = copy;
    c.daemon.copy_engine = api::CopyEngine::Cpu;
    for i in &mut c.interface {
        i.ring_size = Some(1 << cfg.ring_log2);
        i.buffer_size = Some(buffer_size_for(cfg, size));
    }
    c
}

/// One goal of a search row: the median over repetitions of the goal's result.
#[derive(Debug, Clone, Serialize)]
pub struct GoalRow {
    pub goal: String,
    pub loss_ratio: f64,
    /// Median, min and max of the relevant lower bound (0 where even the minimum load failed).
    pub mpps: f64,
    pub mpps_min: f64,
    pub mpps_max: f64,
    pub gbps_l2: f64,
    pub gbps_l1: f64,
    /// Median measured receive rate at the lower bound.
    pub forwarding_mpps: f64,
    /// Median loss ratio of the trials at the result (the least of each search's trials at
    /// that load: the one that passed; for MRR, the mean of its trials).
    pub measured_loss: f64,
    /// Searches whose result for this goal was irregular (maximum load still passed, or the
    /// minimum already failed).
    pub irregular: usize,
}

/// The median of the searches of one (DUT, size).
#[derive(Debug, Clone, Serialize)]
pub struct SearchRow {
    pub dut: Subject,
    pub size: usize,
    pub goals: Vec<GoalRow>,
    pub mrr_mpps: f64,
    pub mrr_min: f64,
    pub mrr_max: f64,
    /// Median of each percentile at each latency fraction.
    pub latency: Vec<(f64, Latency)>,
    /// Searches behind the medians, and the placement they share (`None`: all placements).
    pub searches: usize,
    pub basis: Option<Placement>,
    /// Searches of this (DUT, size) in all, failed ones included.
    pub searches_run: usize,
    /// Trials (of the searches behind the medians) whose counts the DUT's counters contradict.
    pub disagreeing: usize,
    /// Trials (same searches) whose generator fell behind its schedule.
    pub generator_short: usize,
    /// Trials (same searches) run again because the host disturbed them.
    pub redone: usize,
    /// This DUT's first-goal result over the reference DUT's (the last one with as many
    /// workers) in the same repetition, searches run back to back: median, min, max over the
    /// repetitions where both succeeded in one placement ([`paired_ratio`]). Pairs cancel the
    /// drift that a ratio of medians keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_ratio: Option<PairedRatio>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ns: Vec<(String, f64)>,
}

fn median(v: &[f64]) -> f64 {
    median_min_max(v).0
}

/// One row per (size, DUT) with at least one successful search. The medians come from the
/// searches of one placement: near when there are any (the state memif is meant to run in,
/// and the one the harness waits for), else mid, else far; from all of them only when every
/// search was cut by a flip (mixed). A median over placements would be no figure at all: one
/// run's testpmd at 64 B had two near searches at 34-35 Mpps and three others at 12-13, and
/// their median said 13.
pub fn rows(outcomes: &[Outcome], sizes: &[usize], duts: &[Subject]) -> Vec<SearchRow> {
    let mut out = Vec::new();
    for &size in sizes {
        for &dut in duts {
            let all: Vec<&Outcome> = outcomes
                .iter()
                .filter(|o| o.dut == dut && o.size == size)
                .collect();
            let ok: Vec<&Outcome> = all
                .iter()
                .copied()
                .filter(|o| o.error.is_none() && o.search.is_some())
                .collect();
            if ok.is_empty() {
                continue;
            }
            let basis = Placement::preferred(|p| ok.iter().any(|o| o.placement == p));
            let used: Vec<&Outcome> = ok
                .iter()
                .copied()
                .filter(|o| basis.is_none_or(|b| o.placement == b))
                .collect();
            let reports: Vec<&SearchReport> =
                used.iter().filter_map(|o| o.search.as_ref()).collect();
            let mut goals = Vec::new();
            if let Some(first) = reports.first() {
                for (i, g) in first.goals.iter().enumerate() {
                    // MRR has no bounds: its result is the receive rate.
                    let vals: Vec<f64> = reports
                        .iter()
                        .filter_map(|r| r.goals.get(i))
                        .map(|g| g.result_pps().unwrap_or(0.0) / 1e6)
                        .collect();
                    let fwd: Vec<f64> = reports
                        .iter()
                        .filter_map(|r| r.goals.get(i))
                        .filter_map(|g| g.forwarding_pps)
                        .map(|p| p / 1e6)
                        .collect();
                    let (m, lo, hi) = median_min_max(&vals);
                    let losses: Vec<f64> = reports
                        .iter()
                        .filter_map(|r| {
                            let goal = r.goals.get(i)?;
                            let at: Vec<f64> = match goal.lower_pps {
                                Some(l) => r
                                    .trials
                                    .iter()
                                    .filter(|t| t.load_pps == l)
                                    .map(|t| t.loss_ratio())
                                    .collect(),
                                // MRR: every trial is at the maximum load.
                                None if goal.loss_ratio >= 1.0 => {
                                    r.trials.iter().map(|t| t.loss_ratio()).collect()
                                }
                                None => Vec::new(),
                            };
                            if at.is_empty() {
                                None
                            } else if goal.loss_ratio >= 1.0 {
                                Some(at.iter().sum::<f64>() / at.len() as f64)
                            } else {
                                at.into_iter().reduce(f64::min)
                            }
                        })
                        .collect();
                    goals.push(GoalRow {
                        goal: g.name.clone(),
                        loss_ratio: g.loss_ratio,
                        measured_loss: median(&losses),
                        mpps: m,
                        mpps_min: lo,
                        mpps_max: hi,
                        gbps_l2: m * 1e6 * size as f64 * 8.0 / 1e9,
                        gbps_l1: m * 1e6 * (size as f64 + 20.0) * 8.0 / 1e9,
                        forwarding_mpps: median(&fwd),
                        irregular: reports
                            .iter()
                            .filter(|r| r.goals.get(i).is_some_and(|g| !g.regular))
                            .count(),
                    });
                }
            }
            let (mrr, mrr_lo, mrr_hi) =
                median_min_max(&used.iter().map(|o| o.mrr_pps / 1e6).collect::<Vec<_>>());
            let mut latency = Vec::new();
            if let Some(first) = used.first() {
                for p in &first.latency {
                    let at: Vec<Latency> = used
                        .iter()
                        .filter_map(|o| o.latency.iter().find(|q| q.fraction == p.fraction))
                        .map(|q| q.latency)
                        .collect();
                    let med = |f: fn(&Latency) -> u64| {
                        median(&at.iter().map(|l| f(l) as f64).collect::<Vec<_>>()) as u64
                    };
                    latency.push((
                        p.fraction,
                        Latency {
                            min_ns: med(|l| l.min_ns),
                            p50_ns: med(|l| l.p50_ns),
                            p90_ns: med(|l| l.p90_ns),
                            p99_ns: med(|l| l.p99_ns),
                            p999_ns: med(|l| l.p999_ns),
                            max_ns: med(|l| l.max_ns),
                        },
                    ));
                }
            }
            let mut node_ns = Vec::new();
            if let Some(first) = used.first() {
                for (name, _) in &first.node_ns {
                    let v: Vec<f64> = used
                        .iter()
                        .filter_map(|o| o.node_ns.iter().find(|(n, _)| n == name).map(|p| p.1))
                        .collect();
                    node_ns.push((name.clone(), median(&v)));
                }
            }
            out.push(SearchRow {
                dut,
                size,
                goals,
                mrr_mpps: mrr,
                mrr_min: mrr_lo,
                mrr_max: mrr_hi,
                latency,
                searches: used.len(),
                basis,
                searches_run: all.len(),
                disagreeing: used.iter().map(|o| o.disagreeing()).sum(),
                generator_short: used
                    .iter()
                    .flat_map(|o| &o.trials)
                    .filter(|t| t.m.shortfall > 0 && t.redone.is_none())
                    .count(),
                redone: used
                    .iter()
                    .flat_map(|o| &o.trials)
                    .filter(|t| t.redone.is_some())
                    .count(),
                paired_ratio: reference_for(duts, dut)
                    .filter(|r| *r != dut)
                    .and_then(|r| paired_ratio(outcomes, size, dut, r)),
                node_ns,
            });
        }
    }
    out
}

/// The first goal's result of a successful search (the receive rate for MRR).
fn first_goal_pps(o: &Outcome) -> Option<f64> {
    if o.error.is_some() {
        return None;
    }
    o.search.as_ref()?.goals.first()?.result_pps()
}

/// One DUT's first-goal result over a reference DUT's, repetition by repetition.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedRatio {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Pairs behind it: repetitions where both searches succeeded in `placement`.
    pub pairs: usize,
    /// The placement both searches of every pair ran in; `None` when no placement is shared
    /// by both searches of any pair, and the pairs are taken as they came.
    pub placement: Option<Placement>,
}

/// `dut` over `reference` at `size`, repetition by repetition (see
/// [`SearchRow::paired_ratio`]). A pair counts only when both searches ran in the same
/// placement, near pairs first, else mid, else far: memif is cross-core traffic, so the two
/// DUTs' ratio itself moves with the placement (at 1500 B testpmd lost more than veclane in
/// the mid state), and a ratio is comparable with another run's only in the same one.
pub fn paired_ratio(
    outcomes: &[Outcome],
    size: usize,
    dut: Subject,
    reference: Subject,
) -> Option<PairedRatio> {
    let find = |d: Subject, rep: usize| {
        outcomes
            .iter()
            .find(|o| o.dut == d && o.size == size && o.rep == rep)
            .and_then(|o| first_goal_pps(o).map(|p| (p, o.placement)))
    };
    let reps = outcomes.iter().map(|o| o.rep + 1).max().unwrap_or(0);
    let pairs: Vec<(f64, Placement, Placement)> = (0..reps)
        .filter_map(|rep| match (find(dut, rep), find(reference, rep)) {
            (Some((a, pa)), Some((b, pb))) if b > 0.0 => Some((a / b, pa, pb)),
            _ => None,
        })
        .collect();
    let shared = Placement::preferred(|p| pairs.iter().any(|&(_, a, b)| a == p && b == p));
    let v: Vec<f64> = pairs
        .iter()
        .filter(|&&(_, a, b)| shared.is_none_or(|p| a == p && b == p))
        .map(|&(r, _, _)| r)
        .collect();
    (!v.is_empty()).then(|| {
        let (median, min, max) = median_min_max(&v);
        PairedRatio {
            median,
            min,
            max,
            pairs: v.len(),
            placement: shared,
        }
    })
}

/// The DUT `dut`'s ratio column divides by: the last DUT of the run with as many workers.
pub fn reference_for(duts: &[Subject], dut: Subject) -> Option<Subject> {
    duts.iter()
        .rev()
        .find(|r| r.workers == dut.workers)
        .copied()
}

/// The heading of an l3fwd table.
pub fn head(cfg: &L3fwdConfig) -> Vec<String> {
    let mut h = vec![
        format!(
            "L3 forwarding over memif: generator (zero-copy memif secondary, sends on id 0 and receives on id 1 in one loop) on CPU {}, DUT on CPU {}; ring 2^{}, buffer {} B, burst {}; {} search(es) per DUT and size, DUTs interleaved",
            cfg.gen_cpu,
            match cfg.dut_cpus.as_slice() {
                [one] => one.to_string(),
                more => format!("{more:?} (worker i on the i-th)"),
            },
            cfg.ring_log2,
            cfg.buffer_size,
            cfg.burst,
            cfg.reps,
        ),
        cfg.topology.describe(),
        format!("search: {}", search_summary(&cfg.method)),
        "xN after a DUT: N workers (lcores), each on a CPU of its own polling one queue pair of both interfaces; the generator opens N queue pairs and sends its bursts to them in turn; the ratio column divides by the last DUT with as many workers".into(),
        format!(
            "MRR = receive rate of a {} s flat-out trial (the generator held back by a full ring); the search runs between MRR/1000 and {} x MRR, the generator acting as a port on a wire: frames a full ring refuses are lost",
            cfg.mrr_secs, cfg.max_load_factor
        ),
        "result Mpps = the search's result (the highest load that passed), median (min-max) over the searches in the basis placement: near/mid/far = one-way cache-line transfer between the two CPUs <130 / 130-280 / >280 ns, probed before the DUT starts and after it stops: near searches when there are any, else mid, else far ('all' when every search was cut by a flip), 'x3 (of 5)' how many; the ratio column pairs each repetition's searches of two DUTs, run back to back, when both ran in one placement (near pairs first)".into(),
        "frame size S = bytes in the memif buffer (Ethernet header to payload end, no FCS); Gbps L2 = S x 8 x pps; Gbps L1 = (S + 20) x 8 x pps (preamble, SFD, inter-frame gap); loss = frames offered minus frames received (refused by a full ring or short from the generator included)".into(),
    ];
    if cfg.sizes.iter().any(|&z| z > cfg.buffer_size as usize) {
        h.push(format!(
            "frames larger than {} B use 9216-byte memif buffers in every DUT",
            cfg.buffer_size
        ));
    }
    h
}

/// The method and its parameters on one line.
pub fn search_summary(m: &Method) -> String {
    serde_json::to_string(m).unwrap_or_default()
}

/// The result table: one line per (size, DUT).
pub fn table(cfg: &L3fwdConfig, rows: &[SearchRow]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for l in head(cfg) {
        let _ = writeln!(s, "{l}");
    }
    let goal_names: Vec<String> = rows
        .iter()
        .find(|r| !r.goals.is_empty())
        .map(|r| r.goals.iter().map(|g| g.goal.clone()).collect())
        .unwrap_or_default();
    let lat_at = cfg
        .latency_at
        .iter()
        .copied()
        .find(|&f| (f - 0.5).abs() < 1e-9)
        .or(cfg.latency_at.first().copied());
    let reference = cfg.duts.last().copied();
    let mut header = format!("{:>5}  {:<18}", "size", "dut");
    for (i, g) in goal_names.iter().enumerate() {
        let _ = write!(header, "  {:>22}", format!("{g} Mpps (min-max)"));
        if i == 0 {
            let _ = write!(header, "  {:>13}  {:>8}", "Gbps L2/L1", "loss");
        }
    }
    let _ = write!(header, "  {:>8}", "MRR Mpps");
    if let Some(f) = lat_at {
        let _ = write!(
            header,
            "  {:>20}",
            format!("lat@{:.0}% p50/p99 us", f * 100.0)
        );
    }
    if let Some(r) = reference {
        let _ = write!(header, "  {:>26}", format!("/{} paired", r.dut));
    }
    let _ = write!(header, "  basis");
    let _ = writeln!(s, "\n{header}");
    for &size in &cfg.sizes {
        for r in rows.iter().filter(|r| r.size == size) {
            let mut line = format!("{:>5}  {:<18}", size, r.dut.to_string());
            for (i, g) in r.goals.iter().enumerate() {
                let _ = write!(
                    line,
                    "  {:>22}",
                    format!("{:.3} ({:.3}-{:.3})", g.mpps, g.mpps_min, g.mpps_max)
                );
                if i == 0 {
                    let _ = write!(
                        line,
                        "  {:>13}  {:>8.1e}",
                        format!("{:.1}/{:.1}", g.gbps_l2, g.gbps_l1),
                        g.measured_loss
                    );
                }
            }
            let _ = write!(line, "  {:>8.3}", r.mrr_mpps);
            if let Some(f) = lat_at {
                let cell = r
                    .latency
                    .iter()
                    .find(|(x, _)| *x == f)
                    .map(|(_, l)| {
                        format!("{:.1}/{:.1}", l.p50_ns as f64 / 1e3, l.p99_ns as f64 / 1e3)
                    })
                    .unwrap_or_else(|| "-".into());
                let _ = write!(line, "  {cell:>20}");
            }
            if reference.is_some() {
                let ratio = match r.paired_ratio {
                    Some(p) => format!(
                        "{:.2} ({:.2}-{:.2}) {} x{}",
                        p.median,
                        p.min,
                        p.max,
                        p.placement.map_or("all".to_string(), |b| b.to_string()),
                        p.pairs
                    ),
                    None if Some(r.dut) == reference_for(&cfg.duts, r.dut) => "1".into(),
                    None => "-".into(),
                };
                let _ = write!(line, "  {ratio:>26}");
            }
            let basis = r.basis.map_or("all".to_string(), |b| b.to_string());
            let mut flags = format!("  {basis} x{}", r.searches);
            if cfg.shares_gen_cpu(r.dut.workers) {
                let _ = write!(
                    flags,
                    " ! a worker shares the generator's CPU {}: not the DUT's rate",
                    cfg.gen_cpu
                );
            }
            if r.searches < r.searches_run {
                let _ = write!(flags, " (of {})", r.searches_run);
            }
            if r.disagreeing > 0 {
                let _ = write!(
                    flags,
                    " ! {} trial(s) disagree with the DUT's counters",
                    r.disagreeing
                );
            }
            if r.generator_short > 0 {
                let _ = write!(
                    flags,
                    " ({} trial(s) with generator shortfall)",
                    r.generator_short
                );
            }
            if r.redone > 0 {
                let _ = write!(flags, " ({} disturbed trial(s) run again)", r.redone);
            }
            let irregular: usize = r.goals.iter().map(|g| g.irregular).sum();
            if irregular > 0 {
                let _ = write!(flags, " ({irregular} irregular)");
            }
            let _ = writeln!(s, "{line}{flags}");
        }
    }
    s
}

/// Where veclane's time goes: nanoseconds per packet per node in the flat-out trial.
pub fn node_table(cfg: &L3fwdConfig, rows: &[SearchRow]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let names = crate::report::named_columns(rows.iter().map(|r| r.node_ns.as_slice()), &["total"]);
    if names.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "veclane show runtime over the flat-out trial, ns per packet (median; memif-input includes empty polls):"
    );
    let mut header = format!("{:>6} {:<16}", "size", "dut");
    crate::report::push_named_cells(&mut header, &names, None);
    let _ = writeln!(s, "{header}");
    for &size in &cfg.sizes {
        for r in rows
            .iter()
            .filter(|r| r.size == size && !r.node_ns.is_empty())
        {
            let mut line = format!("{size:>6} {:<16}", r.dut.to_string());
            crate::report::push_named_cells(&mut line, &names, Some(&r.node_ns));
            let _ = writeln!(s, "{line}");
        }
    }
    s
}

/// CSV: one line per (size, DUT, goal).
pub fn csv(cfg: &L3fwdConfig, rows: &[SearchRow]) -> String {
    let header = [
        "scenario",
        "size",
        "dut",
        "goal",
        "loss_ratio",
        "measured_loss",
        "mpps",
        "mpps_min",
        "mpps_max",
        "gbps_l2",
        "gbps_l1",
        "forwarding_mpps",
        "mrr_mpps",
        "lat50_p50_ns",
        "lat50_p99_ns",
        "searches",
        "basis",
        "disagreeing",
        "paired_ratio",
        "paired_pairs",
        "paired_placement",
        "workers",
        "gen_cpu",
        "dut_cpus",
        "ring_log2",
        "buffer_size",
        "method",
    ];
    let method = search_summary(&cfg.method);
    let mut out = Vec::new();
    for r in rows {
        let lat = r
            .latency
            .iter()
            .find(|(f, _)| (f - 0.5).abs() < 1e-9)
            .map(|(_, l)| *l);
        for g in &r.goals {
            out.push(vec![
                cfg.topology.name().to_string(),
                r.size.to_string(),
                r.dut.to_string(),
                g.goal.clone(),
                g.loss_ratio.to_string(),
                format!("{:.3e}", g.measured_loss),
                format!("{:.4}", g.mpps),
                format!("{:.4}", g.mpps_min),
                format!("{:.4}", g.mpps_max),
                format!("{:.3}", g.gbps_l2),
                format!("{:.3}", g.gbps_l1),
                format!("{:.4}", g.forwarding_mpps),
                format!("{:.4}", r.mrr_mpps),
                lat.map(|l| l.p50_ns.to_string()).unwrap_or_default(),
                lat.map(|l| l.p99_ns.to_string()).unwrap_or_default(),
                r.searches.to_string(),
                r.basis.map_or("all".to_string(), |b| b.to_string()),
                r.disagreeing.to_string(),
                r.paired_ratio
                    .map(|p| format!("{:.4}", p.median))
                    .unwrap_or_default(),
                r.paired_ratio
                    .map(|p| p.pairs.to_string())
                    .unwrap_or_default(),
                r.paired_ratio
                    .map(|p| p.placement.map_or("all".to_string(), |b| b.to_string()))
                    .unwrap_or_default(),
                r.dut.workers.to_string(),
                cfg.gen_cpu.to_string(),
                cfg.worker_cpus(r.dut.workers)
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
                cfg.ring_log2.to_string(),
                cfg.buffer_size.to_string(),
                method.clone(),
            ]);
        }
    }
    crate::csv::to_csv(&header, &out)
}

/// Throughput of the first goal against frame size, one line per DUT with the fewest workers
/// measured (one, normally: seed 000's figure 5).
pub fn size_plot(cfg: &L3fwdConfig, rows: &[SearchRow]) -> Result<String, String> {
    let fewest = cfg.duts.iter().map(|d| d.workers).min().unwrap_or(1);
    let series: Vec<crate::plot::Series> = cfg
        .duts
        .iter()
        .filter(|d| d.workers == fewest)
        .map(|&d| {
            goal_series(d.to_string(), rows.iter().filter(|r| r.dut == d), |r| {
                r.size as f64
            })
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let goal = first_goal_name(rows);
    let ticks: Vec<f64> = cfg.sizes.iter().map(|&s| s as f64).collect();
    let title = format!(
        "L3 forwarding over memif: {goal} against frame size, {}",
        match fewest {
            1 => "one DUT core".to_string(),
            n => format!("{n} DUT cores"),
        }
    );
    let subtitle = format!(
        "generator CPU {}, DUT CPUs {:?}; median of {} search(es), bars min-max",
        cfg.gen_cpu,
        cfg.worker_cpus(fewest),
        cfg.reps
    );
    crate::plot::svg(&crate::plot::Plot {
        title: &title,
        subtitle: &subtitle,
        x_label: "frame size (bytes, no FCS)",
        y_label: "Mpps",
        x_ticks: Some(&ticks),
        series: &series,
    })
}

/// A plot line named `name`: each row's first goal (median, bars min-max) at `x` of the row.
fn goal_series<'r>(
    name: String,
    rows: impl Iterator<Item = &'r SearchRow>,
    x: impl Fn(&SearchRow) -> f64,
) -> crate::plot::Series {
    crate::plot::Series {
        name,
        points: rows
            .filter_map(|r| {
                r.goals.first().map(|g| crate::plot::Point {
                    x: x(r),
                    y: g.mpps,
                    y_min: g.mpps_min,
                    y_max: g.mpps_max,
                })
            })
            .collect(),
    }
}

fn first_goal_name(rows: &[SearchRow]) -> String {
    rows.iter()
        .find_map(|r| r.goals.first().map(|g| g.goal.clone()))
        .unwrap_or_else(|| "throughput".into())
}

/// The worker counts measured, ascending.
pub fn worker_counts(cfg: &L3fwdConfig) -> Vec<u16> {
    let mut w: Vec<u16> = cfg.duts.iter().map(|d| d.workers).collect();
    w.sort_unstable();
    w.dedup();
    w
}

/// Throughput of the first goal at frames of `size` against the DUT's worker count, one line
/// per DUT (seed 000's figure 6). Points whose workers share the generator's CPU are drawn,
/// and the subtitle says which.
pub fn worker_plot(cfg: &L3fwdConfig, rows: &[SearchRow], size: usize) -> Result<String, String> {
    let mut lines: Vec<Subject> = Vec::new();
    for d in &cfg.duts {
        if !lines.contains(&d.line()) {
            lines.push(d.line());
        }
    }
    let series: Vec<crate::plot::Series> = lines
        .iter()
        .map(|&l| {
            goal_series(
                l.to_string(),
                rows.iter().filter(|r| r.size == size && r.dut.line() == l),
                |r| f64::from(r.dut.workers),
            )
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let ticks: Vec<f64> = worker_counts(cfg).iter().map(|&w| f64::from(w)).collect();
    let title = format!(
        "L3 forwarding over memif: {} against DUT cores, {size} B frames",
        first_goal_name(rows)
    );
    let shared: Vec<String> = worker_counts(cfg)
        .into_iter()
        .filter(|&w| cfg.shares_gen_cpu(w))
        .map(|w| w.to_string())
        .collect();
    let mut subtitle = format!(
        "generator CPU {}, DUT CPUs {:?} in order; median of {} search(es), bars min-max",
        cfg.gen_cpu, cfg.dut_cpus, cfg.reps
    );
    if !shared.is_empty() {
        subtitle.push_str(&format!(
            "; at {} worker(s) a worker shares the generator's CPU",
            shared.join(", ")
        ));
    }
    crate::plot::svg(&crate::plot::Plot {
        title: &title,
        subtitle: &subtitle,
        x_label: "DUT worker cores",
        y_label: "Mpps",
        x_ticks: Some(&ticks),
        series: &series,
    })
}

/// A configuration for unit tests that run nothing: one size (64), the given DUTs.
#[cfg(test)]
pub(crate) fn test_config(duts: Vec<Subject>) -> L3fwdConfig {
    L3fwdConfig {
        topology: &TOPOLOGY,
        sizes: vec![64],
        reps: 1,
        duts,
        gen_cpu: 0,
        dut_cpus: vec![1],
        share_gen_cpu: false,
        ring_log2: 12,
        buffer_size: 2048,
        burst: 64,
        wait_near_secs: 0.0,
        method: Method::continuous_default(0.1),
        testpmd_fwd: TestpmdFwd::Io,
        mrr_secs: 1.0,
        warmup_secs: 0.01,
        max_load_factor: 1.1,
        max_redo: 0,
        latency_at: vec![],
        latency_secs: 1.0,
        veclane_bin: PathBuf::new(),
        testpmd_bin: None,
        l3fwd_bin: None,
        vpp_bin: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::model::ModelDut;

    fn outcome(dut: Subject, rep: usize, capacity: f64) -> Outcome {
        let mut m = ModelDut::new(capacity, 1);
        let method = Method::continuous_default(0.1);
        let r = search::search(&method, 1000.0, capacity * 1.5, &mut m, &mut |_| {}).unwrap();
        let mut o = Outcome::failed(dut, 64, rep, String::new());
        o.error = None;
        o.search = Some(r);
        o
    }

    #[test]
    fn only_failures_the_host_explains_are_run_again() {
        let guard = TrialGuard {
            cpus: (0, 1),
            wait_near: Duration::from_secs(1),
            ring_slots: 4096,
            redo_left: 10,
        };
        // 10 Mpps for 0.25 s: 2.5 M frames offered.
        let trial = |received: u64, shortfall: u64| Measurement {
            load_pps: 10e6,
            duration_s: 0.25,
            offered: 2_500_000,
            sent: 2_500_000 - shortfall,
            received,
            shortfall,
            tx_pps: 10e6,
            rx_pps: 10e6,
        };
        let report = |stall_us: f64, gap_us: f64| GenReport {
            max_stall_us: stall_us,
            max_rx_gap_us: gap_us,
            ..Default::default()
        };
        let near = (Some(60.0), Some(70.0));
        let why =
            |m: &Measurement, g: &GenReport, wait: Option<f64>, p: (Option<f64>, Option<f64>)| {
                guard.disturbance(Some(10e6), m, g, wait, p.0, p.1)
            };
        // The CPUs moved apart around the trial while the search waits for near.
        let w = why(
            &trial(2_000_000, 0),
            &report(50.0, 50.0),
            Some(0.0),
            (Some(60.0), Some(190.0)),
        );
        assert!(w.unwrap().contains("placement mixed"));
        // Nothing wrong: the loss is the DUT's.
        assert_eq!(
            why(&trial(2_400_000, 0), &report(50.0, 60.0), Some(10.0), near),
            None
        );
        // Nothing came back for 2 ms while the DUT's worker waited 2.5 ms for its CPU: 20 000
        // frames at this load, more than half a ring, and the 15 000 lost are explained.
        let w = why(
            &trial(2_485_000, 0),
            &report(50.0, 2000.0),
            Some(2500.0),
            near,
        )
        .unwrap();
        assert!(w.contains("DUT's worker off its CPU 2000 us"), "{w}");
        // The same gap with the worker on its CPU throughout is the DUT's own pause.
        assert_eq!(
            why(
                &trial(2_485_000, 0),
                &report(50.0, 2000.0),
                Some(30.0),
                near
            ),
            None
        );
        // The generator paused 3 ms: its shortfall is its own, the DUT lost nothing.
        let w = why(
            &trial(2_460_000, 40_000),
            &report(3000.0, 3000.0),
            Some(0.0),
            near,
        )
        .unwrap();
        assert!(w.contains("generator 40000 frames behind"), "{w}");
        // A DUT that lost far more than the pause explains failed on its own (overload).
        assert_eq!(
            why(
                &trial(2_000_000, 1000),
                &report(3000.0, 3000.0),
                Some(0.0),
                near
            ),
            None
        );
        // Flat out only the placement matters.
        assert_eq!(
            guard.disturbance(
                None,
                &trial(2_000_000, 0),
                &report(9e3, 9e3),
                Some(9e3),
                near.0,
                near.1
            ),
            None
        );
    }

    #[test]
    fn ratios_pair_searches_of_the_same_repetition() {
        let a = Subject::plain(Dut::Veclane);
        let b = Subject::plain(Dut::Testpmd);
        // The host halves every rate in repetition 1: each pair still says 2.
        let v = vec![
            outcome(a, 0, 20e6),
            outcome(b, 0, 10e6),
            outcome(a, 1, 10e6),
            outcome(b, 1, 5e6),
            outcome(a, 2, 16e6),
            outcome(b, 2, 8e6),
        ];
        let p = paired_ratio(&v, 64, a, b).unwrap();
        for x in [p.median, p.min, p.max] {
            assert!((x - 2.0).abs() < 0.02, "{p:?}");
        }
        // No placement shared by a pair (these never probed): all pairs, none named.
        assert_eq!((p.pairs, p.placement), (3, None));
        // A failed search drops its pair, not the others.
        let mut w = v.clone();
        w[3].error = Some("x".into());
        let p = paired_ratio(&w, 64, a, b).unwrap();
        assert!((p.median - 2.0).abs() < 0.02 && p.pairs == 2);
        assert!(paired_ratio(&v, 1500, a, b).is_none());
        let rows = rows(&v, &[64], &[a, b]);
        assert!(rows[0].paired_ratio.is_some() && rows[1].paired_ratio.is_none());
    }

    #[test]
    fn ratios_pair_searches_that_shared_a_placement_near_first() {
        let (a, b) = (Subject::plain(Dut::Veclane), Subject::plain(Dut::Testpmd));
        let at = |d, rep, pps, p| Outcome {
            placement: p,
            ..outcome(d, rep, pps)
        };
        use Placement::{Mid, Near};
        // Repetition 0 both near (2), 1 both mid (3), 2 split (5), 3 both mid (3).
        let mut v = vec![
            at(a, 0, 20e6, Near),
            at(b, 0, 10e6, Near),
            at(a, 1, 15e6, Mid),
            at(b, 1, 5e6, Mid),
            at(a, 2, 20e6, Near),
            at(b, 2, 4e6, Mid),
            at(a, 3, 15e6, Mid),
            at(b, 3, 5e6, Mid),
        ];
        let p = paired_ratio(&v, 64, a, b).unwrap();
        assert!((p.median - 2.0).abs() < 0.02, "{p:?}");
        assert_eq!((p.pairs, p.placement), (1, Some(Near)));
        // Without a near pair, the mid pairs; the split one never counts.
        v[1].placement = Mid;
        let p = paired_ratio(&v, 64, a, b).unwrap();
        assert!((p.median - 3.0).abs() < 0.02, "{p:?}");
        assert_eq!((p.pairs, p.placement), (2, Some(Mid)));
    }

    #[test]
    fn a_row_is_the_median_of_one_placement_near_first() {
        let b = Subject::plain(Dut::Testpmd);
        let at = |rep, pps, p| Outcome {
            placement: p,
            ..outcome(b, rep, pps)
        };
        use Placement::{Mid, Mixed, Near};
        let mut v = vec![
            at(0, 12e6, Mid),
            at(1, 35e6, Near),
            at(2, 13e6, Mixed),
            at(3, 13e6, Mid),
            at(4, 34e6, Near),
        ];
        let r = &rows(&v, &[64], &[b])[0];
        assert_eq!((r.basis, r.searches, r.searches_run), (Some(Near), 2, 5));
        assert!((r.goals[0].mpps - 34.5).abs() < 0.4, "{r:?}");
        // No near search: the mid ones.
        for o in v.iter_mut().filter(|o| o.placement == Near) {
            o.placement = Mixed;
        }
        let r = &rows(&v, &[64], &[b])[0];
        assert_eq!((r.basis, r.searches), (Some(Mid), 2));
        assert!(r.goals[0].mpps < 13.5, "{r:?}");
        // Every search cut by a flip: all of them, no basis named.
        for o in v.iter_mut() {
            o.placement = Mixed;
        }
        assert_eq!(rows(&v, &[64], &[b])[0].basis, None);
    }

    #[test]
    fn ratios_divide_by_the_reference_with_as_many_workers() {
        let v = Subject::plain(Dut::Veclane);
        let t = Subject::plain(Dut::Testpmd);
        let duts = [v, t, v.with_workers(2), t.with_workers(2)];
        assert_eq!(reference_for(&duts, v), Some(t));
        assert_eq!(
            reference_for(&duts, v.with_workers(2)),
            Some(t.with_workers(2))
        );
        assert_eq!(reference_for(&duts, v.with_workers(3)), None);
        assert_eq!(v.with_workers(2).to_string(), "veclane x2");
        assert_eq!(v.with_workers(2).line(), v);
    }

    #[test]
    fn dut_cpus_are_checked_against_workers_and_the_generator() {
        let v = Subject::plain(Dut::Veclane);
        let mut c = test_config(vec![v, v.with_workers(2)]);
        let e = c.check().unwrap_err();
        assert!(e.contains("veclane x2 needs 2 DUT CPUs"), "{e}");
        c.dut_cpus = vec![1, 0];
        let e = c.check().unwrap_err();
        assert!(
            e.contains("generator's CPU 0") && e.contains("--share-gen-cpu"),
            "{e}"
        );
        assert!(!c.shares_gen_cpu(1) && c.shares_gen_cpu(2));
        c.share_gen_cpu = true;
        c.check().unwrap();
        c.dut_cpus = vec![1, 1];
        assert!(c.check().unwrap_err().contains("listed twice"));
        // The probe pairs the generator's CPU with the first DUT CPU: never the same one.
        c.dut_cpus = vec![0, 1];
        assert!(c.check().unwrap_err().contains("first DUT CPU"));
        c.dut_cpus = vec![1, 2];
        c.share_gen_cpu = false;
        c.check().unwrap();
        assert_eq!(c.worker_cpus(2), [1, 2]);
        let conf = veclane_config(&c, CopyMode::Single, 64, 2);
        assert_eq!(conf.daemon.workers, [1, 2]);
        // On any machine (cores 0 and 1 exist): the daemon reads back what the harness wrote.
        let conf = veclane_config(&c, CopyMode::Two, 1500, 1);
        assert_eq!(conf.daemon.workers, [1]);
        assert_eq!(
            api::Config::parse(&conf.to_toml(), "l3fwd").unwrap(),
            conf,
            "{}",
            conf.to_toml()
        );
        let g = gen_config(&c, Path::new("/s"), 64, 2);
        assert_eq!((g.iface.s2m_rings, g.iface.m2s_rings), (2, 2));
    }

    #[test]
    fn a_run_far_short_of_its_schedule_offered_the_whole_schedule() {
        let g = GenReport {
            tx_offered: 10,
            tx_packets: 10,
            rx_packets: 10,
            ..Default::default()
        };
        let m = measurement(Some(1e6), Duration::from_secs(1), &g);
        assert_eq!(m.offered, 1_000_000);
        assert!(m.loss_ratio() > 0.99);
        // A run that offered nearly its schedule keeps its own count.
        let g = GenReport {
            tx_offered: 999_990,
            ..g
        };
        assert_eq!(
            measurement(Some(1e6), Duration::from_secs(1), &g).offered,
            999_990
        );
    }

    #[test]
    fn every_csv_line_has_the_header_s_fields() {
        let a = Subject::plain(Dut::Veclane);
        let b = Subject::plain(Dut::Testpmd);
        let v = vec![outcome(a, 0, 20e6), outcome(b, 0, 10e6)];
        let cfg = test_config(vec![a, b]);
        let text = csv(&cfg, &rows(&v, &[64], &[a, b]));
        // The method echo holds commas inside quotes: count fields outside them.
        let fields = |l: &str| {
            let mut n = 1;
            let mut quoted = false;
            for c in l.chars() {
                match c {
                    '"' => quoted = !quoted,
                    ',' if !quoted => n += 1,
                    _ => {}
                }
            }
            n
        };
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        for l in &lines[1..] {
            assert_eq!(fields(l), fields(lines[0]), "{l}");
        }
    }

    #[test]
    fn the_worker_plot_draws_a_line_per_dut_across_worker_counts() {
        let (a, b) = (Subject::plain(Dut::Veclane), Subject::plain(Dut::Testpmd));
        let (a2, b2) = (a.with_workers(2), b.with_workers(2));
        let duts = vec![a, b, a2, b2];
        let v = vec![
            outcome(a, 0, 20e6),
            outcome(b, 0, 10e6),
            outcome(a2, 0, 36e6),
            outcome(b2, 0, 19e6),
        ];
        let mut cfg = test_config(duts.clone());
        cfg.dut_cpus = vec![1, 2];
        let rows = rows(&v, &[64], &duts);
        assert_eq!(worker_counts(&cfg), [1, 2]);
        let svg = worker_plot(&cfg, &rows, 64).unwrap();
        assert!(
            svg.contains("DUT worker cores") && svg.contains("64 B frames"),
            "{svg}"
        );
        // One line per DUT (named without the worker count), not one per column.
        assert!(
            svg.contains("\nveclane\n") && svg.contains("\ntestpmd\n"),
            "{svg}"
        );
        assert!(!svg.contains(" x2\n") && !svg.contains("shares"), "{svg}");
        // The size plot keeps to one worker.
        assert!(!size_plot(&cfg, &rows).unwrap().contains(" x2\n"));
        // A worker on the generator's CPU is said.
        cfg.dut_cpus = vec![1, 0];
        assert!(
            worker_plot(&cfg, &rows, 64)
                .unwrap()
                .contains("a worker shares the generator")
        );
        // x2 divides by testpmd x2.
        let r = rows.iter().find(|r| r.dut == a2).unwrap();
        assert!((r.paired_ratio.unwrap().median - 36.0 / 19.0).abs() < 0.05);
    }
}
