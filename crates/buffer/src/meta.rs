//! A buffer's metadata record, and the changes a node makes to it on its fast path.

use crate::{Ext, NONE};

/// Per-buffer metadata, VPP's `vlib_buffer_t` opaque fields cut to what veclane uses. One
/// cache line each: at 56 bytes unaligned, every other record would straddle two lines, and
/// each node touches a packet's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(64))]
pub struct Meta {
    /// Offset of the first data byte from the start of the buffer (headroom in front).
    pub offset: u16,
    /// Bytes of data in this buffer.
    pub len: u16,
    /// Next buffer of the chain, or [`NONE`].
    pub next: u32,
    /// Bytes in the whole chain; kept on the head buffer only.
    pub total_len: u32,
    pub rx_if: u32,
    pub tx_if: u32,
    pub vrf: u32,
    /// The adjacency a lookup chose (an index into the forwarding tables).
    pub adj: u32,
    pub error: u16,
    pub flags: u16,
    /// Bytes of this packet that stay outside the pool (see [`Ext`]); counted in `total_len`.
    pub ext: Ext,
    /// Not 0: the packet is a TCP/IPv4 super-frame (a pod's segmentation offload), to be cut
    /// into segments of this many payload bytes where it leaves for anything but a pod's tap;
    /// its TCP checksum is partial (the field holds the pseudo-header's sum, not inverted).
    /// Kept on the head buffer only.
    pub gso_size: u16,
}

impl Meta {
    /// The metadata of an empty buffer received on `rx_if` ([`NONE`]: none): no data after
    /// `headroom` bytes of it, no chain, nothing chosen for it yet.
    pub(crate) fn fresh(headroom: u16, rx_if: u32) -> Meta {
        Meta {
            offset: headroom,
            len: 0,
            next: NONE,
            total_len: 0,
            rx_if,
            tx_if: NONE,
            vrf: 0,
            adj: 0,
            error: 0,
            flags: 0,
            ext: Ext::default(),
            gso_size: 0,
        }
    }

    /// Skips `n` bytes of this buffer's data (a parsed header), as [`Pool::advance`] with a
    /// positive count; false, changing nothing, if the data is shorter.
    #[inline]
    pub fn skip(&mut self, n: u16) -> bool {
        let Some(len) = self.len.checked_sub(n) else {
            return false;
        };
        self.offset += n;
        self.len = len;
        self.total_len = self.total_len.saturating_sub(u32::from(n));
        true
    }

    /// [`Pool::truncate`] of this buffer, for a packet of one buffer (a chain's head would
    /// keep its tail: [`Pool::truncate_chain`] cuts chains).
    #[inline]
    pub fn truncate(&mut self, len: u16) {
        let have = u32::from(self.len) + self.ext.len;
        let len = u32::from(len);
        if len >= have {
            return;
        }
        if len > u32::from(self.len) {
            self.ext.len = len - u32::from(self.len);
        } else {
            self.ext.len = 0;
            self.len = len as u16;
        }
        self.total_len -= have - len;
    }

    /// Takes `n` bytes of headroom into the data (a header about to be written there), the
    /// inverse of [`Meta::skip`]. Only for `n` no larger than the headroom that
    /// [`Pool::meta_data_front_mut`] found: the offset would otherwise wrap.
    #[inline]
    pub fn expose(&mut self, n: u16) {
        self.offset -= n;
        self.len += n;
        self.total_len += u32::from(n);
    }
}
