//! Both roles of our own memif against each other, in one process.

mod common;

use std::time::{Duration, Instant};

use buffer::Pool;
use common::*;
use memif::{Client, Event, InterfaceConfig, Listener, PrimaryQueues, SecondaryQueues, SocketPath};

fn transfer_both_ways(pcfg: InterfaceConfig, scfg: InterfaceConfig, sizes: &[usize], count: u32) {
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let mut l = Listener::bind(&path, vec![pcfg]).unwrap();
    let mut c = Client::new(&path, vec![scfg]).unwrap();
    let (mut p, mut s) = connect(&mut l, &mut c);
    let mut pool = pool();
    let nq = s.tx.len();
    assert_eq!(p.rx.len(), nq);

    // secondary -> primary
    let mut sent = 0u32;
    let mut got = 0u32;
    let mut out = Vec::new();
    let mut bytes = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got < count {
        assert!(Instant::now() < deadline, "stalled at {got}/{count}");
        for q in 0..nq {
            let lens: Vec<u32> = (sent..count.min(sent + 32))
                .map(|i| sizes[i as usize % sizes.len()] as u32)
                .collect();
            let base = sent;
            let n = s.tx[q]
                .send_with(&lens, |i, w| w.write(0, &frame(base + i as u32, w.len())))
                .unwrap();
            sent += n as u32;
        }
        for q in 0..nq {
            out.clear();
            p.rx[q].recv(&mut pool, &mut out, 256).unwrap();
            for &h in &out {
                bytes.clear();
                pool.read_chain(h, &mut bytes);
                // Per-queue order is what memif guarantees; with one queue that is global order.
                if nq == 1 {
                    assert_eq!(
                        bytes,
                        frame(got, sizes[got as usize % sizes.len()]),
                        "frame {got}"
                    );
                } else {
                    assert!(sizes.contains(&bytes.len()));
                }
                got += 1;
            }
            pool.free_bulk(&out);
        }
    }
    assert_eq!(
        p.rx.iter().map(|q| q.stats().packets).sum::<u64>(),
        u64::from(count)
    );

    // primary -> secondary
    let mut sent = 0u32;
    let mut got = 0u32;
    let mut fail = None;
    while got < count {
        assert!(Instant::now() < deadline, "stalled at {got}/{count}");
        for q in 0..nq {
            let hs: Vec<u32> = (sent..count.min(sent + 32))
                .map(|i| {
                    pool.from_bytes(&frame(i, sizes[i as usize % sizes.len()]))
                        .unwrap()
                })
                .collect();
            let n = p.tx[q].send(&pool, &hs).unwrap();
            pool.free_bulk(&hs);
            sent += n as u32;
        }
        for q in 0..nq {
            s.rx[q]
                .recv_with(256, |pkt| {
                    let want = frame(got, sizes[got as usize % sizes.len()]);
                    // Every buffer here holds 62 bytes: `head` has them whenever the
                    // frame does, chained or not.
                    let head = pkt.head::<62>();
                    let head_ok = head.as_ref().map(|h| &h[..]) == want.get(..62);
                    if nq == 1 && (pkt.to_vec() != want || !head_ok) && fail.is_none() {
                        fail = Some(got);
                    }
                    got += 1;
                })
                .unwrap();
        }
    }
    assert_eq!(fail, None, "first corrupt frame primary->secondary");
    assert_eq!(pool.available(), pool.capacity(), "local buffers leaked");
}

#[test]
fn frames_of_every_size_both_ways() {
    transfer_both_ways(
        cfg(0),
        cfg(0),
        &[60, 64, 128, 1500, 2048, 2049, 4000, 9000],
        20_000,
    );
}

#[test]
fn small_rings_and_odd_buffer_sizes() {
    // 4 slots of 1000 bytes: a 3001-byte frame takes the whole ring.
    let s = InterfaceConfig {
        log2_ring_size: 2,
        buffer_size: 1000,
        ..cfg(3)
    };
    transfer_both_ways(cfg(3), s, &[64, 999, 1000, 1001, 3001, 4000], 2000);
}

#[test]
fn frames_larger_than_the_whole_ring_are_dropped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let s = InterfaceConfig {
        log2_ring_size: 1,
        buffer_size: 1000,
        ..cfg(0)
    };
    let mut l = Listener::bind(&path, vec![cfg(0)]).unwrap();
    let mut c = Client::new(&path, vec![s]).unwrap();
    let (mut p, mut s) = connect(&mut l, &mut c);
    assert_eq!(
        s.tx[0]
            .send_with(&[2001, 64], |_, w| w.write(0, &[7; 64]))
            .unwrap(),
        2
    );
    assert_eq!(
        (s.tx[0].stats().drop_oversize, s.tx[0].stats().packets),
        (1, 1)
    );
    let mut pool = pool();
    let big = pool.from_bytes(&[1; 2001]).unwrap();
    let small = pool.from_bytes(&[2; 64]).unwrap();
    assert_eq!(p.tx[0].send(&pool, &[big, small]).unwrap(), 2);
    assert_eq!(
        (p.tx[0].stats().drop_oversize, p.tx[0].stats().packets),
        (1, 1)
    );
    let mut got = Vec::new();
    s.rx[0].recv_with(8, |pkt| got.push(pkt.to_vec())).unwrap();
    assert_eq!(got, vec![vec![2; 64]]);
}

#[test]
fn largest_rings_and_128_byte_layout() {
    let layout = memif::RingLayout::CacheLine128;
    let p = InterfaceConfig {
        log2_ring_size: 14,
        layout,
        ..cfg(1)
    };
    let s = InterfaceConfig {
        log2_ring_size: 14,
        layout,
        ..cfg(1)
    };
    transfer_both_ways(p, s, &[64, 9000], 40_000);
}

#[test]
fn several_queue_pairs() {
    let p = InterfaceConfig {
        s2m_rings: 4,
        m2s_rings: 4,
        ..cfg(7)
    };
    let s = InterfaceConfig {
        s2m_rings: 3,
        m2s_rings: 3,
        ..cfg(7)
    };
    transfer_both_ways(p, s, &[64, 1500], 10_000);
}

#[test]
fn secondary_takes_the_primarys_limits() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let p = InterfaceConfig {
        s2m_rings: 2,
        m2s_rings: 1,
        log2_ring_size: 8,
        ..cfg(0)
    };
    let s = InterfaceConfig {
        s2m_rings: 4,
        m2s_rings: 4,
        log2_ring_size: 12,
        ..cfg(0)
    };
    let mut l = Listener::bind(&path, vec![p]).unwrap();
    let mut c = Client::new(&path, vec![s]).unwrap();
    let (pq, sq) = connect(&mut l, &mut c);
    assert_eq!(
        (pq.rx.len(), pq.tx.len(), sq.tx.len(), sq.rx.len()),
        (2, 1, 2, 1)
    );
    assert_eq!(sq.tx[0].ring_size(), 256);
}

#[test]
fn abstract_socket_and_many_interfaces_on_one_socket() {
    let name = format!("@veclane-test-{}", std::process::id());
    let path = SocketPath::parse(&name);
    let mut l = Listener::bind(&path, vec![cfg(1), cfg(2)]).unwrap();
    let mut c1 = Client::new(&path, vec![cfg(2)]).unwrap();
    let mut c2 = Client::new(&path, vec![cfg(1)]).unwrap();
    let (_p1, _s1) = connect(&mut l, &mut c1);
    let (_p2, _s2) = connect(&mut l, &mut c2);
    assert!(l.interfaces().iter().all(|i| i.connected));
}

#[test]
fn secret_and_mode_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let p = InterfaceConfig {
        secret: Some("open sesame".into()),
        ..cfg(0)
    };
    let mut l = Listener::bind(&path, vec![p]).unwrap();
    for (s, want) in [
        (
            InterfaceConfig {
                secret: None,
                ..cfg(0)
            },
            "secret required",
        ),
        (
            InterfaceConfig {
                secret: Some("open barley".into()),
                ..cfg(0)
            },
            "incorrect secret",
        ),
        (
            InterfaceConfig {
                secret: Some("open sesame".into()),
                mode: memif::Mode::Ip,
                ..cfg(0)
            },
            "mode mismatch",
        ),
        (
            InterfaceConfig {
                secret: Some("open sesame".into()),
                ..cfg(9)
            },
            "unmatched interface id 9",
        ),
    ] {
        let mut c = Client::new(&path, vec![s]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            c.poll(Duration::from_millis(1)).unwrap();
            l.poll(Duration::from_millis(1)).unwrap();
            let st = &c.interfaces()[0];
            if let Some(r) = &st.last_disconnect_reason {
                assert_eq!(r, &format!("peer disconnected: {want}"));
                break;
            }
            assert!(Instant::now() < deadline);
        }
    }
    let mut c = Client::new(
        &path,
        vec![InterfaceConfig {
            secret: Some("open sesame".into()),
            ..cfg(0)
        }],
    )
    .unwrap();
    connect(&mut l, &mut c);
}

#[test]
fn secondary_reconnects_and_primary_keeps_listening() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let scfg = InterfaceConfig {
        reconnect_interval: Duration::from_millis(20),
        ..cfg(0)
    };
    let mut c = Client::new(&path, vec![scfg]).unwrap();
    // No primary yet: attempts fail with a reason and no event.
    c.poll(Duration::from_millis(30)).unwrap();
    assert!(c.last_connect_error(0).is_some());

    let mut pool = pool();
    for round in 0..3 {
        let mut l = Listener::bind(&path, vec![cfg(0)]).unwrap();
        for _ in 0..2 {
            let (mut p, mut s) = connect(&mut l, &mut c);
            s.tx[0]
                .send_with(&[100], |_, w| w.write(0, &frame(round, 100)))
                .unwrap();
            let mut out = Vec::new();
            p.rx[0].recv(&mut pool, &mut out, 8).unwrap();
            assert_eq!(out.len(), 1);
            pool.free_bulk(&out);
            // The secondary side drops its queues and the client goes away and comes back:
            // simulate by dropping the client (DISCONNECT "interface deleted").
            drop((p, s));
            let scfg = InterfaceConfig {
                reconnect_interval: Duration::from_millis(20),
                ..cfg(0)
            };
            let old = std::mem::replace(&mut c, Client::new(&path, vec![scfg]).unwrap());
            drop(old);
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                l.poll(Duration::from_millis(1)).unwrap();
                if let Some(Event::Disconnected { reason, .. }) = l.next_event() {
                    assert_eq!(reason, "peer disconnected: interface deleted");
                    break;
                }
                assert!(Instant::now() < deadline);
            }
        }
        // Now the primary goes away: the secondary sees it and keeps retrying.
        let (p, s) = connect(&mut l, &mut c);
        drop(l);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            c.poll(Duration::from_millis(1)).unwrap();
            if let Some(Event::Disconnected { .. }) = c.next_event() {
                break;
            }
            assert!(Instant::now() < deadline);
        }
        assert!(!s.tx[0].is_up());
        assert!(matches!(s.tx[0].free_slots(), Err(memif::LinkDown)));
        drop((p, s));
    }
}

#[test]
fn interrupt_mode_wakes_the_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let mut l = Listener::bind(&path, vec![cfg(0)]).unwrap();
    let mut c = Client::new(&path, vec![cfg(0)]).unwrap();
    let (mut p, mut s) = connect(&mut l, &mut c);
    // Polling mode: the producer sees MASK_INT and does not signal.
    s.tx[0]
        .send_with(&[64], |_, w| w.write(0, &[1; 64]))
        .unwrap();
    assert_eq!(s.tx[0].stats().interrupts_sent, 0);
    let mut pool = pool();
    let mut out = Vec::new();
    p.rx[0].recv(&mut pool, &mut out, 8).unwrap();
    // Interrupt mode: an idle wait times out, a send wakes it.
    p.rx[0].set_interrupt_mode(true);
    assert!(!p.rx[0].wait(10));
    let rx = std::thread::spawn(move || {
        let woke = p.rx[0].wait(5000);
        (woke, p)
    });
    std::thread::sleep(Duration::from_millis(50));
    s.tx[0]
        .send_with(&[64], |_, w| w.write(0, &[2; 64]))
        .unwrap();
    let (woke, _p) = rx.join().unwrap();
    assert!(woke);
    assert_eq!(s.tx[0].stats().interrupts_sent, 1);
}

/// Steps `l` and `c` until the listener (`primary_side`) or the client reports interface `id`
/// disconnected; the reason.
fn await_disconnect(l: &mut Listener, c: &mut Client, primary_side: bool, id: u32) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        assert!(Instant::now() < deadline, "no disconnect of {id}");
        c.poll(Duration::from_millis(1)).unwrap();
        l.poll(Duration::from_millis(1)).unwrap();
        let e = if primary_side {
            l.next_event().map(|e| e.map(|_| ()))
        } else {
            c.next_event().map(|e| e.map(|_| ()))
        };
        if let Some(Event::Disconnected { id: i, reason }) = e {
            assert_eq!(i, id);
            return reason;
        }
    }
}

#[test]
fn removing_an_interface_disconnects_only_it_in_either_role() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let mut l = Listener::bind(&path, vec![cfg(0), cfg(1)]).unwrap();
    // One client per interface, so that each connection is known to be which.
    let mut a = Client::new(&path, vec![cfg(0)]).unwrap();
    let mut b = Client::new(&path, vec![cfg(1)]).unwrap();
    let (p0, mut s0) = connect(&mut l, &mut a);
    let (p1, s1) = connect(&mut l, &mut b);
    let mut pool = pool();
    let pass =
        |p: &mut memif::PrimaryQueues, s: &mut memif::SecondaryQueues, pool: &mut buffer::Pool| {
            assert_eq!(
                s.tx[0]
                    .send_with(&[64], |_, w| w.write(0, &frame(9, 64)))
                    .unwrap(),
                1
            );
            let mut out = Vec::new();
            p.rx[0].recv(pool, &mut out, 8).unwrap();
            assert_eq!(out.len(), 1);
            pool.free_bulk(&out);
        };
    let mut p0 = p0;

    // The primary stops serving id 1: its peer hears "interface deleted", id 0 carries on, and
    // the listener reports nothing of its own doing.
    assert!(l.remove_interface(1));
    assert!(!l.remove_interface(1), "gone already");
    assert_eq!(l.interfaces().len(), 1);
    assert_eq!(
        await_disconnect(&mut l, &mut b, false, 1),
        "peer disconnected: interface deleted"
    );
    assert!(!p1.rx[0].is_up() && !s1.tx[0].is_up());
    pass(&mut p0, &mut s0, &mut pool);
    // b keeps retrying id 1 and is refused each time; a's connection does not notice.
    for _ in 0..20 {
        b.poll(Duration::from_millis(5)).unwrap();
        l.poll(Duration::from_millis(1)).unwrap();
        assert!(l.next_event().is_none());
    }
    assert!(b.interfaces()[0].connects == 1);
    pass(&mut p0, &mut s0, &mut pool);

    // The secondary drops id 0: the primary hears it, and nothing reconnects.
    assert!(a.remove_interface(0));
    assert!(!a.remove_interface(0));
    assert!(a.is_empty());
    assert_eq!(
        await_disconnect(&mut l, &mut a, true, 0),
        "peer disconnected: interface deleted"
    );
    assert!(!p0.rx[0].is_up() && !s0.tx[0].is_up());
    for _ in 0..10 {
        a.poll(Duration::from_millis(5)).unwrap();
        l.poll(Duration::from_millis(1)).unwrap();
        assert!(
            l.next_event().is_none(),
            "a removed interface does not reconnect"
        );
    }
    assert!(l.remove_interface(0));
    assert!(l.is_empty());
    drop((p1, s1));
}

/// The primary knows when the secondary has taken every frame it placed (a sender that leaves
/// before then discards frames still in the ring): what it placed is in flight until the
/// secondary reads it and posts the buffers again.
#[test]
fn the_primary_sees_its_frames_taken() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let mut l = Listener::bind(&path, vec![cfg(0)]).unwrap();
    let mut c = Client::new(&path, vec![cfg(0)]).unwrap();
    let (mut p, mut s) = connect(&mut l, &mut c);
    assert_eq!(p.tx[0].in_flight().unwrap(), 0);
    let mut pool = pool();
    let frames: Vec<u32> = (0..5)
        .map(|i| pool.from_bytes(&frame(i, 100)).unwrap())
        .collect();
    assert_eq!(p.tx[0].send(&pool, &frames).unwrap(), 5);
    assert_eq!(p.tx[0].in_flight().unwrap(), 5);
    let mut got = 0;
    s.rx[0].recv_with(3, |_| got += 1).unwrap();
    assert_eq!(got, 3);
    assert_eq!(
        p.tx[0].in_flight().unwrap(),
        2,
        "three read and posted again"
    );
    s.rx[0].recv_with(8, |_| got += 1).unwrap();
    assert_eq!((got, p.tx[0].in_flight().unwrap()), (5, 0));
}

/// An output node's frame may mix interfaces: `send_run` places the run at its front (the
/// packets for one interface, chains among them) and stops at the first packet for another,
/// saying how long the run was, how much of it found room and whether it saw only single
/// buffers.
#[test]
fn a_run_ends_at_the_first_packet_for_another_interface() {
    let dir = tempfile::tempdir().unwrap();
    let small = InterfaceConfig {
        log2_ring_size: 3,
        ..cfg(0)
    };
    let (_l, _c, mut p, mut s) = connected(&dir, small);
    let mut pool = pool();
    let mut sent = Vec::new();
    let mut pkt = |pool: &mut buffer::Pool, tx_if: u32, len: usize| {
        let b = pool.from_bytes(&frame(sent.len() as u32, len)).unwrap();
        pool.meta_mut(b).tx_if = tx_if;
        sent.push(frame(sent.len() as u32, len));
        b
    };
    // A 3000-byte frame is a chain of two local buffers and takes two of the peer's.
    let frames = [
        pkt(&mut pool, 5, 64),
        pkt(&mut pool, 5, 3000),
        pkt(&mut pool, 5, 100),
        pkt(&mut pool, 6, 64),
        pkt(&mut pool, 5, 64),
    ];
    assert!(pool.meta(frames[1]).next != buffer::NONE);
    let peers = memif::queue::Peers::default();
    let tx = &mut p.tx[0];
    let run = |tx: &mut memif::PrimaryTx, pool: &buffer::Pool, pkts: &[u32], tx_if| {
        tx.send_run(pool, pkts, &peers, None, tx_if).unwrap()
    };
    let r = run(tx, &pool, &frames, 5);
    assert_eq!((r.len, r.sent, r.single), (3, 3, false), "{r:?}");
    let r = run(tx, &pool, &frames[3..], 6);
    assert_eq!((r.len, r.sent, r.single), (1, 1, true), "{r:?}");
    let r = run(tx, &pool, &frames[4..], 5);
    assert_eq!((r.len, r.sent, r.single), (1, 1, true), "{r:?}");
    // Six of the eight posted buffers are used: a run of five single buffers finds room for
    // two; the run is still all five.
    let more: Vec<u32> = (0..5).map(|_| pkt(&mut pool, 5, 64)).collect();
    let r = run(tx, &pool, &more, 5);
    assert_eq!((r.len, r.sent), (5, 2), "{r:?}");
    assert_eq!(tx.stats().tx_no_room, 3);
    let mut got = Vec::new();
    s.rx[0].recv_with(16, |f| got.push(f.to_vec())).unwrap();
    assert_eq!(got.len(), 7);
    assert_eq!(got, sent[..7].to_vec());
    pool.free_bulk(&frames);
    pool.free_bulk(&more);
    assert_eq!(pool.available(), pool.capacity());
}

/// A pair on rings of eight 2 KiB slots, as the tests of a generator's sends use.
fn eight_slots(dir: &tempfile::TempDir) -> (Listener, Client, PrimaryQueues, SecondaryQueues) {
    let small = InterfaceConfig {
        log2_ring_size: 3,
        buffer_size: 2048,
        ..cfg(0)
    };
    connected(dir, small)
}

/// Every frame waiting on `p`, each read whole out of the pool.
fn drain_frames(p: &mut memif::PrimaryRx, pool: &mut Pool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    p.recv(pool, &mut out, 64).unwrap();
    let got = out
        .iter()
        .map(|&h| {
            let mut b = Vec::new();
            pool.read_chain(h, &mut b);
            b
        })
        .collect();
    pool.free_bulk(&out);
    got
}

/// A generator's frames of one size: `send_uniform` places as many as the ring has room for
/// (room checked once), counts the rest as it counts any refusal, and hands frames that need
/// a chain to the general path; the primary reads every frame it placed intact.
#[test]
fn frames_of_one_size_go_out_as_far_as_there_is_room() {
    let dir = tempfile::tempdir().unwrap();
    let (_l, _c, mut p, mut s) = eight_slots(&dir);
    let mut pool = pool();
    let mut sent = Vec::new();
    let send = |s: &mut memif::SecondaryTx, n: usize, len: usize, sent: &mut Vec<Vec<u8>>| {
        let base = sent.len() as u32;
        let k = s
            .send_uniform(n, len as u32, |i, w| {
                assert_eq!(w.len(), len);
                w.write(0, &frame(base + i as u32, len));
            })
            .unwrap();
        sent.extend((0..k as u32).map(|i| frame(base + i, len)));
        k
    };
    let tx = &mut s.tx[0];
    assert_eq!(send(tx, 5, 100, &mut sent), 5);
    // Three of the eight slots left: three go, two are refused once.
    assert_eq!(send(tx, 5, 100, &mut sent), 3);
    assert_eq!((tx.stats().tx_no_room, tx.stats().ring_full), (2, 1));
    assert_eq!(send(tx, 4, 64, &mut sent), 0, "a full ring");
    assert_eq!(tx.stats().packets, 8);
    let mut got = drain_frames(&mut p.rx[0], &mut pool);
    // 3000 bytes need two 2048-byte buffers: chains of two slots, six of the eight.
    assert_eq!(send(&mut s.tx[0], 3, 3000, &mut sent), 3);
    assert_eq!(send(&mut s.tx[0], 0, 64, &mut sent), 0);
    got.extend(drain_frames(&mut p.rx[0], &mut pool));
    assert_eq!(got.len(), 11);
    assert_eq!(got, sent);
}

/// A generator's frames once every buffer holds one: `send_stamped` writes only the stamp at
/// its offset into each slot's buffer, leaving the rest as it was, places as many as there is
/// room for, and takes `send_uniform`'s way for a stamp past the frame or a frame needing a
/// chain (where the rest of the frame is whatever the buffers held).
#[test]
fn stamped_frames_change_only_their_stamp() {
    let dir = tempfile::tempdir().unwrap();
    let (_l, _c, mut p, mut s) = eight_slots(&dir);
    let mut pool = pool();
    let mut drain = |p: &mut memif::PrimaryRx| drain_frames(p, &mut pool);
    // Every slot's buffer holds frame i's bytes first.
    let tx = &mut s.tx[0];
    let k = tx
        .send_uniform(8, 100, |i, w| w.write(0, &frame(i as u32, 100)))
        .unwrap();
    assert_eq!(k, 8);
    assert_eq!(drain(&mut p.rx[0]).len(), 8);
    // Five stamps at offset 42, then four more into the three slots left.
    let stamp = |i: usize| [0xa0 + i as u8; 4];
    assert_eq!(tx.send_stamped(5, 100, 42, stamp).unwrap(), 5);
    assert_eq!(tx.send_stamped(4, 100, 42, |i| stamp(5 + i)).unwrap(), 3);
    assert_eq!((tx.stats().tx_no_room, tx.stats().ring_full), (1, 1));
    assert_eq!(tx.stats().packets, 16);
    let got = drain(&mut p.rx[0]);
    assert_eq!(got.len(), 8);
    for (i, g) in got.iter().enumerate() {
        let mut want = frame(i as u32, 100);
        want[42..46].copy_from_slice(&stamp(i));
        assert_eq!(*g, want, "frame {i}");
    }
    // A stamp reaching past the frame: send_uniform's way, the bytes past the end dropped.
    assert_eq!(tx.send_stamped(1, 44, 42, |_| [7u8; 4]).unwrap(), 1);
    let got = drain(&mut p.rx[0]);
    let mut want = frame(0, 100)[..44].to_vec();
    want[42..44].copy_from_slice(&[7, 7]);
    assert_eq!(got, vec![want]);
    // A frame over two buffers: a chain of two slots, the stamp in the first.
    assert_eq!(tx.send_stamped(2, 3000, 42, |_| [9u8; 4]).unwrap(), 2);
    let got = drain(&mut p.rx[0]);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|g| g.len() == 3000 && g[42..46] == [9; 4]));
}
