//! Hostile peers on a connected interface: descriptors, indices and chains that lie, a peer
//! rewriting what it posted, and a hostile primary against our secondary. Each is dropped and
//! counted or ends only that peer's connection; nothing panics. (Signalling through an
//! eventfd the peer controls: hostile_irq.rs.)

mod common;
mod evil;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use memif::msg::{FixedStr, Msg, VERSION};
use memif::ring::{DESC_FLAG_NEXT, Desc, Ring, RingLayout};
use memif::sock::Channel;
use memif::{Client, Event, InterfaceConfig, Listener};

use evil::*;

#[test]
fn bad_descriptors_are_dropped_and_counted_good_ones_pass() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(
        &dir,
        vec![InterfaceConfig {
            max_frame: 4000,
            ..cfg(0)
        }],
    );
    let (ev, mut q) = evil_connected(&mut l, 0);
    let size = ev.shm.len() as u32;
    ev.shm.write(u64::from(ev.buf(0)), &[0x11; 100]).unwrap();
    let good = |slot| Desc {
        flags: 0,
        region: 0,
        length: 100,
        offset: ev.buf(slot),
        metadata: 0,
    };
    let next = DESC_FLAG_NEXT;
    // Each bad packet is followed by a good one, which must still arrive.
    let packets: Vec<Vec<Desc>> = vec![
        vec![Desc {
            region: 1,
            ..good(0)
        }], // no such region
        vec![Desc {
            offset: size - 50,
            ..good(0)
        }], // runs past the end
        vec![Desc {
            offset: u32::MAX - 10,
            ..good(0)
        }], // offset + length wraps u32
        vec![Desc {
            length: 0,
            ..good(0)
        }], // empty
        vec![Desc {
            length: u32::MAX,
            ..good(0)
        }], // lying length
        vec![
            Desc {
                flags: next,
                ..good(0)
            },
            Desc {
                region: 9,
                ..good(0)
            },
        ], // chain, bad 2nd segment
        vec![
            Desc {
                flags: next,
                length: 2048,
                ..good(0)
            },
            Desc {
                length: 2048,
                ..good(0)
            },
        ], // 4096 > max_frame
    ];
    let mut slot = 0u16;
    for p in &packets {
        for d in p.iter().chain([good(0)].iter()) {
            ev.post(slot, *d);
            slot += 1;
        }
    }
    ev.s2m.set_head(slot);
    let mut pool = pool();
    let mut out = Vec::new();
    q.rx[0].recv(&mut pool, &mut out, 256).unwrap();
    let st = q.rx[0].stats();
    assert_eq!(
        out.len(),
        packets.len(),
        "every good packet between the bad ones arrives"
    );
    assert_eq!((st.drop_bad_desc, st.drop_oversize), (6, 1));
    for &h in &out {
        assert_eq!(pool.data(h), &[0x11; 100][..]);
    }
    assert_eq!(ev.s2m.tail(), slot, "all slots returned, bad ones included");
    assert!(q.rx[0].is_up());
}

#[test]
fn index_jumps_and_endless_chains_disconnect_only_that_peer() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0), cfg(1)]);
    let mut good = Client::new(l.path(), vec![cfg(1)]).unwrap();
    let (mut gp, mut gs) = connect(&mut l, &mut good);
    let mut pool = pool();
    let mut out = Vec::new();

    for (what, want) in [
        (
            "s2m head jump",
            "S2M ring 0: head 1025 is 1025 slots past tail 0, ring holds 1024",
        ),
        ("endless chain", "descriptor chain longer than the ring"),
        (
            "m2s head jump",
            "M2S ring 0: head 2000 is 2000 slots past tail 0",
        ),
        (
            "m2s bad buffer",
            "M2S ring 0: posted buffer region 0 offset 4294967295",
        ),
    ] {
        let (ev, mut q) = evil_connected(&mut l, 0);
        let r = match what {
            "s2m head jump" => {
                ev.s2m.set_head(1025);
                q.rx[0].recv(&mut pool, &mut out, 256).map(|_| ())
            }
            "endless chain" => {
                for s in 0..1024 {
                    ev.post(
                        s,
                        Desc {
                            flags: DESC_FLAG_NEXT,
                            region: 0,
                            length: 64,
                            offset: ev.buf(s),
                            metadata: 0,
                        },
                    );
                }
                ev.s2m.set_head(1024);
                q.rx[0].recv(&mut pool, &mut out, 256).map(|_| ())
            }
            "m2s head jump" => {
                ev.m2s.set_head(2000);
                let b = pool.from_bytes(&[1; 64]).unwrap();
                let r = q.tx[0].send(&pool, &[b]).map(|_| ());
                pool.free(b);
                r
            }
            _ => {
                ev.m2s.set_desc(
                    0,
                    Desc {
                        flags: 0,
                        region: 0,
                        length: 64,
                        offset: u32::MAX,
                        metadata: 0,
                    },
                );
                ev.m2s.set_head(1);
                let b = pool.from_bytes(&[1; 64]).unwrap();
                let r = q.tx[0].send(&pool, &[b]).map(|_| ());
                pool.free(b);
                r
            }
        };
        assert!(r.is_err(), "{what}");
        assert!(!q.rx[0].is_up() && !q.tx[0].is_up());
        l.poll(Duration::from_millis(1)).unwrap();
        match l.next_event() {
            Some(Event::Disconnected { reason, .. }) => {
                assert!(reason.contains(want), "{what}: {reason}")
            }
            other => panic!("{what}: {other:?}"),
        }
        match ev.e.recv(&mut l) {
            Some(Msg::Disconnect { reason, .. }) => {
                assert!(reason.to_string_lossy().contains(&want[..20]))
            }
            other => panic!("{what}: peer got {other:?}"),
        }
        // The good interface never noticed.
        gs.tx[0]
            .send_with(&[64], |_, w| w.write(0, &[3; 64]))
            .unwrap();
        out.clear();
        gp.rx[0].recv(&mut pool, &mut out, 8).unwrap();
        assert_eq!(out.len(), 1);
        pool.free_bulk(&out);
        out.clear();
    }
    assert_eq!(l.interfaces()[0].protocol_errors, 4);
    assert_eq!(l.interfaces()[0].disconnects, 4);
    assert!(l.interfaces()[1].connected);
}

/// Two hostile peers at once, each scribbling over its own rings (heads, descriptors, chains,
/// regions, lengths, offsets) from a thread of its own while the primary serves both and a
/// well-behaved pod beside them: nothing panics or stalls, each hostile peer's lies are
/// dropped and counted or end its own connection, and every frame of the good pod arrives,
/// intact and in order, both ways.
#[test]
fn two_hostile_peers_at_once_hurt_only_themselves() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0), cfg(1), cfg(2)]);
    let mut good = Client::new(l.path(), vec![cfg(1)]).unwrap();
    let (mut gp, mut gs) = connect(&mut l, &mut good);
    let (a, mut qa) = evil_connected(&mut l, 0);
    let (b, mut qb) = evil_connected(&mut l, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let scribble = |ev: EvilConnected, seed: u64| {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut x = seed;
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (slot, d) = memif::testing::next_lie(&mut x, RINGS, 5000);
                ev.post(slot, d);
                ev.m2s.set_desc(slot, d);
                if x.is_multiple_of(7) {
                    ev.s2m
                        .set_head(ev.s2m.head().wrapping_add((x >> 50) as u16 % 1100));
                }
                if x.is_multiple_of(11) {
                    ev.m2s
                        .set_head(ev.m2s.head().wrapping_add((x >> 50) as u16 % 1100));
                }
                rounds += 1;
            }
            (ev, rounds)
        })
    };
    let (ta, tb) = (
        scribble(a, 0x9e37_79b9_7f4a_7c15),
        scribble(b, 0x2545_f491_4f6c_dd1d),
    );
    let mut pool = pool();
    let mut out = Vec::new();
    let mut disconnected = Vec::new();
    let (mut sent, mut got_p, mut got_s) = (0u32, 0u32, 0u32);
    let until = std::time::Instant::now() + Duration::from_millis(500);
    while std::time::Instant::now() < until {
        for q in [&mut qa, &mut qb] {
            out.clear();
            let _ = q.rx[0].recv(&mut pool, &mut out, 256);
            pool.free_bulk(&out);
            let f = pool.from_bytes(&[7; 200]).unwrap();
            let _ = q.tx[0].send(&pool, &[f]);
            pool.free(f);
        }
        // The good pod, both ways: a numbered frame each turn.
        let frame = sent.to_be_bytes().repeat(16);
        assert_eq!(
            gs.tx[0]
                .send_with(&[64], |_, w| w.write(0, &frame))
                .unwrap(),
            1
        );
        let f = pool.from_bytes(&frame).unwrap();
        assert_eq!(gp.tx[0].send(&pool, &[f]).unwrap(), 1);
        pool.free(f);
        sent += 1;
        out.clear();
        gp.rx[0].recv(&mut pool, &mut out, 8).unwrap();
        for &h in &out {
            assert_eq!(pool.data(h), &got_p.to_be_bytes().repeat(16)[..]);
            got_p += 1;
        }
        pool.free_bulk(&out);
        gs.rx[0]
            .recv_with(8, |p| {
                assert_eq!(p.to_vec(), got_s.to_be_bytes().repeat(16));
                got_s += 1;
            })
            .unwrap();
        l.poll(Duration::ZERO).unwrap();
        while let Some(e) = l.next_event() {
            if let Event::Disconnected { id, reason } = e {
                disconnected.push((id, reason));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (ra, rb) = (ta.join().unwrap().1, tb.join().unwrap().1);
    assert!(ra > 100 && rb > 100, "the peers lied {ra} and {rb} times");
    assert_eq!((got_p, got_s), (sent, sent), "the good pod lost frames");
    assert!(gp.rx[0].is_up() && gs.rx[0].is_up());
    let ids: Vec<u32> = disconnected.iter().map(|d| d.0).collect();
    assert!(ids.contains(&0) && ids.contains(&2), "{disconnected:?}");
    assert!(!ids.contains(&1), "{disconnected:?}");
    let st = l.interfaces();
    assert!(st[1].connected && st[1].protocol_errors == 0);
    assert!(
        st[0].protocol_errors >= 1 && st[2].protocol_errors >= 1,
        "{st:?}"
    );
    assert_eq!(pool.available(), pool.capacity());
}

/// The primary reads the peer's M2S head only when the buffers it knows to be posted fall
/// short (the head's line is the peer's: each read after the peer moved it is a miss). A
/// packet that needs several buffers is placed from a fresh read all the same, and a head
/// that jumps is caught at the next read.
#[test]
fn posted_buffers_read_once_serve_until_used_and_a_lying_head_is_caught_at_the_next_read() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let (ev, mut q) = evil_connected(&mut l, 0);
    let post = |slots: std::ops::Range<u16>| {
        for s in slots.clone() {
            let d = Desc {
                flags: 0,
                region: 0,
                length: 128,
                offset: ev.buf(s),
                metadata: 0,
            };
            ev.m2s.set_desc(s, d);
        }
        ev.m2s.set_head(slots.end);
    };
    let mut pool = pool();
    let mut send = |q: &mut memif::PrimaryQueues, len: usize, n: usize| {
        let pkts: Vec<u32> = (0..n)
            .map(|_| pool.from_bytes(&vec![7; len]).unwrap())
            .collect();
        let r = q.tx[0].send(&pool, &pkts);
        pool.free_bulk(&pkts);
        r
    };
    post(0..4);
    assert_eq!(send(&mut q, 64, 1), Ok(1));
    // Three buffers known from that read; four more posted since. A 500-byte packet needs
    // four of 128 bytes: more than were known, not more than are posted.
    post(4..8);
    assert_eq!(send(&mut q, 500, 1), Ok(1));
    assert_eq!(ev.m2s.tail(), 5);
    let chain: Vec<(u16, u32)> = (1..5)
        .map(|s| (ev.m2s.desc(s).flags, ev.m2s.desc(s).length))
        .collect();
    let next = DESC_FLAG_NEXT;
    assert_eq!(chain, [(next, 128), (next, 128), (next, 128), (0, 116)]);
    let st = q.tx[0].stats();
    assert_eq!((st.ring_full, st.drop_oversize, st.packets), (0, 0, 2));
    // The head jumps. Three buffers are known from the last read: two packets go there
    // without a read; the next two need one, which finds the lie.
    ev.m2s.set_head(2000);
    assert_eq!(send(&mut q, 64, 2), Ok(2));
    assert!(send(&mut q, 64, 2).is_err());
    assert!(!q.tx[0].is_up());
    expect_fault(&mut l, "M2S ring 0: head 2000 is 1993 slots past tail 7");
}

/// The primary reads the peer's S2M head again only when the packets it knows of fall short
/// of what it may take: a backlog drains without a read a pass, and a head that jumps is
/// caught at the next read.
#[test]
fn a_backlog_drains_from_one_read_and_a_lying_head_is_caught_at_the_next() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let (ev, mut q) = evil_connected(&mut l, 0);
    ev.shm.write(u64::from(ev.buf(0)), &[0x22; 60]).unwrap();
    for s in 0..300 {
        let d = Desc {
            flags: 0,
            region: 0,
            length: 60,
            offset: ev.buf(0),
            metadata: 0,
        };
        ev.post(s, d);
    }
    ev.s2m.set_head(300);
    let mut pool = pool();
    let mut out = Vec::new();
    assert_eq!(q.rx[0].recv(&mut pool, &mut out, 256), Ok(256));
    ev.s2m.set_head(1400);
    assert_eq!(q.rx[0].recv(&mut pool, &mut out, 40), Ok(40));
    assert_eq!(ev.s2m.tail(), 296);
    assert!(q.rx[0].recv(&mut pool, &mut out, 256).is_err());
    assert!(out.iter().all(|&b| pool.data(b) == [0x22; 60]));
    pool.free_bulk(&out);
    expect_fault(&mut l, "S2M ring 0: head 1400 is 1104 slots past tail 296");
}

/// The listener's next event is the disconnect of a faulted link, its reason naming `want`.
fn expect_fault(l: &mut Listener, want: &str) {
    l.poll(Duration::from_millis(1)).unwrap();
    match l.next_event() {
        Some(Event::Disconnected { reason, .. }) => assert!(reason.contains(want), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn peer_rewriting_a_descriptor_mid_burst_only_hurts_its_own_packet() {
    let _serial = serial();
    // The descriptor is snapshotted once: whatever the peer writes after `recv` read it changes
    // nothing already validated. Here the peer rewrites every slot after publishing; the bytes
    // copied are those the snapshot pointed at, bounded by the snapshot's checks.
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let (ev, mut q) = evil_connected(&mut l, 0);
    for s in 0..64 {
        ev.post(
            s,
            Desc {
                flags: 0,
                region: 0,
                length: 60,
                offset: ev.buf(s),
                metadata: 0,
            },
        );
    }
    ev.s2m.set_head(64);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (shm, stop2) = (ev.shm.clone(), stop.clone());
    let racer = std::thread::spawn(move || {
        let r = Ring::new(shm, 0, 10, RingLayout::CacheLine64).unwrap();
        let mut i = 0u32;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            i = i.wrapping_add(1);
            r.set_desc(
                (i % 64) as u16,
                Desc {
                    flags: (i & 1) as u16,
                    region: (i % 3) as u16,
                    length: i,
                    offset: i.wrapping_mul(2654435761),
                    metadata: 0,
                },
            );
        }
    });
    let mut pool = pool();
    let mut out = Vec::new();
    let r = q.rx[0].recv(&mut pool, &mut out, 256);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    racer.join().unwrap();
    // Whatever the race produced, every packet we hold is within our limits and our pool.
    assert!(r.is_ok() || !q.rx[0].is_up());
    for &h in &out {
        assert!(pool.meta(h).total_len <= 9216);
    }
    pool.free_bulk(&out);
    assert_eq!(pool.available(), pool.capacity());
}

/// A primary written by hand, for our secondary to face.
#[test]
fn hostile_primary_cannot_crash_the_secondary() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = sock_path(&dir);
    let lfd = memif::sock::listen(&path).unwrap();
    let quick = InterfaceConfig {
        reconnect_interval: Duration::from_millis(10),
        handshake_timeout: Duration::from_millis(200),
        ..cfg(0)
    };
    let mut c = Client::new(&path, vec![quick]).unwrap();
    let accept = |c: &mut Client| -> Channel {
        for _ in 0..500 {
            c.poll(Duration::from_millis(1)).unwrap();
            if let Some(ch) = memif::sock::accept(lfd.as_fd()).unwrap() {
                return ch;
            }
        }
        panic!("secondary never connected");
    };
    let mut seen = 0;
    let mut reason = |c: &mut Client| -> String {
        for _ in 0..5000 {
            c.poll(Duration::from_millis(1)).unwrap();
            let st = &c.interfaces()[0];
            if st.protocol_errors + st.disconnects > seen {
                seen = st.protocol_errors + st.disconnects;
                return st.last_disconnect_reason.clone().unwrap_or_default();
            }
        }
        panic!("no disconnect");
    };
    // HELLO with a version range that excludes 2.0.
    let ch = accept(&mut c);
    let hello = memif::msg::Hello {
        name: FixedStr::new("evil"),
        min_version: 0x0300,
        max_version: 0x0300,
        max_region: 255,
        max_m2s_ring: 255,
        max_s2m_ring: 255,
        max_log2_ring_size: 14,
    };
    ch.send(&Msg::Hello(hello), None).unwrap();
    assert_eq!(reason(&mut c), "incompatible protocol version");
    drop(ch);
    // Garbage instead of HELLO.
    let ch = accept(&mut c);
    ch.send_raw(&[7u8; 17], &[]).unwrap();
    assert!(reason(&mut c).starts_with("malformed message: 17 bytes"));
    drop(ch);
    // A HELLO that allows only 1-entry rings, then silence: the secondary builds what it was
    // allowed, sends INIT, and gives up on the handshake by itself.
    let ch = accept(&mut c);
    let tiny = memif::msg::Hello {
        max_log2_ring_size: 0,
        min_version: VERSION,
        max_version: VERSION,
        ..hello
    };
    ch.send(&Msg::Hello(tiny), None).unwrap();
    assert_eq!(reason(&mut c), "handshake timeout");
    let r = ch.recv().unwrap().expect("INIT");
    assert!(matches!(Msg::parse(&r.data.unwrap()), Ok(Msg::Init(_))));
    // ACK out of turn (before INIT was even answered we ACK twice), then CONNECTED too early.
    let ch = accept(&mut c);
    ch.send(
        &Msg::Hello(memif::msg::Hello {
            min_version: VERSION,
            max_version: VERSION,
            ..hello
        }),
        None,
    )
    .unwrap();
    ch.send(
        &Msg::Connected {
            if_name: FixedStr::new("early"),
        },
        None,
    )
    .unwrap();
    assert_eq!(reason(&mut c), "unexpected message CONNECTED");
    drop(ch);
    // After all that the secondary is still trying, and connects to a real primary.
    drop(lfd);
    std::fs::remove_file(dir.path().join("memif.sock")).unwrap();
    let mut l = Listener::bind(&path, vec![cfg(0)]).unwrap();
    connect(&mut l, &mut c);
}
