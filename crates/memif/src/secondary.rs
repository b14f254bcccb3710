//! The secondary (slave) role: connects, creates the regions and rings, and writes and reads
//! packets in place in its own memory.
//!
//! A [`Client`] drives any number of interfaces on one socket path, one connection each. It
//! retries on its own when the primary is absent or goes away, every `reconnect_interval`,
//! with fresh regions for every attempt. Memory layout (libmemif's): region 0 holds the rings,
//! S2M first; region 1 holds the buffers, slot `j` of global ring `g` at
//! `(g · ring_size + j) · buffer_size`.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::EventfdFlags;

use crate::msg::{ADD_RING_FLAG_S2M, AddRing, FixedStr, Init, Msg, VERSION};
use crate::queue::{Link, QueueBase, SecondaryRx, SecondaryTx, SlotBuffers};
use crate::ring::Ring;
use crate::shm::SharedMemory;
use crate::sock::{self, Channel, SocketPath};
use crate::{ConfigError, Event, InterfaceConfig, InterfaceStatus, PeerInfo, Refusal};

/// The queues of a connected interface, in ring order.
#[derive(Debug)]
pub struct SecondaryQueues {
    /// One per S2M ring.
    pub tx: Vec<SecondaryTx>,
    /// One per M2S ring.
    pub rx: Vec<SecondaryRx>,
}

#[derive(Debug, Clone, Copy)]
enum Out {
    Init,
    Region(usize),
    Ring { s2m: bool, index: usize },
    Connect,
}

#[derive(Debug)]
struct Memory {
    regions: Vec<Arc<SharedMemory>>,
    s2m: Vec<(Ring, OwnedFd)>,
    m2s: Vec<(Ring, OwnedFd)>,
    log2: u8,
}

#[derive(Debug)]
enum State {
    Idle,
    AwaitHello {
        chan: Channel,
        deadline: Instant,
    },
    Setup {
        chan: Channel,
        deadline: Instant,
        mem: Memory,
        outbox: VecDeque<Out>,
        peer_app: String,
        awaiting_connected: bool,
    },
    Connected {
        chan: Channel,
        link: Arc<Link>,
    },
}

#[derive(Debug)]
struct Iface {
    cfg: InterfaceConfig,
    status: InterfaceStatus,
    state: State,
    next_attempt: Instant,
    last_connect_error: Option<String>,
}

impl Iface {
    /// An idle interface whose first connection attempt is due at `now`.
    fn new(cfg: InterfaceConfig, now: Instant) -> Iface {
        Iface {
            status: InterfaceStatus {
                id: cfg.id,
                name: cfg.name.clone(),
                ..Default::default()
            },
            cfg,
            state: State::Idle,
            next_attempt: now,
            last_connect_error: None,
        }
    }
}

/// The client side of one memif socket.
#[derive(Debug)]
pub struct Client {
    path: SocketPath,
    app_name: String,
    ifaces: Vec<Iface>,
    events: VecDeque<Event<SecondaryQueues>>,
}

impl Client {
    pub fn new(path: &SocketPath, ifaces: Vec<InterfaceConfig>) -> Result<Client, ConfigError> {
        InterfaceConfig::validate_all(&ifaces)?;
        for c in &ifaces {
            c.validate_region()?;
        }
        let now = Instant::now();
        Ok(Client {
            path: path.clone(),
            app_name: format!("veclane {}", env!("CARGO_PKG_VERSION")),
            ifaces: ifaces.into_iter().map(|c| Iface::new(c, now)).collect(),
            events: VecDeque::new(),
        })
    }

    /// Adds one more interface on this socket (`create interface memif ... slave`); it
    /// connects on the next `poll`.
    pub fn add_interface(&mut self, cfg: InterfaceConfig) -> Result<(), ConfigError> {
        cfg.validate_added(self.ifaces.iter().map(|i| i.cfg.id), &self.path)?;
        cfg.validate_region()?;
        self.ifaces.push(Iface::new(cfg, Instant::now()));
        Ok(())
    }

    pub fn interfaces(&self) -> Vec<InterfaceStatus> {
        self.ifaces.iter().map(|i| i.status.clone()).collect()
    }

    /// Stops using interface `id`: a connection gets a DISCONNECT ("interface deleted") and
    /// no reconnection follows. Returns whether the interface existed.
    pub fn remove_interface(&mut self, id: u32) -> bool {
        let Some(ii) = self.ifaces.iter().position(|i| i.cfg.id == id) else {
            return false;
        };
        self.close(ii, "interface deleted", true, false);
        // The disconnection is the owner's doing: it hears of it from this call, not as an event.
        self.events.retain(|e| e.id() != id);
        self.ifaces.remove(ii);
        true
    }

    /// Whether no interface is left on this socket.
    pub fn is_empty(&self) -> bool {
        self.ifaces.is_empty()
    }

    /// Why the last connection attempt of interface `id` failed, if it did.
    pub fn last_connect_error(&self, id: u32) -> Option<String> {
        self.ifaces
            .iter()
            .find(|i| i.cfg.id == id)
            .and_then(|i| i.last_connect_error.clone())
    }

    pub fn next_event(&mut self) -> Option<Event<SecondaryQueues>> {
        self.events.pop_front()
    }

    /// Connects what is due, waits up to `timeout` for control traffic and handles it.
    pub fn poll(&mut self, timeout: Duration) -> std::io::Result<()> {
        let now = Instant::now();
        for ii in 0..self.ifaces.len() {
            if matches!(self.ifaces[ii].state, State::Idle) && now >= self.ifaces[ii].next_attempt {
                self.attempt(ii);
            }
        }
        let mut wait = timeout;
        for i in &self.ifaces {
            let due = match &i.state {
                State::Idle => i.next_attempt,
                State::AwaitHello { deadline, .. } | State::Setup { deadline, .. } => *deadline,
                State::Connected { .. } => continue,
            };
            wait = wait.min(due.saturating_duration_since(now));
        }
        let (idx, ready) = {
            let mut idx = Vec::new();
            let mut fds = Vec::new();
            for (ii, i) in self.ifaces.iter().enumerate() {
                if let State::AwaitHello { chan, .. }
                | State::Setup { chan, .. }
                | State::Connected { chan, .. } = &i.state
                {
                    idx.push(ii);
                    fds.push(chan.fd());
                }
            }
            if fds.is_empty() {
                std::thread::sleep(wait);
                (idx, Vec::new())
            } else {
                let r = sock::wait_readable(&fds, wait.as_millis().min(i32::MAX as u128) as i32)?;
                (idx, r)
            }
        };
        for (k, ii) in idx.into_iter().enumerate() {
            if ready[k] {
                self.read(ii);
            }
        }
        let now = Instant::now();
        for ii in 0..self.ifaces.len() {
            let reason = match &self.ifaces[ii].state {
                State::Connected { link, .. } => link.take_fault(),
                State::AwaitHello { deadline, .. } | State::Setup { deadline, .. }
                    if now >= *deadline =>
                {
                    Some("handshake timeout".to_string())
                }
                _ => None,
            };
            if let Some(r) = reason {
                self.close(ii, &r, true, true);
            }
        }
        Ok(())
    }

    fn attempt(&mut self, ii: usize) {
        let i = &mut self.ifaces[ii];
        i.next_attempt = Instant::now() + i.cfg.reconnect_interval;
        match Channel::connect(&self.path) {
            Ok(chan) => {
                i.last_connect_error = None;
                i.state = State::AwaitHello {
                    chan,
                    deadline: Instant::now() + i.cfg.handshake_timeout,
                };
            }
            Err(e) => {
                if i.last_connect_error.is_none() {
                    tracing::debug!(socket = %self.path, id = i.cfg.id, "memif connect: {e}");
                }
                i.last_connect_error = Some(e.to_string());
            }
        }
    }

    fn read(&mut self, ii: usize) {
        for _ in 0..8 {
            let chan = match &self.ifaces[ii].state {
                State::AwaitHello { chan, .. }
                | State::Setup { chan, .. }
                | State::Connected { chan, .. } => chan,
                State::Idle => return,
            };
            let rcv = match chan.recv() {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) => {
                    let reason = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        "primary closed the control socket".to_string()
                    } else {
                        format!("control socket error: {e}")
                    };
                    self.close(ii, &reason, false, false);
                    return;
                }
            };
            drop(rcv.fds); // the primary never sends fds
            let res = match rcv.data {
                Err(n) => Err(Refusal(format!(
                    "malformed message: {n} bytes instead of 128"
                ))),
                Ok(b) => match Msg::parse(&b) {
                    Err(e) => Err(Refusal(e.to_string())),
                    Ok(m) => self.on_message(ii, m),
                },
            };
            if let Err(Refusal(r)) = res {
                self.close(ii, &r, true, true);
                return;
            }
        }
    }

    fn on_message(&mut self, ii: usize, msg: Msg) -> Result<(), Refusal> {
        if let Msg::Disconnect { reason, .. } = msg {
            self.close(
                ii,
                &format!("peer disconnected: {}", reason.to_string_lossy()),
                false,
                false,
            );
            return Ok(());
        }
        let state = std::mem::replace(&mut self.ifaces[ii].state, State::Idle);
        let (next, result) = self.step(ii, state, msg);
        self.ifaces[ii].state = next;
        result
    }

    fn step(&mut self, ii: usize, state: State, msg: Msg) -> (State, Result<(), Refusal>) {
        let cfg = self.ifaces[ii].cfg.clone();
        match (state, msg) {
            (State::AwaitHello { chan, deadline }, Msg::Hello(h)) => {
                if !(h.min_version..=h.max_version).contains(&VERSION) {
                    return (
                        State::AwaitHello { chan, deadline },
                        Err("incompatible protocol version".into()),
                    );
                }
                let s2m = cfg.s2m_rings.min(h.max_s2m_ring.saturating_add(1));
                let m2s = cfg.m2s_rings.min(h.max_m2s_ring.saturating_add(1));
                let log2 = cfg.log2_ring_size.min(h.max_log2_ring_size);
                let mem = match build_memory(&cfg, s2m, m2s, log2) {
                    Ok(m) => m,
                    Err(e) => {
                        return (
                            State::AwaitHello { chan, deadline },
                            Err(format!("cannot create memory: {e}").into()),
                        );
                    }
                };
                let mut outbox: VecDeque<Out> = VecDeque::new();
                outbox.extend((0..mem.regions.len()).map(Out::Region));
                outbox.extend((0..mem.s2m.len()).map(|index| Out::Ring { s2m: true, index }));
                outbox.extend((0..mem.m2s.len()).map(|index| Out::Ring { s2m: false, index }));
                outbox.push_back(Out::Connect);
                let st = State::Setup {
                    chan,
                    deadline,
                    mem,
                    outbox,
                    peer_app: h.name.to_string_lossy(),
                    awaiting_connected: false,
                };
                self.send_out(ii, st, Out::Init)
            }
            (
                State::Setup {
                    chan,
                    deadline,
                    mem,
                    mut outbox,
                    peer_app,
                    awaiting_connected: false,
                },
                Msg::Ack,
            ) => match outbox.pop_front() {
                Some(out) => {
                    let connecting = matches!(out, Out::Connect);
                    let st = State::Setup {
                        chan,
                        deadline,
                        mem,
                        outbox,
                        peer_app,
                        awaiting_connected: connecting,
                    };
                    self.send_out(ii, st, out)
                }
                None => (
                    State::Setup {
                        chan,
                        deadline,
                        mem,
                        outbox,
                        peer_app,
                        awaiting_connected: false,
                    },
                    Err("unexpected ACK".into()),
                ),
            },
            (
                State::Setup {
                    chan,
                    mem,
                    peer_app,
                    awaiting_connected: true,
                    ..
                },
                Msg::Connected { if_name },
            ) => {
                let link = Link::new_up();
                let queues =
                    make_queues(&cfg, mem.regions.clone(), mem.s2m, mem.m2s, &link, mem.log2);
                let peer = PeerInfo {
                    app_name: peer_app,
                    if_name: if_name.to_string_lossy(),
                    s2m_rings: queues.tx.len() as u16,
                    m2s_rings: queues.rx.len() as u16,
                    log2_ring_size: mem.log2,
                    regions: mem.regions.len(),
                    pid: rustix::net::sockopt::socket_peercred(chan.fd())
                        .ok()
                        .map(|c| c.pid.as_raw_nonzero().get()),
                };
                self.ifaces[ii].status.record_connect(&self.path, &peer);
                self.events.push_back(Event::Connected {
                    id: cfg.id,
                    peer,
                    queues,
                });
                (State::Connected { chan, link }, Ok(()))
            }
            (st, m) => (st, Err(format!("unexpected message {}", m.name()).into())),
        }
    }

    fn send_out(&mut self, ii: usize, st: State, out: Out) -> (State, Result<(), Refusal>) {
        let cfg = &self.ifaces[ii].cfg;
        let State::Setup { chan, mem, .. } = &st else {
            return (st, Err("internal: send outside setup".into()));
        };
        let sent = match out {
            Out::Init => chan.send(
                &Msg::Init(Init {
                    version: VERSION,
                    id: cfg.id,
                    mode: cfg.mode,
                    secret: FixedStr::new(cfg.secret.as_deref().unwrap_or("")),
                    name: FixedStr::new(&self.app_name),
                }),
                None,
            ),
            Out::Region(i) => {
                let r = &mem.regions[i];
                chan.send(
                    &Msg::AddRegion {
                        index: i as u16,
                        size: r.len() as u64,
                    },
                    r.fd(),
                )
            }
            Out::Ring { s2m, index } => {
                let (ring, fd) = if s2m {
                    &mem.s2m[index]
                } else {
                    &mem.m2s[index]
                };
                let m = Msg::AddRing(AddRing {
                    flags: if s2m { ADD_RING_FLAG_S2M } else { 0 },
                    index: index as u16,
                    region: 0,
                    offset: ring.offset() as u32,
                    log2_ring_size: ring.log2(),
                    private_hdr_size: 0,
                });
                chan.send(&m, Some(fd.as_fd()))
            }
            Out::Connect => chan.send(
                &Msg::Connect {
                    if_name: FixedStr::new(&cfg.name),
                },
                None,
            ),
        };
        match sent {
            Ok(()) => (st, Ok(())),
            Err(e) => (st, Err(format!("send: {e}").into())),
        }
    }

    fn close(&mut self, ii: usize, reason: &str, send: bool, protocol_error: bool) {
        let i = &mut self.ifaces[ii];
        let state = std::mem::replace(&mut i.state, State::Idle);
        let was_connected = match &state {
            State::AwaitHello { chan, .. }
            | State::Setup { chan, .. }
            | State::Connected { chan, .. } => {
                if send {
                    let _ = chan.send(&Msg::disconnect(reason), None);
                }
                if let State::Connected { link, .. } = &state {
                    link.set_down();
                    true
                } else {
                    false
                }
            }
            State::Idle => return,
        };
        drop(state);
        i.next_attempt = Instant::now() + i.cfg.reconnect_interval;
        if let Some(e) = i
            .status
            .record_close(&self.path, reason, was_connected, protocol_error)
        {
            self.events.push_back(e);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        for ii in 0..self.ifaces.len() {
            self.close(ii, "interface deleted", true, false);
        }
    }
}

fn build_memory(cfg: &InterfaceConfig, s2m: u16, m2s: u16, log2: u8) -> std::io::Result<Memory> {
    let nrings = usize::from(s2m + m2s);
    let stride = cfg.layout.ring_bytes(log2) as usize;
    let rings = Arc::new(SharedMemory::create("memif-rings", nrings * stride)?);
    let bufs = Arc::new(SharedMemory::create(
        "memif-buffers",
        (nrings << log2) * cfg.buffer_size as usize,
    )?);
    let mut s2m_rings = Vec::new();
    let mut m2s_rings = Vec::new();
    for g in 0..nrings {
        let ring = Ring::new(rings.clone(), (g * stride) as u64, log2, cfg.layout)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        ring.init();
        let fd = rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        if g < usize::from(s2m) {
            s2m_rings.push((ring, fd));
        } else {
            m2s_rings.push((ring, fd));
        }
    }
    Ok(Memory {
        regions: vec![rings, bufs],
        s2m: s2m_rings,
        m2s: m2s_rings,
        log2,
    })
}

fn make_queues(
    cfg: &InterfaceConfig,
    regions: Vec<Arc<SharedMemory>>,
    s2m: Vec<(Ring, OwnedFd)>,
    m2s: Vec<(Ring, OwnedFd)>,
    link: &Arc<Link>,
    log2: u8,
) -> SecondaryQueues {
    let nslots = 1u64 << log2;
    let slot_bufs = |g: usize| SlotBuffers {
        region: regions[1].clone(),
        region_index: 1,
        base: g as u64 * nslots * u64::from(cfg.buffer_size),
        size: cfg.buffer_size,
    };
    let ns2m = s2m.len();
    let tx = s2m
        .into_iter()
        .enumerate()
        .map(|(i, (ring, fd))| {
            SecondaryTx::new(
                QueueBase::new(ring, fd, link.clone(), i as u16),
                slot_bufs(i),
            )
        })
        .collect();
    let rx = m2s
        .into_iter()
        .enumerate()
        .map(|(i, (ring, fd))| {
            let mut q = SecondaryRx::new(
                QueueBase::new(ring, fd, link.clone(), i as u16),
                slot_bufs(ns2m + i),
            );
            q.set_interrupt_mode(false);
            q
        })
        .collect();
    SecondaryQueues { tx, rx }
}
