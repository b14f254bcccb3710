//! One worker's graph: its nodes in slots with their pending frames, counters and resolved
//! next nodes, and building it. Running it is [`dispatch`]; between runs, housekeeping and
//! sleeping are [`sleep`]; what the control thread asks of it (`show`, `clear`, `trace`,
//! `pcap`) is [`show`].

mod dispatch;
mod show;
mod sleep;

use std::os::fd::OwnedFd;

use rustix::event::epoll;

use crate::{
    AnyNode, Capture, FRAME_SIZE, GraphError, NodeIndex, NodeInfo, NodeKind, NodeStats, TraceRing,
};

struct Slot {
    node: Box<dyn AnyNode>,
    info: NodeInfo,
    nexts: Vec<NodeIndex>,
    pending: Vec<u32>,
    stats: NodeStats,
    errors: Vec<u64>,
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
}
