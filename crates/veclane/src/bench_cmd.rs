//! `veclane bench`.

use anyhow::bail;
use bench::l3fwd::Topology;
use bench::l3fwd::{self, L3fwdConfig};
use bench::p2p::{self, P2pConfig};
use bench::report::{self, Environment, Report};
use bench::scenario::Kind;
use bench::search::Method;
use bench::trial::Trial;
use bench::{CopyMode, Dut, Subject};
use clap::{Args, ValueEnum};

/// The scenario names `bench::scenario::registry` knows, with their help lines.
fn scenario_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        bench::scenario::registry()
            .into_iter()
            .map(|s| clap::builder::PossibleValue::new(s.name).help(s.about)),
    )
}

/// The copy modes as clap values, spelled as everywhere else (`api::CopyMode`).
fn copy_modes() -> impl clap::builder::TypedValueParser<Value = CopyMode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(CopyMode::ALL.iter().map(|m| m.name()))
        .map(|s| s.parse::<CopyMode>().expect("one of the possible values"))
}

fn copy_engines() -> impl clap::builder::TypedValueParser<Value = api::CopyEngine> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(api::CopyEngine::ALL.iter().map(|m| m.name())).map(
        |s| {
            s.parse::<api::CopyEngine>()
                .expect("one of the possible values")
        },
    )
}

/// The copy engines of `asked` this host can run, in order; one it cannot (DSA without a
/// usable work queue) is left out, with the reason printed, so that its column is skipped
/// rather than the run failing. `dsa_queue` is the daemons' `dsa-queue` (`model`: always
/// usable).
fn usable_engines(asked: &[api::CopyEngine], dsa_queue: Option<&str>) -> Vec<api::CopyEngine> {
    use copy_engine::dsa::{DsaPool, Source};
    asked
        .iter()
        .copied()
        .filter(|&e| {
            if e != api::CopyEngine::Dsa {
                return true;
            }
            match DsaPool::new(Source::from_setting(dsa_queue, 0)).unusable() {
                None => true,
                Some(why) => {
                    println!("skipped: copy engine dsa: {why}");
                    false
                }
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DutArg {
    Veclane,
    Testpmd,
    /// DPDK's l3fwd example (l3fwd scenario; built by scripts/setup.sh).
    DpdkL3fwd,
    /// VPP (l3fwd, singlenet and multinet; --vpp-bin, else vpp on PATH, else the build
    /// scripts/build-vpp.sh left in its cache).
    Vpp,
    /// No DUT (l3fwd): a memif master that only hands frames from id 0 to id 1, on the DUT's
    /// CPU. The generator's ceiling: DUTs within 10% of it are flagged generator-bound.
    None,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum SearchArg {
    /// MLRsearch (RFC 9971): NDR (loss 0) and PDR (--pdr) in one search.
    Mlr,
    /// RFC 2544 §26.1 binary search for the highest rate with loss ratio <= --loss-ratio.
    Rfc2544,
    /// Binary search with loss verification (RFC 8204 / VSPERF): failing trials repeated up
    /// to --max-repeat times, any pass counts.
    LossVerification,
    /// TRex NDR bench: first trial at max load, then binary search with --pdr (default 0.1%)
    /// and a 2% queue-full threshold.
    TrexNdr,
    /// Continuous throughput: the receive rate at max load, no search.
    Continuous,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DirectionArg {
    In,
    Out,
    Both,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum UnderlayArg {
    /// A memif the DUT treats as an uplink: the two CPUs measure the switch.
    Memif,
    /// A veth pair in a namespace of the harness's, the DUT's end an AF_PACKET uplink.
    AfPacket,
    /// A veth pair, the DUT's end an AF_XDP uplink (veth MTU 3000: pod frames up to 2964 B,
    /// 3014 with VXLAN).
    AfXdp,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum InterleaveArg {
    Searches,
    Trials,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TestpmdFwdArg {
    Io,
    Mac,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(default_value = "p2p", value_parser = scenario_names())]
    scenario: String,
    /// Frame sizes in bytes (no FCS), or imix (searched scenarios: 64, 570 and 1518 bytes
    /// 7:4:1) [default: p2p 64,128,256,512,1024,1500,9000; searched 64,128,256,512,1024,1500].
    #[arg(long, value_delimiter = ',', value_parser = bench::trial::parse_size)]
    sizes: Vec<usize>,
    /// Devices under test, interleaved in this order [default: veclane,testpmd; singlenet and
    /// multinet: veclane].
    #[arg(long, value_enum, value_delimiter = ',')]
    dut: Vec<DutArg>,
    /// singlenet and multinet: networks, each with a pod interface of its own; the remote
    /// node's frames are spread over them.
    #[arg(long, default_value_t = 1)]
    networks: u16,
    /// singlenet and multinet: which way frames go: into the pods (in: multinet decapsulates),
    /// out of them (out: multinet encapsulates), or both at once.
    #[arg(long, value_enum, default_value = "both")]
    direction: DirectionArg,
    /// singlenet and multinet (veclane): how the remote node reaches the DUT's uplink; over a
    /// veth the generator's end is AF_PACKET and the rates include the kernel's path (needs
    /// root).
    #[arg(long, value_enum, default_value = "memif")]
    underlay: UnderlayArg,
    /// pvp: the pod's CPU [default: the generator's: on two CPUs a third busy loop shares one].
    #[arg(long)]
    pod_cpu: Option<usize>,
    /// Seconds of traffic per trial [default: p2p 2; l3fwd 0.25] (l3fwd mlr: the final trial
    /// duration, the duration sum being 21 times it).
    #[arg(long)]
    trial_secs: Option<f64>,
    /// Throughput search (l3fwd).
    #[arg(long, value_enum, default_value = "loss-verification")]
    search: SearchArg,
    /// Loss ratio a trial may have and pass (rfc2544, loss-verification); 0 is zero loss.
    #[arg(long, default_value_t = 0.0)]
    loss_ratio: f64,
    /// Loss ratio of the PDR goal (mlr, default 0.005) or TRex's pdr (trex-ndr, default 0.001).
    #[arg(long)]
    pdr: Option<f64>,
    /// Stop when the bounds are this close, as a share of the maximum load (rfc2544,
    /// loss-verification).
    #[arg(long, default_value_t = 0.01)]
    precision: f64,
    /// Seconds of the final trial at the found rate (rfc2544; 0: none).
    #[arg(long, default_value_t = 0.0)]
    final_trial_secs: f64,
    /// Repeats of a failing trial (loss-verification).
    #[arg(long, default_value_t = 3)]
    max_repeat: u32,
    /// Seconds of the flat-out trial before each search (l3fwd); its receive rate times 1.1
    /// is the search's maximum load.
    #[arg(long, default_value_t = 1.0)]
    mrr_secs: f64,
    /// Milliseconds of traffic at a trial's load before its counted window (l3fwd), left out
    /// of every count: after the pause between trials a DUT starts with cold caches (here
    /// its first 2 ms forwarded at a third of its rate), which a 0.1 s trial must not
    /// measure; 0 counts from the first frame.
    #[arg(long, default_value_t = 10.0)]
    warmup_ms: f64,
    /// Fractions of the first goal's result at which latency is measured (l3fwd; none: "").
    #[arg(long, default_value = "0.1,0.5,0.9", value_parser = fractions)]
    latency_at: Fractions,
    /// Seconds of each latency trial.
    #[arg(long, default_value_t = 0.5)]
    latency_secs: f64,
    /// Trials per (DUT, size); the table shows the median.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// veclane's copy modes to measure (l3fwd), each a column of its own.
    #[arg(long, value_parser = copy_modes(), value_delimiter = ',', default_values_t = [CopyMode::Single, CopyMode::Two])]
    copy: Vec<CopyMode>,
    /// What executes veclane's payload copies, each a column of its own (searched scenarios):
    /// cpu (inline), thread (a copy thread), dsa (an Intel DSA work queue: skipped, saying
    /// why, on a host without one) or auto.
    #[arg(long, value_parser = copy_engines(), value_delimiter = ',', default_values_t = [api::CopyEngine::Cpu])]
    copy_engine: Vec<api::CopyEngine>,
    /// The daemons' `dsa-queue`: a work queue (`wq0.0`, `/dev/dsa/wq0.0`), or `model` for the
    /// software model (for --cost of the engine's own work; its rates mean nothing).
    #[arg(long)]
    dsa_queue: Option<String>,
    /// CPU of the sender (p2p) or the generator (l3fwd).
    #[arg(long, visible_alias = "gen-cpu", default_value_t = 0)]
    sender_cpu: usize,
    /// CPU of the receiver (p2p) or the device under test (l3fwd).
    #[arg(long, visible_alias = "dut-cpu", default_value_t = 1)]
    receiver_cpu: usize,
    /// DUT worker counts to measure (l3fwd), each DUT with each count: N workers (lcores) on
    /// the first N CPUs of --dut-cpus, each polling one queue pair of both interfaces. Two or
    /// more also write a plot of throughput against workers.
    #[arg(long, value_delimiter = ',', default_values_t = [1u16])]
    workers: Vec<u16>,
    /// The DUT's CPUs, in the order workers take them (l3fwd) [default: --receiver-cpu].
    #[arg(long, value_delimiter = ',')]
    dut_cpus: Vec<usize>,
    /// Let DUT workers run on the generator's CPU (l3fwd): on a machine with too few CPUs this
    /// still exercises N workers, but the rates measure two busy loops taking turns, and the
    /// table flags them.
    #[arg(long)]
    share_gen_cpu: bool,
    /// Generator frames per burst (l3fwd).
    #[arg(long, default_value_t = 64)]
    burst: usize,
    /// log2 of the memif ring size [default: p2p 10; l3fwd and the node scenarios at most 12,
    /// whose 4096 slots ride out the shorter stalls of a shared host that would otherwise
    /// decide every zero-loss search, and fewer where the rings a trial keeps busy would hold
    /// over 8 MiB of frames (a mix counted at its largest) or span over 16 MiB of buffers, so
    /// that they stay in the cache: l3fwd 2^12 up to 1024 B, 2^11 at 1500 B and IMIX, 2^8 at
    /// 9000 B; the node scenarios with one network 2^11 up to 1024 B, 2^10 at 1500 B and
    /// IMIX, 2^8 at 9000 B].
    #[arg(long)]
    ring_log2: Option<u8>,
    /// The generator reads every frame that comes back whole and checks the bytes after its
    /// probe against what was sent; a trial with a frame that differs fails, and so does its
    /// search (l3fwd and the node scenarios). It costs the generator the reading, so its
    /// ceiling drops: for checking DUTs, not for rates.
    #[arg(long)]
    check_payload: bool,
    #[arg(long, default_value_t = 2048)]
    buffer_size: u32,
    /// Directory for the reports (JSON, CSV, SVG) [default: $VECLANE_RESULTS, else
    /// $XDG_DATA_HOME/veclane/results, else ~/.local/share/veclane/results: outside any
    /// checkout, so that runs do not pile up in a repository].
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Before each trial, wait up to this many seconds for the two CPUs to share a cache
    /// (0: do not wait; every trial is tagged near, far or mixed either way).
    #[arg(long, default_value_t = 10.0)]
    wait_near: f64,
    /// l3fwd: trials a search may run again when the host disturbed one that failed (the CPUs
    /// not near around it while waiting for near, or a pause longer than half a ring holds at
    /// its load); each stays in the JSON with its reason.
    #[arg(long, default_value_t = 10)]
    max_redo: usize,
    /// Searched scenarios: how the DUTs' searches at one (repetition, size) share the time.
    /// `trials`: all at once, their trials taking turns, each DUT stopped (SIGSTOP) outside
    /// its own, so that the DUTs of a pair are measured a fraction of a second apart instead
    /// of a search or more apart. `searches`: one whole search after another.
    #[arg(long, value_enum, default_value_t = InterleaveArg::Trials)]
    interleave: InterleaveArg,
    /// Instead of rates: instructions per packet under callgrind of veclane (whole daemon and
    /// per node, each copy mode) and testpmd (whole process), at each size (l3fwd).
    #[arg(long)]
    cost: bool,
    /// Frames per --cost measurement.
    #[arg(long, default_value_t = 300_000)]
    cost_frames: u64,
    /// Keep each --cost callgrind profile (per-instruction counts) in this directory, as
    /// callgrind.DUT.SIZE.out, to see with callgrind_annotate where the instructions go.
    #[arg(long)]
    cost_profiles: Option<std::path::PathBuf>,
    /// --cost with at most this many frames in flight (the generator's --window): the DUT
    /// then polls frames of at most this many packets, as under a load it keeps up with,
    /// and its fixed costs per frame count. Default: flat out (full 256-packet frames).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    cost_window: Option<u64>,
    /// testpmd's forwarding in l3fwd: io (frames untouched) or mac (MACs rewritten).
    #[arg(long, value_enum, default_value = "io")]
    testpmd_fwd: TestpmdFwdArg,
    /// VPP's binary, for --dut vpp.
    #[arg(long)]
    vpp_bin: Option<std::path::PathBuf>,
    /// Print the seeds' published tables (seed 000 Tables 5-8, seed 001 Tables 5-6, converted to
    /// Mpps) beside ours (searched scenarios; the core-scaling tables with --workers at 1024 B).
    #[arg(long)]
    compare_seed: bool,
    /// Skip testpmd (instead of failing) when it is not installed.
    #[arg(long)]
    allow_missing_peer: bool,
}

impl BenchArgs {
    /// Where the reports go: `--out`, else the default its help names.
    fn out_dir(&self) -> std::path::PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| default_out_dir(|k| std::env::var_os(k).filter(|v| !v.is_empty())))
    }
}

/// `--out`'s default, from the environment `var` reads.
fn default_out_dir(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> std::path::PathBuf {
    if let Some(d) = var("VECLANE_RESULTS") {
        return d.into();
    }
    let data = var("XDG_DATA_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| var("HOME").map(|h| std::path::Path::new(&h).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir);
    data.join("veclane/results")
}

/// A comma-separated list of fractions, possibly empty.
#[derive(Debug, Clone)]
struct Fractions(Vec<f64>);

fn fractions(s: &str) -> Result<Fractions, String> {
    s.split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|f| {
            f.parse::<f64>()
                .map_err(|e| format!("{f:?} is not a number: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Fractions)
}

/// Progress of a run of searches: a bar on a terminal (with the trial in flight), one line per
/// finished search otherwise (CI logs).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
}

impl Progress {
    fn new(total: usize) -> Progress {
        use std::io::IsTerminal as _;
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} searches  {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Progress { bar, total }
    }

    fn trial(&self, dut: Subject, size: usize, m: &bench::search::Measurement) {
        if let Some(b) = &self.bar {
            b.set_message(format!(
                "{dut} {} B: {:.3} Mpps offered, loss {:.2e}",
                bench::trial::size_label(size),
                m.load_pps / 1e6,
                m.loss_ratio()
            ));
        }
    }

    fn finished(&self, done: usize, o: &l3fwd::Outcome) {
        let line = match (&o.error, &o.search) {
            (None, Some(s)) => {
                let goals: Vec<String> = s
                    .goals
                    .iter()
                    .map(|g| {
                        let v = g.result_pps();
                        format!(
                            "{} {}",
                            g.name,
                            v.map_or("-".into(), |v| format!("{:.3} Mpps", v / 1e6))
                        )
                    })
                    .collect();
                format!(
                    "[{done}/{}] {:<14} {:>5} B  rep {}  MRR {:.3} Mpps  {}  ({} trials, {:.1} s of traffic)  {} ({:.0}/{:.0} ns){}",
                    self.total,
                    o.dut.to_string(),
                    bench::trial::size_label(o.size),
                    o.rep,
                    o.mrr_pps / 1e6,
                    goals.join("  "),
                    o.trials.len(),
                    s.total_trial_s,
                    o.placement,
                    o.probe_before_ns,
                    o.probe_after_ns,
                    if o.disagreeing() > 0 {
                        format!("  COUNTERS DISAGREE in {} trial(s)", o.disagreeing())
                    } else {
                        String::new()
                    }
                )
            }
            (e, _) => format!(
                "[{done}/{}] {:<14} {:>5} B  rep {}  FAILED: {}",
                self.total,
                o.dut.to_string(),
                bench::trial::size_label(o.size),
                o.rep,
                e.as_deref().unwrap_or("no result")
            ),
        };
        match &self.bar {
            Some(b) => {
                b.println(line);
                b.set_position(done as u64);
            }
            None => eprintln!("{line}"),
        }
    }

    fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn print_trial(done: usize, total: usize, t: &Trial) {
    match &t.error {
        None => eprintln!(
            "[{done}/{total}] {:<14} {:>5} B  rep {}  {:>7.3} Mpps  tx {} rx {} lost {}  {} ({:.0}/{:.0} ns){}",
            t.dut.to_string(),
            t.size,
            t.rep,
            t.mpps,
            t.tx_packets,
            t.rx_packets,
            t.lost,
            t.placement,
            t.probe_before_ns,
            t.probe_after_ns,
            if t.disagreements.is_empty() {
                String::new()
            } else {
                format!("  COUNTERS DISAGREE: {}", t.disagreements.join("; "))
            }
        ),
        Some(e) => eprintln!(
            "[{done}/{total}] {:<14} {:>5} B  rep {}  FAILED: {e}",
            t.dut.to_string(),
            t.size,
            t.rep
        ),
    }
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let scenario = bench::scenario::find(&a.scenario).map_err(anyhow::Error::msg)?;
    let topology = match scenario.kind {
        Kind::Continuous => None,
        Kind::Searched(t) => Some(t),
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
        None => run_p2p(&a, trial_secs, sizes, duts, testpmd_bin),
        Some(t) => run_l3fwd(&a, t, trial_secs, sizes, duts, testpmd_bin),
    }
}

/// Writes the JSON report of a run (its configuration, rows and trials) and fails the command
/// if any trial failed.
fn finish<C: serde::Serialize>(
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

/// The search `a` asks for, with trials of `trial_secs`.
fn method(a: &BenchArgs, trial_secs: f64) -> anyhow::Result<Method> {
    let ratio = |name: &str, v: f64| {
        if (0.0..1.0).contains(&v) {
            Ok(v)
        } else {
            Err(anyhow::anyhow!("--{name} {v} must be in [0, 1)"))
        }
    };
    if !(a.precision > 0.0 && a.precision < 1.0) {
        bail!("--precision {} must be in (0, 1)", a.precision);
    }
    if !(a.final_trial_secs >= 0.0 && a.final_trial_secs.is_finite()) {
        bail!(
            "--final-trial-secs {} must be 0 or more",
            a.final_trial_secs
        );
    }
    Ok(match a.search {
        SearchArg::Mlr => {
            let mut m = Method::mlr_default(trial_secs);
            if let (Method::Mlr { goals, .. }, Some(p)) = (&mut m, a.pdr) {
                for g in goals.iter_mut().filter(|g| g.loss_ratio > 0.0) {
                    g.loss_ratio = ratio("pdr", p)?;
                }
            }
            m
        }
        SearchArg::Rfc2544 => Method::Rfc2544 {
            loss_ratio: ratio("loss-ratio", a.loss_ratio)?,
            trial_s: trial_secs,
            final_trial_s: a.final_trial_secs,
            precision: a.precision,
        },
        SearchArg::LossVerification => Method::BinaryLossVerification {
            loss_ratio: ratio("loss-ratio", a.loss_ratio)?,
            trial_s: trial_secs,
            max_repeat: a.max_repeat,
            precision: a.precision,
        },
        SearchArg::TrexNdr => {
            let mut m = Method::trex_ndr_default(trial_secs, trial_secs);
            if let (Method::TrexNdr { pdr, .. }, Some(p)) = (&mut m, a.pdr) {
                *pdr = ratio("pdr", p)?;
            }
            m
        }
        SearchArg::Continuous => Method::Continuous {
            trial_s: trial_secs,
            trials: 1,
        },
    })
}

/// A searched scenario on `topology` (`l3fwd`, ...).
fn run_l3fwd(
    a: &BenchArgs,
    topology: &'static dyn Topology,
    trial_secs: f64,
    sizes: Vec<usize>,
    duts: Vec<Dut>,
    testpmd_bin: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    // The DUTs in the order --dut names them: that is the order they run in, in every
    // repetition (veclane's copy modes and engines in their own options' order).
    let mut base = Vec::new();
    for d in &duts {
        if base.iter().any(|s: &Subject| s.dut == *d) {
            continue;
        }
        if *d == Dut::Veclane {
            for c in &a.copy {
                for e in &usable_engines(&a.copy_engine, a.dsa_queue.as_deref()) {
                    base.push(Subject {
                        copy: Some(*c),
                        engine: Some(*e),
                        ..Subject::plain(Dut::Veclane)
                    });
                }
            }
        } else {
            base.push(Subject::plain(*d));
        }
    }
    if a.workers.is_empty() || a.workers.contains(&0) {
        bail!("--workers: counts of 1 or more");
    }
    let mut workers = a.workers.clone();
    workers.sort_unstable();
    workers.dedup();
    // Every DUT at one worker count, then the next: searches interleave across both.
    let mut subjects: Vec<Subject> = workers
        .iter()
        .flat_map(|&w| base.iter().map(move |s| s.with_workers(w)))
        .collect();
    // A scenario of several shapes measures every DUT in each, one after the other.
    if !topology.shapes().is_empty() {
        subjects = subjects
            .iter()
            .flat_map(|s| {
                topology
                    .shapes()
                    .iter()
                    .filter(|&&sh| topology.supports_shape(s.dut, sh))
                    .map(|&sh| s.in_shape(sh))
            })
            .collect();
    }
    let l3fwd_bin = bench::dpdk_l3fwd::find();
    let vpp_bin = bench::vpp::find(a.vpp_bin.as_deref());
    if duts.contains(&Dut::DpdkL3fwd) && l3fwd_bin.is_none() {
        bail!(
            "dpdk-l3fwd is not built: run scripts/build-dpdk-l3fwd.sh (make setup does), or leave it out of --dut"
        );
    }
    if duts.contains(&Dut::Vpp) && vpp_bin.is_none() {
        let at = a.vpp_bin.as_ref().map_or(
            "on PATH or in scripts/build-vpp.sh's cache".to_string(),
            |p| format!("at {}", p.display()),
        );
        if !a.allow_missing_peer {
            bail!(
                "VPP not found {at}; build it with scripts/build-vpp.sh (once per machine), install it, or pass --vpp-bin (or --allow-missing-peer to skip it)"
            );
        }
        eprintln!(
            "note: VPP not found {at}; skipping it (scripts/build-vpp.sh builds it once per machine, in about half an hour on two cores)"
        );
        subjects.retain(|s| s.dut != Dut::Vpp);
    }
    let cfg = L3fwdConfig {
        topology,
        sizes,
        reps: a.reps,
        duts: subjects,
        gen_cpu: a.sender_cpu,
        dut_cpus: if a.dut_cpus.is_empty() {
            vec![a.receiver_cpu]
        } else {
            a.dut_cpus.clone()
        },
        share_gen_cpu: a.share_gen_cpu,
        ring_log2: a.ring_log2,
        check_payload: a.check_payload,
        buffer_size: a.buffer_size,
        burst: a.burst,
        networks: a.networks,
        pod_cpu: a.pod_cpu,
        underlay: match a.underlay {
            UnderlayArg::Memif => bench::underlay::Underlay::Memif,
            UnderlayArg::AfPacket => bench::underlay::Underlay::AfPacket,
            UnderlayArg::AfXdp => bench::underlay::Underlay::AfXdp,
        },
        direction: match a.direction {
            DirectionArg::In => bench::node::Direction::In,
            DirectionArg::Out => bench::node::Direction::Out,
            DirectionArg::Both => bench::node::Direction::Both,
        },
        wait_near_secs: a.wait_near.max(0.0),
        method: method(a, trial_secs)?,
        testpmd_fwd: match a.testpmd_fwd {
            TestpmdFwdArg::Io => l3fwd::TestpmdFwd::Io,
            TestpmdFwdArg::Mac => l3fwd::TestpmdFwd::Mac,
        },
        mrr_secs: a.mrr_secs,
        warmup_secs: a.warmup_ms / 1e3,
        max_load_factor: 1.1,
        max_redo: a.max_redo,
        interleave: match a.interleave {
            InterleaveArg::Searches => l3fwd::Interleave::Searches,
            InterleaveArg::Trials => l3fwd::Interleave::Trials,
        },
        latency_at: a.latency_at.0.clone(),
        latency_secs: a.latency_secs,
        dut_idle_sleep: a.cost,
        dsa_queue: a.dsa_queue.clone(),
        veclane_bin: bench::veclane_bin(),
        testpmd_bin,
        l3fwd_bin,
        vpp_bin,
    };
    cfg.check()?;
    if a.cost {
        return run_cost(a, &cfg);
    }
    let total = cfg.reps * cfg.sizes.len() * cfg.duts.len();
    let progress = Progress::new(total);
    let mut done = 0;
    let run = l3fwd::RunReport::run(
        &cfg,
        |o| {
            done += 1;
            progress.finished(done, o);
        },
        |dut, size, m| progress.trial(dut, size, m),
    );
    progress.clear();
    print!("\n{}", run.text());
    if a.compare_seed {
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
    let w = run.write(&a.out_dir())?;
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

/// `--cost`: instructions per packet of every veclane copy mode at every size.
fn run_cost(a: &BenchArgs, cfg: &L3fwdConfig) -> anyhow::Result<()> {
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

fn run_p2p(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_this_host_cannot_run_is_skipped() {
        // No DSA device here: skipped.
        let all = [
            api::CopyEngine::Cpu,
            api::CopyEngine::Dsa,
            api::CopyEngine::Thread,
        ];
        if copy_engine::dsa::sysfs::discover_default()
            .usable
            .is_empty()
        {
            let got = usable_engines(&all, None);
            assert_eq!(got, [api::CopyEngine::Cpu, api::CopyEngine::Thread]);
        }
        // The model is there on every host.
        assert_eq!(usable_engines(&all, Some("model")), all);
    }

    #[test]
    fn reports_go_outside_the_checkout_unless_told() {
        fn env(
            pairs: &'static [(&'static str, &'static str)],
        ) -> impl Fn(&str) -> Option<std::ffi::OsString> {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        }
        const HOME: &[(&str, &str)] = &[("HOME", "/home/u")];
        const XDG: &[(&str, &str)] = &[("HOME", "/home/u"), ("XDG_DATA_HOME", "/data")];
        const NAMED: &[(&str, &str)] = &[("XDG_DATA_HOME", "/data"), ("VECLANE_RESULTS", "/r")];
        assert_eq!(
            default_out_dir(env(HOME)),
            std::path::Path::new("/home/u/.local/share/veclane/results")
        );
        assert_eq!(
            default_out_dir(env(XDG)),
            std::path::Path::new("/data/veclane/results")
        );
        assert_eq!(default_out_dir(env(NAMED)), std::path::Path::new("/r"));
        assert_eq!(
            default_out_dir(env(&[])),
            std::env::temp_dir().join("veclane/results")
        );
    }
}
