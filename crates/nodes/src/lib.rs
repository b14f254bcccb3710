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
//! echo), `ip4-rewrite`, `ip4-icmp-error` (time exceeded, unreachable), `ip4-glean` (ARP
//! requests for unresolved next hops), `error-drop`. A graph with `ip4-lookup` needs all of
//! them, plus a device's input node and an `interface-output`.
//!
//! Buffer metadata between nodes: `rx_if`, `tx_if`, `vrf` and `adj` mean what the buffer crate
//! says (`adj` is also how `ip4-lookup` tells `ip4-glean` which next hop to ask for). `error`
//! carries the ICMP type and code a node asks `ip4-icmp-error` to send
//! ([`ip4_icmp_error::icmp_request`]); nothing else reads it. `flags` holds the graph's trace bit
//! and [`LOCALLY_ORIGINATED`].

#![forbid(unsafe_code)]

pub mod arp_input;
pub mod error_drop;
pub mod ethernet_input;
pub mod ip4_glean;
pub mod ip4_icmp_error;
pub mod ip4_input;
pub mod ip4_local;
pub mod ip4_lookup;
pub mod ip4_rewrite;

use std::sync::Arc;

use arc_swap::ArcSwap;
use fib::LpmReader;
use fib::adj::AdjReader;

pub use arp_input::ArpInput;
pub use error_drop::ErrorDrop;
pub use ethernet_input::EthernetInput;
pub use ip4_glean::Ip4Glean;
pub use ip4_icmp_error::Ip4IcmpError;
pub use ip4_input::Ip4Input;
pub use ip4_local::Ip4Local;
pub use ip4_lookup::Ip4Lookup;
pub use ip4_rewrite::Ip4Rewrite;

/// The Ethernet header's length, which several nodes push or strip.
pub(crate) use wire::ethernet::HEADER_LEN as ETH_HDR;

/// Buffer flag: we generated this packet (an echo reply, an ICMP error); `ip4-rewrite` neither
/// checks nor decrements its TTL, and `ip4-lookup` sends no ICMP error about it (that would be
/// addressed to ourselves). (Bit 0 is the graph's trace flag.)
pub const LOCALLY_ORIGINATED: u16 = 1 << 1;

/// Returns the rest of `head`'s chain to the pool: for nodes that turn a packet into a small
/// one of their own (ICMP error, ARP request) and need only the head's bytes.
pub(crate) fn free_chain_tail(pool: &mut buffer::Pool, head: u32) {
    let tail = pool.meta(head).next;
    if tail != buffer::NONE {
        pool.link(head, buffer::NONE);
        pool.free(tail);
    }
    let m = pool.meta_mut(head);
    m.ext.len = 0;
    m.total_len = u32::from(m.len);
}

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
        }
    }

    pub fn owns(&self, a: fib::Ipv4Addr) -> bool {
        self.addresses.iter().any(|(x, _)| *x == a)
    }

    /// Whether `a` is on one of this interface's connected subnets.
    pub fn on_link(&self, a: fib::Ipv4Addr) -> bool {
        self.addresses.iter().any(|&(x, l)| same_subnet(x, a, l))
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
        let seen = Arc::new(Mutex::new(Vec::new()));
        let nexts = <N::Next as graph::NextNodes>::NAMES;
        let mut nodes: Vec<Box<dyn AnyNode>> = vec![
            Box::new(Feed(Some((head.to_vec(), tail.to_vec(), Box::new(set))))),
            Box::new(Alias(node)),
        ];
        for &n in nexts {
            nodes.push(Box::new(Sink(n, seen.clone())));
        }
        let mut rt = Runtime::new(nodes, 0).unwrap();
        let mut pool = Pool::new(PoolConfig {
            count: 16,
            ..Default::default()
        })
        .unwrap();
        rt.dispatch(&mut pool);
        assert_eq!(pool.available(), pool.capacity(), "a buffer leaked");
        let mut seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        let errors = rt.errors().into_iter().map(|(_, e, _)| e).collect();
        (seen.remove(0), errors)
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
        free_chain_tail(&mut pool, b);
        assert_eq!(pool.chain_len(b), 1);
        assert_eq!(pool.meta(b).total_len, 64);
        assert_eq!(pool.available(), 7);
        free_chain_tail(&mut pool, b); // a lone buffer is left alone
        assert_eq!((pool.available(), pool.meta(b).total_len), (7, 64));
        pool.free(b);
        assert_eq!(pool.available(), 8);
    }
}
