//! UDP header view (RFC 768).

use crate::{Error, Result, checksum, get_u16, set_u16};
use core::net::Ipv4Addr;

/// A view over a UDP header and its payload.
#[derive(Debug)]
pub struct Udp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Udp<T> {
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buf`, checking that the header and the length it states fit.
    pub fn new_checked(buf: T) -> Result<Self> {
        let b = buf.as_ref();
        if b.len() < Self::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(get_u16(b, 4));
        if len < Self::HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < len {
            return Err(Error::Truncated);
        }
        Ok(Udp { buf })
    }

    pub fn src_port(&self) -> u16 {
        get_u16(self.buf.as_ref(), 0)
    }

    pub fn dst_port(&self) -> u16 {
        get_u16(self.buf.as_ref(), 2)
    }

    pub fn len(&self) -> u16 {
        get_u16(self.buf.as_ref(), 4)
    }

    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) == Self::HEADER_LEN
    }

    pub fn checksum(&self) -> u16 {
        get_u16(self.buf.as_ref(), 6)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[Self::HEADER_LEN..usize::from(self.len())]
    }

    /// Verifies the checksum over the IPv4 pseudo-header; a zero checksum means "none".
    pub fn checksum_ok(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0
            || pseudo_sum(&self.buf.as_ref()[..usize::from(self.len())], src, dst) == 0
    }
}

fn pseudo_sum(seg: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
    let mut acc = checksum::accumulate(0, &src.octets());
    acc = checksum::accumulate(acc, &dst.octets());
    acc += 17 + seg.len() as u32;
    !checksum::fold(checksum::accumulate(acc, seg))
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Udp<T> {
    /// Writes the header for `payload_len` bytes of payload (already in place or written later).
    pub fn emit(buf: T, src_port: u16, dst_port: u16, payload_len: usize) -> Result<Self> {
        let mut buf = buf;
        let len = Self::HEADER_LEN + payload_len;
        let len16 = u16::try_from(len).map_err(|_| Error::Malformed)?;
        let b = buf.as_mut();
        if b.len() < len {
            return Err(Error::Truncated);
        }
        set_u16(b, 0, src_port);
        set_u16(b, 2, dst_port);
        set_u16(b, 4, len16);
        set_u16(b, 6, 0);
        Ok(Udp { buf })
    }

    /// Computes and stores the checksum over the IPv4 pseudo-header.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let len = usize::from(self.len());
        let b = self.buf.as_mut();
        set_u16(b, 6, 0);
        let mut c = pseudo_sum(&b[..len], src, dst);
        if c == 0 {
            c = 0xffff;
        }
        set_u16(b, 6, c);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buf.as_mut()[Self::HEADER_LEN..len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_agrees_with_etherparse() {
        let src = Ipv4Addr::new(192, 0, 2, 1);
        let dst = Ipv4Addr::new(198, 51, 100, 7);
        let mut b = [0u8; 13];
        let mut u = Udp::emit(&mut b[..], 1234, 4321, 5).unwrap();
        u.payload_mut().copy_from_slice(b"hello");
        u.fill_checksum(src, dst);
        assert!(u.checksum_ok(src, dst));
        let ours = u.checksum();
        let h = etherparse::UdpHeader::with_ipv4_checksum(
            1234,
            4321,
            &etherparse::Ipv4Header::new(
                5 + 8,
                64,
                etherparse::IpNumber::UDP,
                src.octets(),
                dst.octets(),
            )
            .unwrap(),
            b"hello",
        )
        .unwrap();
        assert_eq!(h.checksum, ours);
        b[12] ^= 1;
        assert!(!Udp::new_checked(&b[..]).unwrap().checksum_ok(src, dst));
    }

    #[test]
    fn rejects_short_and_lying_lengths() {
        assert_eq!(
            Udp::new_checked(&[0u8; 7][..]).unwrap_err(),
            Error::Truncated
        );
        let mut b = [0u8; 8];
        b[5] = 4;
        assert_eq!(Udp::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[5] = 9;
        assert_eq!(Udp::new_checked(&b[..]).unwrap_err(), Error::Truncated);
    }
}
