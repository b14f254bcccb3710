//! Local packet buffers.
//!
//! `buffer` owns a pool of fixed-size buffers addressed by `u32` index, each with a small
//! metadata record (data offset and length, the next buffer of a chain, interfaces, VRF, error
//! code). Frames larger than one buffer are chains linked through `next`. The pool belongs to
//! one thread; it never blocks, never allocates after construction, and knows nothing of
//! devices or protocols. Memory another process can write (memif regions) never lives here.
//!
//! The pool and its per-buffer accessors are in `pool`, the metadata record in `meta`, chains
//! in `chain`, external segments in `ext`, and the borrow-once views for loops and copy
//! engines in `view`; everything is used from the crate root.

#![forbid(unsafe_code)]

mod chain;
mod ext;
mod meta;
mod pool;
mod view;

pub use ext::{Ext, ExtSource};
pub use meta::Meta;
pub use pool::{ConfigError, Pool, PoolConfig};
pub use view::{RoomPtrs, View};

/// The index of no buffer: ends a chain.
pub const NONE: u32 = u32::MAX;

/// `Meta::flags`: the packet's TCP or UDP checksum was computed by veclane over the bytes as
/// they are (tap-input completing a pod's partial checksum, or cutting a super-frame), not
/// received from a peer unchecked. Nodes that change the packet update the checksum
/// incrementally, which keeps it true. tap-output merges only such segments into a
/// super-frame whose checksum the receiving kernel will not check. (Bits 0 to 2 are the
/// graph's and the protocol nodes'.)
pub const L4_CHECKSUM_OURS: u16 = 1 << 3;

#[cfg(test)]
mod tests;
