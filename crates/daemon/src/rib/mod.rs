//! The routing information base: every route the daemon knows, why it exists (static,
//! an interface address, its subnet, a neighbour), the next-hop adjacencies they share with
//! reference counts, and the per-VRF LPM tables the workers read.
//!
//! The RIB owns the tables' write side. Workers read what it publishes ([`Rib::vrfs`],
//! [`Rib::adjacencies`]) without locks; memory a change unlinks is reused only after
//! [`Rib::quiesce`], which the control thread calls once every worker has moved on.
//! It knows interfaces only as indexes into the `IfConfig` slice its callers pass in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use api::{Ipv4Prefix, Via};
use arc_swap::ArcSwap;
use fib::adj::{AdjIndex, AdjReader, AdjTable, Adjacency};
use fib::{Lpm, LpmReader};
use nodes::{IfConfig, Learned};

/// The most tables (VRFs) at once. A table id is any `u32`; workers find a table by its slot,
/// a dense index the RIB assigns and reuses. An empty table costs a few KiB of resident memory
/// (its first-level array is zeroed lazily by the kernel), one with 16 routes about 30 KiB.
pub const MAX_TABLES: usize = 1 << 16;
/// Second-level groups per table (routes longer than /24 need one per /24).
const TABLE_GROUPS: u32 = 4096;
/// Groups of a table that learned neighbours' host routes never take: what others send (ARP
/// from addresses in many /24s) cannot use up the room the configured routes (a pod's /32)
/// need.
const GROUPS_KEPT_FROM_LEARNING: usize = TABLE_GROUPS as usize / 4;

/// Why a route exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// Configured (`ip route add`).
    Static,
    /// One of our addresses (receive).
    Local,
    /// An interface's subnet: glean.
    Connected,
    /// A host route for a neighbour on a connected subnet.
    Neighbor,
    /// An address of ours that no interface holds: a service's source address.
    Receive,
}

#[derive(Debug, Clone, Copy)]
struct Route {
    kind: RouteKind,
    adj: AdjIndex,
    /// The next-hop adjacency key this route holds a reference on.
    nh: Option<(u32, Ipv4Addr)>,
}

/// A route as `show ip fib` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub table: u32,
    pub prefix: Ipv4Prefix,
    pub kind: RouteKind,
    /// `None` only if the adjacency vanished, which the reference counts rule out.
    pub adjacency: Option<Adjacency>,
}

/// A change the RIB refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RibError {
    #[error("cannot create table {0}: {MAX_TABLES} tables exist already")]
    TooManyTables(u32),
    #[error("table {0} does not exist")]
    NoTable(u32),
    #[error("cannot add {prefix} to table {table}: {reason}")]
    Lpm {
        prefix: Ipv4Prefix,
        table: u32,
        reason: String,
    },
    #[error("{addr} is already an address in table {table}")]
    AddressInUse { addr: Ipv4Addr, table: u32 },
    #[error(
        "{prefix} in table {table} belongs to an interface address or neighbour, not a static route"
    )]
    NotStatic { prefix: Ipv4Prefix, table: u32 },
    #[error("no route {prefix} in table {table}")]
    NoRoute { prefix: Ipv4Prefix, table: u32 },
    #[error("next hop {next_hop} is on no interface's subnet in table {table}: name the interface")]
    OffLink { next_hop: Ipv4Addr, table: u32 },
}

/// The routes, adjacencies and tables of every VRF.
pub struct Rib {
    adj: AdjTable,
    /// By table id: the table and its slot.
    tables: BTreeMap<u32, (u32, Lpm)>,
    /// By slot: the table id there (`None`: free, read as empty).
    slots: Vec<Option<u32>>,
    /// A table with no routes, read at free slots; made only when such a slot first exists.
    empty: Option<Lpm>,
    routes: BTreeMap<(u32, u32, u8), Route>,
    next_hops: HashMap<(u32, Ipv4Addr), (AdjIndex, usize)>,
    static_neighbors: HashSet<(u32, Ipv4Addr)>,
    /// The learned neighbours' caps and ages.
    learned: learned::Learned,
    /// Time zero of the learned neighbours' clock.
    start: std::time::Instant,
    vrfs: Arc<ArcSwap<Vec<LpmReader>>>,
    /// Table memory was unlinked since the last [`Rib::take_unlinked`].
    unlinked: bool,
}

impl std::fmt::Debug for Rib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rib")
            .field("tables", &self.tables.len())
            .field("routes", &self.routes.len())
            .field("next_hops", &self.next_hops.len())
            .finish_non_exhaustive()
    }
}

fn key(table: u32, p: Ipv4Prefix) -> (u32, u32, u8) {
    (table, u32::from(p.addr), p.len)
}

fn host(a: Ipv4Addr) -> Ipv4Prefix {
    Ipv4Prefix { addr: a, len: 32 }
}

impl Default for Rib {
    fn default() -> Self {
        Rib::new()
    }
}

impl Rib {
    /// A RIB with table 0 and nothing in it.
    pub fn new() -> Rib {
        let mut r = Rib {
            adj: AdjTable::new(),
            tables: BTreeMap::new(),
            slots: Vec::new(),
            empty: None,
            routes: BTreeMap::new(),
            next_hops: HashMap::new(),
            static_neighbors: HashSet::new(),
            learned: learned::Learned::default(),
            start: std::time::Instant::now(),
            vrfs: Arc::new(ArcSwap::from_pointee(Vec::new())),
            unlinked: false,
        };
        r.ensure_table(0).expect("table 0 is in range");
        r
    }

    /// The published tables, indexed by slot (see [`Rib::slot`]): what workers look up in.
    pub fn vrfs(&self) -> Arc<ArcSwap<Vec<LpmReader>>> {
        self.vrfs.clone()
    }

    /// The published adjacencies: what a route's value indexes.
    pub fn adjacencies(&self) -> AdjReader {
        self.adj.reader()
    }

    /// Whether table `t` exists (made by an interface, a route or a network).
    pub fn has_table(&self, t: u32) -> bool {
        self.tables.contains_key(&t)
    }

    /// The slot workers find table `t` at (what an interface's `IfConfig::vrf` holds).
    pub fn slot(&self, t: u32) -> Option<u32> {
        self.tables.get(&t).map(|(s, _)| *s)
    }

    /// Deletes table `t` and every route in it; readers see it empty from the next load. Table
    /// 0 stays. Returns how many routes went.
    pub fn drop_table(&mut self, t: u32) -> usize {
        if t == 0 || !self.has_table(t) {
            return 0;
        }
        let keys: Vec<(u32, u32, u8)> = self
            .routes
            .range((t, 0, 0)..=(t, u32::MAX, u8::MAX))
            .map(|(k, _)| *k)
            .collect();
        for &(_, p, len) in &keys {
            self.remove(
                t,
                Ipv4Prefix {
                    addr: Ipv4Addr::from(p),
                    len,
                },
            );
        }
        if let Some((slot, _)) = self.tables.remove(&t) {
            self.slots[slot as usize] = None;
        }
        while self.slots.len() > 1 && self.slots.last().is_some_and(Option::is_none) {
            self.slots.pop();
        }
        self.publish_tables();
        keys.len()
    }

    /// Creates table `t` if it does not exist.
    pub fn ensure_table(&mut self, t: u32) -> Result<(), RibError> {
        self.table(t).map(|_| ())
    }

    fn table(&mut self, t: u32) -> Result<&mut Lpm, RibError> {
        if !self.tables.contains_key(&t) {
            let slot = match self.slots.iter().position(Option::is_none) {
                Some(s) => s,
                None if self.slots.len() < MAX_TABLES => {
                    self.slots.push(None);
                    self.slots.len() - 1
                }
                None => return Err(RibError::TooManyTables(t)),
            };
            self.slots[slot] = Some(t);
            self.tables.insert(t, (slot as u32, Lpm::new(TABLE_GROUPS)));
            self.publish_tables();
        }
        Ok(&mut self.tables.get_mut(&t).expect("created above").1)
    }

    fn publish_tables(&mut self) {
        if self.empty.is_none() && self.slots.iter().any(Option::is_none) {
            self.empty = Some(Lpm::new(1));
        }
        let v: Vec<LpmReader> = self
            .slots
            .iter()
            .map(|s| {
                s.and_then(|t| self.tables.get(&t).map(|(_, l)| l))
                    .or(self.empty.as_ref())
                    .expect("made above")
                    .reader()
            })
            .collect();
        self.vrfs.store(Arc::new(v));
    }

    /// Whether a change unlinked table memory since the last call: the caller then waits
    /// for every worker to finish a loop (counting from now) before [`Rib::quiesce`].
    pub fn take_unlinked(&mut self) -> bool {
        std::mem::take(&mut self.unlinked)
    }

    /// Makes unlinked table memory reusable. Only once no worker can still be reading it.
    pub fn quiesce(&mut self) {
        for (_, t) in self.tables.values_mut() {
            t.quiesce();
        }
    }

    fn insert(&mut self, table: u32, p: Ipv4Prefix, r: Route) -> Result<(), RibError> {
        let lpm = self.table(table)?;
        lpm.insert(p.addr, p.len, r.adj)
            .map_err(|e| RibError::Lpm {
                prefix: p,
                table,
                reason: e.to_string(),
            })?;
        if let Some(old) = self.routes.insert(key(table, p), r)
            && let Some(k) = old.nh
        {
            self.release_nh(k);
        }
        self.unlinked = true;
        Ok(())
    }

    fn remove(&mut self, table: u32, p: Ipv4Prefix) -> Option<Route> {
        let r = self.routes.remove(&key(table, p))?;
        if let Some((_, lpm)) = self.tables.get_mut(&table) {
            let _ = lpm.remove(p.addr, p.len);
        }
        if let Some(k) = r.nh {
            self.release_nh(k);
        }
        self.unlinked = true;
        Some(r)
    }

    fn kind_of(&self, table: u32, p: Ipv4Prefix) -> Option<RouteKind> {
        self.routes.get(&key(table, p)).map(|r| r.kind)
    }

    fn acquire_nh(&mut self, ifindex: u32, nh: Ipv4Addr) -> AdjIndex {
        let e = self
            .next_hops
            .entry((ifindex, nh))
            .or_insert_with(|| (self.adj.add_next_hop(ifindex, nh), 0));
        e.1 += 1;
        e.0
    }

    fn release_nh(&mut self, k: (u32, Ipv4Addr)) {
        if let Some(e) = self.next_hops.get_mut(&k) {
            e.1 -= 1;
            if e.1 == 0 {
                let a = e.0;
                self.next_hops.remove(&k);
                self.adj.remove(a);
            }
        }
    }

    /// Interface `ifindex`'s MAC: the source of every rewrite out of it.
    pub fn set_interface_mac(&mut self, ifindex: u32, mac: [u8; 6]) {
        self.adj.set_interface_mac(ifindex, mac);
    }

    /// Interface `ifindex`'s MTU: what its rewrites let out.
    pub fn set_interface_mtu(&mut self, ifindex: u32, mtu: u16) {
        self.adj.set_interface_mtu(ifindex, mtu);
    }

    /// Forgets a deleted interface's MAC and MTU (its index will be reused).
    pub fn forget_interface(&mut self, ifindex: u32) {
        self.adj.forget_interface(ifindex);
    }

    /// Makes `a` ours in `table` without an interface (`ip4-local` takes what is sent to it;
    /// a tunnel's ARP for it is answered): a service's source address. Refused over any
    /// other route of that /32.
    pub fn add_receive(&mut self, table: u32, a: Ipv4Addr) -> Result<(), RibError> {
        match self.kind_of(table, host(a)) {
            Some(RouteKind::Receive) => Ok(()),
            Some(_) => Err(RibError::AddressInUse { addr: a, table }),
            None => self.insert(
                table,
                host(a),
                Route {
                    kind: RouteKind::Receive,
                    adj: AdjTable::LOCAL,
                    nh: None,
                },
            ),
        }
    }

    /// Removes what [`Rib::add_receive`] added (nothing else).
    pub fn del_receive(&mut self, table: u32, a: Ipv4Addr) {
        if self.kind_of(table, host(a)) == Some(RouteKind::Receive) {
            self.remove(table, host(a));
        }
    }

    /// Whether `a`'s /32 in `table` is a receive route of [`Rib::add_receive`], or free.
    pub fn receive_or_free(&self, table: u32, a: Ipv4Addr) -> bool {
        matches!(
            self.kind_of(table, host(a)),
            None | Some(RouteKind::Receive)
        )
    }

    /// Refuses an address that is already one of ours in `table`.
    pub fn check_new_address(&self, table: u32, a: Ipv4Addr) -> Result<(), RibError> {
        if self.kind_of(table, host(a)) == Some(RouteKind::Local) {
            return Err(RibError::AddressInUse { addr: a, table });
        }
        Ok(())
    }

    /// The routes of address `a` of interface `i` in `table`: the local /32, the connected
    /// subnet (glean), and host routes for neighbours already known there. `ifs[i]` holds
    /// the address already.
    pub fn add_address(
        &mut self,
        ifs: &[IfConfig],
        i: u32,
        table: u32,
        a: Ipv4Prefix,
    ) -> Result<(), RibError> {
        if a.len < 32 {
            let adj = self.acquire_nh(i, Ipv4Addr::UNSPECIFIED);
            self.insert(
                table,
                a.network(),
                Route {
                    kind: RouteKind::Connected,
                    adj,
                    nh: Some((i, Ipv4Addr::UNSPECIFIED)),
                },
            )?;
        }
        self.insert(
            table,
            host(a.addr),
            Route {
                kind: RouteKind::Local,
                adj: AdjTable::LOCAL,
                nh: None,
            },
        )?;
        for (ni, ip, _) in self.adj.neighbours() {
            if ni == i && a.contains(ip) {
                self.neighbor_route(ifs, i, ip)?;
            }
        }
        Ok(())
    }

    /// Removes what [`Rib::add_address`] added, neighbour host routes on the subnet included.
    pub fn remove_address(&mut self, i: u32, table: u32, a: Ipv4Prefix) {
        self.remove(table, host(a.addr));
        if a.len < 32 {
            self.remove(table, a.network());
        }
        let host_routes: Vec<_> = self
            .routes
            .iter()
            .filter(|((rt, p, _), r)| {
                *rt == table
                    && r.kind == RouteKind::Neighbor
                    && r.nh.is_some_and(|(ni, _)| ni == i)
                    && a.contains(Ipv4Addr::from(*p))
            })
            .map(|(k, _)| *k)
            .collect();
        for (rt, p, len) in host_routes {
            self.remove(
                rt,
                Ipv4Prefix {
                    addr: Ipv4Addr::from(p),
                    len,
                },
            );
        }
    }

    /// A host route for a neighbour on one of `i`'s connected subnets, unless a more
    /// deliberate route for that /32 exists.
    fn neighbor_route(&mut self, ifs: &[IfConfig], i: u32, ip: Ipv4Addr) -> Result<(), RibError> {
        let Some(c) = ifs
            .get(i as usize)
            .filter(|c| self.wants_neighbour_route(c, ip))
        else {
            return Ok(());
        };
        let t = c.table;
        let adj = self.acquire_nh(i, ip);
        self.insert(
            t,
            host(ip),
            Route {
                kind: RouteKind::Neighbor,
                adj,
                nh: Some((i, ip)),
            },
        )
    }

    /// Sets the learned neighbours' caps and ages (`[daemon.neighbours]`).
    pub fn set_neighbour_limits(&mut self, l: learned::Limits) {
        self.learned.limits = l;
    }

    /// The learned neighbours' count, caps and counters.
    pub fn neighbour_totals(&self) -> api::NeighbourTotals {
        let (l, c) = (&self.learned.limits, &self.learned.counts);
        api::NeighbourTotals {
            learned: self.learned.len() as u64,
            max: l.max as u64,
            per_interface: l.per_interface as u64,
            refused: c.refused,
            refused_room: c.refused_room,
            evicted: c.evicted,
            expired: c.expired,
            probes: c.probes,
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Holds back publishing the adjacencies until [`Rib::release`]: a batch of learned
    /// neighbours costs one copy of the table.
    pub fn hold(&mut self) {
        self.adj.hold();
    }

    pub fn release(&mut self) {
        self.adj.release();
    }

    /// A neighbour a worker learned from ARP; static entries win over it. Within the caps
    /// of [`learned`] (a refused one is only counted).
    pub fn learn(&mut self, ifs: &[IfConfig], l: Learned) -> Result<(), RibError> {
        let now = self.now_ms();
        self.learn_at(ifs, l, now)
    }

    /// [`Rib::learn`] at `now` (ms of the RIB's clock).
    pub fn learn_at(&mut self, ifs: &[IfConfig], l: Learned, now: u64) -> Result<(), RibError> {
        if self.static_neighbors.contains(&(l.ifindex, l.ip)) || l.ifindex as usize >= ifs.len() {
            return Ok(());
        }
        if self.would_crowd_table(ifs, l) {
            self.learned.counts.refused_room += 1;
            return Ok(());
        }
        match self.learned.hear(l.ifindex, l.ip, now) {
            learned::Heard::Refused => return Ok(()),
            learned::Heard::Replaces(i, ip) => self.forget_neighbour(ifs, i, ip),
            learned::Heard::New | learned::Heard::Refreshed => {}
        }
        self.adj.learn(l.ifindex, l.ip, l.mac);
        self.neighbor_route(ifs, l.ifindex, l.ip)
    }

    /// Whether learning `l` would give its host route one of the table's last groups
    /// ([`GROUPS_KEPT_FROM_LEARNING`]); a neighbour already known is refreshed all the same.
    fn would_crowd_table(&self, ifs: &[IfConfig], l: Learned) -> bool {
        let c = &ifs[l.ifindex as usize];
        self.wants_neighbour_route(c, l.ip)
            && self.tables.get(&c.table).is_some_and(|(_, lpm)| {
                lpm.needs_group(l.ip, 32) && lpm.groups_free().0 <= GROUPS_KEPT_FROM_LEARNING
            })
    }

    /// Whether neighbour `ip` on interface `c` is to get a host route: on its link, not its
    /// own address, and no route to it there yet.
    fn wants_neighbour_route(&self, c: &IfConfig, ip: Ipv4Addr) -> bool {
        c.on_link(ip) && !c.owns(ip) && !self.routes.contains_key(&key(c.table, host(ip)))
    }

    /// The learned neighbours silent for longer than their age: the ARP requests to send
    /// now (see [`learned`]); those that answered none, or that nobody can ask, forgotten.
    pub fn expire_neighbours(&mut self, ifs: &[IfConfig]) -> Vec<nodes::Probe> {
        let now = self.now_ms();
        self.expire_neighbours_at(ifs, now)
    }

    pub fn expire_neighbours_at(&mut self, ifs: &[IfConfig], now: u64) -> Vec<nodes::Probe> {
        let due = self.learned.expire(now);
        for &(i, ip) in &due.gone {
            self.forget_neighbour(ifs, i, ip);
        }
        let mut probes = Vec::with_capacity(due.probe.len());
        let mut tunnel_senders = HashMap::new();
        for (i, ip, k) in due.probe {
            let c = ifs.get(i as usize);
            // An interface in ip mode resolves without ARP: nothing to ask, nothing stale.
            if c.is_some_and(|c| c.l3) {
                self.learned.hear(i, ip, now);
                continue;
            }
            let sender = c.and_then(|c| {
                c.source_for(ip).or_else(|| {
                    *tunnel_senders
                        .entry(i)
                        .or_insert_with(|| self.tunnel_sender(ifs, i))
                })
            });
            match (sender, self.adj.mac_of(i, ip)) {
                (Some(sender), Some(mac)) => {
                    self.learned.counts.probes += 1;
                    probes.push(nodes::Probe {
                        tx_if: i,
                        target: ip,
                        sender,
                        // The last one asks everyone: the neighbour may have a new MAC.
                        dst_mac: if k < learned::PROBES { mac } else { [0xff; 6] },
                    })
                }
                _ => {
                    self.learned.forget(i, ip);
                    self.forget_neighbour(ifs, i, ip);
                }
            }
        }
        probes
    }

    /// Whom to ask on behalf of on tunnel `i`, which has no address: an address this node
    /// delivers in the tunnel's network, a pod's (a neighbour on an interface of the same
    /// table that is no tunnel) or else one of ours there; what `ip4-glean` does with a
    /// packet's sender, and what the far side's `arp-input` accepts from this tunnel.
    fn tunnel_sender(&self, ifs: &[IfConfig], i: u32) -> Option<Ipv4Addr> {
        let c = ifs.get(i as usize).filter(|c| c.tunnel().is_some())?;
        let local = |n: u32| {
            ifs.get(n as usize)
                .is_some_and(|o| n != i && o.table == c.table && o.tunnel().is_none())
        };
        let pod = self
            .adj
            .each_neighbour()
            .filter(|&(n, a, _)| local(n) && c.on_link(a))
            .map(|(_, a, _)| a)
            .min();
        pod.or_else(|| {
            (0..ifs.len() as u32)
                .filter(|&n| local(n))
                .flat_map(|n| ifs[n as usize].addresses.iter().map(|&(a, _)| a))
                .find(|&a| c.on_link(a))
        })
    }

    /// Forgets a neighbour's MAC and host route (not its books: the caller's).
    fn forget_neighbour(&mut self, ifs: &[IfConfig], i: u32, ip: Ipv4Addr) {
        self.adj.forget(i, ip);
        if let Some(c) = ifs.get(i as usize)
            && self.kind_of(c.table, host(ip)) == Some(RouteKind::Neighbor)
        {
            self.remove(c.table, host(ip));
        }
    }

    /// A static neighbour (`set ip neighbor`).
    pub fn add_neighbor(
        &mut self,
        ifs: &[IfConfig],
        i: u32,
        ip: Ipv4Addr,
        mac: [u8; 6],
    ) -> Result<(), RibError> {
        self.static_neighbors.insert((i, ip));
        self.learned.remove(i, ip);
        self.adj.learn(i, ip, mac);
        self.neighbor_route(ifs, i, ip)
    }

    /// Forgets a neighbour, static or learned, and its host route.
    pub fn del_neighbor(&mut self, ifs: &[IfConfig], i: u32, ip: Ipv4Addr) {
        self.static_neighbors.remove(&(i, ip));
        self.learned.remove(i, ip);
        self.forget_neighbour(ifs, i, ip);
    }

    /// Removes every route through interface `i` that its addresses did not bring (static
    /// routes via it, neighbour host routes) and forgets its neighbours; with
    /// [`Rib::remove_address`] for each of its addresses first, nothing of the interface is
    /// left. Returns how many static routes went with it.
    pub fn remove_interface(&mut self, i: u32) -> usize {
        let through: Vec<((u32, u32, u8), RouteKind)> = self
            .routes
            .iter()
            .filter(|(_, r)| r.nh.is_some_and(|(ni, _)| ni == i))
            .map(|(k, r)| (*k, r.kind))
            .collect();
        let mut statics = 0;
        for ((t, p, len), kind) in through {
            statics += usize::from(kind == RouteKind::Static);
            self.remove(
                t,
                Ipv4Prefix {
                    addr: Ipv4Addr::from(p),
                    len,
                },
            );
        }
        for (ni, ip, _) in self.adj.neighbours() {
            if ni == i {
                self.adj.forget(ni, ip);
            }
        }
        self.static_neighbors.retain(|&(ni, _)| ni != i);
        self.learned.remove_interface(i);
        statics
    }

    /// Every neighbour: (interface, address, MAC, configured rather than learned).
    pub fn neighbours(&self) -> Vec<(u32, Ipv4Addr, [u8; 6], bool)> {
        self.adj
            .neighbours()
            .into_iter()
            .map(|(i, ip, mac)| (i, ip, mac, self.static_neighbors.contains(&(i, ip))))
            .collect()
    }

    /// `ip route add`: via a next hop on interface `iface` (default: the interface of
    /// `table` whose subnet holds it), or to drop. Replaces a static route to the same prefix.
    pub fn add_route(
        &mut self,
        ifs: &[IfConfig],
        table: u32,
        prefix: Ipv4Prefix,
        via: Via,
        iface: Option<u32>,
    ) -> Result<(), RibError> {
        let p = prefix.network();
        if self
            .kind_of(table, p)
            .is_some_and(|k| k != RouteKind::Static)
        {
            return Err(RibError::NotStatic { prefix: p, table });
        }
        let nh = match via {
            Via::Drop => {
                return self.insert(
                    table,
                    p,
                    Route {
                        kind: RouteKind::Static,
                        adj: AdjTable::DROP,
                        nh: None,
                    },
                );
            }
            Via::Address(nh) => nh,
        };
        let i = match iface {
            Some(i) => i,
            None => ifs
                .iter()
                .position(|c| c.table == table && c.on_link(nh))
                .map(|x| x as u32)
                .ok_or(RibError::OffLink {
                    next_hop: nh,
                    table,
                })?,
        };
        let adj = self.acquire_nh(i, nh);
        self.insert(
            table,
            p,
            Route {
                kind: RouteKind::Static,
                adj,
                nh: Some((i, nh)),
            },
        )
    }

    /// `ip route del`: only static routes; the others go with their address or neighbour.
    pub fn del_route(&mut self, table: u32, prefix: Ipv4Prefix) -> Result<(), RibError> {
        let p = prefix.network();
        match self.kind_of(table, p) {
            Some(RouteKind::Static) => {
                self.remove(table, p);
                Ok(())
            }
            Some(_) => Err(RibError::NotStatic { prefix: p, table }),
            None => Err(RibError::NoRoute { prefix: p, table }),
        }
    }

    /// The routes of `table` (all tables: `None`), ordered by table and prefix.
    pub fn entries(&self, table: Option<u32>) -> Result<Vec<Entry>, RibError> {
        if let Some(t) = table
            && !self.tables.contains_key(&t)
        {
            return Err(RibError::NoTable(t));
        }
        Ok(self
            .routes
            .iter()
            .filter(|((t, _, _), _)| table.is_none_or(|x| x == *t))
            .map(|(&(t, p, len), r)| Entry {
                table: t,
                prefix: Ipv4Prefix {
                    addr: Ipv4Addr::from(p),
                    len,
                },
                kind: r.kind,
                adjacency: self.adj.get(r.adj),
            })
            .collect())
    }

    /// Next-hop adjacencies alive (each shared by the routes through it).
    pub fn next_hop_count(&self) -> usize {
        self.next_hops.len()
    }
}

pub mod learned;

#[cfg(test)]
mod tests;
