//! The UMEM: anonymous memory registered with an AF_XDP socket, which the kernel copies
//! received frames into and transmitted frames out of. With `ring.rs`, the one place that
//! touches memory the kernel writes.
//!
//! The UMEM is split once, at a frame boundary, into two [`UmemArea`]s: the receive frames
//! (handed to the kernel through the fill ring) and the transmit frames (through the tx ring).
//! Each area belongs to one queue and moves with it, so the two halves are never touched by
//! two threads of ours, and every access is proved inside its own area by
//! [`UmemArea::check`] (all arithmetic in `u64`), whatever address a descriptor carries.
//! Bytes move only by copy: no Rust reference to UMEM memory ever exists.
//!
//! The kernel and we take turns on each frame, and the rings' Acquire/Release indices order
//! the turns (`ring.rs`): a receive frame is the kernel's from the fill ring's producer store
//! until we read its rx descriptor, ours until we put it back on the fill ring; a transmit
//! frame is ours until the tx ring's producer store, the kernel's until its address comes
//! back on the completion ring.

#![allow(unsafe_code)]

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::af_packet::OutOfBounds;

/// The whole UMEM mapping (anonymous, private, populated).
#[derive(Debug)]
pub(crate) struct Umem {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: plain memory with no thread affinity. Access goes only through `UmemArea`s, which
// are disjoint by construction (`split`) and each owned by one queue.
unsafe impl Send for Umem {}
// SAFETY: as above: a shared `&Umem` gives no access to the memory by itself.
unsafe impl Sync for Umem {}

impl Umem {
    /// Maps `len` bytes of zeroed anonymous memory (a multiple of the page size).
    pub(crate) fn new(len: usize) -> io::Result<Umem> {
        use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap_anonymous};
        // SAFETY: a fresh anonymous mapping at an address the kernel chooses cannot alias any
        // Rust object.
        let p = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::POPULATE,
            )
        }?;
        let base = NonNull::new(p.cast::<u8>()).ok_or(io::ErrorKind::InvalidData)?;
        let umem = Umem { base, len };
        // A child made by fork() must not share (or copy-on-write) pages the kernel has pinned
        // for this socket: the child gets no mapping here at all.
        // SAFETY: the range is exactly the mapping just made; DONTFORK changes only what a
        // future fork copies.
        unsafe { madvise(p, len, Advice::LinuxDontFork) }?;
        Ok(umem)
    }

    /// The address to register (`xdp_umem_reg.addr`).
    pub(crate) fn addr(&self) -> u64 {
        self.base.as_ptr() as u64
    }

    pub(crate) fn len(&self) -> u64 {
        self.len as u64
    }

    /// Splits the UMEM at offset `at` into the receive area `[0, at)` and the transmit area
    /// `[at, len)`: the only way to get at its memory.
    pub(crate) fn split(self, at: u64) -> (UmemArea, UmemArea) {
        let at = at.min(self.len());
        let end = self.len();
        let umem = Arc::new(self);
        (
            UmemArea {
                umem: umem.clone(),
                start: 0,
                end: at,
            },
            UmemArea {
                umem,
                start: at,
                end,
            },
        )
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are what `mmap` returned and took, and no area (hence no
        // access) outlives the `Arc` this is dropped from. Pages the kernel still pins for a
        // socket stay allocated until it unpins them; they are simply no longer ours.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// One queue's part of a UMEM: the UMEM offsets `[start, end)`.
#[derive(Debug)]
pub(crate) struct UmemArea {
    umem: Arc<Umem>,
    start: u64,
    end: u64,
}

impl UmemArea {
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Proves `[addr, addr + len)` lies inside this area; returns `addr` as `usize`.
    #[inline]
    pub(crate) fn check(&self, addr: u64, len: u64) -> Result<usize, OutOfBounds> {
        match addr.checked_add(len) {
            Some(end) if addr >= self.start && end <= self.end => Ok(addr as usize),
            _ => Err(OutOfBounds {
                offset: addr,
                len,
                size: self.end,
            }),
        }
    }

    /// Copies `dst.len()` bytes out of the UMEM from `addr`.
    #[inline]
    pub(crate) fn read(&self, addr: u64, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        let at = self.check(addr, dst.len() as u64)?;
        // SAFETY: the range is inside this area of the live mapping (`check`); `dst` is
        // ordinary memory and cannot overlap a mapping no Rust object lives in. The caller owns
        // this frame (its rx descriptor was consumed and it is not on the fill ring yet), so
        // the kernel is not writing it (module docs).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.umem.base.as_ptr().add(at),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Ok(())
    }

    /// Copies `src` into the UMEM at `addr`.
    #[inline]
    pub(crate) fn write(&mut self, addr: u64, src: &[u8]) -> Result<(), OutOfBounds> {
        let at = self.check(addr, src.len() as u64)?;
        // SAFETY: the range is inside this area (`check`), which only this queue accesses
        // (`&mut self`); `src` cannot overlap it. The frame is free (completed or never sent),
        // so the kernel is not reading it.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.umem.base.as_ptr().add(at), src.len())
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_are_disjoint_and_checked() {
        let (mut rx, mut tx) = Umem::new(4 * 4096).unwrap().split(8192);
        assert_eq!(
            (rx.start(), rx.end(), tx.start(), tx.end()),
            (0, 8192, 8192, 16384)
        );
        rx.write(8192 - 4, &[1, 2, 3, 4]).unwrap();
        assert!(
            rx.write(8192 - 3, &[1, 2, 3, 4]).is_err(),
            "crosses into tx"
        );
        assert!(tx.write(8191, &[9]).is_err(), "below the tx area");
        assert!(tx.read(u64::MAX, &mut [0]).is_err(), "overflowing address");
        tx.write(16383, &[7]).unwrap();
        let mut b = [0u8; 4];
        rx.read(8188, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        let mut one = [0u8];
        tx.read(16383, &mut one).unwrap();
        assert_eq!(one, [7]);
    }
}
