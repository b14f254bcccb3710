//! TRex's NDR bench (trex-core `ndr_bench.py`): a binary search that weighs each trial's
//! loss and latency shares.

use super::{GoalResult, Measurement, Method, Run, SearchError, pct, positive, ratio};

/// TRex's drop and queue-full shares of the frames sent (`perf_run`; negative drops are 0).
pub(super) fn trex_shares(m: &Measurement) -> (f64, f64) {
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
pub(super) fn trex(run: &mut Run<'_>, method: &Method) -> Result<GoalResult, SearchError> {
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
        return Err(SearchError::Parameter("trex: not a TRex NDR method".into()));
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
    let mut probe =
        |run: &mut Run<'_>, best: &mut f64, r: f64| -> Result<Measurement, SearchError> {
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
