//! An AF_PACKET uplink: a host kernel interface (a NIC, a veth end) driven through
//! PACKET_MMAP rings, one receive and one transmit socket per queue.
//!
//! Receive uses, by default up to MTU 3982 ([`RxRing::for_mtu`]), a TPACKET_V2 ring of fixed
//! frame slots: each frame is handed to us (and wakes a sleeping worker) as it arrives, and a
//! busy queue costs no system call per frame since the worker then polls the slots. Above
//! that MTU, and on request, TPACKET_V3 ([`RxRing::Blocks`]) packs frames into large blocks
//! and retires a block when it is full or after a timeout of at least 1 ms: denser for small
//! frames (slots sized for jumbo frames hold few), but a lone frame waits up to that timeout,
//! which a request/response crossing two nodes pays at each (1-2 ms a round trip on a quiet
//! path: docs/results/2026-11-30-af-packet-rx-ring.md). Several queues of one interface join one
//! PACKET_FANOUT_HASH group, which spreads flows across them by the kernel's flow hash and
//! keeps each flow on one queue.
//!
//! Transmit uses a TPACKET_V2 ring of fixed frames (the kernel's V3 transmit is the same thing
//! with a larger header) with PACKET_QDISC_BYPASS: frames go to the driver without a qdisc, as
//! a dataplane wants, and one `send` per batch kicks them all. PACKET_LOSS makes the kernel
//! skip a frame it refuses instead of stalling the ring on it; we check sizes first, so that
//! refusals are counted here rather than lost silently.
//!
//! # Host interface settings
//!
//! AF_PACKET sees frames after the kernel's offloads: a NIC's GRO/LRO merges a TCP stream
//! into super-frames of up to 64 KiB, and a local stack sending over a veth hands over
//! TSO/GSO super-frames and leaves checksums for "hardware" to fill. We ask for the kernel's
//! virtio-net header on receive and complete such checksums ourselves, but super-frames can
//! only be dropped (and counted as `gso`): a dataplane cannot forward them. So run
//! `ethtool -K <host_if> gro off lro off` on a NIC uplink, and `ethtool -K <peer> tso off
//! gso off` on the far end of a veth whose stack sends TCP.
//!
//! The reference is the kernel's "Packet MMAP" documentation
//! (Documentation/networking/packet_mmap.rst in the Linux sources) and `packet(7)`.

mod chain;
pub(crate) mod counters;
mod plain;
mod ring;
pub(crate) mod rx;
pub(crate) mod sys;
pub(crate) mod tx;
mod tx_gso;
mod udp_gso;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{AddressFamily, SocketFlags, SocketType};

pub use counters::{RxCounters, RxStats, TxCounters, TxStats};
pub use plain::PacketSocket;
pub use ring::OutOfBounds;
pub use rx::{RecvStats, RxQueue};
pub use tx::{SendStats, TxQueue};

/// `ETH_P_ALL`: every protocol.
const ETH_P_ALL: u16 = 0x0003;
const KIB: u32 = 1024;
/// The fewest transmit frames a ring sized from the MTU gets: two graph frames' worth.
const MIN_TX_FRAMES: u32 = 2 * graph::FRAME_SIZE as u32;
/// A ring of frames sized from the MTU gets at least this many bytes (4096 slots at MTU 1500,
/// as many descriptors as a NIC's receive ring commonly has) and at least [`MIN_TX_FRAMES`]
/// slots (512 at MTU 9000).
const MIN_RX_BYTES: u32 = 8 * 1024 * KIB;
/// What a receive slot holds besides the frame: `struct tpacket2_hdr` and `sockaddr_ll`
/// (52 bytes, aligned with room for a 16-byte link header: 80), the virtio-net header (10)
/// and alignment slack. The kernel places the frame at `tp_mac` = 76 untagged.
const RX_SLOT_OVERHEAD: u32 = 96;

/// The receive slot an MTU gets by default: the smallest power of two, at least 2048, that
/// holds an MTU-sized tagged frame with the slot's headers.
fn default_rx_slot(mtu: u32) -> u32 {
    (mtu.saturating_add(18 + RX_SLOT_OVERHEAD))
        .next_power_of_two()
        .max(2048)
}

/// Ring geometry for one direction of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingGeometry {
    /// Bytes per block: a multiple of the page size (a power of two wastes nothing, since the
    /// kernel allocates each block as 2^n pages). On receive, the largest frame that arrives
    /// whole is a little under one block.
    pub block_size: u32,
    pub block_count: u32,
    /// Bytes per frame slot, headers included; 0 picks the smallest power of two, at least
    /// 2048, that holds an MTU-sized tagged frame, and enough blocks for a useful number of
    /// slots. A smaller slot is allowed on receive: a frame that does not fit is read whole
    /// from the copy the kernel queues on the socket, a system call each. With
    /// [`RxRing::Blocks`] only the unit the kernel checks the block size against (TPACKET_V3
    /// frames are variable-length).
    pub frame_size: u32,
}

/// How the kernel hands received frames over: the receive ring's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxRing {
    /// TPACKET_V2 slots of `rx.frame_size` bytes: each frame is ours the moment it arrives
    /// and wakes a sleeping worker, so a lone frame waits for nothing.
    #[default]
    Frames,
    /// TPACKET_V3 blocks: frames packed back to back and handed over a block at a time, when
    /// the block is full or `timeout_ms` after it was opened (0 lets the kernel choose from the
    /// link speed, 8 ms for most; 1 is the least; kernels whose retire timer still counts
    /// jiffies round it up to one jiffy, 4 ms at HZ=250). Holds many more small frames per
    /// byte of ring and wakes a worker less often, but a lone frame waits up to the timeout.
    Blocks { timeout_ms: u32 },
}

impl RxRing {
    /// Frame slots where an MTU-sized frame fits a slot of 4 KiB (MTU up to 3982), blocks
    /// (1 ms) above: slots sized for jumbo frames hold few frames per byte of ring (512 of
    /// 16 KiB in 8 MiB at MTU 9000, against about 30 000 small frames in a 4 MiB ring of
    /// blocks), too few to ride out a worker's absence at a high rate of small frames.
    pub fn for_mtu(mtu: u32) -> RxRing {
        if default_rx_slot(mtu) <= 4096 {
            RxRing::Frames
        } else {
            RxRing::Blocks { timeout_ms: 1 }
        }
    }
}

/// How the queues of one interface find their fanout group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fanout {
    /// The kernel assigns an id no other group in the namespace has
    /// (PACKET_FANOUT_FLAG_UNIQUEID): no clash with another process's group.
    #[default]
    Unique,
    /// A fixed id, for when another program's sockets must join the same group.
    Id(u16),
}

/// How to open an AF_PACKET uplink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Queue pairs; with more than one, receive spreads flows over them by hash.
    pub queues: u16,
    /// Default: blocks of 128 KiB with slots sized from the MTU, 8 MiB and at least 512 slots
    /// (4096 at MTU 1500) of slack for a worker that is late. With [`RxRing::Blocks`], 32 blocks
    /// (4 MiB): about 30 000 minimum-size frames, and 32 retire periods for a sleeping worker.
    pub rx: RingGeometry,
    /// Default: 8 blocks of 256 KiB with frames sized from the MTU (1024 frames at MTU 1500),
    /// more blocks when that is under 512 frames (32 blocks, 8 MiB, at MTU 9000).
    pub tx: RingGeometry,
    /// The receive ring's layout; `None` (the default) picks it by the interface's MTU
    /// ([`RxRing::for_mtu`]).
    pub rx_ring: Option<RxRing>,
    pub fanout: Fanout,
    /// Receive frames addressed to any MAC (promiscuous, through a socket membership the
    /// kernel undoes when the socket closes); the dataplane usually has its own MACs.
    pub promiscuous: bool,
    /// Send runs of datagrams of one UDP flow (VXLAN to one VTEP) as UDP super-packets
    /// (`GSO_UDP_L4`), one system call and one skb each, which the kernel cuts only where a
    /// device needs it ([`udp_gso`]). Whatever receives them must take super-packets: the
    /// kernel does, and so does this uplink's receive side. Off for a generator, whose
    /// frames must reach the wire as it made them.
    pub udp_gso: bool,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            queues: 1,
            rx: RingGeometry {
                block_size: 128 * KIB,
                block_count: 32,
                frame_size: 0,
            },
            tx: RingGeometry {
                block_size: 256 * KIB,
                block_count: 8,
                frame_size: 0,
            },
            rx_ring: None,
            fanout: Fanout::Unique,
            promiscuous: true,
            udp_gso: true,
        }
    }
}

impl AfPacketConfig {
    /// The receive ring's layout, as [`AfPacket::open`] resolved it (by the MTU if unset).
    fn ring(&self) -> RxRing {
        self.rx_ring.unwrap_or(RxRing::Frames)
    }
}

/// The host interface an uplink drives, as the kernel described it at open time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub ifindex: u32,
    pub mac: [u8; 6],
    /// Read once at open: frames the transmit queues accept are sized from it.
    pub mtu: u32,
}

/// Why [`Interface::lookup`] failed; each device's error type says it in its own words.
#[derive(Debug)]
pub(crate) enum LookupError {
    BadName,
    NoSuchInterface,
    NotEthernet(u16),
    Os(&'static str, io::Error),
}

impl Interface {
    /// Looks `host_if` up in the calling thread's network namespace: its index, MAC and MTU,
    /// refusing a name the kernel would misread and an interface that is not Ethernet.
    pub(crate) fn lookup(host_if: &str) -> Result<Interface, LookupError> {
        if host_if.is_empty()
            || host_if.len() > 15
            || host_if
                .bytes()
                .any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace())
        {
            return Err(LookupError::BadName);
        }
        let probe = packet_socket().map_err(|e| LookupError::Os("socket(AF_PACKET)", e))?;
        let ifindex = rustix::net::netdevice::name_to_index(&probe, host_if).map_err(|e| {
            if e == rustix::io::Errno::NODEV {
                LookupError::NoSuchInterface
            } else {
                LookupError::Os("SIOCGIFINDEX", e.into())
            }
        })?;
        let (link_type, mac) =
            sys::hwaddr(probe.as_fd(), host_if).map_err(|e| LookupError::Os("SIOCGIFHWADDR", e))?;
        if link_type != libc::ARPHRD_ETHER {
            return Err(LookupError::NotEthernet(link_type));
        }
        let mtu = sys::mtu(probe.as_fd(), host_if).map_err(|e| LookupError::Os("SIOCGIFMTU", e))?;
        Ok(Interface {
            name: host_if.to_string(),
            ifindex,
            mac,
            mtu,
        })
    }
}

/// Why an uplink could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AfPacketError {
    #[error(
        "interface name {0:?} is invalid: it must be 1 to 15 bytes without '/', whitespace or NUL"
    )]
    BadName(String),
    #[error("no interface named {0:?} in this network namespace")]
    NoSuchInterface(String),
    #[error(
        "interface {name:?} has link type {link_type}, not Ethernet ({}): AF_PACKET uplinks carry Ethernet frames",
        libc::ARPHRD_ETHER
    )]
    NotEthernet { name: String, link_type: u16 },
    #[error("af_packet {name:?}: {field} = {value} is invalid: {want}")]
    Config {
        name: String,
        field: &'static str,
        value: u64,
        want: String,
    },
    #[error("af_packet {name:?} queue {queue}: {step}: {source}")]
    Os {
        name: String,
        queue: u16,
        step: &'static str,
        source: io::Error,
    },
}

/// The interface a queue sends on or receives from is gone or down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// Unregistered (deleted, moved to another namespace): the queue is dead; open again.
    #[error("interface vanished; its queues are dead")]
    Vanished,
    /// Administratively or operationally down: the queue works again once it is up.
    #[error("interface is down")]
    Down,
}

/// An opened uplink: the interface and its queue pairs, before they go to workers.
#[derive(Debug)]
pub struct AfPacket {
    interface: Interface,
    fanout_id: Option<u16>,
    queues: Vec<(RxQueue, TxQueue)>,
}

impl AfPacket {
    /// Opens `cfg.queues` receive and transmit sockets on `host_if` in the calling thread's
    /// network namespace. Either every queue opens or none does (sockets close on error).
    ///
    /// With several queues the interface should be up: kernels before 6.12 let a socket
    /// join a fanout group only while its interface is up. A frame arriving while the queues
    /// are still joining the group may be seen by two of them.
    pub fn open(host_if: &str, cfg: AfPacketConfig) -> Result<AfPacket, AfPacketError> {
        let os = |queue: u16, step: &'static str| {
            move |source: io::Error| AfPacketError::Os {
                name: host_if.to_string(),
                queue,
                step,
                source,
            }
        };
        let interface = Interface::lookup(host_if).map_err(|e| match e {
            LookupError::BadName => AfPacketError::BadName(host_if.to_string()),
            LookupError::NoSuchInterface => AfPacketError::NoSuchInterface(host_if.to_string()),
            LookupError::NotEthernet(link_type) => AfPacketError::NotEthernet {
                name: host_if.to_string(),
                link_type,
            },
            LookupError::Os(step, source) => os(0, step)(source),
        })?;
        let cfg = AfPacketConfig {
            rx_ring: Some(
                cfg.rx_ring
                    .unwrap_or_else(|| RxRing::for_mtu(interface.mtu)),
            ),
            ..cfg
        };
        let geo = Geometry::check(&interface, &cfg)?;
        let mut queues = Vec::with_capacity(usize::from(cfg.queues));
        let mut fanout_id = match cfg.fanout {
            Fanout::Id(id) => Some(id),
            Fanout::Unique => None,
        };
        for q in 0..cfg.queues {
            let rx = open_rx(&interface, &cfg, &geo, q).map_err(|(step, e)| os(q, step)(e))?;
            if cfg.queues > 1 {
                let id = join_fanout(rx.fd(), fanout_id).map_err(os(q, "PACKET_FANOUT"))?;
                fanout_id = Some(id);
            }
            let tx = open_tx(&interface, &cfg, &geo, q).map_err(|(step, e)| os(q, step)(e))?;
            queues.push((rx, tx));
        }
        Ok(AfPacket {
            interface,
            fanout_id: if cfg.queues > 1 { fanout_id } else { None },
            queues,
        })
    }

    pub fn interface(&self) -> &Interface {
        &self.interface
    }

    pub fn ifindex(&self) -> u32 {
        self.interface.ifindex
    }

    pub fn mac(&self) -> [u8; 6] {
        self.interface.mac
    }

    pub fn mtu(&self) -> u32 {
        self.interface.mtu
    }

    /// The fanout group the receive queues joined (with more than one queue).
    pub fn fanout_id(&self) -> Option<u16> {
        self.fanout_id
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// The queue pairs, to hand to workers (keep their counters first).
    pub fn into_queues(self) -> Vec<(RxQueue, TxQueue)> {
        self.queues
    }
}

/// Checked ring sizes for every queue of one interface.
#[derive(Debug)]
struct Geometry {
    rx: RingGeometry,
    tx: RingGeometry,
    tx_frames: u32,
}

impl Geometry {
    fn check(i: &Interface, cfg: &AfPacketConfig) -> Result<Geometry, AfPacketError> {
        let bad = |field, value: u32, want: String| AfPacketError::Config {
            name: i.name.clone(),
            field,
            value: u64::from(value),
            want,
        };
        let page = rustix::param::page_size() as u32;
        if cfg.queues == 0 {
            return Err(bad("queues", 0, "at least 1".into()));
        }
        // The largest frame, tagged, with the kernel's headers in front (block descriptor,
        // frame header, sockaddr_ll, virtio-net header) must fit one receive block.
        let largest = i.mtu.saturating_add(18);
        let mut rx = cfg.rx;
        if rx.frame_size == 0 {
            match cfg.ring() {
                RxRing::Frames => {
                    rx.frame_size = default_rx_slot(i.mtu);
                    if rx.block_size < rx.frame_size {
                        let want = format!("at least {} for MTU {}", rx.frame_size, i.mtu);
                        return Err(bad("rx.block_size", rx.block_size, want));
                    }
                    let slots = (MIN_RX_BYTES / rx.frame_size).max(MIN_TX_FRAMES);
                    let per_block = rx.block_size / rx.frame_size;
                    rx.block_count = rx.block_count.max(slots.div_ceil(per_block));
                }
                RxRing::Blocks { .. } => rx.frame_size = 2048,
            }
        }
        let mut tx = cfg.tx;
        if tx.frame_size == 0 {
            tx.frame_size = (largest + tx::TX_DATA).next_power_of_two().max(2048);
            // Sized from the MTU, the ring still holds two full frames of the graph (512
            // packets), whatever the MTU: at 9000, 128 frames would not take one.
            let per_block = (tx.block_size / tx.frame_size).max(1);
            tx.block_count = tx.block_count.max(MIN_TX_FRAMES.div_ceil(per_block));
        }
        let names = |d| match d {
            "rx" => ["rx.block_size", "rx.block_count", "rx.frame_size"],
            _ => ["tx.block_size", "tx.block_count", "tx.frame_size"],
        };
        for (dir, g) in [("rx", rx), ("tx", tx)] {
            let [block_size, block_count, frame_size] = names(dir);
            if g.block_size == 0 || !g.block_size.is_multiple_of(page) || g.block_size > 1 << 30 {
                let want = format!("a multiple of the page size ({page}), at most 1 GiB");
                return Err(bad(block_size, g.block_size, want));
            }
            if g.block_count == 0 || u64::from(g.block_size) * u64::from(g.block_count) > 1 << 32 {
                let want = "at least 1, with at most 4 GiB in all".into();
                return Err(bad(block_count, g.block_count, want));
            }
            if g.frame_size < 128 || !g.frame_size.is_multiple_of(16) || g.frame_size > g.block_size
            {
                let want = format!(
                    "a multiple of 16 from 128 to the block size ({})",
                    g.block_size
                );
                return Err(bad(frame_size, g.frame_size, want));
            }
        }
        // A slot smaller than the MTU's frames is allowed: what does not fit is read whole
        // from the copy the kernel queues on the socket (PACKET_COPY_THRESH, rx.rs).
        match cfg.ring() {
            RxRing::Blocks { .. } => {
                let overhead = 48 + 48 + 32 + rx::VNET_LEN as u32;
                if rx.block_size < largest.saturating_add(overhead) {
                    let want = format!("at least {} for MTU {}", largest + overhead, i.mtu);
                    return Err(bad("rx.block_size", rx.block_size, want));
                }
            }
            RxRing::Frames => {}
        }
        if tx.frame_size < i.mtu + 14 + tx::TX_DATA {
            let want = format!("at least {} for MTU {}", i.mtu + 14 + tx::TX_DATA, i.mtu);
            return Err(bad("tx.frame_size", tx.frame_size, want));
        }
        Ok(Geometry {
            rx,
            tx,
            tx_frames: tx.block_size / tx.frame_size * tx.block_count,
        })
    }
}

type Step<T> = Result<T, (&'static str, io::Error)>;

fn step<T>(name: &'static str, r: io::Result<T>) -> Step<T> {
    r.map_err(|e| (name, e))
}

fn packet_socket() -> io::Result<OwnedFd> {
    // Protocol 0: the socket receives nothing until `bind` names the interface and protocol,
    // so no frame of another interface ever lands in its ring.
    Ok(rustix::net::socket_with(
        AddressFamily::PACKET,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

fn set(fd: BorrowedFd<'_>, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    sys::set_int(fd, libc::SOL_PACKET, name, v)
}

fn open_rx(i: &Interface, cfg: &AfPacketConfig, geo: &Geometry, queue: u16) -> Step<RxQueue> {
    let fd = step("socket(AF_PACKET)", packet_socket())?;
    let g = geo.rx;
    let frames = g.block_size / g.frame_size * g.block_count;
    let (version, layout) = match cfg.ring() {
        RxRing::Frames => (
            libc::tpacket_versions::TPACKET_V2,
            rx::Layout::frames(g.block_size, g.frame_size, frames),
        ),
        RxRing::Blocks { .. } => (
            libc::tpacket_versions::TPACKET_V3,
            rx::Layout::blocks(g.block_size, g.block_count),
        ),
    };
    step(
        "PACKET_VERSION",
        set(fd.as_fd(), libc::PACKET_VERSION, version as libc::c_int),
    )?;
    let set_ring = || match cfg.ring() {
        RxRing::Frames => {
            let req = libc::tpacket_req {
                tp_block_size: g.block_size,
                tp_block_nr: g.block_count,
                tp_frame_size: g.frame_size,
                tp_frame_nr: frames,
            };
            sys::set_opt(fd.as_fd(), libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
        }
        RxRing::Blocks { timeout_ms } => {
            let req = libc::tpacket_req3 {
                tp_block_size: g.block_size,
                tp_block_nr: g.block_count,
                tp_frame_size: g.frame_size,
                tp_frame_nr: frames,
                tp_retire_blk_tov: timeout_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            sys::set_opt(fd.as_fd(), libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
        }
    };
    // The virtio-net header tells us which frames carry a checksum left to offload; a kernel
    // that cannot put it in the ring gets a ring without it.
    let mut vnet = set(fd.as_fd(), libc::PACKET_VNET_HDR, 1).is_ok();
    let mut ring = set_ring();
    if ring.is_err() && vnet {
        vnet = false;
        step("PACKET_VNET_HDR", set(fd.as_fd(), libc::PACKET_VNET_HDR, 0))?;
        ring = set_ring();
    }
    step("PACKET_RX_RING", ring)?;
    if let RxRing::Frames = cfg.ring() {
        // A frame larger than its slot (a UDP super-packet from a veth, a jumbo frame) is
        // queued whole on the socket, its slot marked TP_STATUS_COPY (rx.rs reads it), as
        // long as the socket's receive buffer has room: room for a few dozen of 64 KiB.
        step("PACKET_COPY_THRESH", set(fd.as_fd(), PACKET_COPY_THRESH, 1))?;
        if rustix::net::sockopt::set_socket_recv_buffer_size_force(&fd, COPY_RCVBUF).is_err() {
            let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&fd, COPY_RCVBUF);
        }
    }
    let len = g.block_size as usize * g.block_count as usize;
    let mem = step("mmap rx ring", ring::RingMap::map(fd.as_fd(), len))?;
    step(
        "PACKET_IGNORE_OUTGOING",
        set(fd.as_fd(), libc::PACKET_IGNORE_OUTGOING, 1),
    )?;
    step("bind", sys::bind(fd.as_fd(), i.ifindex, ETH_P_ALL))?;
    if cfg.promiscuous {
        let mreq = libc::packet_mreq {
            mr_ifindex: i.ifindex as libc::c_int,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        let r = sys::set_opt(
            fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            &mreq,
        );
        step("PACKET_ADD_MEMBERSHIP promisc", r)?;
    }
    Ok(RxQueue::new(fd, mem, i.ifindex, queue, layout, vnet))
}

/// Joins the hash fanout group `id`, or creates a fresh one; returns the group's id.
fn join_fanout(fd: BorrowedFd<'_>, id: Option<u16>) -> io::Result<u16> {
    // No PACKET_FANOUT_FLAG_DEFRAG: reassembling fragments is not the uplink's business, and
    // a flow's fragments hash alike anyway (the hash falls back to addresses).
    let hash = libc::PACKET_FANOUT_HASH as libc::c_int;
    match id {
        Some(id) => {
            set(fd, libc::PACKET_FANOUT, libc::c_int::from(id) | hash << 16)?;
            Ok(id)
        }
        None => {
            let unique = (libc::PACKET_FANOUT_FLAG_UNIQUEID as libc::c_int) << 16;
            set(fd, libc::PACKET_FANOUT, hash << 16 | unique)?;
            let v: libc::c_int = sys::get_opt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT)?;
            Ok((v & 0xffff) as u16)
        }
    }
}

fn open_tx(i: &Interface, cfg: &AfPacketConfig, geo: &Geometry, queue: u16) -> Step<TxQueue> {
    let fd = step("socket(AF_PACKET)", packet_socket())?;
    let v2 = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
    step("PACKET_VERSION", set(fd.as_fd(), libc::PACKET_VERSION, v2))?;
    step(
        "PACKET_QDISC_BYPASS",
        set(fd.as_fd(), libc::PACKET_QDISC_BYPASS, 1),
    )?;
    step("PACKET_LOSS", set(fd.as_fd(), libc::PACKET_LOSS, 1))?;
    let g = geo.tx;
    let req = libc::tpacket_req {
        tp_block_size: g.block_size,
        tp_block_nr: g.block_count,
        tp_frame_size: g.frame_size,
        tp_frame_nr: geo.tx_frames,
    };
    let r = sys::set_opt(fd.as_fd(), libc::SOL_PACKET, libc::PACKET_TX_RING, &req);
    step("PACKET_TX_RING", r)?;
    let len = g.block_size as usize * g.block_count as usize;
    // In-flight frames count against the send buffer: let the whole ring be in flight (a
    // NIC holds frames until their completion), forcing past wmem_max when we may.
    if rustix::net::sockopt::set_socket_send_buffer_size_force(&fd, len).is_err() {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&fd, len);
    }
    let mem = step("mmap tx ring", ring::RingMap::map(fd.as_fd(), len))?;
    // Protocol 0: a transmit-only socket, invisible to the receive path.
    step("bind", sys::bind(fd.as_fd(), i.ifindex, 0))?;
    let q = TxQueue::new(
        fd,
        mem,
        i.ifindex,
        queue,
        g.block_size,
        g.frame_size,
        geo.tx_frames,
        i.mtu,
    );
    Ok(match cfg.udp_gso.then(|| open_gso(i)).transpose()? {
        // Longer than a default receive slot of this MTU holds.
        Some(Some(gso)) => q.with_gso(gso, (default_rx_slot(i.mtu) - RX_SLOT_OVERHEAD) as usize),
        _ => q,
    })
}

/// The socket a transmit queue sends UDP super-packets through; `None` when the kernel
/// gives packet sockets no virtio-net header (the queue then sends plainly).
fn open_gso(i: &Interface) -> Step<Option<OwnedFd>> {
    let fd = step("socket(AF_PACKET)", packet_socket())?;
    if set(fd.as_fd(), libc::PACKET_VNET_HDR, 1).is_err() {
        return Ok(None);
    }
    step(
        "PACKET_QDISC_BYPASS",
        set(fd.as_fd(), libc::PACKET_QDISC_BYPASS, 1),
    )?;
    // Room for a few super-packets in flight (each holds its socket buffer until the device
    // or the veth's peer has taken it).
    if rustix::net::sockopt::set_socket_send_buffer_size_force(&fd, GSO_SNDBUF).is_err() {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&fd, GSO_SNDBUF);
    }
    step("bind", sys::bind(fd.as_fd(), i.ifindex, 0))?;
    Ok(Some(fd))
}

/// The send buffer of a queue's super-packet socket: 32 super-packets of 64 KiB.
const GSO_SNDBUF: usize = 4 << 20;

/// `PACKET_COPY_THRESH` (`<linux/if_packet.h>`; the libc crate lacks it).
const PACKET_COPY_THRESH: libc::c_int = 7;
/// The receive buffer of a ring of slots, for frames too large for a slot: the kernel queues
/// them while it is under this.
const COPY_RCVBUF: usize = 8 << 20;

/// An entry point for fuzz targets into the receive path, without a socket. Not part of the
/// stable API.
#[doc(hidden)]
pub mod testing {
    use buffer::Pool;

    use super::chain::{Frame, Src, deliver};
    use super::rx::Lost;

    /// What the receive path makes of `frame` when the kernel queued it on the socket (a
    /// UDP super-packet, or a frame longer than its ring slot) with the virtio-net header
    /// `vnet` and the VLAN `tag` it took out: the chains appended to `out` (at most `slots`),
    /// or why the frame was not taken (nothing appended then).
    pub fn deliver_copy(
        pool: &mut Pool,
        vnet: [u8; crate::vnet::LEN],
        tag: Option<[u8; 4]>,
        frame: &[u8],
        slots: usize,
        out: &mut Vec<u32>,
    ) -> Result<usize, &'static str> {
        let f = Frame {
            src: Src::Bytes(frame),
            len: frame.len(),
            vnet: Some(vnet),
            tag,
        };
        deliver(pool, &f, slots, out)
            .map(|d| d.packets)
            .map_err(|e| match e {
                Lost::NoBuffer => "no buffer",
                Lost::Truncated => "truncated",
                Lost::Gso => "super-frame not cut",
                Lost::BadOffload => "bad offload header",
                Lost::NoRoom => "no room",
                Lost::Bad => "bad frame",
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_is_picked_by_the_mtu() {
        assert_eq!(RxRing::for_mtu(1500), RxRing::Frames);
        assert_eq!(RxRing::for_mtu(3982), RxRing::Frames);
        assert_eq!(RxRing::for_mtu(3983), RxRing::Blocks { timeout_ms: 1 });
        assert_eq!(RxRing::for_mtu(9000), RxRing::Blocks { timeout_ms: 1 });
    }
}
