//! Uplinks to the host kernel's network stack.
//!
//! `uplink` owns every socket, ring mapping and fd of an uplink device and that device's graph
//! nodes: today AF_PACKET ([`af_packet`]: PACKET_MMAP rings on a host interface, several
//! queues through a fanout group) with `af-packet-input` and `af-packet-output`
//! ([`nodes`]). Ring memory is shared with the kernel, which writes it while we run: it is
//! reached only through one bounds-checked accessor with atomic status words
//! (`af_packet/ring.rs`), and the other C-struct system calls live in `af_packet/sys.rs`;
//! those two modules hold all of the crate's `unsafe`.
//!
//! It must never parse packets beyond the Ethernet header's length and VLAN tag (that is
//! `wire`), make forwarding decisions, block on the data path, or panic on what the kernel or
//! a vanished interface hands it: every drop is counted under a named counter.

#![deny(unsafe_op_in_unsafe_fn)]
// `unsafe` is allowed back only in `af_packet/ring.rs` and `af_packet/sys.rs`.
#![deny(unsafe_code)]

pub mod af_packet;
pub mod nodes;

pub use af_packet::{
    AfPacket, AfPacketConfig, AfPacketError, Fanout, Interface, LinkError, PacketSocket, RecvStats,
    RingGeometry, RxCounters, RxQueue, RxStats, SendStats, TxCounters, TxQueue, TxStats,
};
