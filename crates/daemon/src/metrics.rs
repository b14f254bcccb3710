//! Prometheus / OpenMetrics exposition (`[daemon] metrics = "127.0.0.1:9400"`).
//!
//! A thread of its own serves HTTP ([`crate::metrics_http`]: bounded connections, each with a
//! deadline); for every scrape of `/metrics` it asks
//! the daemon over its own control socket, as `veclane ctl` would (`show interface`, `show
//! runtime`, `show errors`, `show buffers`, `show copy-engine`, `show ip fib`), and encodes
//! the answers with `prometheus-client`. The control thread sums each worker's counters when
//! it answers, so workers do nothing for a scrape: no atomic, no lock, no message on their
//! path, and a scrape costs them nothing beyond what `show` commands cost. The figures are the
//! ones `show` prints, under names an operator can graph (`docs/operations.md` lists them).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use api::{Client, Reply, Request};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The metrics endpoint: stopped (and its thread joined) when dropped.
pub struct Exporter {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    join: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Listens on `addr` and serves scrapes by asking the daemon at `ctl`.
    pub fn start(addr: &str, ctl: PathBuf) -> Result<Exporter, String> {
        let server = crate::metrics_http::Server::bind(addr)
            .map_err(|e| format!("metrics: cannot listen on {addr}: {e}"))?;
        let addr = server
            .local_addr()
            .map_err(|e| format!("metrics: {addr}: {e}"))?;
        let stop = server.stopper();
        let join = std::thread::Builder::new()
            .name("vl_metrics".into())
            .spawn(move || serve(&server, &ctl))
            .map_err(|e| format!("metrics: cannot start its thread: {e}"))?;
        tracing::info!(%addr, "metrics: serving /metrics");
        Ok(Exporter {
            stop,
            addr,
            join: Some(join),
        })
    }

    /// Where it listens (the port chosen when the configuration said 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

fn serve(server: &crate::metrics_http::Server, ctl: &Path) {
    use crate::metrics_http::{Request, Response};
    let plain = "text/plain; charset=utf-8";
    let mut client: Option<Client> = None;
    server.serve(|r: &Request<'_>| match (r.method, r.path) {
        ("GET", "/metrics") => match scrape(&mut client, ctl) {
            Ok(body) => Response {
                code: 200,
                content_type: CONTENT_TYPE,
                body,
            },
            Err(e) => {
                client = None;
                Response {
                    code: 503,
                    content_type: plain,
                    body: format!("veclane: {e}\n"),
                }
            }
        },
        ("GET", "/") => Response {
            code: 200,
            content_type: plain,
            body: "veclane: metrics at /metrics\n".into(),
        },
        _ => Response {
            code: 404,
            content_type: plain,
            body: "veclane: not found: metrics are at GET /metrics\n".into(),
        },
    });
}

/// One scrape: the daemon's answers, encoded.
fn scrape(client: &mut Option<Client>, ctl: &Path) -> Result<String, String> {
    if client.is_none() {
        *client = Some(Client::connect(ctl).map_err(|e| e.to_string())?);
    }
    let c = client.as_mut().expect("connected above");
    let mut call = |r: Request| c.call(&r).map_err(|e| e.to_string());
    let (buffers, regions) = match call(Request::ShowBuffers)? {
        Reply::Buffers { workers, regions } => (workers, regions),
        r => return Err(unexpected(&r)),
    };
    let snap = Snapshot {
        version: match call(Request::ShowVersion)? {
            Reply::Version { version, .. } => version,
            r => return Err(unexpected(&r)),
        },
        interfaces: match call(Request::ShowInterface { name: None })? {
            Reply::Interfaces { interfaces } => interfaces,
            r => return Err(unexpected(&r)),
        },
        runtime: match call(Request::ShowRuntime)? {
            Reply::Runtime { workers } => workers,
            r => return Err(unexpected(&r)),
        },
        errors: match call(Request::ShowErrors)? {
            Reply::Errors { errors } => errors,
            r => return Err(unexpected(&r)),
        },
        buffers,
        regions,
        copy: match call(Request::ShowCopyEngine)? {
            Reply::CopyEngine { info } => info,
            r => return Err(unexpected(&r)),
        },
        fib: match call(Request::ShowIpFibSummary)? {
            Reply::FibSummary { tables } => tables,
            r => return Err(unexpected(&r)),
        },
        sessions: match call(Request::ShowSession {
            filter: api::SessionFilter {
                limit: Some(0),
                ..Default::default()
            },
        })? {
            Reply::Sessions { totals, .. } => totals,
            r => return Err(unexpected(&r)),
        },
        services: match call(Request::ShowService)? {
            Reply::Services { services } => services,
            r => return Err(unexpected(&r)),
        },
        policies: match call(Request::ShowPolicy)? {
            Reply::Policies { report } => report,
            r => return Err(unexpected(&r)),
        },
        neighbours: match call(Request::ShowIpNeighborSummary)? {
            Reply::Neighbors { totals, .. } => totals,
            r => return Err(unexpected(&r)),
        },
    };
    encode(snap)
}

fn unexpected(r: &Reply) -> String {
    format!("unexpected reply from the daemon: {r:?}")
}

/// Encodes `snap` in the OpenMetrics text format.
pub fn encode(snap: Snapshot) -> Result<String, String> {
    let mut registry = Registry::with_prefix("veclane");
    registry.register_collector(Box::new(snap));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .map_err(|e| format!("encoding the metrics: {e}"))?;
    Ok(out)
}

/// What one scrape learned from the daemon.
#[derive(Debug)]
pub struct Snapshot {
    pub version: String,
    pub interfaces: Vec<api::InterfaceInfo>,
    pub runtime: Vec<api::WorkerRuntime>,
    pub errors: Vec<api::ErrorCount>,
    pub buffers: Vec<api::WorkerBuffers>,
    pub regions: api::MemifRegions,
    pub copy: api::CopyEngineInfo,
    pub fib: Vec<api::FibTableSize>,
    pub sessions: api::SessionTotals,
    pub services: Vec<api::ServiceInfo>,
    pub policies: api::PolicyReport,
    pub neighbours: api::NeighbourTotals,
}

type Labels = Vec<(&'static str, String)>;

/// The one series of a family without labels.
fn one(v: u64) -> Vec<(Labels, f64)> {
    vec![(Labels::new(), v as f64)]
}

/// A per-interface family: its type, name, help and the `show interface` field it reads.
type InterfaceFamily = (
    MetricType,
    &'static str,
    &'static str,
    fn(&api::InterfaceInfo) -> u64,
);

/// One metric family: its series, each with its labels.
struct Family<'a> {
    name: &'a str,
    help: &'a str,
    unit: Option<Unit>,
    kind: MetricType,
    series: Vec<(Labels, f64)>,
}

impl Family<'_> {
    fn encode(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut m = enc.encode_descriptor(self.name, self.help, self.unit.as_ref(), self.kind)?;
        for (labels, v) in &self.series {
            let e = m.encode_family(labels)?;
            match self.kind {
                MetricType::Counter if v.fract() == 0.0 => {
                    ConstCounter::new(*v as u64).encode(e)?
                }
                MetricType::Counter => ConstCounter::new(*v).encode(e)?,
                _ if v.fract() == 0.0 && v.abs() < 9e15 => ConstGauge::new(*v as i64).encode(e)?,
                _ => ConstGauge::new(*v).encode(e)?,
            }
        }
        Ok(())
    }
}

fn counter<'a>(name: &'a str, help: &'a str, series: Vec<(Labels, f64)>) -> Family<'a> {
    Family {
        name,
        help,
        unit: None,
        kind: MetricType::Counter,
        series,
    }
}

fn gauge<'a>(name: &'a str, help: &'a str, series: Vec<(Labels, f64)>) -> Family<'a> {
    Family {
        name,
        help,
        unit: None,
        kind: MetricType::Gauge,
        series,
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for f in self.families() {
            f.encode(&mut enc)?;
        }
        Ok(())
    }
}

impl Snapshot {
    fn families(&self) -> Vec<Family<'_>> {
        let mut v = vec![gauge(
            "build_info",
            "The daemon's version (always 1).",
            vec![(vec![("version", self.version.clone())], 1.0)],
        )];
        v.extend(self.interface_families());
        v.extend(self.node_and_worker_families());
        v.extend(self.error_and_buffer_families());
        v.extend(self.copy_engine_families());
        v.extend(self.stateful_families());
        v.extend(self.neighbour_families());
        v.push(gauge(
            "fib_entries",
            "Routes in the table (VRF), connected and host routes included.",
            self.fib
                .iter()
                .map(|t| (vec![("table", t.table.to_string())], t.routes as f64))
                .collect(),
        ));
        v
    }

    /// The session table, services and policies.
    fn stateful_families(&self) -> Vec<Family<'_>> {
        let s = &self.sessions;
        let mut v = vec![
            gauge(
                "sessions",
                "Live sessions (services and policies).",
                one(s.live),
            ),
            gauge(
                "sessions_capacity",
                "The most sessions the table holds ([daemon] sessions).",
                one(s.capacity),
            ),
            counter("sessions_created", "Sessions created.", one(s.created)),
            counter(
                "sessions_refused",
                "New flows refused a session: the table full of established ones.",
                one(s.refused_full),
            ),
            counter(
                "sessions_evicted",
                "Sessions not established evicted to make room for a new one.",
                one(s.evicted_embryonic),
            ),
            counter(
                "sessions_expired",
                "Sessions idle past their timeout.",
                one(s.expired),
            ),
            counter(
                "sessions_killed",
                "Sessions of removed backends or services, freed.",
                one(s.killed),
            ),
        ];
        v.push(gauge(
            "service_sessions",
            "Live sessions of each service.",
            self.services
                .iter()
                .map(|i| (vec![("service", i.spec.name.clone())], i.sessions as f64))
                .collect(),
        ));
        let mut hits = Vec::new();
        for i in &self.policies.interfaces {
            for (rule, n) in &i.counters {
                let labels = vec![("interface", i.interface.clone()), ("rule", rule.clone())];
                hits.push((labels, *n as f64));
            }
        }
        v.push(counter(
            "policy_rule_hits",
            "New flows each policy rule allowed on each interface, and each direction's denied flows (rule \"ingress denied\", \"egress denied\").",
            hits,
        ));
        v
    }

    /// The neighbour table: its fill, caps, and what the caps and aging did.
    fn neighbour_families(&self) -> Vec<Family<'_>> {
        let n = &self.neighbours;
        let reason = |r: &str, v: u64| (vec![("reason", r.to_string())], v as f64);
        vec![
            gauge(
                "neighbours",
                "Learned ARP neighbours (static ones not counted).",
                one(n.learned),
            ),
            gauge(
                "neighbours_capacity",
                "The most learned neighbours the table holds ([daemon.neighbours] max).",
                one(n.max),
            ),
            gauge(
                "neighbours_interface_capacity",
                "The most learned neighbours one interface may hold ([daemon.neighbours] per-interface).",
                one(n.per_interface),
            ),
            counter(
                "neighbours_refused",
                "New neighbours not learned: reason \"full\" (their interface's share or the table full of recently heard ones), \"room\" (their host route would take a group kept for configured routes).",
                vec![reason("full", n.refused), reason("room", n.refused_room)],
            ),
            counter(
                "neighbours_evicted",
                "Learned neighbours silent past stale-seconds that made room for a new one.",
                one(n.evicted),
            ),
            counter(
                "neighbours_probes",
                "ARP requests sent to learned neighbours silent past age-seconds.",
                one(n.probes),
            ),
            counter(
                "neighbours_expired",
                "Learned neighbours forgotten after age-seconds without a word and three unanswered ARP requests.",
                one(n.expired),
            ),
        ]
    }

    /// Per interface: its counters and states, labelled with its name, kind and table.
    fn interface_families(&self) -> Vec<Family<'_>> {
        let ifl = |i: &api::InterfaceInfo| -> Labels {
            let kind = match &i.device {
                api::DeviceInfo::Memif { .. } => "memif",
                api::DeviceInfo::AfPacket { .. } => "af-packet",
                api::DeviceInfo::AfXdp { .. } => "af-xdp",
                api::DeviceInfo::Tap { .. } => "tap",
                api::DeviceInfo::Vxlan { .. } => "vxlan",
            };
            vec![
                ("interface", i.name.clone()),
                ("kind", kind.to_string()),
                ("table", i.table.to_string()),
            ]
        };
        let per_if = |f: fn(&api::InterfaceInfo) -> u64| -> Vec<(Labels, f64)> {
            self.interfaces
                .iter()
                .map(|i| (ifl(i), f(i) as f64))
                .collect()
        };
        let mut v = Vec::new();
        const C: MetricType = MetricType::Counter;
        const G: MetricType = MetricType::Gauge;
        let interface_families: [InterfaceFamily; 16] = [
            (C, "interface_rx_packets", "Packets received.", |i| {
                i.rx_packets
            }),
            (
                C,
                "interface_rx_bytes",
                "Bytes received (L2 frames).",
                |i| i.rx_bytes,
            ),
            (C, "interface_tx_packets", "Packets sent.", |i| i.tx_packets),
            (C, "interface_tx_bytes", "Bytes sent (L2 frames).", |i| {
                i.tx_bytes
            }),
            (
                C,
                "interface_rx_errors",
                "Received packets dropped: descriptors the peer got wrong, oversize frames, \
                 kernel drops.",
                |i| i.rx_errors,
            ),
            (
                C,
                "interface_rx_no_buffer",
                "Received packets that found no local buffer.",
                |i| i.rx_no_buffer,
            ),
            (
                C,
                "interface_tx_no_room",
                "Packets dropped because the peer's ring had no room.",
                |i| i.tx_no_room,
            ),
            (
                C,
                "interface_tx_ring_full",
                "Sends that found the transmit ring full.",
                |i| i.tx_ring_full,
            ),
            (
                C,
                "interface_tx_super_packets",
                "UDP super-packets sent (a run of one flow's datagrams in one system call).",
                |i| i.tx_super_packets,
            ),
            (
                C,
                "interface_tx_super_packet_datagrams",
                "Datagrams sent in UDP super-packets (also in interface_tx_packets).",
                |i| i.tx_super_packet_datagrams,
            ),
            (
                C,
                "interface_tx_super_packets_refused",
                "Runs of datagrams the kernel refused as one super-packet (sent one by one).",
                |i| i.tx_super_packets_refused,
            ),
            (
                C,
                "interface_interrupts",
                "memif interrupts (eventfd signals) sent and received.",
                |i| i.interrupts,
            ),
            (C, "interface_connects", "Times a peer connected.", |i| {
                i.connects
            }),
            (
                C,
                "interface_disconnects",
                "Times a peer disconnected.",
                |i| i.disconnects,
            ),
            (
                G,
                "interface_admin_up",
                "1 when the interface is administratively up.",
                |i| u64::from(i.admin_up),
            ),
            (
                G,
                "interface_link_up",
                "1 when the link is up (memif: a peer is connected).",
                |i| u64::from(i.connected),
            ),
        ];
        for (kind, name, help, f) in interface_families {
            v.push(Family {
                name,
                help,
                unit: None,
                kind,
                series: per_if(f),
            });
        }
        v
    }

    /// Per node on each worker, and per worker.
    fn node_and_worker_families(&self) -> Vec<Family<'_>> {
        let mut v = Vec::new();
        let node_series = |f: fn(&api::NodeRuntime) -> f64| -> Vec<(Labels, f64)> {
            self.runtime
                .iter()
                .flat_map(|w| {
                    w.nodes
                        .iter()
                        .map(move |n| (vec![worker(w.worker), ("node", n.name.clone())], f(n)))
                })
                .collect()
        };
        v.push(counter(
            "node_calls",
            "Times the node ran.",
            node_series(|n| n.calls as f64),
        ));
        v.push(counter(
            "node_vectors",
            "Packets the node processed.",
            node_series(|n| n.vectors as f64),
        ));
        v.push(Family {
            name: "node_clocks",
            help: "Time spent in the node.",
            unit: Some(Unit::Seconds),
            kind: MetricType::Counter,
            series: node_series(|n| n.clocks as f64 / 1e9),
        });
        let per_worker = |f: fn(&api::WorkerRuntime) -> f64| -> Vec<(Labels, f64)> {
            self.runtime
                .iter()
                .map(|w| (vec![worker(w.worker)], f(w)))
                .collect()
        };
        v.push(Family {
            name: "worker_elapsed",
            help: "Time since the worker's runtime counters were cleared.",
            unit: Some(Unit::Seconds),
            kind: MetricType::Counter,
            series: per_worker(|w| w.seconds),
        });
        v.push(Family {
            name: "worker_busy",
            help: "Of that, time in dispatch loops that moved at least one packet.",
            unit: Some(Unit::Seconds),
            kind: MetricType::Counter,
            series: per_worker(|w| w.busy_seconds),
        });
        v.push(gauge(
            "worker_busy_ratio",
            "Busy time over elapsed time since the counters were cleared.",
            per_worker(|w| {
                if w.seconds > 0.0 {
                    (w.busy_seconds / w.seconds).min(1.0)
                } else {
                    0.0
                }
            }),
        ));
        v.push(counter(
            "worker_loops",
            "Dispatch loops run.",
            per_worker(|w| w.loops as f64),
        ));
        v.push(counter(
            "worker_idle_sleeps",
            "Dispatch loops that went to sleep for want of packets.",
            per_worker(|w| w.sleeps as f64),
        ));
        v.push(counter(
            "worker_stalls",
            "Times the watchdog found the worker awake with no loop finished for 100 ms, and interrupted it.",
            per_worker(|w| w.stalls as f64),
        ));
        v
    }

    /// Drops by node and reason, and each worker's buffer pool.
    fn error_and_buffer_families(&self) -> Vec<Family<'_>> {
        let mut v = Vec::new();
        v.push(counter(
            "errors",
            "Packets dropped or noted by a node, by reason (as `show errors`).",
            self.errors
                .iter()
                .map(|e| {
                    (
                        vec![("node", e.node.clone()), ("reason", e.reason.clone())],
                        e.count as f64,
                    )
                })
                .collect(),
        ));
        v.push(gauge(
            "buffers_total",
            "Local packet buffers of the worker's pool.",
            self.buffers
                .iter()
                .map(|b| (vec![worker(b.worker)], b.total as f64))
                .collect(),
        ));
        v.push(gauge(
            "buffers_free",
            "Free buffers of the worker's pool.",
            self.buffers
                .iter()
                .map(|b| (vec![worker(b.worker)], b.free as f64))
                .collect(),
        ));
        v.push(gauge(
            "memif_region_bytes",
            "Bytes of memif regions mapped from peers, every interface together.",
            one(self.regions.mapped),
        ));
        v.push(gauge(
            "memif_region_budget_bytes",
            "The most bytes of memif regions the daemon maps from peers ([daemon] memif-memory-mib).",
            one(self.regions.budget),
        ));
        v
    }

    /// Per copy engine of each worker's nodes.
    fn copy_engine_families(&self) -> Vec<Family<'_>> {
        let mut v = Vec::new();
        let engine = |f: fn(&api::EngineInfo) -> u64| -> Vec<(Labels, f64)> {
            self.copy
                .engines
                .iter()
                .map(|e| {
                    (
                        vec![
                            worker(e.worker),
                            ("node", e.node.clone()),
                            ("role", e.role.clone()),
                            ("engine", e.kind.to_string()),
                        ],
                        f(e) as f64,
                    )
                })
                .collect()
        };
        for (name, help, f) in [
            (
                "copy_engine_batches",
                "Batches the engine accepted.",
                (|e| e.batches) as fn(&api::EngineInfo) -> u64,
            ),
            ("copy_engine_copies", "Copies submitted.", |e| e.copies),
            ("copy_engine_bytes", "Bytes submitted.", |e| e.bytes),
            (
                "copy_engine_full",
                "Submissions refused for want of room.",
                |e| e.full,
            ),
            (
                "copy_engine_short",
                "Copies made at once for being under the engine's inline threshold.",
                |e| e.short,
            ),
            ("copy_engine_descriptors", "DSA descriptors sent.", |e| {
                e.descriptors
            }),
            (
                "copy_engine_recovered",
                "DSA copies finished on the CPU after a fault.",
                |e| e.recovered,
            ),
            (
                "copy_engine_watchdog",
                "DSA batches redone after the watchdog.",
                |e| e.watchdog,
            ),
            (
                "copy_engine_fallback",
                "DSA batches copied on the CPU after the breaker tripped.",
                |e| e.fallback,
            ),
        ] {
            v.push(counter(name, help, engine(f)));
        }
        v.push(gauge(
            "copy_engine_tripped",
            "1 when the DSA engine's breaker tripped (it copies on the CPU for good).",
            engine(|e| u64::from(e.tripped.is_some())),
        ));
        v
    }
}

/// The `worker` label.
fn worker(w: usize) -> (&'static str, String) {
    ("worker", w.to_string())
}

/// The value of series `name` with every label in `want` (a test and monitoring helper:
/// parses the text format back).
pub fn value_of(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        if n != name {
            return None;
        }
        let ok = want.iter().all(|(k, v)| {
            let mut s = String::new();
            let _ = write!(s, "{k}=\"{v}\"");
            labels.split(',').any(|p| p == s)
        });
        if ok { value.parse().ok() } else { None }
    })
}
