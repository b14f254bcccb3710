//! Ethernet II header view.

use crate::{Error, Result, get_u16, set_u16};

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    pub fn is_multicast(&self) -> bool {
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

/// The EtherType field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtherType {
    Ipv4,
    Arp,
    Ipv6,
    Vlan,
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            x => EtherType::Unknown(x),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> u16 {
        match v {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Vlan => 0x8100,
            EtherType::Unknown(x) => x,
        }
    }
}

/// A view over an Ethernet II frame (no FCS).
#[derive(Debug)]
pub struct Ethernet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ethernet<T> {
    pub const HEADER_LEN: usize = 14;

    /// Wraps `buf`, checking that it holds at least a full header.
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < Self::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Ethernet { buf })
    }

    pub fn dst(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buf.as_ref()[0..6]);
        MacAddr(m)
    }

    pub fn src(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buf.as_ref()[6..12]);
        MacAddr(m)
    }

    pub fn ethertype(&self) -> EtherType {
        get_u16(self.buf.as_ref(), 12).into()
    }

    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[Self::HEADER_LEN..]
    }

    pub fn into_inner(self) -> T {
        self.buf
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ethernet<T> {
    pub fn set_dst(&mut self, m: MacAddr) {
        self.buf.as_mut()[0..6].copy_from_slice(&m.0);
    }

    pub fn set_src(&mut self, m: MacAddr) {
        self.buf.as_mut()[6..12].copy_from_slice(&m.0);
    }

    pub fn set_ethertype(&mut self, t: EtherType) {
        set_u16(self.buf.as_mut(), 12, t.into());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[Self::HEADER_LEN..]
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
