//! Paced sending as a port on a wire (`drop_when_full`): the send rate holds the requested
//! rate, and a receiver that cannot keep up loses frames instead of slowing the sender down.
//! One test per binary section, run in sequence, so that nothing else competes for the cores.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memif::{Event, InterfaceConfig, Listener, SocketPath};
use trafgen::{GenConfig, GenReport, Role};

/// Sends per `send` to a sink that copies every frame in (`receive`) or to a peer that
/// connects and then never reads its ring.
fn send_to(send: GenConfig, receive: bool) -> (GenReport, u64) {
    let dir = tempfile::tempdir().unwrap();
    let socket = SocketPath::File(dir.path().join("p.sock"));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let rx = if receive {
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
                ..Default::default()
            };
            s.spawn(move || {
                trafgen::run(&sink, &AtomicBool::new(false))
                    .unwrap()
                    .rx_packets
            })
        } else {
            let (socket, stop) = (socket.clone(), &stop);
            s.spawn(move || {
                let mut l = Listener::bind(&socket, vec![InterfaceConfig::default()]).unwrap();
                let mut held = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    l.poll(Duration::from_millis(5)).unwrap();
                    if let Some(Event::Connected { queues, .. }) = l.next_event() {
                        held.push(queues);
                    }
                }
                0
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let tx = trafgen::run(
            &GenConfig {
                socket: socket.clone(),
                receive: false,
                ..send
            },
            &stop,
        )
        .unwrap();
        stop.store(true, Ordering::Relaxed);
        (tx, rx.join().unwrap())
    })
}

#[test]
fn paced_rates_hold_within_one_percent_and_a_full_ring_loses_frames() {
    for rate in [100_000.0, 1_000_000.0, 4_000_000.0] {
        let (tx, rx) = send_to(
            GenConfig {
                rate_pps: Some(rate),
                drop_when_full: true,
                duration: Duration::from_millis(600),
                sample_every: Duration::from_millis(100),
                ..Default::default()
            },
            true,
        );
        let err = (tx.tx_mpps * 1e6 - rate).abs() / rate;
        println!(
            "rate {rate} pps: sent {} in {:.4} s = {:.4} Mpps ({:.3}% off), offered {}, refused {}, shortfall {}, received {rx}",
            tx.tx_packets,
            tx.tx_window_s,
            tx.tx_mpps,
            err * 100.0,
            tx.tx_offered,
            tx.tx_refused,
            tx.tx_shortfall
        );
        assert_eq!(
            tx.tx_offered,
            tx.tx_packets + tx.tx_refused + tx.tx_shortfall,
            "every scheduled frame is accounted for"
        );
        // The schedule itself is exact; what went out matches it unless the generator was
        // descheduled long enough to write frames off, which it reports as shortfall (the
        // harness shows it; a noisy neighbour can cause it, a broken pacer shows as an error
        // here with no shortfall).
        let offered = tx.tx_offered as f64 / tx.tx_window_s;
        assert!(
            (offered - rate).abs() / rate < 0.01,
            "offered {offered} pps"
        );
        // What went onto the wire (taken by the ring, or refused by it when the sink fell
        // behind: the receiver's loss, not the pacer's) holds the rate.
        let attempted = (tx.tx_packets + tx.tx_refused) as f64 / tx.tx_window_s;
        if tx.tx_shortfall == 0 {
            assert!(
                (attempted - rate).abs() / rate < 0.01,
                "put {attempted} pps on the wire for {rate} pps"
            );
        }
        if tx.tx_refused == 0 && tx.tx_shortfall == 0 {
            assert!(err < 0.01, "send rate {} Mpps for {rate} pps", tx.tx_mpps);
        }
        assert_eq!(rx, tx.tx_packets, "the sink got every frame that was sent");
        // Samples cover the sending time, the last one at its end.
        let last = tx.samples.last().unwrap();
        assert_eq!(last.tx, tx.tx_packets);
        assert!(tx.samples.len() >= 5, "{:?}", tx.samples);
    }

    // A peer that never reads: the ring fills, and then every further frame is refused
    // (lost), never retried, and the run still ends on time.
    let t = Instant::now();
    let (tx, _) = send_to(
        GenConfig {
            rate_pps: Some(200_000.0),
            drop_when_full: true,
            duration: Duration::from_millis(300),
            drain: Duration::from_millis(50),
            ..Default::default()
        },
        false,
    );
    println!("stuck peer: {tx:?}");
    assert_eq!(tx.tx_packets, 1024, "one ring's worth goes out");
    assert!(tx.tx_refused > 10_000, "{}", tx.tx_refused);
    assert_eq!(
        tx.tx_offered,
        tx.tx_packets + tx.tx_refused + tx.tx_shortfall
    );
    assert!(t.elapsed() < Duration::from_secs(5));

    // The same without `drop_when_full`: the full ring holds the sender back instead.
    let (tx, _) = send_to(
        GenConfig {
            rate_pps: Some(200_000.0),
            duration: Duration::from_millis(300),
            drain: Duration::from_millis(50),
            ..Default::default()
        },
        false,
    );
    assert_eq!(
        (tx.tx_packets, tx.tx_offered, tx.tx_refused),
        (1024, 1024, 0)
    );
}

#[test]
fn a_peer_that_leaves_mid_run_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let socket = SocketPath::File(dir.path().join("q.sock"));
    std::thread::scope(|s| {
        let sock = socket.clone();
        s.spawn(move || {
            let mut l = Listener::bind(&sock, vec![InterfaceConfig::default()]).unwrap();
            let t = Instant::now();
            let mut held = Vec::new();
            // Connect, hold the link for 200 ms, then leave.
            while t.elapsed() < Duration::from_millis(200) || held.is_empty() {
                l.poll(Duration::from_millis(5)).unwrap();
                if let Some(Event::Connected { queues, .. }) = l.next_event() {
                    held.push(queues);
                }
            }
            drop(held);
            drop(l);
        });
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        let r = trafgen::run(
            &GenConfig {
                socket: socket.clone(),
                rate_pps: Some(100_000.0),
                drop_when_full: true,
                duration: Duration::from_secs(5),
                receive: false,
                ..Default::default()
            },
            &AtomicBool::new(false),
        )
        .unwrap();
        assert!(r.link_lost, "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
        assert!(r.tx_offered < 400_000, "{r:?}");
    });
}
