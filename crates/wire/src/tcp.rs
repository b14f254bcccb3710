//! TCP header view (RFC 9293).
//!
//! A TCP header carries no length of its own: the segment is everything the enclosing IPv4
//! header's total length leaves after the IPv4 header, so the view's buffer is exactly the
//! segment (slice it so), and the payload and the checksum run to the buffer's end.

use crate::ipv4::IpProtocol;
use crate::{Error, Result, checksum, read_4, read_u16, write_u16};
use core::net::Ipv4Addr;

/// Byte layout of the TCP header.
pub mod field {
    use crate::{Field, Rest};

    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    /// Data offset, the header length in 32-bit words (high nibble), and reserved bits.
    pub const DATA_OFFSET: usize = 12;
    /// The control bits ([`super::flags`]).
    pub const FLAGS: usize = 13;
    pub const WINDOW: Field = 14..16;
    /// Over the IPv4 pseudo-header, header and payload.
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
    /// Options, up to the data offset; then the payload.
    pub const OPTIONS: Rest = 20..;
}

/// The control bits of [`field::FLAGS`].
pub mod flags {
    /// No more data from the sender.
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    /// Push: hand the data to the application now.
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    /// ECN echo (RFC 3168).
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced (RFC 3168).
    pub const CWR: u8 = 0x80;
}

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = field::OPTIONS.start;
/// Length of the longest header: a data offset of 15 words.
pub const MAX_HEADER_LEN: usize = 60;

/// A view over a TCP segment: header, options and payload.
#[derive(Debug)]
pub struct Tcp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Tcp<T> {
    pub const MIN_HEADER_LEN: usize = MIN_HEADER_LEN;

    /// Wraps `buf` without checking it. The fixed fields' accessors panic if `buf` is shorter
    /// than [`MIN_HEADER_LEN`]; `options`, `payload` and the checksum functions also if it is
    /// shorter than the data offset says, or that is under 5 words.
    #[inline]
    pub const fn new_unchecked(buf: T) -> Self {
        Tcp { buf }
    }

    /// Wraps `buf` after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self> {
        let v = Self::new_unchecked(buf);
        v.check_len()?;
        Ok(v)
    }

    /// `Truncated` if the buffer is shorter than [`MIN_HEADER_LEN`], `Malformed` if the data
    /// offset is under 5 words, `Truncated` if the buffer is shorter than the data offset.
    /// After `Ok` no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buf.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.header_len() < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < self.header_len() {
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

    #[inline]
    pub fn seq_number(&self) -> u32 {
        u32::from_be_bytes(read_4(self.buf.as_ref(), field::SEQ_NUM))
    }

    #[inline]
    pub fn ack_number(&self) -> u32 {
        u32::from_be_bytes(read_4(self.buf.as_ref(), field::ACK_NUM))
    }

    /// The header length in bytes, options included (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buf.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }

    /// The four bits after the data offset (reserved; the lowest was ECN's nonce sum, RFC
    /// 3540, now historic), as they are.
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.buf.as_ref()[field::DATA_OFFSET] & 0x0f
    }

    /// The control bits as they are (see [`flags`](mod@flags)).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS]
    }

    #[inline]
    pub fn fin(&self) -> bool {
        self.flags() & flags::FIN != 0
    }

    #[inline]
    pub fn syn(&self) -> bool {
        self.flags() & flags::SYN != 0
    }

    #[inline]
    pub fn rst(&self) -> bool {
        self.flags() & flags::RST != 0
    }

    #[inline]
    pub fn psh(&self) -> bool {
        self.flags() & flags::PSH != 0
    }

    #[inline]
    pub fn ack(&self) -> bool {
        self.flags() & flags::ACK != 0
    }

    #[inline]
    pub fn urg(&self) -> bool {
        self.flags() & flags::URG != 0
    }

    #[inline]
    pub fn ece(&self) -> bool {
        self.flags() & flags::ECE != 0
    }

    #[inline]
    pub fn cwr(&self) -> bool {
        self.flags() & flags::CWR != 0
    }

    #[inline]
    pub fn window_len(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::WINDOW)
    }

    /// The checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::CHECKSUM)
    }

    /// The urgent pointer field.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::URGENT)
    }

    /// The options and their padding, as they are.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buf.as_ref()[field::OPTIONS.start..self.header_len()]
    }

    /// The payload: everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..]
    }

    /// Verifies the checksum of the whole buffer under the IPv4 pseudo-header of `src` and
    /// `dst` (the enclosing IPv4 header's addresses).
    #[inline]
    pub fn checksum_ok(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        checksum::ipv4_pseudo(self.buf.as_ref(), src, dst, IpProtocol::Tcp.to_raw()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tcp<T> {
    #[inline]
    pub fn set_src_port(&mut self, port: u16) {
        write_u16(self.buf.as_mut(), field::SRC_PORT, port);
    }

    #[inline]
    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(self.buf.as_mut(), field::DST_PORT, port);
    }

    #[inline]
    pub fn set_seq_number(&mut self, seq: u32) {
        self.buf.as_mut()[field::SEQ_NUM].copy_from_slice(&seq.to_be_bytes());
    }

    #[inline]
    pub fn set_ack_number(&mut self, ack: u32) {
        self.buf.as_mut()[field::ACK_NUM].copy_from_slice(&ack.to_be_bytes());
    }

    /// Sets the data offset from a length in bytes (a multiple of 4, 20..=60) and clears the
    /// reserved bits.
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        self.buf.as_mut()[field::DATA_OFFSET] = ((len / 4) as u8) << 4;
    }

    /// Sets the control bits as they are on the wire.
    #[inline]
    pub fn set_flags(&mut self, f: u8) {
        self.buf.as_mut()[field::FLAGS] = f;
    }

    /// Clears the control bits `f` (e.g. `flags::FIN | flags::PSH`), keeping the others.
    #[inline]
    pub fn clear_flags(&mut self, f: u8) {
        self.buf.as_mut()[field::FLAGS] &= !f;
    }

    #[inline]
    pub fn set_window_len(&mut self, w: u16) {
        write_u16(self.buf.as_mut(), field::WINDOW, w);
    }

    /// Sets the checksum field as it is.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write_u16(self.buf.as_mut(), field::CHECKSUM, c);
    }

    #[inline]
    pub fn set_urgent_at(&mut self, at: u16) {
        write_u16(self.buf.as_mut(), field::URGENT, at);
    }

    /// Computes and stores the checksum of the whole buffer under the IPv4 pseudo-header of
    /// `src` and `dst`.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let c = checksum::ipv4_pseudo(self.buf.as_ref(), src, dst, IpProtocol::Tcp.to_raw());
        self.set_checksum(c);
    }

    /// The options and their padding.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buf.as_mut()[field::OPTIONS.start..h]
    }

    /// The payload: everything after the header.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buf.as_mut()[h..]
    }
}

/// A TCP header as values, its options borrowed as they are. The payload is not part of it:
/// it is in the view's buffer, after the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: u32,
    pub ack_number: u32,
    /// The control bits (see [`flags`](mod@flags)).
    pub flags: u8,
    pub window_len: u16,
    pub urgent_at: u16,
    /// Options and their padding: a multiple of 4 bytes, at most 40.
    pub options: &'a [u8],
    /// Bytes after the header.
    pub payload_len: usize,
}

impl<'a> TcpRepr<'a> {
    /// Reads the header, borrowing its options from the view: the errors of
    /// [`Tcp::check_len`], then `Checksum` if the checksum does not verify under the IPv4
    /// pseudo-header of `src` and `dst`, `Unsupported` if a reserved bit is set (receivers
    /// ignore them; this would not emit them again).
    pub fn parse<T: AsRef<[u8]>>(v: &'a Tcp<T>, src: Ipv4Addr, dst: Ipv4Addr) -> Result<Self> {
        v.check_len()?;
        if !v.checksum_ok(src, dst) {
            return Err(Error::Checksum);
        }
        if v.reserved() != 0 {
            return Err(Error::Unsupported);
        }
        Ok(TcpRepr {
            src_port: v.src_port(),
            dst_port: v.dst_port(),
            seq_number: v.seq_number(),
            ack_number: v.ack_number(),
            flags: v.flags(),
            window_len: v.window_len(),
            urgent_at: v.urgent_at(),
            options: v.options(),
            payload_len: v.payload().len(),
        })
    }

    /// Length of the header: [`MIN_HEADER_LEN`] and the options.
    #[inline]
    pub const fn header_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len()
    }

    /// Header and payload: the segment.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Writes the header and options, then the checksum under the IPv4 pseudo-header of `src`
    /// and `dst` over the whole view, which is the segment: wrap exactly
    /// [`buffer_len`](Self::buffer_len) bytes, the payload already in place after the header
    /// (or emit, fill `payload_mut`, then [`Tcp::fill_checksum`]). Nothing is written on
    /// error: `Malformed` if the options are not a multiple of 4 bytes or over 40, `Truncated`
    /// if the view is shorter than `buffer_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        v: &mut Tcp<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<()> {
        if !self.options.len().is_multiple_of(4) || self.header_len() > MAX_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if v.buf.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        v.set_src_port(self.src_port);
        v.set_dst_port(self.dst_port);
        v.set_seq_number(self.seq_number);
        v.set_ack_number(self.ack_number);
        v.set_header_len(self.header_len());
        v.set_flags(self.flags);
        v.set_window_len(self.window_len);
        v.set_urgent_at(self.urgent_at);
        v.options_mut().copy_from_slice(self.options);
        v.fill_checksum(src, dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// 10.0.0.1:1000 → 10.0.0.2:2000, seq 0xfffff000, ack 7, PSH ACK, window 512, a 4-byte
    /// option (MSS 1460), payload "hi": as Linux would send it (checksum by etherparse).
    const SEGMENT: [u8; 26] = [
        0x03, 0xe8, 0x07, 0xd0, // ports 1000, 2000
        0xff, 0xff, 0xf0, 0x00, // sequence number
        0x00, 0x00, 0x00, 0x07, // acknowledgement number
        0x60, 0x18, 0x02, 0x00, // data offset 6, PSH ACK, window 512
        0x1d, 0xe3, 0x00, 0x00, // checksum, urgent pointer
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        b'h', b'i',
    ];

    #[test]
    fn parse_fixture() {
        let v = Tcp::new_checked(&SEGMENT[..]).unwrap();
        assert_eq!((v.src_port(), v.dst_port()), (1000, 2000));
        assert_eq!((v.seq_number(), v.ack_number()), (0xffff_f000, 7));
        assert_eq!(
            (v.header_len(), v.window_len(), v.urgent_at()),
            (24, 512, 0)
        );
        assert_eq!(v.flags(), flags::PSH | flags::ACK);
        assert!(v.psh() && v.ack() && !v.fin() && !v.syn() && !v.rst() && !v.urg());
        assert!(!v.ece() && !v.cwr());
        assert_eq!(v.options(), &[0x02, 0x04, 0x05, 0xb4]);
        assert_eq!(v.payload(), b"hi");
        assert!(v.checksum_ok(SRC, DST));
        assert!(!v.checksum_ok(SRC, Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(
            TcpRepr::parse(&v, SRC, DST),
            Ok(TcpRepr {
                src_port: 1000,
                dst_port: 2000,
                seq_number: 0xffff_f000,
                ack_number: 7,
                flags: flags::PSH | flags::ACK,
                window_len: 512,
                urgent_at: 0,
                options: &[0x02, 0x04, 0x05, 0xb4],
                payload_len: 2,
            })
        );
    }

    #[test]
    fn fixture_agrees_with_etherparse() {
        let (h, payload) = etherparse::TcpHeader::from_slice(&SEGMENT).unwrap();
        let ip = etherparse::Ipv4Header::new(
            SEGMENT.len() as u16,
            64,
            etherparse::IpNumber::TCP,
            SRC.octets(),
            DST.octets(),
        )
        .unwrap();
        assert_eq!(h.calc_checksum_ipv4(&ip, payload).unwrap(), 0x1de3);
        assert_eq!(payload, b"hi");
    }

    #[test]
    fn emit_fixture() {
        let mut b = [0x55u8; 26];
        b[24..].copy_from_slice(b"hi");
        let v = Tcp::new_checked(&SEGMENT[..]).unwrap();
        let repr = TcpRepr::parse(&v, SRC, DST).unwrap();
        repr.emit(&mut Tcp::new_unchecked(&mut b[..]), SRC, DST)
            .unwrap();
        assert_eq!(b, SEGMENT);
    }

    #[test]
    fn flags_are_cleared_one_by_one() {
        let mut b = SEGMENT;
        let mut v = Tcp::new_unchecked(&mut b[..]);
        v.set_flags(flags::FIN | flags::PSH | flags::ACK | flags::CWR);
        v.clear_flags(flags::FIN | flags::PSH);
        assert_eq!(v.flags(), flags::ACK | flags::CWR);
        v.clear_flags(flags::CWR);
        assert!(v.ack() && !v.cwr() && !v.fin() && !v.psh());
    }

    #[test]
    fn bad_headers_are_refused() {
        assert_eq!(
            Tcp::new_checked(&SEGMENT[..19]).unwrap_err(),
            Error::Truncated
        );
        let mut short_offset = SEGMENT;
        short_offset[12] = 0x40;
        assert_eq!(
            Tcp::new_checked(&short_offset[..]).unwrap_err(),
            Error::Malformed
        );
        // Data offset 6 words, 22 bytes.
        assert_eq!(
            Tcp::new_checked(&SEGMENT[..22]).unwrap_err(),
            Error::Truncated
        );
        let mut bad_sum = SEGMENT;
        bad_sum[25] ^= 1;
        assert_eq!(
            TcpRepr::parse(&Tcp::new_unchecked(&bad_sum[..]), SRC, DST),
            Err(Error::Checksum)
        );
        // A reserved bit: checksum fixed, then refused as not representable.
        let mut reserved = SEGMENT;
        reserved[12] |= 0x01;
        Tcp::new_unchecked(&mut reserved[..]).fill_checksum(SRC, DST);
        assert_eq!(
            TcpRepr::parse(&Tcp::new_unchecked(&reserved[..]), SRC, DST),
            Err(Error::Unsupported)
        );
    }

    #[test]
    fn emit_refuses_what_does_not_fit() {
        let repr = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq_number: 3,
            ack_number: 4,
            flags: flags::SYN,
            window_len: 5,
            urgent_at: 0,
            options: &[1, 1, 1],
            payload_len: 0,
        };
        let mut b = [0x55u8; 64];
        let mut v = Tcp::new_unchecked(&mut b[..]);
        assert_eq!(repr.emit(&mut v, SRC, DST), Err(Error::Malformed));
        let long = TcpRepr {
            options: &[1; 44],
            ..repr
        };
        assert_eq!(long.emit(&mut v, SRC, DST), Err(Error::Malformed));
        let fits = TcpRepr {
            options: &[1; 40],
            ..repr
        };
        let mut short = [0x55u8; 59];
        assert_eq!(
            fits.emit(&mut Tcp::new_unchecked(&mut short[..]), SRC, DST),
            Err(Error::Truncated)
        );
        assert_eq!(b, [0x55; 64], "nothing written on error");
        assert_eq!(short, [0x55; 59], "nothing written on error");
    }
}
