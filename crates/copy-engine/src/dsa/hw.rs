//! Intel DSA's in-memory formats, as the kernel's `<linux/idxd.h>` declares them: the 64-byte
//! work descriptor (`struct dsa_hw_desc`), the 32-byte completion record (`struct
//! dsa_completion_record`), and the opcode, flag and status values the engine uses. Plain
//! data: building or reading one touches no device. Little-endian, x86 only, as the device.
//!
//! `tests/idxd_golden.rs` compiles a C program against the installed `<linux/idxd.h>` and
//! checks these layouts and encodings byte for byte against it.

/// `enum dsa_opcode`: the operations the engine submits.
pub mod opcode {
    pub const NOOP: u8 = 0x00;
    pub const BATCH: u8 = 0x01;
    pub const DRAIN: u8 = 0x02;
    pub const MEMMOVE: u8 = 0x03;
}

/// `IDXD_OP_FLAG_*`: descriptor flags (the low 24 bits of the second dword).
pub mod flag {
    /// Inside a batch: start after every earlier descriptor of the batch completed.
    pub const FENCE: u32 = 0x0001;
    /// Block on fault; legal only on a work queue with `block_on_fault=1`.
    pub const BOF: u32 = 0x0002;
    /// Completion Record Address Valid.
    pub const CRAV: u32 = 0x0004;
    /// Request Completion Record: write it always (without: only on failure or partial
    /// completion).
    pub const RCR: u32 = 0x0008;
    /// Request Completion Interrupt (kernel only).
    pub const RCI: u32 = 0x0010;
    /// Cache Control: allocate destination writes in the last-level cache.
    pub const CC: u32 = 0x0100;
}

/// `enum dsa_completion_status` (the low 7 bits of a completion record's first byte).
pub mod status {
    /// Not written yet.
    pub const NONE: u8 = 0x00;
    pub const SUCCESS: u8 = 0x01;
    /// Partial completion: a page fault with block-on-fault off.
    pub const PAGE_FAULT_NOBOF: u8 = 0x03;
    /// Partial completion: the OS refused the page request.
    pub const PAGE_FAULT_IR: u8 = 0x04;
    /// A batch with at least one failed descriptor.
    pub const BATCH_FAIL: u8 = 0x05;
    /// A page fault reading a batch's descriptor list; `descs_completed` is the progress.
    pub const BATCH_PAGE_FAULT: u8 = 0x06;
    pub const BAD_OPCODE: u8 = 0x10;
    pub const INVALID_FLAGS: u8 = 0x11;
    pub const NOZERO_RESERVE: u8 = 0x12;
    /// Transfer size 0 or over the work queue's maximum.
    pub const XFER_ERANGE: u8 = 0x13;
    /// Batch count under 2 or over the work queue's maximum.
    pub const DESC_CNT_ERANGE: u8 = 0x14;
    pub const OVERLAP_BUFFERS: u8 = 0x16;
    /// A batch's descriptor list not 64-byte aligned.
    pub const DESCLIST_ALIGN: u8 = 0x18;
    /// The completion record address could not be translated.
    pub const CRA_XLAT: u8 = 0x1a;
    /// The completion record address not 32-byte aligned.
    pub const CRA_ALIGN: u8 = 0x1b;
    pub const HW_ERR1: u8 = 0x20;
    pub const TRANSLATION_FAIL: u8 = 0x22;
    /// The status code's bits; bit 7 says a page fault was on a write.
    pub const MASK: u8 = 0x7f;
    pub const WRITE_FAULT: u8 = 0x80;
}

/// Flags of a memmove submitted on its own: a completion record, always written, and the
/// destination allocated in the cache (the consumer reads it soon).
pub const MEMMOVE_FLAGS: u32 = flag::CRAV | flag::RCR | flag::CC;
/// Flags of a memmove inside a batch: a record only on failure or partial completion.
pub const BATCH_MEMMOVE_FLAGS: u32 = flag::CRAV | flag::CC;
/// Flags of a batch descriptor: its own record, always written.
pub const BATCH_FLAGS: u32 = flag::CRAV | flag::RCR;

/// `struct dsa_hw_desc`: one 64-byte work descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(64))]
pub struct Descriptor {
    /// pasid (bits 0-19), reserved (20-30), priv (31): 0 from user space.
    pub w0: u32,
    /// flags (bits 0-23), opcode (24-31).
    pub w1: u32,
    pub completion_addr: u64,
    /// memmove: the source; batch: the descriptor list.
    pub src_addr: u64,
    /// memmove: the destination; batch: reserved.
    pub dst_addr: u64,
    /// memmove: bytes; batch: descriptors.
    pub xfer_size: u32,
    pub int_handle: u16,
    pub rsvd1: u16,
    pub op_specific: [u64; 3],
}

const _: () = assert!(size_of::<Descriptor>() == 64 && align_of::<Descriptor>() == 64);

impl Descriptor {
    /// A memmove of `len` bytes (1 up to the work queue's `max_transfer_size`).
    pub fn memmove(flags: u32, completion: u64, src: u64, dst: u64, len: u32) -> Descriptor {
        Descriptor {
            w1: (flags & 0x00ff_ffff) | (u32::from(opcode::MEMMOVE) << 24),
            completion_addr: completion,
            src_addr: src,
            dst_addr: dst,
            xfer_size: len,
            ..Descriptor::default()
        }
    }

    /// A batch of `count` descriptors (2 up to the work queue's `max_batch_size`) at `list`
    /// (64-byte aligned).
    pub fn batch(flags: u32, completion: u64, list: u64, count: u32) -> Descriptor {
        Descriptor {
            w1: (flags & 0x00ff_ffff) | (u32::from(opcode::BATCH) << 24),
            completion_addr: completion,
            src_addr: list,
            xfer_size: count,
            ..Descriptor::default()
        }
    }

    pub fn opcode(&self) -> u8 {
        (self.w1 >> 24) as u8
    }

    pub fn flags(&self) -> u32 {
        self.w1 & 0x00ff_ffff
    }

    /// The descriptor as the device reads it.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..4].copy_from_slice(&self.w0.to_le_bytes());
        b[4..8].copy_from_slice(&self.w1.to_le_bytes());
        b[8..16].copy_from_slice(&self.completion_addr.to_le_bytes());
        b[16..24].copy_from_slice(&self.src_addr.to_le_bytes());
        b[24..32].copy_from_slice(&self.dst_addr.to_le_bytes());
        b[32..36].copy_from_slice(&self.xfer_size.to_le_bytes());
        b[36..38].copy_from_slice(&self.int_handle.to_le_bytes());
        b[38..40].copy_from_slice(&self.rsvd1.to_le_bytes());
        for (k, w) in self.op_specific.iter().enumerate() {
            b[40 + 8 * k..48 + 8 * k].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// A descriptor from the bytes a device (or its model) reads.
    pub fn from_bytes(b: &[u8; 64]) -> Descriptor {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        Descriptor {
            w0: u32_at(0),
            w1: u32_at(4),
            completion_addr: u64_at(8),
            src_addr: u64_at(16),
            dst_addr: u64_at(24),
            xfer_size: u32_at(32),
            int_handle: u16::from_le_bytes([b[36], b[37]]),
            rsvd1: u16::from_le_bytes([b[38], b[39]]),
            op_specific: [u64_at(40), u64_at(48), u64_at(56)],
        }
    }
}

/// `struct dsa_completion_record`: 32 bytes, 32-byte aligned, written by the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(32))]
pub struct CompletionRecord {
    /// Status (bits 0-6); bit 7: the fault was on a write.
    pub status: u8,
    /// memmove: copy direction (1: descending); batch: 1 if a descriptor failed.
    pub result: u8,
    pub fault_info: u8,
    pub rsvd: u8,
    /// memmove: bytes done before a fault; batch: descriptors processed.
    pub bytes_completed: u32,
    pub fault_addr: u64,
    pub invalid_flags: u32,
    pub op_specific: [u32; 3],
}

const _: () = assert!(size_of::<CompletionRecord>() == 32 && align_of::<CompletionRecord>() == 32);

impl CompletionRecord {
    /// The status code, without the write-fault bit.
    pub fn code(&self) -> u8 {
        self.status & status::MASK
    }

    /// Whether the device has written the record.
    pub fn done(&self) -> bool {
        self.code() != status::NONE
    }

    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[0] = self.status;
        b[1] = self.result;
        b[2] = self.fault_info;
        b[3] = self.rsvd;
        b[4..8].copy_from_slice(&self.bytes_completed.to_le_bytes());
        b[8..16].copy_from_slice(&self.fault_addr.to_le_bytes());
        b[16..20].copy_from_slice(&self.invalid_flags.to_le_bytes());
        for (k, w) in self.op_specific.iter().enumerate() {
            b[20 + 4 * k..24 + 4 * k].copy_from_slice(&w.to_le_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect()
    }

    /// Golden vectors: the bytes gcc lays out for the kernel's uapi descriptor and completion
    /// record structs (`<linux/idxd.h>`) filled with these values.
    #[test]
    fn descriptors_match_the_golden_vectors() {
        let m = Descriptor::memmove(
            MEMMOVE_FLAGS,
            0x7f00_0000_1020,
            0x7f11_2233_4400,
            0x7f55_6677_8800,
            1500,
        );
        let want = hex("00 00 00 00 0c 01 00 03 20 10 00 00 00 7f 00 00 \
             00 44 33 22 11 7f 00 00 00 88 77 66 55 7f 00 00 \
             dc 05 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
        assert_eq!(m.to_bytes().to_vec(), want);
        assert_eq!(Descriptor::from_bytes(&m.to_bytes()), m);
        let b = Descriptor::batch(BATCH_FLAGS, 0x7f00_0000_2000, 0x7f00_0001_0000, 32);
        let want = hex("00 00 00 00 0c 00 00 01 00 20 00 00 00 7f 00 00 \
             00 00 01 00 00 7f 00 00 00 00 00 00 00 00 00 00 \
             20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
        assert_eq!(b.to_bytes().to_vec(), want);
        assert_eq!((b.opcode(), b.flags()), (opcode::BATCH, BATCH_FLAGS));
        let r = CompletionRecord {
            status: status::PAGE_FAULT_NOBOF | status::WRITE_FAULT,
            bytes_completed: 4096,
            fault_addr: 0x7f55_6677_9800,
            ..CompletionRecord::default()
        };
        let mut want = hex("83 00 00 00 00 10 00 00 00 98 77 66 55 7f 00 00");
        want.resize(32, 0);
        assert_eq!(r.to_bytes().to_vec(), want);
        assert_eq!((r.code(), r.done()), (status::PAGE_FAULT_NOBOF, true));
        assert!(!CompletionRecord::default().done());
    }
}
