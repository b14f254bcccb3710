//! `ip4-session`: services (DNAT to a backend, and back) on the sessions of a network.
//!
//! Packets of a VRF that keeps sessions come here before they are looked up: from
//! `ethernet-input` once checked, or from `ip4-lookup` (from elsewhere).
//! A packet that is to be forwarded through a rewrite adjacency (an interface that is up,
//! within its MTU, a TTL above one) is looked up and rewritten here, as `ip4-lookup`'s fast
//! path would, and goes straight to its device node; the rest go back to `ip4-lookup`,
//! marked [`SESSION_DONE`]. A packet of a known session is rewritten as
//! its direction says: a client's packet to the backend chosen when the session began, a
//! backend's reply back to the service's VIP and port, with both checksums updated from the
//! session's cached deltas. A packet that starts a flow to a service's VIP, port and
//! protocol gets a backend (Maglev over the service's usable backends, by the flow's hash)
//! and a session for both directions; any other packet goes on untouched and keeps no state.
//! SCTP's checksum, a CRC32c of the whole packet, is computed again after a translation
//! ([`crate::sctp`]): it cannot be updated from deltas.
//! A packet of an established flow forwarded here leaves a copy of its session in the
//! worker's flow cache ([`crate::worker_sessions`]): `ethernet-input` forwards the flow's next
//! packets from it, and they come here again only when something changes.
//!
//! A session whose backend was removed is killed by the control thread. Its owner frees it
//! at its next packet, which then starts a session of its own like any packet of an unknown
//! flow; a packet that meets it on another worker is dropped until the owner has freed it
//! (its next packet or its sweep). So a UDP flow moves to a live backend, and a TCP
//! connection's next segment reaches a live backend whose stack knows no such connection
//! and resets it: the client learns at once, without veclane forging a reset. (Maglev sends
//! a flow the same way while the backends stay the same, so connections also outlive a
//! restart of the daemon.) Non-first fragments carry no ports and cannot
//! be matched: those addressed to a service are dropped and counted; TCP, UDP and SCTP
//! only.
//!
//! Network policy is judged here too ([`crate::policies`]): a flow whose ends on this node
//! have policies gets a session (TCP from its SYN; UDP, ICMP echo and anything else from
//! its first packet) holding the verdict, so its replies pass and a denied flow's packets are
//! dropped at the cost of a lookup; a TCP segment of no session is judged alone and keeps
//! none (a connection older than the policies must not turn into its reply's session).
//! Sessions are judged again at their next packet after the policies change.

use graph::{Ctx, Node};
use session::{Deltas, Dir, Established, Fields, Key, NewSession, Seen, Translation, Verdict};
use wire::ipv4::MIN_HEADER_LEN;
use wire::{Ipv4, Tcp, Udp};

use crate::ip4_rewrite::{Fast, forward};
use crate::policies::{Denied, Judge, Judged, Policies};
use crate::services::{Services, Sessions, VipKey};
use crate::session_icmp::{self, Outcome};
use crate::worker_sessions::{Local, WorkerSessions};
use crate::{ETH_HDR, Shared};

/// Buffer flag: `ip4-session` has seen the packet; `ip4-lookup` looks it up instead of
/// sending it here again.
pub const SESSION_DONE: u16 = 1 << 2;

/// How many other source ports a hairpinned flow tries when its own is taken.
const HAIRPIN_TRIES: u16 = 8;

/// The `i`th other source port for a hairpinned flow from `sport` (1024 and up).
fn hairpin_port(sport: u16, i: u16) -> u16 {
    1024 + (u32::from(sport).wrapping_add(u32::from(i) * 7919) % 64512) as u16
}

/// A table the control thread publishes, as this node last took it.
type Cached<T> = arc_swap::Cache<std::sync::Arc<arc_swap::ArcSwap<T>>, std::sync::Arc<T>>;

#[derive(Debug)]
pub struct Ip4Session {
    services: Cached<Services>,
    policies: Cached<Policies>,
    vrfs: Cached<Vec<fib::LpmReader>>,
    adjacencies: fib::adj::AdjCache,
    interfaces: Cached<Vec<crate::IfConfig>>,
    denied: crate::policies::DenySink,
    sessions: std::sync::Arc<Sessions>,
    /// The worker's owner of its share of the table and its flow cache, which it shares
    /// with its `ethernet-input`.
    local: WorkerSessions,
    /// The seed of the flow hash that picks backends.
    seed: u64,
}

impl Ip4Session {
    /// The node of a worker whose part of the sessions is `local`.
    pub fn new(shared: &Shared, local: WorkerSessions) -> Ip4Session {
        Ip4Session {
            services: arc_swap::Cache::new(shared.services.clone()),
            policies: arc_swap::Cache::new(shared.policies.clone()),
            vrfs: arc_swap::Cache::new(shared.vrfs.clone()),
            adjacencies: shared.adjacencies.cache(),
            interfaces: arc_swap::Cache::new(shared.interfaces.clone()),
            denied: shared.denied.clone(),
            sessions: shared.sessions.clone(),
            local,
            seed: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

graph::node! {
    Ip4Session: "ip4-session", Internal;
    next Next {
        Lookup = "ip4-lookup",
        Drop = "error-drop",
        Vxlan = "vxlan4-encap",
    } + devices
    error Error {
        Created = "session created for a service (not an error)",
        Killed = "session of a removed backend",
        NoBackend = "service has no usable backend",
        Full = "session table full",
        NoOwner = "no session owner on this worker",
        Fragment = "fragment to a service (no ports to match)",
        Short = "l4 header not in the first buffer",
        Denied = "new flow denied by policy",
        DeniedLater = "established flow denied by a policy change",
        DeniedSession = "packet of a denied flow",
        DenyLog = "deny log queue full (flow not logged)",
        SctpShort = "SCTP packet shorter than its IPv4 length",
        Copied = "session copied into the flow cache (not an error)",
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

/// A packet's flow as the session table keys it.
struct Flow {
    key: Key,
    /// TCP flags (0 for other protocols).
    tcp_flags: u8,
    /// Ports at the start of its L4 header that a service translates (TCP, UDP).
    translatable: bool,
}

/// The flow of the IPv4 packet `ip` (its header checked by ip4-input) in VRF `vrf`: TCP, UDP
/// and SCTP by their ports, ICMP echo by its identifier (in both port fields, so that the
/// reply's key is the request's reversed), anything else by its addresses alone. A
/// non-first fragment has no ports to read (`Err(Fragment)`, if it is TCP or UDP), and
/// neither has a first buffer that ends inside the L4 header (`Err(Short)`).
fn flow_of(vrf: u32, ip: &[u8]) -> Result<Flow, Error> {
    let Some(h) = ip.first_chunk::<MIN_HEADER_LEN>() else {
        return Err(Error::Short);
    };
    let v = Ipv4::new_unchecked(h);
    let proto = v.protocol_raw();
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
    let ports = matches!(
        proto,
        session::PROTO_TCP | session::PROTO_UDP | session::PROTO_SCTP | session::PROTO_ICMP
    );
    if ports && v.frag_offset() != 0 {
        return Err(Error::Fragment);
    }
    match proto {
        session::PROTO_TCP => {
            let t = l4
                .first_chunk::<{ wire::tcp::MIN_HEADER_LEN }>()
                .ok_or(Error::Short)?;
            let t = Tcp::new_unchecked(t);
            Ok(Flow {
                key: key(t.src_port(), t.dst_port()),
                tcp_flags: t.flags(),
                translatable: true,
            })
        }
        // SCTP's common header begins with its ports as UDP's does.
        session::PROTO_UDP | session::PROTO_SCTP => {
            let u = l4
                .first_chunk::<{ wire::udp::HEADER_LEN }>()
                .ok_or(Error::Short)?;
            let u = Udp::new_unchecked(u);
            Ok(Flow {
                key: key(u.src_port(), u.dst_port()),
                tcp_flags: 0,
                translatable: true,
            })
        }
        session::PROTO_ICMP => {
            let i = l4.first_chunk::<8>().ok_or(Error::Short)?;
            let echo = matches!(i[0], ICMP_ECHO_REQUEST | ICMP_ECHO_REPLY);
            let id = if echo {
                u16::from_be_bytes([i[4], i[5]])
            } else {
                0
            };
            Ok(Flow {
                key: key(id, id),
                tcp_flags: 0,
                translatable: false,
            })
        }
        _ => Ok(Flow {
            key: key(0, 0),
            tcp_flags: 0,
            translatable: false,
        }),
    }
}

const ICMP_ECHO_REQUEST: u8 = 8;
const ICMP_ECHO_REPLY: u8 = 0;

/// Rewrites the packet `ip` (TCP, UDP or SCTP without IPv4 options, its L4 header whole in
/// the buffer, as both paths checked) to leave with `addrs` and `ports` (the source in each
/// high half, as the headers read big-endian), the IPv4 and TCP or UDP checksums updated by
/// `d` (SCTP's is left for [`crate::sctp::fill_checksum`]). A TCP super-frame's checksum
/// (`partial`) takes the addresses' change alone.
#[inline(always)]
fn rewrite(ip: &mut [u8], (addrs, ports): (u64, u32), d: Deltas, partial: bool) {
    let tcp = ip.get(9) == Some(&session::PROTO_TCP);
    let sctp = ip.get(9) == Some(&session::PROTO_SCTP);
    let Some(h) = ip.first_chunk_mut::<{ MIN_HEADER_LEN + wire::udp::HEADER_LEN }>() else {
        return;
    };
    let check = |h: &[u8], at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let c = d.ip.apply(check(h, 10));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h[12..20].copy_from_slice(&addrs.to_be_bytes());
    h[20..24].copy_from_slice(&ports.to_be_bytes());
    if sctp {
        // Its checksum is computed again over the whole packet.
    } else if !tcp {
        let c = d.l4.apply_udp(check(h, 26));
        h[26..28].copy_from_slice(&c.to_be_bytes());
    } else if let Some(t) = ip.first_chunk_mut::<{ MIN_HEADER_LEN + wire::tcp::MIN_HEADER_LEN }>() {
        // The TCP checksum, 16 into its header.
        let c = check(t, 36);
        let c = if partial {
            d.ip.apply_partial(c)
        } else {
            d.l4.apply(c)
        };
        t[36..38].copy_from_slice(&c.to_be_bytes());
    }
}

/// What [`rewrite`] takes of the general path's session `s`: its direction's addresses and
/// ports, packed as the headers hold them.
fn packed(s: &Established) -> (u64, u32) {
    let (src, dst, sport, dport) = s.rewrite(s.dir);
    (
        u64::from(src) << 32 | u64::from(dst),
        u32::from(sport) << 16 | u32::from(dport),
    )
}

/// ip4-lookup's fast path, taken here for the packets this node let through: the frame's
/// tables and the previous packet's VRF, table and adjacency.
struct Forwarder<'a> {
    vrfs: &'a [fib::LpmReader],
    adjs: &'a [fib::adj::Adjacency],
    ifs: &'a [crate::IfConfig],
    vrf: u32,
    table: Option<&'a fib::LpmReader>,
    /// The table's version when it was taken (before any lookup in it).
    version: u64,
    fast: Fast,
}

impl Forwarder<'_> {
    /// Looks up and rewrites a packet to be forwarded through a rewrite adjacency, as
    /// ip4-lookup's fast path would (`f` its head buffer from the room for its Ethernet
    /// header on): its device node, or `None`, nothing changed, when `ip4-lookup` must take
    /// it (our own packet, a super-frame, no route, not a rewrite, over the MTU, a TTL that
    /// expires).
    #[inline(always)]
    fn forward(&mut self, m: &mut buffer::Meta, f: &mut [u8]) -> Option<u16> {
        if m.flags & crate::LOCALLY_ORIGINATED != 0 || m.gso_size != 0 {
            return None;
        }
        let ip = f.get(ETH_HDR..)?.first_chunk::<MIN_HEADER_LEN>()?;
        let dst = Ipv4::new_unchecked(ip).dst_addr();
        if m.vrf != self.vrf {
            (self.vrf, self.table) = (m.vrf, self.vrfs.get(m.vrf as usize));
            self.version = self.table.map_or(0, |t| t.version());
        }
        let adj = self.table?.lookup(dst)?;
        if adj != self.fast.adj {
            self.fast = Fast::of(self.adjs, self.ifs, adj, |out| out.next(Next::Vxlan));
        }
        let r = self.fast.rw.as_ref()?;
        if m.total_len > r.mtu || !forward(&r.hdr, f) {
            return None;
        }
        m.adj = adj;
        m.expose(ETH_HDR as u16);
        m.tx_if = r.tx_if;
        Some(self.fast.next)
    }
}

/// What the established-flow fast path ([`Ip4Session::quick`]) made of a packet.
enum Quick {
    /// Handled: the packet's next node.
    Done(u16),
    /// For the general path, with the packet's flow and what its lookup found if the fast
    /// path got that far.
    Slow(Option<(Flow, Seen)>),
}

/// What the node does with one packet.
enum Act {
    /// Goes on to `ip4-lookup`, rewritten for the matched direction of a translated session.
    Pass(Option<Established>),
    Drop(Error),
}

/// A frame's view of the node's tables.
struct Frame<'a> {
    services: &'a Services,
    judge: Judge<'a>,
    table: &'a session::Table,
    now: u32,
}

impl Node for Ip4Session {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        // Held by count for the frame: the node's own state is borrowed mutably below.
        let services = std::sync::Arc::clone(self.services.load());
        let policies = std::sync::Arc::clone(self.policies.load());
        let vrfs = std::sync::Arc::clone(self.vrfs.load());
        let adjs = std::sync::Arc::clone(self.adjacencies.load());
        let ifs = std::sync::Arc::clone(self.interfaces.load());
        let mut fwd = Forwarder {
            vrfs: &vrfs,
            adjs: &adjs,
            ifs: &ifs,
            vrf: buffer::NONE,
            table: None,
            version: 0,
            fast: Fast::NONE,
        };
        let sessions = std::sync::Arc::clone(&self.sessions);
        let local = self.local.clone();
        let mut w = local.lock();
        let f = Frame {
            services: &services,
            judge: Judge {
                policies: &policies,
                vrfs: &vrfs,
                adjs: &adjs,
            },
            table: &sessions.table,
            now: sessions.now(),
        };
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let looked_up = match self.quick(ctx, &f, &mut fwd, &mut w, b) {
                Quick::Done(to) => {
                    *n = to;
                    continue;
                }
                Quick::Slow(looked_up) => looked_up,
            };
            *n = Next::Lookup.into();
            let (m, ip) = ctx.pool.meta_data_mut(b);
            m.flags |= SESSION_DONE;
            let (vrf, rx) = (m.vrf, m.rx_if);
            let traced = m.flags & graph::BUFFER_TRACED != 0;
            let ours = m.flags & crate::LOCALLY_ORIGINATED != 0;
            // An ICMP error about a session's packet is translated and passes as it does;
            // our own packets (the errors we make) are judged by no policy.
            let icmp = ip.get(9) == Some(&session::PROTO_ICMP);
            // (An error goes on in the VRF of the side it goes to.)
            let mut icmp_to = vrf;
            let translated = match icmp.then(|| session_icmp::translate(f.table, vrf, ip)) {
                Some(Outcome::Translated { vrf: to }) => {
                    icmp_to = to;
                    true
                }
                _ => false,
            };
            // (A packet the fast path looked up is TCP or UDP, and not ours.)
            let act = if translated || ours {
                Act::Pass(None)
            } else {
                let flow = looked_up.map(Ok).unwrap_or_else(|| {
                    let flow = flow_of(vrf, ip)?;
                    let seen = f.table.established(&flow.key, flow.tcp_flags, f.now);
                    Ok((flow, seen))
                });
                match flow {
                    Ok((flow, seen)) => self.act(ctx, &f, &mut w, &flow, seen, rx),
                    // Only a packet to a service is lost for it.
                    Err(e) if to_service(&services, vrf, ip) => Act::Drop(e),
                    Err(_) => Act::Pass(None),
                }
            };
            match act {
                Act::Drop(e) => {
                    ctx.count_error(e);
                    *n = Next::Drop.into();
                }
                Act::Pass(translated) => {
                    if let Some(s) = translated {
                        let (m, ip) = ctx.pool.meta_data_mut(b);
                        let sctp = ip.get(9) == Some(&session::PROTO_SCTP);
                        rewrite(ip, packed(&s), s.deltas(), m.gso_size != 0);
                        if sctp && !crate::sctp::fill_checksum(ctx.pool, b) {
                            ctx.count_error(Error::SctpShort);
                            *n = Next::Drop.into();
                            continue;
                        }
                        let m = ctx.pool.meta_mut(b);
                        // Routed where it goes: another VRF for an external flow.
                        m.vrf = s.vrf_out();
                        if traced {
                            let d = if s.dir == Dir::Forward { 1 } else { 2 };
                            trace(ctx, b, d, s.rewrite(s.dir));
                        }
                    } else if icmp_to != vrf {
                        ctx.pool.meta_mut(b).vrf = icmp_to;
                    }
                    if !traced
                        && let Some((m, f)) = ctx.pool.meta_data_front_mut(b, ETH_HDR)
                        && let Some(device) = fwd.forward(m, f)
                    {
                        *n = device;
                    }
                }
            }
        }
        w.sweep(f.now);
    }
}

impl Ip4Session {
    /// The fast path of nearly every packet: TCP or UDP, not traced, not ours, not a
    /// fragment, of a live session whose verdict is current. Its key is read straight off
    /// the headers into the table's packed form, the session looked up and observed, the
    /// packet rewritten and forwarded as [`Ip4Session::process`]'s general path would; any
    /// other packet goes to that path, with its lookup if one was made. A packet forwarded
    /// here leaves a copy of its session in the worker's flow cache, for `ethernet-input` to
    /// forward the flow's next packets by.
    #[inline(always)]
    fn quick(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        f: &Frame<'_>,
        fwd: &mut Forwarder<'_>,
        w: &mut Local,
        b: u32,
    ) -> Quick {
        let Some((m, fr)) = ctx.pool.meta_data_front_mut(b, ETH_HDR) else {
            return Quick::Slow(None);
        };
        let ip = &fr[ETH_HDR..];
        let Some(h) = ip.first_chunk::<{ MIN_HEADER_LEN + wire::udp::HEADER_LEN }>() else {
            return Quick::Slow(None);
        };
        let proto = h[9];
        let tcp_flags = match proto {
            session::PROTO_UDP => 0,
            // The flags byte, 13 into the TCP header.
            session::PROTO_TCP if ip.len() >= MIN_HEADER_LEN + wire::tcp::MIN_HEADER_LEN => {
                ip[MIN_HEADER_LEN + 13]
            }
            _ => return Quick::Slow(None),
        };
        let v = Ipv4::new_unchecked(h.first_chunk::<MIN_HEADER_LEN>().expect("28 bytes"));
        if m.flags & (graph::BUFFER_TRACED | crate::LOCALLY_ORIGINATED) != 0
            || v.version_ihl() != wire::ipv4::VER_IHL_NO_OPTIONS
            || v.frag_offset() != 0
        {
            return Quick::Slow(None);
        }
        // Key::words: the addresses, then the VRF, protocol and ports.
        let addrs = u64::from_be_bytes(*h[12..].first_chunk::<8>().expect("28 bytes"));
        let ports = u32::from_be_bytes(*h[20..].first_chunk::<4>().expect("28 bytes"));
        let words = [
            addrs,
            u64::from(m.vrf as u16) << 48 | u64::from(proto) << 32 | u64::from(ports),
        ];
        let Some(s) = f.table.forwarding(words, tcp_flags, f.now) else {
            let flow = Flow {
                key: Key::from_words(words),
                tcp_flags,
                translatable: true,
            };
            return Quick::Slow(Some((flow, Seen::Miss)));
        };
        // Killed, or judged under older policies: the general path looks it up again.
        match s.verdict(f.judge.policies.epoch) {
            _ if s.killed() => return Quick::Slow(None),
            Some(Verdict::Allow) => {}
            Some(Verdict::Deny) => {
                ctx.count_error(Error::DeniedSession);
                return Quick::Done(Next::Drop.into());
            }
            None => return Quick::Slow(None),
        }
        m.flags |= SESSION_DONE;
        // The headers as received, for the flow cache's key.
        let head = *h.first_chunk().expect("28 bytes");
        let vrf = m.vrf;
        if s.translated {
            rewrite(
                &mut fr[ETH_HDR..],
                (s.addrs, s.ports),
                s.deltas,
                m.gso_size != 0,
            );
            m.vrf = s.vrf;
        }
        match fwd.forward(m, fr) {
            Some(device) => {
                let (route, epoch) = ((m.adj, fwd.version), f.judge.policies.epoch);
                if w.cache.put((vrf, &head, tcp_flags), &s, route, epoch) {
                    ctx.count_error(Error::Copied);
                }
                Quick::Done(device)
            }
            None => Quick::Done(Next::Lookup.into()),
        }
    }

    /// What to do with a packet of `flow` received on `rx`, its session as the lookup found it
    /// (`seen`, the packet observed in it).
    fn act(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        f: &Frame<'_>,
        w: &mut Local,
        flow: &Flow,
        seen: Seen,
        rx: u32,
    ) -> Act {
        let epoch = f.judge.policies.epoch;
        let hit = match seen {
            Seen::Live(hit) => Some(hit),
            // A session of a removed backend: ours is freed at once and the packet starts
            // afresh (the TCP connection's new backend resets it); another worker's is
            // dropped until that worker frees it.
            Seen::Killed(handle) => {
                ctx.count_error(Error::Killed);
                if !w.owner().is_some_and(|o| o.remove(handle)) {
                    return Act::Drop(Error::Killed);
                }
                None
            }
            Seen::Miss => None,
        };
        if let Some(s) = hit {
            let verdict = match s.verdict(epoch) {
                Some(v) => v,
                // Made under older policies: judged again, as the flow's client sent it.
                None => {
                    let (src, dst, sport, dport) = s.rewrite(Dir::Forward);
                    let key = s.key();
                    let judged = Judged {
                        rx: s.owner_if(),
                        vrf: s.vrf_after(Dir::Forward),
                        proto: key.proto,
                        src,
                        dst,
                        sport,
                        dport,
                    };
                    let v = f.judge.verdict(&judged);
                    let verdict = v.map_or(session::Verdict::Allow, |(v, _)| v);
                    f.table.set_verdict(s.handle, epoch, verdict);
                    if let Some((_, Some(by))) = v {
                        self.report(ctx, &judged, by, true);
                        return Act::Drop(Error::DeniedLater);
                    }
                    verdict
                }
            };
            if verdict == session::Verdict::Deny {
                return Act::Drop(Error::DeniedSession);
            }
            return Act::Pass(s.translated().then_some(s));
        }
        self.start(ctx, f, w, flow, rx)
    }

    /// The first packet of a flow (or one of no session): its service's backend if it is to
    /// one, its verdict if a policy concerns it, and a session if either does.
    fn start(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        f: &Frame<'_>,
        w: &mut Local,
        flow: &Flow,
        rx: u32,
    ) -> Act {
        let k = &flow.key;
        let svc = f.vip(flow);
        // An external flow (a NodePort, an external IP) goes on in its service's network,
        // from the service's source address unless its client's is kept.
        let external = svc.and_then(|s| s.external);
        let vrf = external.map_or(u32::from(k.vrf), |x| x.vrf);
        let src = external.and_then(|x| x.source).unwrap_or(k.src);
        let backend = match svc {
            Some(svc) => match svc.choose(k.src, k.hash_with(self.seed, Fields::ALL), f.now) {
                Some(b) => Some((svc.id, *b)),
                None => return Act::Drop(Error::NoBackend),
            },
            None => None,
        };
        let (dst, dport) = backend.map_or((k.dst, k.dport), |(_, b)| (b.addr, b.port));
        let judged = Judged {
            rx,
            vrf,
            proto: k.proto,
            src,
            dst,
            sport: k.sport,
            dport,
        };
        let verdict = f.judge.verdict(&judged);
        if backend.is_none() && verdict.is_none() {
            return Act::Pass(None);
        }
        let allowed = verdict.is_none_or(|(v, _)| v == session::Verdict::Allow);
        if let Some((_, Some(by))) = verdict {
            self.report(ctx, &judged, by, false);
        }
        // A TCP segment of no session that is not a connection's first starts none unless a
        // service needs one (an older connection must not become its reply's session).
        let syn = flow.tcp_flags & (session::tcp_flags::SYN | session::tcp_flags::ACK)
            == session::tcp_flags::SYN;
        if backend.is_none() && k.proto == session::PROTO_TCP && !syn {
            return if allowed {
                Act::Pass(None)
            } else {
                Act::Drop(Error::Denied)
            };
        }
        let Some(owner) = w.owner() else {
            return Act::Drop(Error::NoOwner);
        };
        let v = if allowed {
            session::Verdict::Allow
        } else {
            session::Verdict::Deny
        };
        let mut new = NewSession {
            xlate: Translation {
                src,
                dst,
                dport,
                vrf: vrf as u16,
                ..Translation::identity(k)
            },
            service: backend.map_or(session::NONE, |(id, _)| id),
            backend: backend.map_or(session::NONE, |(_, b)| b.id),
            owner_if: rx,
            verdict: Some((f.judge.policies.epoch, v)),
            ..NewSession::plain(*k)
        };
        // Hairpin: a pod balanced to itself would get its own packet back with its own
        // address as the source and answer itself directly; from the VIP instead, it
        // answers through us (the VIP is routed to its gateway), and the reply is
        // translated back. The VIP's port is the client's, or another if that is taken.
        // An external flow from the service's source address gets another port the same way
        // when two clients' ports meet.
        let hairpin = backend.is_some() && external.is_none() && dst == k.src;
        if hairpin {
            new.xlate.src = k.dst;
        }
        let renamed = hairpin || src != k.src;
        let mut created = owner.create(&new, f.now);
        for i in 1..=HAIRPIN_TRIES {
            if !renamed || created != Err(session::CreateError::ReverseInUse) {
                break;
            }
            new.xlate.sport = hairpin_port(k.sport, i);
            created = owner.create(&new, f.now);
        }
        if !allowed {
            return Act::Drop(Error::Denied);
        }
        let Ok(h) = created else {
            // Without a session a service flow cannot be translated back; a flow policy
            // allows passes on its judgement alone.
            return if backend.is_some() {
                Act::Drop(Error::Full)
            } else {
                Act::Pass(None)
            };
        };
        f.table.observe(h, Dir::Forward, flow.tcp_flags, f.now);
        if backend.is_none() {
            return Act::Pass(None);
        }
        ctx.count_error(Error::Created);
        Act::Pass(f.table.established_of(h, Dir::Forward))
    }

    /// Tells the control thread of a denied flow (it logs it, rate-limited).
    fn report(
        &self,
        ctx: &mut Ctx<'_, Self>,
        j: &Judged,
        (ifindex, ingress): (u32, bool),
        established: bool,
    ) {
        let d = Denied {
            ifindex,
            ingress,
            proto: j.proto,
            src: j.src,
            dst: j.dst,
            sport: j.sport,
            dport: j.dport,
            established,
        };
        if !self.denied.report(d) {
            ctx.count_error(Error::DenyLog);
        }
    }
}

impl Frame<'_> {
    /// The service whose VIP, port and protocol `flow` is to, if any.
    #[inline]
    fn vip(&self, flow: &Flow) -> Option<&std::sync::Arc<crate::services::Service>> {
        let k = &flow.key;
        let key = VipKey {
            vrf: u32::from(k.vrf),
            proto: k.proto,
            vip: k.dst,
            port: k.dport,
        };
        flow.translatable.then(|| self.services.vips.get(&key))?
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
