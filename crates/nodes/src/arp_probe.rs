//! `arp-probe`: ARP requests the control thread asks a worker to send, to a learned neighbour
//! that has fallen silent (see the daemon's learned-neighbour books). Nothing else makes a
//! worker send a packet of its own accord, so this is an input node: each command becomes one
//! request in a fresh buffer, handed to `interface-output` on the neighbour's interface.
//!
//! The request goes to the neighbour's MAC (unicast: it still has the address we know) or to
//! the broadcast address, as the command says, from the sender the control thread chose (an
//! address of ours on the interface, or on a tunnel a pod of this node in that network, as
//! `ip4-glean` asks on behalf of a packet's sender). The answer reaches `arp-input` like any
//! other and refreshes the neighbour. An idle node costs one load and a comparison a pass
//! ([`graph::commands`]).

use fib::Ipv4Addr;
use graph::commands::Commands;
use graph::{Ctx, Node};
use wire::MacAddr;

use crate::Shared;
use crate::ip4_glean::{REQUEST_LEN, write_request};

/// One ARP request to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// The interface it leaves on.
    pub tx_if: u32,
    /// Whom it asks for.
    pub target: Ipv4Addr,
    /// Whom it asks on behalf of (the request's sender address).
    pub sender: Ipv4Addr,
    /// The Ethernet destination: the neighbour's known MAC, or broadcast.
    pub dst_mac: [u8; 6],
}

#[derive(Debug)]
pub struct ArpProbe {
    shared: Shared,
    commands: Commands<Probe>,
    /// Commands taken but not yet sent (a frame's room or the pool ran short).
    pending: Vec<Probe>,
}

impl ArpProbe {
    pub fn new(shared: Shared, commands: impl Into<Commands<Probe>>) -> ArpProbe {
        ArpProbe {
            shared,
            commands: commands.into(),
            pending: Vec::new(),
        }
    }
}

graph::node! {
    ArpProbe: "arp-probe", Input;
    next Next {
        Output = "interface-output",
    }
    error Error {
        Sent = "arp request sent to a silent neighbour (not an error)",
        IfDown = "interface down or gone, no arp request",
        NoBuffer = "no buffer for an arp request, sent later",
    }
}

impl Node for ArpProbe {
    fn idle(&self) -> bool {
        self.pending.is_empty()
    }

    fn poll(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        room: usize,
        out: &mut Vec<u32>,
        next: &mut Vec<u16>,
    ) {
        while let Some(p) = self.commands.try_recv() {
            self.pending.push(p);
        }
        if self.pending.is_empty() {
            return;
        }
        let ifs = self.shared.interfaces.load();
        let up = |p: &Probe| ifs.get(p.tx_if as usize).filter(|i| i.up && !i.l3);
        let before = self.pending.len();
        self.pending.retain(|p| up(p).is_some());
        ctx.count_errors(Error::IfDown, (before - self.pending.len()) as u64);
        let n = self.pending.len().min(room);
        let start = out.len();
        let probes = &self.pending;
        let (sent, _) = ctx.pool.alloc_packets(n, 0, out, |k, data, m| {
            let p = &probes[k];
            let Some(ifc) = up(p) else {
                return false;
            };
            let Some(frame) = data.first_chunk_mut::<REQUEST_LEN>() else {
                return false;
            };
            write_request(
                frame,
                MacAddr(p.dst_mac),
                (MacAddr(ifc.mac), p.sender),
                p.target,
            );
            m.len = REQUEST_LEN as u16;
            m.total_len = REQUEST_LEN as u32;
            true
        });
        for (&b, p) in out[start..].iter().zip(&self.pending) {
            let m = ctx.pool.meta_mut(b);
            m.rx_if = p.tx_if;
            m.tx_if = p.tx_if;
        }
        self.pending.drain(..sent);
        ctx.count_errors(Error::Sent, sent as u64);
        if sent < n {
            ctx.count_error(Error::NoBuffer);
        }
        next.resize(out.len(), Next::Output.into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;
    use fib::adj::AdjTable;
    use graph::commands::{CommandSender, channel};

    use wire::{Arp, ArpOp, EtherType, Ethernet};

    use super::*;
    use crate::IfConfig;
    use crate::testing::InputBench;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 9];
    const SENT: &str = "arp request sent to a silent neighbour (not an error)";

    /// An `arp-probe` on interface 0 (up or not, an address of 10.0.0.1/24) in a pool of
    /// `buffers`, and its command sender.
    fn bench(up: bool, buffers: u32) -> (InputBench, CommandSender<Probe>) {
        let mut c = IfConfig::new(MAC, 0);
        c.addresses.push((Ipv4Addr::new(10, 0, 0, 1), 24));
        c.up = up;
        let shared = Shared::new(
            Arc::new(ArcSwap::from_pointee(vec![c])),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            AdjTable::new().reader(),
        );
        let (tx, rx) = channel();
        (InputBench::new(ArpProbe::new(shared, rx), buffers), tx)
    }

    fn probe(dst_mac: [u8; 6]) -> Probe {
        Probe {
            tx_if: 0,
            target: Ipv4Addr::new(10, 0, 0, 9),
            sender: Ipv4Addr::new(10, 0, 0, 1),
            dst_mac,
        }
    }

    /// Each command becomes one request on its interface, to the MAC it names, from our
    /// MAC and the sender it names; nothing is sent without a command.
    #[test]
    fn each_probe_becomes_one_request_to_its_mac() {
        let (mut b, tx) = bench(true, 16);
        let (frames, errors) = b.pass();
        assert!(frames.is_empty() && errors.is_empty());
        tx.send(probe(PEER)).unwrap();
        tx.send(probe([0xff; 6])).unwrap();
        let (frames, errors) = b.pass();
        assert_eq!(errors, [(SENT, 2)]);
        assert_eq!(frames.len(), 2);
        for ((next, bytes, _, meta), dst) in frames.iter().zip([PEER, [0xff; 6]]) {
            assert_eq!((*next, meta.tx_if), ("interface-output", 0));
            assert_eq!(bytes.len(), REQUEST_LEN);
            let eth = Ethernet::new_checked(&bytes[..]).unwrap();
            assert_eq!((eth.dst(), eth.src()), (MacAddr(dst), MacAddr(MAC)));
            assert_eq!(eth.ethertype(), EtherType::Arp);
            let arp = Arp::new_checked(eth.payload()).unwrap();
            assert_eq!(
                (arp.op(), arp.sender_mac(), arp.sender_ip(), arp.target_ip()),
                (
                    ArpOp::Request,
                    MacAddr(MAC),
                    Ipv4Addr::new(10, 0, 0, 1),
                    Ipv4Addr::new(10, 0, 0, 9)
                )
            );
            assert_eq!(arp.target_mac(), MacAddr([0; 6]));
        }
        assert!(b.pass().0.is_empty(), "each command once");
    }

    /// A probe on a down interface is dropped and counted; probes the pool has no buffers
    /// for wait for the next pass.
    #[test]
    fn a_down_interface_gets_none_and_a_short_pool_delays() {
        let (mut b, tx) = bench(false, 16);
        tx.send(probe(PEER)).unwrap();
        let (frames, errors) = b.pass();
        assert!(frames.is_empty());
        assert_eq!(errors, [("interface down or gone, no arp request", 1)]);
        let (mut b, tx) = bench(true, 2);
        for _ in 0..3 {
            tx.send(probe(PEER)).unwrap();
        }
        let (frames, errors) = b.pass();
        assert_eq!(frames.len(), 2);
        assert_eq!(
            errors,
            [(SENT, 2), ("no buffer for an arp request, sent later", 1)]
        );
        let (frames, errors) = b.pass();
        assert_eq!((frames.len(), errors), (1, vec![(SENT, 1)]));
    }
}
