//! The control thread: memif sockets and handshakes, the forwarding tables, neighbour
//! learning, and the API. It never touches packet data; it hands queues to workers and
//! publishes tables they read without locks.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use api::cli::{format_mac, parse_mac, parse_prefix};
use api::{
    CapturePoint, ErrorCount, FibEntry, InterfaceInfo, MemifSpec, Neighbor, Placement, Reply,
    Request, Role,
};
use arc_swap::ArcSwap;
use fib::adj::{AdjIndex, AdjTable, Adjacency};
use fib::{Lpm, LpmReader};
use memif::nodes::{QueueCommand, RxQueue, TxQueue};
use memif::queue::QueueCounters;
use memif::{Client, Event, InterfaceConfig, Listener, SocketPath};
use nodes::{IfConfig, Learned, Shared};

use crate::config::{Config, DaemonSection};
use crate::worker::{self, WorkerCmd, WorkerHandle, WorkerSetup};

/// Highest VRF id: tables are indexed directly, and each costs 64 MiB of first-level table.
pub const MAX_TABLE: u32 = 255;
/// Second-level groups per table (routes longer than /24 need one per /24).
const TABLE_GROUPS: u32 = 4096;
/// Packets `pcap trace` keeps per worker unless told otherwise.
const PCAP_DEFAULT_MAX: u32 = 100_000;

enum SockKind {
    Master(Listener),
    Slave(Client),
}

struct Sock {
    shown: String,
    kind: SockKind,
}

/// Counters of one connected queue, kept by the control thread.
#[derive(Default)]
struct IfCounters {
    rx: Vec<Arc<QueueCounters>>,
    tx: Vec<Arc<QueueCounters>>,
}

#[derive(Default, Clone, Copy)]
struct Totals {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    rx_errors: u64,
    tx_no_room: u64,
}

struct Iface {
    name: String,
    sock: usize,
    id: u32,
    role: Role,
    rx_queues: u16,
    tx_queues: u16,
    ring_size: u32,
    buffer_size: u32,
    /// Core per rx queue, as configured (empty: round robin over workers).
    placement: Vec<usize>,
    connected: bool,
    peer: Option<String>,
    counters: IfCounters,
    /// Counters of connections that ended, and the baseline `clear interfaces` set.
    closed: Totals,
    baseline: Totals,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RouteKind {
    /// Configured (`ip route add`).
    Static,
    /// One of our addresses (receive).
    Local,
    /// An interface's subnet: glean.
    Connected,
    /// A host route for a neighbour on a connected subnet.
    Neighbor,
}

#[derive(Debug, Clone, Copy)]
struct Route {
    kind: RouteKind,
    adj: AdjIndex,
    /// The next-hop adjacency key this route holds a reference on.
    nh: Option<(u32, Ipv4Addr)>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("runtime_dir", &self.runtime_dir)
            .field("workers", &self.workers.len())
            .field("interfaces", &self.ifaces.len())
            .finish_non_exhaustive()
    }
}

/// The control thread's state.
pub struct Control {
    runtime_dir: PathBuf,
    mode: crate::config::RxMode,
    workers: Vec<WorkerHandle>,
    socks: Vec<Sock>,
    ifaces: Vec<Iface>,
    ifconfigs: Vec<IfConfig>,
    shared: Shared,
    adj: AdjTable,
    tables: Vec<Option<Lpm>>,
    /// A table with no routes, read for VRF ids below the highest that have none; made
    /// (64 MiB) only when such a gap first exists.
    empty: Option<Lpm>,
    routes: BTreeMap<(u32, u32, u8), Route>,
    next_hops: HashMap<(u32, Ipv4Addr), (AdjIndex, usize)>,
    static_neighbors: HashSet<(u32, Ipv4Addr)>,
    learned: Receiver<Learned>,
    /// Loop counts of the workers when tables last dropped memory, until all moved on.
    quiesce_after: Option<Vec<u64>>,
    pcap: Option<(PathBuf, u32)>,
}

fn ip_u32(a: Ipv4Addr) -> u32 {
    u32::from(a)
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

impl Control {
    /// Starts workers, creates the configured interfaces, addresses, routes and neighbours.
    pub fn new(cfg: &Config, runtime_dir: PathBuf) -> Result<Control, String> {
        let (learned_tx, learned_rx) = mpsc::sync_channel(1024);
        let adj = AdjTable::new();
        let shared = Shared {
            interfaces: Arc::new(ArcSwap::from_pointee(Vec::new())),
            vrfs: Arc::new(ArcSwap::from_pointee(Vec::new())),
            adjacencies: adj.reader(),
        };
        let mut c = Control {
            runtime_dir,
            mode: cfg.daemon.mode,
            workers: Vec::new(),
            socks: Vec::new(),
            ifaces: Vec::new(),
            ifconfigs: Vec::new(),
            shared,
            adj,
            tables: Vec::new(),
            empty: None,
            routes: BTreeMap::new(),
            next_hops: HashMap::new(),
            static_neighbors: HashSet::new(),
            learned: learned_rx,
            quiesce_after: None,
            pcap: None,
        };
        c.table(0)?;
        c.start_workers(&cfg.daemon, learned_tx)?;
        for i in &cfg.interface {
            let spec = MemifSpec {
                id: i.id,
                socket: i.socket.clone(),
                role: i.role,
                name: i.name.clone(),
                rx_queues: i.rx_queues,
                tx_queues: i.tx_queues,
                ring_size: i.ring_size,
                buffer_size: i.buffer_size,
                secret: i.secret.clone(),
                hw_addr: i.mac.clone(),
            };
            let (name, index) = c.create_memif(&spec, i.rx_placement.clone())?;
            c.set_table(index, i.table)?;
            for a in &i.addresses {
                c.address(&name, a, false)?;
            }
            if !i.up {
                c.set_state(&name, false)?;
            }
        }
        for n in &cfg.neighbor {
            c.neighbor(&n.interface, &n.ip, &n.mac, false)?;
        }
        for r in &cfg.route {
            c.route(true, &r.prefix, &r.via, r.interface.as_deref(), r.table)?;
        }
        Ok(c)
    }

    fn start_workers(
        &mut self,
        d: &DaemonSection,
        learned: mpsc::SyncSender<Learned>,
    ) -> Result<(), String> {
        let cores: Vec<Option<usize>> = if d.workers.is_empty() {
            vec![None]
        } else {
            d.workers.iter().map(|&c| Some(c)).collect()
        };
        for (index, core) in cores.into_iter().enumerate() {
            let h = worker::spawn(WorkerSetup {
                index,
                core,
                mode: d.mode,
                buffers: d.buffers,
                trace_capacity: d.trace_capacity,
                shared: self.shared.clone(),
                learned: learned.clone(),
                copy: d.copy,
                engine: d.copy_engine.parse().map_err(|e| format!("{e}"))?,
            })
            .map_err(|e| format!("cannot start worker {index}: {e}"))?;
            self.workers.push(h);
        }
        Ok(())
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Stops every worker (graceful shutdown).
    pub fn shutdown(&mut self) {
        for w in &mut self.workers {
            w.stop();
        }
    }

    // ---- tables ----

    fn table(&mut self, t: u32) -> Result<&mut Lpm, String> {
        if t > MAX_TABLE {
            return Err(format!(
                "table {t} is out of range: tables are 0..={MAX_TABLE}"
            ));
        }
        let i = t as usize;
        if self.tables.len() <= i {
            self.tables.resize_with(i + 1, || None);
        }
        if self.tables[i].is_none() {
            self.tables[i] = Some(Lpm::new(TABLE_GROUPS));
            self.publish_tables();
        }
        Ok(self.tables[i].as_mut().expect("created above"))
    }

    fn publish_tables(&mut self) {
        if self.empty.is_none() && self.tables.iter().any(Option::is_none) {
            self.empty = Some(Lpm::new(1));
        }
        let v: Vec<LpmReader> = self
            .tables
            .iter()
            .map(|t| {
                t.as_ref()
                    .or(self.empty.as_ref())
                    .expect("made above")
                    .reader()
            })
            .collect();
        self.shared.vrfs.store(Arc::new(v));
    }

    fn publish_interfaces(&self) {
        self.shared
            .interfaces
            .store(Arc::new(self.ifconfigs.clone()));
    }

    fn lpm_insert(&mut self, table: u32, p: Ipv4Addr, len: u8, r: Route) -> Result<(), String> {
        let lpm = self.table(table)?;
        lpm.insert(p, len, r.adj)
            .map_err(|e| format!("cannot add {p}/{len} to table {table}: {e}"))?;
        if let Some(old) = self.routes.insert((table, ip_u32(p), len), r)
            && let Some(k) = old.nh
        {
            self.release_nh(k);
        }
        self.need_quiesce();
        Ok(())
    }

    fn lpm_remove(&mut self, table: u32, p: Ipv4Addr, len: u8) -> Option<Route> {
        let r = self.routes.remove(&(table, ip_u32(p), len))?;
        if let Some(Some(lpm)) = self.tables.get_mut(table as usize) {
            let _ = lpm.remove(p, len);
        }
        if let Some(k) = r.nh {
            self.release_nh(k);
        }
        self.need_quiesce();
        Some(r)
    }

    fn need_quiesce(&mut self) {
        self.quiesce_after = Some(
            self.workers
                .iter()
                .map(|w| w.activity.loops.load(Ordering::Acquire))
                .collect(),
        );
    }

    /// Frees unlinked table memory for reuse once every worker finished a loop since.
    fn maybe_quiesce(&mut self) {
        let Some(marks) = &self.quiesce_after else {
            return;
        };
        let done = self.workers.iter().zip(marks).all(|(w, &m)| {
            w.activity.parked.load(Ordering::Acquire)
                || w.activity.loops.load(Ordering::Acquire) > m
                || !w.is_alive()
        });
        if done {
            for t in self.tables.iter_mut().flatten() {
                t.quiesce();
            }
            self.quiesce_after = None;
        }
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

    // ---- interfaces ----

    fn iface_index(&self, name: &str) -> Result<u32, String> {
        self.ifaces
            .iter()
            .position(|i| i.name == name)
            .map(|p| p as u32)
            .ok_or_else(|| {
                format!(
                    "no interface named {name:?} (have: {})",
                    self.ifaces
                        .iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }

    fn socket_path(&self, s: &str) -> (SocketPath, String) {
        if let Some(a) = s.strip_prefix('@') {
            return (SocketPath::Abstract(a.as_bytes().to_vec()), s.to_string());
        }
        let p = Path::new(s);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.runtime_dir.join(p)
        };
        (SocketPath::File(p.clone()), p.display().to_string())
    }

    /// `create interface memif`: returns (name, index).
    pub fn create_memif(
        &mut self,
        spec: &MemifSpec,
        placement: Vec<usize>,
    ) -> Result<(String, u32), String> {
        let (path, shown) = self.socket_path(&spec.socket);
        let index = self.ifaces.len() as u32;
        let existing = self.socks.iter().position(|s| s.shown == shown);
        let sock_id = existing.unwrap_or(self.socks.len());
        if let Some(s) = existing
            && self.ifaces.iter().any(|i| i.sock == s && i.id == spec.id)
        {
            return Err(format!(
                "interface id {} exists on {shown} already",
                spec.id
            ));
        }
        let name = spec
            .name
            .clone()
            .unwrap_or_else(|| format!("memif{sock_id}/{}", spec.id));
        if self.ifaces.iter().any(|i| i.name == name) {
            return Err(format!("an interface named {name:?} exists already"));
        }
        let ring_size = spec.ring_size.unwrap_or(1024);
        if !ring_size.is_power_of_two() || !(2..=16384).contains(&ring_size) {
            return Err(format!(
                "ring-size {ring_size} must be a power of two in 2..=16384"
            ));
        }
        let buffer_size = spec.buffer_size.unwrap_or(2048);
        let nworkers = self.workers.len() as u16;
        let (rxq, txq) = match spec.role {
            // As master the peer chooses how many rings; these are the most we accept.
            Role::Master => (spec.rx_queues.unwrap_or(255), spec.tx_queues.unwrap_or(255)),
            // As slave we create them: one rx per worker by default, one tx per worker.
            Role::Slave => (
                spec.rx_queues.unwrap_or(nworkers),
                spec.tx_queues.unwrap_or(nworkers),
            ),
        };
        let mac = match &spec.hw_addr {
            Some(m) => parse_mac(m).ok_or_else(|| format!("hw-addr {m:?} is not a MAC"))?,
            None => [0x02, 0xfe, 0, 0, (index >> 8) as u8, index as u8],
        };
        let cfg = InterfaceConfig {
            id: spec.id,
            name: name.clone(),
            secret: spec.secret.clone(),
            // S2M rings carry the peer's transmissions when we are master, ours when slave.
            s2m_rings: if spec.role == Role::Master { rxq } else { txq },
            m2s_rings: if spec.role == Role::Master { txq } else { rxq },
            log2_ring_size: ring_size.trailing_zeros() as u8,
            buffer_size,
            ..InterfaceConfig::default()
        };
        match existing {
            Some(s) => match (&mut self.socks[s].kind, spec.role) {
                (SockKind::Master(l), Role::Master) => {
                    l.add_interface(cfg).map_err(|e| e.to_string())?
                }
                (SockKind::Slave(c), Role::Slave) => {
                    c.add_interface(cfg).map_err(|e| e.to_string())?
                }
                _ => {
                    return Err(format!(
                        "socket {shown} is used in the other role already; one socket is either master or slave"
                    ));
                }
            },
            None => {
                let kind = match spec.role {
                    Role::Master => {
                        if let SocketPath::File(p) = &path
                            && let Some(d) = p.parent()
                        {
                            std::fs::create_dir_all(d)
                                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
                        }
                        SockKind::Master(
                            Listener::bind(&path, vec![cfg])
                                .map_err(|e| format!("cannot listen on {shown}: {e}"))?,
                        )
                    }
                    Role::Slave => {
                        SockKind::Slave(Client::new(&path, vec![cfg]).map_err(|e| e.to_string())?)
                    }
                };
                self.socks.push(Sock {
                    shown: shown.clone(),
                    kind,
                });
            }
        }
        self.ifaces.push(Iface {
            name: name.clone(),
            sock: sock_id,
            id: spec.id,
            role: spec.role,
            rx_queues: rxq,
            tx_queues: txq,
            ring_size,
            buffer_size,
            placement,
            connected: false,
            peer: None,
            counters: IfCounters::default(),
            closed: Totals::default(),
            baseline: Totals::default(),
        });
        self.ifconfigs.push(IfConfig::new(mac, 0));
        self.adj.set_interface_mac(index, mac);
        self.publish_interfaces();
        tracing::info!(interface = %name, socket = %shown, role = %spec.role, "interface created");
        Ok((name, index))
    }

    /// The worker that polls rx queue `q` of interface `i`.
    fn worker_for(&self, i: &Iface, q: usize) -> usize {
        if let Some(&core) = i.placement.get(q)
            && let Some(w) = self.workers.iter().position(|w| w.core == Some(core))
        {
            return w;
        }
        q % self.workers.len()
    }

    fn set_state(&mut self, name: &str, up: bool) -> Result<(), String> {
        let i = self.iface_index(name)?;
        self.ifconfigs[i as usize].up = up;
        self.publish_interfaces();
        Ok(())
    }

    fn set_table(&mut self, i: u32, table: u32) -> Result<(), String> {
        self.table(table)?;
        let old = self.ifconfigs[i as usize].vrf;
        if old == table {
            return Ok(());
        }
        // The interface's addresses move with it: their routes leave the old table.
        let addrs = self.ifconfigs[i as usize].addresses.clone();
        for (a, l) in &addrs {
            self.remove_address_routes(i, old, *a, *l);
        }
        self.ifconfigs[i as usize].vrf = table;
        for (a, l) in &addrs {
            self.add_address_routes(i, table, *a, *l)?;
        }
        self.publish_interfaces();
        Ok(())
    }

    fn add_address_routes(&mut self, i: u32, t: u32, a: Ipv4Addr, l: u8) -> Result<(), String> {
        if l < 32 {
            let net = Ipv4Addr::from(ip_u32(a) & mask(l));
            let adj = self.acquire_nh(i, Ipv4Addr::UNSPECIFIED);
            self.lpm_insert(
                t,
                net,
                l,
                Route {
                    kind: RouteKind::Connected,
                    adj,
                    nh: Some((i, Ipv4Addr::UNSPECIFIED)),
                },
            )?;
        }
        self.lpm_insert(
            t,
            a,
            32,
            Route {
                kind: RouteKind::Local,
                adj: AdjTable::LOCAL,
                nh: None,
            },
        )?;
        // Neighbours already known on this subnet get their host routes.
        for (ni, ip, _) in self.adj.neighbours() {
            if ni == i && ip_u32(ip) & mask(l) == ip_u32(a) & mask(l) {
                self.neighbor_route(i, ip)?;
            }
        }
        Ok(())
    }

    fn remove_address_routes(&mut self, i: u32, t: u32, a: Ipv4Addr, l: u8) {
        self.lpm_remove(t, a, 32);
        if l < 32 {
            self.lpm_remove(t, Ipv4Addr::from(ip_u32(a) & mask(l)), l);
        }
        let host_routes: Vec<_> = self
            .routes
            .iter()
            .filter(|((rt, p, _), r)| {
                *rt == t
                    && r.kind == RouteKind::Neighbor
                    && r.nh.is_some_and(|(ni, _)| ni == i)
                    && p & mask(l) == ip_u32(a) & mask(l)
            })
            .map(|(k, _)| *k)
            .collect();
        for (rt, p, len) in host_routes {
            self.lpm_remove(rt, Ipv4Addr::from(p), len);
        }
    }

    fn address(&mut self, name: &str, addr: &str, delete: bool) -> Result<(), String> {
        let i = self.iface_index(name)?;
        let (a, l) =
            parse_prefix(addr).ok_or_else(|| format!("address {addr:?} is not A.B.C.D/L"))?;
        let t = self.ifconfigs[i as usize].vrf;
        let have = self.ifconfigs[i as usize].addresses.contains(&(a, l));
        if delete {
            if !have {
                return Err(format!("{name} has no address {addr}"));
            }
            self.remove_address_routes(i, t, a, l);
            self.ifconfigs[i as usize]
                .addresses
                .retain(|x| *x != (a, l));
        } else {
            if have {
                return Ok(());
            }
            if self
                .routes
                .get(&(t, ip_u32(a), 32))
                .is_some_and(|r| r.kind == RouteKind::Local)
            {
                return Err(format!("{a} is already an address in table {t}"));
            }
            self.ifconfigs[i as usize].addresses.push((a, l));
            self.add_address_routes(i, t, a, l)?;
        }
        self.publish_interfaces();
        Ok(())
    }

    /// A host route for a neighbour on one of `i`'s connected subnets, unless a more
    /// deliberate route for that /32 exists.
    fn neighbor_route(&mut self, i: u32, ip: Ipv4Addr) -> Result<(), String> {
        let c = &self.ifconfigs[i as usize];
        if !c.on_link(ip) || c.owns(ip) {
            return Ok(());
        }
        let t = c.vrf;
        if self.routes.contains_key(&(t, ip_u32(ip), 32)) {
            return Ok(());
        }
        let adj = self.acquire_nh(i, ip);
        self.lpm_insert(
            t,
            ip,
            32,
            Route {
                kind: RouteKind::Neighbor,
                adj,
                nh: Some((i, ip)),
            },
        )
    }

    fn learn(&mut self, l: Learned) {
        if self.static_neighbors.contains(&(l.ifindex, l.ip)) {
            return;
        }
        if (l.ifindex as usize) < self.ifconfigs.len() {
            self.adj.learn(l.ifindex, l.ip, l.mac);
            if let Err(e) = self.neighbor_route(l.ifindex, l.ip) {
                tracing::warn!("neighbour {} : {e}", l.ip);
            }
        }
    }

    fn neighbor(&mut self, name: &str, ip: &str, mac: &str, delete: bool) -> Result<(), String> {
        let i = self.iface_index(name)?;
        let ip: Ipv4Addr = ip
            .parse()
            .map_err(|_| format!("{ip:?} is not an IPv4 address"))?;
        if delete {
            self.static_neighbors.remove(&(i, ip));
            self.adj.forget(i, ip);
            let t = self.ifconfigs[i as usize].vrf;
            if self
                .routes
                .get(&(t, ip_u32(ip), 32))
                .is_some_and(|r| r.kind == RouteKind::Neighbor)
            {
                self.lpm_remove(t, ip, 32);
            }
            return Ok(());
        }
        let mac = parse_mac(mac).ok_or_else(|| format!("{mac:?} is not a MAC address"))?;
        self.static_neighbors.insert((i, ip));
        self.adj.learn(i, ip, mac);
        self.neighbor_route(i, ip)
    }

    fn route(
        &mut self,
        add: bool,
        prefix: &str,
        via: &str,
        iface: Option<&str>,
        table: u32,
    ) -> Result<(), String> {
        let (p, l) =
            parse_prefix(prefix).ok_or_else(|| format!("prefix {prefix:?} is not A.B.C.D/L"))?;
        let p = Ipv4Addr::from(ip_u32(p) & mask(l));
        if !add {
            return match self.routes.get(&(table, ip_u32(p), l)) {
                Some(r) if r.kind == RouteKind::Static => {
                    self.lpm_remove(table, p, l);
                    Ok(())
                }
                Some(_) => Err(format!(
                    "{p}/{l} in table {table} belongs to an interface address or neighbour, not a static route"
                )),
                None => Err(format!("no route {p}/{l} in table {table}")),
            };
        }
        if via == "drop" {
            return self.lpm_insert(
                table,
                p,
                l,
                Route {
                    kind: RouteKind::Static,
                    adj: AdjTable::DROP,
                    nh: None,
                },
            );
        }
        let nh: Ipv4Addr = via
            .parse()
            .map_err(|_| format!("next hop {via:?} is not an IPv4 address"))?;
        let i = match iface {
            Some(n) => self.iface_index(n)?,
            None => self
                .ifconfigs
                .iter()
                .position(|c| c.vrf == table && c.on_link(nh))
                .map(|x| x as u32)
                .ok_or_else(|| {
                    format!(
                        "next hop {nh} is on no interface's subnet in table {table}: name the interface"
                    )
                })?,
        };
        if self
            .routes
            .get(&(table, ip_u32(p), l))
            .is_some_and(|r| r.kind != RouteKind::Static)
        {
            return Err(format!(
                "{p}/{l} in table {table} is an interface address or neighbour route"
            ));
        }
        let adj = self.acquire_nh(i, nh);
        self.lpm_insert(
            table,
            p,
            l,
            Route {
                kind: RouteKind::Static,
                adj,
                nh: Some((i, nh)),
            },
        )
    }

    // ---- memif events ----

    /// One control tick: memif handshakes, learned neighbours, table memory.
    pub fn tick(&mut self) {
        let mut events = Vec::new();
        for (s, sock) in self.socks.iter_mut().enumerate() {
            match &mut sock.kind {
                SockKind::Master(l) => {
                    if let Err(e) = l.poll(Duration::ZERO) {
                        tracing::warn!(socket = %sock.shown, "memif socket: {e}");
                    }
                    while let Some(e) = l.next_event() {
                        events.push((s, e.map(Queues::Master)));
                    }
                }
                SockKind::Slave(c) => {
                    if let Err(e) = c.poll(Duration::ZERO) {
                        tracing::warn!(socket = %sock.shown, "memif socket: {e}");
                    }
                    while let Some(e) = c.next_event() {
                        events.push((s, e.map(Queues::Slave)));
                    }
                }
            }
        }
        for (s, e) in events {
            self.memif_event(s, e);
        }
        for _ in 0..1024 {
            match self.learned.try_recv() {
                Ok(l) => self.learn(l),
                Err(_) => break,
            }
        }
        self.maybe_quiesce();
    }

    fn memif_event(&mut self, sock: usize, e: Event<Queues>) {
        let id = match &e {
            Event::Connected { id, .. } | Event::Disconnected { id, .. } => *id,
        };
        let Some(ix) = self
            .ifaces
            .iter()
            .position(|i| i.sock == sock && i.id == id)
        else {
            return;
        };
        let ifindex = ix as u32;
        match e {
            Event::Connected { peer, queues, .. } => {
                let (rx, tx): (Vec<RxQueue>, Vec<TxQueue>) = match queues {
                    Queues::Master(q) => (
                        q.rx.into_iter().map(Into::into).collect(),
                        q.tx.into_iter().map(Into::into).collect(),
                    ),
                    Queues::Slave(q) => (
                        q.rx.into_iter().map(Into::into).collect(),
                        q.tx.into_iter().map(Into::into).collect(),
                    ),
                };
                let mut counters = IfCounters::default();
                // Transmit queues first: a packet received on a fresh queue may need an
                // answer (ARP) on the same interface at once.
                // Worker w transmits on queue w: a queue has one producer.
                for (q, t) in tx.into_iter().enumerate() {
                    counters.tx.push(tx_counters(&t));
                    if let Some(w) = self.workers.get(q) {
                        let _ = w.tx_queues.send(QueueCommand::Tx { ifindex, queue: t });
                        w.kick();
                    }
                }
                for (q, r) in rx.into_iter().enumerate() {
                    counters.rx.push(rx_counters(&r));
                    let w = self.worker_for(&self.ifaces[ix], q);
                    let _ = self.workers[w]
                        .rx_queues
                        .send(QueueCommand::Rx { ifindex, queue: r });
                    self.workers[w].kick();
                }
                let i = &mut self.ifaces[ix];
                i.counters = counters;
                i.connected = true;
                i.peer = Some(format!(
                    "{} ({}), {} s2m / {} m2s rings of {}",
                    peer.app_name,
                    peer.if_name,
                    peer.s2m_rings,
                    peer.m2s_rings,
                    1u32 << peer.log2_ring_size
                ));
                tracing::info!(interface = %i.name, "connected");
            }
            Event::Disconnected { reason, .. } => {
                for w in &self.workers {
                    let _ = w.rx_queues.send(QueueCommand::Detach { ifindex });
                    let _ = w.tx_queues.send(QueueCommand::Detach { ifindex });
                    w.kick();
                }
                let i = &mut self.ifaces[ix];
                let t = totals(&i.counters);
                i.closed = add_totals(i.closed, t);
                i.counters = IfCounters::default();
                i.connected = false;
                tracing::info!(interface = %i.name, "disconnected: {reason}");
            }
        }
    }

    // ---- requests ----

    /// Serves one API request.
    pub fn handle(&mut self, req: Request) -> Reply {
        match self.handle_inner(req) {
            Ok(r) => r,
            Err(message) => Reply::Error { message },
        }
    }

    fn ask<T>(&self, make: impl Fn(mpsc::Sender<T>) -> WorkerCmd) -> Result<Vec<T>, String> {
        let mut out = Vec::new();
        for w in &self.workers {
            let (tx, rx) = channel();
            w.send(make(tx));
            out.push(
                rx.recv_timeout(Duration::from_secs(5))
                    .map_err(|_| format!("worker {} does not answer", w.index))?,
            );
        }
        Ok(out)
    }

    fn handle_inner(&mut self, req: Request) -> Result<Reply, String> {
        Ok(match req {
            Request::ShowVersion => Reply::Version {
                version: env!("CARGO_PKG_VERSION").to_string(),
                workers: self.workers.len(),
                runtime_dir: self.runtime_dir.display().to_string(),
            },
            Request::ShowInterface { name } => {
                let only = name.map(|n| self.iface_index(&n)).transpose()?;
                Reply::Interfaces {
                    interfaces: (0..self.ifaces.len() as u32)
                        .filter(|i| only.is_none_or(|o| o == *i))
                        .map(|i| self.interface_info(i))
                        .collect(),
                }
            }
            Request::ShowRxPlacement => {
                let mut placement = Vec::new();
                for i in &self.ifaces {
                    let n = if i.connected {
                        i.counters.rx.len()
                    } else {
                        i.placement.len().max(1)
                    };
                    for q in 0..n {
                        let w = self.worker_for(i, q);
                        placement.push(Placement {
                            interface: i.name.clone(),
                            queue: q as u16,
                            worker: w,
                            core: self.workers[w].core,
                            mode: self.mode.to_string(),
                            connected: i.connected,
                        });
                    }
                }
                Reply::RxPlacement { placement }
            }
            Request::ShowRuntime => Reply::Runtime {
                workers: self.ask(WorkerCmd::Runtime)?,
            },
            Request::ShowErrors => {
                let mut sum: BTreeMap<(String, String), u64> = BTreeMap::new();
                for w in self.ask(WorkerCmd::Errors)? {
                    for (n, r, c) in w {
                        *sum.entry((n, r)).or_default() += c;
                    }
                }
                Reply::Errors {
                    errors: sum
                        .into_iter()
                        .map(|((node, reason), count)| ErrorCount {
                            count,
                            node,
                            reason,
                        })
                        .collect(),
                }
            }
            Request::ShowTrace => {
                let mut text = String::new();
                for (k, t) in self.ask(WorkerCmd::Trace)?.into_iter().enumerate() {
                    if self.workers.len() > 1 {
                        text.push_str(&format!(
                            "------------------- worker {k} -------------------\n"
                        ));
                    }
                    text.push_str(if t.is_empty() {
                        "No packets in trace buffer\n"
                    } else {
                        &t
                    });
                }
                Reply::Trace { text }
            }
            Request::TraceAdd { node, count } => {
                for r in self.ask(|tx| WorkerCmd::TraceAdd {
                    node: node.clone(),
                    count,
                    reply: tx,
                })? {
                    r?;
                }
                Reply::Ok
            }
            Request::Clear { what } => {
                if what == api::Clear::Interfaces {
                    for i in &mut self.ifaces {
                        i.baseline = add_totals(i.closed, totals(&i.counters));
                    }
                } else {
                    for w in &self.workers {
                        w.send(WorkerCmd::Clear(what));
                    }
                }
                Reply::Ok
            }
            Request::CreateMemif(spec) => {
                let (name, index) = self.create_memif(&spec, Vec::new())?;
                Reply::Created { name, index }
            }
            Request::SetState { interface, up } => {
                self.set_state(&interface, up)?;
                Reply::Ok
            }
            Request::SetIpAddress {
                interface,
                address,
                delete,
            } => {
                self.address(&interface, &address, delete)?;
                Reply::Ok
            }
            Request::SetIpTable { interface, table } => {
                let i = self.iface_index(&interface)?;
                self.set_table(i, table)?;
                Reply::Ok
            }
            Request::IpRoute {
                add,
                prefix,
                via,
                interface,
                table,
            } => {
                self.route(add, &prefix, &via, interface.as_deref(), table)?;
                Reply::Ok
            }
            Request::ShowIpFib { table } => Reply::Fib {
                entries: self.fib_entries(table)?,
            },
            Request::ShowIpNeighbors => Reply::Neighbors {
                neighbors: self
                    .adj
                    .neighbours()
                    .into_iter()
                    .map(|(i, ip, mac)| Neighbor {
                        interface: self.ifaces[i as usize].name.clone(),
                        ip: ip.to_string(),
                        mac: format_mac(&mac),
                        static_entry: self.static_neighbors.contains(&(i, ip)),
                    })
                    .collect(),
            },
            Request::SetIpNeighbor {
                interface,
                ip,
                mac,
                delete,
            } => {
                self.neighbor(&interface, &ip, &mac, delete)?;
                Reply::Ok
            }
            Request::PcapOn {
                points,
                interface,
                file,
                max_packets,
            } => {
                if self.pcap.is_some() {
                    return Err("a capture is running already: `pcap trace off` first".into());
                }
                let ifindex = if interface == "any" {
                    None
                } else {
                    Some(self.iface_index(&interface)?)
                };
                let path = {
                    let p = PathBuf::from(&file);
                    if p.is_absolute() {
                        p
                    } else {
                        self.runtime_dir.join(p)
                    }
                };
                // Fail now rather than after the capture.
                std::fs::File::create(&path)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                let max = max_packets.unwrap_or(PCAP_DEFAULT_MAX);
                let f = graph::Filter {
                    rx: points.contains(&CapturePoint::Rx),
                    tx: points.contains(&CapturePoint::Tx),
                    drop: points.contains(&CapturePoint::Drop),
                    ifindex,
                    max_packets: max as usize,
                    snaplen: 9216,
                };
                for w in &self.workers {
                    w.send(WorkerCmd::PcapStart(f.clone()));
                }
                self.pcap = Some((path, max));
                Reply::Ok
            }
            Request::PcapOff => {
                let Some((path, max)) = self.pcap.take() else {
                    return Err(
                        "no capture is running (`pcap trace rx on IF FILE` starts one)".into(),
                    );
                };
                let mut all = Vec::new();
                let mut missed = 0;
                for (p, m) in self.ask(WorkerCmd::PcapStop)? {
                    all.extend(p);
                    missed += m;
                }
                all.sort_by_key(|c| c.unix_ns);
                if all.len() > max as usize {
                    missed += (all.len() - max as usize) as u64;
                    all.truncate(max as usize);
                }
                let mut f = std::io::BufWriter::new(
                    std::fs::File::create(&path)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
                );
                graph::capture::write_pcap(&mut f, &all, 9216)
                    .and_then(|()| std::io::Write::flush(&mut f))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                Reply::Pcap {
                    file: path.display().to_string(),
                    packets: all.len() as u64,
                    missed,
                }
            }
        })
    }

    fn interface_info(&self, i: u32) -> InterfaceInfo {
        let f = &self.ifaces[i as usize];
        let c = &self.ifconfigs[i as usize];
        let t = add_totals(f.closed, totals(&f.counters));
        let b = f.baseline;
        let (status_connects, status_disconnects, reason) = self.memif_status(f);
        InterfaceInfo {
            name: f.name.clone(),
            index: i,
            kind: "memif".into(),
            role: f.role.to_string(),
            socket: self.socks[f.sock].shown.clone(),
            id: f.id,
            mac: format_mac(&c.mac),
            admin_up: c.up,
            connected: f.connected,
            table: c.vrf,
            addresses: c
                .addresses
                .iter()
                .map(|(a, l)| format!("{a}/{l}"))
                .collect(),
            peer: f.peer.clone().filter(|_| f.connected),
            rx_queues: if f.connected {
                f.counters.rx.len() as u16
            } else {
                f.rx_queues
            },
            tx_queues: if f.connected {
                f.counters.tx.len() as u16
            } else {
                f.tx_queues
            },
            ring_size: f.ring_size,
            buffer_size: f.buffer_size,
            rx_packets: t.rx_packets - b.rx_packets,
            rx_bytes: t.rx_bytes - b.rx_bytes,
            tx_packets: t.tx_packets - b.tx_packets,
            tx_bytes: t.tx_bytes - b.tx_bytes,
            rx_errors: t.rx_errors - b.rx_errors,
            tx_no_room: t.tx_no_room - b.tx_no_room,
            connects: status_connects,
            disconnects: status_disconnects,
            last_disconnect_reason: reason,
        }
    }

    fn memif_status(&self, f: &Iface) -> (u64, u64, Option<String>) {
        let list = match &self.socks[f.sock].kind {
            SockKind::Master(l) => l.interfaces(),
            SockKind::Slave(c) => c.interfaces(),
        };
        list.into_iter()
            .find(|s| s.id == f.id)
            .map_or((0, 0, None), |s| {
                (s.connects, s.disconnects, s.last_disconnect_reason)
            })
    }

    fn fib_entries(&self, table: Option<u32>) -> Result<Vec<FibEntry>, String> {
        if let Some(t) = table
            && self.tables.get(t as usize).is_none_or(|x| x.is_none())
        {
            return Err(format!("table {t} does not exist"));
        }
        Ok(self
            .routes
            .iter()
            .filter(|((t, _, _), _)| table.is_none_or(|x| x == *t))
            .map(|(&(t, p, l), r)| FibEntry {
                table: t,
                prefix: format!("{}/{l}", Ipv4Addr::from(p)),
                path: self.describe(r),
            })
            .collect())
    }

    fn describe(&self, r: &Route) -> String {
        let name = |i: u32| self.ifaces[i as usize].name.clone();
        match self.adj.get(r.adj) {
            Some(Adjacency::Local) => "receive".into(),
            Some(Adjacency::Drop) | None => "drop".into(),
            Some(Adjacency::Glean { tx_if, next_hop }) => {
                if next_hop.is_unspecified() {
                    format!("glean {}", name(tx_if))
                } else {
                    format!("via {next_hop} {} (unresolved: arp)", name(tx_if))
                }
            }
            Some(Adjacency::Rewrite {
                tx_if,
                next_hop,
                dst,
                ..
            }) => format!("via {next_hop} {} {}", name(tx_if), format_mac(&dst)),
        }
    }
}

enum Queues {
    Master(memif::PrimaryQueues),
    Slave(memif::SecondaryQueues),
}

fn rx_counters(q: &RxQueue) -> Arc<QueueCounters> {
    match q {
        RxQueue::Primary(q) => q.counters().clone(),
        RxQueue::Secondary(q) => q.counters().clone(),
    }
}

fn tx_counters(q: &TxQueue) -> Arc<QueueCounters> {
    match q {
        TxQueue::Primary(q) => q.counters().clone(),
        TxQueue::Secondary(q) => q.counters().clone(),
    }
}

fn totals(c: &IfCounters) -> Totals {
    let mut t = Totals::default();
    for q in &c.rx {
        let s = q.snapshot();
        t.rx_packets += s.packets;
        t.rx_bytes += s.bytes;
        t.rx_errors += s.drop_bad_desc + s.drop_oversize;
    }
    for q in &c.tx {
        let s = q.snapshot();
        t.tx_packets += s.packets;
        t.tx_bytes += s.bytes;
        t.tx_no_room += s.tx_no_room;
    }
    t
}

fn add_totals(a: Totals, b: Totals) -> Totals {
    Totals {
        rx_packets: a.rx_packets + b.rx_packets,
        rx_bytes: a.rx_bytes + b.rx_bytes,
        tx_packets: a.tx_packets + b.tx_packets,
        tx_bytes: a.tx_bytes + b.tx_bytes,
        rx_errors: a.rx_errors + b.rx_errors,
        tx_no_room: a.tx_no_room + b.tx_no_room,
    }
}
