//! The compiled evaluator against a naive one written straight from the semantics: random
//! policies over a small address space (so that prefixes, excepts and sets overlap and flows
//! hit them), random sets (some missing), random flows. Verdicts and the first matching rule
//! must agree.

use std::net::Ipv4Addr;

use policy::{
    AddressSet, Compiled, Direction, Peer, Policy, PortMatch, PortRange, Prefix, Protocol, Rule,
    SetSpec, Sets, Verdict,
};
use proptest::prelude::*;

const SET_NAMES: [&str; 5] = ["s0", "s1", "s2", "s3", "missing"];

/// Addresses in 10.0.0.0/22 and a few outside, so that random prefixes overlap.
fn addr() -> impl Strategy<Value = u32> {
    prop_oneof![
        8 => (0u32..4, 0u32..16).prop_map(|(x, y)| 0x0a00_0000 | x << 8 | y),
        1 => Just(0xc0a8_0101u32),
        1 => any::<u32>(),
    ]
}

fn prefix() -> impl Strategy<Value = Prefix> {
    let len = prop::sample::select(vec![0u8, 8, 16, 22, 23, 24, 28, 30, 31, 32, 32, 32]);
    (addr(), len).prop_map(|(a, len)| Prefix::new(Ipv4Addr::from(a), len))
}

/// A cidr with up to three excepts strictly inside it, as the spec requires.
fn cidr() -> impl Strategy<Value = Peer> {
    (
        prefix(),
        prop::collection::vec((any::<u32>(), 1u8..=32), 0..3),
    )
        .prop_map(|(p, raw)| {
            let except = if p.len >= 32 {
                vec![]
            } else {
                raw.into_iter()
                    .map(|(bits, extra)| {
                        let len = (p.len + extra).min(32);
                        let host = bits & (u32::MAX >> p.len);
                        Prefix::new(Ipv4Addr::from(p.network() | host), len)
                    })
                    .collect()
            };
            Peer::Cidr { prefix: p, except }
        })
}

fn peer() -> impl Strategy<Value = Peer> {
    prop_oneof![
        cidr(),
        prop::sample::select(SET_NAMES.to_vec()).prop_map(|n| Peer::Set(n.into())),
    ]
}

fn port_match() -> impl Strategy<Value = PortMatch> {
    let proto = prop::sample::select(vec![
        Protocol::Tcp,
        Protocol::Udp,
        Protocol::Sctp,
        Protocol::Icmp,
    ]);
    let first = prop::sample::select(vec![1u16, 53, 79, 80, 81, 443, 65535]);
    let width = prop::sample::select(vec![0u16, 0, 1, 2, 400]);
    (proto, prop::option::of((first, width))).prop_map(|(protocol, port)| PortMatch {
        protocol,
        port: match protocol {
            Protocol::Icmp => None,
            _ => port.map(|(first, w)| PortRange {
                first,
                last: first.saturating_add(w),
            }),
        },
    })
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        prop::collection::vec(peer(), 0..4),
        prop::collection::vec(port_match(), 0..3),
    )
        .prop_map(|(peers, ports)| Rule { peers, ports })
}

fn policies() -> impl Strategy<Value = Vec<Policy>> {
    let rules = || prop::option::of(prop::collection::vec(rule(), 0..4));
    prop::collection::vec((rules(), rules()), 0..4).prop_map(|ps| {
        ps.into_iter()
            .enumerate()
            .map(|(i, (ingress, egress))| Policy {
                name: format!("ns/p{i}"),
                ingress,
                egress,
            })
            .collect()
    })
}

/// s0..s3, each present or not, with up to a dozen members.
fn set_specs() -> impl Strategy<Value = Vec<SetSpec>> {
    let one = prop::option::of(prop::collection::vec(prefix(), 0..12));
    prop::collection::vec(one, 4).prop_map(|sets| {
        sets.into_iter()
            .enumerate()
            .filter_map(|(i, m)| {
                m.map(|members| SetSpec {
                    name: format!("s{i}"),
                    members,
                })
            })
            .collect()
    })
}

#[derive(Debug, Clone, Copy)]
struct Flow {
    dir: Direction,
    peer: u32,
    proto: u8,
    dport: u16,
}

fn flow() -> impl Strategy<Value = Flow> {
    let dir = prop::sample::select(vec![Direction::Ingress, Direction::Egress]);
    let proto = prop::sample::select(vec![1u8, 6, 17, 132, 47]);
    let dport = prop::sample::select(vec![0u16, 1, 53, 79, 80, 81, 82, 443, 480, 65535]);
    (dir, addr(), proto, dport).prop_map(|(dir, peer, proto, dport)| Flow {
        dir,
        peer,
        proto,
        dport,
    })
}

// ---- the oracle: every check a scan over the spec, nothing shared with the crate ----

fn inside(p: Prefix, addr: u32) -> bool {
    let len = u32::from(p.len.min(32));
    let mask = (u64::from(u32::MAX) << (32 - len)) as u32;
    addr & mask == u32::from(p.addr) & mask
}

fn peer_matches(peer: &Peer, sets: &[SetSpec], addr: u32) -> bool {
    match peer {
        Peer::Cidr { prefix, except } => {
            inside(*prefix, addr) && !except.iter().any(|e| inside(*e, addr))
        }
        Peer::Set(name) => sets
            .iter()
            .filter(|s| &s.name == name)
            .any(|s| s.members.iter().any(|m| inside(*m, addr))),
    }
}

fn port_matches(m: &PortMatch, proto: u8, dport: u16) -> bool {
    let number = match m.protocol {
        Protocol::Tcp => 6,
        Protocol::Udp => 17,
        Protocol::Sctp => 132,
        Protocol::Icmp => return proto == 1,
    };
    proto == number && m.port.is_none_or(|r| r.first <= dport && dport <= r.last)
}

/// None: not isolated; Some(None): denied; Some(Some(name)): allowed by that rule.
fn oracle(policies: &[Policy], sets: &[SetSpec], f: Flow) -> Option<Option<String>> {
    let mut isolated = false;
    for p in policies {
        let (dir, rules) = match f.dir {
            Direction::Ingress => ("ingress", &p.ingress),
            Direction::Egress => ("egress", &p.egress),
        };
        let Some(rules) = rules else { continue };
        isolated = true;
        for (i, r) in rules.iter().enumerate() {
            let peer_ok =
                r.peers.is_empty() || r.peers.iter().any(|x| peer_matches(x, sets, f.peer));
            let port_ok =
                r.ports.is_empty() || r.ports.iter().any(|m| port_matches(m, f.proto, f.dport));
            if peer_ok && port_ok {
                return Some(Some(format!("{} {dir} rule {i}", p.name)));
            }
        }
    }
    isolated.then_some(None)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn compiled_agrees_with_the_oracle(
        policies in policies(),
        set_specs in set_specs(),
        flows in prop::collection::vec(flow(), 40),
    ) {
        for p in &policies {
            prop_assert!(p.problems().is_empty(), "generated invalid: {:?}", p.problems());
        }
        let mut sets = Sets::new();
        for s in &set_specs {
            sets.insert(s.name.clone(), AddressSet::new(s.members.iter().copied()));
        }
        let refs: Vec<&Policy> = policies.iter().collect();
        let c = Compiled::build(&refs, &sets);
        for f in flows {
            let got = match c.evaluate(f.dir, f.peer, f.proto, f.dport) {
                Verdict::NotIsolated => None,
                Verdict::Denied => Some(None),
                Verdict::Allowed(r) => Some(Some(c.rule_name(r))),
            };
            let want = oracle(&policies, &set_specs, f);
            prop_assert_eq!(got, want, "{:?} peer {}", f, Ipv4Addr::from(f.peer));
        }
    }
}
