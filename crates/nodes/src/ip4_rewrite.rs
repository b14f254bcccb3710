//! `ip4-rewrite`: decrements TTL with an incremental checksum update (RFC 1624) and writes the
//! Ethernet header of the chosen adjacency in front of the packet. A packet whose TTL would
//! reach zero goes to `ip4-icmp-error` (time exceeded) untouched.
//!
//! It sends each packet straight to its interface's device node (what `interface-output`
//! would decide, one node hop less on the fast path), dropping what goes to an interface
//! that is down or gone.
//!
//! It also enforces the outgoing interface's MTU. veclane does not fragment what it forwards:
//! a packet larger than the MTU with Don't Fragment set gets ICMP fragmentation needed with
//! the MTU (RFC 1191 path MTU discovery then shrinks the sender's packets); one without DF is
//! dropped and counted, because fragmenting would cost a copy per fragment on the fast path
//! and every modern sender sets DF (RFC 8900 on why fragmentation is fragile anyway). Its own
//! packets without DF (echo replies) go to `ip4-frag`, as a host's would.

use fib::adj::Adjacency;
use graph::{Ctx, Node};
use wire::{EtherType, Ethernet, Ipv4, MacAddr};

use crate::interface_output::{NoOut, Out, out_for};
use crate::ip4_icmp_error::{FRAG_NEEDED, TTL_EXCEEDED};
use crate::{ETH_HDR, Shared};

#[derive(Debug)]
pub struct Ip4Rewrite {
    shared: Shared,
}

impl Ip4Rewrite {
    pub fn new(shared: Shared) -> Ip4Rewrite {
        Ip4Rewrite { shared }
    }
}

graph::node! {
    Ip4Rewrite: "ip4-rewrite", Internal;
    next Next {
        Memif = "memif-output",
        AfPacket = "af-packet-output",
        AfXdp = "af-xdp-output",
        Vxlan = "vxlan4-encap",
        Drop = "error-drop",
        IcmpError = "ip4-icmp-error",
        Frag = "ip4-frag",
    }
    error Error {
        AdminDown = "tx interface admin down",
        NoInterface = "tx interface deleted",
        TtlExpired = "ttl expired (sent to ip4-icmp-error)",
        MtuExceeded = "over the interface mtu with df set (sent to ip4-icmp-error)",
        MtuDrop = "over the interface mtu without df (not fragmented, dropped)",
        MtuOwn = "our own packet over the interface mtu with df set (an encapsulated one: the uplink's mtu is too small)",
        NoHeadroom = "no headroom for the l2 header",
        StaleAdj = "adjacency changed",
    }
    trace RewriteTrace { tx_if: u32 }
}

impl core::fmt::Display for RewriteTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "tx interface {}", self.tx_if)
    }
}

impl Node for Ip4Rewrite {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let adjs = self.shared.adjacencies.load();
        let ifs = self.shared.interfaces.load();
        // The next node (and the error, if it is a drop) of the previous packet's interface: a
        // frame is usually one interface's.
        let (mut last_if, mut last_next, mut last_err) = (buffer::NONE, 0u16, None);
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let adj = ctx.pool.meta(b).adj;
            let Some(&Adjacency::Rewrite {
                tx_if,
                dst,
                src,
                mtu,
                ..
            }) = adjs.get(adj as usize)
            else {
                ctx.count_error(Error::StaleAdj);
                *n = Next::Drop.into();
                continue;
            };
            // Expose the room for the Ethernet header first, so that one slice covers both.
            let Some((m, f)) = ctx.pool.push_front_meta(b, ETH_HDR) else {
                ctx.count_error(Error::NoHeadroom);
                *n = Next::Drop.into();
                continue;
            };
            let Some((eth, ip)) = f.split_first_chunk_mut::<ETH_HDR>() else {
                // `push_front` just made room for the header; unreachable.
                *n = Next::Drop.into();
                continue;
            };
            let (local, traced) = (
                m.flags & crate::LOCALLY_ORIGINATED != 0,
                m.flags & graph::BUFFER_TRACED != 0,
            );
            // The TTL and checksum are all this node touches of the IPv4 header (RFC 1812
            // order: TTL first, then the MTU, then the decrement).
            let Some(ip) = ip.first_chunk_mut::<{ wire::ipv4::field::CHECKSUM.end }>() else {
                // ip4-input guaranteed a full header in the head buffer; unreachable.
                *n = Next::Drop.into();
                continue;
            };
            let mut ip = Ipv4::new_unchecked(ip);
            if !local && ip.ttl() <= 1 {
                m.skip(ETH_HDR as u16);
                m.error = TTL_EXCEEDED;
                ctx.count_error(Error::TtlExpired);
                *n = Next::IcmpError.into();
                continue;
            }
            if m.total_len - ETH_HDR as u32 > u32::from(mtu) {
                m.skip(ETH_HDR as u16);
                // Our own packets get no error (it would be addressed to ourselves): without
                // DF they are fragmented (an echo reply to a large ping), with it (an
                // encapsulated one too big for the uplink) dropped.
                if local && !ip.dont_frag() {
                    *n = Next::Frag.into();
                } else if local {
                    ctx.count_error(Error::MtuOwn);
                    *n = Next::Drop.into();
                } else if ip.dont_frag() {
                    m.tx_if = tx_if;
                    m.error = FRAG_NEEDED;
                    ctx.count_error(Error::MtuExceeded);
                    *n = Next::IcmpError.into();
                } else {
                    ctx.count_error(Error::MtuDrop);
                    *n = Next::Drop.into();
                }
                continue;
            }
            if !local {
                ip.decrement_ttl();
            }
            let mut eth = Ethernet::new_unchecked(eth);
            eth.set_dst(MacAddr(dst));
            eth.set_src(MacAddr(src));
            eth.set_ethertype(EtherType::Ipv4);
            m.tx_if = tx_if;
            if traced {
                ctx.trace(b, RewriteTrace { tx_if });
            }
            if tx_if != last_if {
                (last_next, last_err) = match out_for(&ifs, tx_if) {
                    Ok(Out::Memif) => (Next::Memif.into(), None),
                    Ok(Out::AfPacket) => (Next::AfPacket.into(), None),
                    Ok(Out::AfXdp) => (Next::AfXdp.into(), None),
                    Ok(Out::Vxlan) => (Next::Vxlan.into(), None),
                    Err(NoOut::AdminDown) => (Next::Drop.into(), Some(Error::AdminDown)),
                    Err(NoOut::Gone) => (Next::Drop.into(), Some(Error::NoInterface)),
                };
                last_if = tx_if;
            }
            if let Some(e) = last_err {
                ctx.count_error(e);
            }
            *n = last_next;
        }
    }
}
