//! The mapped PACKET_MMAP ring: the one place that touches memory the kernel writes.
//!
//! The kernel and this process share the ring, and the kernel writes it while we run. So no
//! Rust reference to ring memory ever exists, except a momentary `&AtomicU32` for a status
//! word: bytes leave and enter the ring only through [`RingMap::read`] and [`RingMap::write`]
//! (one bounds-checked copy each), and status words through [`RingMap::load_status`] and
//! [`RingMap::store_status`]. Every offset is checked once, in `u64` arithmetic, by
//! [`RingMap::check`], so even a kernel bug in a block descriptor yields an [`OutOfBounds`]
//! error rather than a stray access (rust-vmm's `VolatileMemory` and memif's
//! `SharedMemory::check` follow the same rule).
//!
//! # Memory ordering
//!
//! Ownership of each block (rx) or frame (tx) passes between the kernel and us through its
//! status word, and the status word alone:
//!
//! - the kernel fills an rx block, issues `smp_wmb()` (in `prb_close_block`) and then stores
//!   `TP_STATUS_USER` into the block's status; our `Acquire` load of that status therefore
//!   sees every byte of the block the kernel wrote before it. We copy the block's headers and
//!   packets out only after that load, and hand the block back with a `Release` store of
//!   `TP_STATUS_KERNEL`, so all our reads happen before the kernel may refill it.
//! - a tx frame is ours while its status is `TP_STATUS_AVAILABLE` (an `Acquire` load, pairing
//!   with the kernel's store after `tpacket_destruct_skb` is done with the frame). We write
//!   the bytes and the header, then store `TP_STATUS_SEND_REQUEST` with `Release`; the kernel
//!   reads the status (`__packet_get_status`, with `smp_rmb()`) before the frame, and only
//!   inside the `send` we make after the store.
//!
//! Between those points the other side does not touch the memory, so the plain copies in
//! `read` and `write` do not race.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// An access outside the ring mapping (or a misaligned status word): a bug in our arithmetic
/// or in the kernel's descriptors, never a reason to touch memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ring access of {len} bytes at offset {offset} is outside the {size}-byte mapping")]
pub struct OutOfBounds {
    pub offset: u64,
    pub len: u64,
    pub size: u64,
}

/// A PACKET_MMAP ring mapped into this process (`MAP_SHARED` over the socket).
#[derive(Debug)]
pub(crate) struct RingMap {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory with no thread affinity; the queue that owns it moves
// between threads whole (a worker receives it over a channel) and only its owner accesses it.
unsafe impl Send for RingMap {}

impl RingMap {
    /// Maps `len` bytes of the ring configured on `fd` (PACKET_RX_RING or PACKET_TX_RING).
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<RingMap> {
        use rustix::mm::{MapFlags, ProtFlags, mmap};
        // SAFETY: a fresh mapping at an address the kernel chooses (null hint) cannot alias any
        // Rust object; `len` is the ring size the kernel accepted in setsockopt, which is what
        // `packet_mmap` requires, so the kernel either maps exactly that or fails.
        let p = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::POPULATE,
                fd,
                0,
            )
        }?;
        let base = NonNull::new(p.cast::<u8>()).ok_or(io::ErrorKind::InvalidData)?;
        Ok(RingMap { base, len })
    }

    /// Proves `[offset, offset + len)` lies inside the mapping (and `offset` is a multiple of
    /// `align`); returns the offset as `usize`. All arithmetic in `u64`: no overflow.
    #[inline]
    fn check(&self, offset: u64, len: u64, align: u64) -> Result<usize, OutOfBounds> {
        let size = self.len as u64;
        match offset.checked_add(len) {
            Some(end) if end <= size && offset.is_multiple_of(align) => Ok(offset as usize),
            _ => Err(OutOfBounds { offset, len, size }),
        }
    }

    /// The status word at `offset`, loaded with `Acquire` (see the module docs).
    #[inline]
    pub(crate) fn load_status(&self, offset: u64) -> Result<u32, OutOfBounds> {
        let at = self.check(offset, 4, 4)?;
        // SAFETY: `check` proved the 4 bytes lie inside the live mapping and are 4-aligned
        // (the mapping is page-aligned). The kernel writes this word concurrently, which is
        // why it is accessed only as an atomic; the reference lives for this one load.
        let word = unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(at).cast::<u32>()) };
        Ok(word.load(Ordering::Acquire))
    }

    /// Stores the status word at `offset` with `Release`, handing the block or frame over.
    #[inline]
    pub(crate) fn store_status(&mut self, offset: u64, v: u32) -> Result<(), OutOfBounds> {
        let at = self.check(offset, 4, 4)?;
        // SAFETY: as in `load_status`: in bounds, aligned, accessed only atomically.
        let word = unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(at).cast::<u32>()) };
        word.store(v, Ordering::Release);
        Ok(())
    }

    /// Copies `dst.len()` bytes out of the ring from `offset`.
    #[inline]
    pub(crate) fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        let at = self.check(offset, dst.len() as u64, 1)?;
        // SAFETY: the source range is inside the mapping (`check`); `dst` is ordinary memory
        // and cannot overlap a mapping no Rust object lives in. The caller owns this part of
        // the ring (its status said so), so the kernel is not writing it (module docs).
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(at), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }

    /// Copies `src` into the ring at `offset`.
    #[inline]
    pub(crate) fn write(&mut self, offset: u64, src: &[u8]) -> Result<(), OutOfBounds> {
        let at = self.check(offset, src.len() as u64, 1)?;
        // SAFETY: the destination range is inside the mapping (`check`); `src` cannot overlap
        // it. The caller owns this frame (status AVAILABLE), so the kernel is not reading it.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.as_ptr().add(at), src.len())
        };
        Ok(())
    }

    /// The Internet checksum (RFC 1071) of `len` ring bytes from `offset`, unfolded, as if
    /// the range started on an even byte: for completing a checksum the sender left to
    /// offload, without first copying the packet somewhere else.
    pub(crate) fn sum16(&self, offset: u64, len: u64) -> Result<u64, OutOfBounds> {
        self.check(offset, len, 1)?;
        let mut sum = 0u64;
        let mut chunk = [0u8; 512];
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let n = ((end - at) as usize).min(chunk.len());
            self.read(at, &mut chunk[..n])?;
            // Chunks are even-sized except the last, so word alignment carries over.
            sum += crate::af_packet::rx::sum_words(&chunk[..n]);
            at += n as u64;
        }
        Ok(sum)
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are exactly what `mmap` returned and took; no reference
        // into the mapping outlives a method call, so nothing can use it afterwards.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
