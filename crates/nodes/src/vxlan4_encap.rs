//! `vxlan4-encap`: wraps a frame sent on a VXLAN tunnel interface in the tunnel's outer IPv4,
//! UDP and VXLAN headers (RFC 7348 §5) and routes the result in the uplink's VRF through
//! `ip4-lookup`, which finds the remote VTEP's next hop on the uplink (resolved by ARP like any
//! other).
//!
//! The outer header: our VTEP address to the remote one, TTL 64, Don't Fragment as the tunnel
//! says, UDP checksum zero (RFC 7348 §5: "SHOULD be transmitted as zero"), and a UDP source
//! port from a hash of the inner flow (addresses, protocol, ports) in 49152–65535, so that
//! ECMP and receive-side scaling on the path spread a network's flows while keeping each flow
//! in order. The packet is marked locally originated: the outer TTL is not decremented on the
//! way out, and no ICMP error is sent about it to ourselves.
//!
//! The data starts at the inner Ethernet header (`ip4-rewrite`, `arp-input` and `ip4-glean`
//! put it there); the inner packet was checked against the tunnel's MTU by `ip4-rewrite`.

use graph::{Ctx, Node};
use wire::ipv4::MIN_HEADER_LEN;
use wire::{EtherType, IpProtocol, Ipv4, Ipv4Repr, Udp, Vxlan, VxlanRepr};

use crate::{CounterRun, ETH_HDR, LOCALLY_ORIGINATED, Shared};

/// Outer IPv4, UDP and VXLAN headers.
const PUSH: usize = MIN_HEADER_LEN + wire::udp::HEADER_LEN + wire::vxlan::HEADER_LEN;
/// The outer TTL.
pub const TTL: u8 = 64;
/// The UDP source ports flows are spread over (RFC 7348 §5: the dynamic range).
const PORT_BASE: u16 = 49152;

#[derive(Debug)]
pub struct Vxlan4Encap {
    shared: Shared,
    tx: CounterRun,
    /// The outer IPv4 identification of packets without DF (RFC 6864: unique per source,
    /// destination and protocol while a fragment may be in flight; a counter suffices).
    ident: u16,
}

impl Vxlan4Encap {
    pub fn new(shared: Shared) -> Vxlan4Encap {
        Vxlan4Encap {
            shared,
            tx: CounterRun::default(),
            ident: 0,
        }
    }
}

graph::node! {
    Vxlan4Encap: "vxlan4-encap", Internal;
    next Next {
        Lookup = "ip4-lookup",
        Drop = "error-drop",
    }
    error Error {
        NotTunnel = "tx interface is not a vxlan tunnel",
        NoHeadroom = "no headroom for the outer headers",
        TooLong = "encapsulated packet over 65535 bytes",
    }
    trace VxlanEncapTrace { vni: u32, dst: [u8; 4], src_port: u32 }
}

impl core::fmt::Display for VxlanEncapTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let dst = wire::Ipv4Addr::from(self.dst);
        write!(
            f,
            "vni {} to vtep {dst} udp source port {}",
            self.vni, self.src_port
        )
    }
}

/// A hash of the inner flow: IPv4 addresses, protocol and, for TCP and UDP first fragments,
/// the ports; the Ethernet addresses for anything else (ARP).
pub fn flow_hash(frame: &[u8]) -> u64 {
    let mut key = [0u64; 2];
    let ip = frame.get(ETH_HDR..).unwrap_or_default();
    let is_ip4 = frame.get(12..14) == Some(&EtherType::Ipv4.to_raw().to_be_bytes()[..]);
    if is_ip4 && let Some(h) = ip.first_chunk::<MIN_HEADER_LEN>() {
        let v = Ipv4::new_unchecked(&h[..]);
        key[0] = (u64::from(u32::from(v.src_addr())) << 32) | u64::from(u32::from(v.dst_addr()));
        let proto = v.protocol();
        key[1] = u64::from(proto.to_raw());
        let l4 = matches!(proto, IpProtocol::Udp | IpProtocol::Tcp) && v.frag_offset() == 0;
        if l4 && let Some(p) = ip.get(v.header_len()..v.header_len() + 4) {
            key[1] |= u64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]])) << 8;
        }
    } else if let Some(macs) = frame.first_chunk::<12>() {
        let mut k = [0u8; 16];
        k[..12].copy_from_slice(macs);
        key = [
            u64::from_le_bytes(k[..8].try_into().unwrap_or_default()),
            u64::from_le_bytes(k[8..].try_into().unwrap_or_default()),
        ];
    }
    // splitmix64's finaliser over the two words: every input bit reaches the low bits.
    let mut h = key[0] ^ key[1].wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The UDP source port of a flow with hash `h`.
pub fn source_port(h: u64) -> u16 {
    PORT_BASE | (h as u16 & (u16::MAX - PORT_BASE))
}

impl Node for Vxlan4Encap {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            let tx_if = ctx.pool.meta(b).tx_if;
            let Some(t) = ifs.get(tx_if as usize).and_then(|c| c.tunnel()) else {
                ctx.count_error(Error::NotTunnel);
                continue;
            };
            let inner = ctx.pool.meta(b).total_len;
            let Some(udp_len) = u16::try_from(inner as usize + 16)
                .ok()
                .filter(|_| inner as usize + PUSH <= usize::from(u16::MAX))
            else {
                ctx.count_error(Error::TooLong);
                continue;
            };
            let src_port = source_port(flow_hash(ctx.pool.data(b)));
            let ident = if t.df {
                0
            } else {
                self.ident = self.ident.wrapping_add(1);
                self.ident
            };
            let Some((m, f)) = ctx.pool.push_front_meta(b, PUSH) else {
                ctx.count_error(Error::NoHeadroom);
                continue;
            };
            let (ip, rest) = f.split_at_mut(MIN_HEADER_LEN);
            let outer = Ipv4Repr {
                src_addr: t.src,
                dst_addr: t.dst,
                protocol: IpProtocol::Udp,
                payload_len: usize::from(udp_len),
                ttl: TTL,
                dscp: 0,
                ecn: 0,
                ident,
                dont_frag: t.df,
                more_frags: false,
                frag_offset: 0,
            };
            let (udp, vx) = rest.split_at_mut(wire::udp::HEADER_LEN);
            // The lengths were checked above and the slices are the headers' sizes.
            let _ = outer.emit(&mut Ipv4::new_unchecked(ip));
            let mut u = Udp::new_unchecked(udp);
            u.set_src_port(src_port);
            u.set_dst_port(wire::vxlan::UDP_PORT);
            u.set_len(udp_len);
            u.set_checksum(0);
            let _ = VxlanRepr { vni: t.vni }.emit(&mut Vxlan::new_unchecked(
                &mut vx[..wire::vxlan::HEADER_LEN],
            ));
            m.vrf = t.underlay;
            m.flags |= LOCALLY_ORIGINATED;
            let traced = m.flags & graph::BUFFER_TRACED != 0;
            self.tx.add(&t.counters, inner, false);
            if traced {
                let dst = t.dst.octets();
                let vni = t.vni;
                ctx.trace(
                    b,
                    VxlanEncapTrace {
                        vni,
                        dst,
                        src_port: u32::from(src_port),
                    },
                );
            }
            *n = Next::Lookup.into();
        }
        self.tx.flush(false);
    }
}
