//! Shared memory regions: the one module that maps memory another process writes.
//!
//! A [`SharedMemory`] is either created by us (secondary role: a sealed memfd) or mapped from
//! a peer's fd (primary role) after checking the fd's size and seals, so that the peer can
//! neither hand us a short file nor shrink it later (either would turn our first touch into
//! SIGBUS). Every access goes through a bounds check done in `u64` and copies bytes with raw
//! pointer operations: no Rust reference to peer-writable bytes is ever formed, except the
//! `AtomicU16`/`AtomicU32` ring indices, which are atomics precisely so that both sides may
//! write them.
//!
//! # Plain copies of memory the peer writes
//!
//! Three kinds of access reach peer-writable bytes:
//! - ring indices, flags and the cookie: atomics ([`atomic_u16`](SharedMemory::atomic_u16),
//!   [`atomic_u32`](SharedMemory::atomic_u32)), sound under any concurrent writes;
//! - descriptors (`ring.rs`) and [`read_u32`](SharedMemory::read_u32): volatile loads into a
//!   local, validated after the load;
//! - packet payloads ([`read`](SharedMemory::read), [`addr`](SharedMemory::addr) handed to a
//!   copy engine): plain `ptr::copy_nonoverlapping` into our own buffer or the other peer's.
//!
//! The payload copies are plain on purpose. Stable Rust has no volatile `memcpy`, and a
//! volatile word loop instead of `memcpy` would cost about a load and a store per 8 bytes
//! where `memcpy` moves 32 or 64 (hundreds of instructions per 1500-byte packet). Precisely
//! what this relies on:
//! - In Rust's abstract machine a non-atomic read that races with a write by another thread is
//!   a data race and so undefined behaviour, and the peer process is such a writer. Volatile
//!   would not change that: the standard library says volatile accesses behave exactly like
//!   non-atomic ones with respect to concurrency. Only atomics are race-free in the model, and
//!   there is no stable atomic `memcpy`. So no choice here is sound *in the model*; rust-vmm
//!   uses volatile for the second property below, not to escape the race.
//! - What the compiler may do with a racy plain read is assume no one else writes the bytes
//!   between two of our reads: it could read a byte twice where the source says once, or
//!   forward a copy's source into a later read of the copy. Both are harmless here, because
//!   payload bytes are never validated: nothing we check could be invalidated by a second
//!   read. Every value we *do* validate (indices, descriptors) is read once, atomically or
//!   volatile, into a local, and only the local is checked and used.
//! - A copy takes a raw pointer into the mapping, never a `&[u8]`: there is no `noalias` or
//!   `readonly` promise attached to peer memory for the compiler to exploit across a call.
//! - The hardware gives every load some value the peer or we stored: a peer racing us can only
//!   make us copy torn or stale bytes of its own packet into our buffer. Parsing then happens
//!   in our private copy.
//!
//! That is the bargain VPP, DPDK and libmemif make with `clib_memcpy`/`rte_memcpy` on these
//! rings, and the one rust-vmm's vm-memory makes too: its `VolatileSlice::copy_to` copies up to
//! a word with volatile accesses and anything longer with a plain `copy_from_slice`.

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

/// The largest region we accept from a peer: its descriptors address it with u32 offsets, and
/// a region larger than that is only ever a way to make us reserve address space.
pub const MAX_REGION_SIZE: u64 = 1 << 32;

/// An access outside the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("access of {len} bytes at offset {offset} outside a {size}-byte region")]
pub struct OutOfBounds {
    pub offset: u64,
    pub len: u64,
    pub size: u64,
}

/// Why a peer's region fd was refused.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("region size {0} is zero or larger than {MAX_REGION_SIZE}")]
    BadSize(u64),
    #[error("region fd is {actual} bytes, smaller than the {announced} bytes announced")]
    ShortFd { actual: u64, announced: u64 },
    #[error("region fd is not sealed against shrinking (F_SEAL_SHRINK)")]
    NotSealed,
    #[error("region fd is not a regular file or memfd")]
    NotAFile,
    #[error(
        "region fd is on hugetlbfs (a memfd made with MFD_HUGETLB): its owner could punch a hole in it that our next touch takes as SIGBUS once the huge page pool is empty; use a plain memfd"
    )]
    Hugetlb,
    #[error("region fd: {0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    OverBudget(#[from] crate::budget::OverBudget),
}

/// Whether a peer's region must be one it cannot take away from under us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealPolicy {
    /// Refuse regions not sealed with `F_SEAL_SHRINK` (a peer could shrink them) and regions on
    /// hugetlbfs (a peer could punch a hole whose pages the kernel cannot give back once the
    /// huge page pool is empty): either would make our next touch SIGBUS. The default.
    Require,
    /// Accept both from legacy peers (or DPDK's zero-copy regions, which are its hugepage
    /// files); a peer that shrinks one or punches a hole in it can then kill us with SIGBUS.
    /// Only for peers that are trusted not to.
    AllowUnsealed,
}

/// `HUGETLBFS_MAGIC` (`linux/magic.h`), as `statfs` reports a hugetlbfs file's file system.
const HUGETLBFS_MAGIC: u64 = 0x9584_58f6;

/// A mapped region.
#[derive(Debug)]
pub struct SharedMemory {
    ptr: NonNull<u8>,
    len: usize,
    fd: Option<OwnedFd>,
    /// A peer region's share of the process's budget, given back when the mapping goes.
    _charge: Option<crate::budget::Charge>,
}

// SAFETY: the mapping is plain memory valid for the lifetime of the value; all accesses are
// raw-pointer copies or atomics, which are sound from any thread.
unsafe impl Send for SharedMemory {}
// SAFETY: as above; `&SharedMemory` only exposes bounds-checked raw copies and atomics.
unsafe impl Sync for SharedMemory {}

impl SharedMemory {
    /// Creates a sealed memfd of `len` bytes and maps it (secondary role).
    pub fn create(name: &str, len: usize) -> io::Result<SharedMemory> {
        if len == 0 || len as u64 > MAX_REGION_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "region size out of range",
            ));
        }
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW)?;
        let ptr = map_shared(Some(fd.as_fd()), len)?;
        Ok(SharedMemory {
            ptr,
            len,
            fd: Some(fd),
            _charge: None,
        })
    }

    /// Maps a peer's region fd after checking it is a file of at least `announced` bytes
    /// sealed against shrinking (primary role), and closes the fd.
    pub fn map_peer(
        fd: OwnedFd,
        announced: u64,
        seals: SealPolicy,
        budget: Option<&std::sync::Arc<crate::budget::RegionBudget>>,
    ) -> Result<SharedMemory, MapError> {
        if announced == 0 || announced > MAX_REGION_SIZE {
            return Err(MapError::BadSize(announced));
        }
        let st = rustix::fs::fstat(&fd).map_err(std::io::Error::from)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(MapError::NotAFile);
        }
        let actual = st.st_size as u64;
        if actual < announced {
            return Err(MapError::ShortFd { actual, announced });
        }
        if seals == SealPolicy::Require {
            let have = rustix::fs::fcntl_get_seals(&fd).map_err(|_| MapError::NotSealed)?;
            if !have.contains(SealFlags::SHRINK) {
                return Err(MapError::NotSealed);
            }
            // Seals stop shrinking, not hole punching (short of F_SEAL_WRITE, which a ring
            // cannot have). In a memfd of ordinary memory a punched hole is refilled with
            // zeroes at the next touch; on hugetlbfs the refill needs a free huge page, and
            // without one the touch is SIGBUS.
            let fs = rustix::fs::fstatfs(&fd).map_err(std::io::Error::from)?;
            if fs.f_type as u64 & 0xffff_ffff == HUGETLBFS_MAGIC {
                return Err(MapError::Hugetlb);
            }
        }
        let charge = budget.map(|b| b.charge(announced)).transpose()?;
        let ptr = map_shared(Some(fd.as_fd()), announced as usize).map_err(MapError::Io)?;
        // The mapping outlives the descriptor, which nothing needs again: closed here, so a
        // peer's regions cost the daemon no fd (256 of them would be 256).
        drop(fd);
        Ok(SharedMemory {
            ptr,
            len: announced as usize,
            fd: None,
            _charge: charge,
        })
    }

    /// Anonymous private memory shaped like a region: for tests, fuzzing and Miri-free
    /// ring-walk checks where no second process is involved.
    pub fn anonymous(len: usize) -> io::Result<SharedMemory> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty region"));
        }
        let ptr = map_shared(None, len)?;
        Ok(SharedMemory {
            ptr,
            len,
            fd: None,
            _charge: None,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|f| f.as_fd())
    }

    /// Faults in the whole mapping for a copy device, without changing a byte
    /// ([`copy_engine::register`]): what a DSA engine's queue needs before it copies to or
    /// from it.
    pub fn register_for_dma(&self) -> std::io::Result<copy_engine::Registered> {
        // SAFETY: our own mapping of `len` bytes, readable and writable, kept mapped by
        // `&self` for the call.
        unsafe { copy_engine::register(self.ptr.as_ptr(), self.len) }
    }

    /// Checks that `[offset, offset + len)` lies inside the mapping, in u64 arithmetic.
    #[inline]
    pub fn check(&self, offset: u64, len: u64) -> Result<usize, OutOfBounds> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len as u64 => Ok(offset as usize),
            _ => Err(OutOfBounds {
                offset,
                len,
                size: self.len as u64,
            }),
        }
    }

    /// The address of `[offset, offset + len)` after the same check as [`read`](Self::read),
    /// for copy engines, which take raw addresses. Never turn it into a reference: the peer
    /// may write the bytes at any time.
    #[inline]
    pub fn addr(&self, offset: u64, len: u64) -> Result<*mut u8, OutOfBounds> {
        let off = self.check(offset, len)?;
        // SAFETY: `check` proved `off + len <= self.len`, so the result stays inside the
        // mapping (one past its end at most when `len == 0`).
        Ok(unsafe { self.ptr.as_ptr().add(off) })
    }

    /// `[offset, offset + len)` after the same check as [`read`](Self::read), as a
    /// [`Range`] that the packet path copies into or out of without checking again.
    #[inline]
    pub fn range(&self, offset: u64, len: u64) -> Result<Range<'_>, OutOfBounds> {
        let off = self.check(offset, len)?;
        Ok(Range {
            // SAFETY: `check` proved `off + len <= self.len`, so the result stays inside the
            // mapping (one past its end at most when `len == 0`).
            ptr: unsafe { self.ptr.as_ptr().add(off) },
            len: len as usize,
            _shm: PhantomData,
        })
    }

    /// Asks the CPU to bring the cache line holding `offset` into this core's caches ahead of
    /// a read (`prefetcht0`). A hint only: nothing is read, it cannot fault, and an offset
    /// past the region is ignored, so a peer's untrusted offset may be passed as it is.
    #[inline]
    pub fn prefetch(&self, offset: u64) {
        #[cfg(target_arch = "x86_64")]
        if offset < self.len as u64 {
            // SAFETY: `offset < self.len`, so the address lies inside the live mapping, and a
            // prefetch reads or writes nothing architecturally.
            unsafe {
                use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
                _mm_prefetch::<_MM_HINT_T0>(self.ptr.as_ptr().add(offset as usize).cast());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = offset;
    }

    /// Copies bytes out of the region.
    #[inline]
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        let off = self.check(offset, dst.len() as u64)?;
        // SAFETY: `check` proved `off + dst.len() <= self.len`, so the source lies inside the
        // live mapping; `dst` is our own memory and cannot overlap a mapping we created. The
        // peer may write the bytes concurrently: we then copy torn bytes, which are only ever
        // interpreted from our private copy.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }

    /// Copies bytes into the region.
    #[inline]
    pub fn write(&self, offset: u64, src: &[u8]) -> Result<(), OutOfBounds> {
        let off = self.check(offset, src.len() as u64)?;
        // SAFETY: bounds proved by `check`; the mapping is writable (PROT_WRITE) and `src` is
        // our own memory, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len())
        };
        Ok(())
    }

    /// Fills bytes in the region with `byte`.
    pub fn fill(&self, offset: u64, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        let off = self.check(offset, len as u64)?;
        // SAFETY: bounds proved by `check`; the mapping is writable.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(off), byte, len) };
        Ok(())
    }

    /// Reads the 4 bytes at `offset` with one volatile load (no alignment needed) and decodes
    /// them as a little-endian `u32`. Not atomic: a peer writing them concurrently can make us
    /// see a mix of old and new bytes.
    pub fn read_u32(&self, offset: u64) -> Result<u32, OutOfBounds> {
        let off = self.check(offset, 4)?;
        // SAFETY: `check` proved `off + 4 <= self.len`; `[u8; 4]` has alignment 1; volatile so
        // that the value is read exactly once into the local.
        let b = unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<[u8; 4]>()) };
        Ok(u32::from_le_bytes(b))
    }

    /// An atomic view of a 16-bit word (ring head, tail, flags).
    pub fn atomic_u16(&self, offset: u64) -> Result<&AtomicU16, OutOfBounds> {
        let off = self.check(offset, 2)?;
        if off % 2 != 0 {
            return Err(OutOfBounds {
                offset,
                len: 2,
                size: self.len as u64,
            });
        }
        // SAFETY: in bounds and 2-aligned (the mapping is page aligned); the memory lives as
        // long as `&self`. AtomicU16 has the size and alignment of u16 and is meant for memory
        // that other threads, here another process, access concurrently.
        Ok(unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU16>() })
    }

    /// An atomic view of a 32-bit word (ring cookie).
    pub fn atomic_u32(&self, offset: u64) -> Result<&AtomicU32, OutOfBounds> {
        let off = self.check(offset, 4)?;
        if off % 4 != 0 {
            return Err(OutOfBounds {
                offset,
                len: 4,
                size: self.len as u64,
            });
        }
        // SAFETY: in bounds, 4-aligned, lives as long as `&self`; see `atomic_u16`.
        Ok(unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() })
    }

    /// Base pointer, for ring code that proved its own bounds once at construction.
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

/// A bounds-checked range of a mapping, borrowed from it ([`SharedMemory::range`]): the
/// packet path's copies into and out of peer buffers, checked once per descriptor. Each copy
/// checks only that it stays inside the range (one comparison, which the compiler drops where
/// the lengths are the same values).
#[derive(Debug, Clone, Copy)]
pub struct Range<'a> {
    ptr: *mut u8,
    len: usize,
    _shm: PhantomData<&'a SharedMemory>,
}

impl Range<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the range's first `dst.len()` bytes into `dst`.
    ///
    /// # Panics
    /// If `dst` is longer than the range.
    #[inline]
    pub fn read_into(&self, dst: &mut [u8]) {
        assert!(dst.len() <= self.len, "copy past a peer range");
        // SAFETY: the range is inside a live mapping (`range`, kept alive by the borrow) and
        // at least `dst.len()` long; `dst` is our own memory.
        unsafe { move_bytes(self.ptr, dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` into the range from byte `at` on.
    ///
    /// # Panics
    /// If `src` does not fit there.
    #[inline]
    pub fn write_at(&self, at: usize, src: &[u8]) {
        assert!(
            at <= self.len && src.len() <= self.len - at,
            "copy past a peer range"
        );
        // SAFETY: `[at, at + src.len())` is inside the range, which is inside a live, writable
        // mapping; `src` is our own memory.
        unsafe { move_bytes(src.as_ptr(), self.ptr.add(at), src.len()) }
    }

    /// Copies all of `src`, a range of any mapping (the same one included, overlapping
    /// allowed), into this range from byte `at` on.
    ///
    /// # Panics
    /// If `src` does not fit there.
    #[inline]
    pub fn copy_at(&self, at: usize, src: Range<'_>) {
        assert!(
            at <= self.len && src.len <= self.len - at,
            "copy past a peer range"
        );
        // SAFETY: both ranges are inside live mappings, the destination writable and holding
        // `src.len` bytes from `at`; `move_bytes` allows them to overlap.
        unsafe { move_bytes(src.ptr, self.ptr.add(at), src.len) }
    }
}

/// Copies `n` bytes from `src` to `dst`, which may overlap (memmove). Up to 128 bytes (a
/// packet's headers, a small packet) inline: every load before any store, in 16-byte
/// pieces whose last one overlaps the one before it, about a dozen instructions for 64 bytes
/// where a call to the C library's `memmove` takes twice that with the call around it.
/// Longer copies go to the C library, whose vector loops win there.
///
/// # Safety
/// `src` readable and `dst` writable for `n` bytes.
#[inline(always)]
unsafe fn move_bytes(src: *const u8, dst: *mut u8, n: usize) {
    use std::ptr::{read_unaligned as rd, write_unaligned as wr};
    type V = [u8; 16];
    // SAFETY: every access below is at an offset whose sum with its width is at most `n`,
    // the length the caller vouches for; unaligned accesses need no alignment.
    unsafe {
        // The test for a minimum-size frame's class (33..=64 bytes) comes first.
        if n <= 64 {
            if n > 32 {
                let (s, d, t) = (src.cast::<V>(), dst.cast::<V>(), n - 32);
                let (a, b) = (rd(s), rd(s.add(1)));
                let st = src.add(t).cast::<V>();
                let (c, e) = (rd(st), rd(st.add(1)));
                wr(d, a);
                wr(d.add(1), b);
                let dt = dst.add(t).cast::<V>();
                wr(dt, c);
                wr(dt.add(1), e);
            } else if n >= 16 {
                let (a, b) = (rd(src.cast::<V>()), rd(src.add(n - 16).cast::<V>()));
                wr(dst.cast::<V>(), a);
                wr(dst.add(n - 16).cast::<V>(), b);
            } else if n >= 8 {
                let (a, b) = (rd(src.cast::<u64>()), rd(src.add(n - 8).cast::<u64>()));
                wr(dst.cast::<u64>(), a);
                wr(dst.add(n - 8).cast::<u64>(), b);
            } else {
                std::ptr::copy(src, dst, n);
            }
        } else if n <= 128 {
            // Named values, not arrays: arrays of them went through the stack.
            let (s, d, t) = (src.cast::<V>(), dst.cast::<V>(), n - 64);
            let (h0, h1, h2, h3) = (rd(s), rd(s.add(1)), rd(s.add(2)), rd(s.add(3)));
            let st = src.add(t).cast::<V>();
            let (e0, e1, e2, e3) = (rd(st), rd(st.add(1)), rd(st.add(2)), rd(st.add(3)));
            let dt = dst.add(t).cast::<V>();
            wr(d, h0);
            wr(d.add(1), h1);
            wr(d.add(2), h2);
            wr(d.add(3), h3);
            wr(dt, e0);
            wr(dt.add(1), e1);
            wr(dt.add(2), e2);
            wr(dt.add(3), e3);
        } else {
            std::ptr::copy(src, dst, n);
        }
    }
}

fn map_shared(fd: Option<BorrowedFd<'_>>, len: usize) -> io::Result<NonNull<u8>> {
    let prot = ProtFlags::READ | ProtFlags::WRITE;
    let ptr = match fd {
        Some(fd) => {
            // SAFETY: a fresh mapping at an address the kernel chooses aliases no Rust object.
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0) }?
        }
        None => {
            // SAFETY: as above, anonymous memory.
            unsafe {
                rustix::mm::mmap_anonymous(std::ptr::null_mut(), len, prot, MapFlags::PRIVATE)
            }?
        }
    };
    NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and no reference into the
        // mapping outlives `self` (accessors borrow `&self`).
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_copies_every_length_class_and_may_overlap() {
        let m = SharedMemory::anonymous(4096).unwrap();
        let pattern: Vec<u8> = (0..1024u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in [
            0usize, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300,
        ] {
            m.write(0, &pattern).unwrap();
            let r = m.range(5, n as u64).unwrap();
            let mut out = vec![0xeeu8; n + 3];
            r.read_into(&mut out[..n]);
            assert_eq!(&out[..n], &pattern[5..5 + n], "read {n}");
            assert_eq!(&out[n..], &[0xee; 3], "read {n} wrote past its end");
            // Into the range at an offset, from our memory.
            let dst = m.range(2048, n as u64 + 9).unwrap();
            dst.write_at(9, &pattern[..n]);
            let mut back = vec![0u8; n];
            m.read(2048 + 9, &mut back).unwrap();
            assert_eq!(back, pattern[..n], "write {n}");
            // Overlapping both ways, as memmove.
            for (from, to) in [(100u64, 103u64), (103, 100)] {
                m.write(0, &pattern).unwrap();
                let src = m.range(from, n as u64).unwrap();
                m.range(to, n as u64).unwrap().copy_at(0, src);
                let mut got = vec![0u8; n];
                m.read(to, &mut got).unwrap();
                assert_eq!(got, pattern[from as usize..from as usize + n], "move {n}");
            }
        }
        assert!(m.range(4000, 97).is_err());
        assert_eq!(m.range(4000, 96).unwrap().len(), 96);
    }

    #[test]
    #[should_panic(expected = "copy past a peer range")]
    fn a_copy_cannot_leave_its_range() {
        let m = SharedMemory::anonymous(4096).unwrap();
        m.range(0, 16).unwrap().write_at(8, &[0; 9]);
    }

    #[test]
    fn bounds_are_checked_in_u64() {
        let m = SharedMemory::anonymous(4096).unwrap();
        assert!(m.check(4095, 1).is_ok());
        assert!(m.check(4095, 2).is_err());
        assert!(m.check(u64::MAX, 2).is_err());
        assert!(m.check(u32::MAX as u64, u32::MAX as u64).is_err());
        let mut b = [0u8; 8];
        assert!(m.read(4090, &mut b).is_err());
        m.write(8, b"abcdefgh").unwrap();
        m.read(8, &mut b).unwrap();
        assert_eq!(&b, b"abcdefgh");
        assert!(m.atomic_u16(1).is_err());
    }

    #[test]
    fn peer_region_checks_size_and_seals() {
        let ours = SharedMemory::create("t", 8192).unwrap();
        let dup = ours.fd().unwrap().try_clone_to_owned().unwrap();
        let m = SharedMemory::map_peer(dup, 8192, SealPolicy::Require, None).unwrap();
        m.write(100, b"x").unwrap();
        let mut b = [0u8];
        ours.read(100, &mut b).unwrap();
        assert_eq!(&b, b"x");

        let dup = ours.fd().unwrap().try_clone_to_owned().unwrap();
        assert!(matches!(
            SharedMemory::map_peer(dup, 8193, SealPolicy::Require, None),
            Err(MapError::ShortFd {
                actual: 8192,
                announced: 8193
            })
        ));

        let unsealed = rustix::fs::memfd_create("u", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&unsealed, 4096).unwrap();
        let dup = unsealed.try_clone().unwrap();
        assert!(matches!(
            SharedMemory::map_peer(dup, 4096, SealPolicy::Require, None),
            Err(MapError::NotSealed)
        ));
        assert!(SharedMemory::map_peer(unsealed, 4096, SealPolicy::AllowUnsealed, None).is_ok());

        let ev = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap();
        assert!(matches!(
            SharedMemory::map_peer(ev, 8, SealPolicy::Require, None),
            Err(MapError::NotAFile)
        ));
    }
}
