//! Tap interfaces for pods: a tap device created inside the pod's network namespace (see
//! `uplink::tap`), its queues handed to the workers like an uplink's (worker w transmits on
//! queue w, receive queues as placed), our side of it an interface routed in its table or
//! network like any other. Deleting the interface closes its fds, and the kernel removes the
//! device with the last one.

use api::{DeviceInfo, TapSpec};
use nodes::IfConfig;
use std::time::{Duration, Instant};
use uplink::netns::netns_path;

use uplink::tap::{Tap, TapConfig, TapError};

/// The longest a new tap waits for a deleted one of the same name to be closed.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

use super::interfaces::{Dev, DevView, IfCounters, Iface, Source, put};
use super::{Control, ControlError};

/// What only a tap interface has.
pub(super) struct TapDev {
    pub(super) host_if_name: String,
    /// As the user gave it (an `ip netns` name or a path).
    pub(super) netns: Option<String>,
    host_mac: [u8; 6],
    queues: u16,
    /// The device's MTU in the pod: the most ours may be.
    pub(super) host_mtu: u16,
}

impl Control {
    /// `create interface tap`. Returns (name, index).
    pub(super) fn create_tap(&mut self, spec: &TapSpec) -> Result<(String, u32), ControlError> {
        let refuse = |m: String| Err(ControlError::Interface(m));
        if let Some(p) = spec.problems().into_iter().next() {
            return refuse(p);
        }
        let name = match &spec.name {
            Some(n) => n.clone(),
            None => (0..)
                .map(|k| format!("tap{k}"))
                .find(|n| !self.ifaces.iter().flatten().any(|i| &i.name == n))
                .expect("a free name"),
        };
        if self.ifaces.iter().flatten().any(|i| i.name == name) {
            return refuse(format!("an interface named {name:?} exists already"));
        }
        let ns = spec.netns.as_deref().map(netns_path);
        let taken = self.ifaces.iter().flatten().any(|i| match &i.dev {
            Dev::Tap(t) => {
                t.host_if_name == spec.host_if_name
                    && t.netns.as_deref().map(netns_path) == ns.clone()
            }
            _ => false,
        });
        if taken {
            return refuse(format!(
                "tap {} in {} is ours already",
                spec.host_if_name,
                spec.netns.as_deref().unwrap_or("the daemon's namespace")
            ));
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
        for a in &spec.addresses {
            self.rib.check_new_address(table, a.addr)?;
        }
        // One queue per worker at least: each worker transmits on a queue of its own.
        let nworkers = self.workers.len() as u16;
        let queues = spec.queues.unwrap_or(nworkers).max(nworkers);
        let cfg = TapConfig {
            name: spec.host_if_name.clone(),
            netns: ns,
            queues,
            mtu: Some(spec.mtu.unwrap_or(1500)),
            mac: spec.host_mac.map(|m| m.0),
        };
        let tap = self.open_tap(&cfg)?;
        let (host_mac, host_mtu) = (tap.mac(), tap.mtu());
        let index = self.free_iface_slot() as u32;
        let mac = spec
            .mac
            .map_or([0x02, 0xfe, 0, 0, (index >> 8) as u8, index as u8], |m| m.0);
        let mut c = IfConfig::new(mac, self.rib.slot(table).expect("ensured above"));
        c.table = table;
        c.up = spec.up;
        c.mtu = host_mtu;
        c.device = crate::devices::device::<uplink::tap_nodes::TapOutput>();
        c.super_frames = true;
        c.sources = spec.allowed_sources.as_deref().map(super::allowed_sources);
        self.install_ifconfig(index, c);
        let mut iface = Iface::new(
            name.clone(),
            spec.network.clone(),
            Dev::Tap(TapDev {
                host_if_name: spec.host_if_name.clone(),
                netns: spec.netns.clone(),
                host_mac,
                queues,
                host_mtu,
            }),
        );
        iface.placement = spec.rx_placement.clone();
        iface.connected = true;
        iface.pod = spec.pod.clone();
        let pairs = tap.into_queues();
        let mut counters = IfCounters {
            rx_queues: pairs.len(),
            tx_queues: pairs.len(),
            sources: Vec::new(),
        };
        let mut rx_for = Vec::new();
        for (q, (rx, tx)) in pairs.into_iter().enumerate() {
            counters.sources.push(Source::TapRx(rx.counters().clone()));
            counters.sources.push(Source::TapTx(tx.counters().clone()));
            // A queue beyond the workers' count transmits nothing; it closes with the rest.
            if let Some(w) = self.workers.get(q) {
                let _ = w.queues::<uplink::tap_nodes::QueueCommand>().tx.send(
                    uplink::tap_nodes::QueueCommand::Tx {
                        ifindex: index,
                        queue: tx,
                    },
                );
                w.kick();
            }
            rx_for.push(rx);
        }
        iface.counters = counters;
        put(&mut self.ifaces, index as usize, iface);
        for (q, rx) in rx_for.into_iter().enumerate() {
            let w = self.worker_for(self.iface(index), q);
            let _ = self.workers[w]
                .queues::<uplink::tap_nodes::QueueCommand>()
                .rx
                .send(uplink::tap_nodes::QueueCommand::Rx {
                    ifindex: index,
                    queue: rx,
                });
            self.workers[w].kick();
        }
        for &a in &spec.addresses {
            self.address(index, a, false)?;
        }
        self.publish_interfaces();
        tracing::info!(
            interface = %name,
            host_if_name = %spec.host_if_name,
            netns = spec.netns.as_deref().unwrap_or("-"),
            pod = spec.pod.as_deref().unwrap_or("-"),
            queues,
            mtu = host_mtu,
            "tap created"
        );
        Ok((name, index))
    }

    /// Opens the device; if one of ours of that name was deleted there a moment ago, waits
    /// (up to [`CLOSE_WAIT`]) for its fds to close rather than refusing.
    fn open_tap(&mut self, cfg: &TapConfig) -> Result<Tap, ControlError> {
        let now = Instant::now();
        self.closing_taps.retain(|(.., at)| now - *at < CLOSE_WAIT);
        let closing = self
            .closing_taps
            .iter()
            .any(|(ns, name, _)| *ns == cfg.netns && *name == cfg.name);
        loop {
            match Tap::open(cfg) {
                Err(TapError::Exists { .. }) if closing && now.elapsed() < CLOSE_WAIT => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                r => return r.map_err(|e| ControlError::Interface(e.to_string())),
            }
        }
    }

    pub(super) fn tap_view(i: &Iface, d: &TapDev) -> DevView {
        DevView {
            device: DeviceInfo::Tap {
                host_if_name: d.host_if_name.clone(),
                netns: d.netns.clone(),
                host_mac: api::MacAddr(d.host_mac),
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
