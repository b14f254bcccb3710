//! `ip4-session`: services (DNAT to a backend, and back) on the sessions of a network.
//!
//! Packets of a VRF that has services come here from `ip4-lookup` before they are looked up
//! (and go back to it, marked [`SESSION_DONE`]). A packet of a known session is rewritten as
//! its direction says: a client's packet to the backend chosen when the session began, a
//! backend's reply back to the service's VIP and port, with both checksums updated from the
//! session's cached deltas. A packet that starts a flow to a service's VIP, port and
//! protocol gets a backend (Maglev over the service's usable backends, by the flow's hash)
//! and a session for both directions; any other packet goes on untouched and keeps no state.
//!
//! A session whose backend was removed is killed by the control thread. Its owner frees it
//! at its next packet, which then starts a session of its own like any packet of an unknown
//! flow; a packet that meets it on another worker is dropped until the owner has freed it
//! (its next packet or its sweep). So a UDP flow moves to a live backend, and a TCP
//! connection's next segment reaches a live backend whose stack knows no such connection
//! and resets it: the client learns at once, without veclane forging a reset. (Maglev sends
//! a flow the same way while the backends stay the same, so connections also outlive a
//! restart of the daemon.) Non-first fragments carry no ports and cannot
//! be matched: those addressed to a service are dropped and counted; TCP and UDP only.

use graph::{Ctx, Node};
use session::{Dir, Fields, Key, Lookup, NewSession, Owner, Translation};
use wire::ipv4::MIN_HEADER_LEN;
use wire::{Ipv4, Tcp, Udp};

use crate::Shared;
use crate::services::{Services, Sessions, VipKey};

/// Buffer flag: `ip4-session` has seen the packet; `ip4-lookup` looks it up instead of
/// sending it here again.
pub const SESSION_DONE: u16 = 1 << 2;

/// How many session ids a worker's sweep looks at per frame, at least and at most.
const SWEEP_MIN: u32 = 64;
const SWEEP_MAX: u32 = 4096;

#[derive(Debug)]
pub struct Ip4Session {
    services:
        arc_swap::Cache<std::sync::Arc<arc_swap::ArcSwap<Services>>, std::sync::Arc<Services>>,
    sessions: std::sync::Arc<Sessions>,
    /// This worker's share of the table, and where its counters are copied for `show`;
    /// `None` on a graph built past the table's workers (it then creates no session).
    owner: Option<(Owner, std::sync::Arc<crate::services::OwnerStats>)>,
    /// The seed of the flow hash that picks backends.
    seed: u64,
    /// When the owner last swept (the sessions' clock).
    swept_at: u32,
}

impl Ip4Session {
    pub fn new(shared: &Shared) -> Ip4Session {
        Ip4Session {
            services: arc_swap::Cache::new(shared.services.clone()),
            sessions: shared.sessions.clone(),
            owner: shared.sessions.take_owner(),
            seed: 0x9e37_79b9_7f4a_7c15,
            swept_at: shared.sessions.now(),
        }
    }
}

graph::node! {
    Ip4Session: "ip4-session", Internal;
    next Next {
        Lookup = "ip4-lookup",
        Drop = "error-drop",
    }
    error Error {
        Created = "session created for a service (not an error)",
        Killed = "session of a removed backend",
        NoBackend = "service has no usable backend",
        Full = "session table full",
        NoOwner = "no session owner on this worker",
        Fragment = "fragment to a service (no ports to match)",
        Short = "l4 header not in the first buffer",
    }
    trace SessionTrace { dir: u16, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16 }
}

impl core::fmt::Display for SessionTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let dir = match self.dir {
            0 => "no session",
            1 => "forward, rewritten to",
            _ => "reverse, rewritten to",
        };
        let (s, d) = (
            wire::Ipv4Addr::from(self.src),
            wire::Ipv4Addr::from(self.dst),
        );
        write!(f, "{dir} {s}:{} -> {d}:{}", self.sport, self.dport)
    }
}

/// A packet's flow as the session table keys it, and where its L4 header is.
struct Flow {
    key: Key,
    /// TCP flags (0 for UDP).
    tcp_flags: u8,
}

/// The flow of the IPv4 packet `ip` (its header checked by ip4-input) in VRF `vrf`, if it is
/// TCP or UDP with its ports in this buffer; `Err` with the reason for a packet that is to a
/// service but cannot be matched is decided by the caller.
fn flow_of(vrf: u32, ip: &[u8]) -> Result<Option<Flow>, Error> {
    let Some(h) = ip.first_chunk::<MIN_HEADER_LEN>() else {
        return Err(Error::Short);
    };
    let v = Ipv4::new_unchecked(h);
    let proto = v.protocol_raw();
    if proto != session::PROTO_TCP && proto != session::PROTO_UDP {
        return Ok(None);
    }
    let l4 = &ip[MIN_HEADER_LEN..];
    let key = |sport, dport| {
        Key::new(
            vrf as u16,
            proto,
            u32::from(v.src_addr()),
            u32::from(v.dst_addr()),
            sport,
            dport,
        )
    };
    if v.frag_offset() != 0 {
        return Err(Error::Fragment);
    }
    if proto == session::PROTO_TCP {
        let Some(t) = l4.first_chunk::<{ wire::tcp::MIN_HEADER_LEN }>() else {
            return Err(Error::Short);
        };
        let t = Tcp::new_unchecked(t);
        Ok(Some(Flow {
            key: key(t.src_port(), t.dst_port()),
            tcp_flags: t.flags(),
        }))
    } else {
        let Some(u) = l4.first_chunk::<{ wire::udp::HEADER_LEN }>() else {
            return Err(Error::Short);
        };
        let u = Udp::new_unchecked(u);
        Ok(Some(Flow {
            key: key(u.src_port(), u.dst_port()),
            tcp_flags: 0,
        }))
    }
}

/// Rewrites the packet `ip` to leave with (src, dst, sport, dport), its checksums updated by
/// `deltas` (the IPv4 header's and the L4 checksum's).
fn rewrite(ip: &mut [u8], (src, dst, sport, dport): (u32, u32, u16, u16), d: session::Deltas) {
    let (h, l4) = ip.split_at_mut(MIN_HEADER_LEN);
    let mut v = Ipv4::new_unchecked(&mut *h);
    let proto = v.protocol_raw();
    v.set_src_addr(src.into());
    v.set_dst_addr(dst.into());
    let c = d.ip.apply(v.checksum());
    v.set_checksum(c);
    if proto == session::PROTO_TCP {
        let mut t = Tcp::new_unchecked(&mut l4[..wire::tcp::MIN_HEADER_LEN]);
        t.set_src_port(sport);
        t.set_dst_port(dport);
        let c = d.l4.apply(t.checksum());
        t.set_checksum(c);
    } else {
        let mut u = Udp::new_unchecked(&mut l4[..wire::udp::HEADER_LEN]);
        u.set_src_port(sport);
        u.set_dst_port(dport);
        let c = d.l4.apply_udp(u.checksum());
        u.set_checksum(c);
    }
}

impl Node for Ip4Session {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        // Held by count: the node's own methods run with the frame's services.
        let services = std::sync::Arc::clone(self.services.load());
        let services = &*services;
        let sessions = std::sync::Arc::clone(&self.sessions);
        let table = &*sessions.table;
        let now = sessions.now();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Lookup.into();
            let (m, ip) = ctx.pool.meta_data_mut(b);
            m.flags |= SESSION_DONE;
            let (vrf, rx) = (m.vrf, m.rx_if);
            let traced = m.flags & graph::BUFFER_TRACED != 0;
            let flow = match flow_of(vrf, ip) {
                Ok(Some(f)) => f,
                Ok(None) => continue,
                Err(e) => {
                    // Only a packet to a service is lost for it.
                    if to_service(services, vrf, ip) {
                        ctx.count_error(e);
                        *n = Next::Drop.into();
                    }
                    continue;
                }
            };
            let hit = match table.lookup(&flow.key) {
                Lookup::Live(hit) => Some(hit),
                // A session of a removed backend: ours is freed at once and the packet starts
                // afresh (the TCP connection's new backend resets it); another worker's is
                // dropped until that worker frees it.
                Lookup::Killed(hit) => {
                    ctx.count_error(Error::Killed);
                    if !self
                        .owner
                        .as_mut()
                        .is_some_and(|(o, _)| o.remove(hit.handle))
                    {
                        *n = Next::Drop.into();
                        continue;
                    }
                    None
                }
                Lookup::Miss => None,
            };
            let (dir, out, deltas) = match hit {
                Some(hit) => {
                    table.observe(hit.handle, hit.dir, flow.tcp_flags, now);
                    let s = &hit.session;
                    (hit.dir, s.rewrite(hit.dir), s.deltas(hit.dir))
                }
                None => match self.start(services, &flow, vrf, rx, now) {
                    Ok(Some(s)) => {
                        ctx.count_error(Error::Created);
                        (
                            Dir::Forward,
                            s.rewrite(Dir::Forward),
                            s.deltas(Dir::Forward),
                        )
                    }
                    Ok(None) => {
                        if traced {
                            let k = &flow.key;
                            trace(ctx, b, 0, (k.src, k.dst, k.sport, k.dport));
                        }
                        continue;
                    }
                    Err(e) => {
                        ctx.count_error(e);
                        *n = Next::Drop.into();
                        continue;
                    }
                },
            };
            let ip = ctx.pool.data_mut(b);
            rewrite(ip, out, deltas);
            if traced {
                let d = if dir == Dir::Forward { 1 } else { 2 };
                trace(ctx, b, d, out);
            }
        }
        if let Some((o, stats)) = self.owner.as_mut() {
            // Every id about once a second, however often frames come (at least a little
            // each frame; a worker that was idle catches up over its next frames).
            let elapsed = now.wrapping_sub(self.swept_at).min(1000);
            let budget = (u64::from(o.ids().len() as u32) * u64::from(elapsed) / 1000) as u32;
            let budget = budget.clamp(SWEEP_MIN, SWEEP_MAX);
            o.sweep(now, budget);
            self.swept_at = now;
            stats.store(&o.counters());
        }
    }
}

impl Drop for Ip4Session {
    /// The owner outlives the graph: the next graph built on these sessions takes it.
    fn drop(&mut self) {
        if let Some((o, stats)) = self.owner.take() {
            self.sessions.give_back(o, stats);
        }
    }
}

impl Ip4Session {
    /// A session for the first packet of `flow` (received on `rx`) if it is to a service:
    /// its backend chosen, both keys in the table. `Ok(None)` when it is to no service.
    fn start(
        &mut self,
        services: &Services,
        flow: &Flow,
        vrf: u32,
        rx: u32,
        now: u32,
    ) -> Result<Option<session::Session>, Error> {
        let k = &flow.key;
        let vip = VipKey {
            vrf,
            proto: k.proto,
            vip: k.dst,
            port: k.dport,
        };
        let Some(svc) = services.vips.get(&vip) else {
            return Ok(None);
        };
        let be = svc
            .pick(k.hash_with(self.seed, Fields::ALL))
            .ok_or(Error::NoBackend)?;
        let (owner, _) = self.owner.as_mut().ok_or(Error::NoOwner)?;
        let new = NewSession {
            xlate: Translation {
                dst: be.addr,
                dport: be.port,
                ..Translation::identity(k)
            },
            service: svc.id,
            backend: be.id,
            owner_if: rx,
            ..NewSession::plain(*k)
        };
        let h = owner.create(&new, now).map_err(|_| Error::Full)?;
        let table = &self.sessions.table;
        table.observe(h, Dir::Forward, flow.tcp_flags, now);
        Ok(table.session(h))
    }
}

/// Whether `ip` is addressed to a service of VRF `vrf` (by address alone: a fragment has no
/// port to say which).
fn to_service(services: &Services, vrf: u32, ip: &[u8]) -> bool {
    let Some(h) = ip.first_chunk::<MIN_HEADER_LEN>() else {
        return false;
    };
    let dst = u32::from(Ipv4::new_unchecked(h).dst_addr());
    services.addrs.contains(&(vrf, dst))
}

#[cold]
fn trace(ctx: &mut Ctx<'_, Ip4Session>, b: u32, dir: u16, (s, d, sp, dp): (u32, u32, u16, u16)) {
    ctx.trace(
        b,
        SessionTrace {
            dir,
            src: s.to_be_bytes(),
            dst: d.to_be_bytes(),
            sport: sp,
            dport: dp,
        },
    );
}
