//! ICMPv4 (RFC 792): echo, time exceeded, destination unreachable.

use crate::ipv4::{self, Ipv4, Ipv4Repr};
use crate::{Error, Result, checksum, read_u16, write_u16};

/// The ICMP message kinds veclane emits or answers; the rest are `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcmpType {
    EchoReply,
    DestUnreachable,
    EchoRequest,
    TimeExceeded,
    Unknown(u8),
}

impl IcmpType {
    /// The type for its on-the-wire value.
    #[inline]
    pub const fn from_raw(v: u8) -> Self {
        match v {
            0 => IcmpType::EchoReply,
            3 => IcmpType::DestUnreachable,
            8 => IcmpType::EchoRequest,
            11 => IcmpType::TimeExceeded,
            x => IcmpType::Unknown(x),
        }
    }

    /// The on-the-wire value.
    #[inline]
    pub const fn to_raw(self) -> u8 {
        match self {
            IcmpType::EchoReply => 0,
            IcmpType::DestUnreachable => 3,
            IcmpType::EchoRequest => 8,
            IcmpType::TimeExceeded => 11,
            IcmpType::Unknown(x) => x,
        }
    }

    /// Whether messages of this type report an error (destination unreachable, source quench,
    /// redirect, time exceeded, parameter problem: RFC 1122 3.2.2). Nobody answers an error
    /// with another error (RFC 1812 4.3.2.7), so a router must be able to tell.
    #[inline]
    pub fn is_error(self) -> bool {
        matches!(
            self,
            IcmpType::DestUnreachable | IcmpType::TimeExceeded | IcmpType::Unknown(4 | 5 | 12)
        )
    }
}

impl From<u8> for IcmpType {
    #[inline]
    fn from(v: u8) -> Self {
        IcmpType::from_raw(v)
    }
}

impl From<IcmpType> for u8 {
    #[inline]
    fn from(v: IcmpType) -> u8 {
        v.to_raw()
    }
}

/// Codes of destination unreachable (RFC 792, RFC 1812 5.2.7.1).
pub mod unreachable {
    pub const NET: u8 = 0;
    pub const HOST: u8 = 1;
    pub const PROTOCOL: u8 = 2;
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set: the next-hop MTU goes with it (RFC 1191).
    pub const FRAG_NEEDED: u8 = 4;
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Codes of time exceeded (RFC 792).
pub mod time_exceeded {
    /// TTL exceeded in transit.
    pub const TTL: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

/// Byte layout of the ICMP header. The four bytes after the checksum ("rest of header") mean
/// what the type says: echo identifier and sequence number, the next-hop MTU of
/// "fragmentation needed", or nothing.
pub mod field {
    use crate::{Field, Rest};

    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    /// Covers the whole message.
    pub const CHECKSUM: Field = 2..4;
    /// Rest of header, as one 32-bit word.
    pub const REST: Field = 4..8;
    /// Echo request and reply.
    pub const ECHO_IDENT: Field = 4..6;
    /// Echo request and reply.
    pub const ECHO_SEQ_NO: Field = 6..8;
    /// Destination unreachable: unused (zero) before the next-hop MTU.
    pub const UNUSED: Field = 4..6;
    /// Destination unreachable, fragmentation needed (RFC 1191); zero otherwise.
    pub const NEXT_HOP_MTU: Field = 6..8;
    /// Echo data, or the quoted datagram of an error.
    pub const BODY: Rest = 8..;
}

/// Length of the ICMP header.
pub const HEADER_LEN: usize = field::BODY.start;

/// A view over an ICMP message (header and body). The buffer is the whole message: the
/// checksum covers all of it.
#[derive(Debug)]
pub struct Icmp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Icmp<T> {
    pub const HEADER_LEN: usize = HEADER_LEN;

    /// Wraps `buf` without checking it. Every accessor panics if `buf` is shorter than
    /// [`HEADER_LEN`].
    #[inline]
    pub const fn new_unchecked(buf: T) -> Self {
        Icmp { buf }
    }

    /// Wraps `buf` after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self> {
        let v = Self::new_unchecked(buf);
        v.check_len()?;
        Ok(v)
    }

    /// `Truncated` if the buffer is shorter than the header; after `Ok` no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buf.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// The type as it is (`IcmpType::EchoRequest.to_raw()` is 8).
    #[inline]
    pub fn msg_type_raw(&self) -> u8 {
        self.buf.as_ref()[field::TYPE]
    }

    #[inline]
    pub fn msg_type(&self) -> IcmpType {
        IcmpType::from_raw(self.msg_type_raw())
    }

    #[inline]
    pub fn code(&self) -> u8 {
        self.buf.as_ref()[field::CODE]
    }

    /// The checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::CHECKSUM)
    }

    /// The rest of the header as one big-endian word.
    #[inline]
    pub fn rest(&self) -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&self.buf.as_ref()[field::REST]);
        u32::from_be_bytes(w)
    }

    /// Echo identifier.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number.
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::ECHO_SEQ_NO)
    }

    /// Echo identifier and sequence (the "rest of header" of echo messages).
    #[inline]
    pub fn echo_id_seq(&self) -> (u16, u16) {
        (self.echo_ident(), self.echo_seq_no())
    }

    /// The next-hop MTU of "fragmentation needed" (zero in other messages).
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::NEXT_HOP_MTU)
    }

    /// The checksum covers the whole message.
    #[inline]
    pub fn checksum_ok(&self) -> bool {
        checksum::checksum(self.buf.as_ref()) == 0
    }

    /// Echo data, or the datagram an error quotes.
    #[inline]
    pub fn body(&self) -> &[u8] {
        &self.buf.as_ref()[field::BODY]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmp<T> {
    #[inline]
    pub fn set_msg_type(&mut self, t: IcmpType) {
        self.buf.as_mut()[field::TYPE] = t.to_raw();
    }

    #[inline]
    pub fn set_code(&mut self, code: u8) {
        self.buf.as_mut()[field::CODE] = code;
    }

    #[inline]
    pub fn set_type_code(&mut self, t: IcmpType, code: u8) {
        self.set_msg_type(t);
        self.set_code(code);
    }

    /// Sets the checksum field as it is.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write_u16(self.buf.as_mut(), field::CHECKSUM, c);
    }

    /// "Rest of header": echo id/seq, or zero (time exceeded), or next-hop MTU (frag needed).
    #[inline]
    pub fn set_rest(&mut self, rest: u32) {
        self.buf.as_mut()[field::REST].copy_from_slice(&rest.to_be_bytes());
    }

    #[inline]
    pub fn set_echo_ident(&mut self, ident: u16) {
        write_u16(self.buf.as_mut(), field::ECHO_IDENT, ident);
    }

    #[inline]
    pub fn set_echo_seq_no(&mut self, seq_no: u16) {
        write_u16(self.buf.as_mut(), field::ECHO_SEQ_NO, seq_no);
    }

    #[inline]
    pub fn set_next_hop_mtu(&mut self, mtu: u16) {
        write_u16(self.buf.as_mut(), field::NEXT_HOP_MTU, mtu);
    }

    /// Computes the checksum over the whole buffer and stores it.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buf.as_ref());
        self.set_checksum(c);
    }

    /// Writes an error message's header over the first 8 bytes of `buf` (type, code and `rest`:
    /// zero, or the next-hop MTU of "fragmentation needed") and the checksum over all of
    /// `buf`, whose body (from byte 8) already holds the quoted datagram.
    pub fn emit_error(buf: T, t: IcmpType, code: u8, rest: u32) -> Result<Self> {
        let mut m = Icmp::new_checked(buf)?;
        m.set_type_code(t, code);
        m.set_rest(rest);
        m.fill_checksum();
        Ok(m)
    }

    /// Turns an echo request into its reply in place: type 0, same id, seq and data.
    #[inline]
    pub fn make_echo_reply(&mut self) {
        self.set_type_code(IcmpType::EchoReply, 0);
        self.fill_checksum();
    }

    #[inline]
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[field::BODY]
    }
}

/// An ICMPv4 message as values: echo request and reply, and the two errors a router sends.
///
/// The errors carry the offending datagram's header as an [`Ipv4Repr`] (so a quoted header
/// with options, or with a bad checksum, does not parse) and `data`, the quoted bytes after
/// that header (RFC 792 asks for at least 8; any number is accepted, none required). The
/// quoted header's `payload_len` is the original datagram's, usually more than `data.len()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr<'a> {
    EchoRequest {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    EchoReply {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    DstUnreachable {
        /// See [`unreachable`](mod@unreachable).
        code: u8,
        /// With [`unreachable::FRAG_NEEDED`] (RFC 1191); zero otherwise.
        next_hop_mtu: u16,
        header: Ipv4Repr,
        data: &'a [u8],
    },
    TimeExceeded {
        /// See [`time_exceeded`](mod@time_exceeded).
        code: u8,
        header: Ipv4Repr,
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a message, borrowing its data from the view: `Truncated` if shorter than the
    /// header, `Checksum` if the checksum does not verify, `Malformed` for an echo with a
    /// non-zero code, `Unsupported` for any other type. An error's quoted header is parsed by
    /// [`Ipv4Repr::parse`] and fails as it does. The "unused" bytes of an error's header are
    /// not kept.
    pub fn parse<T: AsRef<[u8]>>(v: &'a Icmp<T>) -> Result<Self> {
        v.check_len()?;
        if !v.checksum_ok() {
            return Err(Error::Checksum);
        }
        let body = v.body();
        match v.msg_type() {
            IcmpType::EchoRequest | IcmpType::EchoReply if v.code() != 0 => Err(Error::Malformed),
            IcmpType::EchoRequest => Ok(Icmpv4Repr::EchoRequest {
                ident: v.echo_ident(),
                seq_no: v.echo_seq_no(),
                data: body,
            }),
            IcmpType::EchoReply => Ok(Icmpv4Repr::EchoReply {
                ident: v.echo_ident(),
                seq_no: v.echo_seq_no(),
                data: body,
            }),
            IcmpType::DestUnreachable => {
                let (header, data) = parse_quote(body)?;
                Ok(Icmpv4Repr::DstUnreachable {
                    code: v.code(),
                    next_hop_mtu: v.next_hop_mtu(),
                    header,
                    data,
                })
            }
            IcmpType::TimeExceeded => {
                let (header, data) = parse_quote(body)?;
                Ok(Icmpv4Repr::TimeExceeded {
                    code: v.code(),
                    header,
                    data,
                })
            }
            IcmpType::Unknown(_) => Err(Error::Unsupported),
        }
    }

    /// Length of the ICMP header: [`HEADER_LEN`].
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The whole message: header, then echo data or quoted header and data.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => {
                    data.len()
                }
                Icmpv4Repr::DstUnreachable { data, .. } | Icmpv4Repr::TimeExceeded { data, .. } => {
                    ipv4::MIN_HEADER_LEN + data.len()
                }
            }
    }

    /// Writes the message over the first [`buffer_len`](Self::buffer_len) bytes of the view,
    /// then the checksum over the whole view (the view is the message: wrap exactly
    /// `buffer_len()` bytes). Nothing is written on error: `Malformed` if a quoted header does
    /// not fit (see [`Ipv4Repr::emit`]), `Truncated` if the view is too short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Icmp<T>) -> Result<()> {
        if let Icmpv4Repr::DstUnreachable { header, .. } | Icmpv4Repr::TimeExceeded { header, .. } =
            self
        {
            header.check()?;
        }
        if v.buf.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        match *self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                let t = if matches!(self, Icmpv4Repr::EchoRequest { .. }) {
                    IcmpType::EchoRequest
                } else {
                    IcmpType::EchoReply
                };
                v.set_type_code(t, 0);
                v.set_echo_ident(ident);
                v.set_echo_seq_no(seq_no);
                v.body_mut()[..data.len()].copy_from_slice(data);
            }
            Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu,
                header,
                data,
            } => {
                v.set_type_code(IcmpType::DestUnreachable, code);
                v.set_rest(u32::from(next_hop_mtu));
                emit_quote(v.body_mut(), &header, data)?;
            }
            Icmpv4Repr::TimeExceeded { code, header, data } => {
                v.set_type_code(IcmpType::TimeExceeded, code);
                v.set_rest(0);
                emit_quote(v.body_mut(), &header, data)?;
            }
        }
        v.fill_checksum();
        Ok(())
    }
}

/// An error's quoted datagram: its header (no options) and the bytes after it.
fn parse_quote(body: &[u8]) -> Result<(Ipv4Repr, &[u8])> {
    let ip = Ipv4::new_header_checked(body)?;
    let header = Ipv4Repr::parse(&ip)?;
    Ok((header, &body[ipv4::MIN_HEADER_LEN..]))
}

/// Writes a quoted header and data at the start of `body` (long enough: checked by the caller).
fn emit_quote(body: &mut [u8], header: &Ipv4Repr, data: &[u8]) -> Result<()> {
    let (h, rest) = body.split_at_mut(ipv4::MIN_HEADER_LEN);
    header.emit(&mut Ipv4::new_unchecked(h))?;
    rest[..data.len()].copy_from_slice(data);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request_becomes_a_valid_reply() {
        // An echo request as ping sends it: id 0x1234, seq 1, 8 bytes of data.
        let mut b = [8, 0, 0, 0, 0x12, 0x34, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8];
        let mut m = Icmp::new_checked(&mut b[..]).unwrap();
        m.fill_checksum();
        assert!(m.checksum_ok());
        assert_eq!(m.msg_type(), IcmpType::EchoRequest);
        m.make_echo_reply();
        assert!(m.checksum_ok());
        assert_eq!(
            (m.msg_type(), m.echo_id_seq()),
            (IcmpType::EchoReply, (0x1234, 1))
        );
        let (h, rest) = etherparse::Icmpv4Header::from_slice(&b).unwrap();
        assert_eq!(rest, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(
            matches!(h.icmp_type, etherparse::Icmpv4Type::EchoReply(e) if e.id == 0x1234 && e.seq == 1)
        );
        assert_eq!(h.checksum, h.icmp_type.calc_checksum(rest));
    }

    #[test]
    fn time_exceeded_header() {
        let mut b = [0u8; 36];
        let mut m = Icmp::new_checked(&mut b[..]).unwrap();
        m.set_type_code(IcmpType::TimeExceeded, 0);
        m.set_rest(0);
        m.fill_checksum();
        assert!(m.checksum_ok());
        assert_eq!(Icmp::new_checked(&b[..7]).unwrap_err(), Error::Truncated);
        assert_eq!(IcmpType::from(42), IcmpType::Unknown(42));
    }

    #[test]
    fn error_types_are_known_as_errors() {
        let errors: Vec<u8> = (0..=255u8)
            .filter(|&t| IcmpType::from(t).is_error())
            .collect();
        assert_eq!(errors, [3, 4, 5, 11, 12]);
    }

    #[test]
    fn emitted_error_quotes_the_datagram_and_matches_etherparse() {
        // Time exceeded quoting a 20-byte IPv4 header and 8 bytes of UDP.
        let mut quoted = [0u8; 28];
        crate::Ipv4::emit(
            &mut quoted[..],
            core::net::Ipv4Addr::new(10, 0, 0, 7),
            core::net::Ipv4Addr::new(192, 0, 2, 5),
            crate::IpProtocol::Udp,
            1,
            8,
        )
        .unwrap();
        let mut b = [0xaau8; 36];
        b[8..].copy_from_slice(&quoted);
        let m = Icmp::emit_error(&mut b[..], IcmpType::TimeExceeded, 0, 0).unwrap();
        assert!(m.checksum_ok());
        assert_eq!(m.body(), &quoted[..]);
        let (h, rest) = etherparse::Icmpv4Header::from_slice(&b).unwrap();
        assert_eq!(
            h.icmp_type,
            etherparse::Icmpv4Type::TimeExceeded(
                etherparse::icmpv4::TimeExceededCode::TtlExceededInTransit
            )
        );
        assert_eq!(rest, &quoted[..]);
        assert_eq!(h.checksum, h.icmp_type.calc_checksum(rest));
        assert_eq!(
            Icmp::emit_error(&mut b[..7], IcmpType::DestUnreachable, 0, 0).unwrap_err(),
            Error::Truncated
        );
    }
}
