//! Constructors for fuzz targets and tests that drive one queue over memory they lay out
//! themselves, without a handshake, and a hostile peer for tests that play one against a
//! primary ([`evil`], with its catalogue of lies in [`lies`]). Not part of the stable API.

pub mod evil;
pub mod lies;
use std::sync::Arc;

/// A hostile peer's next lie, for tests that scribble over a connected peer's rings from
/// the peer's side: advances the xorshift64 state `x` (a different lie each call, the same
/// sequence for a seed) and returns a slot of a ring of 1024 and a descriptor naming one
/// of three regions, a chain flag or not, a length below `max_len`, and for its offset a
/// 2048-byte buffer after `buffers_at` or any number at all.
pub fn next_lie(x: &mut u64, buffers_at: u64, max_len: u64) -> (u16, crate::ring::Desc) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    let x = *x;
    let d = crate::ring::Desc {
        flags: (x >> 8) as u16 & crate::ring::DESC_FLAG_NEXT,
        region: ((x >> 12) % 3) as u16,
        length: ((x >> 16) % max_len) as u32,
        offset: if x.is_multiple_of(2) {
            (buffers_at + (x >> 40) % 1024 * 2048) as u32
        } else {
            (x >> 32) as u32
        },
        metadata: 0,
    };
    (((x >> 24) % 1024) as u16, d)
}

use crate::queue::{Link, QueueBase, Regions, SlotBuffers};
use crate::ring::{Ring, RingError, RingLayout};
use crate::shm::SharedMemory;
use crate::{PrimaryRx, PrimaryTx, SecondaryRx};
use evil::eventfd;

/// A primary's S2M receive queue over `regions`, its ring in region 0 at `offset`.
pub fn primary_rx(
    regions: &[Arc<SharedMemory>],
    offset: u64,
    log2: u8,
    layout: RingLayout,
    max_frame: u32,
) -> Result<(PrimaryRx, Arc<Link>), RingError> {
    let ring = Ring::new(regions[0].clone(), offset, log2, layout)?;
    let link = Link::new_up();
    let base = QueueBase::new(ring, eventfd(), link.clone(), 0);
    Ok((
        PrimaryRx::new(base, Regions(regions.iter().cloned().collect()), max_frame),
        link,
    ))
}

/// A primary's M2S transmit queue over `regions`, its ring in region 0 at `offset`.
pub fn primary_tx(
    regions: &[Arc<SharedMemory>],
    offset: u64,
    log2: u8,
    layout: RingLayout,
) -> Result<(PrimaryTx, Arc<Link>), RingError> {
    let ring = Ring::new(regions[0].clone(), offset, log2, layout)?;
    let link = Link::new_up();
    let base = QueueBase::new(ring, eventfd(), link.clone(), 0);
    Ok((
        PrimaryTx::new(base, Regions(regions.iter().cloned().collect())),
        link,
    ))
}

/// A secondary's M2S receive queue: ring in `rings` at `offset`, buffers in `bufs`.
pub fn secondary_rx(
    rings: Arc<SharedMemory>,
    offset: u64,
    log2: u8,
    bufs: Arc<SharedMemory>,
    buffer_size: u32,
) -> Result<(SecondaryRx, Arc<Link>), RingError> {
    let ring = Ring::new(rings, offset, log2, RingLayout::CacheLine64)?;
    let link = Link::new_up();
    let base = QueueBase::new(ring, eventfd(), link.clone(), 0);
    let sb = SlotBuffers {
        region: bufs,
        region_index: 1,
        base: 0,
        size: buffer_size,
    };
    Ok((SecondaryRx::new(base, sb), link))
}

/// The fault reason a queue recorded, if any.
pub fn fault(link: &Link) -> Option<String> {
    link.take_fault()
}
