//! The pool borrowed once: a [`View`] for a node's loop over a frame, [`RoomPtrs`] for a copy
//! engine that writes many buffers after the call.

use crate::{Meta, Pool};

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
pub(crate) fn front<'a>(
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

impl Pool {
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
