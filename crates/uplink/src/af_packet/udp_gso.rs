//! UDP segmentation offload on an AF_PACKET uplink (virtio-net `GSO_UDP_L4`), both ways: the
//! headers' arithmetic here, the sending in [`super::tx_gso`], the cutting in [`super::rx`].
//!
//! Out: a run of UDP/IPv4 datagrams of one flow and one payload size (the last may be
//! shorter) leaves as one super-packet, the headers once and then each datagram's payload.
//! The kernel carries it as one skb and cuts it only where a device needs that (a NIC
//! without UDP segmentation offload; never a veth), as it does for a local socket's
//! `UDP_SEGMENT`. VXLAN to one VTEP makes such runs: a pod's TCP super-frame cut by
//! `gso-ip4`, each segment encapsulated alike.
//!
//! In: such a super-packet from a veth (another node's veclane, or a local program with
//! `UDP_SEGMENT`) arrives whole. It is cut here into the datagrams it stands for, each with
//! headers of its own, as the kernel's software segmentation would make them: IPv4 total
//! length, identification (the super-packet's, plus the segment's index) and checksum, UDP
//! length; the UDP checksum, left partial by the sender and covering nothing yet, becomes 0
//! ("none", RFC 768), which IPv4 allows and VXLAN asks for (RFC 7348 §5).

use core::ops::Range;

use wire::checksum;

/// Most datagrams a super-packet we send carries (the kernel's `UDP_MAX_SEGMENTS` was 64
/// before it became 128; 64 is within both).
pub(crate) const MAX_TX_SEGMENTS: usize = 64;

/// Most datagrams a super-packet we receive may stand for (the kernel's `UDP_MAX_SEGMENTS`);
/// one that claims more is dropped, not cut, so that one frame never floods a vector.
pub(crate) const MAX_RX_SEGMENTS: usize = 128;

const ETH: usize = 14;
/// Ethernet, an IPv4 header of 60 bytes (the most options allow) and UDP.
pub(crate) const MAX_HDRS: usize = ETH + 60 + 8;
/// Ethernet, an IPv4 header without options, and UDP.
pub(crate) const MIN_HDRS: usize = ETH + 20 + 8;

/// An untagged Ethernet frame's UDP/IPv4 headers, unfragmented: where each starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Udp4 {
    /// The UDP header's offset (Ethernet's 14 plus the IPv4 header's length).
    pub(crate) udp: usize,
}

impl Udp4 {
    /// The payload's offset: every header's length.
    pub(crate) fn hdrs(&self) -> usize {
        self.udp + 8
    }

    /// The headers at the start of `f`, if `f` begins with all of them.
    pub(crate) fn parse(f: &[u8]) -> Option<Udp4> {
        if f.len() < ETH + 20 || f[12..14] != [0x08, 0x00] {
            return None;
        }
        let ip = &f[ETH..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let frag = u16::from_be_bytes([ip[6], ip[7]]);
        let ok = ip[0] >> 4 == 4 && ihl >= 20 && ip[9] == 17 && frag & 0x3fff == 0;
        let udp = ETH + ihl;
        (ok && f.len() >= udp + 8).then_some(Udp4 { udp })
    }

    /// Rewrites the lengths (and the identification, when `id` is given) of the headers in
    /// `h` for `payload` bytes of UDP payload, and the IPv4 header's checksum.
    fn set_lengths(&self, h: &mut [u8], payload: usize, id: Option<u16>) {
        let udp_len = (8 + payload) as u16;
        let ip_len = (self.udp - ETH) as u16 + udp_len;
        h[ETH + 2..ETH + 4].copy_from_slice(&ip_len.to_be_bytes());
        if let Some(id) = id {
            h[ETH + 4..ETH + 6].copy_from_slice(&id.to_be_bytes());
        }
        h[ETH + 10..ETH + 12].fill(0);
        let c = checksum::checksum(&h[ETH..self.udp]);
        h[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
        h[self.udp + 4..self.udp + 6].copy_from_slice(&udp_len.to_be_bytes());
    }

    /// Makes `h` (a datagram's headers) the headers of a super-packet of `payload` bytes of
    /// UDP payload in all: lengths, IPv4 checksum, and the UDP checksum field holding the
    /// pseudo-header's sum, as a partial checksum's must (the kernel adjusts it for each
    /// datagram it cuts).
    pub(crate) fn make_super(&self, h: &mut [u8], payload: usize) {
        self.set_lengths(h, payload, None);
        let ip = &h[ETH..];
        let addr = |at: usize| core::net::Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]);
        let p = checksum::ipv4_pseudo_header(addr(12), addr(16), 17, (8 + payload) as u16);
        h[self.udp + 6..self.udp + 8].copy_from_slice(&checksum::fold(p).to_be_bytes());
    }

    /// Whether `h` heads a datagram of the same flow as `first`'s headers: the same bytes but
    /// for the fields each datagram has its own of (IPv4 total length, identification and
    /// checksum, UDP length and checksum). Both are `self.hdrs()` bytes long.
    pub(crate) fn same_flow(&self, first: &[u8], h: &[u8]) -> bool {
        let u = self.udp;
        // Ethernet and IPv4 up to the total length; flags, TTL and protocol; addresses,
        // options and ports.
        let same = |r: Range<usize>| first[r.clone()] == h[r];
        same(0..ETH + 2) && same(ETH + 6..ETH + 10) && same(ETH + 12..u + 4)
    }
}

/// A received super-packet, checked and ready to cut: `len` bytes whose headers (a copy of
/// them) are in `hdr`, `gso_size` bytes of payload a datagram.
#[derive(Debug, Clone)]
pub(crate) struct Cut {
    hdr: [u8; MAX_HDRS],
    at: Udp4,
    len: usize,
    gso_size: usize,
    segments: usize,
}

impl Cut {
    /// The super-packet of `len` bytes beginning with `head` (at least its headers, or all of
    /// `len` if shorter), to be cut every `gso_size` bytes of payload; `None` when it is not
    /// an untagged UDP/IPv4 frame with some payload, or would make more than
    /// [`MAX_RX_SEGMENTS`] datagrams.
    pub(crate) fn new(head: &[u8], len: usize, gso_size: u16) -> Option<Cut> {
        let head = &head[..head.len().min(len).min(MAX_HDRS)];
        let at = Udp4::parse(head)?;
        let gso_size = usize::from(gso_size);
        let payload = len.checked_sub(at.hdrs()).filter(|&p| p > 0)?;
        if gso_size == 0 {
            return None;
        }
        let segments = payload.div_ceil(gso_size);
        if segments > MAX_RX_SEGMENTS {
            return None;
        }
        let mut hdr = [0u8; MAX_HDRS];
        hdr[..at.hdrs()].copy_from_slice(&head[..at.hdrs()]);
        Some(Cut {
            hdr,
            at,
            len,
            gso_size,
            segments,
        })
    }

    /// How many datagrams it stands for.
    pub(crate) fn segments(&self) -> usize {
        self.segments
    }

    /// Datagram `i`'s headers, written into `out` (their length is the slice returned), and
    /// where its payload lies in the super-packet.
    pub(crate) fn segment<'a>(
        &self,
        i: usize,
        out: &'a mut [u8; MAX_HDRS],
    ) -> (&'a [u8], Range<usize>) {
        let n = self.at.hdrs();
        let start = n + i * self.gso_size;
        let end = (start + self.gso_size).min(self.len);
        out[..n].copy_from_slice(&self.hdr[..n]);
        let id = u16::from_be_bytes([self.hdr[ETH + 4], self.hdr[ETH + 5]]).wrapping_add(i as u16);
        self.at.set_lengths(&mut out[..n], end - start, Some(id));
        out[self.at.udp + 6..self.at.udp + 8].fill(0);
        (&out[..n], start..end)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An untagged UDP/IPv4 frame with `payload`, its checksums right, options as given.
    pub(crate) fn datagram(payload: &[u8], options: &[u8], id: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let ihl = 20 + options.len();
        let mut ip = vec![0x40 | (ihl / 4) as u8, 0];
        ip.extend_from_slice(&((ihl + 8 + payload.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&id.to_be_bytes());
        ip.extend_from_slice(&[0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2]);
        ip.extend_from_slice(options);
        let c = checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0xc0, 0x01, 0x12, 0xb5]);
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    }

    fn ip_ok(f: &[u8], at: &Udp4) -> bool {
        checksum::checksum(&f[ETH..at.udp]) == 0
    }

    #[test]
    fn a_super_packet_is_cut_into_the_datagrams_it_stands_for() {
        let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        for options in [&[][..], &[1, 1, 1, 0][..]] {
            let mut sp = datagram(&payload, options, 0xfffe);
            let at = Udp4::parse(&sp).unwrap();
            at.make_super(&mut sp, payload.len());
            let cut = Cut::new(&sp[..MAX_HDRS.min(sp.len())], sp.len(), 1000).unwrap();
            assert_eq!(cut.segments(), 3);
            let mut h = [0u8; MAX_HDRS];
            for (i, ids) in [0xfffe_u16, 0xffff, 0].into_iter().enumerate() {
                let (hdr, r) = cut.segment(i, &mut h);
                let mut d = hdr.to_vec();
                d.extend_from_slice(&sp[r.clone()]);
                let want_len = if i == 2 { 500 } else { 1000 };
                let mut want = datagram(&payload[i * 1000..i * 1000 + want_len], options, ids);
                assert!(ip_ok(&d, &at));
                // The sender's UDP checksum was 0 here too: the datagram is what it sent.
                want[at.udp + 6..at.udp + 8].fill(0);
                assert_eq!(d, want, "segment {i}");
            }
        }
    }

    #[test]
    fn the_super_packets_headers_are_a_partial_checksums() {
        let mut sp = datagram(&[7; 3000], &[], 1);
        let at = Udp4::parse(&sp).unwrap();
        at.make_super(&mut sp, 3000);
        assert!(ip_ok(&sp, &at));
        assert_eq!(u16::from_be_bytes([sp[16], sp[17]]), 20 + 8 + 3000);
        assert_eq!(u16::from_be_bytes([sp[38], sp[39]]), 8 + 3000);
        // Completing the partial sum over UDP header and payload gives a verifying checksum.
        let mut udp = sp[at.udp..].to_vec();
        let c = checksum::checksum(&udp);
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        let p = checksum::ipv4_pseudo(&udp, [192, 0, 2, 1].into(), [192, 0, 2, 2].into(), 17);
        assert_eq!(p, 0);
    }

    #[test]
    fn what_is_not_cut() {
        let f = datagram(&[1; 3000], &[], 1);
        assert!(Cut::new(&f, f.len(), 0).is_none(), "no segment size");
        assert!(Cut::new(&f, 42, 1000).is_none(), "no payload");
        assert!(Cut::new(&f, f.len(), 20).is_none(), "150 segments");
        assert_eq!(Cut::new(&f, f.len(), 24).unwrap().segments(), 125);
        let mut tcp = f.clone();
        tcp[23] = 6;
        assert!(Cut::new(&tcp, tcp.len(), 1000).is_none(), "not UDP");
        let mut frag = f.clone();
        frag[20] = 0x20;
        assert!(Cut::new(&frag, frag.len(), 1000).is_none(), "a fragment");
        let mut tagged = f.clone();
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        assert!(
            Cut::new(&tagged, tagged.len(), 1000).is_none(),
            "a tag in the frame"
        );
        let mut bad_ihl = f.clone();
        bad_ihl[14] = 0x44;
        assert!(
            Cut::new(&bad_ihl, bad_ihl.len(), 1000).is_none(),
            "IHL below 5"
        );
        assert!(
            Cut::new(&f[..40], f.len(), 1000).is_none(),
            "headers cut short"
        );
    }

    #[test]
    fn one_flow_is_told_from_another() {
        let a = datagram(&[1; 100], &[], 1);
        let at = Udp4::parse(&a).unwrap();
        let b = datagram(&[2; 50], &[], 9);
        assert!(
            at.same_flow(&a[..42], &b[..42]),
            "lengths and ids differ only"
        );
        for (at_byte, what) in [
            (0, "MAC"),
            (15, "TOS"),
            (20, "DF"),
            (22, "TTL"),
            (29, "source"),
            (35, "port"),
        ] {
            let mut c = b.clone();
            c[at_byte] ^= 1;
            assert!(!at.same_flow(&a[..42], &c[..42]), "{what}");
        }
    }
}
