//! `ip4-lookup`: longest-prefix match of the destination in the packet's VRF.
//!
//! A packet with no route goes to `ip4-icmp-error` (destination unreachable, net unreachable)
//! unless we originated it; one whose next hop is not resolved yet goes to `ip4-glean`. Both
//! are still counted here, so `show errors` tells why a packet did not go on.

use fib::adj::Adjacency;
use graph::{Ctx, Node};
use wire::Ipv4;
use wire::ipv4::MIN_HEADER_LEN;

use crate::Shared;
use crate::ip4_icmp_error::NET_UNREACHABLE;

#[derive(Debug)]
pub struct Ip4Lookup {
    shared: Shared,
}

impl Ip4Lookup {
    pub fn new(shared: Shared) -> Ip4Lookup {
        Ip4Lookup { shared }
    }
}

graph::node! {
    Ip4Lookup: "ip4-lookup", Internal;
    next Next {
        Rewrite = "ip4-rewrite",
        Drop = "error-drop",
        Local = "ip4-local",
        IcmpError = "ip4-icmp-error",
        Glean = "ip4-glean",
    }
    error Error {
        NoRoute = "no route",
        NoVrf = "vrf does not exist",
        Glean = "next hop unresolved (sent to ip4-glean)",
        DropRoute = "drop route",
        Short = "ip4 header truncated",
    }
    trace LookupTrace { vrf: u32, adj: u32 }
}

impl core::fmt::Display for LookupTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "fib {} adj {}", self.vrf, self.adj)
    }
}

impl Node for Ip4Lookup {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let vrfs = self.shared.vrfs.load();
        let adjs = self.shared.adjacencies.load();
        // The previous packet's VRF and table, and its adjacency and whether that is a
        // rewrite: a frame is usually one flow's, or a few.
        let (mut last_vrf, mut table) = (buffer::NONE, None);
        let (mut last_adj, mut rewrite) = (buffer::NONE, false);
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let (m, d) = ctx.pool.meta_data_mut(b);
            // ip4-input guaranteed a full header; a node that feeds us anything shorter is
            // counted, never trusted.
            let Some(ip) = d.first_chunk::<MIN_HEADER_LEN>().map(Ipv4::new_unchecked) else {
                ctx.count_error(Error::Short);
                *n = Next::Drop.into();
                continue;
            };
            let dst = ip.dst_addr();
            let vrf = m.vrf;
            if vrf != last_vrf {
                (last_vrf, table) = (vrf, vrfs.get(vrf as usize));
            }
            let Some(table) = table else {
                ctx.count_error(Error::NoVrf);
                *n = Next::Drop.into();
                continue;
            };
            let Some(adj) = table.lookup(dst) else {
                ctx.count_error(Error::NoRoute);
                let m = ctx.pool.meta_mut(b);
                // An error about our own packet would be addressed to ourselves.
                *n = if m.flags & crate::LOCALLY_ORIGINATED != 0 {
                    Next::Drop.into()
                } else {
                    m.error = NET_UNREACHABLE;
                    Next::IcmpError.into()
                };
                continue;
            };
            if adj != last_adj {
                last_adj = adj;
                rewrite = matches!(adjs.get(adj as usize), Some(Adjacency::Rewrite { .. }));
            }
            if rewrite && m.flags & graph::BUFFER_TRACED == 0 {
                // Fast path: forwarded, not traced.
                m.adj = adj;
                *n = Next::Rewrite.into();
                continue;
            }
            if ctx.is_traced(b) {
                ctx.trace(b, LookupTrace { vrf, adj });
            }
            *n = match adjs.get(adj as usize).unwrap_or(&Adjacency::Drop) {
                Adjacency::Rewrite { .. } => {
                    ctx.pool.meta_mut(b).adj = adj;
                    Next::Rewrite.into()
                }
                Adjacency::Local => Next::Local.into(),
                Adjacency::Glean { .. } => {
                    ctx.count_error(Error::Glean);
                    ctx.pool.meta_mut(b).adj = adj;
                    Next::Glean.into()
                }
                Adjacency::Drop => {
                    ctx.count_error(Error::DropRoute);
                    Next::Drop.into()
                }
            };
        }
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
        let shared = Shared::new(
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            AdjTable::new().reader(),
        );
        let ((next, _, _, _), errors) = run_one(Ip4Lookup::new(shared), &[0x45; 12], &[], |_| {});
        assert_eq!(next, "error-drop");
        assert_eq!(errors, ["ip4 header truncated"]);
    }
}
