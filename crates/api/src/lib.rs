//! The control API: one typed set of requests and replies, spoken as one JSON object per
//! line over the daemon's unix stream socket. `veclane ctl` and the CNI plugin are thin
//! clients of it; [`cli`] maps VPP-like command lines onto [`Request`]s and formats
//! [`Reply`]s as text.

#![forbid(unsafe_code)]

pub mod cli;
pub mod config;
pub mod sessions;
pub mod show;
pub mod types;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use config::{
    AddressSetSpec, AfPacketSpec, AfXdpSpec, BackendSpec, Config, MemifMode, MemifSpec,
    NeighborSpec, NeighbourLimits, NetworkSpec, PolicySpec, RouteSpec, RxRing, ServiceSpec,
    TapSpec, XdpMode,
};
pub use sessions::{
    AddressSetInfo, InterfacePolicy, PolicyInfo, PolicyReport, ServiceInfo, SessionFilter,
    SessionInfo, SessionTotals,
};
pub use show::{
    CopyEngineInfo, DeviceInfo, EngineInfo, ErrorCount, FibEntry, FibTableSize, InterfaceInfo,
    MemifRegions, Neighbor, NeighbourTotals, NetworkInfo, NodeRuntime, Placement, TunnelInfo,
    WorkerBuffers, WorkerRuntime,
};
pub use types::{
    BackendState, CopyEngine, CopyMode, Ipv4Prefix, MacAddr, ParseError, Protocol, Role, RxMode,
    Via, parse_ipv4, parse_mac, vxlan_tunnel_mac,
};

/// File name of the control socket inside the runtime directory.
pub const CONTROL_SOCKET: &str = "ctl.sock";

/// The control API's version: in every request a client of this build sends and every reply
/// the daemon sends (`"api": 1`), so that a `veclane ctl` and a daemon of builds that do not
/// speak the same API say so instead of misreading each other. It changes when a request or
/// reply changes in a way an older peer would misread.
pub const API_VERSION: u32 = 1;

/// Adds `"api": API_VERSION` to a request's or reply's JSON object.
pub fn with_version<T: Serialize>(v: &T) -> Result<String, serde_json::Error> {
    let mut j = serde_json::to_value(v)?;
    if let Some(o) = j.as_object_mut() {
        o.insert("api".into(), API_VERSION.into());
    }
    serde_json::to_string(&j)
}

/// Splits the `"api"` field off a request's or reply's JSON: the version it names (`None`:
/// it names none, as a client older than versions does) and the rest.
pub fn split_version(line: &[u8]) -> Result<(Option<u64>, serde_json::Value), serde_json::Error> {
    let mut j: serde_json::Value = serde_json::from_slice(line)?;
    let v = j
        .as_object_mut()
        .and_then(|o| o.remove("api"))
        .and_then(|v| v.as_u64());
    Ok((v, j))
}

/// The daemon's runtime directory: `$XDG_RUNTIME_DIR/veclane` when that variable is set,
/// else `/run/veclane`.
pub fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("veclane"),
        _ => PathBuf::from("/run/veclane"),
    }
}

/// A capture point of `pcap trace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CapturePoint {
    Rx,
    Tx,
    Drop,
}

/// What `clear` resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clear {
    Runtime,
    Errors,
    Trace,
    Interfaces,
}

/// Every request the daemon serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    ShowVersion,
    ShowInterface {
        #[serde(default)]
        name: Option<String>,
    },
    ShowRxPlacement,
    ShowRuntime,
    /// Each worker's buffer pool: its size and how many buffers are free.
    ShowBuffers,
    /// The copy engines: what was configured and chosen, DSA work queues found (and why
    /// others are not usable), each worker's engines and their counters.
    ShowCopyEngine,
    ShowErrors,
    ShowTrace,
    TraceAdd {
        node: String,
        count: u32,
    },
    Clear {
        what: Clear,
    },
    CreateMemif(MemifSpec),
    /// Deletes an interface with its addresses, routes, neighbours and queues.
    DeleteInterface {
        name: String,
    },
    SetState {
        interface: String,
        up: bool,
    },
    SetIpAddress {
        interface: String,
        address: Ipv4Prefix,
        #[serde(default)]
        delete: bool,
    },
    SetIpTable {
        interface: String,
        table: u32,
    },
    /// Adds or deletes a static route (deleting ignores `via` and `interface`).
    IpRoute {
        add: bool,
        route: RouteSpec,
    },
    ShowIpFib {
        #[serde(default)]
        table: Option<u32>,
    },
    /// How many routes each table holds (what a metrics scrape asks for).
    ShowIpFibSummary,
    ShowIpNeighbors,
    /// The neighbour table's totals without its entries (what a metrics scrape asks for):
    /// a `Neighbors` reply with no neighbours.
    ShowIpNeighborSummary,
    /// Adds a network (and allocates its VRF).
    NetworkAdd(NetworkSpec),
    /// Deletes a network that no interface is attached to (and frees its VRF).
    NetworkDel {
        name: String,
    },
    ShowNetwork,
    /// Every VXLAN tunnel with its counters.
    ShowVxlanTunnel,
    /// Sets an interface's MTU (the largest IPv4 packet it sends).
    SetInterfaceMtu {
        interface: String,
        mtu: u16,
    },
    /// Replaces an interface's allowed sources (anti-spoofing): `None` turns the check off,
    /// an empty list accepts no source.
    SetAllowedSources {
        interface: String,
        #[serde(default)]
        sources: Option<Vec<Ipv4Prefix>>,
    },
    /// Adds a service, or replaces the one of its name (backends that leave have their
    /// sessions flushed).
    ServiceAdd(ServiceSpec),
    /// Deletes a service and flushes its sessions.
    ServiceDel {
        name: String,
    },
    ShowService,
    ShowSession {
        #[serde(default)]
        filter: SessionFilter,
    },
    /// Adds a network policy, or replaces the one of its name, applied to the interfaces
    /// named (an interface named before it exists gets it when it is created). Established
    /// flows are judged again by the new rules.
    PolicyAdd(PolicySpec),
    PolicyDel {
        name: String,
    },
    /// Adds a named address set (policies' peers), or replaces the one of its name.
    AddressSetAdd(AddressSetSpec),
    AddressSetDel {
        name: String,
    },
    ShowPolicy,
    CreateAfPacket(AfPacketSpec),
    CreateAfXdp(AfXdpSpec),
    CreateTap(TapSpec),
    SetIpNeighbor {
        neighbor: NeighborSpec,
        #[serde(default)]
        delete: bool,
    },
    PcapOn {
        points: Vec<CapturePoint>,
        /// Interface name, or `any`.
        interface: String,
        file: String,
        #[serde(default)]
        max_packets: Option<u32>,
    },
    PcapOff,
}

impl Request {
    /// Whether it changes the daemon's configuration (interfaces, addresses, routes,
    /// neighbours, networks, MTUs), as opposed to reading state, clearing counters, tracing
    /// or capturing. Changes are logged. A property of the request, not of a `veclane ctl`
    /// verb (`cli::COMMANDS`): the daemon asks it of requests from every client, and the CNI
    /// plugin sends them without the command language.
    pub fn is_change(&self) -> bool {
        !matches!(
            self,
            Request::ShowVersion
                | Request::ShowInterface { .. }
                | Request::ShowRxPlacement
                | Request::ShowRuntime
                | Request::ShowBuffers
                | Request::ShowCopyEngine
                | Request::ShowErrors
                | Request::ShowTrace
                | Request::TraceAdd { .. }
                | Request::Clear { .. }
                | Request::ShowIpFib { .. }
                | Request::ShowIpFibSummary
                | Request::ShowIpNeighbors
                | Request::ShowIpNeighborSummary
                | Request::ShowNetwork
                | Request::ShowVxlanTunnel
                | Request::ShowService
                | Request::ShowSession { .. }
                | Request::ShowPolicy
                | Request::PcapOn { .. }
                | Request::PcapOff
        )
    }
}

/// What kind of refusal an error reply is, for clients that act on it without reading the
/// message's words (the CNI plugin's DEL takes [`ErrorCode::NoInterface`] as already done).
/// A reply from a daemon older than codes has none and reads as [`ErrorCode::Refused`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The client and the daemon speak different control API versions.
    Version,
    /// The request line could not be parsed, or is too long.
    Malformed,
    /// The request names an interface that does not exist.
    NoInterface,
    /// Any other request the daemon refuses: a bad value, a conflict.
    #[default]
    Refused,
    /// The daemon failed to carry out a valid request (a worker did not answer, a write
    /// failed).
    Internal,
}

/// Every reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Ok,
    Error {
        #[serde(default)]
        code: ErrorCode,
        message: String,
    },
    Version {
        version: String,
        workers: usize,
        runtime_dir: String,
    },
    Interfaces {
        interfaces: Vec<InterfaceInfo>,
    },
    RxPlacement {
        placement: Vec<Placement>,
    },
    Runtime {
        workers: Vec<WorkerRuntime>,
    },
    Buffers {
        workers: Vec<WorkerBuffers>,
        /// Peers' memif regions mapped, against their budget.
        #[serde(default)]
        regions: MemifRegions,
    },
    CopyEngine {
        info: CopyEngineInfo,
    },
    Errors {
        errors: Vec<ErrorCount>,
    },
    Trace {
        text: String,
    },
    Created {
        name: String,
        index: u32,
    },
    Fib {
        entries: Vec<FibEntry>,
    },
    FibSummary {
        tables: Vec<FibTableSize>,
    },
    Networks {
        networks: Vec<NetworkInfo>,
    },
    Tunnels {
        tunnels: Vec<TunnelInfo>,
    },
    Services {
        services: Vec<ServiceInfo>,
    },
    Sessions {
        sessions: Vec<SessionInfo>,
        totals: SessionTotals,
    },
    Policies {
        report: PolicyReport,
    },
    Neighbors {
        neighbors: Vec<Neighbor>,
        #[serde(default)]
        totals: NeighbourTotals,
    },
    Pcap {
        file: String,
        packets: u64,
        missed: u64,
    },
}

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot reach the daemon at {path}: {source} (is `veclane run` running? --socket names another)"
    )]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("control socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("daemon sent a reply we cannot parse: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("daemon closed the connection without a reply")]
    Closed,
    #[error(
        "the daemon speaks control API {daemon} and this veclane speaks {ours}: use the veclane \
         binary of the daemon's build (`veclane --version` on both)"
    )]
    Version { daemon: String, ours: u32 },
    #[error("{message}")]
    Daemon { code: ErrorCode, message: String },
}

/// A connection to the daemon.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.display().to_string(),
            source,
        })?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Client {
            writer: s.try_clone()?,
            reader: BufReader::new(s),
        })
    }

    /// Sends one request and waits for its reply; `Reply::Error` becomes `ClientError::Daemon`.
    pub fn call(&mut self, req: &Request) -> Result<Reply, ClientError> {
        let mut line = with_version(req)?;
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        let mut buf = String::new();
        if self.reader.read_line(&mut buf)? == 0 {
            return Err(ClientError::Closed);
        }
        let (version, j) = split_version(buf.as_bytes())?;
        if version != Some(u64::from(API_VERSION)) {
            // The daemon's error about our version says it best, if that is what it sent.
            if let Ok(Reply::Error {
                code: ErrorCode::Version,
                message,
            }) = serde_json::from_value::<Reply>(j.clone())
            {
                return Err(ClientError::Daemon {
                    code: ErrorCode::Version,
                    message,
                });
            }
            return Err(ClientError::Version {
                daemon: version.map_or("(none: older than versions)".into(), |v| v.to_string()),
                ours: API_VERSION,
            });
        }
        match serde_json::from_value(j)? {
            Reply::Error { code, message } => Err(ClientError::Daemon { code, message }),
            r => Ok(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_is_stable() {
        let r = Request::TraceAdd {
            node: "memif-input".into(),
            count: 50,
        };
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(
            j,
            r#"{"request":"trace_add","node":"memif-input","count":50}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&j).unwrap(), r);
        let e: Request = serde_json::from_str(r#"{"request":"show_interface"}"#).unwrap();
        assert_eq!(e, Request::ShowInterface { name: None });
        assert!(serde_json::from_str::<Request>(r#"{"request":"reboot"}"#).is_err());
    }

    #[test]
    fn error_replies_carry_a_code_and_older_ones_read_as_refused() {
        let r = Reply::Error {
            code: ErrorCode::NoInterface,
            message: "no interface named \"tap9\"".into(),
        };
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(
            j,
            r#"{"reply":"error","code":"no_interface","message":"no interface named \"tap9\""}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&j).unwrap(), r);
        let old: Reply = serde_json::from_str(r#"{"reply":"error","message":"x"}"#).unwrap();
        assert_eq!(
            old,
            Reply::Error {
                code: ErrorCode::Refused,
                message: "x".into()
            }
        );
    }
}
