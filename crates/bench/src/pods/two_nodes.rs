//! The two-node paths: pod A on node 1, pod B on node 2, each node a namespace, the nodes
//! joined by a veth pair (`u0`, the underlay: 192.0.2.1 and .2, MTU 1500) and the pods'
//! traffic in VXLAN (VNI 99) between them. The pods' MTU is the tunnel's, 1450, as an
//! overlay's CNI configures it.
//!
//! - veclane: a daemon in each node with an AF_PACKET uplink on `u0` and the pods' network
//!   carried on it; each pod a tap of its node's daemon; each daemon routes the other pod's
//!   address to the other node's VTEP (what the node agents program from the datastore).
//! - the kernel: each node a router with the pod's veth pair, a Linux VXLAN device to the
//!   other node (`vx0`, addressed 10.98.0.N/24 so that the other pod's host route can go
//!   through the other node), forwarding on. Linux keeps a TCP super-frame whole over veth
//!   and VXLAN (UDP tunnel segmentation offload) to the receiving node.
//!
//! Both daemons' workers go on the worker CPU and their control threads on the main one: a
//! two-CPU machine has no other room (the pods' programs have the application CPU).

use super::PodPath;
use super::topo::{
    POD_A, POD_B, Placement, Pods, ctl, link_mac, neigh, pod_netns, pod_side, tap_pod, veth,
};
use crate::daemon::Daemon;
use crate::proc::DutError;
use crate::underlay::{Netns, ip};

/// The pods' MTU on the two-node paths: VXLAN over a 1500-byte underlay.
const POD_MTU: u16 = 1450;

/// The two nodes and their underlay: node N's end of it is `u0`, up, and (for the kernel's
/// own VXLAN, `addressed`) 192.0.2.N/24. veclane's nodes leave the kernel no address there:
/// the address is veclane's, and a kernel holding it too would answer what veclane receives
/// (an ICMP port unreachable for VXLAN packets).
fn nodes(tag: &str, addressed: bool) -> Result<[Netns; 2], DutError> {
    let n1 = pod_netns(format!("{tag}-n1"))?;
    let n2 = pod_netns(format!("{tag}-n2"))?;
    ip(&[
        "-n", &n1.name, "link", "add", "u0", "mtu", "1500", "type", "veth", "peer", "name", "u0",
        "mtu", "1500", "netns", &n2.name,
    ])?;
    for (n, k) in [(&n1, 1), (&n2, 2)] {
        if addressed {
            let addr = format!("192.0.2.{k}/24");
            ip(&["-n", &n.name, "addr", "add", &addr, "dev", "u0"])?;
        }
        ip(&["-n", &n.name, "link", "set", "u0", "up"])?;
    }
    Ok([n1, n2])
}

/// veclane on both nodes.
pub(super) fn veclane(tag: &str, a: Netns, b: Netns, at: &Placement) -> Result<Pods, DutError> {
    let [n1, n2] = nodes(tag, false)?;
    let mut daemons = Vec::new();
    let mut dirs = Vec::new();
    for (k, node, pod, addr, other, other_vtep) in [
        (1, &n1, &a, POD_A, POD_B, "192.0.2.2"),
        (2, &n2, &b, POD_B, POD_A, "192.0.2.1"),
    ] {
        let dir = tempfile::tempdir()
            .map_err(DutError::io("cannot make the daemon's runtime directory"))?;
        let (uplink, name) = at.uplink.config(&format!("192.0.2.{k}/24"));
        let config = format!(
            "[daemon]\nmode = \"{}\"\nworkers = [{}]\nmain-core = {}\n\n{uplink}\
             [[network]]\nname = \"pods\"\nvni = 99\nranges = [\"{}\"]\nuplink = \"{name}\"\n",
            at.mode,
            at.worker_cpu,
            at.main_cpu,
            super::topo::RANGE
        );
        let d = Daemon::start_in_netns(&node.name, &at.bin, dir.path(), &config)?;
        tap_pod(&d, &at.bin, dir.path(), pod, addr, POD_MTU)?;
        ctl(
            &at.bin,
            dir.path(),
            &format!("ip route add {other}/32 via {other_vtep} network pods"),
        )?;
        daemons.push(d);
        dirs.push(dir);
    }
    let pods = Pods {
        path: PodPath::VeclaneVxlan,
        a,
        b,
        daemons,
        between: vec![(n1, vec!["u0"]), (n2, vec!["u0"])],
        _dirs: dirs,
    };
    prime(&pods)?;
    Ok(pods)
}

/// The kernel on both nodes.
pub(super) fn kernel(tag: &str, a: Netns, b: Netns) -> Result<Pods, DutError> {
    let [n1, n2] = nodes(tag, true)?;
    for (k, node, pod, dev, addr, other) in [
        (1, &n1, &a, "va", POD_A, (POD_B, 2)),
        (2, &n2, &b, "vb", POD_B, (POD_A, 1)),
    ] {
        let n = node.name.as_str();
        node.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        let remote = format!("192.0.2.{}", other.1);
        let local = format!("192.0.2.{k}");
        ip(&[
            "-n", n, "link", "add", "vx0", "type", "vxlan", "id", "99", "local", &local, "remote",
            &remote, "dstport", "4789", "dev", "u0",
        ])?;
        ip(&[
            "-n",
            n,
            "addr",
            "add",
            &format!("10.98.0.{k}/24"),
            "dev",
            "vx0",
        ])?;
        ip(&["-n", n, "link", "set", "vx0", "up"])?;
        let mac = veth(node, dev, pod)?;
        ip(&[
            "-n",
            &pod.name,
            "link",
            "set",
            "eth0",
            "mtu",
            &POD_MTU.to_string(),
        ])?;
        let pod_mac = link_mac(&pod.name, "eth0")?;
        ip(&["-n", n, "route", "add", &format!("{addr}/32"), "dev", dev])?;
        neigh(n, addr, &pod_mac, dev)?;
        ip(&[
            "-n",
            n,
            "route",
            "add",
            &format!("{}/32", other.0),
            "via",
            &format!("10.98.0.{}", other.1),
            "dev",
            "vx0",
        ])?;
        pod_side(pod, addr, &mac)?;
    }
    let pods = Pods {
        path: PodPath::KernelVxlan,
        a,
        b,
        daemons: Vec::new(),
        between: vec![(n1, vec!["va", "vx0", "u0"]), (n2, vec!["vb", "vx0", "u0"])],
        _dirs: Vec::new(),
    };
    prime(&pods)?;
    Ok(pods)
}

/// Pings pod B from pod A until it answers (up to 5 s), so that every neighbour on the
/// way (VTEPs, the kernel's VXLAN device's) is resolved before anything is measured.
fn prime(pods: &Pods) -> Result<(), DutError> {
    for _ in 0..25 {
        let ok = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &pods.a.name,
                "ping",
                "-c",
                "1",
                "-W",
                "0.2",
                POD_B,
            ])
            .output()
            .map_err(DutError::io("cannot run ping"))?
            .status
            .success();
        if ok {
            return Ok(());
        }
    }
    Err(DutError::Unsupported(format!(
        "{}: pod B never answered pod A's ping",
        pods.path.name()
    )))
}
