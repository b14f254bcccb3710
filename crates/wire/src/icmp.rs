//! ICMPv4 (RFC 792): echo, time exceeded, destination unreachable.

use crate::{Error, Result, checksum, get_u16, set_u16};

/// The ICMP message kinds veclane emits or answers; the rest are `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpType {
    EchoReply,
    DestUnreachable,
    EchoRequest,
    TimeExceeded,
    Unknown(u8),
}

impl From<u8> for IcmpType {
    fn from(v: u8) -> Self {
        match v {
            0 => IcmpType::EchoReply,
            3 => IcmpType::DestUnreachable,
            8 => IcmpType::EchoRequest,
            11 => IcmpType::TimeExceeded,
            x => IcmpType::Unknown(x),
        }
    }
}

impl From<IcmpType> for u8 {
    fn from(v: IcmpType) -> u8 {
        match v {
            IcmpType::EchoReply => 0,
            IcmpType::DestUnreachable => 3,
            IcmpType::EchoRequest => 8,
            IcmpType::TimeExceeded => 11,
            IcmpType::Unknown(x) => x,
        }
    }
}

impl IcmpType {
    /// Whether messages of this type report an error (destination unreachable, source quench,
    /// redirect, time exceeded, parameter problem: RFC 1122 3.2.2). Nobody answers an error
    /// with another error (RFC 1812 4.3.2.7), so a router must be able to tell.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            IcmpType::DestUnreachable | IcmpType::TimeExceeded | IcmpType::Unknown(4 | 5 | 12)
        )
    }
}

/// A view over an ICMP message (header and body).
#[derive(Debug)]
pub struct Icmp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Icmp<T> {
    pub const HEADER_LEN: usize = 8;

    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < Self::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Icmp { buf })
    }

    pub fn msg_type(&self) -> IcmpType {
        self.buf.as_ref()[0].into()
    }

    pub fn code(&self) -> u8 {
        self.buf.as_ref()[1]
    }

    /// Echo identifier and sequence (the "rest of header" of echo messages).
    pub fn echo_id_seq(&self) -> (u16, u16) {
        (get_u16(self.buf.as_ref(), 4), get_u16(self.buf.as_ref(), 6))
    }

    /// The checksum covers the whole message.
    pub fn checksum_ok(&self) -> bool {
        checksum::checksum(self.buf.as_ref()) == 0
    }

    pub fn body(&self) -> &[u8] {
        &self.buf.as_ref()[Self::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmp<T> {
    pub fn set_type_code(&mut self, t: IcmpType, code: u8) {
        let b = self.buf.as_mut();
        b[0] = t.into();
        b[1] = code;
    }

    /// "Rest of header": echo id/seq, or zero (time exceeded), or next-hop MTU (frag needed).
    pub fn set_rest(&mut self, rest: u32) {
        self.buf.as_mut()[4..8].copy_from_slice(&rest.to_be_bytes());
    }

    pub fn fill_checksum(&mut self) {
        let b = self.buf.as_mut();
        set_u16(b, 2, 0);
        let c = checksum::checksum(b);
        set_u16(b, 2, c);
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
    pub fn make_echo_reply(&mut self) {
        self.set_type_code(IcmpType::EchoReply, 0);
        self.fill_checksum();
    }

    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[Self::HEADER_LEN..]
    }
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
