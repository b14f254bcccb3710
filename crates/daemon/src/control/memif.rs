//! memif interfaces: sockets in either role, creating interfaces on them, and handing a
//! connection's queues to the workers (and taking them back).

use std::path::Path;
use std::time::Duration;

use api::{DeviceInfo, MemifSpec, Role};
use memif::nodes::{QueueCommand, RxQueue, TxQueue};
use memif::{Client, Event, InterfaceConfig, Listener, SocketPath};
use nodes::IfConfig;

use super::interfaces::{Dev, DevView, IfCounters, Iface, Source, free_slot, put};
use super::{Control, ControlError};

pub(super) enum SockKind {
    Master(Listener),
    Slave(Client),
}

pub(super) struct Sock {
    pub(super) shown: String,
    /// The network namespace a master listens in, as the user named it (an abstract name is
    /// per namespace, so the same one in two pods is two sockets).
    pub(super) netns: Option<String>,
    pub(super) kind: SockKind,
}

/// The most rings a master accepts in each direction unless told (`rx-queues`,
/// `tx-queues`): more than a pod's cores need, far fewer than the protocol's 255 (each ring
/// holds an fd of ours and a share of a worker's polling).
pub const MASTER_QUEUES: u16 = 16;

/// The most regions a peer may add for `rx` + `tx` rings: one for the rings, one for each
/// ring's buffers, and one more (what libmemif, VPP, DPDK and gomemif use at most).
fn max_regions(rx: u16, tx: u16) -> u16 {
    (rx + tx + 2).min(256)
}

/// The queues of a connection, in the role the socket has.
pub(super) enum Queues {
    Master(memif::PrimaryQueues),
    Slave(memif::SecondaryQueues),
}

/// What only a memif interface has.
pub(super) struct MemifDev {
    pub(super) sock: usize,
    pub(super) id: u32,
    role: Role,
    rx_queues: u16,
    tx_queues: u16,
    ring_size: u32,
    buffer_size: u32,
    /// Master: the most MiB the peer's regions may take together.
    region_limit_mib: Option<u32>,
    peer: Option<String>,
    mode: api::MemifMode,
    pub(super) rx_mode: Option<api::RxMode>,
    use_dma: bool,
    /// What its copies go through, as decided when its queues were last handed out.
    copy: Option<String>,
}

fn rx_counters(q: &RxQueue) -> Source {
    Source::MemifRx(match q {
        RxQueue::Primary(q) => q.counters().clone(),
        RxQueue::Secondary(q) => q.counters().clone(),
    })
}

fn tx_counters(q: &TxQueue) -> Source {
    Source::MemifTx(match q {
        TxQueue::Primary(q) => q.counters().clone(),
        TxQueue::Secondary(q) => q.counters().clone(),
    })
}

impl Control {
    fn sock(&self, s: usize) -> &Sock {
        self.socks[s].as_ref().expect("a live interface's socket")
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

    /// Whether `create interface memif` over the control API may use socket `s`: an abstract
    /// one, or a file in the runtime directory or below it, named without `..` and reached
    /// through no symbolic link out of it. The daemon runs as root and makes a socket's
    /// directories: a user of the control socket may not make it create them, or a socket,
    /// anywhere else. (The configuration file, root's, names any path.)
    pub(super) fn api_socket_allowed(&self, s: &str) -> Result<(), ControlError> {
        let (SocketPath::File(p), shown) = self.socket_path(s) else {
            return Ok(());
        };
        let refuse = || {
            Err(ControlError::Interface(format!(
                "memif socket {shown}: over the control API a socket file must be in the \
                 runtime directory {} (or abstract, @NAME)",
                self.runtime_dir.display()
            )))
        };
        if !p.starts_with(&self.runtime_dir)
            || p.components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return refuse();
        }
        // The deepest part of the path that exists must still be inside, once links are
        // followed.
        let Ok(root) = self.runtime_dir.canonicalize() else {
            return refuse();
        };
        let mut at = p.parent();
        while let Some(d) = at {
            if let Ok(real) = d.canonicalize() {
                if !real.starts_with(&root) {
                    return refuse();
                }
                break;
            }
            at = d.parent();
        }
        Ok(())
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
        let index = self.free_iface_slot() as u32;
        let ns = spec.netns.as_deref().map(uplink::netns::netns_path);
        let existing = self.socks.iter().position(|s| {
            s.as_ref().is_some_and(|s| {
                s.shown == shown && s.netns.as_deref().map(uplink::netns::netns_path) == ns
            })
        });
        let sock_id = existing.unwrap_or_else(|| free_slot(&self.socks));
        if let Some(s) = existing
            && self
                .ifaces
                .iter()
                .flatten()
                .filter_map(Iface::memif)
                .any(|m| m.sock == s && m.id == spec.id)
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
            Role::Master => (
                spec.rx_queues.unwrap_or(MASTER_QUEUES),
                spec.tx_queues.unwrap_or(MASTER_QUEUES),
            ),
            // As slave we create them: one rx per worker by default, one tx per worker.
            Role::Slave => (
                spec.rx_queues.unwrap_or(nworkers),
                spec.tx_queues.unwrap_or(nworkers),
            ),
        };
        let region_limit_mib = (spec.role == Role::Master).then(|| {
            spec.region_limit_mib
                .unwrap_or_else(|| api::config::region_limit_mib(rxq, txq, ring_size, buffer_size))
        });
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
            mode: match spec.mode {
                api::MemifMode::Ethernet => memif::Mode::Ethernet,
                api::MemifMode::Ip => memif::Mode::Ip,
            },
            max_regions: max_regions(rxq, txq),
            max_mapped: region_limit_mib.map_or(memif::DEFAULT_MAX_MAPPED, |m| u64::from(m) << 20),
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
                let mut kind = open_socket(spec.role, &path, ns.as_deref(), &shown, cfg)?;
                if let SockKind::Master(l) = &mut kind {
                    l.set_region_budget(self.region_budget.clone());
                }
                put(
                    &mut self.socks,
                    sock_id,
                    Sock {
                        shown: shown.clone(),
                        netns: spec.netns.clone(),
                        kind,
                    },
                );
            }
        }
        let mut iface = Iface::new(
            name.clone(),
            spec.network.clone(),
            Dev::Memif(MemifDev {
                sock: sock_id,
                id: spec.id,
                role: spec.role,
                rx_queues: rxq,
                tx_queues: txq,
                ring_size,
                buffer_size,
                region_limit_mib,
                peer: None,
                mode: spec.mode,
                rx_mode: spec.rx_mode,
                use_dma: spec.use_dma,
                copy: None,
            }),
        );
        iface.placement = spec.rx_placement.clone();
        iface.pod = spec.pod.clone();
        put(&mut self.ifaces, index as usize, iface);
        let mut c = IfConfig::new(mac, self.rib.slot(table).expect("ensured above"));
        c.table = table;
        c.up = spec.up;
        c.mtu = spec.mtu.unwrap_or(nodes::DEFAULT_MTU);
        c.l3 = spec.mode == api::MemifMode::Ip;
        c.sources = spec.allowed_sources.as_deref().map(super::allowed_sources);
        self.install_ifconfig(index, c);
        for &a in &spec.addresses {
            self.address(index, a, false)?;
        }
        self.publish_interfaces();
        tracing::info!(interface = %name, socket = %shown, role = %spec.role, "interface created");
        Ok((name, index))
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
                        let key = format!("{}: {e}", sock.shown);
                        if let Some(held) = self.repeats.admit(&key) {
                            tracing::warn!(socket = %sock.shown, reason = %e, repeats = held, "memif socket");
                        }
                    }
                    while let Some(e) = l.next_event() {
                        events.push((s, e.map(Queues::Master)));
                    }
                }
                SockKind::Slave(c) => {
                    if let Err(e) = c.poll(Duration::ZERO) {
                        let key = format!("{}: {e}", sock.shown);
                        if let Some(held) = self.repeats.admit(&key) {
                            tracing::warn!(socket = %sock.shown, reason = %e, repeats = held, "memif socket");
                        }
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
        let Some(ix) = self.ifaces.iter().position(|i| {
            i.as_ref()
                .and_then(Iface::memif)
                .is_some_and(|m| m.sock == sock && m.id == id)
        }) else {
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
                let mut counters = IfCounters {
                    rx_queues: rx.len(),
                    tx_queues: tx.len(),
                    sources: Vec::new(),
                };
                // Transmit queues first: a packet received on a fresh queue may need an
                // answer (ARP) on the same interface at once.
                // Worker w transmits on queue w: a queue has one producer.
                let ip_mode = self
                    .iface(ifindex)
                    .memif()
                    .is_some_and(|m| m.mode == api::MemifMode::Ip);
                let use_dma = self.iface(ifindex).memif().is_some_and(|m| m.use_dma);
                // What the copies go through, per worker: the first answer is shown.
                let mut copy: Option<String> = None;
                // The connection's shared memory, once each, registered below if any of its
                // queues copies on DSA.
                let mut memory: Vec<std::sync::Arc<memif::shm::SharedMemory>> = Vec::new();
                for m in rx
                    .iter()
                    .flat_map(RxQueue::memory)
                    .chain(tx.iter().flat_map(TxQueue::memory))
                {
                    if !memory.iter().any(|k| std::sync::Arc::ptr_eq(k, &m)) {
                        memory.push(m);
                    }
                }
                let mut on_dsa = false;
                for (q, t) in tx.into_iter().enumerate() {
                    counters.sources.push(tx_counters(&t));
                    if let Some(w) = self.workers.get(q) {
                        let how = if use_dma {
                            self.copy.use_dma(w, super::copy::Side::Output, ifindex)
                        } else {
                            self.copy.default_kind(w.index)
                        };
                        copy.get_or_insert(how);
                        on_dsa |= self
                            .copy
                            .on_dsa(w.index, super::copy::Side::Output, use_dma);
                        if ip_mode {
                            let _ = w
                                .queues::<QueueCommand>()
                                .tx
                                .send(QueueCommand::IpMode { ifindex });
                        }
                        let _ = w
                            .queues::<QueueCommand>()
                            .tx
                            .send(QueueCommand::Tx { ifindex, queue: t });
                        w.kick();
                    }
                }
                let polling = self
                    .iface(ifindex)
                    .memif()
                    .is_some_and(|m| m.rx_mode == Some(api::RxMode::Polling));
                for (q, r) in rx.into_iter().enumerate() {
                    counters.sources.push(rx_counters(&r));
                    let w = self.worker_for(self.iface(ifindex), q);
                    let how = if use_dma {
                        self.copy
                            .use_dma(&self.workers[w], super::copy::Side::Input, ifindex)
                    } else {
                        self.copy.default_kind(w)
                    };
                    copy.get_or_insert(how);
                    on_dsa |= self.copy.on_dsa(w, super::copy::Side::Input, use_dma);
                    if polling {
                        let _ = self.workers[w]
                            .queues::<QueueCommand>()
                            .rx
                            .send(QueueCommand::Polling { ifindex });
                    }
                    let _ = self.workers[w]
                        .queues::<QueueCommand>()
                        .rx
                        .send(QueueCommand::Rx { ifindex, queue: r });
                    self.workers[w].kick();
                }
                if on_dsa {
                    let mut bytes = 0;
                    let mut how = None;
                    for m in &memory {
                        bytes += m.len();
                        let r = m.register_for_dma();
                        if r.is_err() || how.is_none() {
                            how = Some(r);
                        }
                    }
                    if let Some(r) = how {
                        let what = format!("{} regions", self.iface(ifindex).name);
                        self.copy.registered(what, bytes, &r);
                    }
                }
                let i = self.ifaces[ix].as_mut().expect("found above");
                i.counters = counters;
                i.connected = true;
                let Dev::Memif(m) = &mut i.dev else {
                    return;
                };
                m.copy = copy;
                m.peer = Some(format!(
                    "{} ({}), {} s2m / {} m2s rings of {}",
                    peer.app_name,
                    peer.if_name,
                    peer.s2m_rings,
                    peer.m2s_rings,
                    1u32 << peer.log2_ring_size
                ));
                tracing::info!(
                    interface = %i.name,
                    peer_pid = peer.pid,
                    peer_app = %peer.app_name,
                    "memif connected"
                );
            }
            Event::Disconnected { reason, .. } => {
                self.detach_queues(ifindex);
                let i = self.ifaces[ix].as_mut().expect("found above");
                i.close_counters();
                i.connected = false;
                tracing::info!(interface = %i.name, reason = %reason, "memif disconnected");
            }
        }
    }

    /// What `show interface` says of memif interface `i` that only memif has.
    pub(super) fn memif_view(&self, i: &Iface, f: &MemifDev) -> DevView {
        // Queues exist only while a peer is connected; the configured counts are limits
        // (master) or requests (slave), shown as such.
        let (rx_queues, tx_queues) = if i.connected {
            (i.counters.rx_queues as u16, i.counters.tx_queues as u16)
        } else {
            (0, 0)
        };
        let (connects, disconnects, last_disconnect_reason) = self.memif_status(f);
        DevView {
            device: DeviceInfo::Memif {
                role: f.role,
                socket: self.sock(f.sock).shown.clone(),
                id: f.id,
                ring_size: f.ring_size,
                buffer_size: f.buffer_size,
                region_limit_mib: f.region_limit_mib,
                max_rx_queues: f.rx_queues,
                max_tx_queues: f.tx_queues,
                netns: self.sock(f.sock).netns.clone(),
                mode: f.mode,
                copy: f.copy.clone().filter(|_| i.connected),
            },
            peer: f.peer.clone().filter(|_| i.connected),
            rx_queues,
            tx_queues,
            connects,
            disconnects,
            last_disconnect_reason,
        }
    }

    fn memif_status(&self, f: &MemifDev) -> (u64, u64, Option<String>) {
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

    /// The memif side of `delete interface`: the peer is disconnected, and a socket left
    /// without interfaces closes.
    pub(super) fn remove_memif(&mut self, f: &MemifDev) {
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
    }
}

/// A new memif socket for interface `cfg`: a listener (made inside the pod's network
/// namespace `ns` when there is one, its directory created) or a client.
fn open_socket(
    role: Role,
    path: &SocketPath,
    ns: Option<&std::path::Path>,
    shown: &str,
    cfg: InterfaceConfig,
) -> Result<SockKind, ControlError> {
    Ok(match role {
        Role::Master => {
            if let SocketPath::File(p) = path
                && let Some(d) = p.parent()
            {
                std::fs::create_dir_all(d).map_err(|e| {
                    ControlError::Interface(format!("cannot create {}: {e}", d.display()))
                })?;
            }
            let bind = || Listener::bind(path, vec![cfg]);
            let bound = match ns {
                // The listening socket is made inside the pod's namespace; the connections
                // it accepts belong there too, wherever we use them.
                Some(p) => uplink::netns::run_in(p, bind)
                    .map_err(|e| ControlError::Interface(e.to_string()))?,
                None => bind(),
            };
            SockKind::Master(
                bound.map_err(|e| {
                    ControlError::Interface(format!("cannot listen on {shown}: {e}"))
                })?,
            )
        }
        Role::Slave => SockKind::Slave(
            Client::new(path, vec![cfg]).map_err(|e| ControlError::Interface(e.to_string()))?,
        ),
    })
}
