//! Workers: one thread per configured core, pinned, each with its own buffer pool and graph.
//! A worker polls the rx queues placed on it, runs the graph over whole frames and, when its
//! queues have been idle (adaptive mode: for a millisecond; interrupt mode: at once), sleeps
//! on their memif eventfds and its command eventfd, so an idle daemon costs no CPU.
//!
//! The control thread talks to a worker only through channels: queue hand-overs go to the
//! graph's memif nodes, requests (`show runtime`, `trace add`, `pcap`...) to the loop, each
//! followed by a kick on the worker's eventfd so that a sleeping worker answers at once.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use graph::commands::{CommandSender, Commands};
use graph::{Captured, Filter, Runtime};
use nodes::Shared;

use crate::devices::{self, DeviceQueues, Queues};

use api::RxMode;

/// How long a worker in adaptive mode keeps polling an idle graph before it sleeps.
const ADAPTIVE_IDLE: Duration = Duration::from_millis(1);
/// Longest sleep; commands wake the worker at once anyway.
const SLEEP_MS: i32 = 1000;
/// A worker that never sleeps does the nodes' housekeeping (queues detached from output
/// nodes closed) once per this many dispatch loops.
const HOUSEKEEPING_EVERY: u64 = 4096;

/// A request to a worker.
#[derive(Debug)]
pub enum WorkerCmd {
    Runtime(Sender<api::WorkerRuntime>),
    Buffers(Sender<api::WorkerBuffers>),
    Errors(Sender<Vec<(String, String, u64)>>),
    Trace(Sender<String>),
    TraceAdd {
        node: String,
        count: u32,
        reply: Sender<Result<(), graph::TraceError>>,
    },
    Clear(api::Clear),
    PcapStart(Filter),
    PcapStop(Sender<(Vec<Captured>, u64)>),
    Stop,
}

/// What the control thread sees of a worker's progress, to know when table memory that was
/// unlinked can be reused (no worker can still be inside it).
#[derive(Debug, Default)]
pub struct Activity {
    /// Dispatch loops completed.
    pub loops: AtomicU64,
    /// The worker is asleep (outside any lookup).
    pub parked: AtomicBool,
    /// The worker thread's id (for memif::unblock::interrupt); 0 until it runs.
    pub tid: AtomicI32,
    /// Stalls the watchdog saw (control/watchdog.rs).
    pub stalls: AtomicU64,
}

/// The control thread's handle on one worker.
#[derive(Debug)]
pub struct WorkerHandle {
    pub index: usize,
    pub core: Option<usize>,
    cmds: CommandSender<WorkerCmd>,
    /// ARP requests for its `arp-probe` node to send.
    probes: CommandSender<nodes::Probe>,
    /// Queue hand-overs to each device kind's nodes, in [`devices::KINDS`] order.
    devices: Vec<Box<dyn DeviceQueues>>,
    wake: Arc<OwnedFd>,
    pub activity: Arc<Activity>,
    /// The control thread's watchdog state for it.
    pub watch: crate::control::WorkerWatch,
    /// The buffer pool's size and how it was registered for a copy device, if it was.
    pub pool_registration: Option<(usize, std::io::Result<copy_engine::Registered>)>,
    join: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Sends a request and wakes the worker.
    pub fn send(&self, c: WorkerCmd) {
        let _ = self.cmds.send(c);
        self.kick();
    }

    /// Has the worker send an ARP request of the control thread's (see `arp-probe`).
    pub fn probe(&self, p: nodes::Probe) {
        let _ = self.probes.send(p);
        self.kick();
    }

    pub fn kick(&self) {
        let _ = rustix::io::write(&*self.wake, &1u64.to_ne_bytes());
    }

    /// The queue hand-overs to the nodes of the device kind whose commands are `C`.
    pub fn queues<C: 'static>(&self) -> &Queues<C> {
        devices::queues(&self.devices)
    }

    /// Every device kind's nodes drop interface `ifindex`'s queues.
    pub fn detach(&self, ifindex: u32) {
        for q in &self.devices {
            q.detach(ifindex);
        }
        self.kick();
    }

    pub fn is_alive(&self) -> bool {
        self.join.as_ref().is_some_and(|j| !j.is_finished())
    }

    pub fn stop(&mut self) {
        self.send(WorkerCmd::Stop);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Everything a worker needs to build its graph.
#[derive(Debug)]
pub struct WorkerSetup {
    pub index: usize,
    pub core: Option<usize>,
    pub mode: RxMode,
    pub buffers: u32,
    pub trace_capacity: usize,
    pub shared: Shared,
    /// Where `arp-input` reports neighbours (and wakes the control thread).
    pub learned: nodes::LearnSink,
    pub copy: api::CopyMode,
    /// The memif nodes' engines (taken by `spawn`; `None`: the CPU).
    pub engines: Option<crate::control::NodeEngines>,
    /// Register the buffer pool with a copy device before the worker starts (a DSA engine
    /// may copy into it).
    pub register_pool: bool,
}

/// The graph every worker runs: every registered device kind's nodes, then the protocol
/// nodes; and the senders to the device nodes.
pub(crate) fn graph(s: &mut WorkerSetup) -> devices::Graph {
    let (mut v, queues) = devices::build(s);
    v.extend(nodes::protocol_nodes(&s.shared, s.learned.clone()));
    (v, queues)
}

/// Starts a worker thread.
pub fn spawn(mut s: WorkerSetup) -> std::io::Result<WorkerHandle> {
    let (cmd_tx, cmd_rx) = graph::commands::channel();
    let wake = Arc::new(rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )?);
    let activity = Arc::new(Activity::default());
    let pool = Pool::new(PoolConfig {
        count: s.buffers,
        ..PoolConfig::default()
    })
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    // Here, on the control thread, before the worker exists: registering faults in every
    // page, which no worker should wait for.
    let pool_registration = s.register_pool.then(|| {
        (
            pool.memory().len(),
            copy_engine::register_slice(pool.memory()),
        )
    });
    let (mut graph_nodes, devices) = graph(&mut s);
    let (probes, probe_rx) = graph::commands::channel();
    graph_nodes.push(Box::new(nodes::ArpProbe::new(s.shared.clone(), probe_rx)));
    let rt = Runtime::new(graph_nodes, s.trace_capacity)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let (w, a, core, mode, index) = (wake.clone(), activity.clone(), s.core, s.mode, s.index);
    // The worker says when it is pinned: the daemon is ready only once every worker is.
    let (pinned_tx, pinned) = std::sync::mpsc::sync_channel(1);
    // A worker caught in write(2) on a peer's eventfd is interrupted by the watchdog.
    memif::unblock::install();
    let join = std::thread::Builder::new()
        .name(format!("vl_wk_{index}"))
        .spawn(move || {
            if let Some(c) = core {
                let mut set = rustix::thread::CpuSet::new();
                set.set(c);
                if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
                    tracing::warn!(worker = index, core = c, "cannot pin worker: {e}");
                }
            }
            a.tid
                .store(memif::unblock::current_thread(), Ordering::Relaxed);
            let _ = pinned_tx.send(());
            Worker {
                index,
                core,
                mode,
                rt,
                pool,
                cmds: cmd_rx,
                wake: w,
                activity: a,
                loops: 0,
                sleeps: 0,
                since: Instant::now(),
            }
            .run();
        })?;
    if pinned
        .recv_timeout(std::time::Duration::from_secs(10))
        .is_err()
    {
        return Err(std::io::Error::other(format!(
            "worker {index} did not start within 10 s"
        )));
    }
    Ok(WorkerHandle {
        index,
        core,
        cmds: cmd_tx,
        probes,
        devices,
        wake,
        activity,
        watch: crate::control::WorkerWatch::new(Instant::now()),
        pool_registration,
        join: Some(join),
    })
}

struct Worker {
    index: usize,
    core: Option<usize>,
    mode: RxMode,
    rt: Runtime,
    pool: Pool,
    cmds: Commands<WorkerCmd>,
    wake: Arc<OwnedFd>,
    activity: Arc<Activity>,
    loops: u64,
    sleeps: u64,
    since: Instant,
}

impl Worker {
    fn run(&mut self) {
        let mut idle_since: Option<Instant> = None;
        loop {
            while let Some(c) = self.cmds.try_recv() {
                if !self.handle(c) {
                    return;
                }
            }
            let n = self.rt.dispatch(&mut self.pool);
            self.loops += 1;
            if self.loops.is_multiple_of(HOUSEKEEPING_EVERY) {
                self.rt.housekeeping();
            }
            self.activity.loops.fetch_add(1, Ordering::Release);
            if n > 0 {
                idle_since = None;
                continue;
            }
            let sleep = match self.mode {
                RxMode::Polling => false,
                RxMode::Interrupt => !self.rt.keeps_awake(),
                RxMode::Adaptive => {
                    let t = *idle_since.get_or_insert_with(Instant::now);
                    let sleep = t.elapsed() >= ADAPTIVE_IDLE && !self.rt.keeps_awake();
                    if !sleep {
                        // An idle pass gives the CPU to whatever else is ready to run there
                        // (another daemon's worker, the pod we serve) instead of holding it
                        // to the end of our time slice; alone on the CPU it costs a system
                        // call and returns at once.
                        rustix::thread::sched_yield();
                    }
                    sleep
                }
            };
            if sleep {
                self.rt.housekeeping();
                self.activity.parked.store(true, Ordering::Release);
                if self.rt.sleep(self.wake.as_fd(), SLEEP_MS) {
                    self.sleeps += 1;
                }
                self.activity.parked.store(false, Ordering::Release);
                let mut b = [0u8; 8];
                let _ = rustix::io::read(&*self.wake, &mut b);
                idle_since = None;
            }
        }
    }

    /// Handles one request; false means stop.
    fn handle(&mut self, c: WorkerCmd) -> bool {
        match c {
            WorkerCmd::Runtime(reply) => {
                let nodes = self
                    .rt
                    .runtime()
                    .into_iter()
                    .map(|(name, kind, st)| api::NodeRuntime {
                        name: name.to_string(),
                        kind: match kind {
                            graph::NodeKind::Input => "input",
                            graph::NodeKind::Internal => "internal",
                            graph::NodeKind::Output => "output",
                        }
                        .to_string(),
                        calls: st.calls,
                        vectors: st.vectors,
                        clocks: st.clocks,
                    })
                    .collect();
                let _ = reply.send(api::WorkerRuntime {
                    worker: self.index,
                    core: self.core,
                    seconds: self.since.elapsed().as_secs_f64(),
                    busy_seconds: self.rt.busy_ns() as f64 / 1e9,
                    stalls: self.activity.stalls.load(Ordering::Relaxed),
                    loops: self.loops,
                    sleeps: self.sleeps,
                    nodes,
                });
            }
            WorkerCmd::Buffers(reply) => {
                let _ = reply.send(api::WorkerBuffers {
                    worker: self.index,
                    core: self.core,
                    total: self.pool.capacity(),
                    free: self.pool.available(),
                });
            }
            WorkerCmd::Errors(reply) => {
                let mut v: Vec<(String, String, u64)> = self
                    .rt
                    .errors()
                    .into_iter()
                    .map(|(n, r, c)| (n.to_string(), r.to_string(), c))
                    .collect();
                let lost = self.rt.undeclared_next_drops();
                if lost > 0 {
                    v.push((
                        "graph".into(),
                        "buffer sent to an undeclared next node".into(),
                        lost,
                    ));
                }
                let _ = reply.send(v);
            }
            WorkerCmd::Trace(reply) => {
                let _ = reply.send(self.rt.show_trace());
            }
            WorkerCmd::TraceAdd { node, count, reply } => {
                let _ = reply.send(self.rt.trace_add(&node, count));
            }
            WorkerCmd::Clear(what) => match what {
                api::Clear::Runtime => {
                    self.rt.clear_runtime();
                    self.loops = 0;
                    self.sleeps = 0;
                    self.since = Instant::now();
                }
                api::Clear::Errors => self.rt.clear_errors(),
                api::Clear::Trace => self.rt.clear_trace(),
                api::Clear::Interfaces => {}
            },
            WorkerCmd::PcapStart(f) => self.rt.pcap_start(f),
            WorkerCmd::PcapStop(reply) => {
                let _ = reply.send(self.rt.pcap_stop());
            }
            WorkerCmd::Stop => return false,
        }
        true
    }
}
