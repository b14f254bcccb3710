//! `ethernet-input`: checks the destination MAC against the receiving interface, classifies by
//! EtherType and skips the Ethernet header.

use graph::{Ctx, Node};
use wire::{EtherType, Ethernet};

use crate::{ETH_HDR, Shared};

#[derive(Debug)]
pub struct EthernetInput {
    shared: Shared,
}

impl EthernetInput {
    pub fn new(shared: Shared) -> EthernetInput {
        EthernetInput { shared }
    }
}

graph::node! {
    EthernetInput: "ethernet-input", Internal;
    next Next {
        Ip4 = "ip4-input",
        Drop = "error-drop",
        Arp = "arp-input",
    }
    error Error {
        Short = "frame shorter than an Ethernet header",
        NotForUs = "l3 mac mismatch",
        UnknownType = "unknown ethertype",
        IfDown = "interface down",
    }
    trace EthernetTrace { ethertype: u16 }
}

impl core::fmt::Display for EthernetTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ethertype 0x{:04x}", self.ethertype)
    }
}

impl Node for EthernetInput {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let (m, data) = ctx.pool.meta_data_mut(b);
            let Some(ifc) = ifs.get(m.rx_if as usize).filter(|i| i.up) else {
                ctx.count_error(Error::IfDown);
                *n = Next::Drop.into();
                continue;
            };
            // Fast path: IPv4 unicast to this interface's MAC.
            if let Some(e) = data.first_chunk::<ETH_HDR>().map(Ethernet::new_unchecked)
                && e.ethertype_raw() == EtherType::Ipv4.to_raw()
                && e.dst_bytes() == ifc.mac
                && m.flags & graph::BUFFER_TRACED == 0
            {
                m.vrf = ifc.vrf;
                m.skip(ETH_HDR as u16);
                *n = Next::Ip4.into();
                continue;
            }
            let data = ctx.pool.data(b);
            let (ethertype, dst) = match Ethernet::new_checked(data) {
                Ok(e) => (e.ethertype(), e.dst()),
                Err(_) => {
                    ctx.count_error(Error::Short);
                    *n = Next::Drop.into();
                    continue;
                }
            };
            if dst.0 != ifc.mac && !dst.is_multicast() {
                ctx.count_error(Error::NotForUs);
                *n = Next::Drop.into();
                continue;
            }
            if ctx.is_traced(b) {
                let ethertype = ethertype.into();
                ctx.trace(b, EthernetTrace { ethertype });
            }
            match ethertype {
                EtherType::Ipv4 => {
                    ctx.pool.meta_mut(b).vrf = ifc.vrf;
                    ctx.pool.advance(b, ETH_HDR as isize);
                    *n = Next::Ip4.into();
                }
                EtherType::Arp => {
                    ctx.pool.advance(b, ETH_HDR as isize);
                    *n = Next::Arp.into();
                }
                _ => {
                    ctx.count_error(Error::UnknownType);
                    *n = Next::Drop.into();
                }
            }
        }
    }
}
