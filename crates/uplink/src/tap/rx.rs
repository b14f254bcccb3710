//! A tap queue's receive side: one frame per read, behind its virtio-net header, into a pool
//! buffer (a chain when it is larger), its checksum completed where the pod's stack left it
//! to us; a TCP super-frame is kept whole, its checksum partial (`gso_size` set).

use std::io::IoSliceMut;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use buffer::Pool;
use wire::tso::{MIN_MSS, SuperFrame};

use super::counters::RxCounters;
use super::{ETH_HDR, OVERFLOW, VNET_HDR_LEN};
use crate::af_packet::counters::bump;
use crate::vnet::{self, VnetHdr};

/// What one `recv` found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecvStats {
    pub packets: usize,
    pub no_buffer: u32,
    pub gso: u32,
    pub bad_frame: u32,
    /// TCP super-frames taken whole (each is one of `packets`).
    pub super_frames: u32,
    /// The device is gone (deleted inside its namespace): the queue will never read again.
    pub vanished: bool,
}

/// One queue's receive side.
#[derive(Debug)]
pub struct RxQueue {
    fd: Arc<OwnedFd>,
    /// Pool buffers the next read scatters its frame over, ascending: enough for the
    /// largest frame, kept from read to read (a queue's reserve, given back by
    /// [`RxQueue::release`]).
    spare: Vec<u32>,
    /// Where the end of a frame goes when the pool could not fill the reserve; allocated at
    /// the first such read.
    pub(super) overflow: Vec<u8>,
    /// A chained frame made contiguous, to complete its checksum.
    linear: Vec<u8>,
    /// A read found the device gone.
    vanished: bool,
    counters: Arc<RxCounters>,
}

/// What one read gave.
enum Read {
    /// A frame of this length behind this header, in the reserve (and overflow area).
    Frame([u8; VNET_HDR_LEN], usize),
    /// A frame read into the overflow area and dropped: the pool had no buffer.
    NoBuffer,
    /// A frame longer than a read takes (or shorter than its header), dropped.
    TooLong,
    /// Nothing to read, or an error (counted; the device's vanishing noted).
    Nothing,
}

/// Why a frame was not taken.
pub(super) enum Lost {
    NoBuffer,
    Gso,
    Bad,
}

/// Most buffers one read scatters over: a 64 KiB frame in 2 KiB buffers (smaller buffers
/// leave the rest to the overflow area).
const MAX_BUFS: usize = OVERFLOW.div_ceil(2048);

impl RxQueue {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A receive queue over `fd`: any fd that gives one frame, behind its virtio-net header,
    /// per read (a tap's; a `SOCK_SEQPACKET` socket standing in for one, in the hostile-input
    /// tests and the fuzz target, which write what a pod could).
    pub fn from_fd(fd: OwnedFd) -> RxQueue {
        RxQueue::shared(Arc::new(fd))
    }

    pub(super) fn shared(fd: Arc<OwnedFd>) -> RxQueue {
        RxQueue {
            fd,
            spare: Vec::with_capacity(MAX_BUFS),
            overflow: Vec::new(),
            linear: Vec::new(),
            vanished: false,
            counters: Arc::default(),
        }
    }

    /// Gives the queue's reserve of buffers back to `pool`: before the queue is closed.
    pub fn release(&mut self, pool: &mut Pool) {
        pool.free_bulk(&self.spare);
        self.spare.clear();
    }

    pub fn counters(&self) -> &Arc<RxCounters> {
        &self.counters
    }

    /// Reads frames into pool buffers appended to `out` (their `rx_if` is the caller's to
    /// set), until `max` frames or `max` buffers are taken or `max` reads made.
    pub fn recv(&mut self, pool: &mut Pool, out: &mut Vec<u32>, max: usize) -> RecvStats {
        let mut st = RecvStats::default();
        let mut bytes = 0u64;
        let mut csum = 0u64;
        // Every read counts, dropped or not: a pod writing frames that are all refused must
        // not hold the worker here. Buffers count too: a read of 64 KiB takes 33.
        let (mut reads, mut buffers) = (0, 0);
        while st.packets < max && reads < max && buffers < max {
            reads += 1;
            let (hdr, len) = match self.read(pool) {
                Read::Frame(hdr, len) => (hdr, len),
                Read::NoBuffer => {
                    st.no_buffer += 1;
                    continue;
                }
                Read::TooLong => {
                    st.bad_frame += 1;
                    continue;
                }
                Read::Nothing => break,
            };
            let (head, n) = match self.chain(pool, len) {
                Ok(r) => r,
                Err(_) => {
                    st.no_buffer += 1;
                    continue;
                }
            };
            let taken = if VnetHdr::new(&hdr).is_tcp4_super_frame() {
                take_whole(pool, head, &hdr, len).inspect(|_| st.super_frames += 1)
            } else {
                self.take(pool, head, &hdr, len, &mut csum)
            };
            match taken {
                Ok(()) => {
                    buffers += n;
                    out.push(head);
                    st.packets += 1;
                    bytes += len as u64;
                }
                Err(lost) => {
                    pool.free(head);
                    match lost {
                        Lost::NoBuffer => st.no_buffer += 1,
                        Lost::Gso => st.gso += 1,
                        Lost::Bad => st.bad_frame += 1,
                    }
                }
            }
        }
        if self.vanished {
            st.vanished = true;
            self.vanished = false;
        }
        let c = &self.counters;
        if st.packets != 0 {
            bump(&c.packets, st.packets as u64);
            bump(&c.bytes, bytes);
        }
        if st.no_buffer + st.gso + st.bad_frame + st.super_frames != 0 || csum != 0 {
            bump(&c.super_frames, u64::from(st.super_frames));
            bump(&c.no_buffer, u64::from(st.no_buffer));
            bump(&c.gso, u64::from(st.gso));
            bump(&c.bad_frame, u64::from(st.bad_frame));
            bump(&c.csum_completed, csum);
        }
        st
    }

    /// One read, scattered over the reserve (topped up first) and, when the pool could not
    /// fill it, the overflow area.
    fn read(&mut self, pool: &mut Pool) -> Read {
        let need = OVERFLOW.div_ceil(pool.data_size()).min(MAX_BUFS);
        let before = self.spare.len();
        while self.spare.len() < need
            && let Some(b) = pool.alloc()
        {
            self.spare.push(b);
        }
        if self.spare.len() != before {
            self.spare.sort_unstable();
        }
        let short = self.spare.len() * pool.data_size() < OVERFLOW;
        if short && self.overflow.is_empty() {
            self.overflow = vec![0; OVERFLOW];
        }
        let mut hdr = [0u8; VNET_HDR_LEN];
        let mut rooms: [&mut [u8]; MAX_BUFS] = std::array::from_fn(|_| Default::default());
        let ok = pool.rooms_mut(&self.spare, &mut rooms);
        debug_assert!(ok, "the reserve is ascending, distinct, the pool's");
        let k = self.spare.len();
        let mut iov: [IoSliceMut<'_>; MAX_BUFS + 2] =
            std::array::from_fn(|_| IoSliceMut::new(&mut []));
        iov[0] = IoSliceMut::new(&mut hdr);
        let mut room = 0;
        for (slot, r) in iov[1..].iter_mut().zip(rooms.iter_mut().take(k)) {
            room += r.len();
            *slot = IoSliceMut::new(r);
        }
        let mut count = k + 1;
        if short {
            room += self.overflow.len();
            iov[count] = IoSliceMut::new(&mut self.overflow);
            count += 1;
        }
        match rustix::io::readv(&*self.fd, &mut iov[..count]) {
            // The kernel returns the frame's whole length even when it cut the copy short
            // (a frame larger than the room given): such a frame is refused, and nothing
            // past what was read is ever looked at.
            Ok(n) if n > VNET_HDR_LEN + room || n < VNET_HDR_LEN => Read::TooLong,
            Ok(_) if k == 0 => Read::NoBuffer,
            Ok(n) => Read::Frame(hdr, n - VNET_HDR_LEN),
            Err(e) => {
                self.read_error(e);
                Read::Nothing
            }
        }
    }

    /// Makes the `len` bytes the last read put in the reserve (and overflow area) one
    /// chain, its buffers out of the reserve: its head and how many buffers it took.
    fn chain(&mut self, pool: &mut Pool, len: usize) -> Result<(u32, usize), Lost> {
        let size = pool.data_size();
        let in_bufs = len.min(self.spare.len() * size);
        let used = in_bufs.div_ceil(size).max(1);
        let head = self.spare[0];
        let mut left = in_bufs;
        for (i, &b) in self.spare[..used].iter().enumerate() {
            let m = pool.meta_mut(b);
            m.len = left.min(size) as u16;
            left -= usize::from(m.len);
            if i + 1 < used {
                m.next = self.spare[i + 1];
            }
        }
        pool.meta_mut(head).total_len = in_bufs as u32;
        let last = self.spare[used - 1];
        self.spare.drain(..used);
        let rest = len - in_bufs;
        if rest != 0 {
            let Some(tail) = pool.from_bytes(&self.overflow[..rest]) else {
                pool.free(head);
                return Err(Lost::NoBuffer);
            };
            pool.link(last, tail);
            pool.meta_mut(head).total_len = len as u32;
        }
        Ok((head, used + rest.div_ceil(size)))
    }

    fn read_error(&mut self, e: rustix::io::Errno) {
        match e {
            rustix::io::Errno::AGAIN | rustix::io::Errno::INTR => {}
            // The device was unregistered under the fd (`ip link del` in the pod).
            rustix::io::Errno::BADFD | rustix::io::Errno::NODEV => self.vanished = true,
            _ => bump(&self.counters.read_errors, 1),
        }
    }

    /// Takes the plain frame of `len` bytes at `head`, its checksum completed where the
    /// pod's stack left it to us.
    fn take(
        &mut self,
        pool: &mut Pool,
        head: u32,
        hdr: &[u8; VNET_HDR_LEN],
        len: usize,
        csum: &mut u64,
    ) -> Result<(), Lost> {
        if len < ETH_HDR {
            return Err(Lost::Bad);
        }
        let hdr = VnetHdr::new(hdr);
        if hdr.gso_type() != vnet::GSO_NONE {
            return Err(Lost::Gso);
        }
        let Some((start, offset)) = hdr.partial_csum() else {
            return Ok(());
        };
        let start = usize::from(start);
        let field = start + usize::from(offset);
        if field + 2 > len || start > len {
            return Err(Lost::Bad);
        }
        // As the kernel's skb_checksum_help: the field holds the pseudo-header's sum; sum
        // from csum_start to the end, fold, invert, never 0 (UDP's "no checksum").
        let sum = |d: &[u8]| {
            let c = !wire::checksum::fold(wire::checksum::accumulate(0, &d[start..]));
            if c == 0 { 0xffff } else { c }.to_be_bytes()
        };
        if pool.meta(head).next == buffer::NONE {
            let d = pool.data_mut(head);
            let c = sum(d);
            d[field..field + 2].copy_from_slice(&c);
        } else {
            // A chain (a jumbo frame): summed from a contiguous copy, the field written
            // back where it lies.
            self.linear.clear();
            pool.read_chain(head, &mut self.linear);
            let c = sum(&self.linear);
            self.linear[field..field + 2].copy_from_slice(&c);
            let mut at = 0;
            let mut b = head;
            while b != buffer::NONE {
                let d = pool.data_mut(b);
                let end = at + d.len();
                let (from, to) = (field.max(at), (field + 2).min(end));
                if from < to {
                    d[from - at..to - at].copy_from_slice(&self.linear[from..to]);
                }
                at = end;
                b = pool.meta(b).next;
            }
        }
        pool.meta_mut(head).flags |= buffer::L4_CHECKSUM_OURS;
        *csum += 1;
        Ok(())
    }
}

/// Takes the TCP/IPv4 super-frame of `len` bytes at `head` whole: its segment size in
/// `gso_size`, its TCP checksum field set to the pseudo-header's sum whatever the pod wrote
/// there (what a super-frame's partial checksum is, [`wire::tso`]).
fn take_whole(
    pool: &mut Pool,
    head: u32,
    hdr: &[u8; VNET_HDR_LEN],
    len: usize,
) -> Result<(), Lost> {
    let d = pool.data_mut(head);
    let sf = SuperFrame::parse(d, len).ok_or(Lost::Bad)?;
    let mss = VnetHdr::new(hdr).gso_size();
    if usize::from(mss) < MIN_MSS {
        return Err(Lost::Gso);
    }
    let field = sf.tcp_at + wire::tso::CHECKSUM_OFFSET;
    d[field..field + 2].copy_from_slice(&sf.partial_checksum().to_be_bytes());
    pool.meta_mut(head).gso_size = mss;
    Ok(())
}
