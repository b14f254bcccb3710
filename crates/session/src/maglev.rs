//! Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable Software Network
//! Load Balancer", NSDI 2016, §3.4): a lookup table of a prime size M in which every backend
//! owns nearly M/n entries, and which changes little when a backend comes or goes, so that
//! flows whose session is lost (another node, a restart) mostly reach the same backend again.
//!
//! Built by the control thread when a service's backends change; `pick` is one multiply and
//! one load on the packet path.

/// The largest table: a prime, 2^16 + 1.
pub const MAX_SIZE: u32 = 65537;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaglevError {
    #[error("no backends: a service without backends has no table")]
    NoBackends,
    #[error("table size {0} is not a prime (Maglev::size_for chooses one)")]
    NotPrime(u32),
    #[error("{backends} backends do not fit a table of {size} entries")]
    TooManyBackends { backends: usize, size: u32 },
}

/// A service's lookup table: entry → index into the backend list it was built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maglev {
    table: Box<[u32]>,
}

/// The splitmix64 finaliser: a fixed bijective mix, so that a backend's permutation depends
/// only on its id (the same on every node and in every run).
const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn is_prime(n: u32) -> bool {
    n >= 2
        && (2..)
            .take_while(|d| d * d <= n)
            .all(|d| !n.is_multiple_of(d))
}

impl Maglev {
    /// A table size for `n` backends: the smallest prime of at least 100 × n (the paper's
    /// rule for entries to spread within about 1% of even), at most [`MAX_SIZE`].
    pub fn size_for(n: usize) -> u32 {
        let want = (n.max(1) * 100).min(MAX_SIZE as usize) as u32;
        (want..=MAX_SIZE).find(|&m| is_prime(m)).unwrap_or(MAX_SIZE)
    }

    /// The table for backends identified by `backend_ids` (stable ids, not list positions:
    /// a backend keeps its permutation when others come and go), with `size` entries.
    pub fn new(backend_ids: &[u64], size: u32) -> Result<Maglev, MaglevError> {
        let n = backend_ids.len();
        if n == 0 {
            return Err(MaglevError::NoBackends);
        }
        if !is_prime(size) {
            return Err(MaglevError::NotPrime(size));
        }
        if n > size as usize {
            return Err(MaglevError::TooManyBackends { backends: n, size });
        }
        let m = u64::from(size);
        // Each backend's preference list is offset, offset + skip, offset + 2·skip, ... mod M,
        // a permutation of 0..M because M is prime and 0 < skip < M.
        let perm: Vec<(u64, u64)> = backend_ids
            .iter()
            .map(|&id| {
                let offset = mix64(id ^ 0x6a09_e667_f3bc_c908) % m;
                let skip = mix64(id ^ 0xbb67_ae85_84ca_a73b) % (m - 1) + 1;
                (offset, skip)
            })
            .collect();
        let mut next = vec![0u64; n];
        let mut table = vec![u32::MAX; size as usize];
        let mut filled = 0;
        // Backends take turns, each claiming its most preferred entry still free.
        'fill: loop {
            for (i, &(offset, skip)) in perm.iter().enumerate() {
                let mut c = (offset + next[i] * skip) % m;
                while table[c as usize] != u32::MAX {
                    next[i] += 1;
                    c = (offset + next[i] * skip) % m;
                }
                table[c as usize] = i as u32;
                next[i] += 1;
                filled += 1;
                if filled == size {
                    break 'fill;
                }
            }
        }
        Ok(Maglev {
            table: table.into(),
        })
    }

    /// The backend (index into the list the table was built from) for a flow's hash
    /// ([`crate::Key::hash_with`]).
    #[inline]
    pub fn pick(&self, flow_hash: u64) -> usize {
        // The high 32 bits mapped onto 0..M by a multiply-shift instead of a division.
        let i = ((flow_hash >> 32) * self.table.len() as u64) >> 32;
        self.table[i as usize] as usize
    }

    pub fn size(&self) -> u32 {
        self.table.len() as u32
    }

    pub fn entries(&self) -> &[u32] {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u64) -> Vec<u64> {
        (0..n).map(|i| 1000 + i * 7).collect()
    }

    #[test]
    fn sizes_are_primes_near_a_hundred_per_backend() {
        assert_eq!(Maglev::size_for(1), 101);
        assert_eq!(Maglev::size_for(10), 1009);
        assert_eq!(Maglev::size_for(655), 65519);
        assert_eq!(Maglev::size_for(656), MAX_SIZE);
        assert_eq!(Maglev::size_for(5000), MAX_SIZE);
        for n in [1, 3, 17, 100, 400] {
            let m = Maglev::size_for(n);
            assert!(is_prime(m) && m as usize >= 100 * n.min(655), "{n}: {m}");
        }
    }

    #[test]
    fn every_backend_gets_its_share() {
        for n in [1u64, 2, 3, 7, 10, 33, 100] {
            let m = Maglev::new(&ids(n), Maglev::size_for(n as usize)).unwrap();
            let mut count = vec![0usize; n as usize];
            for &b in m.entries() {
                count[b as usize] += 1;
            }
            let share = m.size() as f64 / n as f64;
            for (b, &c) in count.iter().enumerate() {
                assert!(
                    (0.9 * share..=1.1 * share).contains(&(c as f64)),
                    "{n} backends: backend {b} has {c} entries, even is {share:.1}"
                );
            }
        }
    }

    #[test]
    fn removing_one_backend_moves_about_one_nth() {
        for n in [5u64, 10, 20, 50] {
            let all = ids(n);
            let size = Maglev::size_for(n as usize);
            let before = Maglev::new(&all, size).unwrap();
            let gone = n as usize / 2;
            let rest: Vec<u64> = all.iter().copied().filter(|&i| i != all[gone]).collect();
            let after = Maglev::new(&rest, size).unwrap();
            let changed = before
                .entries()
                .iter()
                .zip(after.entries())
                .filter(|&(&b, &a)| all[b as usize] != rest[a as usize])
                .count();
            let frac = changed as f64 / f64::from(size);
            println!(
                "maglev: {n} backends, one removed: {:.2}% of {size} entries changed (1/n = {:.2}%)",
                100.0 * frac,
                100.0 / n as f64
            );
            assert!(
                frac >= 1.0 / n as f64 * 0.9,
                "the removed backend's entries move"
            );
            assert!(frac <= 1.5 / n as f64 + 0.01, "{frac} changed for n = {n}");
        }
    }

    #[test]
    fn same_ids_same_table_and_picks_stay_in_range() {
        let a = Maglev::new(&ids(13), 1301).unwrap();
        let b = Maglev::new(&ids(13), 1301).unwrap();
        assert_eq!(a, b);
        // Pinned: the permutation depends on the ids alone, never on the run or the host.
        assert_eq!(a.entries()[..12], [3, 5, 11, 1, 6, 4, 7, 8, 2, 6, 7, 1]);
        for h in [0, u64::MAX, 1 << 63, 0x1234_5678_9abc_def0] {
            assert!(a.pick(h) < 13);
        }
        assert_eq!(a.pick(0), a.entries()[0] as usize);
        assert_eq!(a.pick(u64::MAX), a.entries()[1300] as usize);
    }

    #[test]
    fn errors() {
        assert_eq!(Maglev::new(&[], 101), Err(MaglevError::NoBackends));
        assert_eq!(Maglev::new(&[1], 100), Err(MaglevError::NotPrime(100)));
        assert_eq!(
            Maglev::new(&ids(4), 3),
            Err(MaglevError::TooManyBackends {
                backends: 4,
                size: 3
            })
        );
    }
}
