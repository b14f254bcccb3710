//! Driving FD.io VPP as a device under test, in the harness's topologies: l3fwd (two memif
//! masters and a route between them) and the seeds' node switch in singlenet and multinet
//! (an uplink memif and a pod memif per network; multinet with a VRF and a VXLAN tunnel per
//! network, see [`crate::node::vpp_topology`]).
//!
//! Checked against VPP 25.10 built by `scripts/build-vpp.sh`: the tests in
//! `crates/veclane/tests/vpp.rs` start it whenever that build (or `vpp` on PATH) exists.
//!
//! [`spawn`] writes `startup.conf` into a directory of its own and runs `vpp -c startup.conf`:
//! no hugepages (4 KiB pages for the main heap and the buffers), every plugin disabled but
//! memif (and vxlan where the topology asks for it), the main thread on the generator CPU and
//! a worker on each DUT CPU, the CLI, API and stats sockets in that directory (so instances do
//! not collide with a system VPP). It then configures the topology through `vppctl -s
//! DIR/cli.sock` (the `vppctl` next to the `vpp` binary, else on PATH); for l3fwd that is
//! what [`crate::l3fwd::veclane_config`] gives veclane:
//!
//! ```text
//! create memif socket id 1 filename DIR/memif.sock
//! create interface memif id 0 socket-id 1 ring-size R buffer-size B hw-addr 02:00:00:00:00:02 master
//! create interface memif id 1 socket-id 1 ring-size R buffer-size B hw-addr 02:00:00:00:01:02 master
//! set interface ip address memif1/0 10.10.1.1/24
//! set interface ip address memif1/1 10.10.2.1/24
//! set ip neighbor memif1/1 10.10.2.2 GEN_MAC static
//! set interface state memif1/0 up
//! set interface state memif1/1 up
//! ```
//!
//! The memif rx queues are created when the generator connects, in VPP's default rx mode,
//! polling; the workers poll them (only workers poll once workers exist). With N workers every
//! memif gets N queue pairs (`rx-queues N tx-queues N`) and VPP places rx queues on the
//! workers round robin. VPP's path per frame in l3fwd: memif-input, ethernet-input, ip4-input
//! (checksum, length, TTL), ip4-lookup, ip4-rewrite, memif1/1-output, memif1/1-tx; memif
//! input copies into VPP buffers and memif output copies out of them (two copies, like
//! veclane's `copy = "two"`).
//!
//! Counters for the cross-check come from `show interface` ([`parse_show_interface`]), per
//! node clocks from `show runtime` ([`parse_show_runtime`]), converted to nanoseconds with the
//! TSC rate `show cpu` reports. A configuration command succeeded when the CLI printed nothing
//! (VPP prints the error otherwise), except the `create` commands, which print the new
//! interface's name.

/// Reading what the CLI prints: `show interface`, `show errors`, `show cpu`, `show runtime`.
mod parse;
/// The running process and its CLI.
mod process;
/// `startup.conf`, and the CLI commands that build a topology.
mod startup;

use std::path::{Path, PathBuf};

use crate::node::mac_str;
use crate::proc::on_path;

pub use parse::{
    VppInterface, no_free_tx_slots, parse_base_ghz, parse_show_interface, parse_show_runtime,
};
pub use process::{Vpp, check_reply, spawn};
pub use startup::{setup_commands, startup_conf};

/// The program, as errors name it.
const DUT: &str = "vpp";

/// The memif socket id VPP knows our socket by (0 is VPP's default socket).
pub const SOCKET_ID: u32 = 1;
/// The interface the generator sends to (memif id 0) and its MAC (veclane's memif0/0).
pub const IF_IN: &str = "memif1/0";
pub const IF_IN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// The interface VPP forwards to (memif id 1) and its MAC (veclane's memif0/1).
pub const IF_OUT: &str = "memif1/1";
pub const IF_OUT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x02];

/// Why `--cost` (callgrind) cannot measure VPP, and what stands in for it.
pub const NO_COST: &str = "VPP cannot run under callgrind: its physical-memory allocator maps the buffer pool with MAP_FIXED into a range it reserved (pmalloc at 0x1000000000), which valgrind refuses (\"pmalloc_map_pages: failed to mmap 32 pages ... Invalid argument\", then \"failed to allocate buffer pool(s)\"); and this machine's VM exposes no hardware PMU for perf to count instructions with. VPP's own show runtime (clocks per packet per node, in ns in every run's per-node table) is the measure instead";

/// What a VPP instance is given.
#[derive(Debug, Clone)]
pub struct VppConfig {
    /// VPP's main thread (CLI, memif connection handling; it does not poll interfaces once
    /// there is a worker).
    pub gen_cpu: usize,
    /// The workers' CPUs: worker `i` polls queue `i` of every interface (VPP places rx
    /// queues on workers round robin). None: the main thread polls them.
    pub workers: Vec<usize>,
    pub ring_log2: u8,
    pub buffer_size: u32,
    /// What VPP is set up as.
    pub topology: VppTopology,
}

impl VppConfig {
    /// 1024-slot rings, 2048-byte buffers, the l3fwd topology.
    pub fn new(gen_cpu: usize, dut_cpu: usize) -> VppConfig {
        VppConfig {
            gen_cpu,
            workers: vec![dut_cpu],
            ring_log2: 10,
            buffer_size: 2048,
            topology: VppTopology::l3fwd(trafgen::FrameSpec::default().src_mac.0),
        }
    }
}

/// A topology as VPP is told it: memif masters on one socket, then CLI commands, and the
/// interfaces whose counters face the generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VppTopology {
    /// The memif interfaces (id, MAC), created first and brought up last.
    pub memifs: Vec<(u32, [u8; 6])>,
    /// `None`: they are masters on a socket in VPP's own directory
    /// ([`Vpp::memif_socket`]); a path: they are slaves connecting to that socket.
    pub slave_of: Option<PathBuf>,
    /// Everything between: addresses, tables, tunnels, neighbours, routes.
    pub commands: Vec<String>,
    /// Plugins beside memif (`vxlan` for multinet).
    pub plugins: Vec<&'static str>,
    /// Interfaces on which frames from the generator arrive, and from which frames for it
    /// leave (summed for [`RunningDut::counts`]).
    pub rx_from: Vec<String>,
    pub tx_to: Vec<String>,
}

impl VppTopology {
    /// veclane's l3fwd: 10.10.1.0/24 on memif id 0, 10.10.2.0/24 on id 1, the generator
    /// (`gen_mac`) at 10.10.2.2.
    pub fn l3fwd(gen_mac: [u8; 6]) -> VppTopology {
        VppTopology {
            memifs: vec![(0, IF_IN_MAC), (1, IF_OUT_MAC)],
            slave_of: None,
            commands: vec![
                format!("set interface ip address {IF_IN} 10.10.1.1/24"),
                format!("set interface ip address {IF_OUT} 10.10.2.1/24"),
                format!(
                    "set ip neighbor {IF_OUT} 10.10.2.2 {} static",
                    mac_str(gen_mac)
                ),
            ],
            plugins: Vec::new(),
            rx_from: vec![IF_IN.into()],
            tx_to: vec![IF_OUT.into()],
        }
    }
}

/// The name VPP gives memif `id` on our socket.
pub fn memif_name(id: u32) -> String {
    format!("memif{SOCKET_ID}/{id}")
}

/// `explicit` if given, else `vpp` on PATH, else `/usr/bin/vpp`, else the newest build
/// `scripts/build-vpp.sh` finished in its cache ([`cached`]); `None` if none is a file.
pub fn find(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    on_path("vpp")
        .or_else(|| {
            let p = PathBuf::from("/usr/bin/vpp");
            p.is_file().then_some(p)
        })
        .or_else(cached)
}

/// The `vpp` of the newest finished build in `scripts/build-vpp.sh`'s cache,
/// `${XDG_CACHE_HOME:-~/.cache}/veclane/vpp-*/build/bin/vpp` beside a `done` stamp.
pub fn cached() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?
        .join("veclane");
    std::fs::read_dir(base)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("vpp-"))
        .filter_map(|e| {
            let done = e.path().join("done");
            let bin = e.path().join("build/bin/vpp");
            let at = done.metadata().and_then(|m| m.modified()).ok()?;
            bin.is_file().then_some((at, bin))
        })
        .max_by_key(|(at, _)| *at)
        .map(|(_, bin)| bin)
}

/// The `vppctl` next to `vpp_bin`, else on PATH.
pub fn find_vppctl(vpp_bin: &Path) -> Option<PathBuf> {
    let sibling = vpp_bin.with_file_name("vppctl");
    if sibling.is_file() {
        return Some(sibling);
    }
    on_path("vppctl")
}
