//! The vector graph.
//!
//! `graph` owns the engine every packet runs through, in VPP's shape: a node is one function
//! over a frame of up to [`FRAME_SIZE`] buffer indices that decides, for each buffer, which of
//! its declared next nodes gets it; the runtime then moves buffers to those nodes' pending
//! frames. A node is declared once with [`node!`]: its name, its next nodes and error counters
//! as enums, its trace record as a typed struct; that is all `show runtime`, `show errors` and
//! `show trace` need (see [`node`]).
//!
//! One [`Runtime`] per worker thread: it owns its nodes, their pending frames, their counters
//! (calls, vectors, clocks) and a trace ring. Nothing here locks or allocates after
//! construction (a sleeping worker's wake fds go into an epoll set made with the runtime), and
//! nothing here knows a protocol: protocol nodes live in the `nodes` crate, device nodes with
//! their devices.

// One instruction needs `unsafe`: `rdtsc`, in `clock`, the only module allowed it.
#![deny(unsafe_code)]

pub mod capture;
#[allow(unsafe_code)]
pub mod clock;
pub mod commands;
pub mod node;
mod runtime;
pub mod trace;

pub use capture::{Capture, Captured, Filter, Point};
pub use node::{
    AnyNode, Ctx, Declare, Env, ErrorCounters, Never, NextNodes, NoTrace, Node, NodeInfo, NodeKind,
    TraceData,
};
pub use runtime::Runtime;
pub use trace::{TraceRecord, TraceRing};

/// Buffers per frame.
pub const FRAME_SIZE: usize = 256;

/// A node's place in its graph.
pub type NodeIndex = u16;

/// An idle input node ([`Node::idle`]) is polled once in this many dispatch loops.
pub const IDLE_POLL_EVERY: u16 = 64;

/// A `next` value meaning "this node consumed the buffer" (sent it, freed it, kept it).
pub const CONSUMED: u16 = u16::MAX;

/// Buffer flag: trace this buffer through the graph.
pub const BUFFER_TRACED: u16 = 1;

/// Why a graph cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("node {node:?}: next node {next:?} does not exist")]
    UnknownNext {
        node: &'static str,
        next: &'static str,
    },
    #[error("two nodes are named {0:?}")]
    Duplicate(&'static str),
    #[error("more than {} nodes", NodeIndex::MAX)]
    TooMany,
    #[error("epoll_create: {0}")]
    Epoll(std::io::Error),
}

/// Where an input node with several rx queues starts polling them: one queue further each
/// poll. A queue that always has a frame's worth waiting (a flooding peer) then takes the frame
/// only on its own turn, and every other queue is polled first on its turn, instead of never
/// (each poll fills one frame, and polling always from the first queue let the first one
/// starve the rest).
#[derive(Debug, Default, Clone, Copy)]
pub struct RoundRobin {
    next: usize,
}

impl RoundRobin {
    /// The order of this poll's `n` queues, by index; the next poll starts one further.
    #[inline]
    pub fn turn(&mut self, n: usize) -> impl Iterator<Item = usize> + use<> {
        // No division on the poll path: `next` only ever steps by one.
        let start = if self.next < n { self.next } else { 0 };
        self.next = start + 1;
        (start..n).chain(0..start)
    }
}

/// Per-node counters, as `show runtime` prints them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    pub calls: u64,
    pub vectors: u64,
    /// Nanoseconds spent in the node (counted in [`clock::stamp`]s, converted when read).
    pub clocks: u64,
}

/// A `trace add` the graph refuses: packets are traced from where they enter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("{0} is not an input node")]
    NotInput(String),
    #[error("no node named {0}")]
    NoNode(String),
}

#[cfg(test)]
mod tests;
