//! `vxlan4-encap`: wraps a frame sent on a VXLAN tunnel interface in the tunnel's outer IPv4,
//! UDP and VXLAN headers (RFC 7348 §5) and routes the result in the uplink's VRF: the remote
//! VTEP is looked up once per run of a tunnel's packets. When its route has a resolved next
//! hop on an interface that is up, the packets get the outer Ethernet header too, from one
//! 64-byte template (Ethernet, IPv4, UDP, VXLAN), and go straight to the uplink's device node:
//! what `ip4-rewrite` would do with our own packet (header only, TTL untouched), without the
//! second node. A packet over the uplink's MTU, or a traced one, goes to `ip4-rewrite` with the
//! adjacency instead (which says why it cannot go out); one whose VTEP is not resolved yet goes
//! through `ip4-lookup`, which finds the next hop on the uplink (resolved by ARP like any
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

use fib::adj::Adjacency;
use graph::{Ctx, Node};
use wire::ipv4::MIN_HEADER_LEN;
use wire::{EtherType, IpProtocol, Ipv4, Ipv4Repr, Udp, Vxlan, VxlanRepr};

use crate::interface_output::{Out, rewrite_for};
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
        Rewrite = "ip4-rewrite",
        Drop = "error-drop",
    } + devices
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

/// Ethernet, an IPv4 header without options and four bytes of ports: the common inner frame.
const PLAIN: usize = ETH_HDR + MIN_HEADER_LEN + 4;

/// A hash of the inner flow: IPv4 addresses, protocol and, for TCP and UDP first fragments,
/// the ports; the Ethernet addresses for anything else (ARP).
#[inline]
pub fn flow_hash(frame: &[u8]) -> u64 {
    let [k0, k1] = flow_key(frame);
    // Two multiply-xorshift rounds (splitmix64's finaliser, shortened): every input bit
    // reaches the high bits, which `source_port` takes.
    let h = (k0 ^ k1.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (h ^ (h >> 29)).wrapping_mul(0x94d0_49bb_1331_11eb)
}

/// The flow's key as two words: for IPv4, the addresses in one and protocol and ports in the
/// other; otherwise the Ethernet addresses.
#[inline]
fn flow_key(frame: &[u8]) -> [u64; 2] {
    let ip4 = EtherType::Ipv4.to_raw().to_be_bytes();
    // The common case at fixed offsets: IPv4 without options, ports in the frame.
    if let Some(f) = frame.first_chunk::<PLAIN>()
        && f[wire::ethernet::field::ETHERTYPE] == ip4
        && f[ETH_HDR] == wire::ipv4::VER_IHL_NO_OPTIONS
    {
        let (h, ports) = f[ETH_HDR..].split_at(MIN_HEADER_LEN);
        return ip4_key(h, Some(ports));
    }
    let ip = frame.get(ETH_HDR..).unwrap_or_default();
    if frame.get(12..14) == Some(&ip4[..])
        && let Some(h) = ip.first_chunk::<MIN_HEADER_LEN>()
    {
        let hl = Ipv4::new_unchecked(&h[..]).header_len();
        return ip4_key(h, ip.get(hl..hl + 4));
    }
    let mut k = [0u8; 16];
    if let Some(macs) = frame.first_chunk::<12>() {
        k[..12].copy_from_slice(macs);
    }
    [
        u64::from_le_bytes(k[..8].try_into().unwrap_or_default()),
        u64::from_le_bytes(k[8..].try_into().unwrap_or_default()),
    ]
}

/// The key of an IPv4 flow from its header `h` and the four bytes after the header, if the
/// frame has them: addresses, protocol and, for TCP and UDP first fragments, the ports.
#[inline(always)]
fn ip4_key(h: &[u8], ports: Option<&[u8]>) -> [u64; 2] {
    let v = Ipv4::new_unchecked(h);
    let addrs = (u64::from(u32::from(v.src_addr())) << 32) | u64::from(u32::from(v.dst_addr()));
    let proto = v.protocol();
    let mut k1 = u64::from(proto.to_raw());
    if matches!(proto, IpProtocol::Udp | IpProtocol::Tcp)
        && v.frag_offset() == 0
        && let Some(&[a, b, c, d]) = ports
    {
        k1 |= u64::from(u32::from_be_bytes([a, b, c, d])) << 8;
    }
    [addrs, k1]
}

/// The UDP source port of a flow with hash `h`: its top 14 bits in the dynamic range.
#[inline]
pub fn source_port(h: u64) -> u16 {
    PORT_BASE | (h >> 50) as u16
}

/// Outer Ethernet, IPv4, UDP and VXLAN headers: one cache line.
const FULL: usize = ETH_HDR + PUSH;

/// A tunnel's outer headers (Ethernet first, when the run goes straight to a device) with the
/// per-packet fields zero (IPv4 total length and identification, UDP length and source port),
/// and the one's-complement sum of the IPv4 header as it stands: a packet's headers are a copy
/// with those fields written and the checksum completed from the sum, instead of built field
/// by field.
#[derive(Debug)]
struct Template {
    bytes: [u8; FULL],
    ip_sum: u32,
}

/// Where a run's packets go when the VTEP's route has a resolved next hop on an interface
/// that is up: straight to the device, with the outer Ethernet header written here.
#[derive(Debug, Clone, Copy)]
struct Direct {
    adj: u32,
    tx_if: u32,
    /// The uplink's MTU: the largest outer IPv4 packet.
    mtu: u32,
    next: u16,
}

impl Template {
    fn new(t: &crate::VxlanTunnel, eth: Option<[u8; ETH_HDR]>) -> Template {
        let mut bytes = [0u8; FULL];
        if let Some(hdr) = eth {
            bytes[..ETH_HDR].copy_from_slice(&hdr);
        }
        let (ip, rest) = bytes[ETH_HDR..].split_at_mut(MIN_HEADER_LEN);
        let outer = Ipv4Repr {
            src_addr: t.src,
            dst_addr: t.dst,
            protocol: IpProtocol::Udp,
            payload_len: 0,
            ttl: TTL,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: t.df,
            more_frags: false,
            frag_offset: 0,
        };
        // The slices are the headers' sizes, and a VNI of a network fits 24 bits.
        let _ = outer.emit(&mut Ipv4::new_unchecked(&mut ip[..]));
        ip[wire::ipv4::field::LENGTH].fill(0);
        ip[wire::ipv4::field::CHECKSUM].fill(0);
        let (udp, vx) = rest.split_at_mut(wire::udp::HEADER_LEN);
        let mut u = Udp::new_unchecked(udp);
        u.set_dst_port(wire::vxlan::UDP_PORT);
        let _ = VxlanRepr { vni: t.vni }.emit(&mut Vxlan::new_unchecked(vx));
        let ip_sum = wire::checksum::accumulate(0, &bytes[ETH_HDR..ETH_HDR + MIN_HEADER_LEN]);
        Template { bytes, ip_sum }
    }

    /// Writes the headers of a packet with `udp_len` bytes of UDP (the inner frame plus 16)
    /// into `h`: the outer Ethernet header too when `h` has room for it (`N` is [`FULL`]),
    /// from the IPv4 header on otherwise (`N` is [`PUSH`]).
    #[inline]
    fn write<const N: usize>(&self, h: &mut [u8; N], udp_len: u16, ident: u16, src_port: u16) {
        *h = *self.bytes.last_chunk::<N>().expect("N is PUSH or FULL");
        let ip = N - PUSH;
        let total = udp_len + MIN_HEADER_LEN as u16;
        h[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
        h[ip + 4..ip + 6].copy_from_slice(&ident.to_be_bytes());
        let sum = self.ip_sum + u32::from(total) + u32::from(ident);
        h[ip + 10..ip + 12].copy_from_slice(&(!wire::checksum::fold(sum)).to_be_bytes());
        h[ip + 20..ip + 22].copy_from_slice(&src_port.to_be_bytes());
        h[ip + 24..ip + 26].copy_from_slice(&udp_len.to_be_bytes());
    }
}

/// What a run of one tunnel's packets shares: the tunnel interface, the tunnel, its headers,
/// the rewrite adjacency of its remote VTEP (when the route to it has one), and the direct
/// path to the uplink's device (when that adjacency's interface is up).
type Run<'a> = (
    u32,
    &'a crate::VxlanTunnel,
    Template,
    Option<u32>,
    Option<Direct>,
);

/// A run of one tunnel's packets on the direct path: its interface, the tunnel, its headers
/// and the path to the uplink's device.
struct Same<'a> {
    tx_if: u32,
    t: &'a crate::VxlanTunnel,
    template: &'a Template,
    d: Direct,
}

/// The direct loop: takes packets from the front of `bufs` for as long as each is for
/// `run`'s tunnel, untraced, within the uplink's MTU once encapsulated and with room for the
/// outer headers; returns how many it took. Each gets what the node's loop gives it on its
/// fast path (the outer headers from the template with its lengths, identification and
/// source port, counted, straight to the uplink's device); the node's loop takes the rest,
/// from the first packet that is anything else.
#[inline(never)]
fn encap_run(
    pool: &mut buffer::Pool,
    tx: &mut CounterRun,
    ident: &mut u16,
    run: &Same<'_>,
    bufs: &[u32],
    next: &mut [u16],
) -> usize {
    let (t, d) = (run.t, run.d);
    let mut pool = pool.view();
    let (mut packets, mut bytes, mut id) = (0u64, 0u64, *ident);
    let mut took = bufs.len();
    for (i, (&b, n)) in bufs.iter().zip(next.iter_mut()).enumerate() {
        let Some((m, f)) = pool.meta_data_front_mut(b, FULL) else {
            took = i;
            break;
        };
        let inner = m.total_len;
        // Within the MTU (at most 65535) is within the lengths' 16 bits too.
        if m.tx_if != run.tx_if
            || m.flags & graph::BUFFER_TRACED != 0
            || inner + PUSH as u32 > d.mtu
        {
            took = i;
            break;
        }
        let Some((h, frame)) = f.split_first_chunk_mut::<FULL>() else {
            took = i;
            break;
        };
        let src_port = source_port(flow_hash(frame));
        let ident = if t.df {
            0
        } else {
            id = id.wrapping_add(1);
            id
        };
        run.template.write(h, (inner + 16) as u16, ident, src_port);
        m.expose(FULL as u16);
        m.vrf = t.underlay;
        m.flags |= LOCALLY_ORIGINATED;
        m.adj = d.adj;
        m.tx_if = d.tx_if;
        *n = d.next;
        packets += 1;
        bytes += u64::from(inner);
    }
    *ident = id;
    tx.add_many(&t.counters, packets, bytes, false);
    took
}

/// The device node that transmits on an interface of kind `out`; none for a tunnel (VXLAN in
/// VXLAN takes the general path).
fn device_node(out: Out) -> Option<u16> {
    match out {
        Out::Device(k) => Some(<Next as graph::NextNodes>::device(k)),
        Out::Vxlan => None,
    }
}

impl Node for Vxlan4Encap {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        let vrfs = self.shared.vrfs.load();
        let adjs = self.shared.adjacencies.load();
        // The previous packet's tunnel, its headers, and the rewrite adjacency of its remote
        // VTEP when the route to it has one: a frame is usually one tunnel's, and every packet
        // of a tunnel has the same outer destination, so one lookup serves the run and its
        // packets go straight to the uplink's device (anything else, say a VTEP still being
        // resolved, goes through `ip4-lookup` per packet).
        let mut last: Option<Run<'_>> = None;
        let mut i = 0;
        while i < bufs.len() {
            let (b, n) = (bufs[i], &mut next[i]);
            i += 1;
            *n = Next::Drop.into();
            let m = ctx.pool.meta(b);
            let (tx_if, inner, traced) =
                (m.tx_if, m.total_len, m.flags & graph::BUFFER_TRACED != 0);
            if last.as_ref().is_none_or(|(i, ..)| *i != tx_if) {
                let Some(t) = ifs.get(tx_if as usize).and_then(|c| c.tunnel()) else {
                    ctx.count_error(Error::NotTunnel);
                    continue;
                };
                let adj = vrfs
                    .get(t.underlay as usize)
                    .and_then(|table| table.lookup(t.dst))
                    .filter(|&a| matches!(adjs.get(a as usize), Some(Adjacency::Rewrite { .. })));
                let direct = adj.and_then(|a| {
                    let r = rewrite_for(&adjs, &ifs, a)?;
                    let d = Direct {
                        adj: a,
                        tx_if: r.tx_if,
                        mtu: r.mtu,
                        next: device_node(r.out)?,
                    };
                    Some((d, r.hdr))
                });
                let template = Template::new(t, direct.map(|(_, hdr)| hdr));
                last = Some((tx_if, t, template, adj, direct.map(|(d, _)| d)));
            }
            let Some(&(_, t, ref template, adj, direct)) = last.as_ref() else {
                continue;
            };
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
            self.tx.add(&t.counters, inner, false);
            // Fast path, almost every packet: straight to the uplink's device.
            if let Some(d) = direct
                && !traced
                && inner + PUSH as u32 <= d.mtu
                && let Some((m, f)) = ctx.pool.push_front_meta(b, FULL)
            {
                if let Some(h) = f.first_chunk_mut::<FULL>() {
                    template.write(h, udp_len, ident, src_port);
                }
                m.vrf = t.underlay;
                m.flags |= LOCALLY_ORIGINATED;
                m.adj = d.adj;
                m.tx_if = d.tx_if;
                *n = d.next;
                // The packets after it are most likely the same tunnel's: the direct loop
                // takes them while they are.
                let run = Same {
                    tx_if,
                    t,
                    template,
                    d,
                };
                let (rest, next) = (&bufs[i..], &mut next[i..]);
                i += encap_run(ctx.pool, &mut self.tx, &mut self.ident, &run, rest, next);
                continue;
            }
            let Some((m, f)) = ctx.pool.push_front_meta(b, PUSH) else {
                ctx.count_error(Error::NoHeadroom);
                continue;
            };
            if let Some(h) = f.first_chunk_mut::<PUSH>() {
                template.write(h, udp_len, ident, src_port);
            }
            m.vrf = t.underlay;
            m.flags |= LOCALLY_ORIGINATED;
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
            // Traced (ip4-rewrite writes its record too), over the uplink's MTU (ip4-rewrite
            // says so), or on a path the fast one does not take; unresolved: ip4-lookup.
            *n = match adj {
                Some(a) => {
                    ctx.pool.meta_mut(b).adj = a;
                    Next::Rewrite.into()
                }
                None => Next::Lookup.into(),
            };
        }
        self.tx.flush(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flow key at fixed offsets (plain IPv4) and through the general path (options, short
    /// frames, ARP) says the same of the same flow; fragments and protocols without ports key
    /// on addresses and protocol; the ports spread over the dynamic range.
    #[test]
    fn the_plain_frame_key_is_the_general_key() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..38].copy_from_slice(&[0x12, 0x34, 0x56, 0x78]);
        let k = flow_key(&f);
        assert_eq!(k[0], 0x0a00_0001_0a00_0002);
        assert_eq!(k[1], 17 | (0x1234_5678 << 8));
        // A fragment keeps only addresses and protocol, TCP keeps ports, ICMP does not.
        f[20] = 0x00;
        f[21] = 0x10;
        assert_eq!(flow_key(&f)[1], 17);
        f[20..22].fill(0);
        f[23] = 6;
        assert_eq!(flow_key(&f)[1], 6 | (0x1234_5678 << 8));
        f[23] = 1;
        assert_eq!(flow_key(&f)[1], 1);
        // Options: the ports follow them (general path).
        let mut o = f.clone();
        o[14] = 0x46;
        o[23] = 17;
        o.splice(34..34, [0u8; 4]);
        assert_eq!(
            flow_key(&o),
            [0x0a00_0001_0a00_0002, 17 | (0x1234_5678 << 8)]
        );
        // Too short for the ports at a fixed offset: addresses and protocol only.
        assert_eq!(flow_key(&f[..36])[1], 1);
        // Not IPv4: the MACs.
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(flow_key(&arp), [0, 0]);
        arp[0] = 0xff;
        assert_eq!(flow_key(&arp)[0], 0xff);
        // Ports spread over the whole dynamic range.
        let ports: std::collections::BTreeSet<u16> = (0..4096u32)
            .map(|i| {
                f[23] = 17;
                f[34..38].copy_from_slice(&i.to_be_bytes());
                source_port(flow_hash(&f))
            })
            .collect();
        assert!(ports.iter().all(|&p| p >= PORT_BASE));
        assert!(ports.len() > 3000, "{}", ports.len());
        assert!(ports.iter().any(|&p| p > 65000) && ports.iter().any(|&p| p < 50000));
    }

    /// The template's headers are the ones built field by field, checksum included, for any
    /// length, identification, port and DF.
    #[test]
    fn template_headers_equal_headers_built_field_by_field() {
        for df in [true, false] {
            let t = crate::VxlanTunnel {
                vni: 0xabcdef,
                src: wire::Ipv4Addr::new(192, 0, 2, 1),
                dst: wire::Ipv4Addr::new(198, 51, 100, 7),
                underlay: 0,
                uplink: 1,
                df,
                ranges: Vec::new(),
                counters: Default::default(),
            };
            let tpl = Template::new(&t, None);
            for (udp_len, ident, port) in [
                (16 + 60, 0, 49152),
                (16 + 9000, 0xffff, 65535),
                (16 + 1514, 77, 50000),
            ] {
                let mut h = [0u8; PUSH];
                tpl.write(&mut h, udp_len, ident, port);
                let mut want = [0u8; PUSH];
                let (ip, rest) = want.split_at_mut(MIN_HEADER_LEN);
                Ipv4Repr {
                    src_addr: t.src,
                    dst_addr: t.dst,
                    protocol: IpProtocol::Udp,
                    payload_len: usize::from(udp_len),
                    ttl: TTL,
                    dscp: 0,
                    ecn: 0,
                    ident,
                    dont_frag: df,
                    more_frags: false,
                    frag_offset: 0,
                }
                .emit(&mut Ipv4::new_unchecked(ip))
                .unwrap();
                let (udp, vx) = rest.split_at_mut(8);
                let mut u = Udp::new_unchecked(udp);
                u.set_src_port(port);
                u.set_dst_port(4789);
                u.set_len(udp_len);
                VxlanRepr { vni: t.vni }
                    .emit(&mut Vxlan::new_unchecked(vx))
                    .unwrap();
                assert_eq!(h, want, "df {df} len {udp_len} ident {ident}");
                assert!(wire::checksum::ipv4_header_ok(h[..20].try_into().unwrap()));
            }
        }
    }
}
