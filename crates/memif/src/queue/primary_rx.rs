//! Primary, S2M: validates each descriptor the peer published and copies the packet (or, in
//! single copy, its header) into local buffers.

use buffer::{Ext, Pool};
use copy_engine::{CopyReq, Engine};

use super::copy::{copy_and_wait, push_copy};
use super::counters::bump;
use super::regions::{PeerMemory, Regions};
use super::{LinkDown, QueueBase};
use crate::abtime::AbTimer;
use crate::ring::{DESC_FLAG_NEXT, Desc};

/// How many slots ahead of the packet in hand the direct receive loop prefetches a packet's
/// first line. On the host of 2026-11-28 (docs/results/2026-11-28-prefetch-inprocess.md) 8
/// took about 10% off the loop's own clock at 64 and 512 B, 17-34% at 1500 B.
const PREFETCH_AHEAD: usize = 8;

/// A cache line: what single copy takes of a frame whose headers all lie in it.
const LINE: usize = 64;

/// Whether the first line of an Ethernet frame holds every header the graph reads of it:
/// untagged IPv4 (EtherType 0x0800) without options (version and length byte 0x45), and not
/// UDP to the VXLAN port (4789), whose inner headers run on past byte 64. The graph reads
/// such a frame's Ethernet and IPv4 headers (34 bytes) and, delivering it locally or quoting
/// it in an ICMP error, its first 8 bytes of transport header (42); anything past those it
/// reads through the buffer's external segment. Every other frame (ARP, VLAN tags, IPv6, IPv4
/// with options, VXLAN) keeps the `hdr` bytes the caller asked for. `line` is our own copy,
/// so what the peer writes after it was read cannot change the answer.
fn headers_in_first_line(line: &[u8]) -> bool {
    use wire::{ethernet, ipv4, udp};
    // Where the IPv4 header and what follows it start, in a frame without a VLAN tag or
    // IPv4 options; the UDP destination port ends the bytes read.
    const IP: usize = ethernet::HEADER_LEN;
    const L4: usize = IP + ipv4::MIN_HEADER_LEN;
    const PORT: wire::Field = L4 + udp::field::DST_PORT.start..L4 + udp::field::DST_PORT.end;
    const IP4: [u8; 2] = wire::EtherType::Ipv4.to_raw().to_be_bytes();
    match line.first_chunk::<{ PORT.end }>() {
        Some(f) => {
            f[ethernet::field::ETHERTYPE] == IP4
                && f[IP + ipv4::field::VER_IHL] == ipv4::VER_IHL_NO_OPTIONS
                && !(f[IP + ipv4::field::PROTOCOL] == wire::IpProtocol::Udp.to_raw()
                    && f[PORT] == wire::vxlan::UDP_PORT.to_be_bytes())
        }
        None => false,
    }
}

/// Primary, S2M: receives by copying out of the peer's buffers into a local pool.
#[derive(Debug)]
pub struct PrimaryRx {
    base: QueueBase,
    regions: Regions,
    cursor: u16,
    /// The head as last read: `seen - cursor` packets are published and not yet taken.
    seen: u16,
    max_frame: u32,
    segs: Vec<Desc>,
    /// Single-copy: slots consumed but still holding payloads (tail not yet moved).
    held: bool,
    /// Copies of one receive call waiting for the engine (see `recv_split_via`).
    copies: Vec<RxCopy>,
    reqs: Vec<CopyReq>,
}
queue_common!(PrimaryRx);

// SAFETY: `reqs` is scratch space that only holds addresses during one `recv_split_via` call
// (cleared before use, every address retired before the call returns); between calls its
// stale pointers are never read. Everything else in a `PrimaryRx` is `Send`.
unsafe impl Send for PrimaryRx {}

/// One receive copy, recorded while walking the ring: from a validated range of a peer
/// region into a local buffer's room. Addresses are resolved only once the walk (and every
/// buffer allocation) is done.
#[derive(Debug, Clone, Copy)]
struct RxCopy {
    region: u16,
    offset: u64,
    buf: u32,
    at: u32,
    len: u32,
}

/// Where receive copies go: done at once, or recorded for the engine.
enum Copier<'a> {
    Now,
    /// Those of at least this many bytes; shorter ones now, counted.
    Later(&'a mut Vec<RxCopy>, usize, u64),
}

impl Copier<'_> {
    /// Copies `len` bytes at `(region, offset)` of the peer's memory (already validated) to
    /// byte `at` of buffer `buf`'s room.
    #[inline]
    fn copy(
        &mut self,
        pool: &mut Pool,
        regions: &Regions,
        (region, offset): (u16, u64),
        buf: u32,
        at: usize,
        len: usize,
    ) {
        let later = match self {
            Copier::Later(v, below, _) if len >= *below => Some(v),
            Copier::Later(_, _, short) => {
                *short += 1;
                None
            }
            Copier::Now => None,
        };
        match later {
            // Validated by `Regions::valid` before; a failure here is impossible, and would
            // only leave zeros in our own buffer.
            None => {
                let _ = regions.0[usize::from(region)]
                    .read(offset, &mut pool.room_mut(buf)[at..at + len]);
            }
            Some(v) => v.push(RxCopy {
                region,
                offset,
                buf,
                at: at as u32,
                len: len as u32,
            }),
        }
    }
}
rx_common!(PrimaryRx);

impl PrimaryRx {
    /// The peer's regions this queue copies to or from (all of the connection's).
    pub fn memory(&self) -> Vec<std::sync::Arc<crate::shm::SharedMemory>> {
        self.regions.0.to_vec()
    }
}

impl PrimaryRx {
    pub(crate) fn new(base: QueueBase, regions: Regions, max_frame: u32) -> PrimaryRx {
        let cursor = base.ring.tail();
        let n = usize::from(base.ring.size());
        PrimaryRx {
            base,
            regions,
            cursor,
            seen: cursor,
            max_frame,
            segs: Vec::with_capacity(n),
            held: false,
            copies: Vec::new(),
            reqs: Vec::new(),
        }
    }

    /// The peer's memory, for single-copy forwarding (register it with the pool).
    pub fn peer_memory(&self) -> PeerMemory {
        PeerMemory(self.regions.clone())
    }

    /// Gives the slots of packets received with `hdr > 0` back to the peer. Call once every
    /// packet from them has been sent or dropped (the end of a dispatch).
    pub fn release(&mut self) {
        if self.held {
            self.held = false;
            self.base.ring.set_tail(self.cursor);
        }
    }

    /// Slots the peer has published and we have not consumed, or `LinkDown` (after faulting
    /// the link) when the peer's index is further ahead than a ring can hold.
    fn pending(&self) -> Result<u16, LinkDown> {
        let head = self.base.ring.head();
        let n = head.wrapping_sub(self.cursor);
        if n > self.base.ring.size() {
            self.base.link.fault(format!(
                "S2M ring {}: head {head} is {n} slots past tail {}, ring holds {}",
                self.base.index,
                self.cursor,
                self.base.ring.size()
            ));
            return Err(LinkDown);
        }
        Ok(n)
    }

    /// Packets published and not taken yet, enough of them for `max` if there are: the
    /// peer's head is read again only when the packets known from the last read fall short
    /// of `max`. The head's line is the peer's, and a read after the peer moved it is a miss;
    /// a backlog (after a pause) is drained without one a pass.
    // Out of line, as `SecondaryTx::room` is: the receive's registers stay as they were.
    #[inline(never)]
    fn published(&mut self, max: usize) -> Result<u16, LinkDown> {
        let known = self.seen.wrapping_sub(self.cursor);
        if usize::from(known) >= max {
            return Ok(known);
        }
        let n = self.pending()?;
        self.seen = self.cursor.wrapping_add(n);
        Ok(n)
    }

    /// Receives up to `max` packets into `pool`, appending their head buffer indices to `out`.
    pub fn recv(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
    ) -> Result<usize, LinkDown> {
        self.recv_split(pool, out, max, 0, 0)
    }

    /// Single-copy receive: copies only the first `hdr` bytes of each packet into a local
    /// buffer and leaves the rest in the peer's buffer as the buffer's external segment
    /// (`source` is the id under which the caller registered [`peer_memory`](Self::peer_memory)
    /// with the pool: the interface's index, which every buffer received also gets as its
    /// `rx_if`). The slots stay held until [`release`](Self::release). Chained packets are
    /// copied whole. `hdr == 0` is the classic receive.
    ///
    /// A frame whose first 64 bytes hold every header the graph reads of it
    /// (`headers_in_first_line`: untagged IPv4 without options, not VXLAN) has only that
    /// line copied when it arrives in one descriptor and the CPU copies it: the line after
    /// it, last written by the peer's core, is then no miss waited for here on its own but
    /// read by the transmit's copy with the rest of the payload.
    pub fn recv_split(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
        hdr: usize,
        source: u32,
    ) -> Result<usize, LinkDown> {
        self.recv_split_via(pool, out, max, hdr, source, None)
    }

    /// As [`recv_split`](Self::recv_split), with every copy out of the peer's memory going
    /// through `engine`. The copies of one call are submitted as one batch once the ring walk
    /// is done, and retired before the call returns and before any slot goes back to the
    /// peer. A synchronous engine (the CPU backend: every batch copied within `submit`) and
    /// `None` both copy inline, which is the same work without a second pass over the batch
    /// (about 55 instructions a packet): single-descriptor packets in
    /// `recv_direct`, the rest during the walk.
    pub fn recv_split_via(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
        hdr: usize,
        source: u32,
        engine: Option<&mut Engine>,
    ) -> Result<usize, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        let n = self.published(max)?;
        if n == 0 {
            return Ok(0);
        }
        let end = self.cursor.wrapping_add(n);
        let data_size = pool.data_size();
        self.copies.clear();
        let engine = engine.filter(|e| e.caps().asynchronous);
        let (mut slot, mut packets, mut bytes) = if engine.is_none() {
            self.recv_direct(pool, out, max, hdr, source, end)
        } else {
            (self.cursor, 0, 0)
        };
        let ring = &self.base.ring;
        let (mut bad, mut oversize) = (0u64, 0u64);
        let mut copier = if let Some(e) = &engine {
            Copier::Later(&mut self.copies, e.caps().inline_below as usize, 0)
        } else {
            Copier::Now
        };
        'packets: while slot != end && packets < max {
            let start = slot;
            let first = ring.desc(slot);
            slot = slot.wrapping_add(1);
            let single = first.flags & DESC_FLAG_NEXT == 0;
            let (ok, total) = if single {
                // Almost every packet: one descriptor, no need for the chain scratch.
                (self.regions.valid(&first), u64::from(first.length))
            } else {
                // The chain walk stays inline: as a function of its own (inlined or not) it
                // cost the single-descriptor path 4 to 30 instructions a packet (rx_cost).
                self.segs.clear();
                self.segs.push(first);
                let mut total = u64::from(first.length);
                let mut ok = self.regions.valid(&first);
                loop {
                    if slot == end {
                        // The chain is not complete yet: leave it for the next call, unless it
                        // already spans the whole ring and so never can be.
                        if start == self.cursor && n == ring.size() {
                            self.base.link.fault(format!(
                                "S2M ring {}: descriptor chain longer than the ring",
                                self.base.index
                            ));
                            return Err(LinkDown);
                        }
                        slot = start;
                        break 'packets;
                    }
                    let d = ring.desc(slot);
                    slot = slot.wrapping_add(1);
                    ok &= self.regions.valid(&d);
                    total += u64::from(d.length);
                    self.segs.push(d);
                    if d.flags & DESC_FLAG_NEXT == 0 {
                        break;
                    }
                }
                (ok, total)
            };
            if !ok {
                bad += 1;
                continue;
            }
            if total > u64::from(self.max_frame) {
                oversize += 1;
                continue;
            }
            if single && hdr != 0 && total as usize > hdr {
                let Some(b) = pool.alloc() else {
                    bump(&self.base.counters.no_buffer, 1);
                    slot = start;
                    break;
                };
                copier.copy(
                    pool,
                    &self.regions,
                    (first.region, u64::from(first.offset)),
                    b,
                    0,
                    hdr,
                );
                let m = pool.meta_mut(b);
                m.len = hdr as u16;
                m.total_len = total as u32;
                m.rx_if = source;
                m.ext = buffer::Ext {
                    source,
                    region: first.region,
                    offset: u64::from(first.offset) + hdr as u64,
                    len: total as u32 - hdr as u32,
                };
                out.push(b);
                packets += 1;
                bytes += total;
                self.held = true;
                continue;
            }
            let segs: &[Desc] = if single {
                std::slice::from_ref(&first)
            } else {
                &self.segs
            };
            match copy_in(
                pool,
                &self.regions,
                segs,
                total as usize,
                data_size,
                &mut copier,
            ) {
                Some(h) => {
                    pool.meta_mut(h).rx_if = source;
                    out.push(h);
                    packets += 1;
                    bytes += total;
                }
                None => {
                    bump(&self.base.counters.no_buffer, 1);
                    slot = start;
                    break;
                }
            }
        }
        let short = match copier {
            Copier::Later(_, _, n) => n,
            Copier::Now => 0,
        };
        if let Some(e) = engine {
            if short != 0 {
                e.note_short(short);
            }
            if !self.copies.is_empty() {
                self.copy_batch(pool, e);
            }
        }
        if slot != self.cursor {
            self.cursor = slot;
            if !self.held {
                self.base.ring.set_tail(slot);
            }
        }
        let c = &self.base.counters;
        bump(&c.packets, packets as u64);
        bump(&c.bytes, bytes);
        if bad != 0 {
            bump(&c.drop_bad_desc, bad);
        }
        if oversize != 0 {
            bump(&c.drop_oversize, oversize);
        }
        Ok(packets)
    }

    /// The receive loop of almost every packet: one descriptor, copied on the CPU (whole, or
    /// in single copy its first `hdr` bytes, the rest left in the peer's buffer), with one
    /// bounds check of the descriptor against its region and the buffer's metadata written in
    /// one go. Stops at the first descriptor it does not take (a chain, an empty, invalid or
    /// oversized one, no free buffer) and leaves it, and all after it, to the general loop of
    /// [`recv_split_via`](Self::recv_split_via), which handles and counts it. Returns the slot
    /// it stopped at, and the packets and bytes it received.
    // A function of its own: inlined into the general loop, it shares that loop's register
    // pressure and spills more (--cost at 64 B: 6 instructions a packet more).
    #[inline(never)]
    fn recv_direct(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
        hdr: usize,
        source: u32,
        end: u16,
    ) -> (u16, usize, u64) {
        let ring = &self.base.ring;
        let regions = &*self.regions.0;
        let data_size = pool.data_size() as u32;
        // In single copy, a frame's first line, or `hdr` bytes if that is less.
        let line = LINE.min(hdr);
        // Copied whole up to this; longer single-descriptor packets are split (single copy).
        let whole = match hdr {
            0 => self.max_frame.min(data_size),
            _ => self.max_frame.min(data_size).min(line as u32),
        };
        let split = hdr != 0 && hdr as u32 <= data_size;
        let (cursor, mut held) = (self.cursor, false);
        let n = usize::from(end.wrapping_sub(cursor)).min(max);
        let max_frame = self.max_frame;
        // The prefetch's A/B switch (always on unless built with `abtime`).
        static AB: AbTimer = AbTimer::new("memif-input");
        let ab = AB.start();
        // The packet's number in the pass gives its slot: one count fewer live in the loop.
        let (packets, bytes) = pool.alloc_packets(n, source, out, |k, room, m| {
            let d = ring.desc(cursor.wrapping_add(k as u16));
            if d.flags & DESC_FLAG_NEXT != 0 || d.length == 0 {
                return false;
            }
            let Some(r) = regions.get(usize::from(d.region)) else {
                return false;
            };
            let Ok(src) = r.range(u64::from(d.offset), u64::from(d.length)) else {
                return false;
            };
            // The first line of the packet a few slots on, last written by the peer's core:
            // its miss overlaps the work on this one instead of stalling that one's copy.
            // (Almost always in this packet's region; a packet in another is not prefetched.)
            if ab.on && k + PREFETCH_AHEAD < n {
                let a = ring.desc(cursor.wrapping_add((k + PREFETCH_AHEAD) as u16));
                if a.region == d.region {
                    r.prefetch(u64::from(a.offset));
                }
            }
            let len = d.length;
            if len > whole {
                if !split || len > max_frame {
                    return false;
                }
                // The first line, then the rest of `hdr` only if the headers go on past it.
                let Some(first) = room.get_mut(..line) else {
                    return false;
                };
                src.read_into(first);
                let here = if headers_in_first_line(first) {
                    line
                } else {
                    let here = hdr.min(len as usize);
                    let Some(dst) = room.get_mut(..here) else {
                        return false;
                    };
                    src.read_into(dst);
                    here
                };
                if here < len as usize {
                    m.ext = Ext {
                        source,
                        region: d.region,
                        offset: u64::from(d.offset) + here as u64,
                        len: len - here as u32,
                    };
                    held = true;
                }
                (m.len, m.total_len) = (here as u16, len);
                return true;
            }
            let Some(dst) = room.get_mut(..len as usize) else {
                return false;
            };
            src.read_into(dst);
            (m.len, m.total_len) = (len as u16, len);
            true
        });
        self.held |= held;
        AB.finish(ab, packets);
        (cursor.wrapping_add(packets as u16), packets, bytes)
    }

    /// Runs the copies recorded during the ring walk as one batch on `e`, and waits until the
    /// batch is retired.
    fn copy_batch(&mut self, pool: &mut Pool, e: &mut Engine) {
        self.reqs.clear();
        let rooms = pool.room_ptrs();
        for c in &self.copies {
            let r = &self.regions.0[usize::from(c.region)];
            // Both ranges were checked when recorded (descriptor against its region, the
            // copy against the room it was sized for); a miss here is impossible, and
            // would leave stale bytes of an earlier packet in our own buffer.
            let (Ok(src), Some(dst)) = (
                r.addr(c.offset, u64::from(c.len)),
                rooms.ptr(c.buf, c.at as usize, c.len as usize),
            ) else {
                continue;
            };
            push_copy(&mut self.reqs, src, dst, c.len as usize);
        }
        // SAFETY: every source is a bounds-checked range of a peer mapping that
        // `self.regions` keeps alive for the whole call; every destination is a
        // bounds-checked range of a local buffer's room, derived from one exclusive
        // borrow of the pool (`rooms`) that lasts until the batch is retired below, and
        // no two destinations overlap (each buffer's ranges are disjoint by
        // construction). Local and peer memory never overlap. We wait for retirement
        // before the pool is touched again or any slot goes back to the peer.
        unsafe { copy_and_wait(e, &self.reqs) };
        // The pool's memory was lent to the engine until here: keeping the borrow alive to
        // this point makes the compiler refuse any pool access while copies are in flight.
        #[allow(clippy::drop_non_drop)]
        drop(rooms);
    }
}

/// Copies validated segments into a fresh local chain; `None` if the pool is short.
#[inline]
fn copy_in(
    pool: &mut Pool,
    regions: &Regions,
    segs: &[Desc],
    total: usize,
    data_size: usize,
    copier: &mut Copier<'_>,
) -> Option<u32> {
    if let [d] = segs
        && total <= data_size
    {
        let b = pool.alloc()?;
        copier.copy(pool, regions, (d.region, u64::from(d.offset)), b, 0, total);
        let m = pool.meta_mut(b);
        m.len = total as u16;
        m.total_len = total as u32;
        return Some(b);
    }
    let nbufs = total.div_ceil(data_size).max(1);
    if pool.available() < nbufs {
        return None;
    }
    let head = pool.alloc()?;
    let (mut cur, mut fill) = (head, 0usize);
    for d in segs {
        let mut off = 0usize;
        let len = d.length as usize;
        while off < len {
            if fill == data_size {
                let nb = pool.alloc()?;
                pool.meta_mut(cur).len = fill as u16;
                pool.link(cur, nb);
                cur = nb;
                fill = 0;
            }
            let n = (len - off).min(data_size - fill);
            copier.copy(
                pool,
                regions,
                (d.region, u64::from(d.offset) + off as u64),
                cur,
                fill,
                n,
            );
            fill += n;
            off += n;
        }
    }
    pool.meta_mut(cur).len = fill as u16;
    pool.meta_mut(head).total_len = total as u32;
    Some(head)
}
