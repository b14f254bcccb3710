//! Any UDP/4789 payload arriving on an uplink, through the whole protocol graph: udp4-local,
//! vxlan4-input, then whatever the inner frame asks for in its network (ARP by proxy, local
//! echo, forwarding to a pod, back into a tunnel). Nothing panics, every buffer is sent or
//! dropped once and the pool gets it back, and no payload of one network ever reaches the
//! other network's pod: blue (VNI 56) and red (VNI 88) use the same addresses.
//!
//! The outer Ethernet, IPv4 and UDP headers are valid (to our uplink address, from one of two
//! VTEPs or a stranger) so that the fuzzer spends its time in the VXLAN header and the inner
//! frame, which it may ask to be made plausible (the tunnel's MAC, IPv4, a header checksum).
#![no_main]

mod graph_common;

use std::sync::{Arc, Mutex, OnceLock};

use arbitrary::Arbitrary;
use arc_swap::ArcSwap;
use buffer::{Pool, PoolConfig};
use fib::adj::AdjTable;
use fib::{Ipv4Addr, Lpm};
use graph::AnyNode;
use libfuzzer_sys::fuzz_target;
use nodes::{Device, IfConfig, Shared, TunnelCounters, VxlanMap, VxlanTunnel};
use testkit::stubs::{DEVICE_OUTPUTS, Frames, Inject, Output};
use wire::{EtherType, Ethernet, IpProtocol, Ipv4, Udp};

const UPLINK: u32 = 0;
const BLUE_POD: u32 = 1;
const BLUE_TUN: u32 = 2;
const RED_POD: u32 = 3;
const RED_TUN: u32 = 4;
const MAC: [[u8; 6]; 5] = [
    [2, 0, 0, 0, 0, 0xa0],
    [2, 0, 0, 0, 0, 0xa1],
    [2, 0, 0, 0, 0, 0xa2],
    [2, 0, 0, 0, 0, 0xa3],
    [2, 0, 0, 0, 0, 0xa4],
];

#[derive(Arbitrary, Debug)]
struct Datagram {
    /// 0: blue's VTEP, 1: red's, else a stranger.
    from: u8,
    /// Write a valid VXLAN header (I flag) for VNI 56 or 88 (by `red`) over the payload's
    /// first 8 bytes; otherwise they stay as the fuzzer wrote them.
    valid_vxlan: bool,
    red: bool,
    /// Make the inner frame plausible: the tunnel's MAC, IPv4, a fixed-up header.
    plausible_inner: bool,
    payload: Vec<u8>,
}

impl Datagram {
    fn vni(&self) -> u32 {
        if self.red { 88 } else { 56 }
    }

    fn build(&self) -> Vec<u8> {
        let mut p = self.payload.clone();
        p.truncate(2048 - 64 - 42);
        if self.valid_vxlan && p.len() >= 8 {
            p[..8].copy_from_slice(&[0x08, 0, 0, 0, 0, 0, self.vni() as u8, 0]);
        }
        if self.plausible_inner && p.len() >= 8 + 14 + 20 {
            let inner = &mut p[8..];
            let tunnel = if self.red { RED_TUN } else { BLUE_TUN };
            let len = (inner.len() - 14) as u16;
            let mut e = Ethernet::new_unchecked(&mut inner[..]);
            e.set_dst(wire::MacAddr(MAC[tunnel as usize]));
            e.set_ethertype(EtherType::Ipv4);
            let mut ip = Ipv4::new_unchecked(&mut inner[14..]);
            ip.set_version_ihl(wire::ipv4::VER_IHL_NO_OPTIONS);
            if ip.total_len() > len || ip.total_len() < 20 {
                ip.set_total_len(len);
            }
            ip.fill_checksum();
        }
        let src = match self.from {
            0 => Ipv4Addr::new(192, 0, 2, 2),
            1 => Ipv4Addr::new(192, 0, 2, 3),
            _ => Ipv4Addr::new(192, 0, 2, 9),
        };
        let mut f = vec![0u8; 42 + p.len()];
        let mut e = Ethernet::new_unchecked(&mut f[..]);
        e.set_dst(wire::MacAddr(MAC[UPLINK as usize]));
        e.set_src(wire::MacAddr([2, 0, 0, 0, 9, 9]));
        e.set_ethertype(EtherType::Ipv4);
        let mut ip = Ipv4::emit(
            &mut f[14..],
            src,
            Ipv4Addr::new(192, 0, 2, 1),
            IpProtocol::Udp,
            64,
            8 + p.len(),
        )
        .expect("sized above");
        let mut u = Udp::emit(ip.payload_mut(), 40000, 4789, p.len()).expect("sized above");
        u.payload_mut().copy_from_slice(&p);
        f
    }
}

fn tunnel(vni: u32, vtep: Ipv4Addr) -> Device {
    Device::Vxlan(VxlanTunnel {
        vni,
        src: Ipv4Addr::new(192, 0, 2, 1),
        dst: vtep,
        underlay: 0,
        uplink: 0,
        df: true,
        ranges: vec![(Ipv4Addr::new(10, 1, 0, 0), 16)],
        counters: Arc::new(TunnelCounters::default()),
    })
}

/// Uplink 192.0.2.1/24 in VRF 0 with both VTEPs resolved; blue (VRF 1) and red (VRF 2) each
/// with a pod interface 10.1.1.1/24 (pod 10.1.1.2 resolved) and a tunnel with a route to
/// 10.1.2.0/24 across it (10.1.2.2 resolved).
fn shared() -> Shared {
    type State = (AdjTable, Vec<Lpm>, Shared);
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    let state = STATE.get_or_init(|| {
        let mut ifs: Vec<IfConfig> = (0..5)
            .map(|i| IfConfig::new(MAC[i], [0, 1, 1, 2, 2][i]))
            .collect();
        ifs[0].device = Device::Output(1); // af-packet-output, the graph's second
        ifs[0].addresses.push((Ipv4Addr::new(192, 0, 2, 1), 24));
        ifs[0].mtu = 1500;
        for p in [BLUE_POD, RED_POD] {
            ifs[p as usize]
                .addresses
                .push((Ipv4Addr::new(10, 1, 1, 1), 24));
        }
        ifs[BLUE_TUN as usize].device = tunnel(56, Ipv4Addr::new(192, 0, 2, 2));
        ifs[RED_TUN as usize].device = tunnel(88, Ipv4Addr::new(192, 0, 2, 3));
        for t in [BLUE_TUN, RED_TUN] {
            ifs[t as usize].mtu = 1450;
        }
        let mut adj = AdjTable::new();
        for (i, c) in ifs.iter().enumerate() {
            adj.set_interface_mac(i as u32, c.mac);
            adj.set_interface_mtu(i as u32, c.mtu);
        }
        let mut lpm = vec![Lpm::new(8), Lpm::new(8), Lpm::new(8)];
        for vtep in [2u8, 3] {
            let a = Ipv4Addr::new(192, 0, 2, vtep);
            let x = adj.add_next_hop(UPLINK, a);
            adj.learn(UPLINK, a, [2, 0, 0, 0, 9, vtep]);
            lpm[0].insert(a, 32, x).unwrap();
        }
        lpm[0]
            .insert(Ipv4Addr::new(192, 0, 2, 1), 32, AdjTable::LOCAL)
            .unwrap();
        for (vrf, pod, tun) in [(1usize, BLUE_POD, BLUE_TUN), (2, RED_POD, RED_TUN)] {
            let p = adj.add_next_hop(pod, Ipv4Addr::new(10, 1, 1, 2));
            adj.learn(pod, Ipv4Addr::new(10, 1, 1, 2), [2, 0, 0, 0, 7, pod as u8]);
            let g = adj.add_next_hop(tun, Ipv4Addr::UNSPECIFIED);
            let r = adj.add_next_hop(tun, Ipv4Addr::new(10, 1, 2, 2));
            adj.learn(tun, Ipv4Addr::new(10, 1, 2, 2), [2, 0, 0, 0, 8, tun as u8]);
            let t = &mut lpm[vrf];
            t.insert(Ipv4Addr::new(10, 1, 1, 1), 32, AdjTable::LOCAL)
                .unwrap();
            t.insert(Ipv4Addr::new(10, 1, 1, 2), 32, p).unwrap();
            t.insert(Ipv4Addr::new(10, 1, 2, 0), 24, g).unwrap();
            t.insert(Ipv4Addr::new(10, 1, 2, 2), 32, r).unwrap();
        }
        let shared = Shared::new(
            Arc::new(ArcSwap::from_pointee(ifs)),
            Arc::new(ArcSwap::from_pointee(
                lpm.iter().map(Lpm::reader).collect::<Vec<_>>(),
            )),
            adj.reader(),
        );
        shared.vxlan.store(Arc::new(VxlanMap {
            tunnels: [
                ((Ipv4Addr::new(192, 0, 2, 2), 56), BLUE_TUN),
                ((Ipv4Addr::new(192, 0, 2, 3), 88), RED_TUN),
            ]
            .into(),
            vnis: [56, 88].into(),
            vteps: vec![(0, Ipv4Addr::new(192, 0, 2, 1))],
        }));
        Mutex::new((adj, lpm, shared))
    });
    state.lock().unwrap().2.clone()
}

/// Runs `frames` through a fresh graph; returns the interfaces packets left on.
fn run(pool: &mut Pool, frames: Vec<Vec<u8>>) -> Vec<u32> {
    let sent = frames.len() as u64;
    let shared = shared();
    let out = Frames::default();
    let (learned_tx, _learned) = std::sync::mpsc::sync_channel(4);
    let input = frames.into_iter().map(|f| (UPLINK, f)).collect();
    let mut stubs: Vec<Box<dyn AnyNode>> = vec![Box::new(Inject::new(
        "fuzz-input",
        Arc::new(Mutex::new(input)),
    ))];
    stubs.extend(
        DEVICE_OUTPUTS
            .map(|name| Box::new(Output::recording(name, out.clone())) as Box<dyn AnyNode>),
    );
    let mut rt = testkit::stubs::runtime(stubs, &shared, learned_tx, 64);
    rt.trace_add("fuzz-input", 8).unwrap();
    while rt.dispatch(pool) > 0 {}
    assert_eq!(pool.available(), pool.capacity(), "a buffer leaked");
    let left: Vec<u32> = out
        .lock()
        .unwrap()
        .iter()
        .map(|(tx_if, _)| *tx_if)
        .collect();
    let dropped = rt
        .runtime()
        .iter()
        .find(|(n, _, _)| *n == "error-drop")
        .map_or(0, |(_, _, s)| s.vectors);
    let held = graph_common::held_for_reassembly(&rt);
    assert_eq!(left.len() as u64 + dropped + held, sent, "each frame once");
    let counted: u64 = rt.errors().iter().map(|(_, _, n)| n).sum();
    assert!(counted >= dropped, "{:?}", rt.errors());
    assert_eq!(rt.undeclared_next_drops(), 0);
    let _ = rt.show_trace();
    left
}

fuzz_target!(|datagrams: Vec<Datagram>| {
    static POOL: OnceLock<Mutex<Pool>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        Mutex::new(
            Pool::new(PoolConfig {
                count: 1024,
                ..Default::default()
            })
            .unwrap(),
        )
    });
    let mut pool = pool.lock().unwrap();
    let datagrams = &datagrams[..datagrams.len().min(256)];
    // Each network's datagrams on their own: whatever they are, none reaches the other
    // network's pod.
    for (red, other_pod) in [(false, RED_POD), (true, BLUE_POD)] {
        let frames: Vec<Vec<u8>> = datagrams
            .iter()
            .filter(|d| d.red == red)
            .map(Datagram::build)
            .collect();
        let left = run(&mut pool, frames);
        assert!(
            !left.contains(&other_pod),
            "a {} datagram reached the other network's pod",
            if red { "red" } else { "blue" }
        );
    }
});
