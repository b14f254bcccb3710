//! `ip4-local`: packets for our own addresses. Answers ICMP echo of any size (the reply goes
//! back through `ip4-lookup`; a request larger than one buffer is a chain and so is its
//! reply), sends fragments to `ip4-reassembly` (which brings the datagram back here whole),
//! hands UDP to `udp4-local` (port dispatch: VXLAN, else port unreachable); everything else is
//! counted and dropped (no sockets live here).

use graph::{Ctx, Node};
use wire::ipv4::{FLAG_MF, FRAG_OFFSET_MASK, MIN_HEADER_LEN};
use wire::{Icmp, IcmpType, IpProtocol, Ipv4};

/// The IPv4 and ICMP echo headers: what must lie in a chain's first buffer to answer it.
const ECHO_HEADERS: usize = MIN_HEADER_LEN + 8;

#[derive(Debug, Default)]
pub struct Ip4Local {
    /// A chained request's bytes, for its checksum (chains are the slow path).
    scratch: Vec<u8>,
}

graph::node! {
    Ip4Local: "ip4-local", Internal;
    next Next {
        Lookup = "ip4-lookup",
        Drop = "error-drop",
        Udp = "udp4-local",
        Reassembly = "ip4-reassembly",
    }
    error Error {
        Unhandled = "to us, neither icmp echo nor udp (no local sockets)",
        BadIcmp = "icmp checksum error or truncated",
        EchoReplied = "icmp echo replied (not an error)",
        TooBig = "to us, no buffer to take in its external segment",
    }
}

impl Node for Ip4Local {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            let ip = Ipv4::new_unchecked(ctx.pool.data(b));
            // A fragment first: whatever it carries, it is only part of it.
            if ip.flags_frag() & (FLAG_MF | FRAG_OFFSET_MASK) != 0 {
                *n = Next::Reassembly.into();
                continue;
            }
            // UDP is dispatched by port, chained or not (a VXLAN packet may be a jumbo frame).
            if ip.protocol() == IpProtocol::Udp {
                *n = Next::Udp.into();
                continue;
            }
            if ip.protocol() != IpProtocol::Icmp {
                ctx.count_error(Error::Unhandled);
                continue;
            }
            // The echo checksum covers the whole packet: bring any external segment in.
            if !ctx.pool.linearize_chain(b) {
                ctx.count_error(Error::TooBig);
                continue;
            }
            let chained = ctx.pool.meta(b).next != buffer::NONE;
            // ip4-input checked the header: 20 bytes, no options, total length = packet.
            let echo = if chained {
                self.scratch.clear();
                ctx.pool.read_chain(b, &mut self.scratch);
                // The headers the reply rewrites must be in the first buffer.
                if ctx.pool.data(b).len() < ECHO_HEADERS {
                    None
                } else {
                    echo_request(&self.scratch)
                }
            } else {
                echo_request(ctx.pool.data(b))
            };
            match echo {
                Some(true) => {}
                Some(false) => {
                    ctx.count_error(Error::Unhandled);
                    continue;
                }
                None => {
                    ctx.count_error(Error::BadIcmp);
                    continue;
                }
            }
            // Reply in place, in the first buffer: swap addresses, fresh TTL, the header's
            // checksum anew and the ICMP checksum updated for the type (RFC 1624), so that a
            // chain's payload is never read again.
            let d = ctx.pool.data_mut(b);
            let (ip_hdr, icmp_hdr) = d[..ECHO_HEADERS].split_at_mut(MIN_HEADER_LEN);
            let mut ip = Ipv4::new_unchecked(ip_hdr);
            let (src, dst) = (ip.dst_addr(), ip.src_addr());
            ip.set_src_addr(src);
            ip.set_dst_addr(dst);
            // No DF, as Linux answers: a reply larger than the way back is fragmented
            // (`ip4-frag`), as the request may have been.
            ip.set_ttl(64);
            ip.set_ident(0);
            ip.set_flags_frag(0);
            ip.fill_checksum();
            let mut m = Icmp::new_unchecked(icmp_hdr);
            let old = u16::from_be_bytes([m.msg_type_raw(), m.code()]);
            m.set_type_code(IcmpType::EchoReply, 0);
            m.set_checksum(wire::checksum::update(m.checksum(), old, 0));
            ctx.pool.meta_mut(b).flags |= crate::LOCALLY_ORIGINATED;
            ctx.count_error(Error::EchoReplied);
            // The reply leaves through the table of the VRF it came in on.
            *n = Next::Lookup.into();
        }
    }
}

/// Whether an IPv4 packet (20-byte header, its total length the slice's) is an ICMP echo
/// request: `None` when its ICMP checksum is wrong or it is truncated.
fn echo_request(packet: &[u8]) -> Option<bool> {
    let icmp = Icmp::new_checked(packet.get(MIN_HEADER_LEN..)?).ok()?;
    icmp.checksum_ok()
        .then(|| icmp.msg_type() == IcmpType::EchoRequest)
}
