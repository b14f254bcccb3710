//! `interface-output`: hands each packet to the device node of its `tx_if` (the output node of
//! the interface's device kind, or a VXLAN tunnel's encapsulation), as VPP's
//! `interface-output` does, and drops what goes to an interface that is down or gone.
//!
//! Neither this node nor any other protocol node names a device: an interface's
//! [`Device::Output`] is the position of its kind's output node among the graph's device
//! output nodes, and nodes declared with `+ devices` reach the `k`th at
//! [`graph::NextNodes::device`]`(k)`.
//!
//! A frame is usually one run of packets to one interface, so the decision is made once per
//! run, not per packet.

use graph::{Ctx, NextNodes, Node};

use fib::adj::Adjacency;

use crate::{Device, ETH_HDR, IfConfig, Shared};

/// Which node transmits for an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    /// The graph's `k`th device output node.
    Device(u16),
    /// `vxlan4-encap`.
    Vxlan,
}

impl Out {
    /// The next index of this node for a node `N` declared with `+ devices`, `vxlan` being
    /// its arc to `vxlan4-encap`.
    #[inline(always)]
    pub fn next<N: NextNodes>(self, vxlan: N) -> u16 {
        match self {
            Out::Device(k) => N::device(k),
            Out::Vxlan => vxlan.index(),
        }
    }
}

/// Why a packet cannot be sent on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoOut {
    AdminDown,
    Gone,
}

/// What every packet sent through rewrite adjacency `adj` shares, for the nodes that write
/// the Ethernet header themselves on their fast path (`ip4-rewrite`, `vxlan4-encap`): the
/// header (destination, source, IPv4), the interface, its MTU and the kind of device node that
/// sends on it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rewrite {
    pub hdr: [u8; ETH_HDR],
    pub tx_if: u32,
    pub mtu: u32,
    pub out: Out,
}

/// `adj`'s [`Rewrite`]; `None` when it is not a rewrite, or its interface is down or gone.
pub(crate) fn rewrite_for(adjs: &[Adjacency], ifs: &[IfConfig], adj: u32) -> Option<Rewrite> {
    let Some(&Adjacency::Rewrite {
        tx_if,
        dst,
        src,
        mtu,
        ..
    }) = adjs.get(adj as usize)
    else {
        return None;
    };
    let out = out_for(ifs, tx_if).ok()?;
    let mut hdr = [0u8; ETH_HDR];
    hdr[..6].copy_from_slice(&dst);
    hdr[6..12].copy_from_slice(&src);
    hdr[12..].copy_from_slice(&wire::EtherType::Ipv4.to_raw().to_be_bytes());
    Some(Rewrite {
        hdr,
        tx_if,
        mtu: u32::from(mtu),
        out,
    })
}

/// Where a packet for interface `tx` goes: what `interface-output` decides, and what
/// `ip4-rewrite` decides itself on the fast path to save a node.
#[inline]
pub fn out_for(ifs: &[IfConfig], tx: u32) -> Result<Out, NoOut> {
    match ifs.get(tx as usize) {
        None => Err(NoOut::Gone),
        Some(c) if !c.up => Err(NoOut::AdminDown),
        Some(c) => Ok(match c.device {
            Device::Output(k) => Out::Device(k),
            Device::Vxlan(_) => Out::Vxlan,
        }),
    }
}

#[derive(Debug)]
pub struct InterfaceOutput {
    shared: Shared,
}

impl InterfaceOutput {
    pub fn new(shared: Shared) -> InterfaceOutput {
        InterfaceOutput { shared }
    }
}

graph::node! {
    InterfaceOutput: "interface-output", Internal;
    next Next {
        Vxlan = "vxlan4-encap",
        Drop = "error-drop",
    } + devices
    error Error {
        AdminDown = "interface admin down",
        NoInterface = "interface deleted",
    }
}

impl Node for InterfaceOutput {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        let mut last: Option<(u32, Result<u16, Error>)> = None;
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let tx = ctx.pool.meta(b).tx_if;
            let to = match last {
                Some((i, to)) if i == tx => to,
                _ => {
                    let to = match out_for(&ifs, tx) {
                        Ok(out) => Ok(out.next(Next::Vxlan)),
                        Err(NoOut::Gone) => Err(Error::NoInterface),
                        Err(NoOut::AdminDown) => Err(Error::AdminDown),
                    };
                    last = Some((tx, to));
                    to
                }
            };
            *n = match to {
                Ok(next) => next,
                Err(e) => {
                    ctx.count_error(e);
                    Next::Drop.into()
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;

    use super::*;
    use crate::testing::{DEVICES, run_one};
    use crate::{TunnelCounters, VxlanTunnel};

    fn node(ifs: Vec<IfConfig>) -> InterfaceOutput {
        InterfaceOutput::new(Shared::new(
            Arc::new(ArcSwap::from_pointee(ifs)),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            fib::adj::AdjTable::new().reader(),
        ))
    }

    /// Every device kind, the one no protocol node was written for included, reaches its
    /// output node through the interface's `Device::Output`.
    #[test]
    fn each_device_kind_goes_to_its_node_and_down_or_gone_interfaces_drop() {
        let memif = IfConfig::new([2, 0, 0, 0, 0, 1], 0);
        let on = |k: u16| {
            let mut c = memif.clone();
            c.device = Device::Output(k);
            c
        };
        let (afp, xdp, tap, dummy) = (on(1), on(2), on(3), on(4));
        let mut vx = memif.clone();
        vx.device = Device::Vxlan(VxlanTunnel {
            vni: 56,
            src: fib::Ipv4Addr::new(192, 0, 2, 1),
            dst: fib::Ipv4Addr::new(192, 0, 2, 2),
            underlay: 0,
            uplink: 1,
            df: true,
            ranges: Vec::new(),
            counters: Arc::new(TunnelCounters::default()),
        });
        let mut down = memif.clone();
        down.up = false;
        let ifs = vec![memif, afp, vx, down, xdp, tap, dummy];
        for (tx, want, err) in [
            (0, DEVICES[0], None),
            (1, "af-packet-output", None),
            (2, "vxlan4-encap", None),
            (3, "error-drop", Some("interface admin down")),
            (4, "af-xdp-output", None),
            (5, "tap-output", None),
            (6, "dummy-output", None),
            (9, "error-drop", Some("interface deleted")),
        ] {
            let ((next, ..), errors) =
                run_one(node(ifs.clone()), &[0; 60], &[], move |m| m.tx_if = tx);
            assert_eq!(next, want, "tx_if {tx}");
            assert_eq!(errors, err.into_iter().collect::<Vec<_>>());
        }
    }
}
