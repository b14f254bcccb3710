//! IPv4 header view (RFC 791).

use crate::{Error, Result, checksum, read_4, read_u16, write_u16};

pub use core::net::Ipv4Addr;

/// The IPv4 protocol field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    Icmp,
    Tcp,
    Udp,
    Unknown(u8),
}

impl IpProtocol {
    /// The protocol for its on-the-wire number.
    #[inline]
    pub const fn from_raw(v: u8) -> Self {
        match v {
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            x => IpProtocol::Unknown(x),
        }
    }

    /// The on-the-wire number (a constant for the named protocols).
    #[inline]
    pub const fn to_raw(self) -> u8 {
        match self {
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Unknown(x) => x,
        }
    }
}

impl From<u8> for IpProtocol {
    #[inline]
    fn from(v: u8) -> Self {
        IpProtocol::from_raw(v)
    }
}

impl From<IpProtocol> for u8 {
    #[inline]
    fn from(v: IpProtocol) -> u8 {
        v.to_raw()
    }
}

/// Byte layout of the IPv4 header.
pub mod field {
    use crate::Field;

    /// Version (high nibble) and IHL, the header length in 32-bit words (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP (high six bits) and ECN (low two bits).
    pub const DSCP_ECN: usize = 1;
    /// Total length: header and payload, in bytes.
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    /// Flags (reserved, DF, MF: the top three bits) and fragment offset in 8-byte units.
    pub const FLAGS_FRAG: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    /// TTL and protocol as the one 16-bit word the checksum sees (RFC 1624 updates).
    pub const TTL_PROTOCOL: Field = TTL..PROTOCOL + 1;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = field::DST_ADDR.end;

/// The first byte of a version 4 header without options (IHL 5): one compare tells both.
pub const VER_IHL_NO_OPTIONS: u8 = 0x45;

/// The reserved flag (must be zero).
pub const FLAG_RESERVED: u16 = 0x8000;
/// Don't fragment.
pub const FLAG_DF: u16 = 0x4000;
/// More fragments.
pub const FLAG_MF: u16 = 0x2000;
/// The fragment offset bits of [`field::FLAGS_FRAG`] (in 8-byte units).
pub const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view over an IPv4 header and what follows it.
#[derive(Debug)]
pub struct Ipv4<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4<T> {
    pub const MIN_HEADER_LEN: usize = MIN_HEADER_LEN;

    /// Wraps `buf` without checking it. Accessors index the buffer directly: any of them may
    /// panic if `buf` is shorter than the bytes it reads ([`MIN_HEADER_LEN`] for the fixed
    /// fields, the IHL for [`checksum_ok`](Self::checksum_ok), IHL and total length for
    /// [`payload`](Self::payload)). A fast path that knows the header is there (an earlier node
    /// checked it) uses this; anything else uses [`new_checked`](Self::new_checked) or
    /// [`new_header_checked`](Self::new_header_checked).
    #[inline]
    pub const fn new_unchecked(buf: T) -> Self {
        Ipv4 { buf }
    }

    /// Wraps `buf` after [`check_header_len`](Self::check_header_len): the whole header is
    /// present and consistent, but the payload may be elsewhere (a buffer chain, an external
    /// segment); the caller compares `total_len` with what it has.
    #[inline]
    pub fn new_header_checked(buf: T) -> Result<Self> {
        let v = Self::new_unchecked(buf);
        v.check_header_len()?;
        Ok(v)
    }

    /// Wraps `buf` after [`check_len`](Self::check_len): header and total length both fit.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self> {
        let v = Self::new_unchecked(buf);
        v.check_len()?;
        Ok(v)
    }

    /// Checks the header only, in this order: `Truncated` if the buffer is shorter than
    /// [`MIN_HEADER_LEN`]; `Malformed` if the version is not 4, the IHL is under 5 or the total
    /// length does not cover the header; `Truncated` if the header (options included) is not
    /// all in the buffer. After `Ok` every accessor works; `payload` returns what the buffer
    /// holds of the payload.
    #[inline]
    pub fn check_header_len(&self) -> Result<()> {
        let len = self.buf.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 || self.header_len() < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if usize::from(self.total_len()) < self.header_len() {
            return Err(Error::Malformed);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// [`check_header_len`](Self::check_header_len), then `Truncated` if the buffer is shorter
    /// than the total length (it may be longer: link-layer padding).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        self.check_header_len()?;
        if self.buf.as_ref().len() < usize::from(self.total_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// The first byte as it is: [`VER_IHL_NO_OPTIONS`] for a version 4 header without options.
    #[inline]
    pub fn version_ihl(&self) -> u8 {
        self.buf.as_ref()[field::VER_IHL]
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.version_ihl() >> 4
    }

    /// The header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.version_ihl() & 0x0f) * 4
    }

    /// Differentiated services code point (0..=63).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buf.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification (0..=3).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buf.as_ref()[field::DSCP_ECN] & 0x03
    }

    #[inline]
    pub fn total_len(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::LENGTH)
    }

    #[inline]
    pub fn ident(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::IDENT)
    }

    /// Flags and fragment offset as they are (see [`FLAG_DF`], [`FLAG_MF`],
    /// [`FRAG_OFFSET_MASK`]): `flags_frag() & (FLAG_MF | FRAG_OFFSET_MASK) == 0` tells in one
    /// test that a packet is not a fragment.
    #[inline]
    pub fn flags_frag(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::FLAGS_FRAG)
    }

    /// More fragments follow this one (MF flag).
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }

    /// Don't fragment (DF flag).
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }

    /// Where this fragment's data sits in the original datagram, in bytes: non-zero for every
    /// fragment but the first.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & FRAG_OFFSET_MASK) << 3
    }

    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buf.as_ref()[field::TTL]
    }

    /// The protocol number as it is (`IpProtocol::Icmp.to_raw()` is 1).
    #[inline]
    pub fn protocol_raw(&self) -> u8 {
        self.buf.as_ref()[field::PROTOCOL]
    }

    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from_raw(self.protocol_raw())
    }

    /// The header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::CHECKSUM)
    }

    /// The header checksum field (the same as [`checksum`](Self::checksum)).
    #[inline]
    pub fn header_checksum(&self) -> u16 {
        self.checksum()
    }

    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_4(self.buf.as_ref(), field::SRC_ADDR))
    }

    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_4(self.buf.as_ref(), field::DST_ADDR))
    }

    /// The source address (the same as [`src_addr`](Self::src_addr)).
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        self.src_addr()
    }

    /// The destination address (the same as [`dst_addr`](Self::dst_addr)).
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        self.dst_addr()
    }

    /// True when the header checksum (over IHL × 4 bytes) verifies.
    #[inline]
    pub fn checksum_ok(&self) -> bool {
        checksum::checksum(&self.buf.as_ref()[..self.header_len()]) == 0
    }

    /// The forwarding path's form of [`checksum_ok`](Self::checksum_ok) for a header without
    /// options: whether the first [`MIN_HEADER_LEN`] bytes sum to zero, in five 32-bit adds
    /// (false for a shorter buffer; the IHL is not looked at: compare
    /// [`version_ihl`](Self::version_ihl) with [`VER_IHL_NO_OPTIONS`] first). Never panics.
    #[inline]
    pub fn checksum_ok_no_options(&self) -> bool {
        self.buf
            .as_ref()
            .first_chunk::<MIN_HEADER_LEN>()
            .is_some_and(checksum::ipv4_header_ok)
    }

    /// The payload bytes present in this buffer, up to the total length (all of them after
    /// `new_checked`; after `new_header_checked` the rest may live elsewhere).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        &b[self.header_len()..usize::from(self.total_len()).min(b.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4<T> {
    /// Writes a 20-byte header with no options (DF set, ident 0) and its checksum. The buffer
    /// must hold `20 + payload_len` bytes (`Truncated`), and the total must fit 16 bits
    /// (`Malformed`). [`Ipv4Repr::emit`] is the general form.
    pub fn emit(
        buf: T,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        ttl: u8,
        payload_len: usize,
    ) -> Result<Self> {
        let repr = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol,
            payload_len,
            ttl,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        repr.check()?;
        let mut v = Ipv4::new_unchecked(buf);
        if v.buf.as_ref().len() < repr.buffer_len() {
            return Err(Error::Truncated);
        }
        repr.emit(&mut v)?;
        Ok(v)
    }

    /// Sets the version nibble (the IHL is kept).
    #[inline]
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buf.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the IHL from a length in bytes (a multiple of 4, 20..=60; the version is kept).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buf.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the whole first byte: `set_version_ihl(VER_IHL_NO_OPTIONS)`.
    #[inline]
    pub fn set_version_ihl(&mut self, v: u8) {
        self.buf.as_mut()[field::VER_IHL] = v;
    }

    /// Sets the DSCP (its low six bits; the ECN is kept).
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buf.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    /// Sets the ECN (its low two bits; the DSCP is kept).
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buf.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        write_u16(self.buf.as_mut(), field::LENGTH, len);
    }

    #[inline]
    pub fn set_ident(&mut self, ident: u16) {
        write_u16(self.buf.as_mut(), field::IDENT, ident);
    }

    /// Sets flags and fragment offset as they are on the wire.
    #[inline]
    pub fn set_flags_frag(&mut self, raw: u16) {
        write_u16(self.buf.as_mut(), field::FLAGS_FRAG, raw);
    }

    #[inline]
    pub fn set_dont_frag(&mut self, df: bool) {
        let raw = self.flags_frag() & !FLAG_DF;
        self.set_flags_frag(if df { raw | FLAG_DF } else { raw });
    }

    #[inline]
    pub fn set_more_frags(&mut self, mf: bool) {
        let raw = self.flags_frag() & !FLAG_MF;
        self.set_flags_frag(if mf { raw | FLAG_MF } else { raw });
    }

    /// Sets the fragment offset from bytes (a multiple of 8; the low three bits are dropped).
    #[inline]
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let raw = self.flags_frag() & !FRAG_OFFSET_MASK;
        self.set_flags_frag(raw | (bytes >> 3));
    }

    /// Sets the TTL and nothing else: the checksum is then stale (see
    /// [`decrement_ttl`](Self::decrement_ttl) and [`fill_checksum`](Self::fill_checksum)).
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buf.as_mut()[field::TTL] = ttl;
    }

    #[inline]
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.buf.as_mut()[field::PROTOCOL] = p.to_raw();
    }

    /// Sets the header checksum field as it is.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write_u16(self.buf.as_mut(), field::CHECKSUM, c);
    }

    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buf.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buf.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// Computes the header checksum over IHL × 4 bytes and stores it.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let h = self.header_len();
        let c = checksum::checksum(&self.buf.as_ref()[..h]);
        self.set_checksum(c);
    }

    /// Decrements the TTL (wrapping: the caller tests `ttl() > 1` first) and patches the
    /// checksum incrementally (RFC 1624 eqn. 3). Reads and writes only the bytes
    /// `field::TTL..field::CHECKSUM.end`.
    #[inline]
    pub fn decrement_ttl(&mut self) {
        let b = self.buf.as_mut();
        let old = read_u16(b, field::TTL_PROTOCOL);
        b[field::TTL] = b[field::TTL].wrapping_sub(1);
        let new = read_u16(b, field::TTL_PROTOCOL);
        let c = checksum::update(read_u16(b, field::CHECKSUM), old, new);
        write_u16(b, field::CHECKSUM, c);
    }

    /// The payload bytes present in this buffer, up to the total length.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        let b = self.buf.as_mut();
        let t = t.min(b.len());
        &mut b[h..t]
    }
}

/// An IPv4 header without options, as values.
///
/// `parse` refuses headers with options (`Unsupported`) and `emit` never writes any: a node
/// that must keep options works on the view. Fragments are represented as they are
/// (`more_frags`, `frag_offset`); nothing here reassembles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: IpProtocol,
    /// Bytes after the header: total length − 20 (at most 65515).
    pub payload_len: usize,
    pub ttl: u8,
    /// 0..=63.
    pub dscp: u8,
    /// 0..=3.
    pub ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// In bytes: a multiple of 8.
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// Reads a header: `Truncated`/`Malformed` as [`Ipv4::check_header_len`], then `Checksum`
    /// if the header checksum does not verify, `Unsupported` if the header has options and
    /// `Malformed` if the reserved flag is set.
    ///
    /// The payload is not looked at: it is in the view's buffer after `Ipv4::new_checked`, and
    /// may be elsewhere (or, in an ICMP error's quote, cut) after `new_header_checked`.
    pub fn parse<T: AsRef<[u8]>>(v: &Ipv4<T>) -> Result<Self> {
        v.check_header_len()?;
        if !v.checksum_ok() {
            return Err(Error::Checksum);
        }
        if v.header_len() != MIN_HEADER_LEN {
            return Err(Error::Unsupported);
        }
        if v.flags_frag() & FLAG_RESERVED != 0 {
            return Err(Error::Malformed);
        }
        Ok(Ipv4Repr {
            src_addr: v.src_addr(),
            dst_addr: v.dst_addr(),
            protocol: v.protocol(),
            payload_len: usize::from(v.total_len()) - MIN_HEADER_LEN,
            ttl: v.ttl(),
            dscp: v.dscp(),
            ecn: v.ecn(),
            ident: v.ident(),
            dont_frag: v.dont_frag(),
            more_frags: v.more_frags(),
            frag_offset: v.frag_offset(),
        })
    }

    /// Length of the header this writes: always [`MIN_HEADER_LEN`].
    #[inline]
    pub const fn header_len(&self) -> usize {
        MIN_HEADER_LEN
    }

    /// Header and payload: the total length.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        MIN_HEADER_LEN + self.payload_len
    }

    /// `Malformed` unless every field fits the header.
    pub(crate) fn check(&self) -> Result<()> {
        let fits = self.buffer_len() <= usize::from(u16::MAX)
            && self.dscp <= 0x3f
            && self.ecn <= 0x03
            && self.frag_offset.is_multiple_of(8);
        if fits { Ok(()) } else { Err(Error::Malformed) }
    }

    /// Writes the header, checksum included, over the first [`MIN_HEADER_LEN`] bytes of the
    /// view; the payload is the caller's and need not be in this buffer. Nothing is written on
    /// error: `Malformed` if a field does not fit (payload over 65515 bytes, DSCP over 63, ECN
    /// over 3, a fragment offset not a multiple of 8), `Truncated` if the view is shorter than
    /// the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Ipv4<T>) -> Result<()> {
        self.check()?;
        if v.buf.as_ref().len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        v.set_version_ihl(VER_IHL_NO_OPTIONS);
        v.buf.as_mut()[field::DSCP_ECN] = (self.dscp << 2) | self.ecn;
        v.set_total_len(self.buffer_len() as u16);
        v.set_ident(self.ident);
        let mut flags = self.frag_offset >> 3;
        if self.dont_frag {
            flags |= FLAG_DF;
        }
        if self.more_frags {
            flags |= FLAG_MF;
        }
        v.set_flags_frag(flags);
        v.set_ttl(self.ttl);
        v.set_protocol(self.protocol);
        v.set_src_addr(self.src_addr);
        v.set_dst_addr(self.dst_addr);
        v.fill_checksum();
        Ok(())
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
