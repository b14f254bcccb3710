//! The AF_PACKET uplink against the real kernel: veth pairs in a network namespace per test,
//! a plain packet socket on the far end of each pair.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use buffer::{Ext, ExtSource, Pool, PoolConfig};
use common::{Netns, collect, frame, one_queue, recv_frames, seq_of};
use uplink::{AfPacket, AfPacketConfig, LinkError, PacketSocket, RingGeometry, RxRing};

const WAIT: Duration = Duration::from_secs(5);

/// Both receive ring layouts, each with its default geometry: the receive tests run on both.
fn rings() -> [(&'static str, AfPacketConfig); 2] {
    let blocks = AfPacketConfig {
        rx_ring: Some(RxRing::Blocks { timeout_ms: 1 }),
        ..AfPacketConfig::default()
    };
    let frames = AfPacketConfig {
        rx_ring: Some(RxRing::Frames),
        ..AfPacketConfig::default()
    };
    [("frames", frames), ("blocks", blocks)]
}

fn pool(data_size: u16) -> Pool {
    Pool::new(PoolConfig {
        count: 2048,
        data_size,
        headroom: 128,
    })
    .unwrap()
}

/// A frame with an 802.1Q tag (VID 100, PCP 1) after the MAC addresses.
fn tagged(seq: u32, len: usize) -> Vec<u8> {
    let mut f = frame(seq, len - 4);
    f.splice(12..12, [0x81, 0x00, 0x20, 0x64]);
    f
}

#[test]
fn received_frames_arrive_intact_and_jumbo_frames_as_chains() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 9000);
    for (ring, cfg) in rings() {
        eprintln!("ring of {ring}");
        frames_arrive_intact(&ns, cfg);
    }
}

fn frames_arrive_intact(ns: &Netns, cfg: AfPacketConfig) {
    let up = AfPacket::open("u0", cfg).unwrap();
    assert_eq!(
        (up.ifindex(), up.mac(), up.mtu()),
        (ns.ifindex("u0"), ns.mac("u0"), 9000)
    );
    let (mut rx, _tx) = up.into_queues().pop().unwrap();
    let mut pool = pool(2048);
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let plain_u0 = PacketSocket::open(ns.ifindex("u0")).unwrap();
    let mut sent: Vec<Vec<u8>> = [60, 1514, 9014, 61, 1515, 9013]
        .iter()
        .enumerate()
        .map(|(i, &len)| frame(i as u32, len))
        .collect();
    // The kernel takes the tag off into the frame's metadata on receive; we put it back.
    sent.push(tagged(6, 1518));
    for f in &sent {
        h0.send(f).unwrap();
    }
    let mut got = recv_frames(&mut rx, &mut pool, sent.len(), 256, WAIT);
    got.sort_by_key(|(f, _)| seq_of(f));
    assert_eq!(got.len(), sent.len());
    for ((f, bufs), s) in got.iter().zip(&sent) {
        assert!(f == s, "frame {:?} of {} bytes differs", seq_of(s), s.len());
        assert_eq!(
            *bufs,
            s.len().div_ceil(2048),
            "buffers for {} bytes",
            s.len()
        );
    }
    let st = rx.counters().snapshot();
    assert!(st.packets >= sent.len() as u64 && st.no_buffer == 0 && st.truncated == 0);
    // What a plain socket on u0 sees: the tagged frame 4 bytes short, its tag out of band.
    // So the ring really did hand the tag over separately, and the queue restored it.
    let plain = collect(&plain_u0, sent.len(), WAIT);
    let cut = plain.iter().find(|f| seq_of(f) == Some(6)).unwrap();
    assert_eq!(cut.len(), 1514);
    assert_eq!(pool.available(), pool.capacity());
}

/// Slots of 2 KiB at MTU 9000: a frame that does not fit is queued whole on the socket (its
/// slot marked TP_STATUS_COPY) and read from there, in order with the rest.
#[test]
fn frames_larger_than_a_slot_arrive_whole_through_the_sockets_copy() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 9000);
    let mut cfg = AfPacketConfig {
        rx_ring: Some(RxRing::Frames),
        ..AfPacketConfig::default()
    };
    cfg.rx.frame_size = 2048;
    let (mut rx, _tx) = one_queue("u0", cfg);
    let mut pool = pool(2048);
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut sent: Vec<Vec<u8>> = [60, 1514, 9014, 1953, 4000, 61]
        .iter()
        .enumerate()
        .map(|(i, &len)| frame(i as u32, len))
        .collect();
    sent.push(tagged(6, 9018));
    for f in &sent {
        h0.send(f).unwrap();
    }
    let got = recv_frames(&mut rx, &mut pool, sent.len(), 256, WAIT);
    assert_eq!(got.len(), sent.len());
    for ((f, _), s) in got.iter().zip(&sent) {
        assert!(f == s, "frame {:?} of {} bytes differs", seq_of(s), s.len());
    }
    let st = rx.counters().snapshot();
    assert_eq!((st.truncated, st.bad_frame, st.no_buffer), (0, 0, 0));
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_block_left_midway_is_resumed_in_order() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    for (ring, cfg) in rings() {
        eprintln!("ring of {ring}");
        resumed_in_order(&ns, cfg);
    }
}

fn resumed_in_order(ns: &Netns, cfg: AfPacketConfig) {
    let (mut rx, _tx) = one_queue("u0", cfg);
    let mut pool = pool(2048);
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let frames: Vec<Vec<u8>> = (0..40).map(|i| frame(i, 60 + i as usize)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    assert_eq!(h0.send_batch(&refs).unwrap(), 40);
    // Three at a time: most calls stop inside a block and the next picks up there.
    let got = recv_frames(&mut rx, &mut pool, 40, 3, WAIT);
    let got: Vec<Vec<u8>> = got.into_iter().map(|(f, _)| f).collect();
    assert_eq!(got, frames);
    assert!(!rx.pending(), "every block handed back");
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn an_empty_pool_drops_and_counts_but_releases_the_ring() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    for (ring, cfg) in rings() {
        eprintln!("ring of {ring}");
        empty_pool_drops(&ns, cfg);
    }
}

fn empty_pool_drops(ns: &Netns, cfg: AfPacketConfig) {
    let (mut rx, _tx) = one_queue("u0", cfg);
    let mut pool = pool(2048);
    let mut held = vec![0u32; pool.capacity()];
    assert!(pool.alloc_bulk(&mut held));
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    for i in 0..10 {
        h0.send(&frame(i, 100)).unwrap();
    }
    let mut out = Vec::new();
    let mut dropped = 0;
    let deadline = std::time::Instant::now() + WAIT;
    while dropped < 10 && std::time::Instant::now() < deadline {
        dropped += rx.recv(&mut pool, &mut out, 256).no_buffer;
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!((dropped, out.len()), (10, 0));
    assert!(!rx.pending());
    pool.free_bulk(&held);
    // The ring still works.
    h0.send(&frame(99, 100)).unwrap();
    let got = recv_frames(&mut rx, &mut pool, 1, 256, WAIT);
    assert_eq!(got.len(), 1);
    assert_eq!(rx.counters().snapshot().no_buffer, 10);
    assert_eq!(pool.available(), pool.capacity());
}

#[derive(Debug)]
struct Peer(Vec<u8>);

impl ExtSource for Peer {
    fn read(&self, region: u16, offset: u64, dst: &mut [u8]) -> bool {
        let o = offset as usize;
        if region != 0 || o + dst.len() > self.0.len() {
            return false;
        }
        dst.copy_from_slice(&self.0[o..o + dst.len()]);
        true
    }
}

#[test]
fn sent_chains_and_external_segments_arrive_intact() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 9000);
    let (_rx, mut tx) = AfPacket::open("u0", AfPacketConfig::default())
        .unwrap()
        .into_queues()
        .pop()
        .unwrap();
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    h0.set_recv_buffer(8 << 20).unwrap();
    // 512-byte buffers: a 1514-byte frame is a chain of 3, a 9014-byte one of 18.
    let mut pool = pool(512);
    let frames: Vec<Vec<u8>> = [60, 512, 513, 1514, 9014]
        .iter()
        .enumerate()
        .map(|(i, &len)| frame(i as u32, len))
        .collect();
    let mut pkts: Vec<u32> = frames.iter().map(|f| pool.from_bytes(f).unwrap()).collect();
    // A single-copy packet: 100 bytes here, the rest in a peer's memory.
    let ext = frame(5, 1400);
    pool.set_ext_source(1, Some(std::sync::Arc::new(Peer(ext.clone()))));
    let b = pool.from_bytes(&ext[..100]).unwrap();
    let m = pool.meta_mut(b);
    m.ext = Ext {
        source: 1,
        region: 0,
        offset: 100,
        len: 1300,
    };
    m.total_len = 1400;
    pkts.push(b);
    assert_eq!(pool.chain_len(pkts[4]), 18);
    let st = tx.send(&pool, &pkts).unwrap();
    assert_eq!((st.consumed, st.sent), (6, 6));
    pool.free_bulk(&pkts);
    let mut got = collect(&h0, 6, WAIT);
    got.sort_by_key(|f| seq_of(f));
    let mut want = frames;
    want.push(ext);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(g == w, "frame {:?} of {} bytes differs", seq_of(w), w.len());
    }
    let c = tx.counters().snapshot();
    let bytes: usize = want.iter().map(Vec::len).sum();
    assert_eq!((c.packets, c.bytes), (6, bytes as u64));
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn fanout_spreads_flows_over_queues_without_loss_or_duplicates() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    let up = AfPacket::open(
        "u0",
        AfPacketConfig {
            queues: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(up.fanout_id().is_some());
    let mac = up.mac();
    let mut queues: Vec<_> = up.into_queues().into_iter().map(|(rx, _)| rx).collect();
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    const FLOWS: u16 = 64;
    const PER_FLOW: u16 = 8;
    let mut frames = Vec::new();
    for seq in 0..PER_FLOW {
        for flow in 0..FLOWS {
            let macs = testkit::Macs {
                src: [2, 0, 0, 0, 0x77, 1],
                dst: mac,
            };
            let payload = [(flow >> 8) as u8, flow as u8, seq as u8, 0xab];
            let (src, dst) = ([10, 0, 0, 1], [10, 0, 0, 2]);
            frames.push(testkit::udp4_frame_ports(
                macs,
                src,
                dst,
                64,
                (1000 + flow, 7777),
                &payload,
            ));
        }
    }
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    for chunk in refs.chunks(64) {
        assert_eq!(h0.send_batch(chunk).unwrap(), chunk.len());
    }
    let mut pool = pool(2048);
    let mut seen: BTreeMap<(u16, u8), usize> = BTreeMap::new();
    let mut dup = 0;
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while seen.len() < frames.len() && std::time::Instant::now() < deadline {
        for (qi, q) in queues.iter_mut().enumerate() {
            out.clear();
            q.recv(&mut pool, &mut out, 256);
            for &h in &out {
                let mut v = Vec::new();
                pool.read_chain(h, &mut v);
                let Ok(p) = etherparse::SlicedPacket::from_ethernet(&v) else {
                    continue;
                };
                if let Some(etherparse::TransportSlice::Udp(u)) = p.transport
                    && u.destination_port() == 7777
                {
                    let d = u.payload();
                    let flow = u16::from_be_bytes([d[0], d[1]]);
                    if seen.insert((flow, d[2]), qi).is_some() {
                        dup += 1;
                    }
                }
            }
            pool.free_bulk(&out);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!((seen.len(), dup), (frames.len(), 0), "lost or duplicated");
    let mut per_queue = [BTreeSet::new(), BTreeSet::new()];
    for (&(flow, _), &q) in &seen {
        per_queue[q].insert(flow);
    }
    assert!(
        per_queue[0].is_disjoint(&per_queue[1]),
        "a flow split over queues"
    );
    assert!(
        !per_queue[0].is_empty() && !per_queue[1].is_empty(),
        "all {FLOWS} flows on one queue: {per_queue:?}"
    );
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_full_tx_ring_is_kicked_a_few_times_then_stops_the_batch_and_is_counted() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    let cfg = AfPacketConfig {
        // Two 2048-byte frames per page, four pages: eight frames.
        tx: RingGeometry {
            block_size: 4096,
            block_count: 4,
            frame_size: 2048,
        },
        ..Default::default()
    };
    let (_rx, mut tx) = AfPacket::open("u0", cfg)
        .unwrap()
        .into_queues()
        .pop()
        .unwrap();
    assert_eq!(tx.capacity(), 8);
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    let frames: Vec<Vec<u8>> = (0..50).map(|i| frame(i, 100)).collect();
    let pkts: Vec<u32> = frames.iter().map(|f| pool.from_bytes(f).unwrap()).collect();
    // The ring fills at 8; each of the four kicks a send may make frees it (veth frees each
    // frame as it forwards it, within the kick): 40 go, then the batch stops.
    let st = tx.send(&pool, &pkts).unwrap();
    assert_eq!((st.consumed, st.sent), (40, 40));
    let c = tx.counters().snapshot();
    assert_eq!((c.ring_full, c.tx_no_room, c.packets), (1, 10, 40));
    // The rest in the next call.
    let mut from = 40;
    while from < pkts.len() {
        from += tx.send(&pool, &pkts[from..]).unwrap().consumed;
    }
    pool.free_bulk(&pkts);
    let got = collect(&h0, 50, WAIT);
    assert_eq!(got, frames, "every frame once, in order");
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn oversize_and_runt_frames_are_refused_and_counted() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    let (_rx, mut tx) = AfPacket::open("u0", AfPacketConfig::default())
        .unwrap()
        .into_queues()
        .pop()
        .unwrap();
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    let frames = [
        frame(0, 1514),
        frame(1, 1515),
        tagged(2, 1518),
        tagged(3, 1519),
        frame(4, 60)[..13].to_vec(),
        frame(5, 60),
    ];
    let pkts: Vec<u32> = frames.iter().map(|f| pool.from_bytes(f).unwrap()).collect();
    let st = tx.send(&pool, &pkts).unwrap();
    assert_eq!(
        (st.consumed, st.sent, st.oversize, st.malformed),
        (6, 3, 2, 1)
    );
    pool.free_bulk(&pkts);
    let c = tx.counters().snapshot();
    assert_eq!((c.packets, c.oversize, c.malformed), (3, 2, 1));
    let got: Vec<u32> = collect(&h0, 3, WAIT)
        .iter()
        .filter_map(|f| seq_of(f))
        .collect();
    assert_eq!(got, [0, 2, 5]);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_link_going_down_and_vanishing_gives_errors_not_panics() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    let up = AfPacket::open(
        "u0",
        AfPacketConfig {
            queues: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let mut queues = up.into_queues();
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    let one = pool.from_bytes(&frame(1, 60)).unwrap();

    ns.ip(&["link", "set", "u0", "down"]);
    let (rx, tx) = &mut queues[0];
    assert_eq!(tx.send(&pool, &[one]), Err(LinkError::Down));
    assert_eq!(rx.check_link(), Err(LinkError::Down));
    assert_eq!(rx.check_link(), Ok(()), "the socket error is taken once");
    assert_eq!(tx.counters().snapshot().link_down, 1);

    ns.ip(&["link", "set", "u0", "up"]);
    assert_eq!(tx.send(&pool, &[one]).unwrap().sent, 1);
    assert_eq!(collect(&h0, 1, WAIT).len(), 1);
    // The link takes a moment to be operational again on a loaded machine: resend until a
    // frame arrives on one of the queues.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut got = 0;
    while got == 0 && std::time::Instant::now() < deadline {
        h0.send(&frame(2, 60)).unwrap();
        got = queues
            .iter_mut()
            .map(|(rx, _)| recv_frames(rx, &mut pool, 1, 256, Duration::from_millis(100)).len())
            .sum();
    }
    assert!(got >= 1, "receive resumes after the link comes back");

    ns.ip(&["link", "del", "u0"]);
    for (rx, tx) in &mut queues {
        assert_eq!(tx.send(&pool, &[one]), Err(LinkError::Vanished));
        assert_eq!(rx.check_link(), Err(LinkError::Vanished));
        let mut out = Vec::new();
        assert_eq!(rx.recv(&mut pool, &mut out, 256).packets, 0);
        assert!(!rx.pending());
    }
    drop(queues);
    pool.free(one);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_checksum_left_to_offload_is_completed() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    // The host stack on h0 sends UDP to a neighbour behind u0; veth offers checksum offload,
    // so the stack leaves the UDP checksum partial.
    let mac = ns.mac("u0");
    let mac = mac.map(|b| format!("{b:02x}")).join(":");
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "h0"]);
    ns.ip(&["neigh", "add", "10.77.0.2", "lladdr", &mac, "dev", "h0"]);
    for (ring, cfg) in rings() {
        eprintln!("ring of {ring}");
        checksums_completed(cfg);
    }
}

fn checksums_completed(cfg: AfPacketConfig) {
    let (mut rx, _tx) = one_queue("u0", cfg);
    let s = std::net::UdpSocket::bind("10.77.0.1:0").unwrap();
    let payloads: Vec<Vec<u8>> = [1usize, 2, 333, 1000, 1472]
        .iter()
        .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
        .collect();
    for p in &payloads {
        s.send_to(p, "10.77.0.2:9999").unwrap();
    }
    let mut pool = pool(512);
    let mut heads = Vec::new();
    let mut checked = 0;
    let deadline = std::time::Instant::now() + WAIT;
    while checked < payloads.len() && std::time::Instant::now() < deadline {
        heads.clear();
        rx.recv(&mut pool, &mut heads, 256);
        for &h in &heads {
            let mut v = Vec::new();
            pool.read_chain(h, &mut v);
            let p = etherparse::SlicedPacket::from_ethernet(&v).unwrap();
            let (Some(etherparse::NetSlice::Ipv4(ip)), Some(etherparse::TransportSlice::Udp(u))) =
                (p.net, p.transport)
            else {
                continue;
            };
            assert_eq!(u.payload(), payloads[checked]);
            let want = u
                .to_header()
                .calc_checksum_ipv4(&ip.header().to_header(), u.payload())
                .unwrap();
            assert_eq!(u.checksum(), want, "datagram {checked}");
            checked += 1;
        }
        pool.free_bulk(&heads);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(checked, payloads.len());
    assert_eq!(
        rx.counters().snapshot().csum_completed,
        payloads.len() as u64,
        "the kernel left every checksum to offload"
    );
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn bad_configurations_are_refused_by_name() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 9000);
    let e = AfPacket::open("no-such-if", AfPacketConfig::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no interface named \"no-such-if\" in this network namespace"
    );
    let e = AfPacket::open("bad/name", AfPacketConfig::default()).unwrap_err();
    assert!(e.to_string().contains("is invalid"), "{e}");
    let mut cfg = AfPacketConfig {
        rx_ring: Some(RxRing::Frames),
        ..AfPacketConfig::default()
    };
    cfg.rx.block_size = 8192;
    let e = AfPacket::open("u0", cfg).unwrap_err();
    assert_eq!(
        e.to_string(),
        "af_packet \"u0\": rx.block_size = 8192 is invalid: at least 16384 for MTU 9000"
    );
    // Slots smaller than an MTU's frame are fine (frames_larger_than_a_slot_...).
    cfg.rx.frame_size = 8192;
    cfg.rx_ring = Some(RxRing::Blocks { timeout_ms: 1 });
    let e = AfPacket::open("u0", cfg).unwrap_err();
    assert_eq!(
        e.to_string(),
        "af_packet \"u0\": rx.block_size = 8192 is invalid: at least 9156 for MTU 9000"
    );
    cfg = AfPacketConfig::default();
    cfg.tx.block_size = 1000;
    let e = AfPacket::open("u0", cfg).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("af_packet \"u0\": tx.block_size = 1000"),
        "{e}"
    );
    let e = AfPacket::open("lo", AfPacketConfig::default()).unwrap_err();
    assert!(e.to_string().contains("not Ethernet"), "{e}");
}

#[test]
fn a_lone_frame_wakes_a_sleeper_within_the_block_timeout() {
    let Some(ns) = Netns::enter() else { return };
    ns.veth("u0", "h0", 1500);
    for (ring, cfg) in rings() {
        eprintln!("ring of {ring}");
        lone_frame_wakes(&ns, cfg);
    }
}

fn lone_frame_wakes(ns: &Netns, cfg: AfPacketConfig) {
    let (mut rx, _tx) = one_queue("u0", cfg);
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    let mut waits = Vec::new();
    for i in 0..9 {
        std::thread::sleep(Duration::from_millis(10));
        assert!(!rx.pending());
        h0.send(&frame(i, 60)).unwrap();
        let t = std::time::Instant::now();
        let fd = rx.fd();
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let one_s = rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        assert_eq!(rustix::event::poll(&mut fds, Some(&one_s)).unwrap(), 1);
        waits.push(t.elapsed());
        assert!(rx.pending());
        assert_eq!(recv_frames(&mut rx, &mut pool, 1, 256, WAIT).len(), 1);
    }
    waits.sort();
    // The 1 ms retire timeout (at most two 4 ms jiffies on kernels whose timer counts them),
    // not the kernel's default of 8 ms, at least one period, for a link of unknown speed.
    assert!(
        waits[4] < Duration::from_millis(8),
        "wake-ups took {waits:?}"
    );
    assert_eq!(pool.available(), pool.capacity());
}
