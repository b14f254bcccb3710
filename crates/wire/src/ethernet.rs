//! Ethernet II header view.

use crate::{Error, Result, read_6, read_u16, write_u16};

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// All zeroes: the target hardware address of an ARP request.
    pub const UNSPECIFIED: MacAddr = MacAddr([0; 6]);

    /// Multicast or broadcast (the group bit of the first octet).
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl core::fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

impl core::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl core::str::FromStr for MacAddr {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for b in &mut out {
            let p = parts.next().ok_or(Error::Malformed)?;
            if p.len() != 2 {
                return Err(Error::Malformed);
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| Error::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed);
        }
        Ok(MacAddr(out))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        let s = <String as serde::Deserialize<'de>>::deserialize(d)?;
        s.parse().map_err(|_| {
            serde::de::Error::custom(format_args!(
                "{s:?} is not a MAC address (aa:bb:cc:dd:ee:ff, two hex digits per octet)"
            ))
        })
    }
}

/// The EtherType field.
///
/// `Unknown` holds values other than the named ones; `Unknown(0x0800)` is not made by
/// [`EtherType::from_raw`] and does not compare equal to `Ipv4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    Ipv4,
    Arp,
    Ipv6,
    Vlan,
    Unknown(u16),
}

impl EtherType {
    /// The EtherType for its on-the-wire value.
    #[inline]
    pub const fn from_raw(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            x => EtherType::Unknown(x),
        }
    }

    /// The on-the-wire value (a constant for the named types).
    #[inline]
    pub const fn to_raw(self) -> u16 {
        match self {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Vlan => 0x8100,
            EtherType::Unknown(x) => x,
        }
    }
}

impl From<u16> for EtherType {
    #[inline]
    fn from(v: u16) -> Self {
        EtherType::from_raw(v)
    }
}

impl From<EtherType> for u16 {
    #[inline]
    fn from(v: EtherType) -> u16 {
        v.to_raw()
    }
}

/// Byte layout of the Ethernet II header.
pub mod field {
    use crate::{Field, Rest};

    /// Destination MAC address.
    pub const DST: Field = 0..6;
    /// Source MAC address.
    pub const SRC: Field = 6..12;
    /// EtherType.
    pub const ETHERTYPE: Field = 12..14;
    /// What follows the header.
    pub const PAYLOAD: Rest = 14..;
}

/// Length of the Ethernet II header (no VLAN tag, no FCS).
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view over an Ethernet II frame (no FCS).
#[derive(Debug)]
pub struct Ethernet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ethernet<T> {
    pub const HEADER_LEN: usize = HEADER_LEN;

    /// Wraps `buf` without checking it. Every accessor panics if `buf` is shorter than
    /// [`HEADER_LEN`]: call [`check_len`](Self::check_len) first, or use
    /// [`new_checked`](Self::new_checked), unless the length is known.
    #[inline]
    pub const fn new_unchecked(buf: T) -> Self {
        Ethernet { buf }
    }

    /// Wraps `buf`, checking that it holds at least a full header.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self> {
        let v = Self::new_unchecked(buf);
        v.check_len()?;
        Ok(v)
    }

    /// `Err(Truncated)` unless the buffer holds a full header; after `Ok` no accessor panics.
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

    /// The destination MAC address as raw bytes (compare with an interface's `[u8; 6]`).
    #[inline]
    pub fn dst_bytes(&self) -> [u8; 6] {
        read_6(self.buf.as_ref(), field::DST)
    }

    /// The source MAC address as raw bytes.
    #[inline]
    pub fn src_bytes(&self) -> [u8; 6] {
        read_6(self.buf.as_ref(), field::SRC)
    }

    #[inline]
    pub fn dst(&self) -> MacAddr {
        MacAddr(self.dst_bytes())
    }

    #[inline]
    pub fn src(&self) -> MacAddr {
        MacAddr(self.src_bytes())
    }

    /// The EtherType as it is on the wire: `e.ethertype_raw() == EtherType::Ipv4.to_raw()` is
    /// one 16-bit compare.
    #[inline]
    pub fn ethertype_raw(&self) -> u16 {
        read_u16(self.buf.as_ref(), field::ETHERTYPE)
    }

    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType::from_raw(self.ethertype_raw())
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ethernet<T> {
    #[inline]
    pub fn set_dst(&mut self, m: MacAddr) {
        self.buf.as_mut()[field::DST].copy_from_slice(&m.0);
    }

    #[inline]
    pub fn set_src(&mut self, m: MacAddr) {
        self.buf.as_mut()[field::SRC].copy_from_slice(&m.0);
    }

    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.set_ethertype_raw(t.to_raw());
    }

    #[inline]
    pub fn set_ethertype_raw(&mut self, t: u16) {
        write_u16(self.buf.as_mut(), field::ETHERTYPE, t);
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[field::PAYLOAD]
    }
}

/// An Ethernet II header as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    pub src: MacAddr,
    pub dst: MacAddr,
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header (any EtherType: an `Unknown` one is kept as it is).
    pub fn parse<T: AsRef<[u8]>>(v: &Ethernet<T>) -> Result<Self> {
        v.check_len()?;
        Ok(EthernetRepr {
            src: v.src(),
            dst: v.dst(),
            ethertype: v.ethertype(),
        })
    }

    /// Length of the header this writes.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Bytes `emit` needs: the header (the payload is the caller's).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the payload is left as it is. `Err(Truncated)` (nothing written) if
    /// the view is shorter than [`HEADER_LEN`].
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Ethernet<T>) -> Result<()> {
        v.check_len()?;
        v.set_dst(self.dst);
        v.set_src(self.src);
        v.set_ethertype(self.ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_fixture() {
        let f = [
            0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00, 0x45, 0x00, //
        ];
        let e = Ethernet::new_checked(&f[..]).unwrap();
        assert_eq!(e.dst(), "02:00:00:00:00:01".parse().unwrap());
        assert_eq!(e.src().to_string(), "02:00:00:00:00:02");
        assert_eq!(e.ethertype(), EtherType::Ipv4);
        assert_eq!(e.payload(), &[0x45, 0x00]);
        assert_eq!(
            Ethernet::new_checked(&f[..13]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn unknown_ethertype_round_trips() {
        let mut f = [0u8; 14];
        let mut e = Ethernet::new_checked(&mut f[..]).unwrap();
        e.set_ethertype(EtherType::Unknown(0x88b5));
        assert_eq!(e.ethertype(), EtherType::Unknown(0x88b5));
        assert!("02:00:00:00:00".parse::<MacAddr>().is_err());
        assert!("02:00:00:00:00:00:00".parse::<MacAddr>().is_err());
    }
}
