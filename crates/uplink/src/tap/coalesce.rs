//! Coalescing on transmit: consecutive TCP/IPv4 segments of one flow, in order, written to a
//! pod's tap as one super-frame (`VIRTIO_NET_HDR_GSO_TCPV4`), its checksum left partial, as a
//! NIC's receive offload would hand them to the kernel. The pod's stack then takes 64 KiB in
//! one pass instead of running its receive path for every segment, inside our `writev`; that
//! per-segment cost is what bounds a pod's TCP throughput through veclane otherwise.
//!
//! A run is only what the kernel's own GRO would merge: IPv4 without options and not a
//! fragment, TCP with ACK (and PSH on the last segment alone), no other flag; headers equal but
//! for the IPv4 length, ID and checksum and the TCP sequence number, checksum and PSH;
//! each segment starting where the one before ended; every segment but the last of the first's
//! size (at least [`MIN_MSS`]), the last no larger; at most [`MAX_RUN`] segments and 64 KiB
//! of IPv4. Each segment is one buffer of the pool (no chain, nothing external), as
//! tap-input's segments are. The pod's kernel takes a partial checksum as verified, as it does
//! from a NIC that verified it, so every merged segment's checksum is known good: computed by
//! veclane ([`buffer::L4_CHECKSUM_OURS`]: a pod's on this node), or checked here (one from
//! another node, a memif pod, a wire), only once a second segment of its flow is there to
//! merge with (a segment that goes alone is checked by the kernel, as before). A segment
//! whose checksum is wrong ends the run and goes alone, for the kernel to drop.

use core::net::Ipv4Addr;

use buffer::{L4_CHECKSUM_OURS, NONE, Pool};

use wire::tso::MIN_MSS;

use super::ETH_HDR;
use crate::vnet;

/// Most segments in one super-frame (the kernel's GRO stops at 64 too: `MAX_GRO_SKBS`).
pub(super) const MAX_RUN: usize = 64;
const IP_HDR: usize = 20;
/// The longest headers of a run's segments: Ethernet, IPv4 without options, TCP with 40
/// bytes of them.
pub(super) const MAX_HDRS: usize = ETH_HDR + IP_HDR + 60;
const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;

/// A segment that could be part of a run.
#[derive(Clone, Copy)]
struct Seg<'a> {
    data: &'a [u8],
    /// Ethernet, IPv4 and TCP headers' length.
    hdrs: usize,
    seq: u32,
    flags: u8,
    /// Its checksum was computed by veclane ([`L4_CHECKSUM_OURS`]).
    ours: bool,
}

impl<'a> Seg<'a> {
    fn payload(&self) -> usize {
        self.data.len() - self.hdrs
    }

    fn parse(pool: &'a Pool, b: u32) -> Option<Seg<'a>> {
        let m = pool.meta(b);
        if m.next != NONE || m.ext.len != 0 {
            return None;
        }
        let d = pool.data(b);
        let ip = d.get(ETH_HDR..ETH_HDR + IP_HDR)?;
        let tcp = ETH_HDR + IP_HDR;
        if d[12..14] != [0x08, 0x00]
            || ip[0] != 0x45
            || u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0
            || ip[9] != 6
            || usize::from(u16::from_be_bytes([ip[2], ip[3]])) != d.len() - ETH_HDR
        {
            return None;
        }
        let t = d.get(tcp..tcp + 20)?;
        let hdrs = tcp + usize::from(t[12] >> 4) * 4;
        let flags = t[13];
        if hdrs < tcp + 20 || hdrs >= d.len() || flags & !TCP_PSH != TCP_ACK {
            return None;
        }
        Some(Seg {
            data: d,
            hdrs,
            seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
            flags,
            ours: m.flags & L4_CHECKSUM_OURS != 0,
        })
    }

    /// Whether the TCP checksum is right: computed here, or checked now.
    fn checksum_good(&self) -> bool {
        let d = self.data;
        let ip = ETH_HDR;
        let addr = |at: usize| Ipv4Addr::new(d[at], d[at + 1], d[at + 2], d[at + 3]);
        self.ours
            || wire::checksum::ipv4_pseudo(&d[ip + IP_HDR..], addr(ip + 12), addr(ip + 16), 6) == 0
    }

    /// Whether `next` continues this segment's flow right after it, headers the same.
    fn followed_by(&self, next: &Seg<'_>) -> bool {
        let (a, b) = (self.data, next.data);
        let tcp = ETH_HDR + IP_HDR;
        let same = |r: core::ops::Range<usize>| a[r.clone()] == b[r];
        self.flags == TCP_ACK
            && self.hdrs == next.hdrs
            && next.seq == self.seq.wrapping_add(self.payload() as u32)
            // Ethernet; IPv4 version to TOS, flags to protocol, addresses.
            && same(0..ETH_HDR + 2)
            && same(ETH_HDR + 6..ETH_HDR + 10)
            && same(ETH_HDR + 12..tcp)
            // TCP ports; acknowledgement, offset, window; urgent pointer and options.
            && same(tcp..tcp + 4)
            && same(tcp + 8..tcp + 13)
            && same(tcp + 14..tcp + 16)
            && same(tcp + 18..self.hdrs)
    }
}

/// How many packets from the start of `bufs` make one run (1 when the first starts none).
pub(super) fn run_len(pool: &Pool, bufs: &[u32]) -> usize {
    let Some(first) = bufs.first().and_then(|&b| Seg::parse(pool, b)) else {
        return 1;
    };
    let mss = first.payload();
    if mss < MIN_MSS {
        return 1;
    }
    let mut ip_len = first.data.len() - ETH_HDR;
    let mut last = first;
    let mut n = 1;
    for &b in &bufs[1..bufs.len().min(MAX_RUN)] {
        let Some(s) = Seg::parse(pool, b) else {
            break;
        };
        if last.payload() != mss
            || s.payload() > mss
            || ip_len + s.payload() > usize::from(u16::MAX)
            || !last.followed_by(&s)
            || !s.checksum_good()
            || (n == 1 && !first.checksum_good())
        {
            break;
        }
        ip_len += s.payload();
        last = s;
        n += 1;
    }
    n
}

/// The super-frame of a run (see [`run_len`]): its virtio-net header and the headers of its
/// first segment made the whole's (IPv4 length and checksum, the last segment's PSH, the TCP
/// checksum field holding the pseudo-header's sum), in `head`. The payloads follow, each
/// segment's own. Returns the headers' length.
pub(super) fn super_header(
    pool: &Pool,
    run: &[u32],
    vnet_hdr: &mut [u8; super::VNET_HDR_LEN],
    head: &mut [u8; MAX_HDRS],
) -> usize {
    let first = Seg::parse(pool, run[0]).expect("a run's segments parse");
    let last = Seg::parse(pool, run[run.len() - 1]).expect("a run's segments parse");
    let hdrs = first.hdrs;
    let payload: usize = run.iter().map(|&b| pool.data(b).len() - hdrs).sum();
    head[..hdrs].copy_from_slice(&first.data[..hdrs]);
    let (ip, tcp) = (ETH_HDR, ETH_HDR + IP_HDR);
    let tcp_len = hdrs - tcp + payload;
    head[ip + 2..ip + 4].copy_from_slice(&((IP_HDR + tcp_len) as u16).to_be_bytes());
    head[ip + 10..ip + 12].fill(0);
    let c = wire::checksum::checksum(&head[ip..tcp]);
    head[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    head[tcp + 13] = last.flags;
    let sf = wire::tso::SuperFrame::parse(&head[..hdrs], hdrs + payload)
        .expect("a run's headers are a super-frame's");
    // The pseudo-header's sum, not inverted: what a partial checksum's field holds.
    head[tcp + 16..tcp + 18].copy_from_slice(&sf.partial_checksum().to_be_bytes());
    *vnet_hdr = vnet::tcp4_super_frame(&sf, first.payload() as u16);
    hdrs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tap::VNET_HDR_LEN;

    /// A 10,000-byte TCP super-frame cut into seven segments as `gso-ip4` cuts them: their
    /// checksums computed here.
    fn segments(pool: &mut Pool, payload: &[u8], sport: u16) -> Vec<u32> {
        let mut frame = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(sport, 2000, 0xffff_f000, 512)
            .psh()
            .ack(7)
            .write(&mut frame, payload)
            .unwrap();
        let sf = wire::tso::SuperFrame::parse(&frame, frame.len()).unwrap();
        let count = sf.segments(1448);
        (0..count)
            .map(|k| {
                let at = sf.hdrs + k * 1448;
                let n = sf.segment_len(1448, k) - sf.hdrs;
                let mut seg = [&frame[..sf.hdrs], &frame[at..at + n]].concat();
                sf.fix(&mut seg, 1448, (k, count));
                let b = pool.from_bytes(&seg).unwrap();
                pool.meta_mut(b).flags |= L4_CHECKSUM_OURS;
                b
            })
            .collect()
    }

    /// The segments of one super-frame make one run, written as a super-frame the kernel
    /// takes: its payload the original's, IPv4 length and checksum right, the partial
    /// checksum completing to the right TCP checksum, PSH kept, the header's fields set.
    #[test]
    fn segments_in_order_become_one_super_frame() {
        let mut pool = Pool::new(buffer::PoolConfig {
            count: 64,
            ..buffer::PoolConfig::default()
        })
        .unwrap();
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 13) as u8).collect();
        let segs = segments(&mut pool, &payload, 1000);
        assert_eq!(segs.len(), 7);
        assert_eq!(run_len(&pool, &segs), 7);
        let mut vh = [0u8; VNET_HDR_LEN];
        let mut head = [0u8; MAX_HDRS];
        let hdrs = super_header(&pool, &segs, &mut vh, &mut head);
        let mut whole = head[..hdrs].to_vec();
        for &b in &segs {
            whole.extend_from_slice(&pool.data(b)[hdrs..]);
        }
        assert_eq!(&whole[hdrs..], &payload[..]);
        // Complete the partial checksum as the kernel would, then check it.
        let start = usize::from(u16::from_ne_bytes([vh[6], vh[7]]));
        let field = start + usize::from(u16::from_ne_bytes([vh[8], vh[9]]));
        let c = !wire::checksum::fold(wire::checksum::accumulate(0, &whole[start..]));
        whole[field..field + 2].copy_from_slice(&c.to_be_bytes());
        let p = etherparse::SlicedPacket::from_ethernet(&whole).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
            panic!()
        };
        let Some(etherparse::TransportSlice::Tcp(t)) = &p.transport else {
            panic!()
        };
        let ih = ip.header().to_header();
        assert_eq!(ih.header_checksum, ih.calc_header_checksum());
        assert_eq!(usize::from(ih.total_len), whole.len() - ETH_HDR);
        assert_eq!(
            t.checksum(),
            t.to_header().calc_checksum_ipv4(&ih, t.payload()).unwrap()
        );
        assert!(t.psh() && t.ack() && !t.fin());
        assert_eq!(t.sequence_number(), 0xffff_f000);
        assert_eq!(vh[0], vnet::F_NEEDS_CSUM);
        assert_eq!(vh[1], vnet::GSO_TCPV4);
        assert_eq!(u16::from_ne_bytes([vh[2], vh[3]]), hdrs as u16);
        assert_eq!(u16::from_ne_bytes([vh[4], vh[5]]), 1448);
    }

    /// What a run stops at: another flow, a gap, a segment after the one with PSH, a
    /// checksum that is wrong (one from a peer is checked; a right one merges).
    #[test]
    fn a_run_is_only_what_gro_would_merge() {
        let mut pool = Pool::new(buffer::PoolConfig {
            count: 128,
            ..buffer::PoolConfig::default()
        })
        .unwrap();
        let payload: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let a = segments(&mut pool, &payload, 1000);
        let b = segments(&mut pool, &payload, 1001);
        // Two flows one after the other: two runs.
        let both: Vec<u32> = a.iter().chain(&b).copied().collect();
        assert_eq!(run_len(&pool, &both), 7);
        assert_eq!(run_len(&pool, &both[7..]), 7);
        // The last of a super-frame has PSH: nothing joins after it.
        let twice: Vec<u32> = a.iter().chain(&a).copied().collect();
        assert_eq!(run_len(&pool, &twice), 7);
        // A gap in the sequence.
        let gap = [a[0], a[2]];
        assert_eq!(run_len(&pool, &gap), 1);
        // Checksums not computed here (from a peer or a wire) are checked: right ones merge.
        for &s in &b {
            pool.meta_mut(s).flags &= !L4_CHECKSUM_OURS;
        }
        assert_eq!(run_len(&pool, &b), 7);
        // A wrong one ends the run and goes alone; one before it that is ours is written
        // alone too, and one after it starts the next run.
        pool.meta_mut(a[1]).flags &= !L4_CHECKSUM_OURS;
        let last = pool.data(a[1]).len() - 1;
        pool.data_mut(a[1])[last] ^= 0xff;
        assert_eq!(run_len(&pool, &a), 1);
        assert_eq!(run_len(&pool, &a[1..]), 1);
        assert_eq!(run_len(&pool, &a[2..]), 5);
        // A wrong first one, from a peer, starts none.
        pool.meta_mut(b[0]).flags &= !L4_CHECKSUM_OURS;
        pool.data_mut(b[0])[60] ^= 0xff;
        assert_eq!(run_len(&pool, &b), 1);
    }
}
