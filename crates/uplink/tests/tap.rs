//! The tap device against the Linux kernel: created inside a pod namespace of its own, the
//! pod's stack sends UDP (small and jumbo, checksums left to us) and answers pings we write
//! (one buffer and chained), its name is refused when taken, and its deletion by the pod is
//! seen.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use common::{Netns, ip};
use uplink::netns::run_in;
use uplink::tap::{RxQueue, Tap, TapConfig, TapError};

const WAIT: Duration = Duration::from_secs(5);
const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0x77, 2];

fn pool() -> Pool {
    Pool::new(PoolConfig {
        count: 2048,
        ..PoolConfig::default()
    })
    .unwrap()
}

/// A pod namespace beside the test's own, deleted on drop.
struct Pod(String);

impl Pod {
    fn new(ns: &Netns) -> Pod {
        let name = format!("{}-pod", ns.name);
        ip(&["netns", "add", &name]).unwrap();
        let pod = Pod(name);
        run_in(&pod.path(), || {
            for k in ["all", "default"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{k}/disable_ipv6"), "1");
            }
        })
        .unwrap();
        pod
    }

    fn path(&self) -> std::path::PathBuf {
        uplink::netns::netns_path(&self.0)
    }

    fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.0.as_str()];
        all.extend_from_slice(args);
        ip(&all).unwrap();
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}

/// Reads every queue until `pick` accepts a frame or `WAIT` passes; every buffer goes back.
fn wait_frame(
    queues: &mut [RxQueue],
    pool: &mut Pool,
    mut pick: impl FnMut(&[u8], usize) -> bool,
) -> Option<Vec<u8>> {
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while Instant::now() < deadline {
        for q in queues.iter_mut() {
            out.clear();
            let st = q.recv(pool, &mut out, 64);
            assert!(!st.vanished);
            let mut found = None;
            for &h in &out {
                let mut v = Vec::new();
                pool.read_chain(h, &mut v);
                assert_eq!(v.len(), pool.meta(h).total_len as usize, "total_len");
                if found.is_none() && pick(&v, pool.chain_len(h)) {
                    found = Some(v);
                }
            }
            pool.free_bulk(&out);
            if found.is_some() {
                return found;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

fn udp_ok(frame: &[u8], port: u16) -> Option<bool> {
    let p = etherparse::SlicedPacket::from_ethernet(frame).ok()?;
    let Some(etherparse::NetSlice::Ipv4(ip4)) = &p.net else {
        return None;
    };
    let Some(etherparse::TransportSlice::Udp(u)) = &p.transport else {
        return None;
    };
    if u.destination_port() != port {
        return None;
    }
    let want = u
        .to_header()
        .calc_checksum_ipv4(&ip4.header().to_header(), u.payload())
        .ok()?;
    Some(u.checksum() == want)
}

#[test]
fn tap_carries_the_pods_traffic_both_ways() {
    let Some(ns) = Netns::enter() else { return };
    let pod = Pod::new(&ns);
    let tap = Tap::open(&TapConfig {
        name: "eth1".into(),
        netns: Some(pod.path()),
        queues: 2,
        mtu: Some(9000),
        mac: Some([2, 0, 0, 0, 0x55, 1]),
    })
    .unwrap();
    assert_eq!((tap.name(), tap.mtu()), ("eth1", 9000));
    assert_eq!(tap.mac(), [2, 0, 0, 0, 0x55, 1]);
    let pod_mac = tap.mac();
    pod.ip(&["addr", "add", "10.9.0.1/24", "dev", "eth1"]);
    pod.ip(&[
        "neigh",
        "add",
        "10.9.0.2",
        "lladdr",
        "02:00:00:00:77:02",
        "dev",
        "eth1",
        "nud",
        "permanent",
    ]);
    let (mut rx, mut tx): (Vec<_>, Vec<_>) = tap.into_queues().into_iter().unzip();
    let mut pool = pool();

    // The pod sends UDP: one small datagram and one of 8000 bytes (a chain); the kernel
    // leaves their checksums to the device, and we complete them.
    let sock = run_in(&pod.path(), || UdpSocket::bind("10.9.0.1:0"))
        .unwrap()
        .unwrap();
    for (port, len) in [(9001u16, 100usize), (9002, 8000)] {
        let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        sock.send_to(&payload, ("10.9.0.2", port)).unwrap();
        let mut buffers = 0;
        let f = wait_frame(&mut rx, &mut pool, |f, n| {
            buffers = n;
            udp_ok(f, port).is_some()
        })
        .unwrap_or_else(|| panic!("no UDP to port {port} from the pod"));
        assert_eq!(
            udp_ok(&f, port),
            Some(true),
            "checksum of the {len}-byte datagram"
        );
        assert_eq!(&f[..6], &OUR_MAC, "sent to our MAC");
        assert_eq!(buffers, if len > 2000 { 4 } else { 1 }, "buffers of {len}");
        assert!(f.ends_with(&payload));
    }
    let completed: u64 = rx
        .iter()
        .map(|q| q.counters().snapshot().csum_completed)
        .sum();
    assert!(completed >= 2, "checksums completed: {completed}");

    // We write pings to the pod (one buffer, then a 3000-byte chain); it answers.
    for (id, len) in [(1u16, 56usize), (2, 3000)] {
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let macs = testkit::Macs {
            src: OUR_MAC,
            dst: pod_mac,
        };
        let t = testkit::echo_request(id, 1);
        let v = testkit::icmp4_frame(macs, [10, 9, 0, 2], [10, 9, 0, 1], 64, t, &payload);
        let b = pool.from_bytes(&v).unwrap();
        assert_eq!(pool.chain_len(b), if len > 2000 { 2 } else { 1 });
        let st = tx[usize::from(id) % 2].send(&pool, &[b]);
        pool.free(b);
        assert_eq!((st.consumed, st.malformed, st.link_down), (1, 0, false));
        let reply = wait_frame(&mut rx, &mut pool, |f, _| {
            let Ok(p) = etherparse::SlicedPacket::from_ethernet(f) else {
                return false;
            };
            matches!(
                &p.transport,
                Some(etherparse::TransportSlice::Icmpv4(i))
                    if matches!(i.icmp_type(), etherparse::Icmpv4Type::EchoReply(e) if e.id == id)
            )
        })
        .unwrap_or_else(|| panic!("no echo reply {id}"));
        assert!(reply.ends_with(&payload), "reply {id} carries the payload");
    }
    let sent: u64 = tx.iter().map(|q| q.counters().snapshot().packets).sum();
    assert_eq!(sent, 2);
    drop((rx, tx));
    assert_eq!(pool.available(), pool.capacity(), "no buffer kept");
}

#[test]
fn tap_name_taken_vanished_namespace_and_fds() {
    let Some(ns) = Netns::enter() else { return };
    let pod = Pod::new(&ns);
    let cfg = TapConfig {
        name: "eth1".into(),
        netns: Some(pod.path()),
        queues: 1,
        mtu: None,
        mac: None,
    };
    // Created and closed many times: the device goes with its last fd each time (the fds
    // of the process are shared with the tests beside this one, so they are not counted
    // here; the daemon's test counts them).
    let eth1 = || ip(&["-n", &pod.0, "link", "show", "eth1"]).is_ok();
    for _ in 0..50 {
        let t = Tap::open(&cfg).unwrap();
        assert_eq!(t.mtu(), 1500);
        assert!(eth1());
        drop(t);
        assert!(!eth1(), "eth1 outlived its fds");
    }
    let t = Tap::open(&cfg).unwrap();
    match Tap::open(&cfg) {
        Err(TapError::Exists { name }) => assert_eq!(name, "eth1"),
        other => panic!("a second eth1: {other:?}"),
    }
    // Another name in the same namespace is fine.
    let other = Tap::open(&TapConfig {
        name: "eth2".into(),
        ..cfg.clone()
    })
    .unwrap();
    drop(other);
    // A namespace that does not exist is named in the error.
    let e = Tap::open(&TapConfig {
        netns: Some("/var/run/netns/veclane-no-such-ns".into()),
        ..cfg.clone()
    })
    .unwrap_err();
    assert!(e.to_string().contains("veclane-no-such-ns"), "{e}");

    // Our fds hold the pod's namespace (a tun fd's socket counts as a reference), so the
    // device outlives `ip netns del`; but the pod may delete it: reads say so, writes fail
    // cleanly.
    let (mut rx, mut tx): (Vec<_>, Vec<_>) = t.into_queues().into_iter().unzip();
    pod.ip(&["link", "del", "eth1"]);
    let mut pool = pool();
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    loop {
        let st = rx[0].recv(&mut pool, &mut out, 64);
        pool.free_bulk(&out);
        out.clear();
        if st.vanished {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the vanished device was not seen"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let b = pool.from_bytes(&[0u8; 60]).unwrap();
    let st = tx[0].send(&pool, &[b]);
    pool.free(b);
    assert_eq!(st.consumed, 0);
    assert!(st.vanished || st.link_down, "{st:?}");
}

/// A receive queue over a `SOCK_SEQPACKET` pair standing in for a tap, and the pod's end.
fn pod_socket() -> (RxQueue, std::os::fd::OwnedFd) {
    use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
    let (ours, pods) = socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    rustix::net::sockopt::set_socket_send_buffer_size(&pods, 1 << 20).unwrap();
    (RxQueue::from_fd(ours), pods)
}

/// What a hostile pod can write into its tap, fed to the receive path through a
/// `SOCK_SEQPACKET` pair (one message per read, as a tap gives): runts, a checksum offset
/// outside the frame, segmentation of a frame that is not TCP, a tiny segment size, header
/// lengths that lie. Each is dropped and counted; the worker's read budget holds; no buffer
/// is kept. (A frame larger than a read can take is refused by the length a tap's read
/// returns, the whole frame's; a socket returns what it copied, so that case needs a tap.)
#[test]
fn hostile_frames_from_a_pod_are_counted_and_dropped() {
    let (mut q, pods) = pod_socket();
    let mut pool = pool();
    let hdr = |flags: u8, gso: u8, gso_size: u16, start: u16, off: u16| {
        let mut h = vec![flags, gso, 0, 0];
        h.extend_from_slice(&gso_size.to_ne_bytes());
        h.extend_from_slice(&start.to_ne_bytes());
        h.extend_from_slice(&off.to_ne_bytes());
        h.extend_from_slice(&[0, 0]);
        h
    };
    let pod = testkit::Macs {
        src: [2, 0, 0, 0, 0, 1],
        dst: OUR_MAC,
    };
    let udp = testkit::udp4_frame_ports(pod, [10, 0, 0, 1], [10, 0, 0, 2], 64, (1, 2), &[7; 100]);
    let mut tcp = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], OUR_MAC)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1, 2, 0, 100)
        .write(&mut tcp, &[7; 3000])
        .unwrap();
    let mut lying = tcp.clone();
    lying[14 + 20 + 12] = 0xf0; // TCP header length 60, past a 54-byte frame's end below
    lying.truncate(60);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "runt",
            hdr(0, 0, 0, 0, 0).into_iter().chain([1, 2, 3]).collect(),
        ),
        ("no header at all", vec![1, 2, 3]),
        (
            "checksum offset past the frame",
            [hdr(1, 0, 0, 40, 200), udp.clone()].concat(),
        ),
        (
            "checksum start past the frame",
            [hdr(1, 0, 0, 4000, 6), udp.clone()].concat(),
        ),
        (
            "segmentation of UDP",
            [hdr(0, 1, 1400, 0, 0), udp.clone()].concat(),
        ),
        (
            "a 100-byte segment size",
            [hdr(0, 1, 100, 0, 0), tcp.clone()].concat(),
        ),
        (
            "a TCP header longer than the frame",
            [hdr(0, 1, 1400, 0, 0), lying].concat(),
        ),
        (
            "a GSO type we never announced",
            [hdr(0, 4, 1400, 0, 0), udp.clone()].concat(),
        ),
    ];
    for (what, m) in &cases {
        rustix::net::send(&pods, m, rustix::net::SendFlags::empty())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    let mut out = Vec::new();
    let mut reads = 0;
    loop {
        let st = q.recv(&mut pool, &mut out, 4);
        assert!(out.len() <= 4, "over the budget");
        pool.free_bulk(&out);
        out.clear();
        reads += 1;
        if st.no_buffer + st.gso + st.bad_frame == 0 {
            break;
        }
        assert!(reads < 100);
    }
    let c = q.counters().snapshot();
    assert_eq!(c.packets, 0, "{c:?}");
    assert_eq!(c.bad_frame + c.gso, cases.len() as u64, "{c:?}");
    assert_eq!(pool.available(), pool.capacity(), "no buffer kept");
}

/// A TCP super-frame from a pod is taken whole: one chain of its bytes, its segment size
/// kept, its checksum field the pseudo-header's sum whatever the pod put there (here a
/// lie), and nothing else of the header trusted; the read budget counts its buffers.
#[test]
fn a_super_frame_is_taken_whole() {
    let (mut q, pods) = pod_socket();
    let mut pool = pool();
    let payload: Vec<u8> = (0..60_000u32).map(|i| (i * 7) as u8).collect();
    let mut tcp = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], OUR_MAC)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1, 2, 0, 100)
        .write(&mut tcp, &payload)
        .unwrap();
    let mut hdr = vec![1u8, 1, 0, 0];
    hdr.extend_from_slice(&1448u16.to_ne_bytes());
    hdr.extend_from_slice(&7u16.to_ne_bytes()); // a checksum start that lies
    hdr.extend_from_slice(&3u16.to_ne_bytes());
    hdr.extend_from_slice(&[0, 0]);
    let m = [hdr, tcp.clone()].concat();
    for _ in 0..3 {
        rustix::net::send(&pods, &m, rustix::net::SendFlags::empty()).unwrap();
    }
    let mut out = Vec::new();
    // 30 buffers each: a budget of 40 takes two.
    let st = q.recv(&mut pool, &mut out, 40);
    assert_eq!(
        (st.packets, st.super_frames, out.len()),
        (2, 2, 2),
        "{st:?}"
    );
    let st = q.recv(&mut pool, &mut out, 40);
    assert_eq!((st.packets, st.super_frames), (1, 1), "{st:?}");
    for &b in &out {
        assert_eq!(pool.meta(b).gso_size, 1448);
        assert_eq!(pool.meta(b).total_len as usize, tcp.len());
        let mut v = Vec::new();
        pool.read_chain(b, &mut v);
        let at = 14 + 20 + 16;
        let sum = wire::checksum::fold(wire::checksum::ipv4_pseudo_header(
            [10, 0, 0, 1].into(),
            [10, 0, 0, 2].into(),
            6,
            (tcp.len() - 34) as u16,
        ));
        assert_eq!(v[at..at + 2], sum.to_be_bytes());
        assert_eq!(v[..at], tcp[..at]);
        assert_eq!(v[at + 2..], tcp[at + 2..]);
    }
    pool.free_bulk(&out);
    assert_eq!(q.counters().snapshot().super_frames, 3);
    assert_eq!(pool.available(), pool.capacity(), "no buffer kept");
}
