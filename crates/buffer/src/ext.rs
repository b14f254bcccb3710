//! External segments: the part of a packet that stays in memory outside the pool (the memif
//! peer's buffer, in single-copy forwarding), read through the device layer's [`ExtSource`]
//! and brought into local buffers when a node needs the whole packet.

use crate::{NONE, Pool};

/// Memory outside the pool that a buffer's packet may continue in (single-copy forwarding: the
/// payload stays in the memif peer's buffer). Implemented by the device layer; the pool only
/// reads through it (packet capture, linearising for a node that needs the whole packet). The
/// device transmits from its own typed handle on the same memory, never through this trait.
pub trait ExtSource: Send + Sync + core::fmt::Debug {
    /// Copies `dst.len()` bytes from `offset` in `region`; false (and `dst` untouched) if that
    /// range is not inside the region.
    fn read(&self, region: u16, offset: u64, dst: &mut [u8]) -> bool;
}

/// An external segment: `len` bytes at `offset` of `region` of source `source`, following the
/// buffer's own data. Only the last buffer of a chain may have one; `len == 0` means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ext {
    pub source: u32,
    pub region: u16,
    pub offset: u64,
    pub len: u32,
}

impl Pool {
    /// Registers (or with `None` forgets) external memory under id `source`.
    pub fn set_ext_source(&mut self, source: u32, s: Option<std::sync::Arc<dyn ExtSource>>) {
        let i = source as usize;
        if self.sources.len() <= i {
            self.sources.resize_with(i + 1, || None);
        }
        self.sources[i] = s;
    }

    pub fn ext_source(&self, source: u32) -> Option<&std::sync::Arc<dyn ExtSource>> {
        self.sources.get(source as usize).and_then(|s| s.as_ref())
    }

    /// Reads buffer `b`'s external segment into `out`; false if its source is gone.
    pub fn read_ext(&self, b: u32, out: &mut Vec<u8>) -> bool {
        let e = self.meta[b as usize].ext;
        if e.len == 0 {
            return true;
        }
        let Some(src) = self.ext_source(e.source) else {
            return false;
        };
        let at = out.len();
        out.resize(at + e.len as usize, 0);
        if !src.read(e.region, e.offset, &mut out[at..]) {
            out.truncate(at);
            return false;
        }
        true
    }

    /// Copies the external segment of `b` (the last buffer of a chain) into local buffers, so
    /// that a node can read or change the whole packet. False, changing nothing, when the
    /// pool is short or the source is gone.
    pub fn linearize(&mut self, b: u32) -> bool {
        let e = self.meta[b as usize].ext;
        if e.len == 0 {
            return true;
        }
        let mut bytes = Vec::with_capacity(e.len as usize);
        if !self.read_ext(b, &mut bytes) {
            return false;
        }
        let used =
            usize::from(self.meta[b as usize].offset) + usize::from(self.meta[b as usize].len);
        let end = usize::from(self.headroom) + usize::from(self.data_size);
        let fits_here = (end - used).min(bytes.len());
        let rest = &bytes[fits_here..];
        let more = rest.len().div_ceil(self.data_size());
        if self.free.len() < more {
            return false;
        }
        let base = b as usize * self.stride;
        self.mem[base + used..base + used + fits_here].copy_from_slice(&bytes[..fits_here]);
        self.meta[b as usize].len += fits_here as u16;
        self.meta[b as usize].ext.len = 0;
        self.chain_on(b, rest);
        true
    }

    /// Brings the external segment of `head`'s chain (held by its last buffer) into local
    /// buffers, as [`linearize`](Self::linearize) does for one buffer.
    pub fn linearize_chain(&mut self, head: u32) -> bool {
        let mut last = head;
        while self.meta[last as usize].next != NONE {
            last = self.meta[last as usize].next;
        }
        self.linearize(last)
    }
}
