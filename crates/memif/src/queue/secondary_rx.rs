//! Secondary, M2S: packets read in place from its own buffers, then reposted.

use super::counters::bump;
use super::secondary_tx::SlotBuffers;
use super::{LinkDown, QueueBase};
use crate::ring::{DESC_FLAG_NEXT, Desc};

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

    /// Copies packet bytes from offset `at` into `dst`; returns how many were copied.
    pub fn read(&self, at: usize, dst: &mut [u8]) -> usize {
        let mut pos = 0usize; // packet offset of the current segment
        let mut done = 0usize;
        for (i, &seg) in self.segs.iter().enumerate() {
            let seg = seg as usize;
            let want = at + done;
            if want < pos + seg && done < dst.len() {
                let within = want - pos;
                let n = (seg - within).min(dst.len() - done);
                let off = self
                    .bufs
                    .offset(self.first_slot.wrapping_add(i as u16), self.mask)
                    + within as u64;
                let _ = self.bufs.region.read(off, &mut dst[done..done + n]);
                done += n;
            }
            pos += seg;
        }
        done
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
}
queue_common!(SecondaryRx);
rx_common!(SecondaryRx);

impl SecondaryRx {
    /// Posts every slot's buffer to the primary (head = tail + ring size).
    pub(crate) fn new(base: QueueBase, bufs: SlotBuffers) -> SecondaryRx {
        let cursor = base.ring.tail();
        let ring = &base.ring;
        let mask = ring.size() - 1;
        for i in 0..ring.size() {
            let s = cursor.wrapping_add(i);
            ring.set_desc(s, bufs.desc(s, mask, bufs.size, 0));
            ring.set_desc(
                s,
                Desc {
                    flags: 0,
                    region: bufs.region_index,
                    length: bufs.size,
                    offset: bufs.offset(s, mask) as u32,
                    metadata: 0,
                },
            );
        }
        ring.set_head(cursor.wrapping_add(ring.size()));
        SecondaryRx {
            base,
            bufs,
            cursor,
            lens: Vec::with_capacity(usize::from(mask) + 1),
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

    /// Hands up to `max` packets to `f` in order, then reposts their buffers.
    pub fn recv_with(
        &mut self,
        max: usize,
        mut f: impl FnMut(&RxPacket<'_>),
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
        let mut slot = self.cursor;
        let (mut packets, mut bytes, mut bad) = (0usize, 0u64, 0u64);
        'packets: while slot != end && packets < max {
            let start = slot;
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
                // Only flags and length are the primary's; region and offset are ours and
                // are never read back from shared memory.
                let d = ring.desc(slot);
                slot = slot.wrapping_add(1);
                ok &= d.length <= self.bufs.size && (d.length > 0 || d.flags & DESC_FLAG_NEXT == 0);
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
            f(&RxPacket {
                bufs: &self.bufs,
                segs: &self.lens,
                first_slot: start,
                mask,
                len,
            });
            packets += 1;
            bytes += len as u64;
        }
        // Repost the consumed buffers: region, offset and capacity rewritten from our records.
        let mut s = self.cursor;
        while s != slot {
            ring.set_desc(s, self.bufs.desc(s, mask, self.bufs.size, 0));
            s = s.wrapping_add(1);
        }
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
