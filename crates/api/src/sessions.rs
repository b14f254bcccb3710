//! What `show service` and `show session` report.

use serde::{Deserialize, Serialize};

use crate::config::ServiceSpec;

/// A service as the daemon holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceInfo {
    pub spec: ServiceSpec,
    /// Its live sessions.
    pub sessions: u64,
}

/// Which sessions `show session` lists (all unset: every session, up to `limit`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Sessions whose client (forward source) is this address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<std::net::Ipv4Addr>,
    /// At most this many (default [`SESSION_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// How many sessions `show session` lists unless told.
pub const SESSION_LIMIT: u32 = 1000;

/// One session: a flow as its client sent it, and what it was translated to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The network (or, outside networks, the table) it lives in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    pub table: u32,
    /// `tcp`, `udp` or the IP protocol number.
    pub protocol: String,
    /// The client's address and port, and where it sent to.
    pub client: String,
    pub destination: String,
    /// Where the flow goes after translation (its backend), if it is translated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// `tcp-embryonic`, `tcp-established`, `tcp-closing`, `udp-unreplied`, `udp-replied`,
    /// `icmp`; `killed` for one waiting to be freed.
    pub state: String,
    /// Milliseconds since its last packet.
    pub idle_ms: u32,
}

/// The session table's use and its workers' counters, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionTotals {
    pub capacity: u64,
    pub live: u64,
    pub memory_bytes: u64,
    pub created: u64,
    pub refused_full: u64,
    pub evicted_embryonic: u64,
    pub expired: u64,
    pub killed: u64,
}

/// `show policy`: every policy with the interfaces it names, the address sets, and each
/// interface's compiled rules with their hit counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyReport {
    pub policies: Vec<PolicyInfo>,
    pub sets: Vec<AddressSetInfo>,
    pub interfaces: Vec<InterfacePolicy>,
}

pub type PolicyInfo = crate::config::PolicySpec;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressSetInfo {
    pub name: String,
    pub members: usize,
}

/// One interface's policies as compiled: which apply, whether each direction is isolated,
/// each rule's hits (new flows it allowed) and each direction's denied flows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfacePolicy {
    pub interface: String,
    pub policies: Vec<String>,
    pub ingress_isolated: bool,
    pub egress_isolated: bool,
    pub counters: Vec<(String, u64)>,
    /// Sets named by a rule that do not exist (yet): such a rule matches nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}
