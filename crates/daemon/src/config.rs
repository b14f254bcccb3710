//! The daemon's configuration file (TOML). With no file the daemon starts on
//! [`DEFAULT_CONFIG`], which needs no root: two memif master interfaces on one socket in the
//! runtime directory, routed to each other, ready for `veclane gen` on both sides.

use std::path::Path;

use serde::Deserialize;

/// The embedded default topology: generator → `memif0/0` → veclane → `memif0/1` → sink.
/// `veclane gen`'s default frames (10.10.1.2 → 10.10.2.2, destination MAC 02:00:00:00:00:02)
/// enter on `memif0/0` and leave on `memif0/1` towards the static neighbour 10.10.2.2.
pub const DEFAULT_CONFIG: &str = r#"
[daemon]
# One worker per listed core; the control thread runs on main-core.
workers = [1]
main-core = 0
# Rx mode: polling (never sleeps), interrupt (sleeps whenever idle) or adaptive (polls while
# busy, sleeps on the memif eventfds after a millisecond without packets).
mode = "adaptive"
buffers = 32768
# Forwarding between memif interfaces: "single" copies each payload once, peer to peer
# (headers go through local buffers); "two" copies into local buffers and out again (VPP).
copy = "single"
# What executes payload copies: "cpu" (inline) or "thread" (a copy thread, for tests and
# hosts with spare cores; Intel DSA plugs in here).
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

/// How workers wait for packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RxMode {
    Polling,
    Interrupt,
    Adaptive,
}

impl std::fmt::Display for RxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RxMode::Polling => "polling",
            RxMode::Interrupt => "interrupt",
            RxMode::Adaptive => "adaptive",
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DaemonSection {
    /// Cores, one worker pinned to each; empty: one unpinned worker.
    #[serde(default)]
    pub workers: Vec<usize>,
    #[serde(default)]
    pub main_core: Option<usize>,
    #[serde(default = "default_mode")]
    pub mode: RxMode,
    /// Local buffers per worker.
    #[serde(default = "default_buffers")]
    pub buffers: u32,
    /// Trace records kept per worker.
    #[serde(default = "default_trace")]
    pub trace_capacity: usize,
    /// Runtime directory (sockets); default `$XDG_RUNTIME_DIR/veclane` or `/run/veclane`.
    #[serde(default)]
    pub runtime_dir: Option<String>,
    #[serde(default = "default_copy")]
    pub copy: CopyMode,
    #[serde(default = "default_engine")]
    pub copy_engine: String,
}

/// How payloads travel between memif interfaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyMode {
    Single,
    Two,
}

fn default_copy() -> CopyMode {
    CopyMode::Single
}
fn default_engine() -> String {
    "cpu".into()
}

fn default_mode() -> RxMode {
    RxMode::Adaptive
}
fn default_buffers() -> u32 {
    32768
}
fn default_trace() -> usize {
    4096
}

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            workers: Vec::new(),
            main_core: None,
            mode: default_mode(),
            buffers: default_buffers(),
            trace_capacity: default_trace(),
            runtime_dir: None,
            copy: default_copy(),
            copy_engine: default_engine(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct InterfaceSection {
    #[serde(default)]
    pub name: Option<String>,
    pub socket: String,
    pub id: u32,
    pub role: api::Role,
    #[serde(default)]
    pub mac: Option<String>,
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub table: u32,
    #[serde(default)]
    pub rx_queues: Option<u16>,
    #[serde(default)]
    pub tx_queues: Option<u16>,
    #[serde(default)]
    pub ring_size: Option<u32>,
    #[serde(default)]
    pub buffer_size: Option<u32>,
    #[serde(default)]
    pub secret: Option<String>,
    /// Core of the worker that polls each rx queue, in queue order (default: round robin).
    #[serde(default)]
    pub rx_placement: Vec<usize>,
    #[serde(default = "yes")]
    pub up: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSection {
    pub prefix: String,
    pub via: String,
    #[serde(default)]
    pub interface: Option<String>,
    #[serde(default)]
    pub table: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighborSection {
    pub interface: String,
    pub ip: String,
    pub mac: String,
}

/// A whole configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub daemon: DaemonSection,
    #[serde(default)]
    pub interface: Vec<InterfaceSection>,
    #[serde(default)]
    pub route: Vec<RouteSection>,
    #[serde(default)]
    pub neighbor: Vec<NeighborSection>,
}

/// A configuration that cannot be used; the message names the file, the place and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Parse { path: String, msg: String },
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_string(),
            msg: e.to_string(),
        })?;
        c.validate()?;
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    pub fn embedded_default() -> Config {
        Config::parse(DEFAULT_CONFIG, "embedded default").expect("the embedded default is valid")
    }

    /// Checks what the types cannot: values, cross references.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
        for &c in self
            .daemon
            .workers
            .iter()
            .chain(self.daemon.main_core.iter())
        {
            if c >= ncpu {
                return bad(format!(
                    "[daemon] core {c} does not exist: this machine has cores 0..{}",
                    ncpu - 1
                ));
            }
        }
        for (i, w) in self.daemon.workers.iter().enumerate() {
            if self.daemon.workers[..i].contains(w) {
                return bad(format!("[daemon] workers lists core {w} twice"));
            }
        }
        if let Err(e) = self.daemon.copy_engine.parse::<copy_engine::Kind>() {
            return bad(format!("[daemon] copy-engine: {e}"));
        }
        if self.daemon.buffers < 1024 {
            return bad(format!(
                "[daemon] buffers = {} is too few: at least 1024 per worker",
                self.daemon.buffers
            ));
        }
        for (k, i) in self.interface.iter().enumerate() {
            let at = format!(
                "[[interface]] #{} (socket {:?} id {})",
                k + 1,
                i.socket,
                i.id
            );
            if let Some(m) = &i.mac
                && api::cli::parse_mac(m).is_none()
            {
                return bad(format!("{at}: mac {m:?} is not aa:bb:cc:dd:ee:ff"));
            }
            for a in &i.addresses {
                if api::cli::parse_prefix(a).is_none() {
                    return bad(format!("{at}: address {a:?} is not A.B.C.D/L"));
                }
            }
            for &c in &i.rx_placement {
                if !self.daemon.workers.contains(&c) {
                    return bad(format!(
                        "{at}: rx-placement core {c} has no worker (workers = {:?})",
                        self.daemon.workers
                    ));
                }
            }
            if self.interface[..k]
                .iter()
                .any(|o| o.socket == i.socket && o.id == i.id)
            {
                return bad(format!("{at}: socket and id used twice"));
            }
        }
        for r in &self.route {
            if api::cli::parse_prefix(&r.prefix).is_none() {
                return bad(format!("[[route]] prefix {:?} is not A.B.C.D/L", r.prefix));
            }
        }
        for n in &self.neighbor {
            if api::cli::parse_mac(&n.mac).is_none() || n.ip.parse::<std::net::Ipv4Addr>().is_err()
            {
                return bad(format!(
                    "[[neighbor]] {} {}: need ip = \"A.B.C.D\" and mac = \"aa:bb:cc:dd:ee:ff\"",
                    n.ip, n.mac
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses() {
        let c = Config::embedded_default();
        assert_eq!(c.interface.len(), 2);
        assert_eq!(c.daemon.mode, RxMode::Adaptive);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Config::parse("[daemon]\nworkerz = [1]\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("workerz"), "{e}");
        let e = Config::parse(
            "[[interface]]\nsocket = \"a\"\nid = 0\nrole = \"master\"\nmac = \"nope\"\n",
            "x.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("\"nope\""), "{e}");
        let e = Config::parse(
            "[[interface]]\nsocket = \"a\"\nid = 0\nrole = \"boss\"\n",
            "x.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("boss"), "{e}");
        let e = Config::parse("[daemon]\nworkers = [999]\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("core 999"), "{e}");
        let e = Config::parse(
            "[[route]]\nprefix = \"1.2.3.0/40\"\nvia = \"1.1.1.1\"\n",
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("1.2.3.0/40"), "{e}");
    }
}
