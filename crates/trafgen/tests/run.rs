//! The generator and the sink against each other, in one process: counts, order and pacing.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use memif::{InterfaceConfig, SocketPath};
use trafgen::{FrameSpec, GenConfig, GenReport, Role};

/// Each run busy-polls two threads, and the tests time pauses: they take the two CPUs in
/// turn.
static CPUS: Mutex<()> = Mutex::new(());

fn pair(send: GenConfig) -> (GenReport, GenReport, Duration) {
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let socket = SocketPath::File(dir.path().join("g.sock"));
    let sink = GenConfig {
        role: Role::Primary,
        socket: socket.clone(),
        iface: InterfaceConfig {
            log2_ring_size: 14,
            ..Default::default()
        },
        spec: send.spec.clone(),
        send: false,
        duration: Duration::from_secs(30),
        // Every frame's payload checked (`rx_corrupt`).
        check_payload: true,
        ..Default::default()
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let rx = s.spawn(|| trafgen::run(&sink, &stop).unwrap());
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        let tx = trafgen::run(
            &GenConfig {
                socket,
                receive: false,
                ..send
            },
            &stop,
        )
        .unwrap();
        let took = t.elapsed();
        (tx, rx.join().unwrap(), took)
    })
}

#[test]
fn every_frame_arrives_in_order_and_is_counted() {
    for (size, buffer_size) in [(64usize, 2048u32), (1500, 2048), (9000, 2048), (9000, 9216)] {
        let (tx, rx, _) = pair(GenConfig {
            spec: FrameSpec {
                size,
                flows: 8,
                dst_ips: 4,
                ..Default::default()
            },
            iface: InterfaceConfig {
                buffer_size,
                ..Default::default()
            },
            count: Some(30_000),
            duration: Duration::from_secs(30),
            ..Default::default()
        });
        assert_eq!(tx.tx_packets, 30_000, "{size}");
        assert_eq!(
            rx.rx_packets, 30_000,
            "{size}: the sender must not leave frames behind"
        );
        assert_eq!(rx.rx_bytes, 30_000 * size as u64);
        assert_eq!(
            (
                rx.rx_foreign,
                rx.rx_reordered,
                rx.rx_seq_gaps,
                rx.rx_bad_desc,
                rx.rx_corrupt
            ),
            (0, 0, 0, 0, 0),
            "{size} B in buffers of {buffer_size}"
        );
        assert!(rx.latency.max_ns > 0 && rx.latency.min_ns <= rx.latency.p50_ns);
        assert!(rx.rx_mpps > 0.0);
    }
}

#[test]
fn paced_sending_does_not_run_ahead_of_its_rate() {
    // 5 000 frames at 50 000 pps cannot take less than 0.1 s (a lower bound only, so a slow
    // machine cannot fail it; a broken pacer sends them in well under a millisecond).
    let (tx, rx, took) = pair(GenConfig {
        count: Some(5_000),
        rate_pps: Some(50_000.0),
        burst: 8,
        duration: Duration::from_secs(30),
        ..Default::default()
    });
    assert_eq!((tx.tx_packets, rx.rx_packets), (5_000, 5_000));
    assert!(
        took >= Duration::from_millis(99),
        "sent 5000 frames at 50 kpps in {took:?}"
    );
    assert!(
        rx.rx_window_s >= 0.09,
        "receive window {} s",
        rx.rx_window_s
    );
}

#[test]
fn bad_settings_are_refused_with_a_reason() {
    let stop = AtomicBool::new(false);
    let bad = [
        GenConfig {
            burst: 0,
            ..Default::default()
        },
        GenConfig {
            rate_pps: Some(-1.0),
            ..Default::default()
        },
        GenConfig {
            spec: FrameSpec {
                size: 20,
                ..Default::default()
            },
            ..Default::default()
        },
    ];
    for cfg in bad {
        let e = trafgen::run(&cfg, &stop).unwrap_err().to_string();
        assert!(
            e.contains("burst") || e.contains("rate") || e.contains("frame size"),
            "{e}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let nobody = GenConfig {
        socket: SocketPath::File(dir.path().join("none.sock")),
        connect_timeout: Duration::from_millis(100),
        ..Default::default()
    };
    let e = trafgen::run(&nobody, &stop).unwrap_err().to_string();
    assert!(
        e.contains("no peer connected") && e.contains("none.sock"),
        "{e}"
    );
}

/// What a [`wire`] did: the frames it forwarded, the most it found at one receive, and its
/// longest gap between two passes of its loop (the host taking its CPU away; its own pause
/// left out).
#[derive(Debug, Default, Clone, Copy)]
struct Wired {
    forwarded: u64,
    most: u64,
    max_gap_us: f64,
    /// When its pause began, if it paused.
    paused_at: Option<std::time::Instant>,
}

/// Runs `attempt` until neither the generator nor the wire was stalled by the host for
/// `limit` or more (the generator's `max_stall_us`, the wire's `max_gap_us`), ten times at
/// most (each run is under half a second): a test whose figures only mean something on an undisturbed run checks the first
/// such run, not one the machine's load made for it. Each disturbed run is printed; if every
/// run was disturbed the test fails saying so.
fn undisturbed(
    limit: Duration,
    mut attempt: impl FnMut() -> (GenReport, Wired),
) -> (GenReport, Wired) {
    let limit_us = limit.as_secs_f64() * 1e6;
    let mut worst = 0f64;
    for i in 1..=10 {
        let (r, w) = attempt();
        let stall = r.max_stall_us.max(w.max_gap_us);
        if stall < limit_us {
            return (r, w);
        }
        println!(
            "attempt {i}: the host stalled the generator {:.0} us, the wire {:.0} us: run again",
            r.max_stall_us, w.max_gap_us
        );
        worst = worst.max(stall);
    }
    panic!("the host stalled every attempt by {limit:?} or more (the worst {worst:.0} us)");
}

/// [`through_wire`], and how long after the generator started the wire's pause began.
fn through_wire_timed(
    cfg: GenConfig,
    pause: (u64, Duration),
) -> (GenReport, Wired, Option<Duration>) {
    let start = std::time::Instant::now();
    let (r, w) = through_wire(cfg, Some(pause), 0);
    (r, w, w.paused_at.map(|t| t.duration_since(start)))
}

/// A wire: a primary with interfaces 0 and 1 that sends out of 1 whatever arrives on 0,
/// stopping once for `pause.1` after it has forwarded `pause.0` frames.
/// With `corrupt_every` N > 0 it flips the last byte of every Nth frame.
fn wire(
    socket: SocketPath,
    stop: &AtomicBool,
    mut pause: Option<(u64, Duration)>,
    corrupt_every: u64,
) -> Wired {
    use memif::{Event, Listener};
    let ifaces = [0u32, 1]
        .map(|id| InterfaceConfig {
            id,
            log2_ring_size: 12,
            ..Default::default()
        })
        .to_vec();
    let mut l = Listener::bind(&socket, ifaces).unwrap();
    let mut pool = buffer::Pool::new(buffer::PoolConfig::default()).unwrap();
    let (mut a, mut b) = (None, None);
    let mut w = Wired::default();
    let mut pkts = Vec::new();
    let mut last_pass: Option<std::time::Instant> = None;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if let Some(t) = last_pass {
            w.max_gap_us = w.max_gap_us.max(t.elapsed().as_secs_f64() * 1e6);
        }
        l.poll(Duration::ZERO).unwrap();
        while let Some(ev) = l.next_event() {
            if let Event::Connected { id, queues, .. } = ev {
                *if id == 0 { &mut a } else { &mut b } = Some(queues);
            }
        }
        let (Some(a), Some(b)) = (a.as_mut(), b.as_mut()) else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        last_pass = Some(std::time::Instant::now());
        pkts.clear();
        if a.rx[0].recv(&mut pool, &mut pkts, 64).is_err() {
            break;
        }
        for (i, &b) in pkts.iter().enumerate() {
            if corrupt_every > 0 && (w.forwarded + i as u64 + 1).is_multiple_of(corrupt_every) {
                *pool.data_mut(b).last_mut().unwrap() ^= 0x5a;
            }
        }
        let mut off = 0;
        while off < pkts.len() {
            match b.tx[0].send(&pool, &pkts[off..]) {
                Ok(n) => off += n,
                Err(_) => return w,
            }
        }
        w.forwarded += pkts.len() as u64;
        w.most = w.most.max(pkts.len() as u64);
        pool.free_bulk(&pkts);
        if let Some((after, d)) = pause
            && w.forwarded >= after
        {
            w.paused_at = Some(std::time::Instant::now());
            std::thread::sleep(d);
            pause = None;
            // The pause is the wire's own, not the host's.
            last_pass = Some(std::time::Instant::now());
        }
    }
    w
}

/// Runs the generator in loop mode per `cfg` (out on interface 0, back on 1) through a
/// [`wire`] with `pause`; returns its report and what the wire did.
fn through_wire(
    cfg: GenConfig,
    pause: Option<(u64, Duration)>,
    corrupt_every: u64,
) -> (GenReport, Wired) {
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let socket = SocketPath::File(dir.path().join("w.sock"));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (ws, stop) = (socket.clone(), &stop);
        let w = s.spawn(move || wire(ws, stop, pause, corrupt_every));
        std::thread::sleep(Duration::from_millis(50));
        let r = trafgen::run(
            &GenConfig {
                socket: socket.clone(),
                iface: InterfaceConfig {
                    id: 0,
                    ..Default::default()
                },
                rx_iface: Some(InterfaceConfig {
                    id: 1,
                    ..Default::default()
                }),
                ..cfg
            },
            stop,
        )
        .unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (r, w.join().unwrap())
    })
}

#[test]
fn pauses_while_sending_are_measured() {
    // The wire stops for 40 ms a third of the way through: nothing comes back meanwhile.
    // Measured on a run the host did not stall by half that, and in which the wire got as
    // far as its pause in time for all of it to fall while the generator sends (a wire the
    // host slowed without one long stall reaches it late).
    let (r, _) = undisturbed(Duration::from_millis(20), || {
        let (r, mut w, at) = through_wire_timed(
            GenConfig {
                rate_pps: Some(200_000.0),
                drop_when_full: true,
                duration: Duration::from_millis(300),
                ..Default::default()
            },
            (20_000, Duration::from_millis(40)),
        );
        if at.is_none_or(|at| at > Duration::from_millis(250)) {
            println!("the wire reached its pause at {at:?}, too late in the run");
            w.max_gap_us = f64::INFINITY;
        }
        (r, w)
    });
    println!(
        "longest rx gap {:.0} us, longest generator pause {:.0} us",
        r.max_rx_gap_us, r.max_stall_us
    );
    assert!(r.max_rx_gap_us >= 39_000.0, "{r:?}");
    // The generator itself kept going (a host stall of ours would show here, never 40 ms
    // of the wire's).
    assert!(
        r.max_stall_us > 0.0 && r.max_stall_us < r.max_rx_gap_us,
        "{r:?}"
    );
}

#[test]
fn loop_mode_sends_on_one_interface_and_receives_on_the_other() {
    let (r, w) = through_wire(
        GenConfig {
            spec: FrameSpec {
                size: 512,
                ..Default::default()
            },
            count: Some(20_000),
            duration: Duration::from_secs(30),
            ..Default::default()
        },
        None,
        0,
    );
    assert_eq!(r.tx_packets, 20_000);
    assert_eq!(w.forwarded, 20_000);
    assert_eq!((r.rx_packets, r.rx_bytes), (20_000, 20_000 * 512));
    assert_eq!((r.rx_seq_gaps, r.rx_reordered, r.rx_foreign), (0, 0, 0));
    // The same interface twice is refused.
    let dir = tempfile::tempdir().unwrap();
    let e = trafgen::run(
        &GenConfig {
            socket: SocketPath::File(dir.path().join("w.sock")),
            rx_iface: Some(InterfaceConfig::default()),
            ..Default::default()
        },
        &AtomicBool::new(false),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("must differ"), "{e}");
}

#[test]
fn payload_checks_count_the_frames_a_wire_damaged() {
    // 1500-byte frames through a wire that flips the last byte of every 1000th: each counted
    // once when checked, none when the wire leaves them alone, none when not checked.
    for (check, every, want) in [(true, 1000, 20), (true, 0, 0), (false, 1000, 0)] {
        let (r, w) = through_wire(
            GenConfig {
                spec: FrameSpec {
                    size: 1500,
                    ..Default::default()
                },
                count: Some(20_000),
                duration: Duration::from_secs(30),
                check_payload: check,
                ..Default::default()
            },
            None,
            every,
        );
        assert_eq!((r.tx_packets, w.forwarded), (20_000, 20_000));
        assert_eq!((r.rx_packets, r.rx_foreign), (20_000, 0));
        assert_eq!(r.rx_corrupt, want, "check {check}, every {every}");
    }
}

/// With a window the generator keeps at most that many frames out: the wire never finds more
/// at a receive, and every frame still comes back. Without one it finds whole bursts.
#[test]
fn a_window_bounds_the_frames_in_flight() {
    let run = |window| {
        let (r, w) = through_wire(
            GenConfig {
                count: Some(20_000),
                duration: Duration::from_secs(30),
                window,
                ..Default::default()
            },
            None,
            0,
        );
        assert_eq!(
            (r.tx_packets, r.rx_packets, w.forwarded),
            (20_000, 20_000, 20_000)
        );
        assert_eq!((r.rx_seq_gaps, r.rx_reordered), (0, 0));
        w.most
    };
    let most = run(Some(5));
    assert!((1..=5).contains(&most), "{most} frames at one receive");
    // Flat out the wire (which takes 64 a receive) falls behind the sender at some point.
    let most = run(None);
    assert!(most > 5, "{most} frames at one receive flat out");
}

#[test]
fn a_warm_up_is_sent_but_left_out_of_the_counts() {
    // The wire stops for 80 ms early in the 150 ms warm-up: its ring (1024 slots, 20 ms at
    // 50 kpps) overflows then, and only then: on a run the host stalled neither side of by
    // half the ring's time.
    let (r, w) = undisturbed(Duration::from_millis(10), || {
        through_wire(
            GenConfig {
                rate_pps: Some(50_000.0),
                drop_when_full: true,
                warmup: Duration::from_millis(150),
                duration: Duration::from_millis(200),
                sample_every: Duration::from_millis(50),
                ..Default::default()
            },
            Some((500, Duration::from_millis(80))),
            0,
        )
    });
    println!("{r:?}");
    // The pause overflowed the ring in the warm-up: 4000 frames against 1024 slots.
    assert!(r.warmup_tx_refused > 2_000, "{r:?}");
    assert!((0.14..0.25).contains(&r.warmup_s), "{r:?}");
    // The window: 200 ms at 50 kpps, every frame sent in it back, and not the warm-up's
    // overflow or 80 ms gap (the other tests of this binary share the CPUs, so the wire may
    // lose a little of its own in the window; far less than the pause did).
    // The window starts when the loop sees the warm-up's end, so a late look moves a few
    // frames across; warm-up and window together are exactly the schedule's 350 ms.
    assert!(
        (9_500..=10_500).contains(&r.tx_offered),
        "{} offered in the window",
        r.tx_offered
    );
    assert_eq!(r.warmup_tx_offered + r.tx_offered, 17_500);
    assert_eq!(
        r.tx_packets + r.tx_refused + r.tx_shortfall,
        r.tx_offered,
        "{r:?}"
    );
    assert!(r.tx_refused < r.warmup_tx_refused / 4, "{r:?}");
    assert!((r.tx_mpps - 0.05).abs() < 0.0025, "{r:?}");
    assert_eq!(r.rx_packets, r.tx_packets, "{r:?}");
    assert_eq!((r.rx_seq_gaps, r.rx_reordered), (0, 0), "{r:?}");
    assert!(r.max_rx_gap_us < 60_000.0, "{r:?}");
    assert!(
        r.samples
            .iter()
            .all(|s| s.t_s <= 0.25 && s.refused <= r.tx_refused)
    );
    // Warm-up and window together are what the wire forwarded, each frame counted once.
    assert_eq!(r.tx_total(), w.forwarded);
    assert_eq!(r.rx_total(), w.forwarded);
    // A warm-up needs a time-bounded run.
    let e = trafgen::run(
        &GenConfig {
            warmup: Duration::from_millis(10),
            count: Some(10),
            ..Default::default()
        },
        &AtomicBool::new(false),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("warm-up"), "{e}");
}

/// Two sending interfaces, one of them in VXLAN, each spreading its frames over three
/// networks: every stream's frames arrive, in order, and the sink's per-stream counts match
/// the generator's, in both roles (the sink reads a VXLAN probe past the outer headers both
/// from its own buffers and, as secondary, from shared memory).
#[test]
fn several_sending_interfaces_and_networks_keep_their_own_streams() {
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let vxlan = trafgen::VxlanSpec {
        src_mac: FrameSpec::default().src_mac,
        dst_mac: FrameSpec::default().dst_mac,
        src_ip: "192.168.0.2".parse().unwrap(),
        dst_ip: "192.168.0.1".parse().unwrap(),
        vni: 100,
    };
    for (gen_role, sink_role) in [
        (Role::Secondary, Role::Primary),
        (Role::Primary, Role::Secondary),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let socket = SocketPath::File(dir.path().join("g.sock"));
        let iface = |id| InterfaceConfig {
            id,
            log2_ring_size: 12,
            s2m_rings: 2,
            m2s_rings: 2,
            ..Default::default()
        };
        let spec = FrameSpec {
            size: 200,
            networks: 3,
            flows: 4,
            ..Default::default()
        };
        let sink = GenConfig {
            role: sink_role,
            socket: socket.clone(),
            iface: iface(0),
            rx_iface: Some(iface(1)),
            send: false,
            duration: Duration::from_secs(30),
            ..Default::default()
        };
        let send = GenConfig {
            role: gen_role,
            socket,
            iface: iface(0),
            spec: FrameSpec {
                vxlan: Some(vxlan.clone()),
                ..spec.clone()
            },
            ports: vec![trafgen::Port {
                iface: iface(1),
                spec: Some(spec.clone()),
            }],
            receive: false,
            count: Some(30_001),
            duration: Duration::from_secs(30),
            ..Default::default()
        };
        let stop = AtomicBool::new(false);
        let (tx, rx) = std::thread::scope(|s| {
            let rx = s.spawn(|| trafgen::run(&sink, &stop).unwrap());
            std::thread::sleep(Duration::from_millis(50));
            let tx = trafgen::run(&send, &stop).unwrap();
            (tx, rx.join().unwrap())
        });
        let role = format!("{gen_role:?} → {sink_role:?}");
        assert_eq!(tx.tx_packets, 30_001, "{role}");
        assert_eq!(rx.rx_packets, 30_001, "{role}");
        // Half the frames each (the first interface takes the odd one), 50 bytes more in VXLAN.
        assert_eq!(rx.rx_bytes, 15_001 * 250 + 15_000 * 200, "{role}");
        assert_eq!(
            (rx.rx_foreign, rx.rx_reordered, rx.rx_seq_gaps),
            (0, 0, 0),
            "{role}"
        );
        // Streams: (interface, queue, network), 2 × 2 × 3 of them, as many received as sent.
        assert_eq!(tx.streams.len(), 12, "{role}");
        assert_eq!(
            tx.streams[7],
            trafgen::StreamInfo {
                iface: 1,
                queue: 0,
                network: 1
            }
        );
        assert_eq!(tx.tx_stream_packets.iter().sum::<u64>(), 30_001);
        let mut rxs = rx.rx_stream_packets.clone();
        rxs.resize(12, 0);
        assert_eq!(rxs, tx.tx_stream_packets, "{role}");
        for net in 0..3 {
            let sent: u64 = (0..12)
                .filter(|&s| tx.streams[s].network == net)
                .map(|s| tx.tx_stream_packets[s])
                .sum();
            assert!(
                (10_000..=10_001).contains(&sent),
                "{role}: network {net}: {sent}"
            );
        }
    }
}

/// A mix of sizes (an IMIX), in both roles: every frame arrives with its own size, in order.
#[test]
fn mixed_sizes_arrive_each_with_its_own_length() {
    for role in [Role::Secondary, Role::Primary] {
        let spec = FrameSpec {
            size: 1518,
            // Three sizes against rings of 2^n slots: a slot holds each of them in turn.
            mix: vec![64, 570, 1518],
            ..Default::default()
        };
        let (tx, rx) = if role == Role::Secondary {
            let (tx, rx, _) = pair(GenConfig {
                spec,
                count: Some(12_000),
                duration: Duration::from_secs(30),
                ..Default::default()
            });
            (tx, rx)
        } else {
            // The copy path: the generator is the primary, the sink connects to it.
            let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
            let dir = tempfile::tempdir().unwrap();
            let socket = SocketPath::File(dir.path().join("g.sock"));
            let stop = AtomicBool::new(false);
            let send = GenConfig {
                role: Role::Primary,
                socket: socket.clone(),
                spec: spec.clone(),
                receive: false,
                count: Some(12_000),
                duration: Duration::from_secs(30),
                ..Default::default()
            };
            std::thread::scope(|s| {
                let tx = s.spawn(|| trafgen::run(&send, &stop).unwrap());
                std::thread::sleep(Duration::from_millis(50));
                let sink = GenConfig {
                    role: Role::Secondary,
                    socket,
                    iface: InterfaceConfig {
                        log2_ring_size: 14,
                        ..Default::default()
                    },
                    spec,
                    send: false,
                    duration: Duration::from_secs(30),
                    check_payload: true,
                    ..Default::default()
                };
                let rx = trafgen::run(&sink, &stop).unwrap();
                (tx.join().unwrap(), rx)
            })
        };
        assert_eq!(tx.tx_packets, 12_000, "{role:?}");
        assert_eq!(rx.rx_packets, 12_000, "{role:?}");
        assert_eq!(rx.rx_bytes, 4_000 * (64 + 570 + 1518), "{role:?}");
        assert_eq!((rx.rx_seq_gaps, rx.rx_reordered, rx.rx_foreign), (0, 0, 0));
        // Each frame the template after its probe, though slots held other lengths before.
        assert_eq!(rx.rx_corrupt, 0, "{role:?}");
    }
}

/// A primary with interface 0 that checks every frame it receives, on every S2M ring,
/// against `template` (all but the probe) and counts them, until `stop`.
fn check_frames(socket: SocketPath, rings: u16, template: &[u8], stop: &AtomicBool) -> u64 {
    use memif::{Event, Listener};
    let iface = InterfaceConfig {
        s2m_rings: rings,
        log2_ring_size: 6,
        ..Default::default()
    };
    let mut l = Listener::bind(&socket, vec![iface]).unwrap();
    let mut pool = buffer::Pool::new(buffer::PoolConfig::default()).unwrap();
    let mut queues = None;
    let (mut got, mut pkts) = (0u64, Vec::new());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        l.poll(Duration::ZERO).unwrap();
        while let Some(ev) = l.next_event() {
            if let Event::Connected { queues: q, .. } = ev {
                queues = Some(q);
            }
        }
        let Some(q) = queues.as_mut() else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        for rx in &mut q.rx {
            pkts.clear();
            if rx.recv(&mut pool, &mut pkts, 64).is_err() {
                return got;
            }
            for &b in &pkts {
                let mut f = Vec::new();
                let mut c = b;
                while c != buffer::NONE {
                    f.extend_from_slice(pool.data(c));
                    c = pool.meta(c).next;
                }
                assert_eq!(f.len(), template.len(), "frame {got}: length");
                let p = trafgen::frame::PROBE_OFFSET;
                let end = p + trafgen::frame::PROBE_LEN;
                assert_eq!(f[..p], template[..p], "frame {got}: headers");
                assert_eq!(f[end..], template[end..], "frame {got}: payload");
                assert!(trafgen::Probe::parse(&f).is_some(), "frame {got}: probe");
                got += 1;
            }
            pool.free_bulk(&pkts);
        }
    }
    got
}

#[test]
fn frames_are_whole_once_the_rings_are_primed() {
    // One flow to one address: once every slot's buffer of a ring has held a whole frame,
    // the sender writes only each frame's probe. Rings of 64 slots, two of them (each primed
    // on its own), thousands of frames: every one must still be the template around its probe.
    for size in [64usize, 1500] {
        let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let socket = SocketPath::File(dir.path().join("p.sock"));
        let spec = FrameSpec {
            size,
            ..Default::default()
        };
        let template = spec.template().unwrap();
        let stop = AtomicBool::new(false);
        let (tx, got) = std::thread::scope(|s| {
            let (cs, stop, t) = (socket.clone(), &stop, &template);
            let c = s.spawn(move || check_frames(cs, 2, t, stop));
            std::thread::sleep(Duration::from_millis(50));
            let tx = trafgen::run(
                &GenConfig {
                    socket: socket.clone(),
                    iface: InterfaceConfig {
                        s2m_rings: 2,
                        log2_ring_size: 6,
                        ..Default::default()
                    },
                    spec: spec.clone(),
                    receive: false,
                    count: Some(5_000),
                    duration: Duration::from_secs(30),
                    ..Default::default()
                },
                stop,
            )
            .unwrap();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (tx, c.join().unwrap())
        });
        assert_eq!(tx.tx_packets, 5_000, "{size}");
        assert_eq!(got, 5_000, "{size}: every frame received and checked");
    }
}
