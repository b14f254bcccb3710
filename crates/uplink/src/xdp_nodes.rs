//! The AF_XDP uplink's graph nodes, beside their device: `af-xdp-input` and `af-xdp-output`,
//! in the shape of the AF_PACKET ones ([`crate::nodes`]).
//!
//! The control thread opens an uplink and hands its queues to a worker's nodes as
//! [`QueueCommand`]s over a channel, which the nodes drain once per poll or frame (a
//! non-blocking `try_recv`, no lock on the packet path). A queue whose interface vanished is
//! closed on a thread of its own (closing an AF_XDP socket, and the BPF link with the last
//! queue, waits for an RCU grace period); one whose interface is merely down is kept, since
//! the kernel resumes it when the link comes back.
//!
//! A sleeping worker is woken by the sockets' POLLIN, which the kernel raises whenever it puts
//! frames on an rx ring; before it sleeps, `arm` refills every fill ring and kicks a
//! zero-copy driver that stopped for want of fill buffers (`XDP_USE_NEED_WAKEUP`).

use std::os::fd::BorrowedFd;

use graph::{CONSUMED, Ctx, Node, Point};

use crate::af_packet::LinkError;
use crate::af_xdp::{RxQueue, TxQueue};
use crate::nodes::{Closer, RunOutput, TxTable};

/// Hands an AF_XDP uplink's queues to a worker (or takes them back).
#[derive(Debug)]
pub enum QueueCommand {
    /// Poll this receive queue; its frames get `rx_if = ifindex`.
    Rx { ifindex: u32, queue: RxQueue },
    /// Send packets whose `tx_if` is `ifindex` on this queue (replacing any earlier one).
    Tx { ifindex: u32, queue: TxQueue },
    /// Drop every queue of `ifindex` (closing its sockets, and the XDP program with the last).
    Detach { ifindex: u32 },
}

impl graph::commands::QueueCommands for QueueCommand {
    fn detach(ifindex: u32) -> QueueCommand {
        QueueCommand::Detach { ifindex }
    }
}

/// The worker's AF_XDP nodes, fed by the control thread through `rx` (receive queues, for
/// `af-xdp-input`) and `tx` (transmit queues, for `af-xdp-output`).
pub fn device_nodes(
    rx: impl Into<graph::commands::Commands<QueueCommand>>,
    tx: impl Into<graph::commands::Commands<QueueCommand>>,
) -> (AfXdpInput, AfXdpOutput) {
    (AfXdpInput::new(rx), AfXdpOutput::new(tx))
}

/// Check every queue's link this often when the worker never sleeps (a busy poller does
/// not get `arm`, which checks before each sleep).
const LINK_CHECK_EVERY: u32 = 1 << 16;

/// `af-xdp-input`: polls every AF_XDP receive queue placed on this worker.
#[derive(Debug)]
pub struct AfXdpInput {
    queues: Vec<InputQueue>,
    /// Which queue is polled first: each in turn (a flooded one must not starve the rest).
    turn: graph::RoundRobin,
    commands: graph::commands::Commands<QueueCommand>,
    scratch: Vec<u32>,
    polls: u32,
    /// Link changes seen while arming (no counters there), counted at the next poll.
    link_events: u64,
    closer: Closer<RxQueue>,
}

#[derive(Debug)]
struct InputQueue {
    ifindex: u32,
    queue: RxQueue,
    /// The link was down at the last check: a change is counted once, not at every check.
    down: bool,
    vanished: bool,
}

impl AfXdpInput {
    pub fn new(commands: impl Into<graph::commands::Commands<QueueCommand>>) -> AfXdpInput {
        AfXdpInput {
            queues: Vec::new(),
            turn: graph::RoundRobin::default(),
            commands: commands.into(),
            scratch: Vec::with_capacity(graph::FRAME_SIZE),
            polls: 0,
            link_events: 0,
            closer: Closer::new("af-xdp-close"),
        }
    }

    /// Hands the queues `gone` picks to the closer thread.
    fn close_where(&mut self, gone: impl Fn(&InputQueue) -> bool) {
        for q in self.queues.extract_if(.., |q| gone(q)) {
            self.closer.close(q.queue);
        }
    }

    /// Asks each queue's socket about its link; counts a link going down (once) or
    /// vanishing, and marks vanished queues for removal. True if any vanished.
    fn check_links(&mut self) -> bool {
        let mut any = false;
        for q in &mut self.queues {
            match q.queue.check_link() {
                Ok(()) => q.down = false,
                Err(LinkError::Down) => {
                    if !q.down {
                        q.down = true;
                        self.link_events += 1;
                    }
                }
                Err(LinkError::Vanished) => {
                    q.vanished = true;
                    self.link_events += 1;
                    any = true;
                }
            }
        }
        any
    }
}

graph::node! {
    AfXdpInput: "af-xdp-input", Input;
    next InputNext {
        EthernetInput = "ethernet-input",
    }
    error InputError {
        NoBuffer = "no buffer, frame dropped",
        BadDesc = "descriptor outside the UMEM, frame dropped",
        LinkDown = "link down or vanished",
    }
}

impl Node for AfXdpInput {
    fn idle(&self) -> bool {
        self.queues.is_empty()
    }

    fn arm(&mut self, on: bool) -> bool {
        if !on {
            return false;
        }
        // Before sleeping: the kernel's counters, the links, then refill and the lost-wakeup
        // re-check (frames on an rx ring mean: do not sleep).
        for q in &mut self.queues {
            q.queue.refresh_kernel_stats();
        }
        let mut pending = self.check_links() || self.link_events != 0;
        for q in &mut self.queues {
            pending |= !q.vanished && q.queue.arm();
        }
        pending
    }

    fn wake_fds(&self, f: &mut dyn FnMut(BorrowedFd<'_>)) {
        for q in &self.queues {
            f(q.queue.fd());
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
                QueueCommand::Rx { ifindex, queue } => self.queues.push(InputQueue {
                    ifindex,
                    queue,
                    down: false,
                    vanished: false,
                }),
                QueueCommand::Detach { ifindex } => self.close_where(|q| q.ifindex == ifindex),
                QueueCommand::Tx { .. } => {}
            }
        }
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(LINK_CHECK_EVERY) {
            self.check_links();
        }
        if self.link_events != 0 {
            ctx.count_errors(InputError::LinkDown, self.link_events);
            self.link_events = 0;
            self.close_where(|q| q.vanished);
        }
        for i in self.turn.turn(self.queues.len()) {
            let q = &mut self.queues[i];
            let left = room.saturating_sub(out.len());
            if left == 0 {
                break;
            }
            self.scratch.clear();
            let st = q.queue.recv(ctx.pool, &mut self.scratch, left);
            for &b in &self.scratch {
                ctx.pool.meta_mut(b).rx_if = q.ifindex;
            }
            out.extend_from_slice(&self.scratch);
            if st.dropped() != 0 {
                ctx.count_errors(InputError::NoBuffer, st.no_buffer as u64);
                ctx.count_errors(InputError::BadDesc, st.bad as u64);
            }
        }
        next.resize(out.len(), InputNext::EthernetInput.into());
    }
}

/// `af-xdp-output`: transmits each buffer on the AF_XDP transmit queue of its `tx_if`, then
/// frees it.
#[derive(Debug)]
pub struct AfXdpOutput {
    queues: TxTable<TxQueue>,
    commands: graph::commands::Commands<QueueCommand>,
    run: Vec<u32>,
}

graph::node! {
    AfXdpOutput: "af-xdp-output", Output;
    error OutputError {
        NoTx = "interface has no tx queue",
        RingFull = "no free tx frame in the UMEM",
        Oversize = "frame larger than the MTU or a UMEM frame",
        Malformed = "frame shorter than an Ethernet header or payload unreadable",
        LinkDown = "link down or vanished",
    }
}

impl AfXdpOutput {
    pub fn new(commands: impl Into<graph::commands::Commands<QueueCommand>>) -> AfXdpOutput {
        AfXdpOutput {
            queues: TxTable::new("af-xdp-close"),
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

impl RunOutput for AfXdpOutput {
    fn run(&mut self) -> &mut Vec<u32> {
        &mut self.run
    }

    fn flush_run(&mut self, ctx: &mut Ctx<'_, Self>, ifindex: u32) {
        if self.run.is_empty() {
            return;
        }
        let n = self.run.len() as u64;
        let Some(q) = self.queues.get_mut(ifindex) else {
            ctx.count_errors(OutputError::NoTx, n);
            ctx.pool.free_bulk(&self.run);
            self.run.clear();
            return;
        };
        match q.send(ctx.pool, &self.run) {
            Ok(st) => {
                if ctx.capturing(Point::Tx) {
                    // Every packet the queue consumed, an oversize one it dropped included,
                    // as memif's output does.
                    for &b in &self.run[..st.consumed] {
                        ctx.capture(Point::Tx, ifindex, b);
                    }
                }
                if st.consumed < self.run.len() {
                    ctx.count_errors(OutputError::RingFull, (self.run.len() - st.consumed) as u64);
                }
                if st.oversize + st.malformed != 0 {
                    ctx.count_errors(OutputError::Oversize, st.oversize as u64);
                    ctx.count_errors(OutputError::Malformed, st.malformed as u64);
                }
            }
            Err(e) => {
                if e == LinkError::Vanished {
                    self.queues.close(ifindex);
                }
                ctx.count_errors(OutputError::LinkDown, n);
            }
        }
        ctx.pool.free_bulk(&self.run);
        self.run.clear();
    }
}

impl Node for AfXdpOutput {
    fn housekeeping(&mut self) {
        self.take_commands();
    }

    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        self.take_commands();
        self.send_runs(ctx, bufs);
        next.fill(CONSUMED);
    }
}
