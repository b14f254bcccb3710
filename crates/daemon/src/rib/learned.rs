//! The learned neighbours' bookkeeping: when each was last heard, per interface and in all,
//! so that the table has a cap with a stated rule and learned entries age.
//!
//! What others send decides what is learned, so the table is bounded twice: at most
//! `per_interface` learned neighbours on one interface (a hostile VTEP or underlay host fills
//! only its own interface's share) and `max` in all. A new neighbour beyond either cap takes
//! the place of the least recently heard learned one there if that one was silent for longer
//! than `stale` (a flood's entries, a host gone); otherwise it is refused and counted.
//!
//! A learned neighbour not heard for `age` is asked again before it is forgotten, as Linux
//! and VPP do: [`PROBES`] ARP requests [`PROBE_INTERVAL_MS`] apart, its MAC still in use
//! meanwhile, and only when none is answered is it forgotten (its next packet then asks
//! again, broadcast). Between two veclane nodes nothing else refreshes a tunnel's neighbour:
//! without the probes a flow in use lost packets to a glean once an hour. Static neighbours
//! are never counted, evicted, probed or aged.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;

/// ARP requests a silent learned neighbour gets before it is forgotten.
pub const PROBES: u8 = 3;
/// From one probe to the next, and from the last to forgetting.
pub const PROBE_INTERVAL_MS: u64 = 1000;

/// The caps and times, in milliseconds of the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max: usize,
    pub per_interface: usize,
    pub stale_ms: u64,
    /// 0: learned neighbours never age.
    pub age_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        let d = api::NeighbourLimits::default();
        Limits::from(&d)
    }
}

impl From<&api::NeighbourLimits> for Limits {
    fn from(l: &api::NeighbourLimits) -> Limits {
        Limits {
            max: l.max as usize,
            per_interface: l.per_interface as usize,
            stale_ms: u64::from(l.stale_seconds) * 1000,
            age_ms: u64::from(l.age_seconds) * 1000,
        }
    }
}

/// What became of a neighbour a worker reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// Known already: its time (and MAC) refreshed.
    Refreshed,
    /// New, with room for it.
    New,
    /// New, in place of this stale one (forget it first).
    Replaces(u32, Ipv4Addr),
    /// New, and no room: not learned.
    Refused,
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub refused: u64,
    /// Refused because its host route would have taken the room kept for configured routes.
    pub refused_room: u64,
    pub evicted: u64,
    pub expired: u64,
    /// ARP requests sent to learned neighbours that fell silent (counted by the caller,
    /// which sends them).
    pub probes: u64,
}

/// What [`Learned::expire`] found due.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Due {
    /// Neighbours to ask again now, with the probe's number (1 to [`PROBES`]).
    pub probe: Vec<(u32, Ipv4Addr, u8)>,
    /// Neighbours that answered none of their probes, taken out of the books (the caller
    /// forgets them).
    pub gone: Vec<(u32, Ipv4Addr)>,
}

#[derive(Debug, Default)]
pub struct Learned {
    pub limits: Limits,
    heard: HashMap<(u32, Ipv4Addr), u64>,
    /// (last heard, interface, address), oldest first: in all, and per interface.
    by_age: BTreeSet<(u64, u32, Ipv4Addr)>,
    per_if: HashMap<u32, BTreeSet<(u64, Ipv4Addr)>>,
    /// Probes sent to each silent neighbour since it was last heard.
    probed: HashMap<(u32, Ipv4Addr), u8>,
    pub counts: Counts,
}

impl Learned {
    pub fn new(limits: Limits) -> Learned {
        Learned {
            limits,
            ..Learned::default()
        }
    }

    pub fn len(&self) -> usize {
        self.heard.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heard.is_empty()
    }

    /// Neighbour `ip` on `i` was heard at `now`: where it stands (see [`Heard`]). The caller
    /// forgets a replaced neighbour and learns the new one, or drops a refused one.
    pub fn hear(&mut self, i: u32, ip: Ipv4Addr, now: u64) -> Heard {
        if let Some(t) = self.heard.get_mut(&(i, ip)) {
            let old = std::mem::replace(t, now);
            self.by_age.remove(&(old, i, ip));
            self.by_age.insert((now, i, ip));
            let v = self.per_if.entry(i).or_default();
            v.remove(&(old, ip));
            v.insert((now, ip));
            self.probed.remove(&(i, ip));
            return Heard::Refreshed;
        }
        let on_if = self.per_if.get(&i).map_or(0, BTreeSet::len);
        let victim = if on_if >= self.limits.per_interface {
            self.per_if
                .get(&i)
                .and_then(|v| v.first())
                .map(|&(t, a)| (t, i, a))
        } else if self.heard.len() >= self.limits.max {
            self.by_age.first().copied()
        } else {
            None
        };
        let full = on_if >= self.limits.per_interface || self.heard.len() >= self.limits.max;
        let outcome = match victim {
            None if full => Heard::Refused,
            None => Heard::New,
            Some((t, vi, va)) if now.saturating_sub(t) > self.limits.stale_ms => {
                self.remove(vi, va);
                self.counts.evicted += 1;
                Heard::Replaces(vi, va)
            }
            Some(_) => Heard::Refused,
        };
        if outcome == Heard::Refused {
            self.counts.refused += 1;
        } else {
            self.heard.insert((i, ip), now);
            self.by_age.insert((now, i, ip));
            self.per_if.entry(i).or_default().insert((now, ip));
        }
        outcome
    }

    /// Stops counting neighbour `ip` on `i` (forgotten, or made static).
    pub fn remove(&mut self, i: u32, ip: Ipv4Addr) {
        self.probed.remove(&(i, ip));
        if let Some(t) = self.heard.remove(&(i, ip)) {
            self.by_age.remove(&(t, i, ip));
            if let Some(v) = self.per_if.get_mut(&i) {
                v.remove(&(t, ip));
                if v.is_empty() {
                    self.per_if.remove(&i);
                }
            }
        }
    }

    /// Forgets interface `i`'s learned neighbours (the interface went).
    pub fn remove_interface(&mut self, i: u32) {
        self.probed.retain(|&(pi, _), _| pi != i);
        for (_, ip) in self.per_if.remove(&i).unwrap_or_default() {
            if let Some(t) = self.heard.remove(&(i, ip)) {
                self.by_age.remove(&(t, i, ip));
            }
        }
    }

    /// What is due at `now` among the learned neighbours not heard for longer than the age:
    /// the k-th probe of one falls `age + (k-1) * interval` after it was last heard, and one
    /// that has had all its probes is gone an interval after the last.
    pub fn expire(&mut self, now: u64) -> Due {
        let mut due = Due::default();
        if self.limits.age_ms == 0 {
            return due;
        }
        let silent: Vec<(u64, u32, Ipv4Addr)> = self
            .by_age
            .iter()
            .take_while(|&&(t, _, _)| now.saturating_sub(t) > self.limits.age_ms)
            .copied()
            .collect();
        for (t, i, ip) in silent {
            let sent = self.probed.get(&(i, ip)).copied().unwrap_or(0);
            let next = t + self.limits.age_ms + u64::from(sent) * PROBE_INTERVAL_MS;
            if now < next {
                continue;
            }
            if sent < PROBES {
                self.probed.insert((i, ip), sent + 1);
                due.probe.push((i, ip, sent + 1));
            } else {
                self.forget(i, ip);
                due.gone.push((i, ip));
            }
        }
        due
    }

    /// Takes a silent neighbour out of the books now, unprobed (it cannot be asked), counted
    /// as expired.
    pub fn forget(&mut self, i: u32, ip: Ipv4Addr) {
        self.remove(i, ip);
        self.counts.expired += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> Ipv4Addr {
        Ipv4Addr::from(0x0a00_0000 + n)
    }

    fn limits() -> Limits {
        Limits {
            max: 6,
            per_interface: 4,
            stale_ms: 1000,
            age_ms: 10_000,
        }
    }

    /// One interface's flood fills its own share and is refused beyond it while its
    /// entries are fresh; once they are stale, a new neighbour takes the oldest's place.
    /// Another interface still learns up to the total.
    #[test]
    fn a_flood_fills_its_own_share_and_then_waits_for_staleness() {
        let mut l = Learned::new(limits());
        for n in 0..4 {
            assert_eq!(l.hear(1, ip(n), n.into()), Heard::New);
        }
        assert_eq!(l.hear(1, ip(9), 500), Heard::Refused);
        assert_eq!(
            l.hear(1, ip(2), 600),
            Heard::Refreshed,
            "known ones refresh"
        );
        assert_eq!(l.hear(1, ip(9), 1500), Heard::Replaces(1, ip(0)));
        assert_eq!(l.hear(1, ip(10), 1500), Heard::Replaces(1, ip(1)));
        assert_eq!(l.hear(1, ip(11), 1500), Heard::Replaces(1, ip(3)));
        assert_eq!(
            l.hear(1, ip(12), 1500),
            Heard::Refused,
            "ip 2 was heard at 600"
        );
        assert_eq!(l.hear(2, ip(0), 1500), Heard::New);
        assert_eq!(l.hear(2, ip(1), 1500), Heard::New);
        assert_eq!(l.len(), 6);
        assert_eq!(
            l.hear(2, ip(2), 1600),
            Heard::Refused,
            "the total's oldest is fresh"
        );
        assert_eq!(
            l.hear(2, ip(2), 1700),
            Heard::Replaces(1, ip(2)),
            "now it is not"
        );
        assert_eq!(
            l.counts,
            Counts {
                refused: 3,
                refused_room: 0,
                evicted: 4,
                expired: 0,
                probes: 0,
            }
        );
    }

    /// A silent neighbour is probed three times, a second apart, from its age on, and is
    /// gone a second after the last unanswered probe; one that answers starts over; the
    /// ages of others are their own.
    #[test]
    fn silent_neighbours_are_probed_then_forgotten() {
        let mut l = Learned::new(limits());
        l.hear(1, ip(1), 0);
        l.hear(1, ip(2), 100);
        l.hear(2, ip(3), 200);
        l.hear(1, ip(1), 5000);
        assert_eq!(l.expire(10_000), Due::default(), "not past the age yet");
        assert_eq!(l.expire(10_150).probe, vec![(1, ip(2), 1)]);
        assert_eq!(l.expire(10_150), Due::default(), "one probe per interval");
        assert_eq!(l.expire(11_100).probe, vec![(1, ip(2), 2), (2, ip(3), 1)]);
        let d = l.expire(12_100);
        assert_eq!(d.probe, vec![(1, ip(2), 3), (2, ip(3), 2)]);
        assert_eq!(d.gone, vec![]);
        // ip 3 answers its first probe: heard, its probes start over at its new age.
        assert_eq!(l.hear(2, ip(3), 12_300), Heard::Refreshed);
        let d = l.expire(13_100);
        assert_eq!(d.gone, vec![(1, ip(2))], "a second after its third probe");
        assert_eq!(l.len(), 2);
        assert_eq!(l.expire(15_001).probe, vec![(1, ip(1), 1)]);
        assert_eq!(l.expire(22_301).probe, vec![(1, ip(1), 2), (2, ip(3), 1)]);
        l.forget(1, ip(1));
        l.remove_interface(2);
        assert_eq!(l.len(), 0);
        assert_eq!(l.counts.expired, 2);
        assert_eq!(l.expire(u64::MAX), Due::default());
        let mut never = Learned::new(Limits {
            age_ms: 0,
            ..limits()
        });
        never.hear(1, ip(1), 0);
        assert_eq!(never.expire(u64::MAX), Due::default());
    }
}
