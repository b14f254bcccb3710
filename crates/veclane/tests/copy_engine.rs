//! The daemon's copy engines end to end: DSA refused without a device, `use-dma` on the
//! software model of a DSA work queue forwarding byte for byte through page faults, `auto`
//! saying why it is the CPU, and `veclane copy-engine check`.

mod daemon_common;

use std::time::Duration;

use daemon_common::*;

/// `copy-engine = "dsa"` on a host without a usable work queue: the daemon refuses to start,
/// saying why (no device here), rather than running without the offload it was asked for.
#[test]
fn dsa_without_a_device_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("veclane.toml");
    std::fs::write(&cfg, "[daemon]\ncopy-engine = \"dsa\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_veclane"))
        .args(["run", "--config"])
        .arg(&cfg)
        .arg("--runtime-dir")
        .arg(dir.path())
        .env("VECLANE_DSA_SYSFS", dir.path().join("no-sysfs"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("no usable DSA work queue"), "{err}");
    assert!(err.contains("no-sysfs"), "{err}");
}

/// `use-dma` on both interfaces, on the software model of a DSA work queue (no device here):
/// every receive and transmit copy of at least 256 bytes goes to the model as descriptors,
/// one in two of which stops part way with a page fault the engine finishes on the CPU.
/// The frames arrive byte for byte, and `show copy-engine` counts the descriptors and the
/// recoveries.
#[test]
fn use_dma_on_the_model_forwards_byte_for_byte_through_faults() {
    let cfg = two_port_config_copy("polling", "two", "cpu").replace(
        "copy-engine = \"cpu\"",
        "copy-engine = \"cpu\"\ndsa-queue = \"model\"\ndsa-model-fault-every = 2\n\
         dsa-inline-below = 400",
    );
    let cfg = cfg.replace("role = \"master\"", "role = \"master\"\nuse-dma = true");
    let d = Daemon::start(&cfg);
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    let (m0, m1) = (mac(MAC0), mac(MAC1));
    d.ok("set ip neighbor memif0/1 10.0.1.2 02:00:00:00:b1:00");
    let text = d.ok("show interface memif0/0");
    assert!(text.contains("copy dsa model"), "{text}");

    let big = |i: usize| -> Vec<u8> {
        let len = 300 + (i * 53) % 1100;
        (0..len)
            .map(|k| (k as u8).wrapping_mul(7) ^ (i as u8))
            .collect()
    };
    let mut got = Vec::new();
    let mut sent = Vec::new();
    for round in 0..4 {
        let batch: Vec<Vec<u8>> = (0..50)
            .map(|k| {
                let i = round * 50 + k;
                udp(POD0, m0, [10, 0, 0, 2], [10, 0, 1, 2], 64, &big(i))
            })
            .collect();
        pods.send(0, &batch);
        sent.extend(batch);
        got.extend(pods.recv(1, 50, Duration::from_secs(10)));
    }
    assert_eq!(got.len(), sent.len(), "{}", d.ok("show errors"));
    for (i, f) in got.iter().enumerate() {
        assert_routed_udp(f, (m1, POD1), &big(i), i);
    }
    // Frames under dsa-inline-below (400 B: a UDP payload under 358 B) are copied by memif
    // at once, on receive and on transmit, and counted.
    let short = (0..200).filter(|&i| big(i).len() + 42 < 400).count() as u64;
    assert!(short > 0);

    // The counters reach the control thread when the worker does its housekeeping.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let info = loop {
        let r = d.api().call(&api::Request::ShowCopyEngine).unwrap();
        let api::Reply::CopyEngine { info } = r else {
            panic!("{r:?}")
        };
        let done: u64 = info
            .engines
            .iter()
            .filter(|e| e.role == "use-dma")
            .map(|e| e.copies + e.short)
            .sum();
        if done >= 400 || std::time::Instant::now() > deadline {
            break info;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dma: Vec<&api::EngineInfo> = info
        .engines
        .iter()
        .filter(|e| e.role == "use-dma")
        .collect();
    assert_eq!(dma.len(), 2, "one per node of the worker: {info:?}");
    let sum = |f: fn(&api::EngineInfo) -> u64| dma.iter().map(|e| f(e)).sum::<u64>();
    assert!(
        sum(|e| e.copies + e.short) >= 400,
        "rx and tx of 200 frames: {info:?}"
    );
    assert!(sum(|e| e.descriptors) > 0, "{info:?}");
    assert!(sum(|e| e.recovered) > 0, "the injected faults: {info:?}");
    assert!(dma.iter().all(|e| e.tripped.is_none()), "{info:?}");
    assert!(
        dma.iter().all(|e| e.kind == api::CopyEngine::Dsa),
        "{info:?}"
    );
    assert!(info.dsa_source.contains("model"), "{info:?}");
    assert!(
        sum(|e| e.short) >= 2 * short,
        "{short} frames under 400 B, each way: {info:?}"
    );
    // The memory the device copies to and from was faulted in before it did.
    for what in [
        "worker 0 buffers: ",
        "memif0/0 regions: ",
        "memif0/1 regions: ",
    ] {
        assert!(
            info.registered
                .iter()
                .any(|r| r.starts_with(what) && r.ends_with("MB, populated")),
            "{what}: {info:?}"
        );
    }
    let text = d.ok("show copy-engine");
    eprintln!("{text}");
    assert!(text.contains("recovered on the CPU"), "{text}");
    assert!(text.contains("software model"), "{text}");
}

/// `copy-engine = "auto"` without a device: the CPU copies, and `show copy-engine` says why.
#[test]
fn auto_without_a_device_is_the_cpu_and_says_why() {
    let cfg = two_port_config_copy("adaptive", "single", "auto");
    let d = Daemon::start_env(&cfg, &[("VECLANE_DSA_SYSFS", "/nonexistent-dsa")]);
    let text = d.ok("show copy-engine");
    assert!(text.contains("copy-engine auto"), "{text}");
    assert!(
        text.contains("DSA not in use") && text.contains("/nonexistent-dsa"),
        "{text}"
    );
    assert!(text.contains("memif-input default: cpu"), "{text}");
}

/// `veclane copy-engine check`: every backend verified byte for byte (DSA on the model, as
/// no device is here), with the figures as JSON; without a queue, DSA is reported as not
/// tested with the reason, and the check still passes for the rest.
#[test]
fn copy_engine_check_verifies_every_backend_and_says_why_dsa_is_missing() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_veclane"))
        .args(["copy-engine", "check", "--model", "--ms", "5"])
        .args(["--sizes", "64,1500,65536", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = j
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["cpu", "thread", "dsa"], "{j}");
    for b in j.as_array().unwrap() {
        let sizes = b["sizes"].as_array().unwrap();
        assert_eq!(sizes.len(), 3, "{b}");
        assert!(sizes.iter().all(|s| s["mismatched"] == 0), "{b}");
    }
    assert!(j[2]["device"].as_str().unwrap().contains("model"), "{j}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_veclane"))
        .args(["copy-engine", "check", "--ms", "5", "--sizes", "1500"])
        .env("VECLANE_DSA_SYSFS", "/nonexistent-dsa")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("dsa: not tested: no usable DSA work queue")
            && text.contains("/nonexistent-dsa"),
        "{text}"
    );
    assert!(text.contains("thread: every byte verified"), "{text}");
}
