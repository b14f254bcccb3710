//! Frame builders: sequence-numbered raw frames whose every byte can be predicted, and
//! Ethernet + IPv4 (+ UDP) frames built with etherparse.

/// The EtherType of raw test frames (IEEE 802 local experimental), so that any stray frame the
/// kernel emits on a new interface is ignored.
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// Source and destination ports of [`udp4_frame`]'s datagrams.
pub const UDP_PORTS: (u16, u16) = (4000, 5000);

/// How each byte of a sequence-numbered frame depends on its offset `k` and the sequence
/// number `seq` (both taken modulo 256).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// `k * step + seq * seq_step`.
    Linear { step: u8, seq_step: u8 },
    /// `k ^ seq * seq_step`.
    Xor { seq_step: u8 },
}

impl Fill {
    fn byte(self, k: usize, seq: u64) -> u8 {
        let (k, seq) = (k as u8, seq as u8);
        match self {
            Fill::Linear { step, seq_step } => k
                .wrapping_mul(step)
                .wrapping_add(seq.wrapping_mul(seq_step)),
            Fill::Xor { seq_step } => k ^ seq.wrapping_mul(seq_step),
        }
    }
}

/// An Ethernet II header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eth {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ethertype: u16,
}

/// The shape of a [`seq_frame`]: its filler, then what is written over it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub fill: Fill,
    /// Written over bytes 0..14.
    pub eth: Option<Eth>,
    /// Bytes of the big-endian sequence number written at byte 14 (4 or 8; 0 for none).
    pub seq_width: usize,
}

impl Pattern {
    /// [`Fill::Linear`] alone: no header, no sequence number.
    pub const fn linear(step: u8, seq_step: u8) -> Self {
        Self {
            fill: Fill::Linear { step, seq_step },
            eth: None,
            seq_width: 0,
        }
    }
}

/// Frame `seq` of `len` bytes in `pattern`: the filler, then the header and the sequence
/// number, each written only if the frame is long enough to hold it whole.
pub fn seq_frame(seq: u64, len: usize, pattern: Pattern) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|k| pattern.fill.byte(k, seq)).collect();
    if let Some(eth) = pattern.eth.filter(|_| len >= 14) {
        f[..6].copy_from_slice(&eth.dst);
        f[6..12].copy_from_slice(&eth.src);
        f[12..14].copy_from_slice(&eth.ethertype.to_be_bytes());
    }
    let seq_bytes = seq.to_be_bytes();
    let w = pattern.seq_width;
    if w > 0 && len >= 14 + w {
        f[14..14 + w].copy_from_slice(&seq_bytes[8 - w..]);
    }
    f
}

/// The 4-byte sequence number of a raw test frame (EtherType [`TEST_ETHERTYPE`], VLAN-tagged
/// or not), or `None` for any other frame.
pub fn seq_of(f: &[u8]) -> Option<u32> {
    let at = if f.get(12..14) == Some(&[0x81, 0x00]) {
        16
    } else {
        12
    };
    if f.get(at..at + 2)? != TEST_ETHERTYPE.to_be_bytes() {
        return None;
    }
    Some(u32::from_be_bytes(f.get(at + 2..at + 6)?.try_into().ok()?))
}

/// A payload of `len` bytes (at least 4): `seq` big-endian, then `k ^ seq` at offset `k`.
pub fn seq_payload(seq: u32, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|k| (k as u32 ^ seq) as u8).collect();
    p[..4].copy_from_slice(&seq.to_be_bytes());
    p
}

/// Source and destination MAC addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Macs {
    pub src: [u8; 6],
    pub dst: [u8; 6],
}

/// An Ethernet + IPv4 + UDP frame (ports [`UDP_PORTS`]) carrying `payload`.
pub fn udp4_frame(macs: Macs, src: [u8; 4], dst: [u8; 4], ttl: u8, payload: &[u8]) -> Vec<u8> {
    udp4_frame_ports(macs, src, dst, ttl, UDP_PORTS, payload)
}

/// An Ethernet + IPv4 + UDP frame from port `ports.0` to `ports.1` carrying `payload`.
pub fn udp4_frame_ports(
    macs: Macs,
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    ports: (u16, u16),
    payload: &[u8],
) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2(macs.src, macs.dst)
        .ipv4(src, dst, ttl)
        .udp(ports.0, ports.1);
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, payload).unwrap();
    v
}

/// An Ethernet + IPv4 + ICMP frame: `icmp` (an echo request, say) carrying `payload`.
pub fn icmp4_frame(
    macs: Macs,
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    icmp: etherparse::Icmpv4Type,
    payload: &[u8],
) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2(macs.src, macs.dst)
        .ipv4(src, dst, ttl)
        .icmpv4(icmp);
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, payload).unwrap();
    v
}

/// An ICMP echo request (`id`, `seq`), as [`icmp4_frame`] carries it.
pub fn echo_request(id: u16, seq: u16) -> etherparse::Icmpv4Type {
    etherparse::Icmpv4Type::EchoRequest(etherparse::IcmpEchoHeader { id, seq })
}

/// An Ethernet + IPv4 frame of protocol UDP with `payload` as its whole datagram, built field
/// by field for what [`udp4_frame`] cannot say: `edit` changes the IPv4 header before its
/// checksum is computed.
pub fn ipv4_frame(
    macs: Macs,
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    edit: impl FnOnce(&mut etherparse::Ipv4Header),
    payload: &[u8],
) -> Vec<u8> {
    let mut ip = etherparse::Ipv4Header::new(
        payload.len() as u16,
        ttl,
        etherparse::IpNumber::UDP,
        src,
        dst,
    )
    .unwrap();
    edit(&mut ip);
    ip.header_checksum = ip.calc_header_checksum();
    let mut v = Vec::new();
    etherparse::Ethernet2Header {
        source: macs.src,
        destination: macs.dst,
        ether_type: etherparse::EtherType::IPV4,
    }
    .write(&mut v)
    .unwrap();
    ip.write(&mut v).unwrap();
    v.extend_from_slice(payload);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_test_frame_carries_its_header_and_sequence_number() {
        let p = Pattern {
            fill: Fill::Xor { seq_step: 31 },
            eth: Some(Eth {
                dst: [0xff; 6],
                src: [2, 0, 0, 0, 0x77, 1],
                ethertype: TEST_ETHERTYPE,
            }),
            seq_width: 4,
        };
        let f = seq_frame(0x0102_0304, 20, p);
        assert_eq!(&f[..6], &[0xff; 6]);
        assert_eq!(&f[12..18], &[0x88, 0xb5, 1, 2, 3, 4]);
        assert_eq!(f[18], 18 ^ 0x04u8.wrapping_mul(31));
        assert_eq!(seq_of(&f), Some(0x0102_0304));
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0, 0, 5]);
        tagged.extend_from_slice(&f[12..]);
        assert_eq!(seq_of(&tagged), Some(0x0102_0304));
        assert_eq!(seq_of(&f[..16]), None);
    }

    #[test]
    fn a_short_frame_keeps_its_filler_where_the_fields_do_not_fit() {
        let p = Pattern {
            seq_width: 8,
            ..Pattern::linear(29, 13)
        };
        let f = seq_frame(3, 21, p);
        assert_eq!(f, (0..21).map(|k| (k * 29 + 39) as u8).collect::<Vec<_>>());
        assert_eq!(&seq_frame(3, 22, p)[14..22], &3u64.to_be_bytes());
    }
}
