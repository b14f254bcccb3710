//! RFC 2544 §26.1 binary search and its loss-verification variant.

use super::{
    GoalResult, Method, RFC2544_MAX_VERIFICATIONS, Run, SearchError, lowest, pct, positive, ratio,
};

/// RFC 2544 / loss verification: VSPERF's `run_trials` passes, then final trials.
pub(super) fn binary(run: &mut Run<'_>, method: &Method) -> Result<GoalResult, SearchError> {
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
        _ => {
            return Err(SearchError::Parameter(
                "binary: not a binary search method".into(),
            ));
        }
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
) -> Result<Option<f64>, SearchError> {
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
