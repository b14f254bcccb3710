//! Kernel uplinks: AF_PACKET (a kernel interface taken over through PACKET_MMAP rings, the
//! receive queues joined in one fanout group) and AF_XDP (an XSK and UMEM per queue, our XDP
//! program on the interface). One queue pair per worker at least: a transmit queue has one
//! producer, so each worker needs its own.

use api::{AfPacketSpec, AfXdpSpec, DeviceInfo, XdpMode};
use nodes::{Device, IfConfig};
use uplink::nodes::QueueCommand;
use uplink::{AfPacket, AfPacketConfig, AfXdp, AfXdpConfig, XskMode};

use super::interfaces::{Dev, DevView, IfCounters, Iface, Source, put};
use super::{Control, ControlError};

/// What only an AF_XDP interface has.
pub(super) struct AfXdpDev {
    host_if: String,
    queues: u16,
    mode: String,
    attach: String,
    pub(super) host_mtu: u16,
}

/// What only an AF_PACKET interface has.
pub(super) struct AfPacketDev {
    host_if: String,
    queues: u16,
    /// The host interface's MTU when it was opened: the most ours may be.
    pub(super) host_mtu: u16,
}

impl Control {
    /// `create interface af-packet`: opens the host interface's rings and hands its queues to
    /// the workers at once (there is no peer to wait for). Returns (name, index).
    pub(super) fn create_af_packet(
        &mut self,
        spec: &AfPacketSpec,
    ) -> Result<(String, u32), ControlError> {
        let refuse = |m: String| Err(ControlError::Interface(m));
        if let Some(p) = spec.problems().into_iter().next() {
            return refuse(p);
        }
        let name = spec.name();
        if self.ifaces.iter().flatten().any(|i| i.name == name) {
            return refuse(format!("an interface named {name:?} exists already"));
        }
        if self
            .ifaces
            .iter()
            .flatten()
            .any(|i| matches!(&i.dev, Dev::AfPacket(d) if d.host_if == spec.host_if))
        {
            return refuse(format!("host-if {} is in use already", spec.host_if));
        }
        self.rib.ensure_table(spec.table)?;
        for a in &spec.addresses {
            self.rib.check_new_address(spec.table, a.addr)?;
        }
        let nworkers = self.workers.len() as u16;
        let queues = spec.queues.unwrap_or(nworkers).max(nworkers);
        let dev = AfPacket::open(
            &spec.host_if,
            AfPacketConfig {
                queues,
                ..AfPacketConfig::default()
            },
        )
        .map_err(|e| ControlError::Interface(format!("af-packet {}: {e}", spec.host_if)))?;
        let mac = spec.mac.map_or(dev.mac(), |m| m.0);
        let host_mtu = u16::try_from(dev.mtu()).unwrap_or(u16::MAX);
        let mtu = spec.mtu.unwrap_or(host_mtu);
        if mtu > host_mtu {
            return refuse(format!(
                "mtu {mtu} is over {}'s own ({host_mtu}): the kernel would drop what it cannot send",
                spec.host_if
            ));
        }
        let index = self.free_iface_slot() as u32;
        let mut c = IfConfig::new(mac, self.rib.slot(spec.table).expect("ensured above"));
        c.table = spec.table;
        c.up = spec.up;
        c.mtu = mtu;
        c.device = Device::AfPacket;
        self.install_ifconfig(index, c);
        let mut iface = Iface::new(
            name.clone(),
            None,
            Dev::AfPacket(AfPacketDev {
                host_if: spec.host_if.clone(),
                queues,
                host_mtu,
            }),
        );
        iface.placement = spec.rx_placement.clone();
        iface.connected = true;
        let pairs = dev.into_queues();
        let mut counters = IfCounters {
            rx_queues: pairs.len(),
            tx_queues: pairs.len(),
            sources: Vec::new(),
        };
        let mut rx_for = Vec::new();
        for (q, (rx, tx)) in pairs.into_iter().enumerate() {
            counters.sources.push(Source::AfPacketRx(rx.counters()));
            counters.sources.push(Source::AfPacketTx(tx.counters()));
            // Worker w transmits on queue w (a queue has one producer); the rest go unused.
            if let Some(w) = self.workers.get(q) {
                let _ = w.afp_tx.send(QueueCommand::Tx {
                    ifindex: index,
                    queue: tx,
                });
                w.kick();
            }
            rx_for.push(rx);
        }
        iface.counters = counters;
        put(&mut self.ifaces, index as usize, iface);
        for (q, rx) in rx_for.into_iter().enumerate() {
            let w = self.worker_for(self.iface(index), q);
            let _ = self.workers[w].afp_rx.send(QueueCommand::Rx {
                ifindex: index,
                queue: rx,
            });
            self.workers[w].kick();
        }
        for &a in &spec.addresses {
            self.address(index, a, false)?;
        }
        self.publish_interfaces();
        tracing::info!(interface = %name, host_if = %spec.host_if, queues, mtu, "af-packet interface created");
        Ok((name, index))
    }

    /// Refuses a host interface another uplink has already.
    fn check_host_if(&self, host_if: &str) -> Result<(), ControlError> {
        let used = self.ifaces.iter().flatten().any(|i| match &i.dev {
            Dev::AfPacket(d) => d.host_if == host_if,
            Dev::AfXdp(d) => d.host_if == host_if,
            _ => false,
        });
        if used {
            return Err(ControlError::Interface(format!(
                "host-if {host_if} is in use already"
            )));
        }
        Ok(())
    }

    /// `create interface af-xdp`: loads our XDP program on the host interface, opens an XSK
    /// per queue and hands the queues to the workers. Returns (name, index).
    pub(super) fn create_af_xdp(
        &mut self,
        spec: &AfXdpSpec,
    ) -> Result<(String, u32), ControlError> {
        let refuse = |m: String| Err(ControlError::Interface(m));
        if let Some(p) = spec.problems().into_iter().next() {
            return refuse(p);
        }
        let name = spec.name();
        if self.ifaces.iter().flatten().any(|i| i.name == name) {
            return refuse(format!("an interface named {name:?} exists already"));
        }
        self.check_host_if(&spec.host_if)?;
        self.rib.ensure_table(spec.table)?;
        for a in &spec.addresses {
            self.rib.check_new_address(spec.table, a.addr)?;
        }
        let nworkers = self.workers.len() as u16;
        let queues = spec.queues.unwrap_or(nworkers).max(nworkers);
        let dev = AfXdp::open(
            &spec.host_if,
            AfXdpConfig {
                queues,
                mode: match spec.mode {
                    XdpMode::Auto => XskMode::Auto,
                    XdpMode::Copy => XskMode::Copy,
                    XdpMode::ZeroCopy => XskMode::ZeroCopy,
                },
                ..AfXdpConfig::default()
            },
        )
        .map_err(|e| ControlError::Interface(format!("af-xdp {}: {e}", spec.host_if)))?;
        let mac = spec.mac.map_or(dev.mac(), |m| m.0);
        let host_mtu = u16::try_from(dev.mtu()).unwrap_or(u16::MAX);
        let mtu = spec.mtu.unwrap_or(host_mtu);
        if mtu > host_mtu {
            return refuse(format!(
                "mtu {mtu} is over {}'s own ({host_mtu}): the kernel would drop what it cannot send",
                spec.host_if
            ));
        }
        let (mode, attach) = (dev.mode().to_string(), dev.attach_mode().to_string());
        let index = self.free_iface_slot() as u32;
        let mut c = IfConfig::new(mac, self.rib.slot(spec.table).expect("ensured above"));
        c.table = spec.table;
        c.up = spec.up;
        c.mtu = mtu;
        c.device = Device::AfXdp;
        self.install_ifconfig(index, c);
        let mut iface = Iface::new(
            name.clone(),
            None,
            Dev::AfXdp(AfXdpDev {
                host_if: spec.host_if.clone(),
                queues,
                mode: mode.clone(),
                attach: attach.clone(),
                host_mtu,
            }),
        );
        iface.placement = spec.rx_placement.clone();
        iface.connected = true;
        let pairs = dev.into_queues();
        let mut counters = IfCounters {
            rx_queues: pairs.len(),
            tx_queues: pairs.len(),
            sources: Vec::new(),
        };
        let mut rx_for = Vec::new();
        for (q, (rx, tx)) in pairs.into_iter().enumerate() {
            counters.sources.push(Source::AfXdpRx(rx.counters()));
            counters.sources.push(Source::AfXdpTx(tx.counters()));
            if let Some(w) = self.workers.get(q) {
                let _ = w.xdp_tx.send(uplink::xdp_nodes::QueueCommand::Tx {
                    ifindex: index,
                    queue: tx,
                });
                w.kick();
            }
            rx_for.push(rx);
        }
        iface.counters = counters;
        put(&mut self.ifaces, index as usize, iface);
        for (q, rx) in rx_for.into_iter().enumerate() {
            let w = self.worker_for(self.iface(index), q);
            let _ = self.workers[w]
                .xdp_rx
                .send(uplink::xdp_nodes::QueueCommand::Rx {
                    ifindex: index,
                    queue: rx,
                });
            self.workers[w].kick();
        }
        for &a in &spec.addresses {
            self.address(index, a, false)?;
        }
        self.publish_interfaces();
        tracing::info!(interface = %name, host_if = %spec.host_if, queues, %mode, %attach, mtu, "af-xdp interface created");
        Ok((name, index))
    }

    pub(super) fn af_xdp_view(i: &Iface, d: &AfXdpDev) -> DevView {
        DevView {
            device: DeviceInfo::AfXdp {
                host_if: d.host_if.clone(),
                mode: d.mode.clone(),
                attach: d.attach.clone(),
            },
            peer: None,
            rx_queues: d.queues,
            tx_queues: i.counters.tx_queues as u16,
            connects: 0,
            disconnects: 0,
            last_disconnect_reason: None,
        }
    }

    pub(super) fn af_packet_view(i: &Iface, d: &AfPacketDev) -> DevView {
        DevView {
            device: DeviceInfo::AfPacket {
                host_if: d.host_if.clone(),
            },
            peer: None,
            rx_queues: d.queues,
            tx_queues: i.counters.tx_queues as u16,
            connects: 0,
            disconnects: 0,
            last_disconnect_reason: None,
        }
    }
}
