//! The semantics, one rule at a time, on small hand-written policies.

use std::net::Ipv4Addr;

use crate::spec::{Peer, Policy, PortMatch, PortRange, Prefix, Protocol, Rule};
use crate::{AddressSet, Compiled, Direction, Sets, Verdict};

use Direction::{Egress, Ingress};

const ICMP: u8 = 1;
const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;
const GRE: u8 = 47;

fn a(s: &str) -> u32 {
    s.parse::<Ipv4Addr>().unwrap().to_bits()
}

fn pfx(s: &str) -> Prefix {
    s.parse().unwrap()
}

fn cidr(prefix: &str, except: &[&str]) -> Peer {
    Peer::Cidr {
        prefix: pfx(prefix),
        except: except.iter().map(|e| pfx(e)).collect(),
    }
}

fn set(name: &str) -> Peer {
    Peer::Set(name.into())
}

fn port(protocol: Protocol, first: u16, last: u16) -> PortMatch {
    PortMatch {
        protocol,
        port: Some(PortRange { first, last }),
    }
}

fn all_ports(protocol: Protocol) -> PortMatch {
    PortMatch {
        protocol,
        port: None,
    }
}

fn rule(peers: Vec<Peer>, ports: Vec<PortMatch>) -> Rule {
    Rule { peers, ports }
}

fn policy(name: &str, ingress: Option<Vec<Rule>>, egress: Option<Vec<Rule>>) -> Policy {
    Policy {
        name: name.into(),
        ingress,
        egress,
    }
}

fn build(policies: &[&Policy]) -> Compiled {
    Compiled::build(policies, &Sets::new())
}

/// allow / deny / not isolated, as letters, for compact tables.
fn says(c: &Compiled, dir: Direction, peer: &str, proto: u8, dport: u16) -> char {
    match c.evaluate(dir, a(peer), proto, dport) {
        Verdict::NotIsolated => 'n',
        Verdict::Allowed(_) => 'a',
        Verdict::Denied => 'd',
    }
}

#[test]
fn no_policy_isolates_nothing() {
    let c = build(&[]);
    assert_eq!(says(&c, Ingress, "10.0.0.1", TCP, 80), 'n');
    assert_eq!(says(&c, Egress, "10.0.0.1", TCP, 80), 'n');
    assert!(c.warnings().is_empty() && c.rule_count() == 0);
}

/// A policy isolates only the directions it covers; `Some(vec![])` isolates and allows
/// nothing; `None` leaves the direction alone.
#[test]
fn isolation_is_per_direction() {
    let deny_in = policy("default/deny-in", Some(vec![]), None);
    let c = build(&[&deny_in]);
    assert!(c.isolated(Ingress) && !c.isolated(Egress));
    assert_eq!(says(&c, Ingress, "10.0.0.1", TCP, 80), 'd');
    assert_eq!(says(&c, Egress, "10.0.0.1", TCP, 80), 'n');

    let deny_out = policy("default/deny-out", None, Some(vec![]));
    let c = build(&[&deny_out]);
    assert_eq!(says(&c, Ingress, "10.0.0.1", TCP, 80), 'n');
    assert_eq!(says(&c, Egress, "10.0.0.1", TCP, 80), 'd');

    // An ingress-only allow next to an egress deny: each direction by its own policies.
    let allow_in = policy("default/allow-in", Some(vec![Rule::default()]), None);
    let c = build(&[&deny_out, &allow_in]);
    assert_eq!(says(&c, Ingress, "8.8.8.8", GRE, 0), 'a');
    assert_eq!(says(&c, Egress, "8.8.8.8", GRE, 0), 'd');
}

/// Policies add: a deny-all next to an allow lets the allowed through, whichever comes
/// first; the hit goes to the first matching rule in policy order.
#[test]
fn policies_are_additive() {
    let deny = policy("default/deny-all", Some(vec![]), Some(vec![]));
    let web = policy(
        "default/web",
        Some(vec![rule(vec![], vec![port(Protocol::Tcp, 80, 80)])]),
        None,
    );
    let ssh = policy(
        "default/ssh",
        Some(vec![
            rule(
                vec![cidr("10.9.0.0/16", &[])],
                vec![port(Protocol::Tcp, 22, 22)],
            ),
            rule(vec![], vec![port(Protocol::Tcp, 80, 80)]),
        ]),
        None,
    );
    for order in [[&deny, &web, &ssh], [&ssh, &web, &deny]] {
        let c = build(&order);
        assert_eq!(says(&c, Ingress, "1.2.3.4", TCP, 80), 'a');
        assert_eq!(says(&c, Ingress, "10.9.1.1", TCP, 22), 'a');
        assert_eq!(says(&c, Ingress, "10.8.1.1", TCP, 22), 'd');
        assert_eq!(says(&c, Ingress, "1.2.3.4", TCP, 81), 'd');
        assert_eq!(says(&c, Egress, "1.2.3.4", TCP, 80), 'd');
    }
    let c = build(&[&deny, &web, &ssh]);
    let Verdict::Allowed(r) = c.evaluate(Ingress, a("1.2.3.4"), TCP, 80) else {
        panic!("allowed")
    };
    assert_eq!(c.rule_name(r), "default/web ingress rule 0");
    let c = build(&[&ssh, &web]);
    let Verdict::Allowed(r) = c.evaluate(Ingress, a("1.2.3.4"), TCP, 80) else {
        panic!("allowed")
    };
    assert_eq!(c.rule_name(r), "default/ssh ingress rule 1");
}

/// Within a rule, peers and ports must both match; empty means any.
#[test]
fn a_rule_needs_its_peers_and_its_ports() {
    let p = policy(
        "p",
        Some(vec![rule(
            vec![cidr("10.1.0.0/16", &[]), cidr("192.168.5.5/32", &[])],
            vec![port(Protocol::Tcp, 443, 443), port(Protocol::Udp, 53, 53)],
        )]),
        Some(vec![rule(vec![cidr("10.1.0.0/16", &[])], vec![])]),
    );
    let c = build(&[&p]);
    for (peer, proto, dport, want) in [
        ("10.1.2.3", TCP, 443, 'a'),
        ("192.168.5.5", UDP, 53, 'a'),
        ("192.168.5.6", UDP, 53, 'd'),
        ("10.1.2.3", UDP, 443, 'd'),
        ("10.1.2.3", TCP, 53, 'd'),
        ("10.2.0.1", TCP, 443, 'd'),
    ] {
        assert_eq!(
            says(&c, Ingress, peer, proto, dport),
            want,
            "{peer} {proto} {dport}"
        );
    }
    // No ports: any protocol, with or without ports.
    for proto in [TCP, UDP, SCTP, ICMP, GRE] {
        assert_eq!(says(&c, Egress, "10.1.255.255", proto, 7), 'a');
        assert_eq!(says(&c, Egress, "10.0.255.255", proto, 7), 'd');
    }
}

/// An ipBlock's excepts carve holes; other peers of the rule still fill them.
#[test]
fn except_carves_out_of_a_cidr() {
    let p = policy(
        "p",
        Some(vec![rule(
            vec![cidr("10.0.0.0/8", &["10.1.0.0/16", "10.2.3.4/32"])],
            vec![],
        )]),
        Some(vec![rule(
            vec![
                cidr("10.0.0.0/8", &["10.1.0.0/16"]),
                cidr("10.1.2.0/24", &[]),
            ],
            vec![],
        )]),
    );
    let c = build(&[&p]);
    for (peer, want) in [
        ("10.0.0.1", 'a'),
        ("10.1.0.0", 'd'),
        ("10.1.255.255", 'd'),
        ("10.2.3.4", 'd'),
        ("10.2.3.5", 'a'),
        ("11.0.0.0", 'd'),
    ] {
        assert_eq!(says(&c, Ingress, peer, TCP, 80), want, "{peer}");
    }
    assert_eq!(
        says(&c, Egress, "10.1.2.9", TCP, 80),
        'a',
        "the /24 peer fills the hole"
    );
    assert_eq!(says(&c, Egress, "10.1.3.9", TCP, 80), 'd');
    // 0.0.0.0/0 except the cluster: "the internet".
    let p = policy(
        "p",
        None,
        Some(vec![rule(vec![cidr("0.0.0.0/0", &["10.0.0.0/8"])], vec![])]),
    );
    let c = build(&[&p]);
    assert_eq!(says(&c, Egress, "8.8.8.8", UDP, 53), 'a');
    assert_eq!(says(&c, Egress, "10.3.0.1", UDP, 53), 'd');
}

/// port..=endPort, edges included; a port-less TCP match takes every TCP port and no UDP.
#[test]
fn port_ranges_include_both_ends() {
    let p = policy(
        "p",
        Some(vec![rule(
            vec![],
            vec![port(Protocol::Tcp, 32000, 32768), all_ports(Protocol::Udp)],
        )]),
        None,
    );
    let c = build(&[&p]);
    for (proto, dport, want) in [
        (TCP, 31999, 'd'),
        (TCP, 32000, 'a'),
        (TCP, 32500, 'a'),
        (TCP, 32768, 'a'),
        (TCP, 32769, 'd'),
        (UDP, 0, 'a'),
        (UDP, 65535, 'a'),
        (SCTP, 32000, 'd'),
        (ICMP, 0, 'd'),
    ] {
        assert_eq!(
            says(&c, Ingress, "1.1.1.1", proto, dport),
            want,
            "{proto} {dport}"
        );
    }
    let one = policy(
        "p",
        Some(vec![rule(vec![], vec![port(Protocol::Tcp, 65535, 65535)])]),
        None,
    );
    let c = build(&[&one]);
    assert_eq!(says(&c, Ingress, "1.1.1.1", TCP, 65535), 'a');
    assert_eq!(says(&c, Ingress, "1.1.1.1", TCP, 65534), 'd');
}

/// ICMP has no ports: whatever the caller passes as the port (an echo id, a type) matches.
#[test]
fn icmp_matches_without_ports() {
    let p = policy(
        "p",
        Some(vec![rule(
            vec![cidr("10.0.0.0/24", &[])],
            vec![all_ports(Protocol::Icmp)],
        )]),
        None,
    );
    let c = build(&[&p]);
    for dport in [0, 8, 4711, 65535] {
        assert_eq!(says(&c, Ingress, "10.0.0.7", ICMP, dport), 'a');
    }
    assert_eq!(says(&c, Ingress, "10.0.1.7", ICMP, 0), 'd');
    assert_eq!(says(&c, Ingress, "10.0.0.7", TCP, 8), 'd');
    // Ports on ICMP are a problem, and ignored if compiled anyway.
    let bad = policy(
        "p",
        Some(vec![rule(vec![], vec![port(Protocol::Icmp, 8, 8)])]),
        None,
    );
    assert!(!bad.problems().is_empty());
    assert_eq!(says(&build(&[&bad]), Ingress, "1.1.1.1", ICMP, 0), 'a');
}

#[test]
fn sctp_is_its_own_protocol() {
    let p = policy(
        "p",
        Some(vec![rule(vec![], vec![port(Protocol::Sctp, 36412, 36412)])]),
        None,
    );
    let c = build(&[&p]);
    assert_eq!(says(&c, Ingress, "1.1.1.1", SCTP, 36412), 'a');
    assert_eq!(says(&c, Ingress, "1.1.1.1", TCP, 36412), 'd');
    assert_eq!(says(&c, Ingress, "1.1.1.1", UDP, 36412), 'd');
    assert_eq!(says(&c, Ingress, "1.1.1.1", SCTP, 36413), 'd');
}

/// A set peer: its pods' /32s and its wider prefixes; the set is the one `build` saw.
#[test]
fn sets_name_their_members() {
    let mut sets = Sets::new();
    let members = ["10.0.0.5/32", "10.0.0.9/32", "10.7.0.0/16"];
    sets.insert("default/app=db", AddressSet::new(members.map(pfx)));
    let p = policy(
        "default/db",
        Some(vec![rule(
            vec![set("default/app=db")],
            vec![port(Protocol::Tcp, 5432, 5432)],
        )]),
        Some(vec![rule(vec![set("default/app=db")], vec![])]),
    );
    let c = Compiled::build(&[&p], &sets);
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    assert_eq!(c.sets().collect::<Vec<_>>(), ["default/app=db"]);
    for (peer, want) in [
        ("10.0.0.5", 'a'),
        ("10.0.0.9", 'a'),
        ("10.7.200.1", 'a'),
        ("10.0.0.6", 'd'),
        ("10.8.0.1", 'd'),
    ] {
        assert_eq!(says(&c, Ingress, peer, TCP, 5432), want, "{peer}");
        assert_eq!(says(&c, Egress, peer, UDP, 1), want, "{peer}");
    }
    // The set changes: this compilation keeps what it was built with; a rebuild sees it.
    sets.insert("default/app=db", AddressSet::new([pfx("10.0.0.6/32")]));
    assert_eq!(says(&c, Ingress, "10.0.0.6", TCP, 5432), 'd');
    let c = Compiled::build(&[&p], &sets);
    assert_eq!(says(&c, Ingress, "10.0.0.6", TCP, 5432), 'a');
    assert_eq!(says(&c, Ingress, "10.0.0.5", TCP, 5432), 'd');
}

/// A missing set matches nothing, is warned of, and leaves the rule's other peers working;
/// a rule whose only peer is missing does not become "any peer".
#[test]
fn a_missing_set_matches_nothing() {
    let p = policy(
        "default/p",
        Some(vec![
            rule(vec![set("gone")], vec![]),
            rule(vec![set("gone"), cidr("10.0.0.0/24", &[])], vec![]),
        ]),
        None,
    );
    let c = build(&[&p]);
    assert_eq!(says(&c, Ingress, "10.0.0.1", TCP, 1), 'a');
    assert_eq!(says(&c, Ingress, "10.0.1.1", TCP, 1), 'd');
    let w = c.warnings().join("\n");
    assert!(
        w.contains("default/p ingress rule 0: address set \"gone\" does not exist"),
        "{w}"
    );
    assert!(w.contains("default/p ingress rule 1"), "{w}");
    assert_eq!(c.sets().collect::<Vec<_>>(), ["gone"]);
}

/// The rule list's names, the counters' names and their values.
#[test]
fn counters_count_hits_and_denials() {
    let p = policy(
        "default/web",
        Some(vec![
            rule(vec![cidr("10.0.0.0/8", &[])], vec![]),
            rule(vec![], vec![port(Protocol::Tcp, 80, 80)]),
        ]),
        Some(vec![]),
    );
    let c = build(&[&p]);
    for _ in 0..3 {
        c.evaluate(Ingress, a("10.1.1.1"), TCP, 80);
    }
    c.evaluate(Ingress, a("11.1.1.1"), TCP, 80);
    c.evaluate(Ingress, a("11.1.1.1"), TCP, 81);
    c.evaluate(Egress, a("11.1.1.1"), TCP, 81);
    c.evaluate(Egress, a("11.1.1.1"), TCP, 81);
    let got = c.counters();
    let want = [
        ("default/web ingress rule 0", 3),
        ("default/web ingress rule 1", 1),
        ("ingress denied", 1),
        ("egress denied", 2),
    ];
    let got: Vec<(&str, u64)> = got.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    assert_eq!(got, want);
    // probes() decides without counting.
    let (v, _) = c.probes(Ingress, a("10.1.1.1"), TCP, 80);
    assert!(v.allows() && c.counters()[0].1 == 3);
}

/// A rebuild keeps each rule's count by policy name, direction and index: a policy put in
/// front shifts every index without losing a count, a dropped rule's count goes, a new one
/// starts at zero.
#[test]
fn counters_carry_over_a_rebuild() {
    let web = policy(
        "default/web",
        Some(vec![
            rule(vec![cidr("10.0.0.0/8", &[])], vec![]),
            rule(vec![cidr("11.0.0.0/8", &[])], vec![]),
        ]),
        None,
    );
    let old = build(&[&web]);
    for (peer, n) in [("10.0.0.1", 4), ("11.0.0.1", 2), ("12.0.0.1", 5)] {
        for _ in 0..n {
            old.evaluate(Ingress, a(peer), TCP, 80);
        }
    }
    let mut web2 = web.clone();
    web2.ingress.as_mut().unwrap().truncate(1);
    web2.egress = Some(vec![Rule::default()]);
    let dns = policy("kube-system/dns", Some(vec![Rule::default()]), None);
    let new = Compiled::build_with_counters(&[&dns, &web2], &Sets::new(), Some(&old));
    let got = new.counters();
    let got: Vec<(&str, u64)> = got.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    assert_eq!(
        got,
        [
            ("kube-system/dns ingress rule 0", 0),
            ("default/web ingress rule 0", 4),
            ("default/web egress rule 0", 0),
            ("ingress denied", 5),
            ("egress denied", 0),
        ]
    );
    // The new one counts on from there; the old one is left as it was.
    new.evaluate(Ingress, a("10.0.0.1"), TCP, 80);
    assert_eq!(new.counters()[0].1, 1, "dns allows everything, first");
    assert_eq!(old.counters()[0].1, 4);
    assert_eq!(
        Compiled::build_with_counters(&[&web], &Sets::new(), None).counters()[0].1,
        0
    );
}

/// The cost argument: a rule's set of 10,000 pods costs the same probes as one of 10, hit or
/// miss, allowed or denied (counted, not timed).
#[test]
fn big_sets_take_the_same_path_as_small_ones() {
    let pods =
        |n: u32| AddressSet::new((0..n).map(|i| Prefix::host(Ipv4Addr::from(0x0a80_0000 + i))));
    let rules: Vec<Rule> = (0..20)
        .map(|i| {
            rule(
                vec![set(&format!("s{i}"))],
                vec![port(Protocol::Tcp, 80, 80)],
            )
        })
        .collect();
    let p = policy("p", Some(rules), None);
    let (mut small, mut big) = (Sets::new(), Sets::new());
    for i in 0..20 {
        small.insert(format!("s{i}"), pods(10));
        big.insert(format!("s{i}"), pods(10_000));
    }
    let (cs, cb) = (Compiled::build(&[&p], &small), Compiled::build(&[&p], &big));
    // Members of both, of neither, and a port no rule takes.
    for (peer, dport) in [(0x0a80_0003, 80), (0x0a90_0000, 80), (0x0a80_0003, 81)] {
        let (vs, ps) = cs.probes(Ingress, peer, TCP, dport);
        let (vb, pb) = cb.probes(Ingress, peer, TCP, dport);
        assert_eq!(ps, pb, "{}", Ipv4Addr::from(peer));
        assert_eq!(vs.allows(), vb.allows());
        assert!(ps <= 20, "at most one probe per rule's set: {ps}");
    }
    assert!(cb.probes(Ingress, 0x0a80_0000 + 9_999, TCP, 80).0.allows());
}

#[test]
fn rule_names_are_for_logs() {
    let p = policy(
        "default/web-allow",
        Some(vec![Rule::default(); 3]),
        Some(vec![Rule::default()]),
    );
    let c = build(&[&p]);
    let names: Vec<String> = (0..4).map(|i| c.rule_name(crate::RuleRef(i))).collect();
    assert_eq!(
        names,
        [
            "default/web-allow ingress rule 0",
            "default/web-allow ingress rule 1",
            "default/web-allow ingress rule 2",
            "default/web-allow egress rule 0",
        ]
    );
    assert!(
        c.rule_name(crate::RuleRef(9))
            .contains("not of this compilation")
    );
}

/// Workers share one compilation through a snapshot.
#[test]
fn a_compilation_is_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Compiled>();
    shared::<Sets>();
}
