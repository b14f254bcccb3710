//! Replies as the text `veclane ctl` prints: one layout per [`Reply`] variant (a reply, not a
//! verb: several verbs share one, and a reply reads the same whichever asked for it).

use crate::{
    CopyEngineInfo, InterfaceInfo, NetworkInfo, PolicyReport, Reply, ServiceInfo, SessionInfo,
    SessionTotals, TunnelInfo, WorkerRuntime,
};

/// Formats a reply as the text `veclane ctl` prints.
pub fn format(reply: &Reply) -> String {
    let mut s = String::new();
    match reply {
        Reply::Ok => {}
        Reply::Error { message, .. } => s.push_str(&format!("error: {message}\n")),
        Reply::Version {
            version,
            workers,
            runtime_dir,
        } => s.push_str(&format!(
            "veclane {version}, {workers} worker(s), runtime directory {runtime_dir}\n"
        )),
        Reply::Created { name, index } => s.push_str(&format!("{name} (index {index})\n")),
        Reply::Interfaces { interfaces } => interface_lines(&mut s, interfaces),
        Reply::RxPlacement { placement } => {
            for p in placement {
                s.push_str(&format!(
                    "interface {} queue {}: worker {} (core {}), {}{}\n",
                    p.interface,
                    p.queue,
                    p.worker,
                    p.core.map_or("any".to_string(), |c| c.to_string()),
                    p.mode,
                    if p.connected { "" } else { ", not connected" }
                ));
            }
        }
        Reply::CopyEngine { info } => copy_engine_lines(&mut s, info),
        Reply::Buffers { workers, regions } => {
            for b in workers {
                s.push_str(&format!(
                    "worker {} (core {}): {} buffers, {} free, {} in use\n",
                    b.worker,
                    b.core.map_or("any".to_string(), |c| c.to_string()),
                    b.total,
                    b.free,
                    b.total.saturating_sub(b.free)
                ));
            }
            s.push_str(&format!(
                "memif regions mapped from peers: {} of {} MiB budgeted\n",
                regions.mapped.div_ceil(1 << 20),
                regions.budget >> 20
            ));
        }
        Reply::Runtime { workers } => runtime_lines(&mut s, workers),
        Reply::Errors { errors } => {
            s.push_str(&format!("{:>12}  {:<20} {}\n", "Count", "Node", "Reason"));
            for e in errors {
                s.push_str(&format!("{:>12}  {:<20} {}\n", e.count, e.node, e.reason));
            }
        }
        Reply::Trace { text } => s.push_str(text),
        Reply::Fib { entries } => {
            let mut table = None;
            for e in entries {
                if table != Some(e.table) {
                    s.push_str(&format!("ipv4-VRF:{}\n", e.table));
                    table = Some(e.table);
                }
                s.push_str(&format!("  {:<20} {}\n", e.prefix.to_string(), e.path));
            }
        }
        Reply::FibSummary { tables } => {
            s.push_str(&format!("{:<10} {:>10}\n", "VRF", "Routes"));
            for t in tables {
                s.push_str(&format!("{:<10} {:>10}\n", t.table, t.routes));
            }
        }
        Reply::Networks { networks } => network_lines(&mut s, networks),
        Reply::Tunnels { tunnels } => tunnel_lines(&mut s, tunnels),
        Reply::Services { services } => service_lines(&mut s, services),
        Reply::Sessions { sessions, totals } => session_lines(&mut s, sessions, totals),
        Reply::Policies { report } => policy_lines(&mut s, report),
        Reply::Neighbors { neighbors, totals } => {
            let t = totals;
            s.push_str(&format!(
                "{} learned (at most {}, {} an interface); refused {}, refused for table room {}, \
                 evicted stale {}, asked again {}, expired {}\n",
                t.learned,
                t.max,
                t.per_interface,
                t.refused,
                t.refused_room,
                t.evicted,
                t.probes,
                t.expired
            ));
            s.push_str(&format!(
                "{:<16} {:<18} {:<8} {}\n",
                "IP", "MAC", "Flags", "Interface"
            ));
            for n in neighbors {
                s.push_str(&format!(
                    "{:<16} {:<18} {:<8} {}\n",
                    n.ip.to_string(),
                    n.mac.to_string(),
                    if n.static_entry { "S" } else { "D" },
                    n.interface
                ));
            }
        }
        Reply::Pcap {
            file,
            packets,
            missed,
        } => s.push_str(&format!(
            "wrote {packets} packets to {file}{}\n",
            if *missed > 0 {
                format!(" ({missed} more did not fit)")
            } else {
                String::new()
            }
        )),
    }
    s
}

/// `show interface`: a table row and the details under it per interface.
fn interface_lines(s: &mut String, interfaces: &[InterfaceInfo]) {
    s.push_str(&format!(
        "{:<14} {:>3} {:<6} {:<5} {:>12} {:>14} {:>12} {:>14} {:>8} {:>8}\n",
        "Name",
        "Idx",
        "State",
        "Link",
        "rx packets",
        "rx bytes",
        "tx packets",
        "tx bytes",
        "rx err",
        "tx full"
    ));
    for i in interfaces {
        s.push_str(&format!(
            "{:<14} {:>3} {:<6} {:<5} {:>12} {:>14} {:>12} {:>14} {:>8} {:>8}\n",
            i.name,
            i.index,
            if i.admin_up { "up" } else { "down" },
            if i.connected { "up" } else { "down" },
            i.rx_packets,
            i.rx_bytes,
            i.tx_packets,
            i.tx_bytes,
            i.rx_errors,
            i.tx_no_room
        ));
        s.push_str(&format!(
            "    {} mac {} table {} mtu {} queues rx {} tx {}\n",
            i.device, i.mac, i.table, i.mtu, i.rx_queues, i.tx_queues
        ));
        if let Some(n) = &i.network {
            s.push_str(&format!("    network {n}\n"));
        }
        if i.tx_super_packets + i.tx_super_packets_refused > 0 {
            s.push_str(&format!(
                "    tx super-packets {} ({} datagrams), refused {}\n",
                i.tx_super_packets, i.tx_super_packet_datagrams, i.tx_super_packets_refused
            ));
        }
        if let Some(p) = &i.pod {
            s.push_str(&format!("    pod {p}\n"));
        }
        if !i.addresses.is_empty() {
            let a: Vec<String> = i.addresses.iter().map(ToString::to_string).collect();
            s.push_str(&format!("    addresses {}\n", a.join(" ")));
        }
        if let Some(v) = &i.allowed_sources {
            let a: Vec<String> = v.iter().map(ToString::to_string).collect();
            let a = if a.is_empty() {
                "none".into()
            } else {
                a.join(" ")
            };
            s.push_str(&format!("    allowed sources {a}\n"));
        }
        if let Some(p) = &i.peer {
            s.push_str(&format!("    peer {p}\n"));
        }
        if let Some(r) = &i.last_disconnect_reason {
            s.push_str(&format!(
                "    connects {} disconnects {} last: {r}\n",
                i.connects, i.disconnects
            ));
        }
    }
}

/// `show copy-engine`: the engines found and chosen, then each worker's with its counters.
fn copy_engine_lines(s: &mut String, info: &CopyEngineInfo) {
    s.push_str(&format!("copy-engine {}", info.configured));
    s.push_str(&format!(", DSA work queues from {}\n", info.dsa_source));
    for q in &info.dsa_queues {
        s.push_str(&format!("  usable: {q}\n"));
    }
    for q in &info.dsa_unusable {
        s.push_str(&format!("  not usable: {q}\n"));
    }
    if let Some(w) = &info.why_not_dsa {
        s.push_str(&format!("  DSA not in use: {w}\n"));
    }
    for r in &info.registered {
        s.push_str(&format!("  registered: {r}\n"));
    }
    for e in &info.engines {
        s.push_str(&format!(
            "worker {} {} {}: {}{}\n",
            e.worker,
            e.node,
            e.role,
            e.kind,
            e.queue
                .as_deref()
                .map(|q| format!(" {q}"))
                .unwrap_or_default()
        ));
        s.push_str(&format!(
            "  {} batches, {} copies, {} bytes, {} full\n",
            e.batches, e.copies, e.bytes, e.full
        ));
        if e.kind == crate::CopyEngine::Dsa {
            s.push_str(&format!(
                "  {} descriptors, {} short (made at once), {} inline, {} recovered on the CPU, {} watchdog, {} fallback\n",
                e.descriptors, e.short, e.inline, e.recovered, e.watchdog, e.fallback
            ));
        }
        for n in &e.notes {
            s.push_str(&format!("  note: {n}\n"));
        }
        if let Some(t) = &e.tripped {
            s.push_str(&format!("  tripped, on the CPU from now on: {t}\n"));
        }
    }
}

/// `show runtime`: per worker, a table of the nodes that were called.
fn runtime_lines(s: &mut String, workers: &[WorkerRuntime]) {
    for w in workers {
        s.push_str(&format!(
            "Thread {} vl_wk_{} (core {}): {:.1} s, {} loops, {} sleeps{}\n",
            w.worker + 1,
            w.worker,
            w.core.map_or("any".to_string(), |c| c.to_string()),
            w.seconds,
            w.loops,
            w.sleeps,
            if w.stalls > 0 {
                format!(", {} stalls", w.stalls)
            } else {
                String::new()
            }
        ));
        s.push_str(&format!(
            "{:<22} {:<9} {:>12} {:>14} {:>14} {:>12} {:>10}\n",
            "Name", "State", "Calls", "Vectors", "Clocks(ns)", "ns/Packet", "Vec/Call"
        ));
        for n in &w.nodes {
            if n.calls == 0 {
                continue;
            }
            let per_pkt = if n.vectors > 0 {
                n.clocks as f64 / n.vectors as f64
            } else {
                0.0
            };
            s.push_str(&format!(
                "{:<22} {:<9} {:>12} {:>14} {:>14} {:>12.2} {:>10.2}\n",
                n.name,
                if n.kind == "input" {
                    "polling"
                } else {
                    "active"
                },
                n.calls,
                n.vectors,
                n.clocks,
                per_pkt,
                n.vectors as f64 / n.calls as f64
            ));
        }
    }
}

/// `show network`: a row per network.
fn network_lines(s: &mut String, networks: &[NetworkInfo]) {
    s.push_str(&format!(
        "{:<16} {:>8} {:>6}  {:<36} {:<12} {:<14} {}\n",
        "Network", "VNI", "VRF", "Ranges", "Uplink", "Owner", "Interfaces"
    ));
    for n in networks {
        let ranges: Vec<String> = n.ranges.iter().map(ToString::to_string).collect();
        s.push_str(&format!(
            "{:<16} {:>8} {:>6}  {:<36} {:<12} {:<14} {}\n",
            n.name,
            n.vni,
            n.table,
            ranges.join(" "),
            n.uplink.as_deref().unwrap_or("-"),
            n.owner.as_deref().unwrap_or("-"),
            n.interfaces.join(" ")
        ));
    }
}

/// `show vxlan tunnel`: a row per tunnel.
fn tunnel_lines(s: &mut String, tunnels: &[TunnelInfo]) {
    s.push_str(&format!(
        "{:<14} {:<12} {:>8} {:<16} {:<16} {:<12} {:>5} {:>6} {:>12} {:>12}\n",
        "Name",
        "Network",
        "VNI",
        "Src",
        "Dst",
        "Uplink",
        "MTU",
        "Routes",
        "rx packets",
        "tx packets"
    ));
    for t in tunnels {
        s.push_str(&format!(
            "{:<14} {:<12} {:>8} {:<16} {:<16} {:<12} {:>5} {:>6} {:>12} {:>12}\n",
            t.name,
            t.network,
            t.vni,
            t.src.to_string(),
            t.dst.to_string(),
            t.uplink,
            t.mtu,
            t.routes,
            t.rx_packets,
            t.tx_packets
        ));
    }
}

fn service_lines(s: &mut String, services: &[ServiceInfo]) {
    for i in services {
        let v = &i.spec;
        let place = match &v.network {
            Some(n) => format!("network {n}"),
            None => format!("table {}", v.table),
        };
        s.push_str(&format!(
            "{}: {place} {}:{} {}, {} sessions\n",
            v.name, v.vip, v.port, v.protocol, i.sessions
        ));
        let b: Vec<String> = v.backends.iter().map(ToString::to_string).collect();
        let b = if b.is_empty() {
            "none".into()
        } else {
            b.join(" ")
        };
        s.push_str(&format!("    backends {b}\n"));
        if v.external() {
            let mut x = Vec::new();
            if let Some(p) = v.node_port {
                x.push(format!("node-port {p}"));
            }
            for a in &v.external_ips {
                x.push(format!("external-ip {a}"));
            }
            x.push(format!("from table {}", v.external_table));
            x.push(match v.external_source {
                Some(a) if !v.external_local => format!("source {a}"),
                _ => "local, client's source kept".into(),
            });
            s.push_str(&format!("    external {}\n", x.join(", ")));
        }
    }
}

fn session_lines(s: &mut String, sessions: &[SessionInfo], t: &SessionTotals) {
    s.push_str(&format!(
        "{} of {} sessions ({} MiB); created {}, refused (full) {}, evicted unestablished {}, expired {}, killed {}\n",
        t.live,
        t.capacity,
        t.memory_bytes >> 20,
        t.created,
        t.refused_full,
        t.evicted_embryonic,
        t.expired,
        t.killed
    ));
    for x in sessions {
        let place = x
            .network
            .clone()
            .unwrap_or_else(|| format!("table {}", x.table));
        let to = x
            .backend
            .as_ref()
            .map_or(String::new(), |b| format!(" -> {b}"));
        let svc = x
            .service
            .as_ref()
            .map_or(String::new(), |n| format!(" ({n})"));
        s.push_str(&format!(
            "{place} {} {} -> {}{to}{svc} {} idle {} ms\n",
            x.protocol, x.client, x.destination, x.state, x.idle_ms
        ));
    }
}

fn policy_lines(s: &mut String, r: &PolicyReport) {
    for p in &r.policies {
        let dirs: Vec<&str> = [("ingress", &p.ingress), ("egress", &p.egress)]
            .iter()
            .filter(|(_, r)| r.is_some())
            .map(|(d, _)| *d)
            .collect();
        s.push_str(&format!(
            "policy {}: {} on {}\n",
            p.name,
            dirs.join(" and "),
            if p.interfaces.is_empty() {
                "no interface".to_string()
            } else {
                p.interfaces.join(", ")
            }
        ));
    }
    for a in &r.sets {
        s.push_str(&format!("address-set {}: {} members\n", a.name, a.members));
    }
    for i in &r.interfaces {
        let iso = |b: bool| if b { "isolated" } else { "open" };
        s.push_str(&format!(
            "{}: ingress {}, egress {} ({})\n",
            i.interface,
            iso(i.ingress_isolated),
            iso(i.egress_isolated),
            i.policies.join(", ")
        ));
        for (name, hits) in &i.counters {
            s.push_str(&format!("    {hits:>12}  {name}\n"));
        }
        for w in &i.warnings {
            s.push_str(&format!("    warning: {w}\n"));
        }
    }
}
