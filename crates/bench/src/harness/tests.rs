use std::path::Path;
use std::time::Duration;

use trafgen::GenReport;

use super::guard::TrialGuard;
use super::measure::measurement;
use super::*;
use crate::l3fwd::{gen_config, veclane_config};
use crate::placement::Placement;
use crate::search::model::ModelDut;
use crate::search::{self, Method};
use crate::trial::Placed;
use crate::{CopyMode, Dut};

fn outcome(dut: Subject, rep: usize, capacity: f64) -> Outcome {
    let mut m = ModelDut::new(capacity, 1);
    let method = Method::continuous_default(0.1);
    let r = search::search(&method, 1000.0, capacity * 1.5, &mut m, &mut |_| {}).unwrap();
    let mut o = Outcome::failed(dut, 64, rep, String::new());
    o.error = None;
    o.search = Some(r);
    o
}

#[test]
fn only_failures_the_host_explains_are_run_again() {
    let guard = TrialGuard {
        cpus: (0, 1),
        wait_near: Duration::from_secs(1),
        ring_slots: 4096,
        redo_left: 10,
    };
    // 10 Mpps for 0.25 s: 2.5 M frames offered.
    let trial = |received: u64, shortfall: u64| Measurement {
        load_pps: 10e6,
        duration_s: 0.25,
        offered: 2_500_000,
        sent: 2_500_000 - shortfall,
        received,
        shortfall,
        tx_pps: 10e6,
        rx_pps: 10e6,
    };
    let report = |stall_us: f64, gap_us: f64| GenReport {
        max_stall_us: stall_us,
        max_rx_gap_us: gap_us,
        ..Default::default()
    };
    let near = (Some(60.0), Some(70.0));
    let why = |m: &Measurement, g: &GenReport, wait: Option<f64>, p: (Option<f64>, Option<f64>)| {
        guard.disturbance(Some(10e6), m, g, wait, p.0, p.1)
    };
    // The CPUs moved apart around the trial while the search waits for near.
    let w = why(
        &trial(2_000_000, 0),
        &report(50.0, 50.0),
        Some(0.0),
        (Some(60.0), Some(190.0)),
    );
    assert!(w.unwrap().contains("placement mixed"));
    // Nothing wrong: the loss is the DUT's.
    assert_eq!(
        why(&trial(2_400_000, 0), &report(50.0, 60.0), Some(10.0), near),
        None
    );
    // Nothing came back for 2 ms while the DUT's worker waited 2.5 ms for its CPU: 20 000
    // frames at this load, more than half a ring, and the 15 000 lost are explained.
    let w = why(
        &trial(2_485_000, 0),
        &report(50.0, 2000.0),
        Some(2500.0),
        near,
    )
    .unwrap();
    assert!(w.contains("DUT's worker off its CPU 2000 us"), "{w}");
    // The same gap with the worker on its CPU throughout is the DUT's own pause.
    assert_eq!(
        why(
            &trial(2_485_000, 0),
            &report(50.0, 2000.0),
            Some(30.0),
            near
        ),
        None
    );
    // The generator paused 3 ms: its shortfall is its own, the DUT lost nothing.
    let w = why(
        &trial(2_460_000, 40_000),
        &report(3000.0, 3000.0),
        Some(0.0),
        near,
    )
    .unwrap();
    assert!(w.contains("generator 40000 frames behind"), "{w}");
    // A DUT that lost far more than the pause explains failed on its own (overload).
    assert_eq!(
        why(
            &trial(2_000_000, 1000),
            &report(3000.0, 3000.0),
            Some(0.0),
            near
        ),
        None
    );
    // Flat out only the placement matters.
    assert_eq!(
        guard.disturbance(
            None,
            &trial(2_000_000, 0),
            &report(9e3, 9e3),
            Some(9e3),
            near.0,
            near.1
        ),
        None
    );
}

#[test]
fn a_failed_trial_the_host_explains_is_run_again_while_the_budget_lasts() {
    let mut guard = TrialGuard {
        cpus: (0, 1),
        wait_near: Duration::from_secs(1),
        ring_slots: 2048,
        redo_left: 2,
    };
    let why = || Some("placement mid (39/163 ns)".to_string());
    // A latency trial at half the zero-loss rate that lost a quarter of its frames while the
    // CPUs moved apart (the 64 B trial of one `make bench`) is run again, like any other.
    assert_eq!(guard.run_again(true, why()), why());
    // One that passed stands, disturbed or not; one the host does not explain stands too.
    assert_eq!(guard.run_again(false, why()), None);
    assert_eq!(guard.run_again(true, None), None);
    assert_eq!(guard.redo_left, 1);
    assert_eq!(guard.run_again(true, why()), why());
    // The search's budget spent: taken as it is.
    assert_eq!(guard.run_again(true, why()), None);
    assert_eq!(guard.redo_left, 0);
}

#[test]
fn ratios_pair_searches_of_the_same_repetition() {
    let a = Subject::plain(Dut::Veclane);
    let b = Subject::plain(Dut::Testpmd);
    // The host halves every rate in repetition 1: each pair still says 2.
    let v = vec![
        outcome(a, 0, 20e6),
        outcome(b, 0, 10e6),
        outcome(a, 1, 10e6),
        outcome(b, 1, 5e6),
        outcome(a, 2, 16e6),
        outcome(b, 2, 8e6),
    ];
    let p = paired_ratio(&v, 64, a, b).unwrap();
    for x in [p.median, p.min, p.max] {
        assert!((x - 2.0).abs() < 0.02, "{p:?}");
    }
    // No placement shared by a pair (these never probed): all pairs, none named.
    assert_eq!((p.pairs, p.placement), (3, None));
    // A failed search drops its pair, not the others.
    let mut w = v.clone();
    w[3].error = Some("x".into());
    let p = paired_ratio(&w, 64, a, b).unwrap();
    assert!((p.median - 2.0).abs() < 0.02 && p.pairs == 2);
    assert!(paired_ratio(&v, 1500, a, b).is_none());
    let rows = rows(&v, &[64], &[a, b]);
    assert!(rows[0].paired_ratio.is_some() && rows[1].paired_ratio.is_none());
}

/// The flat-out rates pair the same way, from each search's own MRR (not its zero-loss
/// result), and a search without a flat-out rate drops its pair only.
#[test]
fn flat_out_rates_pair_by_repetition_too() {
    let (a, b) = (Subject::plain(Dut::Veclane), Subject::plain(Dut::Vpp));
    let flat = |d, rep, ndr: f64, mrr: f64| {
        let mut o = outcome(d, rep, ndr);
        o.mrr_pps = mrr;
        o
    };
    // Zero-loss results 2:1 in each repetition; flat out 3:2, 6:4 (the host halved
    // repetition 1's), and repetition 2's reference has no flat-out rate.
    let v = vec![
        flat(a, 0, 20e6, 30e6),
        flat(b, 0, 10e6, 20e6),
        flat(a, 1, 10e6, 15e6),
        flat(b, 1, 5e6, 10e6),
        flat(a, 2, 20e6, 30e6),
        flat(b, 2, 10e6, f64::NAN),
    ];
    let m = paired_mrr_ratio(&v, 64, a, b).unwrap();
    assert!((m.median - 1.5).abs() < 1e-9 && m.pairs == 2, "{m:?}");
    let n = paired_ratio(&v, 64, a, b).unwrap();
    assert!((n.median - 2.0).abs() < 0.02 && n.pairs == 3, "{n:?}");
    let r = rows(&v, &[64], &[a, b]);
    assert_eq!(r[0].paired_mrr, Some(m));
    assert!(r[1].paired_mrr.is_none());
}

#[test]
fn ratios_pair_searches_that_shared_a_placement_near_first() {
    let (a, b) = (Subject::plain(Dut::Veclane), Subject::plain(Dut::Testpmd));
    let at = |d, rep, pps, p| Outcome {
        placement: p,
        ..outcome(d, rep, pps)
    };
    use Placement::{Mid, Near};
    // Repetition 0 both near (2), 1 both mid (3), 2 split (5), 3 both mid (3).
    let mut v = vec![
        at(a, 0, 20e6, Near),
        at(b, 0, 10e6, Near),
        at(a, 1, 15e6, Mid),
        at(b, 1, 5e6, Mid),
        at(a, 2, 20e6, Near),
        at(b, 2, 4e6, Mid),
        at(a, 3, 15e6, Mid),
        at(b, 3, 5e6, Mid),
    ];
    let p = paired_ratio(&v, 64, a, b).unwrap();
    assert!((p.median - 2.0).abs() < 0.02, "{p:?}");
    assert_eq!((p.pairs, p.placement), (1, Some(Near)));
    // Without a near pair, the mid pairs; the split one never counts.
    v[1].placement = Mid;
    let p = paired_ratio(&v, 64, a, b).unwrap();
    assert!((p.median - 3.0).abs() < 0.02, "{p:?}");
    assert_eq!((p.pairs, p.placement), (2, Some(Mid)));
}

#[test]
fn a_row_is_the_median_of_one_placement_near_first() {
    let b = Subject::plain(Dut::Testpmd);
    let at = |rep, pps, p| Outcome {
        placement: p,
        ..outcome(b, rep, pps)
    };
    use Placement::{Mid, Mixed, Near};
    let mut v = vec![
        at(0, 12e6, Mid),
        at(1, 35e6, Near),
        at(2, 13e6, Mixed),
        at(3, 13e6, Mid),
        at(4, 34e6, Near),
    ];
    let r = &rows(&v, &[64], &[b])[0];
    assert_eq!((r.basis, r.searches, r.searches_run), (Some(Near), 2, 5));
    assert!((r.goals[0].mpps - 34.5).abs() < 0.4, "{r:?}");
    // No near search: the mid ones.
    for o in v.iter_mut().filter(|o| o.placement == Near) {
        o.placement = Mixed;
    }
    let r = &rows(&v, &[64], &[b])[0];
    assert_eq!((r.basis, r.searches), (Some(Mid), 2));
    assert!(r.goals[0].mpps < 13.5, "{r:?}");
    // Every search cut by a flip: all of them, no basis named.
    for o in v.iter_mut() {
        o.placement = Mixed;
    }
    assert_eq!(rows(&v, &[64], &[b])[0].basis, None);
}

#[test]
fn ratios_divide_by_the_reference_with_as_many_workers() {
    let v = Subject::plain(Dut::Veclane);
    let t = Subject::plain(Dut::Testpmd);
    let duts = [v, t, v.with_workers(2), t.with_workers(2)];
    assert_eq!(reference_for(&duts, v), Some(t));
    assert_eq!(
        reference_for(&duts, v.with_workers(2)),
        Some(t.with_workers(2))
    );
    assert_eq!(reference_for(&duts, v.with_workers(3)), None);
    // The generator's ceiling is never the reference: the last real DUT is.
    let n = Subject::plain(Dut::None);
    assert_eq!(reference_for(&[v, t, n], v), Some(t));
    assert_eq!(reference_for(&[v, t, n], n), Some(t));
    assert_eq!(v.with_workers(2).to_string(), "veclane x2");
    assert_eq!(v.with_workers(2).line(), v);
}

/// A DUT flat out at 90% or more of the generator's rate with no DUT is flagged: it measured
/// the generator. The ceiling's own row is not.
#[test]
fn rows_near_the_generator_s_ceiling_are_generator_bound() {
    let (v, t, n) = (
        Subject::plain(Dut::Veclane),
        Subject::plain(Dut::Testpmd),
        Subject::plain(Dut::None),
    );
    let duts = [v, t, n];
    let flat_out = |d, pps| {
        let mut o = outcome(d, 0, pps);
        o.mrr_pps = pps;
        o
    };
    let outs = vec![flat_out(v, 1e6), flat_out(t, 1.9e6), flat_out(n, 2e6)];
    let r = rows(&outs, &[64], &duts);
    let bound = |d: Subject| r.iter().find(|x| x.dut == d).unwrap().generator_bound;
    assert!(!bound(v), "half the ceiling");
    assert!(bound(t), "95% of it");
    assert!(!bound(n));
    // Without a ceiling in the run, nothing is flagged.
    let r = rows(&outs[..2], &[64], &duts[..2]);
    assert!(r.iter().all(|x| !x.generator_bound));
    let cfg = test_config(duts.to_vec());
    let text = super::output::table(&cfg, &rows(&outs, &[64], &duts));
    assert!(text.contains("generator-bound"), "{text}");
}

#[test]
fn dut_cpus_are_checked_against_workers_and_the_generator() {
    let v = Subject::plain(Dut::Veclane);
    let mut c = test_config(vec![v, v.with_workers(2)]);
    let e = c.check().unwrap_err().to_string();
    assert!(e.contains("veclane x2 needs 2 DUT CPUs"), "{e}");
    c.dut_cpus = vec![1, 0];
    let e = c.check().unwrap_err().to_string();
    assert!(
        e.contains("generator's CPU 0") && e.contains("--share-gen-cpu"),
        "{e}"
    );
    assert!(!c.shares_gen_cpu(1) && c.shares_gen_cpu(2));
    c.share_gen_cpu = true;
    c.check().unwrap();
    c.dut_cpus = vec![1, 1];
    assert!(c.check().unwrap_err().to_string().contains("listed twice"));
    // The probe pairs the generator's CPU with the first DUT CPU: never the same one.
    c.dut_cpus = vec![0, 1];
    assert!(c.check().unwrap_err().to_string().contains("first DUT CPU"));
    c.dut_cpus = vec![1, 2];
    c.share_gen_cpu = false;
    c.check().unwrap();
    assert_eq!(c.worker_cpus(2), [1, 2]);
    for (bad, want) in [
        (
            L3fwdConfig {
                sizes: vec![63],
                ..c.clone()
            },
            "--sizes: 63",
        ),
        (
            L3fwdConfig {
                burst: 0,
                ..c.clone()
            },
            "--burst 0",
        ),
        (
            L3fwdConfig {
                mrr_secs: 0.0,
                ..c.clone()
            },
            "--mrr-secs 0",
        ),
        (
            L3fwdConfig {
                warmup_secs: 11.0,
                ..c.clone()
            },
            "--warmup-ms 11000",
        ),
        (
            L3fwdConfig {
                latency_at: vec![1.5],
                ..c.clone()
            },
            "--latency-at 1.5",
        ),
        (
            L3fwdConfig {
                reps: 0,
                ..c.clone()
            },
            "--reps",
        ),
    ] {
        let e = bad.check().unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    let conf = veclane_config(&c, CopyMode::Single, &Plan::new(&c, 64), 2);
    assert_eq!(conf.daemon.workers, [1, 2]);
    // On any machine (cores 0 and 1 exist): the daemon reads back what the harness wrote.
    let conf = veclane_config(&c, CopyMode::Two, &Plan::new(&c, 1500), 1);
    assert_eq!(conf.daemon.workers, [1]);
    assert_eq!(
        api::Config::parse(&conf.to_toml(), "l3fwd").unwrap(),
        conf,
        "{}",
        conf.to_toml()
    );
    let g = gen_config(&c, Path::new("/s"), &Plan::new(&c, 64), 2);
    assert_eq!((g.iface.s2m_rings, g.iface.m2s_rings), (2, 2));
    // --service --policy-rules 50: a service on the generator's destination, its backend's
    // neighbour, and a 50-rule policy on the receiving interface; the daemon reads it back.
    let mut s = c.clone();
    s.l3fwd.service = true;
    s.l3fwd.policy_rules = 50;
    let conf = veclane_config(&s, CopyMode::Single, &Plan::new(&s, 64), 1);
    assert_eq!(conf.service[0].vip.to_string(), "10.10.2.2");
    assert_eq!(conf.neighbor.len(), 2);
    assert_eq!(conf.policy[0].egress.as_ref().map(Vec::len), Some(50));
    assert_eq!(api::Config::parse(&conf.to_toml(), "l3fwd").unwrap(), conf);
}

#[test]
fn busy_rings_hold_at_most_8_mib_of_frames_unless_fixed() {
    use crate::trial::{IMIX, ring_log2_for};
    // Two busy rings (l3fwd): 2^12 up to 1024 B (16 lines a frame, 4 MiB a ring), fewer
    // above, never under 2^8.
    for (size, want) in [
        (64, 12),
        (512, 12),
        (1024, 12),
        (1025, 11),
        (1280, 11),
        (1500, 11),
        (2048, 11),
        (2049, 10),
        (9000, 8),
        (IMIX, 11),
    ] {
        let buffer = crate::trial::buffer_size_for(2048, size);
        assert_eq!(ring_log2_for(None, size, buffer, 2), want, "{size} B");
        assert_eq!(
            ring_log2_for(Some(10), size, buffer, 2),
            10,
            "{size} B, --ring-log2 10"
        );
    }
    // Four (the node switch, one network, both ways): their 2 KiB buffers span 16 MiB with
    // 2^11 slots, and 1500-byte frames take 8 MiB with 2^10.
    for (size, want) in [(64, 11), (512, 11), (1024, 11), (1500, 10), (IMIX, 10)] {
        assert_eq!(
            ring_log2_for(None, size, 2048, 4),
            want,
            "{size} B, four rings"
        );
    }
    assert_eq!(ring_log2_for(None, 9000, 9216, 4), 8);
    // Six and ten (two and four networks): the span caps small frames at 2^10 and 2^9, and
    // 1500-byte frames' 8 MiB gives 2^9 to both (docs/benchmarking.md's table).
    for (busy, size, want) in [
        (6, 64, 10),
        (6, 1024, 10),
        (6, 1500, 9),
        (10, 64, 9),
        (10, 1500, 9),
    ] {
        assert_eq!(
            ring_log2_for(None, size, 2048, busy),
            want,
            "{size} B, {busy} rings"
        );
    }
    // Larger buffers, fewer slots: 4 KiB buffers span 16 MiB in two rings of 2^11.
    assert_eq!(ring_log2_for(None, 64, 4096, 2), 11);
    // What the DUTs and the generator are given, and what the table says.
    let mut c = test_config(vec![Subject::plain(Dut::Veclane)]);
    c.sizes = vec![64, 1500, 9000];
    assert_eq!(
        super::config::rings_text(&c),
        "2^12 (2^11 at 1500, 2^8 at 9000)"
    );
    for (size, want) in [(64, 12u8), (1500, 11)] {
        let g = gen_config(&c, Path::new("/s"), &Plan::new(&c, size), 1);
        assert_eq!(g.iface.log2_ring_size, want, "{size} B");
        let conf = veclane_config(&c, CopyMode::Single, &Plan::new(&c, size), 1);
        assert!(
            conf.interface
                .iter()
                .all(|i| i.ring_size == Some(1 << want)),
            "{size} B: {:?}",
            conf.interface
        );
    }
    c.ring_log2 = Some(12);
    assert_eq!(super::config::rings_text(&c), "2^12");
    assert_eq!(
        gen_config(&c, Path::new("/s"), &Plan::new(&c, 1500), 1)
            .iface
            .log2_ring_size,
        12
    );
}

#[test]
fn a_run_far_short_of_its_schedule_offered_the_whole_schedule() {
    let g = GenReport {
        tx_offered: 10,
        tx_packets: 10,
        rx_packets: 10,
        ..Default::default()
    };
    let m = measurement(Some(1e6), Duration::from_secs(1), &g);
    assert_eq!(m.offered, 1_000_000);
    assert!(m.loss_ratio() > 0.99);
    // A run that offered nearly its schedule keeps its own count.
    let g = GenReport {
        tx_offered: 999_990,
        ..g
    };
    assert_eq!(
        measurement(Some(1e6), Duration::from_secs(1), &g).offered,
        999_990
    );
}

/// Frames the generator did not send (a fragment, the DUT's own traffic) do not stand in for
/// frames the DUT lost: they count neither as received nor in the receive rate.
#[test]
fn frames_the_generator_did_not_send_are_not_received() {
    let g = GenReport {
        tx_offered: 1000,
        tx_packets: 1000,
        rx_packets: 1000,
        rx_foreign: 10,
        rx_mpps: 1.0,
        ..Default::default()
    };
    let m = measurement(Some(1e3), Duration::from_secs(1), &g);
    assert_eq!((m.offered, m.received), (1000, 990));
    assert!((m.loss_ratio() - 0.01).abs() < 1e-12);
    assert!((m.rx_pps - 0.99e6).abs() < 1e-3);
    let clean = GenReport { rx_foreign: 0, ..g };
    let m = measurement(Some(1e3), Duration::from_secs(1), &clean);
    assert_eq!((m.received, m.loss_ratio(), m.rx_pps), (1000, 0.0, 1e6));
}

#[test]
fn every_csv_line_has_the_header_s_fields() {
    let a = Subject::plain(Dut::Veclane);
    let b = Subject::plain(Dut::Testpmd);
    let v = vec![outcome(a, 0, 20e6), outcome(b, 0, 10e6)];
    let cfg = test_config(vec![a, b]);
    let text = csv(&cfg, &rows(&v, &[64], &[a, b]));
    // The method echo holds commas inside quotes: count fields outside them.
    let fields = |l: &str| {
        let mut n = 1;
        let mut quoted = false;
        for c in l.chars() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => n += 1,
                _ => {}
            }
        }
        n
    };
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for l in &lines[1..] {
        assert_eq!(fields(l), fields(lines[0]), "{l}");
    }
}

#[test]
fn the_worker_plot_draws_a_line_per_dut_across_worker_counts() {
    let (a, b) = (Subject::plain(Dut::Veclane), Subject::plain(Dut::Testpmd));
    let (a2, b2) = (a.with_workers(2), b.with_workers(2));
    let duts = vec![a, b, a2, b2];
    let v = vec![
        outcome(a, 0, 20e6),
        outcome(b, 0, 10e6),
        outcome(a2, 0, 36e6),
        outcome(b2, 0, 19e6),
    ];
    let mut cfg = test_config(duts.clone());
    cfg.dut_cpus = vec![1, 2];
    let rows = rows(&v, &[64], &duts);
    assert_eq!(worker_counts(&cfg), [1, 2]);
    let svg = worker_plot(&cfg, &rows, 64).unwrap();
    assert!(
        svg.contains("DUT worker cores") && svg.contains("64 B frames"),
        "{svg}"
    );
    // One line per DUT (named without the worker count), not one per column.
    assert!(
        svg.contains("\nveclane\n") && svg.contains("\ntestpmd\n"),
        "{svg}"
    );
    assert!(!svg.contains(" x2\n") && !svg.contains("shares"), "{svg}");
    // The size plot keeps to one worker.
    assert!(!size_plot(&cfg, &rows).unwrap().contains(" x2\n"));
    // A worker on the generator's CPU is said.
    cfg.dut_cpus = vec![1, 0];
    assert!(
        worker_plot(&cfg, &rows, 64)
            .unwrap()
            .contains("a worker shares the generator")
    );
    // x2 divides by testpmd x2.
    let r = rows.iter().find(|r| r.dut == a2).unwrap();
    assert!((r.paired_ratio.unwrap().median - 36.0 / 19.0).abs() < 0.05);
}

#[test]
fn vpp_gets_the_same_topology_as_veclane() {
    // Same addresses, MACs and neighbour as the veclane daemon's l3fwd configuration.
    use crate::vpp::{IF_IN_MAC, IF_OUT_MAC, VppConfig, setup_commands};
    let l3 = test_config(vec![]);
    let v = veclane_config(&l3, CopyMode::Two, &Plan::new(&l3, 64), 1).to_toml();
    let cmds = setup_commands(&VppConfig::new(0, 1), Path::new("/s")).join("\n");
    let (mac_in, mac_out) = (
        crate::node::mac_str(IF_IN_MAC),
        crate::node::mac_str(IF_OUT_MAC),
    );
    for needle in [
        mac_in.as_str(),
        mac_out.as_str(),
        "10.10.1.1/24",
        "10.10.2.1/24",
        "10.10.2.2",
        "02:00:00:00:00:01",
    ] {
        assert!(v.contains(needle) && cmds.contains(needle), "{needle}");
    }
}

#[test]
fn a_search_whose_flat_out_trial_ran_in_another_placement_is_mixed() {
    let flat = |before: f64, after: f64, redone: Option<&str>| TrialRecord {
        kind: "mrr",
        probe_before_ns: Some(before),
        probe_after_ns: Some(after),
        redone: redone.map(String::from),
        ..Default::default()
    };
    let dut = Subject::plain(Dut::Veclane);
    let mut o = Outcome::failed(dut, 64, 0, String::new());
    // Run again for a flip, then accepted in the mid placement; near around the search.
    o.trials = vec![
        flat(41.0, 162.0, Some("placement mixed")),
        flat(154.0, 153.0, None),
    ];
    o.set_placement(41.0, 43.0);
    assert_eq!(o.placement, Placement::Mixed);
    // Its flat-out trial near, as the search: near.
    o.trials = vec![
        flat(41.0, 162.0, Some("placement mixed")),
        flat(40.0, 42.0, None),
    ];
    o.set_placement(41.0, 43.0);
    assert_eq!(o.placement, Placement::Near);
    // Without probes (no real-time priority), the search's own probes decide.
    o.trials = vec![TrialRecord {
        kind: "mrr",
        ..Default::default()
    }];
    o.set_placement(160.0, 170.0);
    assert_eq!(o.placement, Placement::Mid);
    // One of its probes failed: mixed.
    o.trials = vec![TrialRecord {
        kind: "mrr",
        probe_before_ns: Some(40.0),
        ..Default::default()
    }];
    o.set_placement(41.0, 43.0);
    assert_eq!(o.placement, Placement::Mixed);
}

/// The report's `config` is what the run was asked: its keys, their order and their values
/// are what readers of old and new reports alike find.
#[test]
fn the_config_a_report_echoes_keeps_its_keys_in_order() {
    let mut c = test_config(vec![Subject::plain(Dut::Veclane)]);
    c.dsa_queue = Some("model".into());
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(
        json,
        concat!(
            r#"{"sizes":[64],"reps":1,"duts":[{"dut":"veclane","workers":1}],"gen_cpu":0,"#,
            r#""dut_cpus":[1],"share_gen_cpu":false,"ring_log2":null,"buffer_size":2048,"#,
            r#""check_payload":false,"burst":64,"networks":1,"direction":"in","#,
            r#""underlay":"memif","pod_cpu":null,"wait_near_secs":0.0,"max_redo":0,"#,
            r#""interleave":"searches","method":{"method":"continuous","trial_s":0.1,"#,
            r#""trials":10},"mrr_secs":1.0,"max_load_factor":1.1,"warmup_secs":0.01,"#,
            r#""testpmd_fwd":"io","latency_at":[],"latency_secs":1.0,"dsa_queue":"model"}"#,
        )
    );
}
