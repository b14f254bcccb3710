//! The DUT's side of a node trial: veclane's daemon configuration and VPP's, on the same
//! addresses, MACs and memif ids, and the neighbours set on a running daemon's tunnels.

use super::{
    GEN_MAC, NODE_VTEP, REMOTE_VTEP, UPLINK_MAC, VNI_BASE, ip, mac_str, octet, pod_id, pod_mac,
};
use crate::daemon::Daemon;
use crate::dut::DutError;
use crate::harness::{L3fwdConfig, Plan};
use crate::underlay::{self, Underlay};
use crate::{CopyMode, Shape};

/// The daemon configuration of a node trial in `shape`: the uplink (memif 0) and a pod
/// interface per network (memif 1 + k), static neighbours for the remote VTEP and every pod,
/// and a route per network to its remote pods (multinet: through the tunnel to the remote
/// VTEP, in the network's VRF). The uplink's MTU leaves room for VXLAN around the largest
/// frame, as an underlay for jumbo pods must.
pub fn veclane_config(
    cfg: &L3fwdConfig,
    shape: Shape,
    copy: CopyMode,
    plan: &Plan,
    workers: u16,
) -> api::Config {
    let ring = plan.ring_size();
    let bsize = plan.tunnel_buffer_size;
    let mut c = api::Config::default();
    let uplink = || Some("uplink".to_string());
    let uplink_mac = Some(api::MacAddr(UPLINK_MAC));
    let uplink_addresses = vec![prefix(NODE_VTEP, 24)];
    // The uplink: a memif, or the DUT's end of the harness's veth pair (its MTU the veth's).
    match cfg.node.underlay {
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
    for k in 0..cfg.node.networks {
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
    c.daemon.workers = plan.worker_cpus(workers).to_vec();
    c.daemon.main_core = Some(plan.gen_cpu);
    c.daemon.mode = cfg.veclane_rx_mode();
    c.daemon.copy = copy;
    c.daemon.copy_engine = api::CopyEngine::Cpu;
    c
}

/// `a/len`.
pub(crate) fn prefix(a: [u8; 4], len: u8) -> api::Ipv4Prefix {
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
/// Resolves the remote pods the node sends to across each network's tunnel: the node ARPs
/// across the tunnel for them, and a remote node answers (veclane's proxy ARP, or a Linux
/// VTEP's stack). The generator plays a remote node that does not answer ARP, so the entries
/// are set statically once the tunnels exist, as they would stand after the first exchange.
pub(super) fn remote_pods_on_tunnels(d: &Daemon) -> Result<(), DutError> {
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
