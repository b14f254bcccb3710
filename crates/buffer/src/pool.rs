//! The pool: its geometry, taking and returning buffers, and each buffer's metadata and data.

use crate::view::front;
use crate::{Ext, ExtSource, Meta, NONE};

/// Pool geometry.
#[derive(Debug, Clone, Copy)]
pub struct PoolConfig {
    pub count: u32,
    /// Data bytes after the headroom.
    pub data_size: u16,
    pub headroom: u16,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            count: 16384,
            data_size: 2048,
            headroom: 128,
        }
    }
}

/// Why a pool could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub &'static str);

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.0)
    }
}
impl std::error::Error for ConfigError {}

/// A pool of buffers owned by one thread.
#[derive(Debug)]
pub struct Pool {
    pub(crate) mem: Vec<u8>,
    pub(crate) meta: Vec<Meta>,
    pub(crate) free: Vec<u32>,
    /// External memory buffers may point into, by source id.
    pub(crate) sources: Vec<Option<std::sync::Arc<dyn ExtSource>>>,
    pub(crate) stride: usize,
    pub(crate) data_size: u16,
    pub(crate) headroom: u16,
}

impl Pool {
    pub fn new(cfg: PoolConfig) -> Result<Pool, ConfigError> {
        if cfg.count == 0 || cfg.count == NONE {
            return Err(ConfigError("buffer count must be between 1 and 2^32-2"));
        }
        if cfg.data_size < 64 {
            return Err(ConfigError("buffer data size must be at least 64 bytes"));
        }
        let stride = (usize::from(cfg.headroom) + usize::from(cfg.data_size)).next_multiple_of(64);
        let bytes = stride
            .checked_mul(cfg.count as usize)
            .ok_or(ConfigError("buffer pool size overflows"))?;
        let blank = Meta::fresh(cfg.headroom, NONE);
        Ok(Pool {
            mem: vec![0; bytes],
            meta: vec![blank; cfg.count as usize],
            free: (0..cfg.count).rev().collect(),
            sources: Vec::new(),
            stride,
            data_size: cfg.data_size,
            headroom: cfg.headroom,
        })
    }

    /// Every buffer's bytes, headroom included, as one slice: for registering the pool with
    /// a copy device (`copy_engine::register_slice`), which must fault its pages in first.
    pub fn memory(&self) -> &[u8] {
        &self.mem
    }

    /// Data bytes a fresh buffer can hold.
    pub fn data_size(&self) -> usize {
        usize::from(self.data_size)
    }

    pub fn available(&self) -> usize {
        self.free.len()
    }

    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    fn reset(&mut self, i: u32) {
        let m = &mut self.meta[i as usize];
        m.offset = self.headroom;
        m.len = 0;
        m.next = NONE;
        m.total_len = 0;
        m.error = 0;
        m.flags = 0;
        m.ext = Ext::default();
        m.gso_size = 0;
    }

    /// Receives up to `n` packets into fresh buffers in one pass, the receive loop of a
    /// device: `fill` gets the packet's number in the pass (0, 1, ...), its buffer's data
    /// area (the data size, after the headroom) and its metadata, already written whole so
    /// that no field of an earlier packet survives (`rx_if` as given, `tx_if` none, VRF and
    /// adjacency 0, the rest as [`alloc`](Self::alloc) leaves them); it writes a packet
    /// there, sets the metadata's `len`, `total_len` and, if the packet has one, [`Ext`], and
    /// returns true, or false to stop. Each buffer filled is appended to `out`, in order;
    /// returns how many, and the sum of their `total_len`. A length past the data area stops
    /// the pass as false does (the buffer stays free, whatever its metadata says).
    #[inline]
    pub fn alloc_packets(
        &mut self,
        n: usize,
        rx_if: u32,
        out: &mut Vec<u32>,
        mut fill: impl FnMut(usize, &mut [u8], &mut Meta) -> bool,
    ) -> (usize, u64) {
        let Pool {
            mem,
            meta,
            free,
            stride,
            data_size,
            headroom,
            ..
        } = self;
        let (stride, data_size, headroom) = (*stride, *data_size, *headroom);
        let have = free.len();
        let n = n.min(have);
        let (mut taken, mut bytes) = (0, 0u64);
        let blank = Meta::fresh(headroom, rx_if);
        // The free list's top `n` entries, taken from the top down, as `alloc` would.
        for &b in free[have - n..].iter().rev() {
            let start = b as usize * stride + usize::from(headroom);
            let room = &mut mem[start..start + usize::from(data_size)];
            let m = &mut meta[b as usize];
            *m = blank;
            if !fill(taken, room, m) || m.len > data_size {
                break;
            }
            debug_assert!(
                m.offset == headroom && m.next == NONE,
                "fill may set len, total_len and ext only"
            );
            bytes += u64::from(m.total_len);
            taken += 1;
        }
        out.extend(free[have - taken..].iter().rev());
        free.truncate(have - taken);
        (taken, bytes)
    }

    pub fn alloc(&mut self) -> Option<u32> {
        let i = self.free.pop()?;
        self.reset(i);
        Some(i)
    }

    /// Fills `out` with fresh buffers; all or nothing. Returns false when too few are free.
    pub fn alloc_bulk(&mut self, out: &mut [u32]) -> bool {
        if self.free.len() < out.len() {
            return false;
        }
        for slot in out.iter_mut() {
            let i = self.free.pop().unwrap_or(NONE);
            self.reset(i);
            *slot = i;
        }
        true
    }

    /// Returns a whole chain to the pool.
    pub fn free(&mut self, head: u32) {
        let mut i = head;
        while i != NONE {
            let next = self.meta[i as usize].next;
            self.meta[i as usize].next = NONE;
            self.free.push(i);
            i = next;
        }
    }

    pub fn free_bulk(&mut self, heads: &[u32]) {
        // Almost every frame is packets of one buffer each, whose `next` is already NONE:
        // then the whole frame goes back in one copy.
        let meta = &self.meta;
        if heads
            .iter()
            .all(|&h| meta.get(h as usize).is_some_and(|m| m.next == NONE))
        {
            self.free.extend_from_slice(heads);
            return;
        }
        for &h in heads {
            self.free(h);
        }
    }

    /// Returns buffers that are one each (their `next` none, as the caller saw when it last
    /// read their metadata): the indices in one copy, without [`free_bulk`](Self::free_bulk)'s
    /// pass over the metadata. A chain's head given here would keep its tail out of the pool
    /// (lost buffers, never a buffer in two places); debug builds check.
    pub fn free_unchained(&mut self, bufs: &[u32]) {
        debug_assert!(bufs.iter().all(|&b| self.meta[b as usize].next == NONE));
        self.free.extend_from_slice(bufs);
    }

    pub fn meta(&self, i: u32) -> &Meta {
        &self.meta[i as usize]
    }

    pub fn meta_mut(&mut self, i: u32) -> &mut Meta {
        &mut self.meta[i as usize]
    }

    /// This buffer's data bytes.
    pub fn data(&self, i: u32) -> &[u8] {
        let m = &self.meta[i as usize];
        let start = i as usize * self.stride + usize::from(m.offset);
        &self.mem[start..start + usize::from(m.len)]
    }

    pub fn data_mut(&mut self, i: u32) -> &mut [u8] {
        let m = &self.meta[i as usize];
        let (off, len) = (usize::from(m.offset), usize::from(m.len));
        let start = i as usize * self.stride + off;
        &mut self.mem[start..start + len]
    }

    /// This buffer's metadata and data together, for a per-packet fast path that only reads
    /// them (a device's send): one look-up of the metadata instead of one per field or slice.
    #[inline]
    pub fn meta_data(&self, i: u32) -> (&Meta, &[u8]) {
        let m = &self.meta[i as usize];
        let start = i as usize * self.stride + usize::from(m.offset);
        (m, &self.mem[start..start + usize::from(m.len)])
    }

    /// This buffer's metadata and data together, for a node's per-packet fast path: one
    /// look-up of the metadata instead of one per field or slice.
    #[inline]
    pub fn meta_data_mut(&mut self, i: u32) -> (&mut Meta, &mut [u8]) {
        let m = &mut self.meta[i as usize];
        let start = i as usize * self.stride + usize::from(m.offset);
        let len = usize::from(m.len);
        (m, &mut self.mem[start..start + len])
    }

    /// This buffer's metadata, and its data with the `n` bytes of headroom before it: a node
    /// that may prepend an `n`-byte header reads the packet at `n` and writes the header through
    /// the same slice, then takes the room with [`Meta::expose`] (one look-up instead of
    /// [`Pool::meta_data_mut`] then [`Pool::push_front_meta`]). `None` when the headroom is
    /// shorter than `n` (or `i` is no buffer of the pool).
    #[inline]
    pub fn meta_data_front_mut(&mut self, i: u32, n: usize) -> Option<(&mut Meta, &mut [u8])> {
        front(&mut self.meta, &mut self.mem, self.stride, i, n)
    }

    /// The writable room from the data offset to the end of the buffer.
    pub fn room_mut(&mut self, i: u32) -> &mut [u8] {
        let off = usize::from(self.meta[i as usize].offset);
        let base = i as usize * self.stride;
        &mut self.mem[base + off..base + usize::from(self.headroom) + usize::from(self.data_size)]
    }

    /// Moves the start of this buffer's data by `n` bytes (VPP's `vlib_buffer_advance`):
    /// positive skips a parsed header, negative exposes headroom to prepend one. Keeps the
    /// chain's `total_len` in step. Returns false, changing nothing, if the move would leave
    /// the buffer.
    pub fn advance(&mut self, b: u32, n: isize) -> bool {
        let end = usize::from(self.headroom) + usize::from(self.data_size);
        let m = &mut self.meta[b as usize];
        let (Some(off), Some(len)) = (
            usize::from(m.offset).checked_add_signed(n),
            usize::from(m.len).checked_add_signed(-n),
        ) else {
            return false;
        };
        if off + len > end {
            return false;
        }
        m.offset = off as u16;
        m.len = len as u16;
        m.total_len = (m.total_len as usize).saturating_add_signed(-n) as u32;
        true
    }

    /// Prepends `n` bytes of headroom to the data (as `advance(b, -n)`) and returns the data,
    /// now starting with those bytes; `None` (nothing changed) if the headroom is too small.
    /// One step instead of `advance` then `data_mut`, which would reload the metadata just
    /// stored.
    pub fn push_front(&mut self, b: u32, n: usize) -> Option<&mut [u8]> {
        self.push_front_meta(b, n).map(|(_, d)| d)
    }

    /// As [`push_front`](Self::push_front), returning the metadata too.
    #[inline]
    pub fn push_front_meta(&mut self, b: u32, n: usize) -> Option<(&mut Meta, &mut [u8])> {
        let m = &mut self.meta[b as usize];
        let off = usize::from(m.offset).checked_sub(n)?;
        let len = usize::from(m.len) + n;
        m.offset = off as u16;
        m.len = len as u16;
        m.total_len += n as u32;
        let start = b as usize * self.stride + off;
        Some((m, &mut self.mem[start..start + len]))
    }

    /// Shortens the packet that starts in this buffer's data to `len` bytes (trailing Ethernet
    /// padding, say): the external segment is cut first, then the buffer's own data.
    pub fn truncate(&mut self, b: u32, len: u16) {
        self.meta[b as usize].truncate(len);
    }

    /// Bytes of this buffer's packet from its data start: own data plus external segment
    /// (chains aside).
    pub fn packet_len(&self, b: u32) -> usize {
        let m = &self.meta[b as usize];
        usize::from(m.len) + m.ext.len as usize
    }
}
