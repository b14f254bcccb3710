//! `veclane bench`'s arguments: their clap definitions, the value parsers behind them, and
//! the defaults that come from the environment.

use bench::CopyMode;
use clap::{Args, ValueEnum};

/// The scenario names `bench::scenario::registry` knows, with their help lines.
fn scenario_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        bench::scenario::registry()
            .into_iter()
            .map(|s| clap::builder::PossibleValue::new(s.name).help(s.about)),
    )
}

/// The pods scenario's tests as clap values.
fn pod_tests() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(bench::pods::PodTest::ALL.map(|t| t.name()))
}

/// The pods scenario's paths as clap values.
fn pod_paths() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(bench::pods::PodPath::ALL.map(|p| p.name()))
}

/// The pods scenario's uplinks as clap values.
fn pod_uplinks() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(bench::pods::Uplink::ALL.map(|u| u.name()))
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
    pub(super) scenario: String,
    /// Frame sizes in bytes (no FCS), or imix (searched scenarios: 64, 570 and 1518 bytes
    /// 7:4:1) [default: p2p 64,128,256,512,1024,1500,9000; searched 64,128,256,512,1024,1500].
    #[arg(long, value_delimiter = ',', value_parser = bench::trial::parse_size)]
    pub(super) sizes: Vec<usize>,
    /// Devices under test, interleaved in this order [default: veclane,testpmd; singlenet and
    /// multinet: veclane].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(super) dut: Vec<DutArg>,
    /// singlenet and multinet: networks, each with a pod interface of its own; the remote
    /// node's frames are spread over them.
    #[arg(long, default_value_t = 1)]
    pub(super) networks: u16,
    /// singlenet and multinet: which way frames go: into the pods (in: multinet decapsulates),
    /// out of them (out: multinet encapsulates), or both at once.
    #[arg(long, value_enum, default_value = "both")]
    pub(super) direction: DirectionArg,
    /// singlenet and multinet (veclane): how the remote node reaches the DUT's uplink; over a
    /// veth the generator's end is AF_PACKET and the rates include the kernel's path (needs
    /// root).
    #[arg(long, value_enum, default_value = "memif")]
    pub(super) underlay: UnderlayArg,
    /// pvp: the pod's CPU [default: the generator's: on two CPUs a third busy loop shares one].
    #[arg(long)]
    pub(super) pod_cpu: Option<usize>,
    /// Seconds of traffic per trial [default: p2p 2; l3fwd 0.25] (l3fwd mlr: the final trial
    /// duration, the duration sum being 21 times it).
    #[arg(long)]
    pub(super) trial_secs: Option<f64>,
    /// Throughput search (l3fwd).
    #[arg(long, value_enum, default_value = "loss-verification")]
    pub(super) search: SearchArg,
    /// Loss ratio a trial may have and pass (rfc2544, loss-verification); 0 is zero loss.
    #[arg(long, default_value_t = 0.0)]
    pub(super) loss_ratio: f64,
    /// Loss ratio of the PDR goal (mlr, default 0.005) or TRex's pdr (trex-ndr, default 0.001).
    #[arg(long)]
    pub(super) pdr: Option<f64>,
    /// Stop when the bounds are this close, as a share of the maximum load (rfc2544,
    /// loss-verification).
    #[arg(long, default_value_t = 0.01)]
    pub(super) precision: f64,
    /// Seconds of the final trial at the found rate (rfc2544; 0: none).
    #[arg(long, default_value_t = 0.0)]
    pub(super) final_trial_secs: f64,
    /// Repeats of a failing trial (loss-verification).
    #[arg(long, default_value_t = 3)]
    pub(super) max_repeat: u32,
    /// Seconds of the flat-out trial before each search (l3fwd); its receive rate times 1.1
    /// is the search's maximum load.
    #[arg(long, default_value_t = 1.0)]
    pub(super) mrr_secs: f64,
    /// Milliseconds of traffic at a trial's load before its counted window (l3fwd), left out
    /// of every count: after the pause between trials a DUT starts with cold caches (here
    /// its first 2 ms forwarded at a third of its rate), which a 0.1 s trial must not
    /// measure; 0 counts from the first frame.
    #[arg(long, default_value_t = 10.0)]
    pub(super) warmup_ms: f64,
    /// Fractions of the first goal's result at which latency is measured (l3fwd; none: "").
    #[arg(long, default_value = "0.1,0.5,0.9", value_parser = fractions)]
    pub(super) latency_at: Fractions,
    /// Seconds of each latency trial.
    #[arg(long, default_value_t = 0.5)]
    pub(super) latency_secs: f64,
    /// Trials per (DUT, size); the table shows the median.
    #[arg(long, default_value_t = 3)]
    pub(super) reps: usize,
    /// veclane's copy modes to measure (l3fwd), each a column of its own.
    #[arg(long, value_parser = copy_modes(), value_delimiter = ',', default_values_t = [CopyMode::Single, CopyMode::Two])]
    pub(super) copy: Vec<CopyMode>,
    /// What executes veclane's payload copies, each a column of its own (searched scenarios):
    /// cpu (inline), thread (a copy thread), dsa (an Intel DSA work queue: skipped, saying
    /// why, on a host without one) or auto.
    #[arg(long, value_parser = copy_engines(), value_delimiter = ',', default_values_t = [api::CopyEngine::Cpu])]
    pub(super) copy_engine: Vec<api::CopyEngine>,
    /// The daemons' `dsa-queue`: a work queue (`wq0.0`, `/dev/dsa/wq0.0`), or `model` for the
    /// software model (for --cost of the engine's own work; its rates mean nothing).
    #[arg(long)]
    pub(super) dsa_queue: Option<String>,
    /// CPU of the sender (p2p) or the generator (l3fwd).
    #[arg(long, visible_alias = "gen-cpu", default_value_t = 0)]
    pub(super) sender_cpu: usize,
    /// CPU of the receiver (p2p) or the device under test (l3fwd).
    #[arg(long, visible_alias = "dut-cpu", default_value_t = 1)]
    pub(super) receiver_cpu: usize,
    /// DUT worker counts to measure (l3fwd), each DUT with each count: N workers (lcores) on
    /// the first N CPUs of --dut-cpus, each polling one queue pair of both interfaces. Two or
    /// more also write a plot of throughput against workers.
    #[arg(long, value_delimiter = ',', default_values_t = [1u16])]
    pub(super) workers: Vec<u16>,
    /// The DUT's CPUs, in the order workers take them (l3fwd) [default: --receiver-cpu].
    #[arg(long, value_delimiter = ',')]
    pub(super) dut_cpus: Vec<usize>,
    /// Let DUT workers run on the generator's CPU (l3fwd): on a machine with too few CPUs this
    /// still exercises N workers, but the rates measure two busy loops taking turns, and the
    /// table flags them.
    #[arg(long)]
    pub(super) share_gen_cpu: bool,
    /// Generator frames per burst (l3fwd).
    #[arg(long, default_value_t = 64)]
    pub(super) burst: usize,
    /// log2 of the memif ring size [default: p2p 10; l3fwd and the node scenarios at most 12,
    /// whose 4096 slots ride out the shorter stalls of a shared host that would otherwise
    /// decide every zero-loss search, and fewer where the rings a trial keeps busy would hold
    /// over 8 MiB of frames (a mix counted at its largest) or span over 16 MiB of buffers, so
    /// that they stay in the cache: l3fwd 2^12 up to 1024 B, 2^11 at 1500 B and IMIX, 2^8 at
    /// 9000 B; the node scenarios with one network 2^11 up to 1024 B, 2^10 at 1500 B and
    /// IMIX, 2^8 at 9000 B].
    #[arg(long)]
    pub(super) ring_log2: Option<u8>,
    /// The generator reads every frame that comes back whole and checks the bytes after its
    /// probe against what was sent; a trial with a frame that differs fails, and so does its
    /// search (l3fwd and the node scenarios). It costs the generator the reading, so its
    /// ceiling drops: for checking DUTs, not for rates.
    #[arg(long)]
    pub(super) check_payload: bool,
    #[arg(long, default_value_t = 2048)]
    pub(super) buffer_size: u32,
    /// pods: the tests, in this order [default: tcp-1,tcp-4,udp-64,udp-1400,rr].
    #[arg(long, value_delimiter = ',', value_parser = pod_tests())]
    pub(super) pod_tests: Vec<String>,
    /// pods: the paths between the pods, taking turns in this order [default:
    /// veclane-tap,kernel-veth,veclane-vxlan,kernel-vxlan; veclane-veth only when named].
    #[arg(long, value_delimiter = ',', value_parser = pod_paths())]
    pub(super) pod_paths: Vec<String>,
    /// pods: veclane's receive mode (the daemon's `mode`: adaptive, interrupt, polling).
    #[arg(long, default_value = "adaptive")]
    pub(super) pod_rx_mode: api::RxMode,
    /// pods: the uplink veclane's nodes use on the two-node path, and the driver of the
    /// `veclane-veth` candidate.
    #[arg(long, default_value = "af-packet", value_parser = pod_uplinks())]
    pub(super) pod_uplink: String,
    /// Directory for the reports (JSON, CSV, SVG) [default: $VECLANE_RESULTS, else
    /// $XDG_DATA_HOME/veclane/results, else ~/.local/share/veclane/results: outside any
    /// checkout, so that runs do not pile up in a repository].
    #[arg(long)]
    pub(super) out: Option<std::path::PathBuf>,
    /// Before each trial, wait up to this many seconds for the two CPUs to share a cache
    /// (0: do not wait; every trial is tagged near, far or mixed either way).
    #[arg(long, default_value_t = 10.0)]
    pub(super) wait_near: f64,
    /// l3fwd: trials a search may run again when the host disturbed one that failed (the CPUs
    /// not near around it while waiting for near, or a pause longer than half a ring holds at
    /// its load); each stays in the JSON with its reason.
    #[arg(long, default_value_t = 10)]
    pub(super) max_redo: usize,
    /// Searched scenarios: how the DUTs' searches at one (repetition, size) share the time.
    /// `trials`: all at once, their trials taking turns, each DUT stopped (SIGSTOP) outside
    /// its own, so that the DUTs of a pair are measured a fraction of a second apart instead
    /// of a search or more apart. `searches`: one whole search after another.
    #[arg(long, value_enum, default_value_t = InterleaveArg::Trials)]
    pub(super) interleave: InterleaveArg,
    /// Instead of rates: instructions per packet under callgrind of veclane (whole daemon and
    /// per node, each copy mode) and testpmd (whole process), at each size (l3fwd).
    #[arg(long)]
    pub(super) cost: bool,
    /// Frames per --cost measurement.
    #[arg(long, default_value_t = 300_000)]
    pub(super) cost_frames: u64,
    /// Keep each --cost callgrind profile (per-instruction counts) in this directory, as
    /// callgrind.DUT.SIZE.out, to see with callgrind_annotate where the instructions go.
    #[arg(long)]
    pub(super) cost_profiles: Option<std::path::PathBuf>,
    /// --cost with at most this many frames in flight (the generator's --window): the DUT
    /// then polls frames of at most this many packets, as under a load it keeps up with,
    /// and its fixed costs per frame count. Default: flat out (full 256-packet frames).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) cost_window: Option<u64>,
    /// testpmd's forwarding in l3fwd: io (frames untouched) or mac (MACs rewritten).
    #[arg(long, value_enum, default_value = "io")]
    pub(super) testpmd_fwd: TestpmdFwdArg,
    /// l3fwd: veclane balances the generator's flows through a service (VIP the generator's
    /// destination, one backend behind the sink), so every packet is translated.
    #[arg(long)]
    pub(super) service: bool,
    /// l3fwd: veclane judges the flows by a policy of this many rules on the receiving
    /// interface (the last allows them).
    #[arg(long, default_value_t = 0)]
    pub(super) policy_rules: u32,
    /// l3fwd with --service: 16 VIPs and 1,024,000 flows in turn, so that every frame is a
    /// new flow to the DUT (its zero-loss rate is new flows per second).
    #[arg(long)]
    pub(super) new_flows: bool,
    /// l3fwd with --service: this many established flows through the VIP, the generator's
    /// source ports in turn.
    #[arg(long, default_value_t = 1)]
    pub(super) service_flows: u16,
    /// VPP's binary, for --dut vpp.
    #[arg(long)]
    pub(super) vpp_bin: Option<std::path::PathBuf>,
    /// Print the seeds' published tables (seed 000 Tables 5-8, seed 001 Tables 5-6, converted to
    /// Mpps) beside ours (searched scenarios; the core-scaling tables with --workers at 1024 B).
    #[arg(long)]
    pub(super) compare_seed: bool,
    /// Skip testpmd (instead of failing) when it is not installed.
    #[arg(long)]
    pub(super) allow_missing_peer: bool,
}

impl BenchArgs {
    /// Where the reports go: `--out`, else the default its help names.
    pub(super) fn out_dir(&self) -> std::path::PathBuf {
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
pub(super) struct Fractions(pub(super) Vec<f64>);

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

#[cfg(test)]
mod tests {
    use super::*;

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
