//! The two pods and what joins them. Each pod is a network namespace whose `eth0` has its
//! address as a /32 and reaches the other pod through gateway [`GW`], a permanent neighbour,
//! the way the CNI plugin wires a pod (and Calico does). What is behind `eth0` is the path
//! under test:
//!
//! - veclane: `eth0` is a tap veclane made in the pod ([`PodPath::VeclaneTap`]); the daemon
//!   routes between the two in a network of its own, with a host route and a static neighbour
//!   for each pod.
//! - the kernel: `eth0` is one end of a veth pair whose other end is in a third namespace, a
//!   router with forwarding on, a host route to each pod and a static neighbour for it: what
//!   the standard `ptp` CNI plugin builds, without veclane anywhere.
//!
//! - veclane on a veth ([`PodPath::VeclaneVeth`], a candidate pod interface measured beside
//!   the tap): `eth0` is a veth whose other end is in a namespace where veclane drives it
//!   through the kernel-uplink driver of `--pod-uplink` (AF_PACKET or AF_XDP), with a host
//!   route and a static neighbour for each pod. Neither driver takes a super-frame or (AF_XDP)
//!   a partial checksum from the pod, so the pods' `eth0` segments and checksums in software
//!   (`ethtool -K eth0 tso off gso off gro off`, and `tx off` for AF_XDP).
//!
//! - two nodes ([`super::two_nodes`]): the same two kinds, each pod on a node of its own, the
//!   nodes namespaces joined by a veth pair (the underlay) and the pods' traffic in VXLAN
//!   between them.
//!
//! Every namespace's name starts with the harness's `vlbench-PID-`, so a harness killed
//! before it could delete them has them deleted by the next one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::PodPath;
use crate::daemon::Daemon;
use crate::proc::DutError;
use crate::underlay::{Netns, ip, remove_stale};

/// The pods' addresses (the first is the client's, the second the server's).
pub const POD_A: &str = "10.99.0.2";
pub const POD_B: &str = "10.99.0.3";
/// The network the pods are in.
pub(super) const RANGE: &str = "10.99.0.0/16";
/// Each pod's gateway: a link-local address answered by a permanent neighbour entry.
const GW: &str = "169.254.1.1";

/// Two pods joined by one path; what joins them lives as long as this.
#[derive(Debug)]
pub struct Pods {
    pub path: PodPath,
    pub a: Netns,
    pub b: Netns,
    /// veclane, when it is the path: one daemon per node (their threads' CPU time is the
    /// path's cost).
    pub daemons: Vec<Daemon>,
    /// The namespaces between the pods (the kernel path's routers, the two-node paths'
    /// nodes), each with the devices in it whose drops are the path's.
    pub between: Vec<(Netns, Vec<&'static str>)>,
    /// The daemons' runtime directories.
    pub(super) _dirs: Vec<tempfile::TempDir>,
}

/// Where the pods of one path run: CPUs and the veclane binary.
#[derive(Debug, Clone)]
pub struct Placement {
    pub bin: PathBuf,
    /// veclane's worker.
    pub worker_cpu: usize,
    /// veclane's control thread.
    pub main_cpu: usize,
    /// veclane's receive mode.
    pub mode: api::RxMode,
    /// The kind of uplink veclane's nodes use on the two-node path.
    pub uplink: Uplink,
}

/// The kind of veclane's uplink on the two-node path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Uplink {
    AfPacket,
    AfXdp,
}

impl Uplink {
    pub const ALL: [Uplink; 2] = [Uplink::AfPacket, Uplink::AfXdp];

    pub fn name(self) -> &'static str {
        match self {
            Uplink::AfPacket => "af-packet",
            Uplink::AfXdp => "af-xdp",
        }
    }

    /// Its configuration section on interface `u0` with `addr`, and the interface's name.
    pub(super) fn config(self, addr: &str) -> (String, String) {
        self.config_on("u0", &format!("addresses = [\"{addr}\"]\n"))
    }

    /// Its configuration section on host interface `dev` with `more` lines, and the
    /// interface's name.
    fn config_on(self, dev: &str, more: &str) -> (String, String) {
        let (section, prefix) = match self {
            Uplink::AfPacket => ("af-packet", "host"),
            Uplink::AfXdp => ("af-xdp", "xdp"),
        };
        (
            format!("[[{section}]]\nhost-if = \"{dev}\"\n{more}mtu = 1500\n\n"),
            format!("{prefix}-{dev}"),
        )
    }
}

impl Pods {
    /// The pods joined by `path`.
    pub fn create(path: PodPath, at: &Placement) -> Result<Pods, DutError> {
        if !rustix::process::geteuid().is_root() {
            return Err(DutError::Unsupported(
                "the pods scenario needs root: it makes network namespaces".into(),
            ));
        }
        remove_stale();
        let tag = format!("vlbench-{}-{}", std::process::id(), path.tag());
        let a = pod_netns(format!("{tag}-a"))?;
        let b = pod_netns(format!("{tag}-b"))?;
        match path {
            PodPath::Kernel => {
                let r = pod_netns(format!("{tag}-r"))?;
                r.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
                for (pod, dev, addr) in [(&a, "va", POD_A), (&b, "vb", POD_B)] {
                    let mac = veth(&r, dev, pod)?;
                    let pod_mac = link_mac(&pod.name, "eth0")?;
                    ip(&[
                        "-n",
                        &r.name,
                        "route",
                        "add",
                        &format!("{addr}/32"),
                        "dev",
                        dev,
                    ])?;
                    neigh(&r.name, addr, &pod_mac, dev)?;
                    pod_side(pod, addr, &mac)?;
                }
                Ok(Pods {
                    path,
                    a,
                    b,
                    daemons: Vec::new(),
                    between: vec![(r, vec!["va", "vb"])],
                    _dirs: Vec::new(),
                })
            }
            PodPath::VeclaneTap => {
                let dir = tempfile::tempdir()
                    .map_err(DutError::io("cannot make the daemon's runtime directory"))?;
                let config = format!(
                    "[daemon]\nmode = \"{}\"\nworkers = [{}]\nmain-core = {}\n\n\
                     [[network]]\nname = \"pods\"\nvni = 99\nranges = [\"{RANGE}\"]\n",
                    at.mode, at.worker_cpu, at.main_cpu
                );
                let d = Daemon::start_without_memif_socket(&at.bin, dir.path(), &config)?;
                for (pod, addr) in [(&a, POD_A), (&b, POD_B)] {
                    tap_pod(&d, &at.bin, dir.path(), pod, addr, 1500)?;
                }
                Ok(Pods {
                    path,
                    a,
                    b,
                    daemons: vec![d],
                    between: Vec::new(),
                    _dirs: vec![dir],
                })
            }
            PodPath::VeclaneVeth => veth_pods(&tag, a, b, at),
            PodPath::VeclaneVxlan => super::two_nodes::veclane(&tag, a, b, at),
            PodPath::KernelVxlan => super::two_nodes::kernel(&tag, a, b),
        }
    }
}

/// The pods on veth pairs whose other ends veclane drives in a namespace of its own (see the
/// module).
fn veth_pods(tag: &str, a: Netns, b: Netns, at: &Placement) -> Result<Pods, DutError> {
    let r = pod_netns(format!("{tag}-r"))?;
    let dir =
        tempfile::tempdir().map_err(DutError::io("cannot make the daemon's runtime directory"))?;
    let mut config = format!(
        "[daemon]\nmode = \"{}\"\nworkers = [{}]\nmain-core = {}\n\n",
        at.mode, at.worker_cpu, at.main_cpu
    );
    let mut gateways = Vec::new();
    for (pod, dev, addr) in [(&a, "va", POD_A), (&b, "vb", POD_B)] {
        gateways.push(veth(&r, dev, pod)?);
        let mut off = vec!["-K", "eth0", "tso", "off", "gso", "off", "gro", "off"];
        if at.uplink == Uplink::AfXdp {
            off.extend(["tx", "off"]);
        }
        ethtool(pod, &off)?;
        ethtool(&r, &["-K", dev, "tso", "off", "gso", "off", "gro", "off"])?;
        let (section, name) = at.uplink.config_on(dev, "");
        let pod_mac = link_mac(&pod.name, "eth0")?;
        config += &format!(
            "{section}[[route]]\nprefix = \"{addr}/32\"\nvia = \"{addr}\"\ninterface = \"{name}\"\n\n\
             [[neighbor]]\ninterface = \"{name}\"\nip = \"{addr}\"\nmac = \"{pod_mac}\"\n\n"
        );
    }
    let d = Daemon::start_in_netns(&r.name, &at.bin, dir.path(), &config)?;
    for ((pod, addr), gw) in [(&a, POD_A), (&b, POD_B)].into_iter().zip(&gateways) {
        pod_side(pod, addr, gw)?;
    }
    Ok(Pods {
        path: PodPath::VeclaneVeth,
        a,
        b,
        daemons: vec![d],
        between: vec![(r, vec!["va", "vb"])],
        _dirs: vec![dir],
    })
}

/// `ethtool ARGS` in namespace `ns`.
fn ethtool(ns: &Netns, args: &[&str]) -> Result<(), DutError> {
    let mut v = vec!["ethtool"];
    v.extend_from_slice(args);
    ns.exec(&v)
}

/// A namespace for a pod (or the router), its loopback up.
pub(super) fn pod_netns(name: String) -> Result<Netns, DutError> {
    let ns = Netns::create(name)?;
    ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
    Ok(ns)
}

/// A veth pair, `dev` in `r` and `eth0` in `pod`, both up; `dev`'s MAC.
pub(super) fn veth(r: &Netns, dev: &str, pod: &Netns) -> Result<String, DutError> {
    ip(&[
        "-n", &r.name, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns",
        &pod.name,
    ])?;
    ip(&["-n", &r.name, "link", "set", dev, "up"])?;
    link_mac(&r.name, dev)
}

/// A pod's tap from veclane with `mtu`, wired as the CNI plugin wires one.
pub(super) fn tap_pod(
    d: &Daemon,
    bin: &Path,
    dir: &Path,
    pod: &Netns,
    addr: &str,
    mtu: u16,
) -> Result<(), DutError> {
    let out = ctl(
        bin,
        dir,
        &format!(
            "create interface tap host-if-name eth0 netns {} network pods mtu {mtu} \
             allowed-sources {addr}/32",
            pod.name
        ),
    )?;
    let name = out
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let r = d.call(&api::Request::ShowInterface {
        name: Some(name.clone()),
    })?;
    let api::Reply::Interfaces { interfaces } = r else {
        return Err(DutError::reply("veclane", format!("{r:?}")));
    };
    let Some(api::DeviceInfo::Tap { host_mac, .. }) = interfaces.first().map(|i| &i.device) else {
        return Err(DutError::reply("veclane", format!("{name} is no tap")));
    };
    let gw_mac = interfaces[0].mac.to_string();
    ctl(
        bin,
        dir,
        &format!("ip route add {addr}/32 via {addr} {name} network pods"),
    )?;
    ctl(
        bin,
        dir,
        &format!("set ip neighbor {name} {addr} {host_mac}"),
    )?;
    pod_side(pod, addr, &gw_mac)
}

/// The pod's own side: `eth0` up with `addr`/32, the gateway a permanent neighbour at
/// `gw_mac`, the pods' range through it.
pub(super) fn pod_side(pod: &Netns, addr: &str, gw_mac: &str) -> Result<(), DutError> {
    let n = pod.name.as_str();
    ip(&["-n", n, "link", "set", "eth0", "up"])?;
    ip(&["-n", n, "addr", "add", &format!("{addr}/32"), "dev", "eth0"])?;
    ip(&["-n", n, "route", "add", GW, "dev", "eth0", "scope", "link"])?;
    ip(&["-n", n, "route", "add", RANGE, "via", GW, "dev", "eth0"])?;
    neigh(n, GW, gw_mac, "eth0")?;
    // The link's carrier may come a moment after the device is up.
    std::thread::sleep(Duration::from_millis(50));
    Ok(())
}

pub(super) fn neigh(ns: &str, addr: &str, mac: &str, dev: &str) -> Result<(), DutError> {
    ip(&[
        "-n",
        ns,
        "neigh",
        "replace",
        addr,
        "lladdr",
        mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ])
}

/// Device `dev`'s MAC in namespace `ns`.
pub(super) fn link_mac(ns: &str, dev: &str) -> Result<String, DutError> {
    let out = Command::new("ip")
        .args(["-n", ns, "-j", "link", "show", dev])
        .output()
        .map_err(DutError::io("cannot run ip -j link show"))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| DutError::Unsupported(format!("ip -j link show {dev} in {ns}: {e}")))?;
    v[0]["address"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| DutError::Unsupported(format!("{dev} in {ns} has no MAC")))
}

/// `veclane ctl LINE` against the daemon in `dir`; its output.
pub(super) fn ctl(bin: &Path, dir: &Path, line: &str) -> Result<String, DutError> {
    let out = Command::new(bin)
        .arg("ctl")
        .arg("--socket")
        .arg(dir.join("ctl.sock"))
        .args(line.split_whitespace())
        .output()
        .map_err(DutError::io(format!("cannot run {} ctl", bin.display())))?;
    if !out.status.success() {
        return Err(DutError::reply(
            "veclane",
            format!("`{line}`: {}", String::from_utf8_lossy(&out.stderr).trim()),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
