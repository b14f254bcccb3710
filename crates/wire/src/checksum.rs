//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).

use core::net::Ipv4Addr;

/// Adds `data` as big-endian 16-bit words into a 32-bit accumulator (not yet folded).
pub fn accumulate(acc: u32, data: &[u8]) -> u32 {
    // Big-endian 32-bit words summed into 64 bits: since 2^16 = 1 (mod 2^16 - 1), folding the
    // wide sum at 32 and then 16 bits gives the same one's-complement sum as adding 16-bit
    // words one by one, in a quarter of the steps.
    let mut sum = u64::from(acc);
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for c in &mut pairs {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = pairs.remainder() {
        sum += u64::from(*last) << 8;
    }
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum as u32
}

pub fn fold(acc: u32) -> u16 {
    // Two end-around carries take any u32 into 0..=0xffff.
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// Whether a 20-byte IPv4 header (no options) carries a valid checksum: the fixed-size form of
/// `checksum(h) == 0` that the forwarding path runs once per packet.
///
/// The one's-complement sum does not depend on byte order (RFC 1071 §2(B)): the header is
/// summed as five native-endian 32-bit words (no byte swaps). Folding with end-around carries
/// computes the sum modulo 0xffff (2^16 = 1 modulo 2^16 - 1), writing a non-zero multiple of
/// 0xffff as 0xffff, which is what a valid header sums to: so the header is valid when the
/// plain sum is a non-zero multiple of 0xffff, one multiplication instead of four folds.
#[inline]
pub fn ipv4_header_ok(h: &[u8; 20]) -> bool {
    let mut sum = 0u64;
    for w in h.as_chunks::<4>().0 {
        sum += u64::from(u32::from_ne_bytes(*w));
    }
    sum != 0 && sum.is_multiple_of(0xffff)
}

pub fn checksum(data: &[u8]) -> u16 {
    !fold(accumulate(0, data))
}

/// The checksum of `seg` (a UDP or TCP header and its payload) under the IPv4 pseudo-header
/// (RFC 768; RFC 9293 §3.1): source, destination, `protocol` and `seg`'s length, which the
/// pseudo-header holds in 16 bits (an IPv4 datagram's payload is under 64 KiB). Zero over a
/// segment whose checksum field verifies.
pub fn ipv4_pseudo(seg: &[u8], src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> u16 {
    let p = ipv4_pseudo_header(src, dst, protocol, seg.len() as u16);
    !fold(accumulate(p, seg))
}

/// The IPv4 pseudo-header's sum, not folded: source, destination, `protocol` and the
/// segment's length `len`. Folded, it is what a partial checksum's field holds (the sender
/// leaves the rest of the sum to the receiver).
pub fn ipv4_pseudo_header(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u32 {
    // Summed as the 12 bytes it is on the wire: adding protocol and length to a 32-bit
    // accumulator after the addresses would overflow it for 255.255.255.255 to itself.
    let mut p = [0u8; 12];
    p[..4].copy_from_slice(&src.octets());
    p[4..8].copy_from_slice(&dst.octets());
    p[9] = protocol;
    p[10..].copy_from_slice(&len.to_be_bytes());
    accumulate(0, &p)
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit word changed from `old` to `new`.
pub fn update(check: u16, old: u16, new: u16) -> u16 {
    let acc = u32::from(!check) + u32::from(!old) + u32::from(new);
    !fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the sum of 00 01 f2 03 f4 f5 f6 f7 is ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(accumulate(0, &data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn wide_sum_matches_word_by_word() {
        // The 16-bit reference, against every length 0..64 and carry-heavy contents.
        fn reference(mut acc: u32, data: &[u8]) -> u16 {
            for c in data.chunks(2) {
                let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
                acc = acc.wrapping_add(u32::from(w));
                acc = (acc & 0xffff) + (acc >> 16);
            }
            fold(acc)
        }
        let mut x = 0x1234_5678u32;
        for len in 0..64 {
            for fill in [0x00u8, 0xff, 0x80] {
                let data: Vec<u8> = (0..len)
                    .map(|i| {
                        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        if i % 3 == 0 { fill } else { (x >> 24) as u8 }
                    })
                    .collect();
                for acc in [0u32, 0xffff, 0xfffe_0001] {
                    assert_eq!(
                        fold(accumulate(acc, &data)),
                        reference(acc, &data),
                        "len {len} acc {acc:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn fixed_header_check_agrees_with_the_general_one() {
        let mut x = 7u32;
        for _ in 0..2000 {
            let mut h = [0u8; 20];
            for b in h.iter_mut() {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                *b = (x >> 24) as u8;
            }
            assert_eq!(ipv4_header_ok(&h), checksum(&h) == 0);
            h[10..12].copy_from_slice(&[0, 0]);
            let c = checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            assert!(ipv4_header_ok(&h));
        }
        assert!(!ipv4_header_ok(&[0u8; 20]) || checksum(&[0u8; 20]) == 0);
    }

    #[test]
    fn pseudo_header_sums_carry_for_any_addresses() {
        // All-ones addresses fill the accumulator: the protocol and length still carry.
        let seg = [0x12, 0x34, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00];
        let ones = Ipv4Addr::BROADCAST;
        let mut whole = [0xff; 8].to_vec();
        whole.extend_from_slice(&[0, 17, 0, 8]);
        whole.extend_from_slice(&seg);
        assert_eq!(ipv4_pseudo(&seg, ones, ones, 17), checksum(&whole));
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(
            checksum(&[0x12, 0x34, 0x56]),
            checksum(&[0x12, 0x34, 0x56, 0x00])
        );
    }

    #[test]
    fn incremental_matches_full_recompute() {
        let mut hdr = [
            0x45, 0x00, 0x00, 0x54, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum(&hdr);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(checksum(&hdr), 0);
        // Decrement TTL: the word at offset 8 is TTL|protocol.
        let old = u16::from_be_bytes([hdr[8], hdr[9]]);
        hdr[8] -= 1;
        let new = u16::from_be_bytes([hdr[8], hdr[9]]);
        let inc = update(c, old, new);
        hdr[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(inc, checksum(&hdr));
    }
}
