//! `l3fwd`: generator → memif → device under test → memif → generator.
//!
//! The generator is `veclane gen` in loop mode: a memif secondary that writes frames in place
//! into its own shared memory (zero-copy), sends on interface id 0 and receives on id 1 in one
//! loop, pinned to the generator CPU. The DUT listens on one socket with both interfaces and
//! has the other CPU to itself:
//! - veclane: `veclane run`, one polling worker, routing 10.10.1.0/24 (id 0) to 10.10.2.0/24
//!   (id 1) through a static neighbour: ethernet-input, ip4-input (checksum, length, TTL),
//!   ip4-lookup, ip4-rewrite (TTL, checksum, MACs); copy mode single or two.
//! - testpmd: `dpdk-testpmd --forward-mode=io` between two `net_memif` server ports: no lookup
//!   and no header change at all.
//!
//! After every trial the generator's counts are compared with the DUT's own counters.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::testpmd::{MemifPort, Testpmd};
use crate::trial::{Schedule, Trial, check_frame_size};
use crate::{BenchError, CopyMode, Dut, Subject};
use trafgen::GenReport;

#[derive(Debug, Clone, Serialize)]
pub struct L3fwdConfig {
    pub sizes: Vec<usize>,
    /// Sending time per trial.
    pub trial_secs: f64,
    pub reps: usize,
    pub duts: Vec<Subject>,
    pub gen_cpu: usize,
    pub dut_cpu: usize,
    pub ring_log2: u8,
    pub buffer_size: u32,
    /// Frames per generator burst.
    pub burst: usize,
    /// Before each trial, wait up to this long for the CPUs to be near (0: do not wait).
    pub wait_near_secs: f64,
    #[serde(skip)]
    pub veclane_bin: PathBuf,
    #[serde(skip)]
    pub testpmd_bin: Option<PathBuf>,
}

/// The memif buffer size for frames of `size` (see [`crate::trial::buffer_size_for`]).
fn buffer_size_for(cfg: &L3fwdConfig, size: usize) -> u32 {
    crate::trial::buffer_size_for(cfg.buffer_size, size)
}

/// Runs every (rep, size, DUT) trial, DUTs interleaved; `progress` sees each finished trial.
pub fn run(cfg: &L3fwdConfig, progress: impl FnMut(&Trial)) -> Vec<Trial> {
    let schedule = Schedule {
        sizes: &cfg.sizes,
        duts: &cfg.duts,
        reps: cfg.reps,
        cpus: (cfg.gen_cpu, cfg.dut_cpu),
        wait_near_secs: cfg.wait_near_secs,
    };
    crate::trial::run(
        schedule,
        |dut, size, rep| match dut.dut {
            Dut::Veclane => veclane_trial(cfg, dut.copy.unwrap_or(CopyMode::Single), size, rep),
            Dut::Testpmd => testpmd_trial(cfg, size, rep),
        },
        progress,
    )
}

/// Runs the loop-mode generator (in this process, on a thread pinned to the generator CPU)
/// against the DUT listening on `sock`; `read_dut` runs after the generator has finished but
/// before it disconnects, so that the DUT's counters can still be read.
fn generate<R>(
    cfg: &L3fwdConfig,
    sock: &Path,
    size: usize,
    read_dut: impl FnOnce() -> Result<R, String>,
) -> Result<(GenReport, R), String> {
    let iface = |id: u32| memif::InterfaceConfig {
        id,
        name: format!("gen{id}"),
        log2_ring_size: cfg.ring_log2,
        buffer_size: buffer_size_for(cfg, size),
        ..Default::default()
    };
    let gcfg = trafgen::GenConfig {
        role: trafgen::Role::Secondary,
        socket: memif::SocketPath::File(sock.to_path_buf()),
        iface: iface(0),
        rx_iface: Some(iface(1)),
        spec: trafgen::FrameSpec {
            size,
            ..Default::default()
        },
        burst: cfg.burst,
        duration: Duration::from_secs_f64(cfg.trial_secs),
        cpu: Some(cfg.gen_cpu),
        ..Default::default()
    };
    let stop = AtomicBool::new(false);
    let (done_tx, done_rx) = mpsc::channel();
    let (close_tx, close_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (gcfg, stop) = (&gcfg, &stop);
        s.spawn(move || {
            let r = trafgen::Session::connect(gcfg, stop).and_then(|mut session| {
                let rep = session.run(gcfg, stop)?;
                Ok((session, rep))
            });
            match r {
                Ok((session, rep)) => {
                    let _ = done_tx.send(Ok(rep));
                    // Stay connected until the DUT's counters have been read.
                    let _ = close_rx.recv();
                    session.close();
                }
                Err(e) => {
                    let _ = done_tx.send(Err(e.to_string()));
                }
            }
        });
        let rep = done_rx
            .recv()
            .map_err(|_| "generator thread died".to_string())??;
        let dut = read_dut();
        let _ = close_tx.send(());
        check_frame_size(rep.rx_bytes, rep.rx_packets, size)?;
        Ok((rep, dut?))
    })
}

fn trial_from(dut: Subject, size: usize, rep: usize, g: &GenReport) -> Trial {
    Trial {
        tx_packets: g.tx_packets,
        rx_packets: g.rx_packets,
        mpps: g.rx_mpps,
        window_s: g.rx_window_s,
        lost: g.tx_packets as i64 - g.rx_packets as i64,
        note: format!(
            "seq_gaps={} foreign={} gen_ring_full={}",
            g.rx_seq_gaps, g.rx_foreign, g.tx_ring_full
        ),
        ..Trial::new(dut, size, rep)
    }
}

/// The daemon configuration a veclane trial runs: the embedded default's topology, one
/// polling worker on the DUT CPU.
pub fn veclane_config(cfg: &L3fwdConfig, copy: CopyMode, size: usize) -> String {
    let ring = 1u32 << cfg.ring_log2;
    let bsize = buffer_size_for(cfg, size);
    format!(
        r#"[daemon]
workers = [{dut}]
main-core = {main}
mode = "polling"
copy = "{copy}"
copy-engine = "cpu"

[[interface]]
socket = "memif.sock"
id = 0
role = "master"
mac = "02:00:00:00:00:02"
addresses = ["10.10.1.1/24"]
ring-size = {ring}
buffer-size = {bsize}

[[interface]]
socket = "memif.sock"
id = 1
role = "master"
mac = "02:00:00:00:01:02"
addresses = ["10.10.2.1/24"]
ring-size = {ring}
buffer-size = {bsize}

[[neighbor]]
interface = "memif0/1"
ip = "10.10.2.2"
mac = "02:00:00:00:00:01"
"#,
        dut = cfg.dut_cpu,
        main = cfg.gen_cpu,
    )
}

/// A `veclane run` child, stopped with SIGTERM (then SIGKILL) when dropped.
struct Daemon {
    child: Child,
    dir: PathBuf,
}

impl Daemon {
    fn start(bin: &Path, dir: &Path, config: &str) -> Result<Daemon, String> {
        let conf = dir.join("veclane.toml");
        std::fs::write(&conf, config).map_err(|e| format!("writing {}: {e}", conf.display()))?;
        let log = std::fs::File::create(dir.join("daemon.log")).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .arg("run")
            .arg("--config")
            .arg(&conf)
            .arg("--runtime-dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut d = Daemon {
            child,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(dir.join("ctl.sock").exists() && dir.join("memif.sock").exists()) {
            if let Ok(Some(st)) = d.child.try_wait() {
                return Err(format!("daemon exited ({st}): {}", d.log()));
            }
            if Instant::now() > deadline {
                return Err(format!("daemon made no sockets in 10 s: {}", d.log()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(d)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log"))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    fn call(&self, req: &api::Request) -> Result<api::Reply, String> {
        api::Client::connect(&self.dir.join("ctl.sock"))
            .and_then(|mut c| c.call(req))
            .map_err(|e| e.to_string())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn veclane_trial(
    cfg: &L3fwdConfig,
    copy: CopyMode,
    size: usize,
    rep: usize,
) -> Result<Trial, BenchError> {
    let dut = Subject {
        dut: Dut::Veclane,
        copy: Some(copy),
    };
    let fail = |msg: String| BenchError::Trial { dut, size, msg };
    let dir = tempfile::tempdir()?;
    let d = Daemon::start(
        &cfg.veclane_bin,
        dir.path(),
        &veclane_config(cfg, copy, size),
    )
    .map_err(fail)?;
    let (g, (ifs, workers, errors)) = generate(cfg, &dir.path().join("memif.sock"), size, || {
        let ifs = match d.call(&api::Request::ShowInterface { name: None })? {
            api::Reply::Interfaces { interfaces } => interfaces,
            other => return Err(format!("show interface: {other:?}")),
        };
        let workers = match d.call(&api::Request::ShowRuntime) {
            Ok(api::Reply::Runtime { workers }) => workers,
            _ => Vec::new(),
        };
        let errors = match d.call(&api::Request::ShowErrors) {
            Ok(api::Reply::Errors { errors }) => errors,
            _ => Vec::new(),
        };
        Ok((ifs, workers, errors))
    })
    .map_err(fail)?;
    let mut t = trial_from(dut, size, rep, &g);
    let by = |id: u32| ifs.iter().find(|i| i.id == id).cloned().unwrap_or_default();
    let (a, b) = (by(0), by(1));
    if a.rx_packets != g.tx_packets {
        t.disagreements.push(format!(
            "generator sent {} but memif0/0 received {}",
            g.tx_packets, a.rx_packets
        ));
    }
    if b.tx_packets != g.rx_packets {
        t.disagreements.push(format!(
            "generator received {} but memif0/1 sent {}",
            g.rx_packets, b.tx_packets
        ));
    }
    t.node_ns = node_costs(&workers);
    for e in errors {
        t.note
            .push_str(&format!(" {}:{}={}", e.node, e.reason, e.count));
    }
    t.note.push_str(&format!(" tx_no_room={}", b.tx_no_room));
    drop(d);
    Ok(t)
}

/// Nanoseconds per packet in each node that saw packets, summed over workers, with the total
/// last. Polling input nodes include their empty polls (as VPP's `show runtime` does).
pub fn node_costs(workers: &[api::WorkerRuntime]) -> Vec<(String, f64)> {
    let mut acc: Vec<(String, u64, u64)> = Vec::new();
    for w in workers {
        for n in &w.nodes {
            if n.vectors == 0 {
                continue;
            }
            match acc.iter_mut().find(|(name, _, _)| *name == n.name) {
                Some(e) => {
                    e.1 += n.clocks;
                    e.2 += n.vectors;
                }
                None => acc.push((n.name.clone(), n.clocks, n.vectors)),
            }
        }
    }
    // Packets through the graph: what the input nodes produced.
    let packets = workers
        .iter()
        .flat_map(|w| &w.nodes)
        .filter(|n| n.kind == "input")
        .map(|n| n.vectors)
        .sum::<u64>()
        .max(1);
    let mut v: Vec<(String, f64)> = acc
        .iter()
        .map(|(n, c, vec)| (n.clone(), *c as f64 / *vec as f64))
        .collect();
    let total: u64 = acc.iter().map(|e| e.1).sum();
    v.push(("total".into(), total as f64 / packets as f64));
    v
}

fn testpmd_trial(cfg: &L3fwdConfig, size: usize, rep: usize) -> Result<Trial, BenchError> {
    let dut = Subject::plain(Dut::Testpmd);
    let fail = |msg: String| BenchError::Trial { dut, size, msg };
    let bin = cfg
        .testpmd_bin
        .clone()
        .ok_or_else(|| fail("dpdk-testpmd not installed".into()))?;
    let dir = tempfile::tempdir()?;
    let sock = dir.path().join("memif.sock");
    let port = |id| MemifPort {
        server: true,
        socket: sock.clone(),
        id,
        rsize_log2: cfg.ring_log2,
        bsize: buffer_size_for(cfg, size),
        secret: None,
    };
    let mut app = vec!["--forward-mode=io".to_string()];
    if size > 2048 {
        app.push(format!(
            "--mbuf-size={}",
            (size + 1024).next_multiple_of(1024)
        ));
    }
    let mut tp = Testpmd::spawn(
        &bin,
        &format!("vl{}fwd", std::process::id()),
        cfg.dut_cpu,
        cfg.gen_cpu,
        &[port(0), port(1)],
        &app,
    )
    .map_err(fail)?;
    tp.cmd("start").map_err(fail)?;
    let (g, (p0, p1)) = generate(cfg, &sock, size, || {
        Ok((tp.port_stats(0)?, tp.port_stats(1)?))
    })
    .map_err(fail)?;
    let mut t = trial_from(dut, size, rep, &g);
    tp.quit();
    if p0.rx_packets != g.tx_packets {
        t.disagreements.push(format!(
            "generator sent {} but port 0 received {}",
            g.tx_packets, p0.rx_packets
        ));
    }
    if p1.tx_packets != g.rx_packets {
        t.disagreements.push(format!(
            "generator received {} but port 1 sent {}",
            g.rx_packets, p1.tx_packets
        ));
    }
    t.note.push_str(&format!(
        " port0 rx_missed={} port1 tx_errors={}",
        p0.rx_missed, p1.tx_errors
    ));
    Ok(t)
}

/// The heading of an l3fwd table.
pub fn head(cfg: &L3fwdConfig) -> Vec<String> {
    let mut h = vec![
        format!(
            "L3 forwarding over memif: generator (veclane gen, zero-copy secondary, sends on id 0 and receives on id 1 in one loop) on CPU {}, DUT on CPU {}; ring 2^{}, buffer {} B, burst {}, {} trial(s) of {} s per DUT and size, DUTs interleaved",
            cfg.gen_cpu,
            cfg.dut_cpu,
            cfg.ring_log2,
            cfg.buffer_size,
            cfg.burst,
            cfg.reps,
            cfg.trial_secs
        ),
        "veclane/single and veclane/two: one polling worker, ethernet-input, ip4-input, ip4-lookup, ip4-rewrite (TTL, checksum, MACs); payload copied once peer to peer (single) or into local buffers and out (two); testpmd: --forward-mode=io, no lookup and no header change".into(),
        "rate = continuous throughput: frames received per second at 100% offered load (the generator sends flat out)".into(),
        crate::report::PLACEMENT_LEGEND.into(),
        crate::report::CONVENTIONS.into(),
    ];
    if cfg.sizes.iter().any(|&z| z > cfg.buffer_size as usize) {
        h.push(format!(
            "frames larger than {} B use 9216-byte memif buffers in every DUT",
            cfg.buffer_size
        ));
    }
    h
}

/// Where veclane's time goes: nanoseconds per packet per node, one line per size and mode.
pub fn node_table(cfg: &L3fwdConfig, rows: &[crate::trial::Row]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        for (n, _) in &r.node_ns {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    if names.is_empty() {
        return s;
    }
    // "total" last.
    names.retain(|n| n != "total");
    names.push("total".into());
    let _ = writeln!(
        s,
        "veclane show runtime, ns per packet (median of the trials above; memif-input includes empty polls):"
    );
    let mut header = format!("{:>6} {:<16}", "size", "dut");
    for n in &names {
        let _ = write!(header, " {:>w$}", n, w = n.len().max(7));
    }
    let _ = writeln!(s, "{header}");
    for &size in &cfg.sizes {
        for r in rows
            .iter()
            .filter(|r| r.size == size && !r.node_ns.is_empty())
        {
            let mut line = format!("{size:>6} {:<16}", r.dut.to_string());
            for n in &names {
                let w = n.len().max(7);
                match r.node_ns.iter().find(|(m, _)| m == n) {
                    Some((_, v)) => {
                        let _ = write!(line, " {v:>w$.1}");
                    }
                    None => {
                        let _ = write!(line, " {:>w$}", "-");
                    }
                }
            }
            let _ = writeln!(s, "{line}");
        }
    }
    s
}
