//! A tap queue's transmit side: each packet written with an all-zero virtio-net header, its
//! chain gathered into one `writev` (linearised when it is long or has an external part).

use std::io::IoSlice;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use buffer::{NONE, Pool};

use super::counters::TxCounters;
use super::{ETH_HDR, VNET_HDR_LEN};
use crate::af_packet::counters::bump;

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
    /// virtio-net header. The caller frees every buffer afterwards.
    pub fn send(&mut self, pool: &Pool, bufs: &[u32]) -> SendStats {
        const HDR: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];
        /// Segments of one frame written at once; a longer chain is linearised first.
        const MAX_IOV: usize = 16;
        let mut st = SendStats::default();
        let (mut packets, mut bytes) = (0u64, 0u64);
        let c = self.counters.clone();
        for &head in bufs {
            let mut len = 0;
            let mut iov: [IoSlice<'_>; MAX_IOV] = [IoSlice::new(&[]); MAX_IOV];
            iov[0] = IoSlice::new(&HDR);
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
                st.malformed += 1;
                st.consumed += 1;
                continue;
            }
            match rustix::io::writev(&*self.fd, &iov[..k]) {
                Ok(_) => {
                    packets += 1;
                    bytes += len as u64;
                    st.consumed += 1;
                }
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::NOBUFS) => break,
                Err(rustix::io::Errno::IO) => {
                    st.link_down = true;
                    break;
                }
                Err(rustix::io::Errno::BADFD | rustix::io::Errno::NODEV) => {
                    st.vanished = true;
                    break;
                }
                Err(_) => {
                    bump(&c.write_errors, 1);
                    st.consumed += 1;
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
}
