//! Kernel uplinks: AF_PACKET (a kernel interface taken over through PACKET_MMAP rings, the
//! receive queues joined in one fanout group) and AF_XDP (an XSK and UMEM per queue, our XDP
//! program on the interface). Both open at once, with no peer to wait for, and hand their
//! queues to the workers: one queue pair per worker at least, since a transmit queue has one
//! producer and each worker needs its own.

use api::{AfPacketSpec, AfXdpSpec, DeviceInfo, Ipv4Prefix, RxRing, XdpMode};
use nodes::{Device, IfConfig};
use uplink::{AfPacket, AfPacketConfig, AfXdp, AfXdpConfig, XskMode};

use super::interfaces::{Dev, DevView, IfCounters, Iface, Source, put};
use super::{Control, ControlError};
use crate::worker::WorkerHandle;

/// What only an AF_PACKET interface has.
pub(super) struct AfPacketDev {
    host_if: String,
    queues: u16,
    /// The host interface's MTU when it was opened: the most ours may be.
    pub(super) host_mtu: u16,
}

/// What only an AF_XDP interface has.
pub(super) struct AfXdpDev {
    host_if: String,
    queues: u16,
    /// As the kernel gave them: `copy` or `zero-copy`; `driver` or `skb`.
    mode: String,
    attach: String,
    pub(super) host_mtu: u16,
}

/// What both kinds of uplink are created with.
struct UplinkSpec<'a> {
    kind: &'static str,
    name: String,
    host_if: &'a str,
    mac: Option<[u8; 6]>,
    mtu: Option<u16>,
    table: u32,
    up: bool,
    addresses: &'a [Ipv4Prefix],
    rx_placement: &'a [usize],
}

/// A device that is open, with its queue pairs and how to hand each to a worker.
struct Opened<R, T> {
    device: Device,
    mac: [u8; 6],
    host_mtu: u16,
    pairs: Vec<(R, T)>,
    /// The counters of one queue pair.
    sources: fn(&R, &T) -> [Source; 2],
    give_rx: fn(&WorkerHandle, u32, R),
    give_tx: fn(&WorkerHandle, u32, T),
}

impl Control {
    /// `create interface af-packet`. Returns (name, index).
    pub(super) fn create_af_packet(
        &mut self,
        spec: &AfPacketSpec,
    ) -> Result<(String, u32), ControlError> {
        let u = UplinkSpec {
            kind: "af-packet",
            name: spec.name(),
            host_if: &spec.host_if,
            mac: spec.mac.map(|m| m.0),
            mtu: spec.mtu,
            table: spec.table,
            up: spec.up,
            addresses: &spec.addresses,
            rx_placement: &spec.rx_placement,
        };
        let queues = self.check_uplink(&u, spec.problems(), spec.queues)?;
        let dev = AfPacket::open(
            &spec.host_if,
            AfPacketConfig {
                queues,
                rx_ring: spec.rx_ring.map(|r| match r {
                    RxRing::Frames => uplink::RxRing::Frames,
                    RxRing::Blocks => uplink::RxRing::Blocks { timeout_ms: 1 },
                }),
                udp_gso: spec.udp_gso,
                ..AfPacketConfig::default()
            },
        )
        .map_err(|e| ControlError::Interface(format!("af-packet {}: {e}", spec.host_if)))?;
        let host_mtu = u16::try_from(dev.mtu()).unwrap_or(u16::MAX);
        let opened = Opened {
            device: crate::devices::device::<uplink::nodes::AfPacketOutput>(),
            mac: dev.mac(),
            host_mtu,
            pairs: dev.into_queues(),
            sources: |r, t| {
                [
                    Source::AfPacketRx(r.counters()),
                    Source::AfPacketTx(t.counters()),
                ]
            },
            give_rx: |w, ifindex, queue| {
                let _ = w
                    .queues::<uplink::nodes::QueueCommand>()
                    .rx
                    .send(uplink::nodes::QueueCommand::Rx { ifindex, queue });
            },
            give_tx: |w, ifindex, queue| {
                let _ = w
                    .queues::<uplink::nodes::QueueCommand>()
                    .tx
                    .send(uplink::nodes::QueueCommand::Tx { ifindex, queue });
            },
        };
        let dev = Dev::AfPacket(AfPacketDev {
            host_if: spec.host_if.clone(),
            queues,
            host_mtu,
        });
        self.install_uplink(&u, opened, dev)
    }

    /// `create interface af-xdp`: loads our XDP program on the host interface and opens an
    /// XSK per queue. Returns (name, index).
    pub(super) fn create_af_xdp(
        &mut self,
        spec: &AfXdpSpec,
    ) -> Result<(String, u32), ControlError> {
        let u = UplinkSpec {
            kind: "af-xdp",
            name: spec.name(),
            host_if: &spec.host_if,
            mac: spec.mac.map(|m| m.0),
            mtu: spec.mtu,
            table: spec.table,
            up: spec.up,
            addresses: &spec.addresses,
            rx_placement: &spec.rx_placement,
        };
        let queues = self.check_uplink(&u, spec.problems(), spec.queues)?;
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
        let host_mtu = u16::try_from(dev.mtu()).unwrap_or(u16::MAX);
        let (mode, attach) = (dev.mode().to_string(), dev.attach_mode().to_string());
        tracing::info!(host_if = %spec.host_if, %mode, %attach, "af-xdp sockets bound");
        let opened = Opened {
            device: crate::devices::device::<uplink::xdp_nodes::AfXdpOutput>(),
            mac: dev.mac(),
            host_mtu,
            pairs: dev.into_queues(),
            sources: |r, t| [Source::AfXdpRx(r.counters()), Source::AfXdpTx(t.counters())],
            give_rx: |w, ifindex, queue| {
                let _ = w
                    .queues::<uplink::xdp_nodes::QueueCommand>()
                    .rx
                    .send(uplink::xdp_nodes::QueueCommand::Rx { ifindex, queue });
            },
            give_tx: |w, ifindex, queue| {
                let _ = w
                    .queues::<uplink::xdp_nodes::QueueCommand>()
                    .tx
                    .send(uplink::xdp_nodes::QueueCommand::Tx { ifindex, queue });
            },
        };
        let dev = Dev::AfXdp(AfXdpDev {
            host_if: spec.host_if.clone(),
            queues,
            mode,
            attach,
            host_mtu,
        });
        self.install_uplink(&u, opened, dev)
    }

    /// Refuses what cannot be created (the spec's own problems, a name or host interface in
    /// use, an address in use); the number of queues to open: at least one per worker.
    fn check_uplink(
        &mut self,
        u: &UplinkSpec<'_>,
        problems: Vec<String>,
        queues: Option<u16>,
    ) -> Result<u16, ControlError> {
        let refuse = |m: String| Err(ControlError::Interface(m));
        if let Some(p) = problems.into_iter().next() {
            return refuse(p);
        }
        if self.ifaces.iter().flatten().any(|i| i.name == u.name) {
            return refuse(format!("an interface named {:?} exists already", u.name));
        }
        let used = self.ifaces.iter().flatten().any(|i| match &i.dev {
            Dev::AfPacket(d) => d.host_if == u.host_if,
            Dev::AfXdp(d) => d.host_if == u.host_if,
            _ => false,
        });
        if used {
            return refuse(format!("host-if {} is in use already", u.host_if));
        }
        self.rib.ensure_table(u.table)?;
        for a in u.addresses {
            self.rib.check_new_address(u.table, a.addr)?;
        }
        let nworkers = self.workers.len() as u16;
        Ok(queues.unwrap_or(nworkers).max(nworkers))
    }

    /// Puts an opened uplink in place: its slot and `IfConfig`, its queues on the workers
    /// (worker w transmits on queue w; receive queues as placed), its addresses.
    fn install_uplink<R, T>(
        &mut self,
        u: &UplinkSpec<'_>,
        o: Opened<R, T>,
        dev: Dev,
    ) -> Result<(String, u32), ControlError> {
        let mtu = u.mtu.unwrap_or(o.host_mtu);
        if mtu > o.host_mtu {
            return Err(ControlError::Interface(format!(
                "mtu {mtu} is over {}'s own ({}): the kernel would drop what it cannot send",
                u.host_if, o.host_mtu
            )));
        }
        let index = self.free_iface_slot() as u32;
        let mut c = IfConfig::new(
            u.mac.unwrap_or(o.mac),
            self.rib.slot(u.table).expect("ensured by check_uplink"),
        );
        c.table = u.table;
        c.up = u.up;
        c.mtu = mtu;
        c.device = o.device;
        self.install_ifconfig(index, c);
        let mut iface = Iface::new(u.name.clone(), None, dev);
        iface.placement = u.rx_placement.to_vec();
        iface.connected = true;
        let mut counters = IfCounters {
            rx_queues: o.pairs.len(),
            tx_queues: o.pairs.len(),
            sources: Vec::new(),
        };
        let mut rx_for = Vec::new();
        for (q, (rx, tx)) in o.pairs.into_iter().enumerate() {
            counters.sources.extend((o.sources)(&rx, &tx));
            // A queue beyond the workers' count transmits nothing; it is closed with the rest.
            if let Some(w) = self.workers.get(q) {
                (o.give_tx)(w, index, tx);
                w.kick();
            }
            rx_for.push(rx);
        }
        iface.counters = counters;
        put(&mut self.ifaces, index as usize, iface);
        for (q, rx) in rx_for.into_iter().enumerate() {
            let w = self.worker_for(self.iface(index), q);
            (o.give_rx)(&self.workers[w], index, rx);
            self.workers[w].kick();
        }
        for &a in u.addresses {
            self.address(index, a, false)?;
        }
        self.publish_interfaces();
        tracing::info!(interface = %u.name, host_if = %u.host_if, kind = u.kind, mtu, "uplink created");
        Ok((u.name.clone(), index))
    }

    pub(super) fn af_packet_view(i: &Iface, d: &AfPacketDev) -> DevView {
        let device = DeviceInfo::AfPacket {
            host_if: d.host_if.clone(),
        };
        Self::uplink_view(i, d.queues, device)
    }

    pub(super) fn af_xdp_view(i: &Iface, d: &AfXdpDev) -> DevView {
        let device = DeviceInfo::AfXdp {
            host_if: d.host_if.clone(),
            mode: d.mode.clone(),
            attach: d.attach.clone(),
        };
        Self::uplink_view(i, d.queues, device)
    }

    fn uplink_view(i: &Iface, queues: u16, device: DeviceInfo) -> DevView {
        DevView {
            device,
            peer: None,
            rx_queues: queues,
            tx_queues: i.counters.tx_queues as u16,
            connects: 0,
            disconnects: 0,
            last_disconnect_reason: None,
        }
    }
}
