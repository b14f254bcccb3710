//! `ethernet-input`: checks the destination MAC against the receiving interface, classifies by
//! EtherType and skips the Ethernet header.

use graph::{Ctx, Node, NodeInfo, NodeKind};
use wire::{EtherType, Ethernet};

use crate::Shared;

const NEXT_IP4: u16 = 0;
const NEXT_DROP: u16 = 1;
const NEXT_ARP: u16 = 2;

const E_SHORT: usize = 0;
const E_NOT_FOR_US: usize = 1;
const E_UNKNOWN_TYPE: usize = 2;
const E_IF_DOWN: usize = 3;

#[derive(Debug)]
pub struct EthernetInput {
    shared: Shared,
}

impl EthernetInput {
    pub fn new(shared: Shared) -> EthernetInput {
        EthernetInput { shared }
    }
}

impl Node for EthernetInput {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "ethernet-input",
            kind: NodeKind::Internal,
            nexts: &["ip4-input", "error-drop", "arp-input"],
            errors: &[
                "frame shorter than an Ethernet header",
                "l3 mac mismatch",
                "unknown ethertype",
                "interface down",
            ],
        }
    }

    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let (m, data) = ctx.pool.meta_data_mut(b);
            let Some(ifc) = ifs.get(m.rx_if as usize).filter(|i| i.up) else {
                ctx.count_error(E_IF_DOWN);
                *n = NEXT_DROP;
                continue;
            };
            // Fast path: IPv4 unicast to this interface's MAC.
            if let Some(h) = data.first_chunk::<14>()
                && h[12..14] == [0x08, 0x00]
                && h[..6] == ifc.mac
                && m.flags & graph::BUFFER_TRACED == 0
            {
                m.vrf = ifc.vrf;
                m.skip(14);
                *n = NEXT_IP4;
                continue;
            }
            let data = ctx.pool.data(b);
            let (ethertype, dst) = match Ethernet::new_checked(data) {
                Ok(e) => (e.ethertype(), e.dst()),
                Err(_) => {
                    ctx.count_error(E_SHORT);
                    *n = NEXT_DROP;
                    continue;
                }
            };
            if dst.0 != ifc.mac && !dst.is_multicast() {
                ctx.count_error(E_NOT_FOR_US);
                *n = NEXT_DROP;
                continue;
            }
            if ctx.is_traced(b) {
                let t: u16 = ethertype.into();
                ctx.trace(b, &t.to_be_bytes());
            }
            match ethertype {
                EtherType::Ipv4 => {
                    ctx.pool.meta_mut(b).vrf = ifc.vrf;
                    ctx.pool.advance(b, 14);
                    *n = NEXT_IP4;
                }
                EtherType::Arp => {
                    ctx.pool.advance(b, 14);
                    *n = NEXT_ARP;
                }
                _ => {
                    ctx.count_error(E_UNKNOWN_TYPE);
                    *n = NEXT_DROP;
                }
            }
        }
    }

    fn format_trace(&self, data: &[u8]) -> String {
        format!("ethertype 0x{:02x}{:02x}", data[0], data[1])
    }
}
