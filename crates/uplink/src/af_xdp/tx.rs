//! The transmit side: we copy each packet into a free UMEM frame, post its descriptor on the
//! tx ring, and kick the kernel with `sendto`; the kernel posts the frame's address on the
//! completion ring once the frame is sent (copy mode: when the skb it built is freed), and
//! the frame is ours again.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use buffer::Pool;
use rustix::io::Errno;

use super::Socket;
use super::counters::TxCounters;
use super::ring::{ConsRing, Desc, ProdRing};
use super::umem::UmemArea;
use crate::af_packet::counters::bump;
use crate::af_packet::tx::ethertype;
use crate::af_packet::{LinkError, SendStats};

const ETH_HLEN: u32 = 14;
const VLAN_HLEN: u32 = 4;
/// Read the kernel's counters every this many `send` calls.
const KERNEL_STATS_EVERY: u32 = 4096;
/// Descriptors a copy-mode `sendto` handles when the socket's budget cannot be raised
/// (`TX_BATCH_SIZE` in the kernel's `net/xdp/xsk.c`).
const KERNEL_TX_BATCH: usize = 32;

/// Why a packet was not written.
enum Refused {
    Oversize,
    Malformed,
}

/// One queue's transmit side: the tx and completion rings and the transmit half of the UMEM.
/// Owned by one worker; see [`TxQueue::send`].
#[derive(Debug)]
pub struct TxQueue {
    tx: ProdRing<Desc>,
    comp: ConsRing<u64>,
    // After the rings, before the UMEM (see `RxQueue`).
    sock: Arc<Socket>,
    area: UmemArea,
    ifindex: u32,
    queue: u16,
    frame_size: u32,
    /// Our transmit frames by UMEM address: not on the tx ring, not with the kernel.
    free: Vec<u64>,
    frames: usize,
    /// Largest untagged frame the interface takes: MTU + Ethernet header.
    max_len: u32,
    zero_copy: bool,
    /// A kick left frames on the ring (a passing error, or the budget ran out): kick again
    /// even with nothing new.
    kick_again: bool,
    /// The last kick found the interface down.
    down: bool,
    sends: u32,
    /// Bounce buffer for external segments (single-copy payloads in a peer's memory).
    scratch: Vec<u8>,
    counters: Arc<TxCounters>,
}

impl TxQueue {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        tx: ProdRing<Desc>,
        comp: ConsRing<u64>,
        sock: Arc<Socket>,
        area: UmemArea,
        ifindex: u32,
        queue: u16,
        frame_size: u32,
        mtu: u32,
        zero_copy: bool,
    ) -> TxQueue {
        // Reversed, so that frames go out from the start of the area.
        let mut free: Vec<u64> = (area.start()..area.end())
            .step_by(frame_size as usize)
            .collect();
        free.reverse();
        TxQueue {
            tx,
            comp,
            sock,
            area,
            ifindex,
            queue,
            frame_size,
            frames: free.len(),
            free,
            max_len: mtu.saturating_add(ETH_HLEN),
            zero_copy,
            kick_again: false,
            down: false,
            sends: 0,
            scratch: Vec::new(),
            counters: Arc::default(),
        }
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

    /// The socket (shared with this queue's [`super::RxQueue`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.sock.fd.as_fd()
    }

    /// UMEM frames this queue sends from: the most it has in flight.
    pub fn capacity(&self) -> usize {
        self.frames
    }

    /// Frames handed to the kernel and not yet completed.
    pub fn in_flight(&mut self) -> usize {
        self.reap();
        self.frames - self.free.len()
    }

    /// The largest frame this queue sends: the smaller of a UMEM frame and the MTU plus the
    /// Ethernet header, 4 more for an 802.1Q-tagged frame (the kernel's own rule).
    pub fn max_frame_len(&self, tagged: bool) -> u32 {
        let mtu = self.max_len + if tagged { VLAN_HLEN } else { 0 };
        mtu.min(self.frame_size)
    }

    /// Takes back the frames the kernel completed.
    fn reap(&mut self) {
        let n = self.comp.available(self.frames as u32);
        let (start, end) = (self.area.start(), self.area.end());
        let size = u64::from(self.frame_size);
        let mut bad = 0;
        for i in 0..n {
            let Some(addr) = self.comp.read(i) else { break };
            // Only a frame start of ours, and never more frames than we have.
            let ours = addr >= start && addr < end && (addr - start).is_multiple_of(size);
            if ours && self.free.len() < self.frames {
                self.free.push(addr);
            } else {
                bad += 1;
            }
        }
        self.comp.release(n);
        if bad != 0 {
            bump(&self.counters.bad_completion, bad);
        }
    }

    /// Sends packets in order: copies each chain (its buffers' data and any external segment)
    /// into a free UMEM frame, posts the frames on the tx ring and kicks the kernel once (in
    /// copy mode always; in zero-copy mode when the driver asks to be woken). Returns how many
    /// were consumed from the front of `pkts`, sent or dropped (counted); it stops when no
    /// frame is free (counted as `ring_full`, the rest as `tx_no_room`). The caller frees
    /// every buffer of `pkts` either way: the UMEM holds copies.
    ///
    /// An error means the interface is down or vanished. While it is down, nothing is placed
    /// (each call tries the link first); frames already on the ring go out once it is back up.
    /// After [`LinkError::Vanished`] the queue never works again.
    pub fn send(&mut self, pool: &Pool, pkts: &[u32]) -> Result<SendStats, LinkError> {
        self.reap();
        self.sends = self.sends.wrapping_add(1);
        if self.sends.is_multiple_of(KERNEL_STATS_EVERY) {
            self.refresh_kernel_stats();
        }
        if self.down {
            // Probe the link before placing anything: frames placed while it is down would
            // wait on the ring until it comes back.
            if let Err(e) = super::rx::link_state(self.sock.fd.as_fd()) {
                bump(&self.counters.link_down, pkts.len() as u64);
                return Err(e);
            }
            self.down = false;
        }
        let mut st = SendStats::default();
        let want = u32::try_from(pkts.len()).unwrap_or(u32::MAX);
        let room = self.tx.free(want).min(self.free.len() as u32);
        let mut placed = 0u32;
        let mut bytes = 0u64;
        for &p in pkts {
            if placed == room {
                break;
            }
            st.consumed += 1;
            let Some(&addr) = self.free.last() else { break };
            match self.write_frame(pool, p, addr) {
                Ok(len) => {
                    self.free.pop();
                    self.tx.write(
                        placed,
                        Desc {
                            addr,
                            len,
                            options: 0,
                        },
                    );
                    placed += 1;
                    bytes += u64::from(len);
                }
                Err(Refused::Oversize) => st.oversize += 1,
                Err(Refused::Malformed) => st.malformed += 1,
            }
        }
        // Release: the frames and descriptors are visible before the index (ring.rs).
        self.tx.submit(placed);
        st.sent = placed as usize;
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
        if (placed > 0 || self.kick_again)
            && let Err(e) = self.kick()
        {
            bump(&self.counters.link_down, pkts.len() as u64);
            return Err(e);
        }
        Ok(st)
    }

    /// Copies chain `p` into the UMEM frame at `addr`; returns its length.
    fn write_frame(&mut self, pool: &Pool, p: u32, addr: u64) -> Result<u32, Refused> {
        let total = pool.meta(p).total_len;
        if total < ETH_HLEN {
            return Err(Refused::Malformed);
        }
        let tagged = ethertype(pool, p) == Some(0x8100);
        let max = self.max_frame_len(tagged);
        if total > max {
            return Err(Refused::Oversize);
        }
        let mut len = 0u32;
        let mut b = p;
        while b != buffer::NONE {
            len = self.put(addr, len, pool.data(b), max)?;
            if pool.meta(b).ext.len != 0 {
                // Single-copy input: the payload is in a memif peer's memory; bring it over
                // through the bounce buffer, as the AF_PACKET and memif outputs do.
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                let r = if pool.read_ext(b, &mut scratch) {
                    self.put(addr, len, &scratch, max)
                } else {
                    Err(Refused::Malformed)
                };
                self.scratch = scratch;
                len = r?;
            }
            b = pool.meta(b).next;
        }
        // A chain longer than its head said fails `put`'s bound; one shorter is sent as is.
        if len < ETH_HLEN {
            return Err(Refused::Malformed);
        }
        Ok(len)
    }

    /// Appends `bytes` to the frame at `addr + len`, within `max` bytes.
    fn put(&mut self, addr: u64, len: u32, bytes: &[u8], max: u32) -> Result<u32, Refused> {
        let end = u64::from(len) + bytes.len() as u64;
        if end > u64::from(max) {
            return Err(Refused::Oversize);
        }
        self.area
            .write(addr + u64::from(len), bytes)
            .map_err(|_| Refused::Malformed)?;
        Ok(end as u32)
    }

    /// Has the kernel take the tx ring. In copy mode one `sendto` sends at most the socket's
    /// budget (raised to the ring size where the kernel allows, else 32) and says EAGAIN
    /// when frames are left, so it repeats while the ring drains.
    fn kick(&mut self) -> Result<(), LinkError> {
        if self.zero_copy && !self.tx.needs_wakeup() {
            self.kick_again = false;
            return Ok(());
        }
        let mut rounds = self.frames / KERNEL_TX_BATCH + 2;
        loop {
            let before = self.tx.outstanding();
            match rustix::net::send(&self.sock.fd, &[], rustix::net::SendFlags::DONTWAIT) {
                Ok(_) => {
                    self.down = false;
                    self.kick_again = false;
                    return Ok(());
                }
                Err(Errno::AGAIN) => {
                    self.down = false;
                    let left = self.tx.outstanding();
                    rounds -= 1;
                    if left == 0 {
                        self.kick_again = false;
                        return Ok(());
                    }
                    if left < before && rounds > 0 {
                        continue;
                    }
                    // No progress: no socket buffer or no completion room; later.
                    bump(&self.counters.kick_errors, 1);
                    self.kick_again = true;
                    return Ok(());
                }
                Err(Errno::NXIO | Errno::NODEV) => {
                    self.kick_again = false;
                    return Err(LinkError::Vanished);
                }
                Err(Errno::NETDOWN) => {
                    self.down = true;
                    self.kick_again = true;
                    return Err(LinkError::Down);
                }
                Err(_) => {
                    // EBUSY: the device dropped a frame (it completes regardless); ENOBUFS
                    // and the like: frames stay queued for the next kick.
                    self.down = false;
                    bump(&self.counters.kick_errors, 1);
                    self.kick_again = true;
                    return Ok(());
                }
            }
        }
    }

    /// Reads the kernel's count of refused tx descriptors (`XDP_STATISTICS`).
    pub fn refresh_kernel_stats(&mut self) {
        if let Ok(s) = rustix::net::sockopt::xdp_statistics(&self.sock.fd) {
            self.counters
                .invalid_descs
                .store(s.tx_invalid_descs, Ordering::Relaxed);
        }
    }

    /// The link's state as the socket sees it (see [`super::RxQueue::check_link`]).
    pub fn check_link(&mut self) -> Result<(), LinkError> {
        super::rx::link_state(self.sock.fd.as_fd())
    }
}
