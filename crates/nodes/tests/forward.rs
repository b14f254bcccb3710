//! The forwarding nodes as one graph, checked with an independent parser (etherparse): two VRFs
//! with the same prefix forward independently; TTL, checksum, MACs and payload are right; every
//! kind of bad packet is dropped under its own named counter and no buffer is lost. Packets the
//! graph cannot forward get the ICMP error RFC 1812 asks for (or, where it forbids one, a
//! counted drop); unresolved next hops are asked for with ARP and forwarded once learned.

mod graph_common;

use fib::Ipv4Addr;
use nodes::Learned;

use graph_common::*;

#[test]
fn forwards_per_vrf_with_correct_headers() {
    let mut s = setup();
    let payload: Vec<u8> = (0..200u8).collect();
    s.input.lock().unwrap().extend([
        (0, udp(MAC[0], [192, 0, 2, 5], 64, &payload)),
        (2, udp(MAC[2], [192, 0, 2, 5], 64, &payload)),
    ]);
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 2, "errors: {:?}", s.rt.errors());
    for ((tx_if, frame), (want_if, want_dst, want_src)) in
        out.iter().zip([(1u32, NB1, MAC[1]), (3, NB3, MAC[3])])
    {
        assert_eq!(*tx_if, want_if);
        let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
        let Some(etherparse::LinkSlice::Ethernet2(eth)) = p.link else {
            panic!("no ethernet")
        };
        assert_eq!((eth.destination(), eth.source()), (want_dst, want_src));
        let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
            panic!("no ipv4")
        };
        assert_eq!(ip.header().ttl(), 63);
        let h = ip.header().to_header();
        assert_eq!(
            h.header_checksum,
            h.calc_header_checksum(),
            "incremental checksum"
        );
        let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
            panic!("no udp")
        };
        assert_eq!(u.payload(), &payload[..]);
    }
    assert!(s.rt.errors().is_empty());
    assert_eq!(s.pool.available(), s.pool.capacity());
}

#[test]
fn every_bad_packet_has_its_own_counter() {
    let mut s = setup();
    let good = udp(MAC[0], [192, 0, 2, 5], 64, b"x");
    let mut bad_csum = good.clone();
    bad_csum[24] ^= 0xff;
    let mut options = good.clone();
    options[14] = 0x46; // IHL 6
    let mut too_long = good.clone();
    too_long[17] = 0xff; // total length beyond the frame
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut unknown = good.clone();
    unknown[12..14].copy_from_slice(&[0x88, 0xb5]);
    let mut ttl0 = udp(MAC[0], [192, 0, 2, 5], 0, b"x");
    ttl0[24..26].copy_from_slice(&[0, 0]);
    let c = wire::checksum::checksum(&ttl0[14..34]);
    ttl0[24..26].copy_from_slice(&c.to_be_bytes());
    let to_us = udp(MAC[0], [10, 0, 0, 1], 64, b"x");
    let mut bad_udp_to_us = to_us.clone();
    *bad_udp_to_us.last_mut().unwrap() ^= 0xff; // payload changed under the UDP checksum
    let mut tcp_to_us = to_us.clone();
    tcp_to_us[23] = 6;
    tcp_to_us[24..26].copy_from_slice(&[0, 0]);
    let c = wire::checksum::checksum(&tcp_to_us[14..34]);
    tcp_to_us[24..26].copy_from_slice(&c.to_be_bytes());
    /// The counters a packet moves, by one each: (node, error).
    type Counted = Vec<(&'static str, &'static str)>;
    let drop = |node, err| vec![(node, err)];
    // (rx interface, frame, what it is counted as, frames that leave).
    let cases: Vec<(u32, Vec<u8>, Counted, usize)> = vec![
        (
            0,
            good[..10].to_vec(),
            drop("ethernet-input", "frame shorter than an Ethernet header"),
            0,
        ),
        (
            0,
            udp(MAC[1], [192, 0, 2, 5], 64, b"x"),
            drop("ethernet-input", "l3 mac mismatch"),
            0,
        ),
        (0, unknown, drop("ethernet-input", "unknown ethertype"), 0),
        (
            0,
            arp,
            drop("arp-input", "arp packet malformed or not ethernet/ipv4"),
            0,
        ),
        (9, good.clone(), drop("ethernet-input", "interface down"), 0),
        (
            0,
            good[..30].to_vec(),
            drop("ip4-input", "ip4 header malformed or truncated"),
            0,
        ),
        (
            0,
            bad_csum,
            drop("ip4-input", "ip4 header checksum error"),
            0,
        ),
        (
            0,
            options,
            drop("ip4-input", "ip4 options present (not forwarded)"),
            0,
        ),
        (0, too_long, drop("ip4-input", "ip4 length > l2 length"), 0),
        (0, ttl0, drop("ip4-input", "ip4 ttl is zero"), 0),
        (
            0,
            tcp_to_us,
            drop(
                "ip4-local",
                "to us, neither icmp echo nor udp (no local sockets)",
            ),
            0,
        ),
        (
            0,
            bad_udp_to_us,
            drop("udp4-local", "udp checksum error"),
            0,
        ),
        (
            0,
            udp(MAC[0], [233, 252, 0, 1], 64, b"x"),
            drop("ip4-lookup", "drop route"),
            0,
        ),
        // Still counted where they stopped, then answered: ICMP errors, an ARP request.
        (
            0,
            to_us,
            vec![
                (
                    "udp4-local",
                    "udp to us on a port nobody listens on (icmp port unreachable)",
                ),
                (
                    "ip4-icmp-error",
                    "icmp destination unreachable sent (not an error)",
                ),
            ],
            1,
        ),
        (
            0,
            udp(MAC[0], [198, 51, 100, 1], 64, b"x"),
            vec![
                ("ip4-lookup", "no route"),
                (
                    "ip4-icmp-error",
                    "icmp destination unreachable sent (not an error)",
                ),
            ],
            1,
        ),
        (
            0,
            udp(MAC[0], [203, 0, 113, 9], 64, b"x"),
            vec![
                ("ip4-lookup", "next hop unresolved (sent to ip4-glean)"),
                ("ip4-glean", "arp request sent, packet dropped"),
            ],
            1,
        ),
        (
            0,
            udp(MAC[0], [192, 0, 2, 5], 1, b"x"),
            vec![
                ("ip4-rewrite", "ttl expired (sent to ip4-icmp-error)"),
                ("ip4-icmp-error", "icmp time exceeded sent (not an error)"),
            ],
            1,
        ),
        // The same where no address can answer: if2 and if3 have none.
        (
            2,
            udp(MAC[2], [192, 0, 2, 5], 1, b"x"),
            vec![
                ("ip4-rewrite", "ttl expired (sent to ip4-icmp-error)"),
                (
                    "ip4-icmp-error",
                    "no icmp error: receiving interface has no address",
                ),
            ],
            0,
        ),
        (
            2,
            udp(MAC[2], [198, 18, 0, 1], 64, b"x"),
            vec![
                ("ip4-lookup", "next hop unresolved (sent to ip4-glean)"),
                ("ip4-glean", "tx interface has no address"),
            ],
            0,
        ),
    ];
    for (rx, frame, errs, outputs) in cases {
        s.rt.clear_errors();
        s.output.lock().unwrap().clear();
        s.input.lock().unwrap().push((rx, frame));
        s.rt.dispatch(&mut s.pool);
        let want: Vec<_> = errs.iter().map(|&(n, e)| (n, e, 1)).collect();
        assert_eq!(s.rt.errors(), want, "expected {errs:?}");
        assert_eq!(s.output.lock().unwrap().len(), outputs, "{errs:?}");
        assert_eq!(
            s.pool.available(),
            s.pool.capacity(),
            "buffer lost on {errs:?}"
        );
    }
    // A broadcast frame is accepted by ethernet-input (then routed like any other).
    s.rt.clear_errors();
    s.output.lock().unwrap().clear();
    s.input
        .lock()
        .unwrap()
        .push((0, udp([0xff; 6], [192, 0, 2, 5], 64, b"x")));
    s.rt.dispatch(&mut s.pool);
    assert_eq!(s.output.lock().unwrap().len(), 1);
}

#[test]
fn trace_shows_the_path_and_what_each_node_decided() {
    let mut s = setup();
    s.rt.trace_add("test-input", 1).unwrap();
    s.input.lock().unwrap().extend([
        (0, udp(MAC[0], [192, 0, 2, 5], 64, b"x")),
        (0, udp(MAC[0], [192, 0, 2, 6], 64, b"x")),
    ]);
    s.rt.dispatch(&mut s.pool);
    let t = s.rt.show_trace();
    assert_eq!(t.matches("Packet").count(), 1, "{t}");
    for want in [
        "test-input",
        "ethertype 0x0800",
        "ttl 64",
        "fib 0 adj",
        "tx interface 1",
        "memif-output",
    ] {
        assert!(t.contains(want), "{want} missing from\n{t}");
    }
}

#[test]
fn arp_requests_for_our_address_are_answered_and_senders_learned() {
    let mut s = setup();
    let req = |target: [u8; 4]| arp_request([10, 0, 0, 7], target);
    s.input
        .lock()
        .unwrap()
        .extend([(0, req([10, 0, 0, 1])), (0, req([10, 0, 0, 2]))]);
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
    let (tx, reply) = &out[0];
    assert_eq!(*tx, 0, "answered on the interface it came in on");
    assert_eq!(
        (&reply[0..6], &reply[6..12], &reply[12..14]),
        (&HOST_MAC[..], &MAC[0][..], &[0x08, 0x06][..])
    );
    let p = etherparse::ArpPacket::from_slice(&reply[14..]).unwrap();
    assert_eq!(p.operation, etherparse::ArpOperation::REPLY);
    assert_eq!(
        (p.sender_hw_addr(), p.sender_protocol_addr()),
        (&MAC[0][..], &[10, 0, 0, 1][..])
    );
    assert_eq!(
        (p.target_hw_addr(), p.target_protocol_addr()),
        (&HOST_MAC[..], &[10, 0, 0, 7][..])
    );
    assert_eq!(
        s.rt.errors(),
        vec![(
            "arp-input",
            "arp request for an address that is not ours",
            1
        )]
    );
    let learned: Vec<Learned> = s.learned.try_iter().collect();
    let want = Learned {
        ifindex: 0,
        ip: Ipv4Addr::new(10, 0, 0, 7),
        mac: HOST_MAC,
    };
    assert_eq!(learned, vec![want, want]);
    // The queue holds 2: a third sender before the control thread drains is counted, not queued.
    s.rt.clear_errors();
    s.input.lock().unwrap().extend([
        (0, req([10, 0, 0, 1])),
        (0, req([10, 0, 0, 1])),
        (0, req([10, 0, 0, 1])),
    ]);
    s.rt.dispatch(&mut s.pool);
    assert!(
        s.rt.errors()
            .contains(&("arp-input", "learned-neighbour queue full or closed", 1)),
        "{:?}",
        s.rt.errors()
    );
    assert_eq!(s.pool.available(), s.pool.capacity());
}

#[test]
fn icmp_echo_to_us_is_answered_through_the_fib() {
    let mut s = setup();
    let req = testkit::icmp4_frame(
        HOST_TO_IF0,
        [10, 0, 0, 7],
        [10, 0, 0, 1],
        5,
        testkit::echo_request(0x77, 3),
        b"ping payload",
    );
    s.input.lock().unwrap().push((0, req));
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
    let (tx, reply) = &out[0];
    assert_eq!(*tx, 0);
    let p = etherparse::SlicedPacket::from_ethernet(reply).unwrap();
    let Some(etherparse::LinkSlice::Ethernet2(eth)) = p.link else {
        panic!("no ethernet")
    };
    assert_eq!((eth.destination(), eth.source()), (HOST_MAC, MAC[0]));
    let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
        panic!("no ipv4")
    };
    let h = ip.header().to_header();
    assert_eq!(
        (h.source, h.destination, h.time_to_live),
        ([10, 0, 0, 1], [10, 0, 0, 7], 64),
        "fresh TTL, not decremented"
    );
    assert_eq!(h.header_checksum, h.calc_header_checksum());
    let Some(etherparse::TransportSlice::Icmpv4(icmp)) = p.transport else {
        panic!("no icmp")
    };
    assert!(
        matches!(icmp.icmp_type(), etherparse::Icmpv4Type::EchoReply(e) if e.id == 0x77 && e.seq == 3)
    );
    assert_eq!(icmp.payload(), b"ping payload");
    assert_eq!(
        icmp.checksum(),
        icmp.icmp_type().calc_checksum(icmp.payload())
    );
    assert_eq!(
        s.rt.errors(),
        vec![("ip4-local", "icmp echo replied (not an error)", 1)]
    );
}

/// An echo request from the test host to 10.0.0.1 with `payload`, as a frame.
fn echo_request(ident: u16, payload: &[u8]) -> Vec<u8> {
    let t = testkit::echo_request(ident, 1);
    testkit::icmp4_frame(HOST_TO_IF0, [10, 0, 0, 7], [10, 0, 0, 1], 5, t, payload)
}

/// `frame`'s datagram cut into fragments of at most `max` payload bytes (a multiple of 8),
/// each a frame with its own header (IP ident `ident`).
fn fragments(frame: &[u8], max: usize, ident: u16) -> Vec<Vec<u8>> {
    let (eth, ip) = frame.split_at(14);
    let (hdr, payload) = ip.split_at(20);
    payload
        .chunks(max)
        .enumerate()
        .map(|(i, chunk)| {
            let mut h = hdr.to_vec();
            let mut v = wire::Ipv4::new_unchecked(&mut h[..]);
            v.set_ident(ident);
            v.set_total_len((20 + chunk.len()) as u16);
            v.set_flags_frag(0);
            v.set_more_frags((i + 1) * max < payload.len());
            v.set_frag_offset((i * max) as u16);
            v.fill_checksum();
            [eth, &h, chunk].concat()
        })
        .collect()
}

/// Checks that `reply` answers an echo request with `payload`: addresses swapped, fresh
/// TTL, both checksums right (etherparse's own), the payload whole.
fn check_echo_reply(reply: &[u8], payload: &[u8]) {
    let p = etherparse::SlicedPacket::from_ethernet(reply).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
        panic!("no ipv4")
    };
    let h = ip.header().to_header();
    assert_eq!(
        (h.source, h.destination, h.time_to_live),
        ([10, 0, 0, 1], [10, 0, 0, 7], 64)
    );
    assert_eq!(h.header_checksum, h.calc_header_checksum());
    assert!(!ip.is_payload_fragmented());
    let Some(etherparse::TransportSlice::Icmpv4(icmp)) = p.transport else {
        panic!("no icmp")
    };
    assert!(matches!(
        icmp.icmp_type(),
        etherparse::Icmpv4Type::EchoReply(_)
    ));
    assert_eq!(icmp.payload(), payload);
    assert_eq!(
        icmp.checksum(),
        icmp.icmp_type().calc_checksum(icmp.payload())
    );
}

/// A router answers pings of any size (RFC 1812 §4.3.3.6): a request larger than one buffer
/// (a chain) gets a chain back, and one that arrives in fragments, in any order, is put back
/// together first. Every buffer comes back to the pool.
#[test]
fn large_and_fragmented_echo_requests_are_answered() {
    let mut s = setup();
    let payload: Vec<u8> = (0..5000u32).map(|i| (i * 13 + i / 7) as u8).collect();
    s.input
        .lock()
        .unwrap()
        .push((0, echo_request(0x51, &payload)));
    s.rt.dispatch(&mut s.pool);
    {
        let out = s.output.lock().unwrap();
        assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
        check_echo_reply(&out[0].1, &payload);
    }
    // The same ping in four fragments of 1480 bytes, the last first.
    let mut frags = fragments(&echo_request(0x52, &payload), 1480, 0x3131);
    assert_eq!(frags.len(), 4);
    frags.rotate_right(1);
    for f in frags {
        s.input.lock().unwrap().push((0, f));
        s.rt.dispatch(&mut s.pool);
    }
    {
        let out = s.output.lock().unwrap();
        assert_eq!(out.len(), 2, "{:?}", s.rt.errors());
        check_echo_reply(&out[1].1, &payload);
    }
    let errors = s.rt.errors();
    for want in [
        ("ip4-local", "icmp echo replied (not an error)", 2),
        (
            "ip4-reassembly",
            "fragment held for reassembly (not an error)",
            3,
        ),
        ("ip4-reassembly", "datagram reassembled (not an error)", 1),
    ] {
        assert!(errors.contains(&want), "{want:?} in {errors:?}");
    }
    // Overlapping fragments: the datagram is dropped, counted, and nothing answers.
    let frags = fragments(&echo_request(0x53, &payload), 1480, 0x3232);
    s.input
        .lock()
        .unwrap()
        .extend([(0, frags[0].clone()), (0, frags[0].clone())]);
    s.rt.dispatch(&mut s.pool);
    assert_eq!(s.output.lock().unwrap().len(), 2);
    assert!(s.rt.errors().contains(&(
        "ip4-reassembly",
        "overlapping, duplicate or contradicting fragment (datagram dropped)",
        1
    )));
    assert_eq!(s.pool.available(), s.pool.capacity());
}

fn arp_reply_from_nb99() -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[..6].copy_from_slice(&MAC[1]);
    f[6..12].copy_from_slice(&NB99);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    wire::Arp::emit(
        &mut f[14..],
        wire::ArpOp::Reply,
        (wire::MacAddr(NB99), Ipv4Addr::new(10, 1, 0, 99)),
        (wire::MacAddr(MAC[1]), Ipv4Addr::new(10, 1, 0, 1)),
    )
    .unwrap();
    f
}

#[test]
fn unresolved_next_hop_is_asked_for_then_forwarded_once_learned() {
    let mut s = setup();
    let payload = b"to the unresolved one";
    s.input
        .lock()
        .unwrap()
        .push((0, udp(MAC[0], [203, 0, 113, 9], 64, payload)));
    s.rt.dispatch(&mut s.pool);
    let out: Vec<_> = s.output.lock().unwrap().drain(..).collect();
    assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
    let (tx, req) = &out[0];
    assert_eq!(*tx, 1, "asked on the adjacency's interface");
    let (eth, rest) = etherparse::Ethernet2Header::from_slice(req).unwrap();
    assert_eq!(
        (eth.destination, eth.source, eth.ether_type),
        ([0xff; 6], MAC[1], etherparse::EtherType::ARP)
    );
    let p = etherparse::ArpPacket::from_slice(rest).unwrap();
    assert_eq!(p.operation, etherparse::ArpOperation::REQUEST);
    assert_eq!(
        (p.sender_hw_addr(), p.sender_protocol_addr()),
        (&MAC[1][..], &[10, 1, 0, 1][..]),
        "tell: our address on the next hop's subnet, not the interface's first"
    );
    assert_eq!(
        (p.target_hw_addr(), p.target_protocol_addr()),
        (&[0u8; 6][..], &[10, 1, 0, 99][..])
    );
    assert_eq!(req.len(), 42);
    assert_eq!(
        s.rt.errors(),
        vec![
            ("ip4-lookup", "next hop unresolved (sent to ip4-glean)", 1),
            ("ip4-glean", "arp request sent, packet dropped", 1),
        ]
    );
    // The neighbour answers; arp-input reports it and the control thread learns it.
    s.rt.clear_errors();
    s.input.lock().unwrap().push((1, arp_reply_from_nb99()));
    s.rt.dispatch(&mut s.pool);
    let learned: Vec<Learned> = s.learned.try_iter().collect();
    assert_eq!(
        learned,
        vec![Learned {
            ifindex: 1,
            ip: Ipv4Addr::new(10, 1, 0, 99),
            mac: NB99
        }]
    );
    for l in learned {
        assert_eq!(s.adj.learn(l.ifindex, l.ip, l.mac), 1);
    }
    // The next packet is forwarded.
    s.input
        .lock()
        .unwrap()
        .push((0, udp(MAC[0], [203, 0, 113, 9], 64, payload)));
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
    assert_eq!(out[0].0, 1);
    let p = etherparse::SlicedPacket::from_ethernet(&out[0].1).unwrap();
    let Some(etherparse::LinkSlice::Ethernet2(eth)) = p.link else {
        panic!("no ethernet")
    };
    assert_eq!((eth.destination(), eth.source()), (NB99, MAC[1]));
    let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
        panic!("no ipv4")
    };
    assert_eq!(ip.header().ttl(), 63);
    let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
        panic!("no udp")
    };
    assert_eq!(u.payload(), payload);
    assert_eq!(
        s.rt.errors(),
        vec![(
            "arp-input",
            "arp reply: neighbour learned (not an error)",
            1
        )]
    );
    assert_eq!(s.pool.available(), s.pool.capacity());
}

#[test]
fn arp_requests_for_one_next_hop_are_throttled() {
    let mut s = setup();
    s.input.lock().unwrap().extend([
        (0, udp(MAC[0], [203, 0, 113, 9], 64, b"one")),
        (0, udp(MAC[0], [203, 0, 113, 10], 64, b"two")),
    ]);
    s.rt.dispatch(&mut s.pool);
    assert_eq!(s.output.lock().unwrap().len(), 1, "one request for both");
    assert_eq!(
        s.rt.errors(),
        vec![
            ("ip4-lookup", "next hop unresolved (sent to ip4-glean)", 2),
            ("ip4-glean", "arp request sent, packet dropped", 1),
            ("ip4-glean", "arp request throttled, packet dropped", 1),
        ]
    );
    assert_eq!(s.pool.available(), s.pool.capacity());
}

/// The fast path (`ethernet-input` making ip4-input's checks, `ip4-lookup` making
/// `ip4-rewrite`'s one-fold TTL update) leaves a checksum that verifies for every TTL and header content, cuts Ethernet
/// padding off the datagram, and keeps a traced packet in its place among untraced ones.
#[test]
fn the_fast_path_keeps_checksums_padding_and_order_right() {
    let mut s = setup();
    s.rt.trace_add("test-input", 1).unwrap();
    let mut sent = Vec::new();
    for ttl in 2..=255u8 {
        // Vary the identification so the checksum takes many values (0x0000 and 0xffff
        // neighbourhoods included).
        let mut f = udp(MAC[0], [192, 0, 2, 5], ttl, &[ttl; 3]);
        f[18..20].copy_from_slice(&(u16::from(ttl) * 257).to_be_bytes());
        f[24..26].copy_from_slice(&[0, 0]);
        let c = wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        if ttl % 3 == 0 {
            // Ethernet padding past the datagram (a short frame padded to 60 bytes).
            f.resize(60.max(f.len() + 7), 0xee);
        }
        sent.push(f);
    }
    s.input
        .lock()
        .unwrap()
        .extend(sent.iter().map(|f| (0, f.clone())));
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    assert_eq!(out.len(), sent.len(), "errors: {:?}", s.rt.errors());
    for ((_, frame), (ttl, _)) in out.iter().zip((2..=255u8).zip(&sent)) {
        let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
            panic!("no ipv4")
        };
        let h = ip.header().to_header();
        assert_eq!(h.time_to_live, ttl - 1, "in order, each TTL decremented");
        assert_eq!(h.header_checksum, h.calc_header_checksum(), "ttl {ttl}");
        assert_eq!(frame.len(), 14 + 28 + 3, "padding cut (ttl {ttl})");
    }
    let t = s.rt.show_trace();
    assert!(t.contains("ethertype 0x0800, ip4 checked, ttl 2"), "{t}");
    assert!(s.rt.errors().is_empty(), "{:?}", s.rt.errors());
    assert_eq!(s.pool.available(), s.pool.capacity());
}

/// `ethernet-input` looks up and rewrites what it forwards itself; a packet it leaves to
/// `ip4-input` (here unicast IPv4 in a broadcast frame, which `ip4-lookup` forwards) goes out
/// later in the dispatch, so the packets after it in the frame must take the same way, or they would
/// overtake it and reorder its flow. A traced packet is forwarded in ethernet-input too, with a
/// record that says so.
#[test]
fn packets_after_one_left_to_ip4_input_or_lookup_do_not_overtake_it() {
    let mut s = setup();
    let small = |i: u8| udp(MAC[0], [192, 0, 2, 5], 64, &[i; 20]);
    // Unicast IPv4 in a broadcast frame: ip4-input checks it, ip4-lookup forwards it.
    let odd = udp([0xff; 6], [192, 0, 2, 5], 64, &[0xbb; 20]);
    let lookups = vectors(&s.rt, "ip4-lookup");
    s.input.lock().unwrap().extend(
        [small(0), small(1), odd, small(2), small(3)]
            .into_iter()
            .map(|f| (0, f)),
    );
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    let order: Vec<u8> = out
        .iter()
        .map(|(tx, f)| {
            assert_eq!(*tx, 1, "{:?}", s.rt.errors());
            f[42]
        })
        .collect();
    assert_eq!(order, [0, 1, 0xbb, 2, 3], "in the order sent");
    // The two before it were forwarded in ethernet-input; it and the two after it were not.
    assert_eq!(vectors(&s.rt, "ip4-lookup"), lookups + 3);

    // A frame that starts with a packet to us, which ethernet-input does not forward itself:
    // the packets after it go on to ip4-lookup, which forwards them, so the one after a
    // packet of another interface must not be forwarded here either.
    let to_us = udp(MAC[0], [10, 0, 0, 1], 64, b"x");
    let other = udp(MAC[2], [192, 0, 2, 5], 64, &[0xcc; 20]);
    s.output.lock().unwrap().clear();
    s.input.lock().unwrap().extend([
        (0, to_us),
        (0, small(5)),
        (0, small(6)),
        (2, other),
        (0, small(7)),
    ]);
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    let order: Vec<u8> = out
        .iter()
        .filter(|(tx, _)| *tx == 1)
        .map(|(_, f)| f[42])
        .collect();
    assert_eq!(order, [5, 6, 7], "in the order sent");

    // More than a frame for ethernet-input (two input nodes): it takes its backlog a frame at
    // a time, before ip4-lookup runs. The first frame starts with a packet to us, so the rest
    // of it goes on to ip4-lookup; the second frame's packets of the same flow must wait for
    // them, not be forwarded here.
    let seq = |k: u16| udp(MAC[0], [192, 0, 2, 5], 64, &k.to_be_bytes());
    s.output.lock().unwrap().clear();
    s.input
        .lock()
        .unwrap()
        .push((0, udp(MAC[0], [10, 0, 0, 1], 64, b"x")));
    s.input
        .lock()
        .unwrap()
        .extend((0..200).map(|k| (0, seq(k))));
    s.input2
        .lock()
        .unwrap()
        .extend((200..400).map(|k| (0, seq(k))));
    s.rt.dispatch(&mut s.pool);
    let out = s.output.lock().unwrap().clone();
    let order: Vec<u16> = out
        .iter()
        .filter(|(tx, _)| *tx == 1)
        .map(|(_, f)| u16::from_be_bytes([f[42], f[43]]))
        .collect();
    assert_eq!(order, (0..400).collect::<Vec<u16>>(), "in the order sent");

    s.rt.trace_add("test-input", 1).unwrap();
    s.input.lock().unwrap().push((0, small(4)));
    s.rt.dispatch(&mut s.pool);
    let t = s.rt.show_trace();
    assert!(
        t.contains("ip4 checked, ttl 64, fib 0 adj ") && t.contains("rewritten for tx interface 1"),
        "{t}"
    );
    assert!(!t.contains("ip4-lookup"), "{t}");
    assert_eq!(s.output.lock().unwrap().len(), out.len() + 1);
    assert_eq!(s.pool.available(), s.pool.capacity());
}

/// `ethernet-input` and `ip4-lookup` take runs of ordinary packets in direct loops of their
/// own and hand anything else back to their general loop, mid-frame. Whatever a frame holds,
/// each packet must come out as it does alone: the same packets leave on the same interfaces
/// with the same bytes, and every counter moves as much. Checked with the kinds of packet
/// the direct loops must give back (another interface or VRF, padding, a chain, over the MTU,
/// bad checksum, TTL 1, not our MAC, an unresolved next hop, to us, a traced packet) in the middle of runs they
/// take, against the same packets sent one per frame.
#[test]
fn a_packet_in_a_mixed_frame_goes_where_it_goes_alone() {
    let payload: Vec<u8> = (0..64u8).collect();
    let good0 = udp(MAC[0], [192, 0, 2, 5], 64, &payload);
    let other_dst = udp(MAC[0], [192, 0, 2, 77], 9, &payload);
    let good2 = udp(MAC[2], [192, 0, 2, 6], 64, &payload);
    let mut padded = udp(MAC[0], [192, 0, 2, 5], 64, b"x");
    padded.extend([0xee; 20]);
    let mut bad_csum = good0.clone();
    bad_csum[24] ^= 0xff;
    let ttl1 = udp(MAC[0], [192, 0, 2, 5], 1, &payload);
    let not_ours = udp(MAC[1], [192, 0, 2, 5], 64, &payload);
    let glean = udp(MAC[0], [203, 0, 113, 9], 64, &payload);
    let to_us = udp(MAC[0], [10, 0, 0, 1], 64, &payload);
    let big = udp(MAC[0], [192, 0, 2, 5], 64, &[7u8; 1400]);
    // A chain (more than a buffer holds), and one over if3's MTU (1450, set below).
    let jumbo = udp(MAC[0], [192, 0, 2, 5], 64, &[8u8; 3000]);
    let over_mtu = udp(MAC[2], [192, 0, 2, 6], 64, &[9u8; 1440]);
    let mut frame: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut run = |n: usize, rx: u32, p: &Vec<u8>| frame.extend((0..n).map(|_| (rx, p.clone())));
    run(4, 0, &good0);
    run(1, 0, &ttl1);
    run(3, 0, &good0);
    run(3, 2, &good2);
    run(2, 0, &padded);
    run(1, 0, &good0);
    run(2, 0, &jumbo);
    run(2, 0, &good0);
    run(1, 0, &not_ours);
    run(2, 0, &other_dst);
    run(1, 0, &glean);
    run(1, 0, &good0);
    run(1, 0, &to_us);
    run(2, 0, &big);
    run(1, 2, &good2);
    run(1, 2, &over_mtu);
    run(2, 2, &good2);
    run(2, 0, &good0);
    // Last: from it on the frame's IPv4 goes to ip4-input.
    run(1, 0, &bad_csum);
    run(3, 0, &good0);

    let outcome = |frames: Vec<Vec<(u32, Vec<u8>)>>, traced: u32| -> Outcome {
        let mut s = setup();
        s.adj.set_interface_mtu(3, 1450);
        if traced > 0 {
            s.rt.trace_add("test-input", traced).unwrap();
        }
        s.outcome(frames)
    };
    let alone = outcome(frame.iter().map(|p| vec![p.clone()]).collect(), 0);
    assert!(alone.0.len() > 20, "most packets are forwarded: {alone:?}");
    assert_eq!(outcome(vec![frame.clone()], 0), alone, "one frame");
    // Traced packets (the first five and, in a second frame, the whole of it) go where they
    // would untraced.
    let (first, second) = frame.split_at(frame.len() / 2);
    assert_eq!(outcome(vec![frame.clone()], 5), alone, "first five traced");
    let halves = vec![first.to_vec(), second.to_vec()];
    assert_eq!(outcome(halves, 200), alone, "all traced, two frames");
}
