//! Network policies and address sets: kept by name, compiled per interface (by the names
//! each policy lists: an interface that comes later gets its policies when it is created),
//! published with a new epoch on every change so that established flows are judged again,
//! and the flows workers deny logged, rate-limited.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::{AddressSetInfo, InterfacePolicy, PolicyReport, PolicySpec};
use nodes::{Denied, Policies};
use policy::{Compiled, Direction, Policy, SetSpec, Sets};

use super::{Control, ControlError};

/// The policies (as stated, and as the policy crate reads them) and address sets, by name.
#[derive(Debug, Default)]
pub(super) struct Registry {
    policies: BTreeMap<String, (PolicySpec, Policy)>,
    sets: BTreeMap<String, SetSpec>,
}

/// Denied flows logged per second at most; the rest are counted and told with the next line.
const DENY_LINES_PER_SECOND: u32 = 20;

/// The rate limit of deny log lines.
#[derive(Debug)]
pub(super) struct DenyLog {
    window: Instant,
    lines: u32,
    held: u64,
}

impl Default for DenyLog {
    fn default() -> DenyLog {
        DenyLog {
            window: Instant::now(),
            lines: 0,
            held: 0,
        }
    }
}

impl Control {
    /// `policy add`: adds or replaces a policy applied to the interfaces named.
    pub(super) fn policy_add(&mut self, spec: PolicySpec) -> Result<(), ControlError> {
        if let Some(p) = spec.problems().into_iter().next() {
            return Err(ControlError::Service(format!("policy {}: {p}", spec.name)));
        }
        tracing::info!(policy = %spec.name, interfaces = spec.interfaces.len(), "policy set");
        let policy = spec.policy();
        self.policies
            .policies
            .insert(spec.name.clone(), (spec, policy));
        self.publish_policies();
        Ok(())
    }

    pub(super) fn policy_del(&mut self, name: &str) -> Result<(), ControlError> {
        if self.policies.policies.remove(name).is_none() {
            return Err(ControlError::Service(format!("no policy named {name:?}")));
        }
        tracing::info!(policy = %name, "policy deleted");
        self.publish_policies();
        Ok(())
    }

    /// `address-set add`: adds or replaces a named set of addresses.
    pub(super) fn set_add(&mut self, spec: SetSpec) -> Result<(), ControlError> {
        if let Some(p) = spec.problems().into_iter().next() {
            return Err(ControlError::Service(format!(
                "address set {}: {p}",
                spec.name
            )));
        }
        self.policies.sets.insert(spec.name.clone(), spec);
        self.publish_policies();
        Ok(())
    }

    pub(super) fn set_del(&mut self, name: &str) -> Result<(), ControlError> {
        if self.policies.sets.remove(name).is_none() {
            return Err(ControlError::Service(format!(
                "no address set named {name:?}"
            )));
        }
        self.publish_policies();
        Ok(())
    }

    /// The policies of interface `name`, in name order.
    fn policies_of(&self, name: &str) -> Vec<&Policy> {
        self.policies
            .policies
            .values()
            .filter(|(spec, _)| spec.interfaces.iter().any(|i| i == name))
            .map(|(_, p)| p)
            .collect()
    }

    /// Compiles every live interface's policies (counters carried over) and publishes them
    /// with a new epoch; then the VRFs that keep sessions.
    pub(super) fn publish_policies(&self) {
        let old = self.shared.policies.load_full();
        if self.policies.policies.is_empty() && old.by_if.iter().all(Option::is_none) {
            return;
        }
        let mut sets = Sets::new();
        for s in self.policies.sets.values() {
            sets.insert_spec(s);
        }
        let by_if = (0..self.ifaces.len() as u32)
            .map(|i| {
                let f = self.ifaces[i as usize].as_ref()?;
                let ps = self.policies_of(&f.name);
                if ps.is_empty() {
                    return None;
                }
                let prev = old.by_if.get(i as usize).and_then(Option::as_deref);
                Some(Arc::new(Compiled::build_with_counters(&ps, &sets, prev)))
            })
            .collect();
        let epoch = match old.epoch.wrapping_add(1) & ((1 << session::EPOCH_BITS) - 1) {
            0 => 1,
            e => e,
        };
        self.shared
            .policies
            .store(Arc::new(Policies { by_if, epoch }));
        self.publish_services();
    }

    /// The VRF slots of interfaces with policies (they keep sessions).
    pub(super) fn policy_vrfs(&self) -> Vec<u32> {
        let p = self.shared.policies.load();
        p.by_if
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .filter_map(|(i, _)| self.ifconfigs.get(i).map(|c| c.vrf))
            .collect()
    }

    /// `show policy`.
    pub(super) fn policy_report(&self) -> PolicyReport {
        let published = self.shared.policies.load();
        let interfaces = published
            .by_if
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let c = c.as_ref()?;
                let f = self.ifaces.get(i)?.as_ref()?;
                Some(InterfacePolicy {
                    interface: f.name.clone(),
                    policies: self
                        .policies_of(&f.name)
                        .iter()
                        .map(|p| p.name.clone())
                        .collect(),
                    ingress_isolated: c.isolated(Direction::Ingress),
                    egress_isolated: c.isolated(Direction::Egress),
                    counters: c.counters(),
                    warnings: c.warnings().to_vec(),
                })
            })
            .collect();
        PolicyReport {
            policies: self
                .policies
                .policies
                .values()
                .map(|(spec, _)| spec.clone())
                .collect(),
            sets: self
                .policies
                .sets
                .values()
                .map(|s| AddressSetInfo {
                    name: s.name.clone(),
                    members: s.members.len(),
                })
                .collect(),
            interfaces,
        }
    }

    /// Logs the flows workers denied, at most [`DENY_LINES_PER_SECOND`] a second; the rest
    /// are counted and told with the next line.
    pub(super) fn log_denied(&mut self) {
        let now = Instant::now();
        for _ in 0..1024 {
            let Ok(d) = self.denied.try_recv() else {
                break;
            };
            let log = &mut self.deny_log;
            if now.duration_since(log.window) >= Duration::from_secs(1) {
                (log.window, log.lines) = (now, 0);
            }
            if log.lines >= DENY_LINES_PER_SECOND {
                log.held += 1;
                continue;
            }
            log.lines += 1;
            let held = std::mem::take(&mut log.held);
            let interface = self
                .ifaces
                .get(d.ifindex as usize)
                .and_then(Option::as_ref)
                .map_or_else(|| format!("#{}", d.ifindex), |f| f.name.clone());
            let policies: Vec<String> = self
                .policies_of(&interface)
                .iter()
                .map(|p| p.name.clone())
                .collect();
            tracing::warn!(
                interface = %interface,
                direction = if d.ingress { "ingress" } else { "egress" },
                flow = %flow(&d),
                established = d.established,
                policies = %policies.join(","),
                not_logged_before = held,
                "flow denied by policy: no rule of the interface's policies allows it"
            );
        }
    }
}

/// `tcp 10.1.0.5:40000 -> 10.1.0.6:80`.
fn flow(d: &Denied) -> String {
    let proto = match d.proto {
        6 => "tcp".to_string(),
        17 => "udp".to_string(),
        1 => "icmp".to_string(),
        132 => "sctp".to_string(),
        p => p.to_string(),
    };
    format!(
        "{proto} {}:{} -> {}:{}",
        Ipv4Addr::from(d.src),
        d.sport,
        Ipv4Addr::from(d.dst),
        d.dport
    )
}
