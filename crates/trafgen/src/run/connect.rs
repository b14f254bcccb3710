//! Setting a session up: the configuration checked, the interfaces and what each sends
//! planned, every interface connected (memif through one endpoint, kernel ports opened), and
//! the local buffers sized for the largest frame.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use memif::{Client, Event, InterfaceConfig, Listener};
use uplink::af_packet;

use super::{Endpoint, GenConfig, GenError, KernelPort, Queues, Role, SendPort, Session};
use crate::frame::FrameSpec;

/// A kernel port's queue pairs.
pub(super) struct KernelQueues {
    pub(super) rx: Vec<af_packet::RxQueue>,
    pub(super) tx: Vec<af_packet::TxQueue>,
}

impl KernelQueues {
    /// Opens `port`'s interface with one queue pair (in its namespace, if it names one).
    fn open(port: &KernelPort) -> Result<KernelQueues, GenError> {
        let err = |reason: String| GenError::Kernel {
            host_if: port.host_if.clone(),
            reason,
        };
        // Blocks, not the uplink's default of frame slots: the veth delivers the DUT's frames
        // into this ring in the DUT's own context, where a slot ring's per-frame hand-over
        // costs it ~90 ns a frame more (singlenet --underlay af-packet, 64 B); the price is
        // up to the 1 ms block timeout in a latency sample taken on a kernel port.
        // No UDP super-packets: the DUT must see the frames as the generator made them.
        let cfg = af_packet::AfPacketConfig {
            rx_ring: Some(af_packet::RxRing::Blocks { timeout_ms: 1 }),
            udp_gso: false,
            ..af_packet::AfPacketConfig::default()
        };
        let open = || af_packet::AfPacket::open(&port.host_if, cfg);
        let opened = match &port.netns {
            Some(ns) => uplink::netns::run_in(&uplink::netns::netns_path(ns), open)
                .map_err(|e| err(e.to_string()))?,
            None => open(),
        }
        .map_err(|e| err(e.to_string()))?;
        let (rx, tx) = opened.into_queues().into_iter().unzip();
        Ok(KernelQueues { rx, tx })
    }
}

impl Session {
    /// Checks `cfg`, pins the calling thread to `cfg.cpu`, and connects every interface (waiting
    /// up to `cfg.connect_timeout`).
    pub fn connect(cfg: &GenConfig, stop: &AtomicBool) -> Result<Session, GenError> {
        check(cfg)?;
        if let Some(cpu) = cfg.cpu {
            crate::pin_to_cpu(cpu)
                .map_err(|e| GenError::Config(format!("cannot pin to CPU {cpu}: {e}")))?;
        }
        let (ifaces, sends) = plan(cfg)?;
        let mut ep = match cfg.role {
            Role::Primary => Endpoint::Primary(
                Listener::bind(&cfg.socket, ifaces.clone())
                    .map_err(|e| GenError::Memif(e.to_string()))?,
            ),
            Role::Secondary => Endpoint::Secondary(
                Client::new(&cfg.socket, ifaces.clone())
                    .map_err(|e| GenError::Memif(e.to_string()))?,
            ),
        };
        let mut peers = wait_for_peers(&mut ep, &ifaces, cfg, stop)?;
        for p in &cfg.kernel_ports {
            peers.push(Queues::Kernel(KernelQueues::open(p)?));
        }
        Ok(Session {
            ep,
            peers,
            pool: local_pool(cfg, &sends)?,
            sends,
        })
    }
}

/// What a run's settings must be before anything is connected.
fn check(cfg: &GenConfig) -> Result<(), GenError> {
    if cfg.burst == 0 || cfg.burst > 256 {
        return Err(GenError::Config(format!(
            "burst {} must be 1..=256",
            cfg.burst
        )));
    }
    if let Some(r) = cfg.rate_pps
        && !(r > 0.0 && r.is_finite())
    {
        return Err(GenError::Config(format!("rate {r} pps must be positive")));
    }
    check_warmup(cfg)
}

/// A warm-up needs a run bounded by time: a frame count would have to say which frames it
/// counts.
pub(super) fn check_warmup(cfg: &GenConfig) -> Result<(), GenError> {
    if !cfg.warmup.is_zero() && cfg.count.is_some() {
        return Err(GenError::Config(
            "a warm-up needs a run bounded by its duration, not by a frame count".into(),
        ));
    }
    Ok(())
}

/// The memif interfaces to connect, in the configuration's order, and the interfaces that
/// send (their places in `peers`: the memif ones, then the kernel ports).
fn plan(cfg: &GenConfig) -> Result<(Vec<InterfaceConfig>, Vec<SendPort>), GenError> {
    let template = |spec: &FrameSpec| spec.template().map_err(|e| GenError::Config(e.to_string()));
    let mut ifaces = vec![cfg.iface.clone()];
    if let Some(r) = &cfg.rx_iface {
        if r.id == cfg.iface.id {
            return Err(GenError::Config(format!(
                "the receive interface must differ from the send interface (both are id {})",
                r.id
            )));
        }
        ifaces.push(r.clone());
    }
    let mut sends = Vec::new();
    if cfg.send && cfg.iface_sends {
        sends.push((0, cfg.spec.clone()));
    }
    for p in &cfg.ports {
        if let Some(spec) = &p.spec
            && cfg.send
        {
            sends.push((ifaces.len(), spec.clone()));
        }
        ifaces.push(p.iface.clone());
    }
    // Kernel ports come after every memif interface in `peers`.
    for (j, p) in cfg.kernel_ports.iter().enumerate() {
        if let Some(spec) = &p.spec
            && cfg.send
        {
            sends.push((ifaces.len() + j, spec.clone()));
        }
    }
    let id_of = |peer: usize| {
        ifaces
            .get(peer)
            .map_or_else(|| cfg.kernel_ports[peer - ifaces.len()].id, |f| f.id)
    };
    let sends = sends
        .into_iter()
        .map(|(peer, spec)| {
            Ok(SendPort {
                peer,
                id: id_of(peer),
                template: template(&spec)?,
                spec,
                primed: Vec::new(),
                kernel: peer >= ifaces.len(),
            })
        })
        .collect::<Result<Vec<_>, GenError>>()?;
    let mut ids: Vec<u32> = ifaces
        .iter()
        .map(|f| f.id)
        .chain(cfg.kernel_ports.iter().map(|p| p.id))
        .collect();
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(GenError::Config(format!(
            "interface id {} is given twice",
            w[0]
        )));
    }
    Ok((ifaces, sends))
}

/// Waits until every interface of `ifaces` has connected; returns their queues in that order.
fn wait_for_peers(
    ep: &mut Endpoint,
    ifaces: &[InterfaceConfig],
    cfg: &GenConfig,
    stop: &AtomicBool,
) -> Result<Vec<Queues>, GenError> {
    let deadline = Instant::now() + cfg.connect_timeout;
    let mut slots: Vec<Option<Queues>> = ifaces.iter().map(|_| None).collect();
    while slots.iter().any(Option::is_none) {
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            let missing = ifaces[slots.iter().position(Option::is_none).unwrap_or(0)].id;
            let detail = match &*ep {
                Endpoint::Secondary(c) => c
                    .last_connect_error(missing)
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default(),
                Endpoint::Primary(_) => String::new(),
            };
            return Err(GenError::NoPeer {
                socket: format!("{} (interface id {missing})", cfg.socket),
                secs: cfg.connect_timeout.as_secs(),
                detail,
            });
        }
        match ep
            .poll(Duration::from_millis(10))
            .map_err(|e| GenError::Memif(e.to_string()))?
        {
            Some(Event::Connected { id, queues, .. }) => {
                if let Some(i) = ifaces.iter().position(|f| f.id == id) {
                    slots[i] = Some(queues);
                }
            }
            Some(Event::Disconnected { id, .. }) => {
                if let Some(i) = ifaces.iter().position(|f| f.id == id) {
                    slots[i] = None;
                }
            }
            None => {}
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

/// Local buffers hold a whole frame, as testpmd's mbufs do when it is given --mbuf-size for
/// jumbo frames: one copy per frame on receive instead of a chain of 2 KiB pieces.
fn local_pool(cfg: &GenConfig, sends: &[SendPort]) -> Result<Pool, GenError> {
    let largest = sends.iter().map(|p| p.spec.wire_len()).max();
    let data_size = largest
        .unwrap_or(cfg.spec.wire_len())
        .next_multiple_of(1024)
        .clamp(2048, 64512) as u16;
    let count = if data_size > 2048 { 4096 } else { 16384 };
    Pool::new(PoolConfig {
        count,
        data_size,
        ..Default::default()
    })
    .map_err(|e| GenError::Config(e.to_string()))
}
