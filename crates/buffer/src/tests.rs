#[test]
fn the_front_room_is_read_with_the_data_and_taken_as_push_front_takes_it() {
    let mut pool = Pool::new(PoolConfig {
        count: 2,
        data_size: 64,
        headroom: 16,
    })
    .unwrap();
    let b = pool.from_bytes(&[7u8; 20]).unwrap();
    let (m, f) = pool.meta_data_front_mut(b, 14).unwrap();
    assert_eq!((f.len(), &f[14..]), (34, &[7u8; 20][..]));
    f[..14].fill(1);
    m.expose(14);
    let (len, total) = (pool.meta(b).len, pool.meta(b).total_len);
    assert_eq!((len, total), (34, 34));
    assert_eq!(&pool.data(b)[..14], &[1u8; 14]);
    // The same as push_front on a twin packet.
    let c = pool.from_bytes(&[7u8; 20]).unwrap();
    pool.push_front(c, 14).unwrap()[..14].fill(1);
    assert_eq!(pool.data(c), pool.data(b));
    assert_eq!(pool.meta(c).offset, pool.meta(b).offset);
    // Past the headroom: refused, nothing changed.
    assert!(pool.meta_data_front_mut(b, 3).is_none());
    assert_eq!(pool.meta(b).len, 34);
}

#[test]
fn a_view_reads_what_the_pool_reads_and_refuses_what_it_refuses() {
    let mut pool = Pool::new(PoolConfig {
        count: 2,
        data_size: 64,
        headroom: 16,
    })
    .unwrap();
    let b = pool.from_bytes(&[7u8; 20]).unwrap();
    let c = pool.from_bytes(&[8u8; 30]).unwrap();
    let mut v = pool.view();
    assert_eq!(v.meta_data_mut(c).unwrap().1, &[8u8; 30][..]);
    let (m, f) = v.meta_data_front_mut(b, 16).unwrap();
    assert_eq!((m.len, f.len(), &f[16..]), (20, 36, &[7u8; 20][..]));
    assert!(v.meta_data_front_mut(b, 17).is_none(), "past the headroom");
    assert!(v.meta_data_mut(2).is_none(), "no such buffer");
    // A length a node set past the end of the memory is refused, not read.
    pool.meta_mut(b).len = 2048;
    assert!(pool.view().meta_data_mut(b).is_none());
    pool.meta_mut(b).len = 20;
    // Cutting padding in place: within the buffer's data, then within its segment.
    let m = pool.meta_mut(b);
    m.truncate(12);
    assert_eq!((m.len, m.total_len), (12, 12));
    m.ext.len = 100;
    m.total_len += 100;
    m.truncate(50);
    assert_eq!((m.len, m.ext.len, m.total_len), (12, 38, 50));
    m.truncate(60);
    assert_eq!(m.total_len, 50, "never lengthened");
}

#[test]
fn rewrite_replaces_a_chain_and_its_external_segment() {
    let mut pool = Pool::new(PoolConfig {
        count: 8,
        data_size: 64,
        headroom: 16,
    })
    .unwrap();
    let b = pool.from_bytes(&[7u8; 150]).unwrap();
    assert_eq!(pool.chain_len(b), 3);
    pool.meta_mut(b).ext.len = 0;
    // Longer: the old tail goes back, a new one is chained on.
    let big: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    assert!(pool.rewrite(b, &big));
    let mut v = Vec::new();
    pool.read_chain(b, &mut v);
    assert_eq!(v, big);
    assert_eq!((pool.meta(b).total_len, pool.chain_len(b)), (300, 5));
    assert_eq!(pool.available(), 3);
    // Shorter: one buffer, the rest back in the pool.
    assert!(pool.rewrite(b, &[1, 2, 3]));
    assert_eq!(
        (pool.data(b), pool.meta(b).total_len),
        (&[1u8, 2, 3][..], 3)
    );
    assert_eq!(pool.available(), 7);
    // More than the pool holds: nothing changes.
    assert!(!pool.rewrite(b, &[0u8; 64 * 9]));
    assert_eq!((pool.data(b), pool.available()), (&[1u8, 2, 3][..], 7));
    pool.free(b);
    assert_eq!(pool.available(), 8);
}

#[test]
fn a_chain_is_cut_where_its_length_ends_and_the_rest_freed() {
    let mut pool = Pool::new(PoolConfig {
        count: 8,
        data_size: 64,
        headroom: 0,
    })
    .unwrap();
    let bytes: Vec<u8> = (0..200u8).collect();
    let b = pool.from_bytes(&bytes).unwrap();
    assert_eq!(pool.chain_len(b), 4);
    pool.truncate_chain(b, 300);
    assert_eq!(pool.meta(b).total_len, 200, "longer: nothing changes");
    pool.truncate_chain(b, 100);
    let mut v = Vec::new();
    pool.read_chain(b, &mut v);
    assert_eq!(v, &bytes[..100]);
    assert_eq!((pool.chain_len(b), pool.meta(b).total_len), (2, 100));
    assert_eq!(pool.available(), 6);
    pool.truncate_chain(b, 64);
    assert_eq!(
        (pool.chain_len(b), pool.available()),
        (1, 7),
        "no empty buffer is left"
    );
    pool.free(b);
    assert_eq!(pool.available(), 8);
}

use super::*;

#[test]
fn alloc_packets_writes_the_whole_metadata_and_stops_when_told() {
    let mut p = Pool::new(PoolConfig {
        count: 4,
        data_size: 256,
        headroom: 64,
    })
    .unwrap();
    // Leave stale metadata behind in every buffer.
    for _ in 0..4 {
        let b = p.alloc().unwrap();
        let m = p.meta_mut(b);
        (m.tx_if, m.vrf, m.adj, m.error, m.flags, m.offset) = (7, 8, 9, 10, 11, 3);
        p.free(b);
    }
    let ext = Ext {
        source: 2,
        region: 1,
        offset: 1000,
        len: 500,
    };
    let order: Vec<u32> = (0..2).map(|_| p.alloc().unwrap()).collect();
    p.free(order[1]);
    p.free(order[0]);
    let mut out = vec![99];
    let mut k = 0u8;
    let got = p.alloc_packets(3, 5, &mut out, |i, room, m| {
        assert_eq!((i, room.len()), (usize::from(k), 256));
        assert_eq!(
            (m.offset, m.len, m.next, m.total_len, m.ext),
            (64, 0, NONE, 0, Ext::default()),
            "fresh metadata"
        );
        k += 1;
        room[..100].fill(k);
        (m.len, m.total_len, m.ext) = (100, 600, ext);
        k < 3
    });
    assert_eq!(got, (2, 1200));
    assert_eq!(
        out[1..],
        order,
        "taken from the top of the free list, as alloc does"
    );
    for (i, &b) in out[1..].iter().enumerate() {
        let m = *p.meta(b);
        assert_eq!((m.offset, m.len, m.next, m.total_len), (64, 100, NONE, 600));
        assert_eq!(
            (m.rx_if, m.tx_if, m.vrf, m.adj, m.error, m.flags),
            (5, NONE, 0, 0, 0, 0)
        );
        assert_eq!(m.ext, ext);
        assert_eq!(p.data(b), &[i as u8 + 1; 100]);
    }
    assert_eq!(
        p.available(),
        2,
        "the pass stopped at the third: its buffer stays free"
    );
    assert_eq!(
        p.alloc_packets(1, 0, &mut out, |_, _, m| {
            (m.len, m.total_len) = (257, 257);
            true
        }),
        (0, 0)
    );
    assert_eq!(
        p.available(),
        2,
        "a length past the data area takes no buffer"
    );
    assert_eq!(
        p.alloc_packets(9, 0, &mut out, |_, _, m| {
            (m.len, m.total_len) = (1, 1);
            true
        }),
        (2, 2)
    );
    assert_eq!(p.available(), 0);
}

#[test]
fn room_pointers_stay_inside_each_room() {
    let mut p = Pool::new(PoolConfig {
        count: 4,
        data_size: 2048,
        headroom: 128,
    })
    .unwrap();
    let a = p.alloc().unwrap();
    let b = p.alloc().unwrap();
    let room = p.room_mut(a).len();
    let r = p.room_ptrs();
    let (pa, pb) = (r.ptr(a, 0, room).unwrap(), r.ptr(b, 0, room).unwrap());
    assert_eq!((pb as usize).abs_diff(pa as usize) % 64, 0);
    assert_ne!(pa, pb);
    assert_eq!(r.ptr(a, 10, 5).unwrap() as usize, pa as usize + 10);
    assert!(r.ptr(a, 0, room + 1).is_none());
    assert!(r.ptr(a, room, 1).is_none());
    assert!(r.ptr(a, usize::MAX, 2).is_none());
    assert!(r.ptr(99, 0, 1).is_none());
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
fn external_segments_read_truncate_and_linearize() {
    let mut p = small();
    let peer: Vec<u8> = (0..=255u8).cycle().take(300).collect();
    p.set_ext_source(3, Some(std::sync::Arc::new(Peer(peer.clone()))));
    let b = p.from_bytes(&[9u8; 10]).unwrap();
    let m = p.meta_mut(b);
    m.ext = Ext {
        source: 3,
        region: 0,
        offset: 100,
        len: 150,
    };
    m.total_len += 150;
    assert_eq!(p.packet_len(b), 160);
    let mut all = Vec::new();
    p.read_chain(b, &mut all);
    assert_eq!(&all[..10], &[9u8; 10]);
    assert_eq!(&all[10..], &peer[100..250]);
    p.truncate(b, 110);
    assert_eq!((p.packet_len(b), p.meta(b).total_len), (110, 110));
    let before = p.available();
    assert!(p.linearize(b));
    assert_eq!(p.meta(b).ext.len, 0);
    let mut lin = Vec::new();
    p.read_chain(b, &mut lin);
    assert_eq!(lin, all[..110]);
    assert_eq!(p.meta(b).total_len, 110);
    assert_eq!(
        before - p.available(),
        1,
        "one more 64-byte buffer for 110 bytes"
    );
    p.truncate(b, 4);
    assert_eq!((p.packet_len(b), p.meta(b).total_len), (4, 4 + 46));
    p.free(b);
    assert_eq!(p.available(), 8);
    // A source that is gone: reads fail, nothing changes.
    let c = p.alloc().unwrap();
    p.meta_mut(c).ext = Ext {
        source: 7,
        region: 0,
        offset: 0,
        len: 5,
    };
    assert!(!p.linearize(c));
    assert_eq!(p.meta(c).ext.len, 5);
    p.free(c);
    let d = p.alloc().unwrap();
    assert_eq!(p.meta(d).ext.len, 0, "fresh buffers carry none");
}

fn small() -> Pool {
    Pool::new(PoolConfig {
        count: 8,
        data_size: 64,
        headroom: 16,
    })
    .unwrap()
}

#[test]
fn chains_round_trip_and_free_everything() {
    let mut p = small();
    let bytes: Vec<u8> = (0..200u32).map(|i| i as u8).collect();
    let h = p.from_bytes(&bytes).unwrap();
    assert_eq!(p.chain_len(h), 4);
    assert_eq!(p.meta(h).total_len, 200);
    let mut out = Vec::new();
    p.read_chain(h, &mut out);
    assert_eq!(out, bytes);
    p.free(h);
    assert_eq!(p.available(), 8);
}

#[test]
fn exhaustion_leaks_nothing() {
    let mut p = small();
    assert!(p.from_bytes(&[0u8; 64 * 9]).is_none());
    assert_eq!(p.available(), 8);
    let mut four = [0u32; 4];
    assert!(p.alloc_bulk(&mut four));
    let mut five = [0u32; 5];
    assert!(!p.alloc_bulk(&mut five));
    assert_eq!(p.available(), 4);
    p.free_bulk(&four);
    assert_eq!(p.available(), 8);
}

#[test]
fn advance_skips_and_prepends_within_the_buffer() {
    let mut p = small();
    let b = p.from_bytes(&[1, 2, 3, 4, 5, 6]).unwrap();
    assert!(p.advance(b, 2));
    assert_eq!((p.data(b), p.meta(b).total_len), (&[3, 4, 5, 6][..], 4));
    let (m, d) = p.meta_data_mut(b);
    assert_eq!(d, &[3, 4, 5, 6]);
    assert!(!m.skip(5), "past the data");
    assert!(m.skip(1));
    assert_eq!((p.data(b), p.meta(b).total_len), (&[4, 5, 6][..], 3));
    assert!(p.advance(b, -1));
    assert!(p.advance(b, -18), "16 bytes of headroom plus the 2 skipped");
    assert_eq!(p.data(b).len(), 22);
    assert!(!p.advance(b, -1), "no headroom left");
    assert!(!p.advance(b, 23), "past the data");
    p.truncate(b, 10);
    assert_eq!((p.data(b).len(), p.meta(b).total_len), (10, 10));
}

#[test]
fn push_front_prepends_like_advance() {
    let mut p = small();
    let b = p.from_bytes(&[1, 2, 3, 4]).unwrap();
    let d = p.push_front(b, 14).unwrap();
    assert_eq!((d.len(), &d[14..]), (18, &[1, 2, 3, 4][..]));
    d[0] = 0xaa;
    assert_eq!((p.data(b)[0], p.meta(b).total_len), (0xaa, 18));
    assert!(
        p.push_front(b, 3).is_none(),
        "16 bytes of headroom, 14 used"
    );
    assert_eq!(p.data(b).len(), 18, "a refused push changes nothing");
}

#[test]
fn rejects_bad_geometry() {
    assert!(
        Pool::new(PoolConfig {
            count: 0,
            ..Default::default()
        })
        .is_err()
    );
    assert!(
        Pool::new(PoolConfig {
            data_size: 8,
            ..Default::default()
        })
        .is_err()
    );
}

#[test]
fn copy_from_chain_takes_any_range_across_buffers() {
    let mut p = Pool::new(PoolConfig {
        count: 16,
        data_size: 64,
        headroom: 16,
    })
    .unwrap();
    let bytes: Vec<u8> = (0..200u32).map(|i| i as u8).collect();
    let head = p.from_bytes(&bytes).unwrap();
    assert_eq!(p.chain_len(head), 4);
    let dst = p.alloc().unwrap();
    for (from, at, len) in [
        (0, 0, 14),
        (60, 2, 62),
        (63, 0, 64),
        (150, 10, 50),
        (199, 0, 1),
    ] {
        assert!(
            p.copy_from_chain(head, from, dst, at, len),
            "{from} {at} {len}"
        );
        assert_eq!(&p.room_mut(dst)[at..at + len], &bytes[from..from + len]);
    }
    // Past the chain's end or the room's: refused, nothing written.
    p.room_mut(dst).fill(0xee);
    assert!(!p.copy_from_chain(head, 150, dst, 0, 51));
    assert!(!p.copy_from_chain(head, 0, dst, 10, 60));
    assert!(p.room_mut(dst).iter().all(|&b| b == 0xee));
    p.free(dst);
    p.free(head);
    assert_eq!(p.available(), p.capacity());
}

#[test]
fn a_buffer_comes_back_plain() {
    let mut p = small();
    let b = p.alloc().unwrap();
    let m = p.meta_mut(b);
    (m.gso_size, m.flags, m.error) = (1448, 0xff, 3);
    p.free(b);
    let again = p.alloc().unwrap();
    assert_eq!(again, b);
    let m = p.meta(again);
    assert_eq!((m.gso_size, m.flags, m.error), (0, 0, 0));
}
