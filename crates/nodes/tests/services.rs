//! Services through the whole graph: a client's TCP or UDP to a VIP goes out to a backend
//! with valid checksums (checked by etherparse), the backend's reply comes back from the VIP,
//! new flows spread over the backends, a removed backend's sessions are dropped, and what is
//! not for a service goes on untouched.

mod graph_common;

use std::collections::HashMap;
use std::sync::Arc;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use nodes::services::{Backend, Service, Services, VipKey};

use graph_common::*;

const VIP: [u8; 4] = [10, 96, 0, 10];
const CLIENT: [u8; 4] = [10, 0, 0, 7];
const BACKENDS: [[u8; 4]; 3] = [[192, 0, 2, 5], [192, 0, 2, 6], [192, 0, 2, 7]];

/// VRF 0 gets a TCP and a UDP service on VIP port 80 over `backends` (port 8080).
fn publish(s: &Setup, backends: &[usize]) {
    let bs: Vec<Backend> = backends
        .iter()
        .map(|&i| Backend {
            id: i as u32,
            addr: u32::from_be_bytes(BACKENDS[i]),
            port: 8080,
        })
        .collect();
    let mut v = Services::default();
    for (id, proto) in [(1, 6), (2, 17)] {
        let k = VipKey {
            vrf: 0,
            proto,
            vip: u32::from_be_bytes(VIP),
            port: 80,
        };
        v.vips.insert(k, Arc::new(Service::new(id, bs.clone())));
    }
    v.addrs.insert((0, u32::from_be_bytes(VIP)));
    v.stateful = vec![true];
    s.services.store(Arc::new(v));
}

fn tcp(dst_mac: [u8; 6], src: ([u8; 4], u16), dst: ([u8; 4], u16), syn: bool) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2(HOST_MAC, dst_mac)
        .ipv4(src.0, dst.0, 64)
        .tcp(src.1, dst.1, 1000, 4096);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut v = Vec::new();
    b.write(&mut v, b"hello").unwrap();
    v
}

fn udp_to(src: ([u8; 4], u16), dst: ([u8; 4], u16), checksum: bool) -> Vec<u8> {
    let mut v = Vec::new();
    etherparse::PacketBuilder::ethernet2(HOST_MAC, MAC[0])
        .ipv4(src.0, dst.0, 64)
        .udp(src.1, dst.1)
        .write(&mut v, b"hello")
        .unwrap();
    if !checksum {
        v[40..42].copy_from_slice(&[0, 0]);
    }
    v
}

/// (src, sport, dst, dport) of a frame whose checksums are all right.
fn addrs(frame: &[u8]) -> ([u8; 4], u16, [u8; 4], u16) {
    let (s, sp, d, dp, _) = checked(frame);
    (s, sp, d, dp)
}

/// (src, sport, dst, dport, L4 checksum as sent) of a frame whose checksums are all right.
fn checked(frame: &[u8]) -> ([u8; 4], u16, [u8; 4], u16, u16) {
    let p = SlicedPacket::from_ethernet(frame).unwrap();
    let Some(NetSlice::Ipv4(ip)) = &p.net else {
        panic!("no ipv4")
    };
    let h = ip.header().to_header();
    assert_eq!(h.header_checksum, h.calc_header_checksum(), "ip checksum");
    match &p.transport {
        Some(TransportSlice::Tcp(t)) => {
            let want = t.to_header().calc_checksum_ipv4(&h, t.payload()).unwrap();
            assert_eq!(t.checksum(), want, "tcp checksum");
            (
                h.source,
                t.source_port(),
                h.destination,
                t.destination_port(),
                want,
            )
        }
        Some(TransportSlice::Udp(u)) => {
            if u.checksum() != 0 {
                let want = u.to_header().calc_checksum_ipv4(&h, u.payload()).unwrap();
                assert_eq!(u.checksum(), want, "udp checksum");
            }
            (
                h.source,
                u.source_port(),
                h.destination,
                u.destination_port(),
                u.checksum(),
            )
        }
        t => panic!("{t:?}"),
    }
}

fn send(s: &mut Setup, frames: Vec<(u32, Vec<u8>)>) -> Vec<(u32, Vec<u8>)> {
    s.output.lock().unwrap().clear();
    s.input.lock().unwrap().extend(frames);
    s.rt.dispatch(&mut s.pool);
    assert_eq!(s.pool.available(), s.pool.capacity(), "a buffer leaked");
    s.output.lock().unwrap().clone()
}

#[test]
fn a_flow_to_a_vip_reaches_a_backend_and_its_replies_come_from_the_vip() {
    let s = &mut setup();
    publish(s, &[0, 1, 2]);
    let out = send(s, vec![(0, tcp(MAC[0], (CLIENT, 40000), (VIP, 80), true))]);
    assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
    let (tx, f) = &out[0];
    assert_eq!(*tx, 1, "out of if1, towards the backends");
    let (src, sport, dst, dport, _) = checked(f);
    assert_eq!((src, sport, dport), (CLIENT, 40000, 8080));
    assert!(BACKENDS.contains(&dst), "{dst:?}");
    // The backend answers the client: the reply leaves from the VIP.
    let reply = tcp(MAC[1], (dst, 8080), (CLIENT, 40000), false);
    let out = send(s, vec![(1, reply)]);
    assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
    assert_eq!(out[0].0, 0);
    assert_eq!(addrs(&out[0].1), (VIP, 80, CLIENT, 40000));
    // The client's next packet goes to the same backend.
    let out = send(s, vec![(0, tcp(MAC[0], (CLIENT, 40000), (VIP, 80), false))]);
    assert_eq!(checked(&out[0].1).2, dst);
    assert_eq!(
        s.rt.errors(),
        vec![(
            "ip4-session",
            "session created for a service (not an error)",
            1
        )]
    );
    // Not for a service: untouched, no session.
    let out = send(
        s,
        vec![(0, tcp(MAC[0], (CLIENT, 40001), ([192, 0, 2, 9], 80), true))],
    );
    assert_eq!(addrs(&out[0].1), (CLIENT, 40001, [192, 0, 2, 9], 80));
    assert_eq!(s.sessions.table.count_live(), 1);
}

#[test]
fn udp_with_and_without_a_checksum() {
    let s = &mut setup();
    publish(s, &[1]);
    for sum in [true, false] {
        let out = send(
            s,
            vec![(0, udp_to((CLIENT, 5000 + sum as u16), (VIP, 80), sum))],
        );
        assert_eq!(out.len(), 1, "{:?}", s.rt.errors());
        let (_, _, dst, dport, c) = checked(&out[0].1);
        assert_eq!((dst, dport), (BACKENDS[1], 8080));
        assert_eq!(c == 0, !sum, "no checksum stays none");
    }
}

/// Flows spread over the backends about evenly; removing one and killing its sessions drops
/// exactly its flows' packets, and new flows avoid it while the others keep their backend.
#[test]
fn flows_spread_and_a_removed_backend_takes_only_its_own() {
    let s = &mut setup();
    publish(s, &[0, 1, 2]);
    let flows: Vec<u16> = (0..300).map(|i| 20000 + i).collect();
    let syn = |p: u16| (0, tcp(MAC[0], (CLIENT, p), (VIP, 80), true));
    let mut first = HashMap::new();
    for chunk in flows.chunks(100) {
        for (_, f) in send(s, chunk.iter().map(|&p| syn(p)).collect()) {
            let (_, sport, dst, ..) = checked(&f);
            first.insert(sport, dst);
        }
    }
    assert_eq!(first.len(), 300);
    for b in BACKENDS {
        let n = first.values().filter(|&&d| d == b).count();
        assert!((70..=130).contains(&n), "{b:?} got {n} of 300");
    }
    // Backend 2 goes: its sessions are killed, the service now has 0 and 1.
    let killed = s.sessions.table.kill_backend(1, 2);
    publish(s, &[0, 1]);
    let on_2 = first.values().filter(|&&d| d == BACKENDS[2]).count();
    assert_eq!(killed, on_2);
    let ack = |p: u16| (0, tcp(MAC[0], (CLIENT, p), (VIP, 80), false));
    let mut out = Vec::new();
    for chunk in flows.chunks(100) {
        out.extend(send(s, chunk.iter().map(|&p| ack(p)).collect()));
    }
    // A surviving flow keeps its backend; a flow of the removed one has its killed session
    // freed by its owner (this worker) at its next packet, which is balanced afresh (its new
    // backend's stack then resets the connection): none reaches the removed backend.
    assert_eq!(out.len(), 300);
    let mut moved = 0;
    for (_, f) in &out {
        let (_, sport, dst, ..) = checked(f);
        assert_ne!(dst, BACKENDS[2]);
        if first[&sport] == BACKENDS[2] {
            moved += 1;
        } else {
            assert_eq!(first[&sport], dst, "a surviving flow kept its backend");
        }
    }
    assert_eq!(moved, on_2);
    // Those the sweep had not freed yet were met (and counted) on the way.
    let met =
        s.rt.errors()
            .iter()
            .find(|e| e.1 == "session of a removed backend")
            .map_or(0, |e| e.2);
    assert!(met <= on_2 as u64, "{:?}", s.rt.errors());
    // New flows go to the two that are left.
    let fresh = send(s, (0..100).map(|i| syn(30000 + i)).collect());
    assert_eq!(fresh.len(), 100);
    assert!(fresh.iter().all(|(_, f)| checked(f).2 != BACKENDS[2]));
}

/// A service without a usable backend drops new flows, counted.
#[test]
fn a_service_without_backends_drops_new_flows() {
    let s = &mut setup();
    publish(s, &[]);
    let out = send(s, vec![(0, tcp(MAC[0], (CLIENT, 1), (VIP, 80), true))]);
    assert!(out.is_empty());
    assert_eq!(
        s.rt.errors(),
        vec![("ip4-session", "service has no usable backend", 1)]
    );
}
