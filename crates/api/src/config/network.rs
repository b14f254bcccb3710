//! What is routed: networks (`[[network]]`, each with a VRF and a VNI of its own), static
//! routes (`[[route]]`) and neighbours (`[[neighbor]]`).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::{is_true, is_zero, yes};
use crate::types::{Ipv4Prefix, MacAddr, Via};

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
