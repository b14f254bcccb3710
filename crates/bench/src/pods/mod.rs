//! The `pods` scenario: what a pod that uses its kernel's TCP/IP stack gets from its network.
//! Two pods on one node, each a network namespace with an `eth0`, and between them either
//! veclane (its tap pod interface) or the kernel's own veth routing path (what the `ptp` CNI
//! plugin builds), side by side in one sitting, the paths taking turns (A B A B) test by
//! test. The programs in the pods are ordinary ones: `iperf3` (TCP, one stream and four;
//! UDP at 64 and 1400-byte frames, flat out) and a one-byte request/response echo of ours
//! over TCP (what `netperf TCP_RR` measures). Around every test the machine's busy CPU time
//! is read (`/proc/stat`: everything but idle, the pods' programs included), and veclane's
//! own, and every packet counter on the way: a packet the pods sent and did not receive was
//! dropped by a device or by veclane, counted, or the row says how many were not.

/// One test and its counters.
mod measure;
/// The pods and the paths between them.
pub mod topo;
/// The two-node paths.
mod two_nodes;
pub mod wake;

use serde::Serialize;

use crate::proc::DutError;
pub use topo::{Placement, Pods, Uplink};

/// What joins the two pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodPath {
    /// veclane's tap pod interface.
    VeclaneTap,
    /// The kernel's veth pairs and a routing namespace.
    #[serde(rename = "kernel-veth")]
    Kernel,
    /// veth pairs whose other ends veclane drives through a kernel-uplink driver (AF_PACKET
    /// or AF_XDP): a candidate pod interface, measured beside the tap when asked for.
    VeclaneVeth,
    /// The pods on two nodes (namespaces joined by a veth pair, the underlay), veclane on
    /// each with the pods' network in VXLAN over an AF_PACKET uplink.
    VeclaneVxlan,
    /// The pods on two nodes over the same underlay, each node a router with the pod's veth
    /// pair and a Linux VXLAN device.
    KernelVxlan,
}

impl PodPath {
    pub const ALL: [PodPath; 5] = [
        PodPath::VeclaneTap,
        PodPath::Kernel,
        PodPath::VeclaneVeth,
        PodPath::VeclaneVxlan,
        PodPath::KernelVxlan,
    ];

    /// The paths measured unless others are named: all but the candidate.
    pub const DEFAULT: [PodPath; 4] = [
        PodPath::VeclaneTap,
        PodPath::Kernel,
        PodPath::VeclaneVxlan,
        PodPath::KernelVxlan,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PodPath::VeclaneTap => "veclane-tap",
            PodPath::Kernel => "kernel-veth",
            PodPath::VeclaneVeth => "veclane-veth",
            PodPath::VeclaneVxlan => "veclane-vxlan",
            PodPath::KernelVxlan => "kernel-vxlan",
        }
    }

    /// A short tag for namespace names.
    fn tag(self) -> &'static str {
        match self {
            PodPath::VeclaneTap => "vt",
            PodPath::Kernel => "kv",
            PodPath::VeclaneVeth => "vv",
            PodPath::VeclaneVxlan => "vx",
            PodPath::KernelVxlan => "kx",
        }
    }
}

/// One test between the pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodTest {
    /// TCP, one stream (iperf3).
    #[serde(rename = "tcp-1")]
    Tcp1,
    /// TCP, four streams.
    #[serde(rename = "tcp-4")]
    Tcp4,
    /// UDP, 64-byte frames, as fast as the sender goes.
    #[serde(rename = "udp-64")]
    Udp64,
    /// UDP, 1400-byte frames.
    #[serde(rename = "udp-1400")]
    Udp1400,
    /// One-byte requests and responses over TCP.
    Rr,
}

impl PodTest {
    pub const ALL: [PodTest; 5] = [
        PodTest::Tcp1,
        PodTest::Tcp4,
        PodTest::Udp64,
        PodTest::Udp1400,
        PodTest::Rr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PodTest::Tcp1 => "tcp-1",
            PodTest::Tcp4 => "tcp-4",
            PodTest::Udp64 => "udp-64",
            PodTest::Udp1400 => "udp-1400",
            PodTest::Rr => "rr",
        }
    }

    /// The UDP tests' frame size (Ethernet, FCS included).
    pub fn frame(self) -> Option<usize> {
        match self {
            PodTest::Udp64 => Some(64),
            PodTest::Udp1400 => Some(1400),
            _ => None,
        }
    }
}

/// The scenario's settings.
#[derive(Debug, Clone)]
pub struct PodsConfig {
    pub place: Placement,
    /// The programs in the pods (client and server both).
    pub app_cpu: usize,
    pub paths: Vec<PodPath>,
    pub tests: Vec<PodTest>,
    /// Seconds each test runs.
    pub secs: f64,
    /// Times each (test, path) runs; the table gives medians.
    pub reps: usize,
}

/// One run of one test over one path.
#[derive(Debug, Clone, Serialize, Default)]
pub struct PodRow {
    pub path: Option<PodPath>,
    pub test: Option<PodTest>,
    /// TCP: what the receiving pod got, Gbit/s of payload (iperf3's count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// UDP: thousands of datagrams a second sent, and delivered, and the share lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_kpps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kpps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_pct: Option<f64>,
    /// The echo: round trips a second and their percentiles, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rr_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    /// CPUs the machine kept busy on average (all of them, the pods' programs included), of
    /// which in softirq; and veclane's threads, when it is the path.
    pub cpus_busy: f64,
    pub softirq_cpus: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dut_cpus: Option<f64>,
    /// Packets dropped by the path (veclane's drop counters, the router's devices); by the
    /// pods' devices before they left (a tap's queue veclane did not empty in time, a veth
    /// whose peer's backlog was full) and as they came in; and by the receiving sockets.
    pub dropped_on_path: u64,
    /// `dropped_on_path` by counter: veclane's (`"node: reason"`, an uplink's
    /// `"<interface>: rx_errors"`) or a router device's (`"<device>: dropped"`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub path_drops: std::collections::BTreeMap<String, u64>,
    pub dropped_leaving_pods: u64,
    pub dropped_entering_pods: u64,
    pub socket_drops: u64,
    /// Packets that left the pods' devices, less those the pods' devices received and those
    /// counted as dropped on the way or coming in: zero when every loss is counted (UDP and
    /// the echo; TCP's super-frames do not balance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unaccounted: Option<i64>,
}

impl PodRow {
    fn new(path: PodPath, test: PodTest) -> PodRow {
        PodRow {
            path: Some(path),
            test: Some(test),
            ..PodRow::default()
        }
    }

    /// The busy CPUs per Gbit/s the receiving pod got (TCP).
    pub fn cpus_per_gbps(&self) -> Option<f64> {
        self.gbps.filter(|g| *g > 0.0).map(|g| self.cpus_busy / g)
    }

    /// What the test measured, in words.
    pub fn result(&self) -> String {
        if let Some(g) = self.gbps {
            format!("{g:.2} Gbit/s")
        } else if let (Some(k), Some(sent)) = (self.kpps, self.sent_kpps) {
            format!("{k:.0} of {sent:.0} kpps delivered")
        } else if let (Some(p50), Some(p99)) = (self.p50_us, self.p99_us) {
            format!("p50 {p50:.1} us, p99 {p99:.1} us")
        } else {
            "-".into()
        }
    }

    /// The figure medians are taken of.
    fn key(&self) -> f64 {
        self.gbps.or(self.kpps).or(self.p50_us).unwrap_or(0.0)
    }
}

/// Sets up every path's pods, then runs each test over each path in turn, `reps` times.
/// `progress` sees each row as it is measured.
pub fn run(cfg: &PodsConfig, progress: &mut dyn FnMut(&PodRow)) -> Result<Vec<PodRow>, DutError> {
    if crate::proc::on_path("iperf3").is_none() {
        return Err(DutError::Unsupported(
            "iperf3 is not installed (apt-get install iperf3)".into(),
        ));
    }
    let pods: Vec<Pods> = cfg
        .paths
        .iter()
        .map(|&p| Pods::create(p, &cfg.place))
        .collect::<Result<_, _>>()?;
    let mut rows = Vec::new();
    for _ in 0..cfg.reps {
        for &t in &cfg.tests {
            for p in &pods {
                let r = measure::run(p, t, cfg.secs, cfg.app_cpu)?;
                progress(&r);
                rows.push(r);
            }
        }
    }
    Ok(rows)
}

/// The row of median result for each (test, path), in the order first measured.
pub fn medians(rows: &[PodRow]) -> Vec<PodRow> {
    let mut keys: Vec<(Option<PodTest>, Option<PodPath>)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.test, r.path)) {
            keys.push((r.test, r.path));
        }
    }
    keys.sort_by_key(|k| k.0.map(|t| PodTest::ALL.iter().position(|x| *x == t)));
    keys.iter()
        .map(|k| {
            let mut v: Vec<&PodRow> = rows.iter().filter(|r| (r.test, r.path) == *k).collect();
            v.sort_by(|a, b| a.key().total_cmp(&b.key()));
            v[v.len() / 2].clone()
        })
        .collect()
}

/// The table of `medians`.
pub fn table(medians: &[PodRow]) -> String {
    let mut s = format!(
        "{:<9} {:<12} {:<30} {:>9} {:>8} {:>9} {:>12}\n",
        "test", "path", "result", "CPUs busy", "softirq", "veclane", "CPUs per Gb/s"
    );
    for r in medians {
        let opt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        s += &format!(
            "{:<9} {:<12} {:<30} {:>9.2} {:>8.2} {:>9} {:>12}\n",
            r.test.map_or("", PodTest::name),
            r.path.map_or("", PodPath::name),
            r.result(),
            r.cpus_busy,
            r.softirq_cpus,
            opt(r.dut_cpus),
            opt(r.cpus_per_gbps()),
        );
    }
    s
}
