//! `arp-input`: answers requests for our addresses and tells the control thread about the
//! neighbours it sees.
//!
//! On a VXLAN tunnel it is also a proxy: a tunnel is one Ethernet segment spanning a network's
//! whole range on every node, so a remote VTEP (a Linux one, another veclane) asks for a pod's
//! address directly. We answer with the tunnel's MAC for any address of the network that this
//! node delivers itself: one of ours, a neighbour resolved on an interface that is not a
//! tunnel (a pod here), or an unresolved host on such an interface's connected subnet (not its
//! network or broadcast address). Addresses reached through another tunnel or through a
//! gateway (an aggregate or default route) are not answered, so a node never becomes a
//! transit hop between two others or a sink for addresses another node owns. A sender on a
//! tunnel that claims an address this node delivers is not learned (it would hijack the pod's
//! traffic into the tunnel), nor is one the cluster does not route through that tunnel (a VTEP
//! speaks only for its own node's pods). On an interface with allowed sources (a pod's) the
//! sender must be one of them.

use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};

use graph::{Ctx, Node};
use wire::{Arp, ArpOp, EtherType, Ethernet, MacAddr};

use fib::adj::Adjacency;

use crate::{ETH_HDR, IfConfig, Learned, Shared};

/// Where workers report the neighbours they see: a bounded channel to the control thread and,
/// optionally, a way to wake it (once per frame that reported any), so that a neighbour is
/// installed before the answer to the packet that revealed it is routed.
#[derive(Clone)]
pub struct LearnSink {
    tx: SyncSender<Learned>,
    wake: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl LearnSink {
    pub fn new(tx: SyncSender<Learned>, wake: Option<Arc<dyn Fn() + Send + Sync>>) -> LearnSink {
        LearnSink { tx, wake }
    }

    /// Reports one neighbour and wakes the control thread; false if the queue is full.
    pub(crate) fn report(&self, l: Learned) -> bool {
        let ok = self.tx.try_send(l).is_ok();
        if ok && let Some(w) = &self.wake {
            w();
        }
        ok
    }
}

impl From<SyncSender<Learned>> for LearnSink {
    fn from(tx: SyncSender<Learned>) -> LearnSink {
        LearnSink { tx, wake: None }
    }
}

impl core::fmt::Debug for LearnSink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LearnSink")
            .field("wakes", &self.wake.is_some())
            .finish()
    }
}

#[derive(Debug)]
pub struct ArpInput {
    shared: Shared,
    learned: LearnSink,
}

impl ArpInput {
    /// `learned` carries neighbours to the control thread, which updates the adjacencies. It
    /// is bounded (`sync_channel`): a pod flooding ARP fills it and the excess is counted, so
    /// it cannot grow the control thread's memory.
    pub fn new(shared: Shared, learned: impl Into<LearnSink>) -> ArpInput {
        ArpInput {
            shared,
            learned: learned.into(),
        }
    }
}

graph::node! {
    ArpInput: "arp-input", Internal;
    next Next {
        Output = "interface-output",
        Drop = "error-drop",
    }
    error Error {
        Malformed = "arp packet malformed or not ethernet/ipv4",
        NotOurs = "arp request for an address that is not ours",
        ProxyReplied = "arp request answered for a host behind us on a tunnel (not an error)",
        Spoofed = "arp on a tunnel from an address this node delivers (not learned)",
        NotRouted = "arp on a tunnel from an address not routed through it (not learned)",
        ReplyLearned = "arp reply: neighbour learned (not an error)",
        OffLink = "arp sender not on a connected subnet",
        SenderNotAllowed = "arp sender address not allowed on this interface",
        NoHeadroom = "no headroom for the l2 header",
        LearnQueue = "learned-neighbour queue full or closed",
    }
    trace ArpTrace { op: u16, sender_ip: [u8; 4], target_ip: [u8; 4] }
}

impl core::fmt::Display for ArpTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let op = if self.op == 1 { "request" } else { "reply" };
        let (s, t) = (
            wire::Ipv4Addr::from(self.sender_ip),
            wire::Ipv4Addr::from(self.target_ip),
        );
        write!(f, "{op} who-has {t} tell {s}")
    }
}

impl ArpInput {
    /// Whether `sip` is routed, in `rx`'s VRF, through `rx` itself (a host or a prefix
    /// behind the tunnel's VTEP).
    fn routed_through(&self, ifc: &IfConfig, rx: u32, sip: fib::Ipv4Addr) -> bool {
        let vrfs = self.shared.vrfs.load();
        let Some(adj) = vrfs.get(ifc.vrf as usize).and_then(|v| v.lookup(sip)) else {
            return false;
        };
        let adjs = self.shared.adjacencies.load();
        adjs.get(adj as usize)
            .and_then(Adjacency::target)
            .is_some_and(|(tx, _)| tx == rx)
    }

    /// Whether we answer for `tip` on tunnel `rx` (see the module's doc).
    fn proxies(&self, ifs: &[IfConfig], rx: u32, tip: fib::Ipv4Addr) -> bool {
        let Some(t) = ifs
            .get(rx as usize)
            .filter(|c| c.tunnel().is_some() && c.on_link(tip))
        else {
            return false;
        };
        let vrfs = self.shared.vrfs.load();
        let Some(adj) = vrfs.get(t.vrf as usize).and_then(|v| v.lookup(tip)) else {
            return false;
        };
        let local_if = |tx: u32| {
            ifs.get(tx as usize)
                .filter(|c| tx != rx && c.tunnel().is_none())
        };
        match self.shared.adjacencies.load().get(adj as usize) {
            Some(Adjacency::Local) => true,
            // A resolved host, not a gateway in front of other addresses.
            Some(&Adjacency::Rewrite {
                tx_if, next_hop, ..
            }) => next_hop == tip && local_if(tx_if).is_some(),
            // A connected subnet's host, neither the subnet's network nor broadcast address.
            Some(&Adjacency::Glean { tx_if, next_hop }) if next_hop.is_unspecified() => {
                local_if(tx_if).is_some_and(|c| {
                    c.addresses.iter().any(|&(a, l)| {
                        let host = if l >= 31 { 0 } else { u32::MAX >> l };
                        let t = u32::from(tip);
                        crate::same_subnet(a, tip, l) && t & host != 0 && t & host != host
                    })
                })
            }
            _ => false,
        }
    }
}

impl Node for ArpInput {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        let mut reported = false;
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            let rx = ctx.pool.meta(b).rx_if;
            let Some(ifc) = ifs.get(rx as usize) else {
                continue;
            };
            let Ok(arp) = Arp::new_checked(ctx.pool.data(b)) else {
                ctx.count_error(Error::Malformed);
                continue;
            };
            let (op, smac, sip, tip) =
                (arp.op(), arp.sender_mac(), arp.sender_ip(), arp.target_ip());
            // A pod claims only its own addresses: it may not poison the neighbour of
            // another pod or of the gateway (neither learned nor answered).
            if !ifc.source_allowed(sip) {
                ctx.count_error(Error::SenderNotAllowed);
                continue;
            }
            if !ifc.on_link(sip) {
                ctx.count_error(Error::OffLink);
                continue;
            }
            if ifc.tunnel().is_some() && self.proxies(&ifs, rx, sip) {
                ctx.count_error(Error::Spoofed);
                continue;
            }
            // A VTEP speaks only for the addresses the cluster routes to it: it may not fill
            // the neighbour table with every address of the network.
            if ifc.tunnel().is_some() && !self.routed_through(ifc, rx, sip) {
                ctx.count_error(Error::NotRouted);
                continue;
            }
            // Requests and replies alike tell us where the sender is.
            match self.learned.tx.try_send(Learned {
                ifindex: rx,
                ip: sip,
                mac: smac.0,
            }) {
                Ok(()) => reported = true,
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    ctx.count_error(Error::LearnQueue)
                }
            }
            if ctx.is_traced(b) {
                let t = ArpTrace {
                    op: op.into(),
                    sender_ip: sip.octets(),
                    target_ip: tip.octets(),
                };
                ctx.trace(b, t);
            }
            let answer = op == ArpOp::Request
                && (ifc.owns(tip)
                    || tip != sip && {
                        let p = self.proxies(&ifs, rx, tip);
                        if p {
                            ctx.count_error(Error::ProxyReplied);
                        }
                        p
                    });
            match op {
                ArpOp::Request if answer => {
                    let me = MacAddr(ifc.mac);
                    let len = wire::arp::LEN;
                    // The reply is written over the request, then an Ethernet header in front.
                    let _ = Arp::emit(
                        &mut ctx.pool.data_mut(b)[..len],
                        ArpOp::Reply,
                        (me, tip),
                        (smac, sip),
                    );
                    crate::free_chain_tail(ctx.pool, b);
                    ctx.pool.truncate(b, len as u16);
                    if !ctx.pool.advance(b, -(ETH_HDR as isize)) {
                        ctx.count_error(Error::NoHeadroom);
                        continue;
                    }
                    let mut eth = Ethernet::new_unchecked(ctx.pool.data_mut(b));
                    eth.set_dst(smac);
                    eth.set_src(me);
                    eth.set_ethertype(EtherType::Arp);
                    ctx.pool.meta_mut(b).tx_if = rx;
                    *n = Next::Output.into();
                }
                ArpOp::Request => ctx.count_error(Error::NotOurs),
                _ => ctx.count_error(Error::ReplyLearned),
            }
        }
        if reported && let Some(w) = &self.learned.wake {
            w();
        }
    }
}
