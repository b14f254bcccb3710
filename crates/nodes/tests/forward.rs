//! The forwarding nodes as one graph, checked with an independent parser (etherparse): two VRFs
//! with the same prefix forward independently; TTL, checksum, MACs and payload are right; every
//! kind of bad packet is dropped under its own named counter and no buffer is lost.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use buffer::{Pool, PoolConfig};
use fib::adj::AdjTable;
use fib::{Ipv4Addr, Lpm};
use graph::{CONSUMED, Ctx, Node, NodeInfo, NodeKind, Runtime};
use nodes::{
    ArpInput, ErrorDrop, EthernetInput, IfConfig, Ip4Input, Ip4Local, Ip4Lookup, Ip4Rewrite,
    Learned, Shared,
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

/// Frames with their interface: what the test injects, or what came out.
type Frames = Arc<Mutex<Vec<(u32, Vec<u8>)>>>;

struct Inject(Frames);

impl Node for Inject {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "test-input",
            kind: NodeKind::Input,
            nexts: &["ethernet-input"],
            errors: &[],
        }
    }
    fn poll(&mut self, ctx: &mut Ctx<'_>, room: usize, out: &mut Vec<u32>, next: &mut Vec<u16>) {
        let mut q = self.0.lock().unwrap();
        let n = q.len().min(room);
        for (rx_if, bytes) in q.drain(..n) {
            let b = ctx.pool.from_bytes(&bytes).unwrap();
            ctx.pool.meta_mut(b).rx_if = rx_if;
            out.push(b);
            next.push(0);
        }
    }
}

struct Output(Frames);

impl Node for Output {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "interface-output",
            kind: NodeKind::Internal,
            nexts: &[],
            errors: &[],
        }
    }
    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
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
    _tables: (Lpm, Lpm, AdjTable),
}

fn setup() -> Setup {
    // if0, if1 in VRF 0; if2, if3 in VRF 1. 192.0.2.0/24 exists in both, via 10.1.0.2 on if1
    // and on if3: the same next-hop address, different neighbours.
    let ifs = (0..4)
        .map(|i| {
            let mut c = IfConfig::new(MAC[i], (i / 2) as u32);
            // if0 owns 10.0.0.1/24, the subnet our test hosts live on.
            if i == 0 {
                c.addresses.push((Ipv4Addr::new(10, 0, 0, 1), 24));
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
    // The test host 10.0.0.7 on if0, for echo replies.
    let host = adj.add_next_hop(0, Ipv4Addr::new(10, 0, 0, 7));
    adj.learn(0, Ipv4Addr::new(10, 0, 0, 7), HOST_MAC);
    let (mut v0, mut v1) = (Lpm::new(8), Lpm::new(8));
    v0.insert(Ipv4Addr::new(192, 0, 2, 0), 24, a1).unwrap();
    v1.insert(Ipv4Addr::new(192, 0, 2, 0), 24, a3).unwrap();
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
            Box::new(Ip4Rewrite::new(shared)),
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
        _tables: (v0, v1, adj),
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
    let cases: Vec<(u32, Vec<u8>, &str, &str)> = vec![
        (
            0,
            good[..10].to_vec(),
            "ethernet-input",
            "frame shorter than an Ethernet header",
        ),
        (
            0,
            udp(MAC[1], [192, 0, 2, 5], 64, b"x"),
            "ethernet-input",
            "l3 mac mismatch",
        ),
        (0, unknown, "ethernet-input", "unknown ethertype"),
        (
            0,
            arp,
            "arp-input",
            "arp packet malformed or not ethernet/ipv4",
        ),
        (9, good.clone(), "ethernet-input", "interface down"),
        (
            0,
            good[..30].to_vec(),
            "ip4-input",
            "ip4 header malformed or truncated",
        ),
        (0, bad_csum, "ip4-input", "ip4 header checksum error"),
        (
            0,
            options,
            "ip4-input",
            "ip4 options present (not forwarded)",
        ),
        (0, too_long, "ip4-input", "ip4 length > l2 length"),
        (0, ttl0, "ip4-input", "ip4 ttl is zero"),
        (
            0,
            udp(MAC[0], [198, 51, 100, 1], 64, b"x"),
            "ip4-lookup",
            "no route",
        ),
        (
            0,
            udp(MAC[0], [10, 0, 0, 1], 64, b"x"),
            "ip4-local",
            "to us, but not icmp echo (no local sockets)",
        ),
        (
            0,
            udp(MAC[0], [203, 0, 113, 9], 64, b"x"),
            "ip4-lookup",
            "next hop unresolved (no arp in this graph)",
        ),
        (
            0,
            udp(MAC[0], [233, 252, 0, 1], 64, b"x"),
            "ip4-lookup",
            "drop route",
        ),
        (
            0,
            udp(MAC[0], [192, 0, 2, 5], 1, b"x"),
            "ip4-rewrite",
            "ttl expired (no icmp-error in this graph)",
        ),
    ];
    for (rx, frame, node, err) in cases {
        s.rt.clear_errors();
        s.input.lock().unwrap().push((rx, frame));
        s.rt.dispatch(&mut s.pool);
        assert_eq!(
            s.rt.errors(),
            vec![(node, err, 1)],
            "expected {node}: {err}"
        );
        assert!(s.output.lock().unwrap().is_empty());
        assert_eq!(
            s.pool.available(),
            s.pool.capacity(),
            "buffer lost on {err}"
        );
    }
    // A broadcast frame is accepted by ethernet-input (then routed like any other).
    s.rt.clear_errors();
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
