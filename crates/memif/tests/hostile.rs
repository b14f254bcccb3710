//! Hostile peers against our primary (and a hostile primary against our secondary): each
//! misbehaviour ends in a DISCONNECT whose reason names it, is counted, never panics, never
//! leaks an fd, and never disturbs another interface on the same listener.

mod common;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use memif::msg::{AddRing, FixedStr, Init, Mode, Msg, VERSION};
use memif::ring::{DESC_FLAG_NEXT, Desc, Ring, RingLayout};
use memif::shm::SharedMemory;
use memif::sock::Channel;
use memif::{Client, Event, InterfaceConfig, Listener};
use rustix::fs::{MemfdFlags, SealFlags};

/// Tests here count the process's open fds, so they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// A secondary written by hand, that can say anything.
struct Evil {
    chan: Channel,
}

impl Evil {
    fn connect(l: &mut Listener) -> Evil {
        let chan = Channel::connect(l.path()).unwrap();
        l.poll(Z).unwrap();
        let e = Evil { chan };
        assert!(matches!(e.recv(l), Some(Msg::Hello(_))));
        e
    }

    fn send(&self, m: Msg, fd: Option<&OwnedFd>) {
        self.chan.send(&m, fd.map(|f| f.as_fd())).unwrap();
    }

    /// Lets the listener run, then returns the next reply.
    fn recv(&self, l: &mut Listener) -> Option<Msg> {
        for _ in 0..2000 {
            l.poll(Duration::from_millis(1)).unwrap();
            match self.chan.recv() {
                Ok(Some(r)) => return Some(Msg::parse(&r.data.unwrap()).unwrap()),
                Ok(None) => {}
                Err(_) => return None,
            }
        }
        None
    }

    fn expect_disconnect(self, l: &mut Listener, want: &str) {
        match self.recv(l) {
            Some(Msg::Disconnect { reason, .. }) => {
                let r = reason.to_string_lossy();
                assert!(r.contains(want), "reason {r:?} does not contain {want:?}");
            }
            other => panic!("expected DISCONNECT {want:?}, got {other:?}"),
        }
        // ...and the socket is closed after it.
        assert!(self.recv(l).is_none());
    }

    fn init(&self, l: &mut Listener, id: u32) {
        self.send(
            Msg::Init(Init {
                version: VERSION,
                id,
                mode: Mode::Ethernet,
                secret: FixedStr::default(),
                name: FixedStr::new("evil"),
            }),
            None,
        );
        assert_eq!(self.recv(l), Some(Msg::Ack));
    }
}

fn memfd(size: u64, seals: SealFlags) -> OwnedFd {
    let fd =
        rustix::fs::memfd_create("evil", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, size).unwrap();
    if !seals.is_empty() {
        rustix::fs::fcntl_add_seals(&fd, seals).unwrap();
    }
    fd
}

fn eventfd() -> OwnedFd {
    rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )
    .unwrap()
}

fn listener(dir: &tempfile::TempDir, ifaces: Vec<InterfaceConfig>) -> Listener {
    Listener::bind(&sock_path(dir), ifaces).unwrap()
}

fn add_ring(s2m: bool, index: u16, region: u16, offset: u32, log2: u8) -> Msg {
    Msg::AddRing(AddRing {
        flags: u16::from(s2m),
        index,
        region,
        offset,
        log2_ring_size: log2,
        private_hdr_size: 0,
    })
}

#[test]
fn malformed_and_out_of_order_messages() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let before = open_fds();

    let e = Evil::connect(&mut l);
    e.chan.send_raw(&[1u8; 64], &[]).unwrap();
    e.expect_disconnect(&mut l, "malformed message: 64 bytes instead of 128");

    let e = Evil::connect(&mut l);
    e.chan.send_raw(&[0u8; 200], &[]).unwrap();
    e.expect_disconnect(&mut l, "malformed message");

    let e = Evil::connect(&mut l);
    let mut m = [0u8; 128];
    m[0] = 0x42;
    e.chan.send_raw(&m, &[]).unwrap();
    e.expect_disconnect(&mut l, "unknown message type 0x42");

    let e = Evil::connect(&mut l);
    e.send(
        Msg::AddRegion {
            index: 0,
            size: 4096,
        },
        Some(&memfd(4096, SealFlags::SHRINK)),
    );
    e.expect_disconnect(&mut l, "unexpected message ADD_REGION before INIT");

    let e = Evil::connect(&mut l);
    e.send(
        Msg::Init(Init {
            version: 0x0100,
            id: 0,
            mode: Mode::Ethernet,
            secret: FixedStr::default(),
            name: FixedStr::default(),
        }),
        None,
    );
    e.expect_disconnect(&mut l, "incompatible protocol version 0x0100");

    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    e.send(
        Msg::Init(Init {
            version: VERSION,
            id: 0,
            mode: Mode::Ethernet,
            secret: FixedStr::default(),
            name: FixedStr::default(),
        }),
        None,
    );
    e.expect_disconnect(&mut l, "unexpected message INIT during setup");

    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    e.send(
        Msg::Hello(memif::msg::Hello {
            name: FixedStr::default(),
            min_version: VERSION,
            max_version: VERSION,
            max_region: 0,
            max_m2s_ring: 0,
            max_s2m_ring: 0,
            max_log2_ring_size: 0,
        }),
        None,
    );
    e.expect_disconnect(&mut l, "unexpected message HELLO during setup");

    // Unterminated strings everywhere are fine: the name is bounded, never run past.
    let e = Evil::connect(&mut l);
    let mut init = Msg::Init(Init {
        version: VERSION,
        id: 0,
        mode: Mode::Ethernet,
        secret: FixedStr([b'x'; 24]),
        name: FixedStr([0xff; 32]),
    })
    .encode();
    init[65..].fill(0xee);
    e.chan.send_raw(&init, &[]).unwrap();
    assert_eq!(e.recv(&mut l), Some(Msg::Ack));
    drop(e);
    l.poll(Duration::from_millis(5)).unwrap();

    // Refusals after INIT count on the interface; those before it on the listener.
    assert_eq!(l.interfaces()[0].protocol_errors, 2);
    assert_eq!(l.refused_before_init(), 5);
    assert_eq!(open_fds(), before, "fds leaked");
}

#[test]
fn bad_regions_are_refused_before_mapping() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let before = open_fds();
    type Case = (Box<dyn Fn(&Evil)>, &'static str);
    let cases: Vec<Case> = vec![
        (
            Box::new(|e: &Evil| {
                e.send(
                    Msg::AddRegion {
                        index: 0,
                        size: 4096,
                    },
                    None,
                )
            }),
            "missing memory region fd",
        ),
        (
            Box::new(|e: &Evil| {
                e.send(
                    Msg::AddRegion {
                        index: 1,
                        size: 4096,
                    },
                    Some(&memfd(4096, SealFlags::SHRINK)),
                )
            }),
            "unexpected region index 1, expected 0",
        ),
        (
            Box::new(|e: &Evil| {
                e.send(
                    Msg::AddRegion {
                        index: 0,
                        size: 4096,
                    },
                    Some(&memfd(4096, SealFlags::empty())),
                )
            }),
            "not sealed against shrinking",
        ),
        (
            Box::new(|e: &Evil| {
                e.send(
                    Msg::AddRegion {
                        index: 0,
                        size: 8192,
                    },
                    Some(&memfd(4096, SealFlags::SHRINK)),
                )
            }),
            "region fd is 4096 bytes, smaller than the 8192 bytes announced",
        ),
        (
            Box::new(|e: &Evil| {
                e.send(
                    Msg::AddRegion { index: 0, size: 0 },
                    Some(&memfd(4096, SealFlags::SHRINK)),
                )
            }),
            "region 0: size 0 out of range",
        ),
        (
            Box::new(|e: &Evil| {
                e.send(
                    Msg::AddRegion {
                        index: 0,
                        size: 1 << 40,
                    },
                    Some(&memfd(4096, SealFlags::SHRINK)),
                )
            }),
            "size 1099511627776 out of range",
        ),
        (
            Box::new(|e: &Evil| e.send(Msg::AddRegion { index: 0, size: 8 }, Some(&eventfd()))),
            "not a regular file",
        ),
    ];
    for (act, want) in cases {
        let e = Evil::connect(&mut l);
        e.init(&mut l, 0);
        act(&e);
        e.expect_disconnect(&mut l, want);
    }
    l.poll(Duration::from_millis(5)).unwrap();
    assert_eq!(open_fds(), before, "fds leaked");
}

/// Sets up one sealed region of `size` bytes holding initialised rings at 0 and `stride`.
fn good_region(e: &Evil, l: &mut Listener, size: usize) -> Arc<SharedMemory> {
    let shm = Arc::new(SharedMemory::create("evil", size).unwrap());
    for off in [0u64, 16512] {
        if let Ok(r) = Ring::new(shm.clone(), off, 10, RingLayout::CacheLine64) {
            r.init();
        }
    }
    e.chan
        .send(
            &Msg::AddRegion {
                index: 0,
                size: size as u64,
            },
            shm.fd(),
        )
        .unwrap();
    assert_eq!(e.recv(l), Some(Msg::Ack));
    shm
}

#[test]
fn bad_rings_are_refused() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(
        &dir,
        vec![InterfaceConfig {
            s2m_rings: 2,
            m2s_rings: 2,
            ..cfg(0)
        }],
    );
    let cases: Vec<(Msg, bool, &str)> = vec![
        (
            add_ring(true, 0, 0, 0, 10),
            false,
            "missing ring interrupt fd",
        ),
        (
            add_ring(true, 1, 0, 0, 10),
            true,
            "unexpected S2M ring index 1, expected 0",
        ),
        (
            add_ring(true, 0, 3, 0, 10),
            true,
            "S2M ring 0 in unknown region 3",
        ),
        (add_ring(false, 0, 0, 4, 10), true, "not 8-byte aligned"),
        (
            add_ring(false, 0, 0, 40000, 10),
            true,
            "does not fit its region",
        ),
        (
            add_ring(false, 0, 0, u32::MAX - 7, 10),
            true,
            "does not fit its region",
        ),
        (add_ring(true, 0, 0, 0, 15), true, "log2 size 15 too large"),
        (
            Msg::AddRing(AddRing {
                flags: 1,
                index: 0,
                region: 0,
                offset: 0,
                log2_ring_size: 10,
                private_hdr_size: 8,
            }),
            true,
            "private headers not supported",
        ),
    ];
    for (m, with_fd, want) in cases {
        let e = Evil::connect(&mut l);
        e.init(&mut l, 0);
        good_region(&e, &mut l, 33024);
        e.send(m, with_fd.then(eventfd).as_ref());
        e.expect_disconnect(&mut l, want);
    }
    // Too many rings, a CONNECT without rings, and a ring whose cookie is wrong.
    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    good_region(&e, &mut l, 4 * 16512);
    for i in 0..2 {
        e.send(add_ring(true, i, 0, 0, 10), Some(&eventfd()));
        assert_eq!(e.recv(&mut l), Some(Msg::Ack));
    }
    e.send(add_ring(true, 2, 0, 0, 10), Some(&eventfd()));
    e.expect_disconnect(&mut l, "too many S2M rings");

    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    good_region(&e, &mut l, 33024);
    e.send(add_ring(true, 0, 0, 0, 10), Some(&eventfd()));
    assert_eq!(e.recv(&mut l), Some(Msg::Ack));
    e.send(
        Msg::Connect {
            if_name: FixedStr::new("x"),
        },
        None,
    );
    e.expect_disconnect(&mut l, "need at least one each");

    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    let shm = good_region(&e, &mut l, 33024 + 16512);
    e.send(add_ring(true, 0, 0, 0, 10), Some(&eventfd()));
    assert_eq!(e.recv(&mut l), Some(Msg::Ack));
    e.send(add_ring(false, 0, 0, 33024, 10), Some(&eventfd())); // never initialised: cookie 0
    assert_eq!(e.recv(&mut l), Some(Msg::Ack));
    e.send(
        Msg::Connect {
            if_name: FixedStr::new("x"),
        },
        None,
    );
    e.expect_disconnect(&mut l, "wrong cookie on M2S ring 0");
    drop(shm);
}

#[test]
fn extra_fds_are_closed_and_floods_end_the_connection() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0), cfg(1)]);
    let before = open_fds();
    // A good peer on interface 1 keeps working throughout.
    let mut good = Client::new(l.path(), vec![cfg(1)]).unwrap();
    let (mut p, mut s) = connect(&mut l, &mut good);

    let e = Evil::connect(&mut l);
    let fds: Vec<OwnedFd> = (0..4).map(|_| memfd(4096, SealFlags::SHRINK)).collect();
    let b: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    let init = Msg::Init(Init {
        version: VERSION,
        id: 0,
        mode: Mode::Ethernet,
        secret: FixedStr::default(),
        name: FixedStr::default(),
    });
    e.chan.send_raw(&init.encode(), &b).unwrap();
    assert_eq!(e.recv(&mut l), Some(Msg::Ack));
    drop(fds);
    // Flood: thousands of messages without waiting for replies.
    let mut sent = 0;
    for _ in 0..5000 {
        if e.chan.send_raw(&Msg::Ack.encode(), &[]).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent > 0);
    e.expect_disconnect(&mut l, "unexpected message ACK during setup");
    let mut pool = pool();
    s.tx[0]
        .send_with(&[64], |_, w| w.write(0, &[9; 64]))
        .unwrap();
    let mut out = Vec::new();
    p.rx[0].recv(&mut pool, &mut out, 8).unwrap();
    assert_eq!(out.len(), 1);
    pool.free_bulk(&out);
    drop((p, s, good));
    for _ in 0..10 {
        l.poll(Duration::from_millis(2)).unwrap();
    }
    assert_eq!(open_fds(), before, "fds leaked");
}

#[test]
fn stalls_and_vanishing_peers_free_the_interface() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let fast = InterfaceConfig {
        handshake_timeout: Duration::from_millis(100),
        ..cfg(0)
    };
    let mut l = listener(&dir, vec![fast]);
    // Stall after INIT: the interface is held, then released by the timeout.
    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    let e2 = Evil::connect(&mut l);
    e2.send(
        Msg::Init(Init {
            version: VERSION,
            id: 0,
            mode: Mode::Ethernet,
            secret: FixedStr::default(),
            name: FixedStr::default(),
        }),
        None,
    );
    e2.expect_disconnect(&mut l, "already connected");
    let t = Instant::now();
    e.expect_disconnect(&mut l, "handshake timeout");
    assert!(t.elapsed() < Duration::from_secs(2));
    // Vanish in the middle of the handshake, with a region mapped.
    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    let _shm = good_region(&e, &mut l, 33024);
    drop(e);
    for _ in 0..5 {
        l.poll(Duration::from_millis(2)).unwrap();
    }
    assert_eq!(
        l.interfaces()[0].last_disconnect_reason.as_deref(),
        Some("peer closed the control socket")
    );
    // A real secondary gets the interface afterwards.
    let mut c = Client::new(l.path(), vec![cfg(0)]).unwrap();
    connect(&mut l, &mut c);
}

/// A hand-made secondary that completes the handshake and then writes whatever it likes.
struct EvilConnected {
    _e: Evil,
    shm: Arc<SharedMemory>,
    s2m: Ring,
    m2s: Ring,
}

const RINGS: u64 = 2 * 16512;

fn evil_connected(l: &mut Listener, id: u32) -> (EvilConnected, memif::PrimaryQueues) {
    let e = Evil::connect(l);
    e.init(l, id);
    let size = RINGS as usize + 2048 * 2048;
    let shm = good_region(&e, l, size);
    e.send(add_ring(true, 0, 0, 0, 10), Some(&eventfd()));
    assert_eq!(e.recv(l), Some(Msg::Ack));
    e.send(add_ring(false, 0, 0, 16512, 10), Some(&eventfd()));
    assert_eq!(e.recv(l), Some(Msg::Ack));
    e.send(
        Msg::Connect {
            if_name: FixedStr::new("evil"),
        },
        None,
    );
    assert!(matches!(e.recv(l), Some(Msg::Connected { .. })));
    let q = match l.next_event() {
        Some(Event::Connected { queues, .. }) => queues,
        other => panic!("{other:?}"),
    };
    let s2m = Ring::new(shm.clone(), 0, 10, RingLayout::CacheLine64).unwrap();
    let m2s = Ring::new(shm.clone(), 16512, 10, RingLayout::CacheLine64).unwrap();
    (
        EvilConnected {
            _e: e,
            shm,
            s2m,
            m2s,
        },
        q,
    )
}

impl EvilConnected {
    fn post(&self, slot: u16, d: Desc) {
        self.s2m.set_desc(slot, d);
    }
    fn buf(&self, slot: u16) -> u32 {
        (RINGS + u64::from(slot) * 2048) as u32
    }
}

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
        match ev._e.recv(&mut l) {
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

#[test]
fn a_peer_cannot_stall_our_signalling_through_its_eventfd() {
    // The peer makes the shared eventfd blocking and fills its counter: our producer must skip
    // the signal instead of blocking in write().
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    let size = RINGS as usize + 2048 * 2048;
    let _shm = good_region(&e, &mut l, size);
    let s2m_irq = eventfd();
    let m2s_irq = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap(); // blocking
    e.send(add_ring(true, 0, 0, 0, 10), Some(&s2m_irq));
    assert_eq!(e.recv(&mut l), Some(Msg::Ack));
    e.send(add_ring(false, 0, 0, 16512, 10), Some(&m2s_irq));
    assert_eq!(e.recv(&mut l), Some(Msg::Ack));
    e.send(
        Msg::Connect {
            if_name: FixedStr::new("evil"),
        },
        None,
    );
    assert!(matches!(e.recv(&mut l), Some(Msg::Connected { .. })));
    let Some(Event::Connected { mut queues, .. }) = l.next_event() else {
        panic!("no connection")
    };
    // Undo the non-blocking flag we set on our side of the shared description, then saturate.
    let fl = rustix::fs::fcntl_getfl(&m2s_irq).unwrap();
    rustix::fs::fcntl_setfl(&m2s_irq, fl - rustix::fs::OFlags::NONBLOCK).unwrap();
    rustix::io::write(&m2s_irq, &0xffff_ffff_ffff_fffeu64.to_ne_bytes()).unwrap();
    let m2s = Ring::new(_shm.clone(), 16512, 10, RingLayout::CacheLine64).unwrap();
    m2s.set_desc(
        0,
        Desc {
            flags: 0,
            region: 0,
            length: 2048,
            offset: RINGS as u32,
            metadata: 0,
        },
    );
    m2s.set_head(1);
    let mut pool = pool();
    let b = pool.from_bytes(&[5; 64]).unwrap();
    // Would hang forever in write() without the POLLOUT check.
    assert_eq!(queues.tx[0].send(&pool, &[b]).unwrap(), 1);
    assert_eq!(queues.tx[0].stats().interrupts_sent, 0);
    pool.free(b);
}
