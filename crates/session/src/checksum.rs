//! Incremental checksum updates for a session's rewrite (RFC 1624).
//!
//! A translated packet's checksums change by an amount that depends only on the words that
//! were rewritten, not on the rest of the packet, so the table computes that amount once per
//! session ([`Delta`]) and the packet path folds it into each packet's checksum with a few
//! additions. The arithmetic is one's complement: `Delta` holds Σ(¬old + new) over the
//! rewritten 16-bit words (RFC 1624 eqn. 3 applied to many words at once), and the reverse
//! direction's delta is its negation, `¬delta`, since it undoes the same rewrite.

use crate::key::PROTO_ICMP;

/// A one's-complement difference between the 16-bit words of a header before and after a
/// rewrite. Zero has two forms (0 and 0xffff); both apply as no change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delta(pub u16);

#[inline]
const fn fold(acc: u32) -> u16 {
    // Two end-around carries take any u32 into 0..=0xffff.
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

impl Delta {
    pub const ZERO: Delta = Delta(0);

    /// One 16-bit word changed from `old` to `new`.
    #[inline]
    pub const fn of_u16(old: u16, new: u16) -> Delta {
        Delta(fold(!old as u32 + new as u32))
    }

    /// A 32-bit field (an address) changed: its two words.
    #[inline]
    pub const fn of_u32(old: u32, new: u32) -> Delta {
        Delta(fold(
            (!old >> 16) + (!old & 0xffff) + (new >> 16) + (new & 0xffff),
        ))
    }

    #[inline]
    pub const fn add(self, other: Delta) -> Delta {
        Delta(fold(self.0 as u32 + other.0 as u32))
    }

    /// The delta that undoes this one.
    #[inline]
    pub const fn neg(self) -> Delta {
        Delta(!self.0)
    }

    /// The new checksum of a header whose checksum was `check` before the rewrite
    /// (RFC 1624 eqn. 3: HC' = ¬(¬HC + Σ(¬m + m'))).
    #[inline]
    pub const fn apply(self, check: u16) -> u16 {
        !fold(!check as u32 + self.0 as u32)
    }

    /// The new partial checksum of a TCP super-frame (its field holds the pseudo-header's
    /// sum, not inverted) after its addresses changed by this delta: P' = P + Σ(¬m + m').
    /// Only the addresses are in that sum: ports are summed when the checksum is finished.
    #[inline]
    pub const fn apply_partial(self, sum: u16) -> u16 {
        fold(sum as u32 + self.0 as u32)
    }

    /// [`Delta::apply`] for a UDP checksum: 0 means the sender computed none (RFC 768), so it
    /// stays 0; a computed 0 is sent as 0xffff, its other form.
    #[inline]
    pub const fn apply_udp(self, check: u16) -> u16 {
        if check == 0 {
            return 0;
        }
        match self.apply(check) {
            0 => 0xffff,
            c => c,
        }
    }
}

/// The checksum deltas of one direction of a session: the IPv4 header's (addresses) and the
/// L4 checksum's (TCP or UDP: pseudo-header addresses and ports; ICMP echo: the identifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deltas {
    pub ip: Delta,
    pub l4: Delta,
}

impl Deltas {
    /// The deltas of rewriting `(src, dst, sport, dport)` into the `new_*` values for protocol
    /// `proto`. For ICMP echo only `sport` is the identifier (both port fields carry it).
    pub const fn of_rewrite(
        proto: u8,
        old: (u32, u32, u16, u16),
        new: (u32, u32, u16, u16),
    ) -> Deltas {
        let ip = Delta::of_u32(old.0, new.0).add(Delta::of_u32(old.1, new.1));
        let l4 = if proto == PROTO_ICMP {
            Delta::of_u16(old.2, new.2)
        } else {
            ip.add(Delta::of_u16(old.2, new.2))
                .add(Delta::of_u16(old.3, new.3))
        };
        Deltas { ip, l4 }
    }

    /// The deltas of the opposite rewrite.
    #[inline]
    pub const fn neg(self) -> Deltas {
        Deltas {
            ip: self.ip.neg(),
            l4: self.l4.neg(),
        }
    }

    /// Both deltas in one word, as a session record keeps them.
    pub(crate) const fn pack(self) -> u32 {
        (self.ip.0 as u32) << 16 | self.l4.0 as u32
    }

    pub(crate) const fn unpack(w: u32) -> Deltas {
        Deltas {
            ip: Delta((w >> 16) as u16),
            l4: Delta(w as u16),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{PROTO_TCP, PROTO_UDP};
    use proptest::prelude::*;

    /// The reference: the full RFC 1071 checksum, word by word.
    fn checksum(data: &[u8]) -> u16 {
        let mut acc = 0u32;
        for c in data.chunks(2) {
            acc += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            acc = (acc & 0xffff) + (acc >> 16);
        }
        !fold(acc)
    }

    fn ipv4_header(mut h: [u8; 20], src: u32, dst: u32) -> [u8; 20] {
        h[0] = 0x45;
        h[10..12].fill(0);
        h[12..16].copy_from_slice(&src.to_be_bytes());
        h[16..20].copy_from_slice(&dst.to_be_bytes());
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    /// A TCP or UDP segment (checksum at `at`) with its ports, checksummed under the
    /// pseudo-header of `src`/`dst`; returns the checksum.
    fn l4_checksum(
        seg: &mut [u8],
        at: usize,
        proto: u8,
        src: u32,
        dst: u32,
        ports: (u16, u16),
    ) -> u16 {
        seg[0..2].copy_from_slice(&ports.0.to_be_bytes());
        seg[2..4].copy_from_slice(&ports.1.to_be_bytes());
        seg[at..at + 2].fill(0);
        let mut all = Vec::new();
        all.extend_from_slice(&src.to_be_bytes());
        all.extend_from_slice(&dst.to_be_bytes());
        all.extend_from_slice(&[0, proto]);
        all.extend_from_slice(&(seg.len() as u16).to_be_bytes());
        all.extend_from_slice(seg);
        let c = checksum(&all);
        seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
        c
    }

    type Addrs = (u32, u32, u16, u16);

    proptest! {
        #[test]
        fn ipv4_header_delta_matches_recomputation(h: [u8; 20], old: Addrs, new: Addrs) {
            let before = ipv4_header(h, old.0, old.1);
            let after = ipv4_header(h, new.0, new.1);
            let d = Deltas::of_rewrite(PROTO_TCP, old, new);
            let c = u16::from_be_bytes([before[10], before[11]]);
            prop_assert_eq!(d.ip.apply(c), u16::from_be_bytes([after[10], after[11]]));
            // And back: the reverse direction's delta undoes it.
            prop_assert_eq!(d.neg().ip.apply(d.ip.apply(c)), c);
        }

        #[test]
        fn tcp_and_udp_deltas_match_recomputation(
            body in proptest::collection::vec(any::<u8>(), 20..80),
            old: Addrs,
            new: Addrs,
            udp: bool,
        ) {
            let (proto, at) = if udp { (PROTO_UDP, 6) } else { (PROTO_TCP, 16) };
            let mut seg = body.clone();
            let c0 = l4_checksum(&mut seg, at, proto, old.0, old.1, (old.2, old.3));
            let c1 = l4_checksum(&mut seg, at, proto, new.0, new.1, (new.2, new.3));
            let d = Deltas::of_rewrite(proto, old, new);
            if udp {
                // UDP's computed zero is sent as 0xffff; the reference sends it as computed.
                let sent = |c: u16| if c == 0 { 0xffff } else { c };
                prop_assert_eq!(d.l4.apply_udp(sent(c0)), sent(c1));
            } else {
                prop_assert_eq!(d.l4.apply(c0), c1);
            }
            prop_assert_eq!(d.neg().l4.apply(d.l4.apply(c0)), c0);
        }

        /// A super-frame's partial checksum (the pseudo-header's sum, not inverted) moved
        /// by the addresses' delta alone finishes, over the rewritten segment (new ports and
        /// all), to the checksum computed from scratch.
        #[test]
        fn a_partial_checksum_takes_the_address_delta(
            body in proptest::collection::vec(any::<u8>(), 20..80),
            old: Addrs,
            new: Addrs,
        ) {
            let pseudo = |src: u32, dst: u32, len: usize| {
                let mut p = Vec::new();
                p.extend_from_slice(&src.to_be_bytes());
                p.extend_from_slice(&dst.to_be_bytes());
                p.extend_from_slice(&[0, PROTO_TCP]);
                p.extend_from_slice(&(len as u16).to_be_bytes());
                !checksum(&p)
            };
            let mut seg = body.clone();
            let want = l4_checksum(&mut seg, 16, PROTO_TCP, new.0, new.1, (new.2, new.3));
            let d = Deltas::of_rewrite(PROTO_TCP, old, new);
            let p = d.ip.apply_partial(pseudo(old.0, old.1, seg.len()));
            seg[16..18].copy_from_slice(&p.to_be_bytes());
            prop_assert_eq!(checksum(&seg), want);
        }

        #[test]
        fn icmp_echo_delta_covers_only_the_identifier(
            body in proptest::collection::vec(any::<u8>(), 8..64),
            old_id: u16,
            new_id: u16,
            addrs: (u32, u32, u32, u32),
        ) {
            let mut m = body.clone();
            m[2..4].fill(0);
            m[4..6].copy_from_slice(&old_id.to_be_bytes());
            let c0 = checksum(&m);
            m[4..6].copy_from_slice(&new_id.to_be_bytes());
            let c1 = checksum(&m);
            let d = Deltas::of_rewrite(
                PROTO_ICMP,
                (addrs.0, addrs.1, old_id, old_id),
                (addrs.2, addrs.3, new_id, new_id),
            );
            prop_assert_eq!(d.l4.apply(c0), c1);
        }

        #[test]
        fn pack_round_trips(ip: u16, l4: u16) {
            let d = Deltas { ip: Delta(ip), l4: Delta(l4) };
            prop_assert_eq!(Deltas::unpack(d.pack()), d);
        }
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 §4: a header checksum of 0xdd2f, a word going from 0x5555 to 0x3285,
        // gives 0x0000 (eqn. 3), not eqn. 2's 0xffff.
        assert_eq!(Delta::of_u16(0x5555, 0x3285).apply(0xdd2f), 0x0000);
    }

    #[test]
    fn udp_zero_checksum_stays_zero() {
        assert_eq!(Delta::of_u16(1, 2).apply_udp(0), 0);
        assert_eq!(Delta::ZERO.apply(0x1234), 0x1234);
        assert_eq!(Delta(0xffff).apply(0x1234), 0x1234);
    }
}
