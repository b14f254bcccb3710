//! The node scenarios' underlay over the Linux kernel (`--underlay af-packet|af-xdp`).
//!
//! By default the remote node reaches the DUT over a memif that the DUT treats as an uplink,
//! so that the two CPUs measure the switch and not the kernel. With a kernel underlay the
//! harness makes a network namespace of its own holding a veth pair: the DUT's uplink is one
//! end ([`DUT_IF`], through veclane's AF_PACKET or AF_XDP uplink), the generator's remote
//! node the other ([`GEN_IF`], through AF_PACKET with the transmit ring bypassing the qdisc).
//! The daemon runs inside the namespace (`ip netns exec`), the generator opens its socket
//! there from a thread that enters it; the pods stay on memif. Every underlay frame then
//! crosses the kernel's veth twice a round trip, and the rates measure that path.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

use crate::proc::DutError;

/// How the remote node reaches the DUT's uplink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Underlay {
    /// A memif the DUT treats as an uplink.
    #[default]
    Memif,
    /// A veth pair, the DUT's end an AF_PACKET uplink.
    AfPacket,
    /// A veth pair, the DUT's end an AF_XDP uplink.
    AfXdp,
}

impl core::fmt::Display for Underlay {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Underlay::Memif => "memif",
            Underlay::AfPacket => "af-packet",
            Underlay::AfXdp => "af-xdp",
        })
    }
}

/// The DUT's end of the veth pair.
pub const DUT_IF: &str = "vl-dut";
/// The generator's end.
pub const GEN_IF: &str = "vl-gen";

/// The veth pair's MTU with AF_XDP: veth's native XDP takes frames of about 3.5 KB at most
/// (a page less its headroom), and veclane's AF_XDP uplink up to 3822 bytes with 4096-byte
/// UMEM frames.
pub const AF_XDP_MTU: u32 = 3000;
/// With AF_PACKET: room for VXLAN around a 9000-byte pod frame.
pub const AF_PACKET_MTU: u32 = 9216;

impl Underlay {
    /// Whether it runs over the kernel.
    pub fn is_kernel(self) -> bool {
        self != Underlay::Memif
    }

    /// The veth pair's MTU.
    pub fn mtu(self) -> u32 {
        match self {
            Underlay::AfXdp => AF_XDP_MTU,
            Underlay::Memif | Underlay::AfPacket => AF_PACKET_MTU,
        }
    }

    /// The largest frame (Ethernet header included, no FCS) the underlay carries.
    pub fn max_frame(self) -> usize {
        self.mtu() as usize + 14
    }
}

/// The namespace of the trial whose runtime directory is `dir`: one per harness process and
/// directory, so that two harnesses on one machine never share one.
pub fn netns_name(dir: &Path) -> String {
    // FNV-1a of the directory: short and stable.
    let h = dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("vlbench-{}-{:08x}", std::process::id(), h as u32)
}

/// A network namespace of the harness's, IPv6 off (no neighbour discovery or router
/// solicitation from the devices put in it); deleted, and the devices in it, when dropped.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Makes namespace `name` (one of ours by that name that an earlier start could not
    /// delete goes first).
    pub fn create(name: String) -> Result<Netns, DutError> {
        delete(&name);
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        for k in ["all", "default"] {
            ns.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{k}.disable_ipv6=1"),
            ])?;
        }
        Ok(ns)
    }

    /// Runs `cmd` inside the namespace; an error carries what it printed.
    pub fn exec(&self, cmd: &[&str]) -> Result<(), DutError> {
        let mut args = vec!["netns", "exec", &self.name];
        args.extend(cmd);
        ip(&args)
    }

    /// The namespace's file, for threads that enter it.
    pub fn path(&self) -> std::path::PathBuf {
        Path::new("/var/run/netns").join(&self.name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        delete(&self.name);
    }
}

/// A network namespace of the harness's holding the veth pair; deleted (and the pair with it)
/// when dropped.
#[derive(Debug)]
pub struct VethNetns {
    ns: Netns,
}

impl VethNetns {
    /// Makes namespace `name` with the pair [`DUT_IF`]–[`GEN_IF`] at `mtu` with `queues`
    /// queues each way (one per DUT worker: an AF_XDP uplink binds a socket to each), IPv6 off
    /// (no neighbour discovery or router solicitation reaches the generator), both ends up.
    /// Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2.
    pub fn create(name: &str, mtu: u32, queues: usize) -> Result<VethNetns, DutError> {
        if !rustix::process::geteuid().is_root() {
            return Err(DutError::Unsupported(
                "a kernel underlay needs root: it makes a network namespace and a veth pair".into(),
            ));
        }
        remove_stale();
        let ns = VethNetns {
            ns: Netns::create(name.into())?,
        };
        let (mtu, q) = (mtu.to_string(), queues.max(1).to_string());
        // Each end's MTU and queue counts, the same.
        let each = ["mtu", &mtu, "numtxqueues", &q, "numrxqueues", &q];
        let mut add = vec!["-n", name, "link", "add", DUT_IF];
        add.extend(each);
        add.extend(["type", "veth", "peer", "name", GEN_IF]);
        add.extend(each);
        ip(&add)?;
        for dev in [DUT_IF, GEN_IF] {
            ip(&["-n", name, "link", "set", dev, "up"])?;
        }
        Ok(ns)
    }

    /// Frames the veth pair dropped so far, each way: its ends' own counters (a full
    /// receive backlog, a failed transmit), read with `ip -s -j link`.
    pub fn losses(&self) -> Result<VethLosses, DutError> {
        let [dut, generator] = link_stats(&self.ns.name, [DUT_IF, GEN_IF])?;
        Ok(VethLosses {
            into_dut: generator.tx_dropped + dut.rx_dropped,
            out_of_dut: dut.tx_dropped + generator.rx_dropped,
        })
    }

    /// The command prefix that runs a program inside the namespace.
    pub fn exec_prefix(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.ns.name]
            .map(String::from)
            .to_vec()
    }
}

/// One device's packet counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LinkStats {
    pub tx: u64,
    pub rx: u64,
    pub tx_dropped: u64,
    pub rx_dropped: u64,
}

/// The counters of devices `devs` in namespace `ns`, read at once (`ip -s -j link`); a device
/// or a counter missing is an error.
pub(crate) fn link_stats<const N: usize>(
    ns: &str,
    devs: [&str; N],
) -> Result<[LinkStats; N], DutError> {
    let out = Command::new("ip")
        .args(["-n", ns, "-s", "-j", "link", "show"])
        .output()
        .map_err(DutError::io("cannot run ip -s -j link show"))?;
    let links: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| DutError::Unsupported(format!("ip -s -j link show in {ns}: {e}")))?;
    let mut got = [LinkStats::default(); N];
    for (g, dev) in got.iter_mut().zip(devs) {
        let s = links
            .as_array()
            .and_then(|a| a.iter().find(|l| l["ifname"] == dev))
            .map(|l| &l["stats64"]);
        let n = |dir: &str, k: &str| {
            s.and_then(|s| s[dir][k].as_u64()).ok_or_else(|| {
                DutError::Unsupported(format!(
                    "ip -s -j link show in {ns} has no {dir} {k} for {dev}"
                ))
            })
        };
        *g = LinkStats {
            tx: n("tx", "packets")?,
            rx: n("rx", "packets")?,
            tx_dropped: n("tx", "dropped")?,
            rx_dropped: n("rx", "dropped")?,
        };
    }
    Ok(got)
}

/// Frames a veth pair dropped, by direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VethLosses {
    /// From the generator's end towards the DUT's.
    pub into_dut: u64,
    /// From the DUT's end towards the generator's.
    pub out_of_dut: u64,
}

/// Deletes namespace `name` (and the veth ends in it), if it is there.
pub(crate) fn delete(name: &str) {
    let _ = Command::new("ip").args(["netns", "del", name]).output();
}

/// Deletes the namespaces of harnesses that are gone (killed before they could): those whose
/// name's pid no process has any more.
pub(crate) fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    let me = std::process::id();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let pid = name
            .strip_prefix("vlbench-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid
            && pid != me
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            delete(name);
        }
    }
}

/// Runs `ip ARGS`; an error carries the command and what it printed.
pub(crate) fn ip(args: &[&str]) -> Result<(), DutError> {
    let shown = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(DutError::io(format!("cannot run {shown}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(DutError::Unsupported(format!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_per_directory_and_fit_a_file_name() {
        let a = netns_name(Path::new("/tmp/a/veclane-64"));
        let b = netns_name(Path::new("/tmp/a/veclane-128"));
        assert_ne!(a, b);
        assert_eq!(a, netns_name(Path::new("/tmp/a/veclane-64")));
        assert!(a.starts_with("vlbench-") && a.len() < 40);
    }

    #[test]
    fn af_xdp_keeps_to_what_veth_xdp_takes() {
        assert!(Underlay::AfXdp.max_frame() >= 1518 + trafgen::frame::VXLAN_OVERHEAD);
        assert!(Underlay::AfXdp.mtu() < 3500);
        assert!(Underlay::AfPacket.max_frame() >= 9000 + trafgen::frame::VXLAN_OVERHEAD);
        assert!(!Underlay::Memif.is_kernel() && Underlay::AfXdp.is_kernel());
    }
}
