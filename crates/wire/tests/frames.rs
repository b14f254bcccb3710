//! Whole frames written out byte by byte, read through the views and the `Repr`s, and written
//! back from the `Repr`s to the same bytes.
//!
//! The checksums in these fixtures were computed outside this crate (a separate RFC 1071 sum in
//! Python's `struct`, itself checked against the published IPv4 example below), never by the
//! code under test.

use wire::ipv4::{self, FLAG_DF, FLAG_MF, FRAG_OFFSET_MASK};
use wire::{
    Arp, ArpOp, ArpRepr, Error, EtherType, Ethernet, EthernetRepr, Icmp, IcmpType, Icmpv4Repr,
    IpProtocol, Ipv4, Ipv4Addr, Ipv4Repr, MacAddr, Udp, UdpRepr, arp, ethernet, icmp, udp,
};

const HOST: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
const ROUTER: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

/// `who-has 192.168.1.1 tell 192.168.1.10`, broadcast, as a Linux host sends it (no padding).
static ARP_REQUEST: [u8; 42] = [
    // Ethernet: dst broadcast, src 52:54:00:12:34:56, ARP.
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06,
    // ARP: Ethernet, IPv4, hlen 6, plen 4, request.
    0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, //
    // sender 52:54:00:12:34:56 192.168.1.10
    0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0xc0, 0xa8, 0x01, 0x0a, //
    // target 00:00:00:00:00:00 192.168.1.1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01,
];

/// `ping 192.168.1.1` from 192.168.1.10: id 0x0f1e, seq 1, 56 bytes of data (8 of timestamp,
/// then 0x10..0x3f). IPv4 checksum 0x9b07, ICMP checksum 0x437f.
static ECHO_REQUEST: [u8; 98] = [
    // Ethernet: dst 02:00:00:00:00:01, src 52:54:00:12:34:56, IPv4.
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x00,
    // IPv4: 45, tos 0, total 84, id 0x1c46, DF, ttl 64, ICMP, checksum 0x9b07.
    0x45, 0x00, 0x00, 0x54, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x9b, 0x07, //
    // 192.168.1.10 -> 192.168.1.1
    0xc0, 0xa8, 0x01, 0x0a, 0xc0, 0xa8, 0x01, 0x01, //
    // ICMP: echo request, code 0, checksum 0x437f, id 0x0f1e, seq 1.
    0x08, 0x00, 0x43, 0x7f, 0x0f, 0x1e, 0x00, 0x01, //
    // data
    0x5f, 0x3c, 0x9a, 0x61, 0x00, 0x00, 0x00, 0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
    0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27,
    0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
    0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f,
];

/// 10.0.0.1:1234 -> 10.0.1.2:53, payload "veclane!". IPv4 id 0xabcd, no flags, ttl 64,
/// checksum 0xb9f9; UDP length 16, checksum 0x4563.
static UDP_FRAME: [u8; 50] = [
    // Ethernet: dst 02:00:00:00:00:02, src 02:00:00:00:00:01, IPv4.
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
    // IPv4: 45, tos 0, total 36, id 0xabcd, no flags, ttl 64, UDP, checksum 0xb9f9.
    0x45, 0x00, 0x00, 0x24, 0xab, 0xcd, 0x00, 0x00, 0x40, 0x11, 0xb9, 0xf9, //
    0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x02, //
    // UDP: 1234 -> 53, length 16, checksum 0x4563.
    0x04, 0xd2, 0x00, 0x35, 0x00, 0x10, 0x45, 0x63, //
    b'v', b'e', b'c', b'l', b'a', b'n', b'e', b'!',
];

/// What a router at 10.0.0.254 sends back for `UDP_FRAME` arriving with TTL 1: time exceeded
/// quoting the offending header (ttl 1, checksum 0xf8f9) and 8 bytes of UDP. Outer IPv4 id 0,
/// DF, ttl 64, checksum 0x25c7; ICMP checksum 0xaa85.
static TIME_EXCEEDED: [u8; 56] = [
    0x45, 0x00, 0x00, 0x38, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0x25, 0xc7, //
    0x0a, 0x00, 0x00, 0xfe, 0x0a, 0x00, 0x00, 0x01, //
    // ICMP: time exceeded, TTL exceeded in transit, checksum 0xaa85, unused.
    0x0b, 0x00, 0xaa, 0x85, 0x00, 0x00, 0x00, 0x00, //
    // quoted IPv4 header
    0x45, 0x00, 0x00, 0x24, 0xab, 0xcd, 0x00, 0x00, 0x01, 0x11, 0xf8, 0xf9, //
    0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x02, //
    // quoted UDP header
    0x04, 0xd2, 0x00, 0x35, 0x00, 0x10, 0x45, 0x63,
];

/// Fragmentation needed, next-hop MTU 1400, about a 1492-byte DF datagram (ttl 63, checksum
/// 0x7549) from 10.0.0.1 to 10.0.1.2. ICMP checksum 0xad09. ICMP message only.
static FRAG_NEEDED: [u8; 36] = [
    0x03, 0x04, 0xad, 0x09, 0x00, 0x00, 0x05, 0x78, //
    0x45, 0x00, 0x05, 0xd4, 0xab, 0xcd, 0x40, 0x00, 0x3f, 0x11, 0x75, 0x49, //
    0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x02, //
    0x04, 0xd2, 0x00, 0x35, 0x00, 0x10, 0x45, 0x63,
];

fn ip(a: [u8; 4]) -> Ipv4Addr {
    Ipv4Addr::from(a)
}

fn udp_ip_header() -> Ipv4Repr {
    Ipv4Repr {
        src_addr: ip([10, 0, 0, 1]),
        dst_addr: ip([10, 0, 1, 2]),
        protocol: IpProtocol::Udp,
        payload_len: 16,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0xabcd,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
    }
}

#[test]
fn the_ipv4_checksum_of_the_published_example() {
    // The header worked through in the Wikipedia article "Internet checksum" / "IPv4 header
    // checksum": 192.168.0.1 -> 192.168.0.199, UDP, total length 115, checksum 0xb861.
    let h = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    let v = Ipv4::new_header_checked(&h[..]).unwrap();
    assert!(v.checksum_ok() && v.checksum_ok_no_options());
    assert_eq!(v.checksum(), 0xb861);
    assert_eq!(Ipv4::new_checked(&h[..]).unwrap_err(), Error::Truncated);
    let repr = Ipv4Repr::parse(&v).unwrap();
    assert_eq!(repr.payload_len, 115 - 20);
    let mut out = [0u8; 20];
    repr.emit(&mut Ipv4::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(out, h);
}

#[test]
fn arp_request_frame() {
    let eth = Ethernet::new_checked(&ARP_REQUEST[..]).unwrap();
    assert_eq!(eth.dst(), MacAddr::BROADCAST);
    assert_eq!(eth.dst_bytes(), [0xff; 6]);
    assert_eq!(eth.src(), HOST);
    assert_eq!(eth.src_bytes(), HOST.0);
    assert_eq!(eth.ethertype(), EtherType::Arp);
    assert_eq!(eth.ethertype_raw(), EtherType::Arp.to_raw());
    assert_eq!(eth.payload().len(), arp::LEN);
    let eth_repr = EthernetRepr::parse(&eth).unwrap();
    assert_eq!(
        eth_repr,
        EthernetRepr {
            src: HOST,
            dst: MacAddr::BROADCAST,
            ethertype: EtherType::Arp,
        }
    );

    let a = Arp::new_checked(eth.payload()).unwrap();
    assert_eq!(
        (a.htype(), a.ptype(), a.hlen(), a.plen()),
        (1, 0x0800, 6, 4)
    );
    assert_eq!((a.op(), a.op_raw()), (ArpOp::Request, 1));
    assert_eq!(a.sender_mac(), HOST);
    assert_eq!(a.sender_ip(), ip([192, 168, 1, 10]));
    assert_eq!(a.target_mac(), MacAddr::UNSPECIFIED);
    assert_eq!(a.target_ip(), ip([192, 168, 1, 1]));
    let arp_repr = ArpRepr::parse(&a).unwrap();
    assert_eq!(
        arp_repr,
        ArpRepr {
            op: ArpOp::Request,
            sender_mac: HOST,
            sender_ip: ip([192, 168, 1, 10]),
            target_mac: MacAddr::UNSPECIFIED,
            target_ip: ip([192, 168, 1, 1]),
        }
    );

    // Written back from the two `Repr`s, over a buffer that held something else.
    let mut out = [0x5a; 42];
    let (h, rest) = out.split_at_mut(eth_repr.buffer_len());
    eth_repr.emit(&mut Ethernet::new_unchecked(h)).unwrap();
    arp_repr.emit(&mut Arp::new_unchecked(rest)).unwrap();
    assert_eq!(out, ARP_REQUEST);

    // The older constructor writes the same packet.
    let mut old = [0u8; 28];
    Arp::emit(
        &mut old[..],
        ArpOp::Request,
        (HOST, ip([192, 168, 1, 10])),
        (MacAddr::UNSPECIFIED, ip([192, 168, 1, 1])),
    )
    .unwrap();
    assert_eq!(old[..], ARP_REQUEST[ethernet::HEADER_LEN..]);
}

#[test]
fn arp_reply_built_from_a_request_in_place() {
    // What arp-input does: the reply over the request, addresses swapped.
    let mut b = ARP_REQUEST;
    let req = ArpRepr::parse(&Arp::new_checked(&b[ethernet::HEADER_LEN..]).unwrap()).unwrap();
    let reply = ArpRepr {
        op: ArpOp::Reply,
        sender_mac: ROUTER,
        sender_ip: req.target_ip,
        target_mac: req.sender_mac,
        target_ip: req.sender_ip,
    };
    let mut e = Ethernet::new_checked(&mut b[..]).unwrap();
    reply
        .emit(&mut Arp::new_unchecked(e.payload_mut()))
        .unwrap();
    EthernetRepr {
        src: ROUTER,
        dst: req.sender_mac,
        ethertype: EtherType::Arp,
    }
    .emit(&mut e)
    .unwrap();
    assert_eq!(
        b,
        [
            0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08,
            0x06, //
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, //
            0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0xc0, 0xa8, 0x01, 0x01, //
            0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0xc0, 0xa8, 0x01, 0x0a,
        ]
    );
    let p = etherparse::ArpPacket::from_slice(&b[14..]).unwrap();
    assert_eq!(p.operation, etherparse::ArpOperation::REPLY);
    assert_eq!(p.sender_hw_addr(), &ROUTER.0);
}

#[test]
fn icmp_echo_request_frame() {
    let eth = Ethernet::new_checked(&ECHO_REQUEST[..]).unwrap();
    assert_eq!(
        (eth.dst(), eth.src(), eth.ethertype()),
        (ROUTER, HOST, EtherType::Ipv4)
    );
    assert_eq!(eth.ethertype_raw(), 0x0800);

    let v = Ipv4::new_checked(eth.payload()).unwrap();
    assert_eq!(v.version_ihl(), ipv4::VER_IHL_NO_OPTIONS);
    assert_eq!((v.version(), v.header_len()), (4, 20));
    assert_eq!((v.dscp(), v.ecn()), (0, 0));
    assert_eq!(v.total_len(), 84);
    assert_eq!(v.ident(), 0x1c46);
    assert_eq!(v.flags_frag(), FLAG_DF);
    assert!(v.dont_frag() && !v.more_frags());
    assert_eq!(v.frag_offset(), 0);
    assert_eq!(v.ttl(), 64);
    assert_eq!((v.protocol(), v.protocol_raw()), (IpProtocol::Icmp, 1));
    assert_eq!((v.checksum(), v.header_checksum()), (0x9b07, 0x9b07));
    assert_eq!(v.src_addr(), ip([192, 168, 1, 10]));
    assert_eq!(v.dst_addr(), ip([192, 168, 1, 1]));
    assert_eq!((v.src(), v.dst()), (v.src_addr(), v.dst_addr()));
    assert!(v.checksum_ok() && v.checksum_ok_no_options());
    assert_eq!(v.payload().len(), 64);
    let ip_repr = Ipv4Repr::parse(&v).unwrap();
    assert_eq!(
        ip_repr,
        Ipv4Repr {
            src_addr: ip([192, 168, 1, 10]),
            dst_addr: ip([192, 168, 1, 1]),
            protocol: IpProtocol::Icmp,
            payload_len: 64,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 0x1c46,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    );

    let m = Icmp::new_checked(v.payload()).unwrap();
    assert_eq!(
        (m.msg_type(), m.msg_type_raw(), m.code()),
        (IcmpType::EchoRequest, 8, 0)
    );
    assert_eq!(m.checksum(), 0x437f);
    assert!(m.checksum_ok());
    assert_eq!((m.echo_ident(), m.echo_seq_no()), (0x0f1e, 1));
    assert_eq!(m.echo_id_seq(), (0x0f1e, 1));
    assert_eq!(m.rest(), 0x0f1e_0001);
    let data = &ECHO_REQUEST[42..];
    assert_eq!(m.body(), data);
    let icmp_repr = Icmpv4Repr::parse(&m).unwrap();
    assert_eq!(
        icmp_repr,
        Icmpv4Repr::EchoRequest {
            ident: 0x0f1e,
            seq_no: 1,
            data,
        }
    );
    assert_eq!(icmp_repr.buffer_len(), 64);

    // The three `Repr`s write the frame back.
    let mut out = [0u8; 98];
    let (e, rest) = out.split_at_mut(ethernet::HEADER_LEN);
    EthernetRepr::parse(&eth)
        .unwrap()
        .emit(&mut Ethernet::new_unchecked(e))
        .unwrap();
    let (h, body) = rest.split_at_mut(ip_repr.header_len());
    ip_repr.emit(&mut Ipv4::new_unchecked(h)).unwrap();
    icmp_repr.emit(&mut Icmp::new_unchecked(body)).unwrap();
    assert_eq!(out, ECHO_REQUEST);
}

#[test]
fn echo_reply_checksums() {
    // The reply ip4-local makes: addresses swapped, id 0, DF, TTL 64; ICMP type 0. Expected
    // checksums: IPv4 0xb74d, ICMP 0x437f + 0x0800 = 0x4b7f.
    let mut b = ECHO_REQUEST;
    let mut e = Ethernet::new_checked(&mut b[..]).unwrap();
    let mut v = Ipv4::new_checked(e.payload_mut()).unwrap();
    let (src, dst) = (v.src_addr(), v.dst_addr());
    v.set_src_addr(dst);
    v.set_dst_addr(src);
    v.set_ident(0);
    v.set_ttl(64);
    v.fill_checksum();
    assert_eq!(v.checksum(), 0xb74d);
    let mut m = Icmp::new_checked(v.payload_mut()).unwrap();
    m.make_echo_reply();
    assert_eq!(m.checksum(), 0x4b7f);
    assert_eq!(m.msg_type(), IcmpType::EchoReply);
}

#[test]
fn ipv4_udp_frame() {
    let eth = Ethernet::new_checked(&UDP_FRAME[..]).unwrap();
    assert_eq!(eth.dst(), MacAddr([2, 0, 0, 0, 0, 2]));
    assert_eq!(eth.src(), ROUTER);
    let v = Ipv4::new_checked(eth.payload()).unwrap();
    assert_eq!(v.total_len(), 36);
    assert_eq!(v.ident(), 0xabcd);
    assert_eq!(v.flags_frag() & (FLAG_MF | FRAG_OFFSET_MASK), 0);
    assert!(!v.dont_frag());
    assert_eq!(v.ttl(), 64);
    assert_eq!(v.protocol(), IpProtocol::Udp);
    assert_eq!(v.checksum(), 0xb9f9);
    let ip_repr = Ipv4Repr::parse(&v).unwrap();
    assert_eq!(ip_repr, udp_ip_header());

    let u = Udp::new_checked(v.payload()).unwrap();
    assert_eq!((u.src_port(), u.dst_port()), (1234, 53));
    assert_eq!(u.len(), 16);
    assert!(!u.is_empty());
    assert_eq!(u.checksum(), 0x4563);
    assert!(u.checksum_ok(v.src_addr(), v.dst_addr()));
    assert!(!u.checksum_ok(v.src_addr(), ip([10, 0, 1, 3])));
    assert_eq!(u.payload(), b"veclane!");
    let udp_repr = UdpRepr::parse(&u, v.src_addr(), v.dst_addr()).unwrap();
    assert_eq!(
        udp_repr,
        UdpRepr {
            src_port: 1234,
            dst_port: 53,
            payload_len: 8,
        }
    );
    assert_eq!(
        UdpRepr::parse(&u, ip([10, 0, 0, 9]), v.dst_addr()).unwrap_err(),
        Error::Checksum
    );

    // Written back: Ethernet, IPv4, then the payload and the UDP header with its checksum.
    let mut out = [0u8; 50];
    let (e, rest) = out.split_at_mut(ethernet::HEADER_LEN);
    EthernetRepr::parse(&eth)
        .unwrap()
        .emit(&mut Ethernet::new_unchecked(e))
        .unwrap();
    let (h, seg) = rest.split_at_mut(ipv4::MIN_HEADER_LEN);
    ip_repr.emit(&mut Ipv4::new_unchecked(h)).unwrap();
    seg[udp::field::PAYLOAD].copy_from_slice(b"veclane!");
    udp_repr
        .emit(
            &mut Udp::new_unchecked(seg),
            Some((ip_repr.src_addr, ip_repr.dst_addr)),
        )
        .unwrap();
    assert_eq!(out, UDP_FRAME);

    // Without addresses the checksum is "none", and parses with any.
    let mut seg = [0u8; 16];
    seg[udp::HEADER_LEN..].copy_from_slice(b"veclane!");
    udp_repr
        .emit(&mut Udp::new_unchecked(&mut seg[..]), None)
        .unwrap();
    assert_eq!(seg[..8], [0x04, 0xd2, 0x00, 0x35, 0x00, 0x10, 0x00, 0x00]);
    let u = Udp::new_checked(&seg[..]).unwrap();
    assert_eq!(UdpRepr::parse(&u, ip([1; 4]), ip([2; 4])), Ok(udp_repr));

    // The older constructor, then fill_checksum, makes the same segment.
    let mut seg = [0u8; 16];
    let mut u = Udp::emit(&mut seg[..], 1234, 53, 8).unwrap();
    u.payload_mut().copy_from_slice(b"veclane!");
    u.fill_checksum(ip([10, 0, 0, 1]), ip([10, 0, 1, 2]));
    assert_eq!(seg[..], UDP_FRAME[34..]);
}

#[test]
fn forwarding_decrements_ttl_like_a_full_recompute() {
    // TTL 64 -> 63 raises the checksum by 0x0100: 0xb9f9 -> 0xbaf9.
    let mut b = UDP_FRAME;
    let mut v = Ipv4::new_unchecked(&mut b[ethernet::HEADER_LEN..]);
    v.decrement_ttl();
    assert_eq!((v.ttl(), v.checksum()), (63, 0xbaf9));
    assert!(v.checksum_ok_no_options());
    // `decrement_ttl` touches nothing outside TTL..checksum: it runs on those 12 bytes alone.
    let mut head = [0u8; 12];
    head.copy_from_slice(&UDP_FRAME[14..26]);
    Ipv4::new_unchecked(&mut head[..]).decrement_ttl();
    assert_eq!(head[8..12], [63, 0x11, 0xba, 0xf9]);
    // And the Ethernet rewrite in front of it, as ip4-rewrite does.
    let mut e = Ethernet::new_unchecked(&mut b[..]);
    e.set_dst(MacAddr([0x02, 0, 0, 0, 0, 0x99]));
    e.set_src(ROUTER);
    e.set_ethertype_raw(EtherType::Ipv4.to_raw());
    assert_eq!(
        b[..14],
        [0x02, 0, 0, 0, 0, 0x99, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00]
    );
}

#[test]
fn time_exceeded_packet() {
    let v = Ipv4::new_checked(&TIME_EXCEEDED[..]).unwrap();
    let outer = Ipv4Repr::parse(&v).unwrap();
    assert_eq!(
        (outer.src_addr, outer.dst_addr, outer.ttl, outer.payload_len),
        (ip([10, 0, 0, 254]), ip([10, 0, 0, 1]), 64, 36)
    );
    let m = Icmp::new_checked(v.payload()).unwrap();
    assert_eq!((m.msg_type(), m.code()), (IcmpType::TimeExceeded, 0));
    assert_eq!((m.checksum(), m.rest()), (0xaa85, 0));
    assert!(m.checksum_ok());
    let quoted = Ipv4::new_header_checked(m.body()).unwrap();
    assert_eq!((quoted.ttl(), quoted.checksum()), (1, 0xf8f9));
    let mut header = udp_ip_header();
    header.ttl = 1;
    let repr = Icmpv4Repr::parse(&m).unwrap();
    assert_eq!(
        repr,
        Icmpv4Repr::TimeExceeded {
            code: icmp::time_exceeded::TTL,
            header,
            data: &UDP_FRAME[34..42],
        }
    );

    let mut out = [0u8; 56];
    let (h, body) = out.split_at_mut(20);
    outer.emit(&mut Ipv4::new_unchecked(h)).unwrap();
    repr.emit(&mut Icmp::new_unchecked(body)).unwrap();
    assert_eq!(out, TIME_EXCEEDED);

    // In place, as ip4-icmp-error builds it: the quote is already there.
    let mut b = [0u8; 56];
    b[28..].copy_from_slice(&TIME_EXCEEDED[28..]);
    Ipv4::emit(
        &mut b[..],
        ip([10, 0, 0, 254]),
        ip([10, 0, 0, 1]),
        IpProtocol::Icmp,
        64,
        36,
    )
    .unwrap();
    Icmp::emit_error(&mut b[20..], IcmpType::TimeExceeded, 0, 0).unwrap();
    assert_eq!(b, TIME_EXCEEDED);
}

#[test]
fn fragmentation_needed_message() {
    let m = Icmp::new_checked(&FRAG_NEEDED[..]).unwrap();
    assert_eq!((m.msg_type(), m.code()), (IcmpType::DestUnreachable, 4));
    assert_eq!((m.checksum(), m.next_hop_mtu()), (0xad09, 1400));
    let repr = Icmpv4Repr::parse(&m).unwrap();
    let header = Ipv4Repr {
        payload_len: 1472,
        ttl: 63,
        dont_frag: true,
        ..udp_ip_header()
    };
    assert_eq!(
        repr,
        Icmpv4Repr::DstUnreachable {
            code: icmp::unreachable::FRAG_NEEDED,
            next_hop_mtu: 1400,
            header,
            data: &UDP_FRAME[34..42],
        }
    );
    let mut out = [0xeeu8; 36];
    repr.emit(&mut Icmp::new_unchecked(&mut out[..])).unwrap();
    assert_eq!(out, FRAG_NEEDED);
    let (h, rest) = etherparse::Icmpv4Header::from_slice(&out).unwrap();
    assert_eq!(h.checksum, h.icmp_type.calc_checksum(rest));
}

#[test]
fn parse_refuses_what_a_repr_cannot_hold() {
    // A flipped bit anywhere in a header with a checksum.
    let mut b = ECHO_REQUEST;
    b[14 + 8] ^= 1;
    let v = Ipv4::new_checked(&b[14..]).unwrap();
    assert_eq!(Ipv4Repr::parse(&v).unwrap_err(), Error::Checksum);
    let mut b = ECHO_REQUEST;
    b[60] ^= 0x80;
    let m = Icmp::new_checked(&b[34..]).unwrap();
    assert_eq!(Icmpv4Repr::parse(&m).unwrap_err(), Error::Checksum);
    let mut b = UDP_FRAME;
    b[49] ^= 1;
    let u = Udp::new_checked(&b[34..]).unwrap();
    let (s, d) = (ip([10, 0, 0, 1]), ip([10, 0, 1, 2]));
    assert_eq!(UdpRepr::parse(&u, s, d).unwrap_err(), Error::Checksum);

    // Options: a well-formed 24-byte header (one NOP option word), checksum by hand.
    let mut h = [
        0x46, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1, 10, 0,
        1, 2, 0x01, 0x01, 0x01, 0x01,
    ];
    // 4600 + 0018 + 4011 + 0a00 + 0001 + 0a00 + 0102 + 0101 + 0101 = 0x9d2e; !0x9d2e = 0x62d1.
    h[10..12].copy_from_slice(&[0x62, 0xd1]);
    let v = Ipv4::new_checked(&h[..]).unwrap();
    assert!(v.checksum_ok());
    assert!(!v.checksum_ok_no_options());
    assert_eq!(Ipv4Repr::parse(&v).unwrap_err(), Error::Unsupported);

    // An ICMP type the Repr does not know (timestamp request, 13), and an echo with a code.
    let mut t = [13u8, 0, 0, 0, 0, 0, 0, 0];
    let c = !(13u16 << 8);
    t[2..4].copy_from_slice(&c.to_be_bytes());
    let m = Icmp::new_checked(&t[..]).unwrap();
    assert!(m.checksum_ok());
    assert_eq!(Icmpv4Repr::parse(&m).unwrap_err(), Error::Unsupported);
    let mut t = [8u8, 1, 0, 0, 0, 0, 0, 0];
    t[2..4].copy_from_slice(&(!0x0801u16).to_be_bytes());
    let m = Icmp::new_checked(&t[..]).unwrap();
    assert_eq!(Icmpv4Repr::parse(&m).unwrap_err(), Error::Malformed);

    // Time exceeded quoting less than an IPv4 header.
    let mut t = [11u8, 0, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 20];
    let c = !(0x0b00u16 + 0x4500 + 0x0014);
    t[2..4].copy_from_slice(&c.to_be_bytes());
    let m = Icmp::new_checked(&t[..]).unwrap();
    assert!(m.checksum_ok());
    assert_eq!(Icmpv4Repr::parse(&m).unwrap_err(), Error::Truncated);

    // The reserved flag.
    let mut h = [0u8; 20];
    let mut r = udp_ip_header();
    r.payload_len = 0;
    r.emit(&mut Ipv4::new_unchecked(&mut h[..])).unwrap();
    let mut v = Ipv4::new_unchecked(&mut h[..]);
    v.set_flags_frag(ipv4::FLAG_RESERVED);
    v.fill_checksum();
    assert_eq!(Ipv4Repr::parse(&v).unwrap_err(), Error::Malformed);
}

#[test]
fn checked_constructors_keep_their_rules() {
    // Ethernet and ICMP: the header is all they need.
    assert_eq!(
        Ethernet::new_checked(&ARP_REQUEST[..13]).unwrap_err(),
        Error::Truncated
    );
    assert!(Ethernet::new_checked(&ARP_REQUEST[..14]).is_ok());
    assert_eq!(
        Icmp::new_checked(&ECHO_REQUEST[34..41]).unwrap_err(),
        Error::Truncated
    );
    // ARP: length, then flavour.
    assert_eq!(
        Arp::new_checked(&ARP_REQUEST[14..41]).unwrap_err(),
        Error::Truncated
    );
    let mut b = ARP_REQUEST;
    b[14 + arp::field::HLEN] = 8;
    assert_eq!(Arp::new_checked(&b[14..]).unwrap_err(), Error::Malformed);
    assert_eq!(
        Arp::new_unchecked(&b[14..]).check_len(),
        Err(Error::Malformed)
    );
    // IPv4: version, IHL, total length below the header, header or datagram cut short.
    let ip4 = &ECHO_REQUEST[14..];
    assert_eq!(Ipv4::new_checked(&ip4[..19]).unwrap_err(), Error::Truncated);
    let mut b = ECHO_REQUEST;
    b[14] = 0x65;
    assert_eq!(Ipv4::new_checked(&b[14..]).unwrap_err(), Error::Malformed);
    b[14] = 0x44;
    assert_eq!(Ipv4::new_checked(&b[14..]).unwrap_err(), Error::Malformed);
    b[14] = 0x45;
    b[16..18].copy_from_slice(&19u16.to_be_bytes());
    assert_eq!(Ipv4::new_checked(&b[14..]).unwrap_err(), Error::Malformed);
    let mut b = ECHO_REQUEST;
    b[14] = 0x4f;
    assert_eq!(
        Ipv4::new_header_checked(&b[14..60]).unwrap_err(),
        Error::Truncated
    );
    assert!(Ipv4::new_header_checked(&ip4[..20]).is_ok());
    assert_eq!(Ipv4::new_checked(&ip4[..83]).unwrap_err(), Error::Truncated);
    assert_eq!(
        Ipv4::new_unchecked(&ip4[..83]).check_len(),
        Err(Error::Truncated)
    );
    assert_eq!(Ipv4::new_unchecked(&ip4[..83]).check_header_len(), Ok(()));
    // Link-layer padding after the datagram is allowed, and not payload.
    let mut padded = [0u8; 90];
    padded[..84].copy_from_slice(ip4);
    let v = Ipv4::new_checked(&padded[..]).unwrap();
    assert_eq!(v.payload().len(), 64);
    // UDP: header, length field at least 8, segment present.
    let seg = &UDP_FRAME[34..];
    assert_eq!(Udp::new_checked(&seg[..7]).unwrap_err(), Error::Truncated);
    assert_eq!(Udp::new_checked(&seg[..15]).unwrap_err(), Error::Truncated);
    let mut b = UDP_FRAME;
    b[34 + 5] = 7;
    assert_eq!(Udp::new_checked(&b[34..]).unwrap_err(), Error::Malformed);
}

#[test]
fn emit_refuses_what_does_not_fit_and_writes_nothing() {
    let mut b = [0xaau8; 60];
    let r = Ipv4Repr {
        dscp: 64,
        ..udp_ip_header()
    };
    assert_eq!(
        r.emit(&mut Ipv4::new_unchecked(&mut b[..])),
        Err(Error::Malformed)
    );
    for bad in [
        Ipv4Repr {
            ecn: 4,
            ..udp_ip_header()
        },
        Ipv4Repr {
            frag_offset: 12,
            ..udp_ip_header()
        },
        Ipv4Repr {
            payload_len: 65516,
            ..udp_ip_header()
        },
    ] {
        assert_eq!(
            bad.emit(&mut Ipv4::new_unchecked(&mut b[..])),
            Err(Error::Malformed)
        );
    }
    assert_eq!(
        udp_ip_header().emit(&mut Ipv4::new_unchecked(&mut b[..19])),
        Err(Error::Truncated)
    );
    assert_eq!(
        EthernetRepr {
            src: HOST,
            dst: ROUTER,
            ethertype: EtherType::Ipv4
        }
        .emit(&mut Ethernet::new_unchecked(&mut b[..13])),
        Err(Error::Truncated)
    );
    let a = ArpRepr::parse(&Arp::new_checked(&ARP_REQUEST[14..]).unwrap()).unwrap();
    assert_eq!(
        a.emit(&mut Arp::new_unchecked(&mut b[..27])),
        Err(Error::Truncated)
    );
    let echo = Icmpv4Repr::EchoReply {
        ident: 1,
        seq_no: 2,
        data: &[1, 2, 3],
    };
    assert_eq!(
        echo.emit(&mut Icmp::new_unchecked(&mut b[..10])),
        Err(Error::Truncated)
    );
    let te = Icmpv4Repr::TimeExceeded {
        code: 0,
        header: Ipv4Repr {
            ecn: 9,
            ..udp_ip_header()
        },
        data: &[],
    };
    assert_eq!(
        te.emit(&mut Icmp::new_unchecked(&mut b[..])),
        Err(Error::Malformed)
    );
    let u = UdpRepr {
        src_port: 1,
        dst_port: 2,
        payload_len: 4,
    };
    assert_eq!(
        u.emit(&mut Udp::new_unchecked(&mut b[..11]), None),
        Err(Error::Truncated)
    );
    let huge = UdpRepr {
        payload_len: 65528,
        ..u
    };
    assert_eq!(
        huge.emit(&mut Udp::new_unchecked(&mut b[..]), None),
        Err(Error::Malformed)
    );
    assert_eq!(b, [0xaau8; 60], "nothing written");
}

#[test]
fn setters_write_through_the_field_layout() {
    let mut h = [0u8; 20];
    let mut v = Ipv4::new_unchecked(&mut h[..]);
    v.set_version(4);
    v.set_header_len(20);
    v.set_dscp(46);
    v.set_ecn(1);
    v.set_total_len(20);
    v.set_ident(7);
    v.set_more_frags(true);
    v.set_frag_offset(1480);
    v.set_dont_frag(true);
    v.set_dont_frag(false);
    v.set_ttl(9);
    v.set_protocol(IpProtocol::Unknown(99));
    v.set_src_addr(ip([1, 2, 3, 4]));
    v.set_dst_addr(ip([5, 6, 7, 8]));
    v.fill_checksum();
    let c = v.checksum();
    assert_eq!(
        h,
        [
            0x45,
            0xb9,
            0,
            20,
            0,
            7,
            0x20,
            185,
            9,
            99,
            c.to_be_bytes()[0],
            c.to_be_bytes()[1],
            1,
            2,
            3,
            4,
            5,
            6,
            7,
            8
        ]
    );
    let v = Ipv4::new_checked(&h[..]).unwrap();
    assert_eq!((v.dscp(), v.ecn(), v.frag_offset()), (46, 1, 1480));
    assert!(v.more_frags() && !v.dont_frag());
    assert_eq!(v.protocol(), IpProtocol::Unknown(99));
    let (eh, rest) = etherparse::Ipv4Header::from_slice(&h).unwrap();
    assert!(rest.is_empty());
    assert_eq!(eh.header_checksum, c);
    assert_eq!(eh.calc_header_checksum(), c);

    let mut m = [0u8; 8];
    let mut i = Icmp::new_unchecked(&mut m[..]);
    i.set_msg_type(IcmpType::DestUnreachable);
    i.set_code(icmp::unreachable::FRAG_NEEDED);
    i.set_next_hop_mtu(1500);
    i.set_checksum(0xbeef);
    assert_eq!(m, [3, 4, 0xbe, 0xef, 0, 0, 0x05, 0xdc]);
    let mut i = Icmp::new_unchecked(&mut m[..]);
    i.set_echo_ident(0x0102);
    i.set_echo_seq_no(0x0304);
    assert_eq!(m[icmp::field::REST], [1, 2, 3, 4]);

    let mut s = [0u8; 8];
    let mut u = Udp::new_unchecked(&mut s[..]);
    u.set_src_port(0x1111);
    u.set_dst_port(0x2222);
    u.set_len(8);
    u.set_checksum(0x3333);
    assert_eq!(s, [0x11, 0x11, 0x22, 0x22, 0, 8, 0x33, 0x33]);
    assert!(Udp::new_checked(&s[..]).unwrap().is_empty());

    let mut a = [0u8; 28];
    let mut v = Arp::new_unchecked(&mut a[..]);
    v.set_ethernet_ipv4();
    v.set_op(ArpOp::Unknown(9));
    assert_eq!(a[..8], [0, 1, 8, 0, 6, 4, 0, 9]);
}
