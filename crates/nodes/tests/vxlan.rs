//! VXLAN through the whole graph, between two in-process nodes A and B: a pod's packet on A
//! leaves the uplink encapsulated exactly as RFC 7348 says (checked with etherparse), B
//! decapsulates it into the network's VRF and delivers it to its pod; unknown VNIs, unknown
//! VTEPs and bad headers are counted; the tunnel's MTU is enforced; ARP across the tunnel is
//! answered by proxy for the pods behind a node.

mod graph_common;

use std::sync::Arc;

use arc_swap::ArcSwap;
use buffer::{Pool, PoolConfig};
use fib::adj::AdjTable;
use fib::{Ipv4Addr, Lpm};
use graph::Runtime;
use nodes::{Device, IfConfig, Shared, TunnelCounters, VxlanMap, VxlanTunnel};

use graph_common::{Frames, Inject, Output};

const POD: u32 = 0;
const UPLINK: u32 = 1;
const TUNNEL: u32 = 2;
/// A pod interface in the underlay's VRF (table 0, the configuration's default).
const UNDER_POD: u32 = 3;
const BLUE: u32 = 56;
const RED: u32 = 88;
const POD_MAC: [u8; 6] = [2, 0xaa, 0, 0, 0, 2];

/// One node: pod interface 10.1.N.1/24 in VRF slot 1 (blue), uplink 192.0.2.N/24 in slot 0,
/// a tunnel to the other node for VNI 56; the pod 10.1.N.2 is resolved.
struct Side {
    n: u8,
    rt: Runtime,
    pool: Pool,
    input: Frames,
    output: Frames,
    counters: Arc<TunnelCounters>,
    _keep: (AdjTable, Lpm, Lpm),
}

fn mac(n: u8, i: u32) -> [u8; 6] {
    [2, 0, 0, 0, n, i as u8]
}

fn ip(a: [u8; 4]) -> Ipv4Addr {
    Ipv4Addr::from(a)
}

fn side(n: u8, uplink_mtu: u16) -> Side {
    side_mtus(n, uplink_mtu, uplink_mtu - 50)
}

/// A node whose tunnel MTU is `tunnel_mtu` whatever its uplink's (a misconfiguration when it
/// is more than the uplink's minus 50).
fn side_mtus(n: u8, uplink_mtu: u16, tunnel_mtu: u16) -> Side {
    side_with(n, uplink_mtu, tunnel_mtu, true)
}

/// As `side_mtus`, with Don't Fragment on the outer header as `df` says.
fn side_with(n: u8, uplink_mtu: u16, tunnel_mtu: u16, df: bool) -> Side {
    let other = 3 - n;
    let counters = Arc::new(TunnelCounters::default());
    let mut pod = IfConfig::new(mac(n, POD), 1);
    pod.addresses.push((ip([10, 1, n, 1]), 24));
    let mut up = IfConfig::new(mac(n, UPLINK), 0);
    up.addresses.push((ip([192, 0, 2, n]), 24));
    up.mtu = uplink_mtu;
    let mut tun = IfConfig::new(mac(n, TUNNEL), 1);
    tun.mtu = tunnel_mtu;
    tun.device = Device::Vxlan(VxlanTunnel {
        vni: BLUE,
        src: ip([192, 0, 2, n]),
        dst: ip([192, 0, 2, other]),
        underlay: 0,
        uplink: UPLINK,
        df,
        ranges: vec![(ip([10, 1, 0, 0]), 16)],
        counters: counters.clone(),
    });
    let under_pod = IfConfig::new(mac(n, UNDER_POD), 0);
    let ifs = vec![pod, up, tun, under_pod];
    let mut adj = AdjTable::new();
    for (i, c) in ifs.iter().enumerate() {
        adj.set_interface_mac(i as u32, c.mac);
        adj.set_interface_mtu(i as u32, c.mtu);
    }
    let pod_nh = adj.add_next_hop(POD, ip([10, 1, n, 2]));
    adj.learn(POD, ip([10, 1, n, 2]), POD_MAC);
    let vtep = adj.add_next_hop(UPLINK, ip([192, 0, 2, other]));
    adj.learn(UPLINK, ip([192, 0, 2, other]), mac(other, UPLINK));
    // The other node's pods: ARP across the tunnel for each (a connected-style glean), and
    // its pod 10.1.other.2 already learned.
    let glean = adj.add_next_hop(TUNNEL, Ipv4Addr::UNSPECIFIED);
    let remote_pod = adj.add_next_hop(TUNNEL, ip([10, 1, other, 2]));
    adj.learn(TUNNEL, ip([10, 1, other, 2]), mac(other, TUNNEL));
    let (mut under, mut blue) = (Lpm::new(8), Lpm::new(8));
    under
        .insert(ip([192, 0, 2, n]), 32, AdjTable::LOCAL)
        .unwrap();
    under.insert(ip([192, 0, 2, other]), 32, vtep).unwrap();
    blue.insert(ip([10, 1, n, 1]), 32, AdjTable::LOCAL).unwrap();
    blue.insert(ip([10, 1, n, 2]), 32, pod_nh).unwrap();
    blue.insert(ip([10, 1, other, 0]), 24, glean).unwrap();
    blue.insert(ip([10, 1, other, 2]), 32, remote_pod).unwrap();
    let shared = Shared::new(
        Arc::new(ArcSwap::from_pointee(ifs)),
        Arc::new(ArcSwap::from_pointee(vec![under.reader(), blue.reader()])),
        adj.reader(),
    );
    shared.vxlan.store(Arc::new(VxlanMap {
        tunnels: [((ip([192, 0, 2, other]), BLUE), TUNNEL)].into(),
        vnis: [BLUE, RED].into(),
        vteps: vec![(0, ip([192, 0, 2, n]))],
    }));
    let (input, output) = (Frames::default(), Frames::default());
    let stubs: Vec<Box<dyn graph::AnyNode>> = vec![
        Box::new(Inject::new("test-input", input.clone())),
        Box::new(Output::recording("memif-output", output.clone())),
    ];
    let learned = std::sync::mpsc::sync_channel(64).0;
    Side {
        n,
        rt: testkit::stubs::runtime(stubs, &shared, learned, 64),
        pool: Pool::new(PoolConfig {
            count: 512,
            ..Default::default()
        })
        .unwrap(),
        input,
        output,
        counters,
        _keep: (adj, under, blue),
    }
}

impl Side {
    /// Runs `frames` (interface, bytes) through the graph; returns what came out.
    fn run(&mut self, frames: Vec<(u32, Vec<u8>)>) -> Vec<(u32, Vec<u8>)> {
        self.input.lock().unwrap().extend(frames);
        for _ in 0..4 {
            self.rt.dispatch(&mut self.pool);
        }
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
        std::mem::take(&mut *self.output.lock().unwrap())
    }

    fn errors(&mut self) -> Vec<(&'static str, &'static str, u64)> {
        let e = self.rt.errors();
        self.rt.clear_errors();
        e
    }

    /// A UDP packet from this node's pod to `dst`, as the pod sends it.
    fn pod_packet(&self, dst: [u8; 4], payload: &[u8], df: bool) -> (u32, Vec<u8>) {
        let macs = testkit::Macs {
            src: POD_MAC,
            dst: mac(self.n, POD),
        };
        let src = [10, 1, self.n, 2];
        let mut v = testkit::udp4_frame_ports(macs, src, dst, 64, (5000, 6000), payload);
        if df {
            v[20] |= 0x40;
        } else {
            v[20] &= !0x40;
        }
        let mut h = etherparse::Ipv4Header::from_slice(&v[14..]).unwrap().0;
        h.header_checksum = h.calc_header_checksum();
        v[14..34].copy_from_slice(&h.to_bytes());
        (POD, v)
    }
}

#[test]
fn a_pod_packet_crosses_the_tunnel_with_rfc_7348_headers() {
    let (mut a, mut b) = (side(1, 1500), side(2, 1500));
    let payload: Vec<u8> = (0..100u8).collect();
    let (lookups, rewrites) = (a.vectors("ip4-lookup"), a.vectors("ip4-rewrite"));
    let out = a.run(vec![a.pod_packet([10, 1, 2, 2], &payload, true)]);
    assert_eq!(out.len(), 1, "{:?}", a.errors());
    // The inner packet is looked up and rewritten in ethernet-input, which hands it to
    // vxlan4-encap; the outer one gets its Ethernet header from the resolved VTEP's adjacency
    // there and goes straight to the uplink: one lookup, neither ip4-lookup nor ip4-rewrite.
    assert_eq!(a.vectors("ip4-lookup"), lookups);
    assert_eq!(a.vectors("ip4-rewrite"), rewrites);
    let (tx, outer) = &out[0];
    assert_eq!(*tx, UPLINK);
    let p = etherparse::SlicedPacket::from_ethernet(outer).unwrap();
    let Some(etherparse::LinkSlice::Ethernet2(eth)) = &p.link else {
        panic!("no ethernet")
    };
    assert_eq!(
        (eth.destination(), eth.source()),
        (mac(2, UPLINK), mac(1, UPLINK))
    );
    let Some(etherparse::NetSlice::Ipv4(ip4)) = &p.net else {
        panic!("no ipv4")
    };
    let h = ip4.header();
    assert_eq!(
        (h.source(), h.destination()),
        ([192, 0, 2, 1], [192, 0, 2, 2])
    );
    assert_eq!(h.ttl(), 64, "outer TTL 64, not decremented");
    assert!(h.dont_fragment());
    assert_eq!(h.to_header().calc_header_checksum(), h.header_checksum());
    let Some(etherparse::TransportSlice::Udp(u)) = &p.transport else {
        panic!("no udp")
    };
    assert_eq!(u.destination_port(), 4789);
    assert!(u.source_port() >= 49152);
    assert_eq!(u.checksum(), 0);
    let vx = u.payload();
    assert_eq!(&vx[..8], &[0x08, 0, 0, 0, 0, 0, BLUE as u8, 0]);
    let inner = etherparse::SlicedPacket::from_ethernet(&vx[8..]).unwrap();
    let Some(etherparse::LinkSlice::Ethernet2(ieth)) = &inner.link else {
        panic!("no inner ethernet")
    };
    assert_eq!(
        (ieth.destination(), ieth.source()),
        (mac(2, TUNNEL), mac(1, TUNNEL))
    );
    let Some(etherparse::NetSlice::Ipv4(iip)) = &inner.net else {
        panic!("no inner ipv4")
    };
    assert_eq!(iip.header().ttl(), 63, "the inner packet was routed once");
    assert_eq!(a.counters.snapshot()[2], 1);

    // B takes it off its uplink and delivers the inner packet to its pod.
    let out = b.run(vec![(UPLINK, outer.clone())]);
    assert_eq!(out.len(), 1, "{:?}", b.errors());
    let (tx, frame) = &out[0];
    assert_eq!(*tx, POD);
    let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip4)) = &p.net else {
        panic!("no ipv4")
    };
    assert_eq!(ip4.header().destination(), [10, 1, 2, 2]);
    assert_eq!(ip4.header().ttl(), 62);
    let Some(etherparse::TransportSlice::Udp(u)) = &p.transport else {
        panic!("no udp")
    };
    assert_eq!(u.payload(), &payload[..]);
    assert_eq!(b.counters.snapshot()[0], 1);
    assert!(b.errors().is_empty());
}

#[test]
fn flows_get_different_source_ports_and_a_flow_keeps_its_own() {
    let mut a = side(1, 1500);
    let port = |a: &mut Side, sport: u16| {
        let (_, mut f) = a.pod_packet([10, 1, 2, 2], b"x", true);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[40..42].fill(0); // no UDP checksum: the port changed
        let out = a.run(vec![(POD, f)]);
        u16::from_be_bytes([out[0].1[34], out[0].1[35]])
    };
    let ports: std::collections::HashSet<u16> = (0..32).map(|s| port(&mut a, 1000 + s)).collect();
    assert!(ports.len() > 20, "32 flows on {} ports", ports.len());
    assert_eq!(port(&mut a, 1000), port(&mut a, 1000));
}

#[test]
fn bad_vxlan_is_counted_by_kind() {
    let (mut a, mut b) = (side(1, 1500), side(2, 1500));
    let out = a.run(vec![a.pod_packet([10, 1, 2, 2], b"hello", true)]);
    let good = out[0].1.clone();
    // Outer header offsets: Ethernet 14, IPv4 20, UDP 8, then VXLAN.
    const VX: usize = 42;
    let mut no_i = good.clone();
    no_i[VX] = 0;
    let mut red = good.clone();
    red[VX + 6] = RED as u8;
    let mut nobody = good.clone();
    nobody[VX + 6] = 77;
    let mut stranger = good.clone();
    stranger[29] = 9; // outer source 192.0.2.9: no tunnel from there
    let fix = |f: &mut Vec<u8>| {
        let mut h = etherparse::Ipv4Header::from_slice(&f[14..]).unwrap().0;
        h.header_checksum = h.calc_header_checksum();
        f[14..34].copy_from_slice(&h.to_bytes());
    };
    fix(&mut stranger);
    let mut short = good[..VX + 8 + 6].to_vec();
    let total = (short.len() - 14) as u16;
    short[16..18].copy_from_slice(&total.to_be_bytes());
    short[38..40].copy_from_slice(&(total - 20).to_be_bytes());
    fix(&mut short);
    for (frame, counter) in [
        (no_i, "vxlan flags without the I bit (no valid vni)"),
        (red, "vxlan from a vtep with no tunnel for its vni"),
        (stranger, "vxlan from a vtep with no tunnel for its vni"),
        (nobody, "vxlan vni of no network"),
        (short, "vxlan header or inner ethernet header truncated"),
    ] {
        assert!(b.run(vec![(UPLINK, frame)]).is_empty());
        let e = b.errors();
        assert!(
            e.iter()
                .any(|(n, c, k)| *n == "vxlan4-input" && *c == counter && *k == 1),
            "{counter}: {e:?}"
        );
    }
    // An inner frame for another MAC, and an inner packet whose TTL runs out here.
    let mut other_mac = good.clone();
    other_mac[VX + 8] = 0x0a;
    assert!(b.run(vec![(UPLINK, other_mac)]).is_empty());
    assert!(b.errors().iter().any(|e| e.1 == "l3 mac mismatch"));
    let mut ttl1 = good.clone();
    ttl1[VX + 8 + 14 + 8] = 1;
    ttl1[VX + 8 + 14 + 10..VX + 8 + 14 + 12].fill(0);
    let mut h = etherparse::Ipv4Header::from_slice(&ttl1[VX + 8 + 14..])
        .unwrap()
        .0;
    h.header_checksum = h.calc_header_checksum();
    ttl1[VX + 8 + 14..VX + 8 + 34].copy_from_slice(&h.to_bytes());
    let _ = b.run(vec![(UPLINK, ttl1)]);
    assert!(
        b.errors()
            .iter()
            .any(|e| e.1 == "ttl expired (sent to ip4-icmp-error)")
    );
}

#[test]
fn the_tunnel_mtu_is_the_uplinks_minus_50() {
    let mut a = side(1, 1500);
    // 1450 bytes of inner IPv4 fit; 1451 do not.
    let fits = a.run(vec![a.pod_packet([10, 1, 2, 2], &[0; 1450 - 28], true)]);
    assert_eq!(fits.len(), 1);
    assert_eq!(
        fits[0].1.len(),
        14 + 1500,
        "the outer packet is exactly the uplink MTU"
    );
    let big = a.run(vec![a.pod_packet([10, 1, 2, 2], &[0; 1451 - 28], true)]);
    // DF set: ICMP fragmentation needed, MTU 1450, back to the pod.
    assert_eq!(big.len(), 1);
    let (tx, icmp) = &big[0];
    assert_eq!(*tx, POD);
    let p = etherparse::SlicedPacket::from_ethernet(icmp).unwrap();
    let Some(etherparse::TransportSlice::Icmpv4(m)) = &p.transport else {
        panic!("no icmp")
    };
    assert_eq!(
        m.icmp_type(),
        etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded { next_hop_mtu: 1450 }
        )
    );
    // No DF: dropped and counted (veclane does not fragment).
    a.errors();
    assert!(
        a.run(vec![a.pod_packet([10, 1, 2, 2], &[0; 1451 - 28], false)])
            .is_empty()
    );
    assert!(
        a.errors()
            .iter()
            .any(|e| e.1 == "over the interface mtu without df (not fragmented, dropped)")
    );
    // A 9000-byte uplink carries a 1500-byte inner packet (a chain of buffers).
    let mut j = side(1, 9000);
    let out = j.run(vec![j.pod_packet([10, 1, 2, 2], &[7; 1500 - 28], true)]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.len(), 14 + 1500 + 50);
}

/// What the direct path does not take goes through ip4-rewrite with the VTEP's adjacency and
/// comes out the same: a traced packet (with ip4-rewrite's record), and an outer packet over
/// the uplink's MTU (a tunnel MTU configured too large), which ip4-rewrite refuses and counts.
#[test]
fn traced_and_oversize_outer_packets_take_ip4_rewrite() {
    let mut a = side(1, 1500);
    let direct = a.run(vec![a.pod_packet([10, 1, 2, 2], &[5; 300], true)]);
    a.rt.trace_add("test-input", 1).unwrap();
    let rewrites = a.vectors("ip4-rewrite");
    let traced = a.run(vec![a.pod_packet([10, 1, 2, 2], &[5; 300], true)]);
    // The inner packet is rewritten in ethernet-input, traced or not; the outer one, traced,
    // leaves vxlan4-encap's direct path for ip4-rewrite.
    assert_eq!(a.vectors("ip4-rewrite"), rewrites + 1, "the outer one");
    assert_eq!(traced, direct, "the same frame either way");
    let t = a.rt.show_trace();
    assert!(t.contains("vxlan4-encap") && t.contains("vni"), "{t}");

    let mut m = side_mtus(1, 1500, 1480);
    m.errors();
    let out = m.run(vec![m.pod_packet([10, 1, 2, 2], &[0; 1470 - 28], true)]);
    assert!(out.is_empty(), "{out:?}");
    assert!(
        m.errors()
            .iter()
            .any(|e| e.0 == "ip4-rewrite" && e.1.contains("an encapsulated one")),
        "counted by ip4-rewrite"
    );
}

#[test]
fn arp_across_the_tunnel_is_answered_for_our_pods_only() {
    let (mut a, mut b) = (side(1, 1500), side(2, 1500));
    // A packet to an unresolved host behind B: A asks over the tunnel, on the sender's behalf.
    let out = a.run(vec![a.pod_packet([10, 1, 2, 7], b"x", true)]);
    assert_eq!(out.len(), 1);
    let req = out[0].1.clone();
    let inner = &req[50..];
    assert_eq!(&inner[12..14], &[0x08, 0x06], "an inner ARP request");
    assert_eq!(
        &inner[14 + 14..14 + 18],
        &[10, 1, 1, 2],
        "asked for the pod"
    );
    // B answers for 10.1.2.7 only if it delivers it: it has no route, so no answer.
    assert!(b.run(vec![(UPLINK, req.clone())]).is_empty());
    assert!(
        b.errors()
            .iter()
            .any(|e| e.1 == "arp request for an address that is not ours")
    );
    // For its own pod 10.1.2.2 it answers, with its tunnel's MAC, back through the tunnel.
    let mut for_pod = req.clone();
    for_pod[50 + 38..50 + 42].copy_from_slice(&[10, 1, 2, 2]);
    let out = b.run(vec![(UPLINK, for_pod)]);
    assert_eq!(out.len(), 1, "{:?}", b.errors());
    let reply = &out[0].1[50..];
    assert_eq!(&reply[20..22], &[0, 2], "an ARP reply");
    assert_eq!(&reply[22..28], &mac(2, TUNNEL));
    assert_eq!(&reply[28..32], &[10, 1, 2, 2]);
}

#[test]
fn vxlan_from_a_pod_a_fragment_or_a_spoofed_arp_goes_nowhere() {
    let (mut a, mut b) = (side(1, 1500), side(2, 1500));
    let out = a.run(vec![a.pod_packet([10, 1, 2, 2], b"hello", true)]);
    let good = out[0].1.clone();
    // A pod on B sends that very VXLAN packet to its gateway (B's blue address 10.1.2.1),
    // claiming A's VTEP as source: it arrived in blue's VRF, not the underlay.
    let mut from_pod = good.clone();
    from_pod[0..6].copy_from_slice(&mac(2, POD));
    from_pod[30..34].copy_from_slice(&[10, 1, 2, 1]);
    let fix = |f: &mut Vec<u8>| {
        let mut h = etherparse::Ipv4Header::from_slice(&f[14..]).unwrap().0;
        h.header_checksum = h.calc_header_checksum();
        f[14..34].copy_from_slice(&h.to_bytes());
    };
    fix(&mut from_pod);
    assert!(b.run(vec![(POD, from_pod.clone())]).is_empty());
    let refused = |b: &mut Side| {
        b.errors()
            .iter()
            .find(|e| {
                e.1 == "vxlan not received on its tunnel's uplink (interface, vrf or vtep address)"
            })
            .map_or(0, |e| e.2)
    };
    assert_eq!(refused(&mut b), 1, "decapsulated only from the underlay");
    // Several in one frame: after the first, ethernet-input's direct loop takes them, the
    // one without the bypass check in a VRF where no tunnel ends; they go the same way.
    assert!(b.run(vec![(POD, from_pod); 4]).is_empty());
    assert_eq!(refused(&mut b), 4, "errors() clears what it read");
    // A pod in the underlay's VRF (a memif in table 0) spoofing A's VTEP: the same datagram,
    // addressed to B's VTEP, received on the pod's interface instead of the uplink. Alone,
    // and several in one frame (the direct loop after the first).
    let mut under = good.clone();
    under[0..6].copy_from_slice(&mac(2, UNDER_POD));
    assert!(b.run(vec![(UNDER_POD, under.clone())]).is_empty());
    assert_eq!(
        refused(&mut b),
        1,
        "decapsulated only from the tunnel's uplink"
    );
    let mut mixed = vec![(UPLINK, good.clone())];
    mixed.extend(vec![(UNDER_POD, under); 3]);
    assert_eq!(b.run(mixed).len(), 1);
    assert_eq!(refused(&mut b), 3, "the direct loop too");
    // A VXLAN datagram in two fragments (a Linux VTEP sends them when its uplink's MTU is
    // too small and DF is off): the first alone is held, and with the second the datagram
    // is reassembled and decapsulated like the whole one.
    let whole = b.run(vec![(UPLINK, good.clone())]);
    assert_eq!(whole.len(), 1, "{:?}", b.errors());
    let split = |mf: bool, offset: usize, payload: std::ops::Range<usize>| {
        let mut f = [&good[..34], &good[34 + payload.start..34 + payload.end]].concat();
        let total = (20 + payload.len()) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        let flags = (u16::from(mf) << 13) | (offset / 8) as u16;
        f[20..22].copy_from_slice(&flags.to_be_bytes());
        fix(&mut f);
        f
    };
    let ip_payload = good.len() - 34;
    let first = split(true, 0, 0..16);
    assert!(b.run(vec![(UPLINK, first.clone())]).is_empty());
    assert!(
        b.errors()
            .iter()
            .any(|e| e.1 == "fragment held for reassembly (not an error)")
    );
    let second = split(false, 16, 16..ip_payload);
    assert_eq!(b.run(vec![(UPLINK, second)]), whole);
    assert!(
        b.errors()
            .iter()
            .any(|e| e.1 == "datagram reassembled (not an error)")
    );
    // Across the tunnel, an ARP request whose sender is B's own pod (10.1.2.2): not learned,
    // not answered.
    let req = a.run(vec![a.pod_packet([10, 1, 2, 7], b"x", true)])[0]
        .1
        .clone();
    let mut spoof = req.clone();
    spoof[50 + 28..50 + 32].copy_from_slice(&[10, 1, 2, 2]);
    spoof[50 + 38..50 + 42].copy_from_slice(&[10, 1, 2, 2]);
    assert!(b.run(vec![(UPLINK, spoof)]).is_empty());
    assert!(
        b.errors()
            .iter()
            .any(|e| e.1 == "arp on a tunnel from an address this node delivers (not learned)")
    );
    // A sender of the network that B routes nowhere near A's tunnel (10.1.9.9: neither A's
    // /24 nor a host route through it): not learned, not answered. A's own pod is.
    let for_pod = |sender: [u8; 4]| {
        let mut f = req.clone();
        f[50 + 28..50 + 32].copy_from_slice(&sender);
        f[50 + 38..50 + 42].copy_from_slice(&[10, 1, 2, 2]);
        f
    };
    let not_routed = "arp on a tunnel from an address not routed through it (not learned)";
    assert!(b.run(vec![(UPLINK, for_pod([10, 1, 9, 9]))]).is_empty());
    assert!(b.errors().iter().any(|e| e.1 == not_routed));
    assert_eq!(b.run(vec![(UPLINK, for_pod([10, 1, 1, 2]))]).len(), 1);
    assert!(!b.errors().iter().any(|e| e.1 == not_routed));
}

impl Side {
    /// The packets node `node` has taken so far.
    fn vectors(&mut self, node: &str) -> u64 {
        graph_common::vectors(&self.rt, node)
    }
}

/// VXLAN without a UDP checksum goes from `ip4-input` straight to `vxlan4-input`; with one,
/// or with a UDP length that disagrees, it takes the way through `ip4-local` and `udp4-local`,
/// which verify them; and every way ends at the pod or under its counter.
#[test]
fn plain_vxlan_skips_the_local_path_and_anything_else_takes_it() {
    let (mut a, mut b) = (side(1, 1500), side(2, 1500));
    let good = a.run(vec![a.pod_packet([10, 1, 2, 2], b"hello", true)])[0]
        .1
        .clone();
    assert_eq!(&good[40..42], &[0, 0], "sent without a UDP checksum");
    let before = (
        b.vectors("udp4-local"),
        b.vectors("vxlan4-input"),
        b.vectors("ethernet-input"),
    );
    assert_eq!(b.run(vec![(UPLINK, good.clone())]).len(), 1);
    assert_eq!(b.vectors("udp4-local"), before.0, "bypassed");
    assert!(b.vectors("vxlan4-input") > before.1);
    // The inner frame (IPv4 to the tunnel's MAC) went from vxlan4-input to ip4-input: one
    // pass of ethernet-input, the outer frame's.
    assert_eq!(b.vectors("ethernet-input"), before.2 + 1);
    // A run of them (ethernet-input's direct loop, with the bypass check where a tunnel
    // ends in the receiving interface's VRF): bypassed all the same.
    assert_eq!(b.run(vec![(UPLINK, good.clone()); 4]).len(), 4);
    assert_eq!(b.vectors("udp4-local"), before.0, "a run bypassed too");
    // A checksummed datagram: verified on the long way, then decapsulated.
    let with_sum = |f: &[u8], good_sum: bool| {
        let mut f = f.to_vec();
        let ip = etherparse::Ipv4HeaderSlice::from_slice(&f[14..34]).unwrap();
        let (src, dst) = (ip.source(), ip.destination());
        let mut u = wire::Udp::new_unchecked(&mut f[34..]);
        u.fill_checksum(src.into(), dst.into());
        if !good_sum {
            f[40] ^= 0x55;
        }
        f
    };
    let before = b.vectors("udp4-local");
    assert_eq!(b.run(vec![(UPLINK, with_sum(&good, true))]).len(), 1);
    assert!(b.vectors("udp4-local") > before, "checked on the way");
    assert!(b.run(vec![(UPLINK, with_sum(&good, false))]).is_empty());
    assert!(b.errors().iter().any(|e| e.1 == "udp checksum error"));
    // A UDP length shorter than IPv4's says: the long way, and its counter.
    let mut short_udp = good.clone();
    let l = u16::from_be_bytes([good[38], good[39]]) - 2;
    short_udp[38..40].copy_from_slice(&l.to_be_bytes());
    assert!(b.run(vec![(UPLINK, short_udp)]).is_empty());
    assert!(
        b.errors()
            .iter()
            .any(|e| e.1 == "udp header truncated or its length disagrees with ip's")
    );
    // Plain VXLAN to a VTEP address that is not ours in this VRF: not bypassed, and the
    // long way does not find it ours either.
    let mut elsewhere = good.clone();
    elsewhere[33] = 77;
    let mut h = etherparse::Ipv4Header::from_slice(&elsewhere[14..])
        .unwrap()
        .0;
    h.header_checksum = h.calc_header_checksum();
    elsewhere[14..34].copy_from_slice(&h.to_bytes());
    let before = b.vectors("vxlan4-input");
    let _ = b.run(vec![(UPLINK, elsewhere)]);
    assert_eq!(b.vectors("vxlan4-input"), before);
}

/// `vxlan4-encap` and `vxlan4-input` take runs of one tunnel's packets in direct loops of
/// their own and hand anything else back to their general loop, mid-frame. Each packet must
/// come out as it does alone: the same packets leave on the same interfaces with the same
/// bytes (outer identification included: the tunnel leaves DF off), every counter moves as
/// much and the tunnel counts the same. Checked on A (pods' packets: to the remote pod on two
/// flows, to its own pod, over the tunnel's MTU, traced; nothing that reaches the tunnel by
/// another way, such as ARP for a remote pod, which would take its identification in another
/// order) and
/// on B (A's encapsulated packets, with VXLAN of another VNI, from another VTEP, carrying ARP
/// or another MAC, in the middle), against the same packets one per frame.
#[test]
fn a_packet_in_a_mixed_frame_crosses_the_tunnel_as_it_does_alone() {
    type Outcome = (
        Vec<(u32, Vec<u8>)>,
        Vec<(&'static str, &'static str, u64)>,
        [u64; 4],
    );
    let outcome = |n: u8, frames: Vec<Vec<(u32, Vec<u8>)>>, traced: u32| -> Outcome {
        let mut s = side_with(n, 1500, 1450, false);
        if traced > 0 {
            s.rt.trace_add("test-input", traced).unwrap();
        }
        let mut out = Vec::new();
        for f in frames {
            out.extend(s.run(f));
        }
        out.sort();
        let mut errors = s.errors();
        errors.sort();
        (out, errors, s.counters.snapshot())
    };
    let alone = |n, frame: &[(u32, Vec<u8>)]| {
        outcome(n, frame.iter().map(|p| vec![p.clone()]).collect(), 0)
    };

    let a = side_with(1, 1500, 1450, false);
    let payload: Vec<u8> = (0..64u8).collect();
    let remote = a.pod_packet([10, 1, 2, 2], &payload, true);
    let mut other_flow = remote.clone();
    other_flow.1[34..36].copy_from_slice(&7777u16.to_be_bytes());
    other_flow.1[40..42].fill(0);
    let local = a.pod_packet([10, 1, 1, 2], &payload, true);
    let too_big = a.pod_packet([10, 1, 2, 2], &[9u8; 1440], true);
    let mut frame = Vec::new();
    let mut run = |k: usize, p: &(u32, Vec<u8>)| frame.extend((0..k).map(|_| p.clone()));
    run(4, &remote);
    run(2, &other_flow);
    run(3, &remote);
    run(1, &local);
    run(2, &remote);
    run(1, &too_big);
    run(3, &other_flow);
    run(2, &remote);
    let on_a = alone(1, &frame);
    assert_eq!(on_a.0.iter().filter(|(tx, _)| *tx == UPLINK).count(), 16);
    assert_eq!(outcome(1, vec![frame.clone()], 0), on_a, "A, one frame");
    assert_eq!(
        outcome(1, vec![frame.clone()], 6),
        on_a,
        "A, the first six traced"
    );

    // On B: A's packets as they left its uplink, with VXLAN that B's direct loop must give
    // back in the middle of them.
    let outer: Vec<(u32, Vec<u8>)> = on_a
        .0
        .iter()
        .filter(|(tx, _)| *tx == UPLINK)
        .cloned()
        .collect();
    let (_, first) = outer[0].clone();
    let mut red = first.clone();
    red[14 + 20 + 8 + 4..14 + 20 + 8 + 7].copy_from_slice(&[0, 0, RED as u8]);
    let mut stranger = first.clone();
    stranger[14 + 12..14 + 16].copy_from_slice(&[192, 0, 2, 77]);
    let mut other_mac = first.clone();
    other_mac[50..56].copy_from_slice(&[2, 0, 0, 0, 9, 9]);
    let mut arp = first.clone();
    arp[50..56].fill(0xff);
    arp[62..64].copy_from_slice(&[0x08, 0x06]);
    let mut frame = Vec::new();
    for (k, p) in outer.iter().enumerate() {
        frame.push(p.clone());
        let odd = match k {
            3 => Some(&red),
            6 => Some(&stranger),
            9 => Some(&other_mac),
            12 => Some(&arp),
            _ => None,
        };
        frame.extend(odd.map(|f| (UPLINK, f.clone())));
    }
    let on_b = alone(2, &frame);
    assert_eq!(on_b.0.iter().filter(|(tx, _)| *tx == POD).count(), 16);
    assert_eq!(outcome(2, vec![frame.clone()], 0), on_b, "B, one frame");
    assert_eq!(outcome(2, vec![frame], 6), on_b, "B, the first six traced");
}
