//! UDP header view (RFC 768).

use crate::ipv4::IpProtocol;
use crate::{Error, Result, checksum, read_u16, write_u16};
use core::net::Ipv4Addr;

/// Byte layout of the UDP header.
pub mod field {
    use crate::{Field, Rest};

    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    /// Header and payload, in bytes.
    pub const LENGTH: Field = 4..6;
    /// Over the IPv4 pseudo-header, header and payload; zero means "none" (IPv4 only).
    pub const CHECKSUM: Field = 6..8;
    pub const PAYLOAD: Rest = 8..;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view over a UDP header and its payload.
#[derive(Debug)]
pub struct Udp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Udp<T> {
    pub const HEADER_LEN: usize = HEADER_LEN;

    /// Wraps `buf` without checking it. The header accessors panic if `buf` is shorter than
    /// [`HEADER_LEN`]; `payload` and the checksum functions also if it is shorter than the
    /// length field says, or that is under 8.
    #[inline]
    pub const fn new_unchecked(buf: T) -> Self {
        Udp { buf }
    }

    /// Wraps `buf` after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self> {
        let v = Self::new_unchecked(buf);
        v.check_len()?;
        Ok(v)
    }

    /// `Truncated` if the buffer is shorter than the header, `Malformed` if the length field is
    /// under 8, `Truncated` if the buffer is shorter than the length field (it may be longer).
    /// After `Ok` no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buf
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::SRC_PORT)
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::DST_PORT)
    }

    /// The length field: header and payload.
    #[inline]
    pub fn len(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::LENGTH)
    }

    /// No payload.
    #[inline]
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) == HEADER_LEN
    }

    /// The checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::CHECKSUM)
    }

    /// The payload, as long as the length field says.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[field::PAYLOAD.start..usize::from(self.len())]
    }

    /// Verifies the checksum over the IPv4 pseudo-header; a zero checksum means "none".
    #[inline]
    pub fn checksum_ok(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0
            || pseudo_sum(&self.buf.as_ref()[..usize::from(self.len())], src, dst) == 0
    }
}

/// The one's-complement checksum of `seg` (header and payload) under the IPv4 pseudo-header.
fn pseudo_sum(seg: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
    checksum::ipv4_pseudo(seg, src, dst, IpProtocol::Udp.to_raw())
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Udp<T> {
    /// Writes the header for `payload_len` bytes of payload (already in place or written
    /// later), checksum zero: `Malformed` if the length does not fit 16 bits, `Truncated` if
    /// the buffer does not hold header and payload. [`UdpRepr::emit`] is the same from values.
    pub fn emit(buf: T, src_port: u16, dst_port: u16, payload_len: usize) -> Result<Self> {
        let mut v = Udp::new_unchecked(buf);
        let repr = UdpRepr {
            src_port,
            dst_port,
            payload_len,
        };
        repr.emit(&mut v, None)?;
        Ok(v)
    }

    #[inline]
    pub fn set_src_port(&mut self, port: u16) {
        write_u16(self.buf.as_mut(), field::SRC_PORT, port);
    }

    #[inline]
    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(self.buf.as_mut(), field::DST_PORT, port);
    }

    #[inline]
    pub fn set_len(&mut self, len: u16) {
        write_u16(self.buf.as_mut(), field::LENGTH, len);
    }

    /// Sets the checksum field as it is (zero: none).
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write_u16(self.buf.as_mut(), field::CHECKSUM, c);
    }

    /// Computes and stores the checksum over the IPv4 pseudo-header (a computed zero is sent
    /// as 0xffff, zero meaning "none").
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let len = usize::from(self.len());
        self.set_checksum(0);
        let mut c = pseudo_sum(&self.buf.as_ref()[..len], src, dst);
        if c == 0 {
            c = 0xffff;
        }
        self.set_checksum(c);
    }

    /// The payload, as long as the length field says.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buf.as_mut()[field::PAYLOAD.start..len]
    }
}

/// A UDP header as values. The payload is not part of it: it is in the view's buffer, after
/// the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Bytes after the header: length field − 8 (at most 65527).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Reads the header: the errors of [`Udp::check_len`], then `Checksum` if the checksum is
    /// not zero and does not verify under the IPv4 pseudo-header of `src` and `dst` (the
    /// addresses of the enclosing IPv4 header).
    pub fn parse<T: AsRef<[u8]>>(v: &Udp<T>, src: Ipv4Addr, dst: Ipv4Addr) -> Result<Self> {
        v.check_len()?;
        if !v.checksum_ok(src, dst) {
            return Err(Error::Checksum);
        }
        Ok(UdpRepr {
            src_port: v.src_port(),
            dst_port: v.dst_port(),
            payload_len: usize::from(v.len()) - HEADER_LEN,
        })
    }

    /// Length of the header: [`HEADER_LEN`].
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header and payload: the length field.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header. With `addrs` (the enclosing IPv4 header's source and destination)
    /// the checksum is computed over the payload already in the buffer (write it first, at
    /// [`field::PAYLOAD`], or emit with `None`, fill `payload_mut`, then
    /// [`Udp::fill_checksum`]); with `None` it is zero, "none". Nothing is written on error:
    /// `Malformed` if the length does not fit 16 bits, `Truncated` if the view does not hold
    /// [`buffer_len`](Self::buffer_len) bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        v: &mut Udp<T>,
        addrs: Option<(Ipv4Addr, Ipv4Addr)>,
    ) -> Result<()> {
        let len = u16::try_from(self.buffer_len()).map_err(|_| Error::Malformed)?;
        if v.buf.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        v.set_src_port(self.src_port);
        v.set_dst_port(self.dst_port);
        v.set_len(len);
        v.set_checksum(0);
        if let Some((src, dst)) = addrs {
            v.fill_checksum(src, dst);
        }
        Ok(())
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
    fn checksums_under_all_ones_addresses() {
        // The pseudo-header's sum fills 32 bits here: this once overflowed.
        let a = Ipv4Addr::BROADCAST;
        let mut b = [0u8; 8];
        let mut u = Udp::emit(&mut b[..], 1, 2, 0).unwrap();
        u.fill_checksum(a, a);
        assert!(u.checksum_ok(a, a));
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
