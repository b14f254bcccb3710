//! The daemon as the memif secondary (slave): it plays the L3FWD pod of the reference system
//! while this test is the memif primary (master) that owns the socket, sends frames into
//! interface 0 and receives what the daemon routed out of interface 1. The listener goes away
//! and comes back; the daemon must survive and reconnect on its own.

mod daemon_common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use daemon_common::*;
use memif::{Event, InterfaceConfig, Listener, PrimaryQueues, SocketPath};

const MAC0: &str = "02:00:00:00:00:a0";
const MAC1: &str = "02:00:00:00:00:a1";
/// The host behind interface 0 (the sender) and the static neighbour behind interface 1.
const HOST0: [u8; 6] = [2, 0, 0, 0, 0xb0, 0];
const NEIGH1: &str = "02:00:00:00:b1:00";

fn slave_config(socket: &Path) -> String {
    let s = socket.display();
    format!(
        r#"
[daemon]
mode = "interrupt"
buffers = 4096

[[interface]]
socket = "{s}"
id = 0
role = "slave"
mac = "{MAC0}"
addresses = ["10.0.0.1/24"]

[[interface]]
socket = "{s}"
id = 1
role = "slave"
mac = "{MAC1}"
addresses = ["10.0.1.1/24"]

[[neighbor]]
interface = "memif0/1"
ip = "10.0.1.2"
mac = "{NEIGH1}"
"#
    )
}

/// The memif primary this test plays: one listener, interfaces 0 and 1, a local pool.
struct Master {
    listener: Listener,
    queues: HashMap<u32, PrimaryQueues>,
    pool: Pool,
}

impl Master {
    fn bind(socket: &Path) -> Master {
        let cfg = |id| InterfaceConfig {
            id,
            name: format!("host{id}"),
            ..Default::default()
        };
        Master {
            listener: Listener::bind(
                &SocketPath::File(socket.to_path_buf()),
                vec![cfg(0), cfg(1)],
            )
            .unwrap(),
            queues: HashMap::new(),
            pool: Pool::new(PoolConfig {
                count: 4096,
                ..Default::default()
            })
            .unwrap(),
        }
    }

    /// Polls the listener until the daemon connected both interfaces.
    fn wait_connected(&mut self, d: &Daemon) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.queues.len() < 2 {
            assert!(
                Instant::now() < deadline,
                "the daemon did not connect: {:?}\n{}",
                self.listener.interfaces(),
                d.ok("show interface")
            );
            self.listener.poll(Duration::from_millis(10)).unwrap();
            while let Some(e) = self.listener.next_event() {
                match e {
                    Event::Connected { id, queues, .. } => {
                        self.queues.insert(id, queues);
                    }
                    Event::Disconnected { id, .. } => {
                        self.queues.remove(&id);
                    }
                }
            }
        }
    }

    fn send(&mut self, id: u32, frames: &[Vec<u8>]) {
        let mut done = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while done < frames.len() {
            assert!(Instant::now() < deadline, "cannot send: {done} sent");
            let bufs: Vec<u32> = frames[done..]
                .iter()
                .map(|f| self.pool.from_bytes(f).expect("pool has room"))
                .collect();
            let q = &mut self.queues.get_mut(&id).unwrap().tx[0];
            let n = q.send(&self.pool, &bufs).expect("link up");
            // The caller keeps every buffer, sent or not.
            self.pool.free_bulk(&bufs);
            done += n;
            if done < frames.len() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// Receives until `want` frames arrived or `timeout` passed.
    fn recv(&mut self, id: u32, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut heads = Vec::new();
        let deadline = Instant::now() + timeout;
        while got.len() < want && Instant::now() < deadline {
            heads.clear();
            let q = &mut self.queues.get_mut(&id).unwrap().rx[0];
            let n = q.recv(&mut self.pool, &mut heads, 256).expect("link up");
            for &b in &heads {
                let mut v = Vec::new();
                self.pool.read_chain(b, &mut v);
                self.pool.free(b);
                got.push(v);
            }
            if n == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        got
    }
}

/// `show interface`, typed.
fn interfaces(d: &Daemon) -> HashMap<String, api::InterfaceInfo> {
    d.interfaces()
        .into_iter()
        .map(|i| (i.name.clone(), i))
        .collect()
}

/// Waits until `f` holds for `show interface`.
fn wait_for(d: &Daemon, what: &str, f: impl Fn(&HashMap<String, api::InterfaceInfo>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f(&interfaces(d)) {
        assert!(
            Instant::now() < deadline,
            "{what}:\n{}\n{}",
            d.ok("show interface"),
            d.ok("show errors")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Frame `i` of the test: 64..=1500 bytes, its sequence number first in the payload.
fn frame(i: usize) -> Vec<u8> {
    let size = 64 + (i * 397) % 1437;
    let payload = testkit::seq_payload(i as u32, size - 42);
    udp(HOST0, mac(MAC0), [10, 0, 0, 2], [10, 0, 1, 2], 64, &payload)
}

/// Checks `got` is `frame(first..)` routed: MACs rewritten, TTL 63, checksum valid, payload
/// intact, in order.
fn check_forwarded(got: &[Vec<u8>], first: usize) {
    for (k, f) in got.iter().enumerate() {
        let i = first + k;
        let sent = frame(i);
        assert_eq!(f.len(), sent.len(), "frame {i}: length");
        let p = etherparse::SlicedPacket::from_ethernet(f).unwrap();
        let Some(etherparse::LinkSlice::Ethernet2(e)) = &p.link else {
            panic!("frame {i}: not Ethernet II")
        };
        assert_eq!(
            (e.source(), e.destination()),
            (mac(MAC1), mac(NEIGH1)),
            "frame {i}: MACs"
        );
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
            panic!("frame {i}: not IPv4")
        };
        let h = ip.header();
        assert_eq!(h.ttl(), 63, "frame {i}: TTL");
        assert_eq!(
            h.to_header().calc_header_checksum(),
            h.header_checksum(),
            "frame {i}: IP checksum"
        );
        assert_eq!(
            (h.source(), h.destination()),
            ([10, 0, 0, 2], [10, 0, 1, 2]),
            "frame {i}: addresses"
        );
        let Some(etherparse::TransportSlice::Udp(u)) = &p.transport else {
            panic!("frame {i}: not UDP")
        };
        assert_eq!(u.payload(), &sent[42..], "frame {i}: payload (or order)");
    }
}

#[test]
fn daemon_plays_the_l3fwd_pod_as_memif_slave() {
    let sock_dir = tempfile::tempdir().unwrap();
    let socket = sock_dir.path().join("l3fwd.sock");
    // The daemon first, with nobody listening yet: it keeps trying.
    let d = Daemon::start(&slave_config(&socket));
    let ifs = interfaces(&d);
    assert_eq!(ifs.len(), 2, "{ifs:?}");
    for (name, id, m) in [("memif0/0", 0, MAC0), ("memif0/1", 1, MAC1)] {
        let i = &ifs[name];
        let api::DeviceInfo::Memif {
            role,
            id: got,
            socket: s,
            max_rx_queues,
            max_tx_queues,
            ..
        } = &i.device
        else {
            panic!("not memif: {i:?}")
        };
        // Not connected: no queues yet, the ones it will ask for shown as its limits.
        assert_eq!((i.rx_queues, i.tx_queues), (0, 0), "{i:?}");
        assert!(*max_rx_queues >= 1 && *max_tx_queues >= 1, "{i:?}");
        assert_eq!(
            (role.name(), *got, i.mac.to_string().as_str(), i.connected),
            ("slave", id, m, false),
            "{i:?}"
        );
        assert_eq!(Path::new(s), socket, "{i:?}");
    }

    let mut m = Master::bind(&socket);
    m.wait_connected(&d);
    wait_for(&d, "the daemon reports both interfaces connected", |i| {
        i.values().all(|i| i.connected)
    });
    let text = d.ok("show interface");
    for (name, id) in [("memif0/0", 0), ("memif0/1", 1)] {
        let line = text
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cols[2..4], ["up", "up"], "admin and link up:\n{text}");
        assert!(
            text.contains(&format!("memif slave id {id} socket {}", socket.display())),
            "{text}"
        );
    }

    // 500 frames of 64..1500 bytes into interface 0, routed out of interface 1.
    let frames: Vec<Vec<u8>> = (0..500).map(frame).collect();
    m.send(0, &frames);
    let got = m.recv(1, frames.len(), Duration::from_secs(10));
    assert_eq!(
        got.len(),
        frames.len(),
        "{}\n{}",
        d.ok("show errors"),
        d.ok("show interface")
    );
    check_forwarded(&got, 0);
    assert!(
        m.recv(1, 1, Duration::from_millis(200)).is_empty(),
        "nothing else leaves interface 1"
    );
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    wait_for(
        &d,
        "counters: 500 in on memif0/0, 500 out on memif0/1",
        |i| i["memif0/0"].rx_packets == 500 && i["memif0/1"].tx_packets == 500,
    );
    let ifs = interfaces(&d);
    assert_eq!(
        (
            ifs["memif0/0"].rx_bytes,
            ifs["memif0/1"].tx_bytes,
            ifs["memif0/0"].tx_packets,
            ifs["memif0/1"].rx_packets
        ),
        (bytes, bytes, 0, 0),
        "{ifs:?}"
    );
    assert_eq!(
        (ifs["memif0/0"].rx_errors, ifs["memif0/1"].tx_no_room),
        (0, 0)
    );

    // The daemon answers ARP for its address on interface 0.
    m.send(
        0,
        &[arp(
            1,
            HOST0,
            [10, 0, 0, 2],
            [0; 6],
            [10, 0, 0, 1],
            [0xff; 6],
        )],
    );
    let r = m.recv(0, 1, Duration::from_secs(5));
    assert_eq!(r.len(), 1, "no ARP reply: {}", d.ok("show errors"));
    let r = &r[0];
    assert_eq!(&r[0..6], &HOST0, "reply to the asker");
    assert_eq!(&r[6..12], &mac(MAC0), "from memif0/0");
    assert_eq!(&r[12..14], &[8, 6], "ARP");
    assert_eq!(&r[20..22], &[0, 2], "a reply");
    assert_eq!(&r[22..28], &mac(MAC0), "sender MAC");
    assert_eq!(&r[28..32], &[10, 0, 0, 1], "sender IP");
    assert_eq!(&r[32..38], &HOST0, "target MAC");
    assert_eq!(&r[38..42], &[10, 0, 0, 2], "target IP");

    // The peer vanishes: the daemon stays up and reports the links down.
    drop(m);
    let v = d.ok("show version");
    assert!(v.contains("veclane"), "{v}");
    wait_for(&d, "both links down after the peer left", |i| {
        i.values().all(|i| !i.connected && i.disconnects >= 1)
    });
    let text = d.ok("show interface");
    let line = text.lines().find(|l| l.starts_with("memif0/0")).unwrap();
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[2..4], ["up", "down"], "admin up, link down:\n{text}");
    std::thread::sleep(Duration::from_millis(700));
    let v = d.ok("show version");
    assert!(
        v.contains("veclane"),
        "alive after a reconnect attempt: {v}"
    );

    // A new primary on the same path: the slave reconnects on its own and forwards again.
    let mut m = Master::bind(&socket);
    m.wait_connected(&d);
    wait_for(&d, "both links up again", |i| {
        i.values().all(|i| i.connected && i.connects >= 2)
    });
    m.send(0, &frames[..20]);
    let got = m.recv(1, 20, Duration::from_secs(10));
    assert_eq!(got.len(), 20, "after reconnect: {}", d.ok("show errors"));
    check_forwarded(&got, 0);
    wait_for(&d, "counters after the reconnect", |i| {
        i["memif0/1"].tx_packets == 520
    });
}

/// As the slave, with `use-dma` on the software DSA model (faults injected): the receive
/// copies out of our own slots go to the engine as batches (the short ones made at once), and
/// the frames still arrive byte for byte and in order.
#[test]
fn slave_receive_goes_through_the_dma_engine() {
    let sock_dir = tempfile::tempdir().unwrap();
    let socket = sock_dir.path().join("l3fwd.sock");
    let cfg = slave_config(&socket)
        .replace(
            "buffers = 4096",
            "buffers = 4096\ndsa-queue = \"model\"\ndsa-model-fault-every = 3",
        )
        .replace("role = \"slave\"", "role = \"slave\"\nuse-dma = true");
    let d = Daemon::start(&cfg);
    let mut m = Master::bind(&socket);
    m.wait_connected(&d);
    wait_for(&d, "both interfaces connected", |i| {
        i.values().all(|i| i.connected)
    });
    let frames: Vec<Vec<u8>> = (0..300).map(frame).collect();
    for chunk in frames.chunks(30) {
        m.send(0, chunk);
        std::thread::sleep(Duration::from_millis(2));
    }
    let got = m.recv(1, frames.len(), Duration::from_secs(10));
    assert_eq!(got.len(), frames.len(), "{}", d.ok("show errors"));
    check_forwarded(&got, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = d.api().call(&api::Request::ShowCopyEngine).unwrap();
        let api::Reply::CopyEngine { info } = r else {
            panic!("{r:?}")
        };
        let rx = info
            .engines
            .iter()
            .find(|e| e.node == "memif-input" && e.role == "use-dma")
            .unwrap_or_else(|| panic!("no use-dma engine on memif-input: {info:?}"));
        // Copies shorter than the engine's inline threshold (256 B) are made at once.
        let long = frames.iter().filter(|f| f.len() >= 256).count() as u64;
        if rx.copies >= long {
            assert!(rx.descriptors > 0 && rx.recovered > 0, "{rx:?}");
            assert!(rx.tripped.is_none(), "{rx:?}");
            assert!(
                rx.short >= frames.len() as u64 - long,
                "the short ones, counted: {rx:?}"
            );
            // Our own regions, which the device reads from, were faulted in for it.
            assert!(
                info.registered
                    .iter()
                    .any(|r| r.contains(" regions: ") && r.ends_with("populated")),
                "{info:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{rx:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
