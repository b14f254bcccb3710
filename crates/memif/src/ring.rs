//! A memif ring inside a region: header (cookie, flags, head, tail) and 16-byte descriptors.
//!
//! Placement (`offset + header + 16·2^log2 <= region size`, 8-byte alignment, `log2 <= 14`)
//! is proved once in [`Ring::new`]; afterwards every slot index is masked, so the hot-path
//! accessors need no further checks. The header and descriptor layouts are `repr(C)` structs
//! ([`RingHeader64`], [`RingHeader128`], [`Desc`]) with their sizes and offsets asserted; ring
//! memory is never reached through a reference to them. Descriptors are read and written as
//! whole 16-byte volatile copies: a caller gets a private [`Desc`] snapshot that the peer
//! cannot change under it.

use core::mem::offset_of;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::msg::{COOKIE, MAX_LOG2_RING_SIZE};
use crate::shm::{OutOfBounds, SharedMemory};

/// Descriptor flag: the packet continues in the next slot. The only flag bit in use.
pub const DESC_FLAG_NEXT: u16 = 1;
/// Ring flag, written by the ring's consumer: "do not signal me".
pub const RING_FLAG_MASK_INT: u16 = 1;
/// Bytes per descriptor.
pub const DESC_SIZE: u64 = 16;

/// Where `tail` and the descriptors sit, which depends on the peer's compile-time cache-line
/// size. Nothing on the wire tells the two apart (the ring header of FD.io VPP's memif.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RingLayout {
    /// 64-byte cache lines: tail at 64, descriptors at 128 (x86-64, gomemif, VPP < 24.02).
    #[default]
    CacheLine64,
    /// 128-byte cache lines: tail at 128, descriptors at 256 (VPP ≥ 24.02 and libmemif on aarch64).
    CacheLine128,
}

/// `memif_ring_t`'s header on a 64-byte cache-line build: the slave's line (cookie, flags,
/// head), then the master's line (tail); descriptors follow. Only a layout description:
/// ring memory is reached through [`Ring`]'s atomics and volatile copies, never as a
/// reference to this struct.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RingHeader64 {
    pub cookie: u32,
    pub flags: u16,
    pub head: u16,
    pub _slave_line: [u8; 56],
    pub tail: u16,
    pub _master_line: [u8; 62],
}

/// `memif_ring_t`'s header on a 128-byte cache-line build (VPP ≥ 24.02 and libmemif on
/// aarch64). See [`RingHeader64`].
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RingHeader128 {
    pub cookie: u32,
    pub flags: u16,
    pub head: u16,
    pub _slave_line: [u8; 120],
    pub tail: u16,
    pub _master_line: [u8; 126],
}

// The ring header of FD.io VPP's memif.h at each cache-line size. The cookie, flags and head
// sit at the same place in both layouts.
const _: () = assert!(size_of::<RingHeader64>() == 128);
const _: () = assert!(offset_of!(RingHeader64, cookie) == 0);
const _: () = assert!(offset_of!(RingHeader64, flags) == 4);
const _: () = assert!(offset_of!(RingHeader64, head) == 6);
const _: () = assert!(offset_of!(RingHeader64, tail) == 64);
const _: () = assert!(size_of::<RingHeader128>() == 256);
const _: () = assert!(offset_of!(RingHeader128, cookie) == 0);
const _: () = assert!(offset_of!(RingHeader128, flags) == 4);
const _: () = assert!(offset_of!(RingHeader128, head) == 6);
const _: () = assert!(offset_of!(RingHeader128, tail) == 128);

const COOKIE_AT: u64 = offset_of!(RingHeader64, cookie) as u64;
const FLAGS_AT: u64 = offset_of!(RingHeader64, flags) as u64;
const HEAD_AT: u64 = offset_of!(RingHeader64, head) as u64;

impl RingLayout {
    pub fn header_size(self) -> u64 {
        match self {
            RingLayout::CacheLine64 => size_of::<RingHeader64>() as u64,
            RingLayout::CacheLine128 => size_of::<RingHeader128>() as u64,
        }
    }

    fn tail_offset(self) -> u64 {
        match self {
            RingLayout::CacheLine64 => offset_of!(RingHeader64, tail) as u64,
            RingLayout::CacheLine128 => offset_of!(RingHeader128, tail) as u64,
        }
    }

    /// Bytes one ring of `2^log2` entries occupies.
    pub fn ring_bytes(self, log2: u8) -> u64 {
        self.header_size() + DESC_SIZE * (1u64 << log2)
    }
}

/// `memif_desc_t`, the on-ring layout of a descriptor: a layout description with its size
/// and offsets asserted. Ring memory is never reached through a reference to it; [`Ring`]
/// reads and writes descriptors as two little-endian 8-byte words (the C struct is
/// host-native; every host memif runs on, x86-64 and aarch64, is little-endian) and hands out
/// [`Desc`] snapshots.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct DescLayout {
    pub flags: u16,
    pub region: u16,
    pub length: u32,
    pub offset: u32,
    pub metadata: u32,
}

const _: () = assert!(size_of::<DescLayout>() as u64 == DESC_SIZE);
const _: () = assert!(offset_of!(DescLayout, flags) == 0);
const _: () = assert!(offset_of!(DescLayout, region) == 2);
const _: () = assert!(offset_of!(DescLayout, length) == 4);
const _: () = assert!(offset_of!(DescLayout, offset) == 8);
const _: () = assert!(offset_of!(DescLayout, metadata) == 12);

/// A descriptor snapshot: the fields of a [`DescLayout`] read at one instant, private to the
/// caller, which validates it. Its own layout is the compiler's choice (laid out as the wire
/// struct, the receive path took two more instructions a packet under `--cost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Desc {
    pub flags: u16,
    pub region: u16,
    pub length: u32,
    pub offset: u32,
    pub metadata: u32,
}

impl Desc {
    pub fn has_next(&self) -> bool {
        self.flags & DESC_FLAG_NEXT != 0
    }
}

/// Why a ring cannot be placed where a peer said it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("ring log2 size {0} out of range 0..=14")]
    BadLog2(u8),
    #[error("ring offset {0} is not 8-byte aligned")]
    Misaligned(u64),
    #[error("ring does not fit its region: {0}")]
    OutOfRegion(OutOfBounds),
}

/// A ring placed in a mapped region.
#[derive(Debug)]
pub struct Ring {
    shm: Arc<SharedMemory>,
    offset: u64,
    log2: u8,
    mask: u16,
    desc: *mut u8,
    cookie: *const AtomicU32,
    flags: *const AtomicU16,
    head: *const AtomicU16,
    tail: *const AtomicU16,
}

// SAFETY: the raw pointers point into `shm`, which this value keeps alive through its Arc; the
// memory is accessed only through atomics and volatile copies, valid from any thread.
unsafe impl Send for Ring {}

impl Ring {
    pub fn new(
        shm: Arc<SharedMemory>,
        offset: u64,
        log2: u8,
        layout: RingLayout,
    ) -> Result<Ring, RingError> {
        if log2 > MAX_LOG2_RING_SIZE {
            return Err(RingError::BadLog2(log2));
        }
        if !offset.is_multiple_of(8) {
            return Err(RingError::Misaligned(offset));
        }
        shm.check(offset, layout.ring_bytes(log2))
            .map_err(RingError::OutOfRegion)?;
        let cookie: *const AtomicU32 = shm
            .atomic_u32(offset + COOKIE_AT)
            .map_err(RingError::OutOfRegion)?;
        let flags: *const AtomicU16 = shm
            .atomic_u16(offset + FLAGS_AT)
            .map_err(RingError::OutOfRegion)?;
        let head: *const AtomicU16 = shm
            .atomic_u16(offset + HEAD_AT)
            .map_err(RingError::OutOfRegion)?;
        let tail: *const AtomicU16 = shm
            .atomic_u16(offset + layout.tail_offset())
            .map_err(RingError::OutOfRegion)?;
        // SAFETY: offset + header lies inside the mapping, checked above.
        let desc = unsafe { shm.base().add((offset + layout.header_size()) as usize) };
        Ok(Ring {
            shm,
            offset,
            log2,
            mask: ((1u32 << log2) - 1) as u16,
            desc,
            cookie,
            flags,
            head,
            tail,
        })
    }

    pub fn size(&self) -> u16 {
        // A 2^14 ring is the largest, so this fits u16... except 2^16 which log2 <= 14 excludes.
        (u32::from(self.mask) + 1) as u16
    }

    pub fn log2(&self) -> u8 {
        self.log2
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn region(&self) -> &Arc<SharedMemory> {
        &self.shm
    }

    fn atomic16(&self, p: *const AtomicU16) -> &AtomicU16 {
        // SAFETY: `p` was produced by `SharedMemory::atomic_u16` on `self.shm`, which `self`
        // keeps alive; the returned reference borrows `self`.
        unsafe { &*p }
    }

    pub fn cookie(&self) -> u32 {
        // SAFETY: produced by `SharedMemory::atomic_u32` on `self.shm`, kept alive by `self`.
        unsafe { &*self.cookie }.load(Ordering::Acquire)
    }

    pub fn cookie_ok(&self) -> bool {
        self.cookie() == COOKIE
    }

    /// The slave's index, read with acquire: descriptors written before it are visible.
    #[inline]
    pub fn head(&self) -> u16 {
        self.atomic16(self.head).load(Ordering::Acquire)
    }

    #[inline]
    pub fn set_head(&self, v: u16) {
        self.atomic16(self.head).store(v, Ordering::Release)
    }

    /// The master's index, read with acquire.
    #[inline]
    pub fn tail(&self) -> u16 {
        self.atomic16(self.tail).load(Ordering::Acquire)
    }

    #[inline]
    pub fn set_tail(&self, v: u16) {
        self.atomic16(self.tail).store(v, Ordering::Release)
    }

    #[inline]
    pub fn flags(&self) -> u16 {
        self.atomic16(self.flags).load(Ordering::Relaxed)
    }

    /// Only the ring's consumer writes flags.
    pub fn set_flags(&self, v: u16) {
        self.atomic16(self.flags).store(v, Ordering::Relaxed)
    }

    /// Descriptor `slot` (masked), as a raw pointer: never turned into a reference, because
    /// the peer may write it at any time.
    #[inline]
    fn desc_ptr(&self, slot: u16) -> *mut DescLayout {
        let i = usize::from(slot & self.mask);
        // SAFETY: `i < 2^log2`, and `new` proved that 16·2^log2 bytes follow the header inside
        // the mapping; the base is 8-aligned (region page-aligned, offset and header multiples
        // of 8), so every descriptor is aligned for `DescLayout` (4) and for `[u64; 2]` (8).
        unsafe {
            self.desc
                .add(i * size_of::<DescLayout>())
                .cast::<DescLayout>()
        }
    }

    /// Snapshots descriptor `slot` (masked) with one volatile 16-byte read into a local copy;
    /// the caller validates the copy, which the peer cannot change under it.
    #[inline]
    pub fn desc(&self, slot: u16) -> Desc {
        // SAFETY: see `desc_ptr`; volatile because the peer writes this memory. Read as two
        // 8-byte words and decoded by shifts, which keeps the fields in registers: decoding
        // with `transmute!` instead cost memif-input 5 instructions a packet under --cost.
        let [w0, w1] = unsafe { std::ptr::read_volatile(self.desc_ptr(slot).cast::<[u64; 2]>()) };
        let (w0, w1) = (u64::from_le(w0), u64::from_le(w1));
        Desc {
            flags: w0 as u16,
            region: (w0 >> 16) as u16,
            length: (w0 >> 32) as u32,
            offset: w1 as u32,
            metadata: (w1 >> 32) as u32,
        }
    }

    #[inline]
    pub fn set_desc(&self, slot: u16, d: Desc) {
        let w0 = u64::from(d.flags) | u64::from(d.region) << 16 | u64::from(d.length) << 32;
        let w1 = u64::from(d.offset) | u64::from(d.metadata) << 32;
        // SAFETY: see `desc_ptr`. Two 8-byte writes: one volatile write of the pair made the
        // compiler build it on the stack and copy it (about 5 instructions a descriptor more
        // in the generator's send under --cost).
        unsafe {
            let p = self.desc_ptr(slot).cast::<u64>();
            std::ptr::write_volatile(p, w0.to_le());
            std::ptr::write_volatile(p.add(1), w1.to_le());
        }
    }

    /// Writes `flags` and `length` of a slot, leaving region and offset (the slave's) alone.
    #[inline]
    pub fn set_desc_len_flags(&self, slot: u16, length: u32, flags: u16) {
        let p = self.desc_ptr(slot);
        // SAFETY: `p` is an in-bounds, aligned descriptor (see `desc_ptr`); `&raw mut` takes
        // the field addresses without forming a reference to peer memory.
        unsafe {
            std::ptr::write_volatile(&raw mut (*p).flags, flags.to_le());
            std::ptr::write_volatile(&raw mut (*p).length, length.to_le());
        }
    }

    /// Slave-side initialisation: flags, head and tail zero, then the cookie (release).
    pub fn init(&self) {
        self.set_flags(0);
        self.atomic16(self.head).store(0, Ordering::Relaxed);
        self.atomic16(self.tail).store(0, Ordering::Relaxed);
        // SAFETY: see `cookie`.
        unsafe { &*self.cookie }.store(COOKIE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_checked() {
        let shm = Arc::new(SharedMemory::anonymous(128 + 16 * 1024).unwrap());
        assert!(Ring::new(shm.clone(), 0, 10, RingLayout::CacheLine64).is_ok());
        assert!(matches!(
            Ring::new(shm.clone(), 8, 10, RingLayout::CacheLine64),
            Err(RingError::OutOfRegion(_))
        ));
        assert!(matches!(
            Ring::new(shm.clone(), 0, 10, RingLayout::CacheLine128),
            Err(RingError::OutOfRegion(_))
        ));
        assert_eq!(
            Ring::new(shm.clone(), 4, 1, RingLayout::CacheLine64).unwrap_err(),
            RingError::Misaligned(4)
        );
        assert_eq!(
            Ring::new(shm, 0, 15, RingLayout::CacheLine64).unwrap_err(),
            RingError::BadLog2(15)
        );
    }

    #[test]
    fn layout_offsets_match_the_c_struct() {
        let shm = Arc::new(SharedMemory::anonymous(4096).unwrap());
        for (layout, tail_at, desc_at) in [
            (RingLayout::CacheLine64, 64, 128),
            (RingLayout::CacheLine128, 128, 256),
        ] {
            let r = Ring::new(shm.clone(), 0, 2, layout).unwrap();
            r.init();
            r.set_head(0x1234);
            r.set_tail(0x5678);
            r.set_flags(1);
            r.set_desc(
                5,
                Desc {
                    flags: 1,
                    region: 2,
                    length: 3,
                    offset: 4,
                    metadata: 5,
                },
            );
            let mut b = [0u8; 16];
            shm.read(0, &mut b[..8]).unwrap();
            assert_eq!(&b[..8], &[0x20, 0x1f, 0xe3, 0x03, 1, 0, 0x34, 0x12]);
            assert_eq!(shm.read_u32(tail_at).unwrap() & 0xffff, 0x5678);
            // slot 5 masks to 1 in a 4-entry ring
            shm.read(desc_at + 16, &mut b).unwrap();
            assert_eq!(b, [1, 0, 2, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0]);
            assert_eq!(
                r.desc(1),
                Desc {
                    flags: 1,
                    region: 2,
                    length: 3,
                    offset: 4,
                    metadata: 5
                }
            );
            r.set_desc_len_flags(1, 99, 0);
            assert_eq!(
                r.desc(1),
                Desc {
                    flags: 0,
                    region: 2,
                    length: 99,
                    offset: 4,
                    metadata: 5
                }
            );
            assert!(r.cookie_ok());
        }
    }
}
