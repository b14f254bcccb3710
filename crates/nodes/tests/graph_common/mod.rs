//! The forwarding graph the node tests run: interfaces, VRFs, routes and neighbours, an
//! injecting input node and a collecting output node.
#![allow(dead_code)]

use std::sync::Arc;

use arc_swap::ArcSwap;
use buffer::{Pool, PoolConfig};
use fib::adj::AdjTable;
use fib::{Ipv4Addr, Lpm};
use graph::Runtime;
use nodes::{IfConfig, Learned, Shared};
pub use testkit::stubs::{Frames, Inject, Output};

pub const MAC: [[u8; 6]; 4] = [
    [2, 0, 0, 0, 0, 0xa0],
    [2, 0, 0, 0, 0, 0xa1],
    [2, 0, 0, 0, 0, 0xa2],
    [2, 0, 0, 0, 0, 0xa3],
];
pub const NB1: [u8; 6] = [2, 0, 0, 0, 1, 1];
pub const NB3: [u8; 6] = [2, 0, 0, 0, 3, 3];
pub const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 9, 9];
/// The neighbour behind the glean adjacency, 10.1.0.99 on if1, once it answers ARP.
pub const NB99: [u8; 6] = [2, 0, 0, 0, 1, 0x99];
/// From the test host to if0.
pub const HOST_TO_IF0: testkit::Macs = testkit::Macs {
    src: HOST_MAC,
    dst: MAC[0],
};

pub struct Setup {
    pub rt: Runtime,
    pub pool: Pool,
    pub input: Frames,
    /// The second input node's queue, polled after the first's.
    pub input2: Frames,
    pub output: Frames,
    pub learned: std::sync::mpsc::Receiver<Learned>,
    pub adj: AdjTable,
    pub _lpm: (Lpm, Lpm),
    /// The interfaces the nodes see (a test may republish them).
    pub ifs: Arc<ArcSwap<Vec<IfConfig>>>,
    /// The services, and the session table.
    pub services: Arc<ArcSwap<nodes::Services>>,
    pub sessions: Arc<nodes::Sessions>,
    pub policies: Arc<ArcSwap<nodes::Policies>>,
}

/// Where a run's packets went (sorted) and the counters it left (sorted).
pub type Outcome = (Vec<(u32, Vec<u8>)>, Vec<(&'static str, &'static str, u64)>);

impl Setup {
    /// Runs `frames`, one dispatch each, and says where their packets went: for comparing a
    /// frame's outcome with its packets' sent one per frame.
    pub fn outcome(&mut self, frames: Vec<Vec<(u32, Vec<u8>)>>) -> Outcome {
        for f in frames {
            self.input.lock().unwrap().extend(f);
            self.rt.dispatch(&mut self.pool);
        }
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
        let mut out = self.output.lock().unwrap().clone();
        out.sort();
        let mut errors = self.rt.errors();
        errors.sort();
        (out, errors)
    }

    /// Gives interface `i` the allowed sources `prefixes` (a pod's interface), or none.
    pub fn set_sources(&self, i: usize, prefixes: Option<&[([u8; 4], u8)]>) {
        let mut ifs = (**self.ifs.load()).clone();
        ifs[i].sources = prefixes
            .map(|p| nodes::AllowedSources::new(p.iter().map(|&(a, l)| (Ipv4Addr::from(a), l))));
        self.ifs.store(Arc::new(ifs));
    }
}

pub fn setup() -> Setup {
    // if0, if1 in VRF 0; if2, if3 in VRF 1. 192.0.2.0/24 exists in both, via 10.1.0.2 on if1
    // and on if3: the same next-hop address, different neighbours.
    let ifs = (0..4)
        .map(|i| {
            let mut c = IfConfig::new(MAC[i], (i / 2) as u32);
            // if0 owns 10.0.0.1/24, the subnet our test hosts live on; if1 10.1.0.1/24 and a
            // second address, so that ARP must pick the one on the next hop's subnet. if2 and
            // if3 have none.
            match i {
                0 => c.addresses.push((Ipv4Addr::new(10, 0, 0, 1), 24)),
                1 => c.addresses.extend([
                    (Ipv4Addr::new(172, 16, 0, 1), 16),
                    (Ipv4Addr::new(10, 1, 0, 1), 24),
                ]),
                _ => {}
            }
            c
        })
        .collect();
    let mut adj = AdjTable::new();
    for i in 0..4 {
        adj.set_interface_mac(i, MAC[i as usize]);
    }
    let nh = Ipv4Addr::new(10, 1, 0, 2);
    let a1 = adj.add_next_hop(1, nh);
    let a3 = adj.add_next_hop(3, nh);
    adj.learn(1, nh, NB1);
    adj.learn(3, nh, NB3);
    let glean = adj.add_next_hop(1, Ipv4Addr::new(10, 1, 0, 99));
    // A next hop on if3, which has no address to ask from.
    let glean_no_addr = adj.add_next_hop(3, Ipv4Addr::new(10, 3, 0, 2));
    // The test host 10.0.0.7 on if0, for echo replies.
    let host = adj.add_next_hop(0, Ipv4Addr::new(10, 0, 0, 7));
    adj.learn(0, Ipv4Addr::new(10, 0, 0, 7), HOST_MAC);
    let (mut v0, mut v1) = (Lpm::new(8), Lpm::new(8));
    v0.insert(Ipv4Addr::new(192, 0, 2, 0), 24, a1).unwrap();
    v1.insert(Ipv4Addr::new(192, 0, 2, 0), 24, a3).unwrap();
    v1.insert(Ipv4Addr::new(198, 18, 0, 0), 15, glean_no_addr)
        .unwrap();
    v0.insert(Ipv4Addr::new(10, 0, 0, 1), 32, AdjTable::LOCAL)
        .unwrap();
    v0.insert(Ipv4Addr::new(203, 0, 113, 0), 24, glean).unwrap();
    v0.insert(Ipv4Addr::new(10, 0, 0, 7), 32, host).unwrap();
    v0.insert(Ipv4Addr::new(233, 252, 0, 0), 24, AdjTable::DROP)
        .unwrap();
    let ifs = Arc::new(ArcSwap::from_pointee(ifs));
    let shared = Shared::new(
        ifs.clone(),
        Arc::new(ArcSwap::from_pointee(vec![v0.reader(), v1.reader()])),
        adj.reader(),
    );
    let (input, input2, output) = (Frames::default(), Frames::default(), Frames::default());
    let (learned_tx, learned) = std::sync::mpsc::sync_channel(2);
    // A second input node, polled after the first, so that ethernet-input's backlog can be
    // more than one frame.
    let stubs: Vec<Box<dyn graph::AnyNode>> = vec![
        Box::new(Inject::new("test-input", input.clone())),
        Box::new(Output::recording("memif-output", output.clone())),
        Box::new(Inject::new("test-input-2", input2.clone())),
    ];
    let rt = testkit::stubs::runtime(stubs, &shared, learned_tx, 256);
    let pool = Pool::new(PoolConfig {
        count: 4096,
        ..Default::default()
    })
    .unwrap();
    Setup {
        rt,
        pool,
        input,
        input2,
        output,
        learned,
        adj,
        _lpm: (v0, v1),
        ifs,
        services: shared.services.clone(),
        sessions: shared.sessions.clone(),
        policies: shared.policies.clone(),
    }
}

/// A broadcast ARP request from the test host's MAC, sender `sender`, for `target`.
pub fn arp_request(sender: [u8; 4], target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&HOST_MAC);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    wire::Arp::emit(
        &mut f[14..],
        wire::ArpOp::Request,
        (wire::MacAddr(HOST_MAC), Ipv4Addr::from(sender)),
        (wire::MacAddr([0; 6]), Ipv4Addr::from(target)),
    )
    .unwrap();
    f
}

pub fn udp(dst_mac: [u8; 6], dst: [u8; 4], ttl: u8, payload: &[u8]) -> Vec<u8> {
    let macs = testkit::Macs {
        dst: dst_mac,
        ..HOST_TO_IF0
    };
    testkit::udp4_frame(macs, [10, 0, 0, 7], dst, ttl, payload)
}

/// The packets node `node` has taken so far (its `show runtime` vectors).
pub fn vectors(rt: &graph::Runtime, node: &str) -> u64 {
    rt.runtime()
        .iter()
        .find(|(n, _, _)| *n == node)
        .map_or(0, |(_, _, s)| s.vectors)
}
