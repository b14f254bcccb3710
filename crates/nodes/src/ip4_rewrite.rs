//! `ip4-rewrite`: decrements TTL with an incremental checksum update (RFC 1624) and writes the
//! Ethernet header of the chosen adjacency in front of the packet. A packet whose TTL would
//! reach zero goes to `ip4-icmp-error` (time exceeded) untouched.

use fib::adj::Adjacency;
use graph::{Ctx, Node, NodeInfo, NodeKind};
use wire::checksum;

use crate::Shared;
use crate::ip4_icmp_error::TTL_EXCEEDED;

const NEXT_OUTPUT: u16 = 0;
const NEXT_DROP: u16 = 1;
const NEXT_ICMP_ERROR: u16 = 2;

const E_TTL_EXPIRED: usize = 0;
const E_NO_HEADROOM: usize = 1;
const E_STALE_ADJ: usize = 2;

#[derive(Debug)]
pub struct Ip4Rewrite {
    shared: Shared,
}

impl Ip4Rewrite {
    pub fn new(shared: Shared) -> Ip4Rewrite {
        Ip4Rewrite { shared }
    }
}

impl Node for Ip4Rewrite {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "ip4-rewrite",
            kind: NodeKind::Internal,
            nexts: &["interface-output", "error-drop", "ip4-icmp-error"],
            errors: &[
                "ttl expired (sent to ip4-icmp-error)",
                "no headroom for the l2 header",
                "adjacency changed",
            ],
        }
    }

    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
        let adjs = self.shared.adjacencies.load();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let adj = ctx.pool.meta(b).adj;
            let Some(&Adjacency::Rewrite {
                tx_if, dst, src, ..
            }) = adjs.get(adj as usize)
            else {
                ctx.count_error(E_STALE_ADJ);
                *n = NEXT_DROP;
                continue;
            };
            // Expose the room for the Ethernet header first, so that one slice covers both.
            let Some((m, f)) = ctx.pool.push_front_meta(b, 14) else {
                ctx.count_error(E_NO_HEADROOM);
                *n = NEXT_DROP;
                continue;
            };
            let Some((eth, ip)) = f.split_first_chunk_mut::<14>() else {
                // `push_front` just made 14 bytes; unreachable.
                *n = NEXT_DROP;
                continue;
            };
            let (local, traced) = (
                m.flags & crate::LOCALLY_ORIGINATED != 0,
                m.flags & graph::BUFFER_TRACED != 0,
            );
            if !local && let Some(ip) = ip.first_chunk_mut::<12>() {
                if ip[8] <= 1 {
                    m.skip(14);
                    m.error = TTL_EXCEEDED;
                    ctx.count_error(E_TTL_EXPIRED);
                    *n = NEXT_ICMP_ERROR;
                    continue;
                }
                let old = u16::from_be_bytes([ip[8], ip[9]]);
                ip[8] -= 1;
                let new = old - 0x100;
                let c = checksum::update(u16::from_be_bytes([ip[10], ip[11]]), old, new);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
            }
            eth[0..6].copy_from_slice(&dst);
            eth[6..12].copy_from_slice(&src);
            eth[12..14].copy_from_slice(&[0x08, 0x00]);
            m.tx_if = tx_if;
            if traced {
                ctx.trace(b, &tx_if.to_be_bytes());
            }
            *n = NEXT_OUTPUT;
        }
    }

    fn format_trace(&self, data: &[u8]) -> String {
        format!(
            "tx interface {}",
            u32::from_be_bytes([data[0], data[1], data[2], data[3]])
        )
    }
}
