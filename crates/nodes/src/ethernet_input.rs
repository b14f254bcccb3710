//! `ethernet-input`: checks the destination MAC against the receiving interface, classifies by
//! EtherType and skips the Ethernet header.
//!
//! A frame that is plain IPv4 to this interface's MAC (almost every frame a router sees) also
//! gets ip4-input's checks here, in the pass that already holds its metadata and first bytes,
//! as VPP's ethernet-input hands checked frames to `ip4-input-nochecksum`. If it is to be
//! forwarded through a rewrite adjacency (ip4-lookup's fast path: an interface that is up,
//! within its MTU, a TTL above one), it is looked up and rewritten here too and goes straight
//! to the interface's device node: one node (`ip4-lookup`, which already made ip4-rewrite's
//! work on that path) and one walk over the frame less. The rest goes on to `ip4-lookup` (or
//! `vxlan4-input`), and every frame that fails a check to `ip4-input`, whose counters name the
//! reason as before. So `show runtime` counts a forwarded packet's lookup and rewrite in
//! ethernet-input, not in ip4-lookup. (An interface in ip mode has its packets checked here,
//! not forwarded: they go on to `ip4-lookup`.) A packet of a VRF that keeps sessions is
//! forwarded here only from the worker's flow cache ([`crate::worker_sessions`]), rewritten as
//! its session says (a packet of an established flow); any other goes on to `ip4-session`.
//!
//! A traced frame takes the same path as an untraced one (tracing must not reorder a flow);
//! its trace record says when the IPv4 checks, the lookup and the rewrite were made here. No
//! packet overtakes one of its frame, or one still waiting in `ip4-input`, `ip4-lookup` or
//! `ip4-session`, that took a longer way (see [`Fuse`]).

use fib::LpmReader;
use fib::adj::Adjacency;
use graph::{Ctx, Node};
use wire::ipv4::MIN_HEADER_LEN;
use wire::{EtherType, Ethernet, Ipv4};

use crate::ip4_input::Unchecked;
use crate::ip4_rewrite::{Fast, forward};
use crate::worker_sessions::{self, WorkerSessions};
use crate::{ETH_HDR, IfConfig, Shared, SharedView, ip4_input};

mod direct;
use direct::{direct_any, mac_key};

#[derive(Debug)]
pub struct EthernetInput {
    shared: SharedView,
    /// The session table and the policies (their epoch), for the flow cache.
    sessions: std::sync::Arc<crate::Sessions>,
    policies: arc_swap::Cache<
        std::sync::Arc<arc_swap::ArcSwap<crate::Policies>>,
        std::sync::Arc<crate::Policies>,
    >,
    /// The worker's part of the sessions (its flow cache), if the node forwards packets of
    /// established flows itself ([`EthernetInput::with_sessions`]).
    local: Option<WorkerSessions>,
}

impl EthernetInput {
    pub fn new(shared: Shared) -> EthernetInput {
        EthernetInput {
            shared: SharedView::new(&shared),
            sessions: shared.sessions.clone(),
            policies: arc_swap::Cache::new(shared.policies.clone()),
            local: None,
        }
    }

    /// The node forwards the packets of established flows that the worker's flow cache
    /// (in `local`, filled by its `ip4-session`) holds, without `ip4-session`.
    pub fn with_sessions(mut self, local: WorkerSessions) -> EthernetInput {
        self.local = Some(local);
        self
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
        Encap = "vxlan4-encap",
        Session = "ip4-session",
    } + devices
    error Error {
        Short = "frame shorter than an Ethernet header",
        NotForUs = "l3 mac mismatch",
        UnknownType = "unknown ethertype",
        IfDown = "interface down",
        NotIp4 = "not IPv4 on an interface in ip mode",
        Cached = "forwarded from the flow cache (not an error)",
    }
    trace EthernetTrace { ethertype: u16, ip4_ttl: u16, vrf: u32, adj: u32, tx_if: u32 }
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
        // An interface means it was looked up and rewritten here too.
        if self.tx_if != buffer::NONE {
            let (vrf, adj, tx_if) = (self.vrf, self.adj, self.tx_if);
            write!(
                f,
                ", fib {vrf} adj {adj}, rewritten for tx interface {tx_if}"
            )?;
        }
        Ok(())
    }
}

impl Node for EthernetInput {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let EthernetInput {
            shared,
            sessions,
            policies,
            local,
        } = self;
        let SharedView {
            vxlan,
            interfaces,
            vrfs,
            adjacencies,
            services,
        } = shared;
        let (vxlan, ifs) = (&**vxlan.load(), &**interfaces.load());
        // Packets still waiting in ip4-input or ip4-lookup (from this node's earlier frames
        // in this dispatch, or another node's) go out after this frame's: the frame's IPv4
        // follows them the same way, so that none overtakes them.
        let check = !ctx.next_waiting(Next::Ip4);
        let on = check && !ctx.next_waiting(Next::Lookup);
        let services = &**services.load();
        // A node without sessions anywhere tests nothing more per packet.
        let session = on && !services.stateful.is_empty();
        // Packets of established flows are forwarded here from the flow cache unless
        // packets wait in ip4-session (which they would overtake).
        let mut local = local
            .as_ref()
            .filter(|_| session && !ctx.next_waiting(Next::Session))
            .map(|l| l.lock());
        // (The sessions' clock is read only then: a node without sessions reads none.)
        let now = local.as_ref().map(|_| sessions.now());
        let missed = worker_sessions::Missed::default();
        let cached = local.as_mut().zip(now).map(|(l, now)| {
            l.cache
                .frame(&sessions.table, (policies.load().epoch, now), &missed)
        });
        let mut fuse = Fuse {
            services,
            vrfs: vrfs.load(),
            adjs: adjacencies.load(),
            ifs,
            vrf: buffer::NONE,
            stateful: false,
            version: 0,
            used: false,
            table: None,
            fast: Fast::NONE,
            on,
            check,
            session,
            cached,
            flow_missed: false,
        };
        // A node without tunnels runs the loop without the bypass check at all.
        if vxlan.vteps.is_empty() {
            Self::input::<false>(ctx, bufs, next, &[], ifs, &mut fuse);
        } else {
            Self::input::<true>(ctx, bufs, next, &vxlan.vteps, ifs, &mut fuse);
        }
        // The sessions' sweep runs in a frame that used them, whichever node it was.
        if fuse.used
            && let (Some(l), Some(now)) = (local.as_mut(), now)
        {
            l.sweep(now);
        }
    }
}

/// ip4-lookup's fast path, taken here for the packets this node has checked: a packet to be
/// forwarded through a rewrite adjacency on an interface that is up, within its MTU and with a
/// TTL above one is looked up, rewritten and handed to the interface's device node without
/// visiting `ip4-lookup`. The frame's state: the tables, the previous packet's VRF and
/// adjacency, and whether packets are still forwarded here.
struct Fuse<'a> {
    /// Which VRFs keep sessions: their packets are not forwarded here but go through
    /// `ip4-lookup` to `ip4-session`.
    services: &'a crate::Services,
    vrfs: &'a [LpmReader],
    adjs: &'a [Adjacency],
    ifs: &'a [IfConfig],
    /// The previous packet's VRF, whether it keeps sessions, and its table (and the table's
    /// version when taken, for the flow cache's routes).
    vrf: u32,
    stateful: bool,
    table: Option<&'a LpmReader>,
    version: u64,
    /// The previous adjacency's rewrite and device node.
    fast: Fast,
    /// Whether packets are still forwarded here: not while packets that `ip4-lookup` may
    /// forward wait there (sent by this frame's direct loop without forwarding, by an
    /// interface in ip mode, by an earlier frame or another node), so that no packet forwarded
    /// here overtakes them. A packet that [`Fuse::forward`] refuses is one `ip4-lookup` does
    /// not forward either (no route, to us, an unresolved next hop, a TTL or MTU error), but
    /// for one of our own, which turns this off.
    on: bool,
    /// Whether IPv4 is still checked here: not while packets wait in `ip4-input`, which may
    /// forward them (unicast IPv4 in a broadcast frame, say). Every IPv4 packet after them
    /// goes there too and follows them through `ip4-lookup` in order.
    check: bool,
    /// Whether a packet of a VRF that keeps sessions goes straight to `ip4-session`: not
    /// while packets wait in `ip4-lookup` (which sends them there): it follows them.
    session: bool,
    /// The worker's flow cache, if packets of established flows are forwarded here (see
    /// [`worker_sessions`]), and whether it forwarded a packet of the frame (which then
    /// sweeps: a frame that also visits `ip4-session` sweeps there).
    cached: Option<worker_sessions::Frame<'a>>,
    used: bool,
    /// The last packet [`Fuse::forward`] refused was one the flow cache sent to
    /// `ip4-session` by its flow ([`worker_sessions::Miss::Flow`]): the packets of other
    /// flows after it may still be forwarded here.
    flow_missed: bool,
}

impl<'a> Fuse<'a> {
    /// The table of VRF `vrf`, if packets of it are forwarded here (a VRF that keeps
    /// sessions: only with the flow cache, by it).
    #[inline(always)]
    fn table(&mut self, vrf: u32) -> Option<&'a LpmReader> {
        if vrf != self.vrf {
            let stateful = self.services.stateful(vrf);
            let forwarded = !stateful || self.cached.is_some();
            let table = self.vrfs.get(vrf as usize).filter(|_| forwarded);
            (self.vrf, self.stateful, self.table) = (vrf, stateful, table);
            self.version = table.map_or(0, |t| t.version());
        }
        self.table
    }

    /// The flow cache, if packets of VRF `vrf` (the last [`Fuse::table`] was asked for) are
    /// forwarded by it.
    #[inline(always)]
    fn cache(&self) -> Option<worker_sessions::Frame<'a>> {
        self.cached.filter(|_| self.stateful)
    }

    /// Where a checked packet of VRF `vrf` goes for its lookup: `ip4-session` first if the
    /// VRF keeps sessions (and nothing waits in `ip4-lookup`), else `ip4-lookup`.
    #[inline(always)]
    fn lookup_next(&self, vrf: u32) -> Next {
        if self.session && self.services.stateful(vrf) {
            Next::Session
        } else {
            Next::Lookup
        }
    }

    /// Looks up and rewrites a packet that passed ip4-input's checks (`m` past its Ethernet
    /// header, `f` its data from that header on), as ip4-lookup's fast path would: its device
    /// node, or `None`, with nothing changed, when `ip4-lookup` must take it. A packet of a
    /// VRF that keeps sessions is forwarded only by the flow cache, and rewritten as its
    /// session says; one that is not goes to `ip4-session`, and forwarding here stops.
    #[inline(always)]
    fn forward(&mut self, m: &mut buffer::Meta, f: &mut [u8]) -> Option<u16> {
        let table = self.table(m.vrf);
        self.flow_missed = false;
        let device = self.forward_by(table?, m, f);
        if device.is_none() && self.stateful && !self.flow_missed {
            self.on = false;
        }
        device
    }

    #[inline(always)]
    fn forward_by(&mut self, table: &LpmReader, m: &mut buffer::Meta, f: &mut [u8]) -> Option<u16> {
        let ip = f.get(ETH_HDR..)?;
        let cached = match self.cache() {
            Some(c) => {
                let skip = graph::BUFFER_TRACED | crate::LOCALLY_ORIGINATED;
                if m.flags & skip != 0 || m.gso_size != 0 {
                    return None;
                }
                match c.hit(m.vrf, f, m.total_len) {
                    Ok(c) => Some(c),
                    Err(miss) => {
                        self.flow_missed = miss == worker_sessions::Miss::Flow;
                        return None;
                    }
                }
            }
            None => None,
        };
        let adj = match cached {
            Some(c) => c.route(self.version)?,
            None => {
                table.lookup(Ipv4::new_unchecked(ip.first_chunk::<MIN_HEADER_LEN>()?).dst_addr())?
            }
        };
        if adj != self.fast.adj {
            let ifs = self.ifs;
            self.fast = Fast::of(self.adjs, ifs, adj, |out| out.next(Next::Encap));
        }
        let r = self.fast.rw.as_ref()?;
        if m.flags & crate::LOCALLY_ORIGINATED != 0 {
            // ip4-rewrite forwards it, later.
            self.on = false;
            return None;
        }
        if m.total_len > r.mtu {
            return None;
        }
        let forwarded = match cached {
            Some(c) => c.forward(&r.hdr, f),
            None => forward(&r.hdr, f),
        };
        if !forwarded {
            return None;
        }
        m.adj = adj;
        m.expose(ETH_HDR as u16);
        m.tx_if = r.tx_if;
        Some(self.fast.next)
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
        fuse: &mut Fuse<'_>,
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
                let checked = if fuse.check {
                    ip4_input::fast::<BYPASS>(m, ip, vteps, ifc.sources.as_ref())
                } else {
                    None
                };
                let Some((to, cut)) = checked else {
                    fuse.check = false;
                    if traced {
                        trace_ip4(ctx, b, 0, None);
                    }
                    *n = Next::Ip4.into();
                    continue;
                };
                // Written out in each fast path: a shared helper that carried the cut cost
                // this loop 14 instructions a packet under --cost.
                let (m, data) = match cut {
                    Some(total) if !unchained => {
                        ctx.pool.truncate_chain(b, u32::from(total));
                        match ctx.pool.meta_data_front_mut(b, ETH_HDR) {
                            Some(md) => md,
                            // Never: the Ethernet header was just skipped.
                            None => {
                                fuse.on = false;
                                *n = Next::from(to).into();
                                continue;
                            }
                        }
                    }
                    Some(total) => {
                        m.truncate(total);
                        (m, data)
                    }
                    None => (m, data),
                };
                *n = match to {
                    ip4_input::Fast::Lookup => fuse.lookup_next(m.vrf),
                    ip4_input::Fast::Vxlan => Next::Vxlan,
                }
                .into();
                let mut fused = None;
                if to == ip4_input::Fast::Lookup
                    && fuse.on
                    && let Some(device) = fuse.forward(m, data)
                {
                    *n = device;
                    fused = Some((m.vrf, m.adj, m.tx_if));
                    if fuse.stateful {
                        fuse.used = true;
                        ctx.count_error(Error::Cached);
                    }
                }
                if traced {
                    trace_ip4(ctx, b, ttl, fused);
                    continue;
                }
                // The packets after it most likely came in the same way: the direct loop
                // takes them while they do, forwarding them itself while it can.
                let (rx, vrf, src) = (last_rx, ifc.vrf, ifc.sources.as_ref());
                let (rest, next) = (&bufs[i..], &mut next[i..]);
                // Forwarding here goes on while it may; after a packet it could not forward
                // (to us, say: its followers most likely are too), the loop that leaves them
                // to ip4-lookup takes the rest, and forwarding here stops for the frame.
                let table = fuse.table(vrf);
                let cache = fuse.cache();
                let forwards = fused.is_some() || to != ip4_input::Fast::Lookup || fuse.flow_missed;
                let fwd = match table {
                    Some(t) if fuse.on && forwards => {
                        Some((t.view(), &fuse.fast, cache, fuse.version))
                    }
                    _ => None,
                };
                if fwd.is_none() {
                    fuse.on = false;
                }
                let look = fuse.lookup_next(vrf);
                let (pool, on) = (&mut *ctx.pool, (rest, next, look));
                let (taken, cached) = match src {
                    Some(s) => {
                        direct_any(pool, (rx, vrf, s), fast_mac, vteps, fwd, tunnels_here, on)
                    }
                    None => direct_any(
                        pool,
                        (rx, vrf, Unchecked),
                        fast_mac,
                        vteps,
                        fwd,
                        tunnels_here,
                        on,
                    ),
                };
                i += taken;
                if fuse.cached.is_some_and(|c| c.gave_up()) {
                    fuse.on = false;
                }
                if cached != 0 {
                    fuse.used = true;
                    ctx.count_errors(Error::Cached, cached as u64);
                }
                continue;
            }
            if ifc.l3 {
                let to = l3_input::<BYPASS>(ctx, b, ifc, vteps, fuse.check);
                match to {
                    Next::Ip4 => fuse.check = false,
                    Next::Lookup => fuse.on = false,
                    _ => {}
                }
                *n = to.into();
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
                        vrf: 0,
                        adj: buffer::NONE,
                        tx_if: buffer::NONE,
                    },
                );
            }
            match ethertype {
                EtherType::Ipv4 => {
                    ctx.pool.meta_mut(b).vrf = ifc.vrf;
                    ctx.pool.advance(b, ETH_HDR as isize);
                    fuse.check = false;
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

/// A packet of an interface without Ethernet (a memif in ip mode): IPv4 from its first
/// byte, given ip4-input's checks as on the fast path; anything else is dropped.
#[cold]
#[inline(never)]
fn l3_input<const BYPASS: bool>(
    ctx: &mut Ctx<'_, EthernetInput>,
    b: u32,
    ifc: &IfConfig,
    vteps: &[(u32, wire::Ipv4Addr)],
    check: bool,
) -> Next {
    let (m, data) = ctx.pool.meta_data_mut(b);
    m.vrf = ifc.vrf;
    let traced = m.flags & graph::BUFFER_TRACED != 0;
    let unchained = m.next == buffer::NONE;
    if data.first().map(|v| v >> 4) != Some(4) {
        ctx.count_error(Error::NotIp4);
        return Next::Drop;
    }
    let ttl = data.get(8).copied().unwrap_or(0);
    let checked = if check {
        ip4_input::fast::<BYPASS>(m, data, vteps, ifc.sources.as_ref())
    } else {
        None
    };
    let Some((to, cut)) = checked else {
        if traced {
            trace_ip4(ctx, b, 0, None);
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
        trace_ip4(ctx, b, ttl, None);
    }
    Next::from(to)
}

/// The trace record of an IPv4 frame on the fast path (`ttl`: 0 if its header failed a check
/// and it went on to `ip4-input`; `fused`: its VRF, adjacency and transmit interface if it was
/// forwarded here). Out of line: tracing is rare, and the loop stays tight.
#[cold]
#[inline(never)]
fn trace_ip4(ctx: &mut Ctx<'_, EthernetInput>, b: u32, ttl: u8, fused: Option<(u32, u32, u32)>) {
    let (ethertype, ip4_ttl) = (EtherType::Ipv4.to_raw(), u16::from(ttl));
    let (vrf, adj, tx_if) = fused.unwrap_or((0, buffer::NONE, buffer::NONE));
    ctx.trace(
        b,
        EthernetTrace {
            ethertype,
            ip4_ttl,
            vrf,
            adj,
            tx_if,
        },
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;

    use super::*;
    use crate::IfConfig;
    use crate::testing::run_one;

    fn node(l3: bool) -> EthernetInput {
        node_with(l3, None)
    }

    fn node_with(l3: bool, sources: Option<crate::AllowedSources>) -> EthernetInput {
        let mut c = IfConfig::new([2, 0, 0, 0, 0, 1], 3);
        c.l3 = l3;
        c.sources = sources;
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

    /// In ip mode too, a source the interface does not allow leaves the fast path for
    /// ip4-input's full checks (which drop it and count it).
    #[test]
    fn ip_mode_checks_the_source() {
        let own = crate::AllowedSources::new([(fib::Ipv4Addr::new(10, 0, 0, 2), 32)]);
        let ((next, ..), _) = run_one(node_with(true, Some(own)), &ipv4(), &[], |m| m.rx_if = 0);
        assert_eq!(next, "ip4-lookup");
        let other = crate::AllowedSources::new([(fib::Ipv4Addr::new(10, 0, 0, 9), 32)]);
        let ((next, ..), _) = run_one(node_with(true, Some(other)), &ipv4(), &[], |m| m.rx_if = 0);
        assert_eq!(next, "ip4-input");
    }
}
