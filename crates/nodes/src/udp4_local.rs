//! `udp4-local`: UDP datagrams to one of our addresses, dispatched by destination port, as
//! VPP's `ip4-udp-lookup`. Port 4789 goes to `vxlan4-input`; a datagram to any other port is
//! answered with ICMP port unreachable (RFC 1122 §3.2.2.1), through `ip4-icmp-error` and its
//! rate limit. A datagram whose checksum fails, or whose UDP length disagrees with the IPv4
//! length, is dropped under its own counter (RFC 1122 §4.1.3.4: silently, towards the sender).
//!
//! The data starts at the IPv4 header, which `ip4-input` checked (20 bytes, no options, total
//! length equal to the buffer's). Fragments never come here: `ip4-local` has them reassembled
//! first (a Linux VTEP sends fragmented VXLAN when its uplink's MTU is too small and DF is
//! off). A checksum of zero means the sender computed none, as VXLAN
//! senders usually do (RFC 7348 §5); any other is verified over the whole datagram.

use graph::{Ctx, Node};
use wire::ipv4::MIN_HEADER_LEN;
use wire::{Ipv4, Udp};

use crate::ip4_icmp_error::PORT_UNREACHABLE;

#[derive(Debug, Default)]
pub struct Udp4Local {
    /// A chained or single-copy datagram is gathered here to verify its checksum.
    scratch: Vec<u8>,
}

graph::node! {
    Udp4Local: "udp4-local", Internal;
    next Next {
        Vxlan = "vxlan4-input",
        IcmpError = "ip4-icmp-error",
        Drop = "error-drop",
    }
    error Error {
        NoPort = "udp to us on a port nobody listens on (icmp port unreachable)",
        BadChecksum = "udp checksum error",
        BadLength = "udp header truncated or its length disagrees with ip's",
    }
}

impl Node for Udp4Local {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            let d = ctx.pool.data(b);
            let ip = Ipv4::new_unchecked(d);
            let (src, dst, total) = (ip.src_addr(), ip.dst_addr(), usize::from(ip.total_len()));
            let Some(u) = d
                .get(MIN_HEADER_LEN..MIN_HEADER_LEN + wire::udp::HEADER_LEN)
                .map(Udp::new_unchecked)
            else {
                ctx.count_error(Error::BadLength);
                continue;
            };
            if usize::from(u.len()) != total - MIN_HEADER_LEN || u.len() < 8 {
                ctx.count_error(Error::BadLength);
                continue;
            }
            let port = u.dst_port();
            if u.checksum() != 0 {
                let m = ctx.pool.meta(b);
                let whole = m.next == buffer::NONE && m.ext.len == 0;
                let seg = if whole && let Some(seg) = d.get(MIN_HEADER_LEN..total) {
                    seg
                } else {
                    self.scratch.clear();
                    ctx.pool.read_chain(b, &mut self.scratch);
                    match self.scratch.get(MIN_HEADER_LEN..total) {
                        Some(s) => s,
                        None => {
                            ctx.count_error(Error::BadLength);
                            continue;
                        }
                    }
                };
                if !Udp::new_unchecked(seg).checksum_ok(src, dst) {
                    ctx.count_error(Error::BadChecksum);
                    continue;
                }
            }
            if port == wire::vxlan::UDP_PORT {
                *n = Next::Vxlan.into();
                continue;
            }
            ctx.count_error(Error::NoPort);
            ctx.pool.meta_mut(b).error = PORT_UNREACHABLE;
            *n = Next::IcmpError.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_one;

    /// An IPv4/UDP datagram from 192.0.2.2 to 192.0.2.1 with `payload`, checksummed or not.
    fn datagram(port: u16, payload: &[u8], checksum: bool) -> Vec<u8> {
        let (src, dst) = (
            wire::Ipv4Addr::new(192, 0, 2, 2),
            wire::Ipv4Addr::new(192, 0, 2, 1),
        );
        let mut v = vec![0u8; 28 + payload.len()];
        let mut ip = Ipv4::emit(
            &mut v[..],
            src,
            dst,
            wire::IpProtocol::Udp,
            64,
            8 + payload.len(),
        )
        .unwrap();
        let mut u = Udp::emit(ip.payload_mut(), 40000, port, payload.len()).unwrap();
        u.payload_mut().copy_from_slice(payload);
        if checksum {
            u.fill_checksum(src, dst);
        }
        v
    }

    #[test]
    fn port_4789_goes_to_vxlan_and_others_get_port_unreachable() {
        let ((next, ..), errors) = run_one(
            Udp4Local::default(),
            &datagram(4789, &[0; 30], false),
            &[],
            |_| {},
        );
        assert_eq!((next, errors.len()), ("vxlan4-input", 0));
        let ((next, _, _, meta), errors) =
            run_one(Udp4Local::default(), &datagram(53, b"q", true), &[], |_| {});
        assert_eq!(next, "ip4-icmp-error");
        assert_eq!(meta.error, PORT_UNREACHABLE);
        assert_eq!(
            errors,
            ["udp to us on a port nobody listens on (icmp port unreachable)"]
        );
    }

    #[test]
    fn checksums_are_verified_across_a_chain_and_lengths_must_agree() {
        // Checksummed, split over two buffers: verified over both.
        let d = datagram(4789, &[7; 100], true);
        let ((next, ..), _) = run_one(Udp4Local::default(), &d[..40], &d[40..], |_| {});
        assert_eq!(next, "vxlan4-input");
        let mut bad = d.clone();
        bad[100] ^= 1;
        let ((next, ..), errors) = run_one(Udp4Local::default(), &bad[..40], &bad[40..], |_| {});
        assert_eq!((next, errors), ("error-drop", vec!["udp checksum error"]));
        // A UDP length shorter than IPv4's.
        let mut short = datagram(4789, &[0; 20], false);
        short[25] -= 4;
        let ((next, ..), errors) = run_one(Udp4Local::default(), &short, &[], |_| {});
        assert_eq!(next, "error-drop");
        assert_eq!(
            errors,
            ["udp header truncated or its length disagrees with ip's"]
        );
    }
}
