//! What every scenario shares: a trial, the median rows built from trials, and the loop that
//! interleaves DUTs (A B A B ...) with a placement probe around every trial.

use std::time::Duration;

use serde::Serialize;

use crate::placement::{self, Placement};
use crate::{BenchError, Subject, median_min_max};

/// One measured trial.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub dut: Subject,
    pub size: usize,
    pub rep: usize,
    pub tx_packets: u64,
    pub rx_packets: u64,
    /// Receive rate in Mpps over the receiver's measurement window.
    pub mpps: f64,
    pub window_s: f64,
    /// `tx - rx`, frames the sender counted as sent that never arrived.
    pub lost: i64,
    pub note: String,
    /// Where the generator's counts and the DUT's own counters disagree (empty: they agree,
    /// or the scenario has no DUT counters to compare).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<String>,
    /// Nanoseconds per packet in each graph node (veclane only), from `show runtime`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ns: Vec<(String, f64)>,
    /// One-way cache-line transfer between the two CPUs, before and after the trial.
    pub probe_before_ns: f64,
    pub probe_after_ns: f64,
    pub placement: Placement,
    /// Why the trial produced no number.
    pub error: Option<String>,
}

impl Trial {
    /// A trial of `dut` at `size` with nothing measured yet: the DUT drivers fill in counts and
    /// rate, `run` fills in the placement probes (or the error).
    pub fn new(dut: Subject, size: usize, rep: usize) -> Trial {
        Trial {
            dut,
            size,
            rep,
            tx_packets: 0,
            rx_packets: 0,
            mpps: f64::NAN,
            window_s: 0.0,
            lost: 0,
            note: String::new(),
            disagreements: Vec::new(),
            node_ns: Vec::new(),
            probe_before_ns: 0.0,
            probe_after_ns: 0.0,
            placement: Placement::Mixed,
            error: None,
        }
    }
}

/// Median of the trials of one (DUT, size).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub dut: Subject,
    pub size: usize,
    pub mpps: f64,
    pub mpps_min: f64,
    pub mpps_max: f64,
    /// size × 8 × pps.
    pub gbps_l2: f64,
    /// (size + 20) × 8 × pps.
    pub gbps_l1: f64,
    pub loss_ratio: f64,
    /// Trials behind the median, and which placement they share.
    pub trials: usize,
    pub basis: Placement,
    /// Trials of this (DUT, size) in all, failed ones included.
    pub trials_run: usize,
    /// Trials behind the median whose counts disagreed with the DUT's counters.
    pub disagreeing: usize,
    /// Median nanoseconds per packet per node over the trials behind the median (veclane).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ns: Vec<(String, f64)>,
}

/// One row per (size, DUT) that has a successful trial.
pub fn rows(trials: &[Trial], sizes: &[usize], duts: &[Subject]) -> Vec<Row> {
    let mut out = Vec::new();
    for &size in sizes {
        for &dut in duts {
            let all: Vec<&Trial> = trials
                .iter()
                .filter(|t| t.dut == dut && t.size == size)
                .collect();
            let ok: Vec<&Trial> = all.iter().copied().filter(|t| t.error.is_none()).collect();
            if ok.is_empty() {
                continue;
            }
            // Mixed trials were cut by a flip and only count when nothing else exists.
            let basis = Placement::preferred(|p| ok.iter().any(|t| t.placement == p))
                .unwrap_or(Placement::Mixed);
            let t: Vec<&Trial> = ok
                .iter()
                .copied()
                .filter(|t| t.placement == basis)
                .collect();
            let (m, lo, hi) = median_min_max(&t.iter().map(|t| t.mpps).collect::<Vec<_>>());
            let tx: u64 = t.iter().map(|t| t.tx_packets).sum();
            let lost: i64 = t.iter().map(|t| t.lost.max(0)).sum();
            let mut node_ns = Vec::new();
            if let Some(first) = t.first() {
                for (name, _) in &first.node_ns {
                    let v: Vec<f64> = t
                        .iter()
                        .filter_map(|x| x.node_ns.iter().find(|(n, _)| n == name).map(|p| p.1))
                        .collect();
                    node_ns.push((name.clone(), median_min_max(&v).0));
                }
            }
            out.push(Row {
                dut,
                size,
                mpps: m,
                mpps_min: lo,
                mpps_max: hi,
                gbps_l2: m * 1e6 * frame_bytes(size) * 8.0 / 1e9,
                gbps_l1: m * 1e6 * (frame_bytes(size) + 20.0) * 8.0 / 1e9,
                loss_ratio: if tx > 0 { lost as f64 / tx as f64 } else { 0.0 },
                trials: t.len(),
                basis,
                trials_run: all.len(),
                disagreeing: t.iter().filter(|x| !x.disagreements.is_empty()).count(),
                node_ns,
            });
        }
    }
    out
}

/// How trials are laid out in time.
#[derive(Debug, Clone, Copy)]
pub struct Schedule<'a> {
    pub sizes: &'a [usize],
    pub duts: &'a [Subject],
    pub reps: usize,
    /// The two CPUs the scenario runs on (probed for placement).
    pub cpus: (usize, usize),
    /// Before each trial, wait up to this long for the CPUs to be near (0: do not wait).
    pub wait_near_secs: f64,
}

/// What the interleaving loop makes of one (rep, size, DUT): a continuous trial, or a
/// search.
pub trait Placed {
    /// The record of a (rep, size, DUT) that produced no number, and why.
    fn failed(dut: Subject, size: usize, rep: usize, error: String) -> Self;
    /// The placement probes taken before and after it.
    fn set_placement(&mut self, before_ns: f64, after_ns: f64);
}

impl Placed for Trial {
    fn failed(dut: Subject, size: usize, rep: usize, error: String) -> Trial {
        Trial {
            error: Some(error),
            ..Trial::new(dut, size, rep)
        }
    }

    fn set_placement(&mut self, before_ns: f64, after_ns: f64) {
        self.probe_before_ns = before_ns;
        self.probe_after_ns = after_ns;
        self.placement = Placement::of(before_ns, after_ns);
    }
}

/// The placement probe before a search (or a group of them): after waiting up to
/// `wait_near_secs` for the near state, or at once when that is 0.
pub(crate) fn probe_before((a, b): (usize, usize), wait_near_secs: f64) -> f64 {
    if wait_near_secs > 0.0 {
        placement::wait_near(a, b, Duration::from_secs_f64(wait_near_secs))
    } else {
        placement::probe(a, b, 20_000)
    }
}

/// The placement probe after a search (or a group of them).
pub(crate) fn probe_after((a, b): (usize, usize)) -> f64 {
    placement::probe(a, b, 20_000)
}

/// Runs every (rep, size, DUT), DUTs interleaved, with a placement probe before (or a bounded
/// wait for the near state) and after each; `progress` sees each finished one. One that fails
/// is kept with its reason and the run goes on.
pub fn run<T: Placed>(
    s: Schedule<'_>,
    mut one: impl FnMut(Subject, usize, usize) -> Result<T, BenchError>,
    mut progress: impl FnMut(&T),
) -> Vec<T> {
    let mut out = Vec::new();
    for rep in 0..s.reps {
        for &size in s.sizes {
            for &dut in s.duts {
                let before = probe_before(s.cpus, s.wait_near_secs);
                let r = one(dut, size, rep);
                let after = probe_after(s.cpus);
                let mut t = r.unwrap_or_else(|e| T::failed(dut, size, rep, e.to_string()));
                t.set_placement(before, after);
                progress(&t);
                out.push(t);
            }
        }
    }
    out
}

/// The memif buffer size for frames of `size`: the `configured` one, or 9216 bytes for frames
/// that would not fit it, so that no DUT chains. DPDK 22.11's net_memif transmit path corrupts
/// chained frames once its ring nears full (a free-slot off-by-one), so a chained 9000-byte
/// trial would measure that bug rather than throughput. veclane's chains are covered by tests.
pub fn buffer_size_for(configured: u32, size: usize) -> u32 {
    if size > configured as usize {
        9216.max(size as u32)
    } else {
        configured
    }
}

/// Frame bytes the rings a searched trial keeps busy hold at most together, by default:
/// 8 MiB, a quarter of this machine's L3, which it shares with the host's other guests.
/// Measured with two rings (l3fwd: the generator's transmit ring in, its receive ring out) at
/// 1280 and 1500 B (docs/results/2026-11-28-ring-size.md): 2^12 slots of them, 5.2 and 6.1 MB
/// a ring, cost both veclane and VPP two to three times as much a packet in the nodes that
/// copy as 2^11, whose frames stay in the cache; up to 1024 B 2^12 slots stay in it.
pub const RINGS_FRAME_BYTES: usize = 8 << 20;
/// Buffer bytes the busy rings span at most together, by default: 16 MiB, two rings of 2^12
/// buffers of 2 KiB. A ring's buffers lie one buffer size apart, so that the same line of
/// every frame falls in the same small share of the cache's sets (a 32nd with 2 KiB buffers),
/// whatever the frames' size: four rings of 2^12 (the node switch) overfill it even where
/// their frames would fit. Measured in the node switch (docs/results/2026-11-28-node-ring-size.md):
/// 2^11 slots a ring forwarded 512-byte frames faster than 2^12 for veclane and VPP alike,
/// and no slower at 64 B; 2^10 at 1500 B four times as fast as 2^12.
pub const RINGS_BUFFER_BYTES: usize = 16 << 20;
/// The most slots a searched trial's ring has by default: 2^12, which ride out the host's
/// shorter stalls (about 200 µs at 20 Mpps).
pub const RING_LOG2_MAX: u8 = 12;
/// The fewest: 2^8 (jumbo frames).
pub const RING_LOG2_MIN: u8 = 8;

/// log2 of the memif ring size for frames of `size` (or the mix [`IMIX`]) in buffers of
/// `buffer` bytes, in a trial that keeps `busy` rings busy: the `configured` one, or the most
/// slots, from 2^8 to 2^12, such that the busy rings' frames (each in whole 64-byte lines, a
/// mix at its largest) take at most [`RINGS_FRAME_BYTES`] and their buffers span at most
/// [`RINGS_BUFFER_BYTES`]. With two rings of 2 KiB buffers (l3fwd): 2^12 up to 1024 B, 2^11
/// at 1500 B and IMIX, 2^8 at 9000 B; with four (the node switch, one network, both ways):
/// 2^11 up to 1024 B, 2^10 at 1500 B and IMIX, 2^8 at 9000 B. Such rings still hold a
/// hundred microseconds of traffic or more at the rates their frames reach here.
pub fn ring_log2_for(configured: Option<u8>, size: usize, buffer: u32, busy: usize) -> u8 {
    if let Some(c) = configured {
        return c;
    }
    let busy = busy.max(1);
    // A mix counts at its largest frame, not its mean: the mix's period (12 frames) does not
    // divide a ring of 2^N slots, so a slot takes another size each lap and within a few laps
    // every buffer has had the largest frame's lines in use (IMIX in l3fwd, 2^12 against
    // 2^11: veclane's memif-output 60-62 ns a packet against 27-29,
    // docs/results/2026-11-28-imix-rings.md).
    let line = largest_frame(size).div_ceil(64).max(1) * 64;
    let by_frames = RINGS_FRAME_BYTES / busy / line;
    // A buffer size that is no power of two (jumbo frames' 9216) spreads the frames' lines
    // over more sets: counted as the power of two below it.
    let stride = 1usize << (buffer as usize).max(64).ilog2();
    let by_span = RINGS_BUFFER_BYTES / busy / stride;
    let slots = by_frames.min(by_span).max(1);
    (slots.ilog2() as u8).clamp(RING_LOG2_MIN, RING_LOG2_MAX)
}

/// `--sizes imix` among frame sizes: the simple IMIX, frames of 64, 570 and 1518 bytes 7:4:1,
/// in the turn of [`IMIX_MIX`].
pub const IMIX: usize = 0;
/// The IMIX frames in the order the generator sends them, over and over.
pub const IMIX_MIX: [usize; 12] = [64, 570, 64, 1518, 64, 570, 64, 64, 570, 64, 570, 64];

/// The mean bytes of a frame of `size` (IMIX: the mix's mean, 353.8).
pub fn frame_bytes(size: usize) -> f64 {
    if size == IMIX {
        IMIX_MIX.iter().sum::<usize>() as f64 / IMIX_MIX.len() as f64
    } else {
        size as f64
    }
}

/// `size` as tables and file names say it.
pub fn size_label(size: usize) -> String {
    if size == IMIX {
        "imix".into()
    } else {
        size.to_string()
    }
}

/// The largest frame of `size` (IMIX: of the mix, 1518 B).
pub fn largest_frame(size: usize) -> usize {
    if size == IMIX {
        IMIX_MIX.iter().copied().max().unwrap_or(0)
    } else {
        size
    }
}

/// The generator's frame size and mix for `size` (IMIX: the largest, and the mix).
pub fn frame_spec_size(size: usize) -> (usize, Vec<usize>) {
    let mix = if size == IMIX {
        IMIX_MIX.to_vec()
    } else {
        Vec::new()
    };
    (largest_frame(size), mix)
}

/// A frame-size argument: bytes, or `imix`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    match s.trim() {
        "imix" | "IMIX" => Ok(IMIX),
        n => n
            .parse::<usize>()
            .map_err(|e| format!("{n:?} is neither a frame size in bytes nor imix: {e}")),
    }
}

/// A trial is only valid if the receiver saw frames of the size asked for: a DUT that quietly
/// sends something else (testpmd's txonly falls back to 64-byte frames when a frame does not
/// fit its mbuf) must not produce a number. With an IMIX, whose frames are lost unevenly
/// across sizes, the average must lie between its smallest and largest frame.
pub fn check_frame_size(bytes: u64, packets: u64, size: usize) -> Result<(), FrameSizeError> {
    if packets == 0 {
        return Err(FrameSizeError::NoFrames);
    }
    let average = bytes as f64 / packets as f64;
    if size == IMIX {
        if !(64.0..=1518.0).contains(&average) {
            return Err(FrameSizeError::Wrong { average, size });
        }
        return Ok(());
    }
    if (average - size as f64).abs() > 0.5 {
        return Err(FrameSizeError::Wrong { average, size });
    }
    Ok(())
}

/// What the receiver saw was not the frames asked for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameSizeError {
    #[error("receiver counted no frames")]
    NoFrames,
    #[error("received frames average {average:.1} B, not the {size} B asked for")]
    Wrong { average: f64, size: usize },
}
