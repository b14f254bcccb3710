//! `singlenet` and `multinet`: the node switch of the seeds' benchmark.
//!
//! A Calico VPP node moves pod traffic between its pods' memif interfaces and its uplink. In
//! the seeds' *singlenet* shape that traffic is routed in the default table; in *multinet*
//! every network has a VRF of its own and its traffic crosses the uplink in VXLAN with the
//! network's VNI: decapsulated on the way in (outer headers checked, tunnel found by outer
//! source and VNI, inner frame routed in the network's VRF to the pod), encapsulated on the
//! way out. The generator (one thread on its own CPU) plays both the remote node, on a memif
//! the DUT treats exactly as an uplink (VXLAN's underlay in multinet), and the pods, on one
//! memif per network. The DUT's worker has the other CPU.
//!
//! Addresses: the node's uplink is 192.168.0.1/24 and the remote node's VTEP 192.168.0.2.
//! Network `k` (VNI 100 + k in multinet; a subnet pair of the default table in singlenet)
//! has its pod at 10.(10+k).2.2 behind the node's 10.(10+k).2.1/24, and remote pods in
//! 10.(10+k).1.0/24 on the remote node: the same inner frames in both shapes, so that their
//! ratio is the cost of VXLAN and VRFs alone. [`Direction`] says which way frames go: into
//! the pods (`in`), out of them (`out`), or both at once.

/// veclane's and VPP's configurations, and the neighbours set on a running daemon.
mod dut;
/// What the remote node and the pods send.
mod frames;
/// `impl Topology`: the DUTs, starting one, the generator's configuration, its report.
mod topology;

#[cfg(test)]
mod tests;

use serde::Serialize;

use crate::Shape;

pub(crate) use dut::{neighbours_on_tunnels, prefix};
pub use dut::{veclane_config, vpp_topology};

/// The node scenarios' options in a run's configuration ([`crate::harness::L3fwdConfig`]
/// flattens them into its own keys, so a report names them as it always has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeOptions {
    /// Networks, each with a pod interface of its own, the frames spread over them (`--networks`).
    pub networks: u16,
    /// Which way the frames go (`--direction`).
    pub direction: Direction,
    /// How the remote node reaches the DUT's uplink (`--underlay`: memif, or a veth pair
    /// through the kernel: see [`crate::underlay`]).
    pub underlay: crate::underlay::Underlay,
}

/// One network, into the pods, on a memif underlay.
impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            networks: 1,
            direction: Direction::In,
            underlay: crate::underlay::Underlay::Memif,
        }
    }
}

/// Which way a node trial's frames go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// From the remote node to the pods: the uplink's frames are routed (multinet:
    /// decapsulated, then routed in the network's VRF) to each network's pod.
    In,
    /// From the pods to the remote node: routed (multinet: in the network's VRF, then
    /// encapsulated with its VNI) out of the uplink.
    Out,
    /// Both at once, the remote node sending as much as all the pods together.
    Both,
}

impl core::fmt::Display for Direction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Direction::In => "in",
            Direction::Out => "out",
            Direction::Both => "both",
        })
    }
}

/// A node-switch scenario: the shapes it measures every DUT in, interleaved.
#[derive(Debug)]
pub struct NodeTopology {
    name: &'static str,
    about: &'static str,
    shapes: &'static [Shape],
}

/// `singlenet`: the node routing pod traffic in its default table.
pub static SINGLENET: NodeTopology = NodeTopology {
    name: "singlenet",
    about: "Node switch, seeds' singlenet: generator as remote node (memif uplink) and pods (a memif each), routed in the default table",
    shapes: &[Shape::Singlenet],
};

/// `multinet`: singlenet and multinet side by side, for their ratio.
pub static MULTINET: NodeTopology = NodeTopology {
    name: "multinet",
    about: "Node switch, seeds' multinet beside singlenet: pod traffic in VXLAN per network (VNI, VRF) on the uplink, interleaved with the same traffic routed in the default table",
    shapes: &[Shape::Singlenet, Shape::Multinet],
};

/// The remote node's (and the pods') MAC: the generator's. The node scenarios (this one and
/// [`crate::pvp`]) share it and the uplink's addressing below.
pub(crate) const GEN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// The node's uplink MAC.
pub(crate) const UPLINK_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub(crate) const NODE_VTEP: [u8; 4] = [192, 168, 0, 1];
pub(crate) const REMOTE_VTEP: [u8; 4] = [192, 168, 0, 2];
/// Network `k`'s VNI is this plus `k`.
pub const VNI_BASE: u32 = 100;
/// The largest `--networks`: network `k` takes the second octet 10 + k.
pub const MAX_NETWORKS: u16 = 245;

/// The node's MAC on network `k`'s pod interface.
fn pod_mac(k: u16) -> [u8; 6] {
    let [hi, lo] = k.to_be_bytes();
    [0x02, 0, 0, 0x01, hi, lo]
}

/// The second octet of network `k`'s addresses.
fn octet(k: u16) -> u16 {
    10 + k
}

pub(crate) fn ip(a: [u8; 4]) -> std::net::Ipv4Addr {
    a.into()
}

/// A MAC as configuration files write it.
pub(crate) fn mac_str(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

/// The DUT's interface ids: the uplink is 0, network `k`'s pod `1 + k`.
fn pod_id(k: u16) -> u32 {
    1 + u32::from(k)
}
