//! Packet bytes, and nothing else.
//!
//! `wire` owns typed views over header bytes (`Ethernet`, `Arp`, `Ipv4`, `Icmp`, `Udp`) with checked
//! constructors, typed getters and setters, and the Internet checksum including the RFC 1624
//! incremental update. It performs no I/O and never allocates; a view borrows the caller's
//! buffer. Protocol numbers it does not know are kept as `Unknown(raw)` so that a caller can
//! count them instead of guessing.

#![forbid(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod ipv4;
pub mod udp;

pub use arp::{Arp, ArpOp};
pub use ethernet::{EtherType, Ethernet, MacAddr};
pub use icmp::{Icmp, IcmpType};
pub use ipv4::{IpProtocol, Ipv4, Ipv4Addr};
pub use udp::Udp;

/// Why a view could not be made over a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header says it must be.
    Truncated,
    /// A field holds a value the header's rules forbid (IPv4 IHL < 5, version != 4, ...).
    Malformed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("buffer shorter than the header"),
            Error::Malformed => f.write_str("header field out of range"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = core::result::Result<T, Error>;

#[inline]
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
