//! The device kinds a worker's graph runs: the one place that lists them.
//!
//! Each kind gives the graph an input node and an output node ([`graph::NodeKind::Output`]),
//! and the control thread a pair of senders to hand their queues over. The order of
//! [`KINDS`] is the order of the output nodes in every worker's graph, so the `k`th kind is
//! what an interface with [`nodes::Device::Output`]`(k)` is sent on; protocol nodes reach it
//! through that index and never name a device (VPP's `vlib_node_add_next`, resolved once).
//!
//! A new kind of interface is its driver (nodes and queue commands in its crate), one entry
//! here, and the control code that configures it ([`crate::control`]).

use std::any::Any;

use graph::commands::{self, CommandSender, Commands, QueueCommands};
use graph::{AnyNode, Declare};

use crate::worker::WorkerSetup;

/// Every device kind, in the order of their output nodes in the graph.
pub(crate) static KINDS: [Kind; 4] = [
    Kind::new::<memif::nodes::MemifOutput>(memif),
    Kind::new::<uplink::nodes::AfPacketOutput>(|_| {
        queued::<uplink::nodes::QueueCommand, _, _>(uplink::nodes::device_nodes)
    }),
    Kind::new::<uplink::xdp_nodes::AfXdpOutput>(|_| {
        queued::<uplink::xdp_nodes::QueueCommand, _, _>(uplink::xdp_nodes::device_nodes)
    }),
    Kind::new::<uplink::tap_nodes::TapOutput>(|_| {
        queued::<uplink::tap_nodes::QueueCommand, _, _>(uplink::tap_nodes::device_nodes)
    }),
];

/// One kind of device.
#[derive(Debug)]
pub(crate) struct Kind {
    /// Its output node's name.
    output: &'static str,
    /// Makes one worker's input and output nodes, and the senders to them.
    build: fn(&mut WorkerSetup) -> Built,
}

impl Kind {
    const fn new<Output: Declare>(build: fn(&mut WorkerSetup) -> Built) -> Kind {
        Kind {
            output: Output::NAME,
            build,
        }
    }
}

/// What a kind gives one worker.
pub(crate) struct Built {
    input: Box<dyn AnyNode>,
    output: Box<dyn AnyNode>,
    queues: Box<dyn DeviceQueues>,
}

/// The control thread's senders to one kind's input (`rx`) and output (`tx`) nodes on one
/// worker.
#[derive(Debug)]
pub struct Queues<C> {
    pub rx: CommandSender<C>,
    pub tx: CommandSender<C>,
}

/// [`Queues`] of any kind, as a worker handle holds them.
pub trait DeviceQueues: Send + std::fmt::Debug {
    /// Both nodes drop interface `ifindex`'s queues.
    fn detach(&self, ifindex: u32);
    fn as_any(&self) -> &dyn Any;
}

impl<C: QueueCommands + std::fmt::Debug> DeviceQueues for Queues<C> {
    fn detach(&self, ifindex: u32) {
        let _ = self.rx.send(C::detach(ifindex));
        let _ = self.tx.send(C::detach(ifindex));
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The nodes and senders of a kind whose nodes take nothing but their queue commands.
fn queued<C, I, O>(make: fn(Commands<C>, Commands<C>) -> (I, O)) -> Built
where
    C: QueueCommands + std::fmt::Debug,
    I: AnyNode + 'static,
    O: AnyNode + 'static,
{
    let (rx, rx_cmds) = commands::channel();
    let (tx, tx_cmds) = commands::channel();
    let (input, output) = make(rx_cmds, tx_cmds);
    Built {
        input: Box::new(input),
        output: Box::new(output),
        queues: Box::new(Queues { rx, tx }),
    }
}

/// memif's nodes take the worker's copy engines and copy mode too.
fn memif(s: &mut WorkerSetup) -> Built {
    let (rx, rx_cmds) = commands::channel();
    let (tx, tx_cmds) = commands::channel();
    let (input, output) = memif::nodes::device_nodes(rx_cmds, tx_cmds);
    let (input, output) = match s.engines.take() {
        Some(e) => (
            input.with_engine(e.input.0, e.input.1),
            output.with_engine(e.output.0, e.output.1),
        ),
        None => (input, output),
    };
    Built {
        input: Box::new(input.single_copy(s.copy == api::CopyMode::Single)),
        output: Box::new(output),
        queues: Box::new(Queues { rx, tx }),
    }
}

/// The device of an interface sent on by `Output`, the output node of a registered kind.
///
/// # Panics
/// If no kind in [`KINDS`] has that output node (a kind used but not registered: a bug that
/// the tests of this module catch for every kind).
pub(crate) fn device<Output: Declare>() -> nodes::Device {
    let k = KINDS
        .iter()
        .position(|k| k.output == Output::NAME)
        .unwrap_or_else(|| panic!("{} is not a registered device kind", Output::NAME));
    nodes::Device::Output(k as u16)
}

/// One worker's graph nodes and its senders to the device nodes, by kind.
pub(crate) type Graph = (Vec<Box<dyn AnyNode>>, Vec<Box<dyn DeviceQueues>>);

/// One worker's device nodes (every kind's input and output, outputs in [`KINDS`] order) and
/// its senders to them, by kind.
pub(crate) fn build(s: &mut WorkerSetup) -> Graph {
    let mut nodes = Vec::with_capacity(KINDS.len() * 2);
    let mut queues = Vec::with_capacity(KINDS.len());
    for k in &KINDS {
        let b = (k.build)(s);
        nodes.push(b.input);
        nodes.push(b.output);
        queues.push(b.queues);
    }
    (nodes, queues)
}

/// The senders of the kind whose queue commands are `C`, among one worker's.
///
/// # Panics
/// If no registered kind takes `C` (see [`device`]).
pub(crate) fn queues<C: 'static>(all: &[Box<dyn DeviceQueues>]) -> &Queues<C> {
    all.iter()
        .find_map(|q| q.as_any().downcast_ref())
        .unwrap_or_else(|| {
            panic!(
                "no registered device kind takes {}",
                std::any::type_name::<C>()
            )
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;

    use super::*;

    /// The graph a worker builds has every kind's output node in [`KINDS`] order (what
    /// `Device::Output(k)` means), and its senders are found by their commands' type.
    #[test]
    fn the_graph_has_every_kind_in_registry_order() {
        let (learned, _rx) = std::sync::mpsc::sync_channel(1);
        let mut s = WorkerSetup {
            index: 0,
            core: None,
            mode: api::RxMode::Interrupt,
            buffers: 64,
            trace_capacity: 0,
            shared: nodes::Shared::new(
                Arc::new(ArcSwap::from_pointee(Vec::new())),
                Arc::new(ArcSwap::from_pointee(Vec::new())),
                fib::adj::AdjTable::new().reader(),
            ),
            learned: learned.into(),
            copy: api::CopyMode::Single,
            engines: None,
            register_pool: false,
        };
        let (graph_nodes, queues) = crate::worker::graph(&mut s);
        let rt = graph::Runtime::new(graph_nodes, 0).unwrap();
        let names: Vec<_> = KINDS.iter().map(|k| k.output).collect();
        assert_eq!(rt.outputs(), names);
        assert_eq!(
            device::<memif::nodes::MemifOutput>(),
            nodes::Device::Output(0),
            "IfConfig::new's default device is the first kind: memif"
        );
        assert_eq!(
            device::<uplink::tap_nodes::TapOutput>(),
            nodes::Device::Output(3)
        );
        let _ = super::queues::<memif::nodes::QueueCommand>(&queues);
        let _ = super::queues::<uplink::nodes::QueueCommand>(&queues);
        let _ = super::queues::<uplink::xdp_nodes::QueueCommand>(&queues);
        let _ = super::queues::<uplink::tap_nodes::QueueCommand>(&queues);
    }
}
