//! `ip4-input`: validates the IPv4 header (version, length, checksum, options, TTL) and trims
//! link-layer padding.

use graph::{Ctx, Node, NodeInfo, NodeKind};
use wire::Ipv4;

const NEXT_LOOKUP: u16 = 0;
const NEXT_DROP: u16 = 1;

const E_BAD_HEADER: usize = 0;
const E_BAD_CHECKSUM: usize = 1;
const E_OPTIONS: usize = 2;
const E_TTL_ZERO: usize = 3;
const E_LENGTH: usize = 4;

#[derive(Debug, Default)]
pub struct Ip4Input;

impl Node for Ip4Input {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "ip4-input",
            kind: NodeKind::Internal,
            nexts: &["ip4-lookup", "error-drop"],
            errors: &[
                "ip4 header malformed or truncated",
                "ip4 header checksum error",
                "ip4 options present (not forwarded)",
                "ip4 ttl is zero",
                "ip4 length > l2 length",
            ],
        }
    }

    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let (m, data) = ctx.pool.meta_data_mut(b);
            // Fast path, almost every packet: version 4, no options, valid checksum, TTL
            // above zero, and the whole length present. Anything else takes the full checks
            // below, which name the reason.
            if let Some(h) = data.first_chunk::<20>()
                && h[0] == 0x45
                && h[8] != 0
                && wire::checksum::ipv4_header_ok(h)
            {
                let total = u16::from_be_bytes([h[2], h[3]]);
                let (unchained, avail) = (m.next == buffer::NONE, m.total_len as usize);
                if usize::from(total) <= avail && total >= 20 {
                    let (ttl, traced) = (h[8], m.flags & graph::BUFFER_TRACED != 0);
                    if unchained && usize::from(total) < avail {
                        ctx.pool.truncate(b, total);
                    }
                    if traced {
                        ctx.trace(b, &[ttl]);
                    }
                    *n = NEXT_LOOKUP;
                    continue;
                }
            }
            let data = ctx.pool.data(b);
            // The whole packet from here: this buffer, its chain and its external segment.
            let avail = ctx.pool.meta(b).total_len as usize;
            let verdict = match Ipv4::new_header_checked(data) {
                Err(wire::Error::Truncated) if avail >= 20 => Err(E_LENGTH),
                Err(_) => Err(E_BAD_HEADER),
                Ok(ip) if usize::from(ip.total_len()) > avail => Err(E_LENGTH),
                Ok(ip) if ip.header_len() != 20 => Err(E_OPTIONS),
                Ok(ip) if !ip.checksum_ok() => Err(E_BAD_CHECKSUM),
                Ok(ip) if ip.ttl() == 0 => Err(E_TTL_ZERO),
                Ok(ip) => Ok((ip.total_len(), ip.ttl())),
            };
            match verdict {
                Ok((total, ttl)) => {
                    // Link-layer padding (frames under 60 bytes) is never chained.
                    if ctx.pool.meta(b).next == buffer::NONE {
                        ctx.pool.truncate(b, total);
                    }
                    if ctx.is_traced(b) {
                        ctx.trace(b, &[ttl]);
                    }
                    *n = NEXT_LOOKUP;
                }
                Err(e) => {
                    ctx.count_error(e);
                    *n = NEXT_DROP;
                }
            }
        }
    }

    fn format_trace(&self, data: &[u8]) -> String {
        format!("ttl {}", data[0])
    }
}
