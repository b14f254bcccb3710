//! Filling pool buffer chains with a received frame, wherever the kernel put it (a slot or a
//! block of the ring, or a copy queued on the socket for a frame too large for its slot),
//! shared by the ring's two layouts ([`super::rx`]): a VLAN tag the kernel took out put
//! back, a checksum left to offload completed, a UDP super-packet cut into its datagrams
//! ([`super::udp_gso`]).

use buffer::Pool;

use super::ring::RingMap;
use super::rx::{Lost, VNET_LEN, fold, sum_words};
use super::udp_gso::{Cut, MAX_HDRS};
use crate::vnet::{GSO_NONE, GSO_UDP_L4, VnetHdr};

/// Where a frame's bytes are.
#[derive(Debug, Clone, Copy)]
pub(super) enum Src<'a> {
    /// In the ring, from this offset.
    Ring(&'a RingMap, u64),
    /// In a copy the kernel queued on the socket.
    Bytes(&'a [u8]),
}

impl Src<'_> {
    fn read(&self, at: usize, dst: &mut [u8]) -> Result<(), Lost> {
        match *self {
            Src::Ring(mem, base) => Ok(mem.read(base + at as u64, dst)?),
            Src::Bytes(b) => {
                let from = b.get(at..at + dst.len()).ok_or(Lost::Bad)?;
                dst.copy_from_slice(from);
                Ok(())
            }
        }
    }

    /// The unfolded Internet checksum of `len` bytes from `at`.
    fn sum16(&self, at: usize, len: usize) -> Result<u64, Lost> {
        match *self {
            Src::Ring(mem, base) => Ok(mem.sum16(base + at as u64, len as u64)?),
            Src::Bytes(b) => Ok(sum_words(b.get(at..at + len).ok_or(Lost::Bad)?)),
        }
    }

    fn put(&self, w: &mut ChainWriter, pool: &mut Pool, at: usize, len: usize) -> Result<(), Lost> {
        match *self {
            Src::Ring(mem, base) => w.put_ring(pool, mem, base + at as u64, len),
            Src::Bytes(b) => w.put_bytes(pool, b.get(at..at + len).ok_or(Lost::Bad)?),
        }
    }

    /// Appends the first `len` bytes with the VLAN `tag` the kernel took out put back after
    /// the two MAC addresses, where the wire had it.
    fn put_tagged(
        &self,
        w: &mut ChainWriter,
        pool: &mut Pool,
        len: usize,
        tag: Option<[u8; 4]>,
    ) -> Result<(), Lost> {
        match tag {
            Some(tag) if len >= 12 => self
                .put(w, pool, 0, 12)
                .and_then(|()| w.put_bytes(pool, &tag))
                .and_then(|()| self.put(w, pool, 12, len - 12)),
            _ => self.put(w, pool, 0, len),
        }
    }
}

/// A received frame, found: `len` bytes at `src`, the virtio-net header before it (when the
/// socket gives one), and the VLAN tag the kernel took out of it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame<'a> {
    pub(super) src: Src<'a>,
    pub(super) len: usize,
    pub(super) vnet: Option<[u8; VNET_LEN]>,
    pub(super) tag: Option<[u8; 4]>,
}

/// What a delivered frame became.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Delivered {
    /// Chains appended to the output: 1, or a super-packet's datagrams.
    pub(super) packets: usize,
    pub(super) bytes: u64,
    /// Checksums completed.
    pub(super) csum: u64,
}

/// Copies frame `f` into new chains appended to `out`, at most `slots` of them
/// ([`Lost::NoRoom`] when it would make more: take it on a later call). A frame is delivered
/// whole or not at all.
pub(super) fn deliver(
    pool: &mut Pool,
    f: &Frame<'_>,
    slots: usize,
    out: &mut Vec<u32>,
) -> Result<Delivered, Lost> {
    let mut fix = None;
    if let Some(v) = &f.vnet {
        let v = VnetHdr::new(v);
        match v.gso_type() {
            GSO_NONE => {}
            GSO_UDP_L4 => return cut(pool, f, v.gso_size(), slots, out),
            _ => return Err(Lost::Gso),
        }
        if let Some((start, field)) = v.partial_csum() {
            let (start, field) = (usize::from(start), usize::from(field));
            if start + field + 2 > f.len {
                return Err(Lost::BadOffload);
            }
            // Complete it as the kernel's skb_checksum_help would: the field holds the
            // pseudo-header sum; sum from csum_start to the end, fold, invert, never 0.
            let c = !fold(f.src.sum16(start, f.len - start)?);
            fix = Some((start + field, if c == 0 { 0xffff } else { c }));
        }
    }
    if slots == 0 {
        return Err(Lost::NoRoom);
    }
    // The tag goes back after the MAC addresses, in a frame that has them.
    let extra = if f.tag.is_some() && f.len >= 12 { 4 } else { 0 };
    let total = f.len + extra;
    if pool.available() < total.div_ceil(pool.data_size()).max(1) {
        return Err(Lost::NoBuffer);
    }
    let mut w = ChainWriter::new(pool).ok_or(Lost::NoBuffer)?;
    if let Err(e) = f.src.put_tagged(&mut w, pool, f.len, f.tag) {
        pool.free(w.head);
        return Err(e);
    }
    if let Some((at, value)) = fix {
        patch(pool, w.head, at + extra, value.to_be_bytes());
    }
    pool.meta_mut(w.head).total_len = total as u32;
    out.push(w.head);
    Ok(Delivered {
        packets: 1,
        bytes: total as u64,
        csum: u64::from(fix.is_some()),
    })
}

/// Cuts the UDP super-packet `f` into its datagrams ([`Cut`]), each a chain of its own with
/// the frame's VLAN tag; a super-packet that is not one we can cut counts as
/// [`Lost::Gso`].
fn cut(
    pool: &mut Pool,
    f: &Frame<'_>,
    gso_size: u16,
    slots: usize,
    out: &mut Vec<u32>,
) -> Result<Delivered, Lost> {
    let mut head = [0u8; MAX_HDRS];
    let n = f.len.min(MAX_HDRS);
    f.src.read(0, &mut head[..n])?;
    let c = Cut::new(&head[..n], f.len, gso_size).ok_or(Lost::Gso)?;
    if c.segments() > slots {
        return Err(Lost::NoRoom);
    }
    let extra = if f.tag.is_some() { 4 } else { 0 };
    let per = (MAX_HDRS + extra + usize::from(gso_size)).div_ceil(pool.data_size());
    if pool.available() < per * c.segments() {
        return Err(Lost::NoBuffer);
    }
    let start = out.len();
    let mut bytes = 0u64;
    let mut h = [0u8; MAX_HDRS];
    for i in 0..c.segments() {
        let (hdr, payload) = c.segment(i, &mut h);
        let Some(mut w) = ChainWriter::new(pool) else {
            return Err(undo(pool, out, start, Lost::NoBuffer));
        };
        let filled = Src::Bytes(hdr)
            .put_tagged(&mut w, pool, hdr.len(), f.tag)
            .and_then(|()| f.src.put(&mut w, pool, payload.start, payload.len()));
        let total = hdr.len() + extra + payload.len();
        out.push(w.head);
        if let Err(e) = filled {
            return Err(undo(pool, out, start, e));
        }
        pool.meta_mut(w.head).total_len = total as u32;
        bytes += total as u64;
    }
    Ok(Delivered {
        packets: c.segments(),
        bytes,
        csum: 0,
    })
}

/// Frees the chains appended to `out` from `start` on (a super-packet delivered in part).
fn undo(pool: &mut Pool, out: &mut Vec<u32>, start: usize, e: Lost) -> Lost {
    for b in out.drain(start..) {
        pool.free(b);
    }
    e
}

/// Fills a fresh chain front to back; the caller has checked that the pool has enough.
pub(super) struct ChainWriter {
    pub(super) head: u32,
    cur: u32,
    at: usize,
    size: usize,
}

impl ChainWriter {
    pub(super) fn new(pool: &mut Pool) -> Option<ChainWriter> {
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

    pub(super) fn put_ring(
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

    pub(super) fn put_bytes(&mut self, pool: &mut Pool, mut bytes: &[u8]) -> Result<(), Lost> {
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
pub(super) fn patch(pool: &mut Pool, head: u32, at: usize, bytes: [u8; 2]) {
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

    /// A tag goes back only into a frame with room for it after the MAC addresses; the
    /// chain's length says what it holds either way (a runt was counted 4 bytes longer than
    /// it was).
    #[test]
    fn a_runt_gets_no_tag_and_its_true_length() {
        let mut pool = Pool::new(buffer::PoolConfig::default()).unwrap();
        for (len, want) in [(10, 10), (12, 16), (60, 64)] {
            let bytes = vec![7u8; len];
            let f = Frame {
                src: Src::Bytes(&bytes),
                len,
                vnet: None,
                tag: Some([0x81, 0, 0, 5]),
            };
            let mut out = Vec::new();
            let Ok(d) = deliver(&mut pool, &f, 1, &mut out) else {
                panic!("{len} bytes not delivered");
            };
            assert_eq!(d.bytes, want as u64);
            let mut v = Vec::new();
            pool.read_chain(out[0], &mut v);
            assert_eq!((v.len(), pool.meta(out[0]).total_len), (want, want as u32));
            pool.free(out[0]);
        }
    }
}
