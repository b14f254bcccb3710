//! The peer's regions as the primary sees them: descriptor checks, and single-copy's view.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use buffer::Pool;

use crate::ring::Desc;
use crate::shm::{Range, SharedMemory};

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
}

impl PeerMemory {
    /// `len` bytes at `offset` of `region`, bounds-checked.
    #[inline]
    pub(super) fn range(&self, region: u16, offset: u64, len: u64) -> Option<Range<'_>> {
        self.0.0.get(usize::from(region))?.range(offset, len).ok()
    }

    /// The address of `len` bytes at `offset` of `region`, bounds-checked.
    pub(super) fn addr(&self, region: u16, offset: u64, len: u64) -> Option<*mut u8> {
        self.0.0.get(usize::from(region))?.addr(offset, len).ok()
    }
}

/// The peers whose memory one worker's buffers may continue in (single-copy), shared by the
/// worker's `memif-input`, which attaches each as its queue arrives, and `memif-output`,
/// which copies out of them through a [`Peers`] view. The pool gets the same memory as an
/// untyped [`buffer::ExtSource`] for the readers that do not transmit (capture, linearising).
#[derive(Debug, Default)]
pub struct PeerTable {
    /// Bumped on every change, so that a view refreshes with one atomic load when none came.
    version: AtomicU64,
    by_source: Mutex<Vec<Option<PeerMemory>>>,
}

impl PeerTable {
    /// Makes `m` external source `source` of `pool` and of this table.
    pub fn attach(&self, pool: &mut Pool, source: u32, m: PeerMemory) {
        pool.set_ext_source(source, Some(Arc::new(m.clone())));
        self.set(source, Some(m));
    }

    /// Forgets source `source` (its buffers are gone: nothing points there any more).
    pub fn detach(&self, pool: &mut Pool, source: u32) {
        pool.set_ext_source(source, None);
        self.set(source, None);
    }

    fn set(&self, source: u32, m: Option<PeerMemory>) {
        let mut v = self.by_source.lock().unwrap_or_else(|e| e.into_inner());
        let i = source as usize;
        if v.len() <= i {
            v.resize(i + 1, None);
        }
        v[i] = m;
        self.version.fetch_add(1, Ordering::Release);
    }
}

/// A transmitter's copy of a [`PeerTable`]: typed peer memory by source, refreshed only when
/// the table changed.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    /// `None`: a view of nothing (plain sends without single-copy input).
    table: Option<Arc<PeerTable>>,
    seen: u64,
    by_source: Vec<Option<PeerMemory>>,
}

impl Peers {
    /// A view of `table` (empty until the first [`refresh`](Self::refresh)).
    pub fn of(table: &Arc<PeerTable>) -> Peers {
        Peers {
            table: Some(table.clone()),
            seen: 0,
            by_source: Vec::new(),
        }
    }

    /// Catches up with the table: one atomic load when nothing changed.
    #[inline]
    pub fn refresh(&mut self) {
        let Some(table) = &self.table else {
            return;
        };
        let v = table.version.load(Ordering::Acquire);
        if v != self.seen {
            self.by_source = table
                .by_source
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            self.seen = v;
        }
    }

    /// The peer memory of external source `source`.
    #[inline]
    pub fn get(&self, source: u32) -> Option<&PeerMemory> {
        self.by_source.get(source as usize)?.as_ref()
    }
}
