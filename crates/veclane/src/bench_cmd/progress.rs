//! What a run prints while it goes: a progress bar on a terminal (with the trial in flight),
//! one line per finished search or trial otherwise.

use bench::Subject;
use bench::harness;
use bench::trial::Trial;

/// Progress of a run of searches: a bar on a terminal (with the trial in flight), one line per
/// finished search otherwise (CI logs).
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
}

impl Progress {
    pub(super) fn new(total: usize) -> Progress {
        use std::io::IsTerminal as _;
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} searches  {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Progress { bar, total }
    }

    pub(super) fn trial(&self, dut: Subject, size: usize, m: &bench::search::Measurement) {
        if let Some(b) = &self.bar {
            b.set_message(format!(
                "{dut} {} B: {:.3} Mpps offered, loss {:.2e}",
                bench::trial::size_label(size),
                m.load_pps / 1e6,
                m.loss_ratio()
            ));
        }
    }

    pub(super) fn finished(&self, done: usize, o: &harness::Outcome) {
        let line = match (&o.error, &o.search) {
            (None, Some(s)) => {
                let goals: Vec<String> = s
                    .goals
                    .iter()
                    .map(|g| {
                        let v = g.result_pps();
                        format!(
                            "{} {}",
                            g.name,
                            v.map_or("-".into(), |v| format!("{:.3} Mpps", v / 1e6))
                        )
                    })
                    .collect();
                format!(
                    "[{done}/{}] {:<14} {:>5} B  rep {}  MRR {:.3} Mpps  {}  ({} trials, {:.1} s of traffic)  {} ({:.0}/{:.0} ns){}",
                    self.total,
                    o.dut.to_string(),
                    bench::trial::size_label(o.size),
                    o.rep,
                    o.mrr_pps / 1e6,
                    goals.join("  "),
                    o.trials.len(),
                    s.total_trial_s,
                    o.placement,
                    o.probe_before_ns,
                    o.probe_after_ns,
                    if o.disagreeing() > 0 {
                        format!("  COUNTERS DISAGREE in {} trial(s)", o.disagreeing())
                    } else {
                        String::new()
                    }
                )
            }
            (e, _) => format!(
                "[{done}/{}] {:<14} {:>5} B  rep {}  FAILED: {}",
                self.total,
                o.dut.to_string(),
                bench::trial::size_label(o.size),
                o.rep,
                e.as_deref().unwrap_or("no result")
            ),
        };
        match &self.bar {
            Some(b) => {
                b.println(line);
                b.set_position(done as u64);
            }
            None => eprintln!("{line}"),
        }
    }

    pub(super) fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

pub(super) fn print_trial(done: usize, total: usize, t: &Trial) {
    match &t.error {
        None => eprintln!(
            "[{done}/{total}] {:<14} {:>5} B  rep {}  {:>7.3} Mpps  tx {} rx {} lost {}  {} ({:.0}/{:.0} ns){}",
            t.dut.to_string(),
            t.size,
            t.rep,
            t.mpps,
            t.tx_packets,
            t.rx_packets,
            t.lost,
            t.placement,
            t.probe_before_ns,
            t.probe_after_ns,
            if t.disagreements.is_empty() {
                String::new()
            } else {
                format!("  COUNTERS DISAGREE: {}", t.disagreements.join("; "))
            }
        ),
        Some(e) => eprintln!(
            "[{done}/{total}] {:<14} {:>5} B  rep {}  FAILED: {e}",
            t.dut.to_string(),
            t.size,
            t.rep
        ),
    }
}
