//! Secondary, S2M: its own buffers, one per slot, written in place.

use std::sync::Arc;

use super::counters::bump;
use super::{LinkDown, QueueBase};
use crate::ring::{DESC_FLAG_NEXT, Desc, Ring};
use crate::shm::SharedMemory;

/// The secondary's own buffers for one ring: slot `j` always uses buffer `j`.
#[derive(Debug)]
pub(crate) struct SlotBuffers {
    pub region: Arc<SharedMemory>,
    pub region_index: u16,
    pub base: u64,
    pub size: u32,
}

/// What a slot's descriptor is made from, as a value: the loops that write many descriptors
/// take it once, so that the ring's volatile writes do not make the compiler reload the
/// records from `SlotBuffers` for every slot.
#[derive(Debug, Clone, Copy)]
struct Layout {
    region: u16,
    base: u64,
    size: u32,
}

impl Layout {
    #[inline]
    fn offset(self, slot: u16, mask: u16) -> u64 {
        self.base + u64::from(slot & mask) * u64::from(self.size)
    }

    /// The descriptor of `slot`'s own buffer: `length` bytes (a full buffer when posting an
    /// empty one), region and offset always from our records, never from the ring.
    #[inline]
    fn desc(self, slot: u16, mask: u16, length: u32, flags: u16) -> Desc {
        Desc {
            flags,
            region: self.region,
            length,
            offset: self.offset(slot, mask) as u32,
            metadata: 0,
        }
    }
}

impl SlotBuffers {
    #[inline]
    fn layout(&self) -> Layout {
        Layout {
            region: self.region_index,
            base: self.base,
            size: self.size,
        }
    }

    #[inline]
    pub(super) fn offset(&self, slot: u16, mask: u16) -> u64 {
        self.layout().offset(slot, mask)
    }

    /// [`Layout::desc`] of these buffers.
    #[inline]
    pub(super) fn desc(&self, slot: u16, mask: u16, length: u32, flags: u16) -> Desc {
        self.layout().desc(slot, mask, length, flags)
    }

    /// Where a packet of `len` bytes goes, from `slot`'s buffer on.
    #[inline]
    fn writer(&self, slot: u16, mask: u16, len: u32) -> PacketWriter<'_> {
        PacketWriter {
            bufs: self,
            first_slot: slot,
            mask,
            len: len as usize,
        }
    }

    /// Posts the buffers of slots `from..to` (mod 2^16) empty to the peer: region, offset and
    /// capacity rewritten from our records, read once ([`Layout`]).
    #[inline]
    pub(super) fn post(&self, ring: &Ring, from: u16, to: u16, mask: u16) {
        let l = self.layout();
        let mut s = from;
        while s != to {
            ring.set_desc(s, l.desc(s, mask, l.size, 0));
            s = s.wrapping_add(1);
        }
    }
}

/// Where one packet's bytes go: its consecutive slots' buffers.
#[derive(Debug)]
pub struct PacketWriter<'a> {
    bufs: &'a SlotBuffers,
    first_slot: u16,
    mask: u16,
    len: usize,
}

impl PacketWriter<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Which of the ring's buffers the packet begins in (0 to the ring size less one): what
    /// a sender that keeps track of what each buffer holds indexes by.
    pub fn buffer(&self) -> usize {
        usize::from(self.first_slot & self.mask)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes `bytes` at packet offset `at`, across buffer boundaries; bytes past the packet's
    /// length are ignored.
    #[inline(always)]
    pub fn write(&mut self, at: usize, bytes: &[u8]) {
        let size = self.bufs.size as usize;
        let end = (at + bytes.len()).min(self.len);
        if end <= size {
            // Within the first buffer (every header, every frame of one buffer): one checked
            // range, an inline copy, no division.
            if let Some(n) = end.checked_sub(at)
                && let Ok(r) = self.bufs.region.range(
                    self.bufs.offset(self.first_slot, self.mask) + at as u64,
                    n as u64,
                )
            {
                r.write_at(0, &bytes[..n]);
            }
            return;
        }
        self.write_across(at, bytes, end);
    }

    /// [`write`](Self::write) of a fixed number of bytes: when they lie whole within the
    /// packet and its first buffer (a probe, a header field), one range check and a copy of
    /// constant length; otherwise as `write`.
    #[inline(always)]
    pub fn write_array<const N: usize>(&mut self, at: usize, bytes: &[u8; N]) {
        let end = at + N;
        if end <= self.len
            && end <= self.bufs.size as usize
            && let Ok(r) = self.bufs.region.range(
                self.bufs.offset(self.first_slot, self.mask) + at as u64,
                N as u64,
            )
        {
            r.write_at(0, bytes);
            return;
        }
        self.write(at, bytes);
    }

    /// [`write`](Self::write) of bytes that reach past the first buffer (`end`: the packet
    /// offset they stop at). Out of line, so that the common write carries none of its
    /// state.
    #[cold]
    #[inline(never)]
    fn write_across(&mut self, at: usize, bytes: &[u8], end: usize) {
        let size = self.bufs.size as usize;
        let mut pos = at;
        while pos < end {
            let seg = pos / size;
            let within = pos % size;
            let n = (end - pos).min(size - within);
            let off = self
                .bufs
                .offset(self.first_slot.wrapping_add(seg as u16), self.mask)
                + within as u64;
            let _ = self.bufs.region.write(off, &bytes[pos - at..pos - at + n]);
            pos += n;
        }
    }
}

/// Secondary, S2M: writes packets straight into its shared buffers (no staging copy).
#[derive(Debug)]
pub struct SecondaryTx {
    base: QueueBase,
    bufs: SlotBuffers,
    head: u16,
    /// The primary's tail as last read: `size - (head - tail)` slots are known free.
    tail: u16,
}
queue_common!(SecondaryTx);

impl SecondaryTx {
    /// Our region holding this queue's slot buffers.
    pub fn memory(&self) -> Vec<std::sync::Arc<crate::shm::SharedMemory>> {
        vec![self.bufs.region.clone()]
    }
}

impl SecondaryTx {
    pub(crate) fn new(base: QueueBase, bufs: SlotBuffers) -> SecondaryTx {
        let head = base.ring.head();
        let tail = base.ring.tail();
        SecondaryTx {
            base,
            bufs,
            head,
            tail,
        }
    }

    /// Bytes one slot holds; longer packets take several slots.
    pub fn buffer_size(&self) -> usize {
        self.bufs.size as usize
    }

    /// Free slots, or `LinkDown` if the peer moved `tail` past our `head`.
    pub fn free_slots(&self) -> Result<u16, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        let tail = self.base.ring.tail();
        let inflight = self.head.wrapping_sub(tail);
        if inflight > self.base.ring.size() {
            self.base.link.fault(format!(
                "S2M ring {}: tail {tail} moved past head {}",
                self.base.index, self.head
            ));
            return Err(LinkDown);
        }
        Ok(self.base.ring.size() - inflight)
    }

    /// [`free_slots`](Self::free_slots), remembering the tail it read: every send takes its
    /// room from here or from what the last read left, so that `head - tail` never exceeds
    /// the ring.
    fn read_free(&mut self) -> Result<u16, LinkDown> {
        let free = self.free_slots()?;
        self.tail = self.head.wrapping_sub(self.base.ring.size() - free);
        Ok(free)
    }

    /// Free slots for a send of `n`: the primary's tail is read again only when the slots
    /// known free from the last read are fewer. Its line is the primary's, and a read after
    /// it moved is a miss.
    // Out of line: inlined, it changed the register use of `send_uniform`'s loop (3
    // instructions a frame more under --cost) for a call once a burst.
    #[inline(never)]
    fn room(&mut self, n: usize) -> Result<usize, LinkDown> {
        let known = usize::from(self.base.ring.size() - self.head.wrapping_sub(self.tail));
        if known >= n && self.base.link.is_up() {
            return Ok(known);
        }
        self.read_free().map(usize::from)
    }

    /// Slots published that the primary has not yet consumed.
    pub fn in_flight(&self) -> Result<u16, LinkDown> {
        Ok(self.base.ring.size() - self.free_slots()?)
    }

    /// Sends up to `n` packets of `len` bytes each, as many as fit; `fill(i, writer)` writes
    /// packet `i` in place. How many were sent (or, for `len` past the whole ring, dropped
    /// and counted as [`send_with`](Self::send_with) does). A generator's frames of one size:
    /// when they fit one buffer, room is checked once for the batch and each descriptor
    /// comes from records read once, where `send_with` checks every packet's length against
    /// the ring and the room left.
    pub fn send_uniform(
        &mut self,
        n: usize,
        len: u32,
        mut fill: impl FnMut(usize, &mut PacketWriter<'_>),
    ) -> Result<usize, LinkDown> {
        if len > self.bufs.size {
            // Chains: the general path, frame by frame.
            return self.send_with(&vec![len; n], fill);
        }
        let k = self.take_room(n)?;
        if k == 0 {
            return Ok(0);
        }
        let ring = &self.base.ring;
        let mask = ring.size() - 1;
        let l = self.bufs.layout();
        let mut slot = self.head;
        for i in 0..k {
            fill(i, &mut self.bufs.writer(slot, mask, len));
            ring.set_desc(slot, l.desc(slot, mask, len, 0));
            slot = slot.wrapping_add(1);
        }
        self.publish(slot, k, len);
        Ok(k)
    }

    /// How many of `n` packets of one buffer each there is room for, the rest counted as
    /// refused ([`room`](Self::room)).
    #[inline]
    fn take_room(&mut self, n: usize) -> Result<usize, LinkDown> {
        let k = n.min(self.room(n)?);
        if k < n {
            bump(&self.base.counters.ring_full, 1);
            bump(&self.base.counters.tx_no_room, (n - k) as u64);
        }
        Ok(k)
    }

    /// Hands the peer the `k` packets of `len` bytes whose descriptors run up to `slot`.
    #[inline]
    fn publish(&mut self, slot: u16, k: usize, len: u32) {
        self.head = slot;
        self.base.ring.set_head(slot);
        self.base.signal();
        bump(&self.base.counters.packets, k as u64);
        bump(&self.base.counters.bytes, k as u64 * u64::from(len));
    }

    /// [`send_uniform`](Self::send_uniform) of packets whose buffers already hold all but `N`
    /// bytes at offset `at`: `stamp(i)` gives packet `i`'s (a generator's probe, once every
    /// buffer holds its frame). The range the ring's buffers make is checked once for the
    /// batch, and each packet's bytes go to a constant offset in its slot's buffer. Packets
    /// over one buffer, or a stamp past `len`, take `send_uniform`'s way.
    pub fn send_stamped<const N: usize>(
        &mut self,
        n: usize,
        len: u32,
        at: usize,
        mut stamp: impl FnMut(usize) -> [u8; N],
    ) -> Result<usize, LinkDown> {
        if len > self.bufs.size || at + N > len as usize {
            return self.send_uniform(n, len, |i, w| w.write_array(at, &stamp(i)));
        }
        let k = self.take_room(n)?;
        if k == 0 {
            return Ok(0);
        }
        // Every slot's buffer, as one range (our own region holds them all, from `new`).
        let ring_bytes = u64::from(self.base.ring.size()) * u64::from(self.bufs.size);
        let Ok(area) = self.bufs.region.range(self.bufs.base, ring_bytes) else {
            return self.send_uniform(k, len, |i, w| w.write_array(at, &stamp(i)));
        };
        let ring = &self.base.ring;
        let mask = ring.size() - 1;
        let l = self.bufs.layout();
        let size = self.bufs.size as usize;
        let mut slot = self.head;
        for i in 0..k {
            area.write_at(usize::from(slot & mask) * size + at, &stamp(i));
            ring.set_desc(slot, l.desc(slot, mask, len, 0));
            slot = slot.wrapping_add(1);
        }
        self.publish(slot, k, len);
        Ok(k)
    }

    /// Sends `lens.len()` packets or as many as fit; `fill(i, writer)` writes packet `i` in
    /// place. Returns how many packets were consumed from the front of `lens`: sent, or
    /// dropped and counted in `drop_oversize` because they need more slots than the ring has.
    pub fn send_with(
        &mut self,
        lens: &[u32],
        mut fill: impl FnMut(usize, &mut PacketWriter<'_>),
    ) -> Result<usize, LinkDown> {
        let mut free = self.read_free()?;
        let ring = &self.base.ring;
        let mask = ring.size() - 1;
        let size = self.bufs.size;
        let mut slot = self.head;
        let (mut sent, mut dropped, mut bytes) = (0usize, 0u64, 0u64);
        for (i, &len) in lens.iter().enumerate() {
            let nseg = if len <= size { 1 } else { len.div_ceil(size) };
            if nseg > u32::from(ring.size()) {
                // Can never fit, however empty the ring gets: drop it rather than stall.
                bump(&self.base.counters.drop_oversize, 1);
                sent += 1;
                dropped += 1;
                continue;
            }
            if nseg > u32::from(free) {
                bump(&self.base.counters.ring_full, 1);
                bump(&self.base.counters.tx_no_room, (lens.len() - i) as u64);
                break;
            }
            fill(i, &mut self.bufs.writer(slot, mask, len));
            if nseg == 1 {
                // Almost every packet: one slot, without the segment loop. The bookkeeping
                // below is repeated on purpose: shared with the loop's (an `else` around the
                // loop), it cost the generator 10 instructions a frame under --cost.
                ring.set_desc(slot, self.bufs.desc(slot, mask, len, 0));
                slot = slot.wrapping_add(1);
                free -= 1;
                sent += 1;
                bytes += u64::from(len);
                continue;
            }
            let mut left = len;
            for s in 0..nseg {
                let seg = left.min(size);
                left -= seg;
                let last = s + 1 == nseg;
                let sl = slot.wrapping_add(s as u16);
                let flags = if last { 0 } else { DESC_FLAG_NEXT };
                ring.set_desc(sl, self.bufs.desc(sl, mask, seg, flags));
            }
            slot = slot.wrapping_add(nseg as u16);
            free -= nseg as u16;
            sent += 1;
            bytes += u64::from(len);
        }
        if slot != self.head {
            self.head = slot;
            ring.set_head(slot);
            self.base.signal();
        }
        bump(&self.base.counters.packets, sent as u64 - dropped);
        bump(&self.base.counters.bytes, bytes);
        Ok(sent)
    }
}
