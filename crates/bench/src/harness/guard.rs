//! The trial guard: what a search does about the host disturbing a trial (placement probes,
//! the generator falling behind, a DUT worker waiting for its CPU), and when it runs a trial
//! again.

use std::time::Duration;

use crate::placement::{self, Placement};
use crate::search::Measurement;
use trafgen::GenReport;

/// What a search does about the host, trial by trial. This machine's host takes a CPU away
/// for 0.1-8 ms several times a second and moves the two vCPUs between cores that share an L3
/// and cores that do not (memif runs 30-75% slower then). A trial the host disturbed says
/// nothing about the DUT when it failed because of the disturbance, so such a trial is run
/// again (up to `redo_left` times per search) when
/// - the CPUs were not near before and after it (probed at real-time priority, which
///   preempts the busy DUT between trials), while the search waits for the near state; or
/// - the generator fell behind its schedule (its CPU was taken away, or slowed down in the
///   far state), and the DUT lost no more than the pause would explain; or
/// - a pause on either side would fill half a ring (`ring_slots`) at the trial's load, and
///   the DUT lost no more than the pause explains. A pause counts only where the host caused
///   it: the generator's own loop stopping, or the DUT's worker waiting that long for its CPU
///   (its scheduler statistics). Nothing coming back while the DUT's worker had its CPU is the
///   DUT's own doing and stands as loss.
///
/// A trial that passes despite a disturbance stands: it passed under worse conditions. Every
/// trial run again stays in the JSON with its reason, and the table counts them.
#[derive(Debug, Clone)]
pub(super) struct TrialGuard {
    pub(super) cpus: (usize, usize),
    /// Wait up to this long for the near state before each trial (zero: do not wait, and do
    /// not run trials again for their placement).
    pub(super) wait_near: Duration,
    pub(super) ring_slots: u64,
    pub(super) redo_left: usize,
}

impl TrialGuard {
    /// Whether a trial is run again, and why: it failed (`failed`), the host explains it
    /// (`why`, from [`disturbance`](Self::disturbance)), and the search has trials left to
    /// run again. Every kind of trial alike: flat out, search and latency.
    pub(super) fn run_again(&mut self, failed: bool, why: Option<String>) -> Option<String> {
        let why = why.filter(|_| failed && self.redo_left > 0)?;
        self.redo_left -= 1;
        Some(why)
    }

    /// The probe before a trial, after waiting (bounded) for the near state. Once a wait has
    /// run out the host is settled elsewhere, and the rest of the search does not wait.
    pub(super) fn before(&mut self) -> Option<f64> {
        let (a, b) = self.cpus;
        let ns = placement::wait_near_with(self.wait_near, Duration::from_millis(50), || {
            placement::probe_preempting(a, b, 5_000)
        })?;
        let near = ns < placement::NEAR_BELOW_NS;
        if !near {
            self.wait_near = Duration::ZERO;
        }
        Some(ns)
    }

    pub(super) fn after(&self) -> Option<f64> {
        placement::probe_preempting(self.cpus.0, self.cpus.1, 5_000)
    }

    /// Why the host, not the DUT, may have failed this trial at `load` (flat out: `None`):
    /// `m` is the trial, `dut_wait_us` how long the DUT's worker waited for its CPU during it.
    pub(super) fn disturbance(
        &self,
        load: Option<f64>,
        m: &Measurement,
        g: &GenReport,
        dut_wait_us: Option<f64>,
        before: Option<f64>,
        after: Option<f64>,
    ) -> Option<String> {
        if let (Some(b), Some(a)) = (before, after) {
            let p = Placement::of(b, a);
            if p != Placement::Near && !self.wait_near.is_zero() {
                return Some(format!("placement {p} ({b:.0}/{a:.0} ns)"));
            }
        }
        let load = load?;
        // What the DUT lost: offered minus received, less what the generator never sent.
        let dut_loss = m.offered.saturating_sub(m.received + m.shortfall) as f64;
        // The longest pause the host caused: ours, or nothing back while the DUT waited for
        // its CPU (the wait is a total over the trial, so it bounds the longest one).
        let dut_pause_us = g.max_rx_gap_us.min(dut_wait_us.unwrap_or(0.0));
        let (who, pause_us) = if g.max_stall_us >= dut_pause_us {
            ("generator paused", g.max_stall_us)
        } else {
            ("DUT's worker off its CPU", dut_pause_us)
        };
        let pause_frames = pause_us * 1e-6 * load;
        if dut_loss > pause_frames {
            return None;
        }
        if m.shortfall > 0 {
            return Some(format!(
                "generator {} frames behind its schedule ({who} {pause_us:.0} us)",
                m.shortfall
            ));
        }
        (pause_frames > self.ring_slots as f64 / 2.0).then(|| {
            format!(
                "{who} {pause_us:.0} us, {pause_frames:.0} frames at this load (ring {})",
                self.ring_slots
            )
        })
    }
}
