//! Source-address checks through the whole graph: an interface with allowed sources (a pod's)
//! forwards what its pod sends as itself and drops, under one named counter, anything sent
//! as another address, on every path a packet takes (the direct loop, the node's own loop,
//! ip4-input's full checks); ARP may claim only an allowed address.

mod graph_common;

use fib::Ipv4Addr;
use nodes::Learned;

use graph_common::*;

const SPOOFED: (&str, &str) = (
    "ip4-input",
    "ip4 source address not allowed on this interface",
);

/// A UDP frame from the test host's MAC to if0 with source `src`, to 192.0.2.5 (routed
/// out of if1).
fn from(src: [u8; 4], payload: &[u8]) -> Vec<u8> {
    testkit::udp4_frame(HOST_TO_IF0, src, [192, 0, 2, 5], 64, payload)
}

#[test]
fn a_pod_sends_only_as_itself() {
    let s = &mut setup();
    s.set_sources(0, Some(&[([10, 0, 0, 7], 32)]));
    let payload = [7u8; 40];
    let good = from([10, 0, 0, 7], &payload);
    let other_pod = from([10, 0, 0, 77], &payload);
    let outside = from([8, 8, 8, 8], &payload);
    let mut frame = Vec::new();
    for p in [
        &good, &good, &other_pod, &good, &outside, &outside, &good, &good,
    ] {
        frame.push((0, p.clone()));
    }
    s.input.lock().unwrap().extend(frame);
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 5, "{:?}", s.rt.errors());
    assert!(out.iter().all(|(tx, _)| *tx == 1));
    for (_, f) in &out {
        assert_eq!(&f[26..30], &[10, 0, 0, 7], "only the pod's own address");
    }
    assert_eq!(s.rt.errors(), vec![(SPOOFED.0, SPOOFED.1, 3)]);
    assert_eq!(s.pool.available(), s.pool.capacity());

    // Another interface without allowed sources is not checked at all.
    s.rt.clear_errors();
    s.output.lock().unwrap().clear();
    let macs = testkit::Macs {
        src: HOST_MAC,
        dst: MAC[2],
    };
    let f = testkit::udp4_frame(macs, [8, 8, 8, 8], [192, 0, 2, 5], 64, &payload);
    s.input.lock().unwrap().push((2, f));
    s.rt.dispatch(&mut s.pool);
    assert_eq!(s.output.lock().unwrap().len(), 1, "{:?}", s.rt.errors());
}

/// A CNF that routes for others declares what it routes: those sources pass too, and a
/// replaced set takes effect at once.
#[test]
fn a_router_pod_sends_from_the_prefixes_it_declared() {
    let s = &mut setup();
    s.set_sources(0, Some(&[([10, 0, 0, 7], 32), ([172, 20, 0, 0], 16)]));
    let frames = [
        from([10, 0, 0, 7], b"own"),
        from([172, 20, 9, 9], b"routed"),
        from([172, 21, 0, 1], b"not declared"),
    ];
    s.input
        .lock()
        .unwrap()
        .extend(frames.iter().map(|f| (0, f.clone())));
    s.rt.dispatch(&mut s.pool);
    assert_eq!(s.output.lock().unwrap().len(), 2);
    assert_eq!(s.rt.errors(), vec![(SPOOFED.0, SPOOFED.1, 1)]);
    // Now without the routed prefix.
    s.set_sources(0, Some(&[([10, 0, 0, 7], 32)]));
    s.rt.clear_errors();
    s.input
        .lock()
        .unwrap()
        .extend(frames.iter().map(|f| (0, f.clone())));
    s.rt.dispatch(&mut s.pool);
    assert_eq!(s.output.lock().unwrap().len(), 3);
    assert_eq!(s.rt.errors(), vec![(SPOOFED.0, SPOOFED.1, 2)]);
}

/// ARP from a pod may claim only its own address: another's is neither learned nor answered.
#[test]
fn a_pod_cannot_claim_another_address_with_arp() {
    let s = &mut setup();
    s.set_sources(0, Some(&[([10, 0, 0, 7], 32)]));
    s.input.lock().unwrap().extend([
        (0, arp_request([10, 0, 0, 77], [10, 0, 0, 1])),
        (0, arp_request([10, 0, 0, 7], [10, 0, 0, 1])),
    ]);
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 1, "only the honest request is answered");
    assert_eq!(&out[0].1[38..42], &[10, 0, 0, 7]);
    let learned: Vec<Learned> = s.learned.try_iter().collect();
    assert_eq!(
        learned,
        vec![Learned {
            ifindex: 0,
            ip: Ipv4Addr::new(10, 0, 0, 7),
            mac: HOST_MAC
        }]
    );
    assert_eq!(
        s.rt.errors(),
        vec![(
            "arp-input",
            "arp sender address not allowed on this interface",
            1
        )]
    );
}

/// The check does not reorder: in a frame that mixes a pod's own packets with spoofed ones
/// and with packets that leave the fast path for other reasons, every packet ends where it
/// ends when sent alone.
#[test]
fn spoofed_packets_in_a_mixed_frame_go_where_they_go_alone() {
    let payload: Vec<u8> = (0..64u8).collect();
    let good = from([10, 0, 0, 7], &payload);
    let spoofed = from([10, 0, 0, 8], &payload);
    let mut bad_csum = good.clone();
    bad_csum[24] ^= 0xff;
    let to_us = testkit::udp4_frame(HOST_TO_IF0, [10, 0, 0, 7], [10, 0, 0, 1], 64, b"x");
    let mut frame: Vec<(u32, Vec<u8>)> = Vec::new();
    for (n, p) in [
        (3, &good),
        (1, &spoofed),
        (4, &good),
        (2, &to_us),
        (2, &good),
        (1, &spoofed),
        (1, &bad_csum),
        (3, &good),
        (1, &spoofed),
    ] {
        frame.extend((0..n).map(|_| (0, p.clone())));
    }
    let outcome = |frames: Vec<Vec<(u32, Vec<u8>)>>| -> Outcome {
        let mut s = setup();
        s.set_sources(0, Some(&[([10, 0, 0, 7], 32)]));
        s.outcome(frames)
    };
    let alone = outcome(frame.iter().map(|p| vec![p.clone()]).collect());
    // 12 forwarded, and a port unreachable for each datagram to us.
    assert_eq!(alone.0.len(), 14);
    assert!(
        alone.1.contains(&(SPOOFED.0, SPOOFED.1, 3)),
        "{:?}",
        alone.1
    );
    assert_eq!(outcome(vec![frame]), alone);
}
