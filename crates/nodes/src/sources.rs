//! Source-address checks on the interfaces pods send from (anti-spoofing).
//!
//! An interface with [`AllowedSources`] takes an IPv4 packet only if its source address lies
//! in one of the prefixes it was given: the pod's own addresses and, for a pod that routes for
//! others (a CNF), the prefixes it declared. Everything else is dropped and counted by
//! `ip4-input` ("ip4 source address not allowed on this interface"), whichever way the packet
//! came in (the fast path in `ethernet-input`, a memif in ip mode, the full checks), and an ARP
//! packet may claim only such an address as its sender (`arp-input`). Without it (interfaces
//! facing the underlay, tunnels, a benchmark's ports) nothing is checked.
//!
//! The check is the first test of a packet's source on every path, so its cost matters: a
//! pod has one address, and one prefix length with one member is one mask, one compare. The
//! prefixes are kept per length, each length's networks sorted, so a CNF that routes for
//! thousands of prefixes costs a binary search per distinct length, not a scan.

use fib::Ipv4Addr;

/// The source prefixes an interface accepts, grouped by length (longest first) with each
/// length's networks sorted and unique.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedSources {
    by_len: Vec<(u32, Vec<u32>)>,
}

impl AllowedSources {
    /// The set of `prefixes` (address, length); host bits are ignored, lengths over 32 are
    /// taken as 32. An empty list accepts no source at all.
    pub fn new(prefixes: impl IntoIterator<Item = (Ipv4Addr, u8)>) -> AllowedSources {
        let mut by_len: Vec<(u32, Vec<u32>)> = Vec::new();
        for (addr, len) in prefixes {
            let mask = mask(len);
            let net = u32::from(addr) & mask;
            match by_len.iter_mut().find(|(m, _)| *m == mask) {
                Some((_, nets)) => nets.push(net),
                None => by_len.push((mask, vec![net])),
            }
        }
        // Longest first: a pod's own /32 is tried before the wider prefixes it routes for.
        by_len.sort_unstable_by_key(|&(m, _)| std::cmp::Reverse(m.count_ones()));
        for (_, nets) in &mut by_len {
            nets.sort_unstable();
            nets.dedup();
        }
        AllowedSources { by_len }
    }

    /// Whether a packet from `src` may enter.
    #[inline(always)]
    pub fn allows(&self, src: u32) -> bool {
        self.by_len
            .iter()
            .any(|(mask, nets)| match nets.as_slice() {
                [one] => src & mask == *one,
                many => many.binary_search(&(src & mask)).is_ok(),
            })
    }

    /// The prefixes, longest first (as the API shows them).
    pub fn prefixes(&self) -> impl Iterator<Item = (Ipv4Addr, u8)> + '_ {
        self.by_len.iter().flat_map(|(mask, nets)| {
            let len = mask.count_ones() as u8;
            nets.iter().map(move |&n| (Ipv4Addr::from(n), len))
        })
    }
}

/// The network mask of a prefix length.
fn mask(len: u8) -> u32 {
    match len.min(32) {
        0 => 0,
        l => u32::MAX << (32 - u32::from(l)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> u32 {
        u32::from(s.parse::<Ipv4Addr>().unwrap())
    }

    fn set(p: &[(&str, u8)]) -> AllowedSources {
        AllowedSources::new(p.iter().map(|&(s, l)| (s.parse().unwrap(), l)))
    }

    #[test]
    fn a_pod_sends_only_from_its_address() {
        let s = set(&[("10.10.1.5", 32)]);
        assert!(s.allows(a("10.10.1.5")));
        for other in [
            "10.10.1.77",
            "8.8.8.8",
            "10.10.1.4",
            "0.0.0.0",
            "255.255.255.255",
        ] {
            assert!(!s.allows(a(other)), "{other}");
        }
        assert!(
            !AllowedSources::new([]).allows(a("10.10.1.5")),
            "empty: nothing"
        );
    }

    #[test]
    fn a_router_sends_from_what_it_declared() {
        let s = set(&[
            ("10.10.1.5", 32),
            ("192.168.7.9", 24), // host bits ignored
            ("172.16.0.0", 12),
            ("0.0.0.0", 0), // any: the widest wins
        ]);
        assert!(s.allows(a("192.168.7.200")));
        assert!(s.allows(a("1.2.3.4")));
        let s = set(&[("10.10.1.5", 32), ("192.168.7.0", 24), ("172.16.0.0", 12)]);
        assert!(s.allows(a("172.31.255.255")) && !s.allows(a("172.32.0.0")));
        assert!(!s.allows(a("192.168.8.1")));
        let shown: Vec<_> = s.prefixes().map(|(n, l)| format!("{n}/{l}")).collect();
        assert_eq!(shown, ["10.10.1.5/32", "192.168.7.0/24", "172.16.0.0/12"]);
    }

    /// Many prefixes of one length: a sorted search, and every member (and no neighbour)
    /// passes, as a plain scan of the list says.
    #[test]
    fn many_prefixes_agree_with_a_scan() {
        let list: Vec<(Ipv4Addr, u8)> = (0..5000u32)
            .map(|i| (Ipv4Addr::from(0x0a00_0000 + i * 7 * 256), 24))
            .chain((0..100u32).map(|i| (Ipv4Addr::from(0xc0a8_0000 + i * 3), 32)))
            .collect();
        let s = AllowedSources::new(list.iter().copied());
        let scan = |x: u32| {
            list.iter()
                .any(|&(n, l)| x & mask(l) == u32::from(n) & mask(l))
        };
        for x in (0x09ff_0000u32..0x0a80_0000)
            .step_by(997)
            .chain(0xc0a8_0000..0xc0a8_0200)
        {
            assert_eq!(s.allows(x), scan(x), "{}", Ipv4Addr::from(x));
        }
    }
}
