//! l3fwd's stateful variants: the generator's flows balanced through a service
//! (`--service`), judged by a policy (`--policy-rules N`), and each frame a new flow
//! (`--new-flows`), set up alike on veclane and on VPP (its `cnat` plugin for the service,
//! its `acl` plugin's reflexive ACLs for the policy: what Calico VPP builds services and
//! policies on).
//!
//! - `--service`: the generator's destination 10.10.2.2:5001 (UDP) is a VIP with one
//!   backend, 10.10.2.3:5002, behind the sink's port (the same MAC): every frame is
//!   translated. veclane: a `[[service]]`; VPP: `cnat translation add proto udp vip ...`.
//! - `--new-flows` (with `--service`): 16 VIPs, 10.10.2.16 to 10.10.2.31, VIP `k`'s backend
//!   10.10.2.3 at port 5002 + `k` (distinct ports keep the replies' keys of two VIPs' flows
//!   from one source port apart), and the generator cycles through 64,000 source ports × those 16 destinations:
//!   1,024,000 flows, more than either DUT keeps, so in the steady state every frame is a flow
//!   the DUT no longer knows (veclane evicts its oldest unanswered sessions to make room; VPP's
//!   cnat overwrites expired ones), and the zero-loss rate is new flows per second.
//! - `--service-flows N` (with `--service`): N established flows through the one VIP, the
//!   generator's source ports in turn (every frame's packets spread over them): what the
//!   DUT's per-flow state costs once the flows outnumber what it keeps close (veclane's flow
//!   cache holds 4096 a worker).
//! - `--policy-rules N`: N rules on the generator's side, the pod's egress: N - 1 that never
//!   match (TCP from 192.0.2.0/24) and a last one that allows the flows (UDP to
//!   10.10.2.0/24). veclane judges after DNAT, at the backend's port; VPP's input ACL runs
//!   before cnat's DNAT (at the FIB lookup), so its last rule names the VIP's port. VPP:
//!   `permit+reflect` rules in one ACL on the input interface.

use std::net::Ipv4Addr;

use crate::l3fwd::L3fwdOptions;
use crate::vpp::{IF_IN, IF_OUT, VppTopology};

/// `--service`'s VIP: the generator's default destination.
const VIP: Ipv4Addr = Ipv4Addr::new(10, 10, 2, 2);
/// The backend of every service: another address behind the sink's port.
const BACKEND: Ipv4Addr = Ipv4Addr::new(10, 10, 2, 3);
/// `--new-flows`' first VIP, and how many there are.
const NEW_FLOWS_VIP: Ipv4Addr = Ipv4Addr::new(10, 10, 2, 16);
const NEW_FLOWS_VIPS: u16 = 16;
/// `--new-flows`' source ports per VIP.
const NEW_FLOWS_PORTS: u16 = 64_000;

/// The VIPs the generator sends to, and the port.
fn vips(o: &L3fwdOptions) -> Vec<Ipv4Addr> {
    if o.new_flows {
        (0..u32::from(NEW_FLOWS_VIPS))
            .map(|k| Ipv4Addr::from(u32::from(NEW_FLOWS_VIP) + k))
            .collect()
    } else {
        vec![VIP]
    }
}

fn vip_port() -> u16 {
    trafgen::FrameSpec::default().dst_port
}

/// VIP `k`'s backend port.
fn backend_port(k: usize) -> u16 {
    vip_port() + 1 + k as u16
}

/// The generator's frames for `o`: `--new-flows` spreads them over every flow.
pub fn frames(spec: &mut trafgen::FrameSpec, o: &L3fwdOptions) {
    if o.new_flows {
        spec.dst_ip = NEW_FLOWS_VIP;
        spec.dst_ips = NEW_FLOWS_VIPS;
        spec.flows = NEW_FLOWS_PORTS;
    } else if o.service && o.service_flows > 1 {
        spec.flows = o.service_flows;
    }
}

/// Adds `o`'s services and policy to a daemon configuration.
pub fn veclane(c: &mut api::Config, o: &L3fwdOptions) {
    if o.service {
        for (k, vip) in vips(o).into_iter().enumerate() {
            c.service.push(api::ServiceSpec {
                name: format!("bench{k}"),
                network: None,
                table: 0,
                vip,
                port: vip_port(),
                protocol: api::Protocol::Udp,
                backends: vec![api::BackendSpec {
                    addr: BACKEND,
                    port: backend_port(k),
                    state: api::BackendState::Ready,
                }],
                local: false,
                affinity_seconds: None,
                node_port: None,
                external_ips: Vec::new(),
                external_table: 0,
                external_local: false,
                external_source: None,
            });
        }
        let sink = c.neighbor[0].clone();
        c.neighbor.push(api::NeighborSpec {
            ip: BACKEND,
            ..sink
        });
    }
    if o.policy_rules > 0 {
        use policy::{Peer, PortMatch, PortRange, Protocol, Rule};
        let rule = |net: &str, protocol, port| Rule {
            peers: vec![Peer::Cidr {
                prefix: net.parse().expect("a prefix"),
                except: vec![],
            }],
            ports: vec![PortMatch {
                protocol,
                port: Some(PortRange::one(port)),
            }],
        };
        let mut rules: Vec<Rule> = (1..o.policy_rules)
            .map(|k| rule("192.0.2.0/24", Protocol::Tcp, k as u16))
            .collect();
        let ports = if o.service {
            PortRange {
                first: backend_port(0),
                last: backend_port(vips(o).len() - 1),
            }
        } else {
            PortRange::one(vip_port())
        };
        let mut last = rule("10.10.2.0/24", Protocol::Udp, 0);
        last.ports[0].port = Some(ports);
        rules.push(last);
        c.policy.push(api::PolicySpec {
            name: "bench".into(),
            interfaces: vec![c.memif_names()[0].clone()],
            ingress: None,
            egress: Some(rules),
        });
    }
}

/// Adds `o`'s translations and ACL to VPP's l3fwd topology; `sink_mac` is the generator's
/// receiving MAC (the backend's neighbour).
pub fn vpp(t: &mut VppTopology, o: &L3fwdOptions, sink_mac: [u8; 6]) {
    if o.service {
        t.plugins.push("cnat");
        t.commands.push(format!(
            "set ip neighbor {IF_OUT} {BACKEND} {} static",
            crate::node::mac_str(sink_mac)
        ));
        // A translation stacks on its backend's route as it is when made: made while the
        // interface is down, it keeps dropping (VPP 25.10's cnat does not follow the route
        // when the interface comes up). So the interfaces go up first.
        for i in [IF_IN, IF_OUT] {
            t.commands.push(format!("set interface state {i} up"));
        }
        for (k, vip) in vips(o).into_iter().enumerate() {
            t.commands.push(format!(
                "cnat translation add proto udp vip {vip} {} to ->{BACKEND} {}",
                vip_port(),
                backend_port(k)
            ));
        }
    }
    if o.policy_rules > 0 {
        t.plugins.push("acl");
        let mut rules: Vec<String> = (1..o.policy_rules)
            .map(|k| format!("permit+reflect src 192.0.2.0/24 dst 0.0.0.0/0 proto 6 dport {k}"))
            .collect();
        rules.push(format!(
            "permit+reflect src 0.0.0.0/0 dst 10.10.2.0/24 proto 17 dport {}",
            vip_port()
        ));
        t.commands
            .push(format!("set acl-plugin acl {}", rules.join(", ")));
        t.commands
            .push(format!("set acl-plugin interface {IF_IN} input acl 0"));
    }
}

/// What `o` asks of a DUT other than veclane and VPP (which cannot translate or judge).
pub fn required(o: &L3fwdOptions) -> Option<&'static str> {
    if o.service {
        Some("--service")
    } else if o.policy_rules > 0 {
        Some("--policy-rules")
    } else if o.new_flows {
        Some("--new-flows")
    } else if o.service_flows > 1 {
        Some("--service-flows")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::test_config;
    use crate::{Dut, Subject};

    fn opts(service: bool, policy_rules: u32, new_flows: bool) -> L3fwdOptions {
        L3fwdOptions {
            service,
            policy_rules,
            new_flows,
            ..L3fwdOptions::default()
        }
    }

    #[test]
    fn new_flows_are_16_services_with_a_backend_port_each() {
        let o = opts(true, 3, true);
        let mut c = api::Config::embedded_default();
        veclane(&mut c, &o);
        assert_eq!(c.service.len(), 16);
        assert_eq!(c.service[15].vip, Ipv4Addr::new(10, 10, 2, 31));
        assert_eq!(c.service[15].backends[0].port, 5017);
        let rules = c.policy[0].egress.as_ref().unwrap();
        assert_eq!(
            rules[2].ports[0].port,
            Some(policy::PortRange {
                first: 5002,
                last: 5017
            })
        );
        c.validate("test").unwrap();
        let mut spec = trafgen::FrameSpec::default();
        frames(&mut spec, &o);
        spec.validate().unwrap();
        assert_eq!(
            usize::from(spec.flows) * usize::from(spec.dst_ips),
            1_024_000
        );
    }

    /// `--service-flows N`: the generator's source ports cycle over N flows to the one VIP.
    #[test]
    fn service_flows_are_the_generators_source_ports() {
        let mut spec = trafgen::FrameSpec::default();
        let o = L3fwdOptions {
            service_flows: 20_000,
            ..opts(true, 0, false)
        };
        frames(&mut spec, &o);
        spec.validate().unwrap();
        assert_eq!((spec.flows, spec.dst_ips, spec.dst_ip), (20_000, 1, VIP));
    }

    #[test]
    fn vpp_gets_cnat_translations_and_a_reflexive_acl() {
        let mut t = VppTopology::l3fwd([2, 0, 0, 0, 0, 1]);
        vpp(&mut t, &opts(true, 50, false), [2, 0, 0, 0, 0, 1]);
        assert_eq!(t.plugins, ["cnat", "acl"]);
        assert!(t.commands.contains(
            &"cnat translation add proto udp vip 10.10.2.2 5001 to ->10.10.2.3 5002".to_string()
        ));
        let acl = t
            .commands
            .iter()
            .find(|c| c.starts_with("set acl-plugin acl "))
            .unwrap();
        assert_eq!(acl.matches("permit+reflect").count(), 50);
        assert!(
            acl.ends_with("dst 10.10.2.0/24 proto 17 dport 5001"),
            "{acl}"
        );
        assert_eq!(
            t.commands.last().unwrap(),
            &format!("set acl-plugin interface {IF_IN} input acl 0")
        );
    }

    #[test]
    fn only_duts_with_services_run_them() {
        let mut c = test_config(vec![
            Subject::plain(Dut::Veclane),
            Subject::plain(Dut::Testpmd),
        ]);
        c.l3fwd = opts(true, 0, false);
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("--service: testpmd has no services"), "{e}");
        c.duts = vec![Subject::plain(Dut::Vpp), Subject::plain(Dut::None)];
        c.check().unwrap();
        c.l3fwd = opts(false, 0, true);
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("--new-flows needs --service"), "{e}");
        for (service, new_flows) in [(false, false), (true, true)] {
            c.l3fwd = L3fwdOptions {
                service_flows: 100,
                ..opts(service, 0, new_flows)
            };
            let e = c.check().unwrap_err().to_string();
            assert!(e.contains("--service-flows needs --service"), "{e}");
        }
    }
}
