//! The forwarding nodes as one graph, checked with an independent parser (etherparse): two VRFs
//! with the same prefix forward independently; TTL, checksum, MACs and payload are right; every
//! kind of bad packet is dropped under its own named counter and no buffer is lost. Packets the
//! graph cannot forward get the ICMP error RFC 1812 asks for (or, where it forbids one, a
//! counted drop); unresolved next hops are asked for with ARP and forwarded once learned.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use buffer::{Pool, PoolConfig};
use fib::adj::AdjTable;
use fib::{Ipv4Addr, Lpm};
use graph::{CONSUMED, Ctx, Node, Runtime};
use nodes::{
    ArpInput, ErrorDrop, EthernetInput, IfConfig, Ip4Glean, Ip4IcmpError, Ip4Input, Ip4Local,
    Ip4Lookup, Ip4Rewrite, Learned, Shared,
};

const MAC: [[u8; 6]; 4] = [
    [2, 0, 0, 0, 0, 0xa0],
    [2, 0, 0, 0, 0, 0xa1],
    [2, 0, 0, 0, 0, 0xa2],
    [2, 0, 0, 0, 0, 0xa3],
];
const NB1: [u8; 6] = [2, 0, 0, 0, 1, 1];
const NB3: [u8; 6] = [2, 0, 0, 0, 3, 3];
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 9, 9];
/// The neighbour behind the glean adjacency, 10.1.0.99 on if1, once it answers ARP.
const NB99: [u8; 6] = [2, 0, 0, 0, 1, 0x99];

/// Frames with their interface: what the test injects, or what came out.
type Frames = Arc<Mutex<Vec<(u32, Vec<u8>)>>>;

struct Inject(Frames);

graph::node! {
    Inject: "test-input", Input;
    next InjectNext { EthernetInput = "ethernet-input" }
}

impl Node for Inject {
    fn poll(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        room: usize,
        out: &mut Vec<u32>,
        next: &mut Vec<u16>,
    ) {
        let mut q = self.0.lock().unwrap();
        let n = q.len().min(room);
        for (rx_if, bytes) in q.drain(..n) {
            let b = ctx.pool.from_bytes(&bytes).unwrap();
            ctx.pool.meta_mut(b).rx_if = rx_if;
            out.push(b);
            next.push(InjectNext::EthernetInput.into());
        }
    }
}

struct Output(Frames);

graph::node! { Output: "interface-output", Internal; }

impl Node for Output {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let mut o = self.0.lock().unwrap();
        for &b in bufs {
            let mut v = Vec::new();
            ctx.pool.read_chain(b, &mut v);
            o.push((ctx.pool.meta(b).tx_if, v));
        }
        ctx.pool.free_bulk(bufs);
        next.fill(CONSUMED);
    }
}

struct Setup {
    rt: Runtime,
    pool: Pool,
    input: Frames,
    output: Frames,
    learned: std::sync::mpsc::Receiver<Learned>,
    adj: AdjTable,
    _lpm: (Lpm, Lpm),
}

fn setup() -> Setup {
    // if0, if1 in VRF 0; if2, if3 in VRF 1. 192.0.2.0/24 exists in both, via 10.1.0.2 on if1
    // and on if3: the same next-hop address, different neighbours.
    let ifs = (0..4)
        .map(|i| {
            let mut c = IfConfig::new(MAC[i], (i / 2) as u32);
            // if0 owns 10.0.0.1/24, the subnet our test hosts live on; if1 10.1.0.1/24 and a
            // second address, so that ARP must pick the one on the next hop's subnet. if2 and
            // if3 have none.
            match i {
                0 => c.addresses.push((Ipv4Addr::new(10, 0, 0, 1), 24)),
                1 => c.addresses.extend([
                    (Ipv4Addr::new(172, 16, 0, 1), 16),
                    (Ipv4Addr::new(10, 1, 0, 1), 24),
                ]),
                _ => {}
            }
            c
        })
        .collect();
    let mut adj = AdjTable::new();
    for i in 0..4 {
        adj.set_interface_mac(i, MAC[i as usize]);
    }
    let nh = Ipv4Addr::new(10, 1, 0, 2);
    let a1 = adj.add_next_hop(1, nh);
    let a3 = adj.add_next_hop(3, nh);
    adj.learn(1, nh, NB1);
    adj.learn(3, nh, NB3);
    let glean = adj.add_next_hop(1, Ipv4Addr::new(10, 1, 0, 99));
    // A next hop on if3, which has no address to ask from.
    let glean_no_addr = adj.add_next_hop(3, Ipv4Addr::new(10, 3, 0, 2));
    // The test host 10.0.0.7 on if0, for echo replies.
    let host = adj.add_next_hop(0, Ipv4Addr::new(10, 0, 0, 7));
    adj.learn(0, Ipv4Addr::new(10, 0, 0, 7), HOST_MAC);
    let (mut v0, mut v1) = (Lpm::new(8), Lpm::new(8));
    v0.insert(Ipv4Addr::new(192, 0, 2, 0), 24, a1).unwrap();
    v1.insert(Ipv4Addr::new(192, 0, 2, 0), 24, a3).unwrap();
    v1.insert(Ipv4Addr::new(198, 18, 0, 0), 15, glean_no_addr)
        .unwrap();
    v0.insert(Ipv4Addr::new(10, 0, 0, 1), 32, AdjTable::LOCAL)
        .unwrap();
    v0.insert(Ipv4Addr::new(203, 0, 113, 0), 24, glean).unwrap();
    v0.insert(Ipv4Addr::new(10, 0, 0, 7), 32, host).unwrap();
    v0.insert(Ipv4Addr::new(233, 252, 0, 0), 24, AdjTable::DROP)
        .unwrap();
    let shared = Shared {
        interfaces: Arc::new(ArcSwap::from_pointee(ifs)),
        vrfs: Arc::new(ArcSwap::from_pointee(vec![v0.reader(), v1.reader()])),
        adjacencies: adj.reader(),
    };
    let input = Arc::new(Mutex::new(Vec::new()));
    let output = Arc::new(Mutex::new(Vec::new()));
    let (learned_tx, learned) = std::sync::mpsc::sync_channel(2);
    let rt = Runtime::new(
        vec![
            Box::new(Inject(input.clone())),
            Box::new(EthernetInput::new(shared.clone())),
            Box::new(ArpInput::new(shared.clone(), learned_tx)),
            Box::new(Ip4Input),
            Box::new(Ip4Lookup::new(shared.clone())),
            Box::new(Ip4Local),
            Box::new(Ip4Rewrite::new(shared.clone())),
            Box::new(Ip4IcmpError::new(shared.clone())),
            Box::new(Ip4Glean::new(shared)),
            Box::new(Output(output.clone())),
            Box::new(ErrorDrop),
        ],
        256,
    )
    .unwrap();
    let pool = Pool::new(PoolConfig {
        count: 4096,
        ..Default::default()
    })
    .unwrap();
    Setup {
        rt,
        pool,
        input,
        output,
        learned,
        adj,
        _lpm: (v0, v1),
    }
}

fn udp(dst_mac: [u8; 6], dst: [u8; 4], ttl: u8, payload: &[u8]) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 9, 9], dst_mac)
        .ipv4([10, 0, 0, 7], dst, ttl)
        .udp(4000, 5000);
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, payload).unwrap();
    v
}

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
            udp(MAC[0], [10, 0, 0, 1], 64, b"x"),
            drop("ip4-local", "to us, but not icmp echo (no local sockets)"),
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
        "interface-output",
    ] {
        assert!(t.contains(want), "{want} missing from\n{t}");
    }
}

#[test]
fn arp_requests_for_our_address_are_answered_and_senders_learned() {
    let mut s = setup();
    let req = |target: [u8; 4]| {
        let mut f = vec![0u8; 42];
        f[..6].copy_from_slice(&[0xff; 6]);
        f[6..12].copy_from_slice(&HOST_MAC);
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        wire::Arp::emit(
            &mut f[14..],
            wire::ArpOp::Request,
            (wire::MacAddr(HOST_MAC), Ipv4Addr::new(10, 0, 0, 7)),
            (wire::MacAddr([0; 6]), Ipv4Addr::from(target)),
        )
        .unwrap();
        f
    };
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
    let b = etherparse::PacketBuilder::ethernet2(HOST_MAC, MAC[0])
        .ipv4([10, 0, 0, 7], [10, 0, 0, 1], 5)
        .icmpv4_echo_request(0x77, 3);
    let mut req = Vec::new();
    b.write(&mut req, b"ping payload").unwrap();
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

/// An IPv4 frame from the test host to if0 built field by field, for what `udp` cannot say.
fn ipv4_frame(
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    edit: impl FnOnce(&mut etherparse::Ipv4Header),
    payload: &[u8],
) -> Vec<u8> {
    let mut ip = etherparse::Ipv4Header::new(
        payload.len() as u16,
        ttl,
        etherparse::IpNumber::UDP,
        src,
        dst,
    )
    .unwrap();
    edit(&mut ip);
    ip.header_checksum = ip.calc_header_checksum();
    let mut v = Vec::new();
    etherparse::Ethernet2Header {
        source: HOST_MAC,
        destination: MAC[0],
        ether_type: etherparse::EtherType::IPV4,
    }
    .write(&mut v)
    .unwrap();
    ip.write(&mut v).unwrap();
    v.extend_from_slice(payload);
    v
}

fn icmp_frame(dst: [u8; 4], ttl: u8, t: etherparse::Icmpv4Type, payload: &[u8]) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2(HOST_MAC, MAC[0])
        .ipv4([10, 0, 0, 7], dst, ttl)
        .icmpv4(t);
    let mut v = Vec::new();
    b.write(&mut v, payload).unwrap();
    v
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
            ipv4_frame([0, 0, 0, 0], [192, 0, 2, 5], 1, |_| {}, b"x"),
            expired,
            "no icmp error: source not a unicast address",
        ),
        (
            ipv4_frame([224, 0, 0, 9], [192, 0, 2, 5], 1, |_| {}, b"x"),
            expired,
            "no icmp error: source not a unicast address",
        ),
        (
            ipv4_frame([10, 0, 0, 7], [255, 255, 255, 255], 64, |_| {}, b"x"),
            no_route,
            "no icmp error: destination multicast or broadcast",
        ),
        (
            ipv4_frame(
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
            ipv4_frame(
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
fn icmp_errors_are_rate_limited_per_worker() {
    let mut s = setup();
    let n = 150;
    s.input
        .lock()
        .unwrap()
        .extend((0..n).map(|i| (0, udp(MAC[0], [192, 0, 2, 5], 1, &[i as u8; 10]))));
    s.rt.dispatch(&mut s.pool);
    let burst = nodes::ip4_icmp_error::DEFAULT_BURST as usize;
    assert_eq!(s.output.lock().unwrap().len(), burst);
    assert_eq!(
        s.rt.errors(),
        vec![
            ("ip4-rewrite", "ttl expired (sent to ip4-icmp-error)", n),
            (
                "ip4-icmp-error",
                "icmp time exceeded sent (not an error)",
                burst as u64
            ),
            (
                "ip4-icmp-error",
                "icmp error rate limited",
                n - burst as u64
            ),
        ]
    );
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
