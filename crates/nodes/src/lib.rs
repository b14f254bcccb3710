//! Protocol graph nodes: the only place where per-packet protocol logic lives.
//!
//! Each module is one node with VPP's name and shape, declared once with [`graph::node!`]: one
//! function over a frame that computes every buffer's next node, counts every drop under a
//! named error, and records a small typed trace record for traced buffers. Nodes read
//! forwarding state through [`Shared`]: snapshots loaded once per frame, never a lock. They
//! never allocate, log or return a `Result` per packet, and they know no device: device nodes
//! (`memif-input`, `interface-output`) live beside their drivers.
//!
//! Here now: `ethernet-input`, `arp-input`, `ip4-input`, `ip4-lookup`, `ip4-local` (ICMP
//! echo), `ip4-reassembly` (fragments to us), `udp4-local` (UDP port dispatch), `ip4-rewrite`,
//! `ip4-icmp-error` (time exceeded,
//! unreachable, fragmentation needed), `gso-ip4` (TCP super-frames cut into segments),
//! `ip4-glean` (ARP requests for unresolved next hops),
//! `vxlan4-input` and `vxlan4-encap` (RFC 7348 tunnels), `interface-output` (hands each packet
//! to its interface's device node) and `error-drop`. A graph with `ip4-lookup` needs all of
//! them, plus a device's input node and the device output nodes `interface-output` names.
//!
//! Buffer metadata between nodes: `rx_if`, `tx_if`, `vrf` and `adj` mean what the buffer crate
//! says (`adj` is also how `ip4-lookup` tells `ip4-glean` which next hop to ask for). `error`
//! carries the ICMP type and code a node asks `ip4-icmp-error` to send
//! ([`ip4_icmp_error::icmp_request`]); nothing else reads it. `flags` holds the graph's trace bit
//! and [`LOCALLY_ORIGINATED`].

#![forbid(unsafe_code)]

pub mod arp_input;
pub mod arp_probe;
pub mod error_drop;
pub mod ethernet_input;
pub mod gso_ip4;
pub mod interface_output;
pub mod ip4_frag;
pub mod ip4_glean;
pub mod ip4_icmp_error;
pub mod ip4_input;
pub mod ip4_local;
pub mod ip4_lookup;
pub mod ip4_reassembly;
pub mod ip4_rewrite;
pub mod ip4_session;
mod limit;
pub mod policies;
mod sctp;
pub mod services;
mod session_icmp;
pub mod sources;
pub mod udp4_local;
pub mod vxlan4_encap;
pub mod vxlan4_input;
pub mod worker_sessions;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use fib::LpmReader;
use fib::adj::AdjReader;

pub use arp_input::{ArpInput, LearnSink};
pub use arp_probe::{ArpProbe, Probe};
pub use error_drop::ErrorDrop;
pub use ethernet_input::EthernetInput;
pub use gso_ip4::GsoIp4;
pub use interface_output::InterfaceOutput;
pub use ip4_frag::Ip4Frag;
pub use ip4_glean::Ip4Glean;
pub use ip4_icmp_error::Ip4IcmpError;
pub use ip4_input::Ip4Input;
pub use ip4_local::Ip4Local;
pub use ip4_lookup::Ip4Lookup;
pub use ip4_reassembly::Ip4Reassembly;
pub use ip4_rewrite::Ip4Rewrite;
pub use ip4_session::Ip4Session;
pub use policies::{Denied, DenySink, Policies};
pub use services::{Services, Sessions};
pub use sources::AllowedSources;
pub use udp4_local::Udp4Local;
pub use vxlan4_encap::Vxlan4Encap;
pub use vxlan4_input::Vxlan4Input;

/// The Ethernet header's length, which several nodes push or strip.
pub(crate) use wire::ethernet::HEADER_LEN as ETH_HDR;

/// Buffer flag: we generated this packet (an echo reply, an ICMP error); `ip4-rewrite` neither
/// checks nor decrements its TTL, and `ip4-lookup` sends no ICMP error about it (that would be
/// addressed to ourselves). (Bit 0 is the graph's trace flag.)
pub const LOCALLY_ORIGINATED: u16 = 1 << 1;

/// Every protocol node a worker's graph runs, in one list: `ethernet-input` to
/// `interface-output` and `error-drop`. A graph adds its devices' input and output nodes
/// (`memif-output` and any other `interface-output` names) to these.
pub fn protocol_nodes(
    shared: &Shared,
    learned: impl Into<LearnSink>,
) -> Vec<Box<dyn graph::AnyNode>> {
    let learned: LearnSink = learned.into();
    let local = worker_sessions::WorkerSessions::new(&shared.sessions);
    vec![
        Box::new(EthernetInput::new(shared.clone()).with_sessions(local.clone())),
        Box::new(ArpInput::new(shared.clone(), learned.clone())),
        Box::new(Ip4Input::new(shared.clone())),
        Box::new(Ip4Lookup::new(shared.clone())),
        Box::new(Ip4Session::new(shared, local)),
        Box::new(Ip4Local::default()),
        Box::new(Ip4Reassembly::default()),
        Box::new(Udp4Local::default()),
        Box::new(Vxlan4Input::new(shared.clone())),
        Box::new(Vxlan4Encap::new(shared.clone())),
        Box::new(Ip4Rewrite::new(shared.clone())),
        Box::new(Ip4Frag::new(shared.clone())),
        Box::new(GsoIp4::new(shared.clone())),
        Box::new(Ip4IcmpError::new(shared.clone())),
        Box::new(Ip4Glean::new(shared.clone()).with_learn_sink(learned.clone())),
        Box::new(InterfaceOutput::new(shared.clone())),
        Box::new(ErrorDrop),
    ]
}

/// Returns the rest of `head`'s chain to the pool: for nodes that turn a packet into a small
/// one of their own (ICMP error, ARP request) and need only the head's bytes. What is left is
/// no super-frame, whatever the packet was.
pub(crate) fn free_chain_tail(pool: &mut buffer::Pool, head: u32) {
    let tail = pool.meta(head).next;
    if tail != buffer::NONE {
        pool.link(head, buffer::NONE);
        pool.free(tail);
    }
    let m = pool.meta_mut(head);
    m.ext.len = 0;
    m.gso_size = 0;
    m.total_len = u32::from(m.len);
}

/// The MTU an interface gets unless configured: the largest IPv4 packet it sends. memif
/// and the graph carry chained buffers, so jumbo frames are the default there; a kernel
/// uplink starts at its host interface's MTU and a tunnel at its uplink's minus the overhead.
pub const DEFAULT_MTU: u16 = 9000;

/// What VXLAN over IPv4 adds to an inner IPv4 packet (inner Ethernet, outer IPv4, UDP and
/// VXLAN headers): a tunnel's MTU is its uplink's minus this.
pub const VXLAN_OVERHEAD: u16 = wire::vxlan::IPV4_OVERHEAD as u16;

/// What the nodes know of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfConfig {
    pub mac: [u8; 6],
    /// The slot of the VRF (IPv4 table) packets received here are looked up in: an index
    /// into [`Shared::vrfs`].
    pub vrf: u32,
    /// That VRF's table id, as configured (the control plane's name for it; any `u32`).
    pub table: u32,
    pub up: bool,
    /// Our addresses on this interface (address, prefix length).
    pub addresses: Vec<(fib::Ipv4Addr, u8)>,
    /// The largest IPv4 packet sent out here (L3 MTU); `ip4-rewrite` enforces it.
    pub mtu: u16,
    /// Which device node transmits for it (`interface-output` dispatches on this).
    pub device: Device,
    /// It carries bare IPv4 packets, no Ethernet header (a memif in ip mode):
    /// `ethernet-input` takes what it receives as IPv4, its device node strips the header
    /// `ip4-rewrite` wrote.
    pub l3: bool,
    /// The only sources it takes packets from (a pod's interface: anti-spoofing); `None`
    /// checks nothing.
    pub sources: Option<AllowedSources>,
    /// Its device takes TCP super-frames whole (a pod's tap); any other gets them cut into
    /// segments by `gso-ip4`.
    pub super_frames: bool,
}

/// What sends for an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Device {
    /// A device: the graph's `k`th device output node ([`graph::NodeKind::Output`], in graph
    /// order) transmits for it. Which kind is `k` is the graph builder's business (the
    /// daemon's device registry); no protocol node knows.
    Output(u16),
    /// A VXLAN tunnel: an Ethernet segment inside UDP to one remote VTEP, in one network.
    Vxlan(VxlanTunnel),
}

/// A VXLAN tunnel's encapsulation: one per (remote VTEP, VNI).
#[derive(Debug, Clone)]
pub struct VxlanTunnel {
    pub vni: u32,
    /// Our VTEP address: the uplink's, the outer source.
    pub src: fib::Ipv4Addr,
    /// The remote VTEP, the outer destination.
    pub dst: fib::Ipv4Addr,
    /// The slot of the VRF the outer packet is routed in (the uplink's).
    pub underlay: u32,
    /// The uplink's interface: the only one its VXLAN is taken from (a pod in the underlay's
    /// VRF could send VXLAN from a member VTEP's address too).
    pub uplink: u32,
    /// Set Don't Fragment on the outer header.
    pub df: bool,
    /// The network's address ranges: the tunnel's "subnets" (ARP senders and proxy-ARP
    /// targets must lie in them).
    pub ranges: Vec<(fib::Ipv4Addr, u8)>,
    /// Packets and bytes in and out, shared by every worker.
    pub counters: Arc<TunnelCounters>,
}

impl PartialEq for VxlanTunnel {
    /// The configuration; counters are not part of what a tunnel is.
    fn eq(&self, o: &Self) -> bool {
        (
            self.vni,
            self.src,
            self.dst,
            self.underlay,
            self.uplink,
            self.df,
            &self.ranges,
        ) == (o.vni, o.src, o.dst, o.underlay, o.uplink, o.df, &o.ranges)
    }
}
impl Eq for VxlanTunnel {}

/// A tunnel's counters. Workers add a frame's worth at a time (one atomic add per run of
/// packets on one tunnel, not per packet).
#[derive(Debug, Default)]
pub struct TunnelCounters {
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
}

impl TunnelCounters {
    /// (rx packets, rx bytes, tx packets, tx bytes).
    pub fn snapshot(&self) -> [u64; 4] {
        [
            &self.rx_packets,
            &self.rx_bytes,
            &self.tx_packets,
            &self.tx_bytes,
        ]
        .map(|c| c.load(Ordering::Relaxed))
    }
}

/// Accumulates packets and bytes for one tunnel at a time and adds them to its counters when
/// the tunnel changes or the frame ends.
#[derive(Debug, Default)]
pub(crate) struct CounterRun {
    at: Option<Arc<TunnelCounters>>,
    packets: u64,
    bytes: u64,
}

impl CounterRun {
    pub(crate) fn add(&mut self, c: &Arc<TunnelCounters>, bytes: u32, rx: bool) {
        self.add_many(c, 1, u64::from(bytes), rx);
    }

    /// As `add`, for `packets` packets of `bytes` bytes in all.
    #[inline]
    pub(crate) fn add_many(&mut self, c: &Arc<TunnelCounters>, packets: u64, bytes: u64, rx: bool) {
        if !self.at.as_ref().is_some_and(|a| Arc::ptr_eq(a, c)) {
            self.flush(rx);
            self.at = Some(c.clone());
        }
        self.packets += packets;
        self.bytes += bytes;
    }

    pub(crate) fn flush(&mut self, rx: bool) {
        if let Some(c) = self.at.take() {
            let (p, b) = if rx {
                (&c.rx_packets, &c.rx_bytes)
            } else {
                (&c.tx_packets, &c.tx_bytes)
            };
            p.fetch_add(self.packets, Ordering::Relaxed);
            b.fetch_add(self.bytes, Ordering::Relaxed);
        }
        self.packets = 0;
        self.bytes = 0;
    }
}

impl IfConfig {
    /// An interface in the VRF at slot `vrf`, whose table id is the same number (the control
    /// plane sets `table` when the two differ).
    pub fn new(mac: [u8; 6], vrf: u32) -> IfConfig {
        IfConfig {
            mac,
            vrf,
            table: vrf,
            up: true,
            addresses: Vec::new(),
            mtu: DEFAULT_MTU,
            device: Device::Output(0),
            l3: false,
            sources: None,
            super_frames: false,
        }
    }

    /// Whether a packet from `src` may enter here (see [`sources`]).
    #[inline(always)]
    pub fn source_allowed(&self, src: fib::Ipv4Addr) -> bool {
        self.sources
            .as_ref()
            .is_none_or(|s| s.allows(u32::from(src)))
    }

    pub fn owns(&self, a: fib::Ipv4Addr) -> bool {
        self.addresses.iter().any(|(x, _)| *x == a)
    }

    /// Whether `a` is on one of this interface's connected subnets (a tunnel's: its
    /// network's ranges).
    pub fn on_link(&self, a: fib::Ipv4Addr) -> bool {
        let subnets = match &self.device {
            Device::Vxlan(t) => &t.ranges,
            _ => &self.addresses,
        };
        subnets.iter().any(|&(x, l)| same_subnet(x, a, l))
    }

    /// The VXLAN tunnel this interface is, if it is one.
    pub fn tunnel(&self) -> Option<&VxlanTunnel> {
        match &self.device {
            Device::Vxlan(t) => Some(t),
            _ => None,
        }
    }

    /// The address we speak from towards `peer` on this interface: the one whose subnet holds
    /// `peer`, else the first; `None` if the interface has none.
    pub fn source_for(&self, peer: fib::Ipv4Addr) -> Option<fib::Ipv4Addr> {
        self.addresses
            .iter()
            .find(|&&(x, l)| same_subnet(x, peer, l))
            .or(self.addresses.first())
            .map(|&(x, _)| x)
    }
}

fn same_subnet(a: fib::Ipv4Addr, b: fib::Ipv4Addr, prefix_len: u8) -> bool {
    let m = match prefix_len {
        0 => 0,
        l => u32::MAX << (32 - u32::from(l.min(32))),
    };
    u32::from(a) & m == u32::from(b) & m
}

/// A neighbour a worker saw (ARP request or reply); the control thread learns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    pub ifindex: u32,
    pub ip: fib::Ipv4Addr,
    pub mac: [u8; 6],
}

/// Forwarding state shared by the control thread (writer) and the workers (readers).
#[derive(Debug, Clone)]
pub struct Shared {
    /// Indexed by interface index.
    pub interfaces: Arc<ArcSwap<Vec<IfConfig>>>,
    /// Indexed by VRF id.
    pub vrfs: Arc<ArcSwap<Vec<LpmReader>>>,
    pub adjacencies: AdjReader,
    /// What `vxlan4-input` decapsulates.
    pub vxlan: Arc<ArcSwap<VxlanMap>>,
    /// The services of every network, and which VRFs keep sessions.
    pub services: Arc<ArcSwap<Services>>,
    /// The session table and its owners.
    pub sessions: Arc<Sessions>,
    /// Every interface's network policies.
    pub policies: Arc<ArcSwap<Policies>>,
    /// Where denied flows are reported.
    pub denied: DenySink,
}

/// A node's own handle on [`Shared`]: each table as last taken, replaced only when the
/// control thread has published a newer one. Taking a table for a frame is then one load and
/// a comparison (`arc_swap::Cache`) where arc-swap's guarded load took 50-60 instructions
/// (under `--cost`, for each table and frame: five a pass through ethernet-input and
/// ip4-lookup, about 280 of the 3200 a pass cost beyond its packets). The tables it holds
/// stay alive until the node's next frame, as a guard held for a frame keeps them.
#[derive(Debug)]
pub struct SharedView {
    pub interfaces: arc_swap::Cache<Arc<ArcSwap<Vec<IfConfig>>>, Arc<Vec<IfConfig>>>,
    pub vrfs: arc_swap::Cache<Arc<ArcSwap<Vec<LpmReader>>>, Arc<Vec<LpmReader>>>,
    pub adjacencies: fib::adj::AdjCache,
    pub vxlan: arc_swap::Cache<Arc<ArcSwap<VxlanMap>>, Arc<VxlanMap>>,
    pub services: arc_swap::Cache<Arc<ArcSwap<Services>>, Arc<Services>>,
}

impl SharedView {
    pub fn new(s: &Shared) -> SharedView {
        SharedView {
            interfaces: arc_swap::Cache::new(Arc::clone(&s.interfaces)),
            vrfs: arc_swap::Cache::new(Arc::clone(&s.vrfs)),
            adjacencies: s.adjacencies.cache(),
            vxlan: arc_swap::Cache::new(Arc::clone(&s.vxlan)),
            services: arc_swap::Cache::new(Arc::clone(&s.services)),
        }
    }
}

impl Shared {
    /// Shared state with no VXLAN tunnel and no service, and a small session table for one
    /// worker ([`TEST_SESSIONS`]); the daemon gives it its own with [`Shared::with_sessions`].
    pub fn new(
        interfaces: Arc<ArcSwap<Vec<IfConfig>>>,
        vrfs: Arc<ArcSwap<Vec<LpmReader>>>,
        adjacencies: AdjReader,
    ) -> Shared {
        let sessions = Sessions::with_capacity(TEST_SESSIONS, 1).expect("a valid table");
        Shared {
            interfaces,
            vrfs,
            adjacencies,
            vxlan: Arc::default(),
            services: Arc::default(),
            sessions: Arc::new(sessions),
            policies: Arc::default(),
            denied: DenySink::default(),
        }
    }

    /// This state with `sessions` as its session table.
    pub fn with_sessions(mut self, sessions: Sessions) -> Shared {
        self.sessions = Arc::new(sessions);
        self
    }
}

/// The sessions of the table [`Shared::new`] makes.
pub const TEST_SESSIONS: u32 = 4096;

/// The tunnels `vxlan4-input` accepts packets from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VxlanMap {
    /// (remote VTEP, VNI) to the tunnel's interface index.
    pub tunnels: HashMap<(fib::Ipv4Addr, u32), u32>,
    /// The VNIs of every network (a packet with one of these but from an unknown VTEP is
    /// counted apart from one with a VNI nobody uses).
    pub vnis: HashSet<u32>,
    /// Our VTEPs: (underlay VRF slot, address) of every tunnel, each once. VXLAN to one of
    /// them goes from `ip4-input` straight to `vxlan4-input` (see `ip4-input`).
    pub vteps: Vec<(u32, fib::Ipv4Addr)>,
}

#[cfg(test)]
pub(crate) mod testing {
    //! Runs one node over one hand-made buffer, with a recording sink for each of its nexts.

    use std::sync::{Arc, Mutex};

    use buffer::{Meta, Pool, PoolConfig};
    use graph::{AnyNode, CONSUMED, Ctx, Declare, Node, Runtime};

    /// Where the buffer went: the next node's name, the chain's bytes, buffers in the chain,
    /// and its metadata as that node saw it.
    pub(crate) type Seen = (&'static str, Vec<u8>, usize, Meta);

    type SetMeta = Box<dyn FnOnce(&mut Meta) + Send>;

    /// Produces one buffer (head bytes, tail bytes, metadata edit) on its first poll.
    struct Feed(Option<(Vec<u8>, Vec<u8>, SetMeta)>);

    graph::node! {
        Feed: "test-feed", Input;
        next FeedNext { UnderTest = "under-test" }
    }

    impl Node for Feed {
        fn poll(
            &mut self,
            ctx: &mut Ctx<'_, Self>,
            _: usize,
            out: &mut Vec<u32>,
            next: &mut Vec<u16>,
        ) {
            let Some((head, tail, set)) = self.0.take() else {
                return;
            };
            let b = ctx.pool.from_bytes(&head).unwrap();
            if !tail.is_empty() {
                let t = ctx.pool.from_bytes(&tail).unwrap();
                ctx.pool.link(b, t);
                ctx.pool.meta_mut(b).total_len += tail.len() as u32;
            }
            set(ctx.pool.meta_mut(b));
            out.push(b);
            next.push(FeedNext::UnderTest.into());
        }
    }

    /// Runs node `N` under the name `Feed` sends to.
    struct Alias<N>(N);

    impl<N: Node> Declare for Alias<N> {
        const NAME: &'static str = "under-test";
        const KIND: graph::NodeKind = N::KIND;
        type Next = N::Next;
        type Error = N::Error;
        type Trace = N::Trace;
    }

    impl<N: Node> Node for Alias<N> {
        fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
            self.0.process(&mut ctx.retyped(), bufs, next);
        }
    }

    struct Sink(&'static str, Arc<Mutex<Vec<Seen>>>);

    graph::node! { Sink: "sink", Internal; }

    /// A [`Sink`] that is a device output node.
    struct OutputSink(Sink);

    graph::node! { OutputSink: "output-sink", Output; }

    impl Node for OutputSink {
        fn name(&self) -> &'static str {
            self.0.0
        }
        fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
            Node::process(&mut self.0, &mut ctx.retyped(), bufs, next);
        }
    }

    /// The device output nodes of [`run_one`]'s graph, in graph order: an interface whose
    /// device is `Device::Output(k)` is sent on by the `k`th. The last is a kind no protocol
    /// node has ever heard of.
    pub(crate) const DEVICES: [&str; 5] = [
        "memif-output",
        "af-packet-output",
        "af-xdp-output",
        "tap-output",
        "dummy-output",
    ];

    impl Node for Sink {
        fn name(&self) -> &'static str {
            self.0
        }
        fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
            for &b in bufs {
                let mut v = Vec::new();
                ctx.pool.read_chain(b, &mut v);
                let seen = (self.0, v, ctx.pool.chain_len(b), *ctx.pool.meta(b));
                self.1.lock().unwrap().push(seen);
            }
            ctx.pool.free_bulk(bufs);
            next.fill(CONSUMED);
        }
    }

    /// Runs `node` over one buffer holding `head`, chained to a second holding `tail` unless
    /// that is empty, with its metadata set by `set`. Returns where it went and the node's
    /// non-zero counters, after checking that every buffer is back in the pool.
    pub(crate) fn run_one<N: Node>(
        node: N,
        head: &[u8],
        tail: &[u8],
        set: impl FnOnce(&mut Meta) + Send + 'static,
    ) -> (Seen, Vec<&'static str>) {
        let (mut seen, errors) = run_all(node, head, tail, set, 16);
        assert_eq!(seen.len(), 1);
        (seen.remove(0), errors)
    }

    /// [`run_one`] for a node that may make packets of its own, in a pool of `buffers`:
    /// everything that came out, in order.
    pub(crate) fn run_all<N: Node>(
        node: N,
        head: &[u8],
        tail: &[u8],
        set: impl FnOnce(&mut Meta) + Send + 'static,
        buffers: u32,
    ) -> (Vec<Seen>, Vec<&'static str>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut nodes: Vec<Box<dyn AnyNode>> = vec![
            Box::new(Feed(Some((head.to_vec(), tail.to_vec(), Box::new(set))))),
            Box::new(Alias(node)),
        ];
        nodes.extend(sinks::<N>(&seen));
        let mut rt = Runtime::new(nodes, 0).unwrap();
        let mut pool = Pool::new(PoolConfig {
            count: buffers,
            ..Default::default()
        })
        .unwrap();
        rt.dispatch(&mut pool);
        assert_eq!(pool.available(), pool.capacity(), "a buffer leaked");
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        let errors = rt.errors().into_iter().map(|(_, e, _)| e).collect();
        (seen, errors)
    }

    /// A recording sink for each of `N`'s nexts and for each device output node.
    fn sinks<N: Node>(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<Box<dyn AnyNode>> {
        let mut nodes: Vec<Box<dyn AnyNode>> = Vec::new();
        for &n in <N::Next as graph::NextNodes>::NAMES {
            nodes.push(Box::new(Sink(n, seen.clone())));
        }
        for n in DEVICES {
            nodes.push(Box::new(OutputSink(Sink(n, seen.clone()))));
        }
        nodes
    }

    /// An input node in a graph of its own, run a pass at a time in a pool of its own.
    pub(crate) struct InputBench {
        rt: Runtime,
        pool: Pool,
        seen: Arc<Mutex<Vec<Seen>>>,
    }

    impl InputBench {
        pub(crate) fn new<N: Node>(node: N, buffers: u32) -> InputBench {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let mut nodes: Vec<Box<dyn AnyNode>> = vec![Box::new(node)];
            nodes.extend(sinks::<N>(&seen));
            let pool = Pool::new(PoolConfig {
                count: buffers,
                ..Default::default()
            })
            .unwrap();
            InputBench {
                rt: Runtime::new(nodes, 0).unwrap(),
                pool,
                seen,
            }
        }

        /// One pass of the graph, the node polled whether idle or not: where each buffer
        /// went, and the counters that moved in it (every buffer is back in the pool).
        pub(crate) fn pass(&mut self) -> (Vec<Seen>, Vec<(&'static str, u64)>) {
            self.rt.housekeeping();
            self.rt.dispatch(&mut self.pool);
            assert_eq!(
                self.pool.available(),
                self.pool.capacity(),
                "a buffer leaked"
            );
            let seen = std::mem::take(&mut *self.seen.lock().unwrap());
            let errors = self.rt.errors().into_iter().filter(|e| e.2 > 0);
            let errors = errors.map(|(_, e, n)| (e, n)).collect();
            self.rt.clear_errors();
            (seen, errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_address_prefers_the_peers_subnet() {
        let mut c = IfConfig::new([2, 0, 0, 0, 0, 1], 0);
        assert_eq!(c.source_for(fib::Ipv4Addr::new(10, 1, 0, 9)), None);
        c.addresses.push((fib::Ipv4Addr::new(172, 16, 0, 1), 16));
        c.addresses.push((fib::Ipv4Addr::new(10, 1, 0, 1), 24));
        assert_eq!(
            c.source_for(fib::Ipv4Addr::new(10, 1, 0, 9)),
            Some(fib::Ipv4Addr::new(10, 1, 0, 1))
        );
        assert_eq!(
            c.source_for(fib::Ipv4Addr::new(192, 0, 2, 1)),
            Some(fib::Ipv4Addr::new(172, 16, 0, 1)),
            "off-link: the first address"
        );
        assert!(c.on_link(fib::Ipv4Addr::new(172, 16, 200, 1)));
        assert!(!c.on_link(fib::Ipv4Addr::new(10, 1, 1, 1)));
    }

    #[test]
    fn chain_tail_is_freed_and_total_len_follows() {
        let mut pool = buffer::Pool::new(buffer::PoolConfig {
            count: 8,
            data_size: 64,
            headroom: 0,
        })
        .unwrap();
        let b = pool.from_bytes(&[1u8; 200]).unwrap();
        assert_eq!(pool.chain_len(b), 4);
        pool.meta_mut(b).gso_size = 1448;
        free_chain_tail(&mut pool, b);
        assert_eq!(pool.chain_len(b), 1);
        assert_eq!(pool.meta(b).total_len, 64);
        assert_eq!(pool.meta(b).gso_size, 0, "no super-frame any more");
        assert_eq!(pool.available(), 7);
        free_chain_tail(&mut pool, b); // a lone buffer is left alone
        assert_eq!((pool.available(), pool.meta(b).total_len), (7, 64));
        pool.free(b);
        assert_eq!(pool.available(), 8);
    }
}
