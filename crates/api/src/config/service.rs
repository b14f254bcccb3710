//! Services (`service add`, `[[service]]`): a VIP, port and protocol in one network balanced
//! over backends, with Kubernetes' endpoint states.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::is_zero;
use crate::types::{BackendState, Protocol};

fn is_ready(s: &BackendState) -> bool {
    *s == BackendState::Ready
}

/// One backend of a service. A backend that leaves the list has its sessions flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSpec {
    pub addr: Ipv4Addr,
    pub port: u16,
    #[serde(default, skip_serializing_if = "is_ready")]
    pub state: BackendState,
}

impl std::str::FromStr for BackendSpec {
    type Err = String;
    /// `A.B.C.D:PORT[=ready|terminating|not-ready]`.
    fn from_str(s: &str) -> Result<BackendSpec, String> {
        let (ap, state) = match s.split_once('=') {
            Some((ap, st)) => (
                ap,
                st.parse().map_err(|e: crate::ParseError| e.to_string())?,
            ),
            None => (s, BackendState::Ready),
        };
        let (a, p) = ap
            .split_once(':')
            .ok_or_else(|| format!("backend {s:?}: expected A.B.C.D:PORT"))?;
        let addr = a
            .parse()
            .map_err(|_| format!("backend {s:?}: {a:?} is no IPv4 address"))?;
        let port = p
            .parse()
            .map_err(|_| format!("backend {s:?}: {p:?} is no port"))?;
        Ok(BackendSpec { addr, port, state })
    }
}

impl std::fmt::Display for BackendSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.addr, self.port)?;
        if self.state != BackendState::Ready {
            write!(f, "={}", self.state)?;
        }
        Ok(())
    }
}

/// `[[service]]` and `service add`: flows to `vip:port` over `protocol`, in a network (or a
/// table), balanced over `backends`. Adding a service under a name in use replaces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServiceSpec {
    /// Unique on the node (a Kubernetes controller says `namespace/name:port`).
    pub name: String,
    /// The network whose pods reach it (excludes `table`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table: u32,
    pub vip: Ipv4Addr,
    pub port: u16,
    pub protocol: Protocol,
    #[serde(default)]
    pub backends: Vec<BackendSpec>,
    /// Kubernetes' `internalTrafficPolicy: Local`: new flows go only to backends on this node
    /// (reached through a pod interface, not a tunnel); with none here they are dropped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local: bool,
    /// Kubernetes' `sessionAffinity: ClientIP`: a client's new flows go to the backend its
    /// last one went to, for this many seconds after it (Kubernetes' default is 10800), while
    /// that backend is usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_seconds: Option<u32>,
    /// Kubernetes' NodePort: flows to this port (and `protocol`) on the node's own addresses
    /// in `external-table` reach the service too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_port: Option<u16>,
    /// Kubernetes' external IPs: flows to these addresses on `port`, in `external-table`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_ips: Vec<Ipv4Addr>,
    /// Where the clients from outside the service's network are: the underlay's table
    /// (default 0, where uplinks are).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub external_table: u32,
    /// Kubernetes' `externalTrafficPolicy: Local`: external flows go only to backends on
    /// this node and keep their client's address; with none here they are dropped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external_local: bool,
    /// The source address external flows reach a backend from (`externalTrafficPolicy:
    /// Cluster`): an address of the service's network routed to this node, so that a
    /// backend anywhere answers through it. Required unless `external-local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_source: Option<Ipv4Addr>,
}

/// The UDP port of VXLAN, which no NodePort may take.
pub const VXLAN_PORT: u16 = 4789;

/// The longest `affinity-seconds` (a day, Kubernetes' own limit).
pub const MAX_AFFINITY_SECONDS: u32 = 86400;

/// The most backends a service may have.
pub const MAX_BACKENDS: usize = 4096;

impl ServiceSpec {
    /// What is wrong with the values themselves.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let n = &self.name;
        if n.is_empty() || n.len() > 253 || n.contains(char::is_whitespace) {
            p.push(format!(
                "name {n:?} must be 1 to 253 characters without spaces"
            ));
        }
        if self.network.is_some() && self.table != 0 {
            p.push("network and table both set: a service in a network is in its VRF".into());
        }
        if self.port == 0 {
            p.push("port 0 is no service port".into());
        }
        if self.vip.is_unspecified() || self.vip.is_broadcast() || self.vip.is_multicast() {
            p.push(format!("vip {} is no unicast address", self.vip));
        }
        if let Some(s) = self.affinity_seconds
            && !(1..=MAX_AFFINITY_SECONDS).contains(&s)
        {
            p.push(format!(
                "affinity-seconds {s} is out of range 1..={MAX_AFFINITY_SECONDS}"
            ));
        }
        p.extend(self.external_problems());
        if self.backends.len() > MAX_BACKENDS {
            p.push(format!(
                "{} backends: at most {MAX_BACKENDS}",
                self.backends.len()
            ));
        }
        for (i, b) in self.backends.iter().enumerate() {
            if b.port == 0 || b.addr.is_unspecified() {
                p.push(format!("backend {b} is no address and port"));
            }
            if self.backends[..i]
                .iter()
                .any(|o| (o.addr, o.port) == (b.addr, b.port))
            {
                p.push(format!("backend {}:{} is listed twice", b.addr, b.port));
            }
        }
        p
    }

    /// Whether clients outside its network reach it (a NodePort or external IPs).
    pub fn external(&self) -> bool {
        self.node_port.is_some() || !self.external_ips.is_empty()
    }

    fn external_problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.node_port == Some(0) {
            p.push("node-port 0 is no port".into());
        }
        if self.node_port == Some(VXLAN_PORT) && self.protocol == Protocol::Udp {
            p.push(format!("udp node-port {VXLAN_PORT} is VXLAN's"));
        }
        for a in &self.external_ips {
            if a.is_unspecified() || a.is_broadcast() || a.is_multicast() || a.is_loopback() {
                p.push(format!("external ip {a} is no unicast address"));
            }
        }
        if !self.external() {
            if self.external_local || self.external_source.is_some() || self.external_table != 0 {
                p.push("external-local, external-source or external-table without a node-port or an external ip".into());
            }
        } else if !self.external_local && self.external_source.is_none() {
            p.push("external flows need an external-source address (or external-local, which keeps the client's)".into());
        }
        if let Some(a) = self.external_source
            && (a.is_unspecified() || a.is_broadcast() || a.is_multicast())
        {
            p.push(format!("external-source {a} is no unicast address"));
        }
        p
    }

    /// The backends new flows go to: the ready ones, or if there is none the terminating
    /// ones (Kubernetes' serving-terminating fallback).
    pub fn usable(&self) -> impl Iterator<Item = &BackendSpec> {
        let ready = self.backends.iter().any(|b| b.state == BackendState::Ready);
        let want = if ready {
            BackendState::Ready
        } else {
            BackendState::Terminating
        };
        self.backends.iter().filter(move |b| b.state == want)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(backends: &str) -> ServiceSpec {
        ServiceSpec {
            name: "default/web:http".into(),
            network: Some("blue".into()),
            table: 0,
            vip: "10.96.0.10".parse().unwrap(),
            port: 80,
            protocol: Protocol::Tcp,
            backends: backends
                .split_whitespace()
                .map(|b| b.parse().unwrap())
                .collect(),
            local: false,
            affinity_seconds: None,
            node_port: None,
            external_ips: Vec::new(),
            external_table: 0,
            external_local: false,
            external_source: None,
        }
    }

    #[test]
    fn backends_parse_and_print() {
        let b: BackendSpec = "10.1.0.5:8080=terminating".parse().unwrap();
        assert_eq!(b.to_string(), "10.1.0.5:8080=terminating");
        assert_eq!(
            "10.1.0.5:8080".parse::<BackendSpec>().unwrap().state,
            BackendState::Ready
        );
        for bad in ["10.1.0.5", "10.1.0.5:http", "x:80", "10.1.0.5:80=gone"] {
            assert!(bad.parse::<BackendSpec>().is_err(), "{bad}");
        }
    }

    /// Ready backends take new flows; with none ready, the terminating ones; never the
    /// not-ready.
    #[test]
    fn the_usable_backends_follow_kubernetes() {
        let s = spec("10.1.0.5:80 10.1.0.6:80=terminating 10.1.0.7:80=not-ready");
        let u: Vec<_> = s.usable().map(|b| b.addr.to_string()).collect();
        assert_eq!(u, ["10.1.0.5"]);
        let s = spec("10.1.0.6:80=terminating 10.1.0.7:80=not-ready");
        let u: Vec<_> = s.usable().map(|b| b.addr.to_string()).collect();
        assert_eq!(u, ["10.1.0.6"]);
        assert_eq!(spec("10.1.0.7:80=not-ready").usable().count(), 0);
    }

    #[test]
    fn problems_are_named() {
        assert!(spec("10.1.0.5:80").problems().is_empty());
        let mut s = spec("10.1.0.5:80 10.1.0.5:80 0.0.0.0:80");
        s.port = 0;
        s.table = 3;
        let p = s.problems().join("\n");
        for want in ["port 0", "table both set", "listed twice", "0.0.0.0:80"] {
            assert!(p.contains(want), "{want}: {p}");
        }
    }

    #[test]
    fn external_flows_need_a_source_or_local() {
        let mut s = spec("10.1.0.5:80");
        s.node_port = Some(30080);
        assert!(s.problems().join("\n").contains("external-source"));
        s.external_local = true;
        assert!(s.problems().is_empty(), "{:?}", s.problems());
        s.external_local = false;
        s.external_source = Some("10.1.255.1".parse().unwrap());
        assert!(s.problems().is_empty(), "{:?}", s.problems());
        s.node_port = Some(4789);
        s.protocol = Protocol::Udp;
        s.external_ips = vec!["224.0.0.1".parse().unwrap()];
        let p = s.problems().join("\n");
        for want in ["VXLAN's", "224.0.0.1"] {
            assert!(p.contains(want), "{want}: {p}");
        }
        let mut s = spec("10.1.0.5:80");
        s.external_local = true;
        assert!(s.problems().join("\n").contains("without a node-port"));
    }
}
