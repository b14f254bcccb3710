//! What the `show` requests return: interfaces, runtime, buffers, copy engines, errors,
//! routes, networks, tunnels and neighbours (services, sessions and policies: sessions.rs).

use serde::{Deserialize, Serialize};

use crate::{CopyEngine, Ipv4Prefix, MacAddr, MemifMode, Role, RxMode};

/// One interface, as `show interface` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceInfo {
    pub name: String,
    pub index: u32,
    /// What kind of interface it is, and what only that kind has.
    pub device: DeviceInfo,
    pub mac: MacAddr,
    pub admin_up: bool,
    /// memif: a peer is connected; af-packet: the host interface is there; a tunnel: always.
    pub connected: bool,
    pub table: u32,
    /// The network it is attached to, if any.
    pub network: Option<String>,
    pub addresses: Vec<Ipv4Prefix>,
    /// The largest IPv4 packet sent out of it.
    pub mtu: u16,
    pub peer: Option<String>,
    /// Queues in use: none while a memif is not connected (its limits are in `device`).
    pub rx_queues: u16,
    pub tx_queues: u16,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Received descriptors the peer got wrong (bad region/offset/length), too-large frames;
    /// af-packet: frames the kernel dropped or truncated.
    pub rx_errors: u64,
    /// Packets the peer (or the kernel's ring) gave us no room for.
    pub tx_no_room: u64,
    /// Received packets left waiting (memif: in the peer's ring) or lost for want of a
    /// local buffer (also in `rx_errors` where they are lost).
    #[serde(default)]
    pub rx_no_buffer: u64,
    /// Sends that found the transmit ring full.
    #[serde(default)]
    pub tx_ring_full: u64,
    /// memif interrupts (eventfd signals) sent and received.
    #[serde(default)]
    pub interrupts: u64,
    /// af-packet: UDP super-packets sent (a run of one flow's datagrams in one system call;
    /// the datagrams are counted in `tx_packets` too), the datagrams they held, and runs the
    /// kernel refused as one (sent one by one instead).
    #[serde(default)]
    pub tx_super_packets: u64,
    #[serde(default)]
    pub tx_super_packet_datagrams: u64,
    #[serde(default)]
    pub tx_super_packets_refused: u64,
    pub connects: u64,
    pub disconnects: u64,
    pub last_disconnect_reason: Option<String>,
    /// The pod (container id) it belongs to, if its creator said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The only sources it takes packets from, if it checks them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_sources: Option<Vec<Ipv4Prefix>>,
}

/// The part of `show interface` that depends on the kind of interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DeviceInfo {
    Memif {
        role: Role,
        socket: String,
        id: u32,
        ring_size: u32,
        buffer_size: u32,
        /// Master: the most MiB its peer's regions may take together.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region_limit_mib: Option<u32>,
        /// The most queues each way: as master the peer chooses up to these, as slave we
        /// ask for these. The queues in use are [`InterfaceInfo::rx_queues`] and `tx_queues`.
        #[serde(default)]
        max_rx_queues: u16,
        #[serde(default)]
        max_tx_queues: u16,
        /// The network namespace the socket listens in (a pod's), if not ours.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        netns: Option<String>,
        #[serde(default)]
        mode: MemifMode,
        /// What its payload copies go through: `cpu`, `thread`, `dsa wq0.0`, or with
        /// `use-dma` and no usable queue `cpu (use-dma: why)`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        copy: Option<String>,
    },
    AfPacket {
        host_if: String,
    },
    AfXdp {
        host_if: String,
        /// `copy` or `zero-copy`, as the driver gave it.
        mode: String,
        /// Where the XDP program runs: `driver` or `skb`.
        attach: String,
    },
    Tap {
        /// The device's name in its namespace.
        host_if_name: String,
        /// Its namespace, if not ours.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        netns: Option<String>,
        /// The pod side's MAC.
        host_mac: MacAddr,
    },
    Vxlan {
        vni: u32,
        src: std::net::Ipv4Addr,
        dst: std::net::Ipv4Addr,
        /// Static routes through it (it is deleted with the last).
        routes: usize,
    },
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceInfo::Memif {
                role,
                socket,
                id,
                ring_size,
                buffer_size,
                region_limit_mib,
                max_rx_queues,
                max_tx_queues,
                netns,
                mode,
                copy,
            } => {
                write!(
                    f,
                    "memif {role} id {id} socket {socket} ring {ring_size} buffer {buffer_size} max-queues rx {max_rx_queues} tx {max_tx_queues}"
                )?;
                if let Some(m) = region_limit_mib {
                    write!(f, " region-limit {m} MiB")?;
                }
                if *mode == MemifMode::Ip {
                    write!(f, " mode ip")?;
                }
                if let Some(c) = copy {
                    write!(f, " copy {c}")?;
                }
                match netns {
                    Some(n) => write!(f, " netns {n}"),
                    None => Ok(()),
                }
            }
            DeviceInfo::Tap {
                host_if_name,
                netns,
                host_mac,
            } => {
                write!(f, "tap host-if-name {host_if_name} host-mac {host_mac}")?;
                match netns {
                    Some(n) => write!(f, " netns {n}"),
                    None => Ok(()),
                }
            }
            DeviceInfo::AfPacket { host_if } => write!(f, "af-packet host-if {host_if}"),
            DeviceInfo::AfXdp {
                host_if,
                mode,
                attach,
            } => write!(f, "af-xdp host-if {host_if} {mode} xdp {attach}"),
            DeviceInfo::Vxlan {
                vni,
                src,
                dst,
                routes,
            } => write!(f, "vxlan vni {vni} {src} -> {dst}, {routes} route(s)"),
        }
    }
}

/// One rx queue's worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub interface: String,
    pub queue: u16,
    pub worker: usize,
    pub core: Option<usize>,
    pub mode: RxMode,
    pub connected: bool,
}

/// One node's clocks on one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRuntime {
    pub name: String,
    pub kind: String,
    pub calls: u64,
    pub vectors: u64,
    /// Nanoseconds in the node.
    pub clocks: u64,
}

/// `show buffers` for one worker: its pool, between two dispatch loops (buffers in flight in
/// a frame are not free).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerBuffers {
    pub worker: usize,
    pub core: Option<usize>,
    pub total: usize,
    pub free: usize,
}

/// Bytes of memif regions mapped from peers, every interface together, and their budget
/// (`[daemon] memif-memory-mib`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemifRegions {
    pub mapped: u64,
    pub budget: u64,
}

/// `show copy-engine`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyEngineInfo {
    /// `copy-engine` of the configuration.
    pub configured: CopyEngine,
    /// Where DSA work queues come from: `discover`, a queue's name or path, or `model` (the
    /// software model: tests only).
    pub dsa_source: String,
    /// Usable DSA work queues discovery found (`wq0.0 dedicated /dev/dsa/wq0.0`).
    pub dsa_queues: Vec<String>,
    /// Those it found and cannot use, each with the reason.
    pub dsa_unusable: Vec<String>,
    /// Why DSA is not in use where it was asked for (`auto`, `use-dma`), if it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not_dsa: Option<String>,
    /// Memory registered (faulted in) for DSA engines: `worker 0 buffers: 37.7 MB, populated`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registered: Vec<String>,
    pub engines: Vec<EngineInfo>,
}

/// One engine of one worker's node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineInfo {
    pub worker: usize,
    /// `memif-input` or `memif-output`.
    pub node: String,
    /// `default` (every memif interface's copies) or `use-dma` (those of interfaces with
    /// `use-dma`).
    pub role: String,
    pub kind: CopyEngine,
    /// A DSA engine's work queue, and how descriptors reach it (`wq0.0 write`, `model0 model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Why the queue is used this way, when not the fastest way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub batches: u64,
    pub copies: u64,
    pub bytes: u64,
    /// Submissions refused for want of room (retried).
    pub full: u64,
    pub descriptors: u64,
    /// Copies memif made on the CPU at once for being shorter than the engine takes
    /// (`dsa-inline-below`).
    #[serde(default)]
    pub short: u64,
    /// Copies the engine itself made on the CPU for being short.
    pub inline: u64,
    /// Copies finished on the CPU after a fault.
    pub recovered: u64,
    /// Batches redone on the CPU after the watchdog.
    pub watchdog: u64,
    /// Batches copied on the CPU after the breaker tripped.
    pub fallback: u64,
    /// Why the engine went over to the CPU for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripped: Option<String>,
}

/// `show runtime` for one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRuntime {
    pub worker: usize,
    pub core: Option<usize>,
    /// Seconds since the counters were cleared.
    pub seconds: f64,
    /// Of those, seconds in dispatch loops that moved at least one packet.
    #[serde(default)]
    pub busy_seconds: f64,
    /// Dispatch loops run and the loops that went to sleep.
    pub loops: u64,
    pub sleeps: u64,
    /// Times the watchdog found the worker stalled (awake, no loop finished for 100 ms) and
    /// interrupted it; since the daemon started.
    #[serde(default)]
    pub stalls: u64,
    pub nodes: Vec<NodeRuntime>,
}

/// A non-zero error counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCount {
    pub count: u64,
    pub node: String,
    pub reason: String,
}

/// One route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FibEntry {
    pub table: u32,
    pub prefix: Ipv4Prefix,
    /// `receive`, `drop`, `glean memif0/1`, `via 10.0.0.2 memif0/1 02:..` and so on.
    pub path: String,
}

/// One table's size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FibTableSize {
    pub table: u32,
    pub routes: usize,
}

/// One network, as `show network` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkInfo {
    pub name: String,
    pub vni: u32,
    pub ranges: Vec<Ipv4Prefix>,
    /// The VRF the network owns on this node.
    pub table: u32,
    /// Interfaces attached to it.
    pub interfaces: Vec<String>,
    /// Where its tunnels leave, if it spans nodes.
    pub uplink: Option<String>,
    /// The controller that manages it, if any (`network add ... owner NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// One VXLAN tunnel, as `show vxlan tunnel` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelInfo {
    /// Its interface.
    pub name: String,
    pub network: String,
    pub vni: u32,
    /// Our VTEP (the uplink's address) and the remote one.
    pub src: std::net::Ipv4Addr,
    pub dst: std::net::Ipv4Addr,
    pub uplink: String,
    /// Inner MTU: the uplink's minus 50.
    pub mtu: u16,
    pub routes: usize,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Neighbor {
    pub interface: String,
    pub ip: std::net::Ipv4Addr,
    pub mac: MacAddr,
    /// Configured (`set ip neighbor`) rather than learned from ARP.
    pub static_entry: bool,
}

/// `show ip neighbors`' summary: the learned neighbours against their caps
/// (`[daemon.neighbours]`), and what the caps and aging did since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NeighbourTotals {
    pub learned: u64,
    pub max: u64,
    pub per_interface: u64,
    /// New neighbours not learned: their interface's share, or the whole table, was full of
    /// neighbours heard recently.
    pub refused: u64,
    /// New neighbours not learned because their host route would have taken one of the last
    /// quarter of their table's second-level groups (a /24 with longer routes each), which is
    /// kept for configured routes.
    pub refused_room: u64,
    /// Learned neighbours that made room for a new one, having been silent for longer than
    /// `stale-seconds`.
    pub evicted: u64,
    /// Learned neighbours forgotten after `age-seconds` without a word and three
    /// unanswered ARP requests.
    pub expired: u64,
    /// ARP requests sent to learned neighbours silent for `age-seconds`.
    pub probes: u64,
}
