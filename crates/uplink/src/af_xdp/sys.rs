//! The `bpf(2)` commands an AF_XDP uplink needs, none of which `rustix` or `libc` wrap:
//! creating the XSKMAP, loading the XDP program, attaching it through a BPF link, and putting
//! a socket into the map. Each passes the kernel one `union bpf_attr` member, written here as
//! an exact `repr(C)` struct without padding (so no byte the kernel reads is uninitialised)
//! and given to the kernel with its own size: the kernel zero-fills the rest of its
//! `bpf_attr`. The layouts are the ones in the kernel's `include/uapi/linux/bpf.h`.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::program::Insn;

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;

/// The attr of a command, sent to the kernel whole.
///
/// # Safety
///
/// Implementors are `repr(C)` structs of integers (pointers carried as `u64`) without
/// padding, laid out as the kernel's member of `union bpf_attr` for that command.
unsafe trait Attr {}

/// `BPF_MAP_CREATE`'s attr, up to `map_name`.
#[repr(C)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}
const _: () = assert!(size_of::<MapCreate>() == 44);
// SAFETY: seven u32 and a byte array: 44 bytes, no padding (asserted).
unsafe impl Attr for MapCreate {}

/// `BPF_MAP_UPDATE_ELEM`'s attr.
#[repr(C)]
struct MapUpdate {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}
const _: () = assert!(size_of::<MapUpdate>() == 32);
// SAFETY: the explicit `_pad` stands where C aligns `key` to 8: no implicit padding.
unsafe impl Attr for MapUpdate {}

/// `BPF_PROG_LOAD`'s attr, up to `expected_attach_type`.
#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}
const _: () = assert!(size_of::<ProgLoad>() == 72);
// SAFETY: fields in C order, each at its natural alignment with no gap (72 bytes, asserted).
unsafe impl Attr for ProgLoad {}

/// `BPF_LINK_CREATE`'s attr, up to `flags` (an XDP link needs nothing after it).
#[repr(C)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}
// SAFETY: four u32.
unsafe impl Attr for LinkCreate {}

/// `bpf(cmd, attr, sizeof attr)`: the command's non-negative result.
fn bpf<A: Attr>(cmd: libc::c_int, attr: &mut A) -> io::Result<libc::c_int> {
    // SAFETY: `attr` is a live, fully initialised `A` (no padding, `Attr`) and the size passed
    // is exactly its size; the kernel copies that many bytes in (and for no command used here
    // writes any back). Any pointer it carries is the caller's promise, stated where it is
    // built.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut A).cast::<libc::c_void>(),
            size_of::<A>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as libc::c_int)
    }
}

/// Takes ownership of a descriptor a `bpf` command returned.
fn owned(fd: libc::c_int) -> OwnedFd {
    // SAFETY: the kernel just created this descriptor for us (MAP_CREATE, PROG_LOAD and
    // LINK_CREATE return a new fd, with O_CLOEXEC); nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn name16(name: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    // BPF object names: up to 15 bytes of [A-Za-z0-9_.], NUL-terminated.
    for (d, s) in n.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    n
}

/// Creates an XSKMAP (u32 queue id to AF_XDP socket) of `max_entries` entries.
pub(crate) fn xskmap_create(max_entries: u32, name: &str) -> io::Result<OwnedFd> {
    let mut attr = MapCreate {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries,
        map_flags: 0,
        inner_map_fd: 0,
        numa_node: 0,
        map_name: name16(name),
    };
    bpf(BPF_MAP_CREATE, &mut attr).map(owned)
}

/// Sets `map[key] = value` for a map of u32 keys and u32 values (an XSKMAP takes a socket
/// fd as the value).
pub(crate) fn map_update_u32(map: BorrowedFd<'_>, key: u32, value: u32) -> io::Result<()> {
    let mut attr = MapUpdate {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        // Pointers to `key` and `value`, which live until `bpf` returns; the kernel reads
        // key_size (4) and value_size (4) bytes from them.
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        flags: 0,
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Loads an XDP program. With `log`, the verifier writes its log there (level 1).
pub(crate) fn prog_load_xdp(
    insns: &[Insn],
    license: &CStr,
    name: &str,
    log: Option<&mut [u8]>,
) -> io::Result<OwnedFd> {
    let (log_level, log_size, log_buf) = match log {
        Some(buf) => (1, buf.len() as u32, buf.as_mut_ptr() as u64),
        None => (0, 0, 0),
    };
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        // `insns` (insn_cnt 8-byte instructions), `license` (NUL-terminated) and the log
        // buffer (log_size bytes, the only one the kernel writes) all outlive the call.
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name16(name),
        prog_ifindex: 0,
        expected_attach_type: BPF_XDP,
    };
    bpf(BPF_PROG_LOAD, &mut attr).map(owned)
}

/// Attaches XDP program `prog` to interface `ifindex` (of the calling thread's network
/// namespace) through a BPF link: the program stays attached while the returned fd is open.
/// `flags` is one `XDP_FLAGS_*_MODE`.
pub(crate) fn link_create_xdp(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let mut attr = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    bpf(BPF_LINK_CREATE, &mut attr).map(owned)
}
