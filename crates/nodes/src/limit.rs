//! Token buckets for what a worker sends on others' behalf (ICMP errors, ARP requests): a
//! budget per worker, and one per source of the packets that provoke them, so that one source
//! that never stops (a pod scanning an on-link subnet, a host flooding expired packets) spends
//! its own share and not every source's. A source is an address in a VRF; sources share
//! [`SOURCE_SLOTS`] buckets by a hash, so two that hash alike share one, and many spoofed
//! sources meet the worker's budget, which bounds them all.

use wire::Ipv4Addr;

/// Per-source buckets of a worker (a power of two).
pub const SOURCE_SLOTS: usize = 256;

/// `key`'s slot among `slots` (a power of two) by Fibonacci hashing: the top bits of the
/// product mix every bit of the key.
pub(crate) fn slot_of(key: u64, slots: usize) -> usize {
    debug_assert!(slots.is_power_of_two() && slots > 1);
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - slots.trailing_zeros())) as usize
}

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A token bucket in fixed point: one token is [`NANOS_PER_SEC`] credits, and each elapsed
/// nanosecond adds `rate` credits, so refilling needs no division.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    credit: u64,
    cap: u64,
    rate: u64,
    last: u64,
}

impl TokenBucket {
    pub(crate) fn new(rate: u32, burst: u32, now: u64) -> TokenBucket {
        let cap = u64::from(burst) * NANOS_PER_SEC;
        TokenBucket {
            credit: cap,
            cap,
            rate: u64::from(rate),
            last: now,
        }
    }

    pub(crate) fn refill(&mut self, now: u64) {
        let elapsed = now.saturating_sub(self.last);
        self.last = now;
        self.credit = self
            .credit
            .saturating_add(elapsed.saturating_mul(self.rate))
            .min(self.cap);
    }

    pub(crate) fn has_token(&self) -> bool {
        self.credit >= NANOS_PER_SEC
    }

    pub(crate) fn take(&mut self) -> bool {
        if !self.has_token() {
            return false;
        }
        self.credit -= NANOS_PER_SEC;
        true
    }
}

/// Which budget refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limited {
    Worker,
    Source,
}

/// A worker's budget and its sources' (module docs).
#[derive(Debug)]
pub(crate) struct Limiter {
    all: TokenBucket,
    sources: Box<[TokenBucket]>,
}

impl Limiter {
    /// `all` and each source's: (per second, burst).
    pub(crate) fn new(all: (u32, u32), source: (u32, u32), now: u64) -> Limiter {
        Limiter {
            all: TokenBucket::new(all.0, all.1, now),
            sources: (0..SOURCE_SLOTS)
                .map(|_| TokenBucket::new(source.0, source.1, now))
                .collect(),
        }
    }

    /// Refills the worker's bucket: once per frame, before [`Limiter::allow`].
    pub(crate) fn refill(&mut self, now: u64) {
        self.all.refill(now);
    }

    /// Takes a token for a packet from `src` in `vrf`, from the source's bucket and the
    /// worker's, or from neither. A source's bucket refills when it is asked, at `now`.
    pub(crate) fn allow(&mut self, vrf: u32, src: Ipv4Addr, now: u64) -> Result<(), Limited> {
        if !self.all.has_token() {
            return Err(Limited::Worker);
        }
        let key = u64::from(src.to_bits()) | u64::from(vrf) << 32;
        let s = &mut self.sources[slot_of(key, SOURCE_SLOTS)];
        s.refill(now);
        if !s.take() {
            return Err(Limited::Source);
        }
        self.all.take();
        Ok(())
    }

    /// Takes a token from the worker's bucket only: for what no source should be charged
    /// with (our own packets).
    pub(crate) fn allow_worker(&mut self) -> Result<(), Limited> {
        if self.all.take() {
            Ok(())
        } else {
            Err(Limited::Worker)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bursts_then_refills_at_its_rate() {
        let mut t = TokenBucket::new(1000, 3, 0);
        assert_eq!((0..5).filter(|_| t.take()).count(), 3, "the burst");
        t.refill(1_500_000); // 1.5 ms: one and a half tokens
        assert!(t.take());
        assert!(!t.take());
        t.refill(2_000_000); // the half left over and another half
        assert!(t.take());
        t.refill(u64::MAX); // an eternity refills to the burst, no more, without overflow
        assert_eq!((0..5).filter(|_| t.take()).count(), 3);
        t.refill(0); // a clock that went backwards adds nothing
        assert!(!t.take());
    }

    /// One source asking without pause spends its own share; another source still gets
    /// tokens, until the worker's budget is spent. Fails with the worker's bucket alone: the
    /// first source's burst takes all of it.
    #[test]
    fn a_source_that_keeps_asking_spends_only_its_share() {
        let mut l = Limiter::new((1000, 100), (100, 10), 0);
        let noisy = Ipv4Addr::new(10, 0, 0, 7);
        let refused: Vec<_> = (0..1000)
            .filter_map(|_| l.allow(0, noisy, 0).err())
            .collect();
        assert_eq!(refused.len(), 990, "its burst of 10 and no more");
        assert!(refused.iter().all(|&r| r == Limited::Source));
        // Another source, and the same address in another VRF (another network's pod), are
        // not that source: their errors go out.
        for (vrf, a) in [(0, Ipv4Addr::new(10, 0, 0, 8)), (3, noisy)] {
            assert_eq!((0..5).filter(|_| l.allow(vrf, a, 0).is_ok()).count(), 5);
        }
        // 100 ms later the noisy source has 10 more, at its rate of 100 a second.
        let later = 100_000_000;
        l.refill(later);
        assert_eq!(
            (0..50).filter(|_| l.allow(0, noisy, later).is_ok()).count(),
            10
        );
        // Many sources spend the worker's budget, and then every source waits.
        let mut sent = 0;
        for i in 0..1000u32 {
            if l.allow(0, Ipv4Addr::from(0x0b00_0000 + i * 7919), later)
                .is_ok()
            {
                sent += 1;
            }
        }
        assert!(sent < 100, "{sent}: the worker's burst is the bound");
        assert_eq!(
            l.allow(0, Ipv4Addr::new(10, 9, 9, 9), later),
            Err(Limited::Worker)
        );
    }
}
