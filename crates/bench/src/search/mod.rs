//! Throughput searches over a [`Measurer`], as pure logic: RFC 2544 §26.1 binary search,
//! binary search with loss verification (RFC 8204 / VSPERF / ETSI GS NFV-TST 009),
//! MLRsearch (RFC 9971), TRex's NDR bench (trex-core `ndr_bench.py`) and continuous
//! throughput (VSPERF `rfc2544_continuous`, CSIT MRR).
//!
//! Shared conventions: loads are frames per second asked of the generator, never below
//! `min_load_pps` nor above `max_load_pps`; a trial's loss ratio is |offered − received| /
//! offered, so frames the generator never sent and surplus frames both count as lost (CSIT,
//! RFC 9971 "Trial Loss Count"); the report echoes the method with every parameter and keeps
//! every trial in order. [`model::ModelDut`] is a deterministic device to test them against.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

mod binary;
mod mlr;
pub mod model;
#[cfg(test)]
mod tests;
mod trex;

use binary::binary;
use mlr::mlr;
use trex::{trex, trex_shares};

/// What one trial measured. Rates are measured by the generator, never inferred.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measurement {
    /// The offered load asked for.
    pub load_pps: f64,
    /// The trial duration asked for.
    pub duration_s: f64,
    /// Frames the schedule called for in that time (load × duration).
    pub offered: u64,
    /// Frames the generator put on the DUT's ring.
    pub sent: u64,
    /// Frames that came back.
    pub received: u64,
    /// Frames the generator itself could not offer in time (TRex's "queue full").
    pub shortfall: u64,
    /// Measured send rate.
    pub tx_pps: f64,
    /// Measured receive rate (forwarding rate).
    pub rx_pps: f64,
}

impl Measurement {
    /// |offered − received| / offered, at most 1: frames never sent count as lost, and so do
    /// frames received beyond those offered (CSIT's convention for negative loss).
    pub fn loss_ratio(&self) -> f64 {
        if self.offered == 0 {
            return if self.received == 0 { 0.0 } else { 1.0 };
        }
        (self.offered.abs_diff(self.received) as f64 / self.offered as f64).min(1.0)
    }

    /// shortfall / offered: how far the generator fell behind its schedule.
    pub fn shortfall_ratio(&self) -> f64 {
        if self.offered == 0 {
            return 0.0;
        }
        (self.shortfall as f64 / self.offered as f64).min(1.0)
    }
}

/// Runs one trial: offers `load_pps` for `duration` and counts what came back.
pub trait Measurer {
    fn measure(&mut self, load_pps: f64, duration: Duration) -> Result<Measurement, String>;
}

/// One MLRsearch Search Goal (RFC 9971) plus CSIT's `preceding_targets`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MlrGoal {
    /// Goal Loss Ratio: a trial with at most this loss ratio is low-loss ("good").
    pub loss_ratio: f64,
    /// Goal Exceed Ratio: share of trial time at a lower bound allowed to be high-loss.
    pub exceed_ratio: f64,
    /// Goal Final Trial Duration: shorter trials count only through the balancing sum.
    pub final_trial_s: f64,
    /// Goal Duration Sum: trial time after which a load is surely classified.
    pub duration_sum_s: f64,
    /// Goal Width, relative: reached when (upper − lower) / upper ≤ width.
    pub width: f64,
    /// Goal Initial Trial Duration: duration sum (and trial cap) of the coarsest target.
    pub initial_trial_s: f64,
    /// Coarser targets searched first (CSIT `TargetScaling`): each doubles the width, their
    /// duration sums shrink geometrically from `duration_sum_s` to `initial_trial_s`.
    pub preceding_targets: u32,
}

impl MlrGoal {
    /// "NDR" for loss ratio 0, else "PDR x%".
    pub fn name(&self) -> String {
        if self.loss_ratio == 0.0 {
            "NDR".into()
        } else {
            format!("PDR {}%", pct(self.loss_ratio))
        }
    }
}

/// A search method with every parameter it ran with.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum Method {
    /// RFC 2544 §26.1 binary search as VSPERF runs it (trex_client.py `run_trials`): a trial
    /// at max load, then bisection of [min, max]; a load passes when its loss ratio is at most
    /// `loss_ratio` (0 = RFC 2544 throughput). Stops when (upper − lower) ≤ precision × max
    /// load. If `final_trial_s` > 0 (0 = none) the found rate gets one trial that long (RFC 2544 §24: the
    /// final determination uses full-length trials); on failure the search restarts below it,
    /// at found − precision × max, as VSPERF's verification mode does (at most 10 times).
    Rfc2544 {
        loss_ratio: f64,
        trial_s: f64,
        final_trial_s: f64,
        precision: f64,
    },
    /// RFC 8204 / VSPERF / ETSI TST 009 binary search with loss verification: the same
    /// bisection, but a failing trial is repeated at the same load up to `max_repeat` more
    /// times and any pass counts as a pass.
    BinaryLossVerification {
        loss_ratio: f64,
        trial_s: f64,
        max_repeat: u32,
        precision: f64,
    },
    /// MLRsearch (RFC 9971): one search for several goals. Loads are classified by
    /// Appendix A, results are the Relevant Lower/Upper Bounds and the Conditional
    /// Throughput of Appendix B; the load selection follows CSIT's controller in outline
    /// (trial at max load, then at its forwarding rate, coarse targets first, smaller loads
    /// first). Stops early, irregular, after `search_duration_max_s` of trial time.
    Mlr {
        goals: Vec<MlrGoal>,
        search_duration_max_s: f64,
    },
    /// TRex NDR bench (trex-core `ndr_bench.py`): a run at 100 % of max load whose measured
    /// send rate becomes the max rate; if it drops more than `pdr` or its queue-full share is
    /// at least `q_full`, a binary search of [0, max rate] (valid: drops ≤ pdr and queue
    /// full ≤ q_full; loads below min load run at min load) that stops when a trial lands
    /// within `pdr_error` (of max rate) of the best valid rate or after `max_iterations`. `opt_bin_search` = Some(q): first probe
    /// (1 ± q) × the rate the first run's loss predicts, and search only the bracket found.
    /// Drops and queue full are shares of frames sent (TRex's opackets).
    TrexNdr {
        pdr: f64,
        q_full: f64,
        pdr_error: f64,
        max_iterations: u32,
        trial_s: f64,
        first_trial_s: f64,
        opt_bin_search: Option<f64>,
    },
    /// Continuous throughput (VSPERF `rfc2544_continuous`, CSIT MRR): the receive rate at
    /// max load, `trials` times; the result is their mean.
    Continuous { trial_s: f64, trials: u32 },
}

/// How many final trials RFC 2544 mode runs before it gives up (VSPERF
/// `TRAFFICGEN_TREX_MAXIMUM_VERIFICATION_TRIALS`).
pub const RFC2544_MAX_VERIFICATIONS: u32 = 10;

impl Method {
    /// Zero loss, precision 0.05 % of max load (VSPERF `TRAFFICGEN_TREX_RFC2544_TPUT_THRESHOLD`);
    /// RFC 2544 asks for 60 s trials, at least for the final one.
    pub fn rfc2544_default(trial_s: f64, final_trial_s: f64) -> Method {
        Method::Rfc2544 {
            loss_ratio: 0.0,
            trial_s,
            final_trial_s,
            precision: 0.0005,
        }
    }

    /// Zero loss, 3 repeats (the value of VSPERF's TRex configuration example), precision
    /// 0.05 % of max load. VSPERF's default trial is 30 s (`TRAFFICGEN_DURATION`).
    pub fn loss_verification_default(trial_s: f64) -> Method {
        Method::BinaryLossVerification {
            loss_ratio: 0.0,
            trial_s,
            max_repeat: 3,
            precision: 0.0005,
        }
    }

    /// CSIT's NDR (loss 0) and PDR (0.5 %) goals: exceed ratio 0.5, width 0.5 %, 2 preceding
    /// targets, with durations (1 s trials, 21 s duration sum, 1200 s search cap) multiplied
    /// by `time_scale` (1.0 = CSIT).
    pub fn mlr_default(time_scale: f64) -> Method {
        let goal = |loss_ratio| MlrGoal {
            loss_ratio,
            exceed_ratio: 0.5,
            final_trial_s: time_scale,
            duration_sum_s: 21.0 * time_scale,
            width: 0.005,
            initial_trial_s: time_scale,
            preceding_targets: 2,
        };
        Method::Mlr {
            goals: vec![goal(0.0), goal(0.005)],
            search_duration_max_s: 1200.0 * time_scale,
        }
    }

    /// trex-core's defaults: pdr 0.1 %, q_full 2 %, pdr_error 1 %, 10 iterations, no
    /// optimized search; TRex runs 20 s trials.
    pub fn trex_ndr_default(trial_s: f64, first_trial_s: f64) -> Method {
        Method::TrexNdr {
            pdr: 0.001,
            q_full: 0.02,
            pdr_error: 0.01,
            max_iterations: 10,
            trial_s,
            first_trial_s,
            opt_bin_search: None,
        }
    }

    /// CSIT MRR: 10 trials (CSIT's are 1 s each).
    pub fn continuous_default(trial_s: f64) -> Method {
        Method::Continuous {
            trial_s,
            trials: 10,
        }
    }
}

/// Everything a search did and found, with its inputs echoed.
#[derive(Debug, Clone, Serialize)]
pub struct SearchReport {
    pub method: Method,
    pub min_load_pps: f64,
    pub max_load_pps: f64,
    pub goals: Vec<GoalResult>,
    pub trials: Vec<Measurement>,
    pub total_trial_s: f64,
}

/// The result for one goal (RFC 9971's Goal Result, used for every method).
#[derive(Debug, Clone, Serialize)]
pub struct GoalResult {
    /// "NDR", "PDR 0.5%", "throughput (loss 0)", "MRR", ...
    pub name: String,
    /// The goal's loss ratio (1 for MRR, which accepts any loss).
    pub loss_ratio: f64,
    /// Relevant lower bound: the result. None if even min load failed, if RFC 2544's final
    /// trials never passed, and for MRR (no bounds).
    pub lower_pps: Option<f64>,
    /// Relevant upper bound: the lowest failing load. None if max load passed.
    pub upper_pps: Option<f64>,
    /// Forwarding rate at the lower bound: the worst passing trial's rx rate there; for
    /// MLRsearch the Conditional Throughput of RFC 9971 Appendix B; for MRR the mean rx rate.
    pub forwarding_pps: Option<f64>,
    /// False when a bound is missing (max load passed, min load failed), when the bounds are
    /// wider than the method's precision, or when the method ran out of iterations or time.
    pub regular: bool,
}

impl GoalResult {
    /// The goal's result: the relevant lower bound, or for MRR (which has no bounds) the
    /// receive rate.
    pub fn result_pps(&self) -> Option<f64> {
        if self.loss_ratio >= 1.0 {
            self.forwarding_pps
        } else {
            self.lower_pps
        }
    }
}

/// Runs `method` between `min_load_pps` and `max_load_pps`, calling `progress` after every
/// trial. A measurer error aborts the search with that error, prefixed with the load.
pub fn search(
    method: &Method,
    min_load_pps: f64,
    max_load_pps: f64,
    m: &mut dyn Measurer,
    progress: &mut dyn FnMut(&Measurement),
) -> Result<SearchReport, SearchError> {
    let (min, max) = (min_load_pps, max_load_pps);
    if !(min.is_finite() && max.is_finite() && min > 0.0 && min <= max) {
        return Err(SearchError::Parameter(format!(
            "loads: need finite 0 < min_load_pps <= max_load_pps, got {min} and {max}"
        )));
    }
    let mut run = Run {
        m,
        progress,
        trials: Vec::new(),
        min: min_load_pps,
        max: max_load_pps,
    };
    let goals = match method {
        Method::Rfc2544 { .. } | Method::BinaryLossVerification { .. } => {
            vec![binary(&mut run, method)?]
        }
        Method::Mlr {
            goals,
            search_duration_max_s,
        } => mlr(&mut run, goals, *search_duration_max_s)?,
        Method::TrexNdr { .. } => vec![trex(&mut run, method)?],
        Method::Continuous { trial_s, trials } => {
            positive("trial_s", *trial_s)?;
            if *trials == 0 {
                return Err(SearchError::Parameter("trials must be at least 1".into()));
            }
            let mut sum = 0.0;
            for _ in 0..*trials {
                sum += run.trial(run.max, *trial_s)?.rx_pps;
            }
            vec![GoalResult {
                name: "MRR".into(),
                loss_ratio: 1.0,
                lower_pps: None,
                upper_pps: None,
                forwarding_pps: Some(sum / f64::from(*trials)),
                regular: true,
            }]
        }
    };
    let total_trial_s = run.trials.iter().map(|t| t.duration_s).sum();
    Ok(SearchReport {
        method: method.clone(),
        min_load_pps,
        max_load_pps,
        goals,
        trials: run.trials,
        total_trial_s,
    })
}

/// Why a search could not run to its end.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    /// A method or load parameter out of its range, or a method the search does not run.
    #[error("{0}")]
    Parameter(String),
    /// A trial the measurer could not run, with the measurer's reason.
    #[error("trial at {mpps:.6} Mpps for {secs} s: {reason}")]
    Trial {
        mpps: f64,
        secs: f64,
        reason: String,
    },
}

fn ratio(name: &str, v: f64) -> Result<(), SearchError> {
    match (0.0..1.0).contains(&v) {
        true => Ok(()),
        false => Err(SearchError::Parameter(format!(
            "{name} must be in [0, 1), got {v}"
        ))),
    }
}

fn positive(name: &str, v: f64) -> Result<(), SearchError> {
    match v.is_finite() && v > 0.0 {
        true => Ok(()),
        false => Err(SearchError::Parameter(format!(
            "{name} must be positive and finite, got {v}"
        ))),
    }
}

/// The measurer plus every trial run so far.
struct Run<'a> {
    m: &'a mut dyn Measurer,
    progress: &'a mut dyn FnMut(&Measurement),
    trials: Vec<Measurement>,
    min: f64,
    max: f64,
}

impl Run<'_> {
    fn trial(&mut self, load: f64, secs: f64) -> Result<Measurement, SearchError> {
        let at = |reason: String| SearchError::Trial {
            mpps: load / 1e6,
            secs,
            reason,
        };
        let d = Duration::try_from_secs_f64(secs).map_err(|e| at(e.to_string()))?;
        let r = self.m.measure(load, d).map_err(at)?;
        (self.progress)(&r);
        self.trials.push(r.clone());
        Ok(r)
    }

    /// One load's verdict: a trial, repeated up to `repeats` more times while it fails.
    fn passes(
        &mut self,
        load: f64,
        secs: f64,
        loss: f64,
        repeats: u32,
    ) -> Result<bool, SearchError> {
        for _ in 0..=repeats {
            if self.trial(load, secs)?.loss_ratio() <= loss {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The worst passing trial's rx rate at `load`.
    fn worst_good(&self, load: f64, good: impl Fn(&Measurement) -> bool) -> Option<f64> {
        let at = self.trials.iter().filter(|t| t.load_pps == load && good(t));
        at.map(|t| t.rx_pps).reduce(f64::min)
    }
}

fn lowest(a: Option<f64>, b: f64) -> Option<f64> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// A ratio as a percentage without float noise: 0.005 → "0.5".
fn pct(ratio: f64) -> String {
    let s = format!("{:.6}", ratio * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How one trial counts for goal `i`: pass/fail, good/bad (MLRsearch), valid/drops/q-full
/// (TRex), "-" (continuous).
fn verdict(method: &Method, i: usize, m: &Measurement) -> &'static str {
    let loss = m.loss_ratio();
    match method {
        Method::Rfc2544 { loss_ratio, .. } | Method::BinaryLossVerification { loss_ratio, .. } => {
            if loss <= *loss_ratio {
                "pass"
            } else {
                "fail"
            }
        }
        Method::Mlr { goals, .. } => match goals.get(i) {
            Some(g) if loss <= g.loss_ratio => "good",
            Some(_) => "bad",
            None => "?",
        },
        Method::TrexNdr { pdr, q_full, .. } => match trex_shares(m) {
            (_, q) if q > *q_full => "q-full",
            (d, _) if d > *pdr => "drops",
            _ => "valid",
        },
        Method::Continuous { .. } => "-",
    }
}

/// The method, one line per trial (load, duration, frames, loss ratio, verdict per goal),
/// then one line per goal result.
pub fn format_trials(r: &SearchReport) -> String {
    let mpps = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.6} Mpps", v / 1e6));
    let mut s = String::new();
    let method = serde_json::to_string(&r.method).unwrap_or_else(|e| e.to_string());
    let _ = writeln!(s, "{method}");
    let _ = writeln!(
        s,
        "loads {} .. {}",
        mpps(Some(r.min_load_pps)),
        mpps(Some(r.max_load_pps))
    );
    let widths: Vec<usize> = r.goals.iter().map(|g| g.name.len().max(6)).collect();
    let _ = write!(
        s,
        "{:>3} {:>9} {:>8} {:>11} {:>11} {:>11}",
        "#", "load Mpps", "trial s", "offered", "received", "loss ratio"
    );
    for (g, w) in r.goals.iter().zip(&widths) {
        let _ = write!(s, "  {:>w$}", g.name);
    }
    for (n, t) in r.trials.iter().enumerate() {
        let loss = match t.loss_ratio() {
            0.0 => "0".to_string(),
            l => format!("{l:.3e}"),
        };
        let _ = write!(
            s,
            "\n{:>3} {:>9.6} {:>8.2} {:>11} {:>11} {:>11}",
            n + 1,
            t.load_pps / 1e6,
            t.duration_s,
            t.offered,
            t.received,
            loss
        );
        for (i, w) in widths.iter().enumerate() {
            let _ = write!(s, "  {:>w$}", verdict(&r.method, i, t));
        }
    }
    for g in &r.goals {
        let _ = write!(
            s,
            "\n{}: lower {}, upper {}, forwarding {}, {}",
            g.name,
            mpps(g.lower_pps),
            mpps(g.upper_pps),
            mpps(g.forwarding_pps),
            if g.regular { "regular" } else { "IRREGULAR" }
        );
    }
    let _ = write!(
        s,
        "\n{} trials, {:.2} s of trial time",
        r.trials.len(),
        r.total_trial_s
    );
    s
}
