//! From searches to rows: the median over repetitions per (DUT, size), near placements
//! first, and ratios between DUTs paired within one repetition.

use serde::Serialize;

use super::outcome::Outcome;
use crate::placement::Placement;
use crate::search::SearchReport;
use crate::{Shape, Subject, median_min_max};
use trafgen::stats::Latency;

/// One goal of a search row: the median over repetitions of the goal's result.
#[derive(Debug, Clone, Serialize)]
pub struct GoalRow {
    pub goal: String,
    pub loss_ratio: f64,
    /// Median, min and max of the relevant lower bound (0 where even the minimum load failed).
    pub mpps: f64,
    pub mpps_min: f64,
    pub mpps_max: f64,
    pub gbps_l2: f64,
    pub gbps_l1: f64,
    /// Node scenarios: the L1 rate on the uplink, where a multinet frame carries 50 bytes of
    /// VXLAN: (S + 50 + 20) × 8 × pps (singlenet: S + 20); and, for multinet, the seeds' own
    /// formula, L2 × (1 + 56/S) = (S + 56) × 8 × pps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbps_l1_uplink: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbps_seed_formula: Option<f64>,
    /// Median measured receive rate at the lower bound.
    pub forwarding_mpps: f64,
    /// Median loss ratio of the trials at the result (the least of each search's trials at
    /// that load: the one that passed; for MRR, the mean of its trials).
    pub measured_loss: f64,
    /// Searches whose result for this goal was irregular (maximum load still passed, or the
    /// minimum already failed).
    pub irregular: usize,
}

/// The median of the searches of one (DUT, size).
#[derive(Debug, Clone, Serialize)]
pub struct SearchRow {
    pub dut: Subject,
    pub size: usize,
    pub goals: Vec<GoalRow>,
    pub mrr_mpps: f64,
    pub mrr_min: f64,
    pub mrr_max: f64,
    /// Median of each percentile at each latency fraction.
    pub latency: Vec<(f64, Latency)>,
    /// Searches behind the medians, and the placement they share (`None`: all placements).
    pub searches: usize,
    pub basis: Option<Placement>,
    /// Searches of this (DUT, size) in all, failed ones included.
    pub searches_run: usize,
    /// Trials (of the searches behind the medians) whose counts the DUT's counters contradict.
    pub disagreeing: usize,
    /// Trials (same searches) whose generator fell behind its schedule.
    pub generator_short: usize,
    /// Trials (same searches) in which frames came back that the generator had not sent.
    pub foreign: usize,
    /// Trials (same searches) run again because the host disturbed them.
    pub redone: usize,
    /// This DUT's first-goal result over the reference DUT's (the last one with as many
    /// workers) in the same repetition, searches run back to back: median, min, max over the
    /// repetitions where both succeeded in one placement ([`paired_ratio`]). Pairs cancel the
    /// drift that a ratio of medians keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_ratio: Option<PairedRatio>,
    /// The same pairing of the flat-out rates (MRR) over the reference DUT's
    /// ([`paired_mrr_ratio`]): a zero-loss result also measures how a DUT rides out the
    /// host's stalls, which scatter more than what either DUT can forward.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_mrr: Option<PairedRatio>,
    /// A multinet row (whose `paired_ratio` is over the same DUT in singlenet): its result
    /// over the last other DUT's in multinet with as many workers, paired the same way
    /// ([`peer_for`]): veclane multinet over VPP multinet, say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_ratio: Option<PairedRatio>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ns: Vec<(String, f64)>,
    /// Flat out, within 10% of (or above) the generator's ceiling, `--dut none`'s flat-out
    /// rate at this size with as many workers: the generator, not this DUT, set the pace.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub generator_bound: bool,
}

pub(super) fn median(v: &[f64]) -> f64 {
    median_min_max(v).0
}

/// One row per (size, DUT) with at least one successful search. The medians come from the
/// searches of one placement: near when there are any (the state memif is meant to run in,
/// and the one the harness waits for), else mid, else far; from all of them only when every
/// search was cut by a flip (mixed). A median over placements would be no figure at all: one
/// run's testpmd at 64 B had two near searches at 34-35 Mpps and three others at 12-13, and
/// their median said 13.
pub fn rows(outcomes: &[Outcome], sizes: &[usize], duts: &[Subject]) -> Vec<SearchRow> {
    let mut out = Vec::new();
    for &size in sizes {
        for &dut in duts {
            let all: Vec<&Outcome> = outcomes
                .iter()
                .filter(|o| o.dut == dut && o.size == size)
                .collect();
            let ok: Vec<&Outcome> = all
                .iter()
                .copied()
                .filter(|o| o.error.is_none() && o.search.is_some())
                .collect();
            if ok.is_empty() {
                continue;
            }
            let basis = Placement::preferred(|p| ok.iter().any(|o| o.placement == p));
            let used: Vec<&Outcome> = ok
                .iter()
                .copied()
                .filter(|o| basis.is_none_or(|b| o.placement == b))
                .collect();
            let reports: Vec<&SearchReport> =
                used.iter().filter_map(|o| o.search.as_ref()).collect();
            let goals = goal_rows(&reports, dut, size);
            let (mrr, mrr_lo, mrr_hi) =
                median_min_max(&used.iter().map(|o| o.mrr_pps / 1e6).collect::<Vec<_>>());
            let latency = median_latency(&used);
            let node_ns = median_node_ns(&used);
            out.push(SearchRow {
                dut,
                size,
                goals,
                mrr_mpps: mrr,
                mrr_min: mrr_lo,
                mrr_max: mrr_hi,
                latency,
                searches: used.len(),
                basis,
                searches_run: all.len(),
                disagreeing: used.iter().map(|o| o.disagreeing()).sum(),
                generator_short: used
                    .iter()
                    .flat_map(|o| &o.trials)
                    .filter(|t| t.m.shortfall > 0 && t.redone.is_none())
                    .count(),
                foreign: used
                    .iter()
                    .flat_map(|o| &o.trials)
                    .filter(|t| t.foreign > 0 && t.redone.is_none())
                    .count(),
                redone: used
                    .iter()
                    .flat_map(|o| &o.trials)
                    .filter(|t| t.redone.is_some())
                    .count(),
                paired_ratio: reference_for(duts, dut)
                    .filter(|r| *r != dut)
                    .and_then(|r| paired_ratio(outcomes, size, dut, r)),
                paired_mrr: reference_for(duts, dut)
                    .filter(|r| *r != dut)
                    .and_then(|r| paired_mrr_ratio(outcomes, size, dut, r)),
                peer_ratio: peer_for(duts, dut).and_then(|r| paired_ratio(outcomes, size, dut, r)),
                node_ns,
                generator_bound: false,
            });
        }
    }
    mark_generator_bound(&mut out);
    out
}

/// Each goal's row over the searches `reports` of `dut` at `size`: median, min and max of
/// the results, the loss measured at them, the rates in Gbps.
fn goal_rows(reports: &[&SearchReport], dut: Subject, size: usize) -> Vec<GoalRow> {
    let mut goals = Vec::new();
    let bytes = crate::trial::frame_bytes(size);
    if let Some(first) = reports.first() {
        for (i, g) in first.goals.iter().enumerate() {
            // MRR has no bounds: its result is the receive rate.
            let vals: Vec<f64> = reports
                .iter()
                .filter_map(|r| r.goals.get(i))
                .map(|g| g.result_pps().unwrap_or(0.0) / 1e6)
                .collect();
            let fwd: Vec<f64> = reports
                .iter()
                .filter_map(|r| r.goals.get(i))
                .filter_map(|g| g.forwarding_pps)
                .map(|p| p / 1e6)
                .collect();
            let (m, lo, hi) = median_min_max(&vals);
            let losses = losses_at(reports, i);
            goals.push(GoalRow {
                goal: g.name.clone(),
                loss_ratio: g.loss_ratio,
                measured_loss: median(&losses),
                mpps: m,
                mpps_min: lo,
                mpps_max: hi,
                gbps_l2: m * 1e6 * bytes * 8.0 / 1e9,
                gbps_l1: m * 1e6 * (bytes + 20.0) * 8.0 / 1e9,
                gbps_l1_uplink: dut.shape.map(|s| {
                    let vxlan = if s == Shape::Multinet { 50.0 } else { 0.0 };
                    m * 1e6 * (bytes + vxlan + 20.0) * 8.0 / 1e9
                }),
                gbps_seed_formula: (dut.shape == Some(Shape::Multinet))
                    .then(|| m * 1e6 * (bytes + 56.0) * 8.0 / 1e9),
                forwarding_mpps: median(&fwd),
                irregular: reports
                    .iter()
                    .filter(|r| r.goals.get(i).is_some_and(|g| !g.regular))
                    .count(),
            });
        }
    }
    goals
}

/// The loss each search measured at goal `i`'s result: the lowest of the trials at its lower
/// bound, or (MRR) the mean of its trials at the maximum load.
fn losses_at(reports: &[&SearchReport], i: usize) -> Vec<f64> {
    reports
        .iter()
        .filter_map(|r| {
            let goal = r.goals.get(i)?;
            let at: Vec<f64> = match goal.lower_pps {
                Some(l) => r
                    .trials
                    .iter()
                    .filter(|t| t.load_pps == l)
                    .map(|t| t.loss_ratio())
                    .collect(),
                // MRR: every trial is at the maximum load.
                None if goal.loss_ratio >= 1.0 => r.trials.iter().map(|t| t.loss_ratio()).collect(),
                None => Vec::new(),
            };
            if at.is_empty() {
                None
            } else if goal.loss_ratio >= 1.0 {
                Some(at.iter().sum::<f64>() / at.len() as f64)
            } else {
                at.into_iter().reduce(f64::min)
            }
        })
        .collect()
}

/// The latency at each fraction the first search measured, median over `used`.
fn median_latency(used: &[&Outcome]) -> Vec<(f64, Latency)> {
    let mut latency = Vec::new();
    if let Some(first) = used.first() {
        for p in &first.latency {
            let at: Vec<Latency> = used
                .iter()
                .filter_map(|o| o.latency.iter().find(|q| q.fraction == p.fraction))
                .map(|q| q.latency)
                .collect();
            let med = |f: fn(&Latency) -> u64| {
                median(&at.iter().map(|l| f(l) as f64).collect::<Vec<_>>()) as u64
            };
            latency.push((
                p.fraction,
                Latency {
                    min_ns: med(|l| l.min_ns),
                    p50_ns: med(|l| l.p50_ns),
                    p90_ns: med(|l| l.p90_ns),
                    p99_ns: med(|l| l.p99_ns),
                    p999_ns: med(|l| l.p999_ns),
                    max_ns: med(|l| l.max_ns),
                },
            ));
        }
    }
    latency
}

/// The time per packet in each graph node, median over `used`.
fn median_node_ns(used: &[&Outcome]) -> Vec<(String, f64)> {
    let mut node_ns = Vec::new();
    if let Some(first) = used.first() {
        for (name, _) in &first.node_ns {
            let v: Vec<f64> = used
                .iter()
                .filter_map(|o| o.node_ns.iter().find(|(n, _)| n == name).map(|p| p.1))
                .collect();
            node_ns.push((name.clone(), median(&v)));
        }
    }
    node_ns
}

/// A DUT is generator-bound at a size when its flat-out rate (MRR) is at least 90% of the
/// generator's with no DUT (`--dut none`, as many workers, same shape). Flat-out rates, not
/// zero-loss ones: a ceiling is what the generator can move at all, and a zero-loss search
/// also measures how a DUT rides out the host's stalls.
fn mark_generator_bound(rows: &mut [SearchRow]) {
    let first = |r: &SearchRow| Some(r.mrr_mpps);
    let ceilings: Vec<(usize, u16, Option<Shape>, f64)> = rows
        .iter()
        .filter(|r| r.dut.dut == crate::Dut::None)
        .filter_map(|r| Some((r.size, r.dut.workers, r.dut.shape, first(r)?)))
        .collect();
    for r in rows.iter_mut().filter(|r| r.dut.dut != crate::Dut::None) {
        let ceiling = ceilings
            .iter()
            .find(|c| (c.0, c.1, c.2) == (r.size, r.dut.workers, r.dut.shape))
            .map(|c| c.3);
        if let (Some(c), Some(m)) = (ceiling, first(r)) {
            r.generator_bound = c > 0.0 && m >= 0.9 * c;
        }
    }
}

/// The first goal's result of a successful search (the receive rate for MRR).
pub(super) fn first_goal_pps(o: &Outcome) -> Option<f64> {
    if o.error.is_some() {
        return None;
    }
    o.search.as_ref()?.goals.first()?.result_pps()
}

/// One DUT's first-goal result over a reference DUT's, repetition by repetition.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedRatio {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Pairs behind it: repetitions where both searches succeeded in `placement`.
    pub pairs: usize,
    /// The placement both searches of every pair ran in; `None` when no placement is shared
    /// by both searches of any pair, and the pairs are taken as they came.
    pub placement: Option<Placement>,
}

/// `dut` over `reference` at `size`, repetition by repetition (see
/// [`SearchRow::paired_ratio`]). A pair counts only when both searches ran in the same
/// placement, near pairs first, else mid, else far: memif is cross-core traffic, so the two
/// DUTs' ratio itself moves with the placement (at 1500 B testpmd lost more than veclane in
/// the mid state), and a ratio is comparable with another run's only in the same one.
pub fn paired_ratio(
    outcomes: &[Outcome],
    size: usize,
    dut: Subject,
    reference: Subject,
) -> Option<PairedRatio> {
    paired_by(outcomes, size, dut, reference, first_goal_pps)
}

/// [`paired_ratio`] of the flat-out rates (MRR): each repetition's flat-out trial of `dut`
/// over the reference's, the same pairs, the same placement rule.
pub fn paired_mrr_ratio(
    outcomes: &[Outcome],
    size: usize,
    dut: Subject,
    reference: Subject,
) -> Option<PairedRatio> {
    paired_by(outcomes, size, dut, reference, |o| {
        (o.error.is_none() && o.search.is_some() && o.mrr_pps.is_finite()).then_some(o.mrr_pps)
    })
}

/// `dut` over `reference` at `size` in what `value` reads from each search, repetition by
/// repetition.
fn paired_by(
    outcomes: &[Outcome],
    size: usize,
    dut: Subject,
    reference: Subject,
    value: impl Fn(&Outcome) -> Option<f64>,
) -> Option<PairedRatio> {
    let find = |d: Subject, rep: usize| {
        outcomes
            .iter()
            .find(|o| o.dut == d && o.size == size && o.rep == rep)
            .and_then(|o| value(o).map(|p| (p, o.placement)))
    };
    let reps = outcomes.iter().map(|o| o.rep + 1).max().unwrap_or(0);
    let pairs: Vec<(f64, Placement, Placement)> = (0..reps)
        .filter_map(|rep| match (find(dut, rep), find(reference, rep)) {
            (Some((a, pa)), Some((b, pb))) if b > 0.0 => Some((a / b, pa, pb)),
            _ => None,
        })
        .collect();
    let shared = Placement::preferred(|p| pairs.iter().any(|&(_, a, b)| a == p && b == p));
    let v: Vec<f64> = pairs
        .iter()
        .filter(|&&(_, a, b)| shared.is_none_or(|p| a == p && b == p))
        .map(|&(r, _, _)| r)
        .collect();
    (!v.is_empty()).then(|| {
        let (median, min, max) = median_min_max(&v);
        PairedRatio {
            median,
            min,
            max,
            pairs: v.len(),
            placement: shared,
        }
    })
}

/// The DUT a multinet row's peer ratio divides by ([`SearchRow::peer_ratio`]): the last DUT
/// of the run in multinet with as many workers, if that is another DUT (its own rows have
/// none); none for other rows (their [`reference_for`] already is such a DUT).
pub fn peer_for(duts: &[Subject], dut: Subject) -> Option<Subject> {
    if dut.shape != Some(Shape::Multinet) {
        return None;
    }
    duts.iter()
        .rev()
        .find(|r| r.workers == dut.workers && r.shape == dut.shape)
        .filter(|r| r.dut != dut.dut)
        .copied()
}

/// The DUT `dut`'s ratio column divides by: for a multinet trial, the same DUT in
/// singlenet (the seeds' multinet/singlenet ratio); otherwise the last DUT of the run with as
/// many workers, in the same shape, that is a DUT (`none`, the generator's ceiling, has its
/// own flag instead: see [`SearchRow::generator_bound`]).
pub fn reference_for(duts: &[Subject], dut: Subject) -> Option<Subject> {
    if dut.shape == Some(Shape::Multinet) {
        let single = dut.in_shape(Shape::Singlenet);
        return duts.contains(&single).then_some(single);
    }
    duts.iter()
        .rev()
        .filter(|r| r.dut != crate::Dut::None)
        .find(|r| r.workers == dut.workers && r.shape == dut.shape)
        .copied()
}
