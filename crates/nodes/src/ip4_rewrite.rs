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
//!
//! A TCP super-frame (a pod's segmentation offload, [`buffer::Meta::gso_size`]) is within the
//! MTU when its segments are. It goes whole to an interface that takes super-frames (a pod's
//! tap) and to `gso-ip4`, to be cut into segments, on the way to any other.

use fib::adj::Adjacency;
use graph::{Ctx, Node};
use wire::{EtherType, Ethernet, Ipv4, MacAddr};

use crate::interface_output::{NoOut, Out, Rewrite, out_for, rewrite_for};
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
        Vxlan = "vxlan4-encap",
        Drop = "error-drop",
        IcmpError = "ip4-icmp-error",
        Frag = "ip4-frag",
        Gso = "gso-ip4",
    } + devices
    error Error {
        AdminDown = "tx interface admin down",
        NoInterface = "tx interface deleted",
        TtlExpired = "ttl expired (sent to ip4-icmp-error)",
        MtuExceeded = "over the interface mtu with df set (sent to ip4-icmp-error)",
        MtuDrop = "over the interface mtu without df (not fragmented, dropped)",
        MtuOwn = "our own packet over the interface mtu with df set (an encapsulated one: the uplink's mtu is too small)",
        NoHeadroom = "no headroom for the l2 header",
        StaleAdj = "adjacency changed",
        BadSuperFrame = "super-frame whose headers do not parse (dropped)",
    }
    trace RewriteTrace { tx_if: u32 }
}

impl core::fmt::Display for RewriteTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "tx interface {}", self.tx_if)
    }
}

/// What a frame's packets to one adjacency share, worked out once for the first of them: the
/// fast path's whole state (VPP's rewrite string, cached per frame). `ip4-lookup` keeps one
/// too, to rewrite the packets it forwards itself.
#[derive(Clone, Copy)]
pub(crate) struct Fast {
    /// The adjacency this is for ([`buffer::NONE`]: none yet).
    pub adj: u32,
    /// Its rewrite, when packets to it take the fast path: a rewrite on an interface that is
    /// up.
    pub rw: Option<Rewrite>,
    /// The node that sends on the rewrite's interface, as the caller's next index.
    pub next: u16,
}

impl Fast {
    pub const NONE: Fast = Fast {
        adj: buffer::NONE,
        rw: None,
        next: 0,
    };

    /// `adj`'s fast-path state, `next` naming the caller's next node for a kind of device.
    pub fn of(
        adjs: &[Adjacency],
        ifs: &[crate::IfConfig],
        adj: u32,
        next: impl Fn(Out) -> u16,
    ) -> Fast {
        let rw = rewrite_for(adjs, ifs, adj);
        Fast {
            adj,
            rw,
            next: rw.map_or(0, |r| next(r.out)),
        }
    }
}

/// Rewrites a forwarded packet whose head buffer `f` starts at the room just exposed for the
/// Ethernet header and holds its whole IPv4 header: `hdr` written, the TTL decremented and the
/// checksum updated. `false` (nothing written) when the TTL would expire or the header is not
/// there.
#[inline(always)]
pub(crate) fn forward(hdr: &[u8; ETH_HDR], f: &mut [u8]) -> bool {
    let Some(h) = f.first_chunk_mut::<{ CHECKSUM_AT + 2 }>() else {
        return false;
    };
    if h[TTL_AT] <= 1 {
        return false;
    }
    h[..ETH_HDR].copy_from_slice(hdr);
    h[TTL_AT] -= 1;
    // RFC 1624 eqn. 3 with m' = m - 0x0100 (the TTL is the high byte of its word):
    // ~m + m' is 0xfeff, so HC' = ~(~HC + 0xfeff), one fold. The one's-complement sum does
    // not depend on byte order (RFC 1071 §2(B)): the word is taken in the host's order with
    // the constant in the same order, which spares two byte swaps.
    const DELTA: u16 = u16::from_ne_bytes(0xfeffu16.to_be_bytes());
    let c = u16::from_ne_bytes([h[CHECKSUM_AT], h[CHECKSUM_AT + 1]]);
    let acc = u32::from(!c) + u32::from(DELTA);
    let c = !(((acc & 0xffff) + (acc >> 16)) as u16);
    h[CHECKSUM_AT..CHECKSUM_AT + 2].copy_from_slice(&c.to_ne_bytes());
    true
}

/// Byte offsets, from the start of the Ethernet header, of the IPv4 TTL and checksum.
const TTL_AT: usize = ETH_HDR + wire::ipv4::field::TTL;
const CHECKSUM_AT: usize = ETH_HDR + wire::ipv4::field::CHECKSUM.start;

impl Node for Ip4Rewrite {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let adjs = self.shared.adjacencies.load();
        let ifs = self.shared.interfaces.load();
        let mut fast = Fast::NONE;
        // The slow path's memory of the previous packet's interface (see `rewrite`).
        let mut last = (buffer::NONE, 0u16, None);
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let m = ctx.pool.meta(b);
            if m.adj != fast.adj {
                fast = Fast::of(&adjs, &ifs, m.adj, |out| out.next(Next::Vxlan));
            }
            let (flags, total, gso) = (m.flags, m.total_len, m.gso_size);
            // Fast path, almost every packet: a rewrite on an interface that is up, a packet
            // we forward (not our own, not traced, not a super-frame) within the MTU, TTL
            // above one.
            if let Some(r) = &fast.rw
                && flags & (crate::LOCALLY_ORIGINATED | graph::BUFFER_TRACED) == 0
                && total <= r.mtu
                && gso == 0
                && let Some((m, f)) = ctx.pool.push_front_meta(b, ETH_HDR)
            {
                // ip4-input left a whole IPv4 header in the head buffer.
                if forward(&r.hdr, f) {
                    m.tx_if = r.tx_if;
                    *n = fast.next;
                    continue;
                }
                m.skip(ETH_HDR as u16);
            } else if let Some(r) = &fast.rw
                && flags & (crate::LOCALLY_ORIGINATED | graph::BUFFER_TRACED)
                    == crate::LOCALLY_ORIGINATED
                && total <= r.mtu
                && gso == 0
                && let Some((m, f)) = ctx.pool.push_front_meta(b, ETH_HDR)
            {
                // Our own packet within the MTU (an encapsulated one, on its way to the
                // uplink): the header only, its TTL left alone.
                if let Some(h) = f.first_chunk_mut::<ETH_HDR>() {
                    *h = r.hdr;
                    m.tx_if = r.tx_if;
                    *n = fast.next;
                    continue;
                }
                m.skip(ETH_HDR as u16);
            }
            *n = rewrite(ctx, &adjs, &ifs, b, &mut last);
        }
    }
}

/// The whole rewrite of one packet, every case: what the fast path in `process` leaves.
/// `last` is the previous packet's interface with its next node and error (a frame is usually
/// one interface's).
#[inline(never)]
fn rewrite(
    ctx: &mut Ctx<'_, Ip4Rewrite>,
    adjs: &[Adjacency],
    ifs: &[crate::IfConfig],
    b: u32,
    last: &mut (u32, u16, Option<Error>),
) -> u16 {
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
        return Next::Drop.into();
    };
    // Expose the room for the Ethernet header first, so that one slice covers both.
    let Some((m, f)) = ctx.pool.push_front_meta(b, ETH_HDR) else {
        ctx.count_error(Error::NoHeadroom);
        return Next::Drop.into();
    };
    // What the MTU bounds: the packet, or a super-frame's segments.
    let gso = m.gso_size;
    let size = if gso == 0 {
        Some(m.total_len as usize - ETH_HDR)
    } else {
        wire::tso::SuperFrame::segment_ip_len(&f[ETH_HDR..], gso)
    };
    let Some(size) = size else {
        m.skip(ETH_HDR as u16);
        ctx.count_error(Error::BadSuperFrame);
        return Next::Drop.into();
    };
    let Some((eth, ip)) = f.split_first_chunk_mut::<ETH_HDR>() else {
        // `push_front` just made room for the header; unreachable.
        return Next::Drop.into();
    };
    let (local, traced) = (
        m.flags & crate::LOCALLY_ORIGINATED != 0,
        m.flags & graph::BUFFER_TRACED != 0,
    );
    // The TTL and checksum are all this node touches of the IPv4 header (RFC 1812
    // order: TTL first, then the MTU, then the decrement).
    let Some(ip) = ip.first_chunk_mut::<{ wire::ipv4::field::CHECKSUM.end }>() else {
        // ip4-input guaranteed a full header in the head buffer; unreachable.
        return Next::Drop.into();
    };
    let mut ip = Ipv4::new_unchecked(ip);
    if !local && ip.ttl() <= 1 {
        m.skip(ETH_HDR as u16);
        m.error = TTL_EXCEEDED;
        ctx.count_error(Error::TtlExpired);
        return Next::IcmpError.into();
    }
    if size > usize::from(mtu) {
        m.skip(ETH_HDR as u16);
        // Our own packets get no error (it would be addressed to ourselves): without
        // DF they are fragmented (an echo reply to a large ping), with it (an
        // encapsulated one too big for the uplink) dropped.
        return if local && !ip.dont_frag() {
            Next::Frag.into()
        } else if local {
            ctx.count_error(Error::MtuOwn);
            Next::Drop.into()
        } else if ip.dont_frag() {
            m.tx_if = tx_if;
            m.error = FRAG_NEEDED;
            ctx.count_error(Error::MtuExceeded);
            Next::IcmpError.into()
        } else {
            ctx.count_error(Error::MtuDrop);
            Next::Drop.into()
        };
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
    let (last_if, last_next, last_err) = last;
    if tx_if != *last_if {
        (*last_next, *last_err) = match out_for(ifs, tx_if) {
            Ok(out) => (out.next(Next::Vxlan), None),
            Err(NoOut::AdminDown) => (Next::Drop.into(), Some(Error::AdminDown)),
            Err(NoOut::Gone) => (Next::Drop.into(), Some(Error::NoInterface)),
        };
        *last_if = tx_if;
    }
    if let Some(e) = *last_err {
        ctx.count_error(e);
    } else if gso != 0 && ifs.get(tx_if as usize).is_some_and(|c| !c.super_frames) {
        return Next::Gso.into();
    }
    *last_next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_update_is_rfc_1624s_for_every_checksum() {
        // The update in the host's byte order against RFC 1624 eqn. 3 in network order.
        let hdr = [7u8; ETH_HDR];
        for c in 0..=u16::MAX {
            let mut f = [0u8; CHECKSUM_AT + 2];
            f[TTL_AT] = 64;
            f[CHECKSUM_AT..].copy_from_slice(&c.to_be_bytes());
            assert!(forward(&hdr, &mut f));
            let acc = u32::from(!c) + 0xfeff;
            let want = !(((acc & 0xffff) + (acc >> 16)) as u16);
            assert_eq!(
                u16::from_be_bytes([f[CHECKSUM_AT], f[CHECKSUM_AT + 1]]),
                want,
                "{c:#06x}"
            );
            assert_eq!((f[TTL_AT], &f[..ETH_HDR]), (63, &hdr[..]));
        }
        let mut f = [0u8; CHECKSUM_AT + 2];
        f[TTL_AT] = 1;
        let before = f;
        assert!(!forward(&hdr, &mut f), "a TTL of 1 expires here");
        assert_eq!(f, before, "nothing written");
    }
}

#[cfg(test)]
mod super_frame_tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;
    use fib::Ipv4Addr;
    use fib::adj::AdjTable;

    use super::*;
    use crate::testing::run_one;
    use crate::{Device, IfConfig};

    /// ip4-rewrite over interface 0 (`edit`ed) to a known neighbour with `mtu`.
    fn node(mtu: u16, edit: impl FnOnce(&mut IfConfig)) -> (Ip4Rewrite, AdjTable, u32) {
        let mut adj = AdjTable::new();
        adj.set_interface_mac(0, [2, 0, 0, 0, 0, 1]);
        adj.set_interface_mtu(0, mtu);
        let a = adj.add_next_hop(0, Ipv4Addr::new(10, 0, 0, 2));
        adj.learn(0, Ipv4Addr::new(10, 0, 0, 2), [2, 0, 0, 0, 0, 2]);
        let mut c = IfConfig::new([2, 0, 0, 0, 0, 1], 0);
        edit(&mut c);
        let shared = Shared::new(
            Arc::new(ArcSwap::from_pointee(vec![c])),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            adj.reader(),
        );
        (Ip4Rewrite::new(shared), adj, a)
    }

    /// A super-frame of 10,000 bytes in segments of 1448 is within an MTU of 1500 (its
    /// segments are): whole to a tap, to `gso-ip4` for anything else; over an MTU of 1400
    /// with DF, ICMP fragmentation needed.
    #[test]
    fn a_super_frame_is_measured_by_its_segments_and_cut_only_for_others() {
        let f = crate::gso_ip4::tests::super_frame(&[5; 10_000]);
        let ip = &f[ETH_HDR..];
        let run = |n: Ip4Rewrite, a: u32| {
            run_one(n, &ip[..200], &ip[200..], move |m| {
                (m.adj, m.gso_size) = (a, 1448);
            })
        };
        let tap = |c: &mut IfConfig| {
            c.device = Device::Output(3);
            c.super_frames = true;
        };
        let (n, _adj, a) = node(1500, tap);
        let ((next, bytes, _, m), errors) = run(n, a);
        assert_eq!((next, errors), ("tap-output", vec![]));
        assert_eq!((bytes.len(), m.gso_size), (f.len(), 1448));
        assert_eq!(&bytes[..ETH_HDR], &f[..ETH_HDR]);
        assert_eq!(bytes[ETH_HDR + 8], 63, "TTL decremented");
        let (n, _adj, a) = node(1500, |c| c.device = Device::Output(3));
        assert_eq!(run(n, a).0.0, "gso-ip4");
        let (n, _adj, a) = node(1400, tap);
        let ((next, _, _, m), errors) = run(n, a);
        assert_eq!((next, m.error), ("ip4-icmp-error", FRAG_NEEDED));
        assert_eq!(
            errors,
            ["over the interface mtu with df set (sent to ip4-icmp-error)"]
        );
    }
}
