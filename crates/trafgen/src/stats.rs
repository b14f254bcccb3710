//! Receive-side accounting and the report.

use serde::Serialize;

use crate::frame::Probe;

/// Per-stream sequence tracking, counts and latency.
#[derive(Debug, Default)]
pub struct RxStats {
    pub packets: u64,
    pub bytes: u64,
    /// Frames that are not ours (no probe).
    pub foreign: u64,
    /// Frames that arrived with a lower sequence number than one already seen.
    pub reordered: u64,
    /// Missing sequence numbers seen as gaps (a late arrival fills its gap again).
    pub gaps: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Leave latency out: frames are counted and sequenced, their timestamps not read
    /// ([`GenConfig::latency`](crate::GenConfig::latency) off).
    pub skip_latency: bool,
    /// Per stream (the sender's tx queue), indexed by its number: one record, one bounds
    /// check a frame.
    streams: Vec<StreamRx>,
    hist: Latencies,
}

/// What one stream's frames showed.
#[derive(Debug, Default, Clone, Copy)]
struct StreamRx {
    /// The highest sequence number seen + 1.
    next_seq: u64,
    /// Frames received.
    packets: u64,
}

impl RxStats {
    /// Accounts one received frame at time `now`.
    #[inline]
    pub fn record(&mut self, frame_len: usize, probe: Option<Probe>, now: u64) {
        self.packets += 1;
        self.bytes += frame_len as u64;
        if self.first_ns == 0 {
            self.first_ns = now;
        }
        self.last_ns = now;
        let Some(p) = probe else {
            self.foreign += 1;
            return;
        };
        let s = usize::from(p.stream);
        if s >= self.streams.len() {
            self.grow(s);
        }
        let Some(st) = self.streams.get_mut(s) else {
            return;
        };
        st.packets += 1;
        if p.seq >= st.next_seq {
            self.gaps += p.seq - st.next_seq;
            st.next_seq = p.seq + 1;
        } else {
            self.reordered += 1;
            self.gaps = self.gaps.saturating_sub(1);
        }
        if !self.skip_latency {
            self.hist.record(now.saturating_sub(p.sent_ns));
        }
    }

    /// Makes room for stream `s` (a stream first seen: streams are numbered from 0).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, s: usize) {
        self.streams.resize(s + 1, StreamRx::default());
    }

    /// Frames received per stream (the sender's tx queue): how a DUT with several queues
    /// spread the load.
    pub fn stream_packets(&self) -> Vec<u64> {
        self.streams.iter().map(|s| s.packets).collect()
    }

    pub fn latency(&self) -> Latency {
        let h = &self.hist;
        if h.count == 0 {
            return Latency::default();
        }
        Latency {
            min_ns: h.min,
            p50_ns: h.quantile(0.50),
            p90_ns: h.quantile(0.90),
            p99_ns: h.quantile(0.99),
            p999_ns: h.quantile(0.999),
            max_ns: h.max,
        }
    }

    /// Highest sequence number seen + 1, summed over streams: what the sender must have sent.
    pub fn expected(&self) -> u64 {
        self.streams.iter().map(|s| s.next_seq).sum()
    }
}

/// Sub-buckets per power of two of a [`Latencies`] histogram, as a power of two: a value
/// is kept to within 1/128 of itself (0.8%; below 128 ns, exactly).
const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;
/// Values up to 2^40 ns (about 18 minutes) have buckets of their own; longer ones count in
/// the last.
const MAX_EXP: u32 = 40;
const BUCKETS: usize = (MAX_EXP - SUB_BITS + 2) as usize * SUB;

/// Latencies in nanoseconds as a log-linear histogram: exact below 128 ns, then 128 buckets
/// per power of two, so that every value is within 0.8% of its bucket's top; minimum and
/// maximum exact. Every received frame is recorded, in about 15 instructions (the HDR
/// histogram this replaced, at 3 significant digits, took 70 a frame, more than the rest of
/// the receive path together).
#[derive(Debug, Clone)]
pub struct Latencies {
    /// Of a fixed length, so that an index `bucket` gives needs no check.
    counts: Box<[u64; BUCKETS]>,
    pub count: u64,
    pub min: u64,
    pub max: u64,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            counts: Box::new([0; BUCKETS]),
            count: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Latencies {
    /// The bucket of `v`: `v` itself below [`SUB`]; above, the power of two it falls in and
    /// its next [`SUB_BITS`] bits.
    #[inline]
    fn bucket(v: u64) -> usize {
        if v < SUB as u64 {
            return v as usize;
        }
        // As a double, `v`'s exponent and the SUB_BITS bits after its leading one lie side by
        // side at the top of its bits (exactly below 2^53; larger values are past the last
        // bucket anyway, and from 2^63 on the signed conversion's sign bit puts them there
        // too): one conversion and one shift, where counting the leading zeros and shifting
        // by them took more instructions, for every frame received.
        const BIAS: usize = (1023 + SUB_BITS as usize - 1) << SUB_BITS;
        let d = v as i64 as f64;
        ((d.to_bits() >> (52 - SUB_BITS)) as usize - BIAS).min(BUCKETS - 1)
    }

    /// The largest value that falls in bucket `i`.
    fn top(i: usize) -> u64 {
        if i < SUB {
            return i as u64;
        }
        let shift = (i >> SUB_BITS) as u32 - 1;
        let sub = (i & (SUB - 1)) as u64;
        ((SUB as u64 + sub + 1) << shift) - 1
    }

    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = Self::bucket(v);
        self.counts[i] += 1;
        self.count += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// The value below which a share `q` of the recorded values lie (the top of the bucket
    /// holding the `ceil(q * count)`-th smallest, at most the maximum); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count.max(1));
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::top(i).min(self.max);
            }
        }
        0
    }
}

/// Receive accounting split at a measurement window's start: a frame belongs to the window
/// when it was *sent* in it (its sequence number is at least its stream's first in the
/// window), whenever it arrives. Frames of the warm-up that arrive late are therefore not
/// counted, and frames of the window still in flight when it ends are, once they drain.
#[derive(Debug, Default)]
pub struct WindowedRx {
    /// Frames sent before the window started.
    pub warmup: RxStats,
    /// Frames sent in the window (and foreign frames received once it had started).
    pub window: RxStats,
    /// Each stream's first sequence number in the window; `None` until the window starts.
    first_seq: Option<Vec<u64>>,
}

impl WindowedRx {
    /// Accounting that records every frame's latency (`latency`) or none.
    pub fn new(latency: bool) -> WindowedRx {
        let mut rx = WindowedRx::default();
        rx.warmup.skip_latency = !latency;
        rx.window.skip_latency = !latency;
        rx
    }

    /// Starts the window: `next_seq[s]` is the sequence number stream `s` sends next.
    pub fn start_window(&mut self, next_seq: &[u64]) {
        self.window.streams = next_seq
            .iter()
            .map(|&n| StreamRx {
                next_seq: n,
                packets: 0,
            })
            .collect();
        self.first_seq = Some(next_seq.to_vec());
    }

    pub fn started(&self) -> bool {
        self.first_seq.is_some()
    }

    /// Frames of ours received (with a probe), warm-up and window together.
    pub fn ours(&self) -> u64 {
        let w = &self.warmup;
        let v = &self.window;
        (w.packets - w.foreign) + (v.packets - v.foreign)
    }

    #[inline]
    pub fn record(&mut self, frame_len: usize, probe: Option<Probe>, now: u64) {
        let in_window = match (&self.first_seq, &probe) {
            (None, _) => false,
            (Some(first), Some(p)) => first.get(usize::from(p.stream)).is_none_or(|&f| p.seq >= f),
            (Some(_), None) => true,
        };
        if in_window {
            self.window.record(frame_len, probe, now);
        } else {
            self.warmup.record(frame_len, probe, now);
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Latency {
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// What one generator run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GenReport {
    pub role: String,
    pub frame_size: usize,
    /// Frames put on the ring.
    pub tx_packets: u64,
    /// Frames the schedule called for: sent, plus refused and shortfall on a wire
    /// (`GenConfig::drop_when_full`); equal to `tx_packets` otherwise.
    pub tx_offered: u64,
    /// On a wire: frames dropped because the ring was full (the receiver's loss).
    pub tx_refused: u64,
    /// On a wire: frames the generator could not offer in time (its own loss, TRex's "queue
    /// full").
    pub tx_shortfall: u64,
    /// Seconds from the first send to the end of sending, and the send rate over them.
    pub tx_window_s: f64,
    pub tx_mpps: f64,
    /// Times the ring had no room for a frame (retried or refused), as the queue counts them.
    pub tx_ring_full: u64,
    /// While sending: the longest pause between two passes of the generator's loop (its CPU
    /// was taken away), and the longest time without a received frame once frames came back
    /// (the peer stopped, or we did), in µs. A pause longer than a ring holds at the offered
    /// rate loses frames that no DUT could have kept.
    pub max_stall_us: f64,
    pub max_rx_gap_us: f64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Seconds between the first and the last received frame.
    pub rx_window_s: f64,
    pub rx_mpps: f64,
    /// Frame bytes × 8 × rate (no FCS, no preamble or gap).
    pub rx_gbps_l2: f64,
    /// (frame + 20) bytes × 8 × rate: adds preamble, SFD and inter-frame gap.
    pub rx_gbps_l1: f64,
    pub rx_foreign: u64,
    /// With `GenConfig::check_payload`: frames of ours (warm-up included) whose filler after
    /// the probe differed from what was sent. 0 without.
    pub rx_corrupt: u64,
    pub rx_reordered: u64,
    pub rx_seq_gaps: u64,
    /// Frames sent and received per stream in the window: one stream per (sending
    /// interface, tx queue, network), described in `streams`.
    pub tx_stream_packets: Vec<u64>,
    pub rx_stream_packets: Vec<u64>,
    pub streams: Vec<StreamInfo>,
    pub rx_bad_desc: u64,
    /// Frames a kernel port's socket lost because its ring was full (the kernel's count,
    /// over the whole run, warm-up included): sent to us, never received.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_kernel_drops: u64,
    pub latency: Latency,
    pub connects: u64,
    pub last_disconnect_reason: Option<String>,
    /// The run ended early because a link went down or the peer left: its counts cover only
    /// part of the time asked for.
    pub link_lost: bool,
    /// Cumulative counts through the sending time (`GenConfig::sample_every`), the last when
    /// sending ended.
    pub samples: Vec<Sample>,
    /// With `GenConfig::warmup`: what happened before the measurement window, which every
    /// other count leaves out. A peer's own counters see warm-up and window together (see
    /// [`GenReport::tx_total`]).
    pub warmup_s: f64,
    pub warmup_tx_offered: u64,
    pub warmup_tx_packets: u64,
    pub warmup_tx_refused: u64,
    pub warmup_rx_packets: u64,
}

/// What a stream is: the interface it was sent on (its id), the tx queue, the network.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct StreamInfo {
    pub iface: u32,
    pub queue: u16,
    pub network: u16,
}

/// Frames sent and received since the start of a run's measurement window (after any
/// warm-up), at `t_s` seconds into it, and (paced on a wire) those a full ring refused and
/// those the generator wrote off as behind its schedule.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Sample {
    pub t_s: f64,
    pub tx: u64,
    pub rx: u64,
    pub refused: u64,
    pub shortfall: u64,
}

impl GenReport {
    /// Frames put on the ring over the whole run, warm-up included: what the peer received.
    pub fn tx_total(&self) -> u64 {
        self.tx_packets + self.warmup_tx_packets
    }

    /// Frames received over the whole run, warm-up included: what the peer sent us.
    pub fn rx_total(&self) -> u64 {
        self.rx_packets + self.warmup_rx_packets
    }

    /// The sampling intervals as (seconds, frames received, frames refused). One shorter
    /// than a millisecond (the last sample, taken as sending ended just after a regular one)
    /// is folded into the interval before it, so that every interval's rate means something
    /// and both series below have one entry per interval.
    fn intervals(&self) -> Vec<(f64, u64, u64)> {
        let mut prev = Sample::default();
        let mut v: Vec<(f64, u64, u64)> = Vec::with_capacity(self.samples.len());
        for s in &self.samples {
            let d = (s.t_s - prev.t_s, s.rx - prev.rx, s.refused - prev.refused);
            match v.last_mut() {
                Some(last) if d.0 <= 1e-3 => {
                    last.0 += d.0;
                    last.1 += d.1;
                    last.2 += d.2;
                }
                _ => v.push(d),
            }
            prev = *s;
        }
        v
    }

    /// Receive rate in each sampling interval, Mpps; NaN (null in JSON) for a run whose only
    /// interval is too short to give a rate.
    pub fn interval_rx_mpps(&self) -> Vec<f64> {
        self.intervals()
            .iter()
            .map(|&(dt, rx, _)| {
                if dt > 1e-3 {
                    rx as f64 / dt / 1e6
                } else {
                    f64::NAN
                }
            })
            .collect()
    }

    /// Frames a full ring refused in each sampling interval: where in a trial the loss was.
    pub fn interval_refused(&self) -> Vec<u64> {
        self.intervals().iter().map(|&(_, _, r)| r).collect()
    }
}

impl GenReport {
    pub fn fill_rx(&mut self, s: &RxStats) {
        self.rx_packets = s.packets;
        self.rx_bytes = s.bytes;
        self.rx_foreign = s.foreign;
        self.rx_reordered = s.reordered;
        self.rx_seq_gaps = s.gaps;
        self.rx_stream_packets = s.stream_packets();
        self.latency = s.latency();
        let window = s.last_ns.saturating_sub(s.first_ns) as f64 / 1e9;
        self.rx_window_s = window;
        if window > 0.0 && s.packets > 1 {
            // Packets after the first, over the time they took to arrive.
            let pps = (s.packets - 1) as f64 / window;
            let avg = s.bytes as f64 / s.packets as f64;
            self.rx_mpps = pps / 1e6;
            self.rx_gbps_l2 = pps * avg * 8.0 / 1e9;
            self.rx_gbps_l1 = pps * (avg + 20.0) * 8.0 / 1e9;
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantiles_are_within_a_bucket_of_the_exact_ones() {
        let mut h = Latencies::default();
        // A skewed spread over six decades, and the same values sorted for the exact answer.
        let mut v: Vec<u64> = (1..20_000u64)
            .map(|i| (i * i * 7919) % 10_000_000 + 1)
            .collect();
        for &x in &v {
            h.record(x);
        }
        v.sort_unstable();
        assert_eq!(
            (h.min, h.max, h.count),
            (v[0], v[v.len() - 1], v.len() as u64)
        );
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
            let exact = v[rank - 1];
            let got = h.quantile(q);
            assert!(got >= exact, "q {q}: {got} below the exact {exact}");
            assert!(
                got - exact <= exact / 128,
                "q {q}: {got} more than 1/128 above the exact {exact}"
            );
        }
        // Exact below 128 ns; every bucket's top is the largest value that maps to it.
        for x in [
            0u64,
            1,
            127,
            128,
            129,
            255,
            256,
            1000,
            1 << 20,
            (1 << 40) - 1,
        ] {
            let b = Latencies::bucket(x);
            assert!(Latencies::top(b) >= x, "{x}");
            assert_eq!(Latencies::bucket(Latencies::top(b)), b, "{x}");
            assert_eq!(Latencies::bucket(Latencies::top(b) + 1), b + 1, "{x}");
        }
        // Beyond the last power of two: counted in the last bucket, the maximum still exact.
        h.record(u64::MAX);
        assert_eq!(h.max, u64::MAX);
        assert_eq!(h.quantile(1.0), Latencies::top(BUCKETS - 1));
        assert_eq!(Latencies::default().quantile(0.5), 0);
    }

    /// The bucket by the exponent arithmetic written out, against the conversion `bucket`
    /// uses.
    #[test]
    fn buckets_are_the_power_of_two_and_the_next_seven_bits() {
        fn reference(v: u64) -> usize {
            if v < SUB as u64 {
                return v as usize;
            }
            let e = 63 - v.leading_zeros();
            if e > MAX_EXP {
                return BUCKETS - 1;
            }
            let shift = e - SUB_BITS;
            let sub = ((v >> shift) as usize) & (SUB - 1);
            ((shift as usize + 1) << SUB_BITS) + sub
        }
        let mut values: Vec<u64> = (0..70_000).collect();
        for e in 7..64 {
            let p = 1u64 << e;
            values.extend([p - 1, p, p + 1, p | (p >> 1), p | (p - 1)]);
        }
        values.extend([u64::MAX, u64::MAX - 1, (1 << 53) + 1, 123_456_789_012]);
        for v in values {
            assert_eq!(Latencies::bucket(v), reference(v), "{v}");
        }
    }

    #[test]
    fn gaps_and_reordering() {
        let mut s = RxStats::default();
        for seq in [0, 1, 2, 5, 3, 6] {
            s.record(
                64,
                Some(Probe {
                    stream: 0,
                    seq,
                    sent_ns: 0,
                }),
                1000,
            );
        }
        s.record(64, None, 1000);
        // 3 and 4 missing at 5; 3 arrives late (reordered) and refills one gap.
        assert_eq!((s.gaps, s.reordered, s.foreign, s.packets), (1, 1, 1, 7));
        assert_eq!(s.expected(), 7);
        s.record(
            64,
            Some(Probe {
                stream: 2,
                seq: 0,
                sent_ns: 0,
            }),
            1000,
        );
        assert_eq!(s.stream_packets(), [6, 0, 1]);
    }

    #[test]
    fn intervals_fold_a_last_sample_taken_just_after_a_regular_one() {
        let at = |t_s, rx, refused| Sample {
            t_s,
            tx: 0,
            rx,
            refused,
            shortfall: 0,
        };
        let r = GenReport {
            samples: vec![
                at(0.02, 20_000, 0),
                at(0.04, 40_000, 5),
                at(0.0403, 40_300, 7),
            ],
            ..Default::default()
        };
        assert_eq!(r.interval_refused(), [0, 7]);
        let mpps = r.interval_rx_mpps();
        assert_eq!(mpps.len(), 2);
        assert!(
            (mpps[0] - 1.0).abs() < 1e-9 && (mpps[1] - 1.0).abs() < 1e-9,
            "{mpps:?}"
        );
    }

    #[test]
    fn rates_use_the_receive_window() {
        let mut s = RxStats::default();
        for i in 0..=1000u64 {
            s.record(
                100,
                Some(Probe {
                    stream: 0,
                    seq: i,
                    sent_ns: i * 1000,
                }),
                1_000_000 + i * 1000,
            );
        }
        let mut r = GenReport::default();
        r.fill_rx(&s);
        assert!((r.rx_mpps - 1.0).abs() < 1e-9, "{}", r.rx_mpps);
        assert!((r.rx_gbps_l2 - 0.8).abs() < 1e-9);
        assert!((r.rx_gbps_l1 - 0.96).abs() < 1e-9);
        assert!(r.latency.p50_ns >= 999_000 && r.latency.p50_ns <= 1_001_000);
    }

    #[test]
    fn accounting_without_latency_counts_and_sequences_every_frame_all_the_same() {
        let mut rx = WindowedRx::new(false);
        rx.start_window(&[10]);
        for seq in [8, 9, 10, 11, 13, 12] {
            let p = Probe {
                stream: 0,
                seq,
                sent_ns: 1000,
            };
            rx.record(64, Some(p), 5000);
        }
        assert_eq!((rx.warmup.packets, rx.window.packets), (2, 4));
        assert_eq!((rx.window.reordered, rx.window.gaps), (1, 0));
        let mut r = GenReport::default();
        r.fill_rx(&rx.window);
        assert_eq!((r.rx_packets, r.rx_bytes), (4, 256));
        assert_eq!(r.latency, Latency::default());
        // The same frames with latency: 4000 ns each.
        let mut rx = WindowedRx::new(true);
        rx.start_window(&[0]);
        rx.record(
            64,
            Some(Probe {
                stream: 0,
                seq: 0,
                sent_ns: 1000,
            }),
            5000,
        );
        r.fill_rx(&rx.window);
        assert_eq!((r.latency.min_ns, r.latency.max_ns), (4000, 4000));
    }
}
