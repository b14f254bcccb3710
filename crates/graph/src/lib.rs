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
pub mod trace;

use std::os::fd::{BorrowedFd, OwnedFd};

use buffer::Pool;
use rustix::event::epoll;

pub use capture::{Capture, Captured, Filter, Point};
pub use node::{
    AnyNode, Ctx, Declare, Env, ErrorCounters, Never, NextNodes, NoTrace, Node, NodeInfo, NodeKind,
    TraceData,
};
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

struct Slot {
    node: Box<dyn AnyNode>,
    info: NodeInfo,
    nexts: Vec<NodeIndex>,
    pending: Vec<u32>,
    stats: NodeStats,
    errors: Vec<u64>,
}

/// A `trace add` the graph refuses: packets are traced from where they enter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("{0} is not an input node")]
    NotInput(String),
    #[error("no node named {0}")]
    NoNode(String),
}

/// One worker's graph.
pub struct Runtime {
    slots: Vec<Slot>,
    /// One bit per slot whose pending frame is not empty, so that the next node to run is
    /// found with a look at a word or two rather than a walk over every slot.
    ready: Vec<u64>,
    /// Per input node (in `inputs`' order): dispatch loops left before an idle one
    /// ([`Node::idle`]) is polled again.
    idle_skip: Vec<u16>,
    inputs: Vec<NodeIndex>,
    trace: TraceRing,
    next_scratch: Vec<u16>,
    buf_scratch: Vec<u32>,
    /// Buffers a node emitted beyond its frame ([`Ctx::emit`]), with their next index.
    extra: Vec<(u32, u16)>,
    /// Traced buffers still to mark, per input node.
    trace_quota: Vec<u32>,
    /// Whether any buffer may carry the trace flag (checked once per frame).
    tracing: bool,
    /// Buffers a node sent to a next index it never declared (a node bug): freed, counted.
    undeclared_next: u64,
    /// Time in dispatch loops that moved at least one buffer, in [`clock::stamp`]s.
    busy: u64,
    capture: Capture,
    /// The set a sleeping worker waits in; filled for each sleep and emptied after it.
    epoll: OwnedFd,
}

impl core::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runtime")
            .field(
                "nodes",
                &self.slots.iter().map(|s| s.info.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The indices of the nodes of one kind, in graph order.
fn kind_indices(infos: &[NodeInfo], kind: NodeKind) -> Vec<NodeIndex> {
    infos
        .iter()
        .enumerate()
        .filter(|(_, i)| i.kind == kind)
        .map(|(i, _)| i as NodeIndex)
        .collect()
}

impl Runtime {
    /// Builds a runtime from its nodes, resolving every next node by name.
    pub fn new(nodes: Vec<Box<dyn AnyNode>>, trace_capacity: usize) -> Result<Runtime, GraphError> {
        if nodes.len() > usize::from(NodeIndex::MAX) {
            return Err(GraphError::TooMany);
        }
        let infos: Vec<NodeInfo> = nodes.iter().map(|n| n.info()).collect();
        for (i, a) in infos.iter().enumerate() {
            if infos[..i].iter().any(|b| b.name == a.name) {
                return Err(GraphError::Duplicate(a.name));
            }
        }
        let index = |name: &str| {
            infos
                .iter()
                .position(|i| i.name == name)
                .map(|p| p as NodeIndex)
        };
        let outputs = kind_indices(&infos, NodeKind::Output);
        let mut slots = Vec::with_capacity(nodes.len());
        for (node, info) in nodes.into_iter().zip(infos.iter().copied()) {
            let mut nexts = info
                .nexts
                .iter()
                .map(|n| {
                    index(n).ok_or(GraphError::UnknownNext {
                        node: info.name,
                        next: n,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if info.devices {
                nexts.extend_from_slice(&outputs);
            }
            slots.push(Slot {
                errors: vec![0; info.errors.len()],
                node,
                info,
                nexts,
                pending: Vec::with_capacity(FRAME_SIZE * 2),
                stats: NodeStats::default(),
            });
        }
        let inputs = kind_indices(&infos, NodeKind::Input);
        let epoll =
            epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| GraphError::Epoll(e.into()))?;
        Ok(Runtime {
            epoll,
            capture: Capture::default(),
            tracing: false,
            undeclared_next: 0,
            busy: 0,
            trace_quota: vec![0; slots.len()],
            ready: vec![0; slots.len().div_ceil(64)],
            idle_skip: vec![0; inputs.len()],
            slots,
            inputs,
            trace: TraceRing::new(trace_capacity),
            next_scratch: Vec::with_capacity(FRAME_SIZE),
            // As large as a pending frame: frames and pending frames trade vectors.
            buf_scratch: Vec::with_capacity(FRAME_SIZE * 2),
            extra: Vec::new(),
        })
    }

    /// The device output nodes ([`NodeKind::Output`]), in graph order: the `k`th is what a
    /// node declared with `+ devices` reaches at [`NextNodes::device`]`(k)`.
    pub fn outputs(&self) -> Vec<&'static str> {
        self.slots
            .iter()
            .filter(|s| s.info.kind == NodeKind::Output)
            .map(|s| s.info.name)
            .collect()
    }

    pub fn node_index(&self, name: &str) -> Option<NodeIndex> {
        self.slots
            .iter()
            .position(|s| s.info.name == name)
            .map(|p| p as NodeIndex)
    }

    /// `trace add NODE N`: trace the next `n` buffers that input node `name` produces.
    pub fn trace_add(&mut self, name: &str, n: u32) -> Result<(), TraceError> {
        match self.node_index(name) {
            Some(i) if self.slots[usize::from(i)].info.kind == NodeKind::Input => {
                self.trace_quota[usize::from(i)] += n;
                self.tracing = true;
                Ok(())
            }
            Some(_) => Err(TraceError::NotInput(name.to_string())),
            None => Err(TraceError::NoNode(name.to_string())),
        }
    }

    /// One pass: poll every input node, then run internal nodes until nothing is pending.
    /// Returns the buffers the input nodes produced.
    pub fn dispatch(&mut self, pool: &mut Pool) -> usize {
        let mut produced = 0;
        // One clock read per node call, as VPP does: a node is charged from the end of the
        // previous call (its frame's enqueue and trace marking included) to its own end.
        let mut t = clock::stamp();
        let start = t;
        for k in 0..self.inputs.len() {
            if self.idle_skip[k] > 0 {
                self.idle_skip[k] -= 1;
                continue;
            }
            let i = usize::from(self.inputs[k]);
            let mut out = std::mem::take(&mut self.buf_scratch);
            let mut next = std::mem::take(&mut self.next_scratch);
            out.clear();
            next.clear();
            {
                let s = &mut self.slots[i];
                let env = Env {
                    pool,
                    errors: &mut s.errors,
                    trace: &mut self.trace,
                    capture: &mut self.capture,
                    node: i as NodeIndex,
                    extra: &mut self.extra,
                    ready: &self.ready,
                    nexts: &s.nexts,
                };
                s.node.poll(env, FRAME_SIZE, &mut out, &mut next);
            }
            let n = out.len().min(next.len());
            let s = &mut self.slots[i];
            s.stats.calls += 1;
            s.stats.vectors += n as u64;
            let now = clock::stamp();
            s.stats.clocks += now.wrapping_sub(t);
            t = now;
            if n == 0 && s.node.idle() {
                self.idle_skip[k] = IDLE_POLL_EVERY - 1;
            }
            if n > 0 {
                if self.capture.wants(Point::Rx) {
                    for &b in &out[..n] {
                        let rx_if = pool.meta(b).rx_if;
                        self.capture.record(pool, Point::Rx, rx_if, b);
                    }
                }
                if self.trace_quota[i] > 0 {
                    for &b in &out[..n] {
                        if self.trace_quota[i] == 0 {
                            break;
                        }
                        pool.meta_mut(b).flags |= BUFFER_TRACED;
                        self.trace.push_start(i as NodeIndex, b);
                        self.trace_quota[i] -= 1;
                    }
                }
                self.enqueue(i, &out[..n], &next[..n], pool);
                produced += n;
            }
            self.enqueue_extra(i, pool);
            self.buf_scratch = out;
            self.next_scratch = next;
        }
        // Run pending frames in node order until the graph is empty.
        while let Some(i) = self.next_ready() {
            let mut frame = std::mem::take(&mut self.buf_scratch);
            frame.clear();
            if self.slots[i].pending.len() <= FRAME_SIZE {
                // The whole backlog is one frame: swap the vectors instead of copying.
                std::mem::swap(&mut frame, &mut self.slots[i].pending);
                self.ready[i / 64] &= !(1 << (i % 64));
            } else {
                frame.extend(self.slots[i].pending.drain(..FRAME_SIZE));
            }
            let mut next = std::mem::take(&mut self.next_scratch);
            next.clear();
            next.resize(frame.len(), 0);
            if self.tracing {
                for &b in &frame {
                    if pool.meta(b).flags & BUFFER_TRACED != 0 {
                        self.trace.push(i as NodeIndex, b, &[]);
                    }
                }
            }
            {
                let s = &mut self.slots[i];
                let env = Env {
                    pool,
                    errors: &mut s.errors,
                    trace: &mut self.trace,
                    capture: &mut self.capture,
                    node: i as NodeIndex,
                    extra: &mut self.extra,
                    ready: &self.ready,
                    nexts: &s.nexts,
                };
                s.node.process(env, &frame, &mut next);
            }
            self.enqueue_extra(i, pool);
            let s = &mut self.slots[i];
            s.stats.calls += 1;
            s.stats.vectors += frame.len() as u64;
            let now = clock::stamp();
            s.stats.clocks += now.wrapping_sub(t);
            t = now;
            self.enqueue_frame(i, frame, &next, pool);
            self.next_scratch = next;
        }
        for k in 0..self.inputs.len() {
            self.slots[usize::from(self.inputs[k])].node.end_dispatch();
        }
        if produced > 0 {
            // `t` is the last node's end: no clock read of its own.
            self.busy += t.wrapping_sub(start);
        }
        produced
    }

    /// Nanoseconds spent in dispatch loops that moved at least one buffer, since the
    /// runtime counters were cleared: with the time elapsed, how busy the worker is (a
    /// polling worker takes its whole core whatever this says).
    pub fn busy_ns(&self) -> u64 {
        clock::stamp_ns(self.busy)
    }

    /// Every node's [`Node::housekeeping`](crate::Node::housekeeping); the worker calls it
    /// before it sleeps and every few thousand dispatch loops.
    pub fn housekeeping(&mut self) {
        // Idle input nodes are polled at the next loop: the worker may be about to sleep,
        // and a command that wakes it must find them polled.
        self.idle_skip.fill(0);
        for s in &mut self.slots {
            s.node.housekeeping();
        }
    }

    /// Whether an input node holds a queue that must be polled (see
    /// [`Node::keeps_awake`](crate::Node::keeps_awake)): then the worker does not sleep.
    pub fn keeps_awake(&self) -> bool {
        self.inputs
            .iter()
            .any(|&k| self.slots[usize::from(k)].node.keeps_awake())
    }

    /// Sleeps until an input node's device signals work, `wake` becomes readable (the worker's
    /// command fd) or `timeout_ms` passes. Returns false at once, without sleeping, if an
    /// input node already has work. Interrupts are masked again before it returns, so a
    /// polling worker is never signalled.
    pub fn sleep(&mut self, wake: BorrowedFd<'_>, timeout_ms: i32) -> bool {
        let mut pending = false;
        for k in 0..self.inputs.len() {
            pending |= self.slots[usize::from(self.inputs[k])].node.arm(true);
        }
        let slept = !pending && {
            // Register the wake fds for this sleep only: the set of queues changes between
            // sleeps, and a sleep is rare enough (an idle worker) that two syscalls per fd cost
            // nothing that matters; nothing is allocated.
            let ep = &self.epoll;
            let mut watch = |fd: BorrowedFd<'_>| {
                // EEXIST (one fd handed twice) is harmless: it is watched already.
                let _ = epoll::add(ep, fd, epoll::EventData::new_u64(0), epoll::EventFlags::IN);
            };
            self.each_wake_fd(wake, &mut watch);
            let ts = rustix::event::Timespec {
                tv_sec: i64::from(timeout_ms / 1000),
                tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
            };
            let mut events = [core::mem::MaybeUninit::<epoll::Event>::uninit(); 1];
            let _ = epoll::wait(ep, &mut events[..], Some(&ts));
            let mut unwatch = |fd: BorrowedFd<'_>| {
                let _ = epoll::delete(ep, fd);
            };
            self.each_wake_fd(wake, &mut unwatch);
            true
        };
        for k in 0..self.inputs.len() {
            self.slots[usize::from(self.inputs[k])].node.arm(false);
        }
        slept
    }

    /// Hands `f` the worker's own `wake` fd and every fd the input nodes wake on.
    fn each_wake_fd(&self, wake: BorrowedFd<'_>, f: &mut dyn FnMut(BorrowedFd<'_>)) {
        f(wake);
        for &i in &self.inputs {
            self.slots[usize::from(i)].node.wake_fds(f);
        }
    }

    /// `pcap trace ... on`: starts capturing (what was captured before is discarded).
    pub fn pcap_start(&mut self, f: Filter) {
        self.capture.start(f);
    }

    /// `pcap trace off`: stops and returns the captured packets and how many did not fit.
    pub fn pcap_stop(&mut self) -> (Vec<Captured>, u64) {
        self.capture.stop()
    }

    /// Packets captured so far, if capturing.
    pub fn pcap_status(&self) -> Option<(Filter, usize)> {
        self.capture
            .filter()
            .map(|f| (f.clone(), self.capture.captured()))
    }

    /// The first slot, in node order, with a pending frame.
    #[inline]
    fn next_ready(&self) -> Option<usize> {
        let k = self.ready.iter().position(|&w| w != 0)?;
        Some(k * 64 + self.ready[k].trailing_zeros() as usize)
    }

    /// [`enqueue`](Self::enqueue) of a whole frame the runtime owns: when every buffer goes
    /// to one node whose pending frame is empty, the frame becomes that node's pending frame
    /// as it is (the vectors swap; no copy). `frame` (or the vector it swapped with) goes
    /// back to the scratch.
    fn enqueue_frame(&mut self, from: usize, mut frame: Vec<u32>, next: &[u16], pool: &mut Pool) {
        // The frame's one next, worked out once for both ways on.
        let one = if frame.len() == next.len() {
            uniform(next)
        } else {
            None
        };
        if let Some(n0) = one
            && n0 != CONSUMED
            && let Some(&to) = self.slots[from].nexts.get(usize::from(n0))
            && self.slots[usize::from(to)].pending.is_empty()
        {
            let to = usize::from(to);
            std::mem::swap(&mut frame, &mut self.slots[to].pending);
            self.ready[to / 64] |= 1 << (to % 64);
        } else {
            self.enqueue_as(from, &frame, next, one, pool);
        }
        self.buf_scratch = frame;
    }

    /// Appends `bufs` to slot `to`'s pending frame.
    #[inline]
    fn pend(&mut self, to: NodeIndex, bufs: &[u32]) {
        let to = usize::from(to);
        self.slots[to].pending.extend_from_slice(bufs);
        self.ready[to / 64] |= 1 << (to % 64);
    }

    /// Moves the buffers node `from` emitted beyond its frame ([`Ctx::emit`]) on.
    #[inline]
    fn enqueue_extra(&mut self, from: usize, pool: &mut Pool) {
        if self.extra.is_empty() {
            return;
        }
        let extra = std::mem::take(&mut self.extra);
        for &(b, n) in &extra {
            self.enqueue(from, &[b], &[n], pool);
        }
        self.extra = extra;
        self.extra.clear();
    }

    /// Moves buffers to the pending frames of their next nodes. A next index the node did not
    /// declare is a bug in that node: the buffer is freed and counted, never lost.
    fn enqueue(&mut self, from: usize, bufs: &[u32], next: &[u16], pool: &mut Pool) {
        let k = bufs.len().min(next.len());
        self.enqueue_as(from, &bufs[..k], &next[..k], uniform(&next[..k]), pool);
    }

    /// [`enqueue`](Self::enqueue) of `bufs` and `next` of one length, `one` the next index
    /// they all have (see [`uniform`]) if the caller worked it out.
    fn enqueue_as(
        &mut self,
        from: usize,
        bufs: &[u32],
        next: &[u16],
        one: Option<u16>,
        pool: &mut Pool,
    ) {
        // Most frames go to one next node whole: one bulk copy instead of a push per buffer.
        // A frame the node consumed whole (an output node's) needs no walk at all.
        if let Some(n0) = one {
            if n0 == CONSUMED {
                return;
            }
            if let Some(&to) = self.slots[from].nexts.get(usize::from(n0)) {
                self.pend(to, bufs);
                return;
            }
        }
        for (&b, &n) in bufs.iter().zip(next) {
            if n == CONSUMED {
                continue;
            }
            match self.slots[from].nexts.get(usize::from(n)) {
                Some(&to) => self.pend(to, &[b]),
                None => {
                    pool.free(b);
                    self.undeclared_next += 1;
                }
            }
        }
    }

    /// `show runtime`: per node name, kind, counters.
    pub fn runtime(&self) -> Vec<(&'static str, NodeKind, NodeStats)> {
        let per = clock::ns_per_stamp();
        self.slots
            .iter()
            .map(|s| {
                let stats = NodeStats {
                    clocks: (s.stats.clocks as f64 * per) as u64,
                    ..s.stats
                };
                (s.info.name, s.info.kind, stats)
            })
            .collect()
    }

    /// Buffers dropped because a node named a next index it never declared.
    pub fn undeclared_next_drops(&self) -> u64 {
        self.undeclared_next
    }

    /// `show errors`: (node, error name, count) for every non-zero counter.
    pub fn errors(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut v = Vec::new();
        for s in &self.slots {
            for (name, &n) in s.info.errors.iter().zip(&s.errors) {
                if n > 0 {
                    v.push((s.info.name, *name, n));
                }
            }
        }
        v
    }

    /// `show trace`: one block per traced buffer, its path through the nodes in order.
    pub fn show_trace(&self) -> String {
        let mut out = String::new();
        for (b, recs) in self.trace.by_buffer() {
            out.push_str(&format!("Packet (buffer {b})\n"));
            for (k, r) in recs.iter().enumerate() {
                // The runtime marks a traced buffer's arrival at a node with an empty record;
                // when the node added its own, print that one alone.
                if r.data().is_empty() && recs.get(k + 1).is_some_and(|n| n.node == r.node) {
                    continue;
                }
                let s = &self.slots[usize::from(r.node)];
                let text = if r.data().is_empty() {
                    String::new()
                } else {
                    s.node.format_trace(r.data())
                };
                out.push_str(&format!("  {:<16} {text}\n", s.info.name));
            }
        }
        out
    }

    pub fn clear_runtime(&mut self) {
        for s in &mut self.slots {
            s.stats = NodeStats::default();
        }
        self.busy = 0;
    }

    pub fn clear_errors(&mut self) {
        for s in &mut self.slots {
            s.errors.iter_mut().for_each(|e| *e = 0);
        }
    }

    /// Forgets all records and stops marking new buffers (buffers already marked keep
    /// their flag until freed).
    pub fn clear_trace(&mut self) {
        self.trace.clear();
        self.trace_quota.iter_mut().for_each(|q| *q = 0);
    }
}

/// The next index every buffer of a frame has, if they all have one. No early exit: the fold
/// compiles to a few wide compares for a whole frame.
#[inline(always)]
fn uniform(next: &[u16]) -> Option<u16> {
    let &n0 = next.first()?;
    (next.iter().fold(0, |acc, &n| acc | (n ^ n0)) == 0).then_some(n0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_robin_gives_every_queue_the_first_turn_in_turn() {
        let mut rr = super::RoundRobin::default();
        let firsts: Vec<usize> = (0..6).map(|_| rr.turn(3).next().unwrap()).collect();
        assert_eq!(firsts, [0, 1, 2, 0, 1, 2]);
        assert_eq!(rr.turn(3).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(rr.turn(3).collect::<Vec<_>>(), [1, 2, 0]);
        // Queues come and go: the turn stays in range.
        assert_eq!(rr.turn(1).collect::<Vec<_>>(), [0]);
        assert_eq!(rr.turn(0).count(), 0);
        assert_eq!(rr.turn(2).count(), 2);
    }

    use super::*;
    use buffer::PoolConfig;

    /// Produces `per_poll` one-byte buffers counting up from `start`.
    struct Gen {
        name: &'static str,
        per_poll: usize,
        value: u8,
    }

    crate::node! {
        Gen: "gen", Input;
        next GenNext { Classify = "classify" }
    }

    impl Node for Gen {
        fn name(&self) -> &'static str {
            self.name
        }
        fn poll(
            &mut self,
            ctx: &mut Ctx<'_, Self>,
            room: usize,
            out: &mut Vec<u32>,
            next: &mut Vec<u16>,
        ) {
            for _ in 0..self.per_poll.min(room) {
                let b = ctx.pool.from_bytes(&[self.value]).unwrap();
                self.value = self.value.wrapping_add(1);
                out.push(b);
                next.push(GenNext::Classify.into());
            }
        }
    }

    /// Even bytes go on, odd ones are dropped with a named error.
    struct Classify;

    crate::node! {
        Classify: "classify", Internal;
        next ClassifyNext { Sink = "sink", Drop = "error-drop" }
        error ClassifyError { Odd = "odd byte" }
        trace ClassifyTrace { value: u8 }
    }

    impl core::fmt::Display for ClassifyTrace {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            write!(f, "value {}", self.value)
        }
    }

    impl Node for Classify {
        fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
            for (b, n) in bufs.iter().zip(next.iter_mut()) {
                let v = ctx.pool.data(*b)[0];
                if ctx.is_traced(*b) {
                    ctx.trace(*b, ClassifyTrace { value: v });
                }
                if v.is_multiple_of(2) {
                    *n = ClassifyNext::Sink.into();
                } else {
                    ctx.count_error(ClassifyError::Odd);
                    *n = ClassifyNext::Drop.into();
                }
            }
        }
    }

    struct Sink(std::sync::Arc<std::sync::atomic::AtomicU64>);

    crate::node! { Sink: "sink", Internal; }

    impl Node for Sink {
        fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
            self.0
                .fetch_add(bufs.len() as u64, std::sync::atomic::Ordering::Relaxed);
            ctx.pool.free_bulk(bufs);
            next.fill(CONSUMED);
        }
    }

    struct Drop;

    crate::node! { Drop: "error-drop", Internal; }

    impl Node for Drop {
        fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
            ctx.pool.free_bulk(bufs);
            next.fill(CONSUMED);
        }
    }

    fn graph(sunk: &std::sync::Arc<std::sync::atomic::AtomicU64>) -> Runtime {
        Runtime::new(
            vec![
                Box::new(Gen {
                    name: "gen-a",
                    per_poll: 200,
                    value: 0,
                }),
                Box::new(Gen {
                    name: "gen-b",
                    per_poll: 200,
                    value: 1,
                }),
                Box::new(Classify),
                Box::new(Sink(sunk.clone())),
                Box::new(Drop),
            ],
            64,
        )
        .unwrap()
    }

    #[test]
    fn buffers_follow_their_nexts_and_are_all_accounted_for() {
        let sunk = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut rt = graph(&sunk);
        let mut pool = Pool::new(PoolConfig {
            count: 1024,
            data_size: 64,
            headroom: 0,
        })
        .unwrap();
        for _ in 0..10 {
            assert_eq!(rt.dispatch(&mut pool), 400);
        }
        assert_eq!(sunk.load(std::sync::atomic::Ordering::Relaxed), 2000);
        assert_eq!(rt.errors(), vec![("classify", "odd byte", 2000)]);
        assert_eq!(pool.available(), 1024, "every buffer was freed");
        let stats: std::collections::HashMap<_, _> =
            rt.runtime().into_iter().map(|(n, _, s)| (n, s)).collect();
        assert_eq!((stats["gen-a"].calls, stats["gen-a"].vectors), (10, 2000));
        // 400 pending buffers per pass run as a full frame of 256 and one of 144.
        assert_eq!(
            (stats["classify"].calls, stats["classify"].vectors),
            (20, 4000)
        );
        assert_eq!(stats["error-drop"].vectors, 2000);
        rt.clear_runtime();
        rt.clear_errors();
        assert!(rt.errors().is_empty());
        assert_eq!(rt.runtime()[0].2, NodeStats::default());
    }

    /// A sink that takes `ms` milliseconds over each frame.
    struct Slow(u64);

    crate::node! { Slow: "sink", Internal; }

    impl Node for Slow {
        fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
            std::thread::sleep(std::time::Duration::from_millis(self.0));
            ctx.pool.free_bulk(bufs);
            next.fill(CONSUMED);
        }
    }

    #[test]
    fn node_clocks_and_busy_time_are_nanoseconds() {
        let mut rt = Runtime::new(
            vec![
                Box::new(Gen {
                    name: "gen",
                    per_poll: 10,
                    value: 0,
                }),
                Box::new(Classify),
                Box::new(Slow(5)),
                Box::new(Drop),
            ],
            0,
        )
        .unwrap();
        let mut pool = Pool::new(PoolConfig {
            count: 64,
            data_size: 64,
            headroom: 0,
        })
        .unwrap();
        let t = std::time::Instant::now();
        for _ in 0..4 {
            rt.dispatch(&mut pool);
        }
        let real = t.elapsed().as_nanos() as u64;
        let stats: std::collections::HashMap<_, _> =
            rt.runtime().into_iter().map(|(n, _, s)| (n, s)).collect();
        // Four frames of 5 ms each in the sink; the clocks' rate is an estimate: 2% leeway.
        let sink = stats["sink"].clocks;
        assert!(sink >= 19_600_000, "sink {sink} ns for 4 x 5 ms");
        let all: u64 = stats.values().map(|s| s.clocks).sum();
        assert!(all <= real + real / 50, "{all} ns charged in {real} ns");
        let busy = rt.busy_ns();
        assert!(
            busy >= sink && busy <= real + real / 50,
            "busy {busy} ns, sink {sink}, {real}"
        );
    }

    #[test]
    fn trace_follows_marked_buffers_only() {
        let sunk = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut rt = graph(&sunk);
        let mut pool = Pool::new(PoolConfig {
            count: 1024,
            data_size: 64,
            headroom: 0,
        })
        .unwrap();
        rt.trace_add("gen-a", 2).unwrap();
        assert!(rt.trace_add("classify", 1).is_err());
        assert!(rt.trace_add("nope", 1).is_err());
        rt.dispatch(&mut pool);
        let t = rt.show_trace();
        assert_eq!(t.matches("Packet (buffer").count(), 2, "{t}");
        assert!(
            t.contains("gen-a") && t.contains("value 0") && t.contains("sink"),
            "{t}"
        );
        assert!(t.contains("value 1") && t.contains("error-drop"), "{t}");
        rt.clear_trace();
        rt.dispatch(&mut pool);
        assert_eq!(rt.show_trace(), "");
    }

    #[test]
    fn bad_graphs_are_refused_by_name() {
        struct Lost;
        crate::node! {
            Lost: "lost", Internal;
            next LostNext { Lookup = "ip4-lokup" }
        }
        impl Node for Lost {}
        let e = Runtime::new(vec![Box::new(Lost)], 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "node \"lost\": next node \"ip4-lokup\" does not exist"
        );
        let e = Runtime::new(vec![Box::new(Drop), Box::new(Drop)], 0).unwrap_err();
        assert!(matches!(e, GraphError::Duplicate("error-drop")), "{e:?}");
    }

    #[test]
    fn an_idle_input_is_polled_once_in_a_while_and_after_housekeeping() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        /// Counts its polls; idle while `idle` says so.
        struct Quiet(Arc<AtomicBool>, Arc<AtomicU64>);
        crate::node! { Quiet: "quiet", Input; }
        impl Node for Quiet {
            fn poll(
                &mut self,
                _: &mut Ctx<'_, Self>,
                _: usize,
                _: &mut Vec<u32>,
                _: &mut Vec<u16>,
            ) {
                self.1.fetch_add(1, Ordering::Relaxed);
            }
            fn idle(&self) -> bool {
                self.0.load(Ordering::Relaxed)
            }
        }
        let (idle, polls) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU64::new(0)));
        let gen_a = Gen {
            name: "gen",
            per_poll: 0,
            value: 0,
        };
        let mut rt = Runtime::new(
            vec![
                Box::new(Quiet(idle.clone(), polls.clone())),
                Box::new(gen_a),
                Box::new(Classify),
                Box::new(Sink(Arc::new(AtomicU64::new(0)))),
                Box::new(Drop),
            ],
            0,
        )
        .unwrap();
        let mut pool = Pool::new(PoolConfig::default()).unwrap();
        let calls = |rt: &Runtime, name| rt.runtime().iter().find(|r| r.0 == name).unwrap().2.calls;
        let n = u64::from(IDLE_POLL_EVERY);
        for _ in 0..2 * n {
            rt.dispatch(&mut pool);
        }
        assert_eq!(polls.load(Ordering::Relaxed), 2, "polled once in {n} loops");
        assert_eq!(
            calls(&rt, "gen"),
            2 * n,
            "a node with work is polled every loop"
        );
        rt.housekeeping();
        rt.dispatch(&mut pool);
        assert_eq!(
            polls.load(Ordering::Relaxed),
            3,
            "polled at once after housekeeping"
        );
        // Busy again (a queue placed on it): polled at its next turn, then every loop.
        idle.store(false, Ordering::Relaxed);
        for _ in 0..n {
            rt.dispatch(&mut pool);
        }
        assert_eq!(polls.load(Ordering::Relaxed), 4);
        for _ in 0..10 {
            rt.dispatch(&mut pool);
        }
        assert_eq!(polls.load(Ordering::Relaxed), 14);
    }
}
