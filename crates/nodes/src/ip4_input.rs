//! `ip4-input`: validates the IPv4 header (version, length, checksum, options, TTL) and trims
//! link-layer padding.
//!
//! VXLAN to one of our VTEPs, received in the VTEP's underlay VRF, goes straight to
//! `vxlan4-input` (VPP's `ip4-vxlan-bypass`): an unfragmented UDP datagram to port 4789
//! without a checksum (as VXLAN senders send them, RFC 7348 §5) whose UDP length agrees with
//! IPv4's. `ip4-lookup`, `ip4-local` and `udp4-local` would only have found it ours and
//! dispatched it to the same node, which checks the tunnel, the VTEP address and the VRF
//! itself. Anything else to port 4789 (a checksum to verify, a fragment, a length that
//! disagrees, another of our addresses) takes that longer way and its counters.
//!
//! A packet from an interface with allowed sources (a pod's: see [`crate::sources`]) whose
//! source address is not one of them is dropped here, on every path a packet takes in.

use graph::{Ctx, Node};
use wire::Ipv4;
use wire::ipv4::{MIN_HEADER_LEN, VER_IHL_NO_OPTIONS};

use crate::{AllowedSources, IfConfig, Shared, SharedView};

#[derive(Debug)]
pub struct Ip4Input {
    shared: SharedView,
}

impl Ip4Input {
    pub fn new(shared: Shared) -> Ip4Input {
        Ip4Input {
            shared: SharedView::new(&shared),
        }
    }
}

/// Whether the 28 bytes of an IPv4 header without options and what follows are VXLAN that
/// `vxlan4-input` can take directly (see the module doc): UDP, not a fragment, to port 4789,
/// no checksum, the UDP length the IPv4 payload's.
#[inline]
fn vxlan_bypass(h: &[u8; MIN_HEADER_LEN + 8]) -> bool {
    use wire::ipv4::field as ip;
    use wire::udp::field as udp;
    // Big-endian 16-bit field `f` of the header at `at` (constant offsets: plain loads).
    let be16 =
        |at: usize, f: wire::Field| u16::from_be_bytes([h[at + f.start], h[at + f.start + 1]]);
    const UDP: usize = MIN_HEADER_LEN;
    let frag = be16(0, ip::FLAGS_FRAG);
    h[ip::PROTOCOL] == wire::IpProtocol::Udp.to_raw()
        // Not a fragment: MF clear and offset zero (DF may be set).
        && frag & 0x3fff == 0
        && be16(UDP, udp::DST_PORT) == wire::vxlan::UDP_PORT
        && be16(UDP, udp::CHECKSUM) == 0
        && be16(UDP, udp::LENGTH).wrapping_add(MIN_HEADER_LEN as u16) == be16(0, ip::LENGTH)
}

graph::node! {
    Ip4Input: "ip4-input", Internal;
    next Next {
        Lookup = "ip4-lookup",
        Drop = "error-drop",
        Vxlan = "vxlan4-input",
    }
    error Error {
        BadHeader = "ip4 header malformed or truncated",
        BadChecksum = "ip4 header checksum error",
        Options = "ip4 options present (not forwarded)",
        TtlZero = "ip4 ttl is zero",
        Length = "ip4 length > l2 length",
        Spoofed = "ip4 source address not allowed on this interface",
    }
    trace Ip4InputTrace { ttl: u8 }
}

impl core::fmt::Display for Ip4InputTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ttl {}", self.ttl)
    }
}

impl Node for Ip4Input {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let (vxlan, ifs) = (
            &**self.shared.vxlan.load(),
            &**self.shared.interfaces.load(),
        );
        // A node without tunnels runs the loop without the bypass check at all.
        if vxlan.vteps.is_empty() {
            input::<false>(ctx, bufs, next, &[], ifs);
        } else {
            input::<true>(ctx, bufs, next, &vxlan.vteps, ifs);
        }
    }
}

/// Whether the IPv4 packet `ip` (no options), received in VRF `vrf`, is VXLAN for one of
/// `vteps` that `vxlan4-input` can take directly.
#[inline(always)]
fn to_vtep(vrf: u32, ip: &[u8], vteps: &[(u32, wire::Ipv4Addr)]) -> bool {
    ip.first_chunk::<{ MIN_HEADER_LEN + 8 }>().is_some_and(|h| {
        vxlan_bypass(h) && vteps.contains(&(vrf, Ipv4::new_unchecked(&h[..]).dst_addr()))
    })
}

/// What the fast path checks a packet's source against: an interface's allowed sources, if
/// it has them (`Option<&AllowedSources>`), a set it surely has (`&AllowedSources`), or
/// nothing ([`Unchecked`]: a loop for an interface without them compiles no check at all).
pub(crate) trait SourceCheck: Copy {
    fn allows(self, src: u32) -> bool;
}

/// No source check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unchecked;

impl SourceCheck for Unchecked {
    #[inline(always)]
    fn allows(self, _: u32) -> bool {
        true
    }
}

impl SourceCheck for &AllowedSources {
    #[inline(always)]
    fn allows(self, src: u32) -> bool {
        AllowedSources::allows(self, src)
    }
}

impl SourceCheck for Option<&AllowedSources> {
    #[inline(always)]
    fn allows(self, src: u32) -> bool {
        self.is_none_or(|s| s.allows(src))
    }
}

/// Where ip4-input's fast path sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fast {
    Lookup,
    Vxlan,
}

/// ip4-input's fast path, also run by `ethernet-input` for the frames it sees are plain IPv4
/// to us (the checks of VPP's ip4-input, done in the pass that already holds the packet):
/// version 4, no options, a valid checksum, TTL above zero, the whole length present and, if
/// the receiving interface has `sources`, a source among them.
/// `ip` is the head buffer's data from the IPv4 header on and `m` its metadata, already
/// advanced past any link-layer header. Returns where the packet goes and, if link-layer
/// padding or bytes a peer put past the datagram are to be cut, the datagram's length; `None`
/// when a check failed, for the full checks (which name the reason). Tracing is the caller's.
/// With `BYPASS`, VXLAN to one of `vteps` goes to `vxlan4-input`.
#[inline(always)]
pub(crate) fn fast<const BYPASS: bool>(
    m: &buffer::Meta,
    ip: &[u8],
    vteps: &[(u32, wire::Ipv4Addr)],
    sources: Option<&AllowedSources>,
) -> Option<(Fast, Option<u16>)> {
    fast_at::<BYPASS>(m.total_len, m.vrf, ip, vteps, sources)
}

/// [`fast`] for a packet whose metadata has not been advanced to its IPv4 header (a direct
/// loop that changes a packet only once it knows it takes it): `avail` the packet's bytes
/// from that header on, `vrf` its VRF.
#[inline(always)]
pub(crate) fn fast_at<const BYPASS: bool>(
    avail: u32,
    vrf: u32,
    ip: &[u8],
    vteps: &[(u32, wire::Ipv4Addr)],
    sources: impl SourceCheck,
) -> Option<(Fast, Option<u16>)> {
    let h = ip.first_chunk::<MIN_HEADER_LEN>()?;
    let v = Ipv4::new_unchecked(h);
    if v.version_ihl() != VER_IHL_NO_OPTIONS || v.ttl() == 0 || !v.checksum_ok_no_options() {
        return None;
    }
    if !sources.allows(u32::from(v.src_addr())) {
        return None;
    }
    let total = v.total_len();
    if u32::from(total) > avail || usize::from(total) < MIN_HEADER_LEN {
        return None;
    }
    let bypass = BYPASS && to_vtep(vrf, ip, vteps);
    let to = if bypass { Fast::Vxlan } else { Fast::Lookup };
    Some((to, (u32::from(total) < avail).then_some(total)))
}

/// The node's loop; with `BYPASS`, VXLAN to one of `vteps` goes to `vxlan4-input`.
#[inline(always)]
fn input<const BYPASS: bool>(
    ctx: &mut Ctx<'_, Ip4Input>,
    bufs: &[u32],
    next: &mut [u16],
    vteps: &[(u32, wire::Ipv4Addr)],
    ifs: &[IfConfig],
) {
    // The previous packet's receiving interface and its allowed sources.
    let (mut last_rx, mut sources) = (buffer::NONE, None);
    for (&b, n) in bufs.iter().zip(next.iter_mut()) {
        let (m, data) = ctx.pool.meta_data_mut(b);
        if m.rx_if != last_rx {
            last_rx = m.rx_if;
            sources = ifs.get(last_rx as usize).and_then(|c| c.sources.as_ref());
        }
        if let Some((to, cut)) = fast::<BYPASS>(m, data, vteps, sources) {
            let (traced, ttl) = (m.flags & graph::BUFFER_TRACED != 0, data[8]);
            if let Some(total) = cut {
                if m.next == buffer::NONE {
                    ctx.pool.truncate(b, total);
                } else {
                    ctx.pool.truncate_chain(b, u32::from(total));
                }
            }
            if traced {
                ctx.trace(b, Ip4InputTrace { ttl });
            }
            *n = match to {
                Fast::Lookup => Next::Lookup,
                Fast::Vxlan => Next::Vxlan,
            }
            .into();
            continue;
        }
        let data = ctx.pool.data(b);
        // The whole packet from here: this buffer, its chain and its external segment.
        let avail = ctx.pool.meta(b).total_len as usize;
        let verdict = match Ipv4::new_header_checked(data) {
            Err(wire::Error::Truncated) if avail >= MIN_HEADER_LEN => Err(Error::Length),
            Err(_) => Err(Error::BadHeader),
            Ok(ip) if usize::from(ip.total_len()) > avail => Err(Error::Length),
            Ok(ip) if ip.header_len() != MIN_HEADER_LEN => Err(Error::Options),
            Ok(ip) if !ip.checksum_ok() => Err(Error::BadChecksum),
            Ok(ip) if ip.ttl() == 0 => Err(Error::TtlZero),
            Ok(ip) if sources.is_some_and(|s| !s.allows(u32::from(ip.src_addr()))) => {
                Err(Error::Spoofed)
            }
            Ok(ip) => Ok((ip.total_len(), ip.ttl())),
        };
        match verdict {
            Ok((total, ttl)) => {
                // Link-layer padding, or bytes a peer put past the datagram.
                ctx.pool.truncate_chain(b, u32::from(total));
                if ctx.is_traced(b) {
                    ctx.trace(b, Ip4InputTrace { ttl });
                }
                let bypass = BYPASS && to_vtep(ctx.pool.meta(b).vrf, ctx.pool.data(b), vteps);
                *n = if bypass { Next::Vxlan } else { Next::Lookup }.into();
            }
            Err(e) => {
                ctx.count_error(e);
                *n = Next::Drop.into();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;

    use super::*;
    use crate::testing::run_one;

    /// ip4-input's full checks drop a packet whose source its interface does not allow,
    /// after the header checks (a malformed header is named as such first).
    #[test]
    fn full_checks_drop_a_source_the_interface_does_not_allow() {
        let mut c = IfConfig::new([2, 0, 0, 0, 0, 1], 0);
        c.sources = Some(AllowedSources::new([(
            wire::Ipv4Addr::new(10, 0, 0, 2),
            32,
        )]));
        let node = || {
            Ip4Input::new(Shared::new(
                Arc::new(ArcSwap::from_pointee(vec![c.clone()])),
                Arc::new(ArcSwap::from_pointee(Vec::new())),
                fib::adj::AdjTable::new().reader(),
            ))
        };
        let packet = |src: [u8; 4], ttl: u8| {
            let mut v = Vec::new();
            etherparse::PacketBuilder::ipv4(src, [10, 0, 0, 1], ttl)
                .udp(1, 2)
                .write(&mut v, &[0; 18])
                .unwrap();
            v
        };
        let rx0 = |m: &mut buffer::Meta| m.rx_if = 0;
        let ((next, ..), errors) = run_one(node(), &packet([10, 0, 0, 2], 64), &[], rx0);
        assert_eq!((next, errors.len()), ("ip4-lookup", 0));
        let ((next, ..), errors) = run_one(node(), &packet([10, 0, 0, 3], 64), &[], rx0);
        assert_eq!(
            (next, errors),
            (
                "error-drop",
                vec!["ip4 source address not allowed on this interface"]
            )
        );
        let (_, errors) = run_one(node(), &packet([10, 0, 0, 3], 0), &[], rx0);
        assert_eq!(errors, vec!["ip4 ttl is zero"]);
        // Received elsewhere (an interface without the check): not checked.
        let ((next, ..), _) = run_one(node(), &packet([10, 0, 0, 3], 64), &[], |m| m.rx_if = 7);
        assert_eq!(next, "ip4-lookup");
    }
}
