//! Routes, and the VXLAN tunnels some of them go through.
//!
//! A route in a network whose next hop lies outside the network's ranges names a remote VTEP:
//! it goes through the tunnel to that VTEP with the network's VNI, which is created by the
//! first such route and deleted with its last (VPP's model, where tunnels are explicit, makes
//! the agent track them; here a route is all it says). A tunnel is an interface in the
//! network's VRF (`vxlan_tunnelN`): an Ethernet segment on which the network's addresses are
//! on-link, so the route is a connected-style glean that ARPs across the tunnel for each
//! destination (answered by the remote node's proxy, or by a Linux VTEP's own stack). Its outer
//! source is the network's uplink's first address, its MTU the uplink's minus 50.

use std::net::Ipv4Addr;
use std::sync::Arc;

use api::{Ipv4Prefix, RouteSpec, TunnelInfo, Via};
use nodes::{Device, IfConfig, TunnelCounters, VxlanMap, VxlanTunnel};

use super::interfaces::{Dev, IfCounters, Iface, Source, put};
use super::{Control, ControlError};

/// What only a tunnel has (its encapsulation is in its `IfConfig`).
pub(super) struct TunnelDev {
    pub(super) vtep: Ipv4Addr,
    pub(super) vni: u32,
    /// The interface its packets leave through.
    pub(super) uplink: u32,
    /// Static routes through it.
    pub(super) routes: usize,
}

impl Control {
    /// `ip route add|del`, in a table or a network's VRF.
    pub(super) fn route(&mut self, add: bool, r: &RouteSpec) -> Result<(), ControlError> {
        let (table, net) = match &r.network {
            None => (r.table, None),
            Some(n) => {
                if r.table != 0 {
                    return Err(ControlError::Network(format!(
                        "route {}: table {} and network {n} both set: a network's routes are in its VRF",
                        r.prefix, r.table
                    )));
                }
                let k = self.network_index(n)?;
                (self.networks[k].table, Some(k))
            }
        };
        let key = (table, r.prefix.network());
        if !add {
            self.rib.del_route(table, r.prefix)?;
            if let Some(t) = self.tunnel_routes.remove(&key) {
                self.release_tunnel(t);
            }
            return Ok(());
        }
        let vtep = match (net, r.via, &r.interface) {
            (Some(k), Via::Address(nh), None) if !self.networks[k].spec.contains(nh) => {
                Some((k, nh))
            }
            _ => None,
        };
        let Some((k, nh)) = vtep else {
            let iface = r
                .interface
                .as_deref()
                .map(|n| self.iface_index(n))
                .transpose()?;
            self.rib
                .add_route(&self.ifconfigs, table, r.prefix, r.via, iface)?;
            if let Some(t) = self.tunnel_routes.remove(&key) {
                self.release_tunnel(t);
            }
            return Ok(());
        };
        let t = self.tunnel_to(k, nh)?;
        // A prefix through a tunnel is resolved host by host inside it (glean); a host route
        // (a node agent's route to one remote pod) has that host for next hop, so the
        // neighbour learned in the tunnel resolves the route itself (a learned neighbour's
        // own host route would not be installed over a configured /32).
        let inner = if r.prefix.len == 32 {
            r.prefix.addr
        } else {
            Ipv4Addr::UNSPECIFIED
        };
        let added = self.rib.add_route(
            &self.ifconfigs,
            table,
            r.prefix,
            Via::Address(inner),
            Some(t),
        );
        if let Err(e) = added {
            self.release_tunnel_if_unused(t);
            return Err(e.into());
        }
        // The same route again (a reload, an agent's reconcile) holds its tunnel once.
        match self.tunnel_routes.insert(key, t) {
            Some(old) if old == t => {}
            old => {
                if let Some(Dev::Vxlan(d)) = self.ifaces[t as usize].as_mut().map(|i| &mut i.dev) {
                    d.routes += 1;
                }
                if let Some(old) = old {
                    self.release_tunnel(old);
                }
            }
        }
        Ok(())
    }

    /// The tunnel of network `k` to `vtep`, created if it does not exist.
    fn tunnel_to(&mut self, k: usize, vtep: Ipv4Addr) -> Result<u32, ControlError> {
        let net = self.networks[k].clone();
        if let Some(i) = self.ifaces.iter().position(|i| {
            i.as_ref()
                .and_then(Iface::tunnel)
                .is_some_and(|t| t.vtep == vtep && t.vni == net.spec.vni)
        }) {
            return Ok(i as u32);
        }
        let refuse = |m: String| Err(ControlError::Network(m));
        let Some(up_name) = &net.spec.uplink else {
            return refuse(format!(
                "network {} has no uplink: {vtep} is outside its ranges, so it would be a remote VTEP",
                net.spec.name
            ));
        };
        let uplink = self.iface_index(up_name)?;
        if self.iface(uplink).tunnel().is_some() {
            return refuse(format!("uplink {up_name} is itself a tunnel"));
        }
        let up = &self.ifconfigs[uplink as usize];
        if self
            .ifconfigs
            .iter()
            .any(|c| c.table == up.table && c.owns(vtep))
        {
            return refuse(format!(
                "{vtep} is one of this node's own addresses: a tunnel to it would loop"
            ));
        }
        let Some(&(src, _)) = up.addresses.first() else {
            return refuse(format!(
                "uplink {up_name} of network {} has no address: its first address is our VTEP",
                net.spec.name
            ));
        };
        let (underlay, up_mtu) = (up.vrf, up.mtu);
        let index = self.free_iface_slot() as u32;
        let taken: Vec<&str> = self
            .ifaces
            .iter()
            .flatten()
            .map(|i| i.name.as_str())
            .collect();
        let name = (0..)
            .map(|n| format!("vxlan_tunnel{n}"))
            .find(|n| !taken.contains(&n.as_str()))
            .expect("fewer interfaces than numbers");
        let counters = Arc::new(TunnelCounters::default());
        let mut c = IfConfig::new(
            api::vxlan_tunnel_mac(src, net.spec.vni, vtep),
            self.rib.slot(net.table).expect("a network's table exists"),
        );
        c.table = net.table;
        c.mtu = up_mtu.saturating_sub(nodes::VXLAN_OVERHEAD);
        c.device = Device::Vxlan(VxlanTunnel {
            vni: net.spec.vni,
            src,
            dst: vtep,
            underlay,
            uplink,
            df: net.spec.df,
            ranges: net.spec.ranges.iter().map(|r| (r.addr, r.len)).collect(),
            counters: counters.clone(),
        });
        self.install_ifconfig(index, c);
        let mut iface = Iface::new(
            name.clone(),
            Some(net.spec.name.clone()),
            Dev::Vxlan(TunnelDev {
                vtep,
                vni: net.spec.vni,
                uplink,
                routes: 0,
            }),
        );
        iface.connected = true;
        iface.counters = IfCounters {
            rx_queues: 0,
            tx_queues: 0,
            sources: vec![Source::Tunnel(counters)],
        };
        put(&mut self.ifaces, index as usize, iface);
        self.publish_interfaces();
        self.publish_vxlan();
        tracing::info!(tunnel = %name, network = %net.spec.name, vni = net.spec.vni, %src, %vtep, "vxlan tunnel created");
        Ok(index)
    }

    /// One route through tunnel `t` went; the tunnel goes with its last.
    fn release_tunnel(&mut self, t: u32) {
        if let Some(Dev::Vxlan(d)) = self.ifaces[t as usize].as_mut().map(|i| &mut i.dev) {
            d.routes = d.routes.saturating_sub(1);
        }
        self.release_tunnel_if_unused(t);
    }

    fn release_tunnel_if_unused(&mut self, t: u32) {
        let unused = self.ifaces[t as usize]
            .as_ref()
            .and_then(Iface::tunnel)
            .is_some_and(|d| d.routes == 0);
        if unused {
            let name = self.iface(t).name.clone();
            if let Err(e) = self.delete_interface(&name) {
                tracing::warn!(tunnel = %name, "cannot delete unused tunnel: {e}");
            }
        }
    }

    /// The tunnel side of `delete interface` (the tunnel's slot is already free): its routes
    /// are forgotten and workers stop accepting its packets.
    pub(super) fn unregister_tunnel(&mut self, index: u32) {
        self.tunnel_routes.retain(|_, t| *t != index);
        self.publish_vxlan();
    }

    /// Deletes every tunnel of network `name` (before its VRF goes).
    pub(super) fn delete_tunnels_of(&mut self, name: &str) {
        let names: Vec<String> = self
            .ifaces
            .iter()
            .flatten()
            .filter(|i| i.tunnel().is_some() && i.network.as_deref() == Some(name))
            .map(|i| i.name.clone())
            .collect();
        for n in names {
            let _ = self.delete_interface(&n);
        }
    }

    /// The tunnels leaving through interface `i`.
    pub(super) fn tunnels_over(&self, i: u32) -> Vec<String> {
        self.ifaces
            .iter()
            .flatten()
            .filter(|f| f.tunnel().is_some_and(|t| t.uplink == i))
            .map(|f| f.name.clone())
            .collect()
    }

    /// Follows a change of uplink `i` (MTU, address, table) in the tunnels over it.
    pub(super) fn refresh_tunnels(&mut self, i: u32) {
        let up = &self.ifconfigs[i as usize];
        let (mtu, src, underlay) = (
            up.mtu.saturating_sub(nodes::VXLAN_OVERHEAD),
            up.addresses.first().map(|a| a.0),
            up.vrf,
        );
        let over: Vec<u32> = (0..self.ifaces.len() as u32)
            .filter(|&t| {
                self.ifaces[t as usize]
                    .as_ref()
                    .and_then(Iface::tunnel)
                    .is_some_and(|d| d.uplink == i)
            })
            .collect();
        for t in over {
            let c = &mut self.ifconfigs[t as usize];
            c.mtu = mtu;
            if let Device::Vxlan(v) = &mut c.device {
                v.underlay = underlay;
                if let Some(s) = src {
                    v.src = s;
                }
            }
            self.rib.set_interface_mtu(t, mtu);
        }
        self.publish_interfaces();
        self.publish_vxlan();
    }

    /// What `vxlan4-input` accepts: every tunnel by (remote VTEP, VNI), every network's VNI.
    pub(super) fn publish_vxlan(&self) {
        let map = VxlanMap {
            tunnels: self
                .ifaces
                .iter()
                .enumerate()
                .filter_map(|(k, i)| {
                    let t = i.as_ref()?.tunnel()?;
                    Some(((t.vtep, t.vni), k as u32))
                })
                .collect(),
            vnis: self.networks.iter().map(|n| n.spec.vni).collect(),
            vteps: {
                let mut v: Vec<(u32, Ipv4Addr)> = self
                    .ifconfigs
                    .iter()
                    .filter_map(|c| c.tunnel().map(|t| (t.underlay, t.src)))
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            },
        };
        self.shared.vxlan.store(Arc::new(map));
    }

    /// `show vxlan tunnel`.
    pub(super) fn tunnel_infos(&self) -> Vec<TunnelInfo> {
        self.ifaces
            .iter()
            .enumerate()
            .filter_map(|(k, i)| {
                let f = i.as_ref()?;
                let d = f.tunnel()?;
                let c = &self.ifconfigs[k];
                let info = self.interface_info(k as u32);
                Some(TunnelInfo {
                    name: f.name.clone(),
                    network: f.network.clone().unwrap_or_default(),
                    vni: d.vni,
                    src: c.tunnel().map_or(Ipv4Addr::UNSPECIFIED, |t| t.src),
                    dst: d.vtep,
                    uplink: self.name_of(d.uplink).to_string(),
                    mtu: c.mtu,
                    routes: d.routes,
                    rx_packets: info.rx_packets,
                    rx_bytes: info.rx_bytes,
                    tx_packets: info.tx_packets,
                    tx_bytes: info.tx_bytes,
                })
            })
            .collect()
    }
}

/// The key routes through tunnels are remembered by.
pub(super) type RouteKey = (u32, Ipv4Prefix);
