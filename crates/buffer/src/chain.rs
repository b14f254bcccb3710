//! Chains: packets longer than one buffer, linked through `Meta::next` from their head, whose
//! `total_len` counts them whole.

use crate::{Ext, NONE, Pool};

impl Pool {
    /// Links `tail` after `prev` in a chain.
    pub fn link(&mut self, prev: u32, tail: u32) {
        self.meta[prev as usize].next = tail;
    }

    /// Copies `bytes` into a fresh chain; `None` when the pool runs out (nothing is leaked).
    pub fn from_bytes(&mut self, bytes: &[u8]) -> Option<u32> {
        let size = self.data_size();
        let mut head = NONE;
        let mut prev = NONE;
        let mut rest = bytes;
        loop {
            let Some(b) = self.alloc() else {
                self.free(head);
                return None;
            };
            let n = rest.len().min(size);
            self.room_mut(b)[..n].copy_from_slice(&rest[..n]);
            self.meta[b as usize].len = n as u16;
            if head == NONE {
                head = b;
            } else {
                self.link(prev, b);
            }
            prev = b;
            rest = &rest[n..];
            if rest.is_empty() {
                break;
            }
        }
        self.meta[head as usize].total_len = bytes.len() as u32;
        Some(head)
    }

    /// Appends the bytes of a whole chain to `out`, external segment included (zeros if its
    /// source is gone).
    pub fn read_chain(&self, head: u32, out: &mut Vec<u8>) {
        let mut i = head;
        while i != NONE {
            out.extend_from_slice(self.data(i));
            let e = self.meta[i as usize].ext;
            if e.len != 0 && !self.read_ext(i, out) {
                out.resize(out.len() + e.len as usize, 0);
            }
            i = self.meta[i as usize].next;
        }
    }

    /// Copies `len` bytes of the chain at `head`, from byte `from` of the packet on, into
    /// buffer `dst`'s room at `at` (both in the pool's memory: one copy, no staging). False,
    /// copying nothing, when the chain is shorter, has an external segment in the way, or
    /// the room is too small.
    pub fn copy_from_chain(
        &mut self,
        head: u32,
        from: usize,
        dst: u32,
        at: usize,
        len: usize,
    ) -> bool {
        let room = usize::from(self.headroom) + usize::from(self.data_size);
        let d_off = usize::from(self.meta[dst as usize].offset) + at;
        if d_off + len > room {
            return false;
        }
        let d_base = dst as usize * self.stride + d_off;
        // Where each piece comes from, checked before anything is written.
        let (mut i, mut skip, mut left, mut pieces) = (head, from, len, 0usize);
        let mut plan = [(0usize, 0usize); 64];
        while left > 0 {
            if i == NONE || pieces == plan.len() {
                return false;
            }
            let m = self.meta[i as usize];
            let here = usize::from(m.len);
            if skip >= here {
                if m.ext.len != 0 {
                    return false;
                }
                skip -= here;
            } else {
                let n = (here - skip).min(left);
                plan[pieces] = (i as usize * self.stride + usize::from(m.offset) + skip, n);
                pieces += 1;
                left -= n;
                skip = 0;
                if left > 0 && m.ext.len != 0 {
                    return false;
                }
            }
            i = m.next;
        }
        let mut to = d_base;
        for &(src, n) in &plan[..pieces] {
            self.mem.copy_within(src..src + n, to);
            to += n;
        }
        true
    }

    /// Number of buffers in a chain.
    pub fn chain_len(&self, head: u32) -> usize {
        let mut n = 0;
        let mut i = head;
        while i != NONE {
            n += 1;
            i = self.meta[i as usize].next;
        }
        n
    }

    /// Shortens the whole chain starting at `head` to `len` bytes: the buffer where byte `len`
    /// falls is cut (its external segment first), the buffers after it go back to the pool.
    /// Nothing changes if the chain is not longer.
    pub fn truncate_chain(&mut self, head: u32, len: u32) {
        if self.meta[head as usize].total_len <= len {
            return;
        }
        let mut at = 0u32;
        let mut b = head;
        while b != NONE {
            let m = self.meta[b as usize];
            let here = u32::from(m.len) + m.ext.len;
            if at + here >= len {
                let keep = len - at;
                let m = &mut self.meta[b as usize];
                if keep > u32::from(m.len) {
                    m.ext.len = keep - u32::from(m.len);
                } else {
                    m.ext.len = 0;
                    m.len = keep as u16;
                }
                let tail = m.next;
                if tail != NONE {
                    self.link(b, NONE);
                    self.free(tail);
                }
                break;
            }
            at += here;
            b = m.next;
        }
        self.meta[head as usize].total_len = len;
    }

    /// Replaces the packet in `head` with `bytes`, written from its data offset: the rest of
    /// its chain and any external segment go, and buffers are chained on as `bytes` need.
    /// False, changing nothing, when the pool is short.
    pub fn rewrite(&mut self, head: u32, bytes: &[u8]) -> bool {
        let off = usize::from(self.meta[head as usize].offset);
        let room = usize::from(self.headroom) + usize::from(self.data_size) - off;
        let first = room.min(bytes.len());
        let more = (bytes.len() - first).div_ceil(self.data_size());
        // The old tail comes back before the new one is taken.
        let old_tail = self.chain_len(head) - 1;
        if self.free.len() + old_tail < more {
            return false;
        }
        let tail = self.meta[head as usize].next;
        if tail != NONE {
            self.link(head, NONE);
            self.free(tail);
        }
        self.room_mut(head)[..first].copy_from_slice(&bytes[..first]);
        let m = &mut self.meta[head as usize];
        m.len = first as u16;
        m.ext = Ext::default();
        m.total_len = bytes.len() as u32;
        self.chain_on(head, &bytes[first..]);
        true
    }

    /// Copies `bytes` into fresh buffers chained after `last`; the caller has counted that
    /// the pool holds enough.
    pub(crate) fn chain_on(&mut self, last: u32, bytes: &[u8]) {
        let mut prev = last;
        for chunk in bytes.chunks(self.data_size()) {
            let n = self.alloc().expect("counted by the caller");
            self.room_mut(n)[..chunk.len()].copy_from_slice(chunk);
            self.meta[n as usize].len = chunk.len() as u16;
            self.link(prev, n);
            prev = n;
        }
    }
}
