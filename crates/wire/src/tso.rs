//! TCP segmentation offload over IPv4: what a super-frame is (one TCP/IPv4 packet of up to
//! 64 KiB that a sender's stack hands its device, to be cut into segments of a given size),
//! and the headers of each segment it is cut into, as the kernel's software segmentation
//! (`tcp_gso_segment`) makes them.
//!
//! A super-frame's TCP checksum is partial: its field holds the sum of the pseudo-header
//! (addresses, protocol and the super-frame's TCP length), not inverted; whoever finishes
//! the packet (the receiving kernel, or the segmentation here) sums the rest.

use crate::ethernet::HEADER_LEN as ETH_HDR;
use crate::{EtherType, Ethernet, IpProtocol, Ipv4, Ipv4Addr, Tcp, ipv4, tcp};

/// The smallest segment size a super-frame is cut into (IPv4's minimum MSS); a smaller one
/// would multiply one packet into thousands.
pub const MIN_MSS: usize = 536;

/// Where the TCP checksum field sits in its header (`csum_offset` of an offload header).
pub const CHECKSUM_OFFSET: usize = tcp::field::CHECKSUM.start;

/// The longest Ethernet, IPv4 and TCP headers (both with 40 bytes of options).
pub const MAX_HDRS: usize = ETH_HDR + 60 + 60;

/// What a super-frame's segments are made from: its headers' places and the values each
/// segment's headers count on from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuperFrame {
    /// Where TCP starts in the Ethernet frame.
    pub tcp_at: usize,
    /// Ethernet, IPv4 and TCP headers' length: where the payload starts.
    pub hdrs: usize,
    /// The frame's length.
    pub len: usize,
    /// The super-frame's IPv4 ID and sequence number: the first segment's.
    pub id0: u16,
    pub seq0: u32,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// CWR is set (the first segment keeps it; an offload header says ECN).
    pub cwr: bool,
}

impl SuperFrame {
    /// The headers of an Ethernet frame of `len` bytes whose first bytes are `f` (the
    /// headers at least), if it is a TCP/IPv4 packet that can be cut: IPv4 whose length is
    /// the frame's, not a fragment, a TCP header within `f`, some payload after it.
    pub fn parse(f: &[u8], len: usize) -> Option<SuperFrame> {
        let eth = Ethernet::new_checked(f).ok()?;
        if eth.ethertype() != EtherType::Ipv4 || eth.payload().len() < ipv4::MIN_HEADER_LEN {
            return None;
        }
        let ip = Ipv4::new_unchecked(eth.payload());
        if ip.version() != 4
            || ip.header_len() < ipv4::MIN_HEADER_LEN
            || ip.protocol() != IpProtocol::Tcp
            || ip.more_frags()
            || ip.frag_offset() != 0
            || usize::from(ip.total_len()) + ETH_HDR != len
        {
            return None;
        }
        let tcp_at = ETH_HDR + ip.header_len();
        let t = Tcp::new_checked(f.get(tcp_at..)?).ok()?;
        let hdrs = tcp_at + t.header_len();
        if hdrs >= len || hdrs > f.len() {
            return None;
        }
        Some(SuperFrame {
            tcp_at,
            hdrs,
            len,
            id0: ip.ident(),
            seq0: t.seq_number(),
            src: ip.src_addr(),
            dst: ip.dst_addr(),
            cwr: t.flags() & tcp::flags::CWR != 0,
        })
    }

    /// The IPv4 length of the longest segment of `mss` payload bytes of the super-frame
    /// whose IPv4 header starts `ip` (its TCP header within it): what an MTU bounds.
    pub fn segment_ip_len(ip: &[u8], mss: u16) -> Option<usize> {
        let ihl = usize::from(ip.first()? & 0x0f) * 4;
        let doff = usize::from(ip.get(ihl + tcp::field::DATA_OFFSET)? >> 4) * 4;
        Some(ihl + doff + usize::from(mss))
    }

    /// The number of segments of `mss` payload bytes it is cut into.
    pub fn segments(&self, mss: usize) -> usize {
        (self.len - self.hdrs).div_ceil(mss)
    }

    /// Segment `k`'s length, Ethernet header included.
    pub fn segment_len(&self, mss: usize, k: usize) -> usize {
        self.hdrs + mss.min(self.len - self.hdrs - k * mss)
    }

    /// The partial checksum a super-frame of this length carries in its TCP checksum field
    /// (the pseudo-header's sum, folded, not inverted).
    pub fn partial_checksum(&self) -> u16 {
        let tcp_len = (self.len - self.tcp_at) as u16;
        crate::checksum::fold(crate::checksum::ipv4_pseudo_header(
            self.src, self.dst, 6, tcp_len,
        ))
    }

    /// Makes segment `k` of `count`'s headers, `seg` holding the super-frame's headers and
    /// the segment's payload: IPv4 length, ID and checksum, sequence number, FIN and PSH on
    /// the last only, CWR on the first only, a full TCP checksum.
    pub fn fix(&self, seg: &mut [u8], mss: usize, (k, count): (usize, usize)) {
        let len = seg.len();
        let (ip, t) = seg[ETH_HDR..].split_at_mut(self.tcp_at - ETH_HDR);
        let mut ip = Ipv4::new_unchecked(ip);
        ip.set_total_len((len - ETH_HDR) as u16);
        ip.set_ident(self.id0.wrapping_add(k as u16));
        ip.fill_checksum();
        let mut t = Tcp::new_unchecked(t);
        t.set_seq_number(self.seq0.wrapping_add((k * mss) as u32));
        if k + 1 < count {
            t.clear_flags(tcp::flags::FIN | tcp::flags::PSH); // the last segment's alone
        }
        if k > 0 {
            t.clear_flags(tcp::flags::CWR); // the first segment's alone
        }
        t.fill_checksum(self.src, self.dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1000, 2000, 0xffff_f000, 512)
            .fin()
            .psh()
            .cwr()
            .ack(7)
            .write(&mut f, payload)
            .unwrap();
        f
    }

    /// A super-frame (FIN, PSH, CWR set; 5000 bytes) cut at 1448: segments that etherparse
    /// finds valid, in sequence, flags where the kernel puts them, the payload whole.
    #[test]
    fn segments_are_what_the_kernel_makes() {
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let f = frame(&payload);
        let sf = SuperFrame::parse(&f, f.len()).unwrap();
        assert_eq!((sf.tcp_at, sf.hdrs, sf.cwr), (34, 54, true));
        let count = sf.segments(1448);
        assert_eq!(count, 4);
        let mut got = Vec::new();
        for k in 0..count {
            let n = sf.segment_len(1448, k);
            let at = sf.hdrs + k * 1448;
            let mut seg = [&f[..sf.hdrs], &f[at..at + n - sf.hdrs]].concat();
            sf.fix(&mut seg, 1448, (k, count));
            let p = etherparse::SlicedPacket::from_ethernet(&seg).unwrap();
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
        }
        assert_eq!(got, payload);
    }

    #[test]
    fn only_whole_tcp4_packets_with_payload_parse() {
        let f = frame(&[9; 3000]);
        assert_eq!(SuperFrame::segment_ip_len(&f[14..], 1448), Some(1488));
        assert_eq!(SuperFrame::segment_ip_len(&f[14..40], 1448), None);
        assert!(SuperFrame::parse(&f, f.len()).is_some());
        assert!(
            SuperFrame::parse(&f[..40], f.len()).is_none(),
            "headers cut"
        );
        assert!(SuperFrame::parse(&f, f.len() + 1).is_none(), "length lies");
        let bare = frame(&[]);
        assert!(SuperFrame::parse(&bare, bare.len()).is_none(), "no payload");
        let mut frag = f.clone();
        frag[14 + 6] |= 0x20;
        assert!(SuperFrame::parse(&frag, f.len()).is_none(), "a fragment");
        let mut udp = f.clone();
        udp[14 + 9] = 17;
        assert!(SuperFrame::parse(&udp, f.len()).is_none(), "not TCP");
        let mut long = f.clone();
        long[14 + 20 + 12] = 0xf0;
        assert!(
            SuperFrame::parse(&long[..80], f.len()).is_none(),
            "TCP header past the bytes"
        );
    }

    #[test]
    fn the_partial_checksum_finishes_to_the_full_one() {
        let f = frame(&[5; 2000]);
        let sf = SuperFrame::parse(&f, f.len()).unwrap();
        let mut p = f.clone();
        let at = sf.tcp_at + CHECKSUM_OFFSET;
        p[at..at + 2].copy_from_slice(&sf.partial_checksum().to_be_bytes());
        let c = !crate::checksum::fold(crate::checksum::accumulate(0, &p[sf.tcp_at..]));
        assert_eq!(c.to_be_bytes(), f[at..at + 2]);
    }
}
