//! Any frames, on any interface, through the whole protocol graph (`nodes::protocol_nodes`:
//! ethernet-input, arp-input, ip4-input, ip4-lookup, ip4-local, udp4-local, vxlan4-input,
//! ip4-rewrite, ip4-icmp-error, ip4-glean, interface-output...): nothing panics, every
//! buffer comes out (sent, held for reassembly, or freed by error-drop after a named counter
//! said why), and the pool gets every buffer back.
//!
//! Frames can ask to be made plausible (the receiving interface's MAC, IPv4's EtherType,
//! version and checksum) so that the fuzzer reaches the nodes behind the header checks, and
//! to be addressed to VRF 0's services (a TCP, a UDP and an SCTP VIP) or to come from their
//! backend, so that `ip4-session` creates, finds, rewrites (an SCTP packet's checksum
//! computed again) and sweeps sessions, and the flow cache forwards established flows; the
//! session table lives on from input to input, as it would in a worker.
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
use nodes::services::{Backend, Service, Services, VipKey};
use nodes::{IfConfig, Shared};
use testkit::stubs::{DEVICE_OUTPUTS, Inject, Output};
use wire::{EtherType, Ethernet, Ipv4};

const MAC: [[u8; 6]; 3] = [
    [2, 0, 0, 0, 0, 0xa0],
    [2, 0, 0, 0, 0, 0xa1],
    [2, 0, 0, 0, 0, 0xa2],
];

#[derive(Arbitrary, Debug)]
struct Frame {
    /// The receiving interface; 3 and above do not exist.
    rx_if: u8,
    /// Write the receiving interface's MAC as destination.
    to_us: bool,
    /// Write IPv4's EtherType, a 20-byte header's version byte, a total length that fits
    /// and the header checksum.
    plausible_ip4: bool,
    /// With `plausible_ip4`: to the VIP's port 80, or from the backend's port 8080 (the
    /// protocol byte and the rest are the fuzzer's).
    to_vip: bool,
    from_backend: bool,
    bytes: Vec<u8>,
}

const VIP: [u8; 4] = [10, 0, 0, 100];
const BACKEND: [u8; 4] = [10, 1, 0, 50];

impl Frame {
    fn build(&self) -> Vec<u8> {
        let mut f = self.bytes.clone();
        f.truncate(2048 - 64);
        if self.to_us
            && let Ok(mut e) = Ethernet::new_checked(&mut f[..])
        {
            e.set_dst(wire::MacAddr(MAC[usize::from(self.rx_if) % MAC.len()]));
        }
        if self.plausible_ip4 && f.len() >= 14 + 20 {
            let ip_len = (f.len() - 14) as u16;
            Ethernet::new_unchecked(&mut f[..]).set_ethertype(EtherType::Ipv4);
            let mut ip = Ipv4::new_unchecked(&mut f[14..]);
            ip.set_version_ihl(wire::ipv4::VER_IHL_NO_OPTIONS);
            if ip.total_len() > ip_len || ip.total_len() < 20 {
                ip.set_total_len(ip_len);
            }
            if self.to_vip {
                ip.set_dst_addr(VIP.into());
            }
            if self.from_backend {
                ip.set_src_addr(BACKEND.into());
            }
            ip.fill_checksum();
            // The ports of TCP, UDP and SCTP alike.
            if f.len() >= 14 + 24 {
                if self.to_vip {
                    f[14 + 22..14 + 24].copy_from_slice(&80u16.to_be_bytes());
                }
                if self.from_backend {
                    f[14 + 20..14 + 22].copy_from_slice(&8080u16.to_be_bytes());
                }
            }
        }
        f
    }
}

/// The topology, built once: a DIR-24-8 table is 64 MiB, far too much to make per input. The
/// writers stay in the static beside the readers (reachable, so not a leak).
fn shared() -> Shared {
    type State = (AdjTable, (Lpm, Lpm), Shared);
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    let state = STATE.get_or_init(|| {
        let mut adj = AdjTable::new();
        let mut lpm = (Lpm::new(8), Lpm::new(8));
        let shared = build(&mut adj, &mut lpm);
        Mutex::new((adj, lpm, shared))
    });
    state.lock().unwrap().2.clone()
}

fn build(adj: &mut AdjTable, lpm: &mut (Lpm, Lpm)) -> Shared {
    // if0 and if1 in VRF 0, if2 in VRF 1; every kind of adjacency is reachable.
    let ifs = (0..3)
        .map(|i| {
            let mut c = IfConfig::new(MAC[i], u32::from(i == 2));
            if i < 2 {
                c.addresses.push((Ipv4Addr::new(10, i as u8, 0, 1), 24));
            }
            c
        })
        .collect();
    for i in 0..3 {
        adj.set_interface_mac(i, MAC[i as usize]);
    }
    let nh = Ipv4Addr::new(10, 1, 0, 2);
    let fwd = adj.add_next_hop(1, nh);
    adj.learn(1, nh, [2, 0, 0, 0, 1, 1]);
    let glean = adj.add_next_hop(1, Ipv4Addr::new(10, 1, 0, 99));
    let no_addr = adj.add_next_hop(2, Ipv4Addr::new(10, 2, 0, 2));
    let (v0, v1) = lpm;
    v0.insert(Ipv4Addr::new(0, 0, 0, 0), 1, fwd).unwrap();
    v0.insert(Ipv4Addr::new(10, 0, 0, 1), 32, AdjTable::LOCAL)
        .unwrap();
    v0.insert(Ipv4Addr::new(203, 0, 113, 0), 24, glean).unwrap();
    v0.insert(Ipv4Addr::new(233, 252, 0, 0), 24, AdjTable::DROP)
        .unwrap();
    v1.insert(Ipv4Addr::new(0, 0, 0, 0), 1, no_addr).unwrap();
    let shared = Shared::new(
        Arc::new(ArcSwap::from_pointee(ifs)),
        Arc::new(ArcSwap::from_pointee(vec![v0.reader(), v1.reader()])),
        adj.reader(),
    );
    // VRF 0 keeps sessions: a TCP and a UDP service on VIP:80, over one backend.
    let mut services = Services::default();
    let backend = Backend {
        id: 0,
        addr: u32::from_be_bytes(BACKEND),
        port: 8080,
    };
    for proto in [6, 17, 132] {
        let k = VipKey {
            vrf: 0,
            proto,
            vip: u32::from_be_bytes(VIP),
            port: 80,
        };
        services
            .vips
            .insert(k, Arc::new(Service::new(u32::from(proto), vec![backend])));
    }
    services.addrs.insert((0, u32::from_be_bytes(VIP)));
    services.stateful = vec![true];
    shared.services.store(Arc::new(services));
    shared
}

fuzz_target!(|frames: Vec<Frame>| {
    let frames: Vec<(u32, Vec<u8>)> = frames
        .iter()
        .take(512)
        .map(|f| (u32::from(f.rx_if), f.build()))
        .collect();
    let sent = frames.len() as u64;
    let shared = shared();
    let (learned_tx, _learned) = std::sync::mpsc::sync_channel(4);
    let mut stubs: Vec<Box<dyn AnyNode>> = vec![Box::new(Inject::new(
        "fuzz-input",
        Arc::new(Mutex::new(frames)),
    ))];
    stubs.extend(DEVICE_OUTPUTS.map(|name| Box::new(Output::sink(name)) as Box<dyn AnyNode>));
    let mut rt = testkit::stubs::runtime(stubs, &shared, learned_tx, 64);
    rt.trace_add("fuzz-input", 8).unwrap();
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
    while rt.dispatch(&mut pool) > 0 {}
    assert_eq!(pool.available(), pool.capacity(), "a buffer leaked");
    let vectors = |name: &str| {
        rt.runtime()
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or(0, |(_, _, s)| s.vectors)
    };
    let (out, dropped) = (
        vectors("memif-output")
            + vectors("af-packet-output")
            + vectors("af-xdp-output")
            + vectors("tap-output"),
        vectors("error-drop"),
    );
    let held = graph_common::held_for_reassembly(&rt);
    assert_eq!(
        out + dropped + held,
        sent,
        "every frame is sent, dropped or held, once"
    );
    let counted: u64 = rt.errors().iter().map(|(_, _, n)| n).sum();
    assert!(
        counted >= dropped,
        "{dropped} drops but {counted} counts: {:?}",
        rt.errors()
    );
    assert_eq!(rt.undeclared_next_drops(), 0);
    let _ = rt.show_trace();
});
