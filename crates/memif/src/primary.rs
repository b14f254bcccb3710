//! The primary (master) role: listens, maps the secondary's memory, copies packets.
//!
//! One [`Listener`] serves any number of interfaces on one socket, told apart by the id in
//! INIT. The handshake is lock-step (one reply per message) and every message is checked
//! against the state it arrives in; the first violation ends the connection with a DISCONNECT
//! whose reason names it. The listener keeps listening after any peer leaves.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::msg::{FixedStr, Hello, MAX_LOG2_RING_SIZE, Msg, VERSION};
use crate::queue::{Link, PrimaryRx, PrimaryTx, QueueBase, Regions};
use crate::ring::Ring;
use crate::shm::SharedMemory;
use crate::sock::{self, Channel, SocketPath};
use crate::{ConfigError, Event, InterfaceConfig, InterfaceStatus, PeerInfo, Refusal};

/// Connections that have not finished INIT, on one listener. A newcomer past this is still
/// accepted: the oldest half-open connection of the peer that holds the most goes instead.
const MAX_PENDING: usize = 64;
/// Connections one peer process (by SO_PEERCRED pid) may hold before INIT; its next one
/// evicts its oldest.
const MAX_PENDING_PER_PEER: usize = 8;
/// Messages handled per connection per poll, so that one chatty peer cannot starve others.
const MSG_BUDGET: usize = 32;

/// The queues of a connected interface, in ring order.
#[derive(Debug)]
pub struct PrimaryQueues {
    /// One per S2M ring.
    pub rx: Vec<PrimaryRx>,
    /// One per M2S ring.
    pub tx: Vec<PrimaryTx>,
}

#[derive(Debug)]
enum Stage {
    AwaitInit,
    Setup,
    Connected(Arc<Link>),
}

#[derive(Debug)]
struct Conn {
    chan: Channel,
    /// The peer process (SO_PEERCRED pid; `None` where the kernel gave none), whose
    /// half-open connections count against [`MAX_PENDING_PER_PEER`].
    peer_pid: Option<i32>,
    /// When it was accepted: the oldest half-open connection is the first evicted.
    accepted: Instant,
    stage: Stage,
    iface: Option<usize>,
    deadline: Instant,
    app_name: String,
    regions: Vec<Arc<SharedMemory>>,
    mapped: u64,
    s2m: Vec<(Ring, OwnedFd)>,
    m2s: Vec<(Ring, OwnedFd)>,
    closed: bool,
}

#[derive(Debug)]
struct Iface {
    cfg: InterfaceConfig,
    status: InterfaceStatus,
    bound: bool,
}

impl Iface {
    fn new(cfg: InterfaceConfig) -> Iface {
        Iface {
            status: InterfaceStatus {
                id: cfg.id,
                name: cfg.name.clone(),
                ..Default::default()
            },
            cfg,
            bound: false,
        }
    }
}

/// A memif listener socket and the interfaces it serves.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    path: SocketPath,
    app_name: String,
    ifaces: Vec<Iface>,
    conns: Vec<Conn>,
    events: VecDeque<Event<PrimaryQueues>>,
    refused_before_init: u64,
    evicted_before_init: u64,
    /// After the kernel refused an accept (out of fds, most often), new connections wait
    /// until then: the listener stays readable, and would otherwise be retried (and logged)
    /// at every poll.
    accept_paused_until: Option<Instant>,
    /// Accepts the kernel refused, and whether the last one failed (a failing episode is
    /// logged once, at its start).
    accept_failures: u64,
    accept_failing: bool,
    /// What peers' regions may take, with other listeners' ([`Listener::set_region_budget`]).
    budget: Option<Arc<crate::RegionBudget>>,
}

/// How long new connections wait after a refused accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

impl Listener {
    /// Listens on `path` for the given interfaces (ids must be unique).
    pub fn bind(
        path: &SocketPath,
        ifaces: Vec<InterfaceConfig>,
    ) -> Result<Listener, crate::sock_error::BindError> {
        InterfaceConfig::validate_all(&ifaces)?;
        let fd = sock::listen(path)?;
        Ok(Listener {
            fd,
            path: path.clone(),
            app_name: format!("veclane {}", env!("CARGO_PKG_VERSION")),
            ifaces: ifaces.into_iter().map(Iface::new).collect(),
            conns: Vec::new(),
            events: VecDeque::new(),
            refused_before_init: 0,
            evicted_before_init: 0,
            accept_paused_until: None,
            accept_failures: 0,
            accept_failing: false,
            budget: None,
        })
    }

    /// Charges every region a peer maps here to `budget` (shared with other listeners): a
    /// region that would take it past its limit is refused, and its peer disconnected.
    pub fn set_region_budget(&mut self, budget: Arc<crate::RegionBudget>) {
        self.budget = Some(budget);
    }

    pub fn path(&self) -> &SocketPath {
        &self.path
    }

    /// Serves one more interface on this socket (`create interface memif ... master`).
    pub fn add_interface(&mut self, cfg: InterfaceConfig) -> Result<(), ConfigError> {
        cfg.validate_added(self.ifaces.iter().map(|i| i.cfg.id), &self.path)?;
        self.ifaces.push(Iface::new(cfg));
        Ok(())
    }

    /// Stops serving interface `id`: a connected peer gets a DISCONNECT ("interface
    /// deleted") and its memory is unmapped once the last queue handed out is dropped. Returns
    /// whether the interface existed. The socket keeps listening for the others.
    pub fn remove_interface(&mut self, id: u32) -> bool {
        let Some(ii) = self.ifaces.iter().position(|i| i.cfg.id == id) else {
            return false;
        };
        for ci in 0..self.conns.len() {
            if self.conns[ci].iface == Some(ii) {
                self.close(ci, "interface deleted", true, false);
            }
        }
        self.conns.retain(|c| !c.closed);
        // The disconnection is the owner's doing: it hears of it from this call, not as an event.
        self.events.retain(|e| e.id() != id);
        self.ifaces.remove(ii);
        for c in &mut self.conns {
            c.iface = match c.iface {
                Some(x) if x > ii => Some(x - 1),
                other => other,
            };
        }
        true
    }

    /// Whether no interface is served any more.
    pub fn is_empty(&self) -> bool {
        self.ifaces.is_empty()
    }

    /// Status and counters of every interface.
    pub fn interfaces(&self) -> Vec<InterfaceStatus> {
        self.ifaces.iter().map(|i| i.status.clone()).collect()
    }

    /// Connections refused before they named an interface (bad INIT, garbage).
    pub fn refused_before_init(&self) -> u64 {
        self.refused_before_init
    }

    /// Half-open connections closed to let a newer one in (see `MAX_PENDING_PER_PEER`).
    pub fn evicted_before_init(&self) -> u64 {
        self.evicted_before_init
    }

    /// Accepts the kernel refused (`EMFILE`, `ENFILE`, `ENOMEM`, ...); after each, new
    /// connections wait 100 ms.
    pub fn accept_failures(&self) -> u64 {
        self.accept_failures
    }

    /// The next event, if any.
    pub fn next_event(&mut self) -> Option<Event<PrimaryQueues>> {
        self.events.pop_front()
    }

    /// Waits up to `timeout` for socket activity and runs the handshakes it brings.
    pub fn poll(&mut self, timeout: Duration) -> std::io::Result<()> {
        let now = Instant::now();
        let next_deadline = self
            .conns
            .iter()
            .filter(|c| !matches!(c.stage, Stage::Connected(_)))
            .map(|c| c.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(timeout);
        let paused = self.accept_paused_until.filter(|&t| t > now);
        let next_deadline = paused.map_or(next_deadline, |t| next_deadline.min(t - now));
        let wait_ms = timeout.min(next_deadline).as_millis().min(i32::MAX as u128) as i32;
        // While accepting is paused the listener is not waited on (it stays readable).
        let accepting = usize::from(paused.is_none());
        let ready = {
            let mut fds = Vec::with_capacity(self.conns.len() + 1);
            if accepting == 1 {
                fds.push(self.fd.as_fd());
            }
            fds.extend(self.conns.iter().map(|c| c.chan.fd()));
            sock::wait_readable(&fds, wait_ms)?
        };
        if accepting == 1 && ready[0] {
            self.accept_all();
        }
        for ci in 0..ready.len() - accepting {
            if ready[ci + accepting] {
                self.read_conn(ci);
            }
        }
        self.check_faults_and_deadlines();
        self.conns.retain(|c| !c.closed);
        Ok(())
    }

    /// Makes room for one more half-open connection from `peer`: past its own limit its
    /// oldest goes; past the listener's, the oldest of whichever peer holds the most (ties:
    /// the oldest connection). A flood of connections that never send INIT so evicts only
    /// itself, and a peer arriving during it is always let in.
    fn make_room_for(&mut self, peer: Option<i32>) {
        let pending = |c: &Conn| matches!(c.stage, Stage::AwaitInit) && !c.closed;
        let held = |conns: &[Conn], p: Option<i32>| {
            conns
                .iter()
                .filter(|c| pending(c) && p.is_some() && c.peer_pid == p)
                .count()
        };
        let victim = if held(&self.conns, peer) >= MAX_PENDING_PER_PEER {
            self.conns
                .iter()
                .enumerate()
                .filter(|(_, c)| pending(c) && c.peer_pid == peer)
                .min_by_key(|(_, c)| c.accepted)
                .map(|(i, _)| i)
        } else if self.conns.iter().filter(|c| pending(c)).count() >= MAX_PENDING {
            self.conns
                .iter()
                .enumerate()
                .filter(|(_, c)| pending(c))
                .max_by_key(|(_, c)| (held(&self.conns, c.peer_pid), std::cmp::Reverse(c.accepted)))
                .map(|(i, _)| i)
        } else {
            None
        };
        if let Some(ci) = victim {
            self.evicted_before_init += 1;
            self.close(ci, "evicted: too many pending connections", true, false);
        }
    }

    fn accept_all(&mut self) {
        loop {
            let chan = match sock::accept(self.fd.as_fd()) {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    self.accept_failures += 1;
                    if !std::mem::replace(&mut self.accept_failing, true) {
                        tracing::warn!(socket = %self.path,
                            "accept: {e}: new connections wait (retried every 100 ms)");
                    }
                    self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                    break;
                }
            };
            if std::mem::take(&mut self.accept_failing) {
                tracing::info!(socket = %self.path, failures = self.accept_failures,
                    "accepting connections again");
            }
            let peer_pid = rustix::net::sockopt::socket_peercred(chan.fd())
                .ok()
                .map(|c| c.pid.as_raw_nonzero().get());
            self.make_room_for(peer_pid);
            let hello = Msg::Hello(Hello {
                name: FixedStr::new(&self.app_name),
                min_version: VERSION,
                max_version: VERSION,
                max_region: self
                    .ifaces
                    .iter()
                    .map(|i| i.cfg.max_regions)
                    .max()
                    .unwrap_or(1)
                    - 1,
                max_m2s_ring: self
                    .ifaces
                    .iter()
                    .map(|i| i.cfg.m2s_rings)
                    .max()
                    .unwrap_or(1)
                    - 1,
                max_s2m_ring: self
                    .ifaces
                    .iter()
                    .map(|i| i.cfg.s2m_rings)
                    .max()
                    .unwrap_or(1)
                    - 1,
                max_log2_ring_size: self
                    .ifaces
                    .iter()
                    .map(|i| i.cfg.log2_ring_size)
                    .max()
                    .unwrap_or(10),
            });
            if chan.send(&hello, None).is_err() {
                continue;
            }
            let timeout = self
                .ifaces
                .iter()
                .map(|i| i.cfg.handshake_timeout)
                .max()
                .unwrap_or(Duration::from_secs(3));
            self.conns.push(Conn {
                chan,
                peer_pid,
                accepted: Instant::now(),
                stage: Stage::AwaitInit,
                iface: None,
                deadline: Instant::now() + timeout,
                app_name: String::new(),
                regions: Vec::new(),
                mapped: 0,
                s2m: Vec::new(),
                m2s: Vec::new(),
                closed: false,
            });
        }
    }

    fn read_conn(&mut self, ci: usize) {
        for _ in 0..MSG_BUDGET {
            if self.conns[ci].closed {
                return;
            }
            let rcv = match self.conns[ci].chan.recv() {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) => {
                    let reason = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        "peer closed the control socket".to_string()
                    } else {
                        format!("control socket error: {e}")
                    };
                    self.close(ci, &reason, false, false);
                    return;
                }
            };
            let result = match rcv.data {
                Err(n) => Err(Refusal(format!(
                    "malformed message: {n} bytes instead of 128"
                ))),
                Ok(bytes) => match Msg::parse(&bytes) {
                    Err(e) => Err(Refusal(e.to_string())),
                    Ok(msg) => self.on_message(ci, msg, rcv.fds),
                },
            };
            match result {
                Ok(Some(reply)) => {
                    if let Err(e) = self.conns[ci].chan.send(&reply, None) {
                        self.close(
                            ci,
                            &format!("cannot send {}: {e}", reply.name()),
                            false,
                            true,
                        );
                    }
                }
                Ok(None) => {}
                Err(Refusal(reason)) => self.close(ci, &reason, true, true),
            }
        }
    }

    fn on_message(
        &mut self,
        ci: usize,
        msg: Msg,
        mut fds: Vec<OwnedFd>,
    ) -> Result<Option<Msg>, Refusal> {
        // At most one fd, and only on the two messages that carry one: the first, as VPP,
        // libmemif and DPDK read it (each takes the first fd of the message's SCM_RIGHTS);
        // every other fd is closed here by being dropped.
        let fd = if msg.carries_fd() && !fds.is_empty() {
            Some(fds.swap_remove(0))
        } else {
            None
        };
        drop(fds);
        if let Msg::Disconnect { reason, .. } = msg {
            let r = format!("peer disconnected: {}", reason.to_string_lossy());
            self.close(ci, &r, false, false);
            return Ok(None);
        }
        match self.conns[ci].stage {
            Stage::AwaitInit => match msg {
                Msg::Init(init) => self.on_init(ci, init),
                m => Err(format!("unexpected message {} before INIT", m.name()).into()),
            },
            Stage::Setup => match msg {
                Msg::AddRegion { index, size } => self.on_add_region(ci, index, size, fd),
                Msg::AddRing(r) => self.on_add_ring(ci, r, fd),
                Msg::Connect { if_name } => self.on_connect(ci, if_name),
                m => Err(format!("unexpected message {} during setup", m.name()).into()),
            },
            Stage::Connected(_) => {
                Err(format!("unexpected message {} after CONNECTED", msg.name()).into())
            }
        }
    }

    fn iface_of(&self, ci: usize) -> &Iface {
        // Invariant: only called in Setup or later, where INIT bound an interface.
        &self.ifaces[self.conns[ci].iface.unwrap_or(0)]
    }

    fn on_init(&mut self, ci: usize, init: crate::msg::Init) -> Result<Option<Msg>, Refusal> {
        if init.version != VERSION {
            return Err(format!("incompatible protocol version {:#06x}", init.version).into());
        }
        let Some(ii) = self.ifaces.iter().position(|i| i.cfg.id == init.id) else {
            return Err(format!("unmatched interface id {}", init.id).into());
        };
        let iface = &self.ifaces[ii];
        if iface.bound {
            return Err("already connected".into());
        }
        if iface.cfg.mode != init.mode {
            return Err("mode mismatch".into());
        }
        if let Some(secret) = &iface.cfg.secret {
            if init.secret.is_empty() {
                return Err("secret required".into());
            }
            if init.secret.as_bytes() != secret.as_bytes() {
                return Err("incorrect secret".into());
            }
        }
        self.ifaces[ii].bound = true;
        let c = &mut self.conns[ci];
        c.iface = Some(ii);
        c.app_name = init.name.to_string_lossy();
        c.stage = Stage::Setup;
        Ok(Some(Msg::Ack))
    }

    fn on_add_region(
        &mut self,
        ci: usize,
        index: u16,
        size: u64,
        fd: Option<OwnedFd>,
    ) -> Result<Option<Msg>, Refusal> {
        let Some(fd) = fd else {
            return Err("missing memory region fd".into());
        };
        let cfg = &self.iface_of(ci).cfg;
        let (max, seals, max_mapped) = (cfg.max_regions, cfg.seals, cfg.max_mapped);
        let c = &mut self.conns[ci];
        if usize::from(index) != c.regions.len() {
            return Err(format!(
                "unexpected region index {index}, expected {}",
                c.regions.len()
            )
            .into());
        }
        if index >= max {
            return Err("too many regions".into());
        }
        if size == 0 || size > crate::shm::MAX_REGION_SIZE {
            return Err(format!(
                "region {index}: size {size} out of range 1..={}",
                crate::shm::MAX_REGION_SIZE
            )
            .into());
        }
        let would = c.mapped.saturating_add(size);
        if would > max_mapped {
            return Err(format!(
                "region {index}: regions would take {would} bytes, more than the {max_mapped} the interface allows"
            )
            .into());
        }
        let shm = SharedMemory::map_peer(fd, size, seals, self.budget.as_ref())
            .map_err(|e| format!("region {index}: {e}"))?;
        c.mapped += size;
        c.regions.push(Arc::new(shm));
        Ok(Some(Msg::Ack))
    }

    fn on_add_ring(
        &mut self,
        ci: usize,
        r: crate::msg::AddRing,
        fd: Option<OwnedFd>,
    ) -> Result<Option<Msg>, Refusal> {
        let Some(fd) = fd else {
            return Err("missing ring interrupt fd".into());
        };
        let cfg = &self.iface_of(ci).cfg;
        let (max_s2m, max_m2s, max_log2, layout) =
            (cfg.s2m_rings, cfg.m2s_rings, cfg.log2_ring_size, cfg.layout);
        let c = &mut self.conns[ci];
        if r.private_hdr_size != 0 {
            return Err("private headers not supported".into());
        }
        let (list, max, dir) = if r.is_s2m() {
            (&mut c.s2m, max_s2m, "S2M")
        } else {
            (&mut c.m2s, max_m2s, "M2S")
        };
        if usize::from(r.index) != list.len() {
            return Err(format!(
                "unexpected {dir} ring index {}, expected {}",
                r.index,
                list.len()
            )
            .into());
        }
        if r.index >= max {
            return Err(format!("too many {dir} rings (at most {max})").into());
        }
        if r.log2_ring_size > max_log2.max(MAX_LOG2_RING_SIZE) {
            return Err(format!(
                "{dir} ring {}: log2 size {} too large",
                r.index, r.log2_ring_size
            )
            .into());
        }
        let Some(region) = c.regions.get(usize::from(r.region)) else {
            return Err(format!("{dir} ring {} in unknown region {}", r.index, r.region).into());
        };
        let ring = Ring::new(
            region.clone(),
            u64::from(r.offset),
            r.log2_ring_size,
            layout,
        )
        .map_err(|e| format!("{dir} ring {}: {e}", r.index))?;
        if sock::is_eventfd(fd.as_fd()) == Some(false) {
            return Err(format!("{dir} ring {}: interrupt fd is not an eventfd", r.index).into());
        }
        crate::set_nonblocking(fd.as_fd());
        list.push((ring, fd));
        Ok(Some(Msg::Ack))
    }

    fn on_connect(&mut self, ci: usize, if_name: FixedStr<32>) -> Result<Option<Msg>, Refusal> {
        let ii = self.conns[ci].iface.unwrap_or(0);
        let cfg = self.ifaces[ii].cfg.clone();
        let c = &mut self.conns[ci];
        if c.s2m.is_empty() || c.m2s.is_empty() {
            return Err(format!(
                "CONNECT with {} S2M and {} M2S rings; need at least one each",
                c.s2m.len(),
                c.m2s.len()
            )
            .into());
        }
        for (dir, list) in [("S2M", &c.s2m), ("M2S", &c.m2s)] {
            if let Some((i, _)) = list.iter().enumerate().find(|(_, (r, _))| !r.cookie_ok()) {
                return Err(format!("wrong cookie on {dir} ring {i}").into());
            }
        }
        let link = Link::new_up();
        let regions = Regions(c.regions.iter().cloned().collect());
        let peer = PeerInfo {
            app_name: c.app_name.clone(),
            if_name: if_name.to_string_lossy(),
            s2m_rings: c.s2m.len() as u16,
            m2s_rings: c.m2s.len() as u16,
            log2_ring_size: c.s2m[0].0.log2(),
            regions: c.regions.len(),
            pid: c.peer_pid,
        };
        let rx = c
            .s2m
            .drain(..)
            .enumerate()
            .map(|(i, (ring, fd))| {
                let mut q = PrimaryRx::new(
                    QueueBase::new(ring, fd, link.clone(), i as u16),
                    regions.clone(),
                    cfg.max_frame,
                );
                q.set_interrupt_mode(false);
                q
            })
            .collect();
        let tx = c
            .m2s
            .drain(..)
            .enumerate()
            .map(|(i, (ring, fd))| {
                PrimaryTx::new(
                    QueueBase::new(ring, fd, link.clone(), i as u16),
                    regions.clone(),
                )
            })
            .collect();
        c.stage = Stage::Connected(link);
        self.ifaces[ii].status.record_connect(&self.path, &peer);
        self.events.push_back(Event::Connected {
            id: cfg.id,
            peer,
            queues: PrimaryQueues { rx, tx },
        });
        Ok(Some(Msg::Connected {
            if_name: FixedStr::new(&cfg.name),
        }))
    }

    fn check_faults_and_deadlines(&mut self) {
        let now = Instant::now();
        for ci in 0..self.conns.len() {
            if self.conns[ci].closed {
                continue;
            }
            let fault = match &self.conns[ci].stage {
                Stage::Connected(link) => link.take_fault(),
                _ if now >= self.conns[ci].deadline => Some("handshake timeout".to_string()),
                _ => None,
            };
            if let Some(reason) = fault {
                self.close(ci, &reason, true, true);
            }
        }
    }

    /// Ends a connection: optional DISCONNECT, link down, interface freed, event and counters.
    fn close(&mut self, ci: usize, reason: &str, send: bool, protocol_error: bool) {
        let c = &mut self.conns[ci];
        if c.closed {
            return;
        }
        c.closed = true;
        if send {
            let _ = c.chan.send(&Msg::disconnect(reason), None);
        }
        let was_connected = match &c.stage {
            Stage::Connected(link) => {
                link.set_down();
                true
            }
            _ => false,
        };
        c.regions.clear();
        c.s2m.clear();
        c.m2s.clear();
        let Some(ii) = c.iface else {
            self.refused_before_init += u64::from(protocol_error);
            tracing::warn!(socket = %self.path, "memif peer refused before INIT: {reason}");
            return;
        };
        let iface = &mut self.ifaces[ii];
        iface.bound = false;
        if let Some(e) =
            iface
                .status
                .record_close(&self.path, reason, was_connected, protocol_error)
        {
            self.events.push_back(e);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        for ci in 0..self.conns.len() {
            self.close(ci, "interface deleted", true, false);
        }
        if let SocketPath::File(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}
