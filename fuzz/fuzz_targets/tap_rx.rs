//! The tap receive path against whatever a pod writes: each input is a list of messages
//! (virtio-net header and frame, the header's fields often made plausible so the checksum and
//! segmentation code is reached), written into a `SOCK_SEQPACKET` pair standing in for the
//! tap and read back by `uplink::tap::RxQueue`. Nothing may panic, every frame taken is
//! a well-formed chain, every super-frame taken whole cuts into valid segments, and every
//! buffer goes back to the pool.
#![no_main]

use arbitrary::Arbitrary;
use buffer::{Pool, PoolConfig};
use libfuzzer_sys::fuzz_target;
use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType, socketpair};
use uplink::tap::RxQueue;

#[derive(Debug, Arbitrary)]
struct Message {
    flags: u8,
    gso_type: u8,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
    /// A TCP/IPv4 frame under the header (so segmentation runs), else raw bytes.
    tcp: bool,
    bytes: Vec<u8>,
}

fn frame(m: &Message) -> Vec<u8> {
    let mut v = vec![m.flags, m.gso_type, 0, 0];
    v.extend_from_slice(&m.gso_size.to_ne_bytes());
    v.extend_from_slice(&m.csum_start.to_ne_bytes());
    v.extend_from_slice(&m.csum_offset.to_ne_bytes());
    v.extend_from_slice(&[0, 0]);
    if m.tcp {
        // Ethernet, IPv4 without options, a 20-byte TCP header, then the bytes; the
        // header bytes themselves come from the input where it has them.
        let mut f = vec![0u8; 54];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = 6;
        f[14 + 20 + 12] = 0x50;
        for (d, s) in f.iter_mut().skip(15).zip(m.bytes.iter().take(8)) {
            *d ^= *s;
        }
        f.extend_from_slice(&m.bytes);
        v.extend_from_slice(&f);
    } else {
        v.extend_from_slice(&m.bytes);
    }
    v
}

/// Cuts a super-frame tap-input took whole into its segments, as `gso-ip4` would: each a
/// TCP/IPv4 packet whose length and TCP checksum are right.
fn cut(v: &[u8], mss: usize) {
    let sf = wire::tso::SuperFrame::parse(v, v.len()).expect("taken whole, so it parses");
    assert!(mss >= wire::tso::MIN_MSS);
    let count = sf.segments(mss);
    for k in 0..count {
        let at = sf.hdrs + k * mss;
        let n = sf.segment_len(mss, k);
        let mut seg = [&v[..sf.hdrs], &v[at..at + n - sf.hdrs]].concat();
        sf.fix(&mut seg, mss, (k, count));
        assert_eq!(usize::from(u16::from_be_bytes([seg[16], seg[17]])), n - 14);
        let tcp = &seg[sf.tcp_at..];
        assert_eq!(wire::checksum::ipv4_pseudo(tcp, sf.src, sf.dst, 6), 0);
    }
}

fuzz_target!(|messages: Vec<Message>| {
    let (ours, pods) = socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&pods, 4 << 20);
    let mut pool = Pool::new(PoolConfig {
        count: 512,
        ..PoolConfig::default()
    })
    .unwrap();
    let mut q = RxQueue::from_fd(ours);
    for m in messages.iter().take(32) {
        let f = frame(m);
        if f.len() > 60_000 || rustix::net::send(&pods, &f, SendFlags::empty()).is_err() {
            continue;
        }
    }
    let mut out = Vec::new();
    for _ in 0..64 {
        out.clear();
        let st = q.recv(&mut pool, &mut out, 16);
        assert!(out.len() <= 16);
        for &b in &out {
            let mut v = Vec::new();
            pool.read_chain(b, &mut v);
            assert_eq!(v.len(), pool.meta(b).total_len as usize);
            assert!(v.len() >= 14);
            let mss = usize::from(pool.meta(b).gso_size);
            if mss != 0 {
                cut(&v, mss);
            }
        }
        pool.free_bulk(&out);
        if st.packets == 0 && st.no_buffer + st.gso + st.bad_frame + st.super_frames == 0 {
            break;
        }
    }
    assert_eq!(pool.available(), pool.capacity(), "a buffer leaked");
});
