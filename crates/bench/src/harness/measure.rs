//! Measurement: the generator as the search's [`Measurer`](crate::search::Measurer), one
//! trial at a time with the DUT's counters read around it, and one whole search per (DUT,
//! size): flat-out trial, search, latency, node clocks.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::config::L3fwdConfig;
use super::guard::TrialGuard;
use super::outcome::{LatencyPoint, Outcome, TrialRecord};
use super::topology::Topology;
use super::turns::{Leave, Turns};
use crate::dut::{Counts, Running};
use crate::search::{self, Measurement, Measurer, SearchReport};
use crate::trial::Placed;
use crate::{BenchError, Subject};
use trafgen::GenReport;

/// The generator as a [`Measurer`]: one connected session, the DUT beside it.
pub(super) struct GenMeasurer<'a> {
    pub(super) topology: &'a dyn Topology,
    pub(super) session: &'a mut trafgen::Session,
    pub(super) base: &'a trafgen::GenConfig,
    pub(super) dut: &'a mut Running,
    pub(super) subject: Subject,
    pub(super) size: usize,
    pub(super) kind: &'static str,
    pub(super) records: Vec<TrialRecord>,
    pub(super) on_trial: &'a mut (dyn FnMut(&Measurement) + Send),
    /// The DUT's counters as the last trial ended: nothing passes between trials, so they
    /// are also where the next one starts.
    pub(super) counts: Option<Option<Counts>>,
    pub(super) guard: TrialGuard,
    /// With `--interleave trials`: the turns this search's trials take among the DUTs',
    /// and its place in them.
    pub(super) turn: Option<(&'a Turns, usize)>,
    /// Nested holds of the turn (see [`begin_turn`](Self::begin_turn)); the search starts
    /// holding it, to start its DUT.
    pub(super) depth: u32,
}

/// Seconds since the run began (`TrialRecord::at_s`).
pub(super) fn run_clock() -> f64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

impl GenMeasurer<'_> {
    /// Holds this search's turn (waiting for it, and resuming the DUT, unless already held).
    pub(super) fn begin_turn(&mut self) -> Result<(), String> {
        let Some((turns, me)) = self.turn else {
            return Ok(());
        };
        self.depth += 1;
        if self.depth == 1 {
            turns.take(me);
            self.dut.resume().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Ends a [`begin_turn`](Self::begin_turn): the outermost pauses the DUT and passes the
    /// turn on. A DUT that could not be paused keeps the turn (its search fails and stops it
    /// in the turn): it must not run beside another DUT's trial.
    pub(super) fn end_turn(&mut self) -> Result<(), String> {
        let Some((turns, me)) = self.turn else {
            return Ok(());
        };
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            if let Err(e) = self.dut.pause() {
                self.depth = 1;
                return Err(format!("pausing the DUT between its turns: {e}"));
            }
            turns.pass(me);
        }
        Ok(())
    }

    /// One trial: `load` pps on a wire, or flat out (held back by a full ring) when `None`;
    /// run again while the host disturbed it and it failed (see [`TrialGuard`]). Latency
    /// trials too: one that lost frames at a fraction of the zero-loss rate while the host
    /// disturbed it timed the disturbance (a queue behind a stall), not the path.
    fn trial(&mut self, load: Option<f64>, duration: Duration) -> Result<Measurement, String> {
        self.begin_turn()?;
        let r = self.trial_in_turn(load, duration);
        self.end_turn()?;
        r
    }

    fn trial_in_turn(
        &mut self,
        load: Option<f64>,
        duration: Duration,
    ) -> Result<Measurement, String> {
        loop {
            let before = self.guard.before();
            if load.is_none() {
                self.dut.clear_runtime();
            }
            let (t0, wait0) = (std::time::Instant::now(), self.dut.thread_times());
            let (m, g, mut record) = self.trial_once(load, duration)?;
            let dut_wait_us = match (wait0, self.dut.thread_times()) {
                (Some(a), Some(b)) => {
                    let wall = t0.elapsed().as_nanos() as u64;
                    Some(crate::proc::worker_wait_between(&a, &b, wall) as f64 / 1e3)
                }
                _ => None,
            };
            let after = self.guard.after();
            record.probe_before_ns = before;
            record.probe_after_ns = after;
            record.dut_wait_us = dut_wait_us;
            let failed = load.is_none() || m.offered > m.received;
            let why = self
                .guard
                .disturbance(load, &m, &g, dut_wait_us, before, after);
            if let Some(why) = self.guard.run_again(failed, why) {
                record.redone = Some(why);
                self.records.push(record);
                continue;
            }
            (self.on_trial)(&m);
            self.records.push(record);
            return Ok(m);
        }
    }

    fn trial_once(
        &mut self,
        load: Option<f64>,
        duration: Duration,
    ) -> Result<(Measurement, GenReport, TrialRecord), String> {
        let at_s = run_clock();
        // Only latency trials read the frames' timestamps: the others offer more without.
        let latency = self.kind == "latency";
        let before = match self.counts.take() {
            Some(c) => c,
            None => self.topology.counts(self.dut).map_err(|e| e.to_string())?,
        };
        let cfg = trafgen::GenConfig {
            rate_pps: load,
            drop_when_full: load.is_some(),
            duration,
            sample_every: (duration / 5).max(Duration::from_millis(20)),
            latency,
            ..self.base.clone()
        };
        let g = self
            .session
            .run(&cfg, &AtomicBool::new(false))
            .map_err(|e| e.to_string())?;
        if g.link_lost {
            // Counts of a cut trial would pass any loss test (nothing offered, nothing lost),
            // and the session has no queues left for the next one.
            return Err(format!(
                "the DUT's memif link went down during a trial at {:.3} Mpps ({} of {} frames back){}",
                load.unwrap_or(0.0) / 1e6,
                g.rx_packets,
                g.tx_packets,
                g.last_disconnect_reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ));
        }
        if g.rx_corrupt > 0 {
            // A DUT that damages frames has no throughput worth reporting.
            return Err(format!(
                "{} of the {} frames back carried other bytes after the probe than were sent (--check-payload)",
                g.rx_corrupt, g.rx_packets
            ));
        }
        // The DUT's counters saw the warm-up too. Frames a kernel port's full ring lost
        // were sent to the generator all the same. Counters that agree at once are read
        // once; otherwise the DUT may have forwarded frames after the run stopped receiving
        // (it had not run since, on a busy host): settling takes those off the rings and
        // counts them as sent back, then the counters are read until they catch up.
        let sent = g.tx_total();
        let mut got_back = g.rx_total() + g.rx_kernel_drops;
        let mut after = self.topology.counts(self.dut).map_err(|e| e.to_string())?;
        let want = |tx| crate::dut::Counts { rx: sent, tx };
        if !crate::dut::agrees(before, after, want(got_back)) {
            got_back += self
                .session
                .settle(crate::dut::SETTLE_QUIET, crate::dut::SETTLE_MAX);
            after = crate::dut::settled_counts(
                || self.topology.counts(self.dut),
                before,
                want(got_back),
                crate::dut::SETTLE_QUIET,
                crate::dut::SETTLE_MAX,
            )
            .map_err(|e| e.to_string())?;
        }
        self.counts = Some(after);
        self.topology.check_rx(self.subject, self.size, &g)?;
        let m = measurement(load, duration, &g);
        let record = TrialRecord {
            kind: self.kind,
            at_s,
            m: m.clone(),
            refused: g.tx_refused,
            foreign: g.rx_foreign,
            latency: latency.then_some(g.latency),
            interval_rx_mpps: g.interval_rx_mpps(),
            interval_refused: g.interval_refused(),
            warmup_sent: g.warmup_tx_packets,
            warmup_refused: g.warmup_tx_refused,
            networks: self.topology.networks(&g),
            // One entry per queue pair, a queue that returned nothing included.
            rx_streams: match usize::from(self.base.iface.s2m_rings) {
                0 | 1 => Vec::new(),
                n => {
                    let mut v = g.rx_stream_packets.clone();
                    v.resize(n.max(v.len()), 0);
                    v
                }
            },
            disagreements: crate::dut::check_counts(before, after, sent, got_back),
            probe_before_ns: None,
            probe_after_ns: None,
            max_stall_us: g.max_stall_us,
            max_rx_gap_us: g.max_rx_gap_us,
            dut_wait_us: None,
            redone: None,
        };
        Ok((m, g, record))
    }
}

impl Measurer for GenMeasurer<'_> {
    fn measure(&mut self, load_pps: f64, duration: Duration) -> Result<Measurement, String> {
        self.trial(Some(load_pps), duration)
    }
}

/// What a generator run measured, in the search's terms. A paced run that offered less than
/// half its schedule ended early: it counts as offering the whole schedule (and losing what
/// never went out), never as a loss-free trial of a few frames. Only the generator's own
/// frames count as received, and in the receive rate: a frame it did not send (a fragment of
/// one, the DUT's own traffic) would otherwise stand in for one the DUT lost (RFC 2544
/// counts test frames).
pub(super) fn measurement(load: Option<f64>, duration: Duration, g: &GenReport) -> Measurement {
    let scheduled = load.map_or(0, |l| (l * duration.as_secs_f64()) as u64);
    let ours = g.rx_packets.saturating_sub(g.rx_foreign);
    let share = if g.rx_packets == 0 {
        1.0
    } else {
        ours as f64 / g.rx_packets as f64
    };
    Measurement {
        load_pps: load.unwrap_or(g.tx_mpps * 1e6),
        duration_s: duration.as_secs_f64(),
        offered: if g.tx_offered < scheduled / 2 {
            scheduled
        } else {
            g.tx_offered
        },
        sent: g.tx_packets,
        received: ours,
        shortfall: g.tx_shortfall,
        tx_pps: g.tx_mpps * 1e6,
        rx_pps: g.rx_mpps * 1e6 * share,
    }
}

/// One search of `dut` at `size`; with `turn`, its trials (and its DUT's start and stop)
/// take turns with other searches' (see [`super::turns`]).
pub(super) fn search_one(
    cfg: &L3fwdConfig,
    dut: Subject,
    plan: &super::Plan,
    rep: usize,
    on_trial: &mut (dyn FnMut(&Measurement) + Send),
    turn: Option<(&Turns, usize)>,
) -> Result<Outcome, BenchError> {
    let size = plan.size;
    // Declared first, dropped last: after the DUT has stopped.
    let _leave = turn.map(|(turns, me)| {
        turns.take(me);
        Leave(turns, me)
    });
    let fail = |msg: String| BenchError::Trial { dut, size, msg };
    let dir = tempfile::tempdir()?;
    if !cfg.topology.supports(dut.dut) {
        return Err(fail(format!(
            "the {} scenario cannot configure {}",
            cfg.topology.name(),
            dut.dut
        )));
    }
    let (mut running, sock) = cfg
        .topology
        .start_dut(&super::DutStart {
            cfg,
            dut,
            plan,
            dir: dir.path(),
            wrapper: &[],
        })
        .map_err(|e| fail(e.to_string()))?;
    let gcfg = trafgen::GenConfig {
        check_payload: cfg.check_payload,
        ..cfg.topology.gen_config(cfg, dut, &sock, plan)
    };
    let (r, trials, dut_drops, session) = std::thread::scope(|s| {
        let (gcfg, running) = (&gcfg, &mut running);
        s.spawn(move || {
            let stop = AtomicBool::new(false);
            let mut session = match trafgen::Session::connect(gcfg, &stop) {
                Ok(s) => s,
                Err(e) => return (Err(e.to_string()), Vec::new(), String::new(), None),
            };
            let mut m = GenMeasurer {
                topology: cfg.topology,
                session: &mut session,
                base: gcfg,
                dut: running,
                subject: dut,
                size,
                kind: "mrr",
                records: Vec::new(),
                on_trial,
                counts: None,
                turn,
                depth: u32::from(turn.is_some()),
                guard: TrialGuard {
                    cpus: (plan.gen_cpu, plan.dut_cpu()),
                    wait_near: Duration::from_secs_f64(cfg.wait_near_secs),
                    // The generator spreads its bursts over one ring per worker.
                    ring_slots: u64::from(plan.ring_size()) * u64::from(dut.workers),
                    redo_left: cfg.max_redo,
                },
            };
            let r = measure_all(cfg, &mut m);
            // The DUT runs again, for its counters and its stop, in a last turn of its own.
            let resumed = m.begin_turn();
            let records = std::mem::take(&mut m.records);
            // A DUT that could not be resumed is not asked (a stopped VPP would never answer).
            let drops = if resumed.is_ok() {
                m.dut.drops()
            } else {
                String::new()
            };
            let r = r.and_then(|x| resumed.map(|()| x));
            (r, records, drops, Some(session))
        })
        .join()
        .unwrap_or_else(|_| {
            (
                Err("generator thread panicked".into()),
                Vec::new(),
                String::new(),
                None,
            )
        })
    });
    if let Some((turns, me)) = turn {
        // The generator thread ends holding the turn with its DUT resumed, unless it
        // panicked between turns: then take the turn and resume the DUT here, so that it
        // stops (a stopped process leaves SIGTERM pending) and no other DUT is measured
        // meanwhile. Taking a turn already held returns at once.
        turns.take(me);
        let _ = running.resume();
    }
    // The DUT goes first, the generator's connection after: a DUT that is told its peer
    // left while it still runs may tear the connection down under its own workers (DPDK
    // 22.11's net_memif does, on its interrupt thread, and races its own port release when
    // asked to quit at the same time); with the generator idle nothing else happens.
    let _ = running.stop(Duration::from_secs(5));
    if let Some(session) = session {
        session.close();
    }
    // A search that failed part way keeps the trials it ran, as evidence.
    let mut o = Outcome::failed(dut, size, rep, String::new());
    o.trials = trials;
    o.dut_drops = dut_drops;
    match r {
        Ok((mrr_pps, search, latency, node_ns, worker_packets)) => {
            o.mrr_pps = mrr_pps;
            o.search = Some(search);
            o.latency = latency;
            o.node_ns = node_ns;
            o.worker_packets = worker_packets;
            o.error = None;
        }
        Err(e) => o.error = Some(fail(e).to_string()),
    }
    Ok(o)
}

/// MRR, search, latency, veclane's ns per node and packets per worker (flat out).
pub(super) type Measured = (
    f64,
    SearchReport,
    Vec<LatencyPoint>,
    Vec<(String, f64)>,
    Vec<u64>,
);

/// The flat-out trial, the search, and the latency trials, on one connection.
pub(super) fn measure_all(cfg: &L3fwdConfig, m: &mut GenMeasurer<'_>) -> Result<Measured, String> {
    m.dut.ready().map_err(|e| e.to_string())?;
    // The DUT is up and its generator connected: the other DUTs' turns may begin.
    m.end_turn()?;
    // The node clocks are read in the flat-out trial's turn, with the DUT still running.
    m.begin_turn()?;
    let flat = m.trial(None, Duration::from_secs_f64(cfg.mrr_secs));
    let runtime = if flat.is_ok() {
        m.dut.runtime()
    } else {
        Vec::new()
    };
    m.end_turn()?;
    let flat = flat?;
    let node_ns = crate::dut::node_costs(&runtime);
    let worker_packets = crate::dut::worker_packets(&runtime);
    if flat.received == 0 {
        return Err("nothing came back in the flat-out trial".into());
    }
    let max = flat.rx_pps * cfg.max_load_factor;
    let min = (max / 1000.0).max(1000.0);
    m.kind = "search";
    let report = search::search(&cfg.method, min, max, m, &mut |_| {})
        .map_err(|e| format!("search: {e}"))?;
    m.kind = "latency";
    let mut latency = Vec::new();
    let base = report.goals.first().and_then(|g| g.result_pps());
    if let Some(base) = base {
        for &f in &cfg.latency_at {
            let load = base * f;
            if load < 1000.0 {
                continue;
            }
            let t = m.trial(Some(load), Duration::from_secs_f64(cfg.latency_secs))?;
            let lat = m.records.last().and_then(|r| r.latency).unwrap_or_default();
            latency.push(LatencyPoint {
                fraction: f,
                load_pps: load,
                rx_pps: t.rx_pps,
                loss_ratio: t.loss_ratio(),
                latency: lat,
            });
        }
    }
    Ok((flat.rx_pps, report, latency, node_ns, worker_packets))
}
