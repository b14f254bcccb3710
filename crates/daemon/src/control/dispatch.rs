//! Serving API requests: each [`Request`] maps onto the control thread's operations, and
//! every refusal becomes a [`Reply::Error`] with its reason.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, channel};
use std::time::Duration;

use api::{ErrorCount, FibEntry, InterfaceInfo, Neighbor, Placement, Reply, Request};
use fib::adj::Adjacency;

use super::{Control, ControlError};
use crate::worker::WorkerCmd;

impl Control {
    /// Serves one API request.
    pub fn handle(&mut self, req: Request) -> Reply {
        let change = req.is_change();
        // The request as it came, for the log: its name (the wire's tag) and fields.
        let what = serde_json::to_value(&req).unwrap_or_default();
        let name = what
            .get("request")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string();
        let r = self.handle_inner(req);
        self.after_rib_change();
        match r {
            Ok(r) => {
                if change {
                    tracing::info!(request = %name, detail = %what, "configuration changed over the API");
                }
                r
            }
            // A refused `show` changed nothing and its client has the reason (a CNI plugin
            // asks for an interface before making it): not the operator's concern. Other
            // refusals (a pcap path outside its directory, say) are.
            Err(e) if name.starts_with("show_") => {
                let message = e.to_string();
                tracing::debug!(request = %name, reason = %message, "query refused");
                Reply::Error {
                    code: e.code(),
                    message,
                }
            }
            Err(e) => {
                let message = e.to_string();
                let key = format!("{name}: {message}");
                if let Some(held) = self.repeats.admit(&key) {
                    tracing::warn!(
                        request = %name,
                        reason = %message,
                        repeats = held,
                        "request refused"
                    );
                }
                Reply::Error {
                    code: e.code(),
                    message,
                }
            }
        }
    }

    /// Asks every worker and collects the answers in worker order.
    pub(super) fn ask<T>(
        &self,
        make: impl Fn(mpsc::Sender<T>) -> WorkerCmd,
    ) -> Result<Vec<T>, ControlError> {
        let mut out = Vec::new();
        for w in &self.workers {
            let (tx, rx) = channel();
            w.send(make(tx));
            out.push(
                rx.recv_timeout(Duration::from_secs(5))
                    .map_err(|_| ControlError::WorkerSilent(w.index))?,
            );
        }
        Ok(out)
    }

    fn handle_inner(&mut self, req: Request) -> Result<Reply, ControlError> {
        Ok(match req {
            Request::ShowVersion => Reply::Version {
                version: env!("CARGO_PKG_VERSION").to_string(),
                workers: self.workers.len(),
                runtime_dir: self.runtime_dir.display().to_string(),
            },
            Request::ShowInterface { name } => Reply::Interfaces {
                interfaces: self.interface_infos(name)?,
            },
            Request::ShowRxPlacement => Reply::RxPlacement {
                placement: self.placement(),
            },
            Request::ShowRuntime => Reply::Runtime {
                workers: self.ask(WorkerCmd::Runtime)?,
            },
            Request::ShowCopyEngine => Reply::CopyEngine {
                info: self.show_copy_engine(),
            },
            Request::ShowBuffers => Reply::Buffers {
                workers: self.ask(WorkerCmd::Buffers)?,
                regions: api::MemifRegions {
                    mapped: self.region_budget.used(),
                    budget: self.region_budget.limit(),
                },
            },
            Request::ShowErrors => Reply::Errors {
                errors: self.errors_summed()?,
            },
            Request::ShowTrace => Reply::Trace {
                text: self.trace_text()?,
            },
            Request::TraceAdd { node, count } => {
                self.trace_add(&node, count)?;
                Reply::Ok
            }
            Request::Clear { what } => {
                self.clear(what);
                Reply::Ok
            }
            Request::CreateMemif(spec) => {
                // Over the API (not from the configuration file): a file socket stays in the
                // runtime directory.
                self.api_socket_allowed(&spec.socket)?;
                let (name, index) = self.create_memif(&spec)?;
                Reply::Created { name, index }
            }
            Request::NetworkAdd(spec) => {
                self.network_add(spec)?;
                Reply::Ok
            }
            Request::NetworkDel { name } => {
                self.network_del(&name)?;
                Reply::Ok
            }
            Request::ShowNetwork => Reply::Networks {
                networks: self.network_infos(),
            },
            Request::ShowVxlanTunnel => Reply::Tunnels {
                tunnels: self.tunnel_infos(),
            },
            Request::SetInterfaceMtu { interface, mtu } => {
                let i = self.iface_index(&interface)?;
                self.set_mtu(i, mtu)?;
                Reply::Ok
            }
            Request::ServiceAdd(spec) => {
                self.service_add(spec)?;
                Reply::Ok
            }
            Request::ServiceDel { name } => {
                self.service_del(&name)?;
                Reply::Ok
            }
            Request::ShowService => Reply::Services {
                services: self.service_infos(),
            },
            Request::ShowSession { filter } => {
                let (sessions, totals) = self.session_infos(&filter)?;
                Reply::Sessions { sessions, totals }
            }
            Request::PolicyAdd(spec) => {
                self.policy_add(spec)?;
                Reply::Ok
            }
            Request::PolicyDel { name } => {
                self.policy_del(&name)?;
                Reply::Ok
            }
            Request::AddressSetAdd(spec) => {
                self.set_add(spec)?;
                Reply::Ok
            }
            Request::AddressSetDel { name } => {
                self.set_del(&name)?;
                Reply::Ok
            }
            Request::ShowPolicy => Reply::Policies {
                report: self.policy_report(),
            },
            Request::SetAllowedSources { interface, sources } => {
                let i = self.iface_index(&interface)?;
                self.set_allowed_sources(i, sources.as_deref())?;
                Reply::Ok
            }
            Request::CreateAfPacket(spec) => {
                let (name, index) = self.create_af_packet(&spec)?;
                Reply::Created { name, index }
            }
            Request::CreateAfXdp(spec) => {
                let (name, index) = self.create_af_xdp(&spec)?;
                Reply::Created { name, index }
            }
            Request::CreateTap(spec) => {
                let (name, index) = self.create_tap(&spec)?;
                Reply::Created { name, index }
            }
            Request::DeleteInterface { name } => {
                self.delete_interface(&name)?;
                Reply::Ok
            }
            Request::SetState { interface, up } => {
                let i = self.iface_index(&interface)?;
                self.set_state(i, up);
                Reply::Ok
            }
            Request::SetIpAddress {
                interface,
                address,
                delete,
            } => {
                let i = self.iface_index(&interface)?;
                self.address(i, address, delete)?;
                Reply::Ok
            }
            Request::SetIpTable { interface, table } => {
                let i = self.iface_index(&interface)?;
                self.set_table(i, table)?;
                Reply::Ok
            }
            Request::IpRoute { add, route } => {
                self.route(add, &route)?;
                self.routes_changed();
                Reply::Ok
            }
            Request::ShowIpFib { table } => Reply::Fib {
                entries: self.fib_entries(table)?,
            },
            Request::ShowIpFibSummary => Reply::FibSummary {
                tables: self.fib_summary()?,
            },
            Request::ShowIpNeighbors => Reply::Neighbors {
                neighbors: self.neighbors(),
                totals: self.rib.neighbour_totals(),
            },
            Request::ShowIpNeighborSummary => Reply::Neighbors {
                neighbors: Vec::new(),
                totals: self.rib.neighbour_totals(),
            },
            Request::SetIpNeighbor { neighbor, delete } => {
                self.neighbor(&neighbor, delete)?;
                Reply::Ok
            }
            Request::PcapOn {
                points,
                interface,
                file,
                max_packets,
            } => self.pcap_on(&points, &interface, &file, max_packets)?,
            Request::PcapOff => self.pcap_off()?,
        })
    }

    /// `show interface [NAME]`: every interface, or the one named.
    fn interface_infos(&self, name: Option<String>) -> Result<Vec<InterfaceInfo>, ControlError> {
        let only = name.map(|n| self.iface_index(&n)).transpose()?;
        Ok((0..self.ifaces.len() as u32)
            .filter(|&i| self.ifaces[i as usize].is_some())
            .filter(|i| only.is_none_or(|o| o == *i))
            .map(|i| self.interface_info(i))
            .collect())
    }

    /// `show errors`: every worker's counters, summed by node and reason.
    fn errors_summed(&self) -> Result<Vec<ErrorCount>, ControlError> {
        let mut sum: BTreeMap<(String, String), u64> = BTreeMap::new();
        for w in self.ask(WorkerCmd::Errors)? {
            for (n, r, c) in w {
                *sum.entry((n, r)).or_default() += c;
            }
        }
        Ok(sum
            .into_iter()
            .map(|((node, reason), count)| ErrorCount {
                count,
                node,
                reason,
            })
            .collect())
    }

    /// `show trace`: every worker's records, under a header per worker when there are
    /// several.
    fn trace_text(&self) -> Result<String, ControlError> {
        let mut text = String::new();
        for (k, t) in self.ask(WorkerCmd::Trace)?.into_iter().enumerate() {
            if self.workers.len() > 1 {
                text.push_str(&format!(
                    "------------------- worker {k} -------------------\n"
                ));
            }
            text.push_str(if t.is_empty() {
                "No packets in trace buffer\n"
            } else {
                &t
            });
        }
        Ok(text)
    }

    /// `trace add NODE N` on every worker; the first refusal is the answer.
    fn trace_add(&self, node: &str, count: u32) -> Result<(), ControlError> {
        for r in self.ask(|tx| WorkerCmd::TraceAdd {
            node: node.to_string(),
            count,
            reply: tx,
        })? {
            r.map_err(ControlError::Trace)?;
        }
        Ok(())
    }

    /// `clear ...`: interface counters here, the rest in every worker.
    fn clear(&mut self, what: api::Clear) {
        if what == api::Clear::Interfaces {
            for i in self.ifaces.iter_mut().flatten() {
                i.clear_counters();
            }
        } else {
            for w in &self.workers {
                w.send(WorkerCmd::Clear(what));
            }
        }
    }

    /// `show ip fib summary`: routes per table.
    fn fib_summary(&self) -> Result<Vec<api::FibTableSize>, ControlError> {
        let mut tables: Vec<api::FibTableSize> = Vec::new();
        for e in self.rib.entries(None)? {
            match tables.last_mut() {
                Some(t) if t.table == e.table => t.routes += 1,
                _ => tables.push(api::FibTableSize {
                    table: e.table,
                    routes: 1,
                }),
            }
        }
        Ok(tables)
    }

    /// `show ip neighbors`.
    fn neighbors(&self) -> Vec<Neighbor> {
        self.rib
            .neighbours()
            .into_iter()
            .map(|(i, ip, mac, static_entry)| Neighbor {
                interface: self.name_of(i).to_string(),
                ip,
                mac: api::MacAddr(mac),
                static_entry,
            })
            .collect()
    }

    fn placement(&self) -> Vec<Placement> {
        let mut placement = Vec::new();
        for i in self
            .ifaces
            .iter()
            .flatten()
            .filter(|i| i.tunnel().is_none())
        {
            let n = if i.connected {
                i.counters.rx_queues
            } else {
                i.placement.len().max(1)
            };
            for q in 0..n {
                let w = self.worker_for(i, q);
                placement.push(Placement {
                    interface: i.name.clone(),
                    queue: q as u16,
                    worker: w,
                    core: self.workers[w].core,
                    mode: i
                        .memif()
                        .and_then(|m| m.rx_mode)
                        .filter(|&m| m == api::RxMode::Polling)
                        .unwrap_or(self.mode),
                    connected: i.connected,
                });
            }
        }
        placement
    }

    fn fib_entries(&self, table: Option<u32>) -> Result<Vec<FibEntry>, ControlError> {
        let name = |i: u32| self.name_of(i);
        Ok(self
            .rib
            .entries(table)?
            .into_iter()
            .map(|e| FibEntry {
                table: e.table,
                prefix: e.prefix,
                path: match e.adjacency {
                    Some(Adjacency::Local) => "receive".into(),
                    Some(Adjacency::Drop) | None => "drop".into(),
                    Some(Adjacency::Glean { tx_if, next_hop }) => {
                        if next_hop.is_unspecified() {
                            format!("glean {}", name(tx_if))
                        } else {
                            format!("via {next_hop} {} (unresolved: arp)", name(tx_if))
                        }
                    }
                    Some(Adjacency::Rewrite {
                        tx_if,
                        next_hop,
                        dst,
                        ..
                    }) => format!("via {next_hop} {} {}", name(tx_if), api::MacAddr(dst)),
                },
            })
            .collect())
    }
}
