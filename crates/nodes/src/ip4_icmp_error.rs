//! `ip4-icmp-error`: turns an offending packet into the ICMP error about it, in place (VPP's
//! `ip4-icmp-error`), and sends that back through `ip4-lookup`.
//!
//! The node that gives up on a packet (`ip4-rewrite`: TTL expired; `ip4-lookup`: no route)
//! writes the ICMP type and code into [`buffer::Meta::error`] (see [`icmp_request`]) and
//! sends the buffer here with its data at the IPv4 header. The error is a new IPv4 header
//! (from our address on the receiving interface to the offender's source, TTL 64) and ICMP
//! header in the headroom in front of the original datagram, which is cut so that the whole
//! error fits in 576 bytes (RFC 1812 4.3.2.3).
//!
//! RFC 1812 4.3.2.7 says when not to answer: about an ICMP error, a non-first fragment, or a packet
//! from or to a non-unicast address. Errors are rate-limited (RFC 1812 4.3.2.8) per worker by a
//! token bucket refilled once per frame, and per source of the offending packets by a bucket for
//! each of [`SOURCE_SLOTS`](crate::limit::SOURCE_SLOTS) slots its address (and VRF) hashes to, so
//! that one source that keeps provoking errors (a pod looping towards an unroutable address, a host
//! flooding expired packets) spends its own share and not the worker's: other sources still hear
//! their "fragmentation needed" and "time exceeded". Sources that hash alike share a bucket; many
//! spoofed sources meet the worker's. Every packet not answered is counted.

use graph::{Ctx, Node, clock};
use wire::{Icmp, IcmpType, IpProtocol, Ipv4, Ipv4Addr};

use crate::Shared;
use crate::limit::{Limited, Limiter};

/// An ICMP error is at most this long, quoted datagram included (RFC 1812 4.3.2.3).
pub const MAX_ERROR_LEN: usize = 576;

/// New IPv4 header and ICMP header (type, code, checksum, 4 unused bytes).
const PREPEND: usize = wire::ipv4::MIN_HEADER_LEN + wire::icmp::HEADER_LEN;

/// What a node writes into `Meta::error` before sending a buffer here: the ICMP type in the
/// high byte, the code in the low byte.
pub const fn icmp_request(icmp_type: u8, code: u8) -> u16 {
    ((icmp_type as u16) << 8) | code as u16
}

/// Time exceeded, TTL exceeded in transit.
pub const TTL_EXCEEDED: u16 = icmp_request(11, 0);
/// Destination unreachable, net unreachable.
pub const NET_UNREACHABLE: u16 = icmp_request(3, 0);
/// Destination unreachable, fragmentation needed and DF set (RFC 1191: the next-hop MTU,
/// the MTU of the sending node's `Meta::tx_if`, goes in the message).
pub const FRAG_NEEDED: u16 = icmp_request(3, 4);
/// Destination unreachable, port unreachable (RFC 1122 §3.2.2.1: UDP to a port nobody
/// listens on).
pub const PORT_UNREACHABLE: u16 = icmp_request(3, 3);

/// Errors per second and burst size of the default rate limit (per worker).
pub const DEFAULT_RATE: u32 = 1000;
pub const DEFAULT_BURST: u32 = 100;
/// Errors per second and burst size about one source's packets (per worker), by default.
pub const DEFAULT_SOURCE_RATE: u32 = 100;
pub const DEFAULT_SOURCE_BURST: u32 = 10;
/// The pods' gateway (the CNI plugin's default, a link-local address every pod routes
/// through): the source of the errors a pod's address-less interface sends.
pub const POD_GATEWAY: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);

#[derive(Debug)]
pub struct Ip4IcmpError {
    shared: Shared,
    limiter: Limiter,
}

impl Ip4IcmpError {
    /// At most [`DEFAULT_RATE`] errors a second, in bursts of up to [`DEFAULT_BURST`], and
    /// [`DEFAULT_SOURCE_RATE`] ([`DEFAULT_SOURCE_BURST`]) about one source's packets.
    pub fn new(shared: Shared) -> Ip4IcmpError {
        Ip4IcmpError::with_rate_limit(shared, DEFAULT_RATE, DEFAULT_BURST)
    }

    /// At most `per_sec` errors a second from this worker, in bursts of up to `burst`, and the
    /// default share of that about one source's packets.
    pub fn with_rate_limit(shared: Shared, per_sec: u32, burst: u32) -> Ip4IcmpError {
        Ip4IcmpError {
            shared,
            limiter: Limiter::new(
                (per_sec, burst),
                (DEFAULT_SOURCE_RATE, DEFAULT_SOURCE_BURST),
                clock::ticks(),
            ),
        }
    }
}

/// Whether RFC 1812 4.3.2.7 lets a router answer a packet from `a` (or report one sent to
/// `a`): not 0.0.0.0, loopback, multicast, class E or broadcast.
fn is_unicast(a: Ipv4Addr) -> bool {
    !(a.is_unspecified() || a.is_loopback() || a.is_multicast() || a.octets()[0] >= 240)
}

graph::node! {
    Ip4IcmpError: "ip4-icmp-error", Internal;
    next Next {
        Lookup = "ip4-lookup",
        Drop = "error-drop",
    }
    error Error {
        SentTimeExceeded = "icmp time exceeded sent (not an error)",
        SentUnreachable = "icmp destination unreachable sent (not an error)",
        SentOther = "icmp error of another type sent (not an error)",
        AboutIcmpError = "no icmp error about an icmp error",
        SrcNotUnicast = "no icmp error: source not a unicast address",
        DstNotUnicast = "no icmp error: destination multicast or broadcast",
        Fragment = "no icmp error about a non-first fragment",
        RateLimited = "icmp error rate limited",
        SourceRateLimited = "icmp error rate limited for its source",
        NoAddress = "no icmp error: receiving interface has no address",
        NoHeadroom = "no headroom for the icmp error headers",
        Malformed = "offending packet malformed",
    }
    trace IcmpErrorTrace { icmp_type: u8, code: u8, to: [u8; 4] }
}

impl core::fmt::Display for IcmpErrorTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let to = Ipv4Addr::from(self.to);
        write!(f, "icmp type {} code {} to {to}", self.icmp_type, self.code)
    }
}

impl Node for Ip4IcmpError {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        let now = clock::ticks();
        self.limiter.refill(now);
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            // Single-copy: the quoted bytes may reach into the peer's buffer; bring them in (or,
            // short of buffers, quote what is local: always more than header + 8 bytes).
            if ctx.pool.meta(b).ext.len != 0 && !ctx.pool.linearize(b) {
                let local = ctx.pool.meta(b).len;
                ctx.pool.truncate(b, local);
            }
            let meta = *ctx.pool.meta(b);
            let [icmp_type, code] = meta.error.to_be_bytes();
            let parsed = Ipv4::new_header_checked(ctx.pool.data(b)).map(|ip| {
                // A message too short to show its type is treated as the error it may be.
                let about_error = ip.protocol() == IpProtocol::Icmp
                    && ip
                        .payload()
                        .get(wire::icmp::field::TYPE)
                        .is_none_or(|&t| IcmpType::from(t).is_error());
                (
                    ip.src(),
                    ip.dst(),
                    ip.frag_offset(),
                    about_error,
                    ip.total_len(),
                )
            });
            let Ok((src, dst, frag_offset, about_error, total)) = parsed else {
                ctx.count_error(Error::Malformed);
                continue;
            };
            if frag_offset != 0 {
                ctx.count_error(Error::Fragment);
                continue;
            }
            if !is_unicast(src) {
                ctx.count_error(Error::SrcNotUnicast);
                continue;
            }
            if !is_unicast(dst) {
                ctx.count_error(Error::DstNotUnicast);
                continue;
            }
            if about_error {
                ctx.count_error(Error::AboutIcmpError);
                continue;
            }
            // An interface without an address (a tunnel, a pod's) speaks from one of its
            // VRF's own (the first interface there that has one), so that a host across the
            // tunnel, or a pod, hears why; a pod's interface in a VRF with none from the
            // pods' gateway, which is where the pod sends (a "fragmentation needed" from
            // there is how a pod learns the MTU of the tunnel to a pod on another node).
            let rx = ifs.get(meta.rx_if as usize);
            let our = rx
                .and_then(|i| i.source_for(src))
                .or_else(|| {
                    let t = rx?.table;
                    ifs.iter()
                        .filter(|c| c.table == t && c.tunnel().is_none())
                        .find_map(|c| c.addresses.first().map(|a| a.0))
                })
                .or_else(|| rx.filter(|i| i.sources.is_some()).map(|_| POD_GATEWAY));
            let Some(our) = our else {
                ctx.count_error(Error::NoAddress);
                continue;
            };
            if let Err(e) = self.limiter.allow(meta.vrf, src, now) {
                ctx.count_error(match e {
                    Limited::Worker => Error::RateLimited,
                    Limited::Source => Error::SourceRateLimited,
                });
                continue;
            }
            // Packets not answered were left as they came, for whoever captures drops. The
            // datagram is in the head buffer (ip4-input checked); its data may be cut, its
            // header (at most 60 bytes) never is.
            crate::free_chain_tail(ctx.pool, b);
            let quoted = usize::from(total).min(MAX_ERROR_LEN - PREPEND);
            ctx.pool.truncate(b, quoted as u16);
            if !ctx.pool.advance(b, -(PREPEND as isize)) {
                ctx.count_error(Error::NoHeadroom);
                continue;
            }
            let d = ctx.pool.data_mut(b);
            let t = IcmpType::from(icmp_type);
            let rest = if meta.error == FRAG_NEEDED {
                ifs.get(meta.tx_if as usize).map_or(0, |c| u32::from(c.mtu))
            } else {
                0
            };
            let built = Ipv4::emit(&mut d[..], our, src, IpProtocol::Icmp, 64, quoted + 8)
                .is_ok_and(|mut ip| Icmp::emit_error(ip.payload_mut(), t, code, rest).is_ok());
            if !built {
                ctx.count_error(Error::Malformed);
                continue;
            }
            let m = ctx.pool.meta_mut(b);
            // A new packet: ours, and not yet seen by ip4-session (which translates an
            // error about a session's packet).
            m.flags |= crate::LOCALLY_ORIGINATED;
            m.flags &= !crate::ip4_session::SESSION_DONE;
            m.error = 0;
            ctx.count_error(match t {
                IcmpType::TimeExceeded => Error::SentTimeExceeded,
                IcmpType::DestUnreachable => Error::SentUnreachable,
                _ => Error::SentOther,
            });
            if ctx.is_traced(b) {
                let to = src.octets();
                ctx.trace(
                    b,
                    IcmpErrorTrace {
                        icmp_type,
                        code,
                        to,
                    },
                );
            }
            // Routed back in the VRF the offending packet came in on.
            *n = Next::Lookup.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arc_swap::ArcSwap;

    use crate::IfConfig;
    use crate::testing::run_one;

    fn node(addresses: Vec<(Ipv4Addr, u8)>) -> Ip4IcmpError {
        let mut c = IfConfig::new([2, 0, 0, 0, 0, 1], 0);
        c.addresses = addresses;
        Ip4IcmpError::new(Shared::new(
            Arc::new(ArcSwap::from_pointee(vec![c])),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            fib::adj::AdjTable::new().reader(),
        ))
    }

    fn datagram(payload: usize) -> Vec<u8> {
        let mut d = vec![0x33u8; 20 + payload];
        Ipv4::emit(
            &mut d[..],
            Ipv4Addr::new(10, 0, 0, 7),
            Ipv4Addr::new(192, 0, 2, 5),
            IpProtocol::Udp,
            1,
            payload,
        )
        .unwrap();
        d
    }

    #[test]
    fn chained_offender_becomes_one_buffer_holding_the_error() {
        let sent = datagram(12);
        let ((next, bytes, buffers, meta), errors) = run_one(
            node(vec![(Ipv4Addr::new(10, 0, 0, 1), 24)]),
            &sent,
            &[9; 300],
            |m| {
                m.rx_if = 0;
                m.vrf = 7;
                m.error = TTL_EXCEEDED;
            },
        );
        assert_eq!(next, "ip4-lookup");
        assert_eq!(errors, ["icmp time exceeded sent (not an error)"]);
        assert_eq!((buffers, meta.total_len as usize), (1, bytes.len()));
        assert_eq!(bytes.len(), PREPEND + sent.len());
        assert_eq!(meta.vrf, 7, "looked up in the VRF it came from");
        assert_eq!(meta.error, 0);
        assert_ne!(meta.flags & crate::LOCALLY_ORIGINATED, 0);
        let ip = Ipv4::new_checked(&bytes[..]).unwrap();
        assert!(ip.checksum_ok());
        assert_eq!(
            (ip.src(), ip.dst(), ip.ttl(), ip.protocol()),
            (
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 7),
                64,
                IpProtocol::Icmp
            )
        );
        let icmp = Icmp::new_checked(ip.payload()).unwrap();
        assert!(icmp.checksum_ok());
        assert_eq!((icmp.msg_type(), icmp.code()), (IcmpType::TimeExceeded, 0));
        assert_eq!(icmp.body(), &sent[..]);
    }

    /// A pod's interface (it checks sources) with no address in a VRF with none: the error
    /// comes from the pods' gateway.
    #[test]
    fn a_pods_interface_without_an_address_speaks_from_the_pods_gateway() {
        let mut c = IfConfig::new([2, 0, 0, 0, 0, 1], 0);
        c.sources = Some(crate::AllowedSources::new([(
            Ipv4Addr::new(10, 0, 0, 7),
            32,
        )]));
        let n = Ip4IcmpError::new(Shared::new(
            Arc::new(ArcSwap::from_pointee(vec![c])),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            fib::adj::AdjTable::new().reader(),
        ));
        let (seen, errors) = run_one(n, &datagram(8), &[], |m| {
            m.rx_if = 0;
            m.error = NET_UNREACHABLE;
        });
        assert_eq!(seen.0, "ip4-lookup", "{errors:?}");
        assert!(
            !errors.iter().any(|e| e.contains("no address")),
            "{errors:?}"
        );
        assert_eq!(Ipv4::new_unchecked(&seen.1[..]).src_addr(), POD_GATEWAY);
    }

    #[test]
    fn refused_without_an_address_or_for_a_malformed_offender() {
        let (seen, errors) = run_one(node(Vec::new()), &datagram(8), &[], |m| {
            m.rx_if = 0;
            m.error = NET_UNREACHABLE;
        });
        assert_eq!(seen.0, "error-drop");
        assert_eq!(
            errors,
            ["no icmp error: receiving interface has no address"]
        );
        let mut lying = datagram(8);
        lying[3] = 200; // total length beyond the buffer
        let (seen, errors) = run_one(
            node(vec![(Ipv4Addr::new(10, 0, 0, 1), 24)]),
            &lying,
            &[],
            |m| m.rx_if = 0,
        );
        assert_eq!(seen.0, "error-drop");
        assert_eq!(errors, ["offending packet malformed"]);
    }

    #[test]
    fn only_unicast_addresses_get_answers() {
        for a in [[0, 0, 0, 0], [127, 0, 0, 1], [224, 0, 0, 5], [240, 1, 2, 3]] {
            assert!(!is_unicast(Ipv4Addr::from(a)), "{a:?}");
        }
        assert!(!is_unicast(Ipv4Addr::BROADCAST));
        assert!(is_unicast(Ipv4Addr::new(10, 0, 0, 7)));
    }
}
