//! The uplinks on kernel interfaces: AF_PACKET (`[[af-packet]]`) and AF_XDP (`[[af-xdp]]`).

use serde::{Deserialize, Serialize};

use super::interface::{duplicate_addresses, mtu_problem};
use super::{is_true, is_zero, yes};
use crate::types::{Ipv4Prefix, MacAddr};

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
    /// How the kernel hands received frames over; default by the host interface's MTU:
    /// `frames` up to 3982, `blocks` above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_ring: Option<RxRing>,
    /// Send a run of one UDP flow's datagrams (VXLAN to one VTEP) as one UDP super-packet
    /// (`GSO_UDP_L4`), which the kernel cuts only where a device needs it. Default on; off
    /// when a peer on the same veth cannot take super-packets (a veclane older than them).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub udp_gso: bool,
}

/// An AF_PACKET uplink's receive ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RxRing {
    /// Fixed slots (TPACKET_V2), each frame handed over as it arrives: no added latency.
    Frames,
    /// Blocks (TPACKET_V3) handed over when full or 1 ms after they were opened: more small
    /// frames per byte of ring and fewer wake-ups, but a lone frame waits up to 1 ms.
    Blocks,
}

impl std::str::FromStr for RxRing {
    type Err = String;
    fn from_str(s: &str) -> Result<RxRing, String> {
        match s {
            "frames" => Ok(RxRing::Frames),
            "blocks" => Ok(RxRing::Blocks),
            x => Err(format!("rx-ring {x:?}: expected frames or blocks")),
        }
    }
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
            rx_ring: None,
            udp_gso: true,
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
