//! `[daemon]`: the workers and their cores, buffers, the copy engine, the control socket and
//! the metrics endpoint.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::is_zero;
use crate::types::{CopyEngine, CopyMode, RxMode};

/// Fewest local buffers per worker.
pub const MIN_BUFFERS: u32 = 1024;

/// `[daemon]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct DaemonSection {
    /// Cores, one worker pinned to each; empty: one unpinned worker.
    pub workers: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub main_core: Option<usize>,
    pub mode: RxMode,
    /// Local buffers per worker.
    pub buffers: u32,
    /// Trace records kept per worker.
    pub trace_capacity: usize,
    /// Runtime directory (sockets); default `$XDG_RUNTIME_DIR/veclane` or `/run/veclane`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_dir: Option<PathBuf>,
    /// The one directory `pcap trace` writes into (an absolute path); default the runtime
    /// directory. A trace file named elsewhere, or through a symbolic link, is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_dir: Option<PathBuf>,
    pub copy: CopyMode,
    pub copy_engine: CopyEngine,
    /// The DSA work queue(s) engines use: default every usable one discovery finds
    /// (`/sys/bus/dsa/devices`); a queue's name (`wq0.0`) or path (`/dev/dsa/wq0.0`) for only
    /// that one; `model` for the software model (tests only: no device is touched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dsa_queue: Option<String>,
    /// With `dsa-queue = "model"`: every that many descriptors, one stops part way with a
    /// page fault, which the engine finishes on the CPU (tests of the recovery path).
    #[serde(skip_serializing_if = "is_zero")]
    pub dsa_model_fault_every: u32,
    /// Copies shorter than this many bytes are made by the core at once, not offloaded to
    /// DSA (a descriptor costs the core more than a short copy); counted as `short`.
    #[serde(skip_serializing_if = "is_default_inline_below")]
    pub dsa_inline_below: u32,
    /// Where Prometheus / OpenMetrics metrics are served (`"127.0.0.1:9400"`); off when
    /// absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// Who may use the control socket (`ctl.sock`).
    #[serde(skip_serializing_if = "ControlSocket::is_default")]
    pub control_socket: ControlSocket,
    /// The most sessions (flows through services) the node keeps at once, split evenly
    /// between the workers; about 208 bytes each, allocated at start.
    #[serde(skip_serializing_if = "is_default_sessions")]
    pub sessions: u32,
    /// `[daemon.neighbours]`: caps and times of the neighbours learned from ARP.
    #[serde(skip_serializing_if = "NeighbourLimits::is_default")]
    pub neighbours: NeighbourLimits,
    /// The most MiB of memif regions mapped from peers at once, every interface together;
    /// default half the machine's memory. A region past it is refused (DISCONNECT says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memif_memory_mib: Option<u64>,
}

/// `[daemon.neighbours]`: what others' ARP can make the daemon learn. Beyond a cap a new
/// neighbour takes the place of the least recently heard learned one there if that one was
/// silent for `stale-seconds`, and is refused otherwise; a learned neighbour silent for
/// `age-seconds` is asked again (three ARP requests a second apart) and forgotten only if it
/// answers none. Static neighbours are outside all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct NeighbourLimits {
    /// Learned neighbours in all.
    pub max: u32,
    /// Learned neighbours on one interface (an uplink's hosts, a tunnel's remote pods).
    pub per_interface: u32,
    pub stale_seconds: u32,
    /// 0: never.
    pub age_seconds: u32,
}

impl Default for NeighbourLimits {
    fn default() -> NeighbourLimits {
        NeighbourLimits {
            max: 65536,
            per_interface: 4096,
            stale_seconds: 60,
            age_seconds: 3600,
        }
    }
}

/// The range of `[daemon.neighbours]`' caps.
pub const NEIGHBOUR_CAPS: std::ops::RangeInclusive<u32> = 1..=(1 << 20);

impl NeighbourLimits {
    fn is_default(&self) -> bool {
        *self == NeighbourLimits::default()
    }

    /// What is wrong with the values.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        for (k, v) in [("max", self.max), ("per-interface", self.per_interface)] {
            if !NEIGHBOUR_CAPS.contains(&v) {
                p.push(format!(
                    "[daemon.neighbours] {k} = {v} is out of range {}..={}",
                    NEIGHBOUR_CAPS.start(),
                    NEIGHBOUR_CAPS.end()
                ));
            }
        }
        p
    }
}

/// `[daemon] sessions` unless set.
pub const DEFAULT_SESSIONS: u32 = 131072;

/// The range `[daemon] sessions` may take.
pub const SESSIONS: std::ops::RangeInclusive<u32> = 1024..=(1 << 30);

fn is_default_sessions(n: &u32) -> bool {
    *n == DEFAULT_SESSIONS
}

/// `[daemon] control-socket`: the control socket's group and mode, so that operators in a
/// group can run `veclane ctl` without root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ControlSocket {
    /// Group name or number that owns the socket; default: the daemon's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Permission bits, in octal (`"0660"`); default: as created under the daemon's umask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

impl ControlSocket {
    fn is_default(&self) -> bool {
        *self == ControlSocket::default()
    }

    /// The mode as a number, if it is one (octal, at most 0o777).
    pub fn mode_bits(&self) -> Option<Result<u32, String>> {
        self.mode.as_ref().map(|m| {
            u32::from_str_radix(m.trim_start_matches("0o"), 8)
                .ok()
                .filter(|&b| b <= 0o777)
                .ok_or_else(|| {
                    format!("control-socket mode {m:?} is not octal permission bits like \"0660\"")
                })
        })
    }
}

fn is_default_inline_below(n: &u32) -> bool {
    *n == 256
}

/// The largest `dsa-inline-below`: a jumbo frame's buffer.
pub const MAX_DSA_INLINE_BELOW: u32 = 65536;

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            workers: Vec::new(),
            main_core: None,
            mode: RxMode::Adaptive,
            buffers: 32768,
            trace_capacity: 4096,
            runtime_dir: None,
            capture_dir: None,
            copy: CopyMode::Single,
            copy_engine: CopyEngine::Cpu,
            dsa_queue: None,
            dsa_model_fault_every: 0,
            dsa_inline_below: 256,
            metrics: None,
            control_socket: ControlSocket::default(),
            sessions: DEFAULT_SESSIONS,
            neighbours: NeighbourLimits::default(),
            memif_memory_mib: None,
        }
    }
}
