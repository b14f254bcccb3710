//! ARP for IPv4 over Ethernet (RFC 826).

use core::net::Ipv4Addr;

use crate::{Error, MacAddr, Result, read_4, read_6, read_u16, write_u16};

/// The ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOp {
    Request,
    Reply,
    Unknown(u16),
}

impl ArpOp {
    /// The operation for its on-the-wire value.
    #[inline]
    pub const fn from_raw(v: u16) -> Self {
        match v {
            1 => ArpOp::Request,
            2 => ArpOp::Reply,
            x => ArpOp::Unknown(x),
        }
    }

    /// The on-the-wire value.
    #[inline]
    pub const fn to_raw(self) -> u16 {
        match self {
            ArpOp::Request => 1,
            ArpOp::Reply => 2,
            ArpOp::Unknown(x) => x,
        }
    }
}

impl From<u16> for ArpOp {
    #[inline]
    fn from(v: u16) -> Self {
        ArpOp::from_raw(v)
    }
}

impl From<ArpOp> for u16 {
    #[inline]
    fn from(v: ArpOp) -> u16 {
        v.to_raw()
    }
}

/// Byte layout of an Ethernet/IPv4 ARP packet (the only flavour veclane speaks, so the address
/// fields sit at fixed offsets).
pub mod field {
    use crate::Field;

    /// Hardware type (1: Ethernet).
    pub const HTYPE: Field = 0..2;
    /// Protocol type (0x0800: IPv4).
    pub const PTYPE: Field = 2..4;
    /// Hardware address length (6).
    pub const HLEN: usize = 4;
    /// Protocol address length (4).
    pub const PLEN: usize = 5;
    /// Operation.
    pub const OPER: Field = 6..8;
    /// Sender hardware address.
    pub const SHA: Field = 8..14;
    /// Sender protocol address.
    pub const SPA: Field = 14..18;
    /// Target hardware address.
    pub const THA: Field = 18..24;
    /// Target protocol address.
    pub const TPA: Field = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const LEN: usize = field::TPA.end;

/// Hardware type Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;
/// Protocol type IPv4 (its EtherType).
pub const PTYPE_IPV4: u16 = 0x0800;

/// A view over an Ethernet/IPv4 ARP packet (28 bytes).
#[derive(Debug)]
pub struct Arp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Arp<T> {
    pub const LEN: usize = LEN;

    /// Wraps `buf` without checking it. Every accessor panics if `buf` is shorter than
    /// [`LEN`], and the address getters mean nothing unless the packet is Ethernet/IPv4.
    #[inline]
    pub const fn new_unchecked(buf: T) -> Self {
        Arp { buf }
    }

    /// Wraps `buf` after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self> {
        let v = Self::new_unchecked(buf);
        v.check_len()?;
        Ok(v)
    }

    /// `Truncated` if the buffer is shorter than [`LEN`]; `Malformed` unless the packet is
    /// Ethernet (htype 1, hlen 6) over IPv4 (ptype 0x0800, plen 4): other ARP flavours put the
    /// addresses elsewhere, and are not ours.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buf.as_ref().len() < LEN {
            return Err(Error::Truncated);
        }
        if self.htype() != HTYPE_ETHERNET
            || self.ptype() != PTYPE_IPV4
            || self.hlen() != 6
            || self.plen() != 4
        {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buf
    }

    #[inline]
    pub fn htype(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::HTYPE)
    }

    #[inline]
    pub fn ptype(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::PTYPE)
    }

    #[inline]
    pub fn hlen(&self) -> u8 {
        self.buf.as_ref()[field::HLEN]
    }

    #[inline]
    pub fn plen(&self) -> u8 {
        self.buf.as_ref()[field::PLEN]
    }

    /// The operation as it is (1 request, 2 reply).
    #[inline]
    pub fn op_raw(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::OPER)
    }

    #[inline]
    pub fn op(&self) -> ArpOp {
        ArpOp::from_raw(self.op_raw())
    }

    #[inline]
    pub fn sender_mac(&self) -> MacAddr {
        MacAddr(read_6(self.buf.as_ref(), field::SHA))
    }

    #[inline]
    pub fn sender_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_4(self.buf.as_ref(), field::SPA))
    }

    #[inline]
    pub fn target_mac(&self) -> MacAddr {
        MacAddr(read_6(self.buf.as_ref(), field::THA))
    }

    #[inline]
    pub fn target_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_4(self.buf.as_ref(), field::TPA))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Arp<T> {
    /// Writes a complete Ethernet/IPv4 ARP packet; `Truncated` (nothing written) if `buf` is
    /// shorter than [`LEN`]. [`ArpRepr::emit`] is the same from values.
    pub fn emit(
        buf: T,
        op: ArpOp,
        sender: (MacAddr, Ipv4Addr),
        target: (MacAddr, Ipv4Addr),
    ) -> Result<Self> {
        let mut v = Arp::new_unchecked(buf);
        let repr = ArpRepr {
            op,
            sender_mac: sender.0,
            sender_ip: sender.1,
            target_mac: target.0,
            target_ip: target.1,
        };
        repr.emit(&mut v)?;
        Ok(v)
    }

    /// Writes the fixed part for Ethernet/IPv4: htype, ptype, hlen, plen.
    #[inline]
    pub fn set_ethernet_ipv4(&mut self) {
        let b = self.buf.as_mut();
        write_u16(b, field::HTYPE, HTYPE_ETHERNET);
        write_u16(b, field::PTYPE, PTYPE_IPV4);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
    }

    #[inline]
    pub fn set_op(&mut self, op: ArpOp) {
        write_u16(self.buf.as_mut(), field::OPER, op.to_raw());
    }

    #[inline]
    pub fn set_sender_mac(&mut self, m: MacAddr) {
        self.buf.as_mut()[field::SHA].copy_from_slice(&m.0);
    }

    #[inline]
    pub fn set_sender_ip(&mut self, a: Ipv4Addr) {
        self.buf.as_mut()[field::SPA].copy_from_slice(&a.octets());
    }

    #[inline]
    pub fn set_target_mac(&mut self, m: MacAddr) {
        self.buf.as_mut()[field::THA].copy_from_slice(&m.0);
    }

    #[inline]
    pub fn set_target_ip(&mut self, a: Ipv4Addr) {
        self.buf.as_mut()[field::TPA].copy_from_slice(&a.octets());
    }
}

/// An Ethernet/IPv4 ARP packet as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Any operation: `Unknown` ones are kept as they are.
    pub op: ArpOp,
    pub sender_mac: MacAddr,
    pub sender_ip: Ipv4Addr,
    pub target_mac: MacAddr,
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// Reads the packet: the errors of [`Arp::check_len`] (ARP has no checksum).
    pub fn parse<T: AsRef<[u8]>>(v: &Arp<T>) -> Result<Self> {
        v.check_len()?;
        Ok(ArpRepr {
            op: v.op(),
            sender_mac: v.sender_mac(),
            sender_ip: v.sender_ip(),
            target_mac: v.target_mac(),
            target_ip: v.target_ip(),
        })
    }

    /// The packet is all header: [`LEN`].
    #[inline]
    pub const fn header_len(&self) -> usize {
        LEN
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the whole packet over the first [`LEN`] bytes; `Truncated` (nothing written) if
    /// the view is shorter.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Arp<T>) -> Result<()> {
        if v.buf.as_ref().len() < LEN {
            return Err(Error::Truncated);
        }
        v.set_ethernet_ipv4();
        v.set_op(self.op);
        v.set_sender_mac(self.sender_mac);
        v.set_sender_ip(self.sender_ip);
        v.set_target_mac(self.target_mac);
        v.set_target_ip(self.target_ip);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips_and_matches_etherparse() {
        let me = (MacAddr([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(10, 0, 0, 1));
        let them = (MacAddr([0; 6]), Ipv4Addr::new(10, 0, 0, 2));
        let mut b = [0u8; 28];
        Arp::emit(&mut b[..], ArpOp::Request, me, them).unwrap();
        let a = Arp::new_checked(&b[..]).unwrap();
        assert_eq!(
            (a.op(), a.sender_mac(), a.sender_ip(), a.target_ip()),
            (ArpOp::Request, me.0, me.1, them.1)
        );
        let p = etherparse::ArpPacket::from_slice(&b).unwrap();
        assert_eq!(p.operation, etherparse::ArpOperation::REQUEST);
        assert_eq!(p.sender_protocol_addr(), &me.1.octets());
        assert_eq!(p.target_protocol_addr(), &them.1.octets());
    }

    #[test]
    fn other_flavours_and_short_buffers_are_refused() {
        let mut b = [0u8; 28];
        Arp::emit(
            &mut b[..],
            ArpOp::Reply,
            (MacAddr([1; 6]), Ipv4Addr::LOCALHOST),
            (MacAddr([2; 6]), Ipv4Addr::LOCALHOST),
        )
        .unwrap();
        assert_eq!(Arp::new_checked(&b[..27]).unwrap_err(), Error::Truncated);
        let mut ipv6 = b;
        ipv6[2..4].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(Arp::new_checked(&ipv6[..]).unwrap_err(), Error::Malformed);
        let mut odd = b;
        odd[7] = 9;
        assert_eq!(Arp::new_checked(&odd[..]).unwrap().op(), ArpOp::Unknown(9));
    }
}
