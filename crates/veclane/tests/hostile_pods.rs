//! Two hostile memif pods at once against the daemon, beside two good pods: each hostile pod
//! completes the handshake by hand and then, from a thread of its own, writes whatever it
//! likes into its rings (descriptors naming any region, offset, length and chain flag; heads
//! moved by any amount) and kicks its interrupts, while the good pods exchange numbered
//! frames through the daemon. Nothing may crash or stall the daemon, every good frame arrives
//! intact and in order, the good pods' connections never blink, and what the hostile pods did
//! is counted on their own interfaces (or ended their own connections).

mod daemon_common;

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use daemon_common::*;
use memif::ring::Desc;
use memif::testing::evil::{EvilConnected, RINGS, Remote, connect_by_hand, eventfd};

const POD0: [u8; 6] = [2, 0, 0, 0, 0xb0, 0];
const POD1: [u8; 6] = [2, 0, 0, 0, 0xb1, 0];

/// Four master interfaces on one socket: 0 and 1 the good pods' (10.0.0.0/24, 10.0.1.0/24),
/// 2 and 3 the hostile ones' (at most two rings each way, as `memif::testing::lies` wants).
fn config() -> String {
    let mut c = String::from("[daemon]\nmode = \"polling\"\nbuffers = 4096\n\n");
    for id in 0..4 {
        c.push_str(&format!(
            "[[interface]]\nsocket = \"memif.sock\"\nid = {id}\nrole = \"master\"\n\
             mac = \"02:00:00:00:00:a{id}\"\naddresses = [\"10.0.{id}.1/24\"]\n"
        ));
        if id >= 2 {
            c.push_str("rx-queues = 2\ntx-queues = 2\n");
        }
        c.push('\n');
    }
    for id in 2..4 {
        c.push_str(&format!(
            "[[neighbor]]\ninterface = \"memif0/{id}\"\nip = \"10.0.{id}.2\"\n\
             mac = \"02:00:00:00:b{id}:00\"\n\n"
        ));
    }
    c.push_str(
        "[[neighbor]]\ninterface = \"memif0/0\"\nip = \"10.0.0.2\"\nmac = \"02:00:00:00:b0:00\"\n\n\
         [[neighbor]]\ninterface = \"memif0/1\"\nip = \"10.0.1.2\"\nmac = \"02:00:00:00:b1:00\"\n",
    );
    c
}

/// A hostile pod after its handshake (done by hand): its rings, to scribble over, and their
/// eventfds (S2M, M2S), which it shares with the daemon.
struct Hostile {
    pod: EvilConnected,
    irqs: [OwnedFd; 2],
}

fn hostile(socket: &std::path::Path, id: u32) -> Hostile {
    let irqs = [eventfd(), eventfd()];
    let socket = memif::SocketPath::File(socket.to_path_buf());
    let pod = connect_by_hand(&mut Remote(socket), id, &irqs);
    Hostile { pod, irqs }
}

/// Writes lies into `h`'s rings until `stop`, a different one each round (xorshift from
/// `seed`, the same sequence every run), kicking its interrupts now and then.
fn scribble(h: Hostile, seed: u64, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        // All of it (the control socket too), not only the fields used below.
        let h = h;
        let (mut x, mut rounds) = (seed, 0u64);
        while !stop.load(Ordering::Relaxed) {
            let (slot, d) = memif::testing::next_lie(&mut x, RINGS, 12_000);
            h.pod.s2m.set_desc(slot, d);
            h.pod.m2s.set_desc(slot, d);
            // Heads moved anywhere within a ring's reach of the daemon's tail (served, every
            // descriptor a lie), and now and then past it (which ends the connection).
            let reach = if x.is_multiple_of(5_000) { 2048 } else { 1024 };
            if x.is_multiple_of(7) {
                h.pod
                    .s2m
                    .set_head(h.pod.s2m.tail().wrapping_add((x >> 50) as u16 % reach));
            }
            if x.is_multiple_of(11) {
                h.pod
                    .m2s
                    .set_head(h.pod.m2s.tail().wrapping_add((x >> 50) as u16 % reach));
            }
            if x.is_multiple_of(13) {
                for irq in &h.irqs {
                    let _ = rustix::io::write(irq, &1u64.to_ne_bytes());
                }
            }
            rounds += 1;
            if rounds.is_multiple_of(64) {
                std::thread::yield_now();
            }
        }
        rounds
    })
}

#[test]
fn two_hostile_pods_at_once_hurt_only_themselves() {
    let mut d = Daemon::start(&config());
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    let stop = Arc::new(AtomicBool::new(false));
    let threads = [(2, 0x9e37_79b9_7f4a_7c15), (3, 0x2545_f491_4f6c_dd1d)]
        .map(|(id, seed)| scribble(hostile(&d.path("memif.sock"), id), seed, stop.clone()));
    let until = Instant::now() + Duration::from_secs(2);
    exchange(&d, &mut pods, |_| Instant::now() < until);
    stop.store(true, Ordering::Relaxed);
    let rounds: Vec<u64> = threads.map(|t| t.join().unwrap()).into_iter().collect();
    assert!(
        rounds.iter().all(|&r| r > 1000),
        "the hostile pods hardly ran: {rounds:?}"
    );
    // The lies are the liars' own: counted on their interfaces, or their connections ended.
    for i in good_pods_unhurt(&d) {
        assert!(
            i.rx_errors > 0 || i.disconnects > 0,
            "{}: nothing counted: {i:?}",
            i.name
        );
    }
    let _ = &mut pods;
    assert!(d.terminate().success());
}

/// Every lie of `memif::testing::lies` (malformed and out-of-order messages, bad regions and
/// rings, floods of fds and messages, stalls, peers that vanish), told by two hostile pods at
/// once, each from a thread of its own, to the daemon started as its packaged unit starts it,
/// while the good pods exchange numbered frames: each lie earns its DISCONNECT with its
/// reason, the good pods never blink, and the daemon holds the fds it held before.
#[test]
fn every_handshake_lie_from_two_pods_at_once_under_the_units_limits() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut d = Daemon::start_as_unit(&config(), log.path());
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    // Once the API's connections of the wait above are closed too.
    std::thread::sleep(Duration::from_millis(200));
    let fds = fd_count(d.pid());
    let socket = memif::SocketPath::File(d.path("memif.sock"));
    let liars = [2, 3].map(|id| {
        let socket = socket.clone();
        std::thread::spawn(move || {
            let lies = memif::testing::lies::all();
            memif::testing::lies::tell_all(&mut Remote(socket), id, &lies);
            lies.len()
        })
    });
    let frames = exchange(&d, &mut pods, |_| liars.iter().any(|t| !t.is_finished()));
    let told: Vec<usize> = liars.map(|t| t.join().unwrap()).into();
    eprintln!("{told:?} lies told while the good pods exchanged {frames} frames");
    assert!(told.iter().all(|&n| n >= 30), "{told:?}");
    for i in good_pods_unhurt(&d) {
        assert!(
            !i.connected && i.last_disconnect_reason.is_some(),
            "{}: {i:?}",
            i.name
        );
    }

    // Then both connect and make the eventfds they share with the daemon blocking, the one
    // the daemon signals them on full: a worker that wrote to it would block, and every
    // queue on it with it. Frames for them go out with the good pods' exchange.
    let stuck = [2, 3].map(|id| {
        let h = hostile(&d.path("memif.sock"), id);
        for fd in &h.irqs {
            let fl = rustix::fs::fcntl_getfl(fd).unwrap();
            rustix::fs::fcntl_setfl(fd, fl - rustix::fs::OFlags::NONBLOCK).unwrap();
        }
        rustix::io::write(&h.irqs[1], &0xffff_ffff_ffff_fffeu64.to_ne_bytes()).unwrap();
        for slot in 0..1024u16 {
            let offset = (RINGS + u64::from(slot) * 2048) as u32;
            let d = Desc {
                flags: 0,
                region: 0,
                length: 2048,
                offset,
                metadata: 0,
            };
            h.pod.m2s.set_desc(slot, d);
        }
        h.pod.m2s.set_head(1024);
        h
    });
    d.wait_connected(4);
    let m0 = mac("02:00:00:00:00:a0");
    let until = Instant::now() + Duration::from_secs(1);
    let mut rounds = 0;
    exchange(&d, &mut pods, |pods| {
        for dst in [[10, 0, 2, 2], [10, 0, 3, 2]] {
            let f = udp(POD0, m0, [10, 0, 0, 2], dst, 64, &[rounds as u8; 32]);
            pods.send(0, &[f]);
        }
        rounds += 1;
        Instant::now() < until
    });
    for i in good_pods_unhurt(&d) {
        assert!(i.connected && i.tx_packets > 0, "{}: {i:?}", i.name);
    }
    drop(stuck);
    // The liars are gone: what they cost the daemon is given back.
    let deadline = Instant::now() + Duration::from_secs(5);
    while fd_count(d.pid()) != fds && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fd_count(d.pid()), fds, "the daemon kept fds of the liars");
    let log_text = std::fs::read_to_string(log.path()).unwrap();
    assert!(!log_text.contains("panicked"), "{log_text}");
    let _ = &mut pods;
    assert!(d.terminate().success(), "{log_text}");
}

/// Pod 0 sends numbered frames to pod 1 through the daemon in bursts of 32 while `go_on`
/// (which may send more) says so; each must arrive intact and in order. The number of frames exchanged.
fn exchange(d: &Daemon, pods: &mut Pods, mut go_on: impl FnMut(&mut Pods) -> bool) -> u32 {
    let (m0, m1) = (mac("02:00:00:00:00:a0"), mac("02:00:00:00:00:a1"));
    let mut next = 0u32;
    while go_on(pods) {
        let burst: Vec<Vec<u8>> = (next..next + 32)
            .map(|i| {
                udp(
                    POD0,
                    m0,
                    [10, 0, 0, 2],
                    [10, 0, 1, 2],
                    64,
                    &i.to_be_bytes().repeat(8),
                )
            })
            .collect();
        pods.send(0, &burst);
        let got = pods.recv(1, burst.len(), Duration::from_secs(5));
        assert_eq!(got.len(), burst.len(), "{}", d.ok("show errors"));
        for (k, f) in got.iter().enumerate() {
            assert_eq!(&f[..6], &POD1, "frame {}", next as usize + k);
            assert_eq!(&f[6..12], &m1);
            let want = (next + k as u32).to_be_bytes().repeat(8);
            assert_eq!(
                &f[42..],
                &want[..],
                "frame {} out of order or damaged",
                next as usize + k
            );
        }
        next += 32;
    }
    next
}

/// The daemon answers and the good pods' interfaces (0 and 1) never blinked and counted no
/// error; the hostile pods' interfaces (2 and 3) are returned.
fn good_pods_unhurt(d: &Daemon) -> Vec<api::InterfaceInfo> {
    let all = d.interfaces();
    for i in &all {
        eprintln!(
            "{}: connected {} connects {} disconnects {} rx {} rx errors {} tx {} ({:?})",
            i.name,
            i.connected,
            i.connects,
            i.disconnects,
            i.rx_packets,
            i.rx_errors,
            i.tx_packets,
            i.last_disconnect_reason
        );
    }
    for good in ["memif0/0", "memif0/1"] {
        let i = all.iter().find(|i| i.name == good).unwrap();
        assert!(
            i.connected && i.connects == 1 && i.disconnects == 0 && i.rx_errors == 0,
            "{i:?}"
        );
    }
    all.into_iter()
        .filter(|i| ["memif0/2", "memif0/3"].contains(&i.name.as_str()))
        .collect()
}
