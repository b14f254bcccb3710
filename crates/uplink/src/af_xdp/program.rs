//! The XDP program that steers frames to our sockets, its XSKMAP, and its attachment.
//!
//! The whole program is the C function
//!
//! ```c
//! SEC("xdp") int veclane_xsk(struct xdp_md *ctx)
//! {
//!     return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
//! }
//! ```
//!
//! written out as eBPF instructions: a frame goes to the AF_XDP socket the map holds for the
//! queue it arrived on, or, when the map has none there, on to the kernel's stack (since
//! Linux 5.3 the helper's flags argument is the action for a missing key). No C compiler,
//! libbpf or BTF is involved: the map fd goes into the program through a `BPF_PSEUDO_MAP_FD`
//! load before `BPF_PROG_LOAD`.
//!
//! The program is attached with `BPF_LINK_CREATE`, not netlink: the kernel detaches it when
//! the link's last fd closes, so an uplink that is dropped, or a process that exits or is
//! killed, leaves no program behind. A link also refuses to replace a program someone else
//! attached. The instruction encoding is the kernel's "eBPF Instruction Set Specification"
//! (Documentation/bpf/standardization/instruction-set.rst).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::{XdpAttach, sys};

/// `struct bpf_insn`: opcode, destination and source registers (4 bits each), offset,
/// immediate.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}
const _: () = assert!(size_of::<Insn>() == 8);

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        // C bit-fields `dst_reg:4, src_reg:4`: the first field takes the low bits on a
        // little-endian target and the high bits on a big-endian one.
        let regs = if cfg!(target_endian = "little") {
            dst | src << 4
        } else {
            dst << 4 | src
        };
        Insn {
            code,
            regs,
            off,
            imm,
        }
    }

    /// The instruction as the kernel reads it from memory.
    #[cfg(test)]
    fn to_bytes(self) -> [u8; 8] {
        let [o0, o1] = self.off.to_ne_bytes();
        let [i0, i1, i2, i3] = self.imm.to_ne_bytes();
        [self.code, self.regs, o0, o1, i0, i1, i2, i3]
    }
}

// Opcode parts (instruction class, size, mode, operation, source).
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
const BPF_W: u8 = 0x00;
const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
const BPF_MOV: u8 = 0xb0;
const BPF_K: u8 = 0x00;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;
/// `src_reg` of a 64-bit immediate load whose immediate is a map fd.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `BPF_FUNC_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS`.
const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`: after data, data_end, data_meta and
/// ingress_ifindex, four u32.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// Where the map fd goes: the immediate of the first half of the 64-bit load.
const MAP_FD_INSN: usize = 1;

const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;

/// The program, with the map fd still to be patched into instruction [`MAP_FD_INSN`].
const PROGRAM: [Insn; 6] = [
    // r2 = ctx->rx_queue_index;        (r1 holds ctx, a struct xdp_md *, on entry)
    Insn::new(BPF_LDX | BPF_MEM | BPF_W, R2, R1, XDP_MD_RX_QUEUE_INDEX, 0),
    // r1 = &xsks_map;                  (two slots: the fd in the first immediate, its upper
    Insn::new(BPF_LD | BPF_DW | BPF_IMM, R1, BPF_PSEUDO_MAP_FD, 0, 0),
    //                                   32 bits, zero, in the second)
    Insn::new(0, 0, 0, 0, 0),
    // r3 = XDP_PASS;                   (what bpf_redirect_map returns for an empty key)
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, R3, 0, 0, XDP_PASS),
    // r0 = bpf_redirect_map(r1, r2, r3);
    Insn::new(BPF_JMP | BPF_CALL, R0, 0, 0, BPF_FUNC_REDIRECT_MAP),
    // return r0;
    Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
];

const LICENSE: &CStr = c"Dual BSD/GPL";
const PROGRAM_NAME: &str = "veclane_xsk";
const MAP_NAME: &str = "veclane_xsks";
/// Room for the verifier's log of a failed load (the program is six instructions).
const LOG_SIZE: usize = 64 * 1024;

/// The instructions with `map_fd` patched in.
pub(crate) fn instructions(map_fd: i32) -> [Insn; 6] {
    let mut p = PROGRAM;
    p[MAP_FD_INSN].imm = map_fd;
    p
}

/// `XDP_FLAGS_SKB_MODE`, `XDP_FLAGS_DRV_MODE` (include/uapi/linux/if_link.h).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Why the program could not be loaded or attached.
#[derive(Debug)]
pub(crate) enum ProgramError {
    /// `BPF_MAP_CREATE` failed.
    Map(io::Error),
    /// `BPF_PROG_LOAD` failed; the verifier's log, if it wrote one.
    Load(io::Error, String),
    /// Another XDP program is attached in the mode we need (EBUSY) or in the other mode
    /// (EEXIST: native and generic XDP exclude each other).
    Busy(io::Error),
    /// The kernel refused to attach in this mode.
    Attach(XdpAttach, io::Error),
}

/// A loaded XDP program and its map, attached to one interface while this lives.
#[derive(Debug)]
pub(crate) struct XdpProgram {
    // Declared first: dropping it detaches the program before the program and map go.
    link: Option<OwnedFd>,
    prog: OwnedFd,
    map: OwnedFd,
}

impl XdpProgram {
    /// Creates an XSKMAP of `queues` entries and loads the program over it.
    pub(crate) fn load(queues: u32) -> Result<XdpProgram, ProgramError> {
        use std::os::fd::AsRawFd;
        let map = sys::xskmap_create(queues, MAP_NAME).map_err(ProgramError::Map)?;
        let insns = instructions(map.as_raw_fd());
        let prog = match sys::prog_load_xdp(&insns, LICENSE, PROGRAM_NAME, None) {
            Ok(p) => p,
            Err(first) => {
                // Again with the verifier's log, for the error.
                let mut log = vec![0u8; LOG_SIZE];
                let second = sys::prog_load_xdp(&insns, LICENSE, PROGRAM_NAME, Some(&mut log));
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
                return Err(ProgramError::Load(second.err().unwrap_or(first), text));
            }
        };
        Ok(XdpProgram {
            link: None,
            prog,
            map,
        })
    }

    /// Attaches the program to `ifindex` in mode `want` (Auto: driver mode, else the
    /// generic skb mode). Returns the mode obtained and, when Auto fell back, why driver
    /// mode was refused.
    pub(crate) fn attach(
        &mut self,
        ifindex: u32,
        want: XdpAttach,
    ) -> Result<(XdpAttach, Option<io::Error>), ProgramError> {
        let try_mode = |mode: XdpAttach| {
            let flags = match mode {
                XdpAttach::Skb => XDP_FLAGS_SKB_MODE,
                _ => XDP_FLAGS_DRV_MODE,
            };
            sys::link_create_xdp(self.prog.as_fd(), ifindex, flags).map_err(|e| {
                match e.raw_os_error() {
                    Some(libc::EBUSY | libc::EEXIST) => ProgramError::Busy(e),
                    _ => ProgramError::Attach(mode, e),
                }
            })
        };
        let (link, mode, refused) = match want {
            XdpAttach::Driver | XdpAttach::Skb => (try_mode(want)?, want, None),
            XdpAttach::Auto => match try_mode(XdpAttach::Driver) {
                Ok(l) => (l, XdpAttach::Driver, None),
                Err(ProgramError::Attach(_, e)) => {
                    (try_mode(XdpAttach::Skb)?, XdpAttach::Skb, Some(e))
                }
                Err(e) => return Err(e),
            },
        };
        self.link = Some(link);
        Ok((mode, refused))
    }

    /// Points the map's entry for `queue` at AF_XDP socket `sock` (bound to that queue).
    pub(crate) fn insert(&self, queue: u32, sock: BorrowedFd<'_>) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        sys::map_update_u32(self.map.as_fd(), queue, sock.as_raw_fd() as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_encodes_as_clang_would() {
        // What `llvm-objdump -d` shows for the C function in the module docs (map fd 0xfd):
        //   61 12 10 00 00 00 00 00   r2 = *(u32 *)(r1 + 0x10)
        //   18 11 00 00 fd 00 00 00   r1 = map_fd ll
        //   00 00 00 00 00 00 00 00
        //   b7 03 00 00 02 00 00 00   r3 = 0x2
        //   85 00 00 00 33 00 00 00   call 0x33
        //   95 00 00 00 00 00 00 00   exit
        let want: [[u8; 8]; 6] = [
            [0x61, 0x12, 0x10, 0, 0, 0, 0, 0],
            [0x18, 0x11, 0, 0, 0xfd, 0, 0, 0],
            [0; 8],
            [0xb7, 0x03, 0, 0, 0x02, 0, 0, 0],
            [0x85, 0, 0, 0, 0x33, 0, 0, 0],
            [0x95, 0, 0, 0, 0, 0, 0, 0],
        ];
        if cfg!(target_endian = "little") {
            let got: Vec<[u8; 8]> = instructions(0xfd).iter().map(|i| i.to_bytes()).collect();
            assert_eq!(got, want);
        }
    }
}
