//! `ip4-local`: packets for our own addresses. Answers ICMP echo (the reply goes back through
//! `ip4-lookup`); everything else is counted and dropped (no sockets live here).

use graph::{Ctx, Node, NodeInfo, NodeKind};
use wire::{Icmp, IcmpType, Ipv4};

const NEXT_LOOKUP: u16 = 0;
const NEXT_DROP: u16 = 1;

const E_UNHANDLED: usize = 0;
const E_BAD_ICMP: usize = 1;
const E_ECHO_REPLIED: usize = 2;
const E_TOO_BIG: usize = 3;

#[derive(Debug, Default)]
pub struct Ip4Local;

impl Node for Ip4Local {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "ip4-local",
            kind: NodeKind::Internal,
            nexts: &["ip4-lookup", "error-drop"],
            errors: &[
                "to us, but not icmp echo (no local sockets)",
                "icmp checksum error or truncated",
                "icmp echo replied (not an error)",
                "to us, larger than one buffer or no buffer to take it in",
            ],
        }
    }

    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = NEXT_DROP;
            // The echo checksum covers the whole packet: bring any external segment in, and
            // answer only what fits one buffer (a chain would be a 2 KiB+ ping).
            if !ctx.pool.linearize(b) || ctx.pool.meta(b).next != buffer::NONE {
                ctx.count_error(E_TOO_BIG);
                continue;
            }
            let d = ctx.pool.data_mut(b);
            // ip4-input checked the header: 20 bytes, no options, total length = buffer.
            if d[9] != 1 {
                ctx.count_error(E_UNHANDLED);
                continue;
            }
            let echo = match Icmp::new_checked(&d[20..]) {
                Ok(m) if m.checksum_ok() => m.msg_type() == IcmpType::EchoRequest,
                _ => {
                    ctx.count_error(E_BAD_ICMP);
                    continue;
                }
            };
            if !echo {
                ctx.count_error(E_UNHANDLED);
                continue;
            }
            // Reply in place: swap addresses, fresh TTL, new checksums.
            let (src, dst) = (
                <[u8; 4]>::try_from(&d[12..16]).unwrap_or_default(),
                <[u8; 4]>::try_from(&d[16..20]).unwrap_or_default(),
            );
            let total = usize::from(u16::from_be_bytes([d[2], d[3]]));
            let payload = total - 20;
            let src_ip = core::net::Ipv4Addr::from(dst);
            let dst_ip = core::net::Ipv4Addr::from(src);
            let Ok(mut ip) = Ipv4::emit(
                &mut d[..total],
                src_ip,
                dst_ip,
                wire::IpProtocol::Icmp,
                64,
                payload,
            ) else {
                ctx.count_error(E_BAD_ICMP);
                continue;
            };
            if let Ok(mut m) = Icmp::new_checked(ip.payload_mut()) {
                m.make_echo_reply();
            }
            ctx.pool.meta_mut(b).flags |= crate::LOCALLY_ORIGINATED;
            ctx.count_error(E_ECHO_REPLIED);
            // The reply leaves through the table of the VRF it came in on.
            *n = NEXT_LOOKUP;
        }
    }
}
