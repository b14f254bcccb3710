//! `gso-ip4`: TCP/IPv4 super-frames (a pod's segmentation offload, kept whole from its tap)
//! cut into segments where they leave for an interface that takes none: memif, a kernel
//! uplink, a VXLAN tunnel. `ip4-rewrite` sends them here rewritten (Ethernet header written,
//! TTL decremented); each segment goes on to the interface's device node, or to
//! `vxlan4-encap`, as the super-frame would have.
//!
//! Segments are what the kernel's software segmentation makes ([`wire::tso`]): headers
//! copied and fixed, the payload copied once from the super-frame's chain into each, a full
//! TCP checksum each ([`buffer::L4_CHECKSUM_OURS`]). A pool too short for every segment
//! drops the super-frame whole, counted (TCP sends it again; half of it would be worth as
//! little).

use buffer::{NONE, Pool};
use graph::{CONSUMED, Ctx, Node};
use wire::tso::{MAX_HDRS, MIN_MSS, SuperFrame};

use crate::Shared;
use crate::interface_output::{NoOut, out_for};

#[derive(Debug)]
pub struct GsoIp4 {
    shared: Shared,
    /// A segment larger than one buffer (a jumbo MTU), built before it is chained.
    scratch: Vec<u8>,
}

impl GsoIp4 {
    pub fn new(shared: Shared) -> GsoIp4 {
        GsoIp4 {
            shared,
            scratch: Vec::new(),
        }
    }
}

graph::node! {
    GsoIp4: "gso-ip4", Internal;
    next Next {
        Vxlan = "vxlan4-encap",
        Drop = "error-drop",
    } + devices
    error Error {
        Cut = "TCP super-frame cut into segments (not an error)",
        Segments = "segments sent (not an error)",
        NoBuffer = "no buffers for every segment (super-frame dropped)",
        Malformed = "not a TCP/IPv4 super-frame (dropped)",
        AdminDown = "tx interface admin down",
        NoInterface = "tx interface deleted",
    }
    trace GsoTrace { segments: u32 }
}

impl core::fmt::Display for GsoTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "cut into {} segments", self.segments)
    }
}

impl Node for GsoIp4 {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let ifs = self.shared.interfaces.load();
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let m = *ctx.pool.meta(b);
            let to = match out_for(&ifs, m.tx_if) {
                Ok(out) => out.next(Next::Vxlan),
                Err(e) => {
                    ctx.count_error(match e {
                        NoOut::AdminDown => Error::AdminDown,
                        NoOut::Gone => Error::NoInterface,
                    });
                    *n = Next::Drop.into();
                    continue;
                }
            };
            *n = Next::Drop.into();
            let mss = usize::from(m.gso_size);
            let d = ctx.pool.data(b);
            let Some(sf) = SuperFrame::parse(&d[..d.len().min(MAX_HDRS)], m.total_len as usize)
                .filter(|_| mss >= MIN_MSS)
            else {
                ctx.count_error(Error::Malformed);
                continue;
            };
            let count = sf.segments(mss);
            let size = ctx.pool.data_size();
            let need: usize = (0..count)
                .map(|k| sf.segment_len(mss, k).div_ceil(size))
                .sum();
            if ctx.pool.available() < need {
                ctx.count_error(Error::NoBuffer);
                continue;
            }
            let mut made = 0;
            for k in 0..count {
                let Some(s) = self.segment(ctx.pool, b, &sf, mss, (k, count)) else {
                    break;
                };
                let sm = ctx.pool.meta_mut(s);
                (sm.rx_if, sm.tx_if, sm.vrf, sm.adj) = (m.rx_if, m.tx_if, m.vrf, m.adj);
                sm.flags = m.flags | buffer::L4_CHECKSUM_OURS;
                ctx.emit_index(s, to);
                made += 1;
            }
            if made < count {
                // Counted as available; only a pool shorter than it said gets here. What
                // was made is on its way: TCP recovers the rest.
                ctx.count_error(Error::NoBuffer);
            }
            if m.flags & graph::BUFFER_TRACED != 0 {
                ctx.trace(
                    b,
                    GsoTrace {
                        segments: made as u32,
                    },
                );
            }
            ctx.count_error(Error::Cut);
            ctx.count_errors(Error::Segments, made as u64);
            ctx.pool.free(b);
            *n = CONSUMED;
        }
    }
}

impl GsoIp4 {
    /// Segment `k` of `count` of super-frame `b` in a buffer of its own (a chain when it is
    /// larger than one); `None` when the pool is out.
    fn segment(
        &mut self,
        pool: &mut Pool,
        b: u32,
        sf: &SuperFrame,
        mss: usize,
        (k, count): (usize, usize),
    ) -> Option<u32> {
        let len = sf.segment_len(mss, k);
        let at = sf.hdrs + k * mss;
        if len > pool.data_size() {
            // The first segment is the longest: the chain is read out once, for it.
            if k == 0 {
                self.scratch.clear();
                pool.read_chain(b, &mut self.scratch);
            }
            let mut seg = [
                &self.scratch[..sf.hdrs],
                &self.scratch[at..at + len - sf.hdrs],
            ]
            .concat();
            sf.fix(&mut seg, mss, (k, count));
            return pool.from_bytes(&seg);
        }
        let s = pool.alloc()?;
        if !pool.copy_from_chain(b, 0, s, 0, sf.hdrs)
            || !pool.copy_from_chain(b, at, s, sf.hdrs, len - sf.hdrs)
        {
            pool.free(s);
            return None;
        }
        let m = pool.meta_mut(s);
        (m.len, m.total_len, m.next) = (len as u16, len as u32, NONE);
        sf.fix(pool.data_mut(s), mss, (k, count));
        Some(s)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use arc_swap::ArcSwap;
    use fib::adj::AdjTable;

    use super::*;
    use crate::testing::run_all;
    use crate::{Device, IfConfig};

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    fn node(edit: impl FnOnce(&mut IfConfig)) -> GsoIp4 {
        let mut c = IfConfig::new(MAC, 0);
        edit(&mut c);
        GsoIp4::new(Shared::new(
            Arc::new(ArcSwap::from_pointee(vec![c])),
            Arc::new(ArcSwap::from_pointee(Vec::new())),
            AdjTable::new().reader(),
        ))
    }

    /// An Ethernet frame of a TCP super-frame with `payload`, its checksum partial.
    pub(crate) fn super_frame(payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2(MAC, [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1000, 2000, 7, 512)
            .psh()
            .ack(9)
            .write(&mut f, payload)
            .unwrap();
        let sf = SuperFrame::parse(&f, f.len()).unwrap();
        let at = sf.tcp_at + wire::tso::CHECKSUM_OFFSET;
        f[at..at + 2].copy_from_slice(&sf.partial_checksum().to_be_bytes());
        f
    }

    /// 20,000 bytes in a chain leave as 14 segments of 1448 to the interface's device node,
    /// each what `wire::tso` cuts from the whole (whose segments are checked there), the
    /// metadata kept, the checksums ours.
    #[test]
    fn a_super_frame_leaves_as_the_segments_the_kernel_would_make() {
        let payload: Vec<u8> = (0..20_000u32).map(|i| (i * 11) as u8).collect();
        let f = super_frame(&payload);
        let set = |m: &mut buffer::Meta| {
            (m.gso_size, m.tx_if, m.vrf, m.adj) = (1448, 0, 3, 5);
        };
        let (seen, errors) = run_all(node(|_| {}), &f[..100], &f[100..], set, 64);
        assert_eq!(seen.len(), 14);
        let sf = SuperFrame::parse(&f, f.len()).unwrap();
        for (k, (next, bytes, _, m)) in seen.iter().enumerate() {
            assert_eq!(*next, "memif-output");
            assert_eq!((m.gso_size, m.tx_if, m.vrf, m.adj), (0, 0, 3, 5));
            assert_ne!(m.flags & buffer::L4_CHECKSUM_OURS, 0);
            assert_eq!(m.total_len as usize, bytes.len());
            let at = sf.hdrs + k * 1448;
            let n = sf.segment_len(1448, k);
            let mut want = [&f[..sf.hdrs], &f[at..at + n - sf.hdrs]].concat();
            sf.fix(&mut want, 1448, (k, 14));
            assert_eq!(bytes, &want, "segment {k}");
        }
        assert_eq!(
            errors,
            [
                "TCP super-frame cut into segments (not an error)",
                "segments sent (not an error)"
            ]
        );
    }

    #[test]
    fn a_short_pool_a_down_interface_or_a_lie_drops_it_whole() {
        let f = super_frame(&[3; 6000]);
        let set = |m: &mut buffer::Meta| (m.gso_size, m.tx_if) = (1448, 0);
        // Four buffers hold it; five segments need five more.
        let (seen, errors) = run_all(node(|_| {}), &f[..100], &f[100..], set, 8);
        assert_eq!((seen.len(), seen[0].0), (1, "error-drop"));
        assert_eq!(
            errors,
            ["no buffers for every segment (super-frame dropped)"]
        );
        let (seen, errors) = run_all(node(|c| c.up = false), &f[..100], &f[100..], set, 64);
        assert_eq!((seen.len(), seen[0].0), (1, "error-drop"));
        assert_eq!(errors, ["tx interface admin down"]);
        let tiny = |m: &mut buffer::Meta| (m.gso_size, m.tx_if) = (100, 0);
        let (seen, errors) = run_all(node(|_| {}), &f[..100], &f[100..], tiny, 64);
        assert_eq!((seen.len(), seen[0].0), (1, "error-drop"));
        assert_eq!(errors, ["not a TCP/IPv4 super-frame (dropped)"]);
        // Another device kind: its node.
        let to = |c: &mut IfConfig| c.device = Device::Output(1);
        let (seen, _) = run_all(node(to), &f[..100], &f[100..], set, 64);
        assert_eq!(seen.len(), 5);
        assert!(seen.iter().all(|s| s.0 == "af-packet-output"));
    }
}
