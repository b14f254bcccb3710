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
        let e = search(&method, MIN, MAX, &mut m, &mut |_| seen += 1)
            .unwrap_err()
            .to_string();
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
        search(&m, min, max, &mut ModelDut::new(CAP, 1), &mut |_| {})
            .unwrap_err()
            .to_string()
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
