//! Hostile peers against our primary (and a hostile primary against our secondary): each
//! misbehaviour ends in a DISCONNECT whose reason names it, is counted, never panics, never
//! leaks an fd, and never disturbs another interface on the same listener.

mod common;
mod evil;

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use common::*;
use memif::msg::{AddRing, FixedStr, Init, Mode, Msg, VERSION};
use memif::{Client, InterfaceConfig};
use rustix::fs::{MemfdFlags, SealFlags};

use evil::*;

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
    // A sealed memfd of huge pages: its owner can punch a hole (seals do not stop that) and
    // take the freed page, and our next touch of the hole is SIGBUS. Refused before mapping,
    // whether or not the huge page pool could back it.
    let huge = rustix::fs::memfd_create(
        "evil-huge",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING | MemfdFlags::HUGETLB,
    );
    let mut cases = cases;
    match huge {
        Ok(fd) => {
            rustix::fs::ftruncate(&fd, 2 << 20).unwrap();
            rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW).unwrap();
            let fd = std::sync::Mutex::new(Some(fd));
            cases.push((
                Box::new(move |e: &Evil| {
                    let fd = fd.lock().unwrap().take().unwrap();
                    e.send(
                        Msg::AddRegion {
                            index: 0,
                            size: 2 << 20,
                        },
                        Some(&fd),
                    )
                }),
                "region fd is on hugetlbfs",
            ));
        }
        Err(e) => eprintln!("skipping the hugetlbfs region: memfd_create(MFD_HUGETLB): {e}"),
    }
    for (act, want) in cases {
        let e = Evil::connect(&mut l);
        e.init(&mut l, 0);
        act(&e);
        e.expect_disconnect(&mut l, want);
    }
    l.poll(Duration::from_millis(5)).unwrap();
    assert_eq!(open_fds(), before, "fds leaked");
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
    // An interrupt fd that is not an eventfd: a pipe whose read end would block our reads.
    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    good_region(&e, &mut l, 33024);
    let (pipe_r, _pipe_w) = rustix::pipe::pipe().unwrap();
    e.send(add_ring(true, 0, 0, 0, 10), Some(&pipe_r));
    e.expect_disconnect(&mut l, "S2M ring 0: interrupt fd is not an eventfd");
    // Several fds on one message: the first is the one (as in VPP, libmemif and DPDK), the
    // rest are closed. An eventfd first and a pipe after it is a good ring; a pipe first is
    // refused whatever follows it.
    let before = open_fds();
    let ring = add_ring(true, 0, 0, 0, 10).encode();
    for (first_is_eventfd, want) in [
        (true, None),
        (false, Some("interrupt fd is not an eventfd")),
    ] {
        let e = Evil::connect(&mut l);
        e.init(&mut l, 0);
        let shm = good_region(&e, &mut l, 33024);
        let (pipe_r, pipe_w) = rustix::pipe::pipe().unwrap();
        let ev = eventfd();
        let fds = if first_is_eventfd {
            [ev.as_fd(), pipe_r.as_fd()]
        } else {
            [pipe_r.as_fd(), ev.as_fd()]
        };
        e.chan.send_raw(&ring, &fds).unwrap();
        drop((pipe_r, pipe_w, ev));
        match want {
            None => {
                assert_eq!(e.recv(&mut l), Some(Msg::Ack));
                drop(e);
            }
            Some(w) => e.expect_disconnect(&mut l, w),
        }
        drop(shm);
    }
    for _ in 0..10 {
        l.poll(Duration::from_millis(2)).unwrap();
    }
    assert_eq!(
        open_fds(),
        before,
        "the fds after the first were not all closed"
    );

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

/// Another process (its own SO_PEERCRED pid) opens `count` connections on `path` and holds
/// them without a word, then touches `done`.
const FLOOD: &str = r#"
import socket, sys, time, pathlib
path, count, done = sys.argv[1], int(sys.argv[2]), sys.argv[3]
held = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    held.append(s)
pathlib.Path(done).touch()
time.sleep(30)
"#;

/// A peer that opens connections on a shared socket and never finishes the handshake holds
/// at most a few of them: each further one evicts its own oldest, so it never fills the
/// listener, and pods arriving during the flood connect as if it were not there.
#[test]
fn half_open_floods_evict_only_themselves() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let fast = |id| InterfaceConfig {
        handshake_timeout: Duration::from_secs(30),
        ..cfg(id)
    };
    let mut l = listener(&dir, vec![fast(0), fast(1)]);
    let done = dir.path().join("flooded");
    let memif::sock::SocketPath::File(path) = l.path().clone() else {
        panic!("a file socket")
    };
    let mut flood = std::process::Command::new("python3")
        .arg("-c")
        .arg(FLOOD)
        .arg(&path)
        .arg("200")
        .arg(&done)
        .spawn()
        .expect("python3 (scripts/setup.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done.exists() {
        assert!(
            Instant::now() < deadline,
            "the flood did not finish connecting"
        );
        l.poll(Duration::from_millis(1)).unwrap();
    }
    l.poll(Duration::from_millis(5)).unwrap();
    // All 200 were let in, and all but the newest 8 evicted again.
    assert_eq!(l.evicted_before_init(), 200 - 8);
    // Two pods arrive while the flood's connections are still open: both connect.
    let mut a = Client::new(l.path(), vec![cfg(0)]).unwrap();
    let mut b = Client::new(l.path(), vec![cfg(1)]).unwrap();
    let (_pa, _sa) = connect(&mut l, &mut a);
    let (_pb, _sb) = connect(&mut l, &mut b);
    assert!(
        l.interfaces().iter().all(|i| i.connects == 1),
        "{:?}",
        l.interfaces()
    );
    let _ = flood.kill();
    let _ = flood.wait();
}

/// A peer's regions cost no fd once mapped: 100 regions, each from a descriptor of its own,
/// leave the daemon's fd count where it was after the connection's socket.
#[test]
fn mapped_regions_hold_no_fd() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let e = Evil::connect(&mut l);
    e.init(&mut l, 0);
    let before = open_fds();
    for index in 0..100u16 {
        let fd = memfd(4096, SealFlags::SHRINK);
        e.send(Msg::AddRegion { index, size: 4096 }, Some(&fd));
        assert_eq!(e.recv(&mut l), Some(Msg::Ack), "region {index}");
    }
    // Ours: the test's own memfds are closed by now (each dropped after sending).
    assert_eq!(open_fds(), before, "the regions' fds were kept");
}

/// Peers' regions on every listener of the process share one budget: past it a region is
/// refused before mapping (DISCONNECT says why), and a peer that goes gives its share back
/// once its queues are dropped.
#[test]
fn regions_of_all_peers_share_one_budget() {
    let _serial = serial();
    let size = RINGS + 2048 * 2048;
    let budget = memif::RegionBudget::new(size + size / 2);
    let (dir, dir2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut l = listener(&dir, vec![cfg(0)]);
    let mut l2 = listener(&dir2, vec![cfg(0)]);
    l.set_region_budget(budget.clone());
    l2.set_region_budget(budget.clone());
    let (first, q) = evil_connected(&mut l, 0);
    assert_eq!(budget.used(), size);
    // A second peer, on the other listener: its region does not fit what is left.
    let e = Evil::connect(&mut l2);
    e.init(&mut l2, 0);
    e.send(
        Msg::AddRegion { index: 0, size },
        Some(&memfd(size, SealFlags::SHRINK)),
    );
    e.expect_disconnect(&mut l2, "over the budget");
    assert_eq!(budget.used(), size);
    // The first goes; its region is unmapped once the listener and its queues let go.
    drop(first);
    l.poll(Duration::from_millis(5)).unwrap();
    while l.next_event().is_some() {}
    drop(q);
    assert_eq!(budget.used(), 0);
    let (_second, _q2) = evil_connected(&mut l2, 0);
    assert_eq!(budget.used(), size);
}

/// Out of fds, a listener pauses accepting for 100 ms instead of retrying (and logging) at
/// every poll while its socket stays readable; its polls still wait; once fds are back, the
/// waiting peers are let in.
#[test]
fn out_of_fds_pauses_accepting_instead_of_spinning() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    use std::os::fd::AsRawFd;
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let chans: Vec<_> = (0..3)
        .map(|_| memif::sock::Channel::connect(l.path()).unwrap())
        .collect();
    /// Puts the limit back however the test ends (other tests share the process).
    struct Restore(Rlimit);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = setrlimit(Resource::Nofile, self.0);
        }
    }
    let restore = Restore(getrlimit(Resource::Nofile));
    // The lowest free fd number as the limit: no number below it is free, so every accept
    // fails with EMFILE (and poll, which refuses more fds than the limit, still works).
    let lowest = std::fs::File::open("/dev/null")
        .map(|f| f.as_raw_fd())
        .unwrap();
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(lowest as u64),
            maximum: restore.0.maximum,
        },
    )
    .unwrap();
    let t = Instant::now();
    for _ in 0..10 {
        l.poll(Duration::from_millis(5)).unwrap();
    }
    let (failures, spent) = (l.accept_failures(), t.elapsed());
    drop(restore);
    // Ten polls of 5 ms wait at least 50 ms in all (more on a busy machine), and in that
    // time accepting was tried once, or twice if the machine slept past the pause.
    assert!(
        spent >= Duration::from_millis(45),
        "{spent:?}: polls did not wait"
    );
    assert!(
        (1..=1 + spent.as_millis() as u64 / 100).contains(&failures),
        "{failures} in {spent:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut hello = 0;
    while hello < chans.len() && Instant::now() < deadline {
        l.poll(Duration::from_millis(20)).unwrap();
        for c in &chans {
            if let Ok(Some(r)) = c.recv()
                && matches!(Msg::parse(&r.data.unwrap()), Ok(Msg::Hello(_)))
            {
                hello += 1;
            }
        }
    }
    assert_eq!(hello, chans.len(), "the waiting peers were let in");
}
