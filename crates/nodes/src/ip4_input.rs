//! `ip4-input`: validates the IPv4 header (version, length, checksum, options, TTL) and trims
//! link-layer padding.

use graph::{Ctx, Node};
use wire::Ipv4;
use wire::ipv4::{MIN_HEADER_LEN, VER_IHL_NO_OPTIONS};

#[derive(Debug, Default)]
pub struct Ip4Input;

graph::node! {
    Ip4Input: "ip4-input", Internal;
    next Next {
        Lookup = "ip4-lookup",
        Drop = "error-drop",
    }
    error Error {
        BadHeader = "ip4 header malformed or truncated",
        BadChecksum = "ip4 header checksum error",
        Options = "ip4 options present (not forwarded)",
        TtlZero = "ip4 ttl is zero",
        Length = "ip4 length > l2 length",
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
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let (m, data) = ctx.pool.meta_data_mut(b);
            // Fast path, almost every packet: version 4, no options, valid checksum, TTL
            // above zero, and the whole length present. Anything else takes the full checks
            // below, which name the reason.
            if let Some(ip) = data
                .first_chunk::<MIN_HEADER_LEN>()
                .map(Ipv4::new_unchecked)
                && ip.version_ihl() == VER_IHL_NO_OPTIONS
                && ip.ttl() != 0
                && ip.checksum_ok_no_options()
            {
                let total = ip.total_len();
                let (unchained, avail) = (m.next == buffer::NONE, m.total_len as usize);
                if usize::from(total) <= avail && usize::from(total) >= MIN_HEADER_LEN {
                    let (ttl, traced) = (ip.ttl(), m.flags & graph::BUFFER_TRACED != 0);
                    if usize::from(total) < avail {
                        if unchained {
                            ctx.pool.truncate(b, total);
                        } else {
                            ctx.pool.truncate_chain(b, u32::from(total));
                        }
                    }
                    if traced {
                        ctx.trace(b, Ip4InputTrace { ttl });
                    }
                    *n = Next::Lookup.into();
                    continue;
                }
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
                Ok(ip) => Ok((ip.total_len(), ip.ttl())),
            };
            match verdict {
                Ok((total, ttl)) => {
                    // Link-layer padding, or bytes a peer put past the datagram.
                    ctx.pool.truncate_chain(b, u32::from(total));
                    if ctx.is_traced(b) {
                        ctx.trace(b, Ip4InputTrace { ttl });
                    }
                    *n = Next::Lookup.into();
                }
                Err(e) => {
                    ctx.count_error(e);
                    *n = Next::Drop.into();
                }
            }
        }
    }
}
