//! The control thread: interfaces ([`interfaces`]; memif sockets and handshakes in
//! [`memif`], AF_PACKET and AF_XDP uplinks in [`uplinks`], VXLAN tunnels and the routes
//! through them in [`tunnels`]), networks, the routing
//! information base ([`crate::rib`]), neighbour learning, the API ([`dispatch`]) and packet
//! capture ([`capture`]). It never touches packet data; it hands queues to workers and
//! publishes tables they read without locks.

mod capture;
mod copy;
pub use copy::NodeEngines;
mod dispatch;
mod interfaces;
mod memif;
mod networks;
mod policies;
pub mod reload;
mod repeats;
mod services;
mod taps;
mod tunnels;
mod uplinks;
mod watchdog;
pub use watchdog::WorkerWatch;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};

use api::{Config, RxMode};
use arc_swap::ArcSwap;
use nodes::{IfConfig, Learned, Shared};

use crate::rib::{Rib, RibError};
use crate::worker::{self, WorkerHandle, WorkerSetup};

use interfaces::Iface;
use memif::Sock;

/// A request or a configuration item the control thread refuses.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Rib(#[from] RibError),
    #[error("no interface named {name:?} (have: {have})")]
    NoInterface { name: String, have: String },
    /// An interface that cannot be created or changed as asked.
    #[error("{0}")]
    Interface(String),
    /// The error is in the message, not a `source`: printed once.
    #[error("cannot start worker {index}: {error}")]
    Worker { index: usize, error: std::io::Error },
    #[error("cannot make the control thread's eventfd: {0}")]
    Eventfd(std::io::Error),
    #[error("worker {0} does not answer")]
    WorkerSilent(usize),
    #[error("{0}")]
    Capture(String),
    /// A network that cannot be added, deleted or attached to as asked.
    #[error("{0}")]
    Network(String),
    /// A service that cannot be added or deleted as asked; a bad `[daemon] sessions`.
    #[error("{0}")]
    Service(String),
    /// `trace add` refused by a worker's graph.
    #[error(transparent)]
    Trace(#[from] graph::TraceError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

impl ControlError {
    /// The code an error reply carries for this refusal.
    pub fn code(&self) -> api::ErrorCode {
        use api::ErrorCode;
        match self {
            ControlError::NoInterface { .. } => ErrorCode::NoInterface,
            ControlError::Worker { .. }
            | ControlError::Eventfd(_)
            | ControlError::WorkerSilent(_)
            | ControlError::Write { .. } => ErrorCode::Internal,
            ControlError::Rib(_)
            | ControlError::Interface(_)
            | ControlError::Capture(_)
            | ControlError::Network(_)
            | ControlError::Service(_)
            | ControlError::Trace(_) => ErrorCode::Refused,
        }
    }
}

/// The control thread's state.
pub struct Control {
    runtime_dir: PathBuf,
    /// Where `pcap trace` may write (capture.rs).
    capture_dir: PathBuf,
    mode: RxMode,
    workers: Vec<WorkerHandle>,
    /// Indexed by socket id; `None`: its last interface was deleted.
    socks: Vec<Option<Sock>>,
    /// Indexed by interface index; `None`: deleted (the slot is reused).
    ifaces: Vec<Option<Iface>>,
    /// What the workers know of each interface, indexed like `ifaces`.
    ifconfigs: Vec<IfConfig>,
    shared: Shared,
    rib: Rib,
    networks: Vec<networks::Network>,
    /// Interface slots deleted, not reused until every worker has finished a loop since (with
    /// each worker's loop count at the deletion): a packet in flight still names the slot.
    retiring: Vec<(u32, Vec<u64>)>,
    /// The static routes that go through a VXLAN tunnel, and its interface index.
    tunnel_routes: HashMap<tunnels::RouteKey, u32>,
    learned: Receiver<Learned>,
    /// Written by workers that reported neighbours: the control loop wakes for it.
    learn_wake: Arc<std::os::fd::OwnedFd>,
    /// Loop counts of the workers when tables last dropped memory, until all moved on.
    quiesce_after: Option<Vec<u64>>,
    pcap: Option<capture::Capture>,
    /// Taps deleted lately (namespace, device name, when): their fds close on the workers'
    /// closer threads a moment after the reply, so creating the same device again waits
    /// for the kernel to let go of the old one.
    closing_taps: Vec<(Option<PathBuf>, String, std::time::Instant)>,
    /// The copy engines and the DSA work queues they come from.
    copy: copy::Copy,
    /// Log lines that may repeat, held back.
    repeats: repeats::Repeats,
    services: services::Registry,
    policies: policies::Registry,
    /// Flows the workers denied, to be logged.
    denied: Receiver<nodes::Denied>,
    deny_log: policies::DenyLog,
    /// A worker stayed stuck (watchdog.rs): the daemon is not healthy (the log says which).
    unhealthy: bool,
    /// What memif peers' regions may take, every listener together (`[daemon]
    /// memif-memory-mib`).
    region_budget: Arc<::memif::RegionBudget>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("runtime_dir", &self.runtime_dir)
            .field("workers", &self.workers.len())
            .field("interfaces", &self.ifaces.iter().flatten().count())
            .field("rib", &self.rib)
            .finish_non_exhaustive()
    }
}

impl Control {
    /// Starts workers, creates the configured interfaces, addresses, routes and neighbours.
    pub fn new(cfg: &Config, runtime_dir: PathBuf) -> Result<Control, ControlError> {
        let (learned_tx, learned_rx) = mpsc::sync_channel(1024);
        let (denied_tx, denied_rx) = mpsc::sync_channel(1024);
        let learn_wake = Arc::new(
            rustix::event::eventfd(
                0,
                rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
            )
            .map_err(|e| ControlError::Eventfd(e.into()))?,
        );
        let mut rib = Rib::new();
        rib.set_neighbour_limits((&cfg.daemon.neighbours).into());
        let workers = cfg.daemon.workers.len().max(1) as u32;
        let sessions = nodes::Sessions::with_capacity(cfg.daemon.sessions, workers)
            .map_err(|e| ControlError::Service(format!("[daemon] sessions: {e}")))?;
        let shared = Shared::new(
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            rib.vrfs(),
            rib.adjacencies(),
        )
        .with_sessions(sessions);
        let shared = Shared {
            denied: nodes::DenySink::new(denied_tx),
            ..shared
        };
        let mut c = Control {
            capture_dir: cfg
                .daemon
                .capture_dir
                .clone()
                .unwrap_or_else(|| runtime_dir.clone()),
            runtime_dir,
            mode: cfg.daemon.mode,
            workers: Vec::new(),
            socks: Vec::new(),
            ifaces: Vec::new(),
            ifconfigs: Vec::new(),
            shared,
            rib,
            networks: Vec::new(),
            tunnel_routes: HashMap::new(),
            retiring: Vec::new(),
            learned: learned_rx,
            closing_taps: Vec::new(),
            learn_wake: learn_wake.clone(),
            quiesce_after: None,
            unhealthy: false,
            pcap: None,
            copy: copy::Copy::new(&cfg.daemon),
            repeats: repeats::Repeats::default(),
            services: services::Registry::default(),
            policies: policies::Registry::default(),
            denied: denied_rx,
            deny_log: policies::DenyLog::default(),
            region_budget: ::memif::RegionBudget::new(
                cfg.daemon
                    .memif_memory_mib
                    .map_or_else(::memif::default_region_budget, |m| {
                        m.saturating_mul(1 << 20)
                    }),
            ),
        };
        let wake = learn_wake.clone();
        let sink = nodes::LearnSink::new(
            learned_tx,
            Some(Arc::new(move || {
                let _ = rustix::io::write(&*wake, &1u64.to_ne_bytes());
            })),
        );
        c.start_workers(cfg, sink)?;
        for n in &cfg.network {
            c.network_add(n.clone())?;
        }
        for spec in &cfg.interface {
            c.create_memif(spec)?;
        }
        for spec in &cfg.af_packet {
            c.create_af_packet(spec)?;
        }
        for spec in &cfg.af_xdp {
            c.create_af_xdp(spec)?;
        }
        for n in &cfg.neighbor {
            c.neighbor(n, false)?;
        }
        for r in &cfg.route {
            c.route(true, r)?;
        }
        for s in &cfg.address_set {
            c.set_add(s.clone())?;
        }
        for p in &cfg.policy {
            c.policy_add(p.clone())?;
        }
        for s in &cfg.service {
            c.service_add(s.clone())?;
        }
        Ok(c)
    }

    fn start_workers(
        &mut self,
        cfg: &Config,
        learned: nodes::LearnSink,
    ) -> Result<(), ControlError> {
        let d = &cfg.daemon;
        let cores: Vec<Option<usize>> = if d.workers.is_empty() {
            vec![None]
        } else {
            d.workers.iter().map(|&c| Some(c)).collect()
        };
        for (index, core) in cores.into_iter().enumerate() {
            let engines = self.copy.for_worker(index)?;
            let h = worker::spawn(WorkerSetup {
                index,
                core,
                mode: d.mode,
                buffers: d.buffers,
                trace_capacity: d.trace_capacity,
                shared: self.shared.clone(),
                learned: learned.clone(),
                copy: d.copy,
                engines: Some(engines),
                register_pool: self.copy.may_use_dsa(),
            })
            .map_err(|error| ControlError::Worker { index, error })?;
            if let Some((bytes, r)) = &h.pool_registration {
                self.copy
                    .registered(format!("worker {index} buffers"), *bytes, r);
            }
            self.workers.push(h);
        }
        Ok(())
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Stops every worker (graceful shutdown).
    pub fn shutdown(&mut self) {
        for w in &mut self.workers {
            w.stop();
        }
    }

    /// What the control loop waits on besides the API: readable when a worker learned a
    /// neighbour.
    pub fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.learn_wake.as_fd()
    }

    /// One control tick: memif handshakes, learned neighbours, table memory.
    pub fn tick(&mut self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&*self.learn_wake, &mut b);
        self.poll_sockets();
        // One copy of the adjacencies for the whole batch, however many it learns.
        self.rib.hold();
        for (k, p) in self
            .rib
            .expire_neighbours(&self.ifconfigs)
            .into_iter()
            .enumerate()
        {
            if let Some(w) = self.workers.get(k % self.workers.len().max(1)) {
                w.probe(p);
            }
        }
        for _ in 0..1024 {
            match self.learned.try_recv() {
                // Reports about a deleted interface are stale.
                Ok(l) if !self.is_live(l.ifindex) => {}
                Ok(l) => {
                    if let Err(e) = self.rib.learn(&self.ifconfigs, l) {
                        tracing::warn!("neighbour {}: {e}", l.ip);
                    }
                }
                Err(_) => break,
            }
        }
        self.rib.release();
        self.log_denied();
        self.after_rib_change();
        self.maybe_quiesce();
        self.watch_workers();
    }

    /// Starts waiting for the workers (again) when the RIB unlinked table memory.
    fn after_rib_change(&mut self) {
        if self.rib.take_unlinked() {
            self.quiesce_after = Some(self.loop_marks());
        }
    }

    /// Frees unlinked table memory for reuse, and deleted interface slots, once every worker
    /// finished a loop since.
    fn maybe_quiesce(&mut self) {
        if let Some(marks) = &self.quiesce_after
            && Self::all_moved_on(&self.workers, marks)
        {
            self.rib.quiesce();
            self.quiesce_after = None;
        }
        let workers = &self.workers;
        self.retiring
            .retain(|(_, marks)| !Self::all_moved_on(workers, marks));
    }

    /// Loop counts of every worker now.
    fn loop_marks(&self) -> Vec<u64> {
        self.workers
            .iter()
            .map(|w| w.activity.loops.load(Ordering::Acquire))
            .collect()
    }

    /// Whether every worker finished a loop (or slept, or stopped) since `marks`.
    fn all_moved_on(workers: &[WorkerHandle], marks: &[u64]) -> bool {
        workers.iter().zip(marks).all(|(w, &m)| {
            w.activity.parked.load(Ordering::Acquire)
                || w.activity.loops.load(Ordering::Acquire) > m
                || !w.is_alive()
        })
    }

    /// Whether interface slot `i` holds a live interface.
    fn is_live(&self, i: u32) -> bool {
        self.ifaces.get(i as usize).is_some_and(Option::is_some)
    }

    /// The lowest interface slot that is free and not retiring.
    fn free_iface_slot(&self) -> usize {
        (0..=self.ifaces.len())
            .find(|&k| {
                !self.is_live(k as u32) && !self.retiring.iter().any(|(s, _)| *s as usize == k)
            })
            .expect("the slot past the end is free")
    }
}

/// The dataplane's form of an interface's allowed sources (API prefixes).
fn allowed_sources(v: &[api::Ipv4Prefix]) -> nodes::AllowedSources {
    nodes::AllowedSources::new(v.iter().map(|p| (p.addr, p.len)))
}
