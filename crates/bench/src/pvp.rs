//! `pvp`: the seeds' whole chain, generator → node → memif → L3 forwarding pod → memif →
//! node → generator.
//!
//! The node is veclane (the DUT whose cost is measured), as in [`crate::node`]; the pod is
//! the subject's DUT: veclane as a memif slave routing by longest prefix, `dpdk-testpmd` as a
//! memif client (`mac` forwarding: no lookup), or VPP as a memif slave routing by longest
//! prefix (the seeds' VPP-L3FWD pod). The pod has two interfaces to the node, `pod-a`
//! (memif id 1) and `pod-b` (id 2), and its frames go in on one and out on the other, as a
//! service in a chain does:
//!
//! - The generator, as the remote node, sends on the uplink (memif id 0) to 10.10.9.2: in
//!   multinet in VXLAN with network `blue`'s VNI 100, in singlenet plain.
//! - The node routes 10.10.9.0/24 to the pod through `pod-a` (10.10.2.2), in `blue`'s VRF
//!   (multinet) or the default table (singlenet).
//! - The pod routes 10.10.9.0/24 out of `pod-b` to the node (10.10.4.1).
//! - The node receives on `pod-b`, which is in network `red` (multinet: VNI 101, the same
//!   range, its own VRF) or in table 1 (singlenet), where 10.10.9.0/24 goes back to the remote
//!   node: through `red`'s tunnel, or straight out of the uplink.
//!
//! So in multinet every frame is decapsulated, routed twice in two VRFs and encapsulated again,
//! the per-packet work of the seeds' multinet node. Three busy loops (generator, node worker,
//! pod) need three CPUs; with two, the pod shares one (`--pod-cpu`, default the generator's)
//! and every rate says so: the stable figure of this scenario is `--cost` (callgrind on the
//! node).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::daemon::Daemon;
use crate::dpdk::MemifPort;
use crate::dut::{Counts, DutError, Running, RunningDut};
use crate::harness::{DutStart, L3fwdConfig, Plan, Topology};
use crate::node::{
    GEN_MAC, NODE_VTEP, REMOTE_VTEP, UPLINK_MAC, VNI_BASE, ip, mac_str as mac, prefix,
};
use crate::testpmd::Testpmd;
use crate::{CopyMode, Dut, Shape, Subject};
use trafgen::{FrameSpec, GenReport, MacAddr, VxlanSpec};

/// The node's MACs on its side of `pod-a` and `pod-b` (the generator's, the uplink's and the
/// VTEP addresses are the node scenarios', [`crate::node`]).
const NODE_A_MAC: [u8; 6] = [0x02, 0, 0, 0x01, 0, 0x0a];
const NODE_B_MAC: [u8; 6] = [0x02, 0, 0, 0x01, 0, 0x0b];
/// The pod's MACs on `pod-a` and `pod-b`.
const POD_A_MAC: [u8; 6] = [0x02, 0, 0, 0x02, 0, 0x0a];
const POD_B_MAC: [u8; 6] = [0x02, 0, 0, 0x02, 0, 0x0b];
/// `blue`'s VNI (the way in); `red`'s is the next.
const BLUE_VNI: u32 = VNI_BASE;
const RED_VNI: u32 = VNI_BASE + 1;
/// Where the generator's frames go, behind the pod's chain and back on the remote node.
const DEST: [u8; 4] = [10, 10, 9, 2];

/// `pvp`'s options in a run's configuration ([`crate::harness::L3fwdConfig`] flattens them
/// into its own keys, so a report names them as it always has).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PvpOptions {
    /// The pod's CPU (`--pod-cpu`; default: the generator's, on a machine with two).
    pub pod_cpu: Option<usize>,
}

/// The `pvp` topology.
#[derive(Debug)]
pub struct PvpTopology;

/// The one `pvp` topology.
pub static PVP: PvpTopology = PvpTopology;

/// The node's configuration in `shape` (see the module doc).
pub fn node_config(
    cfg: &L3fwdConfig,
    shape: Shape,
    copy: CopyMode,
    plan: &Plan,
    workers: u16,
) -> api::Config {
    let ring = plan.ring_size();
    let bsize = plan.tunnel_buffer_size;
    let memif = |name: &str, id: u32, m: [u8; 6], addr: [u8; 4]| api::MemifSpec {
        name: Some(name.into()),
        mac: Some(api::MacAddr(m)),
        addresses: vec![prefix(addr, 24)],
        ring_size: Some(ring),
        buffer_size: Some(bsize),
        ..api::MemifSpec::new(id, "memif.sock", api::Role::Master)
    };
    let mut c = api::Config::default();
    c.interface.push(api::MemifSpec {
        mtu: Some(9216),
        ..memif("uplink", 0, UPLINK_MAC, NODE_VTEP)
    });
    c.neighbor.push(neighbor("uplink", REMOTE_VTEP, GEN_MAC));
    let (mut pod_a, mut pod_b) = (
        memif("pod-a", 1, NODE_A_MAC, [10, 10, 2, 1]),
        memif("pod-b", 2, NODE_B_MAC, [10, 10, 4, 1]),
    );
    let pods = prefix([10, 10, 9, 0], 24);
    match shape {
        Shape::Multinet => {
            for (name, vni) in [("blue", BLUE_VNI), ("red", RED_VNI)] {
                c.network.push(api::NetworkSpec {
                    name: name.into(),
                    vni,
                    ranges: vec![prefix([10, 10, 0, 0], 16)],
                    uplink: Some("uplink".into()),
                    df: true,
                    owner: None,
                });
            }
            pod_a.network = Some("blue".into());
            pod_b.network = Some("red".into());
            // In: blue's tunnel from the remote node (its route to the remote pods makes it),
            // then to the pod. Back: red's tunnel to the remote node.
            let route = |p, via, network: &str| api::RouteSpec {
                prefix: p,
                via: api::Via::Address(ip(via)),
                interface: None,
                table: 0,
                network: Some(network.into()),
            };
            c.route = vec![
                route(pods, [10, 10, 2, 2], "blue"),
                route(prefix([10, 10, 1, 0], 24), REMOTE_VTEP, "blue"),
                route(pods, REMOTE_VTEP, "red"),
            ];
        }
        Shape::Singlenet => {
            pod_b.table = 1;
            let route = |via, interface: Option<&str>, table| api::RouteSpec {
                prefix: pods,
                via: api::Via::Address(ip(via)),
                interface: interface.map(Into::into),
                table,
                network: None,
            };
            c.route = vec![
                route([10, 10, 2, 2], None, 0),
                route(REMOTE_VTEP, Some("uplink"), 1),
            ];
        }
    }
    c.interface.extend([pod_a, pod_b]);
    c.neighbor.extend([
        neighbor("pod-a", [10, 10, 2, 2], POD_A_MAC),
        neighbor("pod-b", [10, 10, 4, 2], POD_B_MAC),
    ]);
    c.daemon.workers = plan.worker_cpus(workers).to_vec();
    c.daemon.main_core = Some(plan.gen_cpu);
    c.daemon.mode = cfg.veclane_rx_mode();
    c.daemon.copy = copy;
    c.daemon.copy_engine = api::CopyEngine::Cpu;
    c
}

/// A static ARP entry: `addr` is `m` on `interface`.
fn neighbor(interface: &str, addr: [u8; 4], m: [u8; 6]) -> api::NeighborSpec {
    api::NeighborSpec {
        interface: interface.into(),
        ip: ip(addr),
        mac: api::MacAddr(m),
    }
}

/// veclane as the pod: two memif slaves on the node's socket, 10.10.9.0/24 routed out of
/// `pod-b` to the node, one polling worker on `cpu`.
pub fn pod_config(node_sock: &Path, plan: &Plan, cpu: usize) -> api::Config {
    let ring = plan.ring_size();
    let bsize = plan.tunnel_buffer_size;
    let socket = node_sock.display().to_string();
    let mut c = api::Config::default();
    for (name, id, m, addr) in [
        ("pod-a", 1, POD_A_MAC, [10, 10, 2, 2]),
        ("pod-b", 2, POD_B_MAC, [10, 10, 4, 2]),
    ] {
        c.interface.push(api::MemifSpec {
            name: Some(name.into()),
            mac: Some(api::MacAddr(m)),
            addresses: vec![prefix(addr, 24)],
            ring_size: Some(ring),
            buffer_size: Some(bsize),
            ..api::MemifSpec::new(id, socket.clone(), api::Role::Slave)
        });
    }
    c.neighbor
        .push(neighbor("pod-b", [10, 10, 4, 1], NODE_B_MAC));
    c.route.push(api::RouteSpec {
        prefix: prefix([10, 10, 9, 0], 24),
        via: api::Via::Address([10, 10, 4, 1].into()),
        interface: None,
        table: 0,
        network: None,
    });
    c.daemon.workers = vec![cpu];
    c.daemon.main_core = Some(plan.gen_cpu);
    c.daemon.mode = api::RxMode::Polling;
    c
}

/// VPP as the pod: the same two interfaces as [`pod_config`]'s, memif slaves on the node's
/// socket, 10.10.9.0/24 routed out of `pod-b` to the node.
pub fn vpp_pod_topology(node_sock: &Path) -> crate::vpp::VppTopology {
    use crate::vpp::memif_name;
    let (a, b) = (memif_name(1), memif_name(2));
    crate::vpp::VppTopology {
        memifs: vec![(1, POD_A_MAC), (2, POD_B_MAC)],
        slave_of: Some(node_sock.to_path_buf()),
        commands: vec![
            format!("set interface ip address {a} 10.10.2.2/24"),
            format!("set interface ip address {b} 10.10.4.2/24"),
            format!("set ip neighbor {b} 10.10.4.1 {} static", mac(NODE_B_MAC)),
            format!("ip route add 10.10.9.0/24 via 10.10.4.1 {b}"),
        ],
        plugins: Vec::new(),
        rx_from: vec![a],
        tx_to: vec![b],
    }
}

/// What the remote node sends: 10.10.1.2 → 10.10.9.2, plain to the uplink (singlenet) or in
/// VXLAN with `blue`'s VNI to its tunnel's MAC (multinet).
fn gen_spec(shape: Shape, size: usize) -> FrameSpec {
    let (size, mix) = crate::trial::frame_spec_size(size);
    let base = FrameSpec {
        size,
        mix,
        src_mac: MacAddr(GEN_MAC),
        dst_mac: MacAddr(UPLINK_MAC),
        src_ip: [10, 10, 1, 2].into(),
        dst_ip: DEST.into(),
        ..Default::default()
    };
    match shape {
        Shape::Singlenet => base,
        Shape::Multinet => FrameSpec {
            dst_mac: MacAddr(api::vxlan_tunnel_mac(
                ip(NODE_VTEP),
                BLUE_VNI,
                ip(REMOTE_VTEP),
            )),
            vxlan: Some(VxlanSpec {
                src_mac: MacAddr(GEN_MAC),
                dst_mac: MacAddr(UPLINK_MAC),
                src_ip: ip(REMOTE_VTEP),
                dst_ip: ip(NODE_VTEP),
                vni: BLUE_VNI,
            }),
            ..base
        },
    }
}

/// The node and the pod, stopped together; the harness's counters and clocks are the node's,
/// on its uplink (the interface that faces the generator).
#[derive(Debug)]
pub struct Chain {
    node: Daemon,
    pod: Running,
}

impl RunningDut for Chain {
    fn pid(&self) -> u32 {
        self.node.pid()
    }

    /// Both processes, whatever happens to either (the first error is returned).
    fn pause(&mut self) -> Result<(), DutError> {
        let pod = self.pod.pause();
        let node = crate::proc::signal(self.node.pid(), rustix::process::Signal::STOP);
        pod.and(node)
    }

    /// Both processes, whatever happens to either: a pod left stopped would never answer.
    fn resume(&mut self) -> Result<(), DutError> {
        let node = crate::proc::signal(self.node.pid(), rustix::process::Signal::CONT);
        let pod = self.pod.resume();
        node.and(pod)
    }

    /// Waits (up to 30 s) until the pod is connected on both of its interfaces, so that no
    /// trial sends into a chain with a gap in it.
    fn ready(&mut self) -> Result<(), DutError> {
        self.pod.ready()?;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let ifs = match self
                .node
                .call(&api::Request::ShowInterface { name: None })?
            {
                api::Reply::Interfaces { interfaces } => interfaces,
                other => {
                    return Err(DutError::reply(
                        "veclane",
                        format!("show interface: {other:?}"),
                    ));
                }
            };
            let up = |n: &str| ifs.iter().any(|i| i.name == n && i.connected);
            // A pod with a runtime (veclane) must also be looping: a worker that shares a
            // busy CPU may start late.
            let loops = |p: &mut Running| p.runtime().iter().map(|w| w.loops).sum::<u64>();
            if up("pod-a") && up("pod-b") {
                let before = loops(&mut self.pod);
                std::thread::sleep(Duration::from_millis(50));
                if self.pod.runtime().is_empty() || loops(&mut self.pod) > before {
                    return Ok(());
                }
            }
            if std::time::Instant::now() > deadline {
                return Err(DutError::Timeout {
                    dut: "veclane",
                    what: "the pod did not connect to the node's pod-a and pod-b".into(),
                    waited: Duration::from_secs(30),
                    log: self.pod.drops(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn counts(&mut self) -> Result<Option<Counts>, DutError> {
        let ifs = match self.node.call(&api::Request::ShowInterface {
            name: Some("uplink".into()),
        })? {
            api::Reply::Interfaces { interfaces } => interfaces,
            other => {
                return Err(DutError::reply(
                    "veclane",
                    format!("show interface: {other:?}"),
                ));
            }
        };
        Ok(ifs.first().map(|i| Counts {
            rx: i.rx_packets,
            tx: i.tx_packets,
        }))
    }

    fn drops(&mut self) -> String {
        let (node, pod) = (self.node.drops(), self.pod.drops());
        match (node.is_empty(), pod.is_empty()) {
            (_, true) => node,
            (true, false) => format!("pod: {pod}"),
            (false, false) => format!("{node} pod: {pod}"),
        }
    }

    fn clear_runtime(&mut self) {
        self.node.clear_runtime();
    }

    fn runtime(&mut self) -> Vec<api::WorkerRuntime> {
        self.node.runtime()
    }

    fn stop(self: Box<Self>, timeout: Duration) -> Result<(), DutError> {
        let pod = self.pod.stop(timeout);
        let node = self.node.stop_within(timeout);
        pod.and(node)
    }
}

impl Topology for PvpTopology {
    fn name(&self) -> &'static str {
        "pvp"
    }

    fn about(&self) -> &'static str {
        "Seeds' whole chain: generator → node (veclane) → memif → L3 forwarding pod (--dut: veclane slave, testpmd client or VPP slave) → memif → node → generator, singlenet and multinet; three busy loops, so on two CPUs the pod shares one"
    }

    /// The uplink's two rings (from the remote node and back to it) and one ring of each of
    /// the pod's two memifs (to the pod on pod-a, from it on pod-b).
    fn busy_rings(&self, _cfg: &L3fwdConfig) -> usize {
        4
    }

    /// The pod: veclane, testpmd or VPP.
    fn supports(&self, dut: Dut) -> bool {
        matches!(dut, Dut::Veclane | Dut::Testpmd | Dut::Vpp)
    }

    fn describe(&self) -> String {
        "pvp (singlenet, multinet): the node is veclane (its copy mode the column's; testpmd pods run a single-copy node), the generator the remote node on a memif uplink sending to 10.10.9.2; the node routes it to the pod through pod-a, the pod (--dut: veclane as memif slave routing by LPM, testpmd as memif client, mac forwarding, or VPP as memif slave routing by LPM) sends it back through pod-b, and the node routes it out of the uplink from another VRF (multinet: network red's tunnel, so every frame is decapsulated and encapsulated; singlenet: table 1); counters and clocks are the node's".into()
    }

    fn heading(&self) -> &'static str {
        "PVP chain, multinet and singlenet"
    }

    fn notes(&self, cfg: &L3fwdConfig) -> Vec<String> {
        let pod = cfg.pvp.pod_cpu.unwrap_or(cfg.gen_cpu);
        let with = if pod == cfg.gen_cpu {
            "the generator's"
        } else if cfg.dut_cpus.contains(&pod) {
            "a node worker's"
        } else {
            return vec![format!("! the pod's busy loop runs on CPU {pod}, its own")];
        };
        vec![format!(
            "! the pod's busy loop shares CPU {pod}, {with}: three busy loops on these CPUs, so the rates measure them taking turns, not the node; --cost (callgrind on the node) is this scenario's stable figure"
        )]
    }

    fn shapes(&self) -> &'static [Shape] {
        &[Shape::Singlenet, Shape::Multinet]
    }

    fn start_dut(&self, s: &DutStart<'_>) -> Result<(Running, PathBuf), DutError> {
        let (cfg, dut, plan, dir) = (s.cfg, s.dut, s.plan, s.dir);
        let shape = dut.shape.unwrap_or(Shape::Multinet);
        let conf = node_config(
            cfg,
            shape,
            dut.copy.unwrap_or(CopyMode::Single),
            plan,
            dut.workers,
        );
        let node_dir = dir.join("node");
        let pod_dir = dir.join("pod");
        for d in [&node_dir, &pod_dir] {
            std::fs::create_dir_all(d)
                .map_err(DutError::io(format!("creating {}", d.display())))?;
        }
        let node = s.veclane(conf, &node_dir, vec![])?;
        if shape == Shape::Multinet {
            crate::node::neighbours_on_tunnels(&node, |vni| match vni {
                RED_VNI => Some(DEST.into()),
                _ => None,
            })?;
        }
        let sock = node_dir.join("memif.sock");
        let cpu = cfg.pvp.pod_cpu.unwrap_or(cfg.gen_cpu);
        let pod: Running = match dut.dut {
            Dut::Veclane => Box::new(Daemon::start_without_memif_socket(
                &cfg.veclane_bin,
                &pod_dir,
                &pod_config(&sock, plan, cpu).to_toml(),
            )?),
            Dut::Testpmd => {
                let bin = cfg.testpmd_bin_or_missing()?;
                let port =
                    |id| MemifPort::new(false, &sock, id, plan.ring_log2, plan.tunnel_buffer_size);
                // mac forwarding: port 0 (pod-a) to port 1 (pod-b), the destination MAC the
                // node's side of pod-b, so that the node takes the frames in.
                let app = vec![
                    "--forward-mode=mac".to_string(),
                    format!("--eth-peer=1,{}", mac(NODE_B_MAC)),
                    format!("--eth-peer=0,{}", mac(NODE_A_MAC)),
                ];
                let mut tp = Testpmd::spawn_under(
                    &[],
                    &bin,
                    &crate::proc::instance_tag("pod"),
                    &[cpu],
                    cfg.gen_cpu,
                    &[port(1), port(2)],
                    &app,
                )?;
                tp.cmd("start")?;
                Box::new(tp)
            }
            // VPP puts no worker on its main thread's CPU: a pod on the generator's CPU is
            // VPP's main thread alone, polling.
            Dut::Vpp => Box::new(crate::vpp::spawn(
                &cfg.vpp_bin_or_missing()?,
                None,
                &crate::vpp::VppConfig {
                    ring_log2: plan.ring_log2,
                    buffer_size: plan.tunnel_buffer_size,
                    workers: if cpu == cfg.gen_cpu {
                        vec![]
                    } else {
                        vec![cpu]
                    },
                    topology: vpp_pod_topology(&sock),
                    ..crate::vpp::VppConfig::new(plan.gen_cpu, cpu)
                },
            )?),
            other => {
                return Err(DutError::Unsupported(format!(
                    "the pvp pod is veclane, testpmd or vpp, not {other}"
                )));
            }
        };
        Ok((Box::new(Chain { node, pod }) as Running, sock))
    }

    fn gen_config(
        &self,
        cfg: &L3fwdConfig,
        dut: Subject,
        sock: &Path,
        plan: &Plan,
    ) -> trafgen::GenConfig {
        let shape = dut.shape.unwrap_or(Shape::Multinet);
        trafgen::GenConfig {
            role: trafgen::Role::Secondary,
            socket: memif::SocketPath::File(sock.to_path_buf()),
            iface: memif::InterfaceConfig {
                id: 0,
                name: "gen0".into(),
                log2_ring_size: plan.ring_log2,
                buffer_size: plan.tunnel_buffer_size,
                s2m_rings: dut.workers,
                m2s_rings: dut.workers,
                ..Default::default()
            },
            spec: gen_spec(shape, plan.size),
            burst: cfg.burst,
            drain: Duration::from_millis(50),
            warmup: Duration::from_secs_f64(cfg.warmup_secs),
            cpu: Some(plan.gen_cpu),
            ..Default::default()
        }
    }

    /// Frames come back in the shape they left in: 50 bytes of VXLAN around them in multinet.
    fn check_rx(&self, dut: Subject, size: usize, g: &GenReport) -> Result<(), String> {
        if g.rx_packets == 0 || g.rx_foreign > 0 {
            return Ok(());
        }
        let extra = match dut.shape.unwrap_or(Shape::Multinet) {
            Shape::Multinet => trafgen::frame::VXLAN_OVERHEAD as u64,
            Shape::Singlenet => 0,
        };
        let average = g.rx_bytes as f64 / g.rx_packets as f64 - extra as f64;
        let ok = if size == crate::trial::IMIX {
            (64.0..=1518.0).contains(&average)
        } else {
            (average - size as f64).abs() <= 0.5
        };
        if !ok {
            return Err(format!(
                "received frames average {average:.1} B (less {extra} B of VXLAN), not {} B",
                crate::trial::size_label(size)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::test_config;

    #[test]
    fn node_and_pod_configurations_chain_through_two_vrfs() {
        let c = test_config(vec![Subject::plain(Dut::Veclane)]);
        let m = node_config(
            &c,
            Shape::Multinet,
            CopyMode::Single,
            &Plan::new(&c, 1500),
            1,
        );
        assert_eq!(m.network.len(), 2);
        assert_eq!(m.interface[1].network.as_deref(), Some("blue"));
        assert_eq!(m.interface[2].network.as_deref(), Some("red"));
        assert_eq!(m.route.len(), 3);
        let s = node_config(&c, Shape::Singlenet, CopyMode::Two, &Plan::new(&c, 64), 1);
        assert!(s.network.is_empty());
        assert_eq!(s.interface[2].table, 1);
        assert_eq!(s.route[1].interface.as_deref(), Some("uplink"));
        assert_eq!(s.route[1].table, 1);
        let p = pod_config(Path::new("/run/x/memif.sock"), &Plan::new(&c, 64), 0);
        assert!(p.interface.iter().all(|i| i.role == api::Role::Slave));
        assert_eq!(p.interface[0].socket, "/run/x/memif.sock");
        assert_eq!(p.route[0].via.to_string(), "10.10.4.1");
        for c in [m, s, p] {
            assert_eq!(api::Config::parse(&c.to_toml(), "test").unwrap(), c);
        }
        let g = gen_spec(Shape::Multinet, 64);
        assert_eq!(g.vxlan.as_ref().unwrap().vni, BLUE_VNI);
        assert_eq!(g.dst_ip, ip(DEST));
        assert!(gen_spec(Shape::Singlenet, 64).vxlan.is_none());
    }

    /// The typed configurations are ones the daemon accepts, in every shape, copy mode and
    /// size (the old TOML text was checked by parsing it; the typed value by validating it).
    #[test]
    fn node_and_pod_configurations_validate() {
        let c = test_config(vec![Subject::plain(Dut::Veclane)]);
        for size in [64, 128, 256, 512, 1024, 1500, 9000, crate::trial::IMIX] {
            for shape in [Shape::Singlenet, Shape::Multinet] {
                for copy in [CopyMode::Single, CopyMode::Two] {
                    let n = node_config(&c, shape, copy, &Plan::new(&c, size), 1);
                    n.validate("the pvp node").unwrap();
                }
            }
            let p = pod_config(Path::new("/run/x/memif.sock"), &Plan::new(&c, size), 0);
            p.validate("the pvp pod").unwrap();
        }
    }
}
