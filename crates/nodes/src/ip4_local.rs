//! `ip4-local`: packets for our own addresses. Answers ICMP echo (the reply goes back through
//! `ip4-lookup`), hands UDP to `udp4-local` (port dispatch: VXLAN, else port unreachable);
//! everything else is counted and dropped (no sockets live here).

use graph::{Ctx, Node};
use wire::{Icmp, IcmpType, IpProtocol, Ipv4};

#[derive(Debug, Default)]
pub struct Ip4Local;

graph::node! {
    Ip4Local: "ip4-local", Internal;
    next Next {
        Lookup = "ip4-lookup",
        Drop = "error-drop",
        Udp = "udp4-local",
    }
    error Error {
        Unhandled = "to us, neither icmp echo nor udp (no local sockets)",
        BadIcmp = "icmp checksum error or truncated",
        EchoReplied = "icmp echo replied (not an error)",
        TooBig = "to us, larger than one buffer or no buffer to take it in",
    }
}

impl Node for Ip4Local {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            // UDP is dispatched by port, chained or not (a VXLAN packet may be a jumbo frame).
            let proto = Ipv4::new_unchecked(ctx.pool.data(b)).protocol();
            if proto == IpProtocol::Udp {
                *n = Next::Udp.into();
                continue;
            }
            // The echo checksum covers the whole packet: bring any external segment in, and
            // answer only what fits one buffer (a chain would be a 2 KiB+ ping).
            if !ctx.pool.linearize(b) || ctx.pool.meta(b).next != buffer::NONE {
                ctx.count_error(Error::TooBig);
                continue;
            }
            let d = ctx.pool.data_mut(b);
            // ip4-input checked the header: 20 bytes, no options, total length = buffer.
            let ip = Ipv4::new_unchecked(&d[..]);
            if ip.protocol() != IpProtocol::Icmp {
                ctx.count_error(Error::Unhandled);
                continue;
            }
            let echo = match Icmp::new_checked(ip.payload()) {
                Ok(m) if m.checksum_ok() => m.msg_type() == IcmpType::EchoRequest,
                _ => {
                    ctx.count_error(Error::BadIcmp);
                    continue;
                }
            };
            if !echo {
                ctx.count_error(Error::Unhandled);
                continue;
            }
            // Reply in place: swap addresses, fresh TTL, new checksums.
            let (src_ip, dst_ip) = (ip.dst_addr(), ip.src_addr());
            let total = usize::from(ip.total_len());
            let payload = total - ip.header_len();
            let Ok(mut ip) = Ipv4::emit(
                &mut d[..total],
                src_ip,
                dst_ip,
                IpProtocol::Icmp,
                64,
                payload,
            ) else {
                ctx.count_error(Error::BadIcmp);
                continue;
            };
            if let Ok(mut m) = Icmp::new_checked(ip.payload_mut()) {
                m.make_echo_reply();
            }
            ctx.pool.meta_mut(b).flags |= crate::LOCALLY_ORIGINATED;
            ctx.count_error(Error::EchoReplied);
            // The reply leaves through the table of the VRF it came in on.
            *n = Next::Lookup.into();
        }
    }
}
