//! The tun/tap ioctls `rustix` does not wrap (`TUNSETIFF`, `TUNSETVNETHDRSZ`,
//! `TUNSETOFFLOAD`) and the interface ioctls a tap is set up with (flags, MTU, hardware
//! address, index). Every `unsafe` block of the tap is here, each over a value whose size the
//! kernel knows from the request number.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: `ifreq` is a C struct of integers, arrays and a union of such (one member is a
    // pointer, for which all-zero is null): the all-zero value is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.is_empty() || name.len() >= req.ifr_name.len() || name.bytes().any(|b| b == 0) {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `ioctl(fd, op, &mut req)` for the requests that take a `struct ifreq`.
fn ioctl_ifreq(fd: BorrowedFd<'_>, op: libc::Ioctl, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every request passed here (TUNSETIFF, SIOC[GS]IFFLAGS, SIOCSIFMTU,
    // SIOC[GS]IFHWADDR, SIOCGIFINDEX) reads `ifr_name` (NUL-terminated by `ifreq`) and reads
    // or writes one member of `ifr_ifru`, all inside `*req`, which lives across the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), op, req as *mut libc::ifreq) })
}

/// Attaches the tun fd to device `name` with `flags` (`IFF_TAP | ...`), creating it in the
/// namespace the fd was opened in if it does not exist. Returns the device's name.
pub(crate) fn tun_set_iff(fd: BorrowedFd<'_>, name: &str, flags: libc::c_int) -> io::Result<()> {
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    ioctl_ifreq(fd, libc::TUNSETIFF, &mut req)
}

/// The virtio-net header's size in front of every frame (`TUNSETVNETHDRSZ`).
pub(crate) fn tun_set_vnet_hdr_size(fd: BorrowedFd<'_>, size: libc::c_int) -> io::Result<()> {
    // SAFETY: TUNSETVNETHDRSZ reads one `int` through the pointer; `size` lives across the
    // call.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETVNETHDRSZ,
            &size as *const libc::c_int,
        )
    })
}

/// The offloads the device announces to the stack that sends into it (`TUN_F_*`).
pub(crate) fn tun_set_offload(fd: BorrowedFd<'_>, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned long of flags), no
    // memory is passed.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            libc::c_ulong::from(flags),
        )
    })
}

/// Sets `IFF_UP` on interface `name` (through any socket of its namespace).
pub(crate) fn set_up(sock: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(sock, libc::SIOCGIFFLAGS, &mut req)?;
    // SAFETY: SIOCGIFFLAGS succeeded, so the kernel wrote the `ifru_flags` member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    ioctl_ifreq(sock, libc::SIOCSIFFLAGS, &mut req)
}

pub(crate) fn set_mtu(sock: BorrowedFd<'_>, name: &str, mtu: u16) -> io::Result<()> {
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu = libc::c_int::from(mtu);
    ioctl_ifreq(sock, libc::SIOCSIFMTU, &mut req)
}

pub(crate) fn mtu(sock: BorrowedFd<'_>, name: &str) -> io::Result<u16> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(sock, libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote the `ifru_mtu` member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    u16::try_from(mtu).map_err(|_| io::ErrorKind::InvalidData.into())
}

pub(crate) fn hwaddr(sock: BorrowedFd<'_>, name: &str) -> io::Result<[u8; 6]> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(sock, libc::SIOCGIFHWADDR, &mut req)?;
    // SAFETY: SIOCGIFHWADDR succeeded, so the kernel wrote the `ifru_hwaddr` member.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data) {
        *d = s as u8;
    }
    Ok(mac)
}

pub(crate) fn set_hwaddr(sock: BorrowedFd<'_>, name: &str, mac: [u8; 6]) -> io::Result<()> {
    let mut req = ifreq(name)?;
    let mut sa = libc::sockaddr {
        sa_family: libc::ARPHRD_ETHER,
        sa_data: [0; 14],
    };
    for (d, s) in sa.sa_data.iter_mut().zip(mac) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_hwaddr = sa;
    ioctl_ifreq(sock, libc::SIOCSIFHWADDR, &mut req)
}

/// Interface `name`'s index in the socket's namespace; `NotFound` if there is none.
pub(crate) fn ifindex(sock: BorrowedFd<'_>, name: &str) -> io::Result<u32> {
    let mut req = ifreq(name)?;
    match ioctl_ifreq(sock, libc::SIOCGIFINDEX, &mut req) {
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Err(io::ErrorKind::NotFound.into()),
        Err(e) => Err(e),
        // SAFETY: SIOCGIFINDEX succeeded, so the kernel wrote the `ifru_ifindex` member.
        Ok(()) => Ok(unsafe { req.ifr_ifru.ifru_ifindex } as u32),
    }
}
