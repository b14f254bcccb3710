//! Devices of the host kernel's network stack: uplinks, and the taps that give pods a kernel
//! interface.
//!
//! `uplink` owns every socket, ring mapping, UMEM, BPF object and fd of such a device and
//! that device's graph nodes: AF_PACKET ([`af_packet`]: PACKET_MMAP rings on a host
//! interface, several queues through a fanout group) with `af-packet-input` and
//! `af-packet-output` ([`nodes`]), AF_XDP ([`af_xdp`]: an XDP program of its own that
//! steers each queue's frames to an AF_XDP socket with its UMEM) with `af-xdp-input` and
//! `af-xdp-output` ([`xdp_nodes`]), and tap ([`tap`]: a multi-queue tap device with
//! virtio-net headers, created inside a pod's network namespace, [`netns`]) with `tap-input`
//! and `tap-output` ([`tap_nodes`]). Ring and UMEM memory is shared with the kernel, which
//! writes it while we run: it is reached only through bounds-checked accessors with atomic
//! status words and indices (`af_packet/ring.rs`, `af_xdp/ring.rs`, `af_xdp/umem.rs`), and
//! the other C-struct system calls live in `af_packet/sys.rs`, `af_xdp/sys.rs` (`bpf(2)`)
//! and `tap/sys.rs` (the tun ioctls); those six modules hold all of the crate's `unsafe`. The
//! XDP program is attached through a BPF link, so the kernel detaches it when the uplink's
//! last fd closes, however the process ends; it never replaces another program. A tap is not
//! persistent: it goes with its last fd.
//!
//! It must never parse packets beyond the Ethernet header's length and VLAN tag itself (that is
//! `wire`: the tap's TCP segmentation reads and writes its headers through `wire`'s views),
//! make forwarding decisions, block on the data path, or panic on what the kernel or a
//! vanished interface hands it: every drop is counted under a named counter.

#![deny(unsafe_op_in_unsafe_fn)]
// `unsafe` is allowed back only in `af_packet/{ring,sys}.rs`, `af_xdp/{ring,umem,sys}.rs` and
// `tap/sys.rs`.
#![deny(unsafe_code)]

pub mod af_packet;
pub mod af_xdp;
pub mod netns;
pub mod nodes;
pub mod tap;
pub mod tap_nodes;
/// The virtio-net header a tap and an AF_PACKET socket put before each frame.
mod vnet;
pub mod xdp_nodes;

pub use af_packet::{
    AfPacket, AfPacketConfig, AfPacketError, Fanout, Interface, LinkError, PacketSocket, RecvStats,
    RingGeometry, RxCounters, RxQueue, RxRing, RxStats, SendStats, TxCounters, TxQueue, TxStats,
};
pub use af_xdp::{AfXdp, AfXdpConfig, AfXdpError, XdpAttach, XskMode};
