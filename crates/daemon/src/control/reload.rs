//! Reloading the configuration file (SIGHUP): the differences between the configuration the
//! daemon runs and the file's are applied live where they can be (networks, interfaces added
//! or removed, static routes, static neighbours, services, address sets and policies added,
//! changed or removed); anything else (the `[daemon]` section: the
//! workers, their buffers, the copy engines, ...; an interface or network whose settings
//! changed) refuses the whole reload, with the list, and nothing is changed.

use api::config::Config;

use super::Control;

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// Every difference was applied: what was done (empty: the file had not changed).
    Applied(Vec<String>),
    /// Some differences were applied, these could not be (each with the daemon's reason).
    Partly {
        applied: Vec<String>,
        failed: Vec<String>,
    },
    /// Nothing was changed: these differences cannot be applied to a running daemon.
    Refused(Vec<String>),
}

/// The differences between `old` and `new` that need a restart, each said in a line.
pub fn not_live(old: &Config, new: &Config) -> Vec<String> {
    let mut v = Vec::new();
    let (a, b) = (
        serde_json::to_value(&old.daemon).unwrap_or_default(),
        serde_json::to_value(&new.daemon).unwrap_or_default(),
    );
    let empty = serde_json::Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        if a.get(k) != b.get(k) {
            let show = |v: Option<&serde_json::Value>| {
                v.map_or("(default)".to_string(), ToString::to_string)
            };
            v.push(format!(
                "[daemon] {}: {} -> {} (needs a restart)",
                k.replace('_', "-"),
                show(a.get(k)),
                show(b.get(k))
            ));
        }
    }
    for n in &new.network {
        if let Some(o) = old.network.iter().find(|o| o.name == n.name)
            && o != n
        {
            v.push(format!(
                "[[network]] {}: its settings changed (remove it in one reload and add it \
                 in the next, or restart)",
                n.name
            ));
        }
    }
    let (on, nn) = (interfaces(old), interfaces(new));
    for (name, spec) in &nn {
        if let Some((_, o)) = on.iter().find(|(k, _)| k == name)
            && o != spec
        {
            v.push(format!(
                "interface {name}: its settings changed (remove it in one reload and add it \
                 in the next, or restart)"
            ));
        }
    }
    v
}

/// Every interface of a configuration by name, with its settings as JSON (to compare).
fn interfaces(c: &Config) -> Vec<(String, serde_json::Value)> {
    let specs = c
        .interface
        .iter()
        .map(|s| serde_json::to_value(s).unwrap_or_default())
        .chain(
            c.af_packet
                .iter()
                .map(|s| serde_json::to_value(s).unwrap_or_default()),
        )
        .chain(
            c.af_xdp
                .iter()
                .map(|s| serde_json::to_value(s).unwrap_or_default()),
        );
    c.interface_names().into_iter().zip(specs).collect()
}

impl Control {
    /// Applies `new` in place of `old` (see the module's documentation).
    pub fn reload(&mut self, old: &Config, new: &Config) -> Reloaded {
        let refused = not_live(old, new);
        if !refused.is_empty() {
            return Reloaded::Refused(refused);
        }
        let (mut applied, mut failed) = (Vec::new(), Vec::new());
        let mut note = |what: String, r: Result<(), super::ControlError>| match r {
            Ok(()) => applied.push(what),
            Err(e) => failed.push(format!("{what}: {e}")),
        };
        // Away first (services, policies and sets, routes, neighbours, interfaces, networks),
        // then in (the other way).
        self.reload_named(old, new, &mut note, false);
        for r in old.route.iter().filter(|r| !new.route.contains(r)) {
            note(format!("route {} deleted", r.prefix), self.route(false, r));
        }
        for n in old.neighbor.iter().filter(|n| !new.neighbor.contains(n)) {
            note(
                format!("neighbor {} on {} deleted", n.ip, n.interface),
                self.neighbor(n, true),
            );
        }
        let (on, nn) = (old.interface_names(), new.interface_names());
        for name in on.iter().filter(|n| !nn.contains(n)) {
            note(
                format!("interface {name} deleted"),
                self.delete_interface(name),
            );
        }
        for n in old
            .network
            .iter()
            .filter(|n| !new.network.iter().any(|m| m.name == n.name))
        {
            note(
                format!("network {} deleted", n.name),
                self.network_del(&n.name),
            );
        }
        for n in new
            .network
            .iter()
            .filter(|n| !old.network.iter().any(|m| m.name == n.name))
        {
            note(
                format!("network {} added", n.name),
                self.network_add(n.clone()).map(|_| ()),
            );
        }
        let fresh = |name: &String| !on.contains(name);
        let memif = new.memif_names();
        for (spec, name) in new.interface.iter().zip(&memif) {
            if fresh(name) {
                note(
                    format!("interface {name} created"),
                    self.create_memif(spec).map(|_| ()),
                );
            }
        }
        for spec in &new.af_packet {
            let name = spec.name();
            if fresh(&name) {
                note(
                    format!("interface {name} created"),
                    self.create_af_packet(spec).map(|_| ()),
                );
            }
        }
        for spec in &new.af_xdp {
            let name = spec.name();
            if fresh(&name) {
                note(
                    format!("interface {name} created"),
                    self.create_af_xdp(spec).map(|_| ()),
                );
            }
        }
        for n in new.neighbor.iter().filter(|n| !old.neighbor.contains(n)) {
            note(
                format!("neighbor {} on {} added", n.ip, n.interface),
                self.neighbor(n, false),
            );
        }
        for r in new.route.iter().filter(|r| !old.route.contains(r)) {
            note(format!("route {} added", r.prefix), self.route(true, r));
        }
        self.reload_named(old, new, &mut note, true);
        self.routes_changed();
        self.after_rib_change();
        if failed.is_empty() {
            Reloaded::Applied(applied)
        } else {
            Reloaded::Partly { applied, failed }
        }
    }
}

impl Control {
    /// Services, address sets and policies, which are kept by name: with `add` false, those
    /// `new` no longer has are deleted (services first: a network cannot go while it has
    /// them); with `add` true, those new or changed are (re)added (sets before the policies
    /// that name them, services last).
    fn reload_named(
        &mut self,
        old: &Config,
        new: &Config,
        note: &mut impl FnMut(String, Result<(), super::ControlError>),
        add: bool,
    ) {
        if !add {
            for s in gone(&old.service, &new.service, |s| &s.name) {
                note(format!("service {s} deleted"), self.service_del(&s));
            }
            for p in gone(&old.policy, &new.policy, |p| &p.name) {
                note(format!("policy {p} deleted"), self.policy_del(&p));
            }
            for s in gone(&old.address_set, &new.address_set, |s| &s.name) {
                note(format!("address set {s} deleted"), self.set_del(&s));
            }
            return;
        }
        for s in new
            .address_set
            .iter()
            .filter(|s| !old.address_set.contains(s))
        {
            note(
                format!("address set {} set", s.name),
                self.set_add(s.clone()),
            );
        }
        for p in new.policy.iter().filter(|p| !old.policy.contains(p)) {
            note(format!("policy {} set", p.name), self.policy_add(p.clone()));
        }
        for s in new.service.iter().filter(|s| !old.service.contains(s)) {
            note(
                format!("service {} set", s.name),
                self.service_add(s.clone()),
            );
        }
    }
}

/// The names of the items of `old` that `new` has none of.
fn gone<T>(old: &[T], new: &[T], name: fn(&T) -> &String) -> Vec<String> {
    old.iter()
        .map(name)
        .filter(|n| !new.iter().any(|m| name(m) == *n))
        .cloned()
        .collect()
}
