//! The daemon's configuration file (TOML) as typed values. The daemon reads it, `veclane run
//! --check-config` validates it, and the benchmark harness builds a [`Config`] and serializes
//! it; the control API creates interfaces with the same [`MemifSpec`].
//!
//! A file with problems gets all of them at once, each with its line and column: syntax
//! errors first (the parser recovers and goes on), then every section that does not
//! deserialize (one message per table: serde stops at a table's first bad key), then every
//! value the types cannot rule out (cores that do not exist, names used twice, references to
//! interfaces that are not there).
//!
//! Where things are: a section's types with their own checks in `daemon`, `interface` (memif,
//! tap), `uplink` (af-packet, af-xdp) and `network` (networks, routes, neighbours); reading a
//! file in `parse`; the checks across sections in `check`; here the whole [`Config`], its
//! TOML text and the embedded default.

mod check;
mod daemon;
mod interface;
mod network;
mod parse;
mod policy;
mod service;
mod uplink;

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use daemon::{
    ControlSocket, DaemonSection, MAX_DSA_INLINE_BELOW, MIN_BUFFERS, NeighbourLimits,
};
pub use interface::{
    MAX_TAP_QUEUES, MIN_MTU, MemifMode, MemifSpec, RING_SIZES, TapSpec, mtu_problem,
    region_limit_mib,
};
pub use network::{MAX_VNI, NeighborSpec, NetworkSpec, RouteSpec};
pub use parse::{ConfigError, Problem};
pub use policy::{AddressSetSpec, PolicySpec};
pub use service::{BackendSpec, MAX_BACKENDS, ServiceSpec};
pub use uplink::{AfPacketSpec, AfXdpSpec, RxRing, XdpMode};
// The tests name these through `super::*`, as they did when the sections' types lived here.
#[cfg(test)]
use crate::types::{CopyMode, RxMode, Via};

/// The CPUs this process may run on (its affinity mask: a container's cpuset, `taskset`), in
/// order, as first seen: a daemon reloading its file runs on a control thread pinned to one
/// of them by then. All of the machine's, counted, if the kernel will not say.
pub fn usable_cpus() -> &'static [usize] {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        let set = rustix::thread::sched_getaffinity(None).ok();
        let cpus: Vec<usize> = set
            .map(|s| {
                (0..rustix::thread::CpuSet::MAX_CPU)
                    .filter(|&c| s.is_set(c))
                    .collect()
            })
            .unwrap_or_default();
        if cpus.is_empty() {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        } else {
            cpus
        }
    })
}

/// CPUs as the kernel lists them: `0-3,6`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// [`DEFAULT_CONFIG`] placed on the CPUs this process may use (see
/// [`Config::embedded_default`]): what `veclane run` runs without a file, and what
/// `--print-default-config` prints.
pub fn default_config_text() -> String {
    let cpus = usable_cpus();
    let main = cpus.first().copied().unwrap_or(0);
    let worker = cpus.get(1).copied().unwrap_or(main);
    DEFAULT_CONFIG
        .replacen(DEFAULT_WORKERS, &format!("workers = [{worker}]"), 1)
        .replacen(DEFAULT_MAIN_CORE, &format!("main-core = {main}"), 1)
}

/// The placement lines of [`DEFAULT_CONFIG`] that [`default_config_text`] rewrites.
const DEFAULT_WORKERS: &str = "workers = [1]";
const DEFAULT_MAIN_CORE: &str = "main-core = 0";

/// The embedded default topology: generator → `memif0/0` → veclane → `memif0/1` → sink.
/// `veclane gen`'s default frames (10.10.1.2 → 10.10.2.2, destination MAC 02:00:00:00:00:02)
/// enter on `memif0/0` and leave on `memif0/1` towards the static neighbour 10.10.2.2.
pub const DEFAULT_CONFIG: &str = r#"
[daemon]
# One worker per listed core; the control thread runs on main-core. Embedded, the two are the
# first two CPUs the daemon may run on.
workers = [1]
main-core = 0
# Rx mode: polling (never sleeps), interrupt (sleeps whenever idle) or adaptive (polls while
# busy, sleeps on the memif eventfds after a millisecond without packets).
mode = "adaptive"
buffers = 32768
# Forwarding between memif interfaces: "single" copies each payload once, peer to peer
# (headers go through local buffers); "two" copies into local buffers and out again (VPP).
copy = "single"
# What executes memif payload copies: "cpu" (inline), "thread" (a copy thread, for tests and
# hosts with spare cores), "dsa" (an Intel DSA work queue; refused at start without one) or
# "auto" (DSA when a work queue is usable, else the CPU, saying why). An interface created
# with `use-dma` uses DSA whatever this says.
copy-engine = "cpu"

[[interface]]
socket = "memif.sock"
id = 0
role = "master"
mac = "02:00:00:00:00:02"
addresses = ["10.10.1.1/24"]

[[interface]]
socket = "memif.sock"
id = 1
role = "master"
mac = "02:00:00:00:01:02"
addresses = ["10.10.2.1/24"]

[[neighbor]]
interface = "memif0/1"
ip = "10.10.2.2"
mac = "02:00:00:00:00:01"
"#;

fn is_zero(v: &u32) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

fn is_true(v: &bool) -> bool {
    *v
}
fn yes() -> bool {
    true
}

/// The name an interface gets when its spec names none: `memif<socket index>/<id>`, the
/// socket index counting distinct sockets in the order they were first used.
pub fn default_interface_name(socket_index: usize, id: u32) -> String {
    format!("memif{socket_index}/{id}")
}

/// A whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub daemon: DaemonSection,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<NetworkSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interface: Vec<MemifSpec>,
    #[serde(default, rename = "af-packet", skip_serializing_if = "Vec::is_empty")]
    pub af_packet: Vec<AfPacketSpec>,
    #[serde(default, rename = "af-xdp", skip_serializing_if = "Vec::is_empty")]
    pub af_xdp: Vec<AfXdpSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<RouteSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbor: Vec<NeighborSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service: Vec<ServiceSpec>,
    #[serde(default, rename = "address-set", skip_serializing_if = "Vec::is_empty")]
    pub address_set: Vec<AddressSetSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy: Vec<PolicySpec>,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// The embedded default, placed on the CPUs this process may use: its control thread on
    /// the first, its worker on the second (the first too when it may use only one). A
    /// daemon confined to other CPUs than 0 and 1 (a container's cpuset) runs the default as
    /// well as one that is not.
    pub fn embedded_default() -> Config {
        Config::parse(&default_config_text(), "embedded default")
            .expect("the embedded default is valid on the CPUs it is placed on")
    }

    /// The configuration as a TOML document that [`Config::parse`] reads back equal.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("every field serializes to TOML")
    }

    /// Checks a configuration built in code: the same checks as [`Config::parse`], without
    /// positions.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let problems: Vec<Problem> = self
            .semantic_problems()
            .into_iter()
            .map(|(_, message)| Problem { at: None, message })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid {
                origin: origin.to_string(),
                problems,
            })
        }
    }

    /// The names interfaces get, memif ones first, then af-packet, then af-xdp ones, in order:
    /// their own, or [`default_interface_name`] / `host-<host-if>` / `xdp-<host-if>`.
    pub fn interface_names(&self) -> Vec<String> {
        let mut v = self.memif_names();
        v.extend(self.af_packet.iter().map(AfPacketSpec::name));
        v.extend(self.af_xdp.iter().map(AfXdpSpec::name));
        v
    }

    /// The names of the `[[interface]]` (memif) entries, in order.
    pub fn memif_names(&self) -> Vec<String> {
        let mut sockets: Vec<&str> = Vec::new();
        self.interface
            .iter()
            .map(|i| {
                let s = sockets
                    .iter()
                    .position(|s| *s == i.socket)
                    .unwrap_or_else(|| {
                        sockets.push(&i.socket);
                        sockets.len() - 1
                    });
                i.name
                    .clone()
                    .unwrap_or_else(|| default_interface_name(s, i.id))
            })
            .collect()
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_toml())
    }
}

#[cfg(test)]
mod tests;
