//! The daemon's configuration file (TOML) as typed values. The daemon reads it, `veclane run
//! --check-config` validates it, and the benchmark harness builds a [`Config`] and serializes
//! it; the control API creates interfaces with the same [`MemifSpec`].
//!
//! A file with problems gets all of them at once, each with its line and column: syntax
//! errors first (the parser recovers and goes on), then every section that does not
//! deserialize (one message per table: serde stops at a table's first bad key), then every
//! value the types cannot rule out (cores that do not exist, names used twice, references to
//! interfaces that are not there).

use std::collections::HashSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::types::{CopyEngine, CopyMode, Ipv4Prefix, MacAddr, Role, RxMode, Via};

/// The CPUs this process may run on (its affinity mask: a container's cpuset, `taskset`), in
/// order, as first seen: a daemon reloading its file runs on a control thread pinned to one
/// of them by then. All of the machine's, counted, if the kernel will not say.
pub fn usable_cpus() -> &'static [usize] {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        let set = rustix::thread::sched_getaffinity(None).ok();
        let cpus: Vec<usize> = set
            .map(|s| {
                (0..rustix::thread::CpuSet::MAX_CPU)
                    .filter(|&c| s.is_set(c))
                    .collect()
            })
            .unwrap_or_default();
        if cpus.is_empty() {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        } else {
            cpus
        }
    })
}

/// CPUs as the kernel lists them: `0-3,6`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// [`DEFAULT_CONFIG`] placed on the CPUs this process may use (see
/// [`Config::embedded_default`]): what `veclane run` runs without a file, and what
/// `--print-default-config` prints.
pub fn default_config_text() -> String {
    let cpus = usable_cpus();
    let main = cpus.first().copied().unwrap_or(0);
    let worker = cpus.get(1).copied().unwrap_or(main);
    DEFAULT_CONFIG
        .replacen(DEFAULT_WORKERS, &format!("workers = [{worker}]"), 1)
        .replacen(DEFAULT_MAIN_CORE, &format!("main-core = {main}"), 1)
}

/// The placement lines of [`DEFAULT_CONFIG`] that [`default_config_text`] rewrites.
const DEFAULT_WORKERS: &str = "workers = [1]";
const DEFAULT_MAIN_CORE: &str = "main-core = 0";

/// The embedded default topology: generator → `memif0/0` → veclane → `memif0/1` → sink.
/// `veclane gen`'s default frames (10.10.1.2 → 10.10.2.2, destination MAC 02:00:00:00:00:02)
/// enter on `memif0/0` and leave on `memif0/1` towards the static neighbour 10.10.2.2.
pub const DEFAULT_CONFIG: &str = r#"
[daemon]
# One worker per listed core; the control thread runs on main-core. Embedded, the two are the
# first two CPUs the daemon may run on.
workers = [1]
main-core = 0
# Rx mode: polling (never sleeps), interrupt (sleeps whenever idle) or adaptive (polls while
# busy, sleeps on the memif eventfds after a millisecond without packets).
mode = "adaptive"
buffers = 32768
# Forwarding between memif interfaces: "single" copies each payload once, peer to peer
# (headers go through local buffers); "two" copies into local buffers and out again (VPP).
copy = "single"
# What executes memif payload copies: "cpu" (inline), "thread" (a copy thread, for tests and
# hosts with spare cores), "dsa" (an Intel DSA work queue; refused at start without one) or
# "auto" (DSA when a work queue is usable, else the CPU, saying why). An interface created
# with `use-dma` uses DSA whatever this says.
copy-engine = "cpu"

[[interface]]
socket = "memif.sock"
id = 0
role = "master"
mac = "02:00:00:00:00:02"
addresses = ["10.10.1.1/24"]

[[interface]]
socket = "memif.sock"
id = 1
role = "master"
mac = "02:00:00:00:01:02"
addresses = ["10.10.2.1/24"]

[[neighbor]]
interface = "memif0/1"
ip = "10.10.2.2"
mac = "02:00:00:00:00:01"
"#;

/// Ring sizes a memif interface accepts (slots, a power of two).
pub const RING_SIZES: std::ops::RangeInclusive<u32> = 2..=16384;
/// Fewest local buffers per worker.
pub const MIN_BUFFERS: u32 = 1024;

/// `[daemon]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct DaemonSection {
    /// Cores, one worker pinned to each; empty: one unpinned worker.
    pub workers: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub main_core: Option<usize>,
    pub mode: RxMode,
    /// Local buffers per worker.
    pub buffers: u32,
    /// Trace records kept per worker.
    pub trace_capacity: usize,
    /// Runtime directory (sockets); default `$XDG_RUNTIME_DIR/veclane` or `/run/veclane`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_dir: Option<PathBuf>,
    pub copy: CopyMode,
    pub copy_engine: CopyEngine,
    /// The DSA work queue(s) engines use: default every usable one discovery finds
    /// (`/sys/bus/dsa/devices`); a queue's name (`wq0.0`) or path (`/dev/dsa/wq0.0`) for only
    /// that one; `model` for the software model (tests only: no device is touched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dsa_queue: Option<String>,
    /// With `dsa-queue = "model"`: every that many descriptors, one stops part way with a
    /// page fault, which the engine finishes on the CPU (tests of the recovery path).
    #[serde(skip_serializing_if = "is_zero")]
    pub dsa_model_fault_every: u32,
    /// Copies shorter than this many bytes are made by the core at once, not offloaded to
    /// DSA (a descriptor costs the core more than a short copy); counted as `short`.
    #[serde(skip_serializing_if = "is_default_inline_below")]
    pub dsa_inline_below: u32,
    /// Where Prometheus / OpenMetrics metrics are served (`"127.0.0.1:9400"`); off when
    /// absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// Who may use the control socket (`ctl.sock`).
    #[serde(skip_serializing_if = "ControlSocket::is_default")]
    pub control_socket: ControlSocket,
}

/// `[daemon] control-socket`: the control socket's group and mode, so that operators in a
/// group can run `veclane ctl` without root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ControlSocket {
    /// Group name or number that owns the socket; default: the daemon's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Permission bits, in octal (`"0660"`); default: as created under the daemon's umask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

impl ControlSocket {
    fn is_default(&self) -> bool {
        *self == ControlSocket::default()
    }

    /// The mode as a number, if it is one (octal, at most 0o777).
    pub fn mode_bits(&self) -> Option<Result<u32, String>> {
        self.mode.as_ref().map(|m| {
            u32::from_str_radix(m.trim_start_matches("0o"), 8)
                .ok()
                .filter(|&b| b <= 0o777)
                .ok_or_else(|| {
                    format!("control-socket mode {m:?} is not octal permission bits like \"0660\"")
                })
        })
    }
}

fn is_default_inline_below(n: &u32) -> bool {
    *n == 256
}

/// The largest `dsa-inline-below`: a jumbo frame's buffer.
pub const MAX_DSA_INLINE_BELOW: u32 = 65536;

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            workers: Vec::new(),
            main_core: None,
            mode: RxMode::Adaptive,
            buffers: 32768,
            trace_capacity: 4096,
            runtime_dir: None,
            copy: CopyMode::Single,
            copy_engine: CopyEngine::Cpu,
            dsa_queue: None,
            dsa_model_fault_every: 0,
            dsa_inline_below: 256,
            metrics: None,
            control_socket: ControlSocket::default(),
        }
    }
}

/// A memif interface: a `[[interface]]` of the file and `create interface memif` of the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MemifSpec {
    pub id: u32,
    /// Socket path; `@name` for the abstract namespace; relative paths are taken inside the
    /// daemon's runtime directory.
    pub socket: String,
    pub role: Role,
    /// Interface name; default `memif<socket-index>/<id>` as VPP names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_queues: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_queues: Option<u16>,
    /// Slots per ring, a power of two in [`RING_SIZES`] (default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Default derived from the interface index (`02:fe:00:00:HI:LO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<Ipv4Prefix>,
    /// The IPv4 table (VRF) packets received here are routed in.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table: u32,
    /// Core of the worker that polls each rx queue, in queue order (default: round robin).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_placement: Vec<usize>,
    /// Administrative state at creation.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub up: bool,
    /// The network the interface attaches to: it is routed in the network's VRF, and its
    /// addresses must lie in the network's ranges. Excludes `table`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// The largest IPv4 packet sent out of it (default 9000: memif carries jumbo frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
    /// Master only: listen inside this network namespace (a pod's), by `ip netns` name or by
    /// path; an abstract socket there is the pod's alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// The pod (container id) the interface belongs to, as its CNI plugin says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Ethernet frames (default) or bare IPv4 packets.
    #[serde(default, skip_serializing_if = "is_ethernet")]
    pub mode: MemifMode,
    /// `polling`: the workers holding its receive queues poll even when the daemon's mode
    /// would let them sleep. Default (or `interrupt`, `adaptive`): the daemon's mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_mode: Option<RxMode>,
    /// Its payload copies go through a DSA work queue (VPP's `use-dma`), whatever the
    /// daemon's `copy-engine`; without a usable queue, through that engine, saying why.
    #[serde(default, skip_serializing_if = "is_false")]
    pub use_dma: bool,
}

/// A tap interface for a pod: `create interface tap` of the API (pods come and go with their
/// CNI calls, so taps have no section in the file). The device is created inside the pod's
/// network namespace; ordinary programs there use it as their interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TapSpec {
    /// The device's name in the pod (`eth1`).
    pub host_if_name: String,
    /// The pod's network namespace, by `ip netns` name or path (`/proc/PID/ns/net`, a CNI
    /// runtime's `/var/run/netns/cni-...`); default the daemon's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// Our interface's name; default `tap<N>`, the first free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Queues (device fds, `IFF_MULTI_QUEUE`); default one per worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u16>,
    /// The MTU of both ends (the device in the pod, our interface); default 1500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
    /// The pod side's MAC; default the kernel's random one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_mac: Option<MacAddr>,
    /// Our side's MAC; default derived from the interface index (`02:fe:00:00:HI:LO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<Ipv4Prefix>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table: u32,
    /// The network the interface attaches to (excludes `table`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_placement: Vec<usize>,
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub up: bool,
    /// The pod (container id) the interface belongs to, as its CNI plugin says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
}

impl TapSpec {
    pub fn new(host_if_name: impl Into<String>) -> TapSpec {
        TapSpec {
            host_if_name: host_if_name.into(),
            netns: None,
            name: None,
            queues: None,
            mtu: None,
            host_mac: None,
            mac: None,
            addresses: Vec::new(),
            table: 0,
            network: None,
            rx_placement: Vec::new(),
            up: true,
            pod: None,
        }
    }

    /// What is wrong with the values themselves.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let h = &self.host_if_name;
        if h.is_empty() || h.len() > 15 || h.contains(['/', ' ', '\0', ':']) {
            p.push(format!(
                "host-if-name {h:?} is no Linux interface name (1 to 15 characters, no '/', ':' or space)"
            ));
        }
        if self.queues == Some(0) {
            p.push("queues must be at least 1".into());
        }
        if let Some(q) = self.queues
            && q > MAX_TAP_QUEUES
        {
            p.push(format!("queues {q} is over the kernel's {MAX_TAP_QUEUES}"));
        }
        p.extend(mtu_problem(self.mtu));
        if let Some(m) = self.host_mac
            && (m.0[0] & 1 != 0 || m.0 == [0; 6])
        {
            p.push(format!("host-mac {m} is no unicast address"));
        }
        p.extend(duplicate_addresses(&self.addresses));
        p.extend(pod_problem(self.pod.as_deref()));
        if let Some(n) = &self.network
            && self.table != 0
        {
            p.push(format!(
                "table {} and network {n:?} both set: an interface in a network is routed in the network's VRF",
                self.table
            ));
        }
        p
    }
}

/// The most queues a tap device may have (the kernel's `MAX_TAP_QUEUES`).
pub const MAX_TAP_QUEUES: u16 = 256;

/// What is wrong with a pod (container) id: CNI's own rule, letters, digits and `_.-`, and
/// not empty.
fn pod_problem(pod: Option<&str>) -> Option<String> {
    let p = pod?;
    let ok = !p.is_empty()
        && p.len() <= 256
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    (!ok).then(|| format!("pod {p:?} is no container id (letters, digits, '_', '.', '-')"))
}

/// The smallest MTU an interface may have (RFC 791: every host must take 68-byte packets).
pub const MIN_MTU: u16 = 68;

/// The problem with an MTU, if it has one.
pub fn mtu_problem(mtu: Option<u16>) -> Option<String> {
    mtu.filter(|&m| m < MIN_MTU)
        .map(|m| format!("mtu {m} is under the IPv4 minimum of {MIN_MTU}"))
}

/// An AF_PACKET uplink: a `[[af-packet]]` of the file and `create interface af-packet` of the
/// API. veclane takes the host interface over: it should carry no address in the kernel, or
/// the kernel answers the same packets too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AfPacketSpec {
    /// The kernel interface (`eth0`, a veth).
    pub host_if: String,
    /// Default `host-<host-if>`, as VPP names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Receive queues (sockets joined by PACKET_FANOUT); default one per worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u16>,
    /// Default: the host interface's own MAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<Ipv4Prefix>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_placement: Vec<usize>,
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub up: bool,
    /// Default: the host interface's MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
}

impl AfPacketSpec {
    pub fn new(host_if: impl Into<String>) -> AfPacketSpec {
        AfPacketSpec {
            host_if: host_if.into(),
            name: None,
            queues: None,
            mac: None,
            addresses: Vec::new(),
            table: 0,
            rx_placement: Vec::new(),
            up: true,
            mtu: None,
        }
    }

    /// The interface's name.
    pub fn name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("host-{}", self.host_if))
    }

    pub fn problems(&self) -> Vec<String> {
        uplink_problems(&self.host_if, self.queues, self.mtu, &self.addresses)
    }
}

/// What is wrong with the keys both kinds of uplink have.
fn uplink_problems(
    host_if: &str,
    queues: Option<u16>,
    mtu: Option<u16>,
    addresses: &[Ipv4Prefix],
) -> Vec<String> {
    let mut p = Vec::new();
    if host_if.is_empty() || host_if.len() > 15 || host_if.contains(['/', ' ', '\0']) {
        p.push(format!(
            "host-if {host_if:?} is no Linux interface name (1 to 15 characters, no '/' or space)"
        ));
    }
    if queues == Some(0) {
        p.push("queues must be at least 1".into());
    }
    p.extend(mtu_problem(mtu));
    p.extend(duplicate_addresses(addresses));
    p
}

/// Receive-queue placements on a core that has no worker.
fn placement_problems(rx_placement: &[usize], workers: &[usize]) -> Vec<String> {
    rx_placement
        .iter()
        .filter(|c| !workers.contains(c))
        .map(|c| format!("rx-placement core {c} has no worker (workers = {workers:?})"))
        .collect()
}

/// An address listed twice in one interface's `addresses`.
fn duplicate_addresses(addresses: &[Ipv4Prefix]) -> Vec<String> {
    addresses
        .iter()
        .enumerate()
        .filter(|&(i, a)| addresses[..i].iter().any(|b| b.addr == a.addr))
        .map(|(_, a)| format!("address {} is listed twice", a.addr))
        .collect()
}

/// What a memif interface carries (the memif protocol's interface mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemifMode {
    /// Ethernet frames.
    #[default]
    Ethernet,
    /// Bare IPv4 packets (VPP's `mode ip`): no Ethernet header, no ARP.
    Ip,
}

impl std::str::FromStr for MemifMode {
    type Err = String;
    fn from_str(s: &str) -> Result<MemifMode, String> {
        match s {
            "ethernet" => Ok(MemifMode::Ethernet),
            "ip" => Ok(MemifMode::Ip),
            x => Err(format!("mode {x:?}: expected ethernet or ip")),
        }
    }
}

impl std::fmt::Display for MemifMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MemifMode::Ethernet => "ethernet",
            MemifMode::Ip => "ip",
        })
    }
}

fn is_ethernet(m: &MemifMode) -> bool {
    *m == MemifMode::Ethernet
}

/// How an AF_XDP socket shares frames with the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XdpMode {
    /// Zero-copy where the driver offers it, else copy.
    #[default]
    Auto,
    Copy,
    ZeroCopy,
}

impl std::str::FromStr for XdpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<XdpMode, String> {
        match s {
            "auto" => Ok(XdpMode::Auto),
            "copy" => Ok(XdpMode::Copy),
            "zero-copy" => Ok(XdpMode::ZeroCopy),
            x => Err(format!("mode {x:?}: expected auto, copy or zero-copy")),
        }
    }
}

/// An AF_XDP uplink: a `[[af-xdp]]` of the file and `create interface af-xdp` of the API.
/// veclane loads its XDP program on the interface (and the kernel removes it when veclane
/// exits); frames on the queues it serves bypass the kernel stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AfXdpSpec {
    pub host_if: String,
    /// Default `xdp-<host-if>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Queues (one XSK each, on the interface's queues 0..N); default one per worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u16>,
    #[serde(default, skip_serializing_if = "is_auto")]
    pub mode: XdpMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<Ipv4Prefix>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_placement: Vec<usize>,
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub up: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
}

fn is_auto(m: &XdpMode) -> bool {
    *m == XdpMode::Auto
}

impl AfXdpSpec {
    pub fn new(host_if: impl Into<String>) -> AfXdpSpec {
        AfXdpSpec {
            host_if: host_if.into(),
            name: None,
            queues: None,
            mode: XdpMode::Auto,
            mac: None,
            addresses: Vec::new(),
            table: 0,
            rx_placement: Vec::new(),
            up: true,
            mtu: None,
        }
    }

    /// The interface's name.
    pub fn name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("xdp-{}", self.host_if))
    }

    pub fn problems(&self) -> Vec<String> {
        uplink_problems(&self.host_if, self.queues, self.mtu, &self.addresses)
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

fn is_true(v: &bool) -> bool {
    *v
}
fn yes() -> bool {
    true
}

impl MemifSpec {
    /// An interface with every optional setting at its default.
    pub fn new(id: u32, socket: impl Into<String>, role: Role) -> MemifSpec {
        MemifSpec {
            id,
            socket: socket.into(),
            role,
            name: None,
            rx_queues: None,
            tx_queues: None,
            ring_size: None,
            buffer_size: None,
            secret: None,
            mac: None,
            addresses: Vec::new(),
            table: 0,
            rx_placement: Vec::new(),
            up: true,
            network: None,
            mtu: None,
            netns: None,
            pod: None,
            mode: MemifMode::Ethernet,
            rx_mode: None,
            use_dma: false,
        }
    }

    /// What is wrong with the values themselves (the daemon adds what depends on its state).
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if let Some(r) = self.ring_size
            && (!r.is_power_of_two() || !RING_SIZES.contains(&r))
        {
            p.push(format!(
                "ring-size {r} must be a power of two in {}..={}",
                RING_SIZES.start(),
                RING_SIZES.end()
            ));
        }
        if self.buffer_size == Some(0) {
            p.push("buffer-size must be at least 1".into());
        }
        p.extend(mtu_problem(self.mtu));
        p.extend(duplicate_addresses(&self.addresses));
        p.extend(pod_problem(self.pod.as_deref()));
        if self.netns.is_some() && self.role == Role::Slave {
            p.push("netns is for the master role: a slave connects (and reconnects) from the daemon's own namespace".into());
        }
        if let Some(n) = &self.network
            && self.table != 0
        {
            p.push(format!(
                "table {} and network {n:?} both set: an interface in a network is routed in the network's VRF",
                self.table
            ));
        }
        p
    }
}

/// The largest VXLAN network identifier (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// `[[network]]` and `network add`: an isolated network. On this node it owns a VRF of its
/// own, allocated with it and freed with it; its pod interfaces attach to it by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    pub name: String,
    /// The VXLAN network identifier that carries it between nodes; one network per VNI.
    pub vni: u32,
    /// The address ranges of its pods (networks may overlap one another).
    pub ranges: Vec<Ipv4Prefix>,
    /// The interface its VXLAN tunnels leave through (their outer source is its first
    /// address); without one the network stays on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink: Option<String>,
    /// Don't Fragment on the outer header of its VXLAN packets (default true: an underlay
    /// that cannot carry them says so instead of fragmenting).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub df: bool,
    /// Who manages the network, if anyone but the operator: a controller (the node agent
    /// says `veclane-agent`) that deletes what it finds of its own and nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl NetworkSpec {
    /// What is wrong with the values themselves.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let n = &self.name;
        if n.is_empty()
            || n.len() > 31
            || !n
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            p.push(format!(
                "name {n:?} must be 1 to 31 letters, digits, '-' or '_'"
            ));
        }
        if self.vni > MAX_VNI {
            p.push(format!(
                "vni {} is over 24 bits (at most {MAX_VNI})",
                self.vni
            ));
        }
        if self.ranges.is_empty() {
            p.push("ranges is empty: a network needs at least one address range".into());
        }
        if let Some(o) = &self.owner
            && (o.is_empty() || o.len() > 31 || o.bytes().any(|b| !b.is_ascii_graphic()))
        {
            p.push(format!(
                "owner {o:?} must be 1 to 31 printable characters without spaces"
            ));
        }
        for r in &self.ranges {
            if r.network() != *r {
                p.push(format!(
                    "range {r} has host bits set (did you mean {}?)",
                    r.network()
                ));
            }
        }
        p
    }

    /// Whether `a` lies in one of the network's ranges.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        self.ranges.iter().any(|r| r.contains(a))
    }
}

/// The name an interface gets when its spec names none: `memif<socket index>/<id>`, the
/// socket index counting distinct sockets in the order they were first used.
pub fn default_interface_name(socket_index: usize, id: u32) -> String {
    format!("memif{socket_index}/{id}")
}

/// `[[route]]` and `ip route`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    pub prefix: Ipv4Prefix,
    pub via: Via,
    /// The interface towards the next hop; default: the one whose subnet holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table: u32,
    /// The network whose VRF the route is in (excludes `table`). A next hop outside the
    /// network's ranges is a remote VTEP: the route goes through the VXLAN tunnel to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
}

/// `[[neighbor]]` and `set ip neighbor`: a static ARP entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighborSpec {
    pub interface: String,
    #[serde(deserialize_with = "crate::types::deserialize_ipv4")]
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
}

/// A whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub daemon: DaemonSection,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<NetworkSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interface: Vec<MemifSpec>,
    #[serde(default, rename = "af-packet", skip_serializing_if = "Vec::is_empty")]
    pub af_packet: Vec<AfPacketSpec>,
    #[serde(default, rename = "af-xdp", skip_serializing_if = "Vec::is_empty")]
    pub af_xdp: Vec<AfXdpSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<RouteSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbor: Vec<NeighborSpec>,
}

/// One problem of a configuration, where it is when the configuration came from text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line and column.
    pub at: Option<(usize, usize)>,
    pub message: String,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// Every problem found, in the order they appear.
    #[error("{}", show_problems(origin, problems))]
    Invalid {
        origin: String,
        problems: Vec<Problem>,
    },
}

impl ConfigError {
    /// The problems, or none for a file that could not be read.
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Invalid { problems, .. } => problems,
            ConfigError::Read { .. } => &[],
        }
    }
}

fn show_problems(origin: &str, problems: &[Problem]) -> String {
    let mut s = format!(
        "{origin}: {} problem{}",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in problems {
        match p.at {
            Some((l, c)) => s.push_str(&format!("\n  {origin}:{l}:{c}: {}", p.message)),
            None => s.push_str(&format!("\n  {origin}: {}", p.message)),
        }
    }
    s
}

/// Which part of a configuration a semantic problem belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Daemon,
    Network(usize),
    Interface(usize),
    AfPacket(usize),
    AfXdp(usize),
    Route(usize),
    Neighbor(usize),
}

/// Byte ranges of each item in the source text.
#[derive(Debug, Default)]
struct Spans {
    daemon: Option<Range<usize>>,
    network: Vec<Range<usize>>,
    interface: Vec<Range<usize>>,
    af_packet: Vec<Range<usize>>,
    af_xdp: Vec<Range<usize>>,
    route: Vec<Range<usize>>,
    neighbor: Vec<Range<usize>>,
}

impl Spans {
    fn of(&self, item: Item) -> Option<Range<usize>> {
        match item {
            Item::Daemon => self.daemon.clone(),
            Item::Network(k) => self.network.get(k).cloned(),
            Item::Interface(k) => self.interface.get(k).cloned(),
            Item::AfPacket(k) => self.af_packet.get(k).cloned(),
            Item::AfXdp(k) => self.af_xdp.get(k).cloned(),
            Item::Route(k) => self.route.get(k).cloned(),
            Item::Neighbor(k) => self.neighbor.get(k).cloned(),
        }
    }
}

/// 1-based line and column of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

impl Config {
    /// Parses and validates `text`; `origin` names it in messages (a path, "embedded default").
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let invalid = |problems| ConfigError::Invalid {
            origin: origin.to_string(),
            problems,
        };
        let at = |span: Option<Range<usize>>| span.map(|s| line_col(text, s.start));
        let (doc, syntax) = DeTable::parse_recoverable(text);
        if !syntax.is_empty() {
            return Err(invalid(
                syntax
                    .iter()
                    .map(|e| Problem {
                        at: at(e.span()),
                        message: e.message().to_string(),
                    })
                    .collect(),
            ));
        }
        let mut cfg = Config::default();
        let mut spans = Spans::default();
        let mut problems: Vec<(Option<Range<usize>>, String)> = Vec::new();
        for (key, value) in doc.into_inner() {
            let span = value.span();
            match key.get_ref().as_ref() {
                "daemon" => {
                    spans.daemon = Some(span);
                    match typed::<DaemonSection>(value) {
                        Ok(d) => cfg.daemon = d,
                        Err(e) => problems.push((e.span(), format!("[daemon]: {}", e.message()))),
                    }
                }
                "interface" => section(
                    value,
                    "interface",
                    &mut cfg.interface,
                    &mut spans.interface,
                    &mut problems,
                ),
                "route" => section(
                    value,
                    "route",
                    &mut cfg.route,
                    &mut spans.route,
                    &mut problems,
                ),
                "neighbor" => section(
                    value,
                    "neighbor",
                    &mut cfg.neighbor,
                    &mut spans.neighbor,
                    &mut problems,
                ),
                "network" => section(
                    value,
                    "network",
                    &mut cfg.network,
                    &mut spans.network,
                    &mut problems,
                ),
                "af-packet" => section(
                    value,
                    "af-packet",
                    &mut cfg.af_packet,
                    &mut spans.af_packet,
                    &mut problems,
                ),
                "af-xdp" => section(
                    value,
                    "af-xdp",
                    &mut cfg.af_xdp,
                    &mut spans.af_xdp,
                    &mut problems,
                ),
                other => problems.push((
                    Some(key.span()),
                    format!(
                        "unknown section {other:?}: expected [daemon], [[network]], [[interface]], [[af-packet]], [[af-xdp]], [[route]] or [[neighbor]]"
                    ),
                )),
            }
        }
        // Items that did not deserialize are missing from `cfg`; checking what is left
        // would report references to them as a second, misleading problem.
        if problems.is_empty() {
            for (item, message) in cfg.semantic_problems() {
                problems.push((spans.of(item), message));
            }
        }
        if problems.is_empty() {
            return Ok(cfg);
        }
        problems.sort_by_key(|(s, _)| s.as_ref().map_or(0, |s| s.start));
        Err(invalid(
            problems
                .into_iter()
                .map(|(s, message)| Problem { at: at(s), message })
                .collect(),
        ))
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// The embedded default, placed on the CPUs this process may use: its control thread on
    /// the first, its worker on the second (the first too when it may use only one). A
    /// daemon confined to other CPUs than 0 and 1 (a container's cpuset) runs the default as
    /// well as one that is not.
    pub fn embedded_default() -> Config {
        Config::parse(&default_config_text(), "embedded default")
            .expect("the embedded default is valid on the CPUs it is placed on")
    }

    /// The configuration as a TOML document that [`Config::parse`] reads back equal.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("every field serializes to TOML")
    }

    /// Checks a configuration built in code: the same checks as [`Config::parse`], without
    /// positions.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let problems: Vec<Problem> = self
            .semantic_problems()
            .into_iter()
            .map(|(_, message)| Problem { at: None, message })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid {
                origin: origin.to_string(),
                problems,
            })
        }
    }

    /// The names interfaces get, memif ones first, then af-packet, then af-xdp ones, in order:
    /// their own, or [`default_interface_name`] / `host-<host-if>` / `xdp-<host-if>`.
    pub fn interface_names(&self) -> Vec<String> {
        let mut v = self.memif_names();
        v.extend(self.af_packet.iter().map(AfPacketSpec::name));
        v.extend(self.af_xdp.iter().map(AfXdpSpec::name));
        v
    }

    /// The names of the `[[interface]]` (memif) entries, in order.
    pub fn memif_names(&self) -> Vec<String> {
        let mut sockets: Vec<&str> = Vec::new();
        self.interface
            .iter()
            .map(|i| {
                let s = sockets
                    .iter()
                    .position(|s| *s == i.socket)
                    .unwrap_or_else(|| {
                        sockets.push(&i.socket);
                        sockets.len() - 1
                    });
                i.name
                    .clone()
                    .unwrap_or_else(|| default_interface_name(s, i.id))
            })
            .collect()
    }

    /// What the types cannot rule out: values that depend on the machine or on each other.
    fn semantic_problems(&self) -> Vec<(Item, String)> {
        let mut p = Vec::new();
        let d = &self.daemon;
        let cpus = usable_cpus();
        for &c in d.workers.iter().chain(d.main_core.iter()) {
            if !cpus.contains(&c) {
                p.push((
                    Item::Daemon,
                    format!(
                        "[daemon] core {c} is not one this process may run on (its CPUs: {})",
                        cpu_list(cpus)
                    ),
                ));
            }
        }
        for (i, w) in d.workers.iter().enumerate() {
            if d.workers[..i].contains(w) {
                p.push((
                    Item::Daemon,
                    format!("[daemon] workers lists core {w} twice"),
                ));
            }
        }
        if d.buffers < MIN_BUFFERS {
            p.push((
                Item::Daemon,
                format!(
                    "[daemon] buffers = {} is too few: at least {MIN_BUFFERS} per worker",
                    d.buffers
                ),
            ));
        }
        if let Some(m) = &d.metrics
            && m.parse::<std::net::SocketAddr>().is_err()
        {
            p.push((
                Item::Daemon,
                format!(
                    "[daemon] metrics = {m:?} is not an address and port \
                     (\"127.0.0.1:9400\", \"[::1]:9400\")"
                ),
            ));
        }
        if let Some(Err(e)) = d.control_socket.mode_bits() {
            p.push((Item::Daemon, format!("[daemon] {e}")));
        }
        if d.dsa_inline_below > MAX_DSA_INLINE_BELOW {
            p.push((
                Item::Daemon,
                format!(
                    "[daemon] dsa-inline-below = {} is out of range: 0 to {MAX_DSA_INLINE_BELOW} \
                     bytes (to keep every copy on the CPU, use copy-engine = \"cpu\")",
                    d.dsa_inline_below
                ),
            ));
        }
        if d.dsa_model_fault_every != 0 && d.dsa_queue.as_deref() != Some("model") {
            p.push((
                Item::Daemon,
                "[daemon] dsa-model-fault-every is for the software model only: it needs \
                 dsa-queue = \"model\""
                    .into(),
            ));
        }
        for (k, n) in self.network.iter().enumerate() {
            let item = Item::Network(k);
            for m in n.problems() {
                p.push((item, format!("[[network]] {}: {m}", n.name)));
            }
            if self.network[..k].iter().any(|o| o.name == n.name) {
                p.push((
                    item,
                    format!("[[network]] {}: the name is used twice", n.name),
                ));
            }
            if let Some(o) = self.network[..k].iter().find(|o| o.vni == n.vni) {
                p.push((
                    item,
                    format!(
                        "[[network]] {}: vni {} is network {}'s already",
                        n.name, n.vni, o.name
                    ),
                ));
            }
        }
        let names = self.interface_names();
        for (k, i) in self.interface.iter().enumerate() {
            let at = format!(
                "[[interface]] {} (socket {:?} id {})",
                names[k], i.socket, i.id
            );
            let item = Item::Interface(k);
            for m in i.problems() {
                p.push((item, format!("{at}: {m}")));
            }
            if let Some(n) = &i.network {
                match self.network.iter().find(|x| &x.name == n) {
                    None => p.push((
                        item,
                        format!(
                            "{at}: no network named {n:?} (have: {})",
                            self.network
                                .iter()
                                .map(|x| x.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                    Some(net) => {
                        for a in i.addresses.iter().filter(|a| !net.contains(a.addr)) {
                            p.push((
                                item,
                                format!("{at}: address {a} is outside network {n}'s ranges"),
                            ));
                        }
                    }
                }
            }
            for m in placement_problems(&i.rx_placement, &d.workers) {
                p.push((item, format!("{at}: {m}")));
            }
            if self.interface[..k]
                .iter()
                .any(|o| o.socket == i.socket && o.id == i.id)
            {
                p.push((item, format!("{at}: socket and id are used twice")));
            }
            if names[..k].contains(&names[k]) {
                p.push((item, format!("{at}: the name {:?} is used twice", names[k])));
            }
            let sockets_role = self
                .interface
                .iter()
                .find(|o| o.socket == i.socket)
                .map(|o| o.role);
            if sockets_role != Some(i.role) {
                p.push((
                    item,
                    format!(
                        "{at}: one socket is either master or slave, and this one is used as both"
                    ),
                ));
            }
        }
        // The uplinks, af-packet ones then af-xdp ones, as `interface_names` lists them.
        let uplinks = self
            .af_packet
            .iter()
            .enumerate()
            .map(|(k, a)| {
                (
                    Item::AfPacket(k),
                    "af-packet",
                    a.name(),
                    a.problems(),
                    &a.host_if,
                    &a.rx_placement,
                )
            })
            .chain(self.af_xdp.iter().enumerate().map(|(k, x)| {
                (
                    Item::AfXdp(k),
                    "af-xdp",
                    x.name(),
                    x.problems(),
                    &x.host_if,
                    &x.rx_placement,
                )
            }));
        let mut hosts: Vec<&str> = Vec::new();
        for (u, (item, kind, name, problems, host_if, rx_placement)) in uplinks.enumerate() {
            let at = format!("[[{kind}]] {name}");
            for m in problems {
                p.push((item, format!("{at}: {m}")));
            }
            let j = self.interface.len() + u;
            if names[..j].contains(&names[j]) {
                p.push((item, format!("{at}: the name {:?} is used twice", names[j])));
            }
            if hosts.contains(&host_if.as_str()) {
                p.push((item, format!("{at}: host-if {host_if} is used twice")));
            }
            hosts.push(host_if);
            for m in placement_problems(rx_placement, &d.workers) {
                p.push((item, format!("{at}: {m}")));
            }
        }
        let known: HashSet<&str> = names.iter().map(String::as_str).collect();
        let unknown = |n: &str| format!("no interface named {n:?} (have: {})", names.join(", "));
        for (k, n) in self.network.iter().enumerate() {
            if let Some(u) = &n.uplink
                && !known.contains(u.as_str())
            {
                p.push((
                    Item::Network(k),
                    format!("[[network]] {}: uplink: {}", n.name, unknown(u)),
                ));
            }
        }
        for (k, r) in self.route.iter().enumerate() {
            if let Some(n) = &r.network {
                if !self.network.iter().any(|x| &x.name == n) {
                    p.push((
                        Item::Route(k),
                        format!("[[route]] {}: no network named {n:?}", r.prefix),
                    ));
                }
                if r.table != 0 {
                    p.push((
                        Item::Route(k),
                        format!(
                            "[[route]] {}: table and network both set: a network's routes are in its VRF",
                            r.prefix
                        ),
                    ));
                }
            }
        }
        for (k, r) in self.route.iter().enumerate() {
            if let Some(n) = &r.interface
                && !known.contains(n.as_str())
            {
                p.push((
                    Item::Route(k),
                    format!("[[route]] {}: {}", r.prefix, unknown(n)),
                ));
            }
        }
        for (k, n) in self.neighbor.iter().enumerate() {
            if !known.contains(n.interface.as_str()) {
                p.push((
                    Item::Neighbor(k),
                    format!("[[neighbor]] {}: {}", n.ip, unknown(&n.interface)),
                ));
            }
        }
        p
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_toml())
    }
}

/// Every table of array `[[name]]` deserialized on its own into `out`, its span into `spans`;
/// the tables that do not deserialize become problems.
fn section<T: serde::de::DeserializeOwned>(
    value: Spanned<DeValue<'_>>,
    name: &str,
    out: &mut Vec<T>,
    spans: &mut Vec<Range<usize>>,
    problems: &mut Vec<(Option<Range<usize>>, String)>,
) {
    for (v, s) in items(value, name, problems) {
        match typed::<T>(v) {
            Ok(x) => {
                out.push(x);
                spans.push(s);
            }
            Err(e) => problems.push((e.span(), format!("[[{name}]]: {}", e.message()))),
        }
    }
}

/// Deserializes one table of the document on its own, so a bad one does not hide the next.
fn typed<T: serde::de::DeserializeOwned>(v: Spanned<DeValue<'_>>) -> Result<T, toml::de::Error> {
    T::deserialize(serde::de::IntoDeserializer::into_deserializer(v))
}

/// The tables of an array of tables (`[[name]]`), each with its span.
fn items<'i>(
    v: Spanned<DeValue<'i>>,
    name: &str,
    problems: &mut Vec<(Option<Range<usize>>, String)>,
) -> Vec<(Spanned<DeValue<'i>>, Range<usize>)> {
    let span = v.span();
    match v.into_inner() {
        DeValue::Array(a) => a.iter().map(|x| (x.clone(), x.span())).collect(),
        _ => {
            problems.push((
                Some(span),
                format!("{name} must be an array of tables: write each as [[{name}]]"),
            ));
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests;
