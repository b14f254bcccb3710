//! What the types cannot rule out: values that depend on the machine (its CPUs) or on each
//! other (names used twice, references to networks and interfaces that are not there). A
//! file's problems get the place of their item; a configuration built in code, none.

use std::collections::HashSet;

use super::interface::placement_problems;
use super::{Config, MAX_DSA_INLINE_BELOW, MIN_BUFFERS, cpu_list, usable_cpus};

/// Which part of a configuration a semantic problem belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Item {
    Daemon,
    Network(usize),
    Interface(usize),
    AfPacket(usize),
    AfXdp(usize),
    Route(usize),
    Neighbor(usize),
    Service(usize),
    AddressSet(usize),
    Policy(usize),
}

/// Problems, each with the item it belongs to, in the order they are found.
type Problems = Vec<(Item, String)>;

impl Config {
    /// Every semantic problem: the daemon's, the networks', the memif interfaces', the
    /// uplinks', then references between sections.
    pub(super) fn semantic_problems(&self) -> Problems {
        let mut p = Vec::new();
        self.daemon_problems(&mut p);
        self.network_problems(&mut p);
        let names = self.interface_names();
        self.memif_problems(&names, &mut p);
        self.uplink_problems(&names, &mut p);
        self.reference_problems(&names, &mut p);
        self.service_problems(&mut p);
        p
    }

    /// Services, address sets and policies: their own problems, names used twice, and a
    /// service's network that the file does not have.
    fn service_problems(&self, p: &mut Problems) {
        fn named<T>(
            p: &mut Problems,
            what: &str,
            items: &[T],
            item: fn(usize) -> Item,
            name: fn(&T) -> &str,
            own: fn(&T) -> Vec<String>,
        ) {
            for (k, x) in items.iter().enumerate() {
                let n = name(x);
                for e in own(x) {
                    p.push((item(k), format!("[[{what}]] {n}: {e}")));
                }
                if items[..k].iter().any(|o| name(o) == n) {
                    p.push((item(k), format!("[[{what}]] {n}: the name is used twice")));
                }
            }
        }
        named(
            p,
            "service",
            &self.service,
            Item::Service,
            |s| &s.name,
            |s| s.problems(),
        );
        named(
            p,
            "address-set",
            &self.address_set,
            Item::AddressSet,
            |s| &s.name,
            |s| s.problems(),
        );
        named(
            p,
            "policy",
            &self.policy,
            Item::Policy,
            |s| &s.name,
            |s| s.problems(),
        );
        for (k, s) in self.service.iter().enumerate() {
            if let Some(n) = &s.network
                && !self.network.iter().any(|m| &m.name == n)
            {
                p.push((
                    Item::Service(k),
                    format!("[[service]] {}: no [[network]] named {n:?}", s.name),
                ));
            }
        }
    }

    /// Cores this process may not run on, or listed twice; values out of range.
    fn daemon_problems(&self, p: &mut Problems) {
        let d = &self.daemon;
        let cpus = usable_cpus();
        for &c in d.workers.iter().chain(d.main_core.iter()) {
            if !cpus.contains(&c) {
                p.push((
                    Item::Daemon,
                    format!(
                        "[daemon] core {c} is not one this process may run on (its CPUs: {})",
                        cpu_list(cpus)
                    ),
                ));
            }
        }
        for (i, w) in d.workers.iter().enumerate() {
            if d.workers[..i].contains(w) {
                p.push((
                    Item::Daemon,
                    format!("[daemon] workers lists core {w} twice"),
                ));
            }
        }
        if d.buffers < MIN_BUFFERS {
            p.push((
                Item::Daemon,
                format!(
                    "[daemon] buffers = {} is too few: at least {MIN_BUFFERS} per worker",
                    d.buffers
                ),
            ));
        }
        if !super::daemon::SESSIONS.contains(&d.sessions) {
            p.push((
                Item::Daemon,
                format!(
                    "[daemon] sessions = {} is out of range {}..={}",
                    d.sessions,
                    super::daemon::SESSIONS.start(),
                    super::daemon::SESSIONS.end()
                ),
            ));
        }
        for m in d.neighbours.problems() {
            p.push((Item::Daemon, m));
        }
        if d.memif_memory_mib == Some(0) {
            p.push((
                Item::Daemon,
                "[daemon] memif-memory-mib = 0 would refuse every memif peer: at least 1".into(),
            ));
        }
        if let Some(m) = &d.metrics
            && m.parse::<std::net::SocketAddr>().is_err()
        {
            p.push((
                Item::Daemon,
                format!(
                    "[daemon] metrics = {m:?} is not an address and port \
                     (\"127.0.0.1:9400\", \"[::1]:9400\")"
                ),
            ));
        }
        if let Some(dir) = &d.capture_dir
            && !dir.is_absolute()
        {
            p.push((
                Item::Daemon,
                format!(
                    "[daemon] capture-dir = {:?} is not an absolute path",
                    dir.display()
                ),
            ));
        }
        if let Some(Err(e)) = d.control_socket.mode_bits() {
            p.push((Item::Daemon, format!("[daemon] {e}")));
        }
        if d.dsa_inline_below > MAX_DSA_INLINE_BELOW {
            p.push((
                Item::Daemon,
                format!(
                    "[daemon] dsa-inline-below = {} is out of range: 0 to {MAX_DSA_INLINE_BELOW} \
                     bytes (to keep every copy on the CPU, use copy-engine = \"cpu\")",
                    d.dsa_inline_below
                ),
            ));
        }
        if d.dsa_model_fault_every != 0 && d.dsa_queue.as_deref() != Some("model") {
            p.push((
                Item::Daemon,
                "[daemon] dsa-model-fault-every is for the software model only: it needs \
                 dsa-queue = \"model\""
                    .into(),
            ));
        }
    }

    /// Each network's own problems, and names and VNIs used twice.
    fn network_problems(&self, p: &mut Problems) {
        for (k, n) in self.network.iter().enumerate() {
            let item = Item::Network(k);
            for m in n.problems() {
                p.push((item, format!("[[network]] {}: {m}", n.name)));
            }
            if self.network[..k].iter().any(|o| o.name == n.name) {
                p.push((
                    item,
                    format!("[[network]] {}: the name is used twice", n.name),
                ));
            }
            if let Some(o) = self.network[..k].iter().find(|o| o.vni == n.vni) {
                p.push((
                    item,
                    format!(
                        "[[network]] {}: vni {} is network {}'s already",
                        n.name, n.vni, o.name
                    ),
                ));
            }
        }
    }

    /// Each memif interface's own problems, its network, placement, and what it shares with
    /// another (`names`: every interface's, as [`Config::interface_names`] gives them).
    fn memif_problems(&self, names: &[String], p: &mut Problems) {
        let d = &self.daemon;
        for (k, i) in self.interface.iter().enumerate() {
            let at = format!(
                "[[interface]] {} (socket {:?} id {})",
                names[k], i.socket, i.id
            );
            let item = Item::Interface(k);
            for m in i.problems() {
                p.push((item, format!("{at}: {m}")));
            }
            if let Some(n) = &i.network {
                match self.network.iter().find(|x| &x.name == n) {
                    None => p.push((
                        item,
                        format!(
                            "{at}: no network named {n:?} (have: {})",
                            self.network
                                .iter()
                                .map(|x| x.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                    Some(net) => {
                        for a in i.addresses.iter().filter(|a| !net.contains(a.addr)) {
                            p.push((
                                item,
                                format!("{at}: address {a} is outside network {n}'s ranges"),
                            ));
                        }
                    }
                }
            }
            for m in placement_problems(&i.rx_placement, &d.workers) {
                p.push((item, format!("{at}: {m}")));
            }
            if self.interface[..k]
                .iter()
                .any(|o| o.socket == i.socket && o.id == i.id)
            {
                p.push((item, format!("{at}: socket and id are used twice")));
            }
            if names[..k].contains(&names[k]) {
                p.push((item, format!("{at}: the name {:?} is used twice", names[k])));
            }
            let sockets_role = self
                .interface
                .iter()
                .find(|o| o.socket == i.socket)
                .map(|o| o.role);
            if sockets_role != Some(i.role) {
                p.push((
                    item,
                    format!(
                        "{at}: one socket is either master or slave, and this one is used as both"
                    ),
                ));
            }
        }
    }

    /// The uplinks', af-packet ones then af-xdp ones, as `names` lists them.
    fn uplink_problems(&self, names: &[String], p: &mut Problems) {
        let d = &self.daemon;
        let uplinks = self
            .af_packet
            .iter()
            .enumerate()
            .map(|(k, a)| {
                (
                    Item::AfPacket(k),
                    "af-packet",
                    a.name(),
                    a.problems(),
                    &a.host_if,
                    &a.rx_placement,
                )
            })
            .chain(self.af_xdp.iter().enumerate().map(|(k, x)| {
                (
                    Item::AfXdp(k),
                    "af-xdp",
                    x.name(),
                    x.problems(),
                    &x.host_if,
                    &x.rx_placement,
                )
            }));
        let mut hosts: Vec<&str> = Vec::new();
        for (u, (item, kind, name, problems, host_if, rx_placement)) in uplinks.enumerate() {
            let at = format!("[[{kind}]] {name}");
            for m in problems {
                p.push((item, format!("{at}: {m}")));
            }
            let j = self.interface.len() + u;
            if names[..j].contains(&names[j]) {
                p.push((item, format!("{at}: the name {:?} is used twice", names[j])));
            }
            if hosts.contains(&host_if.as_str()) {
                p.push((item, format!("{at}: host-if {host_if} is used twice")));
            }
            hosts.push(host_if);
            for m in placement_problems(rx_placement, &d.workers) {
                p.push((item, format!("{at}: {m}")));
            }
        }
    }

    /// Interfaces and networks that networks, routes and neighbours name but that are not
    /// there.
    fn reference_problems(&self, names: &[String], p: &mut Problems) {
        let known: HashSet<&str> = names.iter().map(String::as_str).collect();
        let unknown = |n: &str| format!("no interface named {n:?} (have: {})", names.join(", "));
        for (k, n) in self.network.iter().enumerate() {
            if let Some(u) = &n.uplink
                && !known.contains(u.as_str())
            {
                p.push((
                    Item::Network(k),
                    format!("[[network]] {}: uplink: {}", n.name, unknown(u)),
                ));
            }
        }
        for (k, r) in self.route.iter().enumerate() {
            if let Some(n) = &r.network {
                if !self.network.iter().any(|x| &x.name == n) {
                    p.push((
                        Item::Route(k),
                        format!("[[route]] {}: no network named {n:?}", r.prefix),
                    ));
                }
                if r.table != 0 {
                    p.push((
                        Item::Route(k),
                        format!(
                            "[[route]] {}: table and network both set: a network's routes are in its VRF",
                            r.prefix
                        ),
                    ));
                }
            }
        }
        for (k, r) in self.route.iter().enumerate() {
            if let Some(n) = &r.interface
                && !known.contains(n.as_str())
            {
                p.push((
                    Item::Route(k),
                    format!("[[route]] {}: {}", r.prefix, unknown(n)),
                ));
            }
        }
        for (k, n) in self.neighbor.iter().enumerate() {
            if !known.contains(n.interface.as_str()) {
                p.push((
                    Item::Neighbor(k),
                    format!("[[neighbor]] {}: {}", n.ip, unknown(&n.interface)),
                ));
            }
        }
    }
}
