//! A tap queue's transmit side: each packet written with an all-zero virtio-net header, its
//! chain gathered into one `writev` (linearised when it is long or has an external part); a
//! TCP super-frame kept whole from a pod's tap written as one, its header saying so; a run of
//! one flow's TCP segments written as one super-frame ([`super::coalesce`]).

use std::io::IoSlice;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use buffer::{NONE, Pool};

use wire::tso::MAX_HDRS;

use super::coalesce;
use super::counters::TxCounters;
use super::{ETH_HDR, VNET_HDR_LEN};
use crate::af_packet::counters::bump;
use crate::vnet;

/// What one `send` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendStats {
    /// Packets taken (sent or dropped as malformed); the rest found no room.
    pub consumed: usize,
    pub malformed: usize,
    /// The device is down; nothing was sent.
    pub link_down: bool,
    /// The device is gone.
    pub vanished: bool,
    /// Segments written as parts of super-frames.
    pub coalesced: usize,
    /// Super-frames written whole.
    pub whole: usize,
}

/// One queue's transmit side.
#[derive(Debug)]
pub struct TxQueue {
    fd: Arc<OwnedFd>,
    /// A packet's external part (a memif peer's memory), read out to be written.
    scratch: Vec<u8>,
    counters: Arc<TxCounters>,
}

impl TxQueue {
    pub(super) fn shared(fd: Arc<OwnedFd>) -> TxQueue {
        TxQueue {
            fd,
            scratch: Vec::new(),
            counters: Arc::default(),
        }
    }

    pub fn counters(&self) -> &Arc<TxCounters> {
        &self.counters
    }

    /// Writes each packet of `bufs` (chains, external parts included) with an all-zero
    /// virtio-net header, and each run of one TCP flow's segments as one super-frame
    /// ([`super::coalesce`]). The caller frees every buffer afterwards.
    pub fn send(&mut self, pool: &Pool, bufs: &[u32]) -> SendStats {
        let mut st = SendStats::default();
        let (mut packets, mut bytes) = (0u64, 0u64);
        let c = self.counters.clone();
        while st.consumed < bufs.len() {
            let rest = &bufs[st.consumed..];
            let run = coalesce::run_len(pool, rest);
            let r = if run > 1 {
                self.write_run(pool, &rest[..run])
            } else {
                self.write_one(pool, rest[0])
            };
            match r {
                Written::Sent(len) => {
                    packets += run as u64;
                    bytes += len as u64;
                    st.consumed += run;
                    if run > 1 {
                        st.coalesced += run;
                    } else if pool.meta(rest[0]).gso_size != 0 {
                        st.whole += 1;
                    }
                }
                Written::Malformed => {
                    st.malformed += 1;
                    st.consumed += 1;
                }
                Written::Failed => {
                    bump(&c.write_errors, run as u64);
                    st.consumed += run;
                }
                Written::NoRoom => break,
                Written::LinkDown => {
                    st.link_down = true;
                    break;
                }
                Written::Vanished => {
                    st.vanished = true;
                    break;
                }
            }
        }
        bump(&c.packets, packets);
        bump(&c.bytes, bytes);
        let left = (bufs.len() - st.consumed) as u64;
        if st.malformed != 0 {
            bump(&c.malformed, st.malformed as u64);
        }
        if st.link_down || st.vanished {
            bump(&c.link_down, left);
        } else if left != 0 {
            bump(&c.tx_no_room, left);
        }
        st
    }

    /// Writes one packet with an all-zero virtio-net header (a plain frame), or a
    /// super-frame's.
    fn write_one(&mut self, pool: &Pool, head: u32) -> Written {
        /// Segments of one frame written at once (a 64 KiB super-frame is 33 buffers); a
        /// longer chain is linearised first.
        const MAX_IOV: usize = 40;
        let gso = pool.meta(head).gso_size;
        let hdr = if gso == 0 {
            [0; VNET_HDR_LEN]
        } else {
            let d = pool.data(head);
            let len = pool.meta(head).total_len as usize;
            let Some(sf) = wire::tso::SuperFrame::parse(&d[..d.len().min(MAX_HDRS)], len) else {
                return Written::Malformed;
            };
            vnet::tcp4_super_frame(&sf, gso)
        };
        let mut len = 0;
        let mut iov: [IoSlice<'_>; MAX_IOV] = [IoSlice::new(&[]); MAX_IOV];
        iov[0] = IoSlice::new(&hdr);
        let mut k = 1;
        let mut linear = false;
        let mut i = head;
        while i != NONE {
            if k == MAX_IOV || pool.meta(i).ext.len != 0 {
                linear = true;
                break;
            }
            iov[k] = IoSlice::new(pool.data(i));
            len += iov[k].len();
            k += 1;
            i = pool.meta(i).next;
        }
        let mut unreadable = false;
        if linear {
            self.scratch.clear();
            let mut i = head;
            while i != NONE {
                self.scratch.extend_from_slice(pool.data(i));
                if pool.meta(i).ext.len != 0 && !pool.read_ext(i, &mut self.scratch) {
                    unreadable = true;
                }
                i = pool.meta(i).next;
            }
            iov[1] = IoSlice::new(&self.scratch);
            len = self.scratch.len();
            k = 2;
        }
        if len < ETH_HDR || unreadable {
            return Written::Malformed;
        }
        Written::of(rustix::io::writev(&*self.fd, &iov[..k]), len)
    }

    /// Writes a run of segments as one super-frame: its header, then each payload.
    fn write_run(&mut self, pool: &Pool, run: &[u32]) -> Written {
        let mut vnet_hdr = [0u8; VNET_HDR_LEN];
        let mut head = [0u8; coalesce::MAX_HDRS];
        let hdrs = coalesce::super_header(pool, run, &mut vnet_hdr, &mut head);
        let mut iov: [IoSlice<'_>; coalesce::MAX_RUN + 2] =
            [IoSlice::new(&[]); coalesce::MAX_RUN + 2];
        iov[0] = IoSlice::new(&vnet_hdr);
        iov[1] = IoSlice::new(&head[..hdrs]);
        // Counted as the segments it carries, as they came.
        let mut len = 0;
        for (k, &b) in run.iter().enumerate() {
            let d = pool.data(b);
            len += d.len();
            iov[k + 2] = IoSlice::new(&d[hdrs..]);
        }
        Written::of(rustix::io::writev(&*self.fd, &iov[..run.len() + 2]), len)
    }
}

/// How one write went.
enum Written {
    /// Written, this many bytes of frames (of segments, for a super-frame).
    Sent(usize),
    Malformed,
    /// Refused for lack of room (`EAGAIN`, `ENOBUFS`): try again later.
    NoRoom,
    LinkDown,
    Vanished,
    /// Failed for another reason: dropped.
    Failed,
}

impl Written {
    fn of(r: rustix::io::Result<usize>, len: usize) -> Written {
        match r {
            Ok(_) => Written::Sent(len),
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::NOBUFS) => Written::NoRoom,
            Err(rustix::io::Errno::IO) => Written::LinkDown,
            Err(rustix::io::Errno::BADFD | rustix::io::Errno::NODEV) => Written::Vanished,
            Err(_) => Written::Failed,
        }
    }
}
