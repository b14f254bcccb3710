//! ICMP errors from the forwarding graph (RFC 1812): time exceeded from our address, net
//! unreachable, none where the RFC forbids one, and rate limits per source and per worker. Checked with
//! etherparse.

mod graph_common;

use graph_common::*;

fn icmp_frame(dst: [u8; 4], ttl: u8, t: etherparse::Icmpv4Type, payload: &[u8]) -> Vec<u8> {
    testkit::icmp4_frame(HOST_TO_IF0, [10, 0, 0, 7], dst, ttl, t, payload)
}

/// Checks an ICMP error on its way from us (if0, 10.0.0.1) back to the test host: MACs,
/// addresses, a fresh TTL, both checksums, the 576-byte limit. Returns its type and the
/// datagram it quotes.
fn icmp_error_to_host(frame: &[u8]) -> (etherparse::Icmpv4Type, Vec<u8>) {
    let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
    let Some(etherparse::LinkSlice::Ethernet2(eth)) = p.link else {
        panic!("no ethernet")
    };
    assert_eq!((eth.destination(), eth.source()), (HOST_MAC, MAC[0]));
    let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
        panic!("no ipv4")
    };
    let h = ip.header().to_header();
    assert_eq!(
        (h.source, h.destination, h.time_to_live, h.protocol),
        ([10, 0, 0, 1], [10, 0, 0, 7], 64, etherparse::IpNumber::ICMP),
        "from our address on the receiving interface to the sender"
    );
    assert_eq!(h.header_checksum, h.calc_header_checksum(), "ip checksum");
    assert_eq!(usize::from(h.total_len), frame.len() - 14);
    assert!(h.total_len <= 576, "RFC 1812 4.3.2.3: {}", h.total_len);
    let Some(etherparse::TransportSlice::Icmpv4(icmp)) = p.transport else {
        panic!("no icmp")
    };
    assert_eq!(
        icmp.checksum(),
        icmp.icmp_type().calc_checksum(icmp.payload()),
        "icmp checksum"
    );
    assert_eq!(icmp.bytes5to8(), [0; 4], "unused");
    (icmp.icmp_type(), icmp.payload().to_vec())
}

#[test]
fn expired_ttl_is_answered_with_time_exceeded_from_our_address() {
    let mut s = setup();
    s.rt.trace_add("test-input", 1).unwrap();
    let small = udp(MAC[0], [192, 0, 2, 5], 1, b"hello");
    let big = udp(MAC[0], [192, 0, 2, 5], 1, &[0x5a; 1000]);
    s.input
        .lock()
        .unwrap()
        .extend([(0, small.clone()), (0, big.clone())]);
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 2, "{:?}", s.rt.errors());
    for ((tx, frame), sent) in out.iter().zip([&small, &big]) {
        assert_eq!(*tx, 0, "back out of the interface it came in on");
        let (t, quoted) = icmp_error_to_host(frame);
        assert_eq!(
            t,
            etherparse::Icmpv4Type::TimeExceeded(
                etherparse::icmpv4::TimeExceededCode::TtlExceededInTransit
            )
        );
        let datagram = &sent[14..];
        assert_eq!(
            quoted,
            &datagram[..datagram.len().min(576 - 28)],
            "the header as received (TTL 1) and as much data as fits"
        );
        assert_eq!(quoted[8], 1);
    }
    assert_eq!(out[0].1.len(), 14 + 28 + 20 + 8 + 5, "all of a small one");
    assert_eq!(out[1].1.len(), 14 + 576, "a big one cut at 576 bytes");
    assert_eq!(
        s.rt.errors(),
        vec![
            ("ip4-rewrite", "ttl expired (sent to ip4-icmp-error)", 2),
            (
                "ip4-icmp-error",
                "icmp time exceeded sent (not an error)",
                2
            ),
        ]
    );
    let t = s.rt.show_trace();
    assert!(t.contains("icmp type 11 code 0 to 10.0.0.7"), "{t}");
    assert_eq!(s.pool.available(), s.pool.capacity());
}

#[test]
fn no_route_is_answered_with_net_unreachable() {
    let mut s = setup();
    let sent = udp(MAC[0], [198, 51, 100, 1], 64, b"where to?");
    s.input.lock().unwrap().push((0, sent.clone()));
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
    assert_eq!(out[0].0, 0);
    let (t, quoted) = icmp_error_to_host(&out[0].1);
    assert_eq!(
        t,
        etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Network
        )
    );
    assert_eq!(quoted, &sent[14..]);
    assert_eq!(
        s.rt.errors(),
        vec![
            ("ip4-lookup", "no route", 1),
            (
                "ip4-icmp-error",
                "icmp destination unreachable sent (not an error)",
                1
            ),
        ]
    );
    assert_eq!(s.pool.available(), s.pool.capacity());
}

#[test]
fn no_icmp_error_where_rfc_1812_forbids_one() {
    let mut s = setup();
    let te = etherparse::Icmpv4Type::TimeExceeded(
        etherparse::icmpv4::TimeExceededCode::TtlExceededInTransit,
    );
    let unreachable = etherparse::Icmpv4Type::DestinationUnreachable(
        etherparse::icmpv4::DestUnreachableHeader::Port,
    );
    let expired = ("ip4-rewrite", "ttl expired (sent to ip4-icmp-error)");
    let no_route = ("ip4-lookup", "no route");
    let cases = [
        (
            icmp_frame([192, 0, 2, 5], 1, te.clone(), &[0x45; 28]),
            expired,
            "no icmp error about an icmp error",
        ),
        (
            icmp_frame([198, 51, 100, 1], 64, unreachable, &[0x45; 28]),
            no_route,
            "no icmp error about an icmp error",
        ),
        (
            testkit::ipv4_frame(HOST_TO_IF0, [0, 0, 0, 0], [192, 0, 2, 5], 1, |_| {}, b"x"),
            expired,
            "no icmp error: source not a unicast address",
        ),
        (
            testkit::ipv4_frame(HOST_TO_IF0, [224, 0, 0, 9], [192, 0, 2, 5], 1, |_| {}, b"x"),
            expired,
            "no icmp error: source not a unicast address",
        ),
        (
            testkit::ipv4_frame(
                HOST_TO_IF0,
                [10, 0, 0, 7],
                [255, 255, 255, 255],
                64,
                |_| {},
                b"x",
            ),
            no_route,
            "no icmp error: destination multicast or broadcast",
        ),
        (
            testkit::ipv4_frame(
                HOST_TO_IF0,
                [10, 0, 0, 7],
                [192, 0, 2, 5],
                1,
                |h| h.fragment_offset = etherparse::IpFragOffset::try_new(185).unwrap(),
                &[7; 40],
            ),
            expired,
            "no icmp error about a non-first fragment",
        ),
    ];
    for (frame, (node, why), not_sent) in cases {
        s.rt.clear_errors();
        s.input.lock().unwrap().push((0, frame));
        s.rt.dispatch(&mut s.pool);
        assert_eq!(
            s.rt.errors(),
            vec![(node, why, 1), ("ip4-icmp-error", not_sent, 1)]
        );
        assert!(s.output.lock().unwrap().is_empty(), "{not_sent}");
        assert_eq!(s.pool.available(), s.pool.capacity(), "{not_sent}");
    }
    // ICMP that is not an error (an echo request) does get one, and the first fragment too.
    let echo = etherparse::Icmpv4Type::EchoRequest(etherparse::IcmpEchoHeader { id: 1, seq: 2 });
    s.input.lock().unwrap().extend([
        (0, icmp_frame([192, 0, 2, 5], 1, echo, b"ping")),
        (
            0,
            testkit::ipv4_frame(
                HOST_TO_IF0,
                [10, 0, 0, 7],
                [192, 0, 2, 5],
                1,
                |h| h.more_fragments = true,
                &[7; 40],
            ),
        ),
    ]);
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 2, "{:?}", s.rt.errors());
    for (_, frame) in &out {
        assert!(matches!(
            icmp_error_to_host(frame).0,
            etherparse::Icmpv4Type::TimeExceeded(_)
        ));
    }
}

#[test]
fn icmp_errors_are_rate_limited_per_source_and_per_worker() {
    let mut s = setup();
    let n = 150;
    // One source: its share, then nothing.
    s.input
        .lock()
        .unwrap()
        .extend((0..n).map(|i| (0, udp(MAC[0], [192, 0, 2, 5], 1, &[i as u8; 10]))));
    s.rt.dispatch(&mut s.pool);
    let share = nodes::ip4_icmp_error::DEFAULT_SOURCE_BURST as usize;
    assert_eq!(s.output.lock().unwrap().len(), share);
    assert_eq!(
        s.rt.errors(),
        vec![
            ("ip4-rewrite", "ttl expired (sent to ip4-icmp-error)", n),
            (
                "ip4-icmp-error",
                "icmp time exceeded sent (not an error)",
                share as u64
            ),
            (
                "ip4-icmp-error",
                "icmp error rate limited for its source",
                n - share as u64
            ),
        ]
    );
    // As many sources as packets: the worker's budget (what the first source left of it, and
    // what a millisecond or two refill) is the bound.
    s.input.lock().unwrap().extend((0..n).map(|i| {
        let macs = testkit::Macs {
            dst: MAC[0],
            ..HOST_TO_IF0
        };
        let src = [10, 0, 1 + (i / 200) as u8, (i % 200) as u8 + 10];
        (0, testkit::udp4_frame(macs, src, [192, 0, 2, 5], 1, b"x"))
    }));
    s.rt.dispatch(&mut s.pool);
    let count = |what: &str| {
        s.rt.errors()
            .iter()
            .find(|e| e.0 == "ip4-icmp-error" && e.1 == what)
            .map_or(0, |e| e.2)
    };
    let burst = nodes::ip4_icmp_error::DEFAULT_BURST as u64;
    let sent = count("icmp time exceeded sent (not an error)") - share as u64;
    let worker = count("icmp error rate limited");
    assert!(
        (burst - share as u64..burst).contains(&sent),
        "{sent} sent: {:?}",
        s.rt.errors()
    );
    assert_eq!(sent + worker, n, "{:?}", s.rt.errors());
    assert_eq!(
        count("icmp error rate limited for its source"),
        n - share as u64
    );
    assert_eq!(s.pool.available(), s.pool.capacity());
}

#[test]
fn udp_to_us_is_answered_with_port_unreachable() {
    let mut s = setup();
    let sent = udp(MAC[0], [10, 0, 0, 1], 64, b"anyone?");
    s.input.lock().unwrap().push((0, sent.clone()));
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
    assert_eq!(out[0].0, 0, "back out of the interface it came in on");
    let (t, quoted) = icmp_error_to_host(&out[0].1);
    assert_eq!(
        t,
        etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Port
        )
    );
    assert_eq!(quoted, &sent[14..]);
    assert_eq!(s.pool.available(), s.pool.capacity());
}
