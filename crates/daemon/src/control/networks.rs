//! Networks: a name, a VNI and address ranges, each owning a VRF on this node that is
//! allocated with it and freed with it. Pod interfaces attach to a network by name; their
//! addresses must lie in its ranges, and a network is not deleted while any are attached.

use api::{Ipv4Prefix, NetworkInfo, NetworkSpec};

use super::{Control, ControlError};

/// A network and the VRF it owns.
#[derive(Debug, Clone)]
pub(super) struct Network {
    pub(super) spec: NetworkSpec,
    pub(super) table: u32,
}

impl Control {
    /// `network add`: checks the spec, refuses a name or VNI in use, and allocates the lowest
    /// table id no interface, route or network uses.
    pub(super) fn network_add(&mut self, spec: NetworkSpec) -> Result<u32, ControlError> {
        let refuse = |m: String| Err(ControlError::Network(m));
        if let Some(p) = spec.problems().into_iter().next() {
            return refuse(format!("network {}: {p}", spec.name));
        }
        if self.networks.iter().any(|n| n.spec.name == spec.name) {
            return refuse(format!("a network named {:?} exists already", spec.name));
        }
        if let Some(n) = self.networks.iter().find(|n| n.spec.vni == spec.vni) {
            return refuse(format!(
                "vni {} is network {}'s already",
                spec.vni, n.spec.name
            ));
        }
        let in_use = |t: u32| {
            self.rib.has_table(t)
                || self.networks.iter().any(|n| n.table == t)
                || self
                    .ifaces
                    .iter()
                    .zip(&self.ifconfigs)
                    .any(|(i, c)| i.is_some() && c.table == t)
        };
        let Some(table) = (1..=u32::MAX).find(|&t| !in_use(t)) else {
            return refuse(format!("no table id left for network {}", spec.name));
        };
        self.rib.ensure_table(table)?;
        tracing::info!(network = %spec.name, vni = spec.vni, table, "network added");
        self.networks.push(Network { spec, table });
        self.publish_vxlan();
        Ok(table)
    }

    /// `network del`: refused while interfaces are attached (they are listed); the network's
    /// VRF goes with every route in it.
    pub(super) fn network_del(&mut self, name: &str) -> Result<(), ControlError> {
        let k = self.network_index(name)?;
        let services = self.services_in(self.networks[k].table);
        if !services.is_empty() {
            return Err(ControlError::Network(format!(
                "network {name} still has services: {} (delete them first)",
                services.join(", ")
            )));
        }
        let attached = self.attached_to(name);
        if !attached.is_empty() {
            return Err(ControlError::Network(format!(
                "network {name} still has interfaces: {} (delete them first)",
                attached.join(", ")
            )));
        }
        self.delete_tunnels_of(name);
        let n = self.networks.remove(k);
        let routes = self.rib.drop_table(n.table);
        self.publish_vxlan();
        tracing::info!(network = %name, table = n.table, routes, "network deleted");
        Ok(())
    }

    pub(super) fn network_index(&self, name: &str) -> Result<usize, ControlError> {
        self.networks
            .iter()
            .position(|n| n.spec.name == name)
            .ok_or_else(|| {
                ControlError::Network(format!(
                    "no network named {name:?} (have: {})",
                    self.networks
                        .iter()
                        .map(|n| n.spec.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    /// Refuses address `a` for an interface of network `name` unless one of its ranges holds it.
    pub(super) fn check_in_network(&self, name: &str, a: Ipv4Prefix) -> Result<(), ControlError> {
        if self.networks[self.network_index(name)?]
            .spec
            .contains(a.addr)
        {
            return Ok(());
        }
        Err(ControlError::Network(format!(
            "address {a} is outside network {name}'s ranges"
        )))
    }

    /// The names of the interfaces attached to network `name` (its tunnels are not: they go
    /// with it).
    fn attached_to(&self, name: &str) -> Vec<String> {
        self.ifaces
            .iter()
            .flatten()
            .filter(|i| i.tunnel().is_none() && i.network.as_deref() == Some(name))
            .map(|i| i.name.clone())
            .collect()
    }

    pub(super) fn network_infos(&self) -> Vec<NetworkInfo> {
        self.networks
            .iter()
            .map(|n| NetworkInfo {
                name: n.spec.name.clone(),
                vni: n.spec.vni,
                ranges: n.spec.ranges.clone(),
                table: n.table,
                interfaces: self.attached_to(&n.spec.name),
                uplink: n.spec.uplink.clone(),
                owner: n.spec.owner.clone(),
            })
            .collect()
    }
}
