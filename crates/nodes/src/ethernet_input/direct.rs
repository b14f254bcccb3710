//! `ethernet-input`'s direct loops: runs of a frame's packets taken with the frame's state
//! in registers (see [`direct`]), forwarded by the last adjacency or by the flow cache.

use wire::ipv4::MIN_HEADER_LEN;
use wire::{EtherType, Ethernet, Ipv4};

use super::Next;
use crate::ip4_input::{self, SourceCheck};
use crate::ip4_rewrite::{Fast, forward};
use crate::{ETH_HDR, worker_sessions};

/// The direct loop: takes packets from the front of `bufs` for as long as each is one of
/// a single buffer, received on `rx` (an interface that is up, not in ip mode, in VRF `vrf`,
/// taking the sources `src` allows, whose MAC is `mac` as [`mac_key`] gives it), untraced and
/// not our own, IPv4 to that MAC that passes the IPv4 checks of `ip4_input::fast`
/// ([`admit`]); returns how many it took. Each gets what the node's loop gives it (padding
/// cut, on to `look`: `ip4-lookup`, or `ip4-session` for a VRF that keeps sessions; or to
/// `vxlan4-input`); the node's loop takes the rest, from the first packet that is anything
/// else. It only does it with the frame's state in registers and the pool borrowed once.
///
/// With `FUSE`, `fwd` holds VRF `vrf`'s table and the rewrite of the frame's last adjacency
/// (if any), and a packet for `ip4-lookup` is taken only when its route is that adjacency, it
/// is within the adjacency's MTU and its TTL above one, and then forwarded as
/// [`super::Fuse::forward`] does.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn direct<const BYPASS: bool, const FUSE: bool, S: SourceCheck>(
    pool: &mut buffer::Pool,
    (rx, vrf, src): (u32, u32, S),
    mac: u64,
    vteps: &[(u32, wire::Ipv4Addr)],
    fwd: Option<(fib::LpmView<'_>, &Fast)>,
    (bufs, next, look): (&[u32], &mut [u16], Next),
) -> usize {
    // Without a rewrite (the frame's first packets went to vxlan4-input, say) the loop takes
    // no packet for ip4-lookup: the node's loop looks the first one up.
    let (table, fast) = match fwd {
        Some((t, f)) if FUSE => (
            Some(t),
            f.rw.as_ref()
                .map(|r| (f.adj, f.next, &r.hdr, r.mtu, r.tx_if)),
        ),
        _ => (None, None),
    };
    let skip = crate::LOCALLY_ORIGINATED | graph::BUFFER_TRACED;
    let mut pool = pool.view();
    for (i, (&b, n)) in bufs.iter().zip(next.iter_mut()).enumerate() {
        let Some((m, data)) = pool.meta_data_mut(b) else {
            return i;
        };
        if m.rx_if != rx || m.flags & skip != 0 || m.next != buffer::NONE {
            return i;
        }
        let Some((eth, ip)) = data.split_first_chunk::<ETH_HDR>() else {
            return i;
        };
        let e = Ethernet::new_unchecked(eth);
        if e.ethertype_raw() != EtherType::Ipv4.to_raw() || mac_key(&e.dst_bytes()) != mac {
            return i;
        }
        // Every check first, so that a packet given back is untouched: the bytes from the
        // IPv4 header on (the frame holds the Ethernet header: `data` does).
        let avail = m.total_len.saturating_sub(ETH_HDR as u32);
        let Some((to, cut)) = ip4_input::fast_at::<BYPASS>(avail, vrf, ip, vteps, src) else {
            return i;
        };
        if FUSE && to == ip4_input::Fast::Lookup {
            let (Some(table), Some((adj, device, hdr, mtu, tx_if))) = (table, fast) else {
                return i;
            };
            // Forwarded as it is, its Ethernet header rewritten in place: never advanced past
            // it, so nothing to give back.
            let dst = ip
                .first_chunk::<MIN_HEADER_LEN>()
                .map(|h| Ipv4::new_unchecked(h).dst_addr());
            let len = cut.map_or(avail, u32::from);
            if dst.and_then(|d| table.lookup(d)) != Some(adj) || len > mtu {
                return i;
            }
            let frame = cut.map(|c| c.checked_add(ETH_HDR as u16));
            // `forward` writes nothing when it refuses (a TTL that would expire).
            if frame == Some(None) || !forward(hdr, data) {
                return i;
            }
            m.vrf = vrf;
            if let Some(Some(total)) = frame {
                m.truncate(total);
            }
            m.adj = adj;
            m.tx_if = tx_if;
            *n = device;
            continue;
        }
        m.vrf = vrf;
        m.skip(ETH_HDR as u16);
        if let Some(total) = cut {
            m.truncate(total);
        }
        *n = match to {
            ip4_input::Fast::Lookup => look,
            ip4_input::Fast::Vxlan => Next::Vxlan,
        }
        .into();
    }
    bufs.len()
}

/// Misses of the flow cache in a direct loop after which, if they are seven eighths of its
/// packets, the frame gives up on the cache.
const GIVE_UP_AFTER: usize = 16;

/// [`direct`] for a VRF that keeps sessions, with the worker's flow cache `cache` (the VRF's
/// table at version `fib`) and the rewrite of the frame's last adjacency `fast`: a packet for
/// `ip4-lookup` is taken only when the cache forwards it ([`worker_sessions::Frame::hit`]),
/// through that adjacency, within its MTU and with a TTL above one, and then rewritten as its
/// session says and forwarded. A packet the cache sends to `ip4-session` by its flow is passed
/// on and the loop goes on ([`worker_sessions::Miss::Flow`]).
#[inline(never)]
fn direct_cached<const BYPASS: bool, S: SourceCheck>(
    pool: &mut buffer::Pool,
    (rx, vrf, src): (u32, u32, S),
    mac: u64,
    vteps: &[(u32, wire::Ipv4Addr)],
    (fast, cache, fib): (&Fast, worker_sessions::Frame<'_>, u64),
    (bufs, next, look): (&[u32], &mut [u16], Next),
) -> (usize, usize) {
    // Without a rewrite yet (the frame's packets so far all missed), misses only.
    let Some(r) = fast.rw.as_ref() else {
        return misses::<BYPASS, S>(pool, (rx, vrf, src), mac, vteps, cache, (bufs, next, look));
    };
    let (adj, device, hdr, mtu, tx_if) = (fast.adj, fast.next, &r.hdr, r.mtu, r.tx_if);
    let mut pool = pool.view();
    // The packets taken that were not forwarded (VXLAN to us: rare).
    let mut passed = 0;
    let taken = |i: usize, passed: usize| (i, i - passed);
    for (i, (&b, n)) in bufs.iter().zip(next.iter_mut()).enumerate() {
        let Some((m, data)) = pool.meta_data_mut(b) else {
            return taken(i, passed);
        };
        let Some((to, cut, avail, _)) = admit::<BYPASS, S>(m, data, (rx, vrf, src), mac, vteps)
        else {
            return taken(i, passed);
        };
        if to == ip4_input::Fast::Lookup {
            let len = cut.map_or(avail, u32::from);
            if m.gso_size != 0 {
                return taken(i, passed);
            }
            let c = match cache.hit(vrf, data, len) {
                Ok(c) => c,
                // Its flow waits for ip4-session; others' packets after it need not. When
                // most of the frame misses, the rest of it goes on without the cache.
                Err(worker_sessions::Miss::Flow) => {
                    *n = pass_on(m, vrf, cut, to, look);
                    passed += 1;
                    if passed >= GIVE_UP_AFTER && passed * 8 > 7 * (i + 1) {
                        cache.give_up();
                        return taken(i + 1, passed);
                    }
                    continue;
                }
                Err(worker_sessions::Miss::Unknown) => return taken(i, passed),
            };
            let frame = cut.map(|c| c.checked_add(ETH_HDR as u16));
            // `forward` writes nothing when it refuses (a TTL that would expire).
            if c.route(fib) != Some(adj)
                || len > mtu
                || frame == Some(None)
                || !c.forward(hdr, data)
            {
                return taken(i, passed);
            }
            forwarded(m, vrf, frame.flatten(), (adj, tx_if));
            *n = device;
            continue;
        }
        *n = pass_on(m, vrf, cut, to, look);
        passed += 1;
    }
    taken(bufs.len(), passed)
}

/// [`direct_cached`] before the frame has a rewrite: the packets the flow cache sends to
/// `ip4-session` by their flow are passed on, up to the first that is anything else (a hit
/// goes back to the node's loop, which finds its route and rewrite).
#[inline(never)]
fn misses<const BYPASS: bool, S: SourceCheck>(
    pool: &mut buffer::Pool,
    (rx, vrf, src): (u32, u32, S),
    mac: u64,
    vteps: &[(u32, wire::Ipv4Addr)],
    cache: worker_sessions::Frame<'_>,
    (bufs, next, look): (&[u32], &mut [u16], Next),
) -> (usize, usize) {
    let mut pool = pool.view();
    for (i, (&b, n)) in bufs.iter().zip(next.iter_mut()).enumerate() {
        let Some((m, data)) = pool.meta_data_mut(b) else {
            return (i, 0);
        };
        let Some((to, cut, avail, _)) = admit::<BYPASS, S>(m, data, (rx, vrf, src), mac, vteps)
        else {
            return (i, 0);
        };
        let len = cut.map_or(avail, u32::from);
        if to != ip4_input::Fast::Lookup
            || m.gso_size != 0
            || cache.hit(vrf, data, len).err() != Some(worker_sessions::Miss::Flow)
        {
            return (i, 0);
        }
        *n = pass_on(m, vrf, cut, to, look);
        if i + 1 >= GIVE_UP_AFTER {
            cache.give_up();
            return (i + 1, 0);
        }
    }
    (bufs.len(), 0)
}

/// The direct loops' checks of a packet (`m`, its frame `data`): one buffer, received on
/// `rx`, untraced and not our own, IPv4 to `mac` that passes the IPv4 checks of
/// `ip4_input::fast` in VRF `vrf` with sources `src`. Where it goes, the length to cut it to
/// (padding), its length from the IPv4 header on, and its bytes from there; `None`, nothing
/// changed, for the node's loop. Every check comes first, so that a packet given back is
/// untouched.
#[inline(always)]
fn admit<'d, const BYPASS: bool, S: SourceCheck>(
    m: &buffer::Meta,
    data: &'d [u8],
    (rx, vrf, src): (u32, u32, S),
    mac: u64,
    vteps: &[(u32, wire::Ipv4Addr)],
) -> Option<(ip4_input::Fast, Option<u16>, u32, &'d [u8])> {
    let skip = crate::LOCALLY_ORIGINATED | graph::BUFFER_TRACED;
    if m.rx_if != rx || m.flags & skip != 0 || m.next != buffer::NONE {
        return None;
    }
    let (eth, ip) = data.split_first_chunk::<ETH_HDR>()?;
    let e = Ethernet::new_unchecked(eth);
    if e.ethertype_raw() != EtherType::Ipv4.to_raw() || mac_key(&e.dst_bytes()) != mac {
        return None;
    }
    let avail = m.total_len.saturating_sub(ETH_HDR as u32);
    let (to, cut) = ip4_input::fast_at::<BYPASS>(avail, vrf, ip, vteps, src)?;
    Some((to, cut, avail, ip))
}

/// A packet a direct loop forwarded through adjacency `adj` to interface `tx_if`, its frame
/// cut to `frame` bytes if it had padding (its Ethernet header was rewritten in place: the
/// packet is never advanced past it).
#[inline(always)]
fn forwarded(m: &mut buffer::Meta, vrf: u32, frame: Option<u16>, (adj, tx_if): (u32, u32)) {
    m.vrf = vrf;
    if let Some(total) = frame {
        m.truncate(total);
    }
    m.adj = adj;
    m.tx_if = tx_if;
}

/// A packet a direct loop took without forwarding it: past its Ethernet header, its padding
/// cut, on to `look` (or `vxlan4-input`).
#[inline(always)]
fn pass_on(
    m: &mut buffer::Meta,
    vrf: u32,
    cut: Option<u16>,
    to: ip4_input::Fast,
    look: Next,
) -> u16 {
    m.vrf = vrf;
    m.skip(ETH_HDR as u16);
    if let Some(total) = cut {
        m.truncate(total);
    }
    match to {
        ip4_input::Fast::Lookup => look,
        ip4_input::Fast::Vxlan => Next::Vxlan,
    }
    .into()
}

/// What the direct loop forwards with: the VRF's table, the frame's last adjacency, the flow
/// cache for a VRF that keeps sessions, and the table's version.
type Fused<'a> = (
    fib::LpmView<'a>,
    &'a Fast,
    Option<worker_sessions::Frame<'a>>,
    u64,
);

/// [`direct`] in the variant the frame needs: with `BYPASS` if a tunnel ends in the
/// receiving interface's VRF (`tunnels`), with `FUSE` if there is a rewrite to forward with
/// (`fwd`), [`direct_cached`] if that is by the flow cache, and checking sources with `S` (no
/// code at all for an interface without them). How many packets it took, and how many of
/// them the flow cache forwarded.
#[inline(always)]
pub(super) fn direct_any<S: SourceCheck>(
    pool: &mut buffer::Pool,
    rx: (u32, u32, S),
    mac: u64,
    vteps: &[(u32, wire::Ipv4Addr)],
    fwd: Option<Fused<'_>>,
    tunnels: bool,
    on: (&[u32], &mut [u16], Next),
) -> (usize, usize) {
    let plain = |taken| (taken, 0);
    match (fwd, tunnels) {
        (Some((_, f, Some(c), v)), true) => {
            direct_cached::<true, S>(pool, rx, mac, vteps, (f, c, v), on)
        }
        (Some((_, f, Some(c), v)), false) => {
            direct_cached::<false, S>(pool, rx, mac, &[], (f, c, v), on)
        }
        (Some((t, f, None, _)), true) => plain(direct::<true, true, S>(
            pool,
            rx,
            mac,
            vteps,
            Some((t, f)),
            on,
        )),
        (Some((t, f, None, _)), false) => plain(direct::<false, true, S>(
            pool,
            rx,
            mac,
            &[],
            Some((t, f)),
            on,
        )),
        (None, true) => plain(direct::<true, false, S>(pool, rx, mac, vteps, None, on)),
        (None, false) => plain(direct::<false, false, S>(pool, rx, mac, &[], None, on)),
    }
}

/// A MAC address as one integer (its six bytes in the host's order), so that the fast path
/// compares a frame's destination with one comparison of a value held in a register.
#[inline(always)]
pub(super) fn mac_key(m: &[u8; 6]) -> u64 {
    u64::from(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]))
        | u64::from(u16::from_ne_bytes([m[4], m[5]])) << 32
}
