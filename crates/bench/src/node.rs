//! `singlenet` and `multinet`: the node switch of the seeds' benchmark.
//!
//! A Calico VPP node moves pod traffic between its pods' memif interfaces and its uplink. In
//! the seeds' *singlenet* shape that traffic is routed in the default table; in *multinet*
//! every network has a VRF of its own and its traffic crosses the uplink in VXLAN with the
//! network's VNI: decapsulated on the way in (outer headers checked, tunnel found by outer
//! source and VNI, inner frame routed in the network's VRF to the pod), encapsulated on the
//! way out. The generator (one thread on its own CPU) plays both the remote node, on a memif
//! the DUT treats exactly as an uplink (VXLAN's underlay in multinet), and the pods, on one
//! memif per network. The DUT's worker has the other CPU.
//!
//! Addresses: the node's uplink is 192.168.0.1/24 and the remote node's VTEP 192.168.0.2.
//! Network `k` (VNI 100 + k in multinet; a subnet pair of the default table in singlenet)
//! has its pod at 10.(10+k).2.2 behind the node's 10.(10+k).2.1/24, and remote pods in
//! 10.(10+k).1.0/24 on the remote node: the same inner frames in both shapes, so that their
//! ratio is the cost of VXLAN and VRFs alone. [`Direction`] says which way frames go: into
//! the pods (`in`), out of them (`out`), or both at once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::daemon::Daemon;
use crate::dut::{DutError, Running};
use crate::l3fwd::{L3fwdConfig, NetworkCount, Topology};
use crate::underlay::{self, Underlay, VethNetns};
use crate::{CopyMode, Dut, Shape, Subject};
use trafgen::{FrameSpec, GenReport, MacAddr, StreamInfo, VxlanSpec};

/// Which way a node trial's frames go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// From the remote node to the pods: the uplink's frames are routed (multinet:
    /// decapsulated, then routed in the network's VRF) to each network's pod.
    In,
    /// From the pods to the remote node: routed (multinet: in the network's VRF, then
    /// encapsulated with its VNI) out of the uplink.
    Out,
    /// Both at once, the remote node sending as much as all the pods together.
    Both,
}

impl core::fmt::Display for Direction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Direction::In => "in",
            Direction::Out => "out",
            Direction::Both => "both",
        })
    }
}

/// A node-switch scenario: the shapes it measures every DUT in, interleaved.
#[derive(Debug)]
pub struct NodeTopology {
    name: &'static str,
    about: &'static str,
    shapes: &'static [Shape],
}

/// `singlenet`: the node routing pod traffic in its default table.
pub static SINGLENET: NodeTopology = NodeTopology {
    name: "singlenet",
    about: "Node switch, seeds' singlenet: generator as remote node (memif uplink) and pods (a memif each), routed in the default table",
    shapes: &[Shape::Singlenet],
};

/// `multinet`: singlenet and multinet side by side, for their ratio.
pub static MULTINET: NodeTopology = NodeTopology {
    name: "multinet",
    about: "Node switch, seeds' multinet beside singlenet: pod traffic in VXLAN per network (VNI, VRF) on the uplink, interleaved with the same traffic routed in the default table",
    shapes: &[Shape::Singlenet, Shape::Multinet],
};

/// The remote node's (and the pods') MAC: the generator's. The node scenarios (this one and
/// [`crate::pvp`]) share it and the uplink's addressing below.
pub(crate) const GEN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// The node's uplink MAC.
pub(crate) const UPLINK_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub(crate) const NODE_VTEP: [u8; 4] = [192, 168, 0, 1];
pub(crate) const REMOTE_VTEP: [u8; 4] = [192, 168, 0, 2];
/// Network `k`'s VNI is this plus `k`.
pub const VNI_BASE: u32 = 100;
/// The largest `--networks`: network `k` takes the second octet 10 + k.
pub const MAX_NETWORKS: u16 = 245;

/// The node's MAC on network `k`'s pod interface.
fn pod_mac(k: u16) -> [u8; 6] {
    let [hi, lo] = k.to_be_bytes();
    [0x02, 0, 0, 0x01, hi, lo]
}

/// The second octet of network `k`'s addresses.
fn octet(k: u16) -> u16 {
    10 + k
}

pub(crate) fn ip(a: [u8; 4]) -> std::net::Ipv4Addr {
    a.into()
}

/// A MAC as configuration files write it.
pub(crate) fn mac_str(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

/// The DUT's interface ids: the uplink is 0, network `k`'s pod `1 + k`.
fn pod_id(k: u16) -> u32 {
    1 + u32::from(k)
}

/// The buffer size of every interface for frames of `size` (VXLAN's 50 bytes included).
pub(crate) fn buffer_size(cfg: &L3fwdConfig, size: usize) -> u32 {
    crate::trial::buffer_size_for(cfg.buffer_size, size + trafgen::frame::VXLAN_OVERHEAD)
}

/// The daemon configuration of a node trial in `shape`: the uplink (memif 0) and a pod
/// interface per network (memif 1 + k), static neighbours for the remote VTEP and every pod,
/// and a route per network to its remote pods (multinet: through the tunnel to the remote
/// VTEP, in the network's VRF). The uplink's MTU leaves room for VXLAN around the largest
/// frame, as an underlay for jumbo pods must.
pub fn veclane_config(
    cfg: &L3fwdConfig,
    shape: Shape,
    copy: CopyMode,
    size: usize,
    workers: u16,
) -> api::Config {
    let ring = 1u32 << cfg.ring_log2_at(size);
    let bsize = buffer_size(cfg, size);
    let mut c = api::Config::default();
    let uplink = || Some("uplink".to_string());
    let uplink_mac = Some(api::MacAddr(UPLINK_MAC));
    let uplink_addresses = vec![prefix(NODE_VTEP, 24)];
    // The uplink: a memif, or the DUT's end of the harness's veth pair (its MTU the veth's).
    match cfg.underlay {
        Underlay::Memif => c.interface.push(api::MemifSpec {
            name: uplink(),
            mac: uplink_mac,
            addresses: uplink_addresses,
            ring_size: Some(ring),
            buffer_size: Some(bsize),
            mtu: Some(9216),
            ..api::MemifSpec::new(0, "memif.sock", api::Role::Master)
        }),
        Underlay::AfPacket => c.af_packet.push(api::AfPacketSpec {
            name: uplink(),
            mac: uplink_mac,
            addresses: uplink_addresses,
            ..api::AfPacketSpec::new(underlay::DUT_IF)
        }),
        Underlay::AfXdp => c.af_xdp.push(api::AfXdpSpec {
            name: uplink(),
            mac: uplink_mac,
            addresses: uplink_addresses,
            ..api::AfXdpSpec::new(underlay::DUT_IF)
        }),
    }
    c.neighbor.push(api::NeighborSpec {
        interface: "uplink".into(),
        ip: ip(REMOTE_VTEP),
        mac: api::MacAddr(GEN_MAC),
    });
    for k in 0..cfg.networks {
        let o = octet(k) as u8;
        let pod = format!("pod{k}");
        let network = match shape {
            Shape::Multinet => Some(format!("net{k}")),
            Shape::Singlenet => None,
        };
        if let Some(name) = &network {
            c.network.push(api::NetworkSpec {
                name: name.clone(),
                vni: VNI_BASE + u32::from(k),
                ranges: vec![prefix([10, o, 0, 0], 16)],
                uplink: uplink(),
                df: true,
                owner: None,
            });
        }
        c.interface.push(api::MemifSpec {
            name: Some(pod.clone()),
            mac: Some(api::MacAddr(pod_mac(k))),
            addresses: vec![prefix([10, o, 2, 1], 24)],
            ring_size: Some(ring),
            buffer_size: Some(bsize),
            network: network.clone(),
            ..api::MemifSpec::new(pod_id(k), "memif.sock", api::Role::Master)
        });
        c.neighbor.push(api::NeighborSpec {
            interface: pod,
            ip: [10, o, 2, 2].into(),
            mac: api::MacAddr(GEN_MAC),
        });
        // Singlenet: out of the uplink in the default table; multinet: in the network's VRF,
        // through its tunnel to the remote VTEP.
        c.route.push(api::RouteSpec {
            prefix: prefix([10, o, 1, 0], 24),
            via: api::Via::Address(ip(REMOTE_VTEP)),
            interface: if network.is_none() { uplink() } else { None },
            table: 0,
            network,
        });
    }
    c.daemon.workers = cfg.worker_cpus(workers).to_vec();
    c.daemon.main_core = Some(cfg.gen_cpu);
    c.daemon.mode = cfg.veclane_rx_mode();
    c.daemon.copy = copy;
    c.daemon.copy_engine = api::CopyEngine::Cpu;
    c
}

/// `a/len`.
fn prefix(a: [u8; 4], len: u8) -> api::Ipv4Prefix {
    api::Ipv4Prefix::new(ip(a), len).expect("a prefix length of at most 32")
}

/// VPP configured as a Calico VPP node in `shape` for `networks` networks, on the same
/// addresses, MACs and memif ids as [`veclane_config`]:
///
/// - the uplink `memif1/0`, 192.168.0.1/24 in the default table, MTU 9216 as veclane's, the
///   remote VTEP a static neighbour; in multinet with `ip4-vxlan-bypass` (VXLAN to a local
///   VTEP goes straight to `vxlan4-input`, as veclane's ip4-input does);
/// - singlenet: pod `memif1/(1+k)` at 10.(10+k).2.1/24 in the default table, its pod a
///   static neighbour, and a route to the remote pods' 10.(10+k).1.0/24 via the remote VTEP;
/// - multinet: per network a table (its id the VNI) holding the pod interface and a VXLAN
///   tunnel to the remote VTEP with the network's VNI (`vxlan_tunnel<k>`, decapsulated
///   frames handed to `ethernet-input` on the tunnel, routed in its table: Calico VPP's L3
///   decapsulation), the tunnel addressed in the remote pods' /24 with the remote pod a
///   static neighbour behind it (veclane's harness sets the same, see
///   `remote_pods_on_tunnels`). The tunnel's MAC is veclane's for the same tunnel
///   ([`api::vxlan_tunnel_mac`]; VPP draws a random one) so that both DUTs get the same frames.
pub fn vpp_topology(shape: Shape, networks: u16) -> crate::vpp::VppTopology {
    use crate::vpp::memif_name;
    let gen_mac = mac_str(GEN_MAC);
    let uplink = memif_name(0);
    let mut commands = vec![
        format!("set interface ip address {uplink} {}/24", ip(NODE_VTEP)),
        format!(
            "set ip neighbor {uplink} {} {gen_mac} static",
            ip(REMOTE_VTEP)
        ),
        // veclane's uplink takes 9216 bytes: VPP's default of 9000 would fragment a 9000-byte
        // frame once VXLAN's 50 bytes go around it.
        format!("set interface mtu 9216 {uplink}"),
    ];
    if shape == Shape::Multinet {
        commands.push(format!("set interface ip vxlan-bypass {uplink}"));
    }
    for k in 0..networks {
        let o = octet(k);
        let pod = memif_name(pod_id(k));
        match shape {
            Shape::Singlenet => commands.push(format!(
                "ip route add 10.{o}.1.0/24 via {} {uplink}",
                ip(REMOTE_VTEP)
            )),
            Shape::Multinet => {
                let vni = VNI_BASE + u32::from(k);
                let tunnel = format!("vxlan_tunnel{k}");
                let mac = api::vxlan_tunnel_mac(ip(NODE_VTEP), vni, ip(REMOTE_VTEP));
                commands.extend([
                    format!("ip table add {vni}"),
                    format!(
                        "create vxlan tunnel src {} dst {} vni {vni} instance {k} decap-next node ethernet-input",
                        ip(NODE_VTEP),
                        ip(REMOTE_VTEP)
                    ),
                    format!("set interface mac address {tunnel} {}", mac_str(mac)),
                    format!("set interface ip table {tunnel} {vni}"),
                    format!("set interface ip address {tunnel} 10.{o}.1.1/24"),
                    format!("set interface state {tunnel} up"),
                    format!("set ip neighbor {tunnel} 10.{o}.1.2 {gen_mac} static"),
                    format!("set interface ip table {pod} {vni}"),
                ]);
            }
        }
        commands.extend([
            format!("set interface ip address {pod} 10.{o}.2.1/24"),
            format!("set ip neighbor {pod} 10.{o}.2.2 {gen_mac} static"),
        ]);
    }
    let memifs: Vec<(u32, [u8; 6])> = std::iter::once((0, UPLINK_MAC))
        .chain((0..networks).map(|k| (pod_id(k), pod_mac(k))))
        .collect();
    // Every memif faces the generator, both ways.
    let all: Vec<String> = memifs.iter().map(|&(id, _)| memif_name(id)).collect();
    crate::vpp::VppTopology {
        memifs,
        slave_of: None,
        commands,
        plugins: match shape {
            Shape::Multinet => vec!["vxlan"],
            Shape::Singlenet => Vec::new(),
        },
        rx_from: all.clone(),
        tx_to: all,
    }
}

/// What the remote node sends in `shape`: network `k`'s frames from 10.(10+k).1.2 to its pod
/// 10.(10+k).2.2, to the node's uplink MAC (singlenet) or inside VXLAN to the tunnel's MAC
/// (multinet: the one the node answers ARP with in that network).
fn uplink_spec(shape: Shape, size: usize, networks: u16) -> FrameSpec {
    let (size, mix) = crate::trial::frame_spec_size(size);
    let base = FrameSpec {
        size,
        mix,
        src_mac: MacAddr(GEN_MAC),
        dst_mac: MacAddr(UPLINK_MAC),
        src_ip: "10.10.1.2".parse().expect("an address"),
        dst_ip: "10.10.2.2".parse().expect("an address"),
        networks,
        ..Default::default()
    };
    match shape {
        Shape::Singlenet => base,
        Shape::Multinet => FrameSpec {
            dst_macs: (0..networks)
                .map(|k| {
                    MacAddr(api::vxlan_tunnel_mac(
                        ip(NODE_VTEP),
                        VNI_BASE + u32::from(k),
                        ip(REMOTE_VTEP),
                    ))
                })
                .collect(),
            vxlan: Some(VxlanSpec {
                src_mac: MacAddr(GEN_MAC),
                dst_mac: MacAddr(UPLINK_MAC),
                src_ip: ip(REMOTE_VTEP),
                dst_ip: ip(NODE_VTEP),
                vni: VNI_BASE,
            }),
            ..base
        },
    }
}

/// What network `k`'s pod sends: from 10.(10+k).2.2 to a remote pod, 10.(10+k).1.2.
fn pod_spec(size: usize, k: u16) -> FrameSpec {
    let o = octet(k) as u8;
    let (size, mix) = crate::trial::frame_spec_size(size);
    FrameSpec {
        size,
        mix,
        src_mac: MacAddr(GEN_MAC),
        dst_mac: MacAddr(pod_mac(k)),
        src_ip: [10, o, 2, 2].into(),
        dst_ip: [10, o, 1, 2].into(),
        ..Default::default()
    }
}

/// Resolves the remote pods the node sends to across each network's tunnel: the node ARPs
/// across the tunnel for them, and a remote node answers (veclane's proxy ARP, or a Linux
/// VTEP's stack). The generator plays a remote node that does not answer ARP, so the entries
/// are set statically once the tunnels exist, as they would stand after the first exchange.
fn remote_pods_on_tunnels(d: &Daemon) -> Result<(), DutError> {
    neighbours_on_tunnels(d, |vni| {
        let k = vni.checked_sub(VNI_BASE)? as u16;
        Some([10, octet(k) as u8, 1, 2].into())
    })
}

/// On every tunnel of the daemon, the remote pod `pod(vni)` (if any) as a static neighbour
/// with the generator's MAC (see `remote_pods_on_tunnels`).
pub(crate) fn neighbours_on_tunnels(
    d: &Daemon,
    pod: impl Fn(u32) -> Option<std::net::Ipv4Addr>,
) -> Result<(), DutError> {
    let tunnels = match d.call(&api::Request::ShowVxlanTunnel)? {
        api::Reply::Tunnels { tunnels } => tunnels,
        other => {
            return Err(DutError::reply(
                "veclane",
                format!("show vxlan tunnel: {other:?}"),
            ));
        }
    };
    for t in tunnels {
        let Some(ip) = pod(t.vni) else {
            continue;
        };
        let neighbor = api::NeighborSpec {
            interface: t.name.clone(),
            ip,
            mac: api::MacAddr(GEN_MAC),
        };
        match d.call(&api::Request::SetIpNeighbor {
            neighbor,
            delete: false,
        })? {
            api::Reply::Ok => {}
            other => {
                return Err(DutError::reply(
                    "veclane",
                    format!("set ip neighbor on {}: {other:?}", t.name),
                ));
            }
        }
    }
    Ok(())
}

impl NodeTopology {
    /// The network a stream's frames belong to: the uplink's streams carry it, a pod's is
    /// its interface's.
    fn network_of(s: &StreamInfo) -> u16 {
        match s.iface {
            0 => s.network,
            id => (id - 1) as u16,
        }
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
        let one_way = 1 + usize::from(cfg.networks.max(1));
        match cfg.direction {
            Direction::Both => 2 * one_way,
            Direction::In | Direction::Out => one_way,
        }
    }

    fn notes(&self, cfg: &L3fwdConfig) -> Vec<String> {
        if !cfg.underlay.is_kernel() {
            return Vec::new();
        }
        vec![format!(
            "! underlay {}: the remote node is the generator's AF_PACKET socket (qdisc bypassed) on one end of a veth pair ({} and {}, MTU {}) in a namespace of the harness's, the DUT's uplink the other end ({}); the kernel's veth delivers each frame in the sender's context (the generator's frames are put in the DUT's ring on CPU {}, the DUT's in the generator's on CPU {}), so the rates measure the kernel's path as much as the switch; frames the veth or a full socket ring dropped are loss, and count as the underlay's in the counter check",
            cfg.underlay,
            underlay::GEN_IF,
            underlay::DUT_IF,
            cfg.underlay.mtu(),
            match cfg.underlay {
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

    fn start_dut(
        &self,
        cfg: &L3fwdConfig,
        dut: Subject,
        size: usize,
        dir: &Path,
        wrapper: &[String],
    ) -> Result<(Running, PathBuf), DutError> {
        let shape = dut.shape.unwrap_or(self.shapes[0]);
        if !self.supports_shape(dut.dut, shape) {
            return Err(DutError::Unsupported(format!(
                "the {} scenario cannot configure {} in {shape}",
                self.name, dut.dut
            )));
        }
        if dut.dut == Dut::Testpmd {
            // testpmd forwards port to port: the uplink (id 0) and one pod (id 1), both ways.
            if cfg.networks != 1 {
                return Err(DutError::Unsupported(format!(
                    "testpmd forwards between two ports: one network only, not --networks {}",
                    cfg.networks
                )));
            }
            return crate::l3fwd::start_dut(cfg, dut, size, dir, wrapper);
        }
        if dut.dut == Dut::Vpp {
            if !wrapper.is_empty() {
                return Err(DutError::Unsupported(crate::vpp::NO_COST.into()));
            }
            let v = crate::vpp::spawn(
                &cfg.vpp_bin_or_missing()?,
                None,
                &crate::vpp::VppConfig {
                    ring_log2: cfg.ring_log2_at(size),
                    buffer_size: buffer_size(cfg, size),
                    workers: cfg.worker_cpus(dut.workers).to_vec(),
                    topology: vpp_topology(shape, cfg.networks),
                    ..crate::vpp::VppConfig::new(cfg.gen_cpu, cfg.dut_cpu())
                },
            )?;
            let sock = v.memif_socket();
            return Ok((Box::new(v) as Running, sock));
        }
        let ready = Duration::from_secs(if wrapper.is_empty() { 10 } else { 120 });
        let mut conf = veclane_config(
            cfg,
            shape,
            dut.copy.unwrap_or(CopyMode::Single),
            size,
            dut.workers,
        );
        conf.daemon.copy_engine = dut.engine.unwrap_or(api::CopyEngine::Cpu);
        conf.daemon.dsa_queue = cfg.dsa_queue.clone();
        let d = if cfg.underlay.is_kernel() {
            // The daemon runs in the veth pair's namespace; the pair goes with it.
            let ns = VethNetns::create(
                &underlay::netns_name(dir),
                cfg.underlay.mtu(),
                cfg.dut_cpus.len(),
            )?;
            let wrapped: Vec<String> = ns
                .exec_prefix()
                .into_iter()
                .chain(wrapper.iter().cloned())
                .collect();
            Daemon::start_under(&wrapped, &cfg.veclane_bin, dir, &conf.to_toml(), ready)?
                .holding(ns)
        } else {
            Daemon::start_under(wrapper, &cfg.veclane_bin, dir, &conf.to_toml(), ready)?
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
        size: usize,
    ) -> trafgen::GenConfig {
        let shape = dut.shape.unwrap_or(self.shapes[0]);
        let iface = |id: u32| memif::InterfaceConfig {
            id,
            name: format!("gen{id}"),
            log2_ring_size: cfg.ring_log2_at(size),
            buffer_size: buffer_size(cfg, size),
            s2m_rings: dut.workers,
            m2s_rings: dut.workers,
            ..Default::default()
        };
        let pods = |from: u16, sending: bool| -> Vec<trafgen::Port> {
            (from..cfg.networks)
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
            cpu: Some(cfg.gen_cpu),
            ..Default::default()
        };
        if cfg.underlay.is_kernel() {
            // The pods on memif as ever, the remote node on the veth's other end.
            let dir = sock.parent().unwrap_or(Path::new("."));
            let into_pods = cfg.direction != Direction::Out;
            let from_pods = cfg.direction != Direction::In;
            let remote = trafgen::KernelPort {
                id: 0,
                host_if: underlay::GEN_IF.into(),
                netns: Some(underlay::netns_name(dir)),
                spec: into_pods.then(|| uplink_spec(shape, size, cfg.networks)),
            };
            // `spec` gives the run's frame size even when the pod interface does not send.
            let spec = if from_pods {
                pod_spec(size, 0)
            } else {
                uplink_spec(shape, size, cfg.networks)
            };
            return trafgen::GenConfig {
                iface_sends: from_pods,
                ports: pods(1, from_pods),
                kernel_ports: vec![remote],
                ..common(iface(pod_id(0)), spec)
            };
        }
        let (iface0, spec, rx_iface, ports) = match cfg.direction {
            Direction::In => (
                iface(0),
                uplink_spec(shape, size, cfg.networks),
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
                uplink_spec(shape, size, cfg.networks),
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
            let k = Self::network_of(s);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::l3fwd::test_config;

    fn cfg(networks: u16, direction: Direction) -> L3fwdConfig {
        let mut c = test_config(vec![Subject::plain(Dut::Veclane)]);
        c.topology = &MULTINET;
        c.networks = networks;
        c.direction = direction;
        c
    }

    fn subject(shape: Shape) -> Subject {
        Subject::plain(Dut::Veclane).in_shape(shape)
    }

    #[test]
    fn the_daemon_gets_a_network_per_pod_in_multinet_and_one_table_in_singlenet() {
        let c = cfg(3, Direction::Both);
        let m = veclane_config(&c, Shape::Multinet, CopyMode::Single, 1500, 1);
        assert_eq!(m.network.len(), 3);
        assert_eq!(m.interface.len(), 4);
        for (k, n) in m.network.iter().enumerate() {
            assert_eq!(n.vni, VNI_BASE + k as u32);
            assert_eq!(n.uplink.as_deref(), Some("uplink"));
            assert_eq!(n.ranges[0].to_string(), format!("10.{}.0.0/16", 10 + k));
            let pod = &m.interface[1 + k];
            assert_eq!(pod.id, 1 + k as u32);
            assert_eq!(pod.network.as_deref(), Some(n.name.as_str()));
            let r = &m.route[k];
            assert_eq!(r.network.as_deref(), Some(n.name.as_str()));
            assert_eq!(r.via.to_string(), "192.168.0.2");
        }
        // The underlay carries jumbo pods' frames with VXLAN around them.
        assert_eq!(m.interface[0].mtu, Some(9216));
        assert_eq!(m.daemon.workers, vec![1]);
        let s = veclane_config(&c, Shape::Singlenet, CopyMode::Two, 64, 1);
        assert!(s.network.is_empty());
        assert!(
            s.interface
                .iter()
                .all(|i| i.network.is_none() && i.table == 0)
        );
        assert!(
            s.route
                .iter()
                .all(|r| r.interface.as_deref() == Some("uplink"))
        );
        assert_eq!(s.neighbor.len(), 4);
        assert_eq!(s.daemon.copy, CopyMode::Two);
        // Both round-trip through the daemon's own parser.
        for c in [m, s] {
            assert_eq!(api::Config::parse(&c.to_toml(), "test").unwrap(), c);
        }
    }

    #[test]
    fn a_kernel_underlay_makes_the_uplink_a_veth_end_and_the_remote_node_a_kernel_port() {
        for (underlay, kind) in [
            (Underlay::AfPacket, "af-packet"),
            (Underlay::AfXdp, "af-xdp"),
        ] {
            let mut c = cfg(2, Direction::Both);
            c.underlay = underlay;
            let m = veclane_config(&c, Shape::Multinet, CopyMode::Single, 1500, 1);
            // The pods stay on memif; the uplink is the veth's DUT end, addressed as before.
            assert_eq!(m.interface.len(), 2);
            assert!(
                m.interface
                    .iter()
                    .all(|i| i.name.as_deref().is_some_and(|n| n.starts_with("pod")))
            );
            let toml = m.to_toml();
            assert!(toml.contains(&format!("[[{kind}]]")), "{toml}");
            assert!(toml.contains("host-if = \"vl-dut\""), "{toml}");
            assert_eq!(api::Config::parse(&toml, "test").unwrap(), m);
            assert!(
                m.network
                    .iter()
                    .all(|n| n.uplink.as_deref() == Some("uplink"))
            );
            let dir = Path::new("/tmp/some-trial");
            let subject = subject(Shape::Multinet);
            for (direction, sends_in, sends_out) in [
                (Direction::Both, true, true),
                (Direction::In, true, false),
                (Direction::Out, false, true),
            ] {
                c.direction = direction;
                let g = MULTINET.gen_config(&c, subject, &dir.join("memif.sock"), 1500);
                let [k] = g.kernel_ports.as_slice() else {
                    panic!("{:?}", g.kernel_ports)
                };
                assert_eq!((k.id, k.host_if.as_str()), (0, underlay::GEN_IF));
                assert_eq!(k.netns.as_deref(), Some(underlay::netns_name(dir).as_str()));
                assert_eq!(k.spec.is_some(), sends_in, "{direction}");
                // The remote node's frames carry VXLAN to the node's VTEP.
                if let Some(spec) = &k.spec {
                    assert_eq!(spec.vxlan.as_ref().unwrap().dst_ip, ip(NODE_VTEP));
                }
                assert_eq!(g.iface.id, pod_id(0));
                assert_eq!(g.iface_sends, sends_out, "{direction}");
                assert!(g.ports.iter().all(|p| p.spec.is_some() == sends_out));
                assert!(g.rx_iface.is_none());
            }
        }
    }

    #[test]
    fn a_kernel_underlay_is_refused_where_it_cannot_run() {
        use crate::l3fwd::ConfigError;
        let mut c = cfg(1, Direction::Both);
        c.underlay = Underlay::AfXdp;
        c.sizes = vec![64, 1500, crate::trial::IMIX];
        assert_eq!(c.check(), Ok(()));
        c.sizes = vec![64, 4000];
        assert!(matches!(
            c.check(),
            Err(ConfigError::UnderlaySize { size: 4000, .. })
        ));
        c.underlay = Underlay::AfPacket;
        c.sizes = vec![9000];
        assert_eq!(c.check(), Ok(()));
        c.duts
            .push(Subject::plain(Dut::Vpp).in_shape(Shape::Multinet));
        assert_eq!(c.check(), Err(ConfigError::UnderlayDut(Dut::Vpp)));
        c.duts.pop();
        c.topology = &crate::l3fwd::TOPOLOGY;
        assert_eq!(c.check(), Err(ConfigError::UnderlayScenario("l3fwd")));
    }

    #[test]
    fn vpp_gets_the_same_node_on_the_same_memifs_and_addresses() {
        let s = vpp_topology(Shape::Singlenet, 2);
        let ids: Vec<u32> = s.memifs.iter().map(|m| m.0).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(s.memifs[0].1, UPLINK_MAC);
        assert_eq!(s.memifs[2].1, pod_mac(1));
        assert_eq!(s.rx_from, ["memif1/0", "memif1/1", "memif1/2"]);
        assert_eq!(s.tx_to, s.rx_from);
        assert!(s.plugins.is_empty());
        assert_eq!(
            s.commands,
            [
                "set interface ip address memif1/0 192.168.0.1/24",
                "set ip neighbor memif1/0 192.168.0.2 02:00:00:00:00:01 static",
                "set interface mtu 9216 memif1/0",
                "ip route add 10.10.1.0/24 via 192.168.0.2 memif1/0",
                "set interface ip address memif1/1 10.10.2.1/24",
                "set ip neighbor memif1/1 10.10.2.2 02:00:00:00:00:01 static",
                "ip route add 10.11.1.0/24 via 192.168.0.2 memif1/0",
                "set interface ip address memif1/2 10.11.2.1/24",
                "set ip neighbor memif1/2 10.11.2.2 02:00:00:00:00:01 static",
            ]
        );
        let m = vpp_topology(Shape::Multinet, 2);
        assert_eq!(m.plugins, ["vxlan"]);
        assert_eq!(m.memifs, s.memifs);
        let mac = mac_str(api::vxlan_tunnel_mac(
            ip(NODE_VTEP),
            VNI_BASE + 1,
            ip(REMOTE_VTEP),
        ));
        // Network 1: its table, its tunnel (veclane's MAC for it), its pod in the table.
        let net1: Vec<&str> = m
            .commands
            .iter()
            .map(String::as_str)
            .skip_while(|c| *c != "ip table add 101")
            .collect();
        assert_eq!(
            net1,
            [
                "ip table add 101",
                "create vxlan tunnel src 192.168.0.1 dst 192.168.0.2 vni 101 instance 1 decap-next node ethernet-input",
                &format!("set interface mac address vxlan_tunnel1 {mac}"),
                "set interface ip table vxlan_tunnel1 101",
                "set interface ip address vxlan_tunnel1 10.11.1.1/24",
                "set interface state vxlan_tunnel1 up",
                "set ip neighbor vxlan_tunnel1 10.11.1.2 02:00:00:00:00:01 static",
                "set interface ip table memif1/2 101",
                "set interface ip address memif1/2 10.11.2.1/24",
                "set ip neighbor memif1/2 10.11.2.2 02:00:00:00:00:01 static",
            ]
        );
        assert_eq!(m.commands[2], "set interface mtu 9216 memif1/0");
        assert_eq!(m.commands[3], "set interface ip vxlan-bypass memif1/0");
        assert!(!m.commands.iter().any(|c| c.starts_with("ip route")));
    }

    #[test]
    fn the_generator_plays_the_remote_node_and_the_pods_as_the_direction_says() {
        let t = &MULTINET;
        let sock = Path::new("/s");
        // In: the uplink sends, spread over the networks, in VXLAN to each tunnel's MAC.
        let g = t.gen_config(&cfg(3, Direction::In), subject(Shape::Multinet), sock, 64);
        assert_eq!(g.iface.id, 0);
        let v = g.spec.vxlan.as_ref().expect("multinet frames are VXLAN");
        assert_eq!(
            (v.vni, v.dst_ip, v.src_ip),
            (VNI_BASE, ip(NODE_VTEP), ip(REMOTE_VTEP))
        );
        assert_eq!(g.spec.networks, 3);
        assert_eq!(
            g.spec.dst_macs[2].0,
            api::vxlan_tunnel_mac(ip(NODE_VTEP), VNI_BASE + 2, ip(REMOTE_VTEP))
        );
        assert_eq!(g.rx_iface.as_ref().map(|i| i.id), Some(1));
        assert_eq!(
            g.ports.iter().map(|p| p.iface.id).collect::<Vec<_>>(),
            [2, 3]
        );
        assert!(g.ports.iter().all(|p| p.spec.is_none()));
        // Singlenet: the same inner frames, plain, to the uplink.
        let g = t.gen_config(&cfg(3, Direction::In), subject(Shape::Singlenet), sock, 64);
        assert!(g.spec.vxlan.is_none() && g.spec.dst_macs.is_empty());
        assert_eq!(g.spec.dst_mac.0, UPLINK_MAC);
        // Out: every pod sends to its remote pod; the uplink only receives.
        let g = t.gen_config(&cfg(2, Direction::Out), subject(Shape::Multinet), sock, 64);
        assert_eq!((g.iface.id, g.spec.dst_ip), (1, [10, 10, 1, 2].into()));
        assert_eq!(g.rx_iface.as_ref().map(|i| i.id), Some(0));
        let p = g.ports[0].spec.as_ref().unwrap();
        assert_eq!((p.src_ip, p.dst_mac.0), ([10, 11, 2, 2].into(), pod_mac(1)));
        // Both: the uplink and every pod send.
        let g = t.gen_config(&cfg(2, Direction::Both), subject(Shape::Multinet), sock, 64);
        assert!(g.rx_iface.is_none());
        assert_eq!(g.ports.len(), 2);
        assert!(g.ports.iter().all(|p| p.spec.is_some()));
    }

    #[test]
    fn streams_map_to_networks_and_frame_sizes_are_checked_per_direction() {
        let stream = |iface, network| StreamInfo {
            iface,
            queue: 0,
            network,
        };
        // The uplink's streams for networks 0 and 1, then pod 0's and pod 1's.
        let g = GenReport {
            streams: vec![stream(0, 0), stream(0, 1), stream(1, 0), stream(2, 0)],
            tx_stream_packets: vec![10, 20, 30, 40],
            rx_stream_packets: vec![9, 20, 30, 38],
            rx_packets: 97,
            rx_bytes: 29 * 64 + 68 * (64 + 50),
            ..Default::default()
        };
        let n = MULTINET.networks(&g);
        assert_eq!(
            n,
            [
                NetworkCount {
                    network: 0,
                    sent: 40,
                    received: 39,
                    sent_in: 10,
                    received_in: 9,
                    sent_out: 30,
                    received_out: 30,
                },
                NetworkCount {
                    network: 1,
                    sent: 60,
                    received: 58,
                    sent_in: 20,
                    received_in: 20,
                    sent_out: 40,
                    received_out: 38,
                }
            ]
        );
        // Into the pods frames lose the VXLAN; out of them they gain it (multinet only).
        assert!(MULTINET.check_rx(subject(Shape::Multinet), 64, &g).is_ok());
        let e = MULTINET
            .check_rx(subject(Shape::Singlenet), 64, &g)
            .unwrap_err();
        assert!(e.contains("were due at 64 B"), "{e}");
        let plain = GenReport {
            rx_bytes: 97 * 64,
            ..g
        };
        assert!(
            MULTINET
                .check_rx(subject(Shape::Singlenet), 64, &plain)
                .is_ok()
        );
    }

    #[test]
    fn multinet_rows_divide_by_the_same_dut_in_singlenet() {
        let v = Subject::plain(Dut::Veclane);
        let duts = [v.in_shape(Shape::Singlenet), v.in_shape(Shape::Multinet)];
        assert_eq!(crate::l3fwd::reference_for(&duts, duts[1]), Some(duts[0]));
        assert_eq!(crate::l3fwd::reference_for(&duts, duts[0]), Some(duts[0]));
        assert_eq!(crate::l3fwd::reference_for(&duts[1..], duts[1]), None);
        assert_eq!(duts[1].to_string(), "veclane multinet");
        // Alone, a multinet row has no peer.
        assert_eq!(crate::l3fwd::peer_for(&duts, duts[1]), None);
    }

    #[test]
    fn multinet_rows_beside_vpp_also_divide_by_vpp_multinet() {
        let (v, p) = (Subject::plain(Dut::Veclane), Subject::plain(Dut::Vpp));
        let duts = [
            v.in_shape(Shape::Singlenet),
            v.in_shape(Shape::Multinet),
            p.in_shape(Shape::Singlenet),
            p.in_shape(Shape::Multinet),
        ];
        use crate::l3fwd::peer_for;
        assert_eq!(peer_for(&duts, duts[1]), Some(duts[3]));
        // VPP's own multinet row is the reference, singlenet rows have their peer in the
        // ratio column already.
        assert_eq!(peer_for(&duts, duts[3]), None);
        assert_eq!(peer_for(&duts, duts[0]), None);
        assert_eq!(crate::l3fwd::reference_for(&duts, duts[0]), Some(duts[2]));
    }
}
