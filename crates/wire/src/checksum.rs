//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).

/// Adds `data` as big-endian 16-bit words into a 32-bit accumulator (not yet folded).
pub fn accumulate(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    acc
}

/// Folds a 32-bit accumulator into a 16-bit ones' complement sum.
pub fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum of `data`: the ones' complement of its ones' complement sum.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(accumulate(0, data))
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
