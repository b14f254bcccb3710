//! `l3fwd`: generator → memif → device under test → memif → generator, the first searched
//! scenario: two memif interfaces and one route between them. The harness that searches it
//! (and every other scenario) is [`crate::harness`].
//!
//! The generator is a zero-copy memif secondary in this process, on a thread pinned to the
//! generator CPU, that sends on interface id 0 and receives on id 1 in one loop. The DUT
//! listens on one socket with both interfaces and has the other CPU to itself:
//! - veclane: `veclane run`, one polling worker, routing 10.10.1.0/24 (id 0) to 10.10.2.0/24
//!   (id 1) through a static neighbour: ethernet-input, which makes ip4-input's checks
//!   (checksum, length, TTL), ip4-lookup's lookup and ip4-rewrite's work (TTL, checksum,
//!   MACs) itself; copy mode single or two.
//! - testpmd: `dpdk-testpmd --forward-mode=io` between two `net_memif` server ports: no lookup
//!   and no header change at all (or `mac`: MACs rewritten, still no lookup).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::dut::{DutError, Running};
use crate::harness::{DutStart, L3fwdConfig, Plan, Topology};
use crate::testpmd::{MemifPort, Testpmd};
use crate::{CopyMode, Dut, Subject};

/// `l3fwd`'s options in a run's configuration ([`crate::harness::L3fwdConfig`] flattens them
/// into its own keys, so a report names them as it always has).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct L3fwdOptions {
    /// testpmd's forwarding (`--testpmd-fwd`).
    pub testpmd_fwd: TestpmdFwd,
    /// veclane balances the generator's flows through a service (`--service`): its VIP is
    /// the generator's destination, its one backend another address behind the sink's port.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub service: bool,
    /// veclane judges the flows by this many policy rules on the receiving interface
    /// (`--policy-rules`): the last allows them, the others never match.
    #[serde(skip_serializing_if = "is_zero")]
    pub policy_rules: u32,
    /// With `service`: every frame a flow the DUT no longer knows (`--new-flows`; see
    /// [`crate::stateful`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub new_flows: bool,
    /// With `service` (not `new_flows`): this many established flows, the generator's
    /// source ports in turn (`--service-flows`; 0 and 1 are one flow).
    #[serde(skip_serializing_if = "one_or_none")]
    pub service_flows: u16,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn one_or_none(n: &u16) -> bool {
    *n <= 1
}

/// testpmd's forwarding mode in the l3fwd scenario: `io` (frames untouched) or `mac` (source
/// and destination MACs rewritten, the destination being the generator's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TestpmdFwd {
    #[default]
    Io,
    Mac,
}

/// The `l3fwd` topology: two memif interfaces, 10.10.1.0/24 on id 0 and 10.10.2.0/24 on id 1,
/// the generator's frames (10.10.1.2 → 10.10.2.2) routed from one to the other.
#[derive(Debug)]
pub struct L3fwdTopology;

/// The one `l3fwd` topology.
pub static TOPOLOGY: L3fwdTopology = L3fwdTopology;

impl Topology for L3fwdTopology {
    fn name(&self) -> &'static str {
        "l3fwd"
    }

    fn about(&self) -> &'static str {
        "Generator → memif → DUT (routes between two memif interfaces) → memif → generator"
    }

    fn supports(&self, _dut: Dut) -> bool {
        true
    }

    fn describe(&self) -> String {
        "the generator sends on memif id 0 and receives on id 1; veclane/single and veclane/two: polling workers, ethernet-input making ip4-input's checks, the lookup and the rewrite (TTL, checksum, MACs) itself; payload copied once peer to peer (single) or into local buffers and out (two); testpmd: --forward-mode=io (no lookup, no header change) or mac (MACs rewritten, no lookup); dpdk-l3fwd: DPDK's l3fwd example, LPM, an lcore per worker, no IPv4 checksum check (left to hardware that net_memif lacks); vpp: workers, memif masters, ip4 routes as veclane's".into()
    }

    fn start_dut(&self, s: &DutStart<'_>) -> Result<(Running, PathBuf), DutError> {
        start_dut(s)
    }

    fn gen_config(
        &self,
        cfg: &L3fwdConfig,
        dut: Subject,
        sock: &Path,
        plan: &Plan,
    ) -> trafgen::GenConfig {
        gen_config(cfg, sock, plan, dut.workers)
    }
}

/// The generator's configuration for `plan` against a DUT with `workers` workers
/// listening on `sock`: a queue pair per worker on both interfaces, sent to in turn, a burst
/// at a time.
pub(crate) fn gen_config(
    cfg: &L3fwdConfig,
    sock: &Path,
    plan: &Plan,
    workers: u16,
) -> trafgen::GenConfig {
    let iface = |id: u32| memif::InterfaceConfig {
        id,
        name: format!("gen{id}"),
        log2_ring_size: plan.ring_log2,
        buffer_size: plan.buffer_size,
        s2m_rings: workers,
        m2s_rings: workers,
        ..Default::default()
    };
    trafgen::GenConfig {
        role: trafgen::Role::Secondary,
        socket: memif::SocketPath::File(sock.to_path_buf()),
        iface: iface(0),
        rx_iface: Some(iface(1)),
        spec: {
            let (size, mix) = crate::trial::frame_spec_size(plan.size);
            let mut spec = trafgen::FrameSpec {
                size,
                mix,
                ..Default::default()
            };
            crate::stateful::frames(&mut spec, &cfg.l3fwd);
            spec
        },
        burst: cfg.burst,
        // Frames still in the DUT when sending stops come back within microseconds.
        drain: Duration::from_millis(50),
        warmup: Duration::from_secs_f64(cfg.warmup_secs),
        cpu: Some(plan.gen_cpu),
        ..Default::default()
    }
}

/// Starts the DUT `s` names, under its wrapper if not empty (veclane and testpmd only);
/// returns it and the memif socket it listens on (in `dir` for the DUTs that take a
/// directory).
pub(crate) fn start_dut(s: &DutStart<'_>) -> Result<(Running, PathBuf), DutError> {
    let (cfg, dut, plan, dir, wrapper) = (s.cfg, s.dut, s.plan, s.dir, s.wrapper);
    let sock = dir.join("memif.sock");
    if !wrapper.is_empty() && dut.dut == Dut::Vpp {
        return Err(DutError::Unsupported(crate::vpp::NO_COST.into()));
    }
    if !wrapper.is_empty() && !matches!(dut.dut, Dut::Veclane | Dut::Testpmd) {
        return Err(DutError::Unsupported(format!(
            "{dut} cannot run under {}",
            wrapper.join(" ")
        )));
    }
    match dut.dut {
        Dut::Veclane => {
            let conf = veclane_config(cfg, dut.copy.unwrap_or(CopyMode::Single), plan, dut.workers);
            s.veclane(conf, dir, vec![])
                .map(|d| (Box::new(d) as Running, sock))
        }
        Dut::None => {
            let r = crate::reflect::spawn(&sock, plan.ring_log2, plan.buffer_size, plan.dut_cpu())?;
            Ok((Box::new(r) as Running, sock))
        }
        Dut::DpdkL3fwd => {
            let bin = cfg.l3fwd_bin.clone().ok_or_else(|| {
                DutError::Missing(
                    "dpdk-l3fwd is not built (scripts/build-dpdk-l3fwd.sh, run by scripts/setup.sh)"
                        .into(),
                )
            })?;
            let l = crate::dpdk_l3fwd::spawn(
                &bin,
                &crate::dpdk_l3fwd::DpdkL3fwdConfig {
                    ring_log2: plan.ring_log2,
                    buffer_size: plan.buffer_size,
                    cpus: plan.worker_cpus(dut.workers).to_vec(),
                    ..crate::dpdk_l3fwd::DpdkL3fwdConfig::new(plan.dut_cpu())
                },
            )?;
            let sock = l.memif_socket();
            Ok((Box::new(l) as Running, sock))
        }
        Dut::Vpp => {
            let mut vc = crate::vpp::VppConfig {
                ring_log2: plan.ring_log2,
                buffer_size: plan.buffer_size,
                workers: plan.worker_cpus(dut.workers).to_vec(),
                ..crate::vpp::VppConfig::new(plan.gen_cpu, plan.dut_cpu())
            };
            let sink = trafgen::FrameSpec::default().src_mac.0;
            crate::stateful::vpp(&mut vc.topology, &cfg.l3fwd, sink);
            let v = crate::vpp::spawn(&cfg.vpp_bin_or_missing()?, None, &vc)?;
            let sock = v.memif_socket();
            Ok((Box::new(v) as Running, sock))
        }
        Dut::Testpmd => {
            let bin = cfg.testpmd_bin_or_missing()?;
            let port = |id| MemifPort::new(true, &sock, id, plan.ring_log2, plan.buffer_size);
            // A queue pair per forwarding lcore on both ports; io and mac forwarding map rx
            // queue q of one port to tx queue q of the other.
            let n = dut.workers;
            let mut app = vec![
                format!("--nb-cores={n}"),
                format!("--rxq={n}"),
                format!("--txq={n}"),
            ];
            app.extend(match cfg.l3fwd.testpmd_fwd {
                TestpmdFwd::Io => vec!["--forward-mode=io".to_string()],
                // Frames leave port 1 addressed to the generator, as veclane's do.
                TestpmdFwd::Mac => vec![
                    "--forward-mode=mac".to_string(),
                    format!(
                        "--eth-peer=1,{}",
                        trafgen::FrameSpec::default()
                            .src_mac
                            .0
                            .map(|b| format!("{b:02x}"))
                            .join(":")
                    ),
                ],
            });
            if plan.size > 2048 {
                app.push(format!(
                    "--mbuf-size={}",
                    (plan.size + 1024).next_multiple_of(1024)
                ));
            }
            // Forwarding starts once the generator is connected (`start_when_ready`).
            let tp = Testpmd::spawn_under(
                wrapper,
                &bin,
                &crate::proc::instance_tag("fwd"),
                plan.worker_cpus(dut.workers),
                cfg.gen_cpu,
                &[port(0), port(1)],
                &app,
            )?
            .start_when_ready(2);
            Ok((Box::new(tp) as Running, sock))
        }
    }
}

/// The daemon configuration a veclane trial runs: the embedded default's topology (the
/// same interfaces, addresses and neighbour), a polling worker on each of the DUT's first
/// `workers` CPUs, rings and buffers sized for the trial. The daemon hands worker `i` rx
/// queue `i` of both interfaces and transmits from it on queue `i`.
pub fn veclane_config(cfg: &L3fwdConfig, copy: CopyMode, plan: &Plan, workers: u16) -> api::Config {
    let mut c = api::Config::embedded_default();
    c.daemon.workers = plan.worker_cpus(workers).to_vec();
    c.daemon.main_core = Some(plan.gen_cpu);
    c.daemon.mode = cfg.veclane_rx_mode();
    c.daemon.copy = copy;
    c.daemon.copy_engine = api::CopyEngine::Cpu;
    for i in &mut c.interface {
        i.ring_size = Some(plan.ring_size());
        i.buffer_size = Some(plan.buffer_size);
    }
    crate::stateful::veclane(&mut c, &cfg.l3fwd);
    c
}
