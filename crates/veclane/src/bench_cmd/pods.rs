//! The pods scenario: two pods' ordinary programs through veclane and through the kernel.

use anyhow::bail;
use bench::pods::{self, Placement, PodPath, PodTest, PodsConfig};

use super::args::BenchArgs;

/// Every test over every path, `--reps` times, `--trial-secs` each (default 8).
pub(super) fn run(a: &BenchArgs) -> anyhow::Result<()> {
    // Those named (clap took only known names), in their order; the defaults otherwise.
    fn pick<T: Copy>(names: &[String], all: &[T], name: fn(T) -> &'static str) -> Vec<T> {
        pick_or(names, all, all, name)
    }
    fn pick_or<T: Copy>(
        names: &[String],
        all: &[T],
        default: &[T],
        name: fn(T) -> &'static str,
    ) -> Vec<T> {
        if names.is_empty() {
            return default.to_vec();
        }
        names
            .iter()
            .filter_map(|n| all.iter().copied().find(|&v| name(v) == n))
            .collect()
    }
    let tests = pick(&a.pod_tests, &PodTest::ALL, PodTest::name);
    let paths = pick_or(
        &a.pod_paths,
        &PodPath::ALL,
        &PodPath::DEFAULT,
        PodPath::name,
    );
    let secs = a.trial_secs.unwrap_or(8.0);
    if a.reps == 0 || !secs.is_finite() || secs < 1.0 {
        bail!("--reps must be at least 1 and --trial-secs at least 1 for pods");
    }
    if a.sender_cpu == a.receiver_cpu && a.pod_rx_mode != api::RxMode::Interrupt {
        bail!(
            "veclane's worker shares the pods' CPU only in interrupt mode (--pod-rx-mode \
             interrupt): polling, it would take the CPU from them"
        );
    }
    let cfg = PodsConfig {
        place: Placement {
            bin: bench::veclane_bin(),
            worker_cpu: a.receiver_cpu,
            main_cpu: a.sender_cpu,
            mode: a.pod_rx_mode,
            uplink: *bench::pods::Uplink::ALL
                .iter()
                .find(|u| u.name() == a.pod_uplink)
                .expect("one of the possible values"),
        },
        app_cpu: a.sender_cpu,
        paths,
        tests,
        secs,
        reps: a.reps,
    };
    println!(
        "pods: iperf3 and the echo on CPU {}, veclane's worker on CPU {} in {} mode (its control \
         thread on {}); {} s a test, {} repetitions, paths taking turns",
        cfg.app_cpu, cfg.place.worker_cpu, cfg.place.mode, cfg.place.main_cpu, cfg.secs, cfg.reps
    );
    if cfg.paths.contains(&PodPath::VeclaneVeth) {
        println!(
            "veclane on veth: the pods' veth driven through {} (their offloads off)",
            cfg.place.uplink.name()
        );
    }
    if cfg.paths.contains(&PodPath::VeclaneVxlan) {
        println!(
            "two nodes: both daemons' workers on CPU {}, an {} uplink each",
            cfg.place.worker_cpu,
            cfg.place.uplink.name()
        );
    }
    let rows = pods::run(&cfg, &mut |r| {
        println!(
            "  {:<9} {:<12} {}",
            r.test.map_or("", PodTest::name),
            r.path.map_or("", PodPath::name),
            r.result()
        );
    })?;
    let med = pods::medians(&rows);
    print!("\nmedians of {}:\n{}", cfg.reps, pods::table(&med));
    // What request/response through a worker on another CPU cannot go below: the pod is
    // woken from that CPU once each way.
    let floor = pods::wake::measure(cfg.app_cpu, cfg.place.worker_cpu)?;
    println!(
        "\nwake-up floor: a blocking round trip between CPU {} (pods) and CPU {} (worker) \
         p50 {:.1} us, p99 {:.1} us; on CPU {} alone p50 {:.1} us, p99 {:.1} us",
        cfg.app_cpu,
        cfg.place.worker_cpu,
        floor.cross_cpu_p50_us,
        floor.cross_cpu_p99_us,
        cfg.app_cpu,
        floor.same_cpu_p50_us,
        floor.same_cpu_p99_us
    );
    let environment = bench::report::Environment::probe(None);
    // Named as every scenario's report: SCENARIO-UNIXTIME.json.
    let stem = format!("pods-{}", environment.unix_time);
    let report = serde_json::json!({
        "scenario": "pods",
        "config": {
            "app_cpu": cfg.app_cpu,
            "worker_cpu": cfg.place.worker_cpu,
            "main_cpu": cfg.place.main_cpu,
            "rx_mode": cfg.place.mode.name(),
            "uplink": cfg.place.uplink.name(),
            "secs": cfg.secs,
            "reps": cfg.reps,
        },
        "environment": environment,
        "medians": med,
        "wake_floor": floor,
        "rows": rows,
    });
    let path = bench::report::write_named_json(&a.out_dir(), &stem, &report)?;
    println!("\nJSON: {}", path.display());
    Ok(())
}
