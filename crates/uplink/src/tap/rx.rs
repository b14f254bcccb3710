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
    /// Where a frame larger than one buffer goes on, before it is copied into a chain;
    /// allocated at the first such frame.
    pub(super) overflow: Vec<u8>,
    counters: Arc<RxCounters>,
}

/// Why a frame was not taken.
pub(super) enum Lost {
    NoBuffer,
    Gso,
    Bad,
}

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
            overflow: Vec::new(),
            counters: Arc::default(),
        }
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
        if self.overflow.is_empty() {
            self.overflow = vec![0; OVERFLOW];
        }
        // Every read counts, dropped or not: a pod writing frames that are all refused must
        // not hold the worker here. Buffers count too: a read of 64 KiB takes 33.
        let (mut reads, mut buffers) = (0, 0);
        while st.packets < max && reads < max && buffers < max {
            reads += 1;
            let Some(b) = pool.alloc() else {
                // Read the frame anyway: left in the device it would keep the worker awake.
                match rustix::io::read(&*self.fd, &mut self.overflow) {
                    Ok(_) => {
                        st.no_buffer += 1;
                        continue;
                    }
                    Err(e) => {
                        self.read_error(e, &mut st);
                        break;
                    }
                }
            };
            let mut hdr = [0u8; VNET_HDR_LEN];
            let room = pool.room_mut(b);
            let first = room.len();
            let n = {
                let mut iov = [
                    IoSliceMut::new(&mut hdr),
                    IoSliceMut::new(room),
                    IoSliceMut::new(&mut self.overflow),
                ];
                rustix::io::readv(&*self.fd, &mut iov)
            };
            let n = match n {
                // The kernel returns the frame's whole length even when it cut the copy short
                // (a frame larger than the room given): such a frame is refused, and nothing
                // past what was read is ever looked at.
                Ok(n) if n > VNET_HDR_LEN + first + self.overflow.len() => {
                    pool.free(b);
                    st.bad_frame += 1;
                    continue;
                }
                Ok(n) => n,
                Err(e) => {
                    pool.free(b);
                    self.read_error(e, &mut st);
                    break;
                }
            };
            let taken = if VnetHdr::new(&hdr).is_tcp4_super_frame() {
                self.take_whole(pool, b, &hdr, n, first)
                    .inspect(|_| st.super_frames += 1)
            } else {
                self.take(pool, b, &hdr, n, first, &mut csum)
            };
            match taken {
                Ok(len) => {
                    buffers += len.div_ceil(first.max(1));
                    out.push(b);
                    st.packets += 1;
                    bytes += len as u64;
                }
                Err(lost) => {
                    pool.free(b);
                    match lost {
                        Lost::NoBuffer => st.no_buffer += 1,
                        Lost::Gso => st.gso += 1,
                        Lost::Bad => st.bad_frame += 1,
                    }
                }
            }
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

    fn read_error(&self, e: rustix::io::Errno, st: &mut RecvStats) {
        match e {
            rustix::io::Errno::AGAIN | rustix::io::Errno::INTR => {}
            // The device was unregistered under the fd (`ip link del` in the pod).
            rustix::io::Errno::BADFD | rustix::io::Errno::NODEV => st.vanished = true,
            _ => bump(&self.counters.read_errors, 1),
        }
    }

    /// Makes buffer `b` (which holds the first `first` bytes of the frame, the rest being in
    /// the overflow area) the head of the frame's chain, its checksum completed.
    fn take(
        &mut self,
        pool: &mut Pool,
        b: u32,
        hdr: &[u8; VNET_HDR_LEN],
        n: usize,
        first: usize,
        csum: &mut u64,
    ) -> Result<usize, Lost> {
        let len = n.checked_sub(VNET_HDR_LEN).ok_or(Lost::Bad)?;
        if len < ETH_HDR {
            return Err(Lost::Bad);
        }
        let hdr = VnetHdr::new(hdr);
        if hdr.gso_type() != vnet::GSO_NONE {
            return Err(Lost::Gso);
        }
        let head = len.min(first);
        let rest = len - head;
        if let Some((start, offset)) = hdr.partial_csum() {
            let start = usize::from(start);
            let field = start + usize::from(offset);
            if field + 2 > len || start > len {
                return Err(Lost::Bad);
            }
            // As the kernel's skb_checksum_help: the field holds the pseudo-header's sum;
            // sum from csum_start to the end, fold, invert, never 0 (UDP's "no checksum").
            let room = pool.room_mut(b);
            let (a, o) = if start < head {
                (&room[start..head], &self.overflow[..rest])
            } else {
                (&[][..], &self.overflow[start - head..rest])
            };
            let c = !wire::checksum::fold(sum_split(a, o));
            let c = if c == 0 { 0xffff } else { c }.to_be_bytes();
            for (k, byte) in c.into_iter().enumerate() {
                let at = field + k;
                if at < head {
                    room[at] = byte;
                } else {
                    self.overflow[at - head] = byte;
                }
            }
            *csum += 1;
        }
        let m = pool.meta_mut(b);
        m.len = head as u16;
        m.total_len = len as u32;
        if hdr.partial_csum().is_some() {
            m.flags |= buffer::L4_CHECKSUM_OURS;
        }
        self.chain_rest(pool, b, rest)?;
        Ok(len)
    }

    /// Chains the first `rest` bytes of the overflow area behind buffer `b`, as a chain of
    /// their own (nothing is left behind if the pool runs out: `from_bytes` frees what it
    /// took).
    fn chain_rest(&self, pool: &mut Pool, b: u32, rest: usize) -> Result<(), Lost> {
        if rest != 0 {
            let tail = pool
                .from_bytes(&self.overflow[..rest])
                .ok_or(Lost::NoBuffer)?;
            pool.link(b, tail);
        }
        Ok(())
    }

    /// Makes buffer `b` (the first `first` bytes of the frame, the rest in the overflow
    /// area) the head of a TCP/IPv4 super-frame's chain, kept whole: its segment size in
    /// `gso_size`, its TCP checksum field set to the pseudo-header's sum whatever the pod
    /// wrote there (what a super-frame's partial checksum is, [`wire::tso`]).
    fn take_whole(
        &self,
        pool: &mut Pool,
        b: u32,
        hdr: &[u8; VNET_HDR_LEN],
        n: usize,
        first: usize,
    ) -> Result<usize, Lost> {
        let len = n.checked_sub(VNET_HDR_LEN).ok_or(Lost::Bad)?;
        let head = len.min(first);
        let room = pool.room_mut(b);
        let sf = SuperFrame::parse(&room[..head], len).ok_or(Lost::Bad)?;
        let mss = VnetHdr::new(hdr).gso_size();
        if usize::from(mss) < MIN_MSS {
            return Err(Lost::Gso);
        }
        let field = sf.tcp_at + wire::tso::CHECKSUM_OFFSET;
        room[field..field + 2].copy_from_slice(&sf.partial_checksum().to_be_bytes());
        let m = pool.meta_mut(b);
        (m.len, m.total_len, m.gso_size) = (head as u16, len as u32, mss);
        self.chain_rest(pool, b, len - head)?;
        Ok(len)
    }
}

/// The one's-complement sum of `a` followed by `b`, whatever the parity of `a`'s length.
fn sum_split(a: &[u8], b: &[u8]) -> u32 {
    if a.len().is_multiple_of(2) || b.is_empty() {
        return wire::checksum::accumulate(wire::checksum::accumulate(0, a), b);
    }
    let (last, a) = a.split_last().expect("odd length");
    let acc = wire::checksum::accumulate(0, a);
    let acc = wire::checksum::accumulate(acc, &[*last, b[0]]);
    wire::checksum::accumulate(acc, &b[1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sum_split_anywhere_is_the_sum_of_the_whole() {
        let data: Vec<u8> = (0..301u32).map(|i| (i * 37 + 11) as u8).collect();
        let whole = wire::checksum::fold(wire::checksum::accumulate(0, &data));
        for at in 0..=data.len() {
            let (a, b) = data.split_at(at);
            assert_eq!(
                wire::checksum::fold(sum_split(a, b)),
                whole,
                "split at {at}"
            );
        }
    }
}
