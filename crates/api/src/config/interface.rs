//! The interfaces veclane's own devices make: memif (`[[interface]]`, `create interface memif`)
//! and tap (`create interface tap`, for pods), and the checks every interface shares (MTU,
//! addresses, placement, pod ids).

use serde::{Deserialize, Serialize};

use super::{is_false, is_true, is_zero, yes};
use crate::types::{Ipv4Prefix, MacAddr, Role, RxMode};

/// Ring sizes a memif interface accepts (slots, a power of two).
pub const RING_SIZES: std::ops::RangeInclusive<u32> = 2..=16384;

/// The default [`MemifSpec::region_limit_mib`] of a master accepting `rx` + `tx` rings of
/// `ring_size` slots: a copy-mode peer (libmemif, VPP with `no-zero-copy`, DPDK, gomemif)
/// puts one buffer of `buffer_size` bytes (2048 at least: what they all use) behind each slot
/// of each ring; twice that leaves room for a peer with larger buffers or spare ones, and one
/// MiB more holds the rings.
pub fn region_limit_mib(rx: u16, tx: u16, ring_size: u32, buffer_size: u32) -> u32 {
    let bytes = 2 * u64::from(rx + tx) * u64::from(ring_size) * u64::from(buffer_size.max(2048));
    u32::try_from(bytes.div_ceil(1 << 20) + 1).unwrap_or(u32::MAX)
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
    /// Master only: the most MiB a peer's regions may take together. Default: what its
    /// rings can use, twice over ([`region_limit_mib`]). A zero-copy peer (VPP's slave
    /// unless `no-zero-copy`, DPDK's `zero-copy=yes`) hands over its whole buffer memory
    /// as regions and needs more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region_limit_mib: Option<u32>,
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
    /// Anti-spoofing: the only sources packets received here may have (the pod's own
    /// addresses as /32s, plus the prefixes a pod that routes for others declares); anything
    /// else is dropped and counted, and ARP may claim only these. Absent: no check (the
    /// default for interfaces the CNI does not create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_sources: Option<Vec<Ipv4Prefix>>,
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
            region_limit_mib: None,
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
            allowed_sources: None,
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
        if self.region_limit_mib == Some(0) {
            p.push("region-limit-mib must be at least 1".into());
        }
        if self.region_limit_mib.is_some() && self.role == Role::Slave {
            p.push(
                "region-limit-mib is for the master role: as slave the daemon makes the regions"
                    .into(),
            );
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
    /// Anti-spoofing: the only sources packets received here may have (the pod's own
    /// addresses as /32s, plus the prefixes a pod that routes for others declares); anything
    /// else is dropped and counted, and ARP may claim only these. Absent: no check (the
    /// default for interfaces the CNI does not create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_sources: Option<Vec<Ipv4Prefix>>,
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
            allowed_sources: None,
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

/// Receive-queue placements on a core that has no worker.
pub(super) fn placement_problems(rx_placement: &[usize], workers: &[usize]) -> Vec<String> {
    rx_placement
        .iter()
        .filter(|c| !workers.contains(c))
        .map(|c| format!("rx-placement core {c} has no worker (workers = {workers:?})"))
        .collect()
}

/// An address listed twice in one interface's `addresses`.
pub(super) fn duplicate_addresses(addresses: &[Ipv4Prefix]) -> Vec<String> {
    addresses
        .iter()
        .enumerate()
        .filter(|&(i, a)| addresses[..i].iter().any(|b| b.addr == a.addr))
        .map(|(_, a)| format!("address {} is listed twice", a.addr))
        .collect()
}
