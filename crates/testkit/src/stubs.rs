//! Stub nodes around the protocol graph: an input that injects queued frames into
//! `ethernet-input`, outputs of kind `Output` standing in for the devices' (recording what
//! they are given, or only freeing it), and the `Runtime` of those stubs with
//! `nodes::protocol_nodes`.

use std::sync::{Arc, Mutex};

use graph::{AnyNode, CONSUMED, Ctx, Node, Runtime};
use nodes::{LearnSink, Shared};

/// Frames with their interface: what a test injects (`rx_if`), or what came out (`tx_if`).
pub type Frames = Arc<Mutex<Vec<(u32, Vec<u8>)>>>;

/// The device output nodes protocol nodes and adjacencies send to.
pub const DEVICE_OUTPUTS: [&str; 4] = [
    "memif-output",
    "af-packet-output",
    "af-xdp-output",
    "tap-output",
];

/// An input node: each poll hands `ethernet-input` as many queued frames as there is room for,
/// each received on its interface.
#[derive(Debug)]
pub struct Inject {
    name: &'static str,
    queue: Frames,
}

impl Inject {
    /// An input node called `name` (distinct names make distinct nodes) polling `queue`.
    pub fn new(name: &'static str, queue: Frames) -> Self {
        Self { name, queue }
    }
}

graph::node! {
    Inject: "test-input", Input;
    next InjectNext { EthernetInput = "ethernet-input" }
}

impl Node for Inject {
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
        let mut q = self.queue.lock().unwrap();
        let n = q.len().min(room);
        for (rx_if, bytes) in q.drain(..n) {
            let b = ctx
                .pool
                .from_bytes(&bytes)
                .expect("the pool holds every frame");
            ctx.pool.meta_mut(b).rx_if = rx_if;
            out.push(b);
            next.push(InjectNext::EthernetInput.into());
        }
    }
}

/// Stands in for a device's output node: records each packet with its `tx_if` (or, as a sink,
/// does not), then frees it.
#[derive(Debug)]
pub struct Output {
    name: &'static str,
    record: Option<Frames>,
}

impl Output {
    /// An output called `name` that records into `frames`.
    pub fn recording(name: &'static str, frames: Frames) -> Self {
        Self {
            name,
            record: Some(frames),
        }
    }

    /// An output called `name` that only frees what it is given.
    pub fn sink(name: &'static str) -> Self {
        Self { name, record: None }
    }
}

graph::node! { Output: "device-output", Output; }

impl Node for Output {
    fn name(&self) -> &'static str {
        self.name
    }

    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        if let Some(record) = &self.record {
            let mut o = record.lock().unwrap();
            for &b in bufs {
                let mut v = Vec::new();
                ctx.pool.read_chain(b, &mut v);
                o.push((ctx.pool.meta(b).tx_if, v));
            }
        }
        ctx.pool.free_bulk(bufs);
        next.fill(CONSUMED);
    }
}

/// The graph of `stubs` (inputs and device outputs) and `nodes::protocol_nodes` over
/// `shared`, with a trace ring of `trace_capacity` records.
pub fn runtime(
    stubs: Vec<Box<dyn AnyNode>>,
    shared: &Shared,
    learned: impl Into<LearnSink>,
    trace_capacity: usize,
) -> Runtime {
    let mut v = stubs;
    v.extend(nodes::protocol_nodes(shared, learned));
    Runtime::new(v, trace_capacity).expect("stubs and protocol nodes make a graph")
}
