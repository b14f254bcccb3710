//! `ip4-lookup`: longest-prefix match of the destination in the packet's VRF.
//!
//! A packet with no route goes to `ip4-icmp-error` (destination unreachable, net unreachable)
//! unless we originated it; one whose next hop is not resolved yet goes to `ip4-glean`. Both
//! are still counted here, so `show errors` tells why a packet did not go on.

use fib::Ipv4Addr;
use fib::adj::Adjacency;
use graph::{Ctx, Node, NodeInfo, NodeKind};

use crate::Shared;
use crate::ip4_icmp_error::NET_UNREACHABLE;

const NEXT_REWRITE: u16 = 0;
const NEXT_DROP: u16 = 1;
const NEXT_LOCAL: u16 = 2;
const NEXT_ICMP_ERROR: u16 = 3;
const NEXT_GLEAN: u16 = 4;

const E_NO_ROUTE: usize = 0;
const E_NO_VRF: usize = 1;
const E_GLEAN: usize = 2;
const E_DROP_ROUTE: usize = 3;
const E_SHORT: usize = 4;

#[derive(Debug)]
pub struct Ip4Lookup {
    shared: Shared,
}

impl Ip4Lookup {
    pub fn new(shared: Shared) -> Ip4Lookup {
        Ip4Lookup { shared }
    }
}

impl Node for Ip4Lookup {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "ip4-lookup",
            kind: NodeKind::Internal,
            nexts: &[
                "ip4-rewrite",
                "error-drop",
                "ip4-local",
                "ip4-icmp-error",
                "ip4-glean",
            ],
            errors: &[
                "no route",
                "vrf does not exist",
                "next hop unresolved (sent to ip4-glean)",
                "drop route",
                "ip4 header truncated",
            ],
        }
    }

    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
        let vrfs = self.shared.vrfs.load();
        let adjs = self.shared.adjacencies.load();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let (m, d) = ctx.pool.meta_data_mut(b);
            // ip4-input guaranteed a full header; a node that feeds us anything shorter is
            // counted, never trusted.
            let Some(a) = d.get(16..20) else {
                ctx.count_error(E_SHORT);
                *n = NEXT_DROP;
                continue;
            };
            let dst = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            let vrf = m.vrf;
            let Some(table) = vrfs.get(vrf as usize) else {
                ctx.count_error(E_NO_VRF);
                *n = NEXT_DROP;
                continue;
            };
            let Some(adj) = table.lookup(dst) else {
                ctx.count_error(E_NO_ROUTE);
                let m = ctx.pool.meta_mut(b);
                // An error about our own packet would be addressed to ourselves.
                *n = if m.flags & crate::LOCALLY_ORIGINATED != 0 {
                    NEXT_DROP
                } else {
                    m.error = NET_UNREACHABLE;
                    NEXT_ICMP_ERROR
                };
                continue;
            };
            if let Some(Adjacency::Rewrite { .. }) = adjs.get(adj as usize)
                && m.flags & graph::BUFFER_TRACED == 0
            {
                // Fast path: forwarded, not traced.
                m.adj = adj;
                *n = NEXT_REWRITE;
                continue;
            }
            if ctx.is_traced(b) {
                let mut t = [0u8; 8];
                t[..4].copy_from_slice(&vrf.to_be_bytes());
                t[4..].copy_from_slice(&adj.to_be_bytes());
                ctx.trace(b, &t);
            }
            *n = match adjs.get(adj as usize).unwrap_or(&Adjacency::Drop) {
                Adjacency::Rewrite { .. } => {
                    ctx.pool.meta_mut(b).adj = adj;
                    NEXT_REWRITE
                }
                Adjacency::Local => NEXT_LOCAL,
                Adjacency::Glean { .. } => {
                    ctx.count_error(E_GLEAN);
                    ctx.pool.meta_mut(b).adj = adj;
                    NEXT_GLEAN
                }
                Adjacency::Drop => {
                    ctx.count_error(E_DROP_ROUTE);
                    NEXT_DROP
                }
            };
        }
    }

    fn format_trace(&self, data: &[u8]) -> String {
        let vrf = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        let adj = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
        format!("fib {vrf} adj {adj}")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;
    use fib::adj::AdjTable;

    use super::*;
    use crate::testing::run_one;

    #[test]
    fn a_buffer_shorter_than_an_ip4_header_is_counted_and_dropped() {
        let shared = Shared {
            interfaces: Arc::new(ArcSwap::from_pointee(Vec::new())),
            vrfs: Arc::new(ArcSwap::from_pointee(Vec::new())),
            adjacencies: AdjTable::new().reader(),
        };
        let ((next, _, _, _), errors) =
            run_one(Box::new(Ip4Lookup::new(shared)), &[0x45; 12], &[], |_| {});
        assert_eq!(next, "error-drop");
        assert_eq!(errors, ["ip4 header truncated"]);
    }
}
