use std::path::Path;

use super::*;
use crate::harness::{L3fwdConfig, NetworkCount, Plan, Topology, test_config};
use crate::underlay::{self, Underlay};
use crate::{CopyMode, Dut, Subject};
use trafgen::{GenReport, StreamInfo};

fn cfg(networks: u16, direction: Direction) -> L3fwdConfig {
    let mut c = test_config(vec![Subject::plain(Dut::Veclane)]);
    c.topology = &MULTINET;
    c.node.networks = networks;
    c.node.direction = direction;
    c
}

fn subject(shape: Shape) -> Subject {
    Subject::plain(Dut::Veclane).in_shape(shape)
}

#[test]
fn the_daemon_gets_a_network_per_pod_in_multinet_and_one_table_in_singlenet() {
    let c = cfg(3, Direction::Both);
    let m = veclane_config(
        &c,
        Shape::Multinet,
        CopyMode::Single,
        &Plan::new(&c, 1500),
        1,
    );
    assert_eq!(m.network.len(), 3);
    assert_eq!(m.interface.len(), 4);
    for (k, n) in m.network.iter().enumerate() {
        assert_eq!(n.vni, VNI_BASE + k as u32);
        assert_eq!(n.uplink.as_deref(), Some("uplink"));
        assert_eq!(n.ranges[0].to_string(), format!("10.{}.0.0/16", 10 + k));
        let pod = &m.interface[1 + k];
        assert_eq!(pod.id, 1 + k as u32);
        assert_eq!(pod.network.as_deref(), Some(n.name.as_str()));
        let r = &m.route[k];
        assert_eq!(r.network.as_deref(), Some(n.name.as_str()));
        assert_eq!(r.via.to_string(), "192.168.0.2");
    }
    // The underlay carries jumbo pods' frames with VXLAN around them.
    assert_eq!(m.interface[0].mtu, Some(9216));
    assert_eq!(m.daemon.workers, vec![1]);
    let s = veclane_config(&c, Shape::Singlenet, CopyMode::Two, &Plan::new(&c, 64), 1);
    assert!(s.network.is_empty());
    assert!(
        s.interface
            .iter()
            .all(|i| i.network.is_none() && i.table == 0)
    );
    assert!(
        s.route
            .iter()
            .all(|r| r.interface.as_deref() == Some("uplink"))
    );
    assert_eq!(s.neighbor.len(), 4);
    assert_eq!(s.daemon.copy, CopyMode::Two);
    // Both round-trip through the daemon's own parser.
    for c in [m, s] {
        assert_eq!(api::Config::parse(&c.to_toml(), "test").unwrap(), c);
    }
}

#[test]
fn a_kernel_underlay_makes_the_uplink_a_veth_end_and_the_remote_node_a_kernel_port() {
    for (underlay, kind) in [
        (Underlay::AfPacket, "af-packet"),
        (Underlay::AfXdp, "af-xdp"),
    ] {
        let mut c = cfg(2, Direction::Both);
        c.node.underlay = underlay;
        let m = veclane_config(
            &c,
            Shape::Multinet,
            CopyMode::Single,
            &Plan::new(&c, 1500),
            1,
        );
        // The pods stay on memif; the uplink is the veth's DUT end, addressed as before.
        assert_eq!(m.interface.len(), 2);
        assert!(
            m.interface
                .iter()
                .all(|i| i.name.as_deref().is_some_and(|n| n.starts_with("pod")))
        );
        let toml = m.to_toml();
        assert!(toml.contains(&format!("[[{kind}]]")), "{toml}");
        assert!(toml.contains("host-if = \"vl-dut\""), "{toml}");
        assert_eq!(api::Config::parse(&toml, "test").unwrap(), m);
        assert!(
            m.network
                .iter()
                .all(|n| n.uplink.as_deref() == Some("uplink"))
        );
        let dir = Path::new("/tmp/some-trial");
        let subject = subject(Shape::Multinet);
        for (direction, sends_in, sends_out) in [
            (Direction::Both, true, true),
            (Direction::In, true, false),
            (Direction::Out, false, true),
        ] {
            c.node.direction = direction;
            let g = MULTINET.gen_config(&c, subject, &dir.join("memif.sock"), &Plan::new(&c, 1500));
            let [k] = g.kernel_ports.as_slice() else {
                panic!("{:?}", g.kernel_ports)
            };
            assert_eq!((k.id, k.host_if.as_str()), (0, underlay::GEN_IF));
            assert_eq!(k.netns.as_deref(), Some(underlay::netns_name(dir).as_str()));
            assert_eq!(k.spec.is_some(), sends_in, "{direction}");
            // The remote node's frames carry VXLAN to the node's VTEP.
            if let Some(spec) = &k.spec {
                assert_eq!(spec.vxlan.as_ref().unwrap().dst_ip, ip(NODE_VTEP));
            }
            assert_eq!(g.iface.id, pod_id(0));
            assert_eq!(g.iface_sends, sends_out, "{direction}");
            assert!(g.ports.iter().all(|p| p.spec.is_some() == sends_out));
            assert!(g.rx_iface.is_none());
        }
    }
}

#[test]
fn a_kernel_underlay_is_refused_where_it_cannot_run() {
    use crate::harness::ConfigError;
    let mut c = cfg(1, Direction::Both);
    c.node.underlay = Underlay::AfXdp;
    c.sizes = vec![64, 1500, crate::trial::IMIX];
    assert_eq!(c.check(), Ok(()));
    c.sizes = vec![64, 4000];
    assert!(matches!(
        c.check(),
        Err(ConfigError::UnderlaySize { size: 4000, .. })
    ));
    c.node.underlay = Underlay::AfPacket;
    c.sizes = vec![9000];
    assert_eq!(c.check(), Ok(()));
    c.duts
        .push(Subject::plain(Dut::Vpp).in_shape(Shape::Multinet));
    assert_eq!(c.check(), Err(ConfigError::UnderlayDut(Dut::Vpp)));
    c.duts.pop();
    c.topology = &crate::l3fwd::TOPOLOGY;
    assert_eq!(c.check(), Err(ConfigError::UnderlayScenario("l3fwd")));
}

#[test]
fn vpp_gets_the_same_node_on_the_same_memifs_and_addresses() {
    let s = vpp_topology(Shape::Singlenet, 2);
    let ids: Vec<u32> = s.memifs.iter().map(|m| m.0).collect();
    assert_eq!(ids, [0, 1, 2]);
    assert_eq!(s.memifs[0].1, UPLINK_MAC);
    assert_eq!(s.memifs[2].1, pod_mac(1));
    assert_eq!(s.rx_from, ["memif1/0", "memif1/1", "memif1/2"]);
    assert_eq!(s.tx_to, s.rx_from);
    assert!(s.plugins.is_empty());
    assert_eq!(
        s.commands,
        [
            "set interface ip address memif1/0 192.168.0.1/24",
            "set ip neighbor memif1/0 192.168.0.2 02:00:00:00:00:01 static",
            "set interface mtu 9216 memif1/0",
            "ip route add 10.10.1.0/24 via 192.168.0.2 memif1/0",
            "set interface ip address memif1/1 10.10.2.1/24",
            "set ip neighbor memif1/1 10.10.2.2 02:00:00:00:00:01 static",
            "ip route add 10.11.1.0/24 via 192.168.0.2 memif1/0",
            "set interface ip address memif1/2 10.11.2.1/24",
            "set ip neighbor memif1/2 10.11.2.2 02:00:00:00:00:01 static",
        ]
    );
    let m = vpp_topology(Shape::Multinet, 2);
    assert_eq!(m.plugins, ["vxlan"]);
    assert_eq!(m.memifs, s.memifs);
    let mac = mac_str(api::vxlan_tunnel_mac(
        ip(NODE_VTEP),
        VNI_BASE + 1,
        ip(REMOTE_VTEP),
    ));
    // Network 1: its table, its tunnel (veclane's MAC for it), its pod in the table.
    let net1: Vec<&str> = m
        .commands
        .iter()
        .map(String::as_str)
        .skip_while(|c| *c != "ip table add 101")
        .collect();
    assert_eq!(
        net1,
        [
            "ip table add 101",
            "create vxlan tunnel src 192.168.0.1 dst 192.168.0.2 vni 101 instance 1 decap-next node ethernet-input",
            &format!("set interface mac address vxlan_tunnel1 {mac}"),
            "set interface ip table vxlan_tunnel1 101",
            "set interface ip address vxlan_tunnel1 10.11.1.1/24",
            "set interface state vxlan_tunnel1 up",
            "set ip neighbor vxlan_tunnel1 10.11.1.2 02:00:00:00:00:01 static",
            "set interface ip table memif1/2 101",
            "set interface ip address memif1/2 10.11.2.1/24",
            "set ip neighbor memif1/2 10.11.2.2 02:00:00:00:00:01 static",
        ]
    );
    assert_eq!(m.commands[2], "set interface mtu 9216 memif1/0");
    assert_eq!(m.commands[3], "set interface ip vxlan-bypass memif1/0");
    assert!(!m.commands.iter().any(|c| c.starts_with("ip route")));
}

#[test]
fn the_generator_plays_the_remote_node_and_the_pods_as_the_direction_says() {
    let t = &MULTINET;
    let sock = Path::new("/s");
    let gen_config = |c: L3fwdConfig, s: Subject| t.gen_config(&c, s, sock, &Plan::new(&c, 64));
    // In: the uplink sends, spread over the networks, in VXLAN to each tunnel's MAC.
    let g = gen_config(cfg(3, Direction::In), subject(Shape::Multinet));
    assert_eq!(g.iface.id, 0);
    let v = g.spec.vxlan.as_ref().expect("multinet frames are VXLAN");
    assert_eq!(
        (v.vni, v.dst_ip, v.src_ip),
        (VNI_BASE, ip(NODE_VTEP), ip(REMOTE_VTEP))
    );
    assert_eq!(g.spec.networks, 3);
    assert_eq!(
        g.spec.dst_macs[2].0,
        api::vxlan_tunnel_mac(ip(NODE_VTEP), VNI_BASE + 2, ip(REMOTE_VTEP))
    );
    assert_eq!(g.rx_iface.as_ref().map(|i| i.id), Some(1));
    assert_eq!(
        g.ports.iter().map(|p| p.iface.id).collect::<Vec<_>>(),
        [2, 3]
    );
    assert!(g.ports.iter().all(|p| p.spec.is_none()));
    // Singlenet: the same inner frames, plain, to the uplink.
    let g = gen_config(cfg(3, Direction::In), subject(Shape::Singlenet));
    assert!(g.spec.vxlan.is_none() && g.spec.dst_macs.is_empty());
    assert_eq!(g.spec.dst_mac.0, UPLINK_MAC);
    // Out: every pod sends to its remote pod; the uplink only receives.
    let g = gen_config(cfg(2, Direction::Out), subject(Shape::Multinet));
    assert_eq!((g.iface.id, g.spec.dst_ip), (1, [10, 10, 1, 2].into()));
    assert_eq!(g.rx_iface.as_ref().map(|i| i.id), Some(0));
    let p = g.ports[0].spec.as_ref().unwrap();
    assert_eq!((p.src_ip, p.dst_mac.0), ([10, 11, 2, 2].into(), pod_mac(1)));
    // Both: the uplink and every pod send.
    let g = gen_config(cfg(2, Direction::Both), subject(Shape::Multinet));
    assert!(g.rx_iface.is_none());
    assert_eq!(g.ports.len(), 2);
    assert!(g.ports.iter().all(|p| p.spec.is_some()));
}

#[test]
fn streams_map_to_networks_and_frame_sizes_are_checked_per_direction() {
    let stream = |iface, network| StreamInfo {
        iface,
        queue: 0,
        network,
    };
    // The uplink's streams for networks 0 and 1, then pod 0's and pod 1's.
    let g = GenReport {
        streams: vec![stream(0, 0), stream(0, 1), stream(1, 0), stream(2, 0)],
        tx_stream_packets: vec![10, 20, 30, 40],
        rx_stream_packets: vec![9, 20, 30, 38],
        rx_packets: 97,
        rx_bytes: 29 * 64 + 68 * (64 + 50),
        ..Default::default()
    };
    let n = MULTINET.networks(&g);
    assert_eq!(
        n,
        [
            NetworkCount {
                network: 0,
                sent: 40,
                received: 39,
                sent_in: 10,
                received_in: 9,
                sent_out: 30,
                received_out: 30,
            },
            NetworkCount {
                network: 1,
                sent: 60,
                received: 58,
                sent_in: 20,
                received_in: 20,
                sent_out: 40,
                received_out: 38,
            }
        ]
    );
    // Into the pods frames lose the VXLAN; out of them they gain it (multinet only).
    assert!(MULTINET.check_rx(subject(Shape::Multinet), 64, &g).is_ok());
    let e = MULTINET
        .check_rx(subject(Shape::Singlenet), 64, &g)
        .unwrap_err();
    assert!(e.contains("were due at 64 B"), "{e}");
    let plain = GenReport {
        rx_bytes: 97 * 64,
        ..g
    };
    assert!(
        MULTINET
            .check_rx(subject(Shape::Singlenet), 64, &plain)
            .is_ok()
    );
}

#[test]
fn multinet_rows_divide_by_the_same_dut_in_singlenet() {
    let v = Subject::plain(Dut::Veclane);
    let duts = [v.in_shape(Shape::Singlenet), v.in_shape(Shape::Multinet)];
    assert_eq!(crate::harness::reference_for(&duts, duts[1]), Some(duts[0]));
    assert_eq!(crate::harness::reference_for(&duts, duts[0]), Some(duts[0]));
    assert_eq!(crate::harness::reference_for(&duts[1..], duts[1]), None);
    assert_eq!(duts[1].to_string(), "veclane multinet");
    // Alone, a multinet row has no peer.
    assert_eq!(crate::harness::peer_for(&duts, duts[1]), None);
}

#[test]
fn multinet_rows_beside_vpp_also_divide_by_vpp_multinet() {
    let (v, p) = (Subject::plain(Dut::Veclane), Subject::plain(Dut::Vpp));
    let duts = [
        v.in_shape(Shape::Singlenet),
        v.in_shape(Shape::Multinet),
        p.in_shape(Shape::Singlenet),
        p.in_shape(Shape::Multinet),
    ];
    use crate::harness::peer_for;
    assert_eq!(peer_for(&duts, duts[1]), Some(duts[3]));
    // VPP's own multinet row is the reference, singlenet rows have their peer in the
    // ratio column already.
    assert_eq!(peer_for(&duts, duts[3]), None);
    assert_eq!(peer_for(&duts, duts[0]), None);
    assert_eq!(crate::harness::reference_for(&duts, duts[0]), Some(duts[2]));
}
