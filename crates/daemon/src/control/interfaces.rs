//! Interfaces of every kind (memif, VXLAN tunnels): their slots, addresses, table, MTU and
//! state, deleting them, and their counters. Each kind's own life is in its module
//! ([`super::memif`], [`super::tunnels`]).

use std::sync::Arc;

use api::{DeviceInfo, InterfaceInfo, Ipv4Prefix, NeighborSpec};
use memif::queue::QueueCounters;
use nodes::{IfConfig, TunnelCounters};

use super::memif::MemifDev;
use super::taps::TapDev;
use super::tunnels::TunnelDev;
use super::uplinks::{AfPacketDev, AfXdpDev};
use super::{Control, ControlError};

/// Where an interface's packet counters live.
pub(super) enum Source {
    MemifRx(Arc<QueueCounters>),
    MemifTx(Arc<QueueCounters>),
    Tunnel(Arc<TunnelCounters>),
    AfPacketRx(Arc<uplink::RxCounters>),
    AfPacketTx(Arc<uplink::TxCounters>),
    AfXdpRx(Arc<uplink::af_xdp::RxCounters>),
    AfXdpTx(Arc<uplink::af_xdp::TxCounters>),
    TapRx(Arc<uplink::tap::RxCounters>),
    TapTx(Arc<uplink::tap::TxCounters>),
}

/// Counters of one connection's queues (or of a tunnel).
#[derive(Default)]
pub(super) struct IfCounters {
    pub(super) rx_queues: usize,
    pub(super) tx_queues: usize,
    pub(super) sources: Vec<Source>,
}

#[derive(Default, Clone, Copy)]
pub(super) struct Totals {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    rx_errors: u64,
    tx_no_room: u64,
    rx_no_buffer: u64,
    tx_ring_full: u64,
    interrupts: u64,
    tx_super: [u64; 3],
}

impl Totals {
    fn of(c: &IfCounters) -> Totals {
        let mut t = Totals::default();
        for src in &c.sources {
            match src {
                Source::MemifRx(q) => {
                    let s = q.snapshot();
                    t.rx_packets += s.packets;
                    t.rx_bytes += s.bytes;
                    t.rx_errors += s.drop_bad_desc + s.drop_oversize;
                    t.rx_no_buffer += s.no_buffer;
                    t.interrupts += s.interrupts_received + s.interrupts_sent;
                }
                Source::MemifTx(q) => {
                    let s = q.snapshot();
                    t.tx_packets += s.packets;
                    t.tx_bytes += s.bytes;
                    t.tx_no_room += s.tx_no_room;
                    t.tx_ring_full += s.ring_full;
                    t.interrupts += s.interrupts_received + s.interrupts_sent;
                }
                Source::AfPacketRx(q) => {
                    let s = q.snapshot();
                    t.rx_packets += s.packets;
                    t.rx_bytes += s.bytes;
                    t.rx_errors += s.no_buffer + s.truncated + s.bad_frame + s.kernel_drops;
                    t.rx_no_buffer += s.no_buffer;
                }
                Source::AfPacketTx(q) => {
                    let s = q.snapshot();
                    t.tx_packets += s.packets;
                    t.tx_bytes += s.bytes;
                    t.tx_no_room += s.tx_no_room;
                    t.tx_ring_full += s.ring_full;
                    let super_ = [s.gso_sends, s.gso_segments, s.gso_refused];
                    t.tx_super = std::array::from_fn(|k| t.tx_super[k] + super_[k]);
                }
                Source::AfXdpRx(q) => {
                    let s = q.snapshot();
                    t.rx_packets += s.packets;
                    t.rx_bytes += s.bytes;
                    // `fill_empty` is not added: the frames it stands for are in
                    // `kernel_drops` already.
                    t.rx_errors += s.no_buffer + s.bad_desc + s.kernel_drops + s.rx_ring_full;
                    t.rx_no_buffer += s.no_buffer;
                }
                Source::AfXdpTx(q) => {
                    let s = q.snapshot();
                    t.tx_packets += s.packets;
                    t.tx_bytes += s.bytes;
                    t.tx_no_room += s.tx_no_room;
                    t.tx_ring_full += s.ring_full;
                }
                Source::TapRx(q) => {
                    let s = q.snapshot();
                    t.rx_packets += s.packets;
                    t.rx_bytes += s.bytes;
                    t.rx_errors += s.no_buffer + s.gso + s.bad_frame + s.read_errors;
                    t.rx_no_buffer += s.no_buffer;
                }
                Source::TapTx(q) => {
                    let s = q.snapshot();
                    t.tx_packets += s.packets;
                    t.tx_bytes += s.bytes;
                    t.tx_no_room += s.tx_no_room;
                }
                Source::Tunnel(c) => {
                    let [rp, rb, tp, tb] = c.snapshot();
                    t.rx_packets += rp;
                    t.rx_bytes += rb;
                    t.tx_packets += tp;
                    t.tx_bytes += tb;
                }
            }
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
            rx_no_buffer: self.rx_no_buffer + b.rx_no_buffer,
            tx_ring_full: self.tx_ring_full + b.tx_ring_full,
            interrupts: self.interrupts + b.interrupts,
            tx_super: std::array::from_fn(|k| self.tx_super[k] + b.tx_super[k]),
        }
    }
}

pub(super) struct Iface {
    pub(super) name: String,
    /// The network it is attached to (its table is the network's).
    pub(super) network: Option<String>,
    /// Core per rx queue, as configured (empty: round robin over workers).
    pub(super) placement: Vec<usize>,
    /// memif: a peer is connected; a tunnel: always.
    pub(super) connected: bool,
    pub(super) counters: IfCounters,
    /// Counters of connections that ended, and the baseline `clear interfaces` set.
    pub(super) closed: Totals,
    baseline: Totals,
    pub(super) dev: Dev,
    /// The pod (container id) it belongs to, as its creator said.
    pub(super) pod: Option<String>,
}

/// The part of `show interface` each kind of interface fills in.
pub(super) struct DevView {
    pub(super) device: DeviceInfo,
    pub(super) peer: Option<String>,
    pub(super) rx_queues: u16,
    pub(super) tx_queues: u16,
    pub(super) connects: u64,
    pub(super) disconnects: u64,
    pub(super) last_disconnect_reason: Option<String>,
}

/// What only one kind of interface has.
pub(super) enum Dev {
    Memif(MemifDev),
    AfPacket(AfPacketDev),
    AfXdp(AfXdpDev),
    Tap(TapDev),
    Vxlan(TunnelDev),
}

impl Iface {
    pub(super) fn new(name: String, network: Option<String>, dev: Dev) -> Iface {
        Iface {
            name,
            network,
            placement: Vec::new(),
            connected: false,
            counters: IfCounters::default(),
            closed: Totals::default(),
            baseline: Totals::default(),
            dev,
            pod: None,
        }
    }

    /// `clear interfaces`: counters read from zero from now on.
    pub(super) fn clear_counters(&mut self) {
        self.baseline = self.closed.plus(Totals::of(&self.counters));
    }

    /// Keeps the counters of a connection that ended.
    pub(super) fn close_counters(&mut self) {
        self.closed = self.closed.plus(Totals::of(&self.counters));
        self.counters = IfCounters::default();
    }

    pub(super) fn memif(&self) -> Option<&MemifDev> {
        match &self.dev {
            Dev::Memif(m) => Some(m),
            _ => None,
        }
    }

    pub(super) fn tunnel(&self) -> Option<&TunnelDev> {
        match &self.dev {
            Dev::Vxlan(t) => Some(t),
            _ => None,
        }
    }
}

/// The first free slot of `v` (a deleted entry), or the end.
pub(super) fn free_slot<T>(v: &[Option<T>]) -> usize {
    v.iter().position(Option::is_none).unwrap_or(v.len())
}

/// Puts `x` in slot `at` of `v`: a free slot, or one past the end.
pub(super) fn put<T>(v: &mut Vec<Option<T>>, at: usize, x: T) {
    if at < v.len() {
        v[at] = Some(x);
    } else {
        v.push(Some(x));
    }
}

impl Control {
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

    /// `delete interface`: its routes, neighbours and addresses leave the RIB first (no packet
    /// is routed to it any more), then the workers drop its queues, then memif disconnects its
    /// peer; a socket left without interfaces is closed. The slot is reused by the next
    /// interface created. Other interfaces are not touched.
    pub(super) fn delete_interface(&mut self, name: &str) -> Result<(), ControlError> {
        let i = self.iface_index(name)?;
        let ix = i as usize;
        let over = self.tunnels_over(i);
        if !over.is_empty() {
            return Err(ControlError::Interface(format!(
                "{name} is the uplink of tunnels {}: delete the routes through them (or their networks) first",
                over.join(", ")
            )));
        }
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
        self.rib.forget_interface(i);
        let f = self.ifaces[ix].take().expect("found above");
        let marks = self.loop_marks();
        self.retiring.push((i, marks));
        match &f.dev {
            Dev::Memif(m) => self.remove_memif(m),
            // The workers close its sockets (detached above), the XDP program with the last;
            // a tap device goes with its last fd.
            Dev::AfPacket(_) | Dev::AfXdp(_) => {}
            Dev::Tap(t) => self.closing_taps.push((
                t.netns.as_deref().map(uplink::netns::netns_path),
                t.host_if_name.clone(),
                std::time::Instant::now(),
            )),
            Dev::Vxlan(_) => self.unregister_tunnel(i),
        }
        tracing::info!(
            interface = %f.name,
            static_routes_removed = statics,
            "interface deleted"
        );
        Ok(())
    }

    /// Every worker drops interface `ifindex`'s queues (and the peer memory they lent).
    pub(super) fn detach_queues(&self, ifindex: u32) {
        for w in &self.workers {
            w.detach(ifindex);
        }
    }

    /// Puts what the workers know of new interface `index` in place (a reused slot or a new
    /// one) and tells the RIB its MAC and MTU.
    pub(super) fn install_ifconfig(&mut self, index: u32, c: IfConfig) {
        self.rib.set_interface_mac(index, c.mac);
        self.rib.set_interface_mtu(index, c.mtu);
        if (index as usize) < self.ifconfigs.len() {
            self.ifconfigs[index as usize] = c;
        } else {
            self.ifconfigs.push(c);
        }
    }

    /// `set interface mtu`: the largest IPv4 packet interface `i` sends. A tunnel's follows its
    /// uplink's, 50 bytes less; changing an uplink's changes its tunnels'.
    pub(super) fn set_mtu(&mut self, i: u32, mtu: u16) -> Result<(), ControlError> {
        if let Some(p) = api::config::mtu_problem(Some(mtu)) {
            return Err(ControlError::Interface(p));
        }
        let host_mtu = match &self.iface(i).dev {
            Dev::AfPacket(d) => Some(d.host_mtu),
            Dev::AfXdp(d) => Some(d.host_mtu),
            Dev::Tap(d) => Some(d.host_mtu),
            _ => None,
        };
        if let Some(h) = host_mtu
            && mtu > h
        {
            return Err(ControlError::Interface(format!(
                "mtu {mtu} is over the host interface's ({h}): set it there first, then recreate {}",
                self.iface(i).name
            )));
        }
        if self.iface(i).tunnel().is_some() {
            return Err(ControlError::Interface(format!(
                "{} is a VXLAN tunnel: its MTU is its uplink's minus 50; set the uplink's",
                self.iface(i).name
            )));
        }
        self.ifconfigs[i as usize].mtu = mtu;
        self.rib.set_interface_mtu(i, mtu);
        self.refresh_tunnels(i);
        self.publish_interfaces();
        Ok(())
    }

    /// `set interface allowed-sources`: replaces the sources interface `i` takes packets from
    /// (`None`: no check). Workers see the new set with their next frame.
    pub(super) fn set_allowed_sources(
        &mut self,
        i: u32,
        sources: Option<&[Ipv4Prefix]>,
    ) -> Result<(), ControlError> {
        if self.iface(i).tunnel().is_some() {
            return Err(ControlError::Interface(format!(
                "{} is a VXLAN tunnel: the pods behind it are checked by their own node",
                self.iface(i).name
            )));
        }
        self.ifconfigs[i as usize].sources = sources.map(super::allowed_sources);
        self.publish_interfaces();
        Ok(())
    }

    pub(super) fn publish_interfaces(&self) {
        self.shared
            .interfaces
            .store(Arc::new(self.ifconfigs.clone()));
        // An interface a policy names, or a local service's backend, may have come or gone.
        self.publish_policies();
        self.routes_changed();
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
        self.refresh_tunnels(i);
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
            let host = Ipv4Prefix {
                addr: a.addr,
                len: 32,
            };
            for p in [a.network(), host] {
                if let Some(&tun) = self.tunnel_routes.get(&(t, p)) {
                    return Err(ControlError::Interface(format!(
                        "{p} in table {t} is a route through {}: delete it before adding {a}",
                        self.name_of(tun)
                    )));
                }
            }
            self.ifconfigs[i as usize].addresses.push((a.addr, a.len));
            self.rib.add_address(&self.ifconfigs, i, t, a)?;
        }
        self.publish_interfaces();
        self.refresh_tunnels(i);
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

    pub(super) fn interface_info(&self, i: u32) -> InterfaceInfo {
        let f = self.iface(i);
        let c = &self.ifconfigs[i as usize];
        let t = f.closed.plus(Totals::of(&f.counters));
        let b = f.baseline;
        let v = match &f.dev {
            Dev::Memif(m) => self.memif_view(f, m),
            Dev::AfPacket(d) => Self::af_packet_view(f, d),
            Dev::AfXdp(d) => Self::af_xdp_view(f, d),
            Dev::Tap(d) => Self::tap_view(f, d),
            Dev::Vxlan(tun) => DevView {
                device: DeviceInfo::Vxlan {
                    vni: tun.vni,
                    src: c
                        .tunnel()
                        .map_or(std::net::Ipv4Addr::UNSPECIFIED, |x| x.src),
                    dst: tun.vtep,
                    routes: tun.routes,
                },
                peer: None,
                rx_queues: 0,
                tx_queues: 0,
                connects: 0,
                disconnects: 0,
                last_disconnect_reason: None,
            },
        };
        InterfaceInfo {
            name: f.name.clone(),
            index: i,
            device: v.device,
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
            mtu: c.mtu,
            peer: v.peer,
            rx_queues: v.rx_queues,
            tx_queues: v.tx_queues,
            rx_packets: t.rx_packets - b.rx_packets,
            rx_bytes: t.rx_bytes - b.rx_bytes,
            tx_packets: t.tx_packets - b.tx_packets,
            tx_bytes: t.tx_bytes - b.tx_bytes,
            rx_errors: t.rx_errors - b.rx_errors,
            tx_no_room: t.tx_no_room - b.tx_no_room,
            rx_no_buffer: t.rx_no_buffer - b.rx_no_buffer,
            tx_ring_full: t.tx_ring_full - b.tx_ring_full,
            interrupts: t.interrupts - b.interrupts,
            tx_super_packets: t.tx_super[0] - b.tx_super[0],
            tx_super_packet_datagrams: t.tx_super[1] - b.tx_super[1],
            tx_super_packets_refused: t.tx_super[2] - b.tx_super[2],
            connects: v.connects,
            disconnects: v.disconnects,
            last_disconnect_reason: v.last_disconnect_reason,
            pod: f.pod.clone(),
            allowed_sources: c.sources.as_ref().map(|s| {
                s.prefixes()
                    .map(|(addr, len)| Ipv4Prefix { addr, len })
                    .collect()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    /// An AF_PACKET queue's super-packet counters reach the interface's totals, summed over
    /// its queues, and survive `plus` (a recreated interface's base).
    #[test]
    fn super_packets_are_summed_over_the_queues() {
        let queue = |sends, segments, refused| {
            let c = uplink::TxCounters::default();
            c.packets.store(segments + 1, Ordering::Relaxed);
            c.gso_sends.store(sends, Ordering::Relaxed);
            c.gso_segments.store(segments, Ordering::Relaxed);
            c.gso_refused.store(refused, Ordering::Relaxed);
            Source::AfPacketTx(Arc::new(c))
        };
        let c = IfCounters {
            rx_queues: 0,
            tx_queues: 2,
            sources: vec![queue(2, 90, 0), queue(1, 40, 3)],
        };
        let t = Totals::of(&c);
        assert_eq!((t.tx_packets, t.tx_super), (132, [3, 130, 3]));
        assert_eq!(t.plus(t).tx_super, [6, 260, 6]);
    }
}
