//! Network policy through the whole graph: a flow an interface's ingress policy allows
//! passes both ways (its replies by its session), one it denies is dropped with every later
//! packet of it, and a policy change judges established flows again (those the flow cache
//! forwarded too).

mod graph_common;

use std::sync::Arc;

use graph_common::*;
use nodes::{Policies, Services};
use policy::{Compiled, Peer, Policy, PortMatch, PortRange, Protocol, Rule, Sets};

const CLIENT: [u8; 4] = [10, 0, 0, 7];
const SERVER: [u8; 4] = [192, 0, 2, 5];

fn tcp(dst_mac: [u8; 6], src: ([u8; 4], u16), dst: ([u8; 4], u16), syn: bool) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2(HOST_MAC, dst_mac)
        .ipv4(src.0, dst.0, 64)
        .tcp(src.1, dst.1, 1, 4096);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut v = Vec::new();
    b.write(&mut v, b"x").unwrap();
    v
}

/// if1 (towards the servers) takes from 10.0.0.0/24 only TCP to `port`; VRF 0 keeps sessions.
fn publish(s: &Setup, port: u16, epoch: u32) {
    let p = Policy {
        name: "default/web".into(),
        ingress: Some(vec![Rule {
            peers: vec![Peer::Cidr {
                prefix: "10.0.0.0/24".parse().unwrap(),
                except: vec![],
            }],
            ports: vec![PortMatch {
                protocol: Protocol::Tcp,
                port: Some(PortRange::one(port)),
            }],
        }]),
        egress: None,
    };
    let prev = s.policies.load_full();
    let c = Compiled::build_with_counters(
        &[&p],
        &Sets::new(),
        prev.by_if.get(1).and_then(|c| c.as_deref()),
    );
    s.policies.store(Arc::new(Policies {
        by_if: vec![None, Some(Arc::new(c))],
        epoch,
    }));
    let v = Services {
        stateful: vec![true],
        ..Services::default()
    };
    s.services.store(Arc::new(v));
}

fn send(s: &mut Setup, frames: Vec<(u32, Vec<u8>)>) -> usize {
    s.output.lock().unwrap().clear();
    s.input.lock().unwrap().extend(frames);
    s.rt.dispatch(&mut s.pool);
    assert_eq!(s.pool.available(), s.pool.capacity(), "a buffer leaked");
    s.output.lock().unwrap().len()
}

fn errors(s: &Setup, reason: &str) -> u64 {
    s.rt.errors()
        .iter()
        .find(|e| e.0 == "ip4-session" && e.1 == reason)
        .map_or(0, |e| e.2)
}

#[test]
fn allowed_flows_pass_both_ways_and_denied_ones_stay_denied() {
    let s = &mut setup();
    publish(s, 80, 2);
    // Allowed: out, and its reply back.
    assert_eq!(
        send(
            s,
            vec![(0, tcp(MAC[0], (CLIENT, 1000), (SERVER, 80), true))]
        ),
        1
    );
    assert_eq!(
        send(
            s,
            vec![(1, tcp(MAC[1], (SERVER, 80), (CLIENT, 1000), false))]
        ),
        1
    );
    // Denied: neither the SYN nor a reply an attacker forges for it passes.
    assert_eq!(
        send(
            s,
            vec![(0, tcp(MAC[0], (CLIENT, 1001), (SERVER, 81), true))]
        ),
        0
    );
    assert_eq!(errors(s, "new flow denied by policy"), 1);
    assert_eq!(
        send(
            s,
            vec![(1, tcp(MAC[1], (SERVER, 81), (CLIENT, 1001), false))]
        ),
        0
    );
    assert_eq!(errors(s, "packet of a denied flow"), 1);
    // A TCP segment of no session is judged alone and starts none.
    assert_eq!(
        send(
            s,
            vec![(0, tcp(MAC[0], (CLIENT, 1002), (SERVER, 81), false))]
        ),
        0
    );
    assert_eq!(errors(s, "new flow denied by policy"), 2);
    // The rule's counter saw the allowed flow.
    let c = s.policies.load_full();
    let counters = c.by_if[1].as_ref().unwrap().counters();
    assert!(
        counters.contains(&("default/web ingress rule 0".into(), 1)),
        "{counters:?}"
    );

    // The handshake's last ACK, then a segment the flow cache forwards (from
    // ethernet-input, without ip4-session), as it does every later one until a change.
    let ack = || vec![(0, tcp(MAC[0], (CLIENT, 1000), (SERVER, 80), false))];
    assert_eq!((send(s, ack()), send(s, ack())), (1, 1));
    let seen = vectors(&s.rt, "ip4-session");
    assert_eq!(send(s, ack()), 1);
    assert_eq!(vectors(&s.rt, "ip4-session"), seen, "from the flow cache");

    // Now port 81 only: the established flow on 80 is judged again and dropped; a new one
    // on 81 passes.
    publish(s, 81, 3);
    assert_eq!(
        send(
            s,
            vec![(0, tcp(MAC[0], (CLIENT, 1000), (SERVER, 80), false))]
        ),
        0
    );
    assert_eq!(errors(s, "established flow denied by a policy change"), 1);
    assert_eq!(
        send(
            s,
            vec![(1, tcp(MAC[1], (SERVER, 80), (CLIENT, 1000), false))]
        ),
        0
    );
    assert_eq!(
        send(
            s,
            vec![(0, tcp(MAC[0], (CLIENT, 1003), (SERVER, 81), true))]
        ),
        1
    );
}

/// Without policies on either end, a VRF that keeps sessions keeps none for the flow.
#[test]
fn flows_no_policy_concerns_keep_no_session() {
    let s = &mut setup();
    publish(s, 80, 2);
    s.policies.store(Arc::new(Policies::default()));
    assert_eq!(
        send(
            s,
            vec![(0, tcp(MAC[0], (CLIENT, 1000), (SERVER, 99), true))]
        ),
        1
    );
    assert_eq!(s.sessions.table.count_live(), 0);
}
