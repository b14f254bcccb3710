//! One interface's policies compiled for evaluation: both directions' rules in one list, each
//! rule's peers merged into hash-backed sets, named sets resolved to shared handles.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::sets::{AddressSet, Sets};
use crate::spec::{Peer, Policy, Protocol, Rule};

/// Which way a flow crosses the pod's interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Delivered to the pod: the peer is the packet's source.
    Ingress = 0,
    /// Sent by the pod: the peer is the packet's destination.
    Egress = 1,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::Ingress, Direction::Egress];

    pub const fn name(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }

    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A rule of a [`Compiled`]: its index in the compiled rule list. Meaningful only with the
/// `Compiled` that returned it; [`Compiled::rule_name`] formats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleRef(pub(crate) u32);

impl RuleRef {
    pub const fn index(self) -> u32 {
        self.0
    }
}

/// What a policy evaluation decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// No applied policy covers this direction: everything passes.
    NotIsolated,
    /// The direction is isolated and this rule (the first that matched) allows the flow.
    Allowed(RuleRef),
    /// The direction is isolated and no rule allows the flow.
    Denied,
}

impl Verdict {
    /// Whether the flow may pass.
    pub const fn allows(self) -> bool {
        !matches!(self, Verdict::Denied)
    }
}

/// A destination-port check: `proto` and `first..=last`. ICMP and port-less matches cover
/// every port, so the evaluator makes one comparison whatever the protocol.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortCheck {
    pub(crate) proto: u8,
    pub(crate) first: u16,
    pub(crate) last: u16,
}

/// An `ipBlock` with excepts: in `net/mask` and not in `except`.
#[derive(Debug, Clone)]
pub(crate) struct Carved {
    pub(crate) net: u32,
    pub(crate) mask: u32,
    pub(crate) except: AddressSet,
}

#[derive(Debug, Clone)]
pub(crate) enum Peers {
    /// The rule named no peer.
    Any,
    /// The rule named peers: plain prefixes merged into one set, prefixes with excepts,
    /// and the named sets that exist. All empty (only missing sets) matches nothing.
    AnyOf {
        prefixes: Option<AddressSet>,
        carved: Vec<Carved>,
        sets: Vec<Arc<AddressSet>>,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct CompiledRule {
    /// The rule's checks in [`Compiled::ports`], `start..end`; empty: any protocol and port.
    /// One list for all rules: a scan past rules whose ports do not match reads contiguous
    /// memory, not one allocation per rule.
    pub(crate) ports: (u32, u32),
    pub(crate) peers: Peers,
}

/// Where a compiled rule came from: its counter's key across rebuilds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RuleKey {
    pub(crate) policy: u32,
    pub(crate) dir: Direction,
    pub(crate) index: u32,
}

/// One direction's slice of the rule list.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DirRules {
    pub(crate) isolated: bool,
    pub(crate) first: usize,
    pub(crate) end: usize,
}

/// The policies applied to one interface, ready to evaluate flows in both directions.
///
/// Built by the control thread and shared read-only with the workers (through whatever
/// snapshot carries the interface's state); only the hit counters change after `build`.
#[derive(Debug)]
pub struct Compiled {
    pub(crate) rules: Vec<CompiledRule>,
    pub(crate) ports: Vec<PortCheck>,
    pub(crate) dirs: [DirRules; 2],
    pub(crate) keys: Vec<RuleKey>,
    pub(crate) policy_names: Vec<String>,
    /// One per rule, then the denied count of ingress and of egress. Shared so that every
    /// worker counts into the same cells; relaxed, and touched once per new flow only.
    pub(crate) counters: Arc<[AtomicU64]>,
    pub(crate) set_names: Vec<String>,
    pub(crate) warnings: Vec<String>,
}

impl Compiled {
    /// Compiles `policies` (all those applied to one interface, in a stable order: rule
    /// references and counters follow it) against `sets`. Counters start at zero.
    ///
    /// It checks nothing (`problems()` is the caller's gate) but gives invalid specs a
    /// defined meaning: lengths over 32 are 32, an except outside its cidr removes nothing,
    /// a backwards port range matches no port.
    pub fn build(policies: &[&Policy], sets: &Sets) -> Compiled {
        Compiled::build_with_counters(policies, sets, None)
    }

    /// As [`build`](Compiled::build), with each rule's counter starting where `previous`'s
    /// counter for the same policy name, direction and rule index stands (and the denied
    /// counters where `previous`'s stand). Increments made on `previous` after this call are
    /// not carried: publish the result at once.
    pub fn build_with_counters(
        policies: &[&Policy],
        sets: &Sets,
        previous: Option<&Compiled>,
    ) -> Compiled {
        let mut c = Compiled {
            rules: Vec::new(),
            ports: Vec::new(),
            dirs: [DirRules::default(); 2],
            keys: Vec::new(),
            policy_names: policies.iter().map(|p| p.name.clone()).collect(),
            counters: Arc::new([]),
            set_names: Vec::new(),
            warnings: Vec::new(),
        };
        for dir in Direction::BOTH {
            c.dirs[dir.index()].first = c.rules.len();
            for (pi, policy) in policies.iter().enumerate() {
                let rules = match dir {
                    Direction::Ingress => &policy.ingress,
                    Direction::Egress => &policy.egress,
                };
                let Some(rules) = rules else { continue };
                c.dirs[dir.index()].isolated = true;
                for (ri, rule) in rules.iter().enumerate() {
                    let key = RuleKey {
                        policy: pi as u32,
                        dir,
                        index: ri as u32,
                    };
                    let compiled = c.compile_rule(rule, sets, key);
                    c.rules.push(compiled);
                    c.keys.push(key);
                }
            }
            c.dirs[dir.index()].end = c.rules.len();
        }
        c.warn_of_twins();
        c.set_names.sort_unstable();
        c.set_names.dedup();
        c.counters = c.counters_from(previous);
        c
    }

    fn compile_rule(&mut self, rule: &Rule, sets: &Sets, key: RuleKey) -> CompiledRule {
        let start = self.ports.len() as u32;
        self.ports.extend(rule.ports.iter().map(|m| {
            let all = (0, u16::MAX);
            let (first, last) = match (m.protocol, m.port) {
                (Protocol::Icmp, _) | (_, None) => all,
                (_, Some(r)) => (r.first, r.last),
            };
            PortCheck {
                proto: m.protocol.number(),
                first,
                last,
            }
        }));
        let ports = (start, self.ports.len() as u32);
        if rule.peers.is_empty() {
            return CompiledRule {
                ports,
                peers: Peers::Any,
            };
        }
        let mut plain = Vec::new();
        let mut carved = Vec::new();
        let mut found = Vec::new();
        for peer in &rule.peers {
            match peer {
                Peer::Cidr { prefix, except } if except.is_empty() => plain.push(*prefix),
                Peer::Cidr { prefix, except } => carved.push(Carved {
                    net: prefix.network(),
                    mask: prefix.mask(),
                    except: AddressSet::new(except.iter().copied()),
                }),
                Peer::Set(name) => {
                    self.set_names.push(name.clone());
                    match sets.get(name) {
                        Some(set) => found.push(Arc::clone(set)),
                        None => {
                            let w = format!(
                                "{}: address set {name:?} does not exist: that peer matches \
                                 nothing until it does",
                                self.key_name(key)
                            );
                            self.warnings.push(w);
                        }
                    }
                }
            }
        }
        let peers = Peers::AnyOf {
            prefixes: (!plain.is_empty()).then(|| AddressSet::new(plain)),
            carved,
            sets: found,
        };
        CompiledRule { ports, peers }
    }

    /// Two applied policies of one name would share counter keys across rebuilds.
    fn warn_of_twins(&mut self) {
        let mut seen = HashMap::new();
        for (i, name) in self.policy_names.iter().enumerate() {
            if let Some(first) = seen.insert(name.as_str(), i) {
                self.warnings.push(format!(
                    "policies {first} and {i} are both named {name:?}: their counters are \
                     not told apart across rebuilds"
                ));
            }
        }
    }

    /// What `build` found amiss but compiled anyway (sets that do not exist yet).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The names of the address sets the rules refer to, found or not, sorted: when one of
    /// them changes, this interface needs a rebuild.
    pub fn sets(&self) -> impl Iterator<Item = &str> {
        self.set_names.iter().map(String::as_str)
    }

    /// Whether some applied policy covers `dir`.
    pub fn isolated(&self, dir: Direction) -> bool {
        self.dirs[dir.index()].isolated
    }

    /// How many rules both directions hold.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }
}
