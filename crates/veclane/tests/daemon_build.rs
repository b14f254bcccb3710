//! The production daemon build (`--no-default-features`) carries no benchmark harness: its
//! dependency graph has neither the generator, the harness with its DPDK and VPP drivers, nor
//! the plotting and progress-bar crates. (`make lint` also builds it with clippy.)

use std::process::Command;

#[test]
fn the_daemon_build_links_no_harness() {
    let tree = |features: &[&str]| {
        let o = Command::new(env!("CARGO"))
            .args(["tree", "-p", "veclane", "-e", "normal", "--prefix", "none"])
            .args(features)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo tree runs");
        assert!(
            o.status.success(),
            "cargo tree: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut names: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let harness = ["bench", "trafgen", "plotters", "indicatif"];
    let full = tree(&[]);
    for h in harness {
        assert!(
            full.contains(&h.to_string()),
            "the default build has {h}: {full:?}"
        );
    }
    let daemon = tree(&["--no-default-features"]);
    for h in harness {
        assert!(
            !daemon.contains(&h.to_string()),
            "the daemon build links {h}"
        );
    }
    for needed in ["daemon", "api", "memif", "nodes", "fib"] {
        assert!(
            daemon.contains(&needed.to_string()),
            "{needed} missing: {daemon:?}"
        );
    }
}
