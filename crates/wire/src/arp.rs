//! ARP for IPv4 over Ethernet (RFC 826).

use core::net::Ipv4Addr;

use crate::{Error, MacAddr, Result, get_u16, set_u16};

/// The ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpOp {
    Request,
    Reply,
    Unknown(u16),
}

impl From<u16> for ArpOp {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOp::Request,
            2 => ArpOp::Reply,
            x => ArpOp::Unknown(x),
        }
    }
}

impl From<ArpOp> for u16 {
    fn from(v: ArpOp) -> u16 {
        match v {
            ArpOp::Request => 1,
            ArpOp::Reply => 2,
            ArpOp::Unknown(x) => x,
        }
    }
}

/// A view over an Ethernet/IPv4 ARP packet (28 bytes).
#[derive(Debug)]
pub struct Arp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Arp<T> {
    pub const LEN: usize = 28;

    /// Wraps `buf`, checking length and that it is Ethernet (htype 1, hlen 6) over IPv4
    /// (ptype 0x0800, plen 4): other ARP flavours are `Malformed` for us.
    pub fn new_checked(buf: T) -> Result<Self> {
        let b = buf.as_ref();
        if b.len() < Self::LEN {
            return Err(Error::Truncated);
        }
        if get_u16(b, 0) != 1 || get_u16(b, 2) != 0x0800 || b[4] != 6 || b[5] != 4 {
            return Err(Error::Malformed);
        }
        Ok(Arp { buf })
    }

    pub fn op(&self) -> ArpOp {
        get_u16(self.buf.as_ref(), 6).into()
    }

    fn mac(&self, at: usize) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buf.as_ref()[at..at + 6]);
        MacAddr(m)
    }

    fn ip(&self, at: usize) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
    }

    pub fn sender_mac(&self) -> MacAddr {
        self.mac(8)
    }

    pub fn sender_ip(&self) -> Ipv4Addr {
        self.ip(14)
    }

    pub fn target_mac(&self) -> MacAddr {
        self.mac(18)
    }

    pub fn target_ip(&self) -> Ipv4Addr {
        self.ip(24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Arp<T> {
    /// Writes a complete Ethernet/IPv4 ARP packet.
    pub fn emit(
        buf: T,
        op: ArpOp,
        sender: (MacAddr, Ipv4Addr),
        target: (MacAddr, Ipv4Addr),
    ) -> Result<Self> {
        let mut buf = buf;
        let b = buf.as_mut();
        if b.len() < Self::LEN {
            return Err(Error::Truncated);
        }
        set_u16(b, 0, 1);
        set_u16(b, 2, 0x0800);
        b[4] = 6;
        b[5] = 4;
        set_u16(b, 6, op.into());
        b[8..14].copy_from_slice(&sender.0.0);
        b[14..18].copy_from_slice(&sender.1.octets());
        b[18..24].copy_from_slice(&target.0.0);
        b[24..28].copy_from_slice(&target.1.octets());
        Ok(Arp { buf })
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
