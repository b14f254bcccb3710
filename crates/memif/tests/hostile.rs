//! Hostile peers against our primary (and a hostile primary against our secondary): each
//! misbehaviour ends in a DISCONNECT whose reason names it, is counted, never panics, never
//! leaks an fd, and never disturbs another interface on the same listener.

mod common;
mod evil;

use std::time::{Duration, Instant};

use common::*;
use memif::msg::Msg;
use memif::{Client, InterfaceConfig};
use rustix::fs::SealFlags;

use evil::*;
use memif::testing::lies::*;

#[test]
fn malformed_and_out_of_order_messages() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let before = open_fds();
    tell_all(&mut l, 0, &message_lies());
    l.poll(Duration::from_millis(5)).unwrap();
    // Refusals after INIT count on the interface (two lies, and the short message that
    // ends the tolerated one); those before it on the listener.
    assert_eq!(l.interfaces()[0].protocol_errors, 3);
    assert_eq!(l.refused_before_init(), 5);
    assert_eq!(open_fds(), before, "fds leaked");
}

#[test]
fn bad_regions_are_refused_before_mapping() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let before = open_fds();
    tell_all(&mut l, 0, &region_lies());
    l.poll(Duration::from_millis(5)).unwrap();
    assert_eq!(open_fds(), before, "fds leaked");
}

#[test]
fn bad_rings_are_refused() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let two = InterfaceConfig {
        s2m_rings: 2,
        m2s_rings: 2,
        ..cfg(0)
    };
    let mut l = listener(&dir, vec![two]);
    let before = open_fds();
    tell_all(&mut l, 0, &ring_lies());
    for _ in 0..10 {
        l.poll(Duration::from_millis(2)).unwrap();
    }
    // Among them, the fds after the first on one message were closed.
    assert_eq!(open_fds(), before, "fds leaked");
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
    tell_all(&mut l, 0, &flood_lies());
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
    let t = Instant::now();
    // The vanished peer's interface is taken again by the lie itself.
    tell_all(&mut l, 0, &stall_lies());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
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
