//! A packet socket without rings: one system call per frame (or per `sendmmsg` batch). The
//! slow, simple path, for probes and tests and as the baseline the rate example compares the
//! rings against.

use std::io;
use std::io::IoSlice;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::net::{RecvFlags, SendAncillaryBuffer, SendFlags};

use super::{ETH_P_ALL, sys};

/// An AF_PACKET socket bound to one interface for every protocol, ignoring its own
/// interface's outgoing frames.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// Opens a socket on interface `ifindex` (of the calling thread's namespace).
    pub fn open(ifindex: u32) -> io::Result<PacketSocket> {
        let fd = super::packet_socket()?;
        sys::set_int(
            fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            1,
        )?;
        sys::bind(fd.as_fd(), ifindex, ETH_P_ALL)?;
        Ok(PacketSocket { fd })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Sets the receive buffer (root may exceed `rmem_max`), so that a slow reader loses
    /// fewer frames.
    pub fn set_recv_buffer(&self, bytes: usize) -> io::Result<()> {
        use rustix::net::sockopt::{
            set_socket_recv_buffer_size, set_socket_recv_buffer_size_force,
        };
        set_socket_recv_buffer_size_force(&self.fd, bytes)
            .or_else(|_| set_socket_recv_buffer_size(&self.fd, bytes))?;
        Ok(())
    }

    /// Sends one whole Ethernet frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        rustix::net::send(&self.fd, frame, SendFlags::empty())?;
        Ok(())
    }

    /// Sends frames with one `sendmmsg`; returns how many the kernel took (it may block
    /// while the socket's send buffer is full).
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let iovs: Vec<[IoSlice<'_>; 1]> = frames.iter().map(|f| [IoSlice::new(f)]).collect();
        let mut controls: Vec<SendAncillaryBuffer<'_, '_, '_>> = frames
            .iter()
            .map(|_| SendAncillaryBuffer::default())
            .collect();
        let mut msgs: Vec<rustix::net::MMsgHdr<'_>> = iovs
            .iter()
            .zip(controls.iter_mut())
            .map(|(iov, c)| rustix::net::MMsgHdr::new(iov, c))
            .collect();
        Ok(rustix::net::sendmmsg(
            &self.fd,
            &mut msgs,
            SendFlags::empty(),
        )?)
    }

    /// Receives one frame into `buf` without waiting; returns its length on the wire (more
    /// than `buf.len()` if it was cut), or `None` when nothing is queued.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match rustix::net::recv(&self.fd, buf, RecvFlags::DONTWAIT | RecvFlags::TRUNC) {
            Ok((_, len)) => Ok(Some(len)),
            Err(rustix::io::Errno::AGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits up to `timeout` for a frame; true if one is queued.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut fds = [rustix::event::PollFd::new(
            &self.fd,
            rustix::event::PollFlags::IN,
        )];
        let ts = rustix::event::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        rustix::event::poll(&mut fds, Some(&ts)).is_ok_and(|n| n > 0)
    }
}
