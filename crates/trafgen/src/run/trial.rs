//! One run of a session's loop, in the steps of a pass: the senders set up, the send step
//! over every sending interface, the receive step, the test for the end of the run, the
//! pauses, and the report assembled from what the run counted. The loop that calls them is
//! `Session::run`, in the parent: `--cost` collects inside it by that name.

use std::time::{Duration, Instant};

use buffer::Pool;

use super::receive::Receiver;
use super::send::{Counts, Sender};
use super::{GenConfig, GenError, Queues, Role, SendPort, WINDOW_GIVE_UP, settle};
use crate::now_ns;
use crate::stats::{GenReport, Sample, WindowedRx};

/// A paced send-only run sleeps when its next batch is due more than this far ahead...
const SLEEP_AHEAD_S: f64 = 100e-6;
/// ...waking this much before it (a sleep overshoots by the timer slack, 50 µs by default).
const WAKE_EARLY_S: f64 = 60e-6;

/// The session's counters when a run starts: its report gives what the run added to them.
pub(super) struct Before {
    ring_full: u64,
    bad_desc: u64,
    kernel_drops: u64,
}

impl Before {
    pub(super) fn read(peers: &mut [Queues], sends: &[SendPort]) -> Before {
        let (ring_full, bad_desc) = tx_rx_counts(peers, sends);
        Before {
            ring_full,
            bad_desc,
            kernel_drops: kernel_drops(peers),
        }
    }
}

/// Gaps while sending: between two passes of the loop (our CPU was taken away) and between
/// two receives once frames come back (the peer's CPU, or ours, stopped).
#[derive(Default)]
struct Gaps {
    prev_ns: u64,
    last_got_ns: u64,
    max_loop_ns: u64,
    max_rx_gap_ns: u64,
}

/// A run in progress: its senders, what came back, the measurement window and the samples.
/// The steps every pass takes (send, receive) are `#[inline]`: they are the loop's body,
/// split for reading, and compile into `Session::run` as the one function they were.
pub(super) struct Trial {
    /// Passes of the loop so far.
    pub(super) iter: u64,
    senders: Vec<Sender>,
    rx: WindowedRx,
    receiver: Receiver,
    start: Instant,
    /// The measurement window: when it started and the senders' counts then. Every count
    /// in the report is taken from here.
    win: (Instant, Counts),
    /// Each stream's next sequence number when the window started.
    win_seqs: Vec<u64>,
    last_rx: Instant,
    /// When sending ended, once it has.
    send_end: Option<Instant>,
    samples: Vec<Sample>,
    every: Duration,
    next_sample: Duration,
    /// The window (`GenConfig::window`): frames back when that count last changed, and
    /// frames given up as lost.
    window_back: (u64, Instant),
    window_lost: u64,
    gaps: Gaps,
}

impl Trial {
    /// Sets up a run of `sends` over `peers`: a sender for each, taking its buffers for the
    /// copy path from `pool`.
    pub(super) fn new(
        cfg: &GenConfig,
        peers: &[Queues],
        pool: &mut Pool,
        sends: &[SendPort],
    ) -> Result<Trial, GenError> {
        let mut rx = WindowedRx::new(cfg.latency);
        let senders = senders(cfg, peers, pool, sends)?;
        let start = Instant::now();
        let win_seqs = next_seqs(&senders);
        if cfg.warmup.is_zero() {
            rx.start_window(&win_seqs);
        }
        let every = cfg.sample_every.max(Duration::from_millis(10));
        Ok(Trial {
            iter: 0,
            senders,
            rx,
            receiver: Receiver::new(cfg.check_payload, cfg.spec.size),
            start,
            win: (start, Counts::default()),
            win_seqs,
            last_rx: Instant::now(),
            send_end: None,
            samples: Vec::new(),
            every,
            next_sample: every,
            window_back: (0, Instant::now()),
            window_lost: 0,
            gaps: Gaps::default(),
        })
    }

    /// The send step: every sender whose schedule is not over sends what it may now. Returns
    /// whether any was still sending; an error is a link that went down.
    #[inline]
    pub(super) fn send(
        &mut self,
        cfg: &GenConfig,
        peers: &mut [Queues],
        pool: &mut Pool,
    ) -> Result<bool, memif::LinkDown> {
        let start = self.start;
        let mut sending = false;
        let mut down = false;
        let mut room = self.window_room(cfg);
        for s in self.senders.iter_mut() {
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
            return Err(memif::LinkDown);
        }
        Ok(sending)
    }

    /// The window's places left: frames sent less those back and those given up.
    #[inline]
    fn window_room(&mut self, cfg: &GenConfig) -> u64 {
        cfg.window.map_or(u64::MAX, |w| {
            let sent: u64 = self.senders.iter().map(|s| s.counts.sent).sum();
            let back = self.rx.ours();
            if back != self.window_back.0 {
                self.window_back = (back, Instant::now());
            } else if sent > back + self.window_lost
                && self.window_back.1.elapsed() >= WINDOW_GIVE_UP
            {
                self.window_lost = sent - back;
                self.window_back.1 = Instant::now();
            }
            w.saturating_sub(sent.saturating_sub(back + self.window_lost))
        })
    }

    /// Starts the measurement window once the warm-up is over: what the warm-up sent and
    /// measured stays out of the report.
    #[inline]
    pub(super) fn end_warmup(&mut self, cfg: &GenConfig) {
        if !self.rx.started() && self.start.elapsed() >= cfg.warmup {
            self.win = (Instant::now(), total(&self.senders));
            self.win_seqs = next_seqs(&self.senders);
            self.rx.start_window(&self.win_seqs);
            // The window's gaps start afresh, but a stall that spans its start counts in it:
            // the backlog it left is caught up inside the window.
            self.gaps = Gaps {
                prev_ns: self.gaps.prev_ns,
                last_got_ns: self.gaps.last_got_ns,
                ..Gaps::default()
            };
        }
    }

    /// The receive step, stamped with this pass's time: returns how many frames came (none
    /// when the run does not receive); an error is a link that went down.
    #[inline]
    pub(super) fn receive(
        &mut self,
        cfg: &GenConfig,
        peers: &mut [Queues],
        pool: &mut Pool,
        sending: bool,
    ) -> Result<usize, memif::LinkDown> {
        let now = now_ns();
        let g = &mut self.gaps;
        if sending && g.prev_ns != 0 {
            g.max_loop_ns = g.max_loop_ns.max(now.saturating_sub(g.prev_ns));
        }
        g.prev_ns = now;
        let got = if cfg.receive {
            self.receiver.receive(peers, pool, &mut self.rx, now)?
        } else {
            0
        };
        if got > 0 {
            self.last_rx = Instant::now();
            let g = &mut self.gaps;
            if sending && g.last_got_ns != 0 {
                g.max_rx_gap_ns = g.max_rx_gap_ns.max(now.saturating_sub(g.last_got_ns));
            }
            g.last_got_ns = now;
        }
        Ok(got)
    }

    /// Takes a sample of the counts when one is due (looked at every 64 passes, while
    /// sending in the window).
    #[inline]
    pub(super) fn sample_if_due(&mut self) {
        if self.send_end.is_none() && self.rx.started() && self.iter.is_multiple_of(64) {
            let t = self.win.0.elapsed();
            if t >= self.next_sample {
                self.samples.push(self.sample());
                self.next_sample += self.every;
            }
        }
    }

    /// The window's counts so far.
    fn sample(&self) -> Sample {
        let c = total(&self.senders).minus(&self.win.1);
        Sample {
            t_s: self.win.0.elapsed().as_secs_f64(),
            tx: c.sent,
            rx: self.rx.window.packets,
            refused: c.refused,
            shortfall: c.shortfall,
        }
    }

    /// The end-of-run test, on a pass that sent nothing: whether the run is over.
    pub(super) fn over(&mut self, cfg: &GenConfig, peers: &mut [Queues]) -> bool {
        if !cfg.send {
            // Receive only: `duration` bounds the whole run; the peer leaving ends it sooner.
            return self.start.elapsed() >= cfg.duration;
        }
        // Sent everything. Stop once the peer has taken every frame off our rings (so that
        // leaving does not discard frames in flight) and the return traffic, if any, has
        // drained; both waits are bounded by `drain`.
        if self.send_end.is_none() {
            self.senders.iter_mut().for_each(Sender::finish);
            self.samples.push(self.sample());
        }
        // Sending ended at the schedule's end, however late this pass noticed it: a pause
        // after the last frame is not part of the sending window.
        let start = self.start;
        let ended = *self
            .send_end
            .get_or_insert_with(|| Instant::now().min(start + cfg.warmup + cfg.duration));
        let flushed = self
            .senders
            .iter()
            .all(|s| settle::flushed(&mut peers[s.peer]));
        let waited = ended.elapsed() >= cfg.drain;
        // Every frame sent has come back (loop mode, a DUT that lost nothing): nothing is
        // left to wait for.
        let all_back = self.rx.ours() >= total(&self.senders).sent;
        (flushed || waited) && (!cfg.receive || all_back || self.last_rx.elapsed() >= cfg.drain)
    }

    /// Gives the CPU up where the wait costs no measurement.
    pub(super) fn pause(&self, cfg: &GenConfig, sending: bool, got: usize, peers: &[Queues]) {
        // A paced sender that only sends sleeps until just before its next batch when that
        // is far off, instead of spinning: on a CPU it shares (with a sink, on two CPUs)
        // a spinning loop takes turns with the other by the scheduler's slices, which
        // delays the other by milliseconds. Send times are stamped when frames go, so
        // the sleep moves no measured latency. A generator that also receives never
        // sleeps.
        if sending && !cfg.receive {
            let at = self
                .senders
                .iter()
                .filter_map(Sender::next_due)
                .fold(f64::INFINITY, f64::min);
            let ahead = at - self.start.elapsed().as_secs_f64();
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
    }

    /// The run's report; gives the senders' buffers back to `pool` and keeps what their
    /// queues' buffers hold in `sends` for the next run.
    pub(super) fn report(
        mut self,
        cfg: &GenConfig,
        (peers, pool, sends): (&mut [Queues], &mut Pool, &mut [SendPort]),
        before: &Before,
        link_lost: bool,
    ) -> GenReport {
        let start = self.start;
        if !self.rx.started() {
            // Stopped (or the link went) during the warm-up: the window is empty.
            self.win = (Instant::now(), total(&self.senders));
            self.win_seqs = next_seqs(&self.senders);
        }
        let win = self.win;
        let send_s = self
            .send_end
            .map_or_else(|| win.0.elapsed(), |e| e.saturating_duration_since(win.0))
            .as_secs_f64();
        if self.send_end.is_none() {
            self.samples.push(self.sample());
        }
        let senders = &self.senders;
        for (sp, s) in sends.iter_mut().zip(senders) {
            sp.primed = s.primed.clone();
            pool.free_bulk(&s.chains);
        }
        let c = total(senders).minus(&win.1);
        let (ring_full, bad) = tx_rx_counts(peers, sends);
        let mut report = GenReport {
            role: match cfg.role {
                Role::Primary => "primary".into(),
                Role::Secondary => "secondary".into(),
            },
            frame_size: cfg.spec.size,
            link_lost,
            samples: std::mem::take(&mut self.samples),
            tx_stream_packets: next_seqs(senders)
                .iter()
                .zip(&self.win_seqs)
                .map(|(end, start)| end - start)
                .collect(),
            streams: senders.iter().flat_map(Sender::streams).collect(),
            tx_packets: c.sent,
            tx_offered: c.offered,
            tx_refused: c.refused,
            tx_shortfall: c.shortfall,
            warmup_s: win.0.duration_since(start).as_secs_f64(),
            warmup_tx_offered: win.1.offered,
            warmup_tx_packets: win.1.sent,
            warmup_tx_refused: win.1.refused,
            warmup_rx_packets: self.rx.warmup.packets,
            tx_window_s: send_s,
            max_stall_us: self.gaps.max_loop_ns as f64 / 1e3,
            max_rx_gap_us: self.gaps.max_rx_gap_ns as f64 / 1e3,
            tx_ring_full: ring_full - before.ring_full,
            rx_bad_desc: bad - before.bad_desc,
            rx_corrupt: self.receiver.corrupt,
            rx_kernel_drops: kernel_drops(peers) - before.kernel_drops,
            ..Default::default()
        };
        if send_s > 0.0 {
            report.tx_mpps = c.sent as f64 / send_s / 1e6;
        }
        report.fill_rx(&self.rx.window);
        report
    }
}

/// Each sending interface's sender: its streams, one per (tx queue, network), numbered on
/// from the previous interface's.
fn senders(
    cfg: &GenConfig,
    peers: &[Queues],
    pool: &mut Pool,
    sends: &[SendPort],
) -> Result<Vec<Sender>, GenError> {
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
    Ok(senders)
}

/// Every stream's next sequence number, over every sender.
fn next_seqs(senders: &[Sender]) -> Vec<u64> {
    senders.iter().flat_map(|s| s.seqs.clone()).collect()
}

/// The senders' counts together.
fn total(senders: &[Sender]) -> Counts {
    senders
        .iter()
        .fold(Counts::default(), |a, s| a.plus(&s.counts))
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
