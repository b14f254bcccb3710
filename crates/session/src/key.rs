//! Flow keys, their packed form, and the hashes the table and backend choice use.

use core::net::Ipv4Addr;

/// IP protocol numbers the state machine knows; anything else is tracked like UDP.
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_SCTP: u8 = 132;

/// A flow in one network, as a packet carries it.
///
/// For ICMP echo the identifier goes in **both** `sport` and `dport` (see [`Key::icmp_echo`]):
/// the request and its reply then have keys that are each other's [`Key::reverse`], as for
/// TCP and UDP, and the table needs no protocol case. Other ICMP messages have no flow of their
/// own and are not keyed here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Key {
    /// The network's VRF slot: the same addresses in two networks are two flows.
    pub vrf: u16,
    pub proto: u8,
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
}

/// Which parts of a key a [`Key::hash_with`] hash sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields(u8);

impl Fields {
    pub const VRF: Fields = Fields(1);
    pub const PROTO: Fields = Fields(2);
    pub const SRC: Fields = Fields(4);
    pub const DST: Fields = Fields(8);
    pub const SPORT: Fields = Fields(16);
    pub const DPORT: Fields = Fields(32);
    /// Per-connection balancing: every field.
    pub const ALL: Fields = Fields(63);
    /// ClientIP session affinity: the client's address (and its network), so that every
    /// connection from one client reaches the same backend.
    pub const CLIENT_IP: Fields = Fields(1 | 4);

    pub const fn union(self, other: Fields) -> Fields {
        Fields(self.0 | other.0)
    }

    /// The masks of the two packed words ([`Key::words`]) this set keeps.
    fn masks(self) -> (u64, u64) {
        let f = self.0;
        let pick = |bit: u8, m: u64| if f & bit != 0 { m } else { 0 };
        (
            pick(4, 0xffff_ffff << 32) | pick(8, 0xffff_ffff),
            pick(1, 0xffff << 48) | pick(2, 0xff << 32) | pick(16, 0xffff << 16) | pick(32, 0xffff),
        )
    }
}

impl core::ops::BitOr for Fields {
    type Output = Fields;
    fn bitor(self, rhs: Fields) -> Fields {
        self.union(rhs)
    }
}

impl Key {
    pub const fn new(vrf: u16, proto: u8, src: u32, dst: u32, sport: u16, dport: u16) -> Key {
        Key {
            vrf,
            proto,
            src,
            dst,
            sport,
            dport,
        }
    }

    /// An ICMP echo flow: `id` in both port fields, so a reply's key is the request's reverse.
    pub const fn icmp_echo(vrf: u16, src: Ipv4Addr, dst: Ipv4Addr, id: u16) -> Key {
        Key::new(vrf, PROTO_ICMP, src.to_bits(), dst.to_bits(), id, id)
    }

    /// What the other direction of this flow looks like (no translation).
    pub const fn reverse(&self) -> Key {
        Key {
            vrf: self.vrf,
            proto: self.proto,
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
        }
    }

    /// The key in two words, the form the hash table stores and compares: addresses in the
    /// first, network, protocol and ports in the second (bits 56..64 are zero).
    #[inline]
    pub const fn words(&self) -> [u64; 2] {
        [
            (self.src as u64) << 32 | self.dst as u64,
            (self.vrf as u64) << 48
                | (self.proto as u64) << 32
                | (self.sport as u64) << 16
                | self.dport as u64,
        ]
    }

    /// The inverse of [`Key::words`].
    #[inline]
    pub const fn from_words(w: [u64; 2]) -> Key {
        Key {
            vrf: (w[1] >> 48) as u16,
            proto: (w[1] >> 32) as u8,
            src: (w[0] >> 32) as u32,
            dst: w[0] as u32,
            sport: (w[1] >> 16) as u16,
            dport: w[1] as u16,
        }
    }

    /// A hash of the chosen `fields` under `seed`, for choosing a backend ([`crate::Maglev`]):
    /// keys that agree on those fields hash alike, whatever the others hold.
    #[inline]
    pub fn hash_with(&self, seed: u64, fields: Fields) -> u64 {
        let [a, b] = self.words();
        let (ma, mb) = fields.masks();
        hash_words(a & ma, b & mb, [seed, seed.rotate_left(32) ^ K1])
    }
}

const K0: u64 = 0x243f_6a88_85a3_08d3;
const K1: u64 = 0x1319_8a2e_0370_7344;

/// The high and low halves of the 128-bit product, xored: one multiplication that mixes every
/// input bit into the middle of the output (foldhash, wyhash).
#[inline]
pub(crate) const fn folded_multiply(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The table's hash of a packed key: two folded multiplications keyed by a per-table random
/// seed. It is not a cryptographic PRF (SipHash would cost several times as much per packet):
/// what it buys is that a remote sender who cannot observe the seed cannot compute which
/// bucket a key lands in, so it cannot aim a flood of keys at one bucket pair. The two halves
/// of the result pick the two candidate buckets.
#[inline]
pub(crate) const fn hash_words(a: u64, b: u64, seed: [u64; 2]) -> u64 {
    let h = folded_multiply(a ^ seed[0], b ^ seed[1]);
    folded_multiply(h ^ K0, seed[1] ^ K1 ^ b.rotate_left(29))
}

/// A fresh random seed from the standard library's per-process hasher keys (no dependency).
pub(crate) fn random_seed() -> [u64; 2] {
    use std::hash::{BuildHasher, Hasher};
    let mut seed = [0; 2];
    for (i, s) in seed.iter_mut().enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        h.write_u64(std::process::id().into());
        *s = h.finish();
    }
    seed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_reverse_swaps_ends() {
        let k = Key::new(7, PROTO_TCP, 0x0a00_0001, 0xc000_0201, 40000, 443);
        assert_eq!(Key::from_words(k.words()), k);
        let r = k.reverse();
        assert_eq!((r.src, r.dst, r.sport, r.dport), (k.dst, k.src, 443, 40000));
        assert_eq!(r.reverse(), k);
        assert_eq!(k.words()[1] >> 56, 0);
    }

    #[test]
    fn icmp_echo_reply_is_the_reverse_of_the_request() {
        let a = Ipv4Addr::new(10, 0, 0, 1);
        let b = Ipv4Addr::new(10, 0, 0, 2);
        let req = Key::icmp_echo(1, a, b, 0x1234);
        assert_eq!(req.reverse(), Key::icmp_echo(1, b, a, 0x1234));
    }

    #[test]
    fn hash_with_ignores_the_fields_left_out() {
        let k = Key::new(3, PROTO_TCP, 0x0a00_0001, 0xc000_0201, 40000, 80);
        let other_port = Key { sport: 40001, ..k };
        let other_client = Key {
            src: 0x0a00_0002,
            ..k
        };
        let s = 0x5eed;
        assert_eq!(
            k.hash_with(s, Fields::CLIENT_IP),
            Key {
                dst: 1,
                proto: 17,
                ..other_port
            }
            .hash_with(s, Fields::CLIENT_IP)
        );
        assert_ne!(
            k.hash_with(s, Fields::CLIENT_IP),
            other_client.hash_with(s, Fields::CLIENT_IP)
        );
        assert_ne!(
            k.hash_with(s, Fields::ALL),
            other_port.hash_with(s, Fields::ALL)
        );
        assert_ne!(k.hash_with(s, Fields::ALL), k.hash_with(s + 1, Fields::ALL));
        assert_eq!(
            Fields::VRF | Fields::SRC,
            Fields::CLIENT_IP,
            "bit sets compose"
        );
    }

    #[test]
    fn seeds_differ_between_tables() {
        assert_ne!(random_seed(), random_seed());
    }
}
