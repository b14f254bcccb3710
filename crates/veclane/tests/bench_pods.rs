//! `veclane bench pods` end to end, short tests: every path (one node and two, veclane and
//! the kernel, and the veth candidate on both its drivers) carries every test, each row has
//! its figure and its CPU time, and every packet the pods sent is received or counted as
//! dropped. Never how fast: speed is what the scenario itself reports.

use std::process::Command;

mod kernel_common;

#[test]
fn pods_measures_every_path_and_every_loss_is_counted() {
    if let Some(why) = kernel_common::unable() {
        eprintln!("the pods scenario {why}: skipped");
        return;
    }
    let (stdout, rows) = run(&[]);
    assert_eq!(rows.len(), 20, "five tests, four paths: {stdout}");
    // The table of medians names every test and path.
    for w in [
        "tcp-1",
        "udp-1400",
        "rr",
        "veclane-tap",
        "kernel-veth",
        "veclane-vxlan",
        "kernel-vxlan",
    ] {
        assert!(stdout.contains(w), "{w}: {stdout}");
    }
    assert!(
        !stdout.contains("veclane-veth"),
        "the candidate only when named"
    );
    // The candidate pod interface, a veth driven through AF_PACKET or AF_XDP, when named, on
    // either driver (here: two runs at once would see each other's namespaces).
    for driver in ["af-packet", "af-xdp"] {
        let args = [
            "--pod-paths",
            "veclane-veth",
            "--pod-tests",
            "tcp-1,udp-64,rr",
            "--pod-uplink",
            driver,
        ];
        let (stdout, rows) = run(&args);
        assert_eq!(rows.len(), 3, "{stdout}");
        assert!(stdout.contains(&format!("veth driven through {driver}")));
    }
}

/// `bench pods` with short tests and `args`: its output and its rows, each checked.
fn run(args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veclane"))
        .args(["bench", "pods", "--reps", "1", "--trial-secs", "1", "--out"])
        .arg(out.path())
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let json = stdout
        .lines()
        .find_map(|l| l.strip_prefix("JSON: "))
        .unwrap_or_else(|| panic!("no JSON path in\n{stdout}"));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    let rows = r["rows"].as_array().unwrap();
    for row in rows {
        let (test, path) = (row["test"].as_str().unwrap(), row["path"].as_str().unwrap());
        let figure = match test {
            "tcp-1" | "tcp-4" => &row["gbps"],
            "udp-64" | "udp-1400" => &row["kpps"],
            _ => &row["rr_per_s"],
        };
        assert!(figure.as_f64().unwrap() > 0.0, "{row}");
        assert!(row["cpus_busy"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(
            row["dut_cpus"].is_null(),
            path.starts_with("kernel"),
            "{row}"
        );
        if test.starts_with("tcp") {
            assert!(row["unaccounted"].is_null(), "{row}");
        } else {
            assert_eq!(row["unaccounted"], 0, "a loss nobody counted: {row}");
        }
        if test == "rr" {
            let (p50, p99) = (
                row["p50_us"].as_f64().unwrap(),
                row["p99_us"].as_f64().unwrap(),
            );
            assert!(0.0 < p50 && p50 <= p99, "{row}");
        }
    }
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&netns.stdout);
    assert!(!left.contains("vlbench-"), "namespaces left: {left}");
    (stdout.into_owned(), rows.clone())
}
