//! `memif-input` and `interface-output` over memif primary queues.
//!
//! The control thread owns the memif sockets; when an interface connects it sends its queues
//! to the worker's nodes as [`QueueCommand`]s over a channel, which the nodes drain once per
//! poll or frame (a non-blocking `try_recv`, no lock on the packet path). A queue whose link
//! went down is dropped by the node that holds it.

use std::sync::mpsc::Receiver;

use graph::{CONSUMED, Ctx, Node, NodeInfo, NodeKind};
use memif::{PrimaryRx, PrimaryTx};

/// Hands a connected interface's queues to a worker (or takes them back).
#[derive(Debug)]
pub enum QueueCommand {
    Rx { ifindex: u32, queue: PrimaryRx },
    Tx { ifindex: u32, queue: PrimaryTx },
    Detach { ifindex: u32 },
}

/// `memif-input`: polls every rx queue placed on this worker.
#[derive(Debug)]
pub struct MemifInput {
    queues: Vec<(u32, PrimaryRx)>,
    commands: Receiver<QueueCommand>,
    scratch: Vec<u32>,
}

const E_LINK_DOWN: usize = 0;

impl MemifInput {
    pub fn new(commands: Receiver<QueueCommand>) -> MemifInput {
        MemifInput {
            queues: Vec::new(),
            commands,
            scratch: Vec::with_capacity(graph::FRAME_SIZE),
        }
    }
}

impl Node for MemifInput {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "memif-input",
            kind: NodeKind::Input,
            nexts: &["ethernet-input"],
            errors: &["link down, queue released"],
        }
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>, room: usize, out: &mut Vec<u32>, next: &mut Vec<u16>) {
        while let Ok(c) = self.commands.try_recv() {
            match c {
                QueueCommand::Rx { ifindex, queue } => self.queues.push((ifindex, queue)),
                QueueCommand::Detach { ifindex } => self.queues.retain(|(i, _)| *i != ifindex),
                QueueCommand::Tx { .. } => {}
            }
        }
        let mut down = false;
        for (ifindex, q) in &mut self.queues {
            let left = room - out.len();
            if left == 0 {
                break;
            }
            self.scratch.clear();
            match q.recv(ctx.pool, &mut self.scratch, left) {
                Ok(_) => {
                    for &b in &self.scratch {
                        ctx.pool.meta_mut(b).rx_if = *ifindex;
                        out.push(b);
                        next.push(0);
                    }
                }
                Err(_) => down = true,
            }
        }
        if down {
            let before = self.queues.len();
            self.queues.retain(|(_, q)| q.is_up());
            ctx.count_errors(E_LINK_DOWN, (before - self.queues.len()) as u64);
        }
    }
}

/// `interface-output`: transmits on the memif tx queue of each buffer's `tx_if`.
#[derive(Debug)]
pub struct InterfaceOutput {
    /// Indexed by interface index.
    queues: Vec<Option<PrimaryTx>>,
    commands: Receiver<QueueCommand>,
    run: Vec<u32>,
}

const E_NO_TX: usize = 0;
const E_RING_FULL: usize = 1;

impl InterfaceOutput {
    pub fn new(commands: Receiver<QueueCommand>) -> InterfaceOutput {
        InterfaceOutput {
            queues: Vec::new(),
            commands,
            run: Vec::with_capacity(graph::FRAME_SIZE),
        }
    }

    fn flush(&mut self, ctx: &mut Ctx<'_>, ifindex: u32) {
        if self.run.is_empty() {
            return;
        }
        let sent = match self
            .queues
            .get_mut(ifindex as usize)
            .and_then(|q| q.as_mut())
        {
            Some(q) => match q.send(ctx.pool, &self.run) {
                Ok(n) => n,
                Err(_) => {
                    self.queues[ifindex as usize] = None;
                    ctx.count_errors(E_NO_TX, self.run.len() as u64);
                    0
                }
            },
            None => {
                ctx.count_errors(E_NO_TX, self.run.len() as u64);
                self.run.len()
            }
        };
        if sent < self.run.len()
            && self
                .queues
                .get(ifindex as usize)
                .is_some_and(|q| q.is_some())
        {
            ctx.count_errors(E_RING_FULL, (self.run.len() - sent) as u64);
        }
        ctx.pool.free_bulk(&self.run);
        self.run.clear();
    }
}

impl Node for InterfaceOutput {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "interface-output",
            kind: NodeKind::Internal,
            nexts: &[],
            errors: &["interface not connected", "tx ring full (no free slots)"],
        }
    }

    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
        while let Ok(c) = self.commands.try_recv() {
            match c {
                QueueCommand::Tx { ifindex, queue } => {
                    let i = ifindex as usize;
                    if self.queues.len() <= i {
                        self.queues.resize_with(i + 1, || None);
                    }
                    self.queues[i] = Some(queue);
                }
                QueueCommand::Detach { ifindex } => {
                    if let Some(q) = self.queues.get_mut(ifindex as usize) {
                        *q = None;
                    }
                }
                QueueCommand::Rx { .. } => {}
            }
        }
        // Send runs of consecutive buffers for the same interface (a frame is usually one run).
        let mut current = None;
        for &b in bufs {
            let tx = ctx.pool.meta(b).tx_if;
            if current != Some(tx) {
                if let Some(c) = current {
                    self.flush(ctx, c);
                }
                current = Some(tx);
            }
            self.run.push(b);
        }
        if let Some(c) = current {
            self.flush(ctx, c);
        }
        next.fill(CONSUMED);
    }
}
