//! Kubernetes NetworkPolicy for one pod interface at a time.
//!
//! `policy` owns the policy specification (the serde types the control plane states policies
//! and address sets in, and `problems()` naming what is wrong with them), the named address
//! sets ([`Sets`], [`AddressSet`]), the compiled form of the policies applied to one interface
//! ([`Compiled`]) and its evaluation of a new flow ([`Compiled::evaluate`]), and the per-rule
//! hit counters that survive rebuilds. It never decides which pods a policy applies to (the
//! caller resolves selectors: it hands `build` one interface's policies and keeps the pods a
//! selector names as an address set), never touches packets or sessions (the caller passes
//! the peer address, protocol and port of a new flow, and caches the verdict in its session),
//! and never allocates, locks or scans a set's members on evaluation: its cost depends on
//! the number of rules and of distinct prefix lengths, not on how many addresses a set holds.
//!
//! # Semantics (NetworkPolicy v1, after selectors)
//!
//! - An interface is *isolated* in a direction if one of its policies covers that direction
//!   (`Some` rules, even none). Not isolated: every flow passes ([`Verdict::NotIsolated`]).
//! - Isolated: a flow passes iff some rule of some policy covering that direction matches
//!   ([`Verdict::Allowed`], the first in policy then rule order), else [`Verdict::Denied`].
//!   Policies only add what they allow; order matters only for which rule gets the hit.
//! - A rule matches if its peers are empty or one matches, and its ports are empty or one
//!   matches. A peer is an `ipBlock` (`cidr` with `except`) or a named address set; a set
//!   that does not exist matches nothing (and `build` warns of it). A port match is TCP,
//!   UDP or SCTP with an optional range (`port`..=`endPort`), or ICMP (Calico's), which has
//!   no ports.
//! - Ingress: the peer is the packet's source; egress: its destination; the port is the
//!   destination port either way.
//!
//! # Modules
//!
//! [`spec`] the stated form and its checks; [`sets`] membership; `compile` the per-interface
//! form; `eval` evaluation; `counters` hit counters and their names.

#![forbid(unsafe_code)]

mod compile;
mod counters;
mod eval;
pub mod sets;
pub mod spec;

pub use compile::{Compiled, Direction, RuleRef, Verdict};
pub use sets::{AddressSet, Sets};
pub use spec::{
    Peer, Policy, PortMatch, PortRange, Prefix, PrefixError, Protocol, Rule, SetSpec, problems,
};

#[cfg(test)]
mod tests;
