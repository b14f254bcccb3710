//! Segmentation offload on receive: a TCP/IPv4 super-frame from the pod's stack cut into the
//! segments the kernel's software segmentation would have sent, through `wire`'s views.

use buffer::Pool;
use wire::{EtherType, Ethernet, IpProtocol, Ipv4, Tcp, ipv4, tcp};

use super::rx::{Lost, RxQueue};
use super::{ETH_HDR, MIN_MSS, VNET_HDR_LEN};
use crate::vnet::VnetHdr;

impl RxQueue {
    /// Cuts a TCP/IPv4 super-frame (its first `first` bytes in `b`, the rest in the overflow
    /// area; `n` read with the header) into segments of the size the header gives, as the
    /// kernel's own software segmentation would: each with the headers, its IPv4 length, ID
    /// and checksum, its sequence number, FIN and PSH on the last only, CWR on the first only,
    /// and a full TCP checksum. They go to `pending`; `b` goes back to the pool.
    pub(super) fn segment(
        &mut self,
        pool: &mut Pool,
        b: u32,
        hdr: &[u8; VNET_HDR_LEN],
        n: usize,
        first: usize,
    ) -> Result<(), Lost> {
        let len = n.saturating_sub(VNET_HDR_LEN);
        // The frame is `linear` (its start: what `b` holds, and enough of the overflow area
        // for the longest headers) followed by the rest of the overflow area: the payload is
        // copied once, into the segments.
        let head = len.min(first);
        let lin = len.min(head.max(MAX_HDRS));
        self.linear.clear();
        self.linear.extend_from_slice(&pool.room_mut(b)[..head]);
        self.linear.extend_from_slice(&self.overflow[..lin - head]);
        pool.free(b);
        let (f, rest) = (&self.linear[..], &self.overflow[lin - head..len - head]);
        let mss = usize::from(VnetHdr::new(hdr).gso_size());
        // Ethernet, IPv4, TCP; the lengths from the headers, checked.
        let eth = Ethernet::new_checked(f).map_err(|_| Lost::Bad)?;
        if eth.ethertype() != EtherType::Ipv4 || eth.payload().len() < ipv4::MIN_HEADER_LEN {
            return Err(Lost::Bad);
        }
        let ip = Ipv4::new_unchecked(eth.payload());
        if ip.version() != 4
            || ip.header_len() < ipv4::MIN_HEADER_LEN
            || ip.protocol() != IpProtocol::Tcp
        {
            return Err(Lost::Bad);
        }
        let tcp_at = ETH_HDR + ip.header_len();
        let t = f
            .get(tcp_at..)
            .and_then(|t| Tcp::new_checked(t).ok())
            .ok_or(Lost::Bad)?;
        let hdrs = tcp_at + t.header_len();
        let payload = len - hdrs;
        if mss < MIN_MSS || payload == 0 {
            return Err(Lost::Gso);
        }
        let h = Hdrs {
            tcp_at,
            id0: ip.ident(),
            seq0: t.seq_number(),
            mss,
            src: ip.src_addr(),
            dst: ip.dst_addr(),
        };
        let count = payload.div_ceil(mss);
        for k in 0..count {
            let at = hdrs + k * mss;
            let size = hdrs + mss.min(len - at);
            let nb = pool.alloc().ok_or(Lost::NoBuffer)?;
            let room = pool.room_mut(nb);
            if room.len() < size {
                // A segment larger than a buffer (a jumbo MTU): built aside, then chained.
                pool.free(nb);
                let mut seg = vec![0; size];
                fill(&mut seg, f, rest, at, hdrs);
                fix(&mut seg, (k, count), &h);
                let nb = pool.from_bytes(&seg).ok_or(Lost::NoBuffer)?;
                pool.meta_mut(nb).flags |= buffer::L4_CHECKSUM_OURS;
                self.pending.push_back((nb, size as u32));
                continue;
            }
            let seg = &mut room[..size];
            fill(seg, f, rest, at, hdrs);
            fix(seg, (k, count), &h);
            let m = pool.meta_mut(nb);
            m.len = size as u16;
            m.total_len = size as u32;
            m.flags |= buffer::L4_CHECKSUM_OURS;
            self.pending.push_back((nb, size as u32));
        }
        Ok(())
    }
}

/// The longest Ethernet, IPv4 and TCP headers (both with 40 bytes of options).
const MAX_HDRS: usize = ETH_HDR + 60 + 60;

/// What each segment's headers are made from.
struct Hdrs {
    /// Where TCP starts.
    tcp_at: usize,
    /// The super-frame's IPv4 ID and sequence number: the first segment's.
    id0: u16,
    seq0: u32,
    /// The segment size.
    mss: usize,
    src: wire::Ipv4Addr,
    dst: wire::Ipv4Addr,
}

/// Writes into `seg` the frame's headers (from `f`) and its payload from `at` on (the frame
/// being `f` followed by `rest`).
fn fill(seg: &mut [u8], f: &[u8], rest: &[u8], at: usize, hdrs: usize) {
    seg[..hdrs].copy_from_slice(&f[..hdrs]);
    let dst = &mut seg[hdrs..];
    let from_f = f.len().saturating_sub(at).min(dst.len());
    if from_f > 0 {
        dst[..from_f].copy_from_slice(&f[at..at + from_f]);
    }
    let k = dst.len() - from_f;
    if k > 0 {
        // What `f` did not hold starts in `rest` where `f` ended.
        let o = at + from_f - f.len();
        dst[from_f..].copy_from_slice(&rest[o..o + k]);
    }
}

/// Makes segment `k` of `count`'s headers: IPv4 length, ID and checksum, sequence number,
/// FIN and PSH on the last only, CWR on the first only, the TCP checksum.
fn fix(seg: &mut [u8], (k, count): (usize, usize), h: &Hdrs) {
    let Hdrs {
        tcp_at,
        id0,
        seq0,
        mss,
        src,
        dst,
    } = *h;
    let len = seg.len();
    let (ip, t) = seg[ETH_HDR..].split_at_mut(tcp_at - ETH_HDR);
    let mut ip = Ipv4::new_unchecked(ip);
    ip.set_total_len((len - ETH_HDR) as u16);
    ip.set_ident(id0.wrapping_add(k as u16));
    ip.fill_checksum();
    let mut t = Tcp::new_unchecked(t);
    t.set_seq_number(seq0.wrapping_add((k * mss) as u32));
    if k + 1 < count {
        t.clear_flags(tcp::flags::FIN | tcp::flags::PSH); // the last segment's alone
    }
    if k > 0 {
        t.clear_flags(tcp::flags::CWR); // the first segment's alone
    }
    t.fill_checksum(src, dst);
}

#[cfg(test)]
mod tests {
    use rustix::fs::{Mode, OFlags};

    use super::*;
    use crate::tap::OVERFLOW;
    use crate::vnet::GSO_TCPV4;

    /// A TCP super-frame (FIN, PSH, CWR set; 5000 bytes) cut at 1448: segments that
    /// etherparse finds valid, in sequence, flags where the kernel puts them, the payload
    /// whole; a segment size under 536 and a frame that is not TCP are refused.
    #[test]
    fn a_super_frame_is_cut_as_the_kernel_would() {
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut frame = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1000, 2000, 0xffff_f000, 512)
            .fin()
            .psh()
            .cwr()
            .ack(7)
            .write(&mut frame, &payload)
            .unwrap();
        let mut pool = Pool::new(buffer::PoolConfig {
            count: 64,
            ..buffer::PoolConfig::default()
        })
        .unwrap();
        let fd = rustix::fs::open("/dev/null", OFlags::RDONLY, Mode::empty()).unwrap();
        let mut q = RxQueue::from_fd(fd);
        q.overflow = vec![0; OVERFLOW];
        let mut hdr = [0u8; VNET_HDR_LEN];
        hdr[1] = GSO_TCPV4;
        // The read put `first` bytes in the buffer and the rest in the overflow area: a
        // start shorter than the headers, a part of the payload, most of it.
        let first = 100;
        let cut = |q: &mut RxQueue, pool: &mut Pool, hdr: &[u8; VNET_HDR_LEN], f: &[u8], first| {
            let b = pool.alloc().unwrap();
            let first = f.len().min(first);
            pool.room_mut(b)[..first].copy_from_slice(&f[..first]);
            q.overflow[..f.len() - first].copy_from_slice(&f[first..]);
            q.segment(pool, b, hdr, f.len() + VNET_HDR_LEN, first)
        };
        hdr[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        for head in [40, 1000, 2048] {
            assert!(cut(&mut q, &mut pool, &hdr, &frame, head).is_ok());
            let again: Vec<(u32, u32)> = q.pending.drain(..).collect();
            let mut bytes = Vec::new();
            for &(b, _) in &again {
                pool.read_chain(b, &mut bytes);
                pool.free(b);
            }
            assert!(cut(&mut q, &mut pool, &hdr, &frame, first).is_ok());
            let mut want = Vec::new();
            for (b, _) in q.pending.drain(..) {
                pool.read_chain(b, &mut want);
                pool.free(b);
            }
            assert_eq!(bytes, want, "first {head}");
        }
        assert!(cut(&mut q, &mut pool, &hdr, &frame, first).is_ok());
        let segs: Vec<(u32, u32)> = q.pending.drain(..).collect();
        assert_eq!(segs.len(), 4);
        let mut got = Vec::new();
        for (k, &(b, len)) in segs.iter().enumerate() {
            let mut v = Vec::new();
            pool.read_chain(b, &mut v);
            assert_eq!(v.len(), len as usize);
            let p = etherparse::SlicedPacket::from_ethernet(&v).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
                panic!()
            };
            let Some(etherparse::TransportSlice::Tcp(t)) = &p.transport else {
                panic!()
            };
            let ih = ip.header().to_header();
            assert_eq!(ih.header_checksum, ih.calc_header_checksum(), "segment {k}");
            assert_eq!(ih.identification, ip.header().identification());
            assert_eq!(
                t.checksum(),
                t.to_header().calc_checksum_ipv4(&ih, t.payload()).unwrap(),
                "segment {k}"
            );
            assert_eq!(
                t.sequence_number(),
                0xffff_f000u32.wrapping_add(1448 * k as u32)
            );
            let last = k == 3;
            assert_eq!(
                (t.fin(), t.psh(), t.cwr(), t.ack()),
                (last, last, k == 0, true)
            );
            got.extend_from_slice(t.payload());
            pool.free(b);
        }
        assert_eq!(got, payload);
        hdr[4..6].copy_from_slice(&100u16.to_ne_bytes());
        assert!(matches!(
            cut(&mut q, &mut pool, &hdr, &frame, first),
            Err(Lost::Gso)
        ));
        hdr[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        let mut udp = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1, 2)
            .write(&mut udp, &payload)
            .unwrap();
        assert!(matches!(
            cut(&mut q, &mut pool, &hdr, &udp, first),
            Err(Lost::Bad)
        ));
        assert!(q.pending.is_empty());
        assert_eq!(pool.available(), pool.capacity());
    }
}
