//! `p2p`: one memif, a sender pinned to one core and a receiver pinned to the other.
//!
//! veclane: `veclane gen --role secondary --tx-only` (frames written in place) →
//! `veclane gen --role primary --rx-only` (the primary copy path the switch uses).
//! testpmd: `dpdk-testpmd` txonly as `net_memif` client → rxonly as server.
//! Trials are interleaved DUT by DUT (A B A B ...) so that drift hits both alike.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::testpmd::{MemifPort, Testpmd};
use crate::trial::Schedule;
pub use crate::trial::{Row, Trial, check_frame_size};
use crate::{BenchError, Dut, Subject};

#[derive(Debug, Clone, Serialize)]
pub struct P2pConfig {
    pub sizes: Vec<usize>,
    /// Sending time per trial.
    pub trial_secs: f64,
    pub reps: usize,
    pub duts: Vec<Dut>,
    pub sender_cpu: usize,
    pub receiver_cpu: usize,
    pub ring_log2: u8,
    pub buffer_size: u32,
    /// Before each trial, wait up to this long for the CPUs to be near (0: do not wait).
    pub wait_near_secs: f64,
    #[serde(skip)]
    pub veclane_bin: PathBuf,
    #[serde(skip)]
    pub testpmd_bin: Option<PathBuf>,
}

/// The memif buffer size a trial at `size` uses (see [`crate::trial::buffer_size_for`]).
pub fn buffer_size_for(cfg: &P2pConfig, size: usize) -> u32 {
    crate::trial::buffer_size_for(cfg.buffer_size, size)
}

/// The columns of a p2p run.
pub fn subjects(cfg: &P2pConfig) -> Vec<Subject> {
    cfg.duts.iter().map(|&d| Subject::plain(d)).collect()
}

/// Runs every (rep, size, DUT) trial, DUTs interleaved; `progress` sees each finished trial.
/// A trial that fails is kept with its reason and the run goes on.
pub fn run(cfg: &P2pConfig, progress: impl FnMut(&Trial)) -> Vec<Trial> {
    let duts = subjects(cfg);
    let schedule = Schedule {
        sizes: &cfg.sizes,
        duts: &duts,
        reps: cfg.reps,
        cpus: (cfg.sender_cpu, cfg.receiver_cpu),
        wait_near_secs: cfg.wait_near_secs,
    };
    crate::trial::run(
        schedule,
        |dut, size, rep| match dut.dut {
            Dut::Veclane => veclane_trial(cfg, size, rep),
            Dut::Testpmd => testpmd_trial(cfg, size, rep),
            other => Err(BenchError::Setup(format!(
                "{other} is an l3fwd DUT; p2p measures veclane and testpmd"
            ))),
        },
        progress,
    )
}

fn veclane_trial(cfg: &P2pConfig, size: usize, rep: usize) -> Result<Trial, BenchError> {
    let fail = |msg: String| BenchError::Trial {
        dut: Subject::plain(Dut::Veclane),
        size,
        msg,
    };
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("p2p.sock");
    let common = |c: &mut Command| {
        c.arg("gen")
            .arg("--socket")
            .arg(&sock)
            .arg("--size")
            .arg(size.to_string())
            .arg("--ring-log2")
            .arg(cfg.ring_log2.to_string())
            .arg("--buffer-size")
            .arg(buffer_size_for(cfg, size).to_string())
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    };
    let mut rx = Command::new(&cfg.veclane_bin);
    common(&mut rx);
    // Pinned to a CPU of its own, the receiver polls: sleeping on the interrupt when its ring
    // runs empty would add wake-ups to what is measured.
    rx.args(["--role", "primary", "--rx-only", "--rx-poll", "--duration"])
        .arg(format!("{}", cfg.trial_secs + 30.0))
        .arg("--cpu")
        .arg(cfg.receiver_cpu.to_string());
    let rx = rx.spawn().map_err(|e| {
        fail(format!(
            "cannot start receiver {}: {e}",
            cfg.veclane_bin.display()
        ))
    })?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sock.exists() {
        if Instant::now() > deadline {
            return Err(fail("receiver did not create its socket".into()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut tx = Command::new(&cfg.veclane_bin);
    common(&mut tx);
    tx.args(["--role", "secondary", "--tx-only", "--duration"])
        .arg(format!("{}", cfg.trial_secs))
        .arg("--cpu")
        .arg(cfg.sender_cpu.to_string());
    let txo = tx
        .output()
        .map_err(|e| fail(format!("cannot start sender: {e}")))?;
    let rxo = rx.wait_with_output()?;
    let parse = |o: &std::process::Output, who: &str| -> Result<serde_json::Value, BenchError> {
        if !o.status.success() {
            return Err(fail(format!(
                "{who} failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        serde_json::from_slice(&o.stdout).map_err(|e| fail(format!("{who} printed no report: {e}")))
    };
    let (t, r) = (parse(&txo, "sender")?, parse(&rxo, "receiver")?);
    let tx_packets = t["tx_packets"].as_u64().unwrap_or(0);
    let rx_packets = r["rx_packets"].as_u64().unwrap_or(0);
    check_frame_size(r["rx_bytes"].as_u64().unwrap_or(0), rx_packets, size)
        .map_err(|e| fail(e.to_string()))?;
    Ok(Trial {
        tx_packets,
        rx_packets,
        mpps: r["rx_mpps"].as_f64().unwrap_or(0.0),
        window_s: r["rx_window_s"].as_f64().unwrap_or(0.0),
        lost: tx_packets as i64 - rx_packets as i64,
        note: format!("bad_desc={} gaps={}", r["rx_bad_desc"], r["rx_seq_gaps"]),
        ..Trial::new(Subject::plain(Dut::Veclane), size, rep)
    })
}

/// testpmd txonly (client, sender CPU) → testpmd rxonly (server, receiver CPU).
pub fn testpmd_trial(cfg: &P2pConfig, size: usize, rep: usize) -> Result<Trial, BenchError> {
    let fail = |msg: &dyn std::fmt::Display| BenchError::Trial {
        dut: Subject::plain(Dut::Testpmd),
        size,
        msg: msg.to_string(),
    };
    let bin = cfg
        .testpmd_bin
        .clone()
        .ok_or_else(|| fail(&"dpdk-testpmd not installed"))?;
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("tp.sock");
    let port = |server| MemifPort::new(server, &sock, 0, cfg.ring_log2, buffer_size_for(cfg, size));
    // Jumbo frames need one mbuf per frame on both sides (txonly gives up on frames larger
    // than its mbuf and quietly sends 64-byte frames instead).
    let mbuf_size =
        (size > 2048).then(|| format!("--mbuf-size={}", (size + 1024).next_multiple_of(1024)));
    let mut rx_app = vec!["--forward-mode=rxonly".to_string()];
    rx_app.extend(mbuf_size.clone());
    let mut rx = Testpmd::spawn(
        &bin,
        &crate::proc::instance_tag("rx"),
        cfg.receiver_cpu,
        cfg.sender_cpu,
        &[port(true)],
        &rx_app,
    )
    .map_err(|e| fail(&e))?;
    rx.cmd("start").map_err(|e| fail(&e))?;
    // --mbuf-size must come before --txpkts: testpmd checks the segment lengths against the
    // mbuf size when it parses --txpkts.
    let mut app = vec!["--forward-mode=txonly".to_string()];
    app.extend(mbuf_size);
    app.push(format!("--txpkts={size}"));
    let mut tx = Testpmd::spawn(
        &bin,
        &crate::proc::instance_tag("tx"),
        cfg.sender_cpu,
        cfg.receiver_cpu,
        &[port(false)],
        &app,
    )
    .map_err(|e| fail(&e))?;
    tx.wait_link_up(0, Duration::from_secs(10))
        .map_err(|e| fail(&e))?;
    tx.cmd("start").map_err(|e| fail(&e))?;
    std::thread::sleep(Duration::from_millis(300));
    let s1 = rx.port_stats(0).map_err(|e| fail(&e))?;
    let t1 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(cfg.trial_secs));
    let s2 = rx.port_stats(0).map_err(|e| fail(&e))?;
    let window = t1.elapsed().as_secs_f64();
    tx.cmd("stop").map_err(|e| fail(&e))?;
    std::thread::sleep(Duration::from_millis(200));
    let txs = tx.port_stats(0).map_err(|e| fail(&e))?;
    let rxs = rx.port_stats(0).map_err(|e| fail(&e))?;
    tx.quit();
    rx.quit();
    let mpps = (s2.rx_packets - s1.rx_packets) as f64 / window / 1e6;
    check_frame_size(
        s2.rx_bytes - s1.rx_bytes,
        s2.rx_packets - s1.rx_packets,
        size,
    )
    .map_err(|e| fail(&e))?;
    Ok(Trial {
        tx_packets: txs.tx_packets,
        rx_packets: rxs.rx_packets,
        mpps,
        window_s: window,
        lost: txs.tx_packets as i64 - rxs.rx_packets as i64,
        note: format!("rx_missed={} rx_errors={}", rxs.rx_missed, rxs.rx_errors),
        ..Trial::new(Subject::plain(Dut::Testpmd), size, rep)
    })
}
