//! The receive side: the kernel takes free UMEM frames from the fill ring, copies (or, in
//! zero-copy mode, DMAs) each frame the XDP program redirects to us into one, and posts its
//! descriptor on the rx ring. We copy each frame into pool buffers and put its UMEM frame
//! straight back on the fill ring.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use buffer::Pool;
use rustix::io::Errno;

use super::Socket;
use super::counters::RxCounters;
use super::ring::{ConsRing, Desc, ProdRing};
use super::umem::UmemArea;
use crate::af_packet::LinkError;
use crate::af_packet::counters::bump;

/// Read the kernel's drop counters every this many `recv` calls.
const KERNEL_STATS_EVERY: u32 = 4096;

/// What one `recv` call did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecvStats {
    /// Frames appended to `out`.
    pub packets: usize,
    pub bytes: u64,
    /// Frames dropped for want of pool buffers.
    pub no_buffer: usize,
    /// Descriptors dropped for an address or length outside our receive frames
    /// ([`RxCounters::bad_desc`]).
    pub bad: usize,
}

impl RecvStats {
    /// Frames dropped, for whatever reason.
    pub fn dropped(&self) -> usize {
        self.no_buffer + self.bad
    }
}

/// Why a descriptor's frame went nowhere.
enum Lost {
    NoBuffer,
    Bad,
}

/// The receive frame a descriptor names: `Ok(frame)` when `[addr, addr + len)` lies inside one
/// frame of `[start, end)`; otherwise the frame to give back, if the address is ours at all.
/// All arithmetic in `u64`.
pub(crate) fn frame_of(d: Desc, start: u64, end: u64, frame_size: u64) -> Result<u64, Option<u64>> {
    if d.addr < start || d.addr >= end {
        return Err(None);
    }
    let frame = start + (d.addr - start) / frame_size * frame_size;
    if d.len == 0 || d.addr + u64::from(d.len) > frame + frame_size {
        return Err(Some(frame));
    }
    Ok(frame)
}

/// One queue's receive side: the rx and fill rings and the receive half of the UMEM. Owned
/// by one worker; see [`RxQueue::recv`].
#[derive(Debug)]
pub struct RxQueue {
    rx: ConsRing<Desc>,
    fill: ProdRing<u64>,
    // After the rings (unmapped first), before the UMEM: the socket closes before its
    // memory goes.
    sock: Arc<Socket>,
    area: UmemArea,
    ifindex: u32,
    queue: u16,
    frame_size: u32,
    /// Our receive frames by UMEM address: neither on the fill ring nor with the kernel.
    free: Vec<u64>,
    frames: usize,
    zero_copy: bool,
    polls: u32,
    counters: Arc<RxCounters>,
}

impl RxQueue {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        rx: ConsRing<Desc>,
        fill: ProdRing<u64>,
        sock: Arc<Socket>,
        area: UmemArea,
        ifindex: u32,
        queue: u16,
        frame_size: u32,
        zero_copy: bool,
    ) -> RxQueue {
        let free: Vec<u64> = (area.start()..area.end())
            .step_by(frame_size as usize)
            .collect();
        let mut q = RxQueue {
            rx,
            fill,
            sock,
            area,
            ifindex,
            queue,
            frame_size,
            frames: free.len(),
            free,
            zero_copy,
            polls: 0,
            counters: Arc::default(),
        };
        q.refill();
        q
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface queue this socket is bound to (and the XSKMAP key it sits at).
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// The counters, for the control thread to keep before the queue moves to a worker.
    pub fn counters(&self) -> Arc<RxCounters> {
        self.counters.clone()
    }

    /// The socket (shared with this queue's [`super::TxQueue`]): readable when the rx ring
    /// holds frames, for a worker's epoll sleep.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.sock.fd.as_fd()
    }

    /// UMEM frames this queue receives into (the fill ring's size).
    pub fn capacity(&self) -> usize {
        self.frames
    }

    /// Whether frames are waiting on the rx ring: the re-check before a worker sleeps.
    pub fn pending(&self) -> bool {
        self.rx.pending()
    }

    /// Copies up to `max` frames off the rx ring into `pool` buffers (chained when a frame is
    /// larger than a buffer, `total_len` on the head) and appends the heads to `out`, then
    /// gives their UMEM frames back to the fill ring.
    ///
    /// Frames that cannot be delivered (no buffers, a descriptor outside our frames) are
    /// dropped, counted and count against `max` too, so that an empty pool still drains the
    /// ring. In zero-copy mode, asks the kernel to resume when the driver stopped for want of
    /// fill buffers (`XDP_USE_NEED_WAKEUP`); copy mode never needs that.
    pub fn recv(&mut self, pool: &mut Pool, out: &mut Vec<u32>, max: usize) -> RecvStats {
        let mut st = RecvStats::default();
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(KERNEL_STATS_EVERY) {
            self.refresh_kernel_stats();
        }
        let n = self.rx.available(u32::try_from(max).unwrap_or(u32::MAX));
        for i in 0..n {
            let Some(d) = self.rx.read(i) else { break };
            match self.take(pool, d) {
                Ok(head) => {
                    out.push(head);
                    st.packets += 1;
                    st.bytes += u64::from(d.len);
                }
                Err(Lost::NoBuffer) => st.no_buffer += 1,
                Err(Lost::Bad) => st.bad += 1,
            }
        }
        // Our copies are done: the Release store hands the descriptors back (ring.rs).
        self.rx.release(n);
        // Also when nothing came: the kernel publishes its fill ring consumer index just
        // after the rx producer index (`xsk_flush`), so frames taken in that gap found no room
        // and wait here; with the fill ring empty no frame would come to retry them.
        if !self.free.is_empty() {
            self.refill();
        }
        if self.zero_copy && self.fill.needs_wakeup() {
            self.wake();
        }
        let c = &self.counters;
        bump(&c.packets, st.packets as u64);
        bump(&c.bytes, st.bytes);
        if st.dropped() != 0 {
            bump(&c.no_buffer, st.no_buffer as u64);
            bump(&c.bad_desc, st.bad as u64);
        }
        st
    }

    /// Copies the frame `d` names into a new chain, and takes its UMEM frame back.
    fn take(&mut self, pool: &mut Pool, d: Desc) -> Result<u32, Lost> {
        let start = self.area.start();
        let end = self.area.end();
        let frame = match frame_of(d, start, end, u64::from(self.frame_size)) {
            Ok(f) => f,
            Err(ours) => {
                if let Some(f) = ours {
                    self.give_back(f);
                }
                return Err(Lost::Bad);
            }
        };
        let r = self.copy_out(pool, d);
        self.give_back(frame);
        r
    }

    fn copy_out(&self, pool: &mut Pool, d: Desc) -> Result<u32, Lost> {
        let len = d.len as usize;
        let size = pool.data_size();
        if pool.available() < len.div_ceil(size) {
            return Err(Lost::NoBuffer);
        }
        let head = pool.alloc().ok_or(Lost::NoBuffer)?;
        let mut cur = head;
        let mut done = 0usize;
        loop {
            let n = (len - done).min(size);
            if self
                .area
                .read(d.addr + done as u64, &mut pool.room_mut(cur)[..n])
                .is_err()
            {
                // `frame_of` proved the range ours; never taken.
                pool.free(head);
                return Err(Lost::Bad);
            }
            pool.meta_mut(cur).len = n as u16;
            done += n;
            if done == len {
                break;
            }
            let Some(b) = pool.alloc() else {
                pool.free(head);
                return Err(Lost::NoBuffer);
            };
            pool.link(cur, b);
            cur = b;
        }
        pool.meta_mut(head).total_len = d.len;
        Ok(head)
    }

    /// Returns a receive frame to our free list (refused past the number of frames we own:
    /// a kernel handing one frame back twice must not grow the list).
    fn give_back(&mut self, frame: u64) {
        if self.free.len() < self.frames {
            self.free.push(frame);
        }
    }

    /// Puts every free frame on the fill ring that has room for it.
    fn refill(&mut self) {
        let n = self.fill.free(self.free.len() as u32);
        for i in 0..n {
            let Some(f) = self.free.pop() else { break };
            self.fill.write(i, f);
        }
        // Release: the kernel sees the addresses (and we are done with the frames) first.
        self.fill.submit(n);
    }

    /// Asks the driver to look at the fill ring again (zero-copy `XDP_USE_NEED_WAKEUP`).
    fn wake(&self) {
        let _ = rustix::net::recv(
            &self.sock.fd,
            &mut [0u8; 0][..],
            rustix::net::RecvFlags::DONTWAIT,
        );
    }

    /// Before the worker sleeps: gives every free frame to the fill ring, asks the kernel for
    /// a wake-up if the driver stopped for want of them, and says whether frames already
    /// wait (then the worker must not sleep). Received frames wake the socket's epoll with
    /// POLLIN (the kernel's `xsk_flush`) in both copy and zero-copy mode; only a zero-copy
    /// driver that ran out of fill buffers needs the kick, and the fence orders our fill ring
    /// store before the flag load, so a driver that set the flag after seeing an empty ring is
    /// kicked.
    pub fn arm(&mut self) -> bool {
        self.refill();
        if self.zero_copy {
            fence(Ordering::SeqCst);
            if self.fill.needs_wakeup() {
                self.wake();
            }
        }
        self.pending()
    }

    /// Reads the kernel's drop counters (`XDP_STATISTICS`, cumulative) into this queue's
    /// counters. `recv` calls it every few thousand calls and the input node before its
    /// worker sleeps; call it before reading the counters of an idle queue.
    pub fn refresh_kernel_stats(&mut self) {
        if let Ok(s) = rustix::net::sockopt::xdp_statistics(&self.sock.fd) {
            let c = &self.counters;
            c.kernel_drops.store(s.rx_dropped, Ordering::Relaxed);
            c.invalid_descs.store(s.rx_invalid_descs, Ordering::Relaxed);
            c.rx_ring_full
                .store(s.rx_ring_full.unwrap_or(0), Ordering::Relaxed);
            c.fill_empty
                .store(s.rx_fill_ring_empty_descs.unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// Says what state the link is in, as the socket sees it: the interface was unregistered
    /// ([`LinkError::Vanished`]: the socket is unbound and the queue dead), or is down
    /// ([`LinkError::Down`], for as long as it is: the queue resumes by itself when it comes
    /// back up). One non-blocking `recvfrom`, which is also what AF_XDP answers these with.
    pub fn check_link(&mut self) -> Result<(), LinkError> {
        link_state(self.sock.fd.as_fd())
    }
}

/// The socket's view of its interface: `recvfrom(MSG_DONTWAIT)` fails with ENXIO once the
/// socket was unbound (the interface unregistered) and ENETDOWN while the interface is down.
pub(crate) fn link_state(fd: BorrowedFd<'_>) -> Result<(), LinkError> {
    match rustix::net::recv(fd, &mut [0u8; 0][..], rustix::net::RecvFlags::DONTWAIT) {
        Err(Errno::NXIO | Errno::NODEV) => Err(LinkError::Vanished),
        Err(Errno::NETDOWN) => Err(LinkError::Down),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(addr: u64, len: u32) -> Desc {
        Desc {
            addr,
            len,
            options: 0,
        }
    }

    #[test]
    fn descriptors_inside_one_frame_of_the_area_are_taken() {
        // Receive frames [8192, 16384) of 2048 bytes.
        let f = |desc| frame_of(desc, 8192, 16384, 2048);
        // Copy mode puts data 256 bytes into the frame (XDP_PACKET_HEADROOM).
        assert_eq!(f(d(8192 + 256, 1514)), Ok(8192));
        assert_eq!(f(d(10240 + 256, 1792)), Ok(10240), "up to the frame's end");
        assert_eq!(f(d(14336, 2048)), Ok(14336), "a whole last frame");
        assert_eq!(
            f(d(10240 + 256, 1793)),
            Err(Some(10240)),
            "runs into the next frame"
        );
        assert_eq!(f(d(8192, 0)), Err(Some(8192)), "empty");
        assert_eq!(f(d(8191, 60)), Err(None), "below the area");
        assert_eq!(f(d(16384, 60)), Err(None), "above the area");
        assert_eq!(f(d(u64::MAX, u32::MAX)), Err(None), "no overflow");
        assert_eq!(
            f(d(16383, u32::MAX)),
            Err(Some(14336)),
            "no overflow at the end"
        );
    }
}
