//! Hit counters: one per rule and one for the denied flows of each direction, named for logs
//! and `show`, and carried across rebuilds by policy name, direction and rule index.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use crate::compile::{Compiled, Direction, RuleKey, RuleRef};

impl Compiled {
    /// The rule for logs: `default/web-allow ingress rule 2` (its index in the policy's list,
    /// from 0, as in `ingress[2]`).
    pub fn rule_name(&self, rule: RuleRef) -> String {
        match self.keys.get(rule.0 as usize) {
            Some(&key) => self.key_name(key),
            None => format!("rule {} (not of this compilation)", rule.0),
        }
    }

    pub(crate) fn key_name(&self, key: RuleKey) -> String {
        let policy = &self.policy_names[key.policy as usize];
        format!("{policy} {} rule {}", key.dir, key.index)
    }

    /// Each rule's hits in rule order, then `ingress denied` and `egress denied`.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let rules = (0..self.keys.len()).map(|i| self.rule_name(RuleRef(i as u32)));
        let denied = Direction::BOTH.map(|d| format!("{d} denied"));
        rules
            .chain(denied)
            .zip(self.counters.iter().map(|c| c.load(Relaxed)))
            .collect()
    }

    /// How many flows `rule` allowed.
    pub fn hits(&self, rule: RuleRef) -> u64 {
        self.counters
            .get(rule.0 as usize)
            .map_or(0, |c| c.load(Relaxed))
    }

    /// How many flows `dir` denied.
    pub fn denied(&self, dir: Direction) -> u64 {
        self.counters[self.rules.len() + dir.index()].load(Relaxed)
    }

    /// The counters for a fresh build: each starting from `previous`'s counter of the same
    /// key, if any. Keys are names, not indices: a policy added before another shifts every
    /// index after it.
    pub(crate) fn counters_from(&self, previous: Option<&Compiled>) -> Arc<[AtomicU64]> {
        let Some(prev) = previous else {
            return (0..self.rules.len() + 2)
                .map(|_| AtomicU64::new(0))
                .collect();
        };
        let before: HashMap<(&str, Direction, u32), u64> = prev
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let name = prev.policy_names[k.policy as usize].as_str();
                ((name, k.dir, k.index), prev.counters[i].load(Relaxed))
            })
            .collect();
        let rules = self.keys.iter().map(|k| {
            let name = self.policy_names[k.policy as usize].as_str();
            before.get(&(name, k.dir, k.index)).copied().unwrap_or(0)
        });
        let denied = Direction::BOTH.map(|d| prev.denied(d));
        rules.chain(denied).map(AtomicU64::new).collect()
    }
}
