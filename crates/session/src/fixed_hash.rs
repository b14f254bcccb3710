//! A fast, unseeded hash for the maps the packet path reads whose keys the control plane
//! chooses: services by VIP, address sets' networks, an owner's eviction lists by interface.
//!
//! std's default (SipHash-1-3 under a random seed) exists to stop a sender from filling one
//! chain with keys it picks; these maps are only *looked up* with packet fields, never
//! inserted into from a packet, so no sender can shape them, and SipHash would cost more
//! than the rest of a lookup. Each written word is folded in with a multiplication, and the
//! result goes through MurmurHash3's 64-bit finaliser, so that every input bit reaches both
//! the low bits a table indexes by and the high bits it tags with (networks differ only
//! above their host bits; a /24's low byte is always zero).

use std::hash::{BuildHasherDefault, Hasher};

/// See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct FixedHasher(u64);

/// `HashMap<K, V, FixedState>`: maps hashed with [`FixedHasher`].
pub type FixedState = BuildHasherDefault<FixedHasher>;

impl FixedHasher {
    #[inline]
    fn mix(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(29) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Hasher for FixedHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.mix(x.into());
    }

    #[inline]
    fn write_u16(&mut self, x: u16) {
        self.mix(x.into());
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.mix(x.into());
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.mix(x);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.mix(x as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(t: &T) -> u64 {
        FixedState::default().hash_one(t)
    }

    #[test]
    fn networks_spread_over_the_low_bits() {
        // /24 networks differ only above bit 8: their hashes must still differ in the low bits.
        let low: HashSet<u64> = (0..1024u32)
            .map(|i| hash(&(0x0a00_0000 + (i << 8))) & 1023)
            .collect();
        assert!(low.len() > 600, "{} distinct low bits of 1024", low.len());
    }

    #[test]
    fn every_field_of_a_key_counts() {
        // A later field must not overwrite an earlier one.
        assert_ne!(hash(&(1u32, 7u16)), hash(&(2u32, 7u16)));
        assert_ne!(hash(&(1u32, 7u16)), hash(&(1u32, 8u16)));
        assert_ne!(hash(&(1u32, 2u32)), hash(&(2u32, 1u32)));
        let keys: HashSet<u64> = (0..64u32)
            .flat_map(|v| (0..64u16).map(move |p| hash(&(v, 6u8, 0x0a60_0000 + v, p)) >> 57))
            .collect();
        assert!(keys.len() > 100, "{} distinct tags", keys.len());
    }
}
