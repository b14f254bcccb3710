//! The AF_PACKET system calls `rustix` does not wrap: socket options whose values are C
//! structs, `bind` and `getsockname` with a `sockaddr_ll`, and the interface ioctls for the
//! MTU and hardware address. Every `unsafe` block of the crate outside the ring mapping
//! ([`super::ring`]) is here, each over a value whose size the call is given exactly.

#![allow(unsafe_code)]

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};

/// A value a socket option may carry in either direction.
///
/// # Safety
///
/// Implementors are integers or `repr(C)` structs of integers: no pointers, no padding the
/// kernel could mistake for a field, and every bit pattern valid (the kernel may write any
/// bytes into one).
pub(crate) unsafe trait OptVal: Copy {}
// SAFETY: a C integer.
unsafe impl OptVal for libc::c_int {}
// SAFETY: `struct tpacket_req`: four `unsigned int`.
unsafe impl OptVal for libc::tpacket_req {}
// SAFETY: `struct tpacket_req3`: seven `unsigned int`.
unsafe impl OptVal for libc::tpacket_req3 {}
// SAFETY: `struct packet_mreq`: an int, two shorts and a byte array, no padding.
unsafe impl OptVal for libc::packet_mreq {}
// SAFETY: `struct tpacket_stats`: two `unsigned int`.
unsafe impl OptVal for libc::tpacket_stats {}
// SAFETY: `struct tpacket_stats_v3`: three `unsigned int`.
unsafe impl OptVal for libc::tpacket_stats_v3 {}

/// `setsockopt(fd, level, name, &v, sizeof v)`.
pub(crate) fn set_opt<T: OptVal>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    v: &T,
) -> io::Result<()> {
    // SAFETY: `v` is a live `T` and the length passed is exactly its size; the kernel only
    // reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt` into a `T`; fails unless the kernel filled all of it.
pub(crate) fn get_opt<T: OptVal>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<T> {
    let mut v = std::mem::MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`, which has exactly that size.
    let r =
        unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, v.as_mut_ptr().cast(), &mut len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != size_of::<T>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "getsockopt({name}) returned {len} bytes, expected {}",
                size_of::<T>()
            ),
        ));
    }
    // SAFETY: zero-initialised, then written by the kernel; every bit pattern of an `OptVal`
    // is a valid value.
    Ok(unsafe { v.assume_init() })
}

pub(crate) fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    set_opt(fd, level, name, &v)
}

fn sockaddr_ll(ifindex: i32, protocol_be: u16) -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol_be,
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}

/// Binds a packet socket to interface `ifindex` for ethertype `protocol` (host order; 0
/// receives nothing, which is what a transmit-only socket wants).
pub(crate) fn bind(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    let ifindex = i32::try_from(ifindex).map_err(|_| io::ErrorKind::InvalidInput)?;
    let sll = sockaddr_ll(ifindex, protocol.to_be());
    // SAFETY: `sll` is a complete `sockaddr_ll` and the length given is its size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The interface index a packet socket is bound to: -1 once that interface was unregistered
/// (`packet_notifier` resets it), which is how we tell "vanished" from "down".
pub(crate) fn bound_ifindex(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut sll = sockaddr_ll(0, 0);
    let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `sll`, which has exactly that size.
    let r = unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut sll as *mut libc::sockaddr_ll).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(sll.sll_ifindex)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: `ifreq` is a C struct of integers, arrays and a union of such (one member is a
    // pointer, for which all-zero is null): the all-zero value is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() || name.bytes().any(|b| b == 0) {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn ioctl(fd: BorrowedFd<'_>, op: libc::Ioctl, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: SIOCGIFMTU and SIOCGIFHWADDR read `ifr_name` (NUL-terminated by `ifreq`) and
    // write into `ifr_ifru`, both inside `*req`, which lives across the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), op, req as *mut libc::ifreq) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The interface's MTU (`SIOCGIFMTU`).
pub(crate) fn mtu(fd: BorrowedFd<'_>, name: &str) -> io::Result<u32> {
    let mut req = ifreq(name)?;
    ioctl(fd, libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote the `ifru_mtu` member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| io::ErrorKind::InvalidData.into())
}

/// The interface's link type (`ARPHRD_*`) and hardware address (`SIOCGIFHWADDR`).
pub(crate) fn hwaddr(fd: BorrowedFd<'_>, name: &str) -> io::Result<(u16, [u8; 6])> {
    let mut req = ifreq(name)?;
    ioctl(fd, libc::SIOCGIFHWADDR, &mut req)?;
    // SAFETY: SIOCGIFHWADDR succeeded, so the kernel wrote the `ifru_hwaddr` member.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data) {
        *d = s as u8;
    }
    Ok((sa.sa_family, mac))
}
