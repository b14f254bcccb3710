//! DPDK's l3fwd example as a device under test: real frames from our generator, routed by
//! l3fwd's LPM table from memif id 0 to id 1, none lost at a low rate (200 kpps for 0.5 s),
//! cross-checked with l3fwd's port counters read over EAL telemetry.
//!
//! Builds nothing: the binary comes from `scripts/build-dpdk-l3fwd.sh` (setup.sh runs it). Skips
//! when it is missing, except under CI.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use bench::dpdk_l3fwd::{self, DpdkL3fwdConfig};

fn l3fwd_or_skip() -> Option<PathBuf> {
    let built =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/dpdk-l3fwd/dpdk-l3fwd");
    match dpdk_l3fwd::find().or_else(|| built.is_file().then_some(built)) {
        Some(p) => Some(p),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI must build dpdk-l3fwd (scripts/setup.sh runs scripts/build-dpdk-l3fwd.sh)")
        }
        None => {
            eprintln!(
                "SKIP: dpdk-l3fwd not built (scripts/build-dpdk-l3fwd.sh; needs dpdk-doc and libdpdk-dev)"
            );
            None
        }
    }
}

#[test]
fn l3fwd_routes_generated_frames_from_id_0_to_id_1() {
    let Some(bin) = l3fwd_or_skip() else { return };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (gen_cpu, dut_cpu) = (0, usize::from(cpus > 1));
    let cfg = DpdkL3fwdConfig {
        file_prefix: format!("it{}l3fwd", std::process::id()),
        ..DpdkL3fwdConfig::new(dut_cpu)
    };
    let mut l3 = dpdk_l3fwd::spawn(&bin, &cfg).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}", l3.command_line());

    // We are the memif client, so our ring sizes are the ones used. The return ring is 4x the
    // forward ring: this host stalls either process now and then (for up to 48 ms in our
    // runs), and after a stall l3fwd moves everything queued towards it at once; it drops,
    // silently (net_memif counts no tx errors), what its tx ring cannot take. Our loop takes at
    // most 32 frames per turn and gives back up to 256, so the return ring holds at most what
    // the forward ring held plus a little, and loss here means a forwarding fault.
    let iface = |id: u32, ring_log2: u8| memif::InterfaceConfig {
        id,
        name: format!("gen{id}"),
        log2_ring_size: ring_log2,
        buffer_size: cfg.buffer_size,
        ..Default::default()
    };
    let spec = trafgen::FrameSpec::default();
    // l3fwd's route file sends 10.10.2.0/24 out of port 1 (memif id 1).
    assert_eq!(spec.dst_ip.octets()[..3], [10, 10, 2]);
    let gcfg = trafgen::GenConfig {
        role: trafgen::Role::Secondary,
        socket: memif::SocketPath::File(l3.memif_socket()),
        iface: iface(0, cfg.ring_log2),
        rx_iface: Some(iface(1, cfg.ring_log2 + 2)),
        spec,
        burst: 32,
        rate_pps: Some(200_000.0),
        duration: Duration::from_millis(500),
        cpu: Some(gen_cpu),
        ..Default::default()
    };
    let stop = AtomicBool::new(false);
    let (connected_tx, connected_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let (close_tx, close_rx) = mpsc::channel::<()>();
    let (g, ports) = std::thread::scope(|s| {
        let (gcfg, stop) = (&gcfg, &stop);
        s.spawn(move || {
            let r = trafgen::Session::connect(gcfg, stop).and_then(|mut session| {
                // Send only once l3fwd forwards: until its link check has seen both links up
                // (up to 100 ms) nothing drains our ring, and the backlog a rate-limited
                // sender then catches up on in one rush can overflow l3fwd's tx ring.
                let _ = connected_tx.send(());
                let _ = go_rx.recv();
                let rep = session.run(gcfg, stop)?;
                Ok((session, rep))
            });
            match r {
                Ok((session, rep)) => {
                    let _ = done_tx.send(Ok(rep));
                    // Stay connected while l3fwd's port counters are read (net_memif zeroes
                    // them when its peer leaves).
                    let _ = close_rx.recv();
                    session.close();
                }
                Err(e) => {
                    let _ = done_tx.send(Err(e.to_string()));
                }
            }
        });
        if connected_rx.recv().is_ok() {
            if let Err(e) = l3.wait_forwarding(Duration::from_secs(5)) {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                let _ = go_tx.send(());
                panic!("{e}");
            }
            let _ = go_tx.send(());
        }
        let g = done_rx.recv().expect("generator thread");
        let ports = g.is_ok().then(|| (l3.port_stats(0), l3.port_stats(1)));
        let _ = close_tx.send(());
        (g, ports)
    });
    let g = g.unwrap_or_else(|e| panic!("generator: {e}\nl3fwd log:\n{}", l3.log_tail(30)));
    let (p0, p1) = ports.expect("generator ran");
    let (p0, p1) = (p0.expect("port 0 stats"), p1.expect("port 1 stats"));
    eprintln!(
        "generator: sent {} received {} (ring full {}, foreign {}, gaps {}, latency max {} us); l3fwd port 0 rx {} tx {} missed {}, port 1 rx {} tx {} tx errors {}",
        g.tx_packets,
        g.rx_packets,
        g.tx_ring_full,
        g.rx_foreign,
        g.rx_seq_gaps,
        g.latency.max_ns / 1000,
        p0.rx_packets,
        p0.tx_packets,
        p0.rx_missed,
        p1.rx_packets,
        p1.tx_packets,
        p1.tx_errors
    );
    // 0.5 s at 200 kpps.
    assert!(
        (90_000..=101_000).contains(&g.tx_packets),
        "sent {}",
        g.tx_packets
    );
    assert_eq!(g.rx_packets, g.tx_packets, "frames lost at 200 kpps");
    assert_eq!((g.rx_foreign, g.rx_seq_gaps, g.rx_bad_desc), (0, 0, 0));
    // Every frame came in on port 0 and left on port 1: none routed back, none dropped.
    assert_eq!(p0.rx_packets, g.tx_packets);
    assert_eq!(p1.tx_packets, g.rx_packets);
    assert_eq!((p0.tx_packets, p1.rx_packets), (0, 0));
    assert_eq!((p0.rx_missed, p1.tx_errors), (0, 0));
    let log = l3.stop();
    assert!(
        log.contains("LPM: Adding route 10.10.2.0 / 24 (1)"),
        "{log}"
    );
}
