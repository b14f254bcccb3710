//! A million sessions: the memory they take, and that the table really holds them all.

use session::{Config, Key, Lookup, NewSession, PROTO_UDP, Table, Timeouts, Translation};

const N: u32 = 1_000_000;

/// Flow `i`: distinct clients and ports, each source-NATed to a distinct port of one of 16
/// addresses (so the reverse keys are distinct too).
fn session(i: u32) -> NewSession {
    let k = Key::new(
        (i % 4) as u16,
        PROTO_UDP,
        0x0a00_0000 + i,
        0x6440_0001,
        1024 + (i % 60_000) as u16,
        53,
    );
    NewSession {
        xlate: Translation {
            src: 0xc0a8_0000 + i / 60_000,
            sport: 1024 + (i % 60_000) as u16,
            ..Translation::identity(&k)
        },
        service: i,
        backend: i % 60_000,
        ..NewSession::plain(k)
    }
}

#[test]
fn a_million_sessions_fit_in_256_mb_and_are_all_found() {
    let config = Config {
        max_sessions: N,
        workers: 2,
        timeouts: Timeouts::default(),
    };
    let (t, mut owners) = Table::new(config).unwrap();
    let bytes = t.memory_bytes();
    println!(
        "{} sessions: {bytes} bytes ({:.1} MiB, {:.0} B a session)",
        t.capacity(),
        bytes as f64 / f64::from(1 << 20),
        bytes as f64 / t.capacity() as f64
    );
    assert_eq!(t.capacity(), N as usize);
    assert!(bytes <= 256 << 20, "{bytes} bytes");

    // Both owners fill their halves. A key whose two buckets are full is refused (counted as
    // a collision) and the caller tries another flow, as an SNAT node tries another port.
    let mut next = 0u32;
    for (w, o) in owners.iter_mut().enumerate() {
        while o.live() < N / 2 {
            let s = session(next);
            next += 1;
            if let Err(e) = o.create(&s, 0) {
                assert_eq!(e, session::CreateError::Collision, "owner {w}, flow {next}");
            }
        }
        assert_eq!(
            o.counters().evicted_embryonic,
            0,
            "owner {w} evicted nothing"
        );
    }
    let collisions: u64 = owners.iter().map(|o| o.counters().insert_collisions).sum();
    println!(
        "{} flows tried for {N} sessions: {collisions} bucket collisions",
        next
    );
    assert!(collisions <= 100, "{collisions} collisions");
    assert_eq!(t.count_live(), N as usize);

    let mut found = 0;
    for i in 0..next {
        let s = session(i);
        match (t.lookup(&s.key), t.lookup(&s.reverse_key())) {
            (Lookup::Live(f), Lookup::Live(r)) => {
                assert_eq!((f.session.service, r.session.backend), (i, i % 60_000));
                assert_eq!(f.handle, r.handle);
                found += 1;
            }
            (Lookup::Miss, Lookup::Miss) => {}
            other => panic!("flow {i}: {other:?}"),
        }
    }
    assert_eq!(found, N);
}
