//! UDP super-packets on the AF_PACKET uplink against the real kernel: a run of one flow's
//! datagrams leaves as one (`GSO_UDP_L4`), a veth carries it whole, and either our receive
//! side (both ring layouts) or the kernel's own UDP stack gets back the datagrams it stands
//! for.

mod common;

use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use common::{Netns, one_queue};
use uplink::{AfPacketConfig, RxRing};

const WAIT: Duration = Duration::from_secs(5);

fn pool() -> Pool {
    Pool::new(PoolConfig {
        count: 4096,
        data_size: 2048,
        headroom: 128,
    })
    .unwrap()
}

/// A UDP/IPv4 datagram from 10.77.0.1 to 10.77.0.2 port 7777, from `port`, IPv4
/// identification `id`, UDP checksum 0 (none, as VXLAN sends), `len` payload bytes that
/// say which datagram it is.
fn datagram(dst: [u8; 6], port: u16, id: u16, len: usize) -> Vec<u8> {
    let mut payload: Vec<u8> = (0..len).map(|i| (i as u16 ^ id) as u8).collect();
    payload[..2].copy_from_slice(&id.to_be_bytes());
    let macs = testkit::Macs {
        src: [2, 0, 0, 0, 0x77, 1],
        dst,
    };
    let mut f = testkit::udp4_frame_ports(
        macs,
        [10, 77, 0, 1],
        [10, 77, 0, 2],
        64,
        (port, 7777),
        &payload,
    );
    f[18..20].copy_from_slice(&id.to_be_bytes());
    f[24..26].fill(0);
    let c = wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[40..42].fill(0);
    f
}

/// Three flows: 20 datagrams of 1000 bytes ending in one of 300 (a super-packet), one alone
/// (through the ring), 10 of 1200 (another super-packet).
fn three_flows(dst: [u8; 6]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = (0..20)
        .map(|i| datagram(dst, 1001, 100 + i, if i == 19 { 300 } else { 1000 }))
        .collect();
    v.push(datagram(dst, 1002, 500, 500));
    v.extend((0..10).map(|i| datagram(dst, 1003, 900 + i, 1200)));
    v
}

fn send_all(tx: &mut uplink::TxQueue, pool: &mut Pool, frames: &[Vec<u8>]) {
    let heads: Vec<u32> = frames.iter().map(|f| pool.from_bytes(f).unwrap()).collect();
    let st = tx.send(pool, &heads).unwrap();
    assert_eq!((st.consumed, st.sent), (frames.len(), frames.len()));
    pool.free_bulk(&heads);
}

/// The UDP datagrams to port 7777 `rx` delivers within `WAIT`, until `want` came.
fn recv_udp(rx: &mut uplink::RxQueue, pool: &mut Pool, want: usize) -> Vec<Vec<u8>> {
    let udp =
        |v: &[u8]| v.len() >= 42 && v[12..14] == [8, 0] && v[23] == 17 && v[36..38] == [0x1e, 0x61];
    common::recv_matching(rx, pool, (want, 256, WAIT), udp)
        .into_iter()
        .map(|(v, _)| v)
        .collect()
}

/// For each receive ring layout: an uplink on `u0` that sent [`three_flows`] to one on `h0`,
/// which has not received them yet.
fn three_flows_sent(ns: &Netns, each: impl Fn(uplink::TxQueue, uplink::RxQueue, Vec<Vec<u8>>)) {
    let rings = [
        ("frames", RxRing::Frames),
        ("blocks", RxRing::Blocks { timeout_ms: 1 }),
    ];
    for (name, ring) in rings {
        eprintln!("receiving ring of {name}");
        let (_rx_a, mut tx) = one_queue("u0", AfPacketConfig::default());
        let cfg = AfPacketConfig {
            rx_ring: Some(ring),
            ..AfPacketConfig::default()
        };
        let (rx, _tx_b) = one_queue("h0", cfg);
        let mut pool = pool();
        let sent = three_flows(ns.mac("h0"));
        send_all(&mut tx, &mut pool, &sent);
        each(tx, rx, sent);
    }
}

#[test]
fn runs_of_one_flow_leave_as_super_packets_and_arrive_as_their_datagrams() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    three_flows_sent(&ns, |tx, mut rx, sent| {
        let c = tx.counters().snapshot();
        assert_eq!((c.gso_sends, c.gso_segments, c.packets), (2, 30, 31));
        let bytes: usize = sent.iter().map(Vec::len).sum();
        assert_eq!(
            c.bytes, bytes as u64,
            "each datagram's bytes, headers included"
        );
        // The first frame stands for 20 datagrams: a call with room for 5 leaves it.
        let deadline = Instant::now() + WAIT;
        while !rx.pending() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        let (mut pool, mut heads) = (pool(), Vec::new());
        let st = rx.recv(&mut pool, &mut heads, 5);
        assert_eq!((heads.len(), st.dropped()), (0, 0), "taken without room");
        let got = recv_udp(&mut rx, &mut pool, sent.len());
        assert_eq!(got.len(), sent.len());
        for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
            assert!(g == s, "datagram {i} of {} bytes differs", s.len());
        }
        let r = rx.counters().snapshot();
        assert_eq!((r.truncated, r.gso, r.bad_frame, r.no_buffer), (0, 0, 0, 0));
        assert_eq!(pool.available(), pool.capacity());
    });
}

#[test]
fn the_kernel_takes_our_super_packets_as_the_datagrams_they_stand_for() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    ns.ip(&["addr", "add", "10.77.0.2/24", "dev", "h0"]);
    let sock = std::net::UdpSocket::bind("10.77.0.2:7777").unwrap();
    sock.set_read_timeout(Some(WAIT)).unwrap();
    let (_rx, mut tx) = one_queue("u0", AfPacketConfig::default());
    let mut pool = pool();
    let sent = three_flows(ns.mac("h0"));
    send_all(&mut tx, &mut pool, &sent);
    assert_eq!(tx.counters().snapshot().gso_sends, 2);
    let mut buf = [0u8; 2048];
    for (i, s) in sent.iter().enumerate() {
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        let port = u16::from_be_bytes([s[34], s[35]]);
        assert_eq!(from, std::net::SocketAddr::from(([10, 77, 0, 1], port)));
        assert!(
            buf[..n] == s[42..],
            "datagram {i} of {} bytes differs",
            s.len() - 42
        );
    }
}

#[test]
fn a_generator_queue_sends_every_datagram_as_it_is() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    let plain = AfPacketConfig {
        udp_gso: false,
        ..AfPacketConfig::default()
    };
    let (_rx_a, mut tx) = one_queue("u0", plain);
    let (mut rx, _tx_b) = one_queue("h0", AfPacketConfig::default());
    let mut pool = pool();
    let sent = three_flows(ns.mac("h0"));
    send_all(&mut tx, &mut pool, &sent);
    let c = tx.counters().snapshot();
    assert_eq!((c.gso_sends, c.packets), (0, 31));
    let got = recv_udp(&mut rx, &mut pool, sent.len());
    assert_eq!(got, sent);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_super_packet_without_buffers_for_all_is_dropped_and_counted_as_its_datagrams() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    three_flows_sent(&ns, |_tx, mut rx, _sent| {
        // Buffers for 11 datagrams, all in one call: not for the first super-packet's 20.
        let mut small = Pool::new(PoolConfig {
            count: 11,
            data_size: 2048,
            headroom: 128,
        })
        .unwrap();
        let got = recv_udp(&mut rx, &mut small, 11);
        assert_eq!(
            got.len(),
            11,
            "the lone datagram and the second super-packet's 10"
        );
        let r = rx.counters().snapshot();
        assert_eq!((r.no_buffer, r.packets), (20, 11));
        assert_eq!(small.available(), small.capacity());
    });
}
