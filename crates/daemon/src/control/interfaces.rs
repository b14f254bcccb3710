//! Interfaces: memif sockets in either role, creating interfaces on them, their addresses,
//! table and state, handing connected queues to workers, and their counters.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use api::{InterfaceInfo, Ipv4Prefix, MemifSpec, NeighborSpec, Role, RouteSpec};
use memif::nodes::{QueueCommand, RxQueue, TxQueue};
use memif::queue::QueueCounters;
use memif::{Client, Event, InterfaceConfig, Listener, SocketPath};
use nodes::IfConfig;

use super::{Control, ControlError};

pub(super) enum SockKind {
    Master(Listener),
    Slave(Client),
}

pub(super) struct Sock {
    pub(super) shown: String,
    pub(super) kind: SockKind,
}

/// Counters of one connection's queues.
#[derive(Default)]
pub(super) struct IfCounters {
    pub(super) rx: Vec<Arc<QueueCounters>>,
    pub(super) tx: Vec<Arc<QueueCounters>>,
}

#[derive(Default, Clone, Copy)]
pub(super) struct Totals {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    rx_errors: u64,
    tx_no_room: u64,
}

impl Totals {
    fn of(c: &IfCounters) -> Totals {
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

    fn plus(self, b: Totals) -> Totals {
        Totals {
            rx_packets: self.rx_packets + b.rx_packets,
            rx_bytes: self.rx_bytes + b.rx_bytes,
            tx_packets: self.tx_packets + b.tx_packets,
            tx_bytes: self.tx_bytes + b.tx_bytes,
            rx_errors: self.rx_errors + b.rx_errors,
            tx_no_room: self.tx_no_room + b.tx_no_room,
        }
    }
}

pub(super) struct Iface {
    pub(super) name: String,
    pub(super) sock: usize,
    /// The network it is attached to (its table is the network's).
    pub(super) network: Option<String>,
    id: u32,
    role: Role,
    rx_queues: u16,
    tx_queues: u16,
    ring_size: u32,
    buffer_size: u32,
    /// Core per rx queue, as configured (empty: round robin over workers).
    pub(super) placement: Vec<usize>,
    pub(super) connected: bool,
    peer: Option<String>,
    pub(super) counters: IfCounters,
    /// Counters of connections that ended, and the baseline `clear interfaces` set.
    closed: Totals,
    baseline: Totals,
}

impl Iface {
    /// `clear interfaces`: counters read from zero from now on.
    pub(super) fn clear_counters(&mut self) {
        self.baseline = self.closed.plus(Totals::of(&self.counters));
    }
}

/// The queues of a connection, in the role the socket has.
pub(super) enum Queues {
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

/// The first free slot of `v` (a deleted entry), or the end.
fn free_slot<T>(v: &[Option<T>]) -> usize {
    v.iter().position(Option::is_none).unwrap_or(v.len())
}

/// Puts `x` in slot `at` of `v`: a free slot, or one past the end.
fn put<T>(v: &mut Vec<Option<T>>, at: usize, x: T) {
    if at < v.len() {
        v[at] = Some(x);
    } else {
        v.push(Some(x));
    }
}

impl Control {
    fn sock(&self, s: usize) -> &Sock {
        self.socks[s].as_ref().expect("a live interface's socket")
    }

    pub(super) fn iface_index(&self, name: &str) -> Result<u32, ControlError> {
        self.ifaces
            .iter()
            .position(|i| i.as_ref().is_some_and(|i| i.name == name))
            .map(|p| p as u32)
            .ok_or_else(|| ControlError::NoInterface {
                name: name.to_string(),
                have: self
                    .ifaces
                    .iter()
                    .flatten()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Interface `i`'s name, for listings that may outlive it (a deleted interface's
    /// neighbour or route is removed with it, so this is only a safeguard).
    pub(super) fn name_of(&self, i: u32) -> &str {
        self.ifaces
            .get(i as usize)
            .and_then(Option::as_ref)
            .map_or("(deleted)", |f| f.name.as_str())
    }

    /// The live interface at index `i` (callers hold an index they looked up).
    pub(super) fn iface(&self, i: u32) -> &Iface {
        self.ifaces[i as usize]
            .as_ref()
            .expect("an index from iface_index or a live slot")
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

    /// `create interface memif`, with the spec's table, addresses and state: returns (name,
    /// index).
    pub(super) fn create_memif(&mut self, spec: &MemifSpec) -> Result<(String, u32), ControlError> {
        let refuse = |m: String| Err(ControlError::Interface(m));
        if let Some(p) = spec.problems().into_iter().next() {
            return refuse(p);
        }
        let table = match &spec.network {
            None => spec.table,
            Some(n) => {
                for &a in &spec.addresses {
                    self.check_in_network(n, a)?;
                }
                self.networks[self.network_index(n)?].table
            }
        };
        self.rib.ensure_table(table)?;
        let (path, shown) = self.socket_path(&spec.socket);
        // Slots of deleted interfaces and sockets are reused.
        let index = free_slot(&self.ifaces) as u32;
        let existing = self
            .socks
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.shown == shown));
        let sock_id = existing.unwrap_or_else(|| free_slot(&self.socks));
        if let Some(s) = existing
            && self
                .ifaces
                .iter()
                .flatten()
                .any(|i| i.sock == s && i.id == spec.id)
        {
            return refuse(format!(
                "interface id {} exists on {shown} already",
                spec.id
            ));
        }
        let name = spec
            .name
            .clone()
            .unwrap_or_else(|| api::config::default_interface_name(sock_id, spec.id));
        if self.ifaces.iter().flatten().any(|i| i.name == name) {
            return refuse(format!("an interface named {name:?} exists already"));
        }
        for a in &spec.addresses {
            self.rib.check_new_address(table, a.addr)?;
        }
        let ring_size = spec.ring_size.unwrap_or(1024);
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
        let mac = spec
            .mac
            .map_or([0x02, 0xfe, 0, 0, (index >> 8) as u8, index as u8], |m| m.0);
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
            Some(s) => match (
                &mut self.socks[s].as_mut().expect("found above").kind,
                spec.role,
            ) {
                (SockKind::Master(l), Role::Master) => l
                    .add_interface(cfg)
                    .map_err(|e| ControlError::Interface(e.to_string()))?,
                (SockKind::Slave(c), Role::Slave) => c
                    .add_interface(cfg)
                    .map_err(|e| ControlError::Interface(e.to_string()))?,
                _ => {
                    return refuse(format!(
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
                            std::fs::create_dir_all(d).map_err(|e| {
                                ControlError::Interface(format!(
                                    "cannot create {}: {e}",
                                    d.display()
                                ))
                            })?;
                        }
                        SockKind::Master(Listener::bind(&path, vec![cfg]).map_err(|e| {
                            ControlError::Interface(format!("cannot listen on {shown}: {e}"))
                        })?)
                    }
                    Role::Slave => SockKind::Slave(
                        Client::new(&path, vec![cfg])
                            .map_err(|e| ControlError::Interface(e.to_string()))?,
                    ),
                };
                put(
                    &mut self.socks,
                    sock_id,
                    Sock {
                        shown: shown.clone(),
                        kind,
                    },
                );
            }
        }
        put(
            &mut self.ifaces,
            index as usize,
            Iface {
                name: name.clone(),
                sock: sock_id,
                network: spec.network.clone(),
                id: spec.id,
                role: spec.role,
                rx_queues: rxq,
                tx_queues: txq,
                ring_size,
                buffer_size,
                placement: spec.rx_placement.clone(),
                connected: false,
                peer: None,
                counters: IfCounters::default(),
                closed: Totals::default(),
                baseline: Totals::default(),
            },
        );
        let mut c = IfConfig::new(mac, self.rib.slot(table).expect("ensured above"));
        c.table = table;
        c.up = spec.up;
        if (index as usize) < self.ifconfigs.len() {
            self.ifconfigs[index as usize] = c;
        } else {
            self.ifconfigs.push(c);
        }
        self.rib.set_interface_mac(index, mac);
        for &a in &spec.addresses {
            self.address(index, a, false)?;
        }
        self.publish_interfaces();
        tracing::info!(interface = %name, socket = %shown, role = %spec.role, "interface created");
        Ok((name, index))
    }

    /// `delete interface`: its routes, neighbours and addresses leave the RIB first (no packet
    /// is routed to it any more), then the workers drop its queues, then memif disconnects its
    /// peer; a socket left without interfaces is closed. The slot is reused by the next
    /// interface created. Other interfaces are not touched.
    pub(super) fn delete_interface(&mut self, name: &str) -> Result<(), ControlError> {
        let i = self.iface_index(name)?;
        let ix = i as usize;
        let vrf = self.ifconfigs[ix].table;
        for (addr, len) in std::mem::take(&mut self.ifconfigs[ix].addresses) {
            self.rib.remove_address(i, vrf, Ipv4Prefix { addr, len });
        }
        let statics = self.rib.remove_interface(i);
        let mut gone = IfConfig::new([0; 6], 0);
        gone.up = false;
        self.ifconfigs[ix] = gone;
        self.publish_interfaces();
        self.detach_queues(i);
        let f = self.ifaces[ix].take().expect("found above");
        let sock = self.socks[f.sock]
            .as_mut()
            .expect("a live interface's socket");
        let empty = match &mut sock.kind {
            SockKind::Master(l) => {
                l.remove_interface(f.id);
                l.is_empty()
            }
            SockKind::Slave(c) => {
                c.remove_interface(f.id);
                c.is_empty()
            }
        };
        if empty {
            // Dropping a listener removes its socket file.
            self.socks[f.sock] = None;
        }
        tracing::info!(
            interface = %f.name,
            static_routes_removed = statics,
            "interface deleted"
        );
        Ok(())
    }

    /// Every worker drops interface `ifindex`'s queues (and the peer memory they lent).
    fn detach_queues(&self, ifindex: u32) {
        for w in &self.workers {
            let _ = w.rx_queues.send(QueueCommand::Detach { ifindex });
            let _ = w.tx_queues.send(QueueCommand::Detach { ifindex });
            w.kick();
        }
    }

    pub(super) fn publish_interfaces(&self) {
        self.shared
            .interfaces
            .store(Arc::new(self.ifconfigs.clone()));
    }

    /// The worker that polls rx queue `q` of interface `i`.
    pub(super) fn worker_for(&self, i: &Iface, q: usize) -> usize {
        if let Some(&core) = i.placement.get(q)
            && let Some(w) = self.workers.iter().position(|w| w.core == Some(core))
        {
            return w;
        }
        q % self.workers.len()
    }

    pub(super) fn set_state(&mut self, i: u32, up: bool) {
        self.ifconfigs[i as usize].up = up;
        self.publish_interfaces();
    }

    /// Moves interface `i` to `table`; its addresses' routes move with it.
    pub(super) fn set_table(&mut self, i: u32, table: u32) -> Result<(), ControlError> {
        if let Some(n) = &self.iface(i).network {
            return Err(ControlError::Interface(format!(
                "{} is attached to network {n}: its table is the network's",
                self.iface(i).name
            )));
        }
        self.rib.ensure_table(table)?;
        let old = self.ifconfigs[i as usize].table;
        if old == table {
            return Ok(());
        }
        let addrs: Vec<Ipv4Prefix> = self.ifconfigs[i as usize]
            .addresses
            .iter()
            .map(|&(addr, len)| Ipv4Prefix { addr, len })
            .collect();
        for &a in &addrs {
            self.rib.check_new_address(table, a.addr)?;
        }
        for &a in &addrs {
            self.rib.remove_address(i, old, a);
        }
        self.ifconfigs[i as usize].table = table;
        self.ifconfigs[i as usize].vrf = self.rib.slot(table).expect("ensured above");
        for &a in &addrs {
            self.rib.add_address(&self.ifconfigs, i, table, a)?;
        }
        self.publish_interfaces();
        Ok(())
    }

    /// Adds (or deletes) address `a` of interface `i`.
    pub(super) fn address(
        &mut self,
        i: u32,
        a: Ipv4Prefix,
        delete: bool,
    ) -> Result<(), ControlError> {
        let name = &self.iface(i).name;
        let c = &self.ifconfigs[i as usize];
        let t = c.table;
        let have = c.addresses.contains(&(a.addr, a.len));
        if delete {
            if !have {
                return Err(ControlError::Interface(format!(
                    "{name} has no address {a}"
                )));
            }
            self.rib.remove_address(i, t, a);
            self.ifconfigs[i as usize]
                .addresses
                .retain(|x| *x != (a.addr, a.len));
        } else {
            if have {
                return Ok(());
            }
            if let Some(n) = &self.iface(i).network {
                self.check_in_network(n, a)?;
            }
            self.rib.check_new_address(t, a.addr)?;
            self.ifconfigs[i as usize].addresses.push((a.addr, a.len));
            self.rib.add_address(&self.ifconfigs, i, t, a)?;
        }
        self.publish_interfaces();
        Ok(())
    }

    pub(super) fn neighbor(&mut self, n: &NeighborSpec, delete: bool) -> Result<(), ControlError> {
        let i = self.iface_index(&n.interface)?;
        if delete {
            self.rib.del_neighbor(&self.ifconfigs, i, n.ip);
        } else {
            self.rib.add_neighbor(&self.ifconfigs, i, n.ip, n.mac.0)?;
        }
        Ok(())
    }

    pub(super) fn route(&mut self, add: bool, r: &RouteSpec) -> Result<(), ControlError> {
        if !add {
            return Ok(self.rib.del_route(r.table, r.prefix)?);
        }
        let iface = r
            .interface
            .as_deref()
            .map(|n| self.iface_index(n))
            .transpose()?;
        Ok(self
            .rib
            .add_route(&self.ifconfigs, r.table, r.prefix, r.via, iface)?)
    }

    /// Polls every memif socket and acts on what happened.
    pub(super) fn poll_sockets(&mut self) {
        let mut events = Vec::new();
        for (s, sock) in self.socks.iter_mut().enumerate() {
            let Some(sock) = sock else {
                continue;
            };
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
    }

    fn memif_event(&mut self, sock: usize, e: Event<Queues>) {
        let id = match &e {
            Event::Connected { id, .. } | Event::Disconnected { id, .. } => *id,
        };
        let Some(ix) = self
            .ifaces
            .iter()
            .position(|i| i.as_ref().is_some_and(|i| i.sock == sock && i.id == id))
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
                    let w = self.worker_for(self.iface(ifindex), q);
                    let _ = self.workers[w]
                        .rx_queues
                        .send(QueueCommand::Rx { ifindex, queue: r });
                    self.workers[w].kick();
                }
                let i = self.ifaces[ix].as_mut().expect("found above");
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
                self.detach_queues(ifindex);
                let i = self.ifaces[ix].as_mut().expect("found above");
                i.closed = i.closed.plus(Totals::of(&i.counters));
                i.counters = IfCounters::default();
                i.connected = false;
                tracing::info!(interface = %i.name, "disconnected: {reason}");
            }
        }
    }

    pub(super) fn interface_info(&self, i: u32) -> InterfaceInfo {
        let f = self.iface(i);
        let c = &self.ifconfigs[i as usize];
        let t = f.closed.plus(Totals::of(&f.counters));
        let b = f.baseline;
        let (connects, disconnects, last_disconnect_reason) = self.memif_status(f);
        InterfaceInfo {
            name: f.name.clone(),
            index: i,
            kind: "memif".into(),
            role: f.role,
            socket: self.sock(f.sock).shown.clone(),
            id: f.id,
            mac: api::MacAddr(c.mac),
            admin_up: c.up,
            connected: f.connected,
            table: c.table,
            network: f.network.clone(),
            addresses: c
                .addresses
                .iter()
                .map(|&(addr, len)| Ipv4Prefix { addr, len })
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
            connects,
            disconnects,
            last_disconnect_reason,
        }
    }

    fn memif_status(&self, f: &Iface) -> (u64, u64, Option<String>) {
        let list = match &self.sock(f.sock).kind {
            SockKind::Master(l) => l.interfaces(),
            SockKind::Slave(c) => c.interfaces(),
        };
        list.into_iter()
            .find(|s| s.id == f.id)
            .map_or((0, 0, None), |s| {
                (s.connects, s.disconnects, s.last_disconnect_reason)
            })
    }
}
