//! The policies and address sets as the control plane states them, and their checks.
//!
//! These mirror Kubernetes' `networking.k8s.io/v1` NetworkPolicy after the control plane
//! has resolved its selectors: which pods a policy applies to is the caller's business (it
//! hands [`crate::Compiled::build`] the policies of one interface), and a `podSelector` /
//! `namespaceSelector` peer arrives as a named address set ([`Peer::Set`]) the control plane
//! keeps current. Nothing here is checked on construction or deserialisation: `problems()`
//! names what is wrong, and compiling an invalid spec still gives a defined result.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An IPv4 prefix, written `address/length`. The length is kept as given (so that
/// `problems()` can name one over 32); host bits are ignored, as Kubernetes' `ipBlock` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

/// Why a prefix's text is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("prefix {0:?}: expected address/length, such as 10.0.0.0/8")]
    NoLength(String),
    #[error("prefix {0:?}: {1:?} is no IPv4 address")]
    Address(String, String),
    #[error("prefix {0:?}: {1:?} is no prefix length (0 to 32)")]
    Length(String, String),
}

impl Prefix {
    pub const fn new(addr: Ipv4Addr, len: u8) -> Prefix {
        Prefix { addr, len }
    }

    /// One address.
    pub const fn host(addr: Ipv4Addr) -> Prefix {
        Prefix { addr, len: 32 }
    }

    /// The network mask; lengths over 32 are taken as 32.
    pub const fn mask(self) -> u32 {
        mask(self.len)
    }

    /// The first address (host bits cleared), as a number.
    pub const fn network(self) -> u32 {
        self.addr.to_bits() & self.mask()
    }

    pub const fn contains(self, addr: u32) -> bool {
        addr & self.mask() == self.network()
    }

    pub fn problems(&self) -> Vec<String> {
        prefix_problem("prefix", *self).into_iter().collect()
    }

    /// Whether `inner` lies inside this prefix and is smaller than it.
    pub const fn strictly_contains(self, inner: Prefix) -> bool {
        inner.len > self.len && self.contains(inner.network())
    }
}

/// The network mask of a prefix length; over 32 counts as 32.
pub(crate) const fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        l if l >= 32 => u32::MAX,
        l => u32::MAX << (32 - l as u32),
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;
    fn from_str(s: &str) -> Result<Prefix, PrefixError> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| PrefixError::NoLength(s.into()))?;
        let addr = a
            .parse()
            .map_err(|_| PrefixError::Address(s.into(), a.into()))?;
        // Any u8 parses: a length over 32 is a problem `problems()` names, not a syntax error.
        let len = l
            .parse()
            .map_err(|_| PrefixError::Length(s.into(), l.into()))?;
        Ok(Prefix { addr, len })
    }
}

impl TryFrom<String> for Prefix {
    type Error = PrefixError;
    fn try_from(s: String) -> Result<Prefix, PrefixError> {
        s.parse()
    }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.to_string()
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn prefix_problem(what: &str, p: Prefix) -> Option<String> {
    (p.len > 32).then(|| format!("{what} {p}: prefix length {} is over 32", p.len))
}

/// A protocol a port match names. ICMP is Calico's addition: it has no ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
    Icmp,
}

impl Protocol {
    /// The IP protocol number a flow carries.
    pub const fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Sctp => 132,
            Protocol::Icmp => 1,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
            Protocol::Icmp => "icmp",
        }
    }
}

/// Destination ports `first..=last` (Kubernetes' `port` and `endPort`; one port is
/// `first == last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub const fn one(port: u16) -> PortRange {
        PortRange {
            first: port,
            last: port,
        }
    }

    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.first == 0 {
            p.push("port 0: ports run from 1 to 65535".into());
        }
        if self.first > self.last {
            p.push(format!(
                "ports {}-{}: the first is after the last (end-port must be at least port)",
                self.first, self.last
            ));
        }
        p
    }
}

/// One protocol, and for TCP, UDP and SCTP a range of destination ports (`None`: every port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PortMatch {
    pub protocol: Protocol,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<PortRange>,
}

impl PortMatch {
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let Some(r) = self.port else { return p };
        if self.protocol == Protocol::Icmp {
            p.push(format!(
                "icmp with ports {}-{}: icmp has no ports",
                r.first, r.last
            ));
        }
        p.extend(r.problems());
        p
    }
}

/// Whom a rule lets in (ingress) or out to (egress).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Peer {
    /// Kubernetes' `ipBlock`: the addresses of `prefix` but those of `except`.
    Cidr {
        prefix: Prefix,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        except: Vec<Prefix>,
    },
    /// A named address set ([`crate::Sets`]): the pods a selector picks, kept by the control
    /// plane apart from the policies.
    Set(String),
}

impl Peer {
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        match self {
            Peer::Cidr { prefix, except } => {
                p.extend(prefix_problem("cidr", *prefix));
                for e in except {
                    if let Some(bad) = prefix_problem("except", *e) {
                        p.push(bad);
                    } else if prefix.len <= 32 && !prefix.strictly_contains(*e) {
                        p.push(format!(
                            "except {e} is not strictly inside cidr {prefix}: an except must \
                             name part of the cidr"
                        ));
                    }
                }
            }
            Peer::Set(name) if name.trim().is_empty() => {
                p.push("address set with an empty name".into());
            }
            Peer::Set(_) => {}
        }
        p
    }
}

/// One allow rule: a flow matches if its peer matches one of `peers` (or `peers` is empty:
/// any peer) and its protocol and port one of `ports` (or `ports` is empty: anything).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Rule {
    #[serde(default)]
    pub peers: Vec<Peer>,
    #[serde(default)]
    pub ports: Vec<PortMatch>,
}

impl Rule {
    pub fn problems(&self) -> Vec<String> {
        let peers = self.peers.iter().flat_map(Peer::problems);
        peers
            .chain(self.ports.iter().flat_map(PortMatch::problems))
            .collect()
    }
}

/// A network policy. `None` for a direction: the policy says nothing about it;
/// `Some(vec![])`: it isolates that direction and allows nothing (Kubernetes' `policyTypes`
/// naming a direction with no rules).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Policy {
    /// Unique among the policies the control plane holds; `namespace/name` by convention.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<Rule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<Rule>>,
}

impl Policy {
    /// What is wrong, each problem naming the rule it is in (`ingress rule 2`, counted from 0
    /// as the list is).
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if let Some(bad) = name_problem("policy", &self.name) {
            p.push(bad);
        }
        let dirs = [("ingress", &self.ingress), ("egress", &self.egress)];
        for (dir, rules) in dirs {
            for (i, rule) in rules.iter().flatten().enumerate() {
                for bad in rule.problems() {
                    p.push(format!("{} {dir} rule {i}: {bad}", self.name));
                }
            }
        }
        p
    }
}

/// A named address set as the control plane states it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SetSpec {
    pub name: String,
    #[serde(default)]
    pub members: Vec<Prefix>,
}

impl SetSpec {
    pub fn problems(&self) -> Vec<String> {
        let mut p: Vec<String> = name_problem("address set", &self.name)
            .into_iter()
            .collect();
        for m in &self.members {
            if let Some(bad) = prefix_problem("member", *m) {
                p.push(format!("address set {}: {bad}", self.name));
            }
        }
        p
    }
}

fn name_problem(what: &str, name: &str) -> Option<String> {
    let bad = name.is_empty() || name.len() > 253 || name.contains(char::is_whitespace);
    bad.then(|| format!("{what} name {name:?} must be 1 to 253 characters without spaces"))
}

/// Everything wrong with a whole state: each policy's and set's problems, and names given
/// twice (a policy's name keys its counters, a set's name is how rules find it).
pub fn problems(policies: &[Policy], sets: &[SetSpec]) -> Vec<String> {
    let mut p: Vec<String> = policies.iter().flat_map(Policy::problems).collect();
    p.extend(sets.iter().flat_map(SetSpec::problems));
    p.extend(twice("policy", policies.iter().map(|x| x.name.as_str())));
    p.extend(twice("address set", sets.iter().map(|x| x.name.as_str())));
    p
}

fn twice<'a>(what: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut dup: Vec<&str> = names.filter(|n| !seen.insert(*n)).collect();
    dup.sort_unstable();
    dup.dedup();
    dup.iter()
        .map(|n| format!("{what} {n:?} is given twice"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pfx(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_parse_and_print() {
        let p = pfx("10.1.2.3/16");
        assert_eq!(p.to_string(), "10.1.2.3/16");
        assert_eq!(Ipv4Addr::from(p.network()), Ipv4Addr::new(10, 1, 0, 0));
        assert_eq!(pfx("0.0.0.0/0").mask(), 0);
        assert_eq!(pfx("1.2.3.4/40").mask(), u32::MAX, "over 32 counts as 32");
        for bad in ["10.0.0.0", "10.0.0/8", "10.0.0.0/x", "10.0.0.0/256"] {
            let e = bad.parse::<Prefix>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
        assert!(pfx("10.0.0.0/8").strictly_contains(pfx("10.9.0.0/16")));
        assert!(!pfx("10.0.0.0/8").strictly_contains(pfx("10.0.0.0/8")));
        assert!(!pfx("10.0.0.0/8").strictly_contains(pfx("11.0.0.0/16")));
    }

    /// The wire form: kebab-case keys, prefixes as text, absent directions stay absent.
    #[test]
    fn policies_read_as_written() {
        let text = r#"{
            "name": "default/web-allow",
            "ingress": [
                {"peers": [{"cidr": {"prefix": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                           {"set": "default/app=web"}],
                 "ports": [{"protocol": "tcp", "port": {"first": 8000, "last": 8080}},
                           {"protocol": "icmp"}]},
                {}
            ],
            "egress": []
        }"#;
        let p: Policy = serde_json::from_str(text).unwrap();
        assert!(p.problems().is_empty(), "{:?}", p.problems());
        let rules = p.ingress.as_ref().unwrap();
        assert_eq!(rules[1], Rule::default());
        assert_eq!(rules[0].ports[1].port, None);
        assert_eq!(p.egress, Some(vec![]));
        let back: Policy = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        let none: Policy = serde_json::from_str(r#"{"name": "x", "egress": []}"#).unwrap();
        assert_eq!(none.ingress, None);
        assert!(serde_json::from_str::<Prefix>(r#""10.0.0.0""#).is_err());
    }

    #[test]
    fn problems_are_named() {
        let bad = Policy {
            name: "default/bad".into(),
            ingress: Some(vec![Rule {
                peers: vec![
                    Peer::Cidr {
                        prefix: pfx("10.0.0.0/33"),
                        except: vec![],
                    },
                    Peer::Cidr {
                        prefix: pfx("10.0.0.0/16"),
                        except: vec![pfx("10.1.0.0/24"), pfx("10.0.0.0/16"), pfx("10.0.1.0/40")],
                    },
                    Peer::Set(String::new()),
                ],
                ports: vec![],
            }]),
            egress: Some(vec![
                Rule::default(),
                Rule {
                    peers: vec![],
                    ports: vec![
                        PortMatch {
                            protocol: Protocol::Tcp,
                            port: Some(PortRange {
                                first: 90,
                                last: 80,
                            }),
                        },
                        PortMatch {
                            protocol: Protocol::Icmp,
                            port: Some(PortRange::one(8)),
                        },
                        PortMatch {
                            protocol: Protocol::Udp,
                            port: Some(PortRange::one(0)),
                        },
                    ],
                },
            ]),
        };
        let p = bad.problems().join("\n");
        for want in [
            "ingress rule 0: cidr 10.0.0.0/33: prefix length 33 is over 32",
            "except 10.1.0.0/24 is not strictly inside cidr 10.0.0.0/16",
            "except 10.0.0.0/16 is not strictly inside",
            "except 10.0.1.0/40: prefix length 40",
            "empty name",
            "egress rule 1: ports 90-80: the first is after the last",
            "icmp has no ports",
            "port 0",
        ] {
            assert!(p.contains(want), "{want}:\n{p}");
        }
        assert_eq!(bad.problems().len(), 8, "{p}");

        let ok = Policy {
            name: "a".into(),
            ..Policy::default()
        };
        let set = SetSpec {
            name: "s".into(),
            members: vec![pfx("10.0.0.1/32"), pfx("10.0.0.0/64")],
        };
        let all = problems(&[ok.clone(), ok], &[set.clone(), set]).join("\n");
        for want in [
            "policy \"a\" is given twice",
            "address set \"s\" is given twice",
            "address set s: member 10.0.0.0/64: prefix length 64",
        ] {
            assert!(all.contains(want), "{want}:\n{all}");
        }
        assert!(name_problem("policy", "").is_some() && name_problem("policy", "a b").is_some());
    }
}
