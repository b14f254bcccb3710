//! A whole VXLAN frame written out byte by byte, read layer by layer through the views and
//! the `Repr`s, and its VXLAN header written back to the same bytes.

use wire::{EtherType, Ethernet, Ipv4, Ipv4Addr, Ipv4Repr, Udp, UdpRepr, Vxlan, VxlanRepr};

fn ip(a: [u8; 4]) -> Ipv4Addr {
    Ipv4Addr::from(a)
}

/// A VXLAN packet as a VTEP sends it: outer Ethernet, IPv4 (DF, TTL 64) 192.168.0.1 →
/// 192.168.0.2, UDP 51234 → 4789 with checksum 0, VXLAN VNI 56, and an inner Ethernet/IPv4/UDP
/// frame 10.1.0.2:8080 → 10.1.1.2:8081 carrying "hiya". Checksums computed by a separate
/// script; tshark 4.0 decodes these bytes as VXLAN VNI 56 with those inner addresses.
const VXLAN_FRAME: &str = "\
020000000002020000000001080045000052123440004011a713c0a80001c0a80002c82212b5003e0000\
08000000000038000200000000a10200000000b008004500002000010000401165c70a0100020a010102\
1f901f91000c000068697961";

#[test]
fn vxlan_frame_layer_by_layer() {
    let b: Vec<u8> = (0..VXLAN_FRAME.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&VXLAN_FRAME[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(b.len(), 96);
    let eth = Ethernet::new_checked(&b[..]).unwrap();
    assert_eq!(eth.ethertype(), EtherType::Ipv4);
    let outer = Ipv4::new_checked(eth.payload()).unwrap();
    let o = Ipv4Repr::parse(&outer).unwrap();
    assert_eq!(
        (o.src_addr, o.dst_addr, o.ttl),
        (ip([192, 168, 0, 1]), ip([192, 168, 0, 2]), 64)
    );
    let udp = Udp::new_checked(outer.payload()).unwrap();
    assert_eq!(udp.dst_port(), wire::vxlan::UDP_PORT);
    assert_eq!(udp.checksum(), 0, "VXLAN over IPv4 sends no UDP checksum");
    let u = UdpRepr::parse(&udp, o.src_addr, o.dst_addr).unwrap();
    assert_eq!(u.payload_len, 8 + 14 + 20 + 8 + 4);
    let vx = Vxlan::new_checked(udp.payload()).unwrap();
    assert_eq!(VxlanRepr::parse(&vx), Ok(VxlanRepr { vni: 56 }));
    let inner = Ethernet::new_checked(vx.payload()).unwrap();
    let i = Ipv4Repr::parse(&Ipv4::new_checked(inner.payload()).unwrap()).unwrap();
    assert_eq!(
        (i.src_addr, i.dst_addr),
        (ip([10, 1, 0, 2]), ip([10, 1, 1, 2]))
    );
    assert_eq!(
        b.len() - vx.payload().len(),
        wire::vxlan::IPV4_OVERHEAD,
        "50 bytes in front of the inner frame"
    );
    // Emitting the same header over a copy gives the same bytes.
    let mut copy = b.clone();
    let at = 14 + 20 + 8;
    copy[at..at + 8].fill(0xee);
    VxlanRepr { vni: 56 }
        .emit(&mut Vxlan::new_unchecked(&mut copy[at..]))
        .unwrap();
    assert_eq!(copy, b);
}
