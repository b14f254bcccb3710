//! Properties: every `Repr` survives emit then parse unchanged, and no byte string makes a
//! checked view, or any `parse`, panic.

use proptest::collection::vec;
use proptest::prelude::*;

use wire::{
    Arp, ArpOp, ArpRepr, EtherType, Ethernet, EthernetRepr, Icmp, Icmpv4Repr, IpProtocol, Ipv4,
    Ipv4Addr, Ipv4Repr, MacAddr, Tcp, TcpRepr, Udp, UdpRepr, Vxlan, VxlanRepr, checksum, ipv4,
};

fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

fn addr() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}

fn ipv4_repr(max_payload: usize) -> impl Strategy<Value = Ipv4Repr> {
    (
        (addr(), addr(), any::<u8>().prop_map(IpProtocol::from_raw)),
        (0..=max_payload, any::<u8>(), 0u8..64, 0u8..4, any::<u16>()),
        (
            any::<bool>(),
            any::<bool>(),
            (0u16..=0x1fff).prop_map(|o| o << 3),
        ),
    )
        .prop_map(
            |(
                (src_addr, dst_addr, protocol),
                (payload_len, ttl, dscp, ecn, ident),
                (dont_frag, more_frags, frag_offset),
            )| Ipv4Repr {
                src_addr,
                dst_addr,
                protocol,
                payload_len,
                ttl,
                dscp,
                ecn,
                ident,
                dont_frag,
                more_frags,
                frag_offset,
            },
        )
}

/// The parts of an `Icmpv4Repr`, owned (a `Repr` borrows its data).
#[derive(Debug, Clone)]
struct IcmpParts {
    kind: u8,
    ident: u16,
    seq_no: u16,
    code: u8,
    mtu: u16,
    header: Ipv4Repr,
    data: Vec<u8>,
}

impl IcmpParts {
    fn repr(&self) -> Icmpv4Repr<'_> {
        let data = &self.data[..];
        match self.kind {
            0 => Icmpv4Repr::EchoRequest {
                ident: self.ident,
                seq_no: self.seq_no,
                data,
            },
            1 => Icmpv4Repr::EchoReply {
                ident: self.ident,
                seq_no: self.seq_no,
                data,
            },
            2 => Icmpv4Repr::DstUnreachable {
                code: self.code,
                next_hop_mtu: self.mtu,
                header: self.header,
                data,
            },
            _ => Icmpv4Repr::TimeExceeded {
                code: self.code,
                header: self.header,
                data,
            },
        }
    }
}

fn icmp_parts() -> impl Strategy<Value = IcmpParts> {
    (
        0u8..4,
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
        any::<u16>(),
        ipv4_repr(65515),
        vec(any::<u8>(), 0..80),
    )
        .prop_map(|(kind, ident, seq_no, code, mtu, header, data)| IcmpParts {
            kind,
            ident,
            seq_no,
            code,
            mtu,
            header,
            data,
        })
}

/// Random bytes, some of them nudged towards passing a view's checks so that the checked
/// paths are reached: `fix` picks what to nudge, `n` is a small number to put there.
fn nudged_bytes() -> impl Strategy<Value = (Vec<u8>, u8, u16)> {
    (vec(any::<u8>(), 0..96), 0u8..8, 0u16..100)
}

fn nudge_ipv4(b: &mut [u8], fix: u8, n: u16) {
    if b.len() >= 20 && fix & 1 != 0 {
        b[0] = if n.is_multiple_of(2) {
            ipv4::VER_IHL_NO_OPTIONS
        } else {
            0x40 | (b[0] & 0x0f)
        };
    }
    if b.len() >= 20 && fix & 2 != 0 {
        b[2..4].copy_from_slice(&n.to_be_bytes());
    }
    if b.len() >= 20 && fix & 4 != 0 {
        let h = usize::from(b[0] & 0x0f) * 4;
        if h >= 20 && h <= b.len() {
            b[10..12].fill(0);
            let c = checksum::checksum(&b[..h]);
            b[10..12].copy_from_slice(&c.to_be_bytes());
        }
    }
}

/// Calls every getter (and the checksum-filling setters, on a copy).
fn touch_ipv4(b: &[u8]) {
    if let Ok(v) = Ipv4::new_header_checked(b) {
        let _ = (
            v.version_ihl(),
            v.version(),
            v.header_len(),
            v.dscp(),
            v.ecn(),
        );
        let _ = (v.total_len(), v.ident(), v.flags_frag(), v.more_frags());
        let _ = (
            v.dont_frag(),
            v.frag_offset(),
            v.ttl(),
            v.protocol(),
            v.protocol_raw(),
        );
        let _ = (
            v.checksum(),
            v.header_checksum(),
            v.src_addr(),
            v.dst_addr(),
        );
        let _ = (
            v.src(),
            v.dst(),
            v.checksum_ok(),
            v.checksum_ok_no_options(),
        );
        let _ = v.payload();
        let _ = Ipv4Repr::parse(&v);
        let mut copy = b.to_vec();
        let mut m = Ipv4::new_header_checked(&mut copy[..]).unwrap();
        m.decrement_ttl();
        m.fill_checksum();
        assert!(m.checksum_ok());
        let _ = m.payload_mut();
    }
    if let Ok(v) = Ipv4::new_checked(b) {
        assert!(v.payload().len() == usize::from(v.total_len()) - v.header_len());
    }
}

proptest! {
    #[test]
    fn ethernet_repr_round_trips(
        src in mac(),
        dst in mac(),
        ethertype in any::<u16>().prop_map(EtherType::from_raw),
        payload in vec(any::<u8>(), 0..16),
    ) {
        let repr = EthernetRepr { src, dst, ethertype };
        let mut b = vec![0xa5; repr.buffer_len() + payload.len()];
        b[repr.header_len()..].copy_from_slice(&payload);
        repr.emit(&mut Ethernet::new_unchecked(&mut b[..])).unwrap();
        let v = Ethernet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&v), Ok(repr));
        prop_assert_eq!(v.payload(), &payload[..]);
        prop_assert_eq!(v.ethertype_raw(), ethertype.to_raw());
    }

    #[test]
    fn arp_repr_round_trips(
        op in any::<u16>().prop_map(ArpOp::from_raw),
        sender_mac in mac(),
        sender_ip in addr(),
        target_mac in mac(),
        target_ip in addr(),
    ) {
        let repr = ArpRepr { op, sender_mac, sender_ip, target_mac, target_ip };
        let mut b = vec![0x5a; repr.buffer_len()];
        repr.emit(&mut Arp::new_unchecked(&mut b[..])).unwrap();
        let v = Arp::new_checked(&b[..]).unwrap();
        prop_assert_eq!(ArpRepr::parse(&v), Ok(repr));
        let p = etherparse::ArpPacket::from_slice(&b).unwrap();
        prop_assert_eq!(p.sender_protocol_addr(), &sender_ip.octets()[..]);
        prop_assert_eq!(p.target_hw_addr(), &target_mac.0[..]);
    }

    #[test]
    fn ipv4_repr_round_trips_header_only(repr in ipv4_repr(65515)) {
        // The payload may be elsewhere (a chain): the header is all `emit` writes.
        let mut b = vec![0x33; repr.header_len()];
        repr.emit(&mut Ipv4::new_unchecked(&mut b[..])).unwrap();
        let v = Ipv4::new_header_checked(&b[..]).unwrap();
        prop_assert!(v.checksum_ok_no_options());
        prop_assert_eq!(Ipv4Repr::parse(&v), Ok(repr));
        let (h, _) = etherparse::Ipv4Header::from_slice(&b).unwrap();
        prop_assert_eq!(h.header_checksum, v.checksum());
        prop_assert_eq!(usize::from(h.total_len), repr.buffer_len());
    }

    #[test]
    fn ipv4_repr_round_trips_with_payload(repr in ipv4_repr(200)) {
        let mut b = vec![0x33; repr.buffer_len()];
        repr.emit(&mut Ipv4::new_unchecked(&mut b[..])).unwrap();
        let v = Ipv4::new_checked(&b[..]).unwrap();
        prop_assert_eq!(v.payload().len(), repr.payload_len);
        prop_assert_eq!(Ipv4Repr::parse(&v), Ok(repr));
    }

    #[test]
    fn ttl_decrement_matches_a_full_recompute(repr in ipv4_repr(0)) {
        let mut b = [0u8; 20];
        repr.emit(&mut Ipv4::new_unchecked(&mut b[..])).unwrap();
        let mut v = Ipv4::new_unchecked(&mut b[..]);
        v.decrement_ttl();
        let incremental = v.checksum();
        v.fill_checksum();
        // Equal to the bit: the two could only disagree (0x0000 against 0xffff) for a header
        // whose words are all zero, and version 4 is not.
        prop_assert_eq!(incremental, v.checksum());
        prop_assert_eq!(v.ttl(), repr.ttl.wrapping_sub(1));
    }

    #[test]
    fn icmp_repr_round_trips(parts in icmp_parts()) {
        let repr = parts.repr();
        let mut b = vec![0x77; repr.buffer_len()];
        repr.emit(&mut Icmp::new_unchecked(&mut b[..])).unwrap();
        let v = Icmp::new_checked(&b[..]).unwrap();
        prop_assert!(v.checksum_ok());
        prop_assert_eq!(Icmpv4Repr::parse(&v), Ok(repr));
        // etherparse keeps the next-hop MTU for "fragmentation needed" only: its own sum of
        // any other unreachable with a non-zero MTU leaves those bytes out.
        if !(parts.kind == 2 && parts.code != 4 && parts.mtu != 0) {
            let (h, rest) = etherparse::Icmpv4Header::from_slice(&b).unwrap();
            prop_assert_eq!(h.checksum, h.icmp_type.calc_checksum(rest));
        }
    }

    #[test]
    fn udp_repr_round_trips(
        src_port in any::<u16>(),
        dst_port in any::<u16>(),
        payload in vec(any::<u8>(), 0..128),
        addrs in proptest::option::of((addr(), addr())),
    ) {
        let repr = UdpRepr { src_port, dst_port, payload_len: payload.len() };
        let mut b = vec![0; repr.buffer_len()];
        b[repr.header_len()..].copy_from_slice(&payload);
        repr.emit(&mut Udp::new_unchecked(&mut b[..]), addrs).unwrap();
        let v = Udp::new_checked(&b[..]).unwrap();
        let (src, dst) = addrs.unwrap_or((Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST));
        prop_assert_eq!(UdpRepr::parse(&v, src, dst), Ok(repr));
        prop_assert_eq!(v.payload(), &payload[..]);
        match addrs {
            None => prop_assert_eq!(v.checksum(), 0),
            Some((s, d)) => {
                prop_assert_ne!(v.checksum(), 0);
                let ip = etherparse::Ipv4Header::new(
                    b.len() as u16, 64, etherparse::IpNumber::UDP, s.octets(), d.octets(),
                ).unwrap();
                let h = etherparse::UdpHeader::with_ipv4_checksum(
                    src_port, dst_port, &ip, &payload,
                ).unwrap();
                prop_assert_eq!(h.checksum, v.checksum());
            }
        }
    }

    #[test]
    fn tcp_repr_round_trips(
        ports in any::<(u16, u16)>(),
        numbers in any::<(u32, u32)>(),
        flags in any::<u8>(),
        window_len in any::<u16>(),
        urgent_at in any::<u16>(),
        option_words in 0usize..=10,
        option_bytes in any::<[u8; 40]>(),
        payload in vec(any::<u8>(), 0..128),
        (src, dst) in (addr(), addr()),
    ) {
        let repr = TcpRepr {
            src_port: ports.0,
            dst_port: ports.1,
            seq_number: numbers.0,
            ack_number: numbers.1,
            flags,
            window_len,
            urgent_at,
            options: &option_bytes[..4 * option_words],
            payload_len: payload.len(),
        };
        let mut b = vec![0; repr.buffer_len()];
        b[repr.header_len()..].copy_from_slice(&payload);
        repr.emit(&mut Tcp::new_unchecked(&mut b[..]), src, dst).unwrap();
        let v = Tcp::new_checked(&b[..]).unwrap();
        prop_assert!(v.checksum_ok(src, dst));
        prop_assert_eq!(TcpRepr::parse(&v, src, dst), Ok(repr));
        prop_assert_eq!(v.payload(), &payload[..]);
        let ip = etherparse::Ipv4Header::new(
            b.len() as u16, 64, etherparse::IpNumber::TCP, src.octets(), dst.octets(),
        ).unwrap();
        let (h, rest) = etherparse::TcpHeader::from_slice(&b).unwrap();
        prop_assert_eq!(h.calc_checksum_ipv4(&ip, rest).unwrap(), v.checksum());
    }
}

proptest! {
    // Random bytes reach the deeper checks (a parsed ICMP error: about one case in sixty) only
    // now and then: more cases than the default 256. Each is a few microseconds.
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn ethernet_and_arp_never_panic((b, _, _) in nudged_bytes()) {
        if let Ok(e) = Ethernet::new_checked(&b[..]) {
            let _ = (e.dst(), e.src(), e.dst_bytes(), e.src_bytes(), e.ethertype());
            let _ = (e.ethertype_raw(), e.payload());
            prop_assert!(EthernetRepr::parse(&e).is_ok());
        }
        prop_assert_eq!(EthernetRepr::parse(&Ethernet::new_unchecked(&b[..])).is_ok(), b.len() >= 14);
        let mut arp = b.clone();
        if arp.len() >= 6 {
            arp[..6].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
        }
        for bytes in [&b[..], &arp[..]] {
            if let Ok(a) = Arp::new_checked(bytes) {
                let _ = (a.htype(), a.ptype(), a.hlen(), a.plen(), a.op(), a.op_raw());
                let _ = (a.sender_mac(), a.sender_ip(), a.target_mac(), a.target_ip());
                prop_assert!(ArpRepr::parse(&a).is_ok());
            }
            let _ = ArpRepr::parse(&Arp::new_unchecked(bytes));
        }
    }

    #[test]
    fn ipv4_never_panics((mut b, fix, n) in nudged_bytes()) {
        touch_ipv4(&b);
        nudge_ipv4(&mut b, fix, n);
        touch_ipv4(&b);
        let _ = Ipv4Repr::parse(&Ipv4::new_unchecked(&b[..]));
    }

    #[test]
    fn icmp_never_panics((mut b, fix, n) in nudged_bytes()) {
        // A quoted IPv4 header in the body, and a valid checksum, now and then.
        if fix & 1 != 0 && b.len() >= 28 {
            b[0] = [0, 3, 8, 11][usize::from(n / 2 % 4)];
            b[1] = 0;
            nudge_ipv4(&mut b[8..], fix | 1, n);
        }
        if fix & 2 != 0 && b.len() >= 8 {
            b[2..4].fill(0);
            let c = checksum::checksum(&b);
            b[2..4].copy_from_slice(&c.to_be_bytes());
        }
        if let Ok(m) = Icmp::new_checked(&b[..]) {
            let _ = (m.msg_type(), m.msg_type_raw(), m.code(), m.checksum(), m.rest());
            let _ = (m.echo_ident(), m.echo_seq_no(), m.echo_id_seq(), m.next_hop_mtu());
            let _ = (m.checksum_ok(), m.body(), m.msg_type().is_error());
            if let Ok(r) = Icmpv4Repr::parse(&m) {
                // What parses emits again, and parses to the same.
                let mut out = vec![0; r.buffer_len()];
                r.emit(&mut Icmp::new_unchecked(&mut out[..])).unwrap();
                let again = Icmp::new_checked(&out[..]).unwrap();
                prop_assert_eq!(Icmpv4Repr::parse(&again), Ok(r));
            }
        }
        let _ = Icmpv4Repr::parse(&Icmp::new_unchecked(&b[..]));
    }

    #[test]
    fn udp_never_panics((mut b, fix, n) in nudged_bytes(), src in addr(), dst in addr()) {
        if fix & 1 != 0 && b.len() >= 8 {
            b[4..6].copy_from_slice(&n.to_be_bytes());
        }
        if let Ok(u) = Udp::new_checked(&b[..]) {
            let _ = (u.src_port(), u.dst_port(), u.len(), u.is_empty(), u.checksum());
            let _ = (u.payload(), u.checksum_ok(src, dst));
            let _ = UdpRepr::parse(&u, src, dst);
            let mut copy = b.clone();
            let mut m = Udp::new_checked(&mut copy[..]).unwrap();
            m.fill_checksum(src, dst);
            prop_assert!(m.checksum_ok(src, dst));
            let _ = m.payload_mut();
        }
        let _ = UdpRepr::parse(&Udp::new_unchecked(&b[..]), src, dst);
    }

    #[test]
    fn tcp_never_panics((mut b, fix, n) in nudged_bytes(), src in addr(), dst in addr()) {
        // A data offset the buffer holds, no reserved bits and a valid checksum, now and then.
        if fix & 1 != 0 && b.len() >= 20 {
            b[12] = ((5 + n % 11) as u8) << 4 | (b[12] & 0x0f);
        }
        if fix & 2 != 0 && b.len() >= 20 {
            b[12] &= 0xf0;
        }
        if fix & 4 != 0 && Tcp::new_checked(&b[..]).is_ok() {
            Tcp::new_unchecked(&mut b[..]).fill_checksum(src, dst);
        }
        if let Ok(t) = Tcp::new_checked(&b[..]) {
            let _ = (t.src_port(), t.dst_port(), t.seq_number(), t.ack_number());
            let _ = (t.header_len(), t.reserved(), t.flags(), t.window_len(), t.urgent_at());
            let _ = (t.fin(), t.syn(), t.rst(), t.psh(), t.ack(), t.urg(), t.ece(), t.cwr());
            let _ = (t.checksum(), t.options(), t.payload(), t.checksum_ok(src, dst));
            if let Ok(r) = TcpRepr::parse(&t, src, dst) {
                // What parses emits again, and parses to the same.
                let mut out = vec![0; r.buffer_len()];
                out[r.header_len()..].copy_from_slice(t.payload());
                r.emit(&mut Tcp::new_unchecked(&mut out[..]), src, dst).unwrap();
                let again = Tcp::new_checked(&out[..]).unwrap();
                prop_assert_eq!(TcpRepr::parse(&again, src, dst), Ok(r));
            }
            let mut copy = b.clone();
            let mut m = Tcp::new_checked(&mut copy[..]).unwrap();
            m.fill_checksum(src, dst);
            prop_assert!(m.checksum_ok(src, dst));
            let _ = (m.options_mut().len(), m.payload_mut().len());
        }
        let _ = TcpRepr::parse(&Tcp::new_unchecked(&b[..]), src, dst);
    }

    #[test]
    fn vxlan_round_trips(vni in 0u32..=wire::vxlan::MAX_VNI, inner in vec(any::<u8>(), 0..64)) {
        let mut b = vec![0u8; 8];
        b.extend_from_slice(&inner);
        let mut v = Vxlan::new_unchecked(&mut b[..]);
        VxlanRepr { vni }.emit(&mut v).unwrap();
        let v = Vxlan::new_checked(&b[..]).unwrap();
        prop_assert_eq!(VxlanRepr::parse(&v), Ok(VxlanRepr { vni }));
        prop_assert_eq!(v.payload(), &inner[..]);
    }

    #[test]
    fn vxlan_never_panics(b in vec(any::<u8>(), 0..24), vni in any::<u32>()) {
        let _ = VxlanRepr::parse(&Vxlan::new_unchecked(&b[..]));
        if let Ok(v) = Vxlan::new_checked(&b[..]) {
            let _ = (v.flags(), v.vni_valid(), v.vni(), v.payload());
        }
        let mut copy = b.clone();
        let before = copy.clone();
        let r = VxlanRepr { vni }.emit(&mut Vxlan::new_unchecked(&mut copy[..]));
        if r.is_err() {
            prop_assert_eq!(copy, before, "nothing written on error");
        }
    }
}

#[test]
fn the_options_free_first_byte_is_one_compare() {
    let mut h = [0u8; 20];
    let mut v = Ipv4::new_unchecked(&mut h[..]);
    v.set_version(4);
    v.set_header_len(ipv4::MIN_HEADER_LEN);
    assert_eq!(v.version_ihl(), ipv4::VER_IHL_NO_OPTIONS);
}
