//! How a node is declared and what it sees while it runs.
//!
//! A node is declared once, with [`node!`](crate::node): its name, whether it is polled or fed
//! frames, its next nodes as an enum, its error counters as an enum with their texts, and its
//! trace record as a small `Copy` struct with `Display` (VPP's `VLIB_REGISTER_NODE` with its
//! `foreach_*_error` list, in one place). The node's code then implements [`Node`]: it names
//! next nodes as `Next::Rewrite`, counts `Error::NoRoute` and traces a typed record, so a next
//! index, an error index and a trace layout can never drift from their names.
//!
//! The runtime holds nodes as [`AnyNode`] trait objects; every [`Node`] is one.

use core::fmt;
use core::marker::PhantomData;
use std::os::fd::BorrowedFd;

use buffer::Pool;

use crate::capture::{Capture, Point};
use crate::trace::{TRACE_DATA, TraceRing};
use crate::{BUFFER_TRACED, NodeIndex};

/// Whether the runtime polls a node or feeds it frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// Polled once per dispatch loop (device input).
    Input,
    /// Runs when buffers are pending for it.
    Internal,
    /// A device's output node: runs like [`Internal`](Self::Internal), and is the node that
    /// transmits on interfaces of its device kind. Every node whose next nodes end in
    /// `+ devices` gets an arc to each output node of the graph, in graph order, after its
    /// named ones: protocol nodes reach devices without naming any (VPP's adjacency carrying
    /// its interface's output next index).
    Output,
}

/// What a node is, as the runtime and `show` commands see it.
#[derive(Debug, Clone, Copy)]
pub struct NodeInfo {
    pub name: &'static str,
    pub kind: NodeKind,
    /// Next nodes by name, in the order of the node's `Next` enum.
    pub nexts: &'static [&'static str],
    /// After those, an arc to every [`NodeKind::Output`] node of the graph.
    pub devices: bool,
    /// Error counter texts, in the order of the node's `Error` enum.
    pub errors: &'static [&'static str],
}

/// A node's next nodes: an enum declared by [`node!`](crate::node).
pub trait NextNodes: Copy + 'static {
    /// The next nodes' names, by variant.
    const NAMES: &'static [&'static str];
    /// The variant's place in [`NAMES`](Self::NAMES): the value a node writes into `next`.
    fn index(self) -> u16;
    /// The list ends in `+ devices`: after the named next nodes come the graph's device
    /// output nodes, the `k`th of them at index [`device`](Self::device)`(k)`.
    const DEVICES: bool = false;
    /// The next index of the graph's `k`th device output node (a node declared with
    /// `+ devices`).
    #[inline(always)]
    fn device(k: u16) -> u16 {
        Self::NAMES.len() as u16 + k
    }
}

/// A node's error counters: an enum declared by [`node!`](crate::node).
pub trait ErrorCounters: Copy + 'static {
    /// The counters' texts as `show errors` prints them, by variant.
    const TEXTS: &'static [&'static str];
    fn index(self) -> usize;
}

/// A node's trace record: a small plain struct kept as bytes in the trace ring and read back
/// as itself when `show trace` formats it.
pub trait TraceData:
    Copy
    + fmt::Display
    + zerocopy::IntoBytes
    + zerocopy::FromBytes
    + zerocopy::Immutable
    + zerocopy::KnownLayout
    + 'static
{
}

impl<T> TraceData for T where
    T: Copy
        + fmt::Display
        + zerocopy::IntoBytes
        + zerocopy::FromBytes
        + zerocopy::Immutable
        + zerocopy::KnownLayout
        + 'static
{
}

/// The trace record of a node that adds nothing to the runtime's arrival record.
#[derive(
    Debug,
    Clone,
    Copy,
    zerocopy::IntoBytes,
    zerocopy::FromBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
#[repr(C)]
pub struct NoTrace;

impl fmt::Display for NoTrace {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

/// An enum with no variant, for a node without next nodes or without error counters.
#[derive(Debug, Clone, Copy)]
pub enum Never {}

impl NextNodes for Never {
    const NAMES: &'static [&'static str] = &[];
    fn index(self) -> u16 {
        match self {}
    }
}

impl ErrorCounters for Never {
    const TEXTS: &'static [&'static str] = &[];
    fn index(self) -> usize {
        match self {}
    }
}

/// What [`node!`](crate::node) declares about a node type.
pub trait Declare {
    const NAME: &'static str;
    const KIND: NodeKind;
    type Next: NextNodes;
    type Error: ErrorCounters;
    type Trace: TraceData;
}

/// A graph node's code. Declare the node with [`node!`](crate::node) first.
pub trait Node: Declare + Send + 'static {
    /// The node's name in the graph; [`Declare::NAME`] unless one type serves under several
    /// names.
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// Internal nodes: for each buffer of `bufs`, write its next node (`Next::X.into()`) into
    /// `next`, or [`CONSUMED`](crate::CONSUMED) if the node took the buffer (terminal nodes:
    /// output, drop).
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let _ = (ctx, bufs, next);
    }

    /// Input nodes: append up to `room` new buffers to `out` and their next nodes to `next`.
    fn poll(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        room: usize,
        out: &mut Vec<u32>,
        next: &mut Vec<u16>,
    ) {
        let _ = (ctx, room, out, next);
    }

    /// Input nodes that can sleep: `arm(true)` unmasks the devices' interrupts before the
    /// worker sleeps and returns true if work is already waiting (the lost-wakeup re-check:
    /// then the worker does not sleep); `arm(false)` masks them again and clears the
    /// notifications, after the sleep. Input nodes that cannot sleep keep the default.
    fn arm(&mut self, on: bool) -> bool {
        let _ = on;
        false
    }

    /// Input nodes: called once the graph has run dry at the end of a dispatch, when every
    /// buffer this node produced has been sent or dropped (single-copy memif input gives its
    /// peer's slots back here).
    fn end_dispatch(&mut self) {}

    /// Input nodes: hands `f` each fd that becomes readable when work arrives (interrupt
    /// eventfds).
    fn wake_fds(&self, f: &mut dyn FnMut(BorrowedFd<'_>)) {
        let _ = f;
    }

    /// Work that must not wait for a packet, done between dispatches (before the worker
    /// sleeps, and every few thousand loops of a worker that never does): an output node
    /// takes the control thread's commands here, so that a detached queue is closed (its
    /// socket, device or peer memory released) even when no packet comes its way again.
    fn housekeeping(&mut self) {}

    /// Input nodes: whether there is nothing to poll (no queue placed here). The runtime
    /// then polls the node only every [`IDLE_POLL_EVERY`](crate::IDLE_POLL_EVERY)th dispatch
    /// loop, and at the first loop after its housekeeping (which a worker does before it
    /// sleeps): the polls in which the node takes its commands. A queue placed on an idle
    /// node is polled within that many loops, or at once when the worker wakes for it. VPP
    /// disables an input node without interfaces the same way.
    fn idle(&self) -> bool {
        false
    }

    /// Input nodes: whether a queue placed here asked to be polled (an interface's `rx-mode
    /// polling`), which keeps the worker from sleeping whatever its own mode.
    fn keeps_awake(&self) -> bool {
        false
    }
}

/// The worker's state a node may touch while it runs, untyped: what the runtime hands an
/// [`AnyNode`].
#[derive(Debug)]
pub struct Env<'a> {
    pub(crate) pool: &'a mut Pool,
    pub(crate) errors: &'a mut [u64],
    pub(crate) trace: &'a mut TraceRing,
    pub(crate) capture: &'a mut Capture,
    pub(crate) node: NodeIndex,
    /// Buffers the node made and sent on besides its frame's ([`Ctx::emit`]).
    pub(crate) extra: &'a mut Vec<(u32, u16)>,
    /// The nodes with packets waiting in this dispatch (one bit each, by node index), and the
    /// node's next nodes: [`Ctx::next_waiting`].
    pub(crate) ready: &'a [u64],
    pub(crate) nexts: &'a [NodeIndex],
}

/// What a node of type `N` gets while it runs: the buffer pool, and its own error counters and
/// trace records by their declared types.
#[derive(Debug)]
pub struct Ctx<'a, N: Declare + ?Sized> {
    pub pool: &'a mut Pool,
    errors: &'a mut [u64],
    trace: &'a mut TraceRing,
    capture: &'a mut Capture,
    node: NodeIndex,
    extra: &'a mut Vec<(u32, u16)>,
    ready: &'a [u64],
    nexts: &'a [NodeIndex],
    _node: PhantomData<fn(&N)>,
}

impl<'a, N: Declare + ?Sized> Ctx<'a, N> {
    pub(crate) fn new(env: Env<'a>) -> Ctx<'a, N> {
        Ctx {
            pool: env.pool,
            errors: env.errors,
            trace: env.trace,
            capture: env.capture,
            node: env.node,
            extra: env.extra,
            ready: env.ready,
            nexts: env.nexts,
            _node: PhantomData,
        }
    }

    /// The same context for another node type with the same counters and trace record: for a
    /// node that runs another under its own name.
    pub fn retyped<M>(&mut self) -> Ctx<'_, M>
    where
        M: Declare<Error = N::Error, Trace = N::Trace> + ?Sized,
    {
        Ctx {
            pool: self.pool,
            errors: self.errors,
            trace: self.trace,
            capture: self.capture,
            node: self.node,
            extra: self.extra,
            ready: self.ready,
            nexts: self.nexts,
            _node: PhantomData,
        }
    }

    /// Whether next node `to` has packets waiting to run in this dispatch (sent to it by this
    /// node's earlier frames, or by another node). The runtime runs nodes in index order, a
    /// backlog of more than a frame a frame at a time: a node that sends some packets on by a
    /// shorter way than through `to` checks this first, so that none overtakes a packet of
    /// the same flow still waiting there.
    #[inline]
    pub fn next_waiting(&self, to: N::Next) -> bool {
        self.nexts
            .get(usize::from(to.index()))
            .is_some_and(|&n| self.ready[usize::from(n) / 64] & (1 << (n % 64)) != 0)
    }

    /// Sends buffer `b`, one this node made (a fragment, a copy), to next node `to`, besides
    /// the frame's own buffers: for the rare node that turns one packet into several. The
    /// runtime moves it once the node returns, after the frame's.
    pub fn emit(&mut self, b: u32, to: N::Next) {
        self.extra.push((b, to.index()));
    }

    /// [`emit`](Self::emit) to a next index: a device output node's, from
    /// [`NextNodes::device`], for a node declared with `+ devices`.
    pub fn emit_index(&mut self, b: u32, to: u16) {
        self.extra.push((b, to));
    }

    /// Whether packets at `point` are being captured (`pcap trace`); check once per frame.
    #[inline]
    pub fn capturing(&self, point: Point) -> bool {
        self.capture.wants(point)
    }

    /// Captures buffer `b` at `point` for interface `ifindex` if the capture filter matches.
    pub fn capture(&mut self, point: Point, ifindex: u32, b: u32) {
        self.capture.record(self.pool, point, ifindex, b);
    }

    /// Counts one occurrence of error `e`.
    #[inline]
    pub fn count_error(&mut self, e: N::Error) {
        self.count_errors(e, 1);
    }

    /// Counts `n` occurrences of error `e`.
    #[inline]
    pub fn count_errors(&mut self, e: N::Error, n: u64) {
        if let Some(c) = self.errors.get_mut(e.index()) {
            *c += n;
        }
    }

    /// Whether buffer `b` is being traced.
    #[inline]
    pub fn is_traced(&self, b: u32) -> bool {
        self.pool.meta(b).flags & BUFFER_TRACED != 0
    }

    /// Adds this node's record for traced buffer `b`.
    pub fn trace(&mut self, b: u32, record: N::Trace) {
        const {
            assert!(
                size_of::<N::Trace>() <= TRACE_DATA,
                "trace record too large"
            )
        };
        self.trace
            .push(self.node, b, zerocopy::IntoBytes::as_bytes(&record));
    }
}

/// A node as the runtime holds it: a [`Node`] with its declaration erased. Every `Node` is
/// one; nothing else needs to implement it.
pub trait AnyNode: Send {
    fn info(&self) -> NodeInfo;
    fn process(&mut self, env: Env<'_>, bufs: &[u32], next: &mut [u16]);
    fn poll(&mut self, env: Env<'_>, room: usize, out: &mut Vec<u32>, next: &mut Vec<u16>);
    fn arm(&mut self, on: bool) -> bool;
    fn end_dispatch(&mut self);
    fn wake_fds(&self, f: &mut dyn FnMut(BorrowedFd<'_>));
    fn housekeeping(&mut self);
    fn keeps_awake(&self) -> bool;
    fn idle(&self) -> bool;
    /// Turns one of this node's trace records back into text.
    fn format_trace(&self, data: &[u8]) -> String;
}

impl<N: Node> AnyNode for N {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: self.name(),
            kind: N::KIND,
            nexts: <N::Next as NextNodes>::NAMES,
            devices: <N::Next as NextNodes>::DEVICES,
            errors: <N::Error as ErrorCounters>::TEXTS,
        }
    }

    fn process(&mut self, env: Env<'_>, bufs: &[u32], next: &mut [u16]) {
        Node::process(self, &mut Ctx::new(env), bufs, next);
    }

    fn poll(&mut self, env: Env<'_>, room: usize, out: &mut Vec<u32>, next: &mut Vec<u16>) {
        Node::poll(self, &mut Ctx::new(env), room, out, next);
    }

    fn arm(&mut self, on: bool) -> bool {
        Node::arm(self, on)
    }

    fn end_dispatch(&mut self) {
        Node::end_dispatch(self);
    }

    fn wake_fds(&self, f: &mut dyn FnMut(BorrowedFd<'_>)) {
        Node::wake_fds(self, f);
    }

    fn housekeeping(&mut self) {
        Node::housekeeping(self);
    }

    fn keeps_awake(&self) -> bool {
        Node::keeps_awake(self)
    }

    fn idle(&self) -> bool {
        Node::idle(self)
    }

    fn format_trace(&self, data: &[u8]) -> String {
        match <N::Trace as zerocopy::FromBytes>::read_from_prefix(data) {
            Ok((t, _)) => t.to_string(),
            Err(_) => data.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

/// Declares a node: its type's name in the graph and kind, its next nodes and error counters
/// as enums, and its trace record.
///
/// ```
/// pub struct Classify;
///
/// graph::node! {
///     Classify: "classify", Internal;
///     next Next {
///         Sink = "sink",
///         Drop = "error-drop",
///     }
///     error Error {
///         Odd = "odd byte",
///     }
///     trace ClassifyTrace { value: u8 }
/// }
///
/// impl core::fmt::Display for ClassifyTrace {
///     fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
///         write!(f, "value {}", self.value)
///     }
/// }
///
/// assert_eq!(u16::from(Next::Drop), 1);
/// assert_eq!(<Error as graph::ErrorCounters>::TEXTS, ["odd byte"]);
/// ```
///
/// A node that hands packets to devices ends its next list in `+ devices` (`next Next { ... }
/// + devices`): the graph then adds an arc to each device output node ([`NodeKind::Output`]),
/// and the node sends to the `k`th with [`NextNodes::device`]`(k)`, never naming one.
///
/// `next` and `error` may be left out (a node with no next nodes, or no counters), and so may
/// `trace` (then the node adds no record of its own: [`NoTrace`]). `trace Name { field: Type,
/// .. }` declares the record as a `#[repr(C)]` struct of plain fields (the calling crate
/// depends on `zerocopy`; the fields must leave no padding) whose `Display` the node writes;
/// `trace Type;` names one declared elsewhere. The enums and the record are declared in the
/// calling module, public.
#[macro_export]
macro_rules! node {
    (
        $ty:ty : $name:literal, $kind:ident;
        $(next $next:ident { $($nv:ident = $nn:literal),* $(,)? } $(+ $devices:ident)?)?
        $(error $err:ident { $($ev:ident = $et:literal),* $(,)? })?
        $(trace $($trace:tt)+)?
    ) => {
        $(
            /// This node's next nodes.
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            #[repr(u16)]
            pub enum $next { $($nv),* }

            impl $crate::NextNodes for $next {
                const NAMES: &'static [&'static str] = &[$($nn),*];
                const DEVICES: bool = $crate::node!(@devices $($devices)?);
                #[inline(always)]
                fn index(self) -> u16 {
                    self as u16
                }
            }

            impl ::core::convert::From<$next> for u16 {
                #[inline(always)]
                fn from(n: $next) -> u16 {
                    n as u16
                }
            }
        )?
        $(
            /// This node's error counters.
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            #[repr(u16)]
            pub enum $err { $($ev),* }

            impl $crate::ErrorCounters for $err {
                const TEXTS: &'static [&'static str] = &[$($et),*];
                #[inline(always)]
                fn index(self) -> usize {
                    self as usize
                }
            }
        )?
        $($crate::node!(@trace_decl $($trace)+);)?

        impl $crate::Declare for $ty {
            const NAME: &'static str = $name;
            const KIND: $crate::NodeKind = $crate::NodeKind::$kind;
            type Next = $crate::node!(@or $($next)?);
            type Error = $crate::node!(@or $($err)?);
            type Trace = $crate::node!(@trace_type $($($trace)+)?);
        }
    };
    (@devices devices) => { true };
    (@devices) => { false };
    (@or $t:ident) => { $t };
    (@or) => { $crate::Never };
    (@trace_type $t:ident { $($f:tt)* }) => { $t };
    (@trace_type $t:ty;) => { $t };
    (@trace_type) => { $crate::NoTrace };
    (@trace_decl $t:ident { $($f:ident : $ft:ty),* $(,)? }) => {
        /// This node's trace record.
        #[derive(
            Debug,
            Clone,
            Copy,
            ::zerocopy::IntoBytes,
            ::zerocopy::FromBytes,
            ::zerocopy::Immutable,
            ::zerocopy::KnownLayout,
        )]
        #[repr(C)]
        pub struct $t { $(pub $f: $ft),* }
    };
    (@trace_decl $($other:tt)*) => {};
}
