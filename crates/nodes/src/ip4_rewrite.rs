//! `ip4-rewrite`: decrements TTL with an incremental checksum update (RFC 1624) and writes the
//! Ethernet header of the chosen adjacency in front of the packet. A packet whose TTL would
//! reach zero goes to `ip4-icmp-error` (time exceeded) untouched.

use fib::adj::Adjacency;
use graph::{Ctx, Node};
use wire::{EtherType, Ethernet, Ipv4, MacAddr};

use crate::ip4_icmp_error::TTL_EXCEEDED;
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
        Output = "interface-output",
        Drop = "error-drop",
        IcmpError = "ip4-icmp-error",
    }
    error Error {
        TtlExpired = "ttl expired (sent to ip4-icmp-error)",
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
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let adj = ctx.pool.meta(b).adj;
            let Some(&Adjacency::Rewrite {
                tx_if, dst, src, ..
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
            // The TTL and checksum are all this node touches of the IPv4 header.
            if !local && let Some(ip) = ip.first_chunk_mut::<{ wire::ipv4::field::CHECKSUM.end }>()
            {
                let mut ip = Ipv4::new_unchecked(ip);
                if ip.ttl() <= 1 {
                    m.skip(ETH_HDR as u16);
                    m.error = TTL_EXCEEDED;
                    ctx.count_error(Error::TtlExpired);
                    *n = Next::IcmpError.into();
                    continue;
                }
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
            *n = Next::Output.into();
        }
    }
}
