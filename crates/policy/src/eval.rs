//! Evaluating a flow: the direction's rules in order, the first that matches allows.
//!
//! Per rule: the port checks first (a few compares, and they reject most rules of a
//! port-specific policy), then the peers: one probe per distinct prefix length of each set
//! or prefix list (see [`crate::sets`]). Nothing here allocates, locks or depends on how many
//! members a set has.

use std::sync::atomic::Ordering::Relaxed;

use crate::compile::{Compiled, CompiledRule, Direction, Peers, RuleRef, Verdict};
use crate::sets::{NoTally, Tally};

impl Compiled {
    /// The verdict for a new flow seen in `dir`: `peer` is the packet's source on ingress and
    /// its destination on egress, `proto` the IP protocol number, `dport` the destination
    /// port (ignored for ICMP and protocols without ports). Counts the hit.
    #[inline]
    pub fn evaluate(&self, dir: Direction, peer: u32, proto: u8, dport: u16) -> Verdict {
        let v = self.decide(dir, peer, proto, dport, &mut NoTally);
        let cell = match v {
            Verdict::NotIsolated => return v,
            Verdict::Allowed(r) => r.0 as usize,
            Verdict::Denied => self.rules.len() + dir.index(),
        };
        self.counters[cell].fetch_add(1, Relaxed);
        v
    }

    /// The verdict `evaluate` would give, without counting it, and how many membership probes
    /// (hash look-ups or single compares) it took: the measure of an evaluation's cost that
    /// tests and `show` can rely on instead of timings.
    pub fn probes(&self, dir: Direction, peer: u32, proto: u8, dport: u16) -> (Verdict, u32) {
        let mut probes = 0u32;
        let v = self.decide(dir, peer, proto, dport, &mut probes);
        (v, probes)
    }

    #[inline]
    fn decide(
        &self,
        dir: Direction,
        peer: u32,
        proto: u8,
        dport: u16,
        tally: &mut impl Tally,
    ) -> Verdict {
        let d = self.dirs[dir.index()];
        if !d.isolated {
            return Verdict::NotIsolated;
        }
        let rules = &self.rules[d.first..d.end];
        match rules
            .iter()
            .position(|r| self.rule_matches(r, peer, proto, dport, tally))
        {
            Some(i) => Verdict::Allowed(RuleRef((d.first + i) as u32)),
            None => Verdict::Denied,
        }
    }

    #[inline]
    fn rule_matches(
        &self,
        rule: &CompiledRule,
        peer: u32,
        proto: u8,
        dport: u16,
        tally: &mut impl Tally,
    ) -> bool {
        let (start, end) = rule.ports;
        let ports = &self.ports[start as usize..end as usize];
        let port_ok = ports.is_empty()
            || ports
                .iter()
                .any(|p| p.proto == proto && p.first <= dport && dport <= p.last);
        port_ok && rule.peers.matches(peer, tally)
    }
}

impl Peers {
    #[inline]
    fn matches(&self, peer: u32, tally: &mut impl Tally) -> bool {
        let Peers::AnyOf {
            prefixes,
            carved,
            sets,
        } = self
        else {
            return true;
        };
        if prefixes
            .as_ref()
            .is_some_and(|p| p.contains_tallied(peer, tally))
        {
            return true;
        }
        let in_carved = carved.iter().any(|c| {
            tally.probe();
            peer & c.mask == c.net && !c.except.contains_tallied(peer, tally)
        });
        in_carved || sets.iter().any(|s| s.contains_tallied(peer, tally))
    }
}
