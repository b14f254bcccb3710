//! The scenarios `veclane bench` runs, and the point where new ones plug in.
//!
//! Two kinds:
//! - *continuous*: the receive rate at full load, trial after trial (`p2p`, one memif from
//!   a generator to a receiver; [`crate::p2p`]);
//! - *searched*: a device under test sits between the generator's two memif interfaces, and
//!   every search, latency trial, trial guard, counter check, worker count and report of
//!   [`crate::harness`] runs on it. What one searched scenario does differently from another is
//!   its [`Topology`]: how each DUT is configured and started, how the generator connects and
//!   what it sends, and which of the DUT's counters face the generator. `l3fwd` (two
//!   interfaces, one route between them; [`crate::l3fwd::TOPOLOGY`]) is the first.
//!
//! A new searched scenario is a [`Topology`] and a line in [`registry`]; the command line,
//! the searches, the JSON, CSV and plots follow. `singlenet` and `multinet` ([`crate::node`])
//! are the seeds' node switch: the generator as the remote node on an uplink and as every
//! network's pod, and (multinet) each DUT measured in both shapes, interleaved.

use crate::harness::Topology;

/// How a scenario measures.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Receive rate at full load ([`crate::p2p`]).
    Continuous,
    /// Searches through a DUT ([`crate::harness`]) on this topology.
    Searched(&'static dyn Topology),
    /// Ordinary programs in two pods ([`crate::pods`]).
    Pods,
}

/// A scenario `veclane bench` knows.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    pub kind: Kind,
}

/// Every scenario, in the order `--help` lists them.
pub fn registry() -> Vec<Scenario> {
    let searched = |t: &'static dyn Topology| Scenario {
        name: t.name(),
        about: t.about(),
        kind: Kind::Searched(t),
    };
    vec![
        Scenario {
            name: "p2p",
            about: "One memif: generator (secondary) → receiver (primary), continuous throughput",
            kind: Kind::Continuous,
        },
        searched(&crate::l3fwd::TOPOLOGY),
        searched(&crate::node::SINGLENET),
        searched(&crate::node::MULTINET),
        searched(&crate::pvp::PVP),
        Scenario {
            name: "pods",
            about: "Two pods on one node, through veclane's tap and the kernel's veth path: \
                    iperf3 TCP and UDP, request/response latency, CPU used",
            kind: Kind::Pods,
        },
    ]
}

/// The scenario called `name`, or an error that lists the known ones.
pub fn find(name: &str) -> Result<Scenario, UnknownScenario> {
    let all = registry();
    all.iter()
        .find(|s| s.name == name)
        .copied()
        .ok_or_else(|| UnknownScenario {
            name: name.to_string(),
            known: all.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
        })
}

/// A scenario name `veclane bench` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no scenario {name:?}; known: {known}")]
pub struct UnknownScenario {
    pub name: String,
    pub known: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dut;

    #[test]
    fn scenarios_are_found_by_name_and_unknown_ones_listed() {
        assert!(matches!(find("p2p").unwrap().kind, Kind::Continuous));
        let l3 = find("l3fwd").unwrap();
        let Kind::Searched(t) = l3.kind else {
            panic!("l3fwd is searched")
        };
        assert_eq!(t.name(), "l3fwd");
        assert!(t.supports(Dut::Testpmd) && t.supports(Dut::Vpp));
        let e = find("pvv").unwrap_err().to_string();
        assert!(
            e.contains("known: p2p, l3fwd, singlenet, multinet, pvp"),
            "{e}"
        );
        let Kind::Searched(m) = find("multinet").unwrap().kind else {
            panic!("multinet is searched")
        };
        assert!(m.supports(Dut::Veclane) && m.supports(Dut::Testpmd) && m.supports(Dut::Vpp));
        assert!(!m.supports(Dut::DpdkL3fwd));
        // VPP is a node in both shapes.
        assert!(m.supports_shape(Dut::Vpp, crate::Shape::Multinet));
        assert_eq!(m.shapes().len(), 2);
        // testpmd forwards port to port: the singlenet ceiling, never multinet.
        assert!(m.supports_shape(Dut::Testpmd, crate::Shape::Singlenet));
        assert!(!m.supports_shape(Dut::Testpmd, crate::Shape::Multinet));
        let names: Vec<&str> = registry().iter().map(|s| s.name).collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(names, unique);
    }
}
