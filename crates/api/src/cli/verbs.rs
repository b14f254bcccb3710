//! The parsers of the verbs that take arguments: each gets the words after its path and
//! returns its request. The table in `mod.rs` says which verb each serves.

use super::{CliError, Words};
use crate::{
    AfPacketSpec, AfXdpSpec, CapturePoint, Clear, Ipv4Prefix, MacAddr, MemifSpec, NeighborSpec,
    NetworkSpec, Request, Role, RouteSpec, TapSpec, Via,
};

/// `show interface [IF]`.
pub(super) fn show_interface(w: &mut Words<'_>) -> Result<Request, CliError> {
    Ok(Request::ShowInterface {
        name: w.peek().map(|s| {
            w.i += 1;
            s.to_string()
        }),
    })
}

/// `show ip fib [table VRF]`.
pub(super) fn show_ip_fib(w: &mut Words<'_>) -> Result<Request, CliError> {
    let table = if w.eat("table") {
        Some(w.number("table")?)
    } else {
        None
    };
    Ok(Request::ShowIpFib { table })
}

/// `trace add NODE N`.
pub(super) fn trace_add(w: &mut Words<'_>) -> Result<Request, CliError> {
    let node = w.next("node name")?.to_string();
    let count = w.number("packet count")?;
    Ok(Request::TraceAdd { node, count })
}

/// `clear runtime|errors|trace|interfaces`.
pub(super) fn clear(w: &mut Words<'_>) -> Result<Request, CliError> {
    let what = match w.next("what to clear")? {
        "runtime" | "run" => Clear::Runtime,
        "errors" | "error" => Clear::Errors,
        "trace" => Clear::Trace,
        "interfaces" | "interface" => Clear::Interfaces,
        x => {
            return Err(w.err(format!(
                "cannot clear {x:?}: expected runtime, errors, trace or interfaces"
            )));
        }
    };
    Ok(Request::Clear { what })
}

/// `network add NET vni N range A.B.C.D/L...`.
pub(super) fn network_add(w: &mut Words<'_>) -> Result<Request, CliError> {
    let name = w.next("network name")?.to_string();
    if !w.eat("vni") {
        return Err(w.err("missing `vni N`".into()));
    }
    let vni = w.number("vni")?;
    let mut ranges = Vec::new();
    while w.eat("range") {
        ranges.push(w.value("range")?);
    }
    if ranges.is_empty() {
        return Err(w.err("missing `range A.B.C.D/L`".into()));
    }
    let uplink = if w.eat("uplink") {
        Some(w.next("uplink interface")?.to_string())
    } else {
        None
    };
    let df = !w.eat("no-df");
    let owner = if w.eat("owner") {
        Some(w.next("owner name")?.to_string())
    } else {
        None
    };
    Ok(Request::NetworkAdd(NetworkSpec {
        name,
        vni,
        ranges,
        uplink,
        df,
        owner,
    }))
}

/// `network del NET`.
pub(super) fn network_del(w: &mut Words<'_>) -> Result<Request, CliError> {
    Ok(Request::NetworkDel {
        name: w.next("network name")?.to_string(),
    })
}

/// `delete interface IF`.
pub(super) fn delete_interface(w: &mut Words<'_>) -> Result<Request, CliError> {
    Ok(Request::DeleteInterface {
        name: w.next("interface name")?.to_string(),
    })
}

/// `set interface state IF up|down`.
pub(super) fn set_state(w: &mut Words<'_>) -> Result<Request, CliError> {
    let interface = w.next("interface name")?.to_string();
    let up = match w.next("up or down")? {
        "up" => true,
        "down" => false,
        x => return Err(w.err(format!("state {x:?} must be up or down"))),
    };
    Ok(Request::SetState { interface, up })
}

/// `set interface ip address [del] IF A.B.C.D/L`.
pub(super) fn set_ip_address(w: &mut Words<'_>) -> Result<Request, CliError> {
    let delete = w.eat("del");
    let interface = w.next("interface name")?.to_string();
    let address = w.value("address")?;
    Ok(Request::SetIpAddress {
        interface,
        address,
        delete,
    })
}

/// `set interface mtu IF N`.
pub(super) fn set_mtu(w: &mut Words<'_>) -> Result<Request, CliError> {
    let interface = w.next("interface name")?.to_string();
    let mtu = w.number("mtu")?;
    Ok(Request::SetInterfaceMtu { interface, mtu })
}

/// `set interface allowed-sources IF any | none | A.B.C.D/L...`.
pub(super) fn set_allowed_sources(w: &mut Words<'_>) -> Result<Request, CliError> {
    let interface = w.next("interface name")?.to_string();
    let sources = match w.peek() {
        Some("any") => {
            w.i += 1;
            None
        }
        Some("none") => {
            w.i += 1;
            Some(Vec::new())
        }
        _ => Some(prefixes(w, "allowed source A.B.C.D/L")?),
    };
    Ok(Request::SetAllowedSources { interface, sources })
}

/// One or more prefixes, each a word or a comma-separated list.
fn prefixes(w: &mut Words<'_>, what: &str) -> Result<Vec<Ipv4Prefix>, CliError> {
    let mut v = Vec::new();
    while let Some(x) = w.peek()
        && (v.is_empty() || x.starts_with(|c: char| c.is_ascii_digit()))
    {
        w.i += 1;
        for p in x.split(',').filter(|p| !p.is_empty()) {
            v.push(p.parse().map_err(|e| w.err(format!("{what}: {e}")))?);
        }
    }
    if v.is_empty() {
        return Err(w.err(format!("missing {what}")));
    }
    Ok(v)
}

/// `set interface ip table IF VRF`.
pub(super) fn set_ip_table(w: &mut Words<'_>) -> Result<Request, CliError> {
    let interface = w.next("interface name")?.to_string();
    let table = w.number("table")?;
    Ok(Request::SetIpTable { interface, table })
}

/// `set ip neighbor [del] IF A.B.C.D MAC`.
pub(super) fn set_ip_neighbor(w: &mut Words<'_>) -> Result<Request, CliError> {
    let delete = w.eat("del");
    let interface = w.next("interface name")?.to_string();
    let ip = w.next("address A.B.C.D")?;
    let ip = crate::parse_ipv4(ip).map_err(|e| w.err(format!("address: {e}")))?;
    let mac = w.next("MAC address")?;
    let mac = crate::parse_mac(mac).map_err(|e| w.err(format!("MAC: {e}")))?;
    Ok(Request::SetIpNeighbor {
        neighbor: NeighborSpec { interface, ip, mac },
        delete,
    })
}

/// `ip route add|del A.B.C.D/L via NH [IF] [table VRF | network NET]`.
pub(super) fn ip_route(w: &mut Words<'_>) -> Result<Request, CliError> {
    let add = match w.next("add or del")? {
        "add" => true,
        "del" | "delete" => false,
        x => return Err(w.err(format!("{x:?}: expected add or del"))),
    };
    let prefix: Ipv4Prefix = w.value("prefix")?;
    if !w.eat("via") {
        return Err(w.err("missing `via NH`".into()));
    }
    let via: Via = w.value("next hop")?;
    let mut interface = None;
    let mut table = 0;
    let mut network = None;
    while let Some(x) = w.peek() {
        if x == "table" {
            w.i += 1;
            table = w.number("table")?;
        } else if x == "network" {
            w.i += 1;
            network = Some(w.next("network name")?.to_string());
        } else if interface.is_none() {
            interface = Some(x.to_string());
            w.i += 1;
        } else {
            break;
        }
    }
    Ok(Request::IpRoute {
        add,
        route: RouteSpec {
            prefix,
            via,
            interface,
            table,
            network,
        },
    })
}

/// `pcap trace rx|tx|drop... on IF|any FILE [max N]`; `off` in place of `on` (after any
/// points) stops the capture, as `pcap trace off` does.
pub(super) fn pcap_on(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut points = Vec::new();
    loop {
        match w.next("rx, tx, drop, on or off")? {
            "rx" => points.push(CapturePoint::Rx),
            "tx" => points.push(CapturePoint::Tx),
            "drop" => points.push(CapturePoint::Drop),
            "off" => return Ok(Request::PcapOff),
            "on" => break,
            x => {
                return Err(w.err(format!(
                    "capture point {x:?}: expected rx, tx, drop, then on or off"
                )));
            }
        }
    }
    if points.is_empty() {
        return Err(w.err("name at least one of rx, tx, drop before `on`".into()));
    }
    let interface = w.next("interface name (or any)")?.to_string();
    let file = w.next("output file")?.to_string();
    let max_packets = if w.eat("max") {
        Some(w.number("max packets")?)
    } else {
        None
    };
    Ok(Request::PcapOn {
        points,
        interface,
        file,
        max_packets,
    })
}

pub(super) fn create_memif(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut id = None;
    let mut socket = None;
    let mut role = None;
    let mut spec = MemifSpec::new(0, "", Role::Master);
    while let Some(k) = w.peek() {
        w.i += 1;
        match k {
            "id" => id = Some(w.number("id")?),
            "socket" => socket = Some(w.next("socket path")?.to_string()),
            "master" => role = Some(Role::Master),
            "slave" => role = Some(Role::Slave),
            "rx-queues" => spec.rx_queues = Some(w.number("rx-queues")?),
            "tx-queues" => spec.tx_queues = Some(w.number("tx-queues")?),
            "ring-size" => spec.ring_size = Some(w.number("ring-size")?),
            "buffer-size" => spec.buffer_size = Some(w.number("buffer-size")?),
            "region-limit-mib" => spec.region_limit_mib = Some(w.number("region-limit-mib")?),
            "secret" => spec.secret = Some(w.next("secret")?.to_string()),
            "name" => spec.name = Some(w.next("name")?.to_string()),
            "network" => spec.network = Some(w.next("network name")?.to_string()),
            "mtu" => spec.mtu = Some(w.number("mtu")?),
            "netns" => spec.netns = Some(w.next("network namespace")?.to_string()),
            "pod" => spec.pod = Some(w.next("container id")?.to_string()),
            "allowed-sources" => {
                spec.allowed_sources = Some(prefixes(w, "allowed source A.B.C.D/L")?)
            }
            "mode" => {
                spec.mode = w
                    .next("ethernet or ip")?
                    .parse()
                    .map_err(|e: String| w.err(e))?
            }
            "use-dma" => spec.use_dma = true,
            "rx-mode" => {
                spec.rx_mode = Some(
                    w.next("polling, interrupt or adaptive")?
                        .parse()
                        .map_err(|e| w.err(format!("rx-mode: {e}")))?,
                )
            }
            "hw-addr" => {
                let m = w.next("MAC address")?;
                spec.mac = Some(crate::parse_mac(m).map_err(|e| w.err(format!("hw-addr: {e}")))?);
            }
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    spec.id = id.ok_or_else(|| w.err("missing `id N`".into()))?;
    spec.socket = socket.ok_or_else(|| w.err("missing `socket PATH`".into()))?;
    spec.role = role.ok_or_else(|| w.err("missing role: master or slave".into()))?;
    Ok(Request::CreateMemif(spec))
}

pub(super) fn create_tap(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut spec = TapSpec::new("");
    let mut host = None;
    while let Some(k) = w.peek() {
        w.i += 1;
        match k {
            "host-if-name" => host = Some(w.next("interface name in the namespace")?.to_string()),
            "netns" => spec.netns = Some(w.next("network namespace")?.to_string()),
            "queues" => spec.queues = Some(w.number("queues")?),
            "mtu" => spec.mtu = Some(w.number("mtu")?),
            "name" => spec.name = Some(w.next("name")?.to_string()),
            "network" => spec.network = Some(w.next("network name")?.to_string()),
            "pod" => spec.pod = Some(w.next("container id")?.to_string()),
            "allowed-sources" => {
                spec.allowed_sources = Some(prefixes(w, "allowed source A.B.C.D/L")?)
            }
            "hw-addr" | "host-mac" => {
                let m = w.next("MAC address")?;
                let m = Some(crate::parse_mac(m).map_err(|e| w.err(format!("{k}: {e}")))?);
                if k == "hw-addr" {
                    spec.mac = m;
                } else {
                    spec.host_mac = m;
                }
            }
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    spec.host_if_name = host.ok_or_else(|| w.err("missing `host-if-name NAME`".into()))?;
    Ok(Request::CreateTap(spec))
}

pub(super) fn create_af_packet(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut spec = AfPacketSpec::new("");
    spec.host_if = uplink_words(
        w,
        (&mut spec.queues, &mut spec.name, &mut spec.mac),
        |k, w| {
            match k {
                "rx-ring" => {
                    spec.rx_ring = Some(
                        w.next("frames or blocks")?
                            .parse()
                            .map_err(|e: String| w.err(e))?,
                    )
                }
                "udp-gso" => {
                    spec.udp_gso = match w.next("on or off")? {
                        "on" => true,
                        "off" => false,
                        x => return Err(w.err(format!("udp-gso {x:?}: expected on or off"))),
                    }
                }
                _ => return Ok(false),
            }
            Ok(true)
        },
    )?;
    Ok(Request::CreateAfPacket(spec))
}

pub(super) fn create_af_xdp(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut spec = AfXdpSpec::new("");
    spec.host_if = uplink_words(
        w,
        (&mut spec.queues, &mut spec.name, &mut spec.mac),
        |k, w| {
            if k != "mode" {
                return Ok(false);
            }
            spec.mode = w
                .next("auto, copy or zero-copy")?
                .parse()
                .map_err(|e: String| w.err(e))?;
            Ok(true)
        },
    )?;
    Ok(Request::CreateAfXdp(spec))
}

/// The words every uplink kind takes (`host-if`, `queues`, `name`, `hw-addr`) into its
/// spec's `queues`, `name` and `mac`, and those `own` takes (it returns whether the word
/// `k` was its own, having read its value); returns the `host-if` named.
fn uplink_words(
    w: &mut Words<'_>,
    (queues, name, mac): (&mut Option<u16>, &mut Option<String>, &mut Option<MacAddr>),
    mut own: impl FnMut(&str, &mut Words<'_>) -> Result<bool, CliError>,
) -> Result<String, CliError> {
    let mut host = None;
    while let Some(k) = w.peek() {
        w.i += 1;
        match k {
            "host-if" => host = Some(w.next("host interface name")?.to_string()),
            "queues" => *queues = Some(w.number("queues")?),
            "name" => *name = Some(w.next("name")?.to_string()),
            "hw-addr" => {
                let m = w.next("MAC address")?;
                *mac = Some(crate::parse_mac(m).map_err(|e| w.err(format!("hw-addr: {e}")))?);
            }
            x => {
                if !own(x, w)? {
                    return Err(w.err(format!("unknown argument {x:?}")));
                }
            }
        }
    }
    host.ok_or_else(|| w.err("missing `host-if NAME`".into()))
}

/// `service add NAME vip A.B.C.D port P [tcp|udp|sctp] [network NET | table N]
/// [backend A.B.C.D:P[=STATE]]... [local] [affinity S] [node-port P] [external-ip A,...]
/// [external-table N] [external-local] [external-source A.B.C.D]`.
pub(super) fn service_add(w: &mut Words<'_>) -> Result<Request, CliError> {
    let name = w.next("service name")?.to_string();
    let (mut vip, mut port, mut protocol) = (None, None, crate::Protocol::Tcp);
    let (mut network, mut table, mut backends) = (None, 0, Vec::new());
    let (mut affinity_seconds, mut local) = (None, false);
    let (mut node_port, mut external_ips, mut external_table) = (None, Vec::new(), 0);
    let (mut external_local, mut external_source) = (false, None);
    let addr = |w: &mut Words<'_>, what: &str, a: &str| {
        crate::parse_ipv4(a).map_err(|e| w.err(format!("{what}: {e}")))
    };
    while let Some(x) = w.peek() {
        w.i += 1;
        match x {
            "vip" => vip = Some(w.next("vip A.B.C.D")?),
            "node-port" => node_port = Some(w.number("node port")?),
            "external-ip" => {
                for a in w.next("external-ip A.B.C.D")?.split(',') {
                    external_ips.push(addr(w, "external-ip", a)?);
                }
            }
            "external-table" => external_table = w.number("external table")?,
            "external-local" => external_local = true,
            "external-source" => {
                let a = w.next("external-source A.B.C.D")?;
                external_source = Some(addr(w, "external-source", a)?);
            }
            "port" => port = Some(w.number("port")?),
            "tcp" | "udp" | "sctp" => {
                protocol = x
                    .parse()
                    .map_err(|e: crate::ParseError| w.err(e.to_string()))?
            }
            "network" => network = Some(w.next("network name")?.to_string()),
            "table" => table = w.number("table")?,
            "affinity" => affinity_seconds = Some(w.number("affinity seconds")?),
            "local" => local = true,
            "backend" => {
                for b in w.next("backend A.B.C.D:PORT")?.split(',') {
                    backends.push(b.parse().map_err(|e: String| w.err(e))?);
                }
            }
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    let vip = vip.ok_or_else(|| w.err("missing `vip A.B.C.D`".into()))?;
    let vip = crate::parse_ipv4(vip).map_err(|e| w.err(format!("vip: {e}")))?;
    let port = port.ok_or_else(|| w.err("missing `port P`".into()))?;
    Ok(Request::ServiceAdd(crate::ServiceSpec {
        name,
        network,
        table,
        vip,
        port,
        protocol,
        backends,
        local,
        affinity_seconds,
        node_port,
        external_ips,
        external_table,
        external_local,
        external_source,
    }))
}

/// `service del NAME`.
pub(super) fn service_del(w: &mut Words<'_>) -> Result<Request, CliError> {
    Ok(Request::ServiceDel {
        name: w.next("service name")?.to_string(),
    })
}

/// `show session [network NET] [service NAME] [client A.B.C.D] [limit N]`.
pub(super) fn show_session(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut filter = crate::SessionFilter::default();
    while let Some(x) = w.peek() {
        w.i += 1;
        match x {
            "network" => filter.network = Some(w.next("network name")?.to_string()),
            "service" => filter.service = Some(w.next("service name")?.to_string()),
            "client" => {
                let a = w.next("client A.B.C.D")?;
                filter.client =
                    Some(crate::parse_ipv4(a).map_err(|e| w.err(format!("client: {e}")))?);
            }
            "limit" => filter.limit = Some(w.number("limit")?),
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    Ok(Request::ShowSession { filter })
}
