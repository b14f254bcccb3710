//! Benchmark scenarios.
//!
//! `bench` owns the scenarios (`p2p`: one memif, generator → receiver; `l3fwd`: generator →
//! memif → device under test → memif → the same generator), the drivers that start each
//! device under test as its own process pinned to its own core (veclane's `gen` and `run`,
//! DPDK `dpdk-testpmd` and the `l3fwd` example, VPP), the interleaving of trials (A B A B
//! ...) and the reports. Rates are always measured by the receiving side over its own clock,
//! never inferred from what was offered. It never parses command lines (the `veclane` front
//! end does).

#![forbid(unsafe_code)]

pub mod cost;
pub mod csv;
pub mod daemon;
pub mod dpdk;
pub mod dpdk_l3fwd;
pub mod dut;
pub mod harness;
pub mod l3fwd;
pub mod node;
pub mod p2p;
pub mod placement;
pub mod plot;
pub mod pods;
pub mod proc;
pub mod pvp;
pub mod reflect;
pub mod report;
pub mod scenario;
mod sched;
pub mod search;
pub mod seed;
pub mod stateful;
pub mod testpmd;
pub mod trial;
pub mod underlay;
pub mod vpp;

use std::path::PathBuf;

/// Which implementation a trial measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dut {
    Veclane,
    Testpmd,
    /// DPDK's l3fwd example, LPM mode (l3fwd scenario only).
    DpdkL3fwd,
    /// VPP, when the user has it (l3fwd, the node scenarios, the pvp pod).
    Vpp,
    /// No DUT: a memif master that only hands frames from one interface to the other
    /// ([`reflect`]), the generator's ceiling (l3fwd only).
    None,
}

impl core::fmt::Display for Dut {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Dut::Veclane => "veclane",
            Dut::Testpmd => "testpmd",
            Dut::DpdkL3fwd => "dpdk-l3fwd",
            Dut::Vpp => "vpp",
            Dut::None => "none",
        })
    }
}

/// veclane's forwarding path between two memif interfaces (`[daemon] copy`).
pub use api::CopyMode;

/// The shape of a node-switch trial (the `singlenet` and `multinet` scenarios,
/// [`crate::node`]): pod traffic routed in the default table, or carried in VXLAN with each
/// network's VNI and routed in the network's VRF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    Singlenet,
    Multinet,
}

impl core::fmt::Display for Shape {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Shape::Singlenet => "singlenet",
            Shape::Multinet => "multinet",
        })
    }
}

/// One column of a result table: a DUT, its copy mode where it has one, how many forwarding
/// workers (cores) it runs, and the shape of the trial where the scenario has several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Subject {
    pub dut: Dut,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy: Option<CopyMode>,
    /// What executes veclane's payload copies (`[daemon] copy-engine`); none: the CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<api::CopyEngine>,
    /// Forwarding workers, each on a CPU of its own and polling one queue pair of each
    /// interface (l3fwd); 1 everywhere else.
    pub workers: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
}

impl Subject {
    /// `dut` with one worker and no copy mode.
    pub fn plain(dut: Dut) -> Subject {
        Subject {
            dut,
            copy: None,
            engine: None,
            workers: 1,
            shape: None,
        }
    }

    /// The same DUT in `shape`.
    pub fn in_shape(self, shape: Shape) -> Subject {
        Subject {
            shape: Some(shape),
            ..self
        }
    }

    /// The same DUT with `n` workers.
    pub fn with_workers(self, n: u16) -> Subject {
        Subject { workers: n, ..self }
    }

    /// The same DUT with one worker: what the worker-count plot draws one line for.
    pub fn line(self) -> Subject {
        self.with_workers(1)
    }
}

impl core::fmt::Display for Subject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.copy {
            Some(c) => write!(f, "{}/{c}", self.dut)?,
            None => write!(f, "{}", self.dut)?,
        }
        // The CPU is the default engine and goes unsaid.
        if let Some(e) = self.engine.filter(|&e| e != api::CopyEngine::Cpu) {
            write!(f, "/{e}")?;
        }
        if self.workers != 1 {
            write!(f, " x{}", self.workers)?;
        }
        if let Some(s) = self.shape {
            write!(f, " {s}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Setup(String),
    #[error("{dut} trial at {size} B failed: {msg}")]
    Trial {
        dut: Subject,
        size: usize,
        msg: String,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Where the `veclane` binary is (the running one, normally).
pub fn veclane_bin() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("veclane"))
}

/// Median, min and max of a non-empty sample.
pub fn median_min_max(v: &[f64]) -> (f64, f64, f64) {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let m = if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    (m, s[0], s[s.len() - 1])
}

#[cfg(test)]
mod tests {
    #[test]
    fn subjects_name_their_copy_engine_shape_and_workers() {
        use super::{Dut, Shape, Subject};
        let v = Subject {
            copy: Some(api::CopyMode::Single),
            engine: Some(api::CopyEngine::Thread),
            ..Subject::plain(Dut::Veclane)
        };
        assert_eq!(v.to_string(), "veclane/single/thread");
        let cpu = Subject {
            engine: Some(api::CopyEngine::Cpu),
            ..v
        };
        assert_eq!(cpu.to_string(), "veclane/single");
        assert_eq!(
            v.with_workers(2).in_shape(Shape::Multinet).to_string(),
            "veclane/single/thread x2 multinet"
        );
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(super::median_min_max(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(
            super::median_min_max(&[4.0, 1.0, 2.0, 3.0]),
            (2.5, 1.0, 4.0)
        );
        assert_eq!(super::median_min_max(&[]), (0.0, 0.0, 0.0));
    }

    #[test]
    fn trials_with_the_wrong_frame_size_are_refused() {
        use crate::trial::check_frame_size;
        assert!(check_frame_size(64 * 1000, 1000, 64).is_ok());
        assert!(check_frame_size(9000 * 10, 10, 9000).is_ok());
        // testpmd falling back to 64-byte frames when asked for 9000
        assert!(
            check_frame_size(64 * 1000, 1000, 9000)
                .unwrap_err()
                .to_string()
                .contains("average 64.0 B")
        );
        assert!(check_frame_size(0, 0, 64).is_err());
    }
}
