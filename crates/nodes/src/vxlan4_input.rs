//! `vxlan4-input`: decapsulates VXLAN (RFC 7348) datagrams to port 4789, sent here by
//! `ip4-input` (VXLAN to one of our VTEPs without a UDP checksum) or `udp4-local` (anything
//! else to one of our addresses), and hands the inner Ethernet frame on as received on the
//! tunnel's interface, so that it is looked up in the tunnel's network's VRF and nowhere else:
//! IPv4 to the tunnel's own MAC gets ip4-input's checks here and goes on to `ip4-lookup` (what
//! `ethernet-input` would do with it, without the second pass; `ip4-input` takes what fails a
//! check), anything else (ARP, broadcast, another MAC) goes to `ethernet-input`.
//!
//! The tunnel is found by (outer source address, VNI), as VPP's `vxlan4-input` does: a packet
//! is accepted only from a VTEP we have a tunnel to for that VNI, addressed to the tunnel's own
//! VTEP address and received on its uplink (so in its VRF): a pod cannot send VXLAN to its
//! gateway address, nor a network tunnel VXLAN inside VXLAN, nor a pod in the underlay's VRF
//! spoof a member VTEP, to reach another network. VXLAN carries no
//! authentication, so a host that can reach our UDP port 4789 from a configured VTEP's address
//! can inject into the network of any VNI that VTEP serves, and into no other; filtering
//! spoofed outer sources is the underlay's job (see `docs/multinet.md`).
//!
//! The data starts at the outer IPv4 header: `ip4-input` checked it (20 bytes, no options,
//! total length equal to the buffer's), and the UDP header and its length were checked by
//! whichever node sent the datagram here.

use graph::{Ctx, Node};
use wire::ipv4::MIN_HEADER_LEN;
use wire::{EtherType, Ethernet, Vxlan};

use crate::{CounterRun, ETH_HDR, Shared};

/// Outer IPv4, UDP and VXLAN headers: what decapsulation strips.
const OUTER: usize = MIN_HEADER_LEN + wire::udp::HEADER_LEN + wire::vxlan::HEADER_LEN;

#[derive(Debug)]
pub struct Vxlan4Input {
    shared: Shared,
    rx: CounterRun,
}

impl Vxlan4Input {
    pub fn new(shared: Shared) -> Vxlan4Input {
        Vxlan4Input {
            shared,
            rx: CounterRun::default(),
        }
    }
}

graph::node! {
    Vxlan4Input: "vxlan4-input", Internal;
    next Next {
        EthernetInput = "ethernet-input",
        Ip4Input = "ip4-input",
        Drop = "error-drop",
        Lookup = "ip4-lookup",
        Vxlan = "vxlan4-input",
    }
    error Error {
        Truncated = "vxlan header or inner ethernet header truncated",
        BadFlags = "vxlan flags without the I bit (no valid vni)",
        UnknownVni = "vxlan vni of no network",
        NoTunnel = "vxlan from a vtep with no tunnel for its vni",
        WrongUnderlay = "vxlan not received on its tunnel's uplink (interface, vrf or vtep address)",
    }
    trace VxlanInputTrace { vni: u32, tunnel: u32 }
}

/// Where an inner frame that passed ip4-input's checks here goes.
impl From<crate::ip4_input::Fast> for Next {
    #[inline(always)]
    fn from(to: crate::ip4_input::Fast) -> Next {
        match to {
            crate::ip4_input::Fast::Lookup => Next::Lookup,
            crate::ip4_input::Fast::Vxlan => Next::Vxlan,
        }
    }
}

impl core::fmt::Display for VxlanInputTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "vni {} to tunnel interface {}", self.vni, self.tunnel)
    }
}

/// What the packets of one tunnel share, for the direct loop.
struct Tun<'a> {
    /// (outer source, VNI).
    key: (wire::Ipv4Addr, u32),
    /// The tunnel's interface, its VRF and MAC (the interface is up).
    id: u32,
    vrf: u32,
    mac: [u8; 6],
    t: &'a crate::VxlanTunnel,
}

/// The direct loop: takes packets from the front of `bufs` for as long as each is one of a
/// single buffer, from `tun`'s remote VTEP and VNI to its own address in its underlay VRF,
/// carrying IPv4 to the tunnel's MAC, untraced; returns how many it took. Each gets what the
/// node's loop gives it (decapsulated, received on the tunnel, counted, the inner header's
/// checks of `ip4_input::fast` and on to `ip4-lookup`, or to `ip4-input` when a check fails);
/// the node's loop takes the rest, from the first packet that is anything else.
#[inline(never)]
fn direct(
    pool: &mut buffer::Pool,
    rx: &mut CounterRun,
    tun: &Tun<'_>,
    vteps: &[(u32, wire::Ipv4Addr)],
    bufs: &[u32],
    next: &mut [u16],
) -> usize {
    let mut pool = pool.view();
    let (mut packets, mut bytes) = (0u64, 0u64);
    let mut took = bufs.len();
    for (i, (&b, n)) in bufs.iter().zip(next.iter_mut()).enumerate() {
        let Some((m, d)) = pool.meta_data_mut(b) else {
            took = i;
            break;
        };
        let Some(frame) = d.first_chunk::<{ OUTER + ETH_HDR }>() else {
            took = i;
            break;
        };
        let ip = wire::Ipv4::new_unchecked(&frame[..MIN_HEADER_LEN]);
        let v = Vxlan::new_unchecked(&frame[OUTER - wire::vxlan::HEADER_LEN..OUTER]);
        let e = Ethernet::new_unchecked(&frame[OUTER..]);
        if !v.vni_valid()
            || (ip.src_addr(), v.vni()) != tun.key
            || m.vrf != tun.t.underlay
            || m.rx_if != tun.t.uplink
            || ip.dst_addr() != tun.t.src
            || m.flags & graph::BUFFER_TRACED != 0
            || m.next != buffer::NONE
            || e.ethertype_raw() != EtherType::Ipv4.to_raw()
            || e.dst_bytes() != tun.mac
        {
            took = i;
            break;
        }
        m.rx_if = tun.id;
        packets += 1;
        bytes += u64::from(m.total_len - OUTER as u32);
        m.vrf = tun.vrf;
        m.skip((OUTER + ETH_HDR) as u16);
        let inner = d.get(OUTER + ETH_HDR..).unwrap_or_default();
        *n = match crate::ip4_input::fast::<true>(m, inner, vteps, None) {
            Some((to, cut)) => {
                if let Some(total) = cut {
                    m.truncate(total);
                }
                Next::from(to)
            }
            None => Next::Ip4Input,
        }
        .into();
    }
    rx.add_many(&tun.t.counters, packets, bytes, true);
    took
}

impl Node for Vxlan4Input {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let map = self.shared.vxlan.load();
        let ifs = self.shared.interfaces.load();
        // (source, VNI) -> tunnel (its interface id, interface and tunnel) of the previous
        // packet: a frame is usually one tunnel's.
        let mut last = None;
        let mut i = 0;
        while i < bufs.len() {
            let (b, n) = (bufs[i], &mut next[i]);
            i += 1;
            *n = Next::Drop.into();
            let (m, d) = ctx.pool.meta_data_mut(b);
            // Outer headers and the inner Ethernet header, in one check.
            let Some(frame) = d.first_chunk::<{ OUTER + ETH_HDR }>() else {
                let flags_bad = d.first_chunk::<OUTER>().is_some_and(|o| {
                    !Vxlan::new_unchecked(&o[OUTER - wire::vxlan::HEADER_LEN..]).vni_valid()
                });
                ctx.count_error(if flags_bad {
                    Error::BadFlags
                } else {
                    Error::Truncated
                });
                continue;
            };
            let ip = wire::Ipv4::new_unchecked(&frame[..MIN_HEADER_LEN]);
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let v = Vxlan::new_unchecked(&frame[OUTER - wire::vxlan::HEADER_LEN..OUTER]);
            if !v.vni_valid() {
                ctx.count_error(Error::BadFlags);
                continue;
            }
            let vni = v.vni();
            let (tunnel, c, t) = match last {
                Some((k, tunnel, c, t)) if k == (src, vni) => (tunnel, c, t),
                _ => {
                    let Some(&tunnel) = map.tunnels.get(&(src, vni)) else {
                        ctx.count_error(if map.vnis.contains(&vni) {
                            Error::NoTunnel
                        } else {
                            Error::UnknownVni
                        });
                        continue;
                    };
                    let Some((c, t)) = ifs
                        .get(tunnel as usize)
                        .and_then(|c| Some((c, c.tunnel()?)))
                    else {
                        ctx.count_error(Error::NoTunnel);
                        continue;
                    };
                    last = Some(((src, vni), tunnel, c, t));
                    (tunnel, c, t)
                }
            };
            if m.vrf != t.underlay || m.rx_if != t.uplink || dst != t.src {
                ctx.count_error(Error::WrongUnderlay);
                continue;
            }
            // What `ethernet-input` would do with the inner frame's common case, IPv4 to the
            // tunnel's own MAC on a tunnel that is up, done here without the second pass;
            // anything else (ARP, broadcast, another MAC, a tunnel down, a traced packet) goes
            // through it.
            let e = Ethernet::new_unchecked(&frame[OUTER..]);
            let plain = c.up
                && e.ethertype_raw() == EtherType::Ipv4.to_raw()
                && e.dst_bytes() == c.mac
                && m.flags & graph::BUFFER_TRACED == 0;
            m.rx_if = tunnel;
            self.rx.add(&t.counters, m.total_len - OUTER as u32, true);
            if plain {
                m.vrf = c.vrf;
                m.skip((OUTER + ETH_HDR) as u16);
                // ip4-input's checks on the inner header too, as ethernet-input makes them:
                // a plain inner IPv4 packet goes on to ip4-lookup in the network's VRF.
                let inner = d.get(OUTER + ETH_HDR..).unwrap_or_default();
                let unchained = m.next == buffer::NONE;
                *n = match crate::ip4_input::fast::<true>(m, inner, &map.vteps, None) {
                    Some((to, cut)) => {
                        if let Some(total) = cut {
                            if unchained {
                                ctx.pool.truncate(b, total);
                            } else {
                                ctx.pool.truncate_chain(b, u32::from(total));
                            }
                        }
                        Next::from(to)
                    }
                    None => Next::Ip4Input,
                }
                .into();
                // The packets after it are most likely the same tunnel's: the direct loop
                // takes them while they are.
                let tun = Tun {
                    key: (src, vni),
                    id: tunnel,
                    vrf: c.vrf,
                    mac: c.mac,
                    t,
                };
                let (rest, next) = (&bufs[i..], &mut next[i..]);
                i += direct(ctx.pool, &mut self.rx, &tun, &map.vteps, rest, next);
                continue;
            }
            m.skip(OUTER as u16);
            if m.flags & graph::BUFFER_TRACED != 0 {
                ctx.trace(b, VxlanInputTrace { vni, tunnel });
            }
            *n = Next::EthernetInput.into();
        }
        self.rx.flush(true);
    }
}
