//! `ip4-lookup`: longest-prefix match of the destination in the packet's VRF.
//!
//! A packet with no route goes to `ip4-icmp-error` (destination unreachable, net unreachable)
//! unless we originated it; one whose next hop is not resolved yet goes to `ip4-glean`. Both
//! are still counted here, so `show errors` tells why a packet did not go on.
//!
//! A packet we forward (not our own; traced or not) whose adjacency is a rewrite on an interface
//! that is up, within its MTU and with a TTL above one, is rewritten here as `ip4-rewrite`
//! would (Ethernet header, TTL, checksum) and handed straight to the interface's device node:
//! one node less per forwarded packet. Everything else goes to `ip4-rewrite` with its
//! adjacency, which knows every other case. (`ethernet-input` makes the same fast path itself
//! for the frames it checks: what reaches this node from there is mostly what it refused.)

use fib::adj::Adjacency;
use graph::{Ctx, Node};
use wire::Ipv4;
use wire::ipv4::MIN_HEADER_LEN;

use crate::ip4_icmp_error::NET_UNREACHABLE;
use crate::ip4_rewrite::{Fast, forward};
use crate::{ETH_HDR, Shared, SharedView};

#[derive(Debug)]
pub struct Ip4Lookup {
    shared: SharedView,
}

impl Ip4Lookup {
    pub fn new(shared: Shared) -> Ip4Lookup {
        Ip4Lookup {
            shared: SharedView::new(&shared),
        }
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
        Vxlan = "vxlan4-encap",
        Session = "ip4-session",
    } + devices
    error Error {
        NoRoute = "no route",
        NoVrf = "vrf does not exist",
        Glean = "next hop unresolved (sent to ip4-glean)",
        DropRoute = "drop route",
        Short = "ip4 header truncated",
    }
    trace LookupTrace { vrf: u32, adj: u32, tx_if: u32 }
}

impl core::fmt::Display for LookupTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "fib {} adj {}", self.vrf, self.adj)?;
        if self.tx_if != buffer::NONE {
            write!(f, ", rewritten for tx interface {}", self.tx_if)?;
        }
        Ok(())
    }
}

impl Node for Ip4Lookup {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let SharedView {
            vrfs,
            adjacencies,
            interfaces,
            services,
            ..
        } = &mut self.shared;
        let (vrfs, adjs, ifs) = (&**vrfs.load(), &**adjacencies.load(), &**interfaces.load());
        let services = &**services.load();
        // The previous rewrite adjacency's header, interface and device node.
        let mut fast = Fast::NONE;
        // The previous packet's VRF and table, and its adjacency and whether that is a
        // rewrite: a frame is usually one flow's, or a few.
        let (mut last_vrf, mut table, mut stateful) = (buffer::NONE, None, false);
        let (mut last_adj, mut rewrite) = (buffer::NONE, false);
        let mut i = 0;
        while i < bufs.len() {
            let (b, n) = (bufs[i], &mut next[i]);
            i += 1;
            // The packet with the room for its Ethernet header before it (`front`), so that a
            // forwarded one is rewritten through the same slice; without that room, the
            // packet alone (ip4-rewrite says why it cannot go out).
            let (m, f, front) = match ctx.pool.meta_data_front_mut(b, ETH_HDR) {
                Some((m, f)) => (m, f, ETH_HDR),
                None => {
                    let (m, d) = ctx.pool.meta_data_mut(b);
                    (m, d, 0)
                }
            };
            // ip4-input guaranteed a full header; a node that feeds us anything shorter is
            // counted, never trusted.
            let Some(ip) = f
                .get(front..)
                .and_then(|d| d.first_chunk::<MIN_HEADER_LEN>())
                .map(Ipv4::new_unchecked)
            else {
                ctx.count_error(Error::Short);
                *n = Next::Drop.into();
                continue;
            };
            let dst = ip.dst_addr();
            let vrf = m.vrf;
            if vrf != last_vrf {
                (last_vrf, table) = (vrf, vrfs.get(vrf as usize));
                stateful = services.stateful(vrf);
            }
            // A network that keeps sessions: its sessions first. Our own packets need none,
            // but for the ICMP errors we make, which must be translated like the packets
            // they are about.
            if stateful
                && m.flags & crate::ip4_session::SESSION_DONE == 0
                && (m.flags & crate::LOCALLY_ORIGINATED == 0
                    || crate::session_icmp::is_error(&f[front..]))
            {
                *n = Next::Session.into();
                continue;
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
            let flags = m.flags;
            if rewrite && flags & crate::LOCALLY_ORIGINATED == 0 {
                // Fast path: forwarded, rewritten here when it can be. A traced packet takes
                // it too (with a record saying so), so that tracing moves no packet out of
                // its place among the others.
                m.adj = adj;
                if adj != fast.adj {
                    fast = Fast::of(adjs, ifs, adj, |out| out.next(Next::Vxlan));
                }
                let mut to = Next::Rewrite.into();
                if let Some(r) = &fast.rw
                    && m.total_len <= r.mtu
                    && m.gso_size == 0
                    && front == ETH_HDR
                    && forward(&r.hdr, f)
                {
                    m.expose(ETH_HDR as u16);
                    m.tx_if = r.tx_if;
                    to = fast.next;
                }
                if flags & graph::BUFFER_TRACED != 0 {
                    // The interface it was rewritten for; none when ip4-rewrite takes it (a
                    // device node's index is never ip4-rewrite's).
                    let tx_if = match &fast.rw {
                        Some(r) if to == fast.next => r.tx_if,
                        _ => buffer::NONE,
                    };
                    ctx.trace(b, LookupTrace { vrf, adj, tx_if });
                } else if to == fast.next {
                    // The packets after it are most likely the same flow's, or its
                    // neighbours': the direct loop takes them while they are.
                    *n = to;
                    i += forward_run(ctx.pool, table, vrf, &fast, &bufs[i..], &mut next[i..]);
                    continue;
                }
                *n = to;
                continue;
            }
            if rewrite && flags & graph::BUFFER_TRACED == 0 {
                // Our own packet (an encapsulated one, an answer): ip4-rewrite leaves its TTL.
                m.adj = adj;
                *n = Next::Rewrite.into();
                continue;
            }
            if ctx.is_traced(b) {
                let tx_if = buffer::NONE;
                ctx.trace(b, LookupTrace { vrf, adj, tx_if });
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

/// The direct loop: takes packets from the front of `bufs` for as long as each is one this
/// node forwards and rewrites itself to the adjacency `fast` was made for, in VRF `vrf`
/// (looked up in `table`), untraced, not our own and not a super-frame, and returns how many it took; the node's
/// loop takes the rest, from the first packet that is anything else. What it does to a
/// packet is exactly what that loop would; it only does it with the frame's state in
/// registers and the pool borrowed once.
#[inline(never)]
fn forward_run(
    pool: &mut buffer::Pool,
    table: &fib::LpmReader,
    vrf: u32,
    fast: &Fast,
    bufs: &[u32],
    next: &mut [u16],
) -> usize {
    let Some(r) = &fast.rw else {
        return 0;
    };
    let (adj, to, hdr, mtu, tx_if) = (fast.adj, fast.next, r.hdr, r.mtu, r.tx_if);
    let skip = crate::LOCALLY_ORIGINATED | graph::BUFFER_TRACED;
    let table = table.view();
    let mut pool = pool.view();
    for (i, (&b, n)) in bufs.iter().zip(next.iter_mut()).enumerate() {
        let Some((m, f)) = pool.meta_data_front_mut(b, ETH_HDR) else {
            return i;
        };
        if m.vrf != vrf || m.flags & skip != 0 || m.total_len > mtu || m.gso_size != 0 {
            return i;
        }
        let Some(ip) = f
            .get(ETH_HDR..)
            .and_then(|d| d.first_chunk::<MIN_HEADER_LEN>())
            .map(Ipv4::new_unchecked)
        else {
            return i;
        };
        if table.lookup(ip.dst_addr()) != Some(adj) || !forward(&hdr, f) {
            return i;
        }
        m.adj = adj;
        m.expose(ETH_HDR as u16);
        m.tx_if = tx_if;
        *n = to;
    }
    bufs.len()
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
