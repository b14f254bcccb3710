//! A tap device for a pod: a kernel Ethernet interface (`eth1` in the pod's namespace) whose
//! other end is us. What the pod's stack sends on it we read from the device's fd; what we
//! write there the pod's stack receives. Ordinary programs in the pod (ping, curl, iperf3)
//! then reach the networks veclane routes.
//!
//! The device is created inside the pod's namespace (the fds are opened by a thread that
//! entered it, [`crate::netns`]), with `IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE`:
//! one fd per queue, each both a receive and a transmit queue, and a 12-byte virtio-net header
//! (`struct virtio_net_hdr_v1`) in front of every frame each way. `IFF_TUN_EXCL` on the first
//! makes creating a device whose name is taken fail instead of joining it. The device is not
//! persistent: the kernel removes it when its last fd closes, so nothing outlives the
//! interface (or the daemon). Each fd also holds the pod's namespace (a tun fd is a socket of
//! that namespace): deleting the interface, not the namespace, is what frees them.
//!
//! Offloads: the device announces checksum offload (`TUN_F_CSUM`), so the pod's stack may
//! leave a TCP or UDP checksum for us to complete (`VIRTIO_NET_HDR_F_NEEDS_CSUM`), which
//! receive does before the frame enters the graph, as every path out of it (memif, VXLAN,
//! another tap) needs a finished checksum; it is counted. It announces TCP segmentation
//! offload for IPv4 (`TUN_F_TSO4`, with ECN), so the pod's stack hands us TCP in super-frames
//! of up to 64 KiB, one system call for dozens of segments. Receive keeps each whole, one
//! chain (`gso_size` set, its checksum partial: [`wire::tso`]); it goes whole to another pod's
//! tap, written with a header that says what it is, and is cut into segments (`gso-ip4`)
//! only on its way to an interface that takes none. Anything else marked for segmentation
//! (UDP, IPv6: not announced) is dropped and counted (`gso`). Plain frames are written with
//! an all-zero header (checksums as they are), except a run of one flow's TCP segments whose
//! checksums are known good: that goes as one super-frame, its checksum partial
//! (`coalesce`), so that the receiving pod's stack takes up to 64 KiB in one pass.
//!
//! Reading and writing are one system call per frame (`readv`/`writev`, fd non-blocking):
//! the kernel's tap has no rings to share. A frame lands in one pool buffer when it fits
//! (2048 bytes of data by default: any frame of a 1500-byte MTU) and in a chain otherwise,
//! by way of a per-queue overflow area, so no frame is ever cut.

/// Writing runs of TCP segments as super-frames.
mod coalesce;
/// The queues' counters.
mod counters;
/// Creating the device and its queues.
mod device;
/// The receive side.
mod rx;
/// The ioctls (all of the tap's `unsafe`).
mod sys;
/// The transmit side.
mod tx;

pub use counters::{RxCounters, RxStats, TxCounters, TxStats};
pub use device::{Tap, TapConfig, TapError};
pub use rx::{RecvStats, RxQueue};
pub use tx::{SendStats, TxQueue};

/// The tap's virtio-net header, `struct virtio_net_hdr_v1` ([`crate::vnet`]).
pub const VNET_HDR_LEN: usize = crate::vnet::LEN_V1;
/// The most a tap hands us in one read: a 64 KiB super-frame and its header.
const OVERFLOW: usize = 65536 + VNET_HDR_LEN;
const ETH_HDR: usize = wire::ethernet::HEADER_LEN;
