//! Services: a VIP, port and protocol in a network (or table) balanced over backends. The
//! control thread keeps them by name, gives each service and backend a stable id (sessions
//! carry them), publishes what `ip4-session` reads, and kills the sessions of what goes away.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use api::{ServiceInfo, ServiceSpec, SessionFilter, SessionInfo, SessionTotals};
use nodes::services::{Affinity, Backend, External, Service, Services, VipKey};

use super::{Control, ControlError};

/// The services, by name.
#[derive(Debug, Default)]
pub(super) struct Registry {
    by_name: BTreeMap<String, Entry>,
    next_id: u32,
    /// The external sources made ours (a receive route each), by table.
    sources: BTreeSet<(u32, Ipv4Addr)>,
}

#[derive(Debug)]
struct Entry {
    spec: ServiceSpec,
    id: u32,
    /// The table it lives in (its network's, or the spec's).
    table: u32,
    /// Each backend's id, kept while the backend stays.
    backend_ids: HashMap<(Ipv4Addr, u16), u32>,
    /// Its clients' backends, with ClientIP affinity (kept while the timeout stays).
    affinity: Option<Arc<Affinity>>,
}

/// Where a flow reaches a service: (table, protocol, address, port).
type Entrance = (u32, api::Protocol, Ipv4Addr, u16);

/// The node's addresses by table ([`Control::node_addresses`]).
struct NodeAddresses(HashMap<u32, Vec<Ipv4Addr>>);

impl NodeAddresses {
    fn of(&self, table: u32) -> &[Ipv4Addr] {
        self.0.get(&table).map_or(&[], Vec::as_slice)
    }
}

impl Entry {
    fn key(&self) -> Entrance {
        (
            self.table,
            self.spec.protocol,
            self.spec.vip,
            self.spec.port,
        )
    }

    /// What decides every session's translation: a change kills them all.
    fn shape(&self) -> impl PartialEq + use<> {
        let s = &self.spec;
        (
            self.key(),
            s.node_port,
            s.external_ips.clone(),
            s.external_table,
            s.external_local,
            s.external_source,
        )
    }

    /// Its entrances from outside its network: each node address in `external-table` on
    /// the NodePort, each external IP on the service's port.
    fn external_entrances(&self, node: &NodeAddresses) -> Vec<Entrance> {
        let s = &self.spec;
        let t = s.external_table;
        let node = node.of(t);
        let nodeport = s
            .node_port
            .into_iter()
            .flat_map(|p| node.iter().map(move |&a| (a, p)));
        nodeport
            .chain(s.external_ips.iter().map(|&a| (a, s.port)))
            .map(|(a, p)| (t, s.protocol, a, p))
            .collect()
    }

    fn entrances(&self, node: &NodeAddresses) -> Vec<Entrance> {
        let mut v = self.external_entrances(node);
        v.push(self.key());
        v
    }

    /// The source address its external flows get (Cluster policy), if any.
    fn source(&self) -> Option<Ipv4Addr> {
        let s = &self.spec;
        (s.external() && !s.external_local)
            .then_some(s.external_source)
            .flatten()
    }

    /// Gives each of its backends without an id the smallest one free: held by no backend
    /// of this service, nor named in `also` (ids are reused, so that they stay within a
    /// session's 16 bits however the backends churn; not those whose sessions are about to
    /// be killed). One pass, however many are new.
    fn assign_backend_ids(&mut self, also: &[u32]) {
        let mut used: std::collections::HashSet<u32> =
            self.backend_ids.values().chain(also).copied().collect();
        let mut next = 0;
        for b in &self.spec.backends {
            if let std::collections::hash_map::Entry::Vacant(v) =
                self.backend_ids.entry((b.addr, b.port))
            {
                while used.contains(&next) {
                    next += 1;
                }
                used.insert(next);
                v.insert(next);
            }
        }
    }
}

impl Control {
    /// `service add`: adds the service, or replaces the one of its name; a backend that left
    /// (or every backend, when the service moved to another VIP, port, protocol or network,
    /// or its external entrances or translation changed) has its sessions killed. No address,
    /// port and protocol of a table may be two services' entrance.
    pub(super) fn service_add(&mut self, spec: ServiceSpec) -> Result<(), ControlError> {
        let who = spec.name.clone();
        let refuse = |m: String| Err(ControlError::Service(format!("service {who}: {m}")));
        if let Some(p) = spec.problems().into_iter().next() {
            return refuse(p);
        }
        let table = match &spec.network {
            Some(n) => self.networks[self.network_index(n)?].table,
            None => spec.table,
        };
        for t in [table, spec.external_table] {
            if !self.rib.has_table(t) {
                return refuse(format!("table {t} does not exist"));
            }
        }
        let node = self.node_addresses();
        let mut entry = Entry {
            spec,
            id: 0,
            table,
            backend_ids: HashMap::new(),
            affinity: None,
        };
        if let Some(src) = entry.source()
            && !self.rib.receive_or_free(table, src)
            && !self.services.sources.contains(&(table, src))
        {
            return refuse(format!(
                "external-source {src} is routed or an interface's address in table {table}"
            ));
        }
        let mine = entry.entrances(&node);
        for o in self.services.by_name.values() {
            if o.spec.name == entry.spec.name {
                continue;
            }
            let theirs = o.entrances(&node);
            if let Some((t, proto, a, p)) = mine.iter().find(|k| theirs.contains(k)) {
                return refuse(format!(
                    "{a}:{p} {proto} in table {t} is service {}'s already",
                    o.spec.name
                ));
            }
        }
        let mut gone = Vec::new();
        let entry = match self.services.by_name.remove(&entry.spec.name) {
            Some(mut e) => {
                let moved = e.shape() != entry.shape();
                let keep: Vec<(Ipv4Addr, u16)> = entry
                    .spec
                    .backends
                    .iter()
                    .map(|b| (b.addr, b.port))
                    .collect();
                e.backend_ids.retain(|k, &mut bid| {
                    let stays = !moved && keep.contains(k);
                    if !stays {
                        gone.push(bid);
                    }
                    stays
                });
                e.spec = entry.spec;
                e.table = table;
                e
            }
            None => {
                entry.id = self.services.next_id;
                self.services.next_id += 1;
                entry
            }
        };
        let mut e = entry;
        let timeout = e.spec.affinity_seconds.map(|s| s * 1000);
        if e.affinity.as_ref().map(|a| a.timeout_ms()) != timeout {
            e.affinity = timeout.map(|t| Arc::new(Affinity::new(t)));
        }
        e.assign_backend_ids(&gone);
        tracing::info!(service = %e.spec.name, vip = %e.spec.vip, port = e.spec.port,
            backends = e.spec.backends.len(), "service set");
        let id = e.id;
        self.services.by_name.insert(e.spec.name.clone(), e);
        self.sync_sources();
        self.publish_services();
        // After publishing (see `service_del`), one scan for all the backends that left.
        if !gone.is_empty() {
            let table = &self.shared.sessions.table;
            table.kill(|s| s.service == id && gone.contains(&s.backend));
        }
        Ok(())
    }

    /// Makes every service's external source ours in its network's table (a receive route:
    /// a remote node's ARP for it, inside a tunnel, is answered, so that a backend there
    /// answers through us), and forgets those no service uses any more.
    fn sync_sources(&mut self) {
        let want: BTreeSet<(u32, Ipv4Addr)> = self
            .services
            .by_name
            .values()
            .filter_map(|e| e.source().map(|a| (e.table, a)))
            .collect();
        for &(t, a) in self.services.sources.difference(&want) {
            self.rib.del_receive(t, a);
        }
        for &(t, a) in want.difference(&self.services.sources) {
            if let Err(e) = self.rib.add_receive(t, a) {
                tracing::warn!(table = t, address = %a, "external source: {e}");
            }
        }
        self.services.sources = want;
        self.after_rib_change();
    }

    /// `service del`: the service goes, and its sessions are killed.
    pub(super) fn service_del(&mut self, name: &str) -> Result<(), ControlError> {
        let Some(e) = self.services.by_name.remove(name) else {
            return Err(ControlError::Service(format!(
                "no service named {name:?} (have: {})",
                self.services
                    .by_name
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        // Published first: a packet that met the old service after the kill would start a
        // session nothing kills.
        self.sync_sources();
        self.publish_services();
        let killed = self.shared.sessions.table.kill(|s| s.service == e.id);
        tracing::info!(service = %name, sessions = killed, "service deleted");
        Ok(())
    }

    /// Whether `addr` in `table` is on this node: routed to an interface that is not a
    /// tunnel (a pod here), or one of our own addresses.
    fn is_local(&self, table: u32, addr: Ipv4Addr) -> bool {
        let Some(slot) = self.rib.slot(table) else {
            return false;
        };
        let vrfs = self.shared.vrfs.load();
        let Some(adj) = vrfs.get(slot as usize).and_then(|v| v.lookup(addr)) else {
            return false;
        };
        match self.shared.adjacencies.load().get(adj as usize) {
            Some(fib::adj::Adjacency::Local) => true,
            Some(a) => a
                .target()
                .is_some_and(|(tx, _)| self.is_live(tx) && self.iface(tx).tunnel().is_none()),
            None => false,
        }
    }

    /// Publishes the services again if one depends on where its backends are (a route came
    /// or went) or on the node's addresses (a NodePort).
    pub(super) fn routes_changed(&self) {
        let s = |e: &Entry| e.spec.local || e.spec.external_local || e.spec.node_port.is_some();
        if self.services.by_name.values().any(s) {
            self.publish_services();
        }
    }

    /// The node's addresses, by table: every address of a live interface there (a NodePort
    /// listens on them). One pass over the interfaces for every service that asks.
    fn node_addresses(&self) -> NodeAddresses {
        let mut m: HashMap<u32, Vec<Ipv4Addr>> = HashMap::new();
        for (i, c) in self.ifconfigs.iter().enumerate() {
            if self.is_live(i as u32) {
                m.entry(c.table)
                    .or_default()
                    .extend(c.addresses.iter().map(|a| a.0));
            }
        }
        for v in m.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        NodeAddresses(m)
    }

    /// The names of the services in `table` (a network about to go).
    pub(super) fn services_in(&self, table: u32) -> Vec<String> {
        self.services
            .by_name
            .values()
            .filter(|e| e.table == table)
            .map(|e| e.spec.name.clone())
            .collect()
    }

    /// Publishes every service to the workers, and which VRFs keep sessions (those with a
    /// service or an interface with policies).
    pub(super) fn publish_services(&self) {
        let mut v = Services::default();
        let node = self.node_addresses();
        let mark = |flags: &mut Vec<bool>, vrf: u32| {
            if flags.len() <= vrf as usize {
                flags.resize(vrf as usize + 1, false);
            }
            flags[vrf as usize] = true;
        };
        for e in self.services.by_name.values() {
            let Some(vrf) = self.rib.slot(e.table) else {
                continue;
            };
            let backends = |local: bool| -> Vec<Backend> {
                e.spec
                    .usable()
                    .filter(|b| !local || self.is_local(e.table, b.addr))
                    .map(|b| Backend {
                        id: e.backend_ids[&(b.addr, b.port)],
                        addr: u32::from(b.addr),
                        port: b.port,
                    })
                    .collect()
            };
            let vip = u32::from(e.spec.vip);
            let k = VipKey {
                vrf,
                proto: e.spec.protocol.number(),
                vip,
                port: e.spec.port,
            };
            let svc = Service::new(e.id, backends(e.spec.local)).with_affinity(e.affinity.clone());
            let svc = Arc::new(svc);
            v.vips.insert(k, svc.clone());
            v.addrs.insert((vrf, vip));
            mark(&mut v.stateful, vrf);
            // Its NodePort reached from a pod of its own network: each node address of the
            // underlay's table, inside the network, one more VIP of the service as the
            // ClusterIP is (internal policy; the answers come back through this node, the
            // pods' gateway, whichever node the backend is on).
            if let Some(port) = e.spec.node_port {
                for &a in node.of(e.spec.external_table) {
                    let k = VipKey {
                        vip: u32::from(a),
                        port,
                        ..k
                    };
                    v.vips.entry(k).or_insert_with(|| svc.clone());
                }
            }
            let Some(outside) = self.rib.slot(e.spec.external_table) else {
                continue;
            };
            let entrances = e.external_entrances(&node);
            if entrances.is_empty() {
                continue;
            }
            // Fragments to an external entrance are not dropped (`addrs`): a node address is
            // the node's own too, and the node reassembles what comes to it.
            let x = External {
                vrf,
                source: e.source().map(u32::from),
            };
            let svc = Service::new(e.id, backends(e.spec.external_local))
                .with_affinity(e.affinity.clone())
                .with_external(Some(x));
            let svc = Arc::new(svc);
            for (_, proto, a, port) in entrances {
                let k = VipKey {
                    vrf: outside,
                    proto: proto.number(),
                    vip: u32::from(a),
                    port,
                };
                // A node address that is also another service's VIP keeps the VIP's.
                v.vips.entry(k).or_insert_with(|| svc.clone());
            }
            mark(&mut v.stateful, outside);
        }
        for vrf in self.policy_vrfs() {
            mark(&mut v.stateful, vrf);
        }
        self.shared.services.store(Arc::new(v));
    }

    /// `show service`.
    pub(super) fn service_infos(&self) -> Vec<ServiceInfo> {
        let mut per_service: HashMap<u32, u64> = HashMap::new();
        for s in self.shared.sessions.table.live() {
            *per_service.entry(s.service).or_default() += 1;
        }
        self.services
            .by_name
            .values()
            .map(|e| ServiceInfo {
                spec: e.spec.clone(),
                sessions: per_service.get(&e.id).copied().unwrap_or(0),
            })
            .collect()
    }

    /// `show session`: the table's use and counters, and the sessions `f` selects.
    pub(super) fn session_infos(
        &self,
        f: &SessionFilter,
    ) -> Result<(Vec<SessionInfo>, SessionTotals), ControlError> {
        let sessions = &self.shared.sessions;
        let table_of = |slot: u16| {
            self.networks
                .iter()
                .map(|n| (n.table, Some(n.spec.name.clone())))
                .chain(self.services.by_name.values().map(|e| (e.table, None)))
                .find(|(t, _)| self.rib.slot(*t) == Some(u32::from(slot)))
                .unwrap_or((u32::MAX, None))
        };
        let service = match &f.service {
            Some(n) => Some(
                self.services
                    .by_name
                    .get(n)
                    .map(|e| e.id)
                    .ok_or_else(|| ControlError::Service(format!("no service named {n:?}")))?,
            ),
            None => None,
        };
        let network = match &f.network {
            Some(n) => Some(self.networks[self.network_index(n)?].table),
            None => None,
        };
        let names: HashMap<u32, &Entry> =
            self.services.by_name.values().map(|e| (e.id, e)).collect();
        let now = sessions.now();
        let limit = f.limit.unwrap_or(api::sessions::SESSION_LIMIT) as usize;
        let mut out = Vec::new();
        let mut live = 0u64;
        for s in sessions.table.live() {
            live += 1;
            let (table, net) = table_of(s.key.vrf);
            // An external flow is keyed in the underlay's table and goes on in its
            // service's network: either names it.
            let into = (s.xlate.vrf != s.key.vrf).then(|| table_of(s.xlate.vrf).0);
            if service.is_some_and(|id| id != s.service)
                || network.is_some_and(|t| t != table && Some(t) != into)
                || f.client.is_some_and(|c| u32::from(c) != s.key.src)
                || out.len() >= limit
            {
                continue;
            }
            out.push(session_info(&s, table, net, names.get(&s.service), now));
        }
        let c = sessions.counters();
        let totals = SessionTotals {
            capacity: sessions.table.capacity() as u64,
            live,
            memory_bytes: sessions.table.memory_bytes() as u64,
            created: c.created,
            refused_full: c.refused_full,
            evicted_embryonic: c.evicted_embryonic,
            expired: c.expired,
            killed: c.killed,
        };
        Ok((out, totals))
    }
}

fn session_info(
    s: &session::Session,
    table: u32,
    network: Option<String>,
    service: Option<&&Entry>,
    now: u32,
) -> SessionInfo {
    let (k, x) = (&s.key, &s.xlate);
    let at = |a: u32, p: u16| format!("{}:{p}", Ipv4Addr::from(a));
    let protocol = match k.proto {
        6 => "tcp".to_string(),
        17 => "udp".to_string(),
        p => p.to_string(),
    };
    let translated = (x.dst, x.dport) != (k.dst, k.dport);
    let state = if s.killed() {
        "killed".to_string()
    } else {
        format!("{:?}", s.state())
    };
    SessionInfo {
        network,
        table,
        protocol,
        client: at(k.src, k.sport),
        destination: at(k.dst, k.dport),
        backend: translated.then(|| at(x.dst, x.dport)),
        service: service.map(|e| e.spec.name.clone()),
        state: kebab(&state),
        idle_ms: now.wrapping_sub(s.last_seen),
    }
}

/// `TcpEstablished` as `tcp-established`.
fn kebab(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
