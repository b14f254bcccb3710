//! Graph nodes: the only place where per-packet protocol logic lives.
//!
//! Each module is one node with VPP's name and shape: one function over a frame that computes
//! every buffer's next node, counts every drop under a named error, and records small trace
//! data for traced buffers. Nodes read forwarding state through [`Shared`]: snapshots loaded
//! once per frame, never a lock. They never allocate, log or return a `Result` per packet.
//!
//! Here now: `memif-input`, `ethernet-input`, `arp-input`, `ip4-input`, `ip4-lookup`,
//! `ip4-local` (ICMP echo), `ip4-rewrite`, `interface-output` (memif transmit), `error-drop`.

pub mod arp_input;
pub mod error_drop;
pub mod ethernet_input;
pub mod ip4_input;
pub mod ip4_local;
pub mod ip4_lookup;
pub mod ip4_rewrite;
pub mod memif_nodes;

use std::sync::Arc;

use arc_swap::ArcSwap;
use fib::LpmReader;
use fib::adj::AdjReader;

pub use arp_input::ArpInput;
pub use error_drop::ErrorDrop;
pub use ethernet_input::EthernetInput;
pub use ip4_input::Ip4Input;
pub use ip4_local::Ip4Local;
pub use ip4_lookup::Ip4Lookup;
pub use ip4_rewrite::Ip4Rewrite;
pub use memif_nodes::{InterfaceOutput, MemifInput, QueueCommand};

/// Buffer flag: we generated this packet (an echo reply, say); `ip4-rewrite` neither checks
/// nor decrements its TTL. (Bit 0 is the graph's trace flag.)
pub const LOCALLY_ORIGINATED: u16 = 1 << 1;

/// What the nodes know of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfConfig {
    pub mac: [u8; 6],
    /// The VRF (IPv4 table) packets received here are looked up in.
    pub vrf: u32,
    pub up: bool,
    /// Our addresses on this interface (address, prefix length).
    pub addresses: Vec<(fib::Ipv4Addr, u8)>,
}

impl IfConfig {
    pub fn new(mac: [u8; 6], vrf: u32) -> IfConfig {
        IfConfig {
            mac,
            vrf,
            up: true,
            addresses: Vec::new(),
        }
    }

    pub fn owns(&self, a: fib::Ipv4Addr) -> bool {
        self.addresses.iter().any(|(x, _)| *x == a)
    }

    /// Whether `a` is on one of this interface's connected subnets.
    pub fn on_link(&self, a: fib::Ipv4Addr) -> bool {
        self.addresses.iter().any(|(x, l)| {
            let m = if *l == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(*l))
            };
            u32::from(*x) & m == u32::from(a) & m
        })
    }
}

/// A neighbour a worker saw (ARP request or reply); the control thread learns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    pub ifindex: u32,
    pub ip: fib::Ipv4Addr,
    pub mac: [u8; 6],
}

/// Forwarding state shared by the control thread (writer) and the workers (readers).
#[derive(Debug, Clone)]
pub struct Shared {
    /// Indexed by interface index.
    pub interfaces: Arc<ArcSwap<Vec<IfConfig>>>,
    /// Indexed by VRF id.
    pub vrfs: Arc<ArcSwap<Vec<LpmReader>>>,
    pub adjacencies: AdjReader,
}
