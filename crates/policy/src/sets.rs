//! Address sets: membership whose cost does not depend on how many members a set has.
//!
//! A set keeps its prefixes per length, longest first (a pod's /32 is the common member and
//! is tried first). A length with one member is one mask and one compare, as in
//! `nodes::AllowedSources`; a length with more is a hash set of its networks, so an address
//! costs one masked hash probe per distinct length: a set of 10,000 pod addresses is one probe,
//! the same as a set of 10. (`AllowedSources` binary-searches each length instead: fine for a
//! CNF's handful of routes, but its probes grow with the log of the members, which policy sets
//! of thousands of pods should not pay.) A set has at most 33 distinct lengths, so that is the
//! bound whatever the control plane puts in it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::spec::{Prefix, SetSpec, mask};

/// Networks hash with `session`'s [`FixedHasher`](session::FixedHasher): the members come
/// from the control plane and probes only look up, so no seed is needed, and SipHash's cost
/// would be most of an evaluation.
type AddrHashSet = HashSet<u32, session::FixedState>;

/// The networks of one prefix length.
#[derive(Debug, Clone)]
enum Networks {
    One(u32),
    Many(AddrHashSet),
}

/// A set of IPv4 prefixes (host bits ignored; lengths over 32 taken as 32).
#[derive(Debug, Clone, Default)]
pub struct AddressSet {
    /// (mask, networks), longest mask first.
    by_len: Vec<(u32, Networks)>,
    members: usize,
}

/// Counts the membership probes an evaluation makes (one per hash look-up or single compare):
/// the cost measure tests assert on instead of timings. The evaluator's normal path uses
/// [`NoTally`], which compiles to nothing.
pub(crate) trait Tally {
    fn probe(&mut self);
}

pub(crate) struct NoTally;

impl Tally for NoTally {
    #[inline(always)]
    fn probe(&mut self) {}
}

impl Tally for u32 {
    fn probe(&mut self) {
        *self += 1;
    }
}

impl AddressSet {
    pub fn new(prefixes: impl IntoIterator<Item = Prefix>) -> AddressSet {
        let mut lens: [Vec<u32>; 33] = std::array::from_fn(|_| Vec::new());
        for p in prefixes {
            lens[usize::from(p.len.min(32))].push(p.network());
        }
        let mut by_len = Vec::new();
        let mut members = 0;
        for len in (0..=32u8).rev() {
            let nets = &mut lens[usize::from(len)];
            nets.sort_unstable();
            nets.dedup();
            members += nets.len();
            let networks = match nets.as_slice() {
                [] => continue,
                [one] => Networks::One(*one),
                many => Networks::Many(many.iter().copied().collect()),
            };
            by_len.push((mask(len), networks));
        }
        AddressSet { by_len, members }
    }

    /// Whether `addr` lies in one of the set's prefixes.
    #[inline]
    pub fn contains(&self, addr: u32) -> bool {
        self.contains_tallied(addr, &mut NoTally)
    }

    #[inline]
    pub(crate) fn contains_tallied(&self, addr: u32, tally: &mut impl Tally) -> bool {
        self.by_len.iter().any(|(mask, nets)| {
            tally.probe();
            match nets {
                Networks::One(net) => addr & mask == *net,
                Networks::Many(set) => set.contains(&(addr & mask)),
            }
        })
    }

    /// How many distinct prefixes it holds (duplicates counted once).
    pub fn len(&self) -> usize {
        self.members
    }

    pub fn is_empty(&self) -> bool {
        self.members == 0
    }

    /// How many distinct prefix lengths it holds: the most probes a membership test makes.
    pub fn lengths(&self) -> usize {
        self.by_len.len()
    }
}

/// The address sets by name. A set is shared (`Arc`) with every compiled policy that names
/// it, so replacing one costs building it once; the control plane then rebuilds the
/// interfaces whose [`crate::Compiled::sets`] name it.
#[derive(Debug, Clone, Default)]
pub struct Sets {
    by_name: HashMap<String, Arc<AddressSet>>,
}

impl Sets {
    pub fn new() -> Sets {
        Sets::default()
    }

    /// Adds or replaces a set; returns the one it replaced.
    pub fn insert(&mut self, name: impl Into<String>, set: AddressSet) -> Option<Arc<AddressSet>> {
        self.by_name.insert(name.into(), Arc::new(set))
    }

    /// Adds or replaces the set a spec states.
    pub fn insert_spec(&mut self, spec: &SetSpec) -> Option<Arc<AddressSet>> {
        let set = AddressSet::new(spec.members.iter().copied());
        self.insert(spec.name.clone(), set)
    }

    pub fn remove(&mut self, name: &str) -> Option<Arc<AddressSet>> {
        self.by_name.remove(name)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<AddressSet>> {
        self.by_name.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn a(s: &str) -> u32 {
        s.parse::<Ipv4Addr>().unwrap().to_bits()
    }

    fn set(p: &[&str]) -> AddressSet {
        AddressSet::new(p.iter().map(|s| s.parse().unwrap()))
    }

    #[test]
    fn members_of_every_length() {
        let s = set(&[
            "10.0.0.5/32",
            "10.0.0.6/32",
            "10.0.0.5/32",
            "192.168.7.9/24", // host bits ignored
            "172.16.0.0/12",
            "1.2.3.4/99", // over 32: one address
        ]);
        assert_eq!((s.len(), s.lengths()), (5, 3));
        for yes in [
            "10.0.0.5",
            "10.0.0.6",
            "192.168.7.0",
            "192.168.7.255",
            "172.31.255.255",
            "1.2.3.4",
        ] {
            assert!(s.contains(a(yes)), "{yes}");
        }
        for no in [
            "10.0.0.7",
            "192.168.8.0",
            "172.32.0.0",
            "1.2.3.5",
            "0.0.0.0",
        ] {
            assert!(!s.contains(a(no)), "{no}");
        }
        assert!(set(&["0.0.0.0/0"]).contains(a("203.0.113.9")));
        assert!(!AddressSet::new([]).contains(0) && AddressSet::new([]).is_empty());
    }

    /// Ten members or ten thousand: one probe per distinct length, hit or miss.
    #[test]
    fn probes_do_not_grow_with_members() {
        let pods = |n: u32| {
            AddressSet::new((0..n).map(|i| Prefix::host(Ipv4Addr::from(0x0a00_0000 + i * 3))))
        };
        let nets = |n: u32| {
            AddressSet::new((0..n).map(|i| Prefix::new(Ipv4Addr::from(0x0b00_0000 + (i << 8)), 24)))
        };
        for make in [pods, nets] {
            let (small, big) = (make(10), make(10_000));
            for addr in [
                0x0a00_0000,
                0x0a00_0001,
                0x0b00_0500,
                0x0b00_0501,
                0xc000_0201,
            ] {
                let (mut ps, mut pb) = (0u32, 0u32);
                small.contains_tallied(addr, &mut ps);
                big.contains_tallied(addr, &mut pb);
                assert_eq!((ps, pb), (1, 1), "{}", Ipv4Addr::from(addr));
            }
            assert!(
                big.contains(0x0a00_0000 + 9_999 * 3) || big.contains(0x0b00_0000 + (9_999 << 8))
            );
        }
    }

    #[test]
    fn sets_by_name() {
        let mut sets = Sets::new();
        assert!(sets.insert("web", set(&["10.0.0.1/32"])).is_none());
        let old = sets.insert("web", set(&["10.0.0.2/32"])).unwrap();
        assert!(old.contains(a("10.0.0.1")));
        assert!(sets.get("web").unwrap().contains(a("10.0.0.2")));
        assert_eq!(sets.names().collect::<Vec<_>>(), ["web"]);
        assert!(sets.remove("web").is_some() && sets.is_empty());
    }
}
