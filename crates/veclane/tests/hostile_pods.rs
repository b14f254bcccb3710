//! Two hostile memif pods at once against the daemon, beside two good pods: each hostile pod
//! completes the handshake by hand and then, from a thread of its own, writes whatever it
//! likes into its rings (descriptors naming any region, offset, length and chain flag; heads
//! moved by any amount) and kicks its interrupts, while the good pods exchange numbered
//! frames through the daemon. Nothing may crash or stall the daemon, every good frame arrives
//! intact and in order, the good pods' connections never blink, and what the hostile pods did
//! is counted on their own interfaces (or ended their own connections).

mod daemon_common;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use daemon_common::*;
use memif::msg::{AddRing, FixedStr, Init, Mode, Msg, VERSION};
use memif::ring::{Ring, RingLayout};
use memif::shm::SharedMemory;
use memif::sock::Channel;

const POD0: [u8; 6] = [2, 0, 0, 0, 0xb0, 0];
const POD1: [u8; 6] = [2, 0, 0, 0, 0xb1, 0];

/// Four master interfaces on one socket: 0 and 1 the good pods' (10.0.0.0/24, 10.0.1.0/24),
/// 2 and 3 the hostile ones'.
fn config() -> String {
    let mut c = String::from("[daemon]\nmode = \"polling\"\nbuffers = 4096\n\n");
    for id in 0..4 {
        c.push_str(&format!(
            "[[interface]]\nsocket = \"memif.sock\"\nid = {id}\nrole = \"master\"\n\
             mac = \"02:00:00:00:00:a{id}\"\naddresses = [\"10.0.{id}.1/24\"]\n\n"
        ));
    }
    c.push_str(
        "[[neighbor]]\ninterface = \"memif0/0\"\nip = \"10.0.0.2\"\nmac = \"02:00:00:00:b0:00\"\n\n\
         [[neighbor]]\ninterface = \"memif0/1\"\nip = \"10.0.1.2\"\nmac = \"02:00:00:00:b1:00\"\n",
    );
    c
}

/// Where each ring starts in the hostile pod's one region, and the buffers after them.
const RING_AT: [u64; 2] = [0, 16512];
const BUFFERS_AT: u64 = 2 * 16512;
const BUF: u64 = 2048;

/// A hostile pod after its handshake: its rings, to scribble over.
struct Hostile {
    _chan: Channel,
    _shm: Arc<SharedMemory>,
    s2m: Ring,
    m2s: Ring,
    irqs: [OwnedFd; 2],
}

fn eventfd() -> OwnedFd {
    rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )
    .unwrap()
}

/// The daemon's next message to `c`, waited for up to 5 s.
fn reply(c: &Channel) -> Msg {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(r) = c.recv().unwrap() {
            return Msg::parse(&r.data.unwrap()).unwrap();
        }
        assert!(Instant::now() < deadline, "no reply from the daemon");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Connects interface `id` by hand: HELLO, INIT, one sealed region with two rings of 1024
/// slots and their buffers, CONNECT.
fn hostile(socket: &std::path::Path, id: u32) -> Hostile {
    let chan = Channel::connect(&memif::SocketPath::File(socket.to_path_buf())).unwrap();
    assert!(matches!(reply(&chan), Msg::Hello(_)));
    chan.send(
        &Msg::Init(Init {
            version: VERSION,
            id,
            mode: Mode::Ethernet,
            secret: FixedStr::default(),
            name: FixedStr::new("hostile"),
        }),
        None,
    )
    .unwrap();
    assert_eq!(reply(&chan), Msg::Ack);
    let size = (BUFFERS_AT + 1024 * BUF) as usize;
    let shm = Arc::new(SharedMemory::create("hostile", size).unwrap());
    let ring = |at| Ring::new(shm.clone(), at, 10, RingLayout::CacheLine64).unwrap();
    for at in RING_AT {
        ring(at).init();
    }
    let region = Msg::AddRegion {
        index: 0,
        size: size as u64,
    };
    chan.send(&region, shm.fd()).unwrap();
    assert_eq!(reply(&chan), Msg::Ack);
    let irqs = [eventfd(), eventfd()];
    for (s2m, (at, irq)) in [true, false].into_iter().zip(RING_AT.iter().zip(&irqs)) {
        let add = Msg::AddRing(AddRing {
            flags: u16::from(s2m),
            index: 0,
            region: 0,
            offset: *at as u32,
            log2_ring_size: 10,
            private_hdr_size: 0,
        });
        chan.send(&add, Some(irq.as_fd())).unwrap();
        assert_eq!(reply(&chan), Msg::Ack);
    }
    let connect = Msg::Connect {
        if_name: FixedStr::new("hostile"),
    };
    chan.send(&connect, None).unwrap();
    assert!(matches!(reply(&chan), Msg::Connected { .. }));
    Hostile {
        _chan: chan,
        s2m: ring(RING_AT[0]),
        m2s: ring(RING_AT[1]),
        _shm: shm,
        irqs,
    }
}

/// Writes lies into `h`'s rings until `stop`, a different one each round (xorshift from
/// `seed`, the same sequence every run), kicking its interrupts now and then.
fn scribble(h: Hostile, seed: u64, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        // All of it (the control socket too), not only the fields used below.
        let h = h;
        let (mut x, mut rounds) = (seed, 0u64);
        while !stop.load(Ordering::Relaxed) {
            let (slot, d) = memif::testing::next_lie(&mut x, BUFFERS_AT, 12_000);
            h.s2m.set_desc(slot, d);
            h.m2s.set_desc(slot, d);
            // Heads moved anywhere within a ring's reach of the daemon's tail (served, every
            // descriptor a lie), and now and then past it (which ends the connection).
            let reach = if x.is_multiple_of(5_000) { 2048 } else { 1024 };
            if x.is_multiple_of(7) {
                h.s2m
                    .set_head(h.s2m.tail().wrapping_add((x >> 50) as u16 % reach));
            }
            if x.is_multiple_of(11) {
                h.m2s
                    .set_head(h.m2s.tail().wrapping_add((x >> 50) as u16 % reach));
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

    // The good pods, pod 0 to pod 1, numbered frames in bursts, for about two seconds.
    let (m0, m1) = (mac("02:00:00:00:00:a0"), mac("02:00:00:00:00:a1"));
    let mut next = 0u32;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
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
    stop.store(true, Ordering::Relaxed);
    let rounds: Vec<u64> = threads.map(|t| t.join().unwrap()).into_iter().collect();
    assert!(
        rounds.iter().all(|&r| r > 1000),
        "the hostile pods hardly ran: {rounds:?}"
    );

    // The daemon answers, the good pods never blinked, and the lies are the liars' own.
    let all = d.interfaces();
    for i in &all {
        eprintln!(
            "{}: connected {} connects {} disconnects {} rx {} rx errors {} ({:?})",
            i.name,
            i.connected,
            i.connects,
            i.disconnects,
            i.rx_packets,
            i.rx_errors,
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
    for bad in ["memif0/2", "memif0/3"] {
        let i = all.iter().find(|i| i.name == bad).unwrap();
        assert!(
            i.rx_errors > 0 || i.disconnects > 0,
            "{bad}: nothing counted: {i:?}"
        );
    }
    let _ = &mut pods;
    assert!(d.terminate().success());
}
