//! Nanoseconds per evaluation: 50 ingress rules, each a TCP port and its own address set of
//! 10 or 10,000 pod addresses. A rough figure for the cost of a new flow's policy check, not a
//! benchmark of record (that is the harness's job).
//!
//! `cargo run --release -p policy --example eval_bench`

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

use policy::{
    AddressSet, Compiled, Direction, Peer, Policy, PortMatch, PortRange, Prefix, Protocol, Rule,
    Sets,
};

const RULES: u32 = 50;
const EVALS: u32 = 2_000_000;

/// Set `i`'s members: 10.i.x.y, one per address from 10.i.0.0.
fn member(set: u32, j: u32) -> u32 {
    0x0a00_0000 | set << 16 | j
}

/// `shared`: every rule names set 0 (one table in cache), else each its own.
fn compiled(members: u32, shared: bool) -> Compiled {
    let mut sets = Sets::new();
    for i in 0..RULES {
        let pods = (0..members).map(|j| Prefix::host(Ipv4Addr::from(member(i, j))));
        sets.insert(format!("s{i}"), AddressSet::new(pods));
    }
    let rules = (0..RULES)
        .map(|i| Rule {
            peers: vec![Peer::Set(format!("s{}", if shared { 0 } else { i }))],
            ports: vec![PortMatch {
                protocol: Protocol::Tcp,
                port: Some(PortRange::one(80)),
            }],
        })
        .collect();
    let p = Policy {
        name: "default/bench".into(),
        ingress: Some(rules),
        egress: None,
    };
    Compiled::build(&[&p], &sets)
}

/// ns per evaluation over `peers` in turn, TCP to `dport`.
fn time(c: &Compiled, peers: &[u32], dport: u16) -> f64 {
    let mut allowed = 0u32;
    let start = Instant::now();
    for k in 0..EVALS {
        let peer = peers[k as usize % peers.len()];
        let v = c.evaluate(Direction::Ingress, black_box(peer), 6, black_box(dport));
        allowed += u32::from(v.allows());
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(EVALS);
    black_box(allowed);
    ns
}

fn main() {
    println!("{RULES} rules, one set each, {EVALS} evaluations per figure (ns/evaluation)");
    println!(
        "{:>18}  {:>10}  {:>10}  {:>10}  {:>10}",
        "members", "first rule", "last rule", "denied", "port miss"
    );
    // The last row names one set from every rule: the same probes as the 10,000 row, but one
    // table for the caches to hold instead of fifty.
    for (members, shared) in [(10u32, false), (10_000, false), (10_000, true)] {
        let c = compiled(members, shared);
        // 4096 distinct peers per case, spread over the set, so that big sets are not read
        // from one cache line.
        let spread =
            |set: u32| -> Vec<u32> { (0..4096u32).map(|k| member(set, k * 7 % members)).collect() };
        let nobody: Vec<u32> = (0..4096u32).map(|k| 0xac10_0000 | (k * 13)).collect();
        let (_, probes) = c.probes(Direction::Ingress, nobody[0], 6, 80);
        let last = match shared {
            true => "-".to_string(),
            false => format!("{:.1}", time(&c, &spread(RULES - 1), 80)),
        };
        let label = format!("{members}{}", if shared { " (one set)" } else { "" });
        println!(
            "{label:>18}  {:>10.1}  {last:>10}  {:>10.1}  {:>10.1}   ({probes} probes when denied)",
            time(&c, &spread(0), 80),
            time(&c, &nobody, 80),
            time(&c, &nobody, 81),
        );
    }
}
