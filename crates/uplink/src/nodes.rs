//! The AF_PACKET uplink's graph nodes, beside their device: `af-packet-input` and
//! `af-packet-output`, in the shape of memif's.
//!
//! The control thread opens an uplink and hands its queues to a worker's nodes as
//! [`QueueCommand`]s over a channel, which the nodes drain once per poll or frame (a
//! non-blocking `try_recv`, no lock on the packet path). A queue whose interface vanished is
//! dropped by the node that holds it; one whose interface is merely down is kept, since the
//! kernel resumes it when the link comes back.

use std::os::fd::BorrowedFd;
use std::sync::mpsc::{Sender, channel};

use graph::{CONSUMED, Ctx, Node, Point};

use crate::af_packet::{LinkError, RxQueue, TxQueue};

/// Hands an uplink's queues to a worker (or takes them back).
#[derive(Debug)]
pub enum QueueCommand {
    /// Poll this receive queue; its frames get `rx_if = ifindex`.
    Rx { ifindex: u32, queue: RxQueue },
    /// Send packets whose `tx_if` is `ifindex` on this queue (replacing any earlier one).
    Tx { ifindex: u32, queue: TxQueue },
    /// Drop every queue of `ifindex` (closing its sockets).
    Detach { ifindex: u32 },
}

impl graph::commands::QueueCommands for QueueCommand {
    fn detach(ifindex: u32) -> QueueCommand {
        QueueCommand::Detach { ifindex }
    }
}

/// The worker's uplink nodes, fed by the control thread through `rx` (receive queues, for
/// `af-packet-input`) and `tx` (transmit queues, for `af-packet-output`).
pub fn device_nodes(
    rx: impl Into<graph::commands::Commands<QueueCommand>>,
    tx: impl Into<graph::commands::Commands<QueueCommand>>,
) -> (AfPacketInput, AfPacketOutput) {
    (AfPacketInput::new(rx), AfPacketOutput::new(tx))
}

/// Closes queues away from the worker. Closing a packet socket waits for an RCU grace period
/// (`synchronize_net()` in the kernel's `packet_release`), and so does closing an AF_XDP
/// socket (`xsk_unbind_dev`), a tun fd (`tun_detach`) or the link that holds an XDP program: milliseconds to tens of
/// milliseconds, which a worker must not stall for when an interface vanishes or is
/// detached. The thread is made with the node, on the control thread, and ends with it.
#[derive(Debug)]
pub(crate) struct Closer<T>(Option<Sender<T>>);

impl<T: Send + 'static> Closer<T> {
    pub(crate) fn new(thread: &str) -> Closer<T> {
        let (tx, rx) = channel::<T>();
        let spawned = std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || rx.into_iter().for_each(drop))
            .is_ok();
        // Without the thread, queues close inline: slower, never wrong.
        Closer(spawned.then_some(tx))
    }

    pub(crate) fn close(&self, q: T) {
        if let Some(tx) = &self.0 {
            // The thread only ends when this sender drops; if it died, closing inline here
            // (the returned value dropping) is the fallback.
            let _ = tx.send(q);
        }
    }
}

/// An output node's transmit queues, by interface index: a queue handed over replaces (and
/// closes) the interface's previous one; a detached one is closed off the worker.
#[derive(Debug)]
pub(crate) struct TxTable<T: Send + 'static> {
    queues: Vec<Option<T>>,
    closer: Closer<T>,
}

impl<T: Send + 'static> TxTable<T> {
    pub(crate) fn new(thread: &str) -> TxTable<T> {
        TxTable {
            queues: Vec::new(),
            closer: Closer::new(thread),
        }
    }

    /// Interface `ifindex` transmits on `q` from now on.
    pub(crate) fn install(&mut self, ifindex: u32, q: T) {
        let i = ifindex as usize;
        if self.queues.len() <= i {
            self.queues.resize_with(i + 1, || None);
        }
        self.close(ifindex);
        self.queues[i] = Some(q);
    }

    /// Closes interface `ifindex`'s queue, if it has one.
    pub(crate) fn close(&mut self, ifindex: u32) {
        if let Some(q) = self.queues.get_mut(ifindex as usize).and_then(Option::take) {
            self.closer.close(q);
        }
    }

    pub(crate) fn get_mut(&mut self, ifindex: u32) -> Option<&mut T> {
        self.queues
            .get_mut(ifindex as usize)
            .and_then(Option::as_mut)
    }
}

/// An output node that sends each interface's packets in runs (a frame is usually one run):
/// one kick of the device per run.
pub(crate) trait RunOutput: Node + Sized {
    /// The run being gathered.
    fn run(&mut self) -> &mut Vec<u32>;

    /// Sends the gathered run on interface `ifindex`, frees its buffers and empties it.
    fn flush_run(&mut self, ctx: &mut Ctx<'_, Self>, ifindex: u32);

    /// Splits `bufs` into runs of consecutive buffers for one interface, each flushed.
    fn send_runs(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32]) {
        let mut current = None;
        for &b in bufs {
            let tx = ctx.pool.meta(b).tx_if;
            if current != Some(tx) {
                if let Some(c) = current {
                    self.flush_run(ctx, c);
                }
                current = Some(tx);
            }
            self.run().push(b);
        }
        if let Some(c) = current {
            self.flush_run(ctx, c);
        }
    }
}

/// Check every queue's link this often when the worker never sleeps (a busy poller does
/// not get `arm`, which checks before each sleep).
const LINK_CHECK_EVERY: u32 = 1 << 16;

/// `af-packet-input`: polls every receive queue placed on this worker.
#[derive(Debug)]
pub struct AfPacketInput {
    queues: Vec<InputQueue>,
    /// Which queue is polled first: each in turn (a flooded one must not starve the rest).
    turn: graph::RoundRobin,
    commands: graph::commands::Commands<QueueCommand>,
    scratch: Vec<u32>,
    polls: u32,
    /// Link events seen while arming (no counters there), counted at the next poll.
    link_events: u64,
    closer: Closer<RxQueue>,
}

#[derive(Debug)]
struct InputQueue {
    ifindex: u32,
    queue: RxQueue,
    vanished: bool,
}

impl AfPacketInput {
    pub fn new(commands: impl Into<graph::commands::Commands<QueueCommand>>) -> AfPacketInput {
        AfPacketInput {
            queues: Vec::new(),
            turn: graph::RoundRobin::default(),
            commands: commands.into(),
            scratch: Vec::with_capacity(graph::FRAME_SIZE),
            polls: 0,
            link_events: 0,
            closer: Closer::new("af-packet-close"),
        }
    }

    /// Hands the queues `gone` picks to the closer thread.
    fn close_where(&mut self, gone: impl Fn(&InputQueue) -> bool) {
        for q in self.queues.extract_if(.., |q| gone(q)) {
            self.closer.close(q.queue);
        }
    }

    /// Asks each queue's socket about its link (clearing a pending socket error, which would
    /// otherwise keep an epoll sleep waking); marks vanished queues for removal.
    fn check_links(&mut self) -> bool {
        let mut any = false;
        for q in &mut self.queues {
            match q.queue.check_link() {
                Ok(()) => {}
                Err(LinkError::Down) => self.link_events += 1,
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
    AfPacketInput: "af-packet-input", Input;
    next InputNext {
        EthernetInput = "ethernet-input",
    }
    error InputError {
        NoBuffer = "no buffer, frame dropped",
        Truncated = "frame truncated by the kernel (larger than a block, or than a slot with the socket's buffer full), dropped",
        Gso = "GRO/GSO super-frame dropped (turn gro, gso and tso off on the host interface)",
        BadFrame = "inconsistent ring or offload header, frame dropped",
        LinkDown = "link down or vanished",
    }
}

impl Node for AfPacketInput {
    fn idle(&self) -> bool {
        self.queues.is_empty()
    }

    fn arm(&mut self, on: bool) -> bool {
        if !on {
            return false;
        }
        // Before sleeping: the kernel's drop counters, the links, then the lost-wakeup
        // re-check (a retired block or a half-read one means: do not sleep).
        for q in &mut self.queues {
            q.queue.refresh_kernel_stats();
        }
        let mut pending = self.check_links() || self.link_events != 0;
        for q in &self.queues {
            pending |= q.queue.pending();
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
                ctx.count_errors(InputError::Truncated, st.truncated as u64);
                ctx.count_errors(InputError::Gso, st.gso as u64);
                ctx.count_errors(InputError::BadFrame, st.bad as u64);
            }
        }
        next.resize(out.len(), InputNext::EthernetInput.into());
    }
}

/// `af-packet-output`: transmits each buffer on the uplink transmit queue of its `tx_if`,
/// then frees it.
#[derive(Debug)]
pub struct AfPacketOutput {
    queues: TxTable<TxQueue>,
    commands: graph::commands::Commands<QueueCommand>,
    run: Vec<u32>,
}

graph::node! {
    AfPacketOutput: "af-packet-output", Output;
    error OutputError {
        NoTx = "interface has no tx queue",
        RingFull = "tx ring full (no free frames)",
        Oversize = "frame larger than the MTU or a tx frame",
        Malformed = "frame shorter than an Ethernet header or payload unreadable",
        LinkDown = "link down or vanished",
    }
}

impl AfPacketOutput {
    pub fn new(commands: impl Into<graph::commands::Commands<QueueCommand>>) -> AfPacketOutput {
        AfPacketOutput {
            queues: TxTable::new("af-packet-close"),
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

impl RunOutput for AfPacketOutput {
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

impl Node for AfPacketOutput {
    fn housekeeping(&mut self) {
        self.take_commands();
    }

    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        self.take_commands();
        self.send_runs(ctx, bufs);
        next.fill(CONSUMED);
    }
}
