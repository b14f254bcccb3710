//! Graph nodes: the only place where per-packet protocol logic lives.
//!
//! Each module is one node with VPP's name and shape: one function over a frame that computes
//! every buffer's next node, counts every drop under a named error, and records small trace
//! data for traced buffers. Nodes read forwarding state through [`Shared`]: snapshots loaded
//! once per frame, never a lock. They never allocate, log or return a `Result` per packet.
//!
//! Here now: `memif-input`, `ethernet-input`, `ip4-input`, `ip4-lookup`, `ip4-rewrite`,
//! `interface-output` (memif transmit) and `error-drop`.

pub mod error_drop;
pub mod ethernet_input;
pub mod ip4_input;
pub mod ip4_lookup;
pub mod ip4_rewrite;
pub mod memif_nodes;

use std::sync::Arc;

use arc_swap::ArcSwap;
use fib::LpmReader;
use fib::adj::AdjReader;

pub use error_drop::ErrorDrop;
pub use ethernet_input::EthernetInput;
pub use ip4_input::Ip4Input;
pub use ip4_lookup::Ip4Lookup;
pub use ip4_rewrite::Ip4Rewrite;
pub use memif_nodes::{InterfaceOutput, MemifInput, QueueCommand};

/// What the nodes know of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IfConfig {
    pub mac: [u8; 6],
    /// The VRF (IPv4 table) packets received here are looked up in.
    pub vrf: u32,
    pub up: bool,
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
