//! The four AF_XDP rings (fill, completion, rx, tx): single-producer single-consumer queues of
//! descriptors in memory mapped from the socket, with the kernel on the other end. The one
//! place, with `umem.rs`, that touches memory the kernel writes.
//!
//! Each ring is a producer index, a consumer index, a flags word and an array of `size`
//! entries (a power of two), at the offsets `getsockopt(XDP_MMAP_OFFSETS)` gives. Those
//! offsets are checked once against the mapping, in `u64` arithmetic, when the ring is made
//! ([`Ring::new`]); every later access is an index masked into the entry array, so no access
//! can leave the mapping whatever the kernel writes into the indices.
//!
//! # Memory ordering
//!
//! As the kernel's own `xsk_queue.h` and libbpf's `xsk.h` (`xsk_ring_prod__submit`,
//! `xsk_ring_cons__release`) do:
//!
//! - the consumer loads the producer index with `Acquire` (pairing with the producer's
//!   `Release` store), reads each entry between its consumer index and that producer index
//!   once, into a local, and then publishes its new consumer index with a `Release` store, so
//!   its reads of the entries (and of the UMEM frames they name) happen before the producer
//!   may reuse them;
//! - the producer loads the consumer index with `Acquire` to learn which entries are free,
//!   writes the entries, and publishes them with a `Release` store of its producer index.
//!
//! Indices are free-running `u32`s compared with wrapping arithmetic. Entries are read and
//! written with volatile copies and never become Rust references; the indices and flags are
//! accessed only as atomics. An index the kernel moved impossibly far (more than a ring's
//! worth) is clamped to the ring size, so we never take one entry twice in a pass.

#![allow(unsafe_code)]

use std::io;
use std::marker::PhantomData;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// An entry of a ring.
///
/// # Safety
///
/// Implementors are integers or `repr(C)` structs of integers without padding: every bit
/// pattern the kernel may write is a valid value, and the size and alignment are the kernel's.
pub(crate) unsafe trait Entry: Copy + Default {}
// SAFETY: a UMEM address (fill and completion rings).
unsafe impl Entry for u64 {}
// SAFETY: `struct xdp_desc`: a u64 and two u32, 16 bytes, no padding (asserted below).
unsafe impl Entry for Desc {}

/// `struct xdp_desc`: a frame in the UMEM (rx and tx rings).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Desc {
    /// Offset of the frame's first byte from the start of the UMEM.
    pub addr: u64,
    pub len: u32,
    /// `XDP_PKT_CONTD` and friends; 0 for single-buffer frames, all we ask for.
    pub options: u32,
}
const _: () = assert!(size_of::<Desc>() == size_of::<libc::xdp_desc>() && size_of::<Desc>() == 16);

/// `XDP_RING_NEED_WAKEUP`, in a fill or tx ring's flags word.
const NEED_WAKEUP: u32 = libc::XDP_RING_NEED_WAKEUP;

/// Where a ring's words are in its mapping (one direction of `XDP_MMAP_OFFSETS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offsets {
    pub producer: u64,
    pub consumer: u64,
    pub flags: u64,
    pub desc: u64,
}

/// A ring's memory, mapped from its socket (`MAP_SHARED`).
#[derive(Debug)]
struct RingMap {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory with no thread affinity; the ring that owns it moves
// between threads whole and only its owner accesses it.
unsafe impl Send for RingMap {}

impl RingMap {
    fn map(fd: BorrowedFd<'_>, pgoff: u64, len: usize) -> io::Result<RingMap> {
        use rustix::mm::{MapFlags, ProtFlags, mmap};
        // SAFETY: a fresh mapping at an address the kernel chooses (null hint) cannot alias any
        // Rust object. `xsk_mmap` maps the ring the socket configured at `pgoff`, or fails if
        // `len` exceeds the ring's allocation.
        let p = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::POPULATE,
                fd,
                pgoff,
            )
        }?;
        let base = NonNull::new(p.cast::<u8>()).ok_or(io::ErrorKind::InvalidData)?;
        Ok(RingMap { base, len })
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are what `mmap` returned and took; no reference into the
        // mapping outlives a method call of the ring that owns it.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A mapped ring with checked offsets.
#[derive(Debug)]
struct Ring<E> {
    map: RingMap,
    off: Offsets,
    size: u32,
    mask: u32,
    _entry: PhantomData<E>,
}

impl<E: Entry> Ring<E> {
    /// Maps the ring of `size` entries configured on `fd` at `pgoff`, after proving that its
    /// words and entries all lie inside the mapping with their alignment.
    fn new(fd: BorrowedFd<'_>, pgoff: u64, off: Offsets, size: u32) -> io::Result<Ring<E>> {
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("XDP_MMAP_OFFSETS {what} ({off:?}, {size} entries) is unusable"),
            )
        };
        if !size.is_power_of_two() {
            return Err(bad("ring size"));
        }
        let entries = u64::from(size) * size_of::<E>() as u64;
        let len = [off.producer, off.consumer, off.flags]
            .into_iter()
            .map(|w| w.checked_add(4))
            .chain([off.desc.checked_add(entries)])
            .try_fold(0u64, |m, end| end.map(|e| m.max(e)))
            .ok_or_else(|| bad("offset"))?;
        let words_aligned = [off.producer, off.consumer, off.flags]
            .iter()
            .all(|w| w.is_multiple_of(4));
        if !words_aligned || !off.desc.is_multiple_of(align_of::<E>() as u64) {
            return Err(bad("alignment"));
        }
        let len = usize::try_from(len).map_err(|_| bad("length"))?;
        let map = RingMap::map(fd, pgoff, len)?;
        Ok(Ring {
            map,
            off,
            size,
            mask: size - 1,
            _entry: PhantomData,
        })
    }

    /// The index or flags word at `offset` (one of `self.off`'s three).
    #[inline]
    fn word(&self, offset: u64) -> &AtomicU32 {
        // SAFETY: `new` proved the 4 bytes at each of the three word offsets lie inside the
        // live mapping and are 4-aligned (the mapping is page-aligned). The kernel writes them
        // concurrently, which is why they are only ever accessed as atomics.
        unsafe { AtomicU32::from_ptr(self.map.base.as_ptr().add(offset as usize).cast::<u32>()) }
    }

    /// The entry slot of free-running index `idx`.
    #[inline]
    fn slot(&self, idx: u32) -> *mut E {
        let at = self.off.desc as usize + (idx & self.mask) as usize * size_of::<E>();
        // SAFETY: `idx & mask < size`, and `new` proved `desc + size * size_of::<E>()` lies
        // inside the mapping with `E`'s alignment, so the slot is in bounds and aligned.
        unsafe { self.map.base.as_ptr().add(at).cast::<E>() }
    }
}

/// A ring the kernel produces and we consume: rx (frames received) and completion (transmit
/// frames the kernel is done with).
#[derive(Debug)]
pub(crate) struct ConsRing<E> {
    ring: Ring<E>,
    cached_prod: u32,
    cached_cons: u32,
    /// Entries `read` may take: what the last `available` returned.
    readable: u32,
}

impl<E: Entry> ConsRing<E> {
    pub(crate) fn new(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        off: Offsets,
        size: u32,
    ) -> io::Result<ConsRing<E>> {
        let ring = Ring::new(fd, pgoff, off, size)?;
        let cached_prod = ring.word(off.producer).load(Ordering::Acquire);
        let cached_cons = ring.word(off.consumer).load(Ordering::Relaxed);
        Ok(ConsRing {
            ring,
            cached_prod,
            cached_cons,
            readable: 0,
        })
    }

    /// How many entries (at most `max`) are ready to read. Loads the kernel's producer index
    /// only when the cached one does not already show `max`.
    #[inline]
    pub(crate) fn available(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n < max {
            self.cached_prod = self
                .ring
                .word(self.ring.off.producer)
                .load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        self.readable = n.min(self.ring.size).min(max);
        self.readable
    }

    /// Entry `i` of those [`ConsRing::available`] counted, read once; `None` past them.
    #[inline]
    pub(crate) fn read(&self, i: u32) -> Option<E> {
        if i >= self.readable {
            return None;
        }
        let p = self.ring.slot(self.cached_cons.wrapping_add(i));
        // SAFETY: the slot is in bounds and aligned (`slot`), and it lies between our consumer
        // index and the producer index we loaded with Acquire, so the kernel finished writing
        // it before its Release store of that index and will not touch it again until we
        // release it. Volatile: the memory is shared with the kernel.
        Some(unsafe { p.read_volatile() })
    }

    /// Hands the first `n` readable entries back to the kernel (a Release store: our reads
    /// of them, and of the frames they name, come first).
    #[inline]
    pub(crate) fn release(&mut self, n: u32) {
        let n = n.min(self.readable);
        if n == 0 {
            return;
        }
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.readable -= n;
        self.ring
            .word(self.ring.off.consumer)
            .store(self.cached_cons, Ordering::Release);
    }

    /// Whether the kernel has produced entries we have not released (the lost-wakeup check).
    pub(crate) fn pending(&self) -> bool {
        self.ring
            .word(self.ring.off.producer)
            .load(Ordering::Acquire)
            != self.cached_cons
    }
}

/// A ring we produce and the kernel consumes: fill (frames the kernel may receive into) and
/// tx (frames to send).
#[derive(Debug)]
pub(crate) struct ProdRing<E> {
    ring: Ring<E>,
    cached_prod: u32,
    /// The kernel's consumer index plus the ring size (libbpf's trick): free entries are
    /// `cached_cons - cached_prod`.
    cached_cons: u32,
    /// Entries reserved by `free` and not yet submitted.
    writable: u32,
}

impl<E: Entry> ProdRing<E> {
    pub(crate) fn new(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        off: Offsets,
        size: u32,
    ) -> io::Result<ProdRing<E>> {
        let ring = Ring::new(fd, pgoff, off, size)?;
        let cached_prod = ring.word(off.producer).load(Ordering::Relaxed);
        let cached_cons = ring
            .word(off.consumer)
            .load(Ordering::Acquire)
            .wrapping_add(size);
        Ok(ProdRing {
            ring,
            cached_prod,
            cached_cons,
            writable: 0,
        })
    }

    /// How many entries (at most `want`) may be written now. Loads the kernel's consumer
    /// index only when the cached one does not already show `want` free.
    #[inline]
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let mut n = self.cached_cons.wrapping_sub(self.cached_prod);
        if n < want {
            self.cached_cons = self
                .ring
                .word(self.ring.off.consumer)
                .load(Ordering::Acquire)
                .wrapping_add(self.ring.size);
            n = self.cached_cons.wrapping_sub(self.cached_prod);
        }
        self.writable = n.min(self.ring.size).min(want);
        self.writable
    }

    /// Writes entry `i` of those [`ProdRing::free`] counted; false (nothing written) past
    /// them.
    #[inline]
    pub(crate) fn write(&mut self, i: u32, e: E) -> bool {
        if i >= self.writable {
            return false;
        }
        let p = self.ring.slot(self.cached_prod.wrapping_add(i));
        // SAFETY: the slot is in bounds and aligned (`slot`), and it lies between our producer
        // index and the consumer index we loaded with Acquire (plus the ring size), so the
        // kernel has finished reading it and will not read it before our Release store of a
        // producer index past it. Volatile: the memory is shared with the kernel.
        unsafe { p.write_volatile(e) };
        true
    }

    /// Publishes the first `n` written entries (a Release store: the entries, and the frames
    /// they name, are visible before the index).
    #[inline]
    pub(crate) fn submit(&mut self, n: u32) {
        let n = n.min(self.writable);
        if n == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.writable -= n;
        self.ring
            .word(self.ring.off.producer)
            .store(self.cached_prod, Ordering::Release);
    }

    /// Whether the kernel asks to be woken (a system call) before it looks at this ring again
    /// (`XDP_USE_NEED_WAKEUP`). A plain read, as libbpf's `xsk_ring_prod__needs_wakeup`; a
    /// caller about to sleep puts a fence between its `submit` and this.
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.ring.word(self.ring.off.flags).load(Ordering::Relaxed) & NEED_WAKEUP != 0
    }

    /// Entries submitted that the kernel has not consumed yet.
    pub(crate) fn outstanding(&self) -> u32 {
        let cons = self
            .ring
            .word(self.ring.off.consumer)
            .load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(cons).min(self.ring.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, OwnedFd};

    /// Both ends of one ring over a memfd mapped twice: our producer against a consumer
    /// standing in for the kernel, and the other way round, stepped by hand.
    fn shared(size: u32) -> (OwnedFd, Offsets) {
        let fd =
            rustix::fs::memfd_create("xsk-ring-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 4096 * 4).unwrap();
        let off = Offsets {
            producer: 0,
            consumer: 64,
            flags: 128,
            desc: 192,
        };
        assert!(off.desc + u64::from(size) * 16 <= 4096 * 4);
        (fd, off)
    }

    #[test]
    fn producer_and_consumer_wrap_around_in_step() {
        let (fd, off) = shared(8);
        let mut p = ProdRing::<u64>::new(fd.as_fd(), 0, off, 8).unwrap();
        let mut c = ConsRing::<u64>::new(fd.as_fd(), 0, off, 8).unwrap();
        let mut next_in = 0u64;
        let mut next_out = 0u64;
        // 20 rounds of uneven batches: the indices pass the ring size many times.
        for round in 0..20u32 {
            let want = 1 + round % 7;
            let n = p.free(want);
            for i in 0..n {
                assert!(p.write(i, next_in));
                next_in += 1;
            }
            assert!(!p.write(n, 999), "past the reserved entries");
            p.submit(n);
            let take = c.available(1 + round % 5);
            for i in 0..take {
                assert_eq!(c.read(i), Some(next_out));
                next_out += 1;
            }
            assert_eq!(c.read(take), None);
            c.release(take);
        }
        // Drain; then the ring is full again for the producer.
        let left = c.available(8);
        for i in 0..left {
            assert_eq!(c.read(i), Some(next_out + u64::from(i)));
        }
        c.release(left);
        assert!(!c.pending());
        assert_eq!(p.free(100), 8);
        assert_eq!(p.outstanding(), 0);
    }

    #[test]
    fn a_full_ring_takes_nothing_more() {
        let (fd, off) = shared(4);
        let mut p = ProdRing::<Desc>::new(fd.as_fd(), 0, off, 4).unwrap();
        let mut c = ConsRing::<Desc>::new(fd.as_fd(), 0, off, 4).unwrap();
        assert_eq!(p.free(10), 4);
        for i in 0..4 {
            let d = Desc {
                addr: u64::from(i) * 2048,
                len: 60 + i,
                options: 0,
            };
            assert!(p.write(i, d));
        }
        p.submit(4);
        assert_eq!(p.free(1), 0);
        assert_eq!(p.outstanding(), 4);
        assert!(c.pending());
        assert_eq!(c.available(2), 2);
        assert_eq!(c.read(1).unwrap().len, 61);
        c.release(2);
        assert_eq!(p.free(10), 2);
    }

    #[test]
    fn needs_wakeup_follows_the_flags_word() {
        let (fd, off) = shared(4);
        let p = ProdRing::<u64>::new(fd.as_fd(), 0, off, 4).unwrap();
        assert!(!p.needs_wakeup());
        // The kernel's side of the flags word, through a second mapping of the same memory.
        let other = Ring::<u64>::new(fd.as_fd(), 0, off, 4).unwrap();
        other.word(off.flags).store(NEED_WAKEUP, Ordering::Relaxed);
        assert!(p.needs_wakeup());
    }

    #[test]
    fn offsets_outside_or_misaligned_are_refused() {
        let (fd, off) = shared(4);
        let odd = Offsets {
            consumer: 66,
            ..off
        };
        assert!(Ring::<u64>::new(fd.as_fd(), 0, odd, 4).is_err());
        let huge = Offsets {
            desc: u64::MAX - 8,
            ..off
        };
        assert!(Ring::<u64>::new(fd.as_fd(), 0, huge, 4).is_err());
        assert!(
            Ring::<u64>::new(fd.as_fd(), 0, off, 6).is_err(),
            "not a power of two"
        );
    }
}
