//! The peer's regions as the primary sees them: descriptor checks, and single-copy's view.

use std::sync::Arc;

use crate::ring::Desc;
use crate::shm::SharedMemory;

/// Descriptor checks shared by both roles: a view of the peer's regions.
#[derive(Debug, Clone)]
pub(crate) struct Regions(pub Arc<[Arc<SharedMemory>]>);

impl Regions {
    #[inline]
    pub(super) fn valid(&self, d: &Desc) -> bool {
        match self.0.get(usize::from(d.region)) {
            Some(r) => d.length > 0 && r.check(u64::from(d.offset), u64::from(d.length)).is_ok(),
            None => false,
        }
    }
}

/// A connected peer's regions as a [`buffer::ExtSource`]: single-copy receive leaves payloads
/// here, and transmit copies them out of here straight into another peer's buffers.
#[derive(Debug, Clone)]
pub struct PeerMemory(pub(super) Regions);

impl buffer::ExtSource for PeerMemory {
    fn read(&self, region: u16, offset: u64, dst: &mut [u8]) -> bool {
        self.0
            .0
            .get(usize::from(region))
            .is_some_and(|r| r.read(offset, dst).is_ok())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl PeerMemory {
    /// The address of `len` bytes at `offset` of `region`, bounds-checked.
    pub(super) fn addr(&self, region: u16, offset: u64, len: u64) -> Option<*mut u8> {
        self.0.0.get(usize::from(region))?.addr(offset, len).ok()
    }
}
