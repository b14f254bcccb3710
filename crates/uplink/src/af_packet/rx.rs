//! The receive side: a TPACKET_V3 ring of blocks the kernel fills with variable-length frames
//! and retires to us when full or after the block timeout; we copy each frame into pool
//! buffers and hand the block back.

use std::mem::offset_of;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use buffer::Pool;

use super::LinkError;
use super::counters::{RxCounters, bump};
use super::ring::{OutOfBounds, RingMap};
use super::sys;
use crate::vnet::VnetHdr;

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

fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// What one `recv` call did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecvStats {
    /// Frames appended to `out`.
    pub packets: usize,
    pub bytes: u64,
    /// Frames dropped for want of pool buffers.
    pub no_buffer: usize,
    /// Frames dropped because the kernel truncated them.
    pub truncated: usize,
    /// Segmentation-offload super-frames dropped ([`RxCounters::gso`]).
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
struct Cursor {
    /// Frames of the block not yet taken.
    left: u32,
    /// Offset of the next frame header from the block start.
    offset: u32,
}

/// One queue's receive socket and ring. Owned by one worker; see [`RxQueue::recv`].
#[derive(Debug)]
pub struct RxQueue {
    // Declared before `fd`: the mapping goes first on drop.
    mem: RingMap,
    fd: OwnedFd,
    ifindex: u32,
    queue: u16,
    block_size: u32,
    block_count: u32,
    /// The block read next, or being read.
    block: u32,
    cursor: Option<Cursor>,
    /// The socket carries a virtio-net header before each frame (checksum offload info).
    vnet: bool,
    polls: u32,
    counters: Arc<RxCounters>,
}

/// Why a frame went nowhere.
enum Lost {
    NoBuffer,
    Truncated,
    Gso,
    /// This frame's offload header is inconsistent: drop it, the block is fine.
    BadOffload,
    /// The ring's offsets are inconsistent: drop the rest of the block.
    Bad,
}

impl From<OutOfBounds> for Lost {
    fn from(_: OutOfBounds) -> Lost {
        Lost::Bad
    }
}

impl RxQueue {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        fd: OwnedFd,
        mem: RingMap,
        ifindex: u32,
        queue: u16,
        block_size: u32,
        block_count: u32,
        vnet: bool,
    ) -> RxQueue {
        RxQueue {
            mem,
            fd,
            ifindex,
            queue,
            block_size,
            block_count,
            block: 0,
            cursor: None,
            vnet,
            polls: 0,
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

    /// The socket: readable when a block has been retired to us, for a worker's epoll sleep.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn block_offset(&self) -> u64 {
        u64::from(self.block) * u64::from(self.block_size)
    }

    /// Whether frames are waiting: a block half read, or the next block retired to us. The
    /// re-check before a worker sleeps, so that it never sleeps on a ready ring.
    pub fn pending(&self) -> bool {
        self.cursor.is_some()
            || self
                .mem
                .load_status(self.block_offset() + BD_STATUS)
                .is_ok_and(|s| s & libc::TP_STATUS_USER != 0)
    }

    /// Copies up to `max` frames out of the ring into `pool` buffers (chained when a frame is
    /// larger than a buffer, `total_len` on the head) and appends the heads to `out`.
    ///
    /// Frames that cannot be delivered (no buffers, truncated, offload super-frames) are
    /// dropped, counted and count against `max` too, so that an empty pool still drains the
    /// ring instead of freezing it. Blocks go back to the kernel as soon as their last frame
    /// is taken; a block left midway is resumed by the next call. An 802.1Q/802.1ad tag the
    /// kernel moved into the frame header is put back into the frame; a checksum the sender
    /// left to offload (a local stack on a veth) is completed.
    pub fn recv(&mut self, pool: &mut Pool, out: &mut Vec<u32>, max: usize) -> RecvStats {
        let mut st = RecvStats::default();
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(KERNEL_STATS_EVERY) {
            self.refresh_kernel_stats();
        }
        let mut csum = 0u64;
        let mut seen = 0usize;
        while seen < max {
            let Some(mut cur) = self.open_block() else {
                break;
            };
            while cur.left > 0 && seen < max {
                seen += 1;
                cur.left -= 1;
                match self.take_frame(pool, cur.offset, &mut csum) {
                    Ok((head, len)) => {
                        out.push(head);
                        st.packets += 1;
                        st.bytes += u64::from(len);
                    }
                    Err(Lost::NoBuffer) => st.no_buffer += 1,
                    Err(Lost::Truncated) => st.truncated += 1,
                    Err(Lost::Gso) => st.gso += 1,
                    Err(Lost::BadOffload) => st.bad += 1,
                    Err(Lost::Bad) => {
                        // The block's chain of offsets cannot be trusted past here.
                        st.bad += 1 + cur.left as usize;
                        cur.left = 0;
                        break;
                    }
                }
                if cur.left > 0 {
                    match self.next_offset(cur.offset) {
                        Some(next) => cur.offset = next,
                        None => {
                            st.bad += cur.left as usize;
                            cur.left = 0;
                        }
                    }
                }
            }
            if cur.left == 0 {
                self.release_block();
            } else {
                self.cursor = Some(cur);
            }
        }
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

    /// The block at the cursor if it is ours, opening it (reading its descriptor) if new.
    fn open_block(&mut self) -> Option<Cursor> {
        if let Some(c) = self.cursor.take() {
            return Some(c);
        }
        let base = self.block_offset();
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

    fn release_block(&mut self) {
        let at = self.block_offset() + BD_STATUS;
        // Our reads of the block are done; the Release store hands it back (ring.rs).
        let _ = self.mem.store_status(at, libc::TP_STATUS_KERNEL);
        self.block = (self.block + 1) % self.block_count;
    }

    /// The offset of the frame after the one at `offset`, if it stays inside the block.
    fn next_offset(&self, offset: u32) -> Option<u32> {
        let mut h = [0u8; 4];
        self.mem
            .read(
                self.block_offset() + u64::from(offset) + H_NEXT as u64,
                &mut h,
            )
            .ok()?;
        let next = u64::from(u32::from_ne_bytes(h));
        let at = u64::from(offset) + next;
        (next != 0 && at + H_LEN as u64 <= u64::from(self.block_size)).then_some(at as u32)
    }

    /// Copies the frame whose header is at `offset` in the current block into a new chain.
    fn take_frame(
        &mut self,
        pool: &mut Pool,
        offset: u32,
        csum: &mut u64,
    ) -> Result<(u32, u32), Lost> {
        let block = self.block_offset();
        let frame = block + u64::from(offset);
        if u64::from(offset) + H_LEN as u64 > u64::from(self.block_size) {
            return Err(Lost::Bad);
        }
        let mut h = [0u8; H_LEN];
        self.mem.read(frame, &mut h)?;
        let snaplen = u32_at(&h, H_SNAPLEN);
        let wire_len = u32_at(&h, H_LEN_FIELD);
        let status = u32_at(&h, H_STATUS);
        let mac = u64::from(u16_at(&h, H_MAC));
        // The frame's bytes must lie inside this block, after the header.
        let data = frame + mac;
        if mac < H_LEN as u64
            || u64::from(offset) + mac + u64::from(snaplen) > u64::from(self.block_size)
        {
            return Err(Lost::Bad);
        }
        if snaplen < wire_len {
            return Err(Lost::Truncated);
        }
        let mut fix = None;
        if self.vnet {
            if mac < (H_LEN + VNET_LEN) as u64 {
                return Err(Lost::BadOffload);
            }
            let mut v = [0u8; VNET_LEN];
            self.mem.read(data - VNET_LEN as u64, &mut v)?;
            let v = VnetHdr::new(&v);
            if v.gso_type() != crate::vnet::GSO_NONE {
                return Err(Lost::Gso);
            }
            if let Some((start, field)) = v.partial_csum() {
                let (start, field) = (u32::from(start), u32::from(field));
                if start + field + 2 > snaplen {
                    return Err(Lost::BadOffload);
                }
                // Complete it as the kernel's skb_checksum_help would: the field holds the
                // pseudo-header sum; sum from csum_start to the end, fold, invert, never 0.
                let sum = self
                    .mem
                    .sum16(data + u64::from(start), u64::from(snaplen - start))?;
                let c = !fold(sum);
                fix = Some((start + field, if c == 0 { 0xffff } else { c }));
            }
        }
        let tag = (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
            let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                u16_at(&h, H_VLAN_TPID)
            } else {
                0x8100
            };
            let tci = u32_at(&h, H_VLAN_TCI) as u16;
            let [a, b] = tpid.to_be_bytes();
            let [c, d] = tci.to_be_bytes();
            [a, b, c, d]
        });
        let total = snaplen + if tag.is_some() { 4 } else { 0 };
        let size = pool.data_size();
        if pool.available() < (total as usize).div_ceil(size).max(1) {
            return Err(Lost::NoBuffer);
        }
        let mut w = ChainWriter::new(pool).ok_or(Lost::NoBuffer)?;
        let filled = match tag {
            // The tag goes back after the two MAC addresses, where the wire had it.
            Some(tag) if snaplen >= 12 => w
                .put_ring(pool, &self.mem, data, 12)
                .and_then(|()| w.put_bytes(pool, &tag))
                .and_then(|()| w.put_ring(pool, &self.mem, data + 12, snaplen as usize - 12)),
            _ => w.put_ring(pool, &self.mem, data, snaplen as usize),
        };
        if let Err(e) = filled {
            pool.free(w.head);
            return Err(e);
        }
        if let Some((at, value)) = fix {
            let at = at as usize + if tag.is_some() { 4 } else { 0 };
            patch(pool, w.head, at, value.to_be_bytes());
            *csum += 1;
        }
        pool.meta_mut(w.head).total_len = total;
        Ok((w.head, total))
    }

    /// Folds the kernel's drop counters (PACKET_STATISTICS, which resets them on read) into
    /// this queue's counters. `recv` calls it every few thousand calls and the input node
    /// before its worker sleeps; call it before reading the counters of an idle queue.
    pub fn refresh_kernel_stats(&mut self) {
        if let Ok(s) = sys::get_opt::<libc::tpacket_stats_v3>(
            self.fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
        ) {
            bump(&self.counters.kernel_drops, u64::from(s.tp_drops));
            bump(&self.counters.kernel_freezes, u64::from(s.tp_freeze_q_cnt));
        }
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

/// Fills a fresh chain front to back; the caller has checked that the pool has enough.
struct ChainWriter {
    head: u32,
    cur: u32,
    at: usize,
    size: usize,
}

impl ChainWriter {
    fn new(pool: &mut Pool) -> Option<ChainWriter> {
        let head = pool.alloc()?;
        Some(ChainWriter {
            head,
            cur: head,
            at: 0,
            size: pool.data_size(),
        })
    }

    /// The room left in the current buffer, moving to a new one when it is full.
    fn room(&mut self, pool: &mut Pool) -> Result<usize, Lost> {
        if self.at == self.size {
            let b = pool.alloc().ok_or(Lost::NoBuffer)?;
            pool.link(self.cur, b);
            self.cur = b;
            self.at = 0;
        }
        Ok(self.size - self.at)
    }

    fn put_ring(
        &mut self,
        pool: &mut Pool,
        mem: &RingMap,
        mut from: u64,
        mut len: usize,
    ) -> Result<(), Lost> {
        while len > 0 {
            let n = self.room(pool)?.min(len);
            mem.read(from, &mut pool.room_mut(self.cur)[self.at..self.at + n])?;
            self.advance(pool, n);
            from += n as u64;
            len -= n;
        }
        Ok(())
    }

    fn put_bytes(&mut self, pool: &mut Pool, mut bytes: &[u8]) -> Result<(), Lost> {
        while !bytes.is_empty() {
            let n = self.room(pool)?.min(bytes.len());
            pool.room_mut(self.cur)[self.at..self.at + n].copy_from_slice(&bytes[..n]);
            self.advance(pool, n);
            bytes = &bytes[n..];
        }
        Ok(())
    }

    fn advance(&mut self, pool: &mut Pool, n: usize) {
        self.at += n;
        pool.meta_mut(self.cur).len = self.at as u16;
    }
}

/// Overwrites two bytes at `at` from the start of a chain (they may straddle two buffers).
fn patch(pool: &mut Pool, head: u32, at: usize, bytes: [u8; 2]) {
    let mut b = head;
    let mut skip = at;
    let mut k = 0;
    while b != buffer::NONE && k < 2 {
        let len = usize::from(pool.meta(b).len);
        if skip < len {
            let d = pool.data_mut(b);
            while k < 2 && skip < len {
                d[skip] = bytes[k];
                skip += 1;
                k += 1;
            }
            skip = 0;
        } else {
            skip -= len;
        }
        b = pool.meta(b).next;
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
    }

    #[test]
    fn internet_checksum_of_rfc1071_example() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2 (folded).
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_words(&b)), 0xddf2);
        assert_eq!(sum_words(&[0x12]), 0x1200, "odd byte pads low");
    }

    #[test]
    fn patch_straddles_buffers() {
        let mut pool = Pool::new(buffer::PoolConfig {
            count: 4,
            data_size: 64,
            headroom: 0,
        })
        .unwrap();
        let h = pool.from_bytes(&[0u8; 100]).unwrap();
        patch(&mut pool, h, 63, [0xaa, 0xbb]);
        let mut v = Vec::new();
        pool.read_chain(h, &mut v);
        assert_eq!((v[62], v[63], v[64], v[65]), (0, 0xaa, 0xbb, 0));
        pool.free(h);
    }
}
