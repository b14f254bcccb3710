//! The verbs of network policies and address sets: `policy add|del`, `address-set add|del`.
//!
//! `policy add NAME [on IF[,IF]...] [isolate ingress|egress]... RULE...` where each rule
//! starts with its direction, `ingress` or `egress`, followed by its peers (`from` or `to`
//! `PEER[,PEER]...`) and its ports (`port PORT[,PORT]...`); a rule with neither allows
//! everything in its direction. A peer is `A.B.C.D/L`, with excepts as `!A.B.C.D/L` after it
//! (`10.0.0.0/8!10.1.0.0/16`), or `set:NAME`; a port is `tcp`, `tcp/80`, `tcp/8000-8100`,
//! `udp/53`, `sctp/...` or `icmp`.

use policy::{Peer, PortMatch, PortRange, Prefix, Protocol, Rule, SetSpec};

use super::{CliError, Words};
use crate::{PolicySpec, Request};

/// `policy add ...` (see the module's doc).
pub(super) fn policy_add(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut policy = PolicySpec {
        name: w.next("policy name")?.to_string(),
        interfaces: Vec::new(),
        ingress: None,
        egress: None,
    };
    // The direction of the rule being read, if any.
    let mut current: Option<bool> = None;
    while let Some(x) = w.peek() {
        w.i += 1;
        match x {
            "on" => policy.interfaces.extend(
                w.next("interface names")?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            ),
            "isolate" => {
                let rules = match w.next("ingress or egress")? {
                    "ingress" => &mut policy.ingress,
                    "egress" => &mut policy.egress,
                    d => return Err(w.err(format!("isolate {d:?}: expected ingress or egress"))),
                };
                rules.get_or_insert_with(Vec::new);
            }
            "ingress" | "egress" => {
                let ingress = x == "ingress";
                let rules = if ingress {
                    &mut policy.ingress
                } else {
                    &mut policy.egress
                };
                rules.get_or_insert_with(Vec::new).push(Rule {
                    peers: Vec::new(),
                    ports: Vec::new(),
                });
                current = Some(ingress);
            }
            "from" | "to" | "port" => {
                let rule = match current {
                    Some(true) => policy.ingress.as_mut().and_then(|r| r.last_mut()),
                    Some(false) => policy.egress.as_mut().and_then(|r| r.last_mut()),
                    None => None,
                };
                let Some(rule) = rule else {
                    return Err(w.err(format!("{x:?} before `ingress` or `egress`")));
                };
                let list = w.next(if x == "port" { "ports" } else { "peers" })?;
                for item in list.split(',').filter(|s| !s.is_empty()) {
                    if x == "port" {
                        rule.ports.push(port(item).map_err(|e| w.err(e))?);
                    } else {
                        rule.peers.push(peer(item).map_err(|e| w.err(e))?);
                    }
                }
            }
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    Ok(Request::PolicyAdd(policy))
}

fn prefix(s: &str) -> Result<Prefix, String> {
    s.parse().map_err(|e| format!("{s:?}: {e}"))
}

/// `A.B.C.D/L[!A.B.C.D/L]...` or `set:NAME`.
fn peer(s: &str) -> Result<Peer, String> {
    if let Some(name) = s.strip_prefix("set:") {
        return Ok(Peer::Set(name.to_string()));
    }
    let mut parts = s.split('!');
    let first = prefix(parts.next().unwrap_or_default())?;
    let except = parts.map(prefix).collect::<Result<_, _>>()?;
    Ok(Peer::Cidr {
        prefix: first,
        except,
    })
}

/// `tcp`, `tcp/80`, `tcp/8000-8100`, `udp/...`, `sctp/...`, `icmp`.
fn port(s: &str) -> Result<PortMatch, String> {
    let (p, range) = match s.split_once('/') {
        Some((p, r)) => (p, Some(r)),
        None => (s, None),
    };
    let protocol = match p {
        "tcp" => Protocol::Tcp,
        "udp" => Protocol::Udp,
        "sctp" => Protocol::Sctp,
        "icmp" => Protocol::Icmp,
        x => {
            return Err(format!(
                "port {s:?}: protocol {x:?} is none of tcp, udp, sctp, icmp"
            ));
        }
    };
    let number = |n: &str| {
        n.parse::<u16>()
            .map_err(|_| format!("port {s:?}: {n:?} is no port"))
    };
    let port = match range {
        None => None,
        Some(r) => Some(match r.split_once('-') {
            Some((a, b)) => PortRange {
                first: number(a)?,
                last: number(b)?,
            },
            None => PortRange::one(number(r)?),
        }),
    };
    Ok(PortMatch { protocol, port })
}

/// `policy del NAME`.
pub(super) fn policy_del(w: &mut Words<'_>) -> Result<Request, CliError> {
    Ok(Request::PolicyDel {
        name: w.next("policy name")?.to_string(),
    })
}

/// `address-set add NAME none | A.B.C.D/L[,A.B.C.D/L]...`.
pub(super) fn set_add(w: &mut Words<'_>) -> Result<Request, CliError> {
    let name = w.next("address set name")?.to_string();
    let mut members = Vec::new();
    if w.peek() == Some("none") {
        w.i += 1;
    } else {
        while let Some(x) = w.peek() {
            w.i += 1;
            for m in x.split(',').filter(|s| !s.is_empty()) {
                members.push(prefix(m).map_err(|e| w.err(e))?);
            }
        }
        if members.is_empty() {
            return Err(w.err("missing members A.B.C.D/L (or `none`)".into()));
        }
    }
    Ok(Request::AddressSetAdd(SetSpec { name, members }))
}

/// `address-set del NAME`.
pub(super) fn set_del(w: &mut Words<'_>) -> Result<Request, CliError> {
    Ok(Request::AddressSetDel {
        name: w.next("address set name")?.to_string(),
    })
}
