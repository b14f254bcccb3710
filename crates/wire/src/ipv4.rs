//! IPv4 header view (RFC 791).

use crate::{Error, Result, checksum, get_u16, set_u16};

pub use core::net::Ipv4Addr;

/// The IPv4 protocol field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpProtocol {
    Icmp,
    Tcp,
    Udp,
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            x => IpProtocol::Unknown(x),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(v: IpProtocol) -> u8 {
        match v {
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Unknown(x) => x,
        }
    }
}

/// A view over an IPv4 header and what follows it.
#[derive(Debug)]
pub struct Ipv4<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4<T> {
    pub const MIN_HEADER_LEN: usize = 20;

    /// Wraps `buf`, checking version, IHL and that the header and total length fit.
    /// Checks the header only: version, header length (all of it present) and a total length
    /// that covers the header. The payload may be elsewhere (a buffer chain, an external
    /// segment); the caller compares `total_len` with what it has.
    pub fn new_header_checked(buf: T) -> Result<Self> {
        let b = buf.as_ref();
        if b.len() < Self::MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let v = Ipv4 { buf };
        if v.version() != 4 || v.header_len() < Self::MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if usize::from(v.total_len()) < v.header_len() {
            return Err(Error::Malformed);
        }
        if v.buf.as_ref().len() < v.header_len() {
            return Err(Error::Truncated);
        }
        Ok(v)
    }

    pub fn new_checked(buf: T) -> Result<Self> {
        let v = Self::new_header_checked(buf)?;
        if v.buf.as_ref().len() < usize::from(v.total_len()) {
            return Err(Error::Truncated);
        }
        Ok(v)
    }

    pub fn version(&self) -> u8 {
        self.buf.as_ref()[0] >> 4
    }

    pub fn header_len(&self) -> usize {
        usize::from(self.buf.as_ref()[0] & 0x0f) * 4
    }

    pub fn total_len(&self) -> u16 {
        get_u16(self.buf.as_ref(), 2)
    }

    pub fn ident(&self) -> u16 {
        get_u16(self.buf.as_ref(), 4)
    }

    /// More fragments follow this one (MF flag).
    pub fn more_frags(&self) -> bool {
        get_u16(self.buf.as_ref(), 6) & 0x2000 != 0
    }

    /// Don't fragment (DF flag).
    pub fn dont_frag(&self) -> bool {
        get_u16(self.buf.as_ref(), 6) & 0x4000 != 0
    }

    /// Where this fragment's data sits in the original datagram, in bytes: non-zero for every
    /// fragment but the first.
    pub fn frag_offset(&self) -> u16 {
        (get_u16(self.buf.as_ref(), 6) & 0x1fff) << 3
    }

    pub fn ttl(&self) -> u8 {
        self.buf.as_ref()[8]
    }

    pub fn protocol(&self) -> IpProtocol {
        self.buf.as_ref()[9].into()
    }

    pub fn header_checksum(&self) -> u16 {
        get_u16(self.buf.as_ref(), 10)
    }

    pub fn src(&self) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }

    pub fn dst(&self) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }

    /// True when the header checksum verifies.
    pub fn checksum_ok(&self) -> bool {
        checksum::checksum(&self.buf.as_ref()[..self.header_len()]) == 0
    }

    /// The bytes after the header, up to the total length.
    /// The payload bytes present in this buffer (all of them after `new_checked`; after
    /// `new_header_checked` the rest may live elsewhere).
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        &b[self.header_len()..usize::from(self.total_len()).min(b.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4<T> {
    /// Writes a 20-byte header with no options (DF set) and its checksum.
    pub fn emit(
        buf: T,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        ttl: u8,
        payload_len: usize,
    ) -> Result<Self> {
        let mut buf = buf;
        let total = Self::MIN_HEADER_LEN + payload_len;
        let total16 = u16::try_from(total).map_err(|_| Error::Malformed)?;
        let b = buf.as_mut();
        if b.len() < total {
            return Err(Error::Truncated);
        }
        b[0] = 0x45;
        b[1] = 0;
        set_u16(b, 2, total16);
        set_u16(b, 4, 0);
        set_u16(b, 6, 0x4000);
        b[8] = ttl;
        b[9] = protocol.into();
        set_u16(b, 10, 0);
        b[12..16].copy_from_slice(&src.octets());
        b[16..20].copy_from_slice(&dst.octets());
        let c = checksum::checksum(&b[..20]);
        set_u16(b, 10, c);
        Ok(Ipv4 { buf })
    }

    /// Decrements TTL and patches the checksum incrementally (RFC 1624).
    pub fn decrement_ttl(&mut self) {
        let b = self.buf.as_mut();
        let old = get_u16(b, 8);
        b[8] = b[8].wrapping_sub(1);
        let new = get_u16(b, 8);
        let c = checksum::update(get_u16(b, 10), old, new);
        set_u16(b, 10, c);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        let b = self.buf.as_mut();
        let t = t.min(b.len());
        &mut b[h..t]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_then_parse_matches_etherparse() {
        let mut b = [0u8; 28];
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 1, 2);
        Ipv4::emit(&mut b[..], src, dst, IpProtocol::Udp, 64, 8).unwrap();
        let v = Ipv4::new_checked(&b[..]).unwrap();
        assert!(v.checksum_ok());
        assert_eq!((v.src(), v.dst(), v.ttl()), (src, dst, 64));
        assert_eq!(v.protocol(), IpProtocol::Udp);
        let (h, _) = etherparse::Ipv4Header::from_slice(&b).unwrap();
        assert_eq!(h.header_checksum, v.header_checksum());
        assert_eq!(h.total_len, 28);
    }

    #[test]
    fn fragment_fields_match_etherparse() {
        for (offset_units, more) in [(0u16, false), (0, true), (185, true), (8191, false)] {
            let mut h = etherparse::Ipv4Header::new(
                0,
                64,
                etherparse::IpNumber::UDP,
                [10, 0, 0, 1],
                [10, 0, 0, 2],
            )
            .unwrap();
            h.more_fragments = more;
            h.fragment_offset = etherparse::IpFragOffset::try_new(offset_units).unwrap();
            h.dont_fragment = !more;
            let b = h.to_bytes();
            let v = Ipv4::new_checked(&b[..]).unwrap();
            assert_eq!(
                (v.frag_offset(), v.more_frags(), v.dont_frag()),
                (offset_units * 8, more, !more)
            );
        }
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut b = [0u8; 20];
        let mut v = Ipv4::emit(
            &mut b[..],
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::BROADCAST,
            IpProtocol::Icmp,
            1,
            0,
        )
        .unwrap();
        v.decrement_ttl();
        assert_eq!(v.ttl(), 0);
        assert!(v.checksum_ok());
    }

    #[test]
    fn rejects_bad_headers() {
        let mut b = [0u8; 20];
        Ipv4::emit(
            &mut b[..],
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::LOCALHOST,
            IpProtocol::Tcp,
            9,
            0,
        )
        .unwrap();
        let mut bad = b;
        bad[0] = 0x44; // IHL 4
        assert_eq!(Ipv4::new_checked(&bad[..]).unwrap_err(), Error::Malformed);
        let mut long = b;
        long[3] = 40; // total length beyond the buffer
        assert_eq!(Ipv4::new_checked(&long[..]).unwrap_err(), Error::Truncated);
        assert_eq!(Ipv4::new_checked(&b[..19]).unwrap_err(), Error::Truncated);
    }
}
