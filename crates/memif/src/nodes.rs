//! memif's graph nodes, beside their driver: `memif-input` and `memif-output` over memif
//! queues in either role (the graph's `interface-output` hands memif interfaces' packets to
//! `memif-output`).
//!
//! The control thread owns the memif sockets; when an interface connects it sends its queues
//! to the worker's nodes as [`QueueCommand`]s over a channel, which the nodes drain once per
//! poll or frame (a non-blocking `try_recv`, no lock on the packet path). A queue whose link
//! went down is dropped by the node that holds it.

use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

use buffer::Pool;
use copy_engine::Engine;
use graph::{CONSUMED, Ctx, Node, Point};

use crate::queue::{PeerTable, Peers};

/// An Ethernet header's length: what an interface in ip mode strips.
const ETH_HDR: usize = 14;
use crate::{LinkDown, PrimaryRx, PrimaryTx, SecondaryRx, SecondaryTx};

/// A memif receive queue in either role: as primary (master) we copy out of the peer's
/// buffers; as secondary (slave, the daemon playing a pod) out of our own.
#[derive(Debug)]
pub enum RxQueue {
    Primary(PrimaryRx),
    Secondary(SecondaryRx),
}

/// A memif transmit queue in either role.
#[derive(Debug)]
pub enum TxQueue {
    Primary(PrimaryTx),
    Secondary(SecondaryTx),
}

impl From<PrimaryRx> for RxQueue {
    fn from(q: PrimaryRx) -> Self {
        RxQueue::Primary(q)
    }
}
impl From<SecondaryRx> for RxQueue {
    fn from(q: SecondaryRx) -> Self {
        RxQueue::Secondary(q)
    }
}
impl From<PrimaryTx> for TxQueue {
    fn from(q: PrimaryTx) -> Self {
        TxQueue::Primary(q)
    }
}
impl From<SecondaryTx> for TxQueue {
    fn from(q: SecondaryTx) -> Self {
        TxQueue::Secondary(q)
    }
}

impl RxQueue {
    /// The shared memory this queue's copies read or write.
    pub fn memory(&self) -> Vec<Arc<crate::shm::SharedMemory>> {
        match self {
            RxQueue::Primary(q) => q.memory(),
            RxQueue::Secondary(q) => q.memory(),
        }
    }

    pub fn is_up(&self) -> bool {
        match self {
            RxQueue::Primary(q) => q.is_up(),
            RxQueue::Secondary(q) => q.is_up(),
        }
    }

    fn arm(&self, on: bool) -> bool {
        match self {
            RxQueue::Primary(q) => q.arm(on),
            RxQueue::Secondary(q) => q.arm(on),
        }
    }

    fn interrupt_fd(&self) -> BorrowedFd<'_> {
        match self {
            RxQueue::Primary(q) => q.interrupt_fd(),
            RxQueue::Secondary(q) => q.interrupt_fd(),
        }
    }

    /// Receives up to `max` packets of interface `ifindex` into `pool`, appending them to
    /// `out` with their `rx_if` set; returns how many were lost for want of local buffers
    /// (secondary role only: the primary leaves them in the ring).
    fn recv(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
        hdr: usize,
        ifindex: u32,
        engine: &mut Engine,
    ) -> Result<u64, LinkDown> {
        match self {
            RxQueue::Primary(q) => q
                .recv_split_via(pool, out, max, hdr, ifindex, Some(engine))
                .map(|_| 0),
            RxQueue::Secondary(q) => {
                let from = out.len();
                let lost = q.recv_pool(pool, out, max, engine)?;
                for &b in &out[from..] {
                    pool.meta_mut(b).rx_if = ifindex;
                }
                Ok(lost)
            }
        }
    }
}

impl TxQueue {
    /// The shared memory this queue's copies read or write.
    pub fn memory(&self) -> Vec<Arc<crate::shm::SharedMemory>> {
        match self {
            TxQueue::Primary(q) => q.memory(),
            TxQueue::Secondary(q) => q.memory(),
        }
    }

    pub fn is_up(&self) -> bool {
        match self {
            TxQueue::Primary(q) => q.is_up(),
            TxQueue::Secondary(q) => q.is_up(),
        }
    }

    /// Sends packets in order; returns how many were consumed from the front of `pkts`
    /// (sent, or dropped as too large and counted by the queue). The caller frees them all.
    fn send(
        &mut self,
        pool: &Pool,
        pkts: &[u32],
        peers: &Peers,
        lens: &mut Vec<u32>,
        scratch: &mut Vec<u8>,
        engine: &mut Engine,
    ) -> Result<usize, LinkDown> {
        match self {
            TxQueue::Primary(q) => q.send_via(pool, pkts, peers, Some(engine)),
            TxQueue::Secondary(q) => {
                lens.clear();
                lens.extend(pkts.iter().map(|&p| pool.meta(p).total_len));
                q.send_with(lens, |i, w| {
                    let mut b = pkts[i];
                    let mut at = 0usize;
                    while b != buffer::NONE {
                        let d = pool.data(b);
                        w.write(at, d);
                        at += d.len();
                        if pool.meta(b).ext.len != 0 {
                            // Single-copy input, slave output: the payload is in the other
                            // peer's memory; bring it over through a bounce buffer.
                            scratch.clear();
                            pool.read_ext(b, scratch);
                            w.write(at, scratch);
                            at += pool.meta(b).ext.len as usize;
                        }
                        b = pool.meta(b).next;
                    }
                })
            }
        }
    }
}

/// Hands a connected interface's queues to a worker (or takes them back).
#[derive(Debug)]
pub enum QueueCommand {
    Rx {
        ifindex: u32,
        queue: RxQueue,
    },
    Tx {
        ifindex: u32,
        queue: TxQueue,
    },
    /// `memif-input`: interface `ifindex`'s queues are polled (`rx-mode polling`): the
    /// worker holding one never sleeps. Until its `Detach`.
    Polling {
        ifindex: u32,
    },
    /// `memif-output`: interface `ifindex` is in ip mode (its peer takes bare IPv4 packets):
    /// the Ethernet header `ip4-rewrite` wrote is stripped, and what is not IPv4 dropped.
    /// Until its `Detach`.
    IpMode {
        ifindex: u32,
    },
    /// Interface `ifindex`'s copies go through the node's DMA engine (`use-dma`), when it
    /// has one. Until its `Detach`.
    UseDma {
        ifindex: u32,
    },
    /// The node's DMA engine, for `use-dma` interfaces (a second one is dropped).
    DmaEngine {
        engine: Box<Engine>,
        counters: Arc<EngineCounters>,
    },
    Detach {
        ifindex: u32,
    },
}

impl graph::commands::QueueCommands for QueueCommand {
    fn detach(ifindex: u32) -> QueueCommand {
        QueueCommand::Detach { ifindex }
    }
}

/// A node's copy engine's counters, for `show copy-engine`: written by the node (when the
/// worker does its housekeeping: before it sleeps and every few thousand loops, so up to a
/// few milliseconds behind), read by anyone.
#[derive(Debug, Default)]
pub struct EngineCounters(Mutex<EngineSnapshot>);

/// What [`EngineCounters`] hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineSnapshot {
    pub stats: copy_engine::Stats,
    /// DSA only (zero for the other engines).
    pub dsa: copy_engine::dsa::engine::DsaStats,
    /// Why a DSA engine went over to the CPU for good.
    pub tripped: Option<String>,
}

impl EngineCounters {
    /// Copies `e`'s counters here; the first time its breaker is seen tripped, logs why
    /// (once: the engine copies on the CPU for good after that).
    pub fn publish(&self, e: &Engine, node: &str) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.stats = e.stats();
        if let Engine::Dsa(d) = e {
            s.dsa = d.dsa_stats();
            if s.tripped.is_none()
                && let Some(why) = d.tripped()
            {
                tracing::warn!(
                    node,
                    reason = why,
                    "DSA engine tripped: its copies are made on the CPU from now on"
                );
                s.tripped = Some(why.to_string());
            }
        }
    }

    pub fn snapshot(&self) -> EngineSnapshot {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Sets interface `ifindex`'s entry of a per-interface flag (`rx-mode polling`, ip mode,
/// `use-dma`), growing the table only to set one.
fn set_flag(flags: &mut Vec<bool>, ifindex: u32, on: bool) {
    let i = ifindex as usize;
    if flags.len() <= i {
        if !on {
            return;
        }
        flags.resize(i + 1, false);
    }
    flags[i] = on;
}

/// A node's engines: the one for every interface, and the DMA one for `use-dma` interfaces.
#[derive(Debug)]
struct Engines {
    default: Engine,
    counters: Arc<EngineCounters>,
    dma: Option<(Engine, Arc<EngineCounters>)>,
    /// Interfaces with `use-dma`, by index.
    use_dma: Vec<bool>,
}

impl Engines {
    fn new() -> Engines {
        Engines {
            default: Engine::Cpu(copy_engine::CpuEngine::new()),
            counters: Arc::default(),
            dma: None,
            use_dma: Vec::new(),
        }
    }

    /// The engine interface `ifindex`'s copies go through.
    #[inline]
    fn of(&mut self, ifindex: u32) -> &mut Engine {
        match &mut self.dma {
            Some((e, _)) if self.use_dma.get(ifindex as usize) == Some(&true) => e,
            _ => &mut self.default,
        }
    }

    /// Takes the node's DMA engine, unless it has one already (then `engine` is dropped).
    fn install_dma(&mut self, engine: Engine, counters: Arc<EngineCounters>) {
        if self.dma.is_none() {
            self.dma = Some((engine, counters));
        }
    }

    fn publish(&self, node: &str) {
        self.counters.publish(&self.default, node);
        if let Some((e, c)) = &self.dma {
            c.publish(e, node);
        }
    }
}

/// `memif-input`: polls every rx queue placed on this worker.
#[derive(Debug)]
pub struct MemifInput {
    /// Kept grouped by interface ([`crate::fair`]).
    queues: Vec<(u32, RxQueue)>,
    /// Each interface's range of `queues`: with two or more, a poll shares its frame between
    /// interfaces, not queues ([`crate::fair::share`]).
    groups: Vec<(usize, usize)>,
    /// Which queue is polled first: each in turn (a flooded one must not starve the rest).
    turn: graph::RoundRobin,
    /// The rotating start of a shared poll.
    rounds: usize,
    commands: graph::commands::Commands<QueueCommand>,
    /// Single-copy: bytes of each packet copied into the local buffer (0: whole packets).
    hdr: usize,
    /// Every copy out of a peer's memory (primary role) or out of our slots (secondary) goes
    /// through one of them.
    engines: Engines,
    /// Where single-copy payloads stay: shared with this worker's `memif-output`.
    peers: Arc<PeerTable>,
    /// Interfaces whose queues are polled (`rx-mode polling`), by index.
    polling: Vec<bool>,
}

/// A worker's memif nodes, `memif-input` and `memif-output`, sharing the table of peer
/// memory that single-copy payloads stay in.
pub fn device_nodes(
    rx_commands: impl Into<graph::commands::Commands<QueueCommand>>,
    tx_commands: impl Into<graph::commands::Commands<QueueCommand>>,
) -> (MemifInput, MemifOutput) {
    let input = MemifInput::new(rx_commands);
    let mut output = MemifOutput::new(tx_commands);
    output.peers = Peers::of(&input.peers);
    (input, output)
}

/// Bytes single-copy input copies into the local buffer: every header the graph parses
/// (Ethernet, IPv4 with options, the first L4 bytes an ICMP error quotes) with room to spare.
/// Plain IPv4 frames, whose headers end in their first line, keep only that line when the CPU
/// copies (`queue::primary_rx::headers_in_first_line`).
pub const SINGLE_COPY_HEADER: usize = 128;

impl MemifInput {
    pub fn new(commands: impl Into<graph::commands::Commands<QueueCommand>>) -> MemifInput {
        MemifInput {
            queues: Vec::new(),
            groups: Vec::new(),
            turn: graph::RoundRobin::default(),
            rounds: 0,
            commands: commands.into(),
            hdr: 0,
            engines: Engines::new(),
            peers: Arc::default(),
            polling: Vec::new(),
        }
    }

    /// Copies through `engine` instead of inline on the CPU; its counters go to `counters`.
    pub fn with_engine(mut self, engine: Engine, counters: Arc<EngineCounters>) -> MemifInput {
        self.engines.default = engine;
        self.engines.counters = counters;
        self
    }

    /// Single-copy forwarding (DESIGN.md): as memif primary, copy only the first
    /// [`SINGLE_COPY_HEADER`] bytes of each packet and leave the payload in the peer's buffer
    /// until it is transmitted; the peer's slots go back at the end of each dispatch. The
    /// worker's `memif-output` must share this node's peer table ([`device_nodes`]) to
    /// send such packets; without it they drop as unreadable.
    pub fn single_copy(mut self, on: bool) -> MemifInput {
        self.hdr = if on { SINGLE_COPY_HEADER } else { 0 };
        self
    }
}

graph::node! {
    MemifInput: "memif-input", Input;
    next InputNext {
        EthernetInput = "ethernet-input",
    }
    error InputError {
        LinkDown = "link down, queue released",
        NoBuffer = "no local buffer, packet lost (slave role)",
    }
}

impl Node for MemifInput {
    fn idle(&self) -> bool {
        self.queues.is_empty()
    }

    fn housekeeping(&mut self) {
        self.engines.publish("memif-input");
    }

    fn keeps_awake(&self) -> bool {
        self.queues
            .iter()
            .any(|&(i, _)| self.polling.get(i as usize) == Some(&true))
    }

    fn arm(&mut self, on: bool) -> bool {
        let mut pending = false;
        for (_, q) in &self.queues {
            pending |= q.arm(on);
        }
        pending
    }

    fn wake_fds(&self, f: &mut dyn FnMut(BorrowedFd<'_>)) {
        for (_, q) in &self.queues {
            f(q.interrupt_fd());
        }
    }

    fn end_dispatch(&mut self) {
        for (_, q) in &mut self.queues {
            if let RxQueue::Primary(q) = q {
                q.release();
            }
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
                QueueCommand::Rx { ifindex, queue } => {
                    if let RxQueue::Primary(q) = &queue {
                        self.peers.attach(ctx.pool, ifindex, q.peer_memory());
                    }
                    let at = crate::fair::insert_at(&self.queues, ifindex);
                    self.queues.insert(at, (ifindex, queue));
                    self.groups = crate::fair::groups(&self.queues);
                }
                QueueCommand::Detach { ifindex } => {
                    // Every buffer of earlier dispatches is gone: nothing points there now.
                    self.peers.detach(ctx.pool, ifindex);
                    self.queues.retain(|(i, _)| *i != ifindex);
                    self.groups = crate::fair::groups(&self.queues);
                    set_flag(&mut self.polling, ifindex, false);
                    set_flag(&mut self.engines.use_dma, ifindex, false);
                }
                QueueCommand::UseDma { ifindex } => {
                    set_flag(&mut self.engines.use_dma, ifindex, true);
                }
                QueueCommand::DmaEngine { engine, counters } => {
                    self.engines.install_dma(*engine, counters);
                }
                QueueCommand::Polling { ifindex } => set_flag(&mut self.polling, ifindex, true),
                QueueCommand::Tx { .. } | QueueCommand::IpMode { .. } => {}
            }
        }
        let mut down = false;
        if self.groups.len() > 1 {
            // Several interfaces: each its share of the frame first.
            self.rounds = self.rounds.wrapping_add(1);
            let start = out.len();
            let groups = std::mem::take(&mut self.groups);
            crate::fair::share(&groups, room - start, self.rounds, |i, most| {
                let before = out.len();
                down |= self.recv_one(ctx, i, out, most);
                out.len() - before
            });
            self.groups = groups;
        } else {
            for i in self.turn.turn(self.queues.len()) {
                let left = room - out.len();
                if left == 0 {
                    break;
                }
                down |= self.recv_one(ctx, i, out, left);
            }
        }
        next.resize(out.len(), InputNext::EthernetInput.into());
        if down {
            let before = self.queues.len();
            self.queues.retain(|(_, q)| q.is_up());
            self.groups = crate::fair::groups(&self.queues);
            ctx.count_errors(InputError::LinkDown, (before - self.queues.len()) as u64);
        }
    }
}

impl MemifInput {
    /// Receives up to `most` packets from queue `i` into `out`; whether its link is down.
    #[inline(always)]
    fn recv_one(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        i: usize,
        out: &mut Vec<u32>,
        most: usize,
    ) -> bool {
        let (ifindex, q) = &mut self.queues[i];
        let ifindex = *ifindex;
        match q.recv(
            ctx.pool,
            out,
            most,
            self.hdr,
            ifindex,
            self.engines.of(ifindex),
        ) {
            Ok(lost) => {
                if lost != 0 {
                    ctx.count_errors(InputError::NoBuffer, lost);
                }
                false
            }
            Err(_) => true,
        }
    }
}

/// `memif-output`: transmits on the memif tx queue of each buffer's `tx_if`.
pub struct MemifOutput {
    /// Indexed by interface index.
    queues: Vec<Option<TxQueue>>,
    commands: graph::commands::Commands<QueueCommand>,
    lens: Vec<u32>,
    bounce: Vec<u8>,
    /// Every payload copy into a peer goes through one of them.
    engines: Engines,
    /// The peer memory single-copy payloads stay in, as this worker's `memif-input` attached it.
    peers: Peers,
    /// Interfaces in ip mode, by index.
    ip_mode: Vec<bool>,
    /// The packets of a run to an interface in ip mode that are IPv4.
    kept: Vec<u32>,
}

impl core::fmt::Debug for MemifOutput {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemifOutput")
            .field("queues", &self.queues)
            .field("engines", &self.engines)
            .finish_non_exhaustive()
    }
}

impl MemifOutput {
    pub fn new(commands: impl Into<graph::commands::Commands<QueueCommand>>) -> MemifOutput {
        MemifOutput {
            queues: Vec::new(),
            commands: commands.into(),
            lens: Vec::with_capacity(graph::FRAME_SIZE),
            bounce: Vec::new(),
            engines: Engines::new(),
            peers: Peers::default(),
            ip_mode: Vec::new(),
            kept: Vec::new(),
        }
    }

    /// Copies through `engine` instead of inline on the CPU; its counters go to `counters`.
    pub fn with_engine(mut self, engine: Engine, counters: Arc<EngineCounters>) -> MemifOutput {
        self.engines.default = engine;
        self.engines.counters = counters;
        self
    }

    /// Sends the run at the front of `pkts` (the packets for interface `ifindex`) and frees
    /// it; returns its length.
    fn flush(&mut self, ctx: &mut Ctx<'_, Self>, ifindex: u32, pkts: &[u32]) -> usize {
        let ip_mode = self.ip_mode.get(ifindex as usize) == Some(&true);
        if !ip_mode && let Some(Some(TxQueue::Primary(q))) = self.queues.get_mut(ifindex as usize) {
            // Almost every frame: the queue's own loop finds where the run ends.
            let engine = Some(self.engines.of(ifindex));
            if let Ok(r) = q.send_run(ctx.pool, pkts, &self.peers, engine, ifindex) {
                let run = &pkts[..r.len];
                self.sent(ctx, ifindex, run, r.sent);
                free_run(ctx, run, r.single);
                return r.len;
            }
            // The link went down (every error takes it down): the general path below finds
            // the run, gets the same error and counts it.
        }
        let tx = ifindex;
        let mut single = true;
        let n = pkts
            .iter()
            .position(|&b| {
                let m = ctx.pool.meta(b);
                single &= m.next == buffer::NONE;
                m.tx_if != tx
            })
            .unwrap_or(pkts.len());
        let run = &pkts[..n];
        if ip_mode {
            self.flush_ip(ctx, ifindex, run, single);
        } else {
            self.send_run(ctx, ifindex, run, single);
        }
        n
    }

    /// Counts what sending `run` did, `sent` of its packets consumed, and captures them.
    fn sent(&self, ctx: &mut Ctx<'_, Self>, ifindex: u32, run: &[u32], sent: usize) {
        if ctx.capturing(Point::Tx) {
            for &b in &run[..sent] {
                ctx.capture(Point::Tx, ifindex, b);
            }
        }
        if sent < run.len() {
            ctx.count_errors(OutputError::RingFull, (run.len() - sent) as u64);
        }
    }

    /// `flush` for an interface in ip mode: IPv4 packets lose their Ethernet header, the rest
    /// (ARP, say, which a peer in ip mode has no use for) is dropped.
    #[cold]
    fn flush_ip(&mut self, ctx: &mut Ctx<'_, Self>, ifindex: u32, run: &[u32], single: bool) {
        let mut kept = std::mem::take(&mut self.kept);
        kept.clear();
        for &b in run {
            let ip4 = ctx.pool.data(b).get(12..14) == Some(&[0x08, 0x00]);
            if ip4 && ctx.pool.advance(b, ETH_HDR as isize) {
                kept.push(b);
            } else {
                ctx.count_error(OutputError::NotIp4);
                ctx.pool.free(b);
            }
        }
        self.send_run(ctx, ifindex, &kept, single);
        self.kept = kept;
    }

    fn send_run(&mut self, ctx: &mut Ctx<'_, Self>, ifindex: u32, run: &[u32], single: bool) {
        let queue = self
            .queues
            .get_mut(ifindex as usize)
            .and_then(|q| q.as_mut());
        match queue.map(|q| {
            q.send(
                ctx.pool,
                run,
                &self.peers,
                &mut self.lens,
                &mut self.bounce,
                self.engines.of(ifindex),
            )
        }) {
            Some(Ok(sent)) => self.sent(ctx, ifindex, run, sent),
            Some(Err(_)) => {
                self.queues[ifindex as usize] = None;
                ctx.count_errors(OutputError::NoTx, run.len() as u64);
            }
            None => ctx.count_errors(OutputError::NoTx, run.len() as u64),
        }
        free_run(ctx, run, single);
    }
}

/// Frees a run the node sent; `single`: its packets are known to be one buffer each.
fn free_run(ctx: &mut Ctx<'_, MemifOutput>, run: &[u32], single: bool) {
    if single {
        ctx.pool.free_unchained(run);
    } else {
        ctx.pool.free_bulk(run);
    }
}

graph::node! {
    MemifOutput: "memif-output", Output;
    error OutputError {
        NoTx = "interface not connected",
        RingFull = "tx ring full (no free slots)",
        NotIp4 = "not IPv4 to an interface in ip mode",
    }
}

impl MemifOutput {
    /// Takes the control thread's queue hand-overs and detachments.
    fn take_commands(&mut self) {
        while let Some(c) = self.commands.try_recv() {
            match c {
                QueueCommand::Tx { ifindex, queue } => {
                    let i = ifindex as usize;
                    if self.queues.len() <= i {
                        self.queues.resize_with(i + 1, || None);
                    }
                    self.queues[i] = Some(queue);
                }
                QueueCommand::IpMode { ifindex } => set_flag(&mut self.ip_mode, ifindex, true),
                QueueCommand::Detach { ifindex } => {
                    if let Some(q) = self.queues.get_mut(ifindex as usize) {
                        *q = None;
                    }
                    set_flag(&mut self.ip_mode, ifindex, false);
                    set_flag(&mut self.engines.use_dma, ifindex, false);
                }
                QueueCommand::UseDma { ifindex } => {
                    set_flag(&mut self.engines.use_dma, ifindex, true);
                }
                QueueCommand::DmaEngine { engine, counters } => {
                    self.engines.install_dma(*engine, counters);
                }
                QueueCommand::Rx { .. } | QueueCommand::Polling { .. } => {}
            }
        }
    }
}

impl Node for MemifOutput {
    fn housekeeping(&mut self) {
        self.take_commands();
        self.engines.publish("memif-output");
    }

    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        self.take_commands();
        self.peers.refresh();
        // Send runs of consecutive buffers for the same interface (a frame is usually one run):
        // the queue's own loop finds where a run ends, and whether its packets were all one
        // buffer each, which spares freeing them a pass of its own.
        let mut rest = bufs;
        while let Some(&first) = rest.first() {
            let tx = ctx.pool.meta(first).tx_if;
            let n = self.flush(ctx, tx, rest);
            // The run holds at least `first`, which is for `tx`.
            debug_assert!(n > 0, "an empty run would never end");
            rest = &rest[n..];
        }
        next.fill(CONSUMED);
    }
}
