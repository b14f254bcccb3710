//! The senders: each sending interface's schedule (rate, count, window), sequence numbers and
//! frames, and the per-frame paths that write them (in place on a secondary memif, copied
//! from our own buffers into a primary memif or a kernel port).

use std::time::{Duration, Instant};

use buffer::Pool;
use memif::SecondaryQueues;
use uplink::af_packet;

use super::{GenConfig, Role, SendPort};
use crate::frame::{FrameSpec, PROBE_LEN, Probe};
use crate::now_ns;
use crate::stats::StreamInfo;

/// A transmit queue frames are copied into from the session's own buffers: a primary memif's,
/// or a kernel port's.
pub(super) trait CopyTx {
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

/// The sender's counts at one moment, to take a window's share of them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    pub(super) sent: u64,
    /// Position in the schedule: frames sent, plus (on a wire) refused and skipped ones.
    pub(super) offered: u64,
    pub(super) refused: u64,
    pub(super) shortfall: u64,
}

impl Counts {
    pub(super) fn plus(&self, other: &Counts) -> Counts {
        Counts {
            sent: self.sent + other.sent,
            offered: self.offered + other.offered,
            refused: self.refused + other.refused,
            shortfall: self.shortfall + other.shortfall,
        }
    }

    pub(super) fn minus(&self, earlier: &Counts) -> Counts {
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
pub(super) struct Sender {
    /// Its interface in the session's `peers`, and the interface's id.
    pub(super) peer: usize,
    iface: u32,
    spec: FrameSpec,
    /// Its share of the run's rate and count.
    rate: Option<f64>,
    count: Option<u64>,
    drop_when_full: bool,
    /// Frames sent, refused and written off so far; `offered` is the position in the schedule.
    pub(super) counts: Counts,
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
    pub(super) primed: Vec<u64>,
    /// A mix of sizes (one buffer a frame): per tx queue and ring buffer, the length of the
    /// template's front that the buffer holds (0 until written).
    held: Vec<Vec<u16>>,
    pub(super) chains: Vec<u32>,
    /// Networks the frames spread over, in turn.
    nets: u64,
    /// Streams `stream_base + queue × nets + network`; `seqs` holds each one's next sequence
    /// number.
    stream_base: u16,
    pub(super) seqs: Vec<u64>,
    /// Frames the session's window (`GenConfig::window`) lets go in this pass.
    pub(super) room: u64,
}

impl Sender {
    /// The sender for `port`, sender `share.0` of `share.1` (its share of rate and count),
    /// its streams numbered from `stream_base` over `nq` tx queues.
    pub(super) fn new(
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
    pub(super) fn streams(&self) -> Vec<StreamInfo> {
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
    pub(super) fn done(&mut self, start: Instant) -> bool {
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
    pub(super) fn finish(&mut self) {
        if self.rate.is_some() && self.drop_when_full {
            let missed = self.schedule_end.saturating_sub(self.counts.offered);
            self.counts.shortfall += missed;
            self.counts.offered += missed;
        }
    }

    /// When (seconds from the start) a paced sender's next batch falls due; `None` unpaced.
    pub(super) fn next_due(&self) -> Option<f64> {
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

    /// Writes what the budget lets go into a secondary's tx queues, in place.
    ///
    /// `#[inline]`, as `send_copies`: both compile into `Session::run`, as when they lived in
    /// its module. Out of line, in a codegen unit of their own, memif's `send_stamped` was
    /// inlined into this and `--cost` (which counts the Send half by that name) read zero.
    #[inline]
    pub(super) fn send_secondary(
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
    #[inline]
    pub(super) fn send_copies<T: CopyTx>(
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
    use buffer::PoolConfig;

    use super::*;

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
