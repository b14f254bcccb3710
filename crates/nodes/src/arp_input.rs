//! `arp-input`: answers requests for our addresses and tells the control thread about the
//! neighbours it sees.

use std::sync::mpsc::{SyncSender, TrySendError};

use graph::{Ctx, Node, NodeInfo, NodeKind};
use wire::{Arp, ArpOp, MacAddr};

use crate::{Learned, Shared};

const NEXT_OUTPUT: u16 = 0;
const NEXT_DROP: u16 = 1;

const E_MALFORMED: usize = 0;
const E_NOT_OURS: usize = 1;
const E_REPLY_LEARNED: usize = 2;
const E_OFF_LINK: usize = 3;
const E_NO_HEADROOM: usize = 4;
const E_LEARN_QUEUE: usize = 5;

#[derive(Debug)]
pub struct ArpInput {
    shared: Shared,
    learned: SyncSender<Learned>,
}

impl ArpInput {
    /// `learned` carries neighbours to the control thread, which updates the adjacencies. It
    /// is bounded (`sync_channel`): a pod flooding ARP fills it and the excess is counted, so
    /// it cannot grow the control thread's memory.
    pub fn new(shared: Shared, learned: SyncSender<Learned>) -> ArpInput {
        ArpInput { shared, learned }
    }
}

impl Node for ArpInput {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "arp-input",
            kind: NodeKind::Internal,
            nexts: &["interface-output", "error-drop"],
            errors: &[
                "arp packet malformed or not ethernet/ipv4",
                "arp request for an address that is not ours",
                "arp reply: neighbour learned (not an error)",
                "arp sender not on a connected subnet",
                "no headroom for the l2 header",
                "learned-neighbour queue full or closed",
            ],
        }
    }

    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = NEXT_DROP;
            let rx = ctx.pool.meta(b).rx_if;
            let Some(ifc) = ifs.get(rx as usize) else {
                continue;
            };
            let Ok(arp) = Arp::new_checked(ctx.pool.data(b)) else {
                ctx.count_error(E_MALFORMED);
                continue;
            };
            let (op, smac, sip, tip) =
                (arp.op(), arp.sender_mac(), arp.sender_ip(), arp.target_ip());
            if !ifc.on_link(sip) {
                ctx.count_error(E_OFF_LINK);
                continue;
            }
            // Requests and replies alike tell us where the sender is.
            match self.learned.try_send(Learned {
                ifindex: rx,
                ip: sip,
                mac: smac.0,
            }) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    ctx.count_error(E_LEARN_QUEUE)
                }
            }
            if ctx.is_traced(b) {
                let mut t = [0u8; 9];
                t[0] = u16::from(op) as u8;
                t[1..5].copy_from_slice(&sip.octets());
                t[5..9].copy_from_slice(&tip.octets());
                ctx.trace(b, &t);
            }
            match op {
                ArpOp::Request if ifc.owns(tip) => {
                    let me = MacAddr(ifc.mac);
                    let len = Arp::<&[u8]>::LEN;
                    // The reply is written over the request, then an Ethernet header in front.
                    let _ = Arp::emit(
                        &mut ctx.pool.data_mut(b)[..len],
                        ArpOp::Reply,
                        (me, tip),
                        (smac, sip),
                    );
                    ctx.pool.truncate(b, len as u16);
                    if !ctx.pool.advance(b, -14) {
                        ctx.count_error(E_NO_HEADROOM);
                        continue;
                    }
                    let eth = ctx.pool.data_mut(b);
                    eth[0..6].copy_from_slice(&smac.0);
                    eth[6..12].copy_from_slice(&me.0);
                    eth[12..14].copy_from_slice(&[0x08, 0x06]);
                    ctx.pool.meta_mut(b).tx_if = rx;
                    *n = NEXT_OUTPUT;
                }
                ArpOp::Request => ctx.count_error(E_NOT_OURS),
                _ => ctx.count_error(E_REPLY_LEARNED),
            }
        }
    }

    fn format_trace(&self, d: &[u8]) -> String {
        let op = if d[0] == 1 { "request" } else { "reply" };
        format!(
            "{op} who-has {}.{}.{}.{} tell {}.{}.{}.{}",
            d[5], d[6], d[7], d[8], d[1], d[2], d[3], d[4]
        )
    }
}
