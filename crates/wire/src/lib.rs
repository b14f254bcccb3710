//! Packet bytes, and nothing else.
//!
//! `wire` is the one place in veclane that knows where a header's fields sit. For each header it
//! handles (Ethernet II, ARP for IPv4 over Ethernet, IPv4, ICMPv4, UDP, TCP, VXLAN) it owns:
//!
//! - the layout: a `field` module of byte ranges and indices, the only literal offsets in the
//!   project;
//! - a view (`Ethernet`, `Arp`, `Ipv4`, `Icmp`, `Udp`, `Tcp`, `Vxlan`) that borrows the
//!   caller's buffer, with `new_unchecked` (no check; accessors may panic on a short buffer),
//!   `check_len` and `new_checked` (both), and `#[inline]` getters and setters that read and
//!   write through the `field` constants: a node's fast path uses the view and compiles to the
//!   same loads and stores as hand-written offsets;
//! - a `Repr` (`EthernetRepr`, `ArpRepr`, `Ipv4Repr`, `Icmpv4Repr`, `UdpRepr`, `TcpRepr`,
//!   `VxlanRepr`): the header as plain values, with `parse` (which verifies the checksums the
//!   header carries) and `emit` (which fills them in);
//! - the Internet checksum, including the RFC 1624 incremental update (`checksum`);
//! - TCP segmentation offload's super-frames and the segments they are cut into (`tso`).
//!
//! It never does I/O, never allocates and never keeps a buffer beyond the view that borrows it.
//! Protocol numbers it does not know are kept as `Unknown(raw)` so that a caller can count them
//! instead of guessing.

#![forbid(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod ipv4;
pub mod tcp;
pub mod tso;
pub mod udp;
pub mod vxlan;

pub use arp::{Arp, ArpOp, ArpRepr};
pub use ethernet::{EtherType, Ethernet, EthernetRepr, MacAddr};
pub use icmp::{Icmp, IcmpType, Icmpv4Repr};
pub use ipv4::{IpProtocol, Ipv4, Ipv4Addr, Ipv4Repr};
pub use tcp::{Tcp, TcpRepr};
pub use udp::{Udp, UdpRepr};
pub use vxlan::{Vxlan, VxlanRepr};

/// A field of a header: the byte range it occupies, from the start of that header.
pub type Field = core::ops::Range<usize>;

/// Everything from a byte offset to the end of the buffer (a payload or body).
pub type Rest = core::ops::RangeFrom<usize>;

/// Why a view could not be made over a buffer, or a `Repr` parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header says it must be.
    Truncated,
    /// A field holds a value the header's rules forbid (IPv4 IHL < 5, version != 4, ...), or a
    /// `Repr` holds one that the header cannot carry.
    Malformed,
    /// A checksum the header carries does not verify.
    Checksum,
    /// A well-formed header that a `Repr` does not represent (IPv4 options, an ICMP type other
    /// than echo, destination unreachable and time exceeded).
    Unsupported,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("buffer shorter than the header"),
            Error::Malformed => f.write_str("header field out of range"),
            Error::Checksum => f.write_str("checksum does not verify"),
            Error::Unsupported => f.write_str("header not supported"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = core::result::Result<T, Error>;

/// The big-endian 16-bit word at `f` (a two-byte field).
#[inline(always)]
pub(crate) fn read_u16(b: &[u8], f: Field) -> u16 {
    let mut w = [0u8; 2];
    w.copy_from_slice(&b[f]);
    u16::from_be_bytes(w)
}

/// Stores `v` big-endian at `f` (a two-byte field).
#[inline(always)]
pub(crate) fn write_u16(b: &mut [u8], f: Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// The four bytes at `f` (an IPv4 address field).
#[inline(always)]
pub(crate) fn read_4(b: &[u8], f: Field) -> [u8; 4] {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[f]);
    a
}

/// The six bytes at `f` (a MAC address field).
#[inline(always)]
pub(crate) fn read_6(b: &[u8], f: Field) -> [u8; 6] {
    let mut a = [0u8; 6];
    a.copy_from_slice(&b[f]);
    a
}
