//! The searched scenarios (l3fwd, the node scenarios, pvp): which subjects a run measures,
//! the search its arguments ask for, and the run itself.

use anyhow::bail;
use bench::harness::{self, L3fwdConfig, Topology};
use bench::search::Method;
use bench::{Dut, Subject};

use super::args::{BenchArgs, DirectionArg, InterleaveArg, SearchArg, TestpmdFwdArg, UnderlayArg};
use super::progress::Progress;
use super::{cost, output};

/// The copy engines of `asked` this host can run, in order; one it cannot (DSA without a
/// usable work queue) is left out, with the reason printed, so that its column is skipped
/// rather than the run failing. `dsa_queue` is the daemons' `dsa-queue` (`model`: always
/// usable).
fn usable_engines(asked: &[api::CopyEngine], dsa_queue: Option<&str>) -> Vec<api::CopyEngine> {
    use copy_engine::dsa::{DsaPool, Source};
    asked
        .iter()
        .copied()
        .filter(|&e| {
            if e != api::CopyEngine::Dsa {
                return true;
            }
            match DsaPool::new(Source::from_setting(dsa_queue, 0)).unusable() {
                None => true,
                Some(why) => {
                    println!("skipped: copy engine dsa: {why}");
                    false
                }
            }
        })
        .collect()
}

/// A searched scenario on `topology` (`l3fwd`, ...).
pub(super) fn run_l3fwd(
    a: &BenchArgs,
    topology: &'static dyn Topology,
    trial_secs: f64,
    sizes: Vec<usize>,
    duts: Vec<Dut>,
    testpmd_bin: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let mut subjects = subjects(a, topology, &duts)?;
    let (l3fwd_bin, vpp_bin) = peers(a, &duts, &mut subjects)?;
    let cfg = L3fwdConfig {
        topology,
        sizes,
        reps: a.reps,
        duts: subjects,
        gen_cpu: a.sender_cpu,
        dut_cpus: if a.dut_cpus.is_empty() {
            vec![a.receiver_cpu]
        } else {
            a.dut_cpus.clone()
        },
        share_gen_cpu: a.share_gen_cpu,
        ring_log2: a.ring_log2,
        check_payload: a.check_payload,
        buffer_size: a.buffer_size,
        burst: a.burst,
        node: bench::node::NodeOptions {
            networks: a.networks,
            direction: match a.direction {
                DirectionArg::In => bench::node::Direction::In,
                DirectionArg::Out => bench::node::Direction::Out,
                DirectionArg::Both => bench::node::Direction::Both,
            },
            underlay: match a.underlay {
                UnderlayArg::Memif => bench::underlay::Underlay::Memif,
                UnderlayArg::AfPacket => bench::underlay::Underlay::AfPacket,
                UnderlayArg::AfXdp => bench::underlay::Underlay::AfXdp,
            },
        },
        pvp: bench::pvp::PvpOptions { pod_cpu: a.pod_cpu },
        wait_near_secs: a.wait_near.max(0.0),
        method: method(a, trial_secs)?,
        l3fwd: bench::l3fwd::L3fwdOptions {
            testpmd_fwd: match a.testpmd_fwd {
                TestpmdFwdArg::Io => bench::l3fwd::TestpmdFwd::Io,
                TestpmdFwdArg::Mac => bench::l3fwd::TestpmdFwd::Mac,
            },
            service: a.service,
            policy_rules: a.policy_rules,
            new_flows: a.new_flows,
            service_flows: a.service_flows,
        },
        mrr_secs: a.mrr_secs,
        warmup_secs: a.warmup_ms / 1e3,
        max_load_factor: 1.1,
        max_redo: a.max_redo,
        interleave: match a.interleave {
            InterleaveArg::Searches => harness::Interleave::Searches,
            InterleaveArg::Trials => harness::Interleave::Trials,
        },
        latency_at: a.latency_at.0.clone(),
        latency_secs: a.latency_secs,
        dut_idle_sleep: a.cost,
        dsa_queue: a.dsa_queue.clone(),
        veclane_bin: bench::veclane_bin(),
        testpmd_bin,
        l3fwd_bin,
        vpp_bin,
    };
    cfg.check()?;
    if a.cost {
        return cost::run_cost(a, &cfg);
    }
    let total = cfg.reps * cfg.sizes.len() * cfg.duts.len();
    let progress = Progress::new(total);
    let mut done = 0;
    let run = harness::RunReport::run(
        &cfg,
        |o| {
            done += 1;
            progress.finished(done, o);
        },
        |dut, size, m| progress.trial(dut, size, m),
    );
    progress.clear();
    print!("\n{}", run.text());
    if a.compare_seed {
        output::print_seed_comparison(&run);
    }
    output::write_searches(&a.out_dir(), &run)
}

/// The subjects of a run on `topology`: each of `duts` (veclane in each copy mode and engine)
/// at each worker count, in each of the topology's shapes it supports.
fn subjects(a: &BenchArgs, topology: &dyn Topology, duts: &[Dut]) -> anyhow::Result<Vec<Subject>> {
    // The DUTs in the order --dut names them: that is the order they run in, in every
    // repetition (veclane's copy modes and engines in their own options' order).
    let mut base = Vec::new();
    for d in duts {
        if base.iter().any(|s: &Subject| s.dut == *d) {
            continue;
        }
        if *d == Dut::Veclane {
            for c in &a.copy {
                for e in &usable_engines(&a.copy_engine, a.dsa_queue.as_deref()) {
                    base.push(Subject {
                        copy: Some(*c),
                        engine: Some(*e),
                        ..Subject::plain(Dut::Veclane)
                    });
                }
            }
        } else {
            base.push(Subject::plain(*d));
        }
    }
    if a.workers.is_empty() || a.workers.contains(&0) {
        bail!("--workers: counts of 1 or more");
    }
    let mut workers = a.workers.clone();
    workers.sort_unstable();
    workers.dedup();
    // Every DUT at one worker count, then the next: searches interleave across both.
    let mut subjects: Vec<Subject> = workers
        .iter()
        .flat_map(|&w| base.iter().map(move |s| s.with_workers(w)))
        .collect();
    // A scenario of several shapes measures every DUT in each, one after the other.
    if !topology.shapes().is_empty() {
        subjects = subjects
            .iter()
            .flat_map(|s| {
                topology
                    .shapes()
                    .iter()
                    .filter(|&&sh| topology.supports_shape(s.dut, sh))
                    .map(|&sh| s.in_shape(sh))
            })
            .collect();
    }
    Ok(subjects)
}

/// The DPDK l3fwd and VPP binaries for `duts`: a missing one fails the run, except VPP with
/// --allow-missing-peer, which is left out of `subjects` instead.
fn peers(
    a: &BenchArgs,
    duts: &[Dut],
    subjects: &mut Vec<Subject>,
) -> anyhow::Result<(Option<std::path::PathBuf>, Option<std::path::PathBuf>)> {
    let l3fwd_bin = bench::dpdk_l3fwd::find();
    let vpp_bin = bench::vpp::find(a.vpp_bin.as_deref());
    if duts.contains(&Dut::DpdkL3fwd) && l3fwd_bin.is_none() {
        bail!(
            "dpdk-l3fwd is not built: run scripts/build-dpdk-l3fwd.sh (make setup does), or leave it out of --dut"
        );
    }
    if duts.contains(&Dut::Vpp) && vpp_bin.is_none() {
        let at = a.vpp_bin.as_ref().map_or(
            "on PATH or in scripts/build-vpp.sh's cache".to_string(),
            |p| format!("at {}", p.display()),
        );
        if !a.allow_missing_peer {
            bail!(
                "VPP not found {at}; build it with scripts/build-vpp.sh (once per machine), install it, or pass --vpp-bin (or --allow-missing-peer to skip it)"
            );
        }
        eprintln!(
            "note: VPP not found {at}; skipping it (scripts/build-vpp.sh builds it once per machine, in about half an hour on two cores)"
        );
        subjects.retain(|s| s.dut != Dut::Vpp);
    }
    Ok((l3fwd_bin, vpp_bin))
}

/// The search `a` asks for, with trials of `trial_secs`.
fn method(a: &BenchArgs, trial_secs: f64) -> anyhow::Result<Method> {
    let ratio = |name: &str, v: f64| {
        if (0.0..1.0).contains(&v) {
            Ok(v)
        } else {
            Err(anyhow::anyhow!("--{name} {v} must be in [0, 1)"))
        }
    };
    if !(a.precision > 0.0 && a.precision < 1.0) {
        bail!("--precision {} must be in (0, 1)", a.precision);
    }
    if !(a.final_trial_secs >= 0.0 && a.final_trial_secs.is_finite()) {
        bail!(
            "--final-trial-secs {} must be 0 or more",
            a.final_trial_secs
        );
    }
    Ok(match a.search {
        SearchArg::Mlr => {
            let mut m = Method::mlr_default(trial_secs);
            if let (Method::Mlr { goals, .. }, Some(p)) = (&mut m, a.pdr) {
                for g in goals.iter_mut().filter(|g| g.loss_ratio > 0.0) {
                    g.loss_ratio = ratio("pdr", p)?;
                }
            }
            m
        }
        SearchArg::Rfc2544 => Method::Rfc2544 {
            loss_ratio: ratio("loss-ratio", a.loss_ratio)?,
            trial_s: trial_secs,
            final_trial_s: a.final_trial_secs,
            precision: a.precision,
        },
        SearchArg::LossVerification => Method::BinaryLossVerification {
            loss_ratio: ratio("loss-ratio", a.loss_ratio)?,
            trial_s: trial_secs,
            max_repeat: a.max_repeat,
            precision: a.precision,
        },
        SearchArg::TrexNdr => {
            let mut m = Method::trex_ndr_default(trial_secs, trial_secs);
            if let (Method::TrexNdr { pdr, .. }, Some(p)) = (&mut m, a.pdr) {
                *pdr = ratio("pdr", p)?;
            }
            m
        }
        SearchArg::Continuous => Method::Continuous {
            trial_s: trial_secs,
            trials: 1,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_this_host_cannot_run_is_skipped() {
        // No DSA device here: skipped.
        let all = [
            api::CopyEngine::Cpu,
            api::CopyEngine::Dsa,
            api::CopyEngine::Thread,
        ];
        if copy_engine::dsa::sysfs::discover_default()
            .usable
            .is_empty()
        {
            let got = usable_engines(&all, None);
            assert_eq!(got, [api::CopyEngine::Cpu, api::CopyEngine::Thread]);
        }
        // The model is there on every host.
        assert_eq!(usable_engines(&all, Some("model")), all);
    }
}
