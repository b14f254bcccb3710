//! Secondary, M2S: packets read in place from its own buffers, then reposted.

use buffer::Pool;
use copy_engine::{CopyReq, Engine};

use super::copy::copy_and_wait;
use super::counters::bump;
use super::secondary_tx::SlotBuffers;
use super::{LinkDown, QueueBase};
use crate::abtime::AbTimer;
use crate::ring::DESC_FLAG_NEXT;

/// How many slots ahead of the packet in hand the receive loop prefetches a buffer's first
/// line (the primary has written it). On the host of 2026-11-28
/// (docs/results/2026-11-28-prefetch-inprocess.md) it took 12-30% off this loop's clock in
/// the generator, at 64 and 1500 B.
const PREFETCH_AHEAD: u16 = 8;

/// One received packet, read in place from the secondary's own buffers.
#[derive(Debug)]
pub struct RxPacket<'a> {
    bufs: &'a SlotBuffers,
    segs: &'a [u32],
    first_slot: u16,
    mask: u16,
    len: usize,
}

impl RxPacket<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of slots (descriptors) the packet used.
    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    /// Walks the segments holding packet bytes `at..at + n`, handing `f` each piece as
    /// (offset in our region, offset from `at`, length); stops early when `f` says `false`
    /// (that piece not counted). How many bytes the pieces covered.
    fn pieces(&self, at: usize, n: usize, mut f: impl FnMut(u64, usize, usize) -> bool) -> usize {
        let mut pos = 0usize; // packet offset of the current segment
        let mut done = 0usize;
        for (i, &seg) in self.segs.iter().enumerate() {
            let seg = seg as usize;
            let want = at + done;
            if want < pos + seg && done < n {
                let within = want - pos;
                let k = (seg - within).min(n - done);
                let off = self
                    .bufs
                    .offset(self.first_slot.wrapping_add(i as u16), self.mask)
                    + within as u64;
                if !f(off, done, k) {
                    break;
                }
                done += k;
            }
            pos += seg;
        }
        done
    }

    /// Copies packet bytes from offset `at` into `dst`; returns how many were copied.
    #[inline]
    pub fn read(&self, at: usize, dst: &mut [u8]) -> usize {
        let region = &self.bufs.region;
        if let [first, ..] = self.segs
            && at + dst.len() <= *first as usize
        {
            // Within the first segment (a header, a frame of one buffer): one checked range,
            // an inline copy.
            let off = self.bufs.offset(self.first_slot, self.mask) + at as u64;
            return match region.range(off, dst.len() as u64) {
                Ok(r) => {
                    r.read_into(dst);
                    dst.len()
                }
                Err(_) => 0,
            };
        }
        self.pieces(at, dst.len(), |off, d, k| {
            let _ = region.read(off, &mut dst[d..d + k]);
            true
        })
    }

    /// The packet's first `N` bytes, copied out of the shared buffer into an array of our
    /// own, when its first segment holds them (`None` otherwise: read them with
    /// [`read`](Self::read)). A fixed-size copy with one range check, for a caller that reads
    /// a header's fields at constant offsets (a generator's per-frame check).
    #[inline]
    pub fn head<const N: usize>(&self) -> Option<[u8; N]> {
        let first = *self.segs.first()? as usize;
        if first < N {
            return None;
        }
        let off = self.bufs.offset(self.first_slot, self.mask);
        let r = self.bufs.region.range(off, N as u64).ok()?;
        let mut h = [0u8; N];
        r.read_into(&mut h);
        Some(h)
    }

    /// The copies [`read`](Self::read) would make of packet bytes `at..at + n`, one per
    /// segment touched, handed to `f` as (source address, offset in the destination,
    /// length), for a copy engine; how many bytes they cover. The sources stay readable until
    /// the `finish` of [`SecondaryRx::recv_then`] has returned.
    pub fn copies(&self, at: usize, n: usize, mut f: impl FnMut(*const u8, usize, usize)) -> usize {
        let region = &self.bufs.region;
        self.pieces(at, n, |off, d, k| match region.addr(off, k as u64) {
            Ok(src) => {
                f(src, d, k);
                true
            }
            Err(_) => false,
        })
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len];
        self.read(0, &mut v);
        v
    }
}

/// Secondary, M2S: receives in place and reposts each buffer once the callback returns.
#[derive(Debug)]
pub struct SecondaryRx {
    base: QueueBase,
    bufs: SlotBuffers,
    cursor: u16,
    lens: Vec<u32>,
    /// Copies of one `recv_pool` call waiting for the engine, and their requests.
    later: Vec<SlotCopy>,
    reqs: Vec<CopyReq>,
}

// SAFETY: `later` and `reqs` are scratch space that only hold addresses during one
// `recv_pool` call (cleared at its start, never read across calls); everything else is `Send`.
unsafe impl Send for SecondaryRx {}

/// A copy out of one of our slots, recorded during the ring walk and made by the engine
/// after it.
#[derive(Debug, Clone, Copy)]
struct SlotCopy {
    src: *const u8,
    buf: u32,
    at: u32,
    len: u32,
}
queue_common!(SecondaryRx);
rx_common!(SecondaryRx);

impl SecondaryRx {
    /// Our region holding this queue's slot buffers.
    pub fn memory(&self) -> Vec<std::sync::Arc<crate::shm::SharedMemory>> {
        vec![self.bufs.region.clone()]
    }
}

impl SecondaryRx {
    /// Posts every slot's buffer to the primary (head = tail + ring size).
    pub(crate) fn new(base: QueueBase, bufs: SlotBuffers) -> SecondaryRx {
        let cursor = base.ring.tail();
        let ring = &base.ring;
        let mask = ring.size() - 1;
        bufs.post(ring, cursor, cursor.wrapping_add(ring.size()), mask);
        ring.set_head(cursor.wrapping_add(ring.size()));
        SecondaryRx {
            base,
            bufs,
            cursor,
            lens: Vec::with_capacity(usize::from(mask) + 1),
            later: Vec::new(),
            reqs: Vec::new(),
        }
    }

    fn pending(&self) -> Result<u16, LinkDown> {
        let tail = self.base.ring.tail();
        let n = tail.wrapping_sub(self.cursor);
        if n > self.base.ring.size() {
            self.base.link.fault(format!(
                "M2S ring {}: tail {tail} is {n} slots past our cursor {}, ring holds {}",
                self.base.index,
                self.cursor,
                self.base.ring.size()
            ));
            return Err(LinkDown);
        }
        Ok(n)
    }

    /// Receives up to `max` packets into fresh buffers of `pool` (chains when longer than a
    /// buffer), pushed onto `out`, then reposts the slots; returns how many packets were lost
    /// for want of buffers. With an asynchronous engine, every copy of the call it would not
    /// make on the CPU anyway goes to it as one batch, waited for before any slot is
    /// reposted; the rest are made at once.
    pub fn recv_pool(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
        engine: &mut Engine,
    ) -> Result<u64, LinkDown> {
        let size = pool.data_size();
        let below = match engine.caps() {
            c if c.asynchronous => c.inline_below as usize,
            _ => usize::MAX,
        };
        let mut later = std::mem::take(&mut self.later);
        let mut reqs = std::mem::take(&mut self.reqs);
        later.clear();
        let mut st = (pool, out, 0u64, later, 0u64);
        let r = self.recv_then(
            max,
            &mut st,
            |(pool, out, lost, later, short), p| {
                let need = p.len().div_ceil(size).max(1);
                if pool.available() < need {
                    *lost += 1;
                    return;
                }
                let mut head = buffer::NONE;
                let mut prev = buffer::NONE;
                let mut at = 0usize;
                for _ in 0..need {
                    let Some(b) = pool.alloc() else { break };
                    let n = (p.len() - at).min(size);
                    if n >= below {
                        p.copies(at, n, |src, off, len| {
                            later.push(SlotCopy {
                                src,
                                buf: b,
                                at: off as u32,
                                len: len as u32,
                            });
                        });
                    } else {
                        *short += 1;
                        p.read(at, &mut pool.room_mut(b)[..n]);
                    }
                    pool.meta_mut(b).len = n as u16;
                    if head == buffer::NONE {
                        head = b;
                    } else {
                        pool.link(prev, b);
                    }
                    prev = b;
                    at += n;
                }
                pool.meta_mut(head).total_len = p.len() as u32;
                out.push(head);
            },
            |(pool, _, _, later, _)| {
                if later.is_empty() {
                    return;
                }
                reqs.clear();
                let rooms = pool.room_ptrs();
                for c in later.iter() {
                    // Sized for this buffer when recorded: a miss is impossible, and would
                    // leave stale bytes in our own buffer.
                    if let Some(dst) = rooms.ptr(c.buf, c.at as usize, c.len as usize) {
                        reqs.push(CopyReq {
                            src: c.src,
                            dst,
                            len: c.len,
                        });
                    }
                }
                // SAFETY: each source is a bounds-checked range of one of our own slots
                // (`RxPacket::copies`), not reposted until this closure returns; each
                // destination a bounds-checked range of a buffer just allocated, derived
                // from one exclusive borrow of the pool (`rooms`) that lasts until the batch
                // has retired; no two ranges overlap (distinct slots, distinct buffers, and
                // our region is not the pool).
                unsafe { copy_and_wait(engine, &reqs) };
                #[allow(clippy::drop_non_drop)]
                drop(rooms);
            },
        );
        let (_, _, lost, later, short) = st;
        if short != 0 && below != usize::MAX {
            engine.note_short(short);
        }
        self.later = later;
        self.reqs = reqs;
        r.map(|_| lost)
    }

    /// Hands up to `max` packets to `f` in order, then reposts their buffers.
    pub fn recv_with(
        &mut self,
        max: usize,
        mut f: impl FnMut(&RxPacket<'_>),
    ) -> Result<usize, LinkDown> {
        self.recv_then(max, &mut (), |_, p| f(p), |_| {})
    }

    /// As [`recv_with`](Self::recv_with), with `state` for both closures, running `finish`
    /// after the last packet and before any buffer is reposted: copies `f` left to a copy
    /// engine are waited for there.
    pub fn recv_then<S>(
        &mut self,
        max: usize,
        state: &mut S,
        mut f: impl FnMut(&mut S, &RxPacket<'_>),
        finish: impl FnOnce(&mut S),
    ) -> Result<usize, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        let n = self.pending()?;
        if n == 0 {
            return Ok(0);
        }
        let ring = &self.base.ring;
        let mask = ring.size() - 1;
        let end = self.cursor.wrapping_add(n);
        // The prefetch's A/B switch (always on unless built with `abtime`).
        static AB: AbTimer = AbTimer::new("secondary-rx");
        let ab = AB.start();
        let lim = if ab.on { n } else { 0 };
        let mut slot = self.cursor;
        let (mut packets, mut bytes, mut bad) = (0usize, 0u64, 0u64);
        // One call of `f` for both shapes of packet: with two, the compiler keeps the
        // closure out of line (a generator's per-frame work, called once per frame).
        let mut one = [0u32];
        'packets: while slot != end && packets < max {
            let start = slot;
            // The first line of the packet a few slots on, written by the primary's core: its
            // miss overlaps the work on this one.
            let ahead = slot.wrapping_add(PREFETCH_AHEAD);
            if ahead.wrapping_sub(self.cursor) < lim {
                self.bufs.region.prefetch(self.bufs.offset(ahead, mask));
            }
            // Almost every packet: one descriptor, handed over without the chain scratch.
            let d = ring.desc(slot);
            let (segs, len): (&[u32], usize) = if d.flags & DESC_FLAG_NEXT == 0 {
                slot = slot.wrapping_add(1);
                if d.length > self.bufs.size {
                    bad += 1;
                    continue;
                }
                one[0] = d.length;
                (&one, d.length as usize)
            } else {
                self.lens.clear();
                let mut ok = true;
                loop {
                    if slot == end {
                        if start == self.cursor && n == ring.size() {
                            self.base.link.fault(format!(
                                "M2S ring {}: descriptor chain longer than the ring",
                                self.base.index
                            ));
                            return Err(LinkDown);
                        }
                        slot = start;
                        break 'packets;
                    }
                    // Only flags and length are the primary's; region and offset are ours
                    // and are never read back from shared memory.
                    let d = ring.desc(slot);
                    slot = slot.wrapping_add(1);
                    ok &= d.length <= self.bufs.size
                        && (d.length > 0 || d.flags & DESC_FLAG_NEXT == 0);
                    self.lens.push(d.length.min(self.bufs.size));
                    if d.flags & DESC_FLAG_NEXT == 0 {
                        break;
                    }
                }
                if !ok {
                    bad += 1;
                    continue;
                }
                let len = self.lens.iter().map(|&l| l as usize).sum();
                (&self.lens, len)
            };
            f(
                state,
                &RxPacket {
                    bufs: &self.bufs,
                    segs,
                    first_slot: start,
                    mask,
                    len,
                },
            );
            packets += 1;
            bytes += len as u64;
        }
        finish(state);
        AB.finish(ab, packets);
        self.bufs.post(ring, self.cursor, slot, mask);
        if slot != self.cursor {
            self.cursor = slot;
            ring.set_head(slot.wrapping_add(ring.size()));
        }
        let c = &self.base.counters;
        bump(&c.packets, packets as u64);
        bump(&c.bytes, bytes);
        if bad != 0 {
            bump(&c.drop_bad_desc, bad);
        }
        Ok(packets)
    }
}
