//! `veclane ctl monitor`: per-interface and per-node rates, refreshed every interval, from
//! the differences between two readings of `show interface` and `show runtime` (as
//! `vppctl monitor interface` and `show runtime` deltas do).

use std::fmt::Write as _;

use crate::{InterfaceInfo, WorkerRuntime};

/// One reading.
#[derive(Debug, Clone)]
pub struct Sample {
    pub interfaces: Vec<InterfaceInfo>,
    pub workers: Vec<WorkerRuntime>,
}

/// The view of what happened between `prev` and `cur`, `secs` apart: a screen (header and
/// tables) when `screen`, else one line per interface and per busy node, each starting with
/// `at` (for logs and pipes).
pub fn render(prev: &Sample, cur: &Sample, secs: f64, screen: bool, at: &str) -> String {
    let secs = secs.max(1e-6);
    let mut s = String::new();
    let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
    if screen {
        let _ = writeln!(
            s,
            "veclane monitor  {at}  (every {secs:.1} s; ctrl-c to quit)\n"
        );
        let _ = writeln!(
            s,
            "{:<16} {:>4} {:>12} {:>10} {:>12} {:>10} {:>10} {:>10}",
            "Interface", "Link", "Rx pps", "Rx Mbps", "Tx pps", "Tx Mbps", "Rx err/s", "No room/s"
        );
    }
    for i in &cur.interfaces {
        let p = prev.interfaces.iter().find(|p| p.name == i.name);
        let g = |f: fn(&InterfaceInfo) -> u64| rate(p.map_or(f(i), f), f(i));
        let (rxp, rxb, txp, txb) = (
            g(|x| x.rx_packets),
            g(|x| x.rx_bytes),
            g(|x| x.tx_packets),
            g(|x| x.tx_bytes),
        );
        let (err, room) = (g(|x| x.rx_errors), g(|x| x.tx_no_room));
        let link = if i.connected { "up" } else { "down" };
        if screen {
            let _ = writeln!(
                s,
                "{:<16} {:>4} {:>12.0} {:>10.1} {:>12.0} {:>10.1} {:>10.0} {:>10.0}",
                i.name,
                link,
                rxp,
                rxb * 8.0 / 1e6,
                txp,
                txb * 8.0 / 1e6,
                err,
                room
            );
        } else {
            let _ = writeln!(
                s,
                "{at} interface {} link {link} rx {rxp:.0} pps {:.1} Mbps tx {txp:.0} pps {:.1} Mbps rx-errors {err:.0}/s no-room {room:.0}/s",
                i.name,
                rxb * 8.0 / 1e6,
                txb * 8.0 / 1e6
            );
        }
    }
    if screen {
        let _ = writeln!(
            s,
            "\n{:<8} {:<24} {:>12} {:>10} {:>10}",
            "Worker", "Node", "Packets/s", "Vec/call", "ns/pkt"
        );
    }
    for w in &cur.workers {
        let pw = prev.workers.iter().find(|p| p.worker == w.worker);
        for n in &w.nodes {
            let pn = pw.and_then(|pw| pw.nodes.iter().find(|p| p.name == n.name));
            let d = |f: fn(&crate::NodeRuntime) -> u64| f(n).saturating_sub(pn.map_or(f(n), f));
            let (calls, vectors, clocks) = (d(|x| x.calls), d(|x| x.vectors), d(|x| x.clocks));
            if vectors == 0 {
                continue;
            }
            let pps = vectors as f64 / secs;
            let per_call = vectors as f64 / calls.max(1) as f64;
            let ns = clocks as f64 / vectors as f64;
            if screen {
                let _ = writeln!(
                    s,
                    "{:<8} {:<24} {:>12.0} {:>10.1} {:>10.1}",
                    w.worker, n.name, pps, per_call, ns
                );
            } else {
                let _ = writeln!(
                    s,
                    "{at} worker {} node {} {pps:.0} pps {per_call:.1} vec/call {ns:.1} ns/pkt",
                    w.worker, n.name
                );
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, rx: u64, bytes: u64) -> InterfaceInfo {
        serde_json::from_value(serde_json::json!({
            "name": name, "index": 0,
            "device": {"kind": "af-packet", "host_if": "eth0"},
            "mac": "02:00:00:00:00:01", "admin_up": true, "connected": true, "table": 0,
            "network": null, "addresses": [], "mtu": 1500, "peer": null,
            "rx_queues": 1, "tx_queues": 1, "rx_packets": rx, "rx_bytes": bytes,
            "tx_packets": rx, "tx_bytes": bytes, "rx_errors": 0, "tx_no_room": 0,
            "connects": 1, "disconnects": 0, "last_disconnect_reason": null
        }))
        .unwrap()
    }

    fn worker(vectors: u64, calls: u64, clocks: u64) -> WorkerRuntime {
        serde_json::from_value(serde_json::json!({
            "worker": 0, "core": 1, "seconds": 1.0, "loops": 1, "sleeps": 0,
            "nodes": [
                {"name": "ip4-lookup", "kind": "internal", "calls": calls, "vectors": vectors, "clocks": clocks},
                {"name": "idle", "kind": "internal", "calls": 0, "vectors": 0, "clocks": 0}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn rates_are_differences_over_the_interval() {
        let a = Sample {
            interfaces: vec![iface("memif0/0", 1000, 64_000)],
            workers: vec![worker(1000, 10, 50_000)],
        };
        let b = Sample {
            interfaces: vec![iface("memif0/0", 3000, 192_000)],
            workers: vec![worker(3000, 20, 150_000)],
        };
        let lines = render(&a, &b, 2.0, false, "t");
        assert!(
            lines.contains("t interface memif0/0 link up rx 1000 pps 0.5 Mbps tx 1000 pps"),
            "{lines}"
        );
        assert!(
            lines.contains("t worker 0 node ip4-lookup 1000 pps 200.0 vec/call 50.0 ns/pkt"),
            "{lines}"
        );
        assert!(!lines.contains("idle"), "{lines}");
        let screen = render(&a, &b, 2.0, true, "t");
        assert!(screen.starts_with("veclane monitor"), "{screen}");
        assert!(
            screen.contains("Rx pps") && screen.contains("ns/pkt"),
            "{screen}"
        );
    }
}
