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

/// What one trial measured. Rates are measured by the generator, never inferred.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
) -> Result<SearchReport, String> {
    let (min, max) = (min_load_pps, max_load_pps);
    if !(min.is_finite() && max.is_finite() && min > 0.0 && min <= max) {
        return Err(format!(
            "loads: need finite 0 < min_load_pps <= max_load_pps, got {min} and {max}"
        ));
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
                return Err("trials must be at least 1".into());
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

fn ratio(name: &str, v: f64) -> Result<(), String> {
    match (0.0..1.0).contains(&v) {
        true => Ok(()),
        false => Err(format!("{name} must be in [0, 1), got {v}")),
    }
}

fn positive(name: &str, v: f64) -> Result<(), String> {
    match v.is_finite() && v > 0.0 {
        true => Ok(()),
        false => Err(format!("{name} must be positive and finite, got {v}")),
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
    fn trial(&mut self, load: f64, secs: f64) -> Result<Measurement, String> {
        let at = |e| format!("trial at {:.6} Mpps for {secs} s: {e}", load / 1e6);
        let d = Duration::try_from_secs_f64(secs).map_err(|e| at(e.to_string()))?;
        let r = self.m.measure(load, d).map_err(at)?;
        (self.progress)(&r);
        self.trials.push(r.clone());
        Ok(r)
    }

    /// One load's verdict: a trial, repeated up to `repeats` more times while it fails.
    fn passes(&mut self, load: f64, secs: f64, loss: f64, repeats: u32) -> Result<bool, String> {
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

/// RFC 2544 / loss verification: VSPERF's `run_trials` passes, then final trials.
fn binary(run: &mut Run<'_>, method: &Method) -> Result<GoalResult, String> {
    let (loss, trial_s, repeats, precision, final_s) = match *method {
        Method::Rfc2544 {
            loss_ratio,
            trial_s,
            final_trial_s,
            precision,
        } => (loss_ratio, trial_s, 0, precision, final_trial_s),
        Method::BinaryLossVerification {
            loss_ratio,
            trial_s,
            max_repeat,
            precision,
        } => (loss_ratio, trial_s, max_repeat, precision, 0.0),
        _ => return Err("binary: not a binary search method".into()),
    };
    ratio("loss_ratio", loss)?;
    positive("trial_s", trial_s)?;
    positive("precision", precision)?;
    if final_s != 0.0 {
        positive("final_trial_s (0 = none)", final_s)?;
    }
    let step = precision * run.max;
    let mut upper = None;
    let mut top = run.max;
    let mut verified = true;
    let mut failures = 0;
    let lower = loop {
        let found = bisect(run, top, step, loss, trial_s, repeats, &mut upper)?;
        let Some(l) = found.filter(|_| final_s > 0.0) else {
            break found;
        };
        if run.trial(l, final_s)?.loss_ratio() <= loss {
            break found;
        }
        upper = lowest(upper, l);
        failures += 1;
        if failures == RFC2544_MAX_VERIFICATIONS || l <= run.min {
            verified = false;
            break None;
        }
        top = (l - step).max(run.min);
    };
    let name = match loss {
        0.0 => "throughput (loss 0)".to_string(),
        _ => format!("throughput (loss {}%)", pct(loss)),
    };
    Ok(GoalResult {
        name,
        loss_ratio: loss,
        lower_pps: lower,
        upper_pps: upper,
        forwarding_pps: lower.and_then(|l| run.worst_good(l, |t| t.loss_ratio() <= loss)),
        regular: verified && lower.is_some() && upper.is_some(),
    })
}

/// A trial at `top`, then bisection of [min, top] until at most `step` wide; the highest
/// passing load, after a trial at min load if nothing above it passed.
fn bisect(
    run: &mut Run<'_>,
    top: f64,
    step: f64,
    loss: f64,
    secs: f64,
    repeats: u32,
    upper: &mut Option<f64>,
) -> Result<Option<f64>, String> {
    if run.passes(top, secs, loss, repeats)? {
        return Ok(Some(top));
    }
    *upper = lowest(*upper, top);
    let (mut lo, mut hi, mut best) = (run.min, top, None);
    while hi - lo > step {
        let mid = (lo + hi) / 2.0;
        if mid <= lo || mid >= hi {
            break; // precision below float resolution
        }
        if run.passes(mid, secs, loss, repeats)? {
            (lo, best) = (mid, Some(mid));
        } else {
            hi = mid;
            *upper = lowest(*upper, mid);
        }
    }
    if best.is_none() && top > run.min {
        if run.passes(run.min, secs, loss, repeats)? {
            best = Some(run.min);
        } else {
            *upper = Some(run.min);
        }
    }
    Ok(best)
}

/// TRex's drop and queue-full shares of the frames sent (`perf_run`; negative drops are 0).
fn trex_shares(m: &Measurement) -> (f64, f64) {
    if m.sent == 0 {
        return (1.0, 1.0);
    }
    let sent = m.sent as f64;
    (
        m.sent.saturating_sub(m.received) as f64 / sent,
        m.shortfall as f64 / sent,
    )
}

/// ndr_bench.py `find_ndr`, `perf_run_interval` and `optimized_binary_search`, with rates as
/// fractions of the max rate; a rate below min load is run at min load.
fn trex(run: &mut Run<'_>, method: &Method) -> Result<GoalResult, String> {
    let &Method::TrexNdr {
        pdr,
        q_full,
        pdr_error,
        max_iterations,
        trial_s,
        first_trial_s,
        opt_bin_search,
    } = method
    else {
        return Err("trex: not a TRex NDR method".into());
    };
    ratio("pdr", pdr)?;
    ratio("q_full", q_full)?;
    positive("pdr_error", pdr_error)?;
    positive("trial_s", trial_s)?;
    positive("first_trial_s", first_trial_s)?;
    opt_bin_search.map_or(Ok(()), |q| ratio("opt_bin_search", q))?;
    let valid = |m: &Measurement| {
        let (drop, qf) = trex_shares(m);
        drop <= pdr && qf <= q_full
    };
    let first = run.trial(run.max, first_trial_s)?;
    let max_rate = match first.tx_pps {
        r if r.is_finite() && r > 0.0 => r.min(run.max),
        _ => run.max,
    };
    let (min, max) = (run.min, run.max);
    let load = |r: f64| (r * max_rate).clamp(min, max);
    let mut best = if valid(&first) { 1.0 } else { 0.0 };
    let mut best_load = (best > 0.0).then_some(max);
    let mut exhausted = false;
    // Runs one trial at rate r and keeps it if it is the best valid one (`update_opt_stats`).
    let mut probe = |run: &mut Run<'_>, best: &mut f64, r: f64| -> Result<Measurement, String> {
        let m = run.trial(load(r), trial_s)?;
        if valid(&m) && r > *best {
            (*best, best_load) = (r, Some(load(r)));
        }
        Ok(m)
    };
    let (drop, qf) = trex_shares(&first);
    let stat = |m: &Measurement, use_drop: bool| {
        let (d, q) = trex_shares(m);
        if use_drop { d } else { q }
    };
    let bracket = match (drop > pdr, qf >= q_full, opt_bin_search) {
        (false, false, _) => None,
        (_, _, None) => Some((1.0, 0.0)),
        (use_drop, _, Some(q)) => {
            let (lost, allowed) = if use_drop { (drop, pdr) } else { (qf, q_full) };
            let assumed = 1.0 - lost;
            let up = (assumed * (1.0 + q)).min(1.0);
            // Rate.is_close with rel_tol 5 % (its 1 Mbit abs_tol has no pps equivalent).
            let close = (1.0 - up).abs() <= 0.05 * up.max(1.0);
            let mut bracket = None;
            if !close && stat(&probe(run, &mut best, up)?, use_drop) <= allowed {
                bracket = Some((1.0, up));
            }
            if bracket.is_none() {
                let down = assumed * (1.0 - q);
                bracket = match stat(&probe(run, &mut best, down)?, use_drop) <= allowed {
                    true => Some((up, down)),
                    false => Some((down, 0.0)),
                };
            }
            bracket
        }
    };
    if let Some((mut high, mut low)) = bracket {
        let mut iteration = 0;
        while iteration <= max_iterations {
            let r = (high + low) / 2.0;
            let before = best;
            let m = probe(run, &mut best, r)?;
            let near = (r - before).abs() <= pdr_error;
            if valid(&m) {
                if r <= before || near {
                    break;
                }
                low = r;
            } else if near {
                break;
            } else {
                high = r;
            }
            iteration += 1;
            if iteration == max_iterations {
                exhausted = true;
                break;
            }
        }
    }
    let upper = run
        .trials
        .iter()
        .filter(|t| !valid(t) && best_load.is_none_or(|l| t.load_pps > l))
        .map(|t| t.load_pps)
        .reduce(f64::min);
    Ok(GoalResult {
        name: format!("NDR (TRex, pdr {}%)", pct(pdr)),
        loss_ratio: pdr,
        lower_pps: best_load,
        upper_pps: upper,
        forwarding_pps: best_load.and_then(|l| run.worst_good(l, valid)),
        regular: !exhausted && best_load.is_some() && upper.is_some(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    Lower,
    Upper,
    Undecided,
}

/// Relative slack for comparing sums of float durations.
const EPS: f64 = 1e-9;

/// CSIT's `TargetScaling`: the goal's coarser targets, coarsest first, then the goal.
fn targets(g: &MlrGoal) -> Vec<MlrGoal> {
    let n = g.preceding_targets;
    let mult = (g.initial_trial_s / g.duration_sum_s).powf(1.0 / f64::from(n.max(1)));
    let coarse = |i: u32| {
        let sum = match i == n {
            true => g.initial_trial_s,
            false => g.duration_sum_s * mult.powf(f64::from(i)),
        };
        MlrGoal {
            width: g.width * 2f64.powf(f64::from(i)),
            duration_sum_s: sum,
            final_trial_s: g.final_trial_s.min(sum),
            ..g.clone()
        }
    };
    (1..=n).rev().map(coarse).chain([g.clone()]).collect()
}

fn is_long(t: &MlrGoal, m: &Measurement) -> bool {
    m.duration_s >= t.final_trial_s * (1.0 - EPS)
}

/// RFC 9971 Appendix A over every trial at `load`.
fn classify(t: &MlrGoal, trials: &[Measurement], load: f64) -> Class {
    let (mut good_long, mut bad_long, mut good_short, mut bad_short) = (0.0, 0.0, 0.0, 0.0);
    for m in trials.iter().filter(|m| m.load_pps == load) {
        let sum = match (is_long(t, m), m.loss_ratio() <= t.loss_ratio) {
            (true, true) => &mut good_long,
            (true, false) => &mut bad_long,
            (false, true) => &mut good_short,
            (false, false) => &mut bad_short,
        };
        *sum += m.duration_s;
    }
    let e = t.exceed_ratio;
    let balancing = good_short * e / (1.0 - e);
    let effective_bad = bad_long + (bad_short - balancing).max(0.0);
    let whole = (good_long + effective_bad).max(t.duration_sum_s);
    let quantile = whole * e + EPS * whole;
    match (effective_bad <= quantile, whole - good_long <= quantile) {
        (true, true) => Class::Lower,
        (false, false) => Class::Upper,
        _ => Class::Undecided,
    }
}

/// Every load tried, classified for `t` (ascending), and the Relevant Lower and Upper Bound
/// (RFC 9971; without an upper bound, a lower bound is max load: irregular).
fn bounds(t: &MlrGoal, trials: &[Measurement]) -> (Vec<(f64, Class)>, Option<f64>, Option<f64>) {
    let mut loads: Vec<f64> = trials.iter().map(|t| t.load_pps).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    let classes: Vec<_> = loads.iter().map(|&l| (l, classify(t, trials, l))).collect();
    let ub = classes.iter().find(|c| c.1 == Class::Upper).map(|c| c.0);
    let below = |c: &&(f64, Class)| c.1 == Class::Lower && ub.is_none_or(|u| c.0 < u);
    let lb = classes.iter().filter(below).map(|c| c.0).next_back();
    (classes, lb, ub)
}

fn within_width(t: &MlrGoal, lb: Option<f64>, ub: Option<f64>) -> bool {
    matches!((lb, ub), (Some(l), Some(u)) if u - l <= t.width * u)
}

/// RFC 9971 Appendix B: load × (1 − the exceed-ratio quantile of long trials' loss ratios).
fn conditional_throughput(t: &MlrGoal, trials: &[Measurement], load: f64) -> f64 {
    let at = |m: &&Measurement| m.load_pps == load && is_long(t, m);
    let mut long: Vec<&Measurement> = trials.iter().filter(at).collect();
    long.sort_by(|a, b| a.loss_ratio().total_cmp(&b.loss_ratio()));
    let all = t
        .duration_sum_s
        .max(long.iter().map(|m| m.duration_s).sum());
    let mut remaining = all * (1.0 - t.exceed_ratio);
    let mut quantile = 1.0;
    for (i, m) in long.iter().enumerate() {
        if i > 0 && remaining <= EPS * all {
            break;
        }
        quantile = m.loss_ratio();
        remaining -= m.duration_s;
    }
    if remaining > EPS * all {
        quantile = 1.0;
    }
    load * (1.0 - quantile)
}

/// One goal's way through its targets.
struct Chain {
    targets: Vec<MlrGoal>,
    at: usize,
    /// The previous target's relevant bounds: where to look first.
    hint: (Option<f64>, Option<f64>),
}

impl Chain {
    /// The (load, trial duration) this goal wants next; None once the goal is reached:
    /// bounds within width, max load a lower bound or min load an upper bound.
    fn nominate(&mut self, trials: &[Measurement], min: f64, max: f64) -> Option<(f64, f64)> {
        loop {
            let t = &self.targets[self.at];
            let (classes, lb, ub) = bounds(t, trials);
            if within_width(t, lb, ub) || lb == Some(max) || ub == Some(min) {
                if self.at + 1 == self.targets.len() {
                    return None;
                }
                (self.at, self.hint) = (self.at + 1, (lb, ub));
                continue;
            }
            // Work inside the tightest bracket known; undecided loads in it come first.
            let lo = [lb, self.hint.0.filter(|&h| ub.is_none_or(|u| h < u))];
            let lo = lo.into_iter().flatten().reduce(f64::max);
            let hi = [ub, self.hint.1.filter(|&h| lo.is_none_or(|l| h > l))];
            let hi = hi.into_iter().flatten().reduce(f64::min);
            let inside = |l: f64| lo.is_none_or(|x| l >= x) && hi.is_none_or(|x| l <= x);
            let undecided = classes
                .iter()
                .find(|c| c.1 == Class::Undecided && inside(c.0));
            let load = match (undecided, lo, hi) {
                (Some(&(l, _)), _, _) => l,
                (None, Some(l), Some(h)) => (l + h) / 2.0,
                (None, _, None) => max,
                (None, None, Some(h)) if h - min <= t.width * h => min,
                (None, None, Some(h)) => (min + h) / 2.0,
            };
            return Some((load, t.final_trial_s));
        }
    }
}

fn mlr(run: &mut Run<'_>, goals: &[MlrGoal], max_s: f64) -> Result<Vec<GoalResult>, String> {
    if goals.is_empty() {
        return Err("goals: MLRsearch needs at least one goal".into());
    }
    for g in goals {
        ratio("goal loss_ratio", g.loss_ratio)?;
        ratio("goal exceed_ratio", g.exceed_ratio)?;
        positive("goal final_trial_s", g.final_trial_s)?;
        positive("goal duration_sum_s", g.duration_sum_s)?;
        positive("goal width", g.width)?;
        positive("goal initial_trial_s", g.initial_trial_s)?;
    }
    positive("search_duration_max_s", max_s)?;
    // CSIT starts with max load, then the forwarding rate seen there (FRMOL).
    let first_s = goals.iter().map(|g| g.initial_trial_s).reduce(f64::min);
    let first_s = first_s.unwrap_or(1.0);
    let frmol = run.trial(run.max, first_s)?.rx_pps;
    if frmol < run.max {
        run.trial(frmol.max(run.min), first_s)?;
    }
    let mut chains: Vec<Chain> = goals
        .iter()
        .map(|g| Chain {
            targets: targets(g),
            at: 0,
            hint: (None, None),
        })
        .collect();
    let (min, max) = (run.min, run.max);
    let mut in_time = true;
    // Smaller load candidates first, as RFC 9971's introduction says; then shorter trials.
    while let Some((load, secs)) = chains
        .iter_mut()
        .filter_map(|c| c.nominate(&run.trials, min, max))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)))
    {
        if run.trials.iter().map(|t| t.duration_s).sum::<f64>() >= max_s {
            in_time = false;
            break;
        }
        run.trial(load, secs)?;
    }
    let results = goals.iter().map(|g| {
        let (_, lb, ub) = bounds(g, &run.trials);
        GoalResult {
            name: g.name(),
            loss_ratio: g.loss_ratio,
            lower_pps: lb,
            upper_pps: ub,
            forwarding_pps: lb.map(|l| conditional_throughput(g, &run.trials, l)),
            regular: in_time && within_width(g, lb, ub),
        }
    });
    Ok(results.collect())
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

pub mod model {
    //! A deterministic device under test, for the search tests and demos.

    use std::time::Duration;

    use super::{Measurement, Measurer};

    /// Forwards up to `capacity_pps` and loses every frame above it; with probability
    /// `hiccup_prob` per trial it also loses `hiccup_loss` of what it forwarded (at least one
    /// frame), as a noisy software DUT does; its generator cannot send faster than
    /// `gen_max_pps` (the rest is shortfall). Same seed, same trials: same results.
    #[derive(Debug, Clone)]
    pub struct ModelDut {
        pub capacity_pps: f64,
        pub hiccup_prob: f64,
        pub hiccup_loss: f64,
        pub gen_max_pps: f64,
        pub seed: u64,
        rng: u64,
    }

    impl ModelDut {
        /// A clean DUT: no hiccups, an unlimited generator.
        pub fn new(capacity_pps: f64, seed: u64) -> ModelDut {
            ModelDut {
                capacity_pps,
                hiccup_prob: 0.0,
                hiccup_loss: 0.0,
                gen_max_pps: f64::INFINITY,
                seed,
                rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            }
        }

        pub fn with_hiccups(self, prob: f64, loss: f64) -> ModelDut {
            ModelDut {
                hiccup_prob: prob,
                hiccup_loss: loss,
                ..self
            }
        }

        pub fn with_generator_max(self, pps: f64) -> ModelDut {
            ModelDut {
                gen_max_pps: pps,
                ..self
            }
        }

        /// xorshift64, uniform in [0, 1).
        fn uniform(&mut self) -> f64 {
            let mut x = self.rng;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.rng = x;
            (x >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    impl Measurer for ModelDut {
        fn measure(&mut self, load_pps: f64, duration: Duration) -> Result<Measurement, String> {
            let secs = duration.as_secs_f64();
            if !(load_pps.is_finite() && load_pps >= 0.0 && secs > 0.0) {
                return Err(format!("model: cannot offer {load_pps} pps for {secs} s"));
            }
            let frames = |pps: f64| (pps * secs).round() as u64;
            let offered = frames(load_pps);
            let sent = frames(load_pps.min(self.gen_max_pps)).min(offered);
            let forwarded = sent.min(frames(self.capacity_pps));
            let lost = match self.uniform() < self.hiccup_prob {
                true => ((forwarded as f64 * self.hiccup_loss).ceil() as u64).max(1),
                false => 0,
            };
            let received = forwarded - lost.min(forwarded);
            Ok(Measurement {
                load_pps,
                duration_s: secs,
                offered,
                sent,
                received,
                shortfall: offered - sent,
                tx_pps: sent as f64 / secs,
                rx_pps: received as f64 / secs,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::model::ModelDut;
    use super::*;

    const CAP: f64 = 1e6;
    const MIN: f64 = 1e4;
    const MAX: f64 = 2e6;

    fn run(method: &Method, dut: &mut ModelDut, min: f64, max: f64) -> SearchReport {
        search(method, min, max, dut, &mut |_| {}).expect("search")
    }

    fn all_methods() -> Vec<Method> {
        vec![
            Method::rfc2544_default(1.0, 10.0),
            Method::loss_verification_default(1.0),
            Method::mlr_default(0.1),
            Method::trex_ndr_default(1.0, 1.0),
            Method::continuous_default(1.0),
        ]
    }

    #[test]
    fn loss_ratio_counts_unsent_and_surplus_frames() {
        let m = |offered, received| Measurement {
            load_pps: 1.0,
            duration_s: 1.0,
            offered,
            sent: 90,
            received,
            shortfall: 10,
            tx_pps: 90.0,
            rx_pps: received as f64,
        };
        assert_eq!(m(100, 90).loss_ratio(), 0.1); // 10 never sent
        assert_eq!(m(100, 110).loss_ratio(), 0.1); // 10 too many
        assert_eq!(m(100, 100).loss_ratio(), 0.0);
        assert_eq!(m(100, 500).loss_ratio(), 1.0);
        assert_eq!(m(100, 90).shortfall_ratio(), 0.1);
    }

    #[test]
    fn every_method_finds_the_capacity_of_a_clean_model() {
        let mut methods = all_methods();
        let mut opt = Method::trex_ndr_default(1.0, 1.0);
        if let Method::TrexNdr { opt_bin_search, .. } = &mut opt {
            *opt_bin_search = Some(0.05);
        }
        methods.push(opt);
        for method in methods {
            let r = run(&method, &mut ModelDut::new(CAP, 1), MIN, MAX);
            let g = &r.goals[0];
            let (lo, hi) = (
                g.lower_pps.unwrap_or(0.0),
                g.upper_pps.unwrap_or(f64::INFINITY),
            );
            match &method {
                Method::Rfc2544 { precision, .. }
                | Method::BinaryLossVerification { precision, .. } => {
                    assert!(
                        lo <= CAP && CAP < hi && hi - lo <= precision * MAX,
                        "{method:?}: {g:?}"
                    );
                    assert!((g.forwarding_pps.unwrap_or(0.0) - lo).abs() <= 0.5, "{g:?}");
                }
                Method::Mlr { goals, .. } => {
                    for (g, goal) in r.goals.iter().zip(goals) {
                        // Lossless up to CAP; loss (L − CAP) / L ≤ ratio up to CAP / (1 − ratio).
                        let edge = CAP / (1.0 - goal.loss_ratio);
                        let (lo, hi) = (
                            g.lower_pps.unwrap_or(0.0),
                            g.upper_pps.unwrap_or(f64::INFINITY),
                        );
                        assert!(g.regular && lo <= edge && edge < hi, "{g:?}");
                        assert!(hi - lo <= goal.width * hi, "{g:?}");
                    }
                    assert_eq!(r.goals[0].forwarding_pps, r.goals[0].lower_pps);
                }
                Method::TrexNdr { pdr, pdr_error, .. } => {
                    let edge = CAP / (1.0 - pdr);
                    assert!(g.regular && lo <= edge && edge < hi, "{method:?}: {g:?}");
                    assert!(hi - lo <= pdr_error * MAX + 1.0, "{method:?}: {g:?}");
                }
                Method::Continuous { trials, .. } => {
                    assert_eq!(r.trials.len(), *trials as usize);
                    assert_eq!(g.forwarding_pps, Some(CAP));
                }
            }
        }
    }

    /// Share of 40 seeds whose result is more than 1 % below the capacity.
    fn misses(method: &Method, goal: usize) -> usize {
        (1..=40)
            .filter(|&seed| {
                let mut dut = ModelDut::new(CAP, seed).with_hiccups(0.2, 1e-4);
                let r = run(method, &mut dut, MIN, MAX);
                r.goals[goal].lower_pps.unwrap_or(0.0) < 0.99 * CAP
            })
            .count()
    }

    #[test]
    fn loss_verification_and_exceed_ratio_resist_hiccups_that_fool_rfc2544() {
        // One trial in five loses 0.01 % of its frames, at any load.
        let rfc = misses(&Method::rfc2544_default(1.0, 0.0), 0);
        let blv = misses(&Method::loss_verification_default(1.0), 0);
        let mlr = misses(&Method::mlr_default(0.1), 0);
        let Method::Mlr { mut goals, .. } = Method::mlr_default(0.1) else {
            unreachable!()
        };
        goals.truncate(1);
        goals[0].exceed_ratio = 0.0;
        let strict = Method::Mlr {
            goals,
            search_duration_max_s: 120.0,
        };
        let mlr_strict = misses(&strict, 0);
        assert!(rfc >= 20, "RFC 2544 missed in {rfc} of 40");
        assert!(blv <= 1, "loss verification missed in {blv} of 40");
        assert_eq!(mlr, 0, "MLRsearch missed in {mlr} of 40");
        assert!(
            mlr_strict >= 20,
            "MLRsearch without exceed ratio missed in {mlr_strict} of 40"
        );
    }

    #[test]
    fn max_load_passing_is_irregular_with_no_upper_bound() {
        for method in all_methods()
            .iter()
            .filter(|m| !matches!(m, Method::Continuous { .. }))
        {
            let r = run(method, &mut ModelDut::new(3e6, 1), MIN, MAX);
            for g in &r.goals {
                assert_eq!(
                    (g.lower_pps, g.upper_pps, g.regular),
                    (Some(MAX), None, false),
                    "{g:?}"
                );
            }
        }
    }

    #[test]
    fn min_load_failing_has_no_lower_bound() {
        for method in all_methods()
            .iter()
            .filter(|m| !matches!(m, Method::Continuous { .. }))
        {
            let r = run(method, &mut ModelDut::new(1e5, 1), 2e5, MAX);
            for g in &r.goals {
                assert!(
                    g.lower_pps.is_none() && g.forwarding_pps.is_none() && !g.regular,
                    "{g:?}"
                );
                assert_eq!(g.upper_pps, Some(2e5), "{method:?}");
            }
        }
    }

    #[test]
    fn generator_shortfall_counts_as_loss_and_as_trex_queue_full() {
        let mut dut = ModelDut::new(1.5e6, 1).with_generator_max(1.2e6);
        let r = run(&Method::rfc2544_default(1.0, 0.0), &mut dut, MIN, MAX);
        let lo = r.goals[0].lower_pps.unwrap_or(0.0);
        assert!(lo <= 1.2e6 && lo > 1.2e6 - 0.0005 * MAX, "{:?}", r.goals[0]);
        assert_eq!(r.trials[0].shortfall, 800_000);
        let r = run(&Method::trex_ndr_default(1.0, 1.0), &mut dut, MIN, MAX);
        assert_eq!(verdict(&r.method, 0, &r.trials[0]), "q-full");
        let lo = r.goals[0].lower_pps.unwrap_or(0.0);
        assert!((0.99 * 1.2e6..=1.2e6).contains(&lo), "{:?}", r.goals[0]);
    }

    struct FailsAt(ModelDut, usize);

    impl Measurer for FailsAt {
        fn measure(&mut self, load: f64, d: Duration) -> Result<Measurement, String> {
            self.1 -= 1;
            match self.1 {
                0 => Err("generator lost its link".into()),
                _ => self.0.measure(load, d),
            }
        }
    }

    #[test]
    fn a_measurer_error_aborts_the_search_naming_the_load() {
        for method in all_methods() {
            let mut m = FailsAt(ModelDut::new(CAP, 1), 3);
            let mut seen = 0;
            let e = search(&method, MIN, MAX, &mut m, &mut |_| seen += 1).unwrap_err();
            assert!(
                e.starts_with("trial at ") && e.contains(" Mpps for "),
                "{e}"
            );
            assert!(e.ends_with(": generator lost its link"), "{e}");
            assert_eq!(seen, 2);
        }
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let refuse = |m: Method, min, max| {
            search(&m, min, max, &mut ModelDut::new(CAP, 1), &mut |_| {}).unwrap_err()
        };
        let rfc = Method::rfc2544_default(1.0, 0.0);
        assert!(refuse(rfc, MAX, MIN).contains("min_load_pps <= max_load_pps"));
        let blv = Method::BinaryLossVerification {
            loss_ratio: 1.5,
            trial_s: 1.0,
            max_repeat: 0,
            precision: 0.1,
        };
        assert_eq!(
            refuse(blv, MIN, MAX),
            "loss_ratio must be in [0, 1), got 1.5"
        );
        let mlr = Method::Mlr {
            goals: vec![],
            search_duration_max_s: 1.0,
        };
        assert!(refuse(mlr, MIN, MAX).starts_with("goals: "));
        let mrr = Method::Continuous {
            trial_s: f64::NAN,
            trials: 1,
        };
        assert!(refuse(mrr, MIN, MAX).starts_with("trial_s must be positive"));
    }

    #[test]
    fn trial_tables() {
        let clean = ModelDut::new(CAP, 1);
        let noisy = |seed| ModelDut::new(CAP, seed).with_hiccups(0.2, 1e-4);
        let mrr = Method::Continuous {
            trial_s: 1.0,
            trials: 3,
        };
        let cases = [
            ("rfc2544", Method::rfc2544_default(1.0, 10.0), clean.clone()),
            // A hiccup in the final trial sends the search below the rate it found.
            (
                "rfc2544_final_fails",
                Method::rfc2544_default(1.0, 10.0),
                noisy(84),
            ),
            (
                "loss_verification",
                Method::loss_verification_default(1.0),
                noisy(5),
            ),
            ("mlr", Method::mlr_default(0.1), clean.clone()),
            (
                "trex_ndr",
                Method::trex_ndr_default(1.0, 1.0),
                clean.clone(),
            ),
            ("continuous", mrr, noisy(5)),
        ];
        for (name, method, mut dut) in cases {
            insta::assert_snapshot!(name, format_trials(&run(&method, &mut dut, MIN, MAX)));
        }
    }
}
