//! MLRsearch (RFC 9971): several goals at once, each with its loss ratio, exceed ratio and
//! width, trial durations growing from short to final.

use super::{GoalResult, Measurement, MlrGoal, Run, SearchError, positive, ratio};

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

pub(super) fn mlr(
    run: &mut Run<'_>,
    goals: &[MlrGoal],
    max_s: f64,
) -> Result<Vec<GoalResult>, SearchError> {
    if goals.is_empty() {
        return Err(SearchError::Parameter(
            "goals: MLRsearch needs at least one goal".into(),
        ));
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
