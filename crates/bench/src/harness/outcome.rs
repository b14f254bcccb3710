//! What one search leaves behind: every trial as the generator saw it, the latency points,
//! the search's result or its error, and the placement it ran in.

use serde::Serialize;

use crate::Subject;
use crate::placement::Placement;
use crate::search::{Measurement, SearchReport};
use crate::trial::Placed;
use trafgen::stats::Latency;

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One trial as the generator saw it, with what the DUT's counters said.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TrialRecord {
    /// `mrr` (flat out, held back by a full ring), `search`, or `latency`.
    pub kind: &'static str,
    /// When the trial began, in seconds since the run did (how the DUTs' trials interleave).
    pub at_s: f64,
    pub m: Measurement,
    /// Frames lost to a full ring (the DUT's receive ring).
    pub refused: u64,
    /// Frames that came back which the generator did not send (no probe of its own: the
    /// fragments of one, the DUT's own traffic). Not counted as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub foreign: u64,
    /// Latency trials only: the others do not measure it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Receive rate in each sampling interval: a trial cut by a stall or a placement flip
    /// shows a dip.
    pub interval_rx_mpps: Vec<f64>,
    /// Frames refused in each sampling interval (where in the trial the ring overflowed).
    pub interval_refused: Vec<u64>,
    /// The warm-up before the counted window (`L3fwdConfig::warmup_secs`): frames sent in it
    /// and refused by a full ring. Neither counts; they show the cold start it absorbed.
    pub warmup_sent: u64,
    pub warmup_refused: u64,
    /// Per network (scenarios with networks): frames sent into it and received out of it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<super::topology::NetworkCount>,
    /// Frames received per generator stream (one per queue pair, so per DUT worker) when
    /// there are several: how the load was spread.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rx_streams: Vec<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<String>,
    /// One-way cache-line transfer between the CPUs just before and just after the trial,
    /// probed at real-time priority (`None` where the process may not use it).
    pub probe_before_ns: Option<f64>,
    pub probe_after_ns: Option<f64>,
    /// The longest pause of the generator's loop and the longest time without a received
    /// frame while sending, µs.
    pub max_stall_us: f64,
    pub max_rx_gap_us: f64,
    /// How long the DUT's worker thread waited for its CPU during the trial, µs in all (the
    /// longest of its workers' waits).
    pub dut_wait_us: Option<f64>,
    /// Why the search did not use this trial and ran it again (see the trial guard, `harness::guard`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redone: Option<String>,
}

/// Latency at one fraction of the first goal's result.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyPoint {
    pub fraction: f64,
    pub load_pps: f64,
    pub rx_pps: f64,
    pub loss_ratio: f64,
    pub latency: Latency,
}

/// One search: one (repetition, size, DUT).
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub dut: Subject,
    pub size: usize,
    pub rep: usize,
    /// Flat-out receive rate.
    pub mrr_pps: f64,
    pub search: Option<SearchReport>,
    pub latency: Vec<LatencyPoint>,
    /// veclane's nanoseconds per packet per node over the flat-out trial.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ns: Vec<(String, f64)>,
    /// veclane: packets each worker took in over the flat-out trial.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub worker_packets: Vec<u64>,
    /// The DUT's drop counters at the end.
    pub dut_drops: String,
    pub trials: Vec<TrialRecord>,
    pub probe_before_ns: f64,
    pub probe_after_ns: f64,
    pub placement: Placement,
    pub error: Option<String>,
}

impl Placed for Outcome {
    fn failed(dut: Subject, size: usize, rep: usize, e: String) -> Outcome {
        Outcome {
            dut,
            size,
            rep,
            mrr_pps: f64::NAN,
            search: None,
            latency: Vec::new(),
            node_ns: Vec::new(),
            worker_packets: Vec::new(),
            dut_drops: String::new(),
            trials: Vec::new(),
            probe_before_ns: 0.0,
            probe_after_ns: 0.0,
            placement: Placement::Mixed,
            error: Some(e),
        }
    }

    /// The placement probed before the DUT started and after it stopped; a search whose
    /// flat-out trial (the one it used) ran in another placement is mixed, whatever those
    /// probes say: that trial set the range of every other (its rate times 1.1 is the
    /// search's maximum load), so one the host slowed caps the whole search below the DUT's
    /// rate.
    fn set_placement(&mut self, before_ns: f64, after_ns: f64) {
        self.probe_before_ns = before_ns;
        self.probe_after_ns = after_ns;
        let around = Placement::of(before_ns, after_ns);
        // Without real-time priority a trial has no probes; one probe missing is a failed
        // probe, which is mixed as in `Placement::of`.
        let flat = (self.trials.iter())
            .find(|t| t.kind == "mrr" && t.redone.is_none())
            .and_then(|t| match (t.probe_before_ns, t.probe_after_ns) {
                (None, None) => None,
                (b, a) => Some(Placement::of(b.unwrap_or(f64::NAN), a.unwrap_or(f64::NAN))),
            });
        self.placement = match flat {
            Some(p) if p != around => Placement::Mixed,
            _ => around,
        };
    }
}

impl Outcome {
    /// Trials whose counts the DUT's counters contradict.
    pub fn disagreeing(&self) -> usize {
        self.trials
            .iter()
            .filter(|t| !t.disagreements.is_empty())
            .count()
    }
}
