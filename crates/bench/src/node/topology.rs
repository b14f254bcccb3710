//! How a node scenario runs a trial: which DUTs it takes, starting one, what the generator
//! plays, and reading what the generator received.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::dut::{remote_pods_on_tunnels, veclane_config, vpp_topology};
use super::frames::{pod_spec, uplink_spec};
use super::{Direction, NodeTopology, pod_id};
use crate::dut::{DutError, Running};
use crate::harness::{DutStart, L3fwdConfig, NetworkCount, Plan, Topology};
use crate::underlay::{self, Underlay, VethNetns};
use crate::{CopyMode, Dut, Shape, Subject};
use trafgen::{FrameSpec, GenReport, StreamInfo};

/// The network a stream's frames belong to: the uplink's streams carry it, a pod's is its
/// interface's.
fn network_of(s: &StreamInfo) -> u16 {
    match s.iface {
        0 => s.network,
        id => (id - 1) as u16,
    }
}

impl Topology for NodeTopology {
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    /// veclane and VPP in every shape; testpmd (io forwarding between the uplink and one
    /// pod: no lookup, no header change) in singlenet, as the ceiling of that path.
    fn supports(&self, dut: Dut) -> bool {
        matches!(dut, Dut::Veclane | Dut::Vpp)
            || (dut == Dut::Testpmd && self.shapes.contains(&Shape::Singlenet))
    }

    fn supports_shape(&self, dut: Dut, shape: Shape) -> bool {
        matches!(dut, Dut::Veclane | Dut::Vpp) || (dut == Dut::Testpmd && shape == Shape::Singlenet)
    }

    fn describe(&self) -> String {
        let shapes: Vec<String> = self.shapes.iter().map(|s| s.to_string()).collect();
        format!(
            "node switch ({}): the generator is the remote node on a memif uplink and every network's pod on a memif of its own; veclane and VPP poll with one worker per DUT CPU; singlenet routes pod traffic in the default table, multinet carries it in VXLAN (VNI per network; decapsulated into the network's VRF on the way in, encapsulated on the way out; VPP: a table and a vxlan tunnel per network, ip4-vxlan-bypass on the uplink)",
            shapes.join(", ")
        )
    }

    fn shapes(&self) -> &'static [Shape] {
        self.shapes
    }

    /// The uplink's ring from the remote node and each pod's ring to its pod (in), the
    /// reverse (out), or both.
    fn busy_rings(&self, cfg: &L3fwdConfig) -> usize {
        let one_way = 1 + usize::from(cfg.node.networks.max(1));
        match cfg.node.direction {
            Direction::Both => 2 * one_way,
            Direction::In | Direction::Out => one_way,
        }
    }

    fn notes(&self, cfg: &L3fwdConfig) -> Vec<String> {
        if !cfg.node.underlay.is_kernel() {
            return Vec::new();
        }
        vec![format!(
            "! underlay {}: the remote node is the generator's AF_PACKET socket (qdisc bypassed) on one end of a veth pair ({} and {}, MTU {}) in a namespace of the harness's, the DUT's uplink the other end ({}); the kernel's veth delivers each frame in the sender's context (the generator's frames are put in the DUT's ring on CPU {}, the DUT's in the generator's on CPU {}), so the rates measure the kernel's path as much as the switch; frames the veth or a full socket ring dropped are loss, and count as the underlay's in the counter check",
            cfg.node.underlay,
            underlay::GEN_IF,
            underlay::DUT_IF,
            cfg.node.underlay.mtu(),
            match cfg.node.underlay {
                Underlay::AfXdp => "AF_XDP, XDP in the driver where veth allows",
                _ => "AF_PACKET",
            },
            cfg.gen_cpu,
            cfg.dut_cpu(),
        )]
    }

    fn heading(&self) -> &'static str {
        match self.shapes {
            [Shape::Singlenet] => "Node switch, singlenet",
            _ => "Node switch, multinet and singlenet",
        }
    }

    fn start_dut(&self, s: &DutStart<'_>) -> Result<(Running, PathBuf), DutError> {
        let (cfg, dut, plan, dir, wrapper) = (s.cfg, s.dut, s.plan, s.dir, s.wrapper);
        let shape = dut.shape.unwrap_or(self.shapes[0]);
        if !self.supports_shape(dut.dut, shape) {
            return Err(DutError::Unsupported(format!(
                "the {} scenario cannot configure {} in {shape}",
                self.name, dut.dut
            )));
        }
        if dut.dut == Dut::Testpmd {
            // testpmd forwards port to port: the uplink (id 0) and one pod (id 1), both ways.
            if cfg.node.networks != 1 {
                return Err(DutError::Unsupported(format!(
                    "testpmd forwards between two ports: one network only, not --networks {}",
                    cfg.node.networks
                )));
            }
            return crate::l3fwd::start_dut(s);
        }
        if dut.dut == Dut::Vpp {
            if !wrapper.is_empty() {
                return Err(DutError::Unsupported(crate::vpp::NO_COST.into()));
            }
            let v = crate::vpp::spawn(
                &cfg.vpp_bin_or_missing()?,
                None,
                &crate::vpp::VppConfig {
                    ring_log2: plan.ring_log2,
                    buffer_size: plan.tunnel_buffer_size,
                    workers: plan.worker_cpus(dut.workers).to_vec(),
                    topology: vpp_topology(shape, cfg.node.networks),
                    ..crate::vpp::VppConfig::new(plan.gen_cpu, plan.dut_cpu())
                },
            )?;
            let sock = v.memif_socket();
            return Ok((Box::new(v) as Running, sock));
        }
        let conf = veclane_config(
            cfg,
            shape,
            dut.copy.unwrap_or(CopyMode::Single),
            plan,
            dut.workers,
        );
        let d = if cfg.node.underlay.is_kernel() {
            // The daemon runs in the veth pair's namespace; the pair goes with it.
            let ns = VethNetns::create(
                &underlay::netns_name(dir),
                cfg.node.underlay.mtu(),
                cfg.dut_cpus.len(),
            )?;
            s.veclane(conf, dir, ns.exec_prefix())?.holding(ns)
        } else {
            s.veclane(conf, dir, vec![])?
        };
        if shape == Shape::Multinet {
            remote_pods_on_tunnels(&d)?;
        }
        Ok((Box::new(d) as Running, dir.join("memif.sock")))
    }

    fn gen_config(
        &self,
        cfg: &L3fwdConfig,
        dut: Subject,
        sock: &Path,
        plan: &Plan,
    ) -> trafgen::GenConfig {
        let size = plan.size;
        let shape = dut.shape.unwrap_or(self.shapes[0]);
        let iface = |id: u32| memif::InterfaceConfig {
            id,
            name: format!("gen{id}"),
            log2_ring_size: plan.ring_log2,
            buffer_size: plan.tunnel_buffer_size,
            s2m_rings: dut.workers,
            m2s_rings: dut.workers,
            ..Default::default()
        };
        let pods = |from: u16, sending: bool| -> Vec<trafgen::Port> {
            (from..cfg.node.networks)
                .map(|k| trafgen::Port {
                    iface: iface(pod_id(k)),
                    spec: sending.then(|| pod_spec(size, k)),
                })
                .collect()
        };
        let common = |iface: memif::InterfaceConfig, spec: FrameSpec| trafgen::GenConfig {
            role: trafgen::Role::Secondary,
            socket: memif::SocketPath::File(sock.to_path_buf()),
            iface,
            spec,
            burst: cfg.burst,
            drain: Duration::from_millis(50),
            warmup: Duration::from_secs_f64(cfg.warmup_secs),
            cpu: Some(plan.gen_cpu),
            ..Default::default()
        };
        if cfg.node.underlay.is_kernel() {
            // The pods on memif as ever, the remote node on the veth's other end.
            let dir = sock.parent().unwrap_or(Path::new("."));
            let into_pods = cfg.node.direction != Direction::Out;
            let from_pods = cfg.node.direction != Direction::In;
            let remote = trafgen::KernelPort {
                id: 0,
                host_if: underlay::GEN_IF.into(),
                netns: Some(underlay::netns_name(dir)),
                spec: into_pods.then(|| uplink_spec(shape, size, cfg.node.networks)),
            };
            // `spec` gives the run's frame size even when the pod interface does not send.
            let spec = if from_pods {
                pod_spec(size, 0)
            } else {
                uplink_spec(shape, size, cfg.node.networks)
            };
            return trafgen::GenConfig {
                iface_sends: from_pods,
                ports: pods(1, from_pods),
                kernel_ports: vec![remote],
                ..common(iface(pod_id(0)), spec)
            };
        }
        let (iface0, spec, rx_iface, ports) = match cfg.node.direction {
            Direction::In => (
                iface(0),
                uplink_spec(shape, size, cfg.node.networks),
                Some(iface(pod_id(0))),
                pods(1, false),
            ),
            Direction::Out => (
                iface(pod_id(0)),
                pod_spec(size, 0),
                Some(iface(0)),
                pods(1, true),
            ),
            // The uplink takes half the load, the pods the other half between them: the
            // uplink's share is one sender's, so it gets as many shares as there are pods.
            Direction::Both => (
                iface(0),
                uplink_spec(shape, size, cfg.node.networks),
                None,
                pods(0, true),
            ),
        };
        trafgen::GenConfig {
            rx_iface,
            ports,
            ..common(iface0, spec)
        }
    }

    /// Frames out of a pod arrive whole; frames into one arrive without the VXLAN the
    /// remote node put around them (multinet); frames out of one arrive with it.
    fn check_rx(&self, dut: Subject, size: usize, g: &GenReport) -> Result<(), String> {
        if g.rx_packets == 0 || g.rx_foreign > 0 {
            return Ok(());
        }
        let out_extra = match dut.shape.unwrap_or(self.shapes[0]) {
            Shape::Multinet => trafgen::frame::VXLAN_OVERHEAD as u64,
            Shape::Singlenet => 0,
        };
        if size == crate::trial::IMIX {
            // Frames of every size in every stream: the average must lie within the mix,
            // frames out of a pod 50 bytes longer in multinet.
            let average = g.rx_bytes as f64 / g.rx_packets as f64;
            let (lo, hi) = (64.0, 1518.0 + out_extra as f64);
            if !(lo..=hi).contains(&average) {
                return Err(format!(
                    "received frames average {average:.1} B, outside the IMIX's {lo}..={hi}"
                ));
            }
            return Ok(());
        }
        let expected: u64 = g
            .streams
            .iter()
            .zip(&g.rx_stream_packets)
            .map(|(s, &n)| n * (size as u64 + if s.iface != 0 { out_extra } else { 0 }))
            .sum();
        if expected != g.rx_bytes {
            return Err(format!(
                "received {} bytes in {} frames where {expected} were due at {size} B",
                g.rx_bytes, g.rx_packets
            ));
        }
        Ok(())
    }

    fn networks(&self, g: &GenReport) -> Vec<NetworkCount> {
        let mut v: Vec<NetworkCount> = Vec::new();
        for (i, s) in g.streams.iter().enumerate() {
            let k = network_of(s);
            if v.len() <= usize::from(k) {
                v.resize_with(usize::from(k) + 1, Default::default);
            }
            let c = &mut v[usize::from(k)];
            c.network = k;
            let sent = g.tx_stream_packets.get(i).copied().unwrap_or(0);
            let received = g.rx_stream_packets.get(i).copied().unwrap_or(0);
            c.sent += sent;
            c.received += received;
            if s.iface == 0 {
                c.sent_in += sent;
                c.received_in += received;
            } else {
                c.sent_out += sent;
                c.received_out += received;
            }
        }
        v
    }
}
