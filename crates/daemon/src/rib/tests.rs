use super::*;

const MAC0: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC1: [u8; 6] = [2, 0, 0, 0, 1, 1];
const PEER: [u8; 6] = [2, 0, 0, 0, 9, 9];

fn p(s: &str) -> Ipv4Prefix {
    s.parse().unwrap()
}
fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// Two interfaces in table 0 with 10.0.0.1/24 and 10.0.1.1/24.
fn two_interfaces() -> (Rib, Vec<IfConfig>) {
    let mut rib = Rib::new();
    let mut ifs = vec![IfConfig::new(MAC0, 0), IfConfig::new(MAC1, 0)];
    for (i, a) in ["10.0.0.1/24", "10.0.1.1/24"].into_iter().enumerate() {
        rib.set_interface_mac(i as u32, ifs[i].mac);
        let a = p(a);
        ifs[i].addresses.push((a.addr, a.len));
        rib.add_address(&ifs, i as u32, 0, a).unwrap();
    }
    (rib, ifs)
}

/// What a worker finds for `a` in table `table`, going through its slot as workers do.
fn lookup(rib: &Rib, table: u32, a: &str) -> Option<Adjacency> {
    let v = rib.vrfs().load();
    let adj = v[rib.slot(table)? as usize].lookup(ip(a))?;
    rib.adj.get(adj)
}

fn shown(rib: &Rib) -> Vec<String> {
    rib.entries(None)
        .unwrap()
        .iter()
        .map(|e| format!("{} {} {:?}", e.table, e.prefix, e.kind))
        .collect()
}

#[test]
fn an_address_brings_its_local_and_connected_routes() {
    let (mut rib, _) = two_interfaces();
    assert_eq!(
        shown(&rib),
        [
            "0 10.0.0.0/24 Connected",
            "0 10.0.0.1/32 Local",
            "0 10.0.1.0/24 Connected",
            "0 10.0.1.1/32 Local"
        ]
    );
    assert_eq!(lookup(&rib, 0, "10.0.0.1"), Some(Adjacency::Local));
    assert_eq!(
        lookup(&rib, 0, "10.0.1.77"),
        Some(Adjacency::Glean {
            tx_if: 1,
            next_hop: Ipv4Addr::UNSPECIFIED
        })
    );
    assert_eq!(lookup(&rib, 0, "192.0.2.1"), None);
    assert!(rib.take_unlinked());
    assert!(!rib.take_unlinked());
}

#[test]
fn neighbours_get_host_routes_that_resolve_and_go_with_them() {
    let (mut rib, ifs) = two_interfaces();
    rib.add_neighbor(&ifs, 1, ip("10.0.1.2"), PEER).unwrap();
    assert_eq!(
        lookup(&rib, 0, "10.0.1.2"),
        Some(Adjacency::Rewrite {
            tx_if: 1,
            next_hop: ip("10.0.1.2"),
            dst: PEER,
            src: MAC1,
            mtu: u16::MAX,
        })
    );
    // Off-subnet neighbours get no host route.
    rib.add_neighbor(&ifs, 1, ip("10.9.9.9"), PEER).unwrap();
    assert!(
        rib.entries(Some(0))
            .unwrap()
            .iter()
            .all(|e| e.prefix != p("10.9.9.9/32"))
    );
    assert!(rib.neighbours().iter().all(|n| n.3), "both static");
    let before = rib.next_hop_count();
    rib.del_neighbor(&ifs, 1, ip("10.0.1.2"));
    assert_eq!(rib.next_hop_count(), before - 1, "its adjacency is freed");
    assert!(matches!(
        lookup(&rib, 0, "10.0.1.2"),
        Some(Adjacency::Glean { .. })
    ));
}

#[test]
fn learned_neighbours_do_not_override_static_ones() {
    let (mut rib, ifs) = two_interfaces();
    rib.add_neighbor(&ifs, 1, ip("10.0.1.2"), PEER).unwrap();
    let other = [2, 0, 0, 0, 7, 7];
    rib.learn(
        &ifs,
        Learned {
            ifindex: 1,
            ip: ip("10.0.1.2"),
            mac: other,
        },
    )
    .unwrap();
    assert!(matches!(
        lookup(&rib, 0, "10.0.1.2"),
        Some(Adjacency::Rewrite { dst: PEER, .. })
    ));
    rib.learn(
        &ifs,
        Learned {
            ifindex: 0,
            ip: ip("10.0.0.5"),
            mac: other,
        },
    )
    .unwrap();
    assert!(matches!(
        lookup(&rib, 0, "10.0.0.5"),
        Some(Adjacency::Rewrite { dst, .. }) if dst == other
    ));
    assert!(
        rib.neighbours()
            .iter()
            .any(|n| n.1 == ip("10.0.0.5") && !n.3)
    );
    // A learned neighbour on an interface that does not exist is ignored.
    rib.learn(
        &ifs,
        Learned {
            ifindex: 7,
            ip: ip("10.0.0.6"),
            mac: other,
        },
    )
    .unwrap();
    assert!(rib.neighbours().iter().all(|n| n.0 != 7));
}

#[test]
fn static_routes_share_next_hops_by_reference_count() {
    let (mut rib, ifs) = two_interfaces();
    let base = rib.next_hop_count();
    let nh = Via::Address(ip("10.0.1.2"));
    rib.add_route(&ifs, 0, p("172.16.0.0/12"), nh, None)
        .unwrap();
    rib.add_route(&ifs, 0, p("192.168.7.9/24"), nh, Some(1))
        .unwrap();
    assert_eq!(rib.next_hop_count(), base + 1, "one adjacency, two routes");
    assert!(
        rib.entries(Some(0))
            .unwrap()
            .iter()
            .any(|e| e.prefix == p("192.168.7.0/24")),
        "host bits are cleared"
    );
    rib.add_neighbor(&ifs, 1, ip("10.0.1.2"), PEER).unwrap();
    assert!(matches!(
        lookup(&rib, 0, "172.20.1.1"),
        Some(Adjacency::Rewrite {
            dst: PEER,
            tx_if: 1,
            ..
        })
    ));
    rib.del_route(0, p("172.16.0.0/12")).unwrap();
    assert_eq!(lookup(&rib, 0, "172.20.1.1"), None);
    rib.del_route(0, p("192.168.7.0/24")).unwrap();
    // The neighbour's host route still holds its own reference.
    assert_eq!(rib.next_hop_count(), base + 1);
    rib.del_neighbor(&ifs, 1, ip("10.0.1.2"));
    assert_eq!(rib.next_hop_count(), base);
}

#[test]
fn replacing_a_static_route_releases_the_old_next_hop() {
    let (mut rib, ifs) = two_interfaces();
    let base = rib.next_hop_count();
    let pre = p("172.16.0.0/12");
    rib.add_route(&ifs, 0, pre, Via::Address(ip("10.0.1.2")), None)
        .unwrap();
    rib.add_route(&ifs, 0, pre, Via::Address(ip("10.0.0.2")), None)
        .unwrap();
    assert_eq!(rib.next_hop_count(), base + 1);
    rib.add_route(&ifs, 0, pre, Via::Drop, None).unwrap();
    assert_eq!(rib.next_hop_count(), base);
    assert_eq!(lookup(&rib, 0, "172.16.0.1"), Some(Adjacency::Drop));
}

#[test]
fn refusals_say_why() {
    let (mut rib, ifs) = two_interfaces();
    assert_eq!(
        rib.add_route(&ifs, 0, p("10.0.0.1/32"), Via::Drop, None),
        Err(RibError::NotStatic {
            prefix: p("10.0.0.1/32"),
            table: 0
        })
    );
    assert_eq!(
        rib.del_route(0, p("10.0.1.0/24")),
        Err(RibError::NotStatic {
            prefix: p("10.0.1.0/24"),
            table: 0
        })
    );
    assert_eq!(
        rib.del_route(0, p("10.7.0.0/16")),
        Err(RibError::NoRoute {
            prefix: p("10.7.0.0/16"),
            table: 0
        })
    );
    let e = rib
        .add_route(
            &ifs,
            0,
            p("10.7.0.0/16"),
            Via::Address(ip("192.0.2.1")),
            None,
        )
        .unwrap_err();
    assert!(e.to_string().contains("name the interface"), "{e}");
    assert_eq!(
        rib.check_new_address(0, ip("10.0.0.1")),
        Err(RibError::AddressInUse {
            addr: ip("10.0.0.1"),
            table: 0
        })
    );
    rib.ensure_table(u32::MAX).unwrap();
    assert!(rib.has_table(u32::MAX), "any u32 names a table");
    assert_eq!(rib.entries(Some(9)), Err(RibError::NoTable(9)));
}

#[test]
fn removing_an_address_removes_its_routes_and_neighbour_host_routes() {
    let (mut rib, mut ifs) = two_interfaces();
    rib.add_neighbor(&ifs, 1, ip("10.0.1.2"), PEER).unwrap();
    let base = rib.next_hop_count();
    let a = p("10.0.1.1/24");
    rib.remove_address(1, 0, a);
    ifs[1].addresses.clear();
    assert_eq!(
        shown(&rib),
        ["0 10.0.0.0/24 Connected", "0 10.0.0.1/32 Local"]
    );
    assert_eq!(
        rib.next_hop_count(),
        base - 2,
        "glean and neighbour adjacencies freed"
    );
    // Back again: the known neighbour gets its host route back.
    ifs[1].addresses.push((a.addr, a.len));
    rib.add_address(&ifs, 1, 0, a).unwrap();
    assert!(matches!(
        lookup(&rib, 0, "10.0.1.2"),
        Some(Adjacency::Rewrite { dst: PEER, .. })
    ));
}

#[test]
fn removing_an_interface_leaves_nothing_of_it() {
    let (mut rib, mut ifs) = two_interfaces();
    let base = rib.next_hop_count();
    rib.add_neighbor(&ifs, 1, ip("10.0.1.2"), PEER).unwrap();
    rib.learn(
        &ifs,
        Learned {
            ifindex: 1,
            ip: ip("10.0.1.3"),
            mac: PEER,
        },
    )
    .unwrap();
    rib.add_route(
        &ifs,
        0,
        p("172.16.0.0/12"),
        Via::Address(ip("10.0.1.2")),
        None,
    )
    .unwrap();
    rib.add_route(&ifs, 0, p("8.0.0.0/8"), Via::Address(ip("10.0.0.2")), None)
        .unwrap();
    let before = shown(&rib);
    // What the control thread does: each address, then the rest.
    rib.remove_address(1, 0, p("10.0.1.1/24"));
    ifs[1].addresses.clear();
    assert_eq!(rib.remove_interface(1), 1, "one static route went with it");
    assert_eq!(
        shown(&rib),
        [
            "0 8.0.0.0/8 Static",
            "0 10.0.0.0/24 Connected",
            "0 10.0.0.1/32 Local"
        ],
        "was {before:?}"
    );
    assert!(rib.neighbours().iter().all(|n| n.0 != 1));
    // Interface 0's glean and the next hop of its static route are all that is left: as
    // many as the two gleans there were before anything was added.
    assert_eq!(rib.next_hop_count(), base);
    assert_eq!(rib.remove_interface(1), 0, "nothing left to remove");
}

#[test]
fn a_dropped_table_takes_its_routes_and_next_hops() {
    let (mut rib, ifs) = two_interfaces();
    let base = rib.next_hop_count();
    rib.ensure_table(7).unwrap();
    assert!(rib.has_table(7) && !rib.has_table(6));
    rib.add_route(
        &ifs,
        7,
        p("8.0.0.0/8"),
        Via::Address(ip("10.0.0.2")),
        Some(0),
    )
    .unwrap();
    rib.add_route(&ifs, 7, p("9.0.0.0/8"), Via::Drop, None)
        .unwrap();
    assert_eq!(rib.next_hop_count(), base + 1);
    assert_eq!(rib.slot(7), Some(1), "slots are dense whatever the ids");
    assert_eq!(rib.vrfs().load().len(), 2);
    assert_eq!(rib.drop_table(7), 2);
    assert!(!rib.has_table(7));
    assert_eq!(rib.next_hop_count(), base);
    assert_eq!(
        rib.vrfs().load().len(),
        1,
        "trailing empty tables are trimmed"
    );
    assert_eq!(rib.entries(Some(7)), Err(RibError::NoTable(7)));
    assert_eq!(rib.drop_table(0), 0, "table 0 stays");
    assert_eq!(rib.entries(Some(0)).unwrap().len(), 4);
}

#[test]
fn tables_are_separate_and_gaps_read_as_empty() {
    let (mut rib, mut ifs) = two_interfaces();
    // Interface 1 moves to table 3: its routes leave table 0 and appear there.
    let a = p("10.0.1.1/24");
    rib.remove_address(1, 0, a);
    rib.ensure_table(3).unwrap();
    ifs[1].table = 3;
    ifs[1].vrf = rib.slot(3).unwrap();
    rib.add_address(&ifs, 1, 3, a).unwrap();
    assert_eq!(lookup(&rib, 0, "10.0.1.1"), None);
    assert_eq!(lookup(&rib, 3, "10.0.1.1"), Some(Adjacency::Local));
    assert_eq!(rib.vrfs().load().len(), 2);
    assert_eq!(lookup(&rib, 2, "10.0.1.1"), None, "table 2 does not exist");
    // A freed slot reads as empty and is the next table's.
    rib.ensure_table(9).unwrap();
    rib.drop_table(9);
    rib.ensure_table(4_000_000_000).unwrap();
    rib.ensure_table(11).unwrap();
    assert_eq!(rib.slot(4_000_000_000), Some(2));
    assert_eq!(rib.slot(11), Some(3));
    rib.drop_table(4_000_000_000);
    assert_eq!(rib.vrfs().load().len(), 4, "a hole is kept, read as empty");
    assert_eq!(rib.vrfs().load()[2].lookup(ip("10.0.1.1")), None);
    rib.ensure_table(12).unwrap();
    assert_eq!(rib.slot(12), Some(2), "and reused");
    assert_eq!(rib.entries(Some(3)).unwrap().len(), 2);
    // The same prefix in two tables is two routes.
    let nh0 = Via::Address(ip("10.0.0.2"));
    let nh3 = Via::Address(ip("10.0.1.2"));
    rib.add_route(&ifs, 0, p("8.8.0.0/16"), nh0, None).unwrap();
    rib.add_route(&ifs, 3, p("8.8.0.0/16"), nh3, None).unwrap();
    assert!(matches!(
        lookup(&rib, 0, "8.8.8.8"),
        Some(Adjacency::Glean { tx_if: 0, .. })
    ));
    assert!(matches!(
        lookup(&rib, 3, "8.8.8.8"),
        Some(Adjacency::Glean { tx_if: 1, .. })
    ));
    assert!(rib.take_unlinked());
    rib.quiesce();
}

/// A flood of learned neighbours on one interface stops at its share (refused while the
/// learned ones are fresh, counted), the other interface still learns, a stale one makes room
/// (its host route goes with it), and silent ones age out with their routes.
#[test]
fn learned_neighbours_are_capped_and_age() {
    let (mut rib, ifs) = two_interfaces();
    rib.set_neighbour_limits(learned::Limits {
        max: 5,
        per_interface: 3,
        stale_ms: 1000,
        age_ms: 60_000,
    });
    let heard = |rib: &mut Rib, i: u32, a: &str, now: u64| {
        let l = Learned {
            ifindex: i,
            ip: ip(a),
            mac: PEER,
        };
        rib.learn_at(&ifs, l, now).unwrap();
    };
    rib.hold();
    for n in 2..12 {
        heard(&mut rib, 0, &format!("10.0.0.{n}"), 0);
    }
    // A learned neighbour's host route points at a new adjacency, published at once (a
    // worker following the route must find it), the batch's other changes at release.
    let published = |rib: &Rib, a: &str| {
        let v = rib.vrfs().load();
        let adj = v[rib.slot(0).unwrap() as usize].lookup(ip(a)).unwrap();
        rib.adjacencies().load().get(adj as usize).copied()
    };
    assert!(matches!(
        published(&rib, "10.0.0.4"),
        Some(Adjacency::Rewrite { .. })
    ));
    rib.release();
    assert!(matches!(
        lookup(&rib, 0, "10.0.0.4"),
        Some(Adjacency::Rewrite { .. })
    ));
    assert!(matches!(
        lookup(&rib, 0, "10.0.0.5"),
        Some(Adjacency::Glean { .. })
    ));
    heard(&mut rib, 1, "10.0.1.2", 10);
    heard(&mut rib, 1, "10.0.1.3", 10);
    let t = rib.neighbour_totals();
    assert_eq!((t.learned, t.refused, t.evicted), (5, 7, 0));
    // 10.0.0.2 was heard at 0: stale at 1001, it makes room for 10.0.1.4 (the total's cap).
    heard(&mut rib, 1, "10.0.1.4", 1001);
    assert!(matches!(
        lookup(&rib, 0, "10.0.0.2"),
        Some(Adjacency::Glean { .. })
    ));
    assert!(!shown(&rib).contains(&"0 10.0.0.2/32 Neighbor".to_string()));
    assert!(matches!(
        lookup(&rib, 0, "10.0.1.4"),
        Some(Adjacency::Rewrite { .. })
    ));
    assert_eq!(rib.neighbour_totals().evicted, 1);
    // A static neighbour is outside the caps. Silent ones are asked three times from their
    // age on, a second apart (to their MAC, the last to everyone), from our address there,
    // and forgotten with their host routes a second after; one that answers stays.
    rib.add_neighbor(&ifs, 0, ip("10.0.0.99"), PEER).unwrap();
    let asked = |rib: &mut Rib, now: u64| -> Vec<String> {
        let probes = rib.expire_neighbours_at(&ifs, now);
        let mut v: Vec<String> = probes
            .iter()
            .map(|p| {
                let to = if p.dst_mac == PEER { "" } else { " to all" };
                format!("{} from {} on {}{to}", p.target, p.sender, p.tx_if)
            })
            .collect();
        v.sort();
        v
    };
    let first = [
        "10.0.0.3 from 10.0.0.1 on 0",
        "10.0.0.4 from 10.0.0.1 on 0",
        "10.0.1.2 from 10.0.1.1 on 1",
        "10.0.1.3 from 10.0.1.1 on 1",
    ];
    assert_eq!(asked(&mut rib, 60_011), first);
    assert_eq!(rib.neighbours().len(), 6, "kept while asked");
    heard(&mut rib, 1, "10.0.1.2", 60_500);
    assert_eq!(
        asked(&mut rib, 61_011),
        [
            "10.0.0.3 from 10.0.0.1 on 0",
            "10.0.0.4 from 10.0.0.1 on 0",
            "10.0.1.3 from 10.0.1.1 on 1",
            "10.0.1.4 from 10.0.1.1 on 1",
        ]
    );
    assert_eq!(
        asked(&mut rib, 62_011),
        [
            "10.0.0.3 from 10.0.0.1 on 0 to all",
            "10.0.0.4 from 10.0.0.1 on 0 to all",
            "10.0.1.3 from 10.0.1.1 on 1 to all",
            "10.0.1.4 from 10.0.1.1 on 1",
        ]
    );
    assert_eq!(
        asked(&mut rib, 63_011),
        ["10.0.1.4 from 10.0.1.1 on 1 to all"]
    );
    assert!(matches!(
        lookup(&rib, 0, "10.0.0.3"),
        Some(Adjacency::Glean { .. })
    ));
    assert!(asked(&mut rib, 64_011).is_empty());
    assert_eq!(
        rib.neighbours()
            .iter()
            .map(|n| n.1.to_string())
            .collect::<Vec<_>>(),
        ["10.0.0.99", "10.0.1.2"]
    );
    let t = rib.neighbour_totals();
    assert_eq!((t.expired, t.probes), (4, 13));
}

/// A silent neighbour on a tunnel (no address of its own) is asked on behalf of a pod of
/// this node in the tunnel's network, else one of our addresses in that network's table;
/// with neither it is forgotten unasked.
#[test]
fn a_tunnels_neighbours_are_asked_for_from_a_pod_of_its_network() {
    let (mut rib, mut ifs) = two_interfaces();
    rib.set_neighbour_limits(learned::Limits {
        age_ms: 1000,
        ..learned::Limits::default()
    });
    // Interface 2: a tunnel of table 0's network 10.0.0.0/16, to VTEP 192.0.2.2.
    let mut t = IfConfig::new([2, 0, 0, 0, 2, 1], 0);
    t.device = nodes::Device::Vxlan(nodes::VxlanTunnel {
        vni: 56,
        src: ip("192.0.2.1"),
        dst: ip("192.0.2.2"),
        underlay: 0,
        uplink: 0,
        df: true,
        ranges: vec![(ip("10.0.0.0"), 16)],
        counters: Default::default(),
    });
    ifs.push(t);
    rib.set_interface_mac(2, ifs[2].mac);
    let remote = |a: &str| Learned {
        ifindex: 2,
        ip: ip(a),
        mac: PEER,
    };
    rib.learn_at(&ifs, remote("10.0.2.2"), 0).unwrap();
    // No pod yet: our address on interface 0 (10.0.0.1, in the network) speaks.
    let p = rib.expire_neighbours_at(&ifs, 1001);
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0].tx_if, p[0].sender, p[0].target),
        (2, ip("10.0.0.1"), ip("10.0.2.2"))
    );
    // A pod on interface 0 is preferred.
    rib.add_neighbor(&ifs, 0, ip("10.0.0.7"), [2, 0, 0, 0, 7, 7])
        .unwrap();
    let p = rib.expire_neighbours_at(&ifs, 2001);
    assert_eq!(p[0].sender, ip("10.0.0.7"));
    // Nobody of the network on this node: forgotten at once, unasked.
    rib.learn_at(&ifs, remote("10.0.2.3"), 2001).unwrap();
    for c in ifs.iter_mut().take(2) {
        c.table = 9;
    }
    let p = rib.expire_neighbours_at(&ifs, 3002);
    assert_eq!(
        p.iter().map(|p| p.target).collect::<Vec<_>>(),
        Vec::<Ipv4Addr>::new()
    );
    assert_eq!(rib.neighbour_totals().expired, 2);
    // On an interface in ip mode (resolved without ARP) a neighbour is neither asked nor
    // forgotten.
    ifs[1].l3 = true;
    let l3 = Learned {
        ifindex: 1,
        ip: ip("10.0.1.9"),
        mac: [0; 6],
    };
    rib.learn_at(&ifs, l3, 3002).unwrap();
    for now in [4003, 5004, 6005, 7006] {
        assert!(rib.expire_neighbours_at(&ifs, now).is_empty());
    }
    assert!(rib.neighbours().iter().any(|n| n.1 == ip("10.0.1.9")));
    assert_eq!(rib.neighbour_totals().expired, 2);
}

/// A receive route makes an address ours without an interface, never over another route,
/// and goes only when asked for as such.
#[test]
fn receive_routes_are_ours_and_only_theirs() {
    let (mut rib, ifs) = two_interfaces();
    rib.add_receive(0, ip("10.9.9.9")).unwrap();
    assert_eq!(lookup(&rib, 0, "10.9.9.9"), Some(Adjacency::Local));
    rib.add_receive(0, ip("10.9.9.9")).unwrap();
    assert!(
        rib.add_receive(0, ip("10.0.0.1")).is_err(),
        "an interface's address"
    );
    rib.add_neighbor(&ifs, 0, ip("10.0.0.7"), PEER).unwrap();
    assert!(
        rib.add_receive(0, ip("10.0.0.7")).is_err(),
        "a neighbour's route"
    );
    rib.del_receive(0, ip("10.0.0.1"));
    assert_eq!(
        lookup(&rib, 0, "10.0.0.1"),
        Some(Adjacency::Local),
        "not a receive route"
    );
    rib.del_receive(0, ip("10.9.9.9"));
    assert_eq!(lookup(&rib, 0, "10.9.9.9"), None);
}

/// Neighbours learned in many /24s (ARP from anywhere in a wide connected subnet) take at
/// most three quarters of a table's second-level groups: configured /32s in other /24s (a
/// pod's host route) still find room, and a neighbour in a /24 with a group is still learned.
#[test]
fn learned_neighbours_leave_room_for_configured_routes() {
    let mut rib = Rib::new();
    let mut ifs = vec![IfConfig::new(MAC0, 0)];
    rib.set_interface_mac(0, MAC0);
    let a = p("10.0.0.1/8");
    ifs[0].addresses.push((a.addr, a.len));
    rib.add_address(&ifs, 0, 0, a).unwrap();
    rib.set_neighbour_limits(learned::Limits {
        max: 65536,
        per_interface: 65536,
        stale_ms: 60_000,
        age_ms: 0,
    });
    let learn = |rib: &mut Rib, a: Ipv4Addr| {
        let l = Learned {
            ifindex: 0,
            ip: a,
            mac: PEER,
        };
        rib.learn_at(&ifs, l, 0).unwrap();
    };
    rib.hold();
    for n in 1..=4000u32 {
        learn(&mut rib, Ipv4Addr::from(0x0a00_0002 + (n << 8)));
    }
    rib.release();
    let t = rib.neighbour_totals();
    assert_eq!(t.learned + t.refused_room, 4000, "{t:?}");
    assert!(t.refused_room > 0 && t.learned >= 3000, "{t:?}");
    // Refused: traffic to it is gleaned, never forwarded to the sender's claim.
    assert!(matches!(
        lookup(&rib, 0, "10.15.159.2"),
        Some(Adjacency::Glean { .. })
    ));
    // The /24 of the node's own address has its group: a neighbour there is learned.
    learn(&mut rib, ip("10.0.0.7"));
    assert!(matches!(
        lookup(&rib, 0, "10.0.0.7"),
        Some(Adjacency::Rewrite { .. })
    ));
    // A thousand pods' host routes, each in a /24 of its own, all fit.
    for n in 0..1000u32 {
        let pfx = Ipv4Prefix {
            addr: Ipv4Addr::from(0x0b00_0005 + (n << 8)),
            len: 32,
        };
        rib.add_route(&ifs, 0, pfx, Via::Drop, None)
            .unwrap_or_else(|e| panic!("pod route {n}: {e}"));
    }
}
