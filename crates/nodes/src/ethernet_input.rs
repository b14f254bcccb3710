//! `ethernet-input`: checks the destination MAC against the receiving interface, classifies by
//! EtherType and skips the Ethernet header.
//!
//! A frame that is plain IPv4 to this interface's MAC (almost every frame a router sees) also
//! gets ip4-input's checks here, in the pass that already holds its metadata and first bytes,
//! and goes on to `ip4-lookup` (or `vxlan4-input`) directly: one node and one walk over the
//! frame less, as VPP's ethernet-input hands checked frames to `ip4-input-nochecksum`. Every
//! frame that fails a check goes to `ip4-input`, whose counters name the reason as before. A
//! traced frame takes the same path as an untraced one (tracing must not reorder a flow), and
//! its trace record says when the IPv4 checks were made here.

use graph::{Ctx, Node};
use wire::{EtherType, Ethernet};

use crate::{ETH_HDR, IfConfig, Shared, SharedView, ip4_input};

#[derive(Debug)]
pub struct EthernetInput {
    shared: SharedView,
}

impl EthernetInput {
    pub fn new(shared: Shared) -> EthernetInput {
        EthernetInput {
            shared: SharedView::new(&shared),
        }
    }
}

graph::node! {
    EthernetInput: "ethernet-input", Internal;
    next Next {
        Ip4 = "ip4-input",
        Drop = "error-drop",
        Arp = "arp-input",
        Lookup = "ip4-lookup",
        Vxlan = "vxlan4-input",
    }
    error Error {
        Short = "frame shorter than an Ethernet header",
        NotForUs = "l3 mac mismatch",
        UnknownType = "unknown ethertype",
        IfDown = "interface down",
        NotIp4 = "not IPv4 on an interface in ip mode",
    }
    trace EthernetTrace { ethertype: u16, ip4_ttl: u16 }
}

/// Where a frame that passed ip4-input's checks here goes.
impl From<ip4_input::Fast> for Next {
    #[inline(always)]
    fn from(to: ip4_input::Fast) -> Next {
        match to {
            ip4_input::Fast::Lookup => Next::Lookup,
            ip4_input::Fast::Vxlan => Next::Vxlan,
        }
    }
}

impl core::fmt::Display for EthernetTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ethertype 0x{:04x}", self.ethertype)?;
        // A TTL means the IPv4 header passed ip4-input's checks here (never 0 then).
        if self.ip4_ttl != 0 {
            write!(f, ", ip4 checked, ttl {}", self.ip4_ttl)?;
        }
        Ok(())
    }
}

impl Node for EthernetInput {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let SharedView {
            vxlan, interfaces, ..
        } = &mut self.shared;
        let (vxlan, ifs) = (&**vxlan.load(), &**interfaces.load());
        // A node without tunnels runs the loop without the bypass check at all.
        if vxlan.vteps.is_empty() {
            Self::input::<false>(ctx, bufs, next, &[], ifs);
        } else {
            Self::input::<true>(ctx, bufs, next, &vxlan.vteps, ifs);
        }
    }
}

impl EthernetInput {
    #[inline(always)]
    fn input<const BYPASS: bool>(
        ctx: &mut Ctx<'_, Self>,
        bufs: &[u32],
        next: &mut [u16],
        vteps: &[(u32, wire::Ipv4Addr)],
        ifs: &[IfConfig],
    ) {
        // The previous packet's receiving interface (a frame is usually one interface's).
        // The MAC the fast path compares with: the interface's, or for one without Ethernet
        // (ip mode) the broadcast address, which no IPv4 packet's first bytes can equal (its
        // first byte is 0x4N), so that its packets leave the fast path for `l3_input`
        // without a test of their own on the way.
        let (mut last_rx, mut last_ifc, mut fast_mac) = (buffer::NONE, None, mac_key(&[0xff; 6]));
        // Whether a tunnel ends in the receiving interface's VRF: if none does (a pod's
        // interface, in its network's VRF), no packet of it can be VXLAN for us, and the
        // direct loop runs without the bypass check (VPP enables its VXLAN bypass on the
        // interfaces that face the underlay only).
        let mut tunnels_here = false;
        let mut i = 0;
        while i < bufs.len() {
            let (b, n) = (bufs[i], &mut next[i]);
            i += 1;
            let (m, data) = ctx.pool.meta_data_mut(b);
            if m.rx_if != last_rx {
                last_rx = m.rx_if;
                last_ifc = ifs.get(last_rx as usize).filter(|i| i.up);
                fast_mac = mac_key(&match last_ifc {
                    Some(i) if !i.l3 => i.mac,
                    _ => [0xff; 6],
                });
                tunnels_here =
                    BYPASS && last_ifc.is_some_and(|i| vteps.iter().any(|&(v, _)| v == i.vrf));
            }
            let Some(ifc) = last_ifc else {
                ctx.count_error(Error::IfDown);
                *n = Next::Drop.into();
                continue;
            };
            // Fast path: IPv4 unicast to this interface's MAC.
            if let Some((eth, ip)) = data.split_first_chunk::<ETH_HDR>()
                && let e = Ethernet::new_unchecked(eth)
                && e.ethertype_raw() == EtherType::Ipv4.to_raw()
                && mac_key(&e.dst_bytes()) == fast_mac
            {
                m.vrf = ifc.vrf;
                m.skip(ETH_HDR as u16);
                let traced = m.flags & graph::BUFFER_TRACED != 0;
                let ttl = ip.get(8).copied().unwrap_or(0);
                let unchained = m.next == buffer::NONE;
                let Some((to, cut)) = ip4_input::fast::<BYPASS>(m, ip, vteps) else {
                    if traced {
                        trace_ip4(ctx, b, 0);
                    }
                    *n = Next::Ip4.into();
                    continue;
                };
                // Written out in each fast path: a shared helper that carried the cut cost
                // this loop 14 instructions a packet under --cost.
                if let Some(total) = cut {
                    if unchained {
                        ctx.pool.truncate(b, total);
                    } else {
                        ctx.pool.truncate_chain(b, u32::from(total));
                    }
                }
                *n = Next::from(to).into();
                if traced {
                    trace_ip4(ctx, b, ttl);
                } else {
                    // The packets after it most likely came in the same way: the direct
                    // loop takes them while they do.
                    let (rx, vrf) = (last_rx, ifc.vrf);
                    let (rest, next) = (&bufs[i..], &mut next[i..]);
                    i += if tunnels_here {
                        direct::<true>(ctx.pool, rx, vrf, fast_mac, vteps, rest, next)
                    } else {
                        direct::<false>(ctx.pool, rx, vrf, fast_mac, &[], rest, next)
                    };
                }
                continue;
            }
            if ifc.l3 {
                *n = l3_input::<BYPASS>(ctx, b, ifc.vrf, vteps).into();
                continue;
            }
            let data = ctx.pool.data(b);
            let (ethertype, dst) = match Ethernet::new_checked(data) {
                Ok(e) => (e.ethertype(), e.dst()),
                Err(_) => {
                    ctx.count_error(Error::Short);
                    *n = Next::Drop.into();
                    continue;
                }
            };
            if dst.0 != ifc.mac && !dst.is_multicast() {
                ctx.count_error(Error::NotForUs);
                *n = Next::Drop.into();
                continue;
            }
            if ctx.is_traced(b) {
                let ethertype = ethertype.into();
                ctx.trace(
                    b,
                    EthernetTrace {
                        ethertype,
                        ip4_ttl: 0,
                    },
                );
            }
            match ethertype {
                EtherType::Ipv4 => {
                    ctx.pool.meta_mut(b).vrf = ifc.vrf;
                    ctx.pool.advance(b, ETH_HDR as isize);
                    *n = Next::Ip4.into();
                }
                EtherType::Arp => {
                    ctx.pool.advance(b, ETH_HDR as isize);
                    *n = Next::Arp.into();
                }
                _ => {
                    ctx.count_error(Error::UnknownType);
                    *n = Next::Drop.into();
                }
            }
        }
    }
}

/// The direct loop: takes packets from the front of `bufs` for as long as each is one of
/// a single buffer, received on `rx` (an interface that is up, not in ip mode, in VRF `vrf`,
/// whose MAC is `mac` as [`mac_key`] gives it), untraced, IPv4 to that MAC; returns how many
/// it took. Each gets what the node's loop gives it (the IPv4 checks of `ip4_input::fast`,
/// padding cut, on to `ip4-lookup` or `vxlan4-input`, or to `ip4-input` when a check
/// fails); the node's loop takes the rest, from the first packet that is anything else. It
/// only does it with the frame's state in registers and the pool borrowed once.
#[inline(never)]
fn direct<const BYPASS: bool>(
    pool: &mut buffer::Pool,
    rx: u32,
    vrf: u32,
    mac: u64,
    vteps: &[(u32, wire::Ipv4Addr)],
    bufs: &[u32],
    next: &mut [u16],
) -> usize {
    let mut pool = pool.view();
    for (i, (&b, n)) in bufs.iter().zip(next.iter_mut()).enumerate() {
        let Some((m, data)) = pool.meta_data_mut(b) else {
            return i;
        };
        if m.rx_if != rx || m.flags & graph::BUFFER_TRACED != 0 || m.next != buffer::NONE {
            return i;
        }
        let Some((eth, ip)) = data.split_first_chunk::<ETH_HDR>() else {
            return i;
        };
        let e = Ethernet::new_unchecked(eth);
        if e.ethertype_raw() != EtherType::Ipv4.to_raw() || mac_key(&e.dst_bytes()) != mac {
            return i;
        }
        m.vrf = vrf;
        m.skip(ETH_HDR as u16);
        *n = match ip4_input::fast::<BYPASS>(m, ip, vteps) {
            None => Next::Ip4,
            Some((to, cut)) => {
                if let Some(total) = cut {
                    m.truncate(total);
                }
                Next::from(to)
            }
        }
        .into();
    }
    bufs.len()
}

/// A MAC address as one integer (its six bytes in the host's order), so that the fast path
/// compares a frame's destination with one comparison of a value held in a register.
#[inline(always)]
fn mac_key(m: &[u8; 6]) -> u64 {
    u64::from(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]))
        | u64::from(u16::from_ne_bytes([m[4], m[5]])) << 32
}

/// A packet of an interface without Ethernet (a memif in ip mode): IPv4 from its first
/// byte, given ip4-input's checks as on the fast path; anything else is dropped.
#[cold]
#[inline(never)]
fn l3_input<const BYPASS: bool>(
    ctx: &mut Ctx<'_, EthernetInput>,
    b: u32,
    vrf: u32,
    vteps: &[(u32, wire::Ipv4Addr)],
) -> Next {
    let (m, data) = ctx.pool.meta_data_mut(b);
    m.vrf = vrf;
    let traced = m.flags & graph::BUFFER_TRACED != 0;
    let unchained = m.next == buffer::NONE;
    if data.first().map(|v| v >> 4) != Some(4) {
        ctx.count_error(Error::NotIp4);
        return Next::Drop;
    }
    let ttl = data.get(8).copied().unwrap_or(0);
    let Some((to, cut)) = ip4_input::fast::<BYPASS>(m, data, vteps) else {
        if traced {
            trace_ip4(ctx, b, 0);
        }
        return Next::Ip4;
    };
    if let Some(total) = cut {
        if unchained {
            ctx.pool.truncate(b, total);
        } else {
            ctx.pool.truncate_chain(b, u32::from(total));
        }
    }
    if traced {
        trace_ip4(ctx, b, ttl);
    }
    Next::from(to)
}

/// The trace record of an IPv4 frame on the fast path (`ttl`: 0 if its header failed a check
/// and it went on to `ip4-input`). Out of line: tracing is rare, and the loop stays tight.
#[cold]
#[inline(never)]
fn trace_ip4(ctx: &mut Ctx<'_, EthernetInput>, b: u32, ttl: u8) {
    let (ethertype, ip4_ttl) = (EtherType::Ipv4.to_raw(), u16::from(ttl));
    ctx.trace(b, EthernetTrace { ethertype, ip4_ttl });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;

    use super::*;
    use crate::IfConfig;
    use crate::testing::run_one;

    fn node(l3: bool) -> EthernetInput {
        let mut c = IfConfig::new([2, 0, 0, 0, 0, 1], 3);
        c.l3 = l3;
        EthernetInput::new(Shared::new(
            Arc::new(ArcSwap::from_pointee(vec![c])),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            fib::adj::AdjTable::new().reader(),
        ))
    }

    fn ipv4() -> Vec<u8> {
        let mut v = Vec::new();
        etherparse::PacketBuilder::ipv4([10, 0, 0, 2], [10, 0, 0, 1], 64)
            .udp(1, 2)
            .write(&mut v, &[0; 18])
            .unwrap();
        v
    }

    /// On an interface in ip mode a packet is IPv4 from its first byte: checked and looked up
    /// in the interface's VRF, its bytes untouched; anything else is dropped and counted.
    #[test]
    fn ip_mode_takes_bare_ipv4() {
        let p = ipv4();
        let ((next, data, _, meta), errors) = run_one(node(true), &p, &[], |m| m.rx_if = 0);
        assert_eq!((next, errors.len()), ("ip4-lookup", 0));
        assert_eq!((data, meta.vrf), (p.clone(), 3));
        let ((next, ..), errors) = run_one(node(true), &[0x60; 40], &[], |m| m.rx_if = 0);
        assert_eq!(
            (next, errors),
            ("error-drop", vec!["not IPv4 on an interface in ip mode"])
        );
        // The same bytes on an Ethernet interface are no frame for us.
        let ((next, ..), _) = run_one(node(false), &p, &[], |m| m.rx_if = 0);
        assert_eq!(next, "error-drop");
    }
}
