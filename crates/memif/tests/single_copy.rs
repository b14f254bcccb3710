//! Single-copy forwarding against a peer that lies: the payload stays in the peer's buffer
//! until it is transmitted, so the peer can rewrite it, post transmit buffers that overlap it,
//! or vanish. None of that may crash us, leak a buffer, or touch anything but the peer's own
//! bytes; the slots go back only at `release`.

use std::sync::Arc;

use buffer::{Pool, PoolConfig};
use copy_engine::{Engine, Kind};
use memif::RingLayout;
use memif::queue::{PeerTable, Peers};
use memif::ring::{Desc, Ring};
use memif::shm::SharedMemory;

const LOG2: u8 = 4;
const HDR: usize = 128;

fn pattern(i: usize, len: usize) -> Vec<u8> {
    testkit::seq_frame(i as u64, len, testkit::Pattern::linear(7, 31))
}

/// A primary's S2M receive and M2S transmit queues over two fresh regions (the rings, then 64
/// KiB of buffers: region 1), the receive queue's link, and the peer's view of both rings.
struct Rig {
    bufs: Arc<SharedMemory>,
    rx: memif::PrimaryRx,
    rx_link: Arc<memif::queue::Link>,
    tx: memif::PrimaryTx,
    s2m: Ring,
    m2s: Ring,
}

impl Rig {
    fn new() -> Rig {
        let layout = RingLayout::CacheLine64;
        let rings = Arc::new(SharedMemory::anonymous(65536).unwrap());
        let bufs = Arc::new(SharedMemory::anonymous(65536).unwrap());
        let regions = [rings.clone(), bufs.clone()];
        let tx_at = layout.ring_bytes(LOG2).next_multiple_of(8);
        let (rx, rx_link) = memif::testing::primary_rx(&regions, 0, LOG2, layout, 9216).unwrap();
        let (tx, _) = memif::testing::primary_tx(&regions, tx_at, LOG2, layout).unwrap();
        Rig {
            bufs,
            rx,
            rx_link,
            tx,
            s2m: Ring::new(rings.clone(), 0, LOG2, layout).unwrap(),
            m2s: Ring::new(rings, tx_at, LOG2, layout).unwrap(),
        }
    }
}

/// As the peer: puts a descriptor past the end of region 1 (65536 bytes) in `slot` and
/// publishes every slot up to it.
fn publish_with_a_lie(s2m: &Ring, slot: u16) {
    s2m.set_desc(
        slot,
        Desc {
            region: 1,
            offset: 65000,
            length: 1000,
            ..Desc::default()
        },
    );
    s2m.set_head(slot + 1);
}

/// A local pool with `rx`'s peer memory attached as external source 0, the table that holds
/// it, and a transmitter's view of that table.
fn pool_with_peer(rx: &memif::PrimaryRx) -> (Pool, Arc<PeerTable>, Peers) {
    let mut pool = Pool::new(PoolConfig {
        count: 64,
        data_size: 2048,
        headroom: 128,
    })
    .unwrap();
    let table = Arc::new(PeerTable::default());
    table.attach(&mut pool, 0, rx.peer_memory());
    let mut peers = Peers::of(&table);
    peers.refresh();
    (pool, table, peers)
}

#[test]
fn a_lying_peer_only_corrupts_its_own_packets() {
    let Rig {
        bufs,
        mut rx,
        rx_link,
        mut tx,
        s2m,
        m2s,
    } = Rig::new();

    // Four 1000-byte packets, and one descriptor outside every region.
    for i in 0..4u16 {
        let off = u32::from(i) * 2048;
        bufs.write(u64::from(off), &pattern(usize::from(i), 1000))
            .unwrap();
        let d = Desc {
            region: 1,
            offset: off,
            length: 1000,
            ..Desc::default()
        };
        s2m.set_desc(i, d);
    }
    publish_with_a_lie(&s2m, 4);

    let (mut pool, table, mut peers) = pool_with_peer(&rx);
    let mut out = Vec::new();
    assert_eq!(rx.recv_split(&mut pool, &mut out, 64, HDR, 0).unwrap(), 4);
    assert!(rx_link.is_up());
    assert_eq!(rx.stats().drop_bad_desc, 1);
    for (i, &b) in out.iter().enumerate() {
        let m = pool.meta(b);
        assert_eq!(
            (usize::from(m.len), m.ext.len, m.total_len),
            (HDR, 872, 1000)
        );
        let mut v = Vec::new();
        pool.read_chain(b, &mut v);
        assert_eq!(v, pattern(i, 1000));
    }
    assert_eq!(s2m.tail(), 0, "slots are held until release");

    // The peer rewrites packet 0 after we took its header: only its payload changes.
    bufs.write(500, &[0xee; 500]).unwrap();
    // It posts four transmit buffers: two fresh, one overlapping packet 2's payload, one more.
    for (k, off) in [
        (0u16, 16384u32),
        (1, 18432),
        (2, 2 * 2048 + 200),
        (3, 20480),
    ] {
        m2s.set_desc(
            k,
            Desc {
                region: 1,
                offset: off,
                length: 2048,
                ..Desc::default()
            },
        );
    }
    m2s.set_head(4);
    let mut engine = Engine::new(Kind::Cpu).unwrap();
    assert_eq!(
        tx.send_via(&pool, &out, &peers, Some(&mut engine)).unwrap(),
        4
    );
    assert_eq!(m2s.tail(), 4);
    let read = |off: u64| {
        let mut v = vec![0; 1000];
        bufs.read(off, &mut v).unwrap();
        v
    };
    let mut expect0 = pattern(0, 1000);
    expect0[500..].fill(0xee);
    assert_eq!(
        read(16384),
        expect0,
        "our header, the peer's rewritten payload"
    );
    assert_eq!(read(18432), pattern(1, 1000));
    assert_eq!(read(20480), pattern(3, 1000));
    for k in 0..4 {
        assert_eq!(m2s.desc(k).length, 1000);
    }

    // The peer vanishes: its memory is unregistered; a packet still pointing there is
    // dropped and counted, never read.
    table.detach(&mut pool, 0);
    peers.refresh();
    m2s.set_desc(
        4,
        Desc {
            region: 1,
            offset: 22528,
            length: 2048,
            ..Desc::default()
        },
    );
    m2s.set_head(5);
    let before = tx.stats().drop_bad_desc;
    assert_eq!(
        tx.send_via(&pool, &out[..1], &peers, Some(&mut engine))
            .unwrap(),
        1
    );
    assert_eq!(tx.stats().drop_bad_desc, before + 1);
    assert_eq!(m2s.tail(), 4, "nothing was placed");

    pool.free_bulk(&out);
    rx.release();
    assert_eq!(
        s2m.tail(),
        5,
        "every consumed slot, the bad one included, goes back"
    );
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn receive_copies_go_through_the_engine() {
    // One whole small packet, one split (header copied, payload left), one chain of two
    // descriptors, one descriptor out of bounds: in both copy modes every byte copied out of the peer's memory is a request
    // to an asynchronous engine, and the packets come out intact. A synchronous engine (CPU)
    // lets the queue copy inline: the same bytes, no batch.
    for (kind, hdr) in [(Kind::Cpu, 0usize), (Kind::Thread, 0), (Kind::Thread, HDR)] {
        let layout = RingLayout::CacheLine64;
        let rings = Arc::new(SharedMemory::anonymous(65536).unwrap());
        let bufs = Arc::new(SharedMemory::anonymous(65536).unwrap());
        let regions = [rings.clone(), bufs.clone()];
        let (mut rx, _link) = memif::testing::primary_rx(&regions, 0, LOG2, layout, 9216).unwrap();
        let s2m = Ring::new(rings.clone(), 0, LOG2, layout).unwrap();
        let descs = [
            (0u32, 60u32, false),
            (2048, 1000, false),
            (4096, 1500, true),
            (6144, 700, false),
        ];
        for (i, &(off, len, more)) in descs.iter().enumerate() {
            bufs.write(u64::from(off), &pattern(i, len as usize))
                .unwrap();
            s2m.set_desc(
                i as u16,
                Desc {
                    region: 1,
                    offset: off,
                    length: len,
                    flags: if more { memif::ring::DESC_FLAG_NEXT } else { 0 },
                    ..Desc::default()
                },
            );
        }
        // A lie: a descriptor past the end of its region. Counted, skipped, nothing copied.
        publish_with_a_lie(&s2m, 4);
        let (mut pool, _table, _peers) = pool_with_peer(&rx);
        let mut engine = Engine::new(kind).unwrap();
        let mut out = Vec::new();
        let n = rx
            .recv_split_via(&mut pool, &mut out, 64, hdr, 0, Some(&mut engine))
            .unwrap();
        assert_eq!(n, 3, "{kind:?} {hdr}");
        let want: Vec<Vec<u8>> = vec![
            pattern(0, 60),
            pattern(1, 1000),
            [pattern(2, 1500), pattern(3, 700)].concat(),
        ];
        for (b, w) in out.iter().zip(&want) {
            let mut v = Vec::new();
            pool.read_chain(*b, &mut v);
            assert_eq!(&v, w, "{kind:?} {hdr}");
        }
        // Split mode copies only the header of the 1000-byte packet (chains are copied whole).
        let copied = if hdr == 0 {
            60 + 1000 + 2200
        } else {
            60 + HDR as u64 + 2200
        };
        let via_engine = if kind == Kind::Cpu { 0 } else { copied };
        assert_eq!(engine.stats().bytes, via_engine, "{kind:?} {hdr}");
        assert_eq!(engine.inflight(), 0);
        assert_eq!(rx.stats().drop_bad_desc, 1);
        rx.release();
        assert_eq!(s2m.tail(), 5);
    }
}

/// An Ethernet frame of `len` bytes: `ethertype`, then (for IPv4) the version and header
/// length byte `ver_ihl`, protocol `proto` and, at byte 36, destination port `port`; the
/// rest a pattern.
fn frame(i: usize, len: usize, ethertype: u16, ver_ihl: u8, proto: u8, port: u16) -> Vec<u8> {
    let mut f = pattern(i, len);
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f[14] = ver_ihl;
    f[23] = proto;
    f[36..38].copy_from_slice(&port.to_be_bytes());
    f
}

#[test]
fn single_copy_takes_one_line_when_the_headers_end_in_it() {
    // What single copy keeps local of each frame: the first line when every header the graph
    // reads ends there (IPv4 without options, not VXLAN), the caller's `hdr` bytes otherwise;
    // frames of one line or less whole. Every frame reads back intact and is sent intact.
    let cases: [(Vec<u8>, usize); 8] = [
        (frame(0, 512, 0x0800, 0x45, 17, 5001), 64), // IPv4/UDP: one line
        (frame(1, 100, 0x0800, 0x45, 1, 0), 64),     // IPv4/ICMP, under hdr: still one line
        (frame(2, 1500, 0x0800, 0x45, 6, 80), 64),   // IPv4/TCP
        (frame(3, 512, 0x0800, 0x46, 17, 5001), HDR), // IPv4 with options
        (frame(4, 512, 0x0800, 0x45, 17, 4789), HDR), // VXLAN: the inner headers run on
        (frame(5, 512, 0x8100, 0x45, 17, 5001), HDR), // a VLAN tag
        (frame(6, 100, 0x0806, 0x00, 0, 0), 100),    // ARP-sized and not IPv4: whole
        (frame(7, 64, 0x0800, 0x45, 17, 5001), 64),  // one line: whole
    ];
    let Rig {
        bufs,
        mut rx,
        mut tx,
        s2m,
        m2s,
        ..
    } = Rig::new();
    for (i, (f, _)) in cases.iter().enumerate() {
        let off = i as u32 * 2048;
        bufs.write(u64::from(off), f).unwrap();
        s2m.set_desc(
            i as u16,
            Desc {
                region: 1,
                offset: off,
                length: f.len() as u32,
                ..Desc::default()
            },
        );
    }
    s2m.set_head(cases.len() as u16);
    let (mut pool, _table, peers) = pool_with_peer(&rx);
    let mut out = Vec::new();
    assert_eq!(
        rx.recv_split(&mut pool, &mut out, 64, HDR, 0).unwrap(),
        cases.len()
    );
    for (k, ((f, local), &b)) in cases.iter().zip(&out).enumerate() {
        let m = pool.meta(b);
        assert_eq!(
            (usize::from(m.len), m.ext.len as usize, m.total_len as usize),
            (*local, f.len() - local, f.len()),
            "frame {k}"
        );
        let mut v = Vec::new();
        pool.read_chain(b, &mut v);
        assert_eq!(&v, f, "frame {k}");
    }
    assert_eq!(s2m.tail(), 0, "slots with payloads left in them are held");
    // Out through the transmit ring into fresh buffers: each frame whole.
    for k in 0..cases.len() as u16 {
        m2s.set_desc(
            k,
            Desc {
                region: 1,
                offset: 32768 + u32::from(k) * 2048,
                length: 2048,
                ..Desc::default()
            },
        );
    }
    m2s.set_head(cases.len() as u16);
    assert_eq!(tx.send_via(&pool, &out, &peers, None).unwrap(), cases.len());
    for (k, (f, _)) in cases.iter().enumerate() {
        let d = m2s.desc(k as u16);
        let mut v = vec![0; d.length as usize];
        bufs.read(u64::from(d.offset), &mut v).unwrap();
        assert_eq!(&v, f, "frame {k} sent");
    }
    pool.free_bulk(&out);
    rx.release();
    assert_eq!(s2m.tail(), cases.len() as u16);
    assert_eq!(pool.available(), pool.capacity());
}
