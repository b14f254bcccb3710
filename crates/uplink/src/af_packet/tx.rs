//! The transmit side: a TPACKET_V2 ring of fixed-size frames. We copy each packet into a
//! free frame, mark it SEND_REQUEST, and make one `send` per batch, which has the kernel
//! build and transmit an skb per marked frame (PACKET_QDISC_BYPASS: straight to the driver).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use buffer::Pool;
use rustix::io::Errno;

use super::LinkError;
use super::counters::{TxCounters, bump};
use super::ring::RingMap;
use super::tx_gso::{GsoSocket, Sent};

/// Where a frame's data starts: after the TPACKET_ALIGNed `tpacket2_hdr` (the kernel's
/// `tp_hdrlen - sizeof(struct sockaddr_ll)` without PACKET_TX_HAS_OFF).
pub(crate) const TX_DATA: u32 = 32;
const _: () = assert!(size_of::<libc::tpacket2_hdr>() as u32 == TX_DATA);
const F_STATUS: u64 = std::mem::offset_of!(libc::tpacket2_hdr, tp_status) as u64;
const F_LEN: u64 = std::mem::offset_of!(libc::tpacket2_hdr, tp_len) as u64;
const F_SNAPLEN: u64 = std::mem::offset_of!(libc::tpacket2_hdr, tp_snaplen) as u64;

const ETH_HLEN: u32 = 14;
const VLAN_HLEN: u32 = 4;

/// Kicks a send may make to free frames when the ring fills midway through a batch.
const RING_FULL_RETRIES: u32 = 4;

/// What one `send` call did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendStats {
    /// Packets consumed from the front of the batch: sent, or dropped as `oversize` or
    /// `malformed`. The rest found the ring full.
    pub consumed: usize,
    /// Packets written to the ring and handed to the kernel.
    pub sent: usize,
    /// Dropped: larger than a frame slot or the interface's MTU plus Ethernet header.
    pub oversize: usize,
    /// Dropped: shorter than an Ethernet header, or an external segment that is gone.
    pub malformed: usize,
}

/// The Ethernet type field (bytes 12 and 13 of the chain, wherever its buffers split).
pub(crate) fn ethertype(pool: &Pool, head: u32) -> Option<u16> {
    let mut at = 12usize;
    let mut got = [0u8; 2];
    let mut k = 0;
    let mut b = head;
    while b != buffer::NONE && k < 2 {
        let d = pool.data(b);
        while k < 2 && at < d.len() {
            got[k] = d[at];
            at += 1;
            k += 1;
        }
        at = at.saturating_sub(d.len());
        b = pool.meta(b).next;
    }
    (k == 2).then(|| u16::from_be_bytes(got))
}

/// Why a packet was not written.
enum Refused {
    Oversize,
    Malformed,
}

/// One queue's transmit socket and ring. Owned by one worker; see [`TxQueue::send`].
#[derive(Debug)]
pub struct TxQueue {
    // Declared before `fd`: the mapping goes first on drop.
    mem: RingMap,
    fd: OwnedFd,
    ifindex: u32,
    queue: u16,
    block_size: u32,
    frame_size: u32,
    frames_per_block: u32,
    frame_count: u32,
    /// The slot filled next.
    head: u32,
    /// The oldest slot handed to the kernel and not yet seen back.
    tail: u32,
    in_flight: u32,
    /// Largest untagged frame the interface takes: MTU + Ethernet header.
    max_len: u32,
    /// A kick failed for a passing reason: kick again even with nothing new.
    kick_again: bool,
    /// Bounce buffer for external segments (single-copy payloads in a peer's memory).
    scratch: Vec<u8>,
    /// Runs of one UDP flow leave through here as super-packets ([`super::tx_gso`]).
    gso: Option<GsoSocket>,
    counters: Arc<TxCounters>,
}

impl TxQueue {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        fd: OwnedFd,
        mem: RingMap,
        ifindex: u32,
        queue: u16,
        block_size: u32,
        frame_size: u32,
        frame_count: u32,
        mtu: u32,
    ) -> TxQueue {
        TxQueue {
            mem,
            fd,
            ifindex,
            queue,
            block_size,
            frame_size,
            frames_per_block: block_size / frame_size,
            frame_count,
            head: 0,
            tail: 0,
            in_flight: 0,
            max_len: mtu.saturating_add(ETH_HLEN),
            kick_again: false,
            scratch: Vec::new(),
            gso: None,
            counters: Arc::default(),
        }
    }

    /// Sends runs of datagrams of one UDP flow as super-packets through `fd` (a packet
    /// socket bound to the same interface, with virtio-net headers and no ring).
    /// Super-packets are longer than `above` ([`GsoSocket::new`]).
    pub(crate) fn with_gso(mut self, fd: OwnedFd, above: usize) -> TxQueue {
        self.gso = Some(GsoSocket::new(fd, above));
        self
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    pub fn queue(&self) -> u16 {
        self.queue
    }

    pub fn counters(&self) -> Arc<TxCounters> {
        self.counters.clone()
    }

    /// The transmit socket (for a caller that wants to wait for room with `poll`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Frames the ring holds.
    pub fn capacity(&self) -> usize {
        self.frame_count as usize
    }

    /// The largest frame this queue sends: the smaller of a frame slot and the MTU plus the
    /// Ethernet header, 4 more for an 802.1Q-tagged frame (the kernel's own rule).
    pub fn max_frame_len(&self, tagged: bool) -> u32 {
        let mtu = self.max_len + if tagged { VLAN_HLEN } else { 0 };
        mtu.min(self.frame_size - TX_DATA)
    }

    fn frame_offset(&self, slot: u32) -> u64 {
        u64::from(slot / self.frames_per_block) * u64::from(self.block_size)
            + u64::from(slot % self.frames_per_block) * u64::from(self.frame_size)
    }

    /// Takes back the slots the kernel is done with, oldest first, counting rejects.
    fn reclaim(&mut self) {
        while self.in_flight > 0 {
            let Ok(s) = self
                .mem
                .load_status(self.frame_offset(self.tail) + F_STATUS)
            else {
                break;
            };
            if s & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
                break;
            }
            if s & libc::TP_STATUS_WRONG_FORMAT != 0 {
                bump(&self.counters.wrong_format, 1);
            }
            self.tail = (self.tail + 1) % self.frame_count;
            self.in_flight -= 1;
        }
    }

    /// Sends packets in order: copies each chain (its buffers' data and any external
    /// segment) into a free frame, then makes one `send` for the batch. When the ring fills
    /// midway it kicks the kernel, takes back the frames it sent (a qdisc-bypass send on a
    /// virtual or idle device completes within the call) and goes on, a few times at most.
    /// Returns how many were consumed from the front of `pkts`, sent or dropped (counted); it
    /// stops when the ring stays full (counted as `ring_full`, the rest as `tx_no_room`). The
    /// caller frees every buffer of `pkts` either way: the ring holds copies. A run of
    /// datagrams of one UDP flow leaves as one super-packet instead, when the queue has a
    /// socket for them ([`TxQueue::with_gso`]), after a kick for the frames before it.
    ///
    /// An error means the interface went down or vanished; the frames it had not sent yet,
    /// this batch's included, are discarded and counted as `link_down`. After
    /// [`LinkError::Down`] the queue works again once the link is back up; after
    /// [`LinkError::Vanished`] it never will.
    pub fn send(&mut self, pool: &Pool, pkts: &[u32]) -> Result<SendStats, LinkError> {
        self.reclaim();
        let mut st = SendStats::default();
        let mut bytes = 0u64;
        let mut retries = 0;
        // Frames written since the last kick; where the next run may start.
        let (mut unkicked, mut plain_until) = (false, 0);
        let mut k = 0;
        while k < pkts.len() {
            let p = pkts[k];
            let run = match &self.gso {
                Some(g) if k >= plain_until => g.run(pool, &pkts[k..]),
                _ => None,
            };
            if let Some(r) = run {
                let n = r.n;
                if unkicked {
                    self.kick()?;
                    unkicked = false;
                }
                if let Some(g) = &mut self.gso {
                    match g.send(pool, &pkts[k..], r)? {
                        Sent::Whole(len) => {
                            (st.consumed, st.sent, bytes) =
                                (st.consumed + n, st.sent + n, bytes + len as u64);
                            bump(&self.counters.gso_sends, 1);
                            bump(&self.counters.gso_segments, n as u64);
                            k += n;
                            continue;
                        }
                        Sent::Refused => {
                            bump(&self.counters.gso_refused, 1);
                            plain_until = k + n;
                        }
                    }
                }
            }
            k += 1;
            if self.in_flight == self.frame_count {
                if retries == RING_FULL_RETRIES {
                    break;
                }
                retries += 1;
                self.kick()?;
                unkicked = false;
                self.reclaim();
                if self.in_flight == self.frame_count {
                    break;
                }
            }
            st.consumed += 1;
            let at = self.frame_offset(self.head);
            match self.write_frame(pool, p, at) {
                Ok(len) => {
                    // Release: the bytes and tp_len are visible before the kernel may see
                    // SEND_REQUEST (ring.rs).
                    if self
                        .mem
                        .store_status(at + F_STATUS, libc::TP_STATUS_SEND_REQUEST)
                        .is_err()
                    {
                        st.malformed += 1;
                        continue;
                    }
                    self.head = (self.head + 1) % self.frame_count;
                    self.in_flight += 1;
                    unkicked = true;
                    st.sent += 1;
                    bytes += u64::from(len);
                }
                Err(Refused::Oversize) => st.oversize += 1,
                Err(Refused::Malformed) => st.malformed += 1,
            }
        }
        let c = &self.counters;
        bump(&c.packets, st.sent as u64);
        bump(&c.bytes, bytes);
        if st.oversize + st.malformed != 0 {
            bump(&c.oversize, st.oversize as u64);
            bump(&c.malformed, st.malformed as u64);
        }
        if st.consumed < pkts.len() {
            bump(&c.ring_full, 1);
            bump(&c.tx_no_room, (pkts.len() - st.consumed) as u64);
        }
        if unkicked || self.kick_again {
            self.kick()?;
        }
        Ok(st)
    }

    /// Copies chain `p` into the frame at `at` and sets its length; returns the length.
    fn write_frame(&mut self, pool: &Pool, p: u32, at: u64) -> Result<u32, Refused> {
        let total = pool.meta(p).total_len;
        if total < ETH_HLEN {
            return Err(Refused::Malformed);
        }
        let tagged = ethertype(pool, p) == Some(0x8100);
        let max = self.max_frame_len(tagged);
        if total > max {
            return Err(Refused::Oversize);
        }
        let data = at + u64::from(TX_DATA);
        let mut len = 0u32;
        let mut b = p;
        while b != buffer::NONE {
            let d = pool.data(b);
            len = self.put(data, len, d, max)?;
            if pool.meta(b).ext.len != 0 {
                // Single-copy input: the payload is in a memif peer's memory; bring it over
                // through the bounce buffer, as memif's own output does.
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                let ok = pool.read_ext(b, &mut scratch);
                let r = if ok {
                    self.put(data, len, &scratch, max)
                } else {
                    Err(Refused::Malformed)
                };
                self.scratch = scratch;
                len = r?;
            }
            b = pool.meta(b).next;
        }
        // A chain longer than its head said fails `put`'s bound; one shorter is sent as is.
        let l = len.to_ne_bytes();
        self.mem
            .write(at + F_LEN, &l)
            .and_then(|()| self.mem.write(at + F_SNAPLEN, &l))
            .map_err(|_| Refused::Malformed)?;
        Ok(len)
    }

    /// Appends `bytes` to the frame data at `data + len`, within `max` bytes.
    fn put(&mut self, data: u64, len: u32, bytes: &[u8], max: u32) -> Result<u32, Refused> {
        let end = u64::from(len) + bytes.len() as u64;
        if end > u64::from(max) {
            return Err(Refused::Oversize);
        }
        self.mem
            .write(data + u64::from(len), bytes)
            .map_err(|_| Refused::Malformed)?;
        Ok(end as u32)
    }

    /// Has the kernel send every SEND_REQUEST frame (without waiting for completions).
    fn kick(&mut self) -> Result<(), LinkError> {
        match rustix::net::send(&self.fd, &[], rustix::net::SendFlags::DONTWAIT) {
            Ok(_) => {
                self.kick_again = false;
                Ok(())
            }
            Err(Errno::NXIO | Errno::NODEV) => {
                self.discard_unsent();
                Err(LinkError::Vanished)
            }
            Err(Errno::NETDOWN) => {
                self.discard_unsent();
                Err(LinkError::Down)
            }
            Err(_) => {
                // No socket buffer or a busy device: the frames stay marked, and the kernel
                // resumes at the first of them on the next kick.
                bump(&self.counters.kick_errors, 1);
                self.kick_again = true;
                Ok(())
            }
        }
    }

    /// Takes back the frames the kernel has not started on (it refused the kick before
    /// touching any). They are the newest in flight, contiguous up to `head`; `head` moves
    /// back to the first of them, where the kernel's own cursor waits, so that the two stay
    /// in step.
    fn discard_unsent(&mut self) {
        self.reclaim();
        let mut first = None;
        for k in 0..self.in_flight {
            let slot = (self.tail + k) % self.frame_count;
            let s = self.mem.load_status(self.frame_offset(slot) + F_STATUS);
            if s.is_ok_and(|s| s & libc::TP_STATUS_SEND_REQUEST != 0) {
                first = Some(k);
                break;
            }
        }
        let Some(k) = first else { return };
        let n = self.in_flight - k;
        for j in k..self.in_flight {
            let at = self.frame_offset((self.tail + j) % self.frame_count) + F_STATUS;
            // No `send` of ours is running, so the kernel is not reading these frames.
            let _ = self.mem.store_status(at, libc::TP_STATUS_AVAILABLE);
        }
        self.head = (self.tail + k) % self.frame_count;
        self.in_flight = k;
        self.kick_again = false;
        bump(&self.counters.link_down, u64::from(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethertype_is_found_across_a_split_header() {
        let mut pool = Pool::new(buffer::PoolConfig {
            count: 4,
            data_size: 64,
            headroom: 0,
        })
        .unwrap();
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0, 100]);
        // 13 bytes in the head, the rest in the next buffer: the type straddles them.
        let head = pool.from_bytes(&f[..13]).unwrap();
        let tail = pool.from_bytes(&f[13..]).unwrap();
        pool.link(head, tail);
        assert_eq!(ethertype(&pool, head), Some(0x8100));
        pool.meta_mut(tail).len = 0;
        assert_eq!(ethertype(&pool, head), None, "too short");
        pool.free(head);
        assert_eq!(pool.available(), 4);
    }
}
