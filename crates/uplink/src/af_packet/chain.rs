//! Filling pool buffer chains from a ring: the copy out of a receive ring's frame, shared by
//! its two layouts ([`super::rx`]).

use buffer::Pool;

use super::ring::RingMap;
use super::rx::Lost;

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
}
