//! The AF_PACKET receive path against a frame the kernel queued on the socket (a UDP
//! super-packet, or a frame longer than its ring slot) under any virtio-net header: the
//! header's fields, a VLAN tag the kernel took out, and a frame that is often a UDP/IPv4
//! super-packet with consistent lengths (so that the cutting is reached). Nothing may panic;
//! a frame is taken whole or not at all (no chain appended, every buffer back); a plain
//! frame arrives byte for byte, its tag back after the MAC addresses and only its partial
//! checksum completed; each datagram cut from a super-packet is a UDP/IPv4 frame whose
//! lengths and header checksum are right, and their payloads in order are the
//! super-packet's.
#![no_main]

use arbitrary::Arbitrary;
use buffer::{Pool, PoolConfig};
use libfuzzer_sys::fuzz_target;
use uplink::af_packet::testing::deliver_copy;

const GSO_UDP_L4: u8 = 5;
const NEEDS_CSUM: u8 = 1;

#[derive(Debug, Arbitrary)]
struct Input {
    flags: u8,
    gso_type: u8,
    /// Make it a UDP super-packet (GSO_UDP_L4) whatever `gso_type` says.
    super_packet: bool,
    hdr_len: u16,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
    tag: Option<[u8; 4]>,
    /// Lay out Ethernet, IPv4 with this many words of options (mod 11) and UDP before the
    /// bytes, their lengths consistent with the frame's.
    udp: Option<u8>,
    slots: u8,
    /// Buffers of 256 bytes (long chains) instead of 2048, and few of them.
    small_pool: bool,
    bytes: Vec<u8>,
}

fn frame(i: &Input) -> Vec<u8> {
    let Some(w) = i.udp else {
        return i.bytes.clone();
    };
    let ihl = 20 + 4 * usize::from(w % 11);
    let mut f = vec![0u8; 14 + ihl + 8];
    f[12] = 0x08;
    f[14] = 0x40 | (ihl / 4) as u8;
    f[14 + 9] = 17;
    f.extend_from_slice(&i.bytes);
    f.truncate(65_535 + 14);
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    let udp_len = (f.len() - 14 - ihl) as u16;
    f[14 + ihl + 4..14 + ihl + 6].copy_from_slice(&udp_len.to_be_bytes());
    f
}

/// The Internet checksum of `b` (0 when `b` holds a right one).
fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fuzz_target!(|i: Input| {
    let f = frame(&i);
    let gso_type = if i.super_packet {
        GSO_UDP_L4
    } else {
        i.gso_type
    };
    let mut vnet = [0u8; 10];
    vnet[0] = i.flags;
    vnet[1] = gso_type;
    vnet[2..4].copy_from_slice(&i.hdr_len.to_ne_bytes());
    vnet[4..6].copy_from_slice(&i.gso_size.to_ne_bytes());
    vnet[6..8].copy_from_slice(&i.csum_start.to_ne_bytes());
    vnet[8..10].copy_from_slice(&i.csum_offset.to_ne_bytes());
    let mut pool = Pool::new(PoolConfig {
        count: if i.small_pool { 64 } else { 1024 },
        data_size: if i.small_pool { 256 } else { 2048 },
        ..PoolConfig::default()
    })
    .unwrap();
    let mut out = vec![u32::MAX];
    let slots = usize::from(i.slots);
    let got = deliver_copy(&mut pool, vnet, i.tag, &f, slots, &mut out);
    let chains: Vec<Vec<u8>> = out[1..]
        .iter()
        .map(|&b| {
            let mut v = Vec::new();
            pool.read_chain(b, &mut v);
            assert_eq!(v.len(), pool.meta(b).total_len as usize);
            v
        })
        .collect();
    match got {
        Err(_) => assert!(chains.is_empty(), "a frame not taken left chains"),
        Ok(n) => {
            assert!(n == chains.len() && n >= 1 && n <= slots);
            let extra = if i.tag.is_some() && f.len() >= 12 {
                4
            } else {
                0
            };
            if gso_type == GSO_UDP_L4 {
                check_datagrams(&f, &chains, usize::from(i.gso_size), extra);
            } else {
                assert_eq!(n, 1);
                check_plain(&f, &chains[0], &i, extra);
            }
        }
    }
    pool.free_bulk(&out[1..]);
    assert_eq!(pool.available(), pool.capacity(), "a buffer leaked");
});

/// A plain frame: as it was, the tag back after the MAC addresses, at most the two bytes of
/// its partial checksum changed.
fn check_plain(f: &[u8], got: &[u8], i: &Input, extra: usize) {
    assert_eq!(got.len(), f.len() + extra);
    let mut want = f.to_vec();
    if extra != 0 {
        want.splice(12..12, i.tag.unwrap());
    }
    let csum_at = (i.flags & NEEDS_CSUM != 0)
        .then(|| usize::from(i.csum_start) + usize::from(i.csum_offset) + extra);
    for (k, (a, b)) in want.iter().zip(got).enumerate() {
        if Some(k) != csum_at && Some(k) != csum_at.map(|c| c + 1) {
            assert_eq!(a, b, "byte {k}");
        }
    }
}

/// A super-packet's datagrams: each a UDP/IPv4 frame (tagged as the super-packet was) with
/// its lengths and header checksum right and at most `gso_size` bytes of payload, the
/// payloads in order the super-packet's.
fn check_datagrams(f: &[u8], chains: &[Vec<u8>], gso_size: usize, extra: usize) {
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let hdrs = 14 + ihl + 8;
    let mut payload = Vec::new();
    for d in chains {
        let d = if extra != 0 {
            [&d[..12], &d[16..]].concat()
        } else {
            d.clone()
        };
        assert!(d.len() > hdrs && d.len() - hdrs <= gso_size);
        assert_eq!(d[..12], f[..12]);
        let ip = &d[14..14 + ihl];
        assert_eq!(
            usize::from(u16::from_be_bytes([ip[2], ip[3]])),
            d.len() - 14
        );
        assert_eq!(checksum(ip), 0, "IPv4 header checksum");
        let udp = &d[14 + ihl..hdrs];
        assert_eq!(
            usize::from(u16::from_be_bytes([udp[4], udp[5]])),
            d.len() - 14 - ihl
        );
        payload.extend_from_slice(&d[hdrs..]);
    }
    assert_eq!(payload, f[hdrs..], "the payloads, in order");
}
