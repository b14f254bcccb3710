//! Local packet buffers.
//!
//! `buffer` owns a pool of fixed-size buffers addressed by `u32` index, each with a small
//! metadata record (data offset and length, the next buffer of a chain, interfaces, VRF, error
//! code). Frames larger than one buffer are chains linked through `next`. The pool belongs to
//! one thread; it never blocks, never allocates after construction, and knows nothing of
//! devices or protocols. Memory another process can write (memif regions) never lives here.

#![forbid(unsafe_code)]

/// The index of no buffer: ends a chain.
pub const NONE: u32 = u32::MAX;

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

/// Per-buffer metadata, VPP's `vlib_buffer_t` opaque fields cut to what veclane uses. One
/// cache line each: at 56 bytes unaligned, every other record would straddle two lines, and
/// each node touches a packet's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(64))]
pub struct Meta {
    /// Offset of the first data byte from the start of the buffer (headroom in front).
    pub offset: u16,
    /// Bytes of data in this buffer.
    pub len: u16,
    /// Next buffer of the chain, or [`NONE`].
    pub next: u32,
    /// Bytes in the whole chain; kept on the head buffer only.
    pub total_len: u32,
    pub rx_if: u32,
    pub tx_if: u32,
    pub vrf: u32,
    /// The adjacency a lookup chose (an index into the forwarding tables).
    pub adj: u32,
    pub error: u16,
    pub flags: u16,
    /// Bytes of this packet that stay outside the pool (see [`Ext`]); counted in `total_len`.
    pub ext: Ext,
}

impl Meta {
    /// The metadata of an empty buffer received on `rx_if` ([`NONE`]: none): no data after
    /// `headroom` bytes of it, no chain, nothing chosen for it yet.
    fn fresh(headroom: u16, rx_if: u32) -> Meta {
        Meta {
            offset: headroom,
            len: 0,
            next: NONE,
            total_len: 0,
            rx_if,
            tx_if: NONE,
            vrf: 0,
            adj: 0,
            error: 0,
            flags: 0,
            ext: Ext::default(),
        }
    }

    /// Skips `n` bytes of this buffer's data (a parsed header), as [`Pool::advance`] with a
    /// positive count; false, changing nothing, if the data is shorter.
    #[inline]
    pub fn skip(&mut self, n: u16) -> bool {
        let Some(len) = self.len.checked_sub(n) else {
            return false;
        };
        self.offset += n;
        self.len = len;
        self.total_len = self.total_len.saturating_sub(u32::from(n));
        true
    }

    /// [`Pool::truncate`] of this buffer, for a packet of one buffer (a chain's head would
    /// keep its tail: [`Pool::truncate_chain`] cuts chains).
    #[inline]
    pub fn truncate(&mut self, len: u16) {
        let have = u32::from(self.len) + self.ext.len;
        let len = u32::from(len);
        if len >= have {
            return;
        }
        if len > u32::from(self.len) {
            self.ext.len = len - u32::from(self.len);
        } else {
            self.ext.len = 0;
            self.len = len as u16;
        }
        self.total_len -= have - len;
    }

    /// Takes `n` bytes of headroom into the data (a header about to be written there), the
    /// inverse of [`Meta::skip`]. Only for `n` no larger than the headroom that
    /// [`Pool::meta_data_front_mut`] found: the offset would otherwise wrap.
    #[inline]
    pub fn expose(&mut self, n: u16) {
        self.offset -= n;
        self.len += n;
        self.total_len += u32::from(n);
    }
}

/// A pool borrowed for one pass over a frame: see [`Pool::view`]. The accessors are the
/// pool's own, with the same checks.
#[derive(Debug)]
pub struct View<'a> {
    meta: &'a mut [Meta],
    mem: &'a mut [u8],
    stride: usize,
}

impl View<'_> {
    /// As [`Pool::meta_data_mut`].
    #[inline(always)]
    pub fn meta_data_mut(&mut self, i: u32) -> Option<(&mut Meta, &mut [u8])> {
        self.meta_data_front_mut(i, 0)
    }

    /// As [`Pool::meta_data_front_mut`]; also `None` for an index outside the pool.
    #[inline(always)]
    pub fn meta_data_front_mut(&mut self, i: u32, n: usize) -> Option<(&mut Meta, &mut [u8])> {
        front(self.meta, self.mem, self.stride, i, n)
    }
}

/// Buffer `i`'s metadata and its data with `n` bytes of headroom in front; `None` when the
/// headroom is shorter or `i` is no buffer.
#[inline(always)]
fn front<'a>(
    meta: &'a mut [Meta],
    mem: &'a mut [u8],
    stride: usize,
    i: u32,
    n: usize,
) -> Option<(&'a mut Meta, &'a mut [u8])> {
    let m = meta.get_mut(i as usize)?;
    let off = usize::from(m.offset).checked_sub(n)?;
    let start = i as usize * stride + off;
    let len = usize::from(m.len) + n;
    Some((m, mem.get_mut(start..start + len)?))
}

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
    mem: Vec<u8>,
    meta: Vec<Meta>,
    free: Vec<u32>,
    /// External memory buffers may point into, by source id.
    sources: Vec<Option<std::sync::Arc<dyn ExtSource>>>,
    stride: usize,
    data_size: u16,
    headroom: u16,
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

    /// The pool's metadata and memory borrowed once, for a node's loop over a frame: the
    /// view's slices and stride are locals of the loop, kept in registers, where the same
    /// access through `&mut Pool` reloads them from the pool for every packet (a store
    /// through a packet's metadata might, for all the compiler knows, have changed them).
    #[inline]
    pub fn view(&mut self) -> View<'_> {
        View {
            meta: &mut self.meta,
            mem: &mut self.mem,
            stride: self.stride,
        }
    }

    /// Addresses in the rooms of many buffers at once, for a copy engine that writes them
    /// after this call: every pointer derives from one borrow of the pool's memory, so that
    /// none is invalidated by another (as pointers taken from successive `room_mut` calls
    /// would be). The pool stays borrowed while the pointers are in use.
    pub fn room_ptrs(&mut self) -> RoomPtrs<'_> {
        let Pool {
            mem,
            meta,
            stride,
            headroom,
            data_size,
            ..
        } = self;
        RoomPtrs {
            base: mem.as_mut_ptr(),
            meta,
            stride: *stride,
            end: usize::from(*headroom) + usize::from(*data_size),
            _mem: core::marker::PhantomData,
        }
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

    /// Bytes of this buffer's packet from its data start: own data plus external segment
    /// (chains aside).
    pub fn packet_len(&self, b: u32) -> usize {
        let m = &self.meta[b as usize];
        usize::from(m.len) + m.ext.len as usize
    }

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
    fn chain_on(&mut self, last: u32, bytes: &[u8]) {
        let mut prev = last;
        for chunk in bytes.chunks(self.data_size()) {
            let n = self.alloc().expect("counted by the caller");
            self.room_mut(n)[..chunk.len()].copy_from_slice(chunk);
            self.meta[n as usize].len = chunk.len() as u16;
            self.link(prev, n);
            prev = n;
        }
    }

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
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_front_room_is_read_with_the_data_and_taken_as_push_front_takes_it() {
        let mut pool = Pool::new(PoolConfig {
            count: 2,
            data_size: 64,
            headroom: 16,
        })
        .unwrap();
        let b = pool.from_bytes(&[7u8; 20]).unwrap();
        let (m, f) = pool.meta_data_front_mut(b, 14).unwrap();
        assert_eq!((f.len(), &f[14..]), (34, &[7u8; 20][..]));
        f[..14].fill(1);
        m.expose(14);
        let (len, total) = (pool.meta(b).len, pool.meta(b).total_len);
        assert_eq!((len, total), (34, 34));
        assert_eq!(&pool.data(b)[..14], &[1u8; 14]);
        // The same as push_front on a twin packet.
        let c = pool.from_bytes(&[7u8; 20]).unwrap();
        pool.push_front(c, 14).unwrap()[..14].fill(1);
        assert_eq!(pool.data(c), pool.data(b));
        assert_eq!(pool.meta(c).offset, pool.meta(b).offset);
        // Past the headroom: refused, nothing changed.
        assert!(pool.meta_data_front_mut(b, 3).is_none());
        assert_eq!(pool.meta(b).len, 34);
    }

    #[test]
    fn a_view_reads_what_the_pool_reads_and_refuses_what_it_refuses() {
        let mut pool = Pool::new(PoolConfig {
            count: 2,
            data_size: 64,
            headroom: 16,
        })
        .unwrap();
        let b = pool.from_bytes(&[7u8; 20]).unwrap();
        let c = pool.from_bytes(&[8u8; 30]).unwrap();
        let mut v = pool.view();
        assert_eq!(v.meta_data_mut(c).unwrap().1, &[8u8; 30][..]);
        let (m, f) = v.meta_data_front_mut(b, 16).unwrap();
        assert_eq!((m.len, f.len(), &f[16..]), (20, 36, &[7u8; 20][..]));
        assert!(v.meta_data_front_mut(b, 17).is_none(), "past the headroom");
        assert!(v.meta_data_mut(2).is_none(), "no such buffer");
        // A length a node set past the end of the memory is refused, not read.
        pool.meta_mut(b).len = 2048;
        assert!(pool.view().meta_data_mut(b).is_none());
        pool.meta_mut(b).len = 20;
        // Cutting padding in place: within the buffer's data, then within its segment.
        let m = pool.meta_mut(b);
        m.truncate(12);
        assert_eq!((m.len, m.total_len), (12, 12));
        m.ext.len = 100;
        m.total_len += 100;
        m.truncate(50);
        assert_eq!((m.len, m.ext.len, m.total_len), (12, 38, 50));
        m.truncate(60);
        assert_eq!(m.total_len, 50, "never lengthened");
    }

    #[test]
    fn rewrite_replaces_a_chain_and_its_external_segment() {
        let mut pool = Pool::new(PoolConfig {
            count: 8,
            data_size: 64,
            headroom: 16,
        })
        .unwrap();
        let b = pool.from_bytes(&[7u8; 150]).unwrap();
        assert_eq!(pool.chain_len(b), 3);
        pool.meta_mut(b).ext.len = 0;
        // Longer: the old tail goes back, a new one is chained on.
        let big: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        assert!(pool.rewrite(b, &big));
        let mut v = Vec::new();
        pool.read_chain(b, &mut v);
        assert_eq!(v, big);
        assert_eq!((pool.meta(b).total_len, pool.chain_len(b)), (300, 5));
        assert_eq!(pool.available(), 3);
        // Shorter: one buffer, the rest back in the pool.
        assert!(pool.rewrite(b, &[1, 2, 3]));
        assert_eq!(
            (pool.data(b), pool.meta(b).total_len),
            (&[1u8, 2, 3][..], 3)
        );
        assert_eq!(pool.available(), 7);
        // More than the pool holds: nothing changes.
        assert!(!pool.rewrite(b, &[0u8; 64 * 9]));
        assert_eq!((pool.data(b), pool.available()), (&[1u8, 2, 3][..], 7));
        pool.free(b);
        assert_eq!(pool.available(), 8);
    }

    #[test]
    fn a_chain_is_cut_where_its_length_ends_and_the_rest_freed() {
        let mut pool = Pool::new(PoolConfig {
            count: 8,
            data_size: 64,
            headroom: 0,
        })
        .unwrap();
        let bytes: Vec<u8> = (0..200u8).collect();
        let b = pool.from_bytes(&bytes).unwrap();
        assert_eq!(pool.chain_len(b), 4);
        pool.truncate_chain(b, 300);
        assert_eq!(pool.meta(b).total_len, 200, "longer: nothing changes");
        pool.truncate_chain(b, 100);
        let mut v = Vec::new();
        pool.read_chain(b, &mut v);
        assert_eq!(v, &bytes[..100]);
        assert_eq!((pool.chain_len(b), pool.meta(b).total_len), (2, 100));
        assert_eq!(pool.available(), 6);
        pool.truncate_chain(b, 64);
        assert_eq!(
            (pool.chain_len(b), pool.available()),
            (1, 7),
            "no empty buffer is left"
        );
        pool.free(b);
        assert_eq!(pool.available(), 8);
    }

    use super::*;

    #[test]
    fn alloc_packets_writes_the_whole_metadata_and_stops_when_told() {
        let mut p = Pool::new(PoolConfig {
            count: 4,
            data_size: 256,
            headroom: 64,
        })
        .unwrap();
        // Leave stale metadata behind in every buffer.
        for _ in 0..4 {
            let b = p.alloc().unwrap();
            let m = p.meta_mut(b);
            (m.tx_if, m.vrf, m.adj, m.error, m.flags, m.offset) = (7, 8, 9, 10, 11, 3);
            p.free(b);
        }
        let ext = Ext {
            source: 2,
            region: 1,
            offset: 1000,
            len: 500,
        };
        let order: Vec<u32> = (0..2).map(|_| p.alloc().unwrap()).collect();
        p.free(order[1]);
        p.free(order[0]);
        let mut out = vec![99];
        let mut k = 0u8;
        let got = p.alloc_packets(3, 5, &mut out, |i, room, m| {
            assert_eq!((i, room.len()), (usize::from(k), 256));
            assert_eq!(
                (m.offset, m.len, m.next, m.total_len, m.ext),
                (64, 0, NONE, 0, Ext::default()),
                "fresh metadata"
            );
            k += 1;
            room[..100].fill(k);
            (m.len, m.total_len, m.ext) = (100, 600, ext);
            k < 3
        });
        assert_eq!(got, (2, 1200));
        assert_eq!(
            out[1..],
            order,
            "taken from the top of the free list, as alloc does"
        );
        for (i, &b) in out[1..].iter().enumerate() {
            let m = *p.meta(b);
            assert_eq!((m.offset, m.len, m.next, m.total_len), (64, 100, NONE, 600));
            assert_eq!(
                (m.rx_if, m.tx_if, m.vrf, m.adj, m.error, m.flags),
                (5, NONE, 0, 0, 0, 0)
            );
            assert_eq!(m.ext, ext);
            assert_eq!(p.data(b), &[i as u8 + 1; 100]);
        }
        assert_eq!(
            p.available(),
            2,
            "the pass stopped at the third: its buffer stays free"
        );
        assert_eq!(
            p.alloc_packets(1, 0, &mut out, |_, _, m| {
                (m.len, m.total_len) = (257, 257);
                true
            }),
            (0, 0)
        );
        assert_eq!(
            p.available(),
            2,
            "a length past the data area takes no buffer"
        );
        assert_eq!(
            p.alloc_packets(9, 0, &mut out, |_, _, m| {
                (m.len, m.total_len) = (1, 1);
                true
            }),
            (2, 2)
        );
        assert_eq!(p.available(), 0);
    }

    #[test]
    fn room_pointers_stay_inside_each_room() {
        let mut p = Pool::new(PoolConfig {
            count: 4,
            data_size: 2048,
            headroom: 128,
        })
        .unwrap();
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        let room = p.room_mut(a).len();
        let r = p.room_ptrs();
        let (pa, pb) = (r.ptr(a, 0, room).unwrap(), r.ptr(b, 0, room).unwrap());
        assert_eq!((pb as usize).abs_diff(pa as usize) % 64, 0);
        assert_ne!(pa, pb);
        assert_eq!(r.ptr(a, 10, 5).unwrap() as usize, pa as usize + 10);
        assert!(r.ptr(a, 0, room + 1).is_none());
        assert!(r.ptr(a, room, 1).is_none());
        assert!(r.ptr(a, usize::MAX, 2).is_none());
        assert!(r.ptr(99, 0, 1).is_none());
    }

    #[derive(Debug)]
    struct Peer(Vec<u8>);
    impl ExtSource for Peer {
        fn read(&self, region: u16, offset: u64, dst: &mut [u8]) -> bool {
            let o = offset as usize;
            if region != 0 || o + dst.len() > self.0.len() {
                return false;
            }
            dst.copy_from_slice(&self.0[o..o + dst.len()]);
            true
        }
    }

    #[test]
    fn external_segments_read_truncate_and_linearize() {
        let mut p = small();
        let peer: Vec<u8> = (0..=255u8).cycle().take(300).collect();
        p.set_ext_source(3, Some(std::sync::Arc::new(Peer(peer.clone()))));
        let b = p.from_bytes(&[9u8; 10]).unwrap();
        let m = p.meta_mut(b);
        m.ext = Ext {
            source: 3,
            region: 0,
            offset: 100,
            len: 150,
        };
        m.total_len += 150;
        assert_eq!(p.packet_len(b), 160);
        let mut all = Vec::new();
        p.read_chain(b, &mut all);
        assert_eq!(&all[..10], &[9u8; 10]);
        assert_eq!(&all[10..], &peer[100..250]);
        p.truncate(b, 110);
        assert_eq!((p.packet_len(b), p.meta(b).total_len), (110, 110));
        let before = p.available();
        assert!(p.linearize(b));
        assert_eq!(p.meta(b).ext.len, 0);
        let mut lin = Vec::new();
        p.read_chain(b, &mut lin);
        assert_eq!(lin, all[..110]);
        assert_eq!(p.meta(b).total_len, 110);
        assert_eq!(
            before - p.available(),
            1,
            "one more 64-byte buffer for 110 bytes"
        );
        p.truncate(b, 4);
        assert_eq!((p.packet_len(b), p.meta(b).total_len), (4, 4 + 46));
        p.free(b);
        assert_eq!(p.available(), 8);
        // A source that is gone: reads fail, nothing changes.
        let c = p.alloc().unwrap();
        p.meta_mut(c).ext = Ext {
            source: 7,
            region: 0,
            offset: 0,
            len: 5,
        };
        assert!(!p.linearize(c));
        assert_eq!(p.meta(c).ext.len, 5);
        p.free(c);
        let d = p.alloc().unwrap();
        assert_eq!(p.meta(d).ext.len, 0, "fresh buffers carry none");
    }

    fn small() -> Pool {
        Pool::new(PoolConfig {
            count: 8,
            data_size: 64,
            headroom: 16,
        })
        .unwrap()
    }

    #[test]
    fn chains_round_trip_and_free_everything() {
        let mut p = small();
        let bytes: Vec<u8> = (0..200u32).map(|i| i as u8).collect();
        let h = p.from_bytes(&bytes).unwrap();
        assert_eq!(p.chain_len(h), 4);
        assert_eq!(p.meta(h).total_len, 200);
        let mut out = Vec::new();
        p.read_chain(h, &mut out);
        assert_eq!(out, bytes);
        p.free(h);
        assert_eq!(p.available(), 8);
    }

    #[test]
    fn exhaustion_leaks_nothing() {
        let mut p = small();
        assert!(p.from_bytes(&[0u8; 64 * 9]).is_none());
        assert_eq!(p.available(), 8);
        let mut four = [0u32; 4];
        assert!(p.alloc_bulk(&mut four));
        let mut five = [0u32; 5];
        assert!(!p.alloc_bulk(&mut five));
        assert_eq!(p.available(), 4);
        p.free_bulk(&four);
        assert_eq!(p.available(), 8);
    }

    #[test]
    fn advance_skips_and_prepends_within_the_buffer() {
        let mut p = small();
        let b = p.from_bytes(&[1, 2, 3, 4, 5, 6]).unwrap();
        assert!(p.advance(b, 2));
        assert_eq!((p.data(b), p.meta(b).total_len), (&[3, 4, 5, 6][..], 4));
        let (m, d) = p.meta_data_mut(b);
        assert_eq!(d, &[3, 4, 5, 6]);
        assert!(!m.skip(5), "past the data");
        assert!(m.skip(1));
        assert_eq!((p.data(b), p.meta(b).total_len), (&[4, 5, 6][..], 3));
        assert!(p.advance(b, -1));
        assert!(p.advance(b, -18), "16 bytes of headroom plus the 2 skipped");
        assert_eq!(p.data(b).len(), 22);
        assert!(!p.advance(b, -1), "no headroom left");
        assert!(!p.advance(b, 23), "past the data");
        p.truncate(b, 10);
        assert_eq!((p.data(b).len(), p.meta(b).total_len), (10, 10));
    }

    #[test]
    fn push_front_prepends_like_advance() {
        let mut p = small();
        let b = p.from_bytes(&[1, 2, 3, 4]).unwrap();
        let d = p.push_front(b, 14).unwrap();
        assert_eq!((d.len(), &d[14..]), (18, &[1, 2, 3, 4][..]));
        d[0] = 0xaa;
        assert_eq!((p.data(b)[0], p.meta(b).total_len), (0xaa, 18));
        assert!(
            p.push_front(b, 3).is_none(),
            "16 bytes of headroom, 14 used"
        );
        assert_eq!(p.data(b).len(), 18, "a refused push changes nothing");
    }

    #[test]
    fn rejects_bad_geometry() {
        assert!(
            Pool::new(PoolConfig {
                count: 0,
                ..Default::default()
            })
            .is_err()
        );
        assert!(
            Pool::new(PoolConfig {
                data_size: 8,
                ..Default::default()
            })
            .is_err()
        );
    }
}

/// See [`Pool::room_ptrs`].
#[derive(Debug)]
pub struct RoomPtrs<'a> {
    base: *mut u8,
    meta: &'a [Meta],
    stride: usize,
    /// Room ends here, from the start of each buffer.
    end: usize,
    _mem: core::marker::PhantomData<&'a mut [u8]>,
}

impl RoomPtrs<'_> {
    /// The address of byte `at` of buffer `b`'s room (which starts at its data offset), if
    /// `len` bytes from there stay inside the room.
    pub fn ptr(&self, b: u32, at: usize, len: usize) -> Option<*mut u8> {
        let m = self.meta.get(b as usize)?;
        let start = usize::from(m.offset).checked_add(at)?;
        if start.checked_add(len)? > self.end {
            return None;
        }
        // In bounds of the pool's memory: buffer `b` exists (its metadata does) and the range
        // ends inside its stride. `wrapping_add` keeps this free of `unsafe`; dereferencing is
        // the caller's business.
        Some(self.base.wrapping_add(b as usize * self.stride + start))
    }
}
