//! A budget of bytes that peers' regions may take, shared by every listener of a process: one
//! pod may map up to its interface's limit, and the daemon caps what all of them map together
//! (address space, page tables, and with a DSA engine memory faulted in for the device).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of peer regions mapped at once, at most `limit`. Share it (`Arc`) between listeners.
#[derive(Debug)]
pub struct RegionBudget {
    limit: u64,
    used: AtomicU64,
}

/// Half the machine's memory (`MemTotal` in `/proc/meminfo`), or 8 GiB if that cannot be
/// read: a default for a process's [`RegionBudget`].
pub fn default_region_budget() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib.saturating_mul(1024) / 2)
        })
        .unwrap_or(8 << 30)
}

/// Why a region was refused its share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("regions of all peers would take {would} bytes, over the budget of {limit}")]
pub struct OverBudget {
    pub would: u64,
    pub limit: u64,
}

impl RegionBudget {
    pub fn new(limit: u64) -> Arc<RegionBudget> {
        Arc::new(RegionBudget {
            limit,
            used: AtomicU64::new(0),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held by mapped regions now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `bytes` for a region, or refuses if they do not fit; the charge gives them back
    /// when dropped (with the region's mapping).
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Result<Charge, OverBudget> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&w| w <= self.limit)
            })
            .map_err(|used| OverBudget {
                would: used.saturating_add(bytes),
                limit: self.limit,
            })?;
        Ok(Charge {
            budget: self.clone(),
            bytes,
        })
    }
}

/// Bytes taken from a [`RegionBudget`], given back on drop.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<RegionBudget>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_fit_the_limit_and_come_back_when_dropped() {
        let b = RegionBudget::new(100);
        let a = b.charge(60).unwrap();
        assert_eq!(
            b.charge(41).unwrap_err(),
            OverBudget {
                would: 101,
                limit: 100
            }
        );
        let c = b.charge(40).unwrap();
        assert_eq!(b.used(), 100);
        drop(a);
        assert_eq!(b.used(), 40);
        assert!(b.charge(u64::MAX).is_err(), "no overflow");
        drop(c);
        assert_eq!(b.used(), 0);
    }
}
