//! The receive side, in one of two ring layouts ([`super::RxRing`]): TPACKET_V2 frame slots,
//! each handed to us as its frame arrives, or TPACKET_V3 blocks the kernel fills with
//! variable-length frames and retires to us when full or after the block timeout. Either way
//! we copy each frame into pool buffers and hand the slot or block back.

use std::mem::offset_of;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use buffer::Pool;

use super::LinkError;
use super::chain::{Delivered, Frame, Src, deliver};
use super::counters::{RxCounters, bump};
use super::ring::{OutOfBounds, RingMap};
use super::sys;
use super::udp_gso::{self, MAX_RX_SEGMENTS};
use crate::vnet::{GSO_UDP_L4, VnetHdr};

/// Where the block descriptor's fields live (`struct tpacket_block_desc` with its
/// `tpacket_hdr_v1`), from the C definitions rather than hand-counted.
const BD_HDR: usize = offset_of!(libc::tpacket_block_desc, hdr);
const BD_STATUS: u64 = (BD_HDR + offset_of!(libc::tpacket_hdr_v1, block_status)) as u64;
const BD_NUM_PKTS: usize = BD_HDR + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BD_FIRST: usize = BD_HDR + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
const BD_LEN: usize = BD_HDR + size_of::<libc::tpacket_hdr_v1>();

/// A frame header, `struct tpacket3_hdr` (48 bytes, TPACKET_ALIGNed).
const H_LEN: usize = size_of::<libc::tpacket3_hdr>();
const H_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const H_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const H_LEN_FIELD: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const H_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const H_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);
const H_HV1: usize = offset_of!(libc::tpacket3_hdr, hv1);
const H_VLAN_TCI: usize = H_HV1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
const H_VLAN_TPID: usize = H_HV1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);

/// A frame slot's header, `struct tpacket2_hdr` (32 bytes; the frame follows at `tp_mac`).
const F_LEN: usize = size_of::<libc::tpacket2_hdr>();
const F_STATUS: u64 = offset_of!(libc::tpacket2_hdr, tp_status) as u64;
const F_LEN_FIELD: usize = offset_of!(libc::tpacket2_hdr, tp_len);
const F_SNAPLEN: usize = offset_of!(libc::tpacket2_hdr, tp_snaplen);
const F_MAC: usize = offset_of!(libc::tpacket2_hdr, tp_mac);
const F_VLAN_TCI: usize = offset_of!(libc::tpacket2_hdr, tp_vlan_tci);
const F_VLAN_TPID: usize = offset_of!(libc::tpacket2_hdr, tp_vlan_tpid);

/// Where one frame header version keeps the fields we read.
struct Fields {
    len: usize,
    snaplen: usize,
    wire_len: usize,
    status: usize,
    mac: usize,
    /// The TCI's 16 bits (V3 holds it in a 32-bit field).
    tci: usize,
    tpid: usize,
}

const _: () = assert!(F_LEN <= H_LEN);

const V2_FIELDS: Fields = Fields {
    len: F_LEN,
    snaplen: F_SNAPLEN,
    wire_len: F_LEN_FIELD,
    status: F_STATUS as usize,
    mac: F_MAC,
    tci: F_VLAN_TCI,
    tpid: F_VLAN_TPID,
};

const V3_FIELDS: Fields = Fields {
    len: H_LEN,
    snaplen: H_SNAPLEN,
    wire_len: H_LEN_FIELD,
    status: H_STATUS,
    mac: H_MAC,
    tci: H_VLAN_TCI + if cfg!(target_endian = "big") { 2 } else { 0 },
    tpid: H_VLAN_TPID,
};

/// `struct virtio_net_hdr` (PACKET_VNET_HDR), which the kernel puts just before the frame
/// ([`crate::vnet`]).
pub(crate) const VNET_LEN: usize = crate::vnet::LEN;

/// Fold the kernel's drop counters in every this many `recv` calls.
const KERNEL_STATS_EVERY: u32 = 4096;

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

/// Sums big-endian 16-bit words (RFC 1071), a trailing odd byte as the high half of a word.
pub(crate) fn sum_words(b: &[u8]) -> u64 {
    let mut words = b.chunks_exact(2);
    let mut sum: u64 = words
        .by_ref()
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

pub(super) fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// What one `recv` call did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecvStats {
    /// Chains appended to `out`: frames, and the datagrams of UDP super-packets.
    pub packets: usize,
    pub bytes: u64,
    /// Frames dropped for want of pool buffers.
    pub no_buffer: usize,
    /// Frames dropped because the kernel truncated them.
    pub truncated: usize,
    /// Segmentation-offload super-frames dropped ([`RxCounters::gso`]): TCP ones, and UDP
    /// ones we cannot cut.
    pub gso: usize,
    /// Frames dropped for an inconsistent ring or offload header ([`RxCounters::bad_frame`]).
    pub bad: usize,
}

impl RecvStats {
    /// Frames dropped, for whatever reason.
    pub fn dropped(&self) -> usize {
        self.no_buffer + self.truncated + self.gso + self.bad
    }
}

/// A position inside a block we own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor {
    /// Frames of the block not yet taken.
    left: u32,
    /// Offset of the next frame header from the block start.
    offset: u32,
}

/// How the kernel lays frames out in the ring, and where we are in it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Layout {
    /// TPACKET_V3: variable-length frames packed into blocks, each block ours once retired.
    Blocks {
        block_size: u32,
        block_count: u32,
        /// The block read next, or being read.
        block: u32,
        cursor: Option<Cursor>,
    },
    /// TPACKET_V2: fixed frame slots, `per_block` to a block, each ours once its status says.
    Frames(Slots),
}

/// A ring of frame slots and the one read next, whose offset is kept as it advances (no
/// division per frame).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slots {
    block_size: u32,
    frame_size: u32,
    per_block: u32,
    count: u32,
    /// The slot read next: its number, its place in its block, its offset in the ring, and
    /// the offset of its block.
    next: u32,
    in_block: u32,
    at: u64,
    block_at: u64,
}

impl Slots {
    /// On to the slot after `next` (frames never straddle two blocks).
    fn advance(&mut self) {
        self.next += 1;
        self.in_block += 1;
        if self.next == self.count {
            (self.next, self.in_block, self.at, self.block_at) = (0, 0, 0, 0);
        } else if self.in_block == self.per_block {
            self.in_block = 0;
            self.block_at += u64::from(self.block_size);
            self.at = self.block_at;
        } else {
            self.at += u64::from(self.frame_size);
        }
    }
}

impl Layout {
    pub(crate) fn blocks(block_size: u32, block_count: u32) -> Layout {
        Layout::Blocks {
            block_size,
            block_count,
            block: 0,
            cursor: None,
        }
    }

    /// `count` slots of `frame_size` bytes, as many as fit to each of `block_size` bytes.
    pub(crate) fn frames(block_size: u32, frame_size: u32, count: u32) -> Layout {
        Layout::Frames(Slots {
            block_size,
            frame_size,
            per_block: block_size / frame_size,
            count,
            next: 0,
            in_block: 0,
            at: 0,
            block_at: 0,
        })
    }
}

/// A frame header's fields, whichever layout's header they came from.
#[derive(Debug, Clone, Copy)]
struct FrameHdr {
    snaplen: u32,
    wire_len: u32,
    status: u32,
    /// The frame's first byte, from the header's start.
    mac: u64,
    vlan_tci: u16,
    vlan_tpid: u16,
}

impl FrameHdr {
    /// The VLAN tag the kernel took out of the frame (802.1Q unless it names its TPID).
    fn tag(&self) -> Option<[u8; 4]> {
        (self.status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
            let tpid = if self.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                self.vlan_tpid
            } else {
                0x8100
            };
            let [a, b] = tpid.to_be_bytes();
            let [c, d] = self.vlan_tci.to_be_bytes();
            [a, b, c, d]
        })
    }
}

/// Room for a frame read whole from the socket: an IPv4 datagram's 64 KiB and the headers
/// around it, with its virtio-net header.
const COPY_ROOM: usize = 65_535 + 64 + VNET_LEN;

/// One queue's receive socket and ring. Owned by one worker; see [`RxQueue::recv`].
#[derive(Debug)]
pub struct RxQueue {
    // Declared before `fd`: the mapping goes first on drop.
    mem: RingMap,
    fd: OwnedFd,
    ifindex: u32,
    queue: u16,
    layout: Layout,
    /// The socket carries a virtio-net header before each frame (checksum offload info).
    vnet: bool,
    polls: u32,
    /// Where a frame too large for its slot is read from the socket (a ring of slots).
    copy: Vec<u8>,
    counters: Arc<RxCounters>,
}

/// Where one `recv` puts what it takes, and what it counts.
struct Taking<'a> {
    pool: &'a mut Pool,
    out: &'a mut Vec<u32>,
    st: RecvStats,
    /// Checksums completed.
    csum: u64,
}

impl Taking<'_> {
    /// How much of `recv`'s `max` is spent: chains delivered and frames dropped.
    fn used(&self) -> usize {
        self.st.packets + self.st.dropped()
    }

    /// Counts one frame's outcome (its chains are in `out` already); a frame lost for want
    /// of buffers or truncated counts as the `weight` datagrams it stood for (a UDP
    /// super-packet's, [`RxQueue::weight`]).
    fn tally(&mut self, taken: Result<Delivered, Lost>, weight: impl FnOnce() -> usize) {
        let st = &mut self.st;
        match taken {
            Ok(d) => {
                st.packets += d.packets;
                st.bytes += d.bytes;
                self.csum += d.csum;
            }
            Err(Lost::NoBuffer) => st.no_buffer += weight(),
            Err(Lost::Truncated) => st.truncated += weight(),
            Err(Lost::Gso) => st.gso += 1,
            Err(Lost::BadOffload | Lost::Bad | Lost::NoRoom) => st.bad += 1,
        }
    }
}

/// Why a frame went nowhere.
pub(super) enum Lost {
    NoBuffer,
    Truncated,
    Gso,
    /// This frame's offload header is inconsistent: drop it, the block is fine.
    BadOffload,
    /// Not taken: it makes more chains than the call has room for. The next call takes it.
    NoRoom,
    /// The ring's offsets are inconsistent: drop the rest of the block (the frame alone, in
    /// a ring of frame slots).
    Bad,
}

impl From<OutOfBounds> for Lost {
    fn from(_: OutOfBounds) -> Lost {
        Lost::Bad
    }
}

impl RxQueue {
    pub(crate) fn new(
        fd: OwnedFd,
        mem: RingMap,
        ifindex: u32,
        queue: u16,
        layout: Layout,
        vnet: bool,
    ) -> RxQueue {
        RxQueue {
            mem,
            fd,
            ifindex,
            queue,
            layout,
            vnet,
            polls: 0,
            copy: Vec::new(),
            counters: Arc::default(),
        }
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// This queue's number within its interface (its place in the fanout group).
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// The counters, for the control thread to keep before the queue moves to a worker.
    pub fn counters(&self) -> Arc<RxCounters> {
        self.counters.clone()
    }

    /// The socket: readable when a frame (or, in a ring of blocks, a block) has been handed
    /// to us, for a worker's epoll sleep.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether frames are waiting: a block half read, or the next block or frame handed to
    /// us. The re-check before a worker sleeps, so that it never sleeps on a ready ring.
    pub fn pending(&self) -> bool {
        let at = match self.layout {
            Layout::Blocks {
                cursor: Some(_), ..
            } => return true,
            Layout::Blocks {
                block, block_size, ..
            } => u64::from(block) * u64::from(block_size) + BD_STATUS,
            Layout::Frames(s) => s.at + F_STATUS,
        };
        self.mem
            .load_status(at)
            .is_ok_and(|s| s & libc::TP_STATUS_USER != 0)
    }

    /// Copies frames out of the ring into `pool` buffers (chained when a frame is larger than
    /// a buffer, `total_len` on the head) and appends the heads to `out`, at most `max` of
    /// them; a UDP super-packet is cut into its datagrams ([`super::udp_gso`]), taken only
    /// when all of them fit under `max` (`max` from 128 up always takes it).
    ///
    /// Frames that cannot be delivered (no buffers, truncated, TCP offload super-frames) are
    /// dropped, counted and count against `max` too, so that an empty pool still drains the
    /// ring instead of freezing it. In a ring of slots, a frame larger than its slot is read
    /// whole from the copy the kernel queued on the socket (`PACKET_COPY_THRESH`). Frames
    /// (blocks) go back to the kernel as soon as they (their last frame) are taken; a block
    /// left midway is resumed by the next call. An
    /// 802.1Q/802.1ad tag the kernel moved into the frame header is put back into the frame; a
    /// checksum the sender left to offload (a local stack on a veth) is completed.
    pub fn recv(&mut self, pool: &mut Pool, out: &mut Vec<u32>, max: usize) -> RecvStats {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(KERNEL_STATS_EVERY) {
            self.refresh_kernel_stats();
        }
        let mut to = Taking {
            pool,
            out,
            st: RecvStats::default(),
            csum: 0,
        };
        match self.layout {
            Layout::Blocks { .. } => self.recv_blocks(&mut to, max),
            Layout::Frames(_) => self.recv_slots(&mut to, max),
        }
        let Taking { st, csum, .. } = to;
        let c = &self.counters;
        bump(&c.packets, st.packets as u64);
        bump(&c.bytes, st.bytes);
        if st.dropped() != 0 || csum != 0 {
            bump(&c.no_buffer, st.no_buffer as u64);
            bump(&c.truncated, st.truncated as u64);
            bump(&c.gso, st.gso as u64);
            bump(&c.bad_frame, st.bad as u64);
            bump(&c.csum_completed, csum);
        }
        st
    }

    /// [`RxQueue::recv`] on a ring of frame slots: each slot ours while its status says so.
    fn recv_slots(&mut self, to: &mut Taking<'_>, max: usize) {
        let Layout::Frames(mut s) = self.layout else {
            return;
        };
        let frame_size = u64::from(s.frame_size);
        while to.used() < max {
            let at = s.at;
            let Ok(status) = self.mem.load_status(at + F_STATUS) else {
                break;
            };
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            let slots = max - to.used();
            let h = self.frame_header(at, &V2_FIELDS);
            let taken = if status & libc::TP_STATUS_COPY != 0 {
                self.take_copy(to, at, h, slots)
            } else {
                h.and_then(|h| self.take_frame(to.pool, at, frame_size, F_LEN, h, slots, to.out))
            };
            if let Err(Lost::NoRoom) = taken {
                break;
            }
            to.tally(taken, || self.weight(at, F_LEN, &V2_FIELDS));
            // Our reads of the slot are done; the Release store hands it back (ring.rs).
            let _ = self.mem.store_status(at + F_STATUS, libc::TP_STATUS_KERNEL);
            s.advance();
        }
        self.layout = Layout::Frames(s);
    }

    /// The frame header at `at`, read as `f` lays it out.
    fn frame_header(&self, at: u64, f: &Fields) -> Result<FrameHdr, Lost> {
        // Room for either version (V3's is the larger).
        let mut h = [0u8; H_LEN];
        let h = &mut h[..f.len];
        self.mem.read(at, h)?;
        Ok(FrameHdr {
            snaplen: u32_at(h, f.snaplen),
            wire_len: u32_at(h, f.wire_len),
            status: u32_at(h, f.status),
            mac: u64::from(u16_at(h, f.mac)),
            vlan_tci: u16_at(h, f.tci),
            vlan_tpid: u16_at(h, f.tpid),
        })
    }

    /// [`RxQueue::recv`] on a ring of blocks.
    fn recv_blocks(&mut self, to: &mut Taking<'_>, max: usize) {
        let Layout::Blocks {
            block_size,
            block_count,
            mut block,
            mut cursor,
        } = self.layout
        else {
            return;
        };
        'blocks: while to.used() < max {
            let base = u64::from(block) * u64::from(block_size);
            let Some(mut cur) = cursor.take().or_else(|| self.open_block(base)) else {
                break;
            };
            while cur.left > 0 && to.used() < max {
                let at = base + u64::from(cur.offset);
                let slots = max - to.used();
                // The header, at least, must lie inside the block (the first frame's offset
                // comes from the block descriptor unchecked).
                let taken = match u64::from(block_size).checked_sub(u64::from(cur.offset)) {
                    Some(room) if room >= H_LEN as u64 => self
                        .frame_header(at, &V3_FIELDS)
                        .and_then(|h| self.take_frame(to.pool, at, room, H_LEN, h, slots, to.out)),
                    _ => Err(Lost::Bad),
                };
                if let Err(Lost::NoRoom) = taken {
                    cursor = Some(cur);
                    break 'blocks;
                }
                cur.left -= 1;
                if let Err(Lost::Bad) = taken {
                    // The block's chain of offsets cannot be trusted past here.
                    to.st.bad += 1 + cur.left as usize;
                    cur.left = 0;
                    break;
                }
                to.tally(taken, || self.weight(at, H_LEN, &V3_FIELDS));
                if cur.left > 0 {
                    match self.next_offset(base, block_size, cur.offset) {
                        Some(next) => cur.offset = next,
                        None => {
                            to.st.bad += cur.left as usize;
                            cur.left = 0;
                        }
                    }
                }
            }
            if cur.left == 0 {
                // Our reads of the block are done; the Release store hands it back (ring.rs).
                let _ = self
                    .mem
                    .store_status(base + BD_STATUS, libc::TP_STATUS_KERNEL);
                block = (block + 1) % block_count;
            } else {
                cursor = Some(cur);
            }
        }
        self.layout = Layout::Blocks {
            block_size,
            block_count,
            block,
            cursor,
        };
    }

    /// The block at `base` if it is ours, opened (its descriptor read).
    fn open_block(&self, base: u64) -> Option<Cursor> {
        let status = self.mem.load_status(base + BD_STATUS).ok()?;
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let mut d = [0u8; BD_LEN];
        let (left, offset) = match self.mem.read(base, &mut d) {
            Ok(()) => (u32_at(&d, BD_NUM_PKTS), u32_at(&d, BD_FIRST)),
            Err(_) => (0, 0),
        };
        if left != 0 && (offset as usize) < BD_LEN {
            // The first frame may not overlap the descriptor: drop the block as corrupt.
            bump(&self.counters.bad_frame, u64::from(left));
            return Some(Cursor { left: 0, offset });
        }
        Some(Cursor { left, offset })
    }

    /// The offset of the frame after the one at `offset`, if it stays inside the block.
    fn next_offset(&self, base: u64, block_size: u32, offset: u32) -> Option<u32> {
        let mut h = [0u8; 4];
        self.mem
            .read(base + u64::from(offset) + H_NEXT as u64, &mut h)
            .ok()?;
        let next = u64::from(u32::from_ne_bytes(h));
        let at = u64::from(offset) + next;
        (next != 0 && at + H_LEN as u64 <= u64::from(block_size)).then_some(at as u32)
    }

    /// Delivers the frame at `frame` (its header, `hdr_len` bytes, first; `room` bytes of ring
    /// from there belong to it) as new chains, at most `slots` of them, into `out`.
    #[allow(clippy::too_many_arguments)]
    fn take_frame(
        &self,
        pool: &mut Pool,
        frame: u64,
        room: u64,
        hdr_len: usize,
        h: FrameHdr,
        slots: usize,
        out: &mut Vec<u32>,
    ) -> Result<Delivered, Lost> {
        let FrameHdr {
            snaplen,
            wire_len,
            mac,
            ..
        } = h;
        // The frame's bytes must lie inside its room, after the header.
        let data = frame + mac;
        if mac < hdr_len as u64 || mac + u64::from(snaplen) > room {
            return Err(Lost::Bad);
        }
        if snaplen < wire_len {
            return Err(Lost::Truncated);
        }
        let vnet = self.slot_vnet(frame, hdr_len, &h)?;
        let f = Frame {
            src: Src::Ring(&self.mem, data),
            len: snaplen as usize,
            vnet,
            tag: h.tag(),
        };
        deliver(pool, &f, slots, out)
    }

    /// How many datagrams the frame at `frame` stands for: a UDP super-packet's (as its
    /// virtio-net header and length say, at most [`MAX_RX_SEGMENTS`]), or 1.
    fn weight(&self, frame: u64, hdr_len: usize, f: &Fields) -> usize {
        let Ok(h) = self.frame_header(frame, f) else {
            return 1;
        };
        match self.slot_vnet(frame, hdr_len, &h) {
            Ok(Some(v)) if VnetHdr::new(&v).gso_type() == GSO_UDP_L4 => {
                let gso = usize::from(VnetHdr::new(&v).gso_size()).max(1);
                let payload = (h.wire_len as usize).saturating_sub(udp_gso::MIN_HDRS);
                payload.div_ceil(gso).clamp(1, MAX_RX_SEGMENTS)
            }
            _ => 1,
        }
    }

    /// The virtio-net header the kernel put before the frame at `frame` (`None` when the
    /// socket gives none).
    fn slot_vnet(
        &self,
        frame: u64,
        hdr_len: usize,
        h: &FrameHdr,
    ) -> Result<Option<[u8; VNET_LEN]>, Lost> {
        if !self.vnet {
            return Ok(None);
        }
        if h.mac < (hdr_len + VNET_LEN) as u64 {
            return Err(Lost::BadOffload);
        }
        let mut v = [0u8; VNET_LEN];
        self.mem.read(frame + h.mac - VNET_LEN as u64, &mut v)?;
        Ok(Some(v))
    }

    /// Delivers the frame of the slot at `at` that was too large for it: the kernel marked the
    /// slot `TP_STATUS_COPY` and queued the whole frame on the socket, in the slots' order,
    /// where one `recv` reads it with its virtio-net header. Each such slot takes exactly one
    /// copy off the queue, whatever becomes of the frame, so that slots and copies stay in
    /// step; should they not (a length that differs), the queue is emptied and the slots
    /// whose copies went with it are counted as bad.
    fn take_copy(
        &mut self,
        to: &mut Taking<'_>,
        at: u64,
        h: Result<FrameHdr, Lost>,
        slots: usize,
    ) -> Result<Delivered, Lost> {
        // Room for every datagram the frame may be cut into, judged from the slot's own
        // virtio-net header before the copy is taken.
        if self.weight(at, F_LEN, &V2_FIELDS) > slots {
            return Err(Lost::NoRoom);
        }
        if self.copy.is_empty() {
            self.copy = vec![0; COPY_ROOM];
        }
        let flags = rustix::net::RecvFlags::DONTWAIT | rustix::net::RecvFlags::TRUNC;
        let (n, full) = match rustix::net::recv(&self.fd, &mut self.copy[..], flags) {
            Ok((got, full)) => (got, full),
            Err(_) => return Err(Lost::Bad),
        };
        let h = h?;
        if full > n {
            return Err(Lost::Truncated);
        }
        let skip = if self.vnet { VNET_LEN } else { 0 };
        if n < skip || n - skip != h.wire_len as usize {
            while rustix::net::recv(&self.fd, &mut self.copy[..], flags).is_ok() {
                bump(&self.counters.bad_frame, 1);
            }
            return Err(Lost::Bad);
        }
        let f = Frame {
            src: Src::Bytes(&self.copy[skip..n]),
            len: n - skip,
            vnet: self.vnet.then(|| {
                let mut v = [0u8; VNET_LEN];
                v.copy_from_slice(&self.copy[..VNET_LEN]);
                v
            }),
            tag: h.tag(),
        };
        deliver(to.pool, &f, slots, to.out)
    }

    /// Folds the kernel's drop counters (PACKET_STATISTICS, which resets them on read) into
    /// this queue's counters. `recv` calls it every few thousand calls and the input node
    /// before its worker sleeps; call it before reading the counters of an idle queue.
    pub fn refresh_kernel_stats(&mut self) {
        let (fd, level, name) = (self.fd.as_fd(), libc::SOL_PACKET, libc::PACKET_STATISTICS);
        // The kernel answers with the statistics of the socket's ring version.
        let (drops, freezes) = match self.layout {
            Layout::Blocks { .. } => sys::get_opt::<libc::tpacket_stats_v3>(fd, level, name)
                .map(|s| (s.tp_drops, s.tp_freeze_q_cnt)),
            Layout::Frames(_) => {
                sys::get_opt::<libc::tpacket_stats>(fd, level, name).map(|s| (s.tp_drops, 0))
            }
        }
        .unwrap_or_default();
        bump(&self.counters.kernel_drops, u64::from(drops));
        bump(&self.counters.kernel_freezes, u64::from(freezes));
    }

    /// Takes the socket's pending error, if any, and says what it means for the link: the
    /// interface was unregistered ([`LinkError::Vanished`]: the queue is dead), or went
    /// down ([`LinkError::Down`]: the socket resumes by itself when it comes back up).
    /// Clearing the error also stops the socket from polling readable forever (POLLERR),
    /// so a sleeping worker should call this when it wakes to nothing.
    pub fn check_link(&mut self) -> Result<(), LinkError> {
        let err = rustix::net::sockopt::socket_error(&self.fd);
        if sys::bound_ifindex(self.fd.as_fd()).is_ok_and(|i| i < 0) {
            return Err(LinkError::Vanished);
        }
        match err {
            Ok(Err(e)) if e == rustix::io::Errno::NETDOWN => Err(LinkError::Down),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_offsets_match_the_kernel_abi() {
        // include/uapi/linux/if_packet.h, as the kernel's BUILD_BUG_ONs pin it.
        assert_eq!((BD_STATUS, BD_NUM_PKTS, BD_FIRST, BD_LEN), (8, 12, 16, 48));
        assert_eq!(
            (H_LEN, H_NEXT, H_SNAPLEN, H_LEN_FIELD, H_STATUS),
            (48, 0, 12, 16, 20)
        );
        assert_eq!((H_MAC, H_VLAN_TCI, H_VLAN_TPID), (24, 32, 36));
        assert_eq!(
            (F_LEN, F_STATUS, F_LEN_FIELD, F_SNAPLEN, F_MAC),
            (32, 0, 4, 8, 12)
        );
        assert_eq!((F_VLAN_TCI, F_VLAN_TPID), (24, 26));
    }

    /// Slot offsets kept as the ring advances are those of the kernel's layout: `per_block`
    /// slots from each block's start, the last slot of a block not reaching into the next.
    #[test]
    fn slots_advance_through_blocks_and_wrap() {
        let Layout::Frames(mut s) = Layout::frames(8192, 3000, 6) else {
            unreachable!()
        };
        let mut seen = Vec::new();
        for _ in 0..8 {
            seen.push((s.next, s.at));
            s.advance();
        }
        assert_eq!(
            seen,
            [
                (0, 0),
                (1, 3000),
                (2, 8192),
                (3, 11192),
                (4, 16384),
                (5, 19384),
                (0, 0),
                (1, 3000)
            ]
        );
    }

    #[test]
    fn internet_checksum_of_rfc1071_example() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2 (folded).
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_words(&b)), 0xddf2);
        assert_eq!(sum_words(&[0x12]), 0x1200, "odd byte pads low");
    }
}
