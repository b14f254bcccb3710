//! The receive side of a pass: every interface's rx queues drained into the run's
//! accounting, probes read from frames in place (secondary) or from our own buffers (primary,
//! kernel ports), payloads checked when asked.

use buffer::Pool;

use super::Queues;
use crate::frame::{self, MAX_HEAD, PROBE_LEN, PROBE_OFFSET, Probe};
use crate::stats::WindowedRx;

/// The bytes a receive burst may bring at most (see [`Receiver::new`]).
const RX_BURST_BYTES: usize = 256 * 1024;

/// What a run's receive step keeps between passes: room for a burst, and for the payload
/// checks.
pub(super) struct Receiver {
    /// Buffers of a burst received into our own pool.
    out: Vec<u32>,
    /// A frame's headers through the probe, read the general way (see [`probe_of`]).
    hdr: [u8; MAX_HEAD],
    /// Payload checks (`GenConfig::check_payload`): frames whose filler was not what was
    /// sent, and room to read them.
    check: bool,
    pub(super) corrupt: u64,
    scratch: Vec<u8>,
    whole: Vec<u8>,
    burst: usize,
}

impl Receiver {
    pub(super) fn new(check: bool, frame_size: usize) -> Receiver {
        Receiver {
            out: Vec::with_capacity(256),
            hdr: [0u8; MAX_HEAD],
            check,
            corrupt: 0,
            scratch: if check { vec![0u8; 4096] } else { Vec::new() },
            whole: Vec::new(),
            // Receive at most ~256 KiB per burst: a burst's copies should stay in this core's
            // L2 (256 jumbo frames would be 2.3 MB and write back to memory before we read
            // them).
            burst: (RX_BURST_BYTES / frame_size.max(1)).clamp(8, 256),
        }
    }

    /// Receives a burst from every rx queue of every interface into `rx`, stamped `now`;
    /// returns how many frames came. An error is a link that went down.
    #[inline]
    pub(super) fn receive(
        &mut self,
        peers: &mut [Queues],
        pool: &mut Pool,
        rx: &mut WindowedRx,
        now: u64,
    ) -> Result<usize, memif::LinkDown> {
        let Receiver {
            out,
            hdr,
            check,
            corrupt,
            scratch,
            whole,
            burst,
        } = self;
        let (check, rx_burst) = (*check, *burst);
        let mut got = 0usize;
        // In loop mode the send interface's own rx is drained too (a DUT may answer there).
        peers.iter_mut().try_for_each(|q| match q {
            Queues::Primary(q) => q.rx.iter_mut().try_for_each(|r| {
                out.clear();
                r.recv(pool, out, rx_burst)?;
                if check {
                    *corrupt += count_corrupt(pool, out, whole);
                }
                got += record_copied(pool, out, rx, now);
                Ok(())
            }),
            Queues::Kernel(q) => {
                for r in q.rx.iter_mut() {
                    out.clear();
                    r.recv(pool, out, rx_burst);
                    if check {
                        *corrupt += count_corrupt(pool, out, whole);
                    }
                    got += record_copied(pool, out, rx, now);
                }
                Ok(())
            }
            Queues::Secondary(q) => q.rx.iter_mut().try_for_each(|r| {
                // Two loops: the check's branch and state inside the one without it
                // cost 9 instructions a frame (--cost of `none`).
                got += if check {
                    r.recv_with(rx_burst, |pkt| {
                        let probe = probe_of(pkt, hdr);
                        if probe.is_some() && !payload_intact(pkt, scratch) {
                            *corrupt += 1;
                        }
                        rx.record(pkt.len(), probe, now);
                    })?
                } else {
                    r.recv_with(rx_burst, |pkt| {
                        rx.record(pkt.len(), probe_of(pkt, hdr), now);
                    })?
                };
                Ok::<(), memif::LinkDown>(())
            }),
        })?;
        Ok(got)
    }
}

/// Records frames received into the session's own buffers (a primary memif's, a kernel
/// port's) and frees them; returns how many.
fn record_copied(pool: &mut Pool, bufs: &[u32], rx: &mut WindowedRx, now: u64) -> usize {
    for &h in bufs {
        rx.record(
            pool.meta(h).total_len as usize,
            Probe::parse(pool.data(h)),
            now,
        );
    }
    pool.free_bulk(bufs);
    bufs.len()
}

/// The probe of a frame received in place, if it is one of ours. A plain frame's probe ends
/// within 62 bytes: a fixed-size copy read at constant offsets, looked for first. VXLAN's 50
/// more (and a frame too short for the copy) the general way, through `hdr`: a VXLAN frame
/// never passes for a plain one, as its bytes 42 and 43 are the VXLAN flags (0x08) and a
/// reserved zero, not the probe's magic.
#[inline(always)]
fn probe_of(pkt: &memif::RxPacket<'_>, hdr: &mut [u8; MAX_HEAD]) -> Option<Probe> {
    if let Some(h) = pkt.head::<{ PROBE_OFFSET + PROBE_LEN }>() {
        if let Some(p) = Probe::parse_in(&h, false) {
            return Some(p);
        }
        if !Probe::is_vxlan(&h) {
            return None;
        }
    }
    let n = pkt.read(0, hdr);
    Probe::parse(&hdr[..n])
}

/// Whether a received frame of ours (its probe read) carries the filler that was sent after
/// its probe: read out of the ring in pieces of `scratch`'s size.
fn payload_intact(pkt: &memif::RxPacket<'_>, scratch: &mut [u8]) -> bool {
    let vxlan = pkt.head::<38>().is_some_and(|h| Probe::is_vxlan(&h));
    let (start, len) = (frame::filler_offset(vxlan), pkt.len());
    let mut at = start;
    while at < len {
        let n = (len - at).min(scratch.len());
        let piece = &mut scratch[..n];
        if pkt.read(at, piece) != piece.len() || !frame::filler_intact(piece, at - start) {
            return false;
        }
        at += piece.len();
    }
    true
}

/// How many of the frames received into the session's own buffers are ours (a probe) with a
/// filler other than what was sent; `whole` is room to read each chain into.
fn count_corrupt(pool: &Pool, bufs: &[u32], whole: &mut Vec<u8>) -> u64 {
    let mut bad = 0;
    for &h in bufs {
        whole.clear();
        pool.read_chain(h, whole);
        if Probe::parse(whole).is_some() {
            let start = frame::filler_offset(Probe::is_vxlan(whole));
            if !whole
                .get(start..)
                .is_some_and(|f| frame::filler_intact(f, 0))
            {
                bad += 1;
            }
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use buffer::PoolConfig;

    use super::*;
    use crate::frame::FrameSpec;

    #[test]
    fn frames_received_into_our_buffers_are_checked_whole_chains_included() {
        let mut pool = Pool::new(PoolConfig {
            count: 64,
            data_size: 1024,
            headroom: 128,
        })
        .unwrap();
        let mut whole = Vec::new();
        for size in [64usize, 1500, 9000] {
            let mut t = FrameSpec {
                size,
                ..Default::default()
            }
            .template()
            .unwrap();
            let p = Probe {
                stream: 0,
                seq: 9,
                sent_ns: 1,
            };
            t[PROBE_OFFSET..PROBE_OFFSET + PROBE_LEN].copy_from_slice(&p.encode());
            let mut bad = t.clone();
            *bad.last_mut().unwrap() ^= 1;
            // Not ours (no probe): never counted, whatever it carries.
            let mut foreign = bad.clone();
            foreign[PROBE_OFFSET] ^= 0xff;
            let frames: Vec<u32> = [&t, &bad, &foreign, &t]
                .iter()
                .map(|f| pool.from_bytes(f).unwrap())
                .collect();
            assert_eq!(count_corrupt(&pool, &frames, &mut whole), 1, "{size} B");
            pool.free_bulk(&frames);
        }
        assert_eq!(pool.available(), 64, "nothing leaked");
    }
}
