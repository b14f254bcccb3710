//! `struct virtio_net_hdr`, which the kernel puts before each frame of a tap (`IFF_VNET_HDR`)
//! and of an AF_PACKET socket (`PACKET_VNET_HDR`): flags, gso_type, hdr_len, gso_size,
//! csum_start, csum_offset, in native byte order (the kernel's default on a little-endian
//! host, and ours). The tap's is `virtio_net_hdr_v1`, which adds `num_buffers`.
//!
//! One view reads it for both devices; what each does with a partial checksum or a
//! super-frame stays with the device.

/// The header's length (AF_PACKET's).
pub(crate) const LEN: usize = 10;
/// `virtio_net_hdr_v1`'s, with `num_buffers` (the tap's).
pub(crate) const LEN_V1: usize = 12;

/// `flags`: the checksum from `csum_start` to the end is left for the receiver to complete
/// (the field at `csum_start + csum_offset` holds the pseudo-header's sum).
pub(crate) const F_NEEDS_CSUM: u8 = 1;
/// `gso_type`: a plain frame.
pub(crate) const GSO_NONE: u8 = 0;
/// `gso_type`: a TCP/IPv4 super-frame, to be cut into segments of `gso_size`.
pub(crate) const GSO_TCPV4: u8 = 1;
/// `gso_type`: UDP datagrams (IPv4 or IPv6) in one super-packet, cut every `gso_size` bytes
/// of payload (`VIRTIO_NET_HDR_GSO_UDP_L4`).
pub(crate) const GSO_UDP_L4: u8 = 5;
/// With a GSO type: the super-frame carries ECN (its first segment keeps CWR).
pub(crate) const GSO_ECN: u8 = 0x80;

/// The fields' byte ranges.
mod field {
    use core::ops::Range;
    pub(super) const FLAGS: usize = 0;
    pub(super) const GSO_TYPE: usize = 1;
    pub(super) const HDR_LEN: Range<usize> = 2..4;
    pub(super) const GSO_SIZE: Range<usize> = 4..6;
    pub(super) const CSUM_START: Range<usize> = 6..8;
    pub(super) const CSUM_OFFSET: Range<usize> = 8..10;
}

/// The tap's header of a TCP/IPv4 super-frame `sf` with its checksum partial, to be cut (by
/// the receiving kernel, if it must) into segments of `gso_size` payload bytes; ECN when its
/// CWR is set, as the kernel's own segmentation offload marks it.
pub(crate) fn tcp4_super_frame(sf: &wire::tso::SuperFrame, gso_size: u16) -> [u8; LEN_V1] {
    let mut h = [0u8; LEN_V1];
    let mut put = |r: core::ops::Range<usize>, v: usize| {
        h[r].copy_from_slice(&(v as u16).to_ne_bytes());
    };
    put(field::HDR_LEN, sf.hdrs);
    put(field::GSO_SIZE, usize::from(gso_size));
    put(field::CSUM_START, sf.tcp_at);
    put(field::CSUM_OFFSET, wire::tso::CHECKSUM_OFFSET);
    h[field::FLAGS] = F_NEEDS_CSUM;
    h[field::GSO_TYPE] = GSO_TCPV4 | if sf.cwr { GSO_ECN } else { 0 };
    h
}

/// The header of a UDP super-packet whose headers are `hdr_len` bytes, its UDP header at
/// `udp`, to be cut into datagrams of `gso_size` payload bytes; the UDP checksum partial (the
/// kernel requires it of `GSO_UDP_L4`).
pub(crate) fn udp4_super_packet(hdr_len: usize, udp: usize, gso_size: usize) -> [u8; LEN] {
    let mut h = [0u8; LEN];
    let mut put = |r: core::ops::Range<usize>, v: usize| {
        h[r].copy_from_slice(&(v as u16).to_ne_bytes());
    };
    put(field::HDR_LEN, hdr_len);
    put(field::GSO_SIZE, gso_size);
    put(field::CSUM_START, udp);
    put(field::CSUM_OFFSET, 6);
    h[field::FLAGS] = F_NEEDS_CSUM;
    h[field::GSO_TYPE] = GSO_UDP_L4;
    h
}

/// A view of a virtio-net header's [`LEN`] bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VnetHdr<'a>(&'a [u8; LEN]);

impl<'a> VnetHdr<'a> {
    /// The header at the start of `b` (either length: [`LEN`] or [`LEN_V1`]).
    #[inline]
    pub(crate) fn new<const N: usize>(b: &'a [u8; N]) -> VnetHdr<'a> {
        const { assert!(N >= LEN) };
        VnetHdr(b.first_chunk().expect("N >= LEN, asserted above"))
    }

    #[inline]
    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        u16::from_ne_bytes([self.0[r.start], self.0[r.start + 1]])
    }

    /// `gso_type`: [`GSO_NONE`], or the kind of super-frame (with [`GSO_ECN`]).
    #[inline]
    pub(crate) fn gso_type(&self) -> u8 {
        self.0[field::GSO_TYPE]
    }

    /// Whether the frame is a TCP/IPv4 super-frame, ECN or not.
    #[inline]
    pub(crate) fn is_tcp4_super_frame(&self) -> bool {
        self.gso_type() & !GSO_ECN == GSO_TCPV4
    }

    /// The size of the segments a super-frame is cut into.
    #[inline]
    pub(crate) fn gso_size(&self) -> u16 {
        self.u16_at(field::GSO_SIZE)
    }

    /// With [`F_NEEDS_CSUM`]: where the sum starts and, from there, where its field is
    /// (`csum_start`, `csum_offset`); `None` when the frame's checksums are whole.
    #[inline]
    pub(crate) fn partial_csum(&self) -> Option<(u16, u16)> {
        (self.0[field::FLAGS] & F_NEEDS_CSUM != 0).then(|| {
            (
                self.u16_at(field::CSUM_START),
                self.u16_at(field::CSUM_OFFSET),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_in_native_order_from_either_length() {
        let mut b = [0u8; LEN_V1];
        b[0] = F_NEEDS_CSUM;
        b[1] = GSO_TCPV4 | GSO_ECN;
        b[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        b[6..8].copy_from_slice(&34u16.to_ne_bytes());
        b[8..10].copy_from_slice(&16u16.to_ne_bytes());
        b[10..12].copy_from_slice(&1u16.to_ne_bytes());
        let h = VnetHdr::new(&b);
        assert_eq!(h.gso_type(), 0x81);
        assert!(h.is_tcp4_super_frame());
        assert_eq!(h.gso_size(), 1448);
        assert_eq!(h.partial_csum(), Some((34, 16)));
        let short: [u8; LEN] = b[..LEN].try_into().unwrap();
        assert_eq!(VnetHdr::new(&short).partial_csum(), Some((34, 16)));
        let plain = VnetHdr::new(&[0u8; LEN]);
        assert_eq!((plain.gso_type(), plain.partial_csum()), (GSO_NONE, None));
        assert!(!plain.is_tcp4_super_frame());
    }
}
