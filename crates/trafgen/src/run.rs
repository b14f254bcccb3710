//! The generator/sink loop, in either memif role.

mod settle;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use memif::{Client, Event, InterfaceConfig, Listener, PrimaryQueues, SecondaryQueues, SocketPath};
use uplink::af_packet;

use crate::frame::{self, FrameSpec, MAX_HEAD, PROBE_LEN, PROBE_OFFSET, Probe};
use crate::now_ns;
use crate::stats::{GenReport, Sample, StreamInfo, WindowedRx};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Listens and copies (the switch's path).
    Primary,
    /// Connects and writes frames in place in its own shared memory (zero-copy).
    Secondary,
}

/// A paced send-only run sleeps when its next batch is due more than this far ahead...
const SLEEP_AHEAD_S: f64 = 100e-6;
/// ...waking this much before it (a sleep overshoots by the timer slack, 50 µs by default).
const WAKE_EARLY_S: f64 = 60e-6;
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

/// A kernel port's queue pairs.
struct KernelQueues {
    rx: Vec<af_packet::RxQueue>,
    tx: Vec<af_packet::TxQueue>,
}

impl KernelQueues {
    /// Opens `port`'s interface with one queue pair (in its namespace, if it names one).
    fn open(port: &KernelPort) -> Result<KernelQueues, GenError> {
        let err = |reason: String| GenError::Kernel {
            host_if: port.host_if.clone(),
            reason,
        };
        let open =
            || af_packet::AfPacket::open(&port.host_if, af_packet::AfPacketConfig::default());
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

/// A transmit queue frames are copied into from the session's own buffers: a primary memif's,
/// or a kernel port's.
trait CopyTx {
    fn queue_index(&self) -> u16;
    /// Sends the front of `pkts` (copies; the buffers stay ours); how many went. An error is
    /// a link that went down.
    fn send_copies(&mut self, pool: &Pool, pkts: &[u32]) -> Result<usize, memif::LinkDown>;
}

impl CopyTx for memif::PrimaryTx {
    fn queue_index(&self) -> u16 {
        self.index()
    }

    fn send_copies(&mut self, pool: &Pool, pkts: &[u32]) -> Result<usize, memif::LinkDown> {
        self.send(pool, pkts)
    }
}

impl CopyTx for af_packet::TxQueue {
    fn queue_index(&self) -> u16 {
        self.queue()
    }

    /// Frames the kernel refused as malformed or oversize count as sent and lost on the way
    /// (the sink counts them missing), as a wire would lose them.
    fn send_copies(&mut self, pool: &Pool, pkts: &[u32]) -> Result<usize, memif::LinkDown> {
        self.send(pool, pkts)
            .map(|st| st.consumed)
            .map_err(|_| memif::LinkDown)
    }
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
    /// Checks `cfg`, pins the calling thread to `cfg.cpu`, and connects every interface (waiting
    /// up to `cfg.connect_timeout`).
    pub fn connect(cfg: &GenConfig, stop: &AtomicBool) -> Result<Session, GenError> {
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
        check_warmup(cfg)?;
        let template =
            |spec: &FrameSpec| spec.template().map_err(|e| GenError::Config(e.to_string()));
        if let Some(cpu) = cfg.cpu {
            crate::pin_to_cpu(cpu)
                .map_err(|e| GenError::Config(format!("cannot pin to CPU {cpu}: {e}")))?;
        }
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
        // Every interface must connect.
        let deadline = Instant::now() + cfg.connect_timeout;
        let mut slots: Vec<Option<Queues>> = ifaces.iter().map(|_| None).collect();
        while slots.iter().any(Option::is_none) {
            if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                let missing = ifaces[slots.iter().position(Option::is_none).unwrap_or(0)].id;
                let detail = match &ep {
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
        let mut peers: Vec<Queues> = slots.into_iter().flatten().collect();
        for p in &cfg.kernel_ports {
            peers.push(Queues::Kernel(KernelQueues::open(p)?));
        }
        // Local buffers hold a whole frame, as testpmd's mbufs do when it is given --mbuf-size for
        // jumbo frames: one copy per frame on receive instead of a chain of 2 KiB pieces.
        let largest = sends.iter().map(|p| p.spec.wire_len()).max();
        let data_size = largest
            .unwrap_or(cfg.spec.wire_len())
            .next_multiple_of(1024)
            .clamp(2048, 64512) as u16;
        let count = if data_size > 2048 { 4096 } else { 16384 };
        let pool = Pool::new(PoolConfig {
            count,
            data_size,
            ..Default::default()
        })
        .map_err(|e| GenError::Config(e.to_string()))?;
        Ok(Session {
            ep,
            peers,
            pool,
            sends,
        })
    }

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
        let (ring_full0, bad0) = tx_rx_counts(peers, sends);
        let kernel_drops0 = kernel_drops(peers);
        let mut report = GenReport {
            role: match cfg.role {
                Role::Primary => "primary".into(),
                Role::Secondary => "secondary".into(),
            },
            frame_size: cfg.spec.size,
            ..Default::default()
        };
        let mut rx = WindowedRx::new(cfg.latency);
        // Each sending interface's streams: one per (tx queue, network), numbered on from the
        // previous interface's.
        let mut senders = Vec::with_capacity(sends.len());
        let mut stream_base = 0usize;
        for (i, sp) in sends.iter().enumerate() {
            let nq = match &peers[sp.peer] {
                Queues::Secondary(q) => q.tx.len(),
                Queues::Primary(q) => q.tx.len(),
                Queues::Kernel(q) => q.tx.len(),
            };
            let s = Sender::new(cfg, sp, pool, (i, sends.len()), stream_base, nq);
            stream_base += s.seqs.len();
            senders.push(s);
        }
        if stream_base > usize::from(u16::MAX) {
            return Err(GenError::Config(format!(
                "{stream_base} streams (tx queues × networks over every sending interface) \
                 are more than a probe can number"
            )));
        }
        let next_seqs = |senders: &[Sender]| -> Vec<u64> {
            senders.iter().flat_map(|s| s.seqs.clone()).collect()
        };
        let total = |senders: &[Sender]| {
            senders
                .iter()
                .fold(Counts::default(), |a, s| a.plus(&s.counts))
        };
        let start = Instant::now();
        // The measurement window: when it started and the sender's counts then. Every count
        // in the report is taken from here.
        let mut win = (start, Counts::default());
        let mut win_seqs = next_seqs(&senders);
        if cfg.warmup.is_zero() {
            rx.start_window(&win_seqs);
        }
        let mut last_rx = Instant::now();
        let mut send_end: Option<Instant> = None;
        let mut iter = 0u64;
        let mut samples = Vec::new();
        let sample = |t0: Instant, c0: &Counts, s: &[Sender], rx: u64| {
            let c = total(s).minus(c0);
            Sample {
                t_s: t0.elapsed().as_secs_f64(),
                tx: c.sent,
                rx,
                refused: c.refused,
                shortfall: c.shortfall,
            }
        };
        let every = cfg.sample_every.max(Duration::from_millis(10));
        let mut next_sample = every;
        let mut out = Vec::with_capacity(256);
        let mut hdr = [0u8; MAX_HEAD];
        // Payload checks: frames whose filler was not what was sent, and room to read them.
        let (check, mut corrupt) = (cfg.check_payload, 0u64);
        let mut scratch = if check { vec![0u8; 4096] } else { Vec::new() };
        let mut whole = Vec::new();
        // The window (`GenConfig::window`): frames back when that count last changed, and
        // frames given up as lost.
        let (mut window_back, mut window_lost) = ((0u64, Instant::now()), 0u64);
        // Gaps while sending: between two passes of this loop (our CPU was taken away) and
        // between two receives once frames come back (the peer's CPU, or ours, stopped).
        let (mut prev_ns, mut last_got_ns, mut max_loop_ns, mut max_rx_gap_ns) =
            (0u64, 0u64, 0u64, 0u64);
        // Receive at most ~256 KiB per burst: a burst's copies should stay in this core's L2
        // (256 jumbo frames would be 2.3 MB and write back to memory before we read them).
        let rx_burst = (RX_BURST_BYTES / cfg.spec.size.max(1)).clamp(8, 256);
        loop {
            iter += 1;
            let mut sending = false;
            let mut down = false;
            // The window's places left: frames sent less those back and those given up.
            let mut room = cfg.window.map_or(u64::MAX, |w| {
                let sent: u64 = senders.iter().map(|s| s.counts.sent).sum();
                let back = rx.ours();
                if back != window_back.0 {
                    window_back = (back, Instant::now());
                } else if sent > back + window_lost && window_back.1.elapsed() >= WINDOW_GIVE_UP {
                    window_lost = sent - back;
                    window_back.1 = Instant::now();
                }
                w.saturating_sub(sent.saturating_sub(back + window_lost))
            });
            for s in senders.iter_mut() {
                if s.done(start) {
                    continue;
                }
                sending = true;
                s.room = room;
                let before = s.counts.sent;
                let r = match &mut peers[s.peer] {
                    Queues::Secondary(q) => s.send_secondary(q, start),
                    Queues::Primary(q) => s.send_copies(&mut q.tx, pool, start),
                    Queues::Kernel(q) => s.send_copies(&mut q.tx, pool, start),
                };
                room = room.saturating_sub(s.counts.sent - before);
                down |= r.is_err();
            }
            if down {
                report.link_lost = true;
                break;
            }
            if !rx.started() && start.elapsed() >= cfg.warmup {
                // The warm-up ends here: what it sent and measured stays out of the report.
                win = (Instant::now(), total(&senders));
                win_seqs = next_seqs(&senders);
                rx.start_window(&win_seqs);
                (prev_ns, last_got_ns, max_loop_ns, max_rx_gap_ns) = (0, 0, 0, 0);
            }
            let mut got = 0usize;
            let now = now_ns();
            if sending && prev_ns != 0 {
                max_loop_ns = max_loop_ns.max(now.saturating_sub(prev_ns));
            }
            prev_ns = now;
            if cfg.receive {
                // In loop mode the send interface's own rx is drained too (a DUT may answer there).
                let res = peers.iter_mut().try_for_each(|q| match q {
                    Queues::Primary(q) => q.rx.iter_mut().try_for_each(|r| {
                        out.clear();
                        r.recv(pool, &mut out, rx_burst)?;
                        if check {
                            corrupt += count_corrupt(pool, &out, &mut whole);
                        }
                        got += record_copied(pool, &out, &mut rx, now);
                        Ok(())
                    }),
                    Queues::Kernel(q) => {
                        for r in q.rx.iter_mut() {
                            out.clear();
                            r.recv(pool, &mut out, rx_burst);
                            if check {
                                corrupt += count_corrupt(pool, &out, &mut whole);
                            }
                            got += record_copied(pool, &out, &mut rx, now);
                        }
                        Ok(())
                    }
                    Queues::Secondary(q) => q.rx.iter_mut().try_for_each(|r| {
                        // Two loops: the check's branch and state inside the one without it
                        // cost 9 instructions a frame (--cost of `none`).
                        got += if check {
                            r.recv_with(rx_burst, |pkt| {
                                let probe = probe_of(pkt, &mut hdr);
                                if probe.is_some() && !payload_intact(pkt, &mut scratch) {
                                    corrupt += 1;
                                }
                                rx.record(pkt.len(), probe, now);
                            })?
                        } else {
                            r.recv_with(rx_burst, |pkt| {
                                rx.record(pkt.len(), probe_of(pkt, &mut hdr), now);
                            })?
                        };
                        Ok::<(), memif::LinkDown>(())
                    }),
                });
                if res.is_err() {
                    report.link_lost = true;
                    break;
                }
            }
            if got > 0 {
                last_rx = Instant::now();
                if sending && last_got_ns != 0 {
                    max_rx_gap_ns = max_rx_gap_ns.max(now.saturating_sub(last_got_ns));
                }
                last_got_ns = now;
            }
            if send_end.is_none() && rx.started() && iter.is_multiple_of(64) {
                let t = win.0.elapsed();
                if t >= next_sample {
                    samples.push(sample(win.0, &win.1, &senders, rx.window.packets));
                    next_sample += every;
                }
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if !sending {
                if cfg.send {
                    // Sent everything. Stop once the peer has taken every frame off our rings (so
                    // that leaving does not discard frames in flight) and the return traffic, if
                    // any, has drained; both waits are bounded by `drain`.
                    if send_end.is_none() {
                        senders.iter_mut().for_each(Sender::finish);
                        samples.push(sample(win.0, &win.1, &senders, rx.window.packets));
                    }
                    // Sending ended at the schedule's end, however late this pass noticed
                    // it: a pause after the last frame is not part of the sending window.
                    let ended = *send_end.get_or_insert_with(|| {
                        Instant::now().min(start + cfg.warmup + cfg.duration)
                    });
                    let flushed = senders.iter().all(|s| settle::flushed(&mut peers[s.peer]));
                    let waited = ended.elapsed() >= cfg.drain;
                    // Every frame sent has come back (loop mode, a DUT that lost nothing):
                    // nothing is left to wait for.
                    let all_back = rx.ours() >= total(&senders).sent;
                    if (flushed || waited)
                        && (!cfg.receive || all_back || last_rx.elapsed() >= cfg.drain)
                    {
                        break;
                    }
                } else if start.elapsed() >= cfg.duration {
                    // Receive only: `duration` bounds the whole run; the peer leaving ends it sooner.
                    break;
                }
            }
            // A paced sender that only sends sleeps until just before its next batch when that
            // is far off, instead of spinning: on a CPU it shares (with a sink, on two CPUs)
            // a spinning loop takes turns with the other by the scheduler's slices, which
            // delays the other by milliseconds. Send times are stamped when frames go, so
            // the sleep moves no measured latency. A generator that also receives never
            // sleeps.
            if sending && !cfg.receive {
                let at = senders
                    .iter()
                    .filter_map(Sender::next_due)
                    .fold(f64::INFINITY, f64::min);
                let ahead = at - start.elapsed().as_secs_f64();
                if ahead.is_finite() && ahead > SLEEP_AHEAD_S {
                    std::thread::sleep(Duration::from_secs_f64(ahead - WAKE_EARLY_S));
                }
            }
            // An idle sink sleeps on its ring's eventfd (the sender signals once we unmask), so
            // waiting for traffic costs no CPU and a frame wakes it at once.
            if got == 0 && !cfg.send && cfg.idle_sleep {
                match peers.last().expect("at least one interface") {
                    Queues::Primary(q) => drop(q.rx.first().map(|r| r.wait(50))),
                    Queues::Secondary(q) => drop(q.rx.first().map(|r| r.wait(50))),
                    // No interrupt to sleep on: a sink on a kernel port polls.
                    Queues::Kernel(_) => {}
                }
            }
            // Control traffic (peer leaving) is checked every few thousand bursts, or at once when idle.
            if iter.is_multiple_of(4096) || (got == 0 && !sending) {
                match ep.poll(Duration::ZERO) {
                    Ok(Some(Event::Disconnected { .. })) => {
                        report.link_lost = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => return Err(GenError::Memif(e.to_string())),
                }
            }
        }
        if !rx.started() {
            // Stopped (or the link went) during the warm-up: the window is empty.
            win = (Instant::now(), total(&senders));
            win_seqs = next_seqs(&senders);
        }
        let send_s = send_end
            .map_or_else(|| win.0.elapsed(), |e| e.saturating_duration_since(win.0))
            .as_secs_f64();
        if send_end.is_none() {
            samples.push(sample(win.0, &win.1, &senders, rx.window.packets));
        }
        report.samples = samples;
        for (sp, s) in sends.iter_mut().zip(&senders) {
            sp.primed = s.primed.clone();
            pool.free_bulk(&s.chains);
        }
        report.tx_stream_packets = next_seqs(&senders)
            .iter()
            .zip(&win_seqs)
            .map(|(end, start)| end - start)
            .collect();
        report.streams = senders.iter().flat_map(Sender::streams).collect();
        let c = total(&senders).minus(&win.1);
        report.tx_packets = c.sent;
        report.tx_offered = c.offered;
        report.tx_refused = c.refused;
        report.tx_shortfall = c.shortfall;
        report.warmup_s = win.0.duration_since(start).as_secs_f64();
        report.warmup_tx_offered = win.1.offered;
        report.warmup_tx_packets = win.1.sent;
        report.warmup_tx_refused = win.1.refused;
        report.warmup_rx_packets = rx.warmup.packets;
        report.tx_window_s = send_s;
        report.max_stall_us = max_loop_ns as f64 / 1e3;
        report.max_rx_gap_us = max_rx_gap_ns as f64 / 1e3;
        if send_s > 0.0 {
            report.tx_mpps = c.sent as f64 / send_s / 1e6;
        }
        let (ring_full, bad) = tx_rx_counts(peers, sends);
        report.tx_ring_full = ring_full - ring_full0;
        report.rx_bad_desc = bad - bad0;
        report.rx_corrupt = corrupt;
        report.rx_kernel_drops = kernel_drops(peers) - kernel_drops0;
        report.fill_rx(&rx.window);
        Ok(report)
    }

    /// Disconnects; returns the send interface's status (connects, last reason).
    pub fn close(self) -> memif::InterfaceStatus {
        let Session { ep, peers, .. } = self;
        drop(peers);
        ep.status()
    }
}

/// Records frames received into the session's own buffers (a primary memif's, a kernel
/// port's) and frees them; returns how many.
fn record_copied(pool: &mut Pool, bufs: &[u32], rx: &mut WindowedRx, now: u64) -> usize {
    for &h in bufs {
        rx.record(
            pool.meta(h).total_len as usize,
            Probe::parse(pool.data(h)),
            now,
        );
    }
    pool.free_bulk(bufs);
    bufs.len()
}

/// The probe of a frame received in place, if it is one of ours. A plain frame's probe ends
/// within 62 bytes: a fixed-size copy read at constant offsets, looked for first. VXLAN's 50
/// more (and a frame too short for the copy) the general way, through `hdr`: a VXLAN frame
/// never passes for a plain one, as its bytes 42 and 43 are the VXLAN flags (0x08) and a
/// reserved zero, not the probe's magic.
#[inline(always)]
fn probe_of(pkt: &memif::RxPacket<'_>, hdr: &mut [u8; MAX_HEAD]) -> Option<Probe> {
    if let Some(h) = pkt.head::<{ PROBE_OFFSET + PROBE_LEN }>() {
        if let Some(p) = Probe::parse_in(&h, false) {
            return Some(p);
        }
        if !Probe::is_vxlan(&h) {
            return None;
        }
    }
    let n = pkt.read(0, hdr);
    Probe::parse(&hdr[..n])
}

/// Whether a received frame of ours (its probe read) carries the filler that was sent after
/// its probe: read out of the ring in pieces of `scratch`'s size.
fn payload_intact(pkt: &memif::RxPacket<'_>, scratch: &mut [u8]) -> bool {
    let vxlan = pkt.head::<38>().is_some_and(|h| Probe::is_vxlan(&h));
    let (start, len) = (frame::filler_offset(vxlan), pkt.len());
    let mut at = start;
    while at < len {
        let n = (len - at).min(scratch.len());
        let piece = &mut scratch[..n];
        if pkt.read(at, piece) != piece.len() || !frame::filler_intact(piece, at - start) {
            return false;
        }
        at += piece.len();
    }
    true
}

/// How many of the frames received into the session's own buffers are ours (a probe) with a
/// filler other than what was sent; `whole` is room to read each chain into.
fn count_corrupt(pool: &Pool, bufs: &[u32], whole: &mut Vec<u8>) -> u64 {
    let mut bad = 0;
    for &h in bufs {
        whole.clear();
        pool.read_chain(h, whole);
        if Probe::parse(whole).is_some() {
            let start = frame::filler_offset(Probe::is_vxlan(whole));
            if !whole
                .get(start..)
                .is_some_and(|f| frame::filler_intact(f, 0))
            {
                bad += 1;
            }
        }
    }
    bad
}

/// Frames the kernel ports' sockets dropped for a full ring so far (the kernel's count, read
/// now).
fn kernel_drops(peers: &mut [Queues]) -> u64 {
    peers
        .iter_mut()
        .map(|q| match q {
            Queues::Kernel(q) => {
                q.rx.iter_mut()
                    .map(|r| {
                        r.refresh_kernel_stats();
                        r.counters().snapshot().kernel_drops
                    })
                    .sum()
            }
            Queues::Primary(_) | Queues::Secondary(_) => 0,
        })
        .sum()
}

/// Frames the sending interfaces' rings had no room for, and bad descriptors on every rx
/// ring.
fn tx_rx_counts(peers: &[Queues], sends: &[SendPort]) -> (u64, u64) {
    let ring_full = sends
        .iter()
        .map(|sp| match &peers[sp.peer] {
            Queues::Secondary(q) => q.tx.iter().map(|t| t.stats().tx_no_room).sum::<u64>(),
            Queues::Primary(q) => q.tx.iter().map(|t| t.stats().tx_no_room).sum(),
            Queues::Kernel(q) => {
                q.tx.iter()
                    .map(|t| t.counters().snapshot().tx_no_room)
                    .sum()
            }
        })
        .sum();
    let bad = peers
        .iter()
        .map(|q| match q {
            Queues::Secondary(q) => q.rx.iter().map(|r| r.stats().drop_bad_desc).sum::<u64>(),
            Queues::Primary(q) => q.rx.iter().map(|r| r.stats().drop_bad_desc).sum(),
            Queues::Kernel(_) => 0,
        })
        .sum();
    (ring_full, bad)
}

const RX_BURST_BYTES: usize = 256 * 1024;

/// A warm-up needs a run bounded by time: a frame count would have to say which frames it
/// counts.
fn check_warmup(cfg: &GenConfig) -> Result<(), GenError> {
    if !cfg.warmup.is_zero() && cfg.count.is_some() {
        return Err(GenError::Config(
            "a warm-up needs a run bounded by its duration, not by a frame count".into(),
        ));
    }
    Ok(())
}

/// The sender's counts at one moment, to take a window's share of them.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    sent: u64,
    /// Position in the schedule: frames sent, plus (on a wire) refused and skipped ones.
    offered: u64,
    refused: u64,
    shortfall: u64,
}

impl Counts {
    fn plus(&self, other: &Counts) -> Counts {
        Counts {
            sent: self.sent + other.sent,
            offered: self.offered + other.offered,
            refused: self.refused + other.refused,
            shortfall: self.shortfall + other.shortfall,
        }
    }

    fn minus(&self, earlier: &Counts) -> Counts {
        Counts {
            sent: self.sent - earlier.sent,
            offered: self.offered - earlier.offered,
            refused: self.refused - earlier.refused,
            shortfall: self.shortfall - earlier.shortfall,
        }
    }
}

/// How far a generator on a wire may fall behind its schedule before it writes frames off as
/// shortfall instead of sending them late: one ring, as a NIC's transmit queue of that depth
/// holds what its generator queued while the wire was busy (a receiver that keeps up absorbs
/// the catch-up burst), and never less than four bursts.
fn max_behind(cfg: &GenConfig) -> u64 {
    (4 * cfg.burst as u64).max(1u64 << cfg.iface.log2_ring_size.min(16))
}

/// Frame number `c` of a sender whose frames take `nets` networks in turn: its network, and
/// its place in that network's flows.
#[inline]
fn split(c: u64, nets: u64) -> (u16, u64) {
    if nets == 1 {
        return (0, c);
    }
    ((c % nets) as u16, c / nets)
}

/// How long a paced sender may hold frames back to send them together: 10 µs, the
/// granularity of a traffic generator's bursts on a wire.
const BATCH_WINDOW_S: f64 = 10e-6;

/// Sending state of one interface: sequences, rate control, prebuilt frames for the copy path.
struct Sender {
    /// Its interface in the session's `peers`, and the interface's id.
    peer: usize,
    iface: u32,
    spec: FrameSpec,
    /// Its share of the run's rate and count.
    rate: Option<f64>,
    count: Option<u64>,
    drop_when_full: bool,
    /// Frames sent, refused and written off so far; `offered` is the position in the schedule.
    counts: Counts,
    /// Frames the paced schedule calls for in all ([`Sender::scheduled`]).
    schedule_end: u64,
    /// Once the time is up: where the schedule stood before the last catch-up pass.
    tail: Option<u64>,
    /// When sending ends: `warmup + duration`.
    end: Duration,
    max_behind: u64,
    /// Paced frames go out in batches of at least this many: what the rate brings in
    /// [`BATCH_WINDOW_S`], capped at the burst.
    min_batch: u64,
    lens: Vec<u32>,
    /// The headers through the probe, rewritten for every frame.
    head: Vec<u8>,
    template: Vec<u8>,
    /// Per tx queue, as [`SendPort`]'s.
    primed: Vec<u64>,
    /// A mix of sizes (one buffer a frame): per tx queue and ring buffer, the length of the
    /// template's front that the buffer holds (0 until written).
    held: Vec<Vec<u16>>,
    chains: Vec<u32>,
    /// Networks the frames spread over, in turn.
    nets: u64,
    /// Streams `stream_base + queue × nets + network`; `seqs` holds each one's next sequence
    /// number.
    stream_base: u16,
    seqs: Vec<u64>,
    /// Frames the session's window (`GenConfig::window`) lets go in this pass.
    room: u64,
}

impl Sender {
    /// The sender for `port`, sender `share.0` of `share.1` (its share of rate and count),
    /// its streams numbered from `stream_base` over `nq` tx queues.
    fn new(
        cfg: &GenConfig,
        port: &SendPort,
        pool: &mut Pool,
        share: (usize, usize),
        stream_base: usize,
        nq: usize,
    ) -> Sender {
        let template = &port.template;
        let chains = if cfg.role == Role::Primary || port.kernel {
            (0..cfg.burst)
                .filter_map(|_| pool.from_bytes(template))
                .collect()
        } else {
            Vec::new()
        };
        let (i, n) = (share.0 as u64, share.1.max(1) as u64);
        let rate = cfg.rate_pps.map(|r| r / n as f64);
        let count = cfg.count.map(|c| c / n + u64::from(i < c % n));
        let end = cfg.warmup + cfg.duration;
        let nets = u64::from(port.spec.networks.max(1));
        let head_len = port.spec.probe_offset() + PROBE_LEN;
        Sender {
            peer: port.peer,
            iface: port.id,
            spec: port.spec.clone(),
            rate,
            count,
            drop_when_full: cfg.drop_when_full,
            counts: Counts::default(),
            schedule_end: rate.map_or(u64::MAX, |r| Self::scheduled(end, r, count)),
            tail: None,
            end,
            max_behind: max_behind(cfg),
            min_batch: rate.map_or(1, |r| {
                ((r * BATCH_WINDOW_S) as u64).clamp(1, cfg.burst as u64)
            }),
            lens: vec![template.len() as u32; cfg.burst],
            head: template[..head_len].to_vec(),
            template: template.clone(),
            primed: {
                let mut p = port.primed.clone();
                p.resize(nq.max(1), 0);
                p
            },
            held: vec![Vec::new(); nq.max(1)],
            chains,
            nets,
            stream_base: stream_base as u16,
            seqs: vec![0; nq.max(1) * nets as usize],
            room: u64::MAX,
        }
    }

    /// What each of this sender's streams is: its interface, tx queue and network.
    fn streams(&self) -> Vec<StreamInfo> {
        (0..self.seqs.len())
            .map(|s| StreamInfo {
                iface: self.iface,
                queue: (s as u64 / self.nets) as u16,
                network: (s as u64 % self.nets) as u16,
            })
            .collect()
    }

    /// Whether sending is over: the count is reached, or the time is up. A paced sender whose
    /// time is up first offers what its schedule still calls for (frames that fell due in the
    /// last pass, or in a pause just before the end), as it would catch up at any other time:
    /// one more pass for as long as each pass gets some out.
    fn done(&mut self, start: Instant) -> bool {
        if self.count.is_some_and(|c| self.counts.offered >= c) {
            return true;
        }
        if start.elapsed() < self.end {
            return false;
        }
        if self.rate.is_none()
            || self.counts.offered >= self.schedule_end
            || self.tail == Some(self.counts.offered)
        {
            return true;
        }
        self.tail = Some(self.counts.offered);
        false
    }

    /// Frames a paced schedule calls for in all: one every `1 / rate` seconds from the start
    /// up to (not including) `end`, or the count if that is fewer.
    fn scheduled(end: Duration, rate: f64, count: Option<u64>) -> u64 {
        let n = (end.as_secs_f64() * rate - 1e-6).ceil() as u64;
        count.map_or(n, |c| n.min(c))
    }

    /// Closes a paced schedule on a wire when sending ends on its own (time or count): frames
    /// that fell due before the end but were never offered (the generator was descheduled
    /// across it) are written off as shortfall, so that what was offered is exactly what the
    /// schedule called for and the report's offered rate is the requested one.
    fn finish(&mut self) {
        if self.rate.is_some() && self.drop_when_full {
            let missed = self.schedule_end.saturating_sub(self.counts.offered);
            self.counts.shortfall += missed;
            self.counts.offered += missed;
        }
    }

    /// When (seconds from the start) a paced sender's next batch falls due; `None` unpaced.
    fn next_due(&self) -> Option<f64> {
        let rate = self.rate?;
        let left = self.schedule_end.saturating_sub(self.counts.offered);
        let k = self.counts.offered + self.min_batch.min(left).max(1);
        // Frame k is due once `t * rate + 1 >= k` (see `budget_at`).
        Some(k.saturating_sub(1) as f64 / rate)
    }

    /// How many frames may go now: see [`Sender::budget_at`].
    #[inline]
    fn budget(&mut self, start: Instant) -> usize {
        self.budget_at(start.elapsed().as_secs_f64())
    }

    /// How many frames may go `t` seconds into the run: the burst, the count left, and the
    /// rate. On a wire (`drop_when_full`), frames the schedule called for more than
    /// [`max_behind`] frames ago are written off as shortfall first (the generator could not
    /// offer them in time).
    #[inline]
    fn budget_at(&mut self, t: f64) -> usize {
        let mut n = (self.lens.len() as u64).min(self.room);
        if let Some(c) = self.count {
            n = n.min(c - self.counts.offered);
        }
        if let Some(rate) = self.rate {
            // Never past the schedule's end, however late this pass comes.
            let due = ((t * rate) as u64 + 1).min(self.schedule_end);
            let behind = due.saturating_sub(self.counts.offered);
            let limit = self.max_behind;
            if self.drop_when_full && behind > limit {
                self.counts.shortfall += behind - limit;
                self.counts.offered += behind - limit;
            }
            n = n.min(due.saturating_sub(self.counts.offered));
            // Wait for a batch worth a burst's fixed costs (ring indices that live in the
            // receiver's cache), unless these are the schedule's last frames.
            if n < self.min_batch && n < self.schedule_end - self.counts.offered {
                n = 0;
            }
        }
        n as usize
    }

    /// Books a send of `sent` out of `asked` frames: on a wire the rest are gone (refused by a
    /// full ring), otherwise they are retried.
    #[inline]
    fn account(&mut self, asked: usize, sent: usize) {
        self.counts.sent += sent as u64;
        // The window's places this pass, over every tx queue of the sender.
        self.room = self.room.saturating_sub(sent as u64);
        if self.drop_when_full && self.rate.is_some() {
            self.counts.offered += asked as u64;
            self.counts.refused += (asked - sent) as u64;
        } else {
            self.counts.offered += sent as u64;
        }
    }

    fn send_secondary(
        &mut self,
        q: &mut SecondaryQueues,
        start: Instant,
    ) -> Result<(), memif::LinkDown> {
        let probe = self.spec.probe_offset();
        for t in q.tx.iter_mut() {
            let n = self.budget(start);
            if n == 0 {
                return Ok(());
            }
            let ts = now_ns();
            let base = self.counts.sent;
            let mixed = !self.spec.mix.is_empty();
            if mixed {
                let o = self.spec.inner_offset();
                for (i, l) in self.lens[..n].iter_mut().enumerate() {
                    *l = (o + self.spec.size_of(base + i as u64)) as u32;
                }
            }
            let ring = u64::from(t.ring_size());
            let queue = usize::from(t.index());
            // Whole frames until every slot's buffer holds the template once, then headers
            // and probe only. Frames over several buffers always whole: a chain's second
            // buffer is another's first later. A mix of sizes tracks what each buffer holds
            // (`held`): a short frame writes only its own bytes, and a longer one later in
            // that buffer writes the template again. Only so does every frame carry the
            // template's filler after its probe, as `check_payload` verifies.
            let chained = self.spec.wire_len() > t.buffer_size();
            let full = chained || (!mixed && self.primed.get(queue).is_none_or(|&p| p < ring));
            let mut held = match self.held.get_mut(queue) {
                Some(h) if mixed && !chained => {
                    h.resize(ring as usize, 0);
                    Some(h)
                }
                _ => None,
            };
            // Every slot's buffer holds a whole patched frame and only the probe changes:
            // write just the probe.
            let probe_only = !full && !mixed && self.spec.patch_is_constant();
            let (nets, stream_base) = (self.nets, self.stream_base);
            let sent = if probe_only {
                // One network (a constant patch), so one stream for the queue, numbered
                // on from where it stands, and only the probe written, at a constant offset
                // (the general closure below was a call a frame, 77 instructions with its
                // writer's checks under --cost of `none` at 64 B).
                let (stream, seq0) = (stream_base + queue as u16, self.seqs[queue]);
                let sent = t.send_stamped(n, self.lens[0], probe, move |i| {
                    Probe {
                        stream,
                        seq: seq0 + i as u64,
                        sent_ns: ts,
                    }
                    .encode()
                })?;
                self.seqs[queue] += sent as u64;
                sent
            } else {
                let (head, template, spec, seqs) =
                    (&mut self.head, &self.template, &self.spec, &mut self.seqs);
                // `move`: the closure holds its scalars itself rather than pointers to them,
                // one load fewer for each a frame.
                let fill = move |i: usize, w: &mut memif::PacketWriter<'_>| {
                    let c = base + i as u64;
                    let (net, flow) = split(c, nets);
                    let s = queue * nets as usize + usize::from(net);
                    let p = Probe {
                        stream: stream_base + s as u16,
                        seq: seqs[s],
                        sent_ns: ts,
                    };
                    seqs[s] += 1;
                    head[probe..].copy_from_slice(&p.encode());
                    if mixed {
                        spec.set_len(head, spec.size_of(c));
                    }
                    spec.patch(head, flow, net);
                    if full {
                        // Whole frames (see `full`); afterwards only headers and probe change
                        // (the buffers are ours alone).
                        w.write(0, template);
                    } else if let Some(h) = held.as_deref_mut() {
                        let (b, len) = (w.buffer(), w.len() as u16);
                        if h[b] < len {
                            w.write(0, template);
                            h[b] = len;
                        }
                    }
                    w.write(0, head);
                };
                // Frames of one size (no mix): room checked once for the burst.
                match &self.lens[..n] {
                    [len, ..] if !mixed => t.send_uniform(n, *len, fill)?,
                    lens => t.send_with(lens, fill)?,
                }
            };
            if let Some(p) = self.primed.get_mut(queue) {
                *p += sent as u64;
            }
            self.account(n, sent);
        }
        Ok(())
    }

    /// Sends from the session's own buffers into queues that copy them (a primary memif's, a
    /// kernel port's).
    fn send_copies<T: CopyTx>(
        &mut self,
        txs: &mut [T],
        pool: &mut Pool,
        start: Instant,
    ) -> Result<(), memif::LinkDown> {
        let probe = self.spec.probe_offset();
        for t in txs.iter_mut() {
            let n = self.budget(start).min(self.chains.len());
            if n == 0 {
                return Ok(());
            }
            let ts = now_ns();
            let queue = usize::from(t.queue_index());
            let mut streams = [0usize; 256];
            // The chains are ours: patch probe, addresses and port in place, then copy into
            // the peer.
            let mixed = !self.spec.mix.is_empty();
            for (i, &ch) in self.chains[..n].iter().enumerate() {
                let c = self.counts.sent + i as u64;
                if mixed {
                    // The chains hold the largest frame in one buffer; each frame takes its
                    // own length.
                    let len = self.spec.inner_offset() + self.spec.size_of(c);
                    let m = pool.meta_mut(ch);
                    if m.next == buffer::NONE {
                        m.len = len as u16;
                        m.total_len = len as u32;
                    }
                    self.spec.set_len(pool.data_mut(ch), self.spec.size_of(c));
                }
                let (net, flow) = split(c, self.nets);
                let s = queue * self.nets as usize + usize::from(net);
                streams[i] = s;
                let p = Probe {
                    stream: self.stream_base + s as u16,
                    seq: self.seqs[s],
                    sent_ns: ts,
                };
                self.seqs[s] += 1;
                let d = pool.data_mut(ch);
                d[probe..probe + PROBE_LEN].copy_from_slice(&p.encode());
                self.spec.patch(d, flow, net);
            }
            let sent = t.send_copies(pool, &self.chains[..n])?;
            // Frames the ring did not take give their sequence numbers back (they are the
            // last of each of their streams).
            for &s in &streams[sent..n] {
                self.seqs[s] -= 1;
            }
            self.account(n, sent);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_received_into_our_buffers_are_checked_whole_chains_included() {
        let mut pool = Pool::new(PoolConfig {
            count: 64,
            data_size: 1024,
            headroom: 128,
        })
        .unwrap();
        let mut whole = Vec::new();
        for size in [64usize, 1500, 9000] {
            let mut t = FrameSpec {
                size,
                ..Default::default()
            }
            .template()
            .unwrap();
            let p = Probe {
                stream: 0,
                seq: 9,
                sent_ns: 1,
            };
            t[PROBE_OFFSET..PROBE_OFFSET + PROBE_LEN].copy_from_slice(&p.encode());
            let mut bad = t.clone();
            *bad.last_mut().unwrap() ^= 1;
            // Not ours (no probe): never counted, whatever it carries.
            let mut foreign = bad.clone();
            foreign[PROBE_OFFSET] ^= 0xff;
            let frames: Vec<u32> = [&t, &bad, &foreign, &t]
                .iter()
                .map(|f| pool.from_bytes(f).unwrap())
                .collect();
            assert_eq!(count_corrupt(&pool, &frames, &mut whole), 1, "{size} B");
            pool.free_bulk(&frames);
        }
        assert_eq!(pool.available(), 64, "nothing leaked");
    }

    /// A paced sender on a wire driven by a made-up clock: `pass(t, taken)` asks for a budget
    /// at `t` seconds and lets the ring take `taken` of it.
    struct Wire {
        s: Sender,
    }

    impl Wire {
        fn new(rate: f64, duration_ms: u64) -> Wire {
            let cfg = GenConfig {
                rate_pps: Some(rate),
                drop_when_full: true,
                duration: Duration::from_millis(duration_ms),
                ..Default::default()
            };
            let mut pool = Pool::new(PoolConfig {
                count: 64,
                ..Default::default()
            })
            .unwrap();
            let port = SendPort {
                peer: 0,
                id: 0,
                template: cfg.spec.template().unwrap(),
                spec: cfg.spec.clone(),
                primed: Vec::new(),
                kernel: false,
            };
            let s = Sender::new(&cfg, &port, &mut pool, (0, 1), 0, 1);
            Wire { s }
        }

        fn pass(&mut self, t: f64, taken: Option<usize>) -> usize {
            let n = self.s.budget_at(t);
            self.s.account(n, taken.unwrap_or(n).min(n));
            n
        }

        fn check(&self) {
            let c = &self.s.counts;
            assert_eq!(c.offered, c.sent + c.refused + c.shortfall, "{c:?}");
        }
    }

    #[test]
    fn a_paced_schedule_offers_exactly_its_frames_whatever_the_passes() {
        // 1 Mpps for 10 ms: 10 000 frames, passes every 3 µs (batches of 10 wait for each other).
        let mut w = Wire::new(1e6, 10);
        let mut t = 0.0;
        while t < 0.010 {
            w.pass(t, None);
            t += 3e-6;
        }
        // The pass after the end (`done`'s) sends what the last batch window held back.
        w.pass(0.010, None);
        w.s.finish();
        w.check();
        assert_eq!(w.s.counts.offered, 10_000);
        assert_eq!(w.s.counts.shortfall, 0);
        // Never more than one batch window ahead of the clock, at any point.
        let mut w = Wire::new(1e6, 10);
        for i in 0..1000 {
            let t = i as f64 * 7e-6;
            w.pass(t, None);
            assert!(w.s.counts.offered <= (t * 1e6) as u64 + 1, "{t}");
        }
    }

    #[test]
    fn a_pause_beyond_a_ring_is_shortfall_and_a_full_ring_is_refusal() {
        let mut w = Wire::new(1e6, 10);
        while w.pass(0.001, None) > 0 {}
        assert_eq!(w.s.counts.offered, 1001);
        let before = w.s.counts;
        // 3 ms off the CPU: 3000 frames fell due; one ring (1024) may still go late, the rest
        // are written off, and the pass sends at most a burst.
        let n = w.pass(0.004, None);
        assert_eq!(n, 64);
        let c = w.s.counts.minus(&before);
        assert_eq!(c.shortfall, 3000 - 1024);
        // A ring that takes 10 of a burst refuses the rest: offered, never sent or retried.
        let before = w.s.counts;
        w.pass(0.004, Some(10));
        let c = w.s.counts.minus(&before);
        assert_eq!((c.offered, c.sent, c.refused), (64, 10, 54));
        w.check();
    }

    #[test]
    fn frames_due_before_the_end_are_offered_or_written_off_never_lost_from_the_count() {
        // The last pass before the end came 40 µs early (the thread was then descheduled
        // across the end): the frames still due are written off, so offered is the schedule.
        let mut w = Wire::new(1e6, 10);
        let mut t = 0.0;
        while t < 0.00996 {
            w.pass(t, None);
            t += 1e-6;
        }
        assert!(w.s.counts.offered < 10_000);
        w.s.finish();
        w.check();
        assert_eq!(w.s.counts.offered, 10_000);
        assert_eq!(w.s.counts.shortfall, 10_000 - w.s.counts.sent);
        // However late a pass comes, it offers nothing past the end.
        let mut w = Wire::new(1e6, 10);
        while w.pass(0.5, None) > 0 {}
        w.check();
        assert_eq!(w.s.counts.offered, 10_000);
        assert_eq!(w.s.counts.sent, 1024, "the last ring's worth goes late");
        // A rate that does not divide the run: frames at k / rate for k < rate * duration.
        let mut w = Wire::new(3e5 + 1.0, 10);
        w.s.finish();
        assert_eq!(w.s.counts.offered, 3001);
    }
}
