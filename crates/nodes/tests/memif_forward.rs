//! End to end through real memif interfaces: our secondary "pod0" sends UDP frames into the
//! graph's primary interface 0; the graph routes them (ethernet-input, ip4-input, ip4-lookup,
//! ip4-rewrite) to interface 1, where secondary "pod1" receives them. Checked with etherparse.

use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use buffer::{Pool, PoolConfig};
use fib::adj::AdjTable;
use fib::{Ipv4Addr, Lpm};
use memif::nodes::{MemifInput, MemifOutput, QueueCommand};
use memif::{Client, Event, InterfaceConfig, Listener, PrimaryQueues, SecondaryQueues, SocketPath};
use nodes::{IfConfig, Shared};

const IF_MAC: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 0xa0], [2, 0, 0, 0, 0, 0xa1]];
const POD1_MAC: [u8; 6] = [2, 0, 0, 0, 1, 1];

fn frame(seq: u32, dst: [u8; 4], size: usize) -> Vec<u8> {
    let macs = testkit::Macs {
        src: [2, 0, 0, 0, 0, 9],
        dst: IF_MAC[0],
    };
    let payload = testkit::seq_payload(seq, size - 42);
    testkit::udp4_frame(macs, [10, 0, 0, 9], dst, 64, &payload)
}

#[test]
fn routes_between_two_memif_interfaces() {
    let dir = tempfile::tempdir().unwrap();
    let path = SocketPath::File(dir.path().join("sw.sock"));
    let cfg = |id, name: &str| InterfaceConfig {
        id,
        name: name.into(),
        ..Default::default()
    };
    let mut l = Listener::bind(&path, vec![cfg(0, "memif0/0"), cfg(1, "memif0/1")]).unwrap();
    let mut pods = [
        Client::new(&path, vec![cfg(0, "pod0")]).unwrap(),
        Client::new(&path, vec![cfg(1, "pod1")]).unwrap(),
    ];
    let mut primary: [Option<PrimaryQueues>; 2] = [None, None];
    let mut secondary: [Option<SecondaryQueues>; 2] = [None, None];
    let deadline = Instant::now() + Duration::from_secs(10);
    while primary.iter().any(Option::is_none) || secondary.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "{:?}", l.interfaces());
        for (i, p) in pods.iter_mut().enumerate() {
            p.poll(Duration::from_millis(1)).unwrap();
            if let Some(Event::Connected { queues, .. }) = p.next_event() {
                secondary[i] = Some(queues);
            }
        }
        l.poll(Duration::from_millis(1)).unwrap();
        while let Some(e) = l.next_event() {
            if let Event::Connected { id, queues, .. } = e {
                primary[id as usize] = Some(queues);
            }
        }
    }
    let (in_tx, in_rx) = channel();
    let (out_tx, out_rx) = channel();
    for (i, q) in primary.iter_mut().enumerate() {
        let q = q.take().unwrap();
        for rx in q.rx {
            in_tx
                .send(QueueCommand::Rx {
                    ifindex: i as u32,
                    queue: rx.into(),
                })
                .unwrap();
        }
        for tx in q.tx {
            out_tx
                .send(QueueCommand::Tx {
                    ifindex: i as u32,
                    queue: tx.into(),
                })
                .unwrap();
        }
    }
    let mut adj = AdjTable::new();
    adj.set_interface_mac(0, IF_MAC[0]);
    adj.set_interface_mac(1, IF_MAC[1]);
    let nh = Ipv4Addr::new(10, 1, 0, 2);
    let a = adj.add_next_hop(1, nh);
    adj.learn(1, nh, POD1_MAC);
    let mut vrf0 = Lpm::new(8);
    vrf0.insert(Ipv4Addr::new(192, 0, 2, 0), 24, a).unwrap();
    let ifs = vec![IfConfig::new(IF_MAC[0], 0), IfConfig::new(IF_MAC[1], 0)];
    let shared = Shared::new(
        Arc::new(ArcSwap::from_pointee(ifs)),
        Arc::new(ArcSwap::from_pointee(vec![vrf0.reader()])),
        adj.reader(),
    );
    let devices: Vec<Box<dyn graph::AnyNode>> = vec![
        Box::new(MemifInput::new(in_rx)),
        Box::new(MemifOutput::new(out_rx)),
    ];
    let learned = std::sync::mpsc::sync_channel(16).0;
    let mut rt = testkit::stubs::runtime(devices, &shared, learned, 0);
    let mut pool = Pool::new(PoolConfig {
        count: 8192,
        ..Default::default()
    })
    .unwrap();
    let [pod0, pod1] = &mut secondary;
    let (pod0, pod1) = (pod0.as_mut().unwrap(), pod1.as_mut().unwrap());

    let total = 10_000u32;
    let sizes = [64usize, 128, 512, 1500];
    let (mut sent, mut got) = (0u32, 0u32);
    // One frame nobody routes, to see the drop counted and nothing else disturbed.
    pod0.tx[0]
        .send_with(&[64], |_, w| w.write(0, &frame(0, [198, 51, 100, 1], 64)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got < total {
        assert!(
            Instant::now() < deadline,
            "stalled: sent {sent} got {got} errors {:?}",
            rt.errors()
        );
        if sent < total && sent - got < 512 {
            let lens: Vec<u32> = (sent..total.min(sent + 32))
                .map(|s| sizes[s as usize % 4] as u32)
                .collect();
            let base = sent;
            sent += pod0.tx[0]
                .send_with(&lens, |i, w| {
                    w.write(0, &frame(base + i as u32, [192, 0, 2, 5], w.len()))
                })
                .unwrap() as u32;
        }
        rt.dispatch(&mut pool);
        pod1.rx[0]
            .recv_with(256, |p| {
                let v = p.to_vec();
                let pkt = etherparse::SlicedPacket::from_ethernet(&v).unwrap();
                let Some(etherparse::LinkSlice::Ethernet2(eth)) = pkt.link else {
                    panic!("no ethernet")
                };
                assert_eq!((eth.destination(), eth.source()), (POD1_MAC, IF_MAC[1]));
                let Some(etherparse::NetSlice::Ipv4(ip)) = pkt.net else {
                    panic!("no ipv4")
                };
                let h = ip.header().to_header();
                assert_eq!(
                    (h.time_to_live, h.header_checksum),
                    (63, h.calc_header_checksum())
                );
                let Some(etherparse::TransportSlice::Udp(u)) = pkt.transport else {
                    panic!("no udp")
                };
                assert_eq!(
                    u.payload(),
                    &frame(got, [192, 0, 2, 5], v.len())[42..],
                    "frame {got}"
                );
                got += 1;
            })
            .unwrap();
    }
    // Our interfaces have no addresses here, so nobody can send the unreachable back.
    assert_eq!(
        rt.errors(),
        vec![
            ("ip4-lookup", "no route", 1),
            (
                "ip4-icmp-error",
                "no icmp error: receiving interface has no address",
                1
            ),
        ]
    );
    let runtime: std::collections::HashMap<_, _> =
        rt.runtime().into_iter().map(|(n, _, s)| (n, s)).collect();
    assert_eq!(runtime["memif-input"].vectors, u64::from(total) + 1);
    assert_eq!(runtime["memif-output"].vectors, u64::from(total));
    assert_eq!(pool.available(), pool.capacity());
}
