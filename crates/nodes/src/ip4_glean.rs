//! `ip4-glean`: the packet's next hop has no MAC yet. Its buffer becomes the ARP request that
//! asks for it, broadcast on the adjacency's interface; the packet itself is lost, as in VPP.
//!
//! `ip4-lookup` sends the packet here with the `Glean` adjacency's index in `Meta::adj`. The
//! reply reaches `arp-input`, which reports the neighbour to the control thread; once that has
//! learned it, the adjacency is a rewrite and later packets are forwarded.
//!
//! A burst towards one unresolved next hop must not become a burst of requests: each worker
//! sends at most one per (interface, next hop) per [`DEFAULT_INTERVAL`], remembered in a small
//! fixed table indexed by a hash of the pair. A pair that collides with another evicts it, so
//! the table can let an extra request through but never holds one back that is due.
//!
//! A stream towards many next hops (a pod scanning an on-link subnet, a /16 routed out of an
//! interface) would still be a request per packet, broadcast: so requests also come out of a
//! worker's budget ([`DEFAULT_RATE`] a second) and the packets' source's
//! ([`DEFAULT_SOURCE_RATE`], see [`crate::limit`]). Our own packets (VXLAN towards a VTEP not
//! yet resolved, ICMP errors) are charged to the worker's only.

use std::time::Duration;

use fib::Ipv4Addr;
use fib::adj::Adjacency;
use graph::{Ctx, Node, clock};
use wire::{Arp, ArpOp, EtherType, Ethernet, Ipv4, MacAddr};

use crate::limit::{Limited, Limiter, slot_of};
use crate::{ETH_HDR, Shared};

/// The least time between two requests for one next hop on one interface, per worker.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// Slots of the throttle table (a power of two).
const SLOTS: usize = 256;

/// Requests a second and burst, per worker, by default.
pub const DEFAULT_RATE: u32 = 1000;
pub const DEFAULT_BURST: u32 = 100;
/// Requests a second and burst on behalf of one source's packets, per worker, by default.
pub const DEFAULT_SOURCE_RATE: u32 = 100;
pub const DEFAULT_SOURCE_BURST: u32 = 20;

/// Why no request went out for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// One for this next hop went out less than an interval ago.
    Throttled,
    Limited(Limited),
}

/// Ethernet header and ARP packet.
pub(crate) const REQUEST_LEN: usize = ETH_HDR + wire::arp::LEN;

/// Writes into `frame` an ARP request for `target` from `(mac, sender)`, to Ethernet
/// destination `dst` (broadcast, or a neighbour asked again at its known MAC).
pub(crate) fn write_request(
    frame: &mut [u8; REQUEST_LEN],
    dst: MacAddr,
    (mac, sender): (MacAddr, Ipv4Addr),
    target: Ipv4Addr,
) {
    let (eth, arp) = frame.split_at_mut(ETH_HDR);
    let mut e = Ethernet::new_unchecked(eth);
    e.set_dst(dst);
    e.set_src(mac);
    e.set_ethertype(EtherType::Arp);
    // Exactly an ARP packet's length: emit cannot fail.
    let _ = Arp::emit(
        arp,
        ArpOp::Request,
        (mac, sender),
        (MacAddr([0; 6]), target),
    );
}

/// The last request for one (interface, next hop) pair.
#[derive(Debug, Clone, Copy)]
struct Sent {
    tx_if: u32,
    next_hop: u32,
    at: u64,
}

const NEVER: Sent = Sent {
    tx_if: buffer::NONE,
    next_hop: 0,
    at: 0,
};

#[derive(Debug)]
pub struct Ip4Glean {
    shared: Shared,
    interval: u64,
    sent: Box<[Sent; SLOTS]>,
    limiter: Limiter,
    /// Where a next hop on an interface without Ethernet is reported resolved.
    learned: Option<crate::LearnSink>,
}

impl Ip4Glean {
    /// At most one request per (interface, next hop) per [`DEFAULT_INTERVAL`].
    pub fn new(shared: Shared) -> Ip4Glean {
        Ip4Glean::with_interval(shared, DEFAULT_INTERVAL)
    }

    pub fn with_interval(shared: Shared, interval: Duration) -> Ip4Glean {
        Ip4Glean {
            shared,
            interval: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
            sent: Box::new([NEVER; SLOTS]),
            limiter: Limiter::new(
                (DEFAULT_RATE, DEFAULT_BURST),
                (DEFAULT_SOURCE_RATE, DEFAULT_SOURCE_BURST),
                clock::ticks(),
            ),
            learned: None,
        }
    }

    /// Next hops on an interface in ip mode (no Ethernet, a point-to-point link) need no ARP:
    /// they are reported to `learned` as resolved (the MAC is never written out there).
    pub fn with_learn_sink(mut self, learned: crate::LearnSink) -> Ip4Glean {
        self.learned = Some(learned);
        self
    }

    /// The throttle table's slot for `(tx_if, next_hop)`, and whether a request is due there.
    fn due(&self, tx_if: u32, next_hop: u32, now: u64) -> (usize, bool) {
        let slot = slot_of((u64::from(tx_if) << 32) | u64::from(next_hop), SLOTS);
        let s = &self.sent[slot];
        let recent =
            s.tx_if == tx_if && s.next_hop == next_hop && now.wrapping_sub(s.at) < self.interval;
        (slot, !recent)
    }

    /// Whether a request for `(tx_if, next_hop)` may go out `now`; if so, remembers it.
    fn may_send(&mut self, tx_if: u32, next_hop: u32, now: u64) -> bool {
        let (slot, due) = self.due(tx_if, next_hop, now);
        if due {
            self.sent[slot] = Sent {
                tx_if,
                next_hop,
                at: now,
            };
        }
        due
    }

    /// [`Ip4Glean::may_send`], then the budgets: the worker's, and unless the packet is
    /// `ours` its source's (`src` in `vrf`). Remembers a request only if all say yes.
    fn admit(
        &mut self,
        (tx_if, next_hop): (u32, u32),
        (vrf, src): (u32, Ipv4Addr),
        ours: bool,
        now: u64,
    ) -> Result<(), Refused> {
        let (slot, due) = self.due(tx_if, next_hop, now);
        if !due {
            return Err(Refused::Throttled);
        }
        let budget = if ours {
            self.limiter.allow_worker()
        } else {
            self.limiter.allow(vrf, src, now)
        };
        budget.map_err(Refused::Limited)?;
        self.sent[slot] = Sent {
            tx_if,
            next_hop,
            at: now,
        };
        Ok(())
    }
}

graph::node! {
    Ip4Glean: "ip4-glean", Internal;
    next Next {
        Output = "interface-output",
        Drop = "error-drop",
    }
    error Error {
        RequestSent = "arp request sent, packet dropped",
        Throttled = "arp request throttled, packet dropped",
        RateLimited = "arp request rate limited, packet dropped",
        SourceRateLimited = "arp request rate limited for the packet's source, packet dropped",
        IfDown = "tx interface down or unknown",
        NoAddress = "tx interface has no address",
        OffNetwork = "tunnel: sender outside its network, no arp request on its behalf",
        StaleAdj = "adjacency changed",
        NoRoom = "no room for the arp request",
        PointToPoint = "next hop on an interface in ip mode resolved without arp, packet dropped",
    }
    trace GleanTrace { tx_if: u32, next_hop: [u8; 4] }
}

impl core::fmt::Display for GleanTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let next_hop = Ipv4Addr::from(self.next_hop);
        write!(f, "arp who-has {next_hop} on interface {}", self.tx_if)
    }
}

impl Node for Ip4Glean {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        let adjs = self.shared.adjacencies.load();
        let now = clock::ticks();
        self.limiter.refill(now);
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            let Some(Adjacency::Glean { tx_if, next_hop }) =
                adjs.get(ctx.pool.meta(b).adj as usize).copied()
            else {
                ctx.count_error(Error::StaleAdj);
                continue;
            };
            let Some(ifc) = ifs.get(tx_if as usize).filter(|i| i.up) else {
                ctx.count_error(Error::IfDown);
                continue;
            };
            // A connected subnet's glean has no next hop of its own: ask for the packet's
            // destination (the data starts at the IPv4 header; ip4-input checked its length).
            let next_hop = if next_hop.is_unspecified() {
                Ipv4::new_unchecked(ctx.pool.data(b)).dst_addr()
            } else {
                next_hop
            };
            if ifc.l3 {
                // Throttled like requests: one report per next hop per interval.
                if self.learned.is_some()
                    && self.may_send(tx_if, u32::from(next_hop), now)
                    && let Some(l) = &self.learned
                {
                    l.report(crate::Learned {
                        ifindex: tx_if,
                        ip: next_hop,
                        mac: [0; 6],
                    });
                }
                ctx.count_error(Error::PointToPoint);
                continue;
            }
            // A tunnel has no address of its own: it asks on behalf of the packet's sender,
            // which the other side then reaches through us (see `arp-input`'s proxy).
            let me = match ifc.tunnel() {
                Some(_) if ifc.addresses.is_empty() => {
                    let s = Ipv4::new_unchecked(ctx.pool.data(b)).src_addr();
                    if !ifc.on_link(s) {
                        ctx.count_error(Error::OffNetwork);
                        continue;
                    }
                    Some(s)
                }
                _ => ifc.source_for(next_hop),
            };
            let Some(me) = me else {
                ctx.count_error(Error::NoAddress);
                continue;
            };
            // Room is checked before the throttle remembers a request, and the packet is left
            // as it came until one is sent (for whoever captures drops).
            let headroom = usize::from(ctx.pool.meta(b).offset);
            if headroom < ETH_HDR || ctx.pool.room_mut(b).len() + ETH_HDR < REQUEST_LEN {
                ctx.count_error(Error::NoRoom);
                continue;
            }
            let m = ctx.pool.meta(b);
            let (vrf, ours) = (m.vrf, m.flags & crate::LOCALLY_ORIGINATED != 0);
            let src = Ipv4::new_unchecked(ctx.pool.data(b)).src_addr();
            if let Err(e) = self.admit((tx_if, u32::from(next_hop)), (vrf, src), ours, now) {
                ctx.count_error(match e {
                    Refused::Throttled => Error::Throttled,
                    Refused::Limited(Limited::Worker) => Error::RateLimited,
                    Refused::Limited(Limited::Source) => Error::SourceRateLimited,
                });
                continue;
            }
            // Only the head buffer is reused: it becomes the request, whatever its length was.
            crate::free_chain_tail(ctx.pool, b);
            if !ctx.pool.advance(b, -(ETH_HDR as isize)) {
                ctx.count_error(Error::NoRoom);
                continue;
            }
            if let Some(frame) = ctx.pool.room_mut(b).first_chunk_mut::<REQUEST_LEN>() {
                write_request(frame, MacAddr::BROADCAST, (MacAddr(ifc.mac), me), next_hop);
            }
            let m = ctx.pool.meta_mut(b);
            m.len = REQUEST_LEN as u16;
            m.total_len = REQUEST_LEN as u32;
            m.tx_if = tx_if;
            ctx.count_error(Error::RequestSent);
            if ctx.is_traced(b) {
                let next_hop = next_hop.octets();
                ctx.trace(b, GleanTrace { tx_if, next_hop });
            }
            *n = Next::Output.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arc_swap::ArcSwap;

    use fib::Ipv4Addr;
    use fib::adj::AdjTable;

    use crate::IfConfig;
    use crate::testing::run_one;

    fn shared(ifs: Vec<IfConfig>, adj: &AdjTable) -> Shared {
        Shared::new(
            Arc::new(ArcSwap::from_pointee(ifs)),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            adj.reader(),
        )
    }

    fn glean(interval: Duration) -> Ip4Glean {
        Ip4Glean::with_interval(shared(Vec::new(), &AdjTable::new()), interval)
    }

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// A glean adjacency on interface 0 and that interface, configured by `edit`.
    fn node(edit: impl FnOnce(&mut IfConfig)) -> (Ip4Glean, AdjTable, u32) {
        let mut adj = AdjTable::new();
        let a = adj.add_next_hop(0, Ipv4Addr::new(10, 1, 0, 99));
        let mut c = IfConfig::new(MAC, 0);
        c.addresses.push((Ipv4Addr::new(10, 1, 0, 1), 24));
        edit(&mut c);
        (Ip4Glean::new(shared(vec![c], &adj)), adj, a)
    }

    /// A bare 20-byte IPv4 header: shorter than the ARP request it becomes.
    const HEADER_ONLY: [u8; 20] = [
        0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 7, 203, 0, 113, 9,
    ];

    #[test]
    fn chained_packet_becomes_one_buffer_holding_the_request() {
        let (n, _adj, a) = node(|_| {});
        let ((next, bytes, buffers, meta), errors) =
            run_one(n, &HEADER_ONLY, &[9; 300], move |m| m.adj = a);
        assert_eq!(next, "interface-output");
        assert_eq!(errors, ["arp request sent, packet dropped"]);
        assert_eq!((buffers, meta.total_len, meta.tx_if), (1, 42, 0));
        let eth = Ethernet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            (eth.dst(), eth.src(), eth.ethertype()),
            (MacAddr::BROADCAST, MacAddr(MAC), EtherType::Arp)
        );
        let arp = Arp::new_checked(eth.payload()).unwrap();
        assert_eq!(
            (arp.op(), arp.sender_mac(), arp.sender_ip(), arp.target_ip()),
            (
                ArpOp::Request,
                MacAddr(MAC),
                Ipv4Addr::new(10, 1, 0, 1),
                Ipv4Addr::new(10, 1, 0, 99)
            )
        );
        assert_eq!(arp.target_mac(), MacAddr([0; 6]));
    }

    #[test]
    fn nothing_is_asked_on_a_down_interface_or_for_a_changed_adjacency() {
        let (n, _adj, a) = node(|c| c.up = false);
        let (seen, errors) = run_one(n, &HEADER_ONLY, &[], move |m| m.adj = a);
        assert_eq!(
            (seen.0, errors),
            ("error-drop", vec!["tx interface down or unknown"])
        );
        let (n, _adj, a) = node(|c| c.addresses.clear());
        let (seen, errors) = run_one(n, &HEADER_ONLY, &[], move |m| m.adj = a);
        assert_eq!(
            (seen.0, errors),
            ("error-drop", vec!["tx interface has no address"])
        );
        let (n, _adj, _) = node(|_| {});
        let (seen, errors) = run_one(n, &HEADER_ONLY, &[], |m| m.adj = AdjTable::LOCAL);
        assert_eq!((seen.0, errors), ("error-drop", vec!["adjacency changed"]));
    }

    #[test]
    fn one_request_per_pair_per_interval() {
        let mut g = glean(Duration::from_millis(100));
        let ms = 1_000_000;
        assert!(g.may_send(1, 0x0a01_0063, 5 * ms));
        assert!(!g.may_send(1, 0x0a01_0063, 6 * ms), "same pair, too soon");
        assert!(g.may_send(2, 0x0a01_0063, 6 * ms), "same address elsewhere");
        assert!(g.may_send(1, 0x0a01_0064, 6 * ms), "another next hop");
        assert!(!g.may_send(1, 0x0a01_0063, 104 * ms));
        assert!(
            g.may_send(1, 0x0a01_0063, 105 * ms),
            "the interval has passed"
        );
    }

    #[test]
    fn many_pairs_each_get_their_first_request() {
        let mut g = glean(Duration::from_secs(1));
        for nh in 0..10_000u32 {
            assert!(g.may_send(nh % 7, nh, 0), "first request for {nh}");
        }
    }

    /// A source asking for many next hops (a scan of an on-link /16) gets its share of
    /// requests, not one per packet; another source, and our own packets, still get theirs.
    /// Without the budgets the scan's every packet is a broadcast request.
    #[test]
    fn a_scan_of_many_next_hops_spends_its_share_not_a_request_each() {
        let mut g = glean(Duration::from_secs(1));
        let scanner = (0, Ipv4Addr::new(10, 1, 0, 7));
        let refused: Vec<_> = (0..10_000u32)
            .filter_map(|nh| g.admit((0, 0x0a01_0000 + nh), scanner, false, 0).err())
            .collect();
        assert_eq!(refused.len(), 10_000 - DEFAULT_SOURCE_BURST as usize);
        assert!(
            refused
                .iter()
                .all(|&r| r == Refused::Limited(Limited::Source))
        );
        // Refused requests were not remembered: the scanner's first next hops, asked again
        // later with budget, go out.
        let later = 1_000_000_000;
        g.limiter.refill(later);
        assert_eq!(g.admit((0, 0x0a01_1000), scanner, false, later), Ok(()));
        // Another source, and our own packets (charged to the worker only), are not the scan.
        let other = (0, Ipv4Addr::new(10, 1, 0, 8));
        assert_eq!(g.admit((0, 0x0a02_0001), other, false, later), Ok(()));
        for nh in 0..50 {
            assert_eq!(g.admit((1, 0x0a03_0000 + nh), scanner, true, later), Ok(()));
        }
        // Past the worker's budget nobody's go out.
        let worker = (0..1000u32)
            .filter(|&nh| {
                g.admit((2, nh), (0, Ipv4Addr::from(nh)), false, later)
                    .is_ok()
            })
            .count();
        assert!(worker < DEFAULT_BURST as usize, "{worker}");
        assert_eq!(
            g.admit((3, 1), other, true, later),
            Err(Refused::Limited(Limited::Worker))
        );
    }
}
