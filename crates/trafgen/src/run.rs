//! The generator/sink loop, in either memif role.
//!
//! Here: the run's configuration, the session (its interfaces, queues and buffers) and its
//! loop. `Session::run` and `Endpoint::poll` stay in this module because `--cost` finds them
//! by name (`bench/src/cost.rs`) and a method's symbol names the module of its `impl`. Around
//! them: `connect` (the session set up), `send` (the senders and their per-frame paths),
//! `receive` (the receive step and probe parsing), `trial` (the steps of a pass and the
//! report) and `settle` (the end of a trial as the peer's counters see it).

mod connect;
mod receive;
mod send;
mod settle;
mod trial;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use buffer::Pool;
use memif::{Client, Event, InterfaceConfig, Listener, PrimaryQueues, SecondaryQueues, SocketPath};

use crate::frame::FrameSpec;
use crate::stats::GenReport;
use connect::{KernelQueues, check_warmup};
use trial::{Before, Trial};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Listens and copies (the switch's path).
    Primary,
    /// Connects and writes frames in place in its own shared memory (zero-copy).
    Secondary,
}

/// With a window (`GenConfig::window`): frames still out this long after the last frame came
/// back are given up as lost, so that a device that drops frames cannot close the window for
/// good. Long enough for a device under callgrind, which forwards fifty times slower.
pub const WINDOW_GIVE_UP: Duration = Duration::from_millis(200);

#[derive(Debug, Clone)]
pub struct GenConfig {
    pub role: Role,
    pub socket: SocketPath,
    pub iface: InterfaceConfig,
    /// Loop mode: also connect this interface (same socket, same role) and receive on it what
    /// a device under test forwarded from `iface`. One loop on one core then both sends and
    /// receives, as a two-port traffic generator does.
    pub rx_iface: Option<InterfaceConfig>,
    /// More interfaces on the same socket, after `iface` and `rx_iface`: every one is
    /// received from, and one with a frame spec sends too. Every sending interface (`iface`,
    /// these and `kernel_ports`) takes an equal share of the rate and the count, on streams of
    /// its own.
    pub ports: Vec<Port>,
    /// Ports on Linux interfaces (AF_PACKET), after every memif interface: received from, and
    /// sending when they have a frame spec, as `ports` do.
    pub kernel_ports: Vec<KernelPort>,
    /// Whether `iface` sends `spec` (with `send`); `false` leaves the sending to the other
    /// ports (a kernel port in its place), `spec` still giving the run's frame size.
    pub iface_sends: bool,
    pub spec: FrameSpec,
    pub send: bool,
    pub receive: bool,
    /// Packets per second; `None` sends flat out.
    pub rate_pps: Option<f64>,
    /// With a rate, behave as a port on a wire, which nothing can hold back: frames the ring
    /// has no room for are dropped and counted (`tx_refused`) instead of retried, and when the
    /// generator itself falls more than a ring behind its schedule the frames it missed are
    /// skipped and counted (`tx_shortfall`). An offered load then stays an offered load, which
    /// throughput searches need. Without it (and always without a rate) a full ring holds the
    /// sender back.
    pub drop_when_full: bool,
    pub burst: usize,
    /// Loop mode: at most this many frames in flight (sent and not yet back), a closed loop,
    /// so that a device under test finds at most this many on its rings at a poll, as it does
    /// when it is not overloaded. Frames not back [`WINDOW_GIVE_UP`] after the last that came
    /// back count as lost and give their places back. `None`: as many as the rings take.
    pub window: Option<u64>,
    /// Stop sending after this many frames...
    pub count: Option<u64>,
    /// ...or after this long, whichever comes first.
    pub duration: Duration,
    /// Send this long before the measurement window (`duration`) starts, at the same rate and
    /// without a break, and leave it out of every count, rate and latency of the report
    /// (`GenReport::warmup_*` say what it was). A receiver that sat idle before a run starts
    /// with cold caches; a short trial must not measure that. A frame belongs to the window
    /// when it was sent in it, whenever it arrives. Not with `count`.
    pub warmup: Duration,
    /// Give up if no peer connects within this time.
    pub connect_timeout: Duration,
    /// After sending, keep receiving until nothing arrived for this long.
    pub drain: Duration,
    pub cpu: Option<usize>,
    /// A receive-only run (a sink) sleeps on its ring's interrupt whenever its ring is empty;
    /// `false`: it polls without a break. A sink that busy-polls a CPU it shares
    /// with another busy loop (the sender, on a two-CPU machine) only runs when the
    /// scheduler gives it its turn, milliseconds later, and every latency it measures is
    /// that; one that sleeps is woken when a frame arrives.
    pub idle_sleep: bool,
    /// Cumulative counts are sampled this often during a run (`GenReport::samples`), so that
    /// a run cut by a stall shows it.
    pub sample_every: Duration,
    /// Record each received frame's latency from the timestamp it carries (the report's
    /// `latency`). About 15 instructions a frame, a twentieth of what the generator spends
    /// on one; a throughput trial, which reads no latency, turns it off and offers more
    /// before the generator becomes the ceiling. Off, the report's latency is all zeros.
    pub latency: bool,
    /// Read every received frame of ours whole and check its filler, the bytes after the
    /// probe, against what was sent (the report's `rx_corrupt`): a DUT that damages payloads
    /// is caught, at the cost of reading them all (a frame copied out of the ring, as a pod's
    /// memif input would).
    pub check_payload: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            role: Role::Secondary,
            socket: SocketPath::parse("/run/veclane/memif.sock"),
            iface: InterfaceConfig::default(),
            rx_iface: None,
            ports: Vec::new(),
            kernel_ports: Vec::new(),
            iface_sends: true,
            spec: FrameSpec::default(),
            send: true,
            receive: true,
            rate_pps: None,
            drop_when_full: false,
            burst: 64,
            window: None,
            count: None,
            duration: Duration::from_secs(5),
            warmup: Duration::ZERO,
            connect_timeout: Duration::from_secs(10),
            drain: Duration::from_millis(300),
            cpu: None,
            idle_sleep: true,
            sample_every: Duration::from_secs(1),
            latency: true,
            check_payload: false,
        }
    }
}

/// A further interface of a generator ([`GenConfig::ports`]).
#[derive(Debug, Clone)]
pub struct Port {
    pub iface: InterfaceConfig,
    /// What it sends, if it sends.
    pub spec: Option<FrameSpec>,
}

/// A generator port on a Linux interface (one end of a veth pair, the other a DUT's uplink),
/// through AF_PACKET: PACKET_MMAP rings, the transmit one bypassing the qdisc, as veclane's
/// own AF_PACKET uplink opens them. Frames are copied into the kernel's ring and out of it,
/// as on a primary memif.
#[derive(Debug, Clone)]
pub struct KernelPort {
    /// The id it has in streams and reports; must differ from every memif interface's.
    pub id: u32,
    /// The Linux interface.
    pub host_if: String,
    /// The network namespace it lives in: an `ip netns` name or a path; `None`: the caller's.
    pub netns: Option<String>,
    /// What it sends, if it sends.
    pub spec: Option<FrameSpec>,
}

#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("{0}")]
    Config(String),
    #[error("memif: {0}")]
    Memif(String),
    #[error("kernel port {host_if}: {reason}")]
    Kernel { host_if: String, reason: String },
    #[error("no peer connected to {socket} within {secs} s{detail}")]
    NoPeer {
        socket: String,
        secs: u64,
        detail: String,
    },
}

enum Endpoint {
    Primary(Listener),
    Secondary(Client),
}

enum Queues {
    Primary(PrimaryQueues),
    Secondary(SecondaryQueues),
    Kernel(KernelQueues),
}

impl Endpoint {
    fn poll(&mut self, t: Duration) -> std::io::Result<Option<Event<Queues>>> {
        Ok(match self {
            Endpoint::Primary(l) => {
                l.poll(t)?;
                l.next_event().map(|e| e.map(Queues::Primary))
            }
            Endpoint::Secondary(c) => {
                c.poll(t)?;
                c.next_event().map(|e| e.map(Queues::Secondary))
            }
        })
    }

    fn status(&self) -> memif::InterfaceStatus {
        let v = match self {
            Endpoint::Primary(l) => l.interfaces(),
            Endpoint::Secondary(c) => c.interfaces(),
        };
        v.into_iter().next().unwrap_or_default()
    }
}

/// Runs one generator/sink until its send budget is spent and the return traffic drained, the
/// peer leaves, or `stop` is set; then disconnects.
pub fn run(cfg: &GenConfig, stop: &AtomicBool) -> Result<GenReport, GenError> {
    let mut session = Session::connect(cfg, stop)?;
    let mut report = session.run(cfg, stop)?;
    // Let the peer see a clean DISCONNECT before we report.
    let st = session.close();
    report.connects = st.connects;
    report.last_disconnect_reason = st.last_disconnect_reason;
    Ok(report)
}

/// A connected generator: its interfaces, queues and local buffers. A harness keeps it
/// connected after a run to read the peer's counters while the link is still up (a DPDK
/// `net_memif` port reports zero once its peer has gone).
pub struct Session {
    ep: Endpoint,
    /// Every interface, in the configuration's order (`iface`, `rx_iface`, `ports`); all of
    /// them are received from.
    peers: Vec<Queues>,
    pool: Pool,
    /// The interfaces that send, and what.
    sends: Vec<SendPort>,
}

/// An interface that sends: its place in `peers`, its id, its frames.
struct SendPort {
    peer: usize,
    id: u32,
    spec: FrameSpec,
    template: Vec<u8>,
    /// Frames sent so far in this session's life on each tx queue (secondary): once every
    /// slot's buffer of a queue has held the template, a frame there needs only its headers
    /// written (only its probe, when they are the same in every frame). The buffers belong to
    /// the session, so this survives from one run to the next.
    primed: Vec<u64>,
    /// A kernel port: frames are copied from the session's buffers whatever the role.
    kernel: bool,
}

impl core::fmt::Debug for Session {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("interfaces", &self.peers.len())
            .field("sending", &self.sends.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Sends per `cfg` (rate, count, duration) while receiving, until the send budget is spent
    /// and the return traffic drained, the peer leaves, or `stop` is set. Counters in the report
    /// cover this run only.
    pub fn run(&mut self, cfg: &GenConfig, stop: &AtomicBool) -> Result<GenReport, GenError> {
        check_warmup(cfg)?;
        let Session {
            ep,
            peers,
            pool,
            sends,
        } = self;
        let before = Before::read(peers, sends);
        let mut t = Trial::new(cfg, peers, pool, sends)?;
        let mut link_lost = false;
        loop {
            t.iter += 1;
            let Ok(sending) = t.send(cfg, peers, pool) else {
                link_lost = true;
                break;
            };
            t.end_warmup(cfg);
            let Ok(got) = t.receive(cfg, peers, pool, sending) else {
                link_lost = true;
                break;
            };
            t.sample_if_due();
            if stop.load(Ordering::Relaxed) || (!sending && t.over(cfg, peers)) {
                break;
            }
            t.pause(cfg, sending, got, peers);
            // Control traffic (peer leaving) is checked every few thousand bursts, or at once
            // when idle.
            if t.iter.is_multiple_of(4096) || (got == 0 && !sending) {
                match ep.poll(Duration::ZERO) {
                    Ok(Some(Event::Disconnected { .. })) => {
                        link_lost = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => return Err(GenError::Memif(e.to_string())),
                }
            }
        }
        Ok(t.report(cfg, (peers, pool, sends), &before, link_lost))
    }

    /// Disconnects; returns the send interface's status (connects, last reason).
    pub fn close(self) -> memif::InterfaceStatus {
        let Session { ep, peers, .. } = self;
        drop(peers);
        ep.status()
    }
}
