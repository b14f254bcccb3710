//! A scenario's plan at one frame size: the rings, buffers and CPUs its DUTs and its
//! generator are configured with, resolved once per (run, size) and handed to
//! [`Topology::start_dut`](super::Topology::start_dut) and
//! [`Topology::gen_config`](super::Topology::gen_config), so that both sides of a trial read
//! the same numbers instead of each recomputing them from the run's configuration.

use super::L3fwdConfig;

/// What a trial at one frame size is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The frame size (or [`crate::trial::IMIX`]).
    pub size: usize,
    /// log2 of every memif ring's slots (`L3fwdConfig::ring_log2_at`).
    pub ring_log2: u8,
    /// Buffer bytes for a frame of `size`.
    pub buffer_size: u32,
    /// Buffer bytes for a frame of `size` in VXLAN (the node scenarios' and pvp's
    /// interfaces: their uplink carries 50 more bytes).
    pub tunnel_buffer_size: u32,
    /// The generator's CPU (also the DUTs' main threads').
    pub gen_cpu: usize,
    /// The DUT's worker CPUs, the first `workers` of them used ([`Plan::worker_cpus`]).
    pub dut_cpus: Vec<usize>,
}

impl Plan {
    /// `cfg`'s plan at frame size `size`.
    pub fn new(cfg: &L3fwdConfig, size: usize) -> Plan {
        Plan {
            size,
            ring_log2: cfg.ring_log2_at(size),
            buffer_size: super::config::buffer_size_for(cfg, size),
            tunnel_buffer_size: crate::trial::buffer_size_for(
                cfg.buffer_size,
                size + trafgen::frame::VXLAN_OVERHEAD,
            ),
            gen_cpu: cfg.gen_cpu,
            dut_cpus: cfg.dut_cpus.clone(),
        }
    }

    /// Every size of `cfg`'s run, planned once, in `cfg.sizes`' order.
    pub fn all(cfg: &L3fwdConfig) -> Vec<Plan> {
        cfg.sizes.iter().map(|&s| Plan::new(cfg, s)).collect()
    }

    /// Slots of every memif ring.
    pub fn ring_size(&self) -> u32 {
        1 << self.ring_log2
    }

    /// The CPUs of a DUT with `workers` workers.
    pub fn worker_cpus(&self, workers: u16) -> &[usize] {
        &self.dut_cpus[..usize::from(workers).min(self.dut_cpus.len())]
    }

    /// The first DUT CPU (the generator's when there is none).
    pub fn dut_cpu(&self) -> usize {
        self.dut_cpus.first().copied().unwrap_or(self.gen_cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::IMIX;
    use crate::{Dut, Subject};

    /// The plan holds what the per-call functions it replaces gave, for `make bench`'s sizes
    /// and IMIX, in every scenario (each keeps its own number of rings busy).
    #[test]
    fn a_plan_equals_the_per_call_numbers() {
        let sizes = [64, 128, 256, 512, 1024, 1280, 1500, 9000, IMIX];
        let searched = crate::scenario::registry()
            .into_iter()
            .filter_map(|s| match s.kind {
                crate::scenario::Kind::Searched(t) => Some(t),
                crate::scenario::Kind::Continuous | crate::scenario::Kind::Pods => None,
            });
        for topology in searched {
            let mut c = super::super::test_config(vec![Subject::plain(Dut::Veclane)]);
            c.topology = topology;
            c.sizes = sizes.to_vec();
            c.dut_cpus = vec![1, 2];
            let plans = Plan::all(&c);
            for (p, &size) in plans.iter().zip(&sizes) {
                assert_eq!(p.size, size);
                assert_eq!(p.ring_log2, c.ring_log2_at(size), "{size}");
                assert_eq!(p.ring_size(), 1 << c.ring_log2_at(size));
                assert_eq!(
                    p.buffer_size,
                    super::super::config::buffer_size_for(&c, size)
                );
                // What the node scenarios' and pvp's `buffer_size(cfg, size)` gave.
                let tunnel = crate::trial::buffer_size_for(
                    c.buffer_size,
                    size + trafgen::frame::VXLAN_OVERHEAD,
                );
                assert_eq!(p.tunnel_buffer_size, tunnel);
                assert_eq!(p.dut_cpu(), c.dut_cpu());
                for w in [1, 2, 3] {
                    assert_eq!(p.worker_cpus(w), c.worker_cpus(w));
                }
                assert_eq!(p.gen_cpu, c.gen_cpu);
            }
        }
    }
}
