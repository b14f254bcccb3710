//! The table's tests: lookups, the fast path's reads and copies, kills and verdicts.

use super::*;
use crate::record::{LAST_SEEN_GRAIN, tcp_flags};

/// A table of four sessions and its one worker's owner.
fn four_sessions() -> (Arc<Table>, Vec<Owner>) {
    Table::new(Config {
        max_sessions: 4,
        workers: 1,
        timeouts: Timeouts::default(),
    })
    .unwrap()
}

#[test]
fn entry_values_round_trip() {
    for (id, g, d) in [
        (0, 0, Dir::Forward),
        (0x7fff_ffff, 0xffff_fffe, Dir::Reverse),
        (12345, 2, Dir::Reverse),
    ] {
        let v = entry(id, g, d);
        assert_ne!(v, 0, "a used entry is never the empty value");
        assert_eq!(entry_parts(v), (id, g, d));
    }
}

#[test]
fn layout_is_two_lines_a_bucket_and_one_a_record() {
    assert_eq!(size_of::<Bucket>(), 128);
    assert_eq!(align_of::<Bucket>(), 64);
    assert_eq!(size_of::<Record>(), 64);
    assert_eq!(align_of::<Record>(), 64);
}

#[test]
fn config_errors_name_the_field() {
    let c = Config {
        max_sessions: 0,
        workers: 1,
        timeouts: Timeouts::default(),
    };
    assert_eq!(Table::new(c).err(), Some(ConfigError::Sessions(0)));
    assert_eq!(
        Table::new(Config { workers: 0, ..c }).err(),
        Some(ConfigError::NoWorkers)
    );
    let long = Timeouts {
        icmp: 1 << 31,
        ..Timeouts::default()
    };
    assert_eq!(
        Table::new(Config {
            max_sessions: 1,
            timeouts: long,
            ..c
        })
        .err(),
        Some(ConfigError::Timeout(1 << 31))
    );
}

/// The fast path's view: each direction's rewrite and deltas as the session says, the
/// VRF it is routed in, the packet observed; a killed session observed no more.
#[test]
fn forwarding_agrees_with_the_session_both_ways() {
    let (t, mut owners) = four_sessions();
    let key = Key::new(3, crate::PROTO_TCP, 0x0a00_0001, 0x0a60_0001, 40_000, 80);
    let new = crate::NewSession {
        xlate: crate::Translation {
            src: 0xc000_0201,
            dst: 0x0a01_0005,
            dport: 8080,
            vrf: 5,
            ..crate::Translation::identity(&key)
        },
        service: 7,
        backend: 2,
        ..crate::NewSession::plain(key)
    };
    let h = owners[0].create(&new, 1000).unwrap();
    let reply = new.reverse_key();
    assert_eq!(t.forwarding(reply.reverse().words(), 0, 1000), None);
    for (k, dir, vrf) in [(key, Dir::Forward, 5), (reply, Dir::Reverse, 3)] {
        let s = t.session(h).unwrap();
        let f = t.forwarding(k.words(), tcp_flags::ACK, 1000).unwrap();
        let (src, dst, sport, dport) = s.rewrite(dir);
        assert_eq!(f.addrs, u64::from(src) << 32 | u64::from(dst), "{dir:?}");
        assert_eq!(
            f.ports,
            u32::from(sport) << 16 | u32::from(dport),
            "{dir:?}"
        );
        assert_eq!((f.deltas, f.vrf), (s.deltas(dir), vrf), "{dir:?}");
        assert!(f.translated && !f.killed());
    }
    // The reply was observed, then the client's ACK establishes it.
    assert!(t.session(h).unwrap().replied());
    t.forwarding(key.words(), tcp_flags::ACK, 1000);
    assert!(t.session(h).unwrap().established());
    t.forwarding(key.words(), tcp_flags::ACK, 1000 + LAST_SEEN_GRAIN);
    assert_eq!(t.session(h).unwrap().last_seen, 1000 + LAST_SEEN_GRAIN);
    // Killed: read as such, and a FIN no longer observed.
    assert_eq!(t.kill_backend(7, 2), 1);
    let f = t.forwarding(key.words(), tcp_flags::FIN, 2000).unwrap();
    assert!(f.killed());
    assert_eq!(t.session(h).unwrap().state(), crate::State::TcpEstablished);
}

/// A forwarding copy is steady when its packet changed nothing and no packet of its
/// direction without SYN, FIN or RST would: a UDP request before and after its reply, a
/// TCP connection once established; never a packet that moves the state on.
#[test]
fn steady_copies_are_those_no_plain_packet_changes() {
    let (t, mut owners) = four_sessions();
    let udp = Key::new(3, crate::PROTO_UDP, 0x0a00_0001, 0x0a60_0001, 5000, 53);
    owners[0].create(&crate::NewSession::plain(udp), 0).unwrap();
    let f = |k: &Key, flags| t.forwarding(k.words(), flags, 0).unwrap();
    assert!(f(&udp, 0).steady(0), "a request, unanswered");
    // The first reply moves the state on (replied); later ones do not.
    assert!(!f(&udp.reverse(), 0).steady(0));
    assert!(f(&udp.reverse(), 0).steady(0));
    // The next request establishes it; then requests change nothing.
    assert!(!f(&udp, 0).steady(0));
    assert!(f(&udp, 0).steady(0));
    let tcp = Key::new(3, crate::PROTO_TCP, 0x0a00_0001, 0x0a60_0001, 40_000, 80);
    owners[0].create(&crate::NewSession::plain(tcp), 0).unwrap();
    // A SYN sent again changes nothing (the cache forwards no SYN anyway).
    assert!(f(&tcp, tcp_flags::SYN).steady(tcp_flags::SYN));
    assert!(!f(&tcp.reverse(), tcp_flags::SYN | tcp_flags::ACK).steady(tcp_flags::ACK));
    assert!(
        !f(&tcp, tcp_flags::ACK).steady(tcp_flags::ACK),
        "the handshake's last"
    );
    assert!(f(&tcp, tcp_flags::ACK).steady(tcp_flags::ACK));
    assert!(f(&tcp.reverse(), tcp_flags::ACK).steady(tcp_flags::ACK));
    assert!(!f(&tcp, tcp_flags::FIN | tcp_flags::ACK).steady(tcp_flags::FIN));
}

#[test]
fn established_agrees_with_lookup_and_observe() {
    let (t, mut owners) = four_sessions();
    let key = Key::new(3, crate::PROTO_TCP, 0x0a00_0001, 0x0a60_0001, 40_000, 80);
    let new = crate::NewSession {
        xlate: crate::Translation {
            dst: 0x0a01_0005,
            dport: 8080,
            ..crate::Translation::identity(&key)
        },
        service: 7,
        backend: 2,
        owner_if: 4,
        ..crate::NewSession::plain(key)
    };
    let h = owners[0].create(&new, 1000).unwrap();
    let reply = new.reverse_key();
    assert_eq!(t.established(&reply.reverse(), 0, 1000), Seen::Miss);
    for (k, dir) in [(key, Dir::Forward), (reply, Dir::Reverse)] {
        let Lookup::Live(hit) = t.lookup(&k) else {
            panic!("{k:?} not live");
        };
        let read = t.established_of(h, dir);
        let Seen::Live(e) = t.established(&k, tcp_flags::ACK, 1000) else {
            panic!("{k:?} not established");
        };
        assert_eq!((e.handle, e.dir), (h, dir));
        assert_eq!(e.rewrite(dir), hit.session.rewrite(dir));
        assert_eq!(e.deltas(), hit.session.deltas(dir));
        assert_eq!((e.key(), e.owner_if()), (key, 4));
        assert!(e.translated());
        assert_eq!(read, Some(e), "the status as it was before the packet");
    }
    // The reply, then the client's ACK: observed as `observe` would.
    let s = t.session(h).unwrap();
    assert!(s.replied() && !s.established());
    t.established(&key, tcp_flags::ACK, 1000);
    assert!(t.session(h).unwrap().established());
    // last_seen moves only past the grain.
    t.established(&key, tcp_flags::ACK, 1000 + LAST_SEEN_GRAIN - 1);
    assert_eq!(t.session(h).unwrap().last_seen, 1000);
    t.established(&key, tcp_flags::ACK, 1000 + LAST_SEEN_GRAIN);
    assert_eq!(t.session(h).unwrap().last_seen, 1000 + LAST_SEEN_GRAIN);
    assert_eq!(t.kill(|_| true), 1);
    assert_eq!(t.established(&key, 0, 2000), Seen::Killed(h));
    assert_eq!(
        t.session(h).unwrap().last_seen,
        1000 + LAST_SEEN_GRAIN,
        "a killed session is not observed"
    );
}

/// A session whose translation moves it to another VRF (a NodePort from the underlay's
/// table to a network's backend): its replies are keyed in that VRF, and each direction
/// says which VRF it leaves in; the backend id survives its 16-bit packing.
#[test]
fn a_translation_to_another_vrf_keys_replies_there() {
    let (t, mut owners) = four_sessions();
    let key = Key::new(0, crate::PROTO_TCP, 0xc000_0209, 0xc000_0201, 40_000, 30080);
    let new = crate::NewSession {
        xlate: crate::Translation {
            src: 0x0a01_ff01,
            dst: 0x0a01_0005,
            dport: 8080,
            vrf: 5,
            ..crate::Translation::identity(&key)
        },
        service: 1,
        backend: crate::MAX_BACKEND_ID,
        ..crate::NewSession::plain(key)
    };
    let h = owners[0].create(&new, 1000).unwrap();
    let reply = new.reverse_key();
    assert_eq!(reply.vrf, 5);
    assert_eq!(t.lookup(&Key { vrf: 0, ..reply }), Lookup::Miss);
    for (k, dir, out) in [(key, Dir::Forward, 5), (reply, Dir::Reverse, 0)] {
        let Seen::Live(e) = t.established(&k, tcp_flags::ACK, 1000) else {
            panic!("{k:?} not established");
        };
        assert_eq!((e.dir, e.vrf_out()), (dir, out));
    }
    let s = t.session(h).unwrap();
    assert_eq!((s.backend, s.xlate.vrf), (crate::MAX_BACKEND_ID, 5));
    let plain = owners[0]
        .create(&crate::NewSession::plain(Key { sport: 1, ..key }), 1000)
        .unwrap();
    assert_eq!(t.session(plain).unwrap().backend, crate::NONE);
}
