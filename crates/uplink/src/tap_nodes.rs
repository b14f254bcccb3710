//! The tap's graph nodes, in the shape of the AF_PACKET ones: `tap-input` reads every queue
//! placed on this worker, `tap-output` writes each packet to its `tx_if`'s queue. Queues
//! arrive and leave as [`QueueCommand`]s from the control thread (a `try_recv` per poll or
//! frame, no lock on the packet path). A tap fd is level-triggered readable, so an idle
//! worker sleeps on it (interrupt and adaptive modes) with no re-check to make. A queue whose
//! device vanished (deleted inside the pod; our fds keep the pod's namespace itself alive) is
//! closed by the node that holds it; one whose device is merely down is kept.

use std::os::fd::BorrowedFd;

use graph::{CONSUMED, Ctx, Node, Point};

use crate::nodes::{Closer, RunOutput, TxTable};
use crate::tap::{RxQueue, TxQueue};

/// Hands a tap's queues to a worker (or takes them back).
#[derive(Debug)]
pub enum QueueCommand {
    /// Read this queue; its frames get `rx_if = ifindex`.
    Rx { ifindex: u32, queue: RxQueue },
    /// Write packets whose `tx_if` is `ifindex` on this queue (replacing any earlier one).
    Tx { ifindex: u32, queue: TxQueue },
    /// Drop every queue of `ifindex` (closing its fds).
    Detach { ifindex: u32 },
}

impl graph::commands::QueueCommands for QueueCommand {
    fn detach(ifindex: u32) -> QueueCommand {
        QueueCommand::Detach { ifindex }
    }
}

/// The worker's tap nodes.
pub fn device_nodes(
    rx: impl Into<graph::commands::Commands<QueueCommand>>,
    tx: impl Into<graph::commands::Commands<QueueCommand>>,
) -> (TapInput, TapOutput) {
    (TapInput::new(rx), TapOutput::new(tx))
}

/// `tap-input`.
#[derive(Debug)]
pub struct TapInput {
    queues: Vec<(u32, RxQueue)>,
    turn: graph::RoundRobin,
    commands: graph::commands::Commands<QueueCommand>,
    scratch: Vec<u32>,
    closer: Closer<RxQueue>,
}

impl TapInput {
    pub fn new(commands: impl Into<graph::commands::Commands<QueueCommand>>) -> TapInput {
        TapInput {
            queues: Vec::new(),
            turn: graph::RoundRobin::default(),
            commands: commands.into(),
            scratch: Vec::with_capacity(graph::FRAME_SIZE),
            closer: Closer::new("tap-close"),
        }
    }

    fn close(&mut self, ifindex: u32) {
        for (_, q) in self.queues.extract_if(.., |(i, _)| *i == ifindex) {
            self.closer.close(q);
        }
    }
}

graph::node! {
    TapInput: "tap-input", Input;
    next InputNext {
        EthernetInput = "ethernet-input",
    }
    error InputError {
        NoBuffer = "no buffer, frame dropped",
        Gso = "GSO super-frame dropped (not TCP/IPv4, or segments under 536 bytes)",
        SuperFrame = "TCP super-frame taken whole (not an error)",
        BadFrame = "frame shorter than an Ethernet header or bad offload header, dropped",
        Vanished = "tap device vanished (deleted inside its namespace)",
    }
}

impl Node for TapInput {
    fn idle(&self) -> bool {
        self.queues.is_empty()
    }

    fn wake_fds(&self, f: &mut dyn FnMut(BorrowedFd<'_>)) {
        for (_, q) in &self.queues {
            f(q.fd());
        }
    }

    fn poll(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        room: usize,
        out: &mut Vec<u32>,
        next: &mut Vec<u16>,
    ) {
        while let Some(c) = self.commands.try_recv() {
            match c {
                QueueCommand::Rx { ifindex, queue } => self.queues.push((ifindex, queue)),
                QueueCommand::Detach { ifindex } => self.close(ifindex),
                QueueCommand::Tx { .. } => {}
            }
        }
        let mut vanished = Vec::new();
        for k in self.turn.turn(self.queues.len()) {
            let left = room.saturating_sub(out.len());
            if left == 0 {
                break;
            }
            let (ifindex, q) = &mut self.queues[k];
            self.scratch.clear();
            let st = q.recv(ctx.pool, &mut self.scratch, left);
            for &b in &self.scratch {
                ctx.pool.meta_mut(b).rx_if = *ifindex;
            }
            out.extend_from_slice(&self.scratch);
            if st.no_buffer + st.gso + st.bad_frame + st.super_frames != 0 {
                ctx.count_errors(InputError::SuperFrame, u64::from(st.super_frames));
                ctx.count_errors(InputError::NoBuffer, u64::from(st.no_buffer));
                ctx.count_errors(InputError::Gso, u64::from(st.gso));
                ctx.count_errors(InputError::BadFrame, u64::from(st.bad_frame));
            }
            if st.vanished {
                vanished.push(k);
            }
        }
        if !vanished.is_empty() {
            ctx.count_errors(InputError::Vanished, vanished.len() as u64);
            // The turn visits queues in a rotated order: remove from the highest index down.
            vanished.sort_unstable();
            for &k in vanished.iter().rev() {
                let (_, q) = self.queues.remove(k);
                self.closer.close(q);
            }
        }
        next.resize(out.len(), InputNext::EthernetInput.into());
    }
}

/// `tap-output`: writes each buffer on the tap queue of its `tx_if`, then frees it.
#[derive(Debug)]
pub struct TapOutput {
    queues: TxTable<TxQueue>,
    commands: graph::commands::Commands<QueueCommand>,
    run: Vec<u32>,
}

graph::node! {
    TapOutput: "tap-output", Output;
    error OutputError {
        NoTx = "interface has no tx queue",
        NoRoom = "tap queue full",
        Malformed = "frame shorter than an Ethernet header or payload unreadable",
        LinkDown = "tap device down or vanished",
        Coalesced = "TCP segment written in a super-frame (not an error)",
        Whole = "TCP super-frame written whole (not an error)",
    }
}

impl TapOutput {
    pub fn new(commands: impl Into<graph::commands::Commands<QueueCommand>>) -> TapOutput {
        TapOutput {
            queues: TxTable::new("tap-close"),
            commands: commands.into(),
            run: Vec::with_capacity(graph::FRAME_SIZE),
        }
    }

    /// Takes the control thread's queue hand-overs and detachments.
    fn take_commands(&mut self) {
        while let Some(c) = self.commands.try_recv() {
            match c {
                QueueCommand::Tx { ifindex, queue } => self.queues.install(ifindex, queue),
                QueueCommand::Detach { ifindex } => self.queues.close(ifindex),
                QueueCommand::Rx { .. } => {}
            }
        }
    }
}

impl RunOutput for TapOutput {
    fn run(&mut self) -> &mut Vec<u32> {
        &mut self.run
    }

    fn flush_run(&mut self, ctx: &mut Ctx<'_, Self>, ifindex: u32) {
        if self.run.is_empty() {
            return;
        }
        let n = self.run.len();
        let Some(q) = self.queues.get_mut(ifindex) else {
            ctx.count_errors(OutputError::NoTx, n as u64);
            ctx.pool.free_bulk(&self.run);
            self.run.clear();
            return;
        };
        let st = q.send(ctx.pool, &self.run);
        if ctx.capturing(Point::Tx) {
            for &b in &self.run[..st.consumed] {
                ctx.capture(Point::Tx, ifindex, b);
            }
        }
        let left = (n - st.consumed) as u64;
        if st.malformed != 0 {
            ctx.count_errors(OutputError::Malformed, st.malformed as u64);
        }
        if st.coalesced != 0 {
            ctx.count_errors(OutputError::Coalesced, st.coalesced as u64);
        }
        if st.whole != 0 {
            ctx.count_errors(OutputError::Whole, st.whole as u64);
        }
        if st.link_down || st.vanished {
            ctx.count_errors(OutputError::LinkDown, left);
        } else if left != 0 {
            ctx.count_errors(OutputError::NoRoom, left);
        }
        if st.vanished {
            self.queues.close(ifindex);
        }
        ctx.pool.free_bulk(&self.run);
        self.run.clear();
    }
}

impl Node for TapOutput {
    fn housekeeping(&mut self) {
        self.take_commands();
    }

    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        self.take_commands();
        self.send_runs(ctx, bufs);
        next.fill(CONSUMED);
    }
}
