//! `ip4-frag`: our own packets larger than the outgoing interface's MTU, without Don't
//! Fragment, cut into fragments (RFC 791 §3.2) that fit it: an echo reply to a ping larger
//! than the link, an encapsulated packet of a network with `df = false`. Each fragment goes
//! back to `ip4-rewrite` on the same adjacency.
//!
//! Forwarded packets never come here: `ip4-rewrite` answers those with ICMP or drops them
//! (see its module doc). The first fragment keeps the packet's buffer (and its metadata); the
//! others are new buffers with the same metadata, sent on with [`graph::Ctx::emit`]. A pool
//! too short for all of them drops the packet whole, counted: a datagram missing a fragment
//! is worth nothing to its receiver.

use fib::adj::Adjacency;
use graph::{Ctx, Node};
use wire::Ipv4;
use wire::ipv4::{FLAG_MF, MIN_HEADER_LEN};

use crate::Shared;

#[derive(Debug)]
pub struct Ip4Frag {
    shared: Shared,
    /// The packet's bytes and one fragment's, reused (this is a slow path, not a copy-free
    /// one).
    packet: Vec<u8>,
    fragment: Vec<u8>,
}

impl Ip4Frag {
    pub fn new(shared: Shared) -> Ip4Frag {
        Ip4Frag {
            shared,
            packet: Vec::new(),
            fragment: Vec::new(),
        }
    }
}

graph::node! {
    Ip4Frag: "ip4-frag", Internal;
    next Next {
        Rewrite = "ip4-rewrite",
        Drop = "error-drop",
    }
    error Error {
        Fragmented = "packet fragmented (not an error)",
        Fragments = "fragments sent (not an error)",
        NoBuffer = "no buffers for every fragment (packet dropped)",
        TinyMtu = "interface mtu below 28 bytes (cannot fragment)",
        StaleAdj = "adjacency changed",
    }
}

/// Payload bytes per fragment for an MTU: what fits after the header, a multiple of 8.
fn per_fragment(mtu: u16) -> Option<usize> {
    let room = usize::from(mtu).checked_sub(MIN_HEADER_LEN)? & !7;
    (room > 0).then_some(room)
}

impl Node for Ip4Frag {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let adjs = self.shared.adjacencies.load();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            let Some(&Adjacency::Rewrite { mtu, .. }) = adjs.get(ctx.pool.meta(b).adj as usize)
            else {
                ctx.count_error(Error::StaleAdj);
                continue;
            };
            let Some(each) = per_fragment(mtu) else {
                ctx.count_error(Error::TinyMtu);
                continue;
            };
            self.packet.clear();
            ctx.pool.read_chain(b, &mut self.packet);
            let Some((header, payload)) = self.packet.split_first_chunk::<MIN_HEADER_LEN>() else {
                continue;
            };
            let count = payload.len().div_ceil(each);
            // Buffers for every fragment (a chain past a buffer's size); the first reuses the
            // packet's head.
            let need: usize = (0..count)
                .map(|k| {
                    let len = (payload.len() - k * each).min(each) + MIN_HEADER_LEN;
                    len.div_ceil(ctx.pool.data_size())
                })
                .sum::<usize>()
                - 1;
            if ctx.pool.available() < need {
                ctx.count_error(Error::NoBuffer);
                continue;
            }
            let meta = *ctx.pool.meta(b);
            let mut ok = true;
            for (k, chunk) in payload.chunks(each).enumerate() {
                self.fragment.clear();
                self.fragment.extend_from_slice(header);
                self.fragment.extend_from_slice(chunk);
                {
                    let mut ip = Ipv4::new_unchecked(&mut self.fragment[..MIN_HEADER_LEN]);
                    let more = k + 1 < count;
                    ip.set_total_len((MIN_HEADER_LEN + chunk.len()) as u16);
                    ip.set_flags_frag(if more { FLAG_MF } else { 0 });
                    ip.set_frag_offset((k * each) as u16);
                    ip.fill_checksum();
                }
                // The first fragment goes first, so that when it cannot be made nothing has
                // been sent.
                if k == 0 {
                    if !ctx.pool.rewrite(b, &self.fragment) {
                        ok = false;
                        break;
                    }
                    continue;
                }
                let Some(f) = ctx.pool.from_bytes(&self.fragment) else {
                    ok = false;
                    break;
                };
                let m = ctx.pool.meta_mut(f);
                (m.rx_if, m.tx_if, m.vrf, m.adj, m.flags) =
                    (meta.rx_if, meta.tx_if, meta.vrf, meta.adj, meta.flags);
                ctx.emit(f, Next::Rewrite);
            }
            if !ok {
                // Counted above as available; only a changed pool gets here.
                ctx.count_error(Error::NoBuffer);
                continue;
            }
            ctx.count_error(Error::Fragmented);
            ctx.count_errors(Error::Fragments, count as u64);
            *n = Next::Rewrite.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_carry_a_multiple_of_eight_that_fits() {
        assert_eq!(per_fragment(1500), Some(1480));
        assert_eq!(per_fragment(1006), Some(984));
        assert_eq!(per_fragment(28), Some(8));
        assert_eq!(per_fragment(27), None);
        assert_eq!(per_fragment(10), None);
    }
}
