//! VXLAN header view (RFC 7348, "Virtual eXtensible Local Area Network (VXLAN): A Framework
//! for Overlaying Virtualized Layer 2 Networks over Layer 3 Networks").
//!
//! Eight bytes after the outer UDP header: flags (only the I bit, "VNI valid", is defined), 24
//! reserved bits, the 24-bit VNI, 8 reserved bits. The inner Ethernet frame follows. RFC 7348
//! §5: the I flag must be set; reserved fields are zero when sent and ignored when received.

use crate::{Error, Result};

/// Byte layout of the VXLAN header.
pub mod field {
    use crate::{Field, Rest};

    pub const FLAGS: usize = 0;
    /// Reserved, zero when sent, ignored when received.
    pub const RESERVED_1: Field = 1..4;
    /// The VNI (24 bits, big-endian) and a reserved byte.
    pub const VNI: Field = 4..7;
    pub const RESERVED_2: usize = 7;
    /// The inner Ethernet frame.
    pub const PAYLOAD: Rest = 8..;
}

/// Length of the VXLAN header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// The IANA-assigned UDP destination port (RFC 7348 §5).
pub const UDP_PORT: u16 = 4789;

/// The I flag: the VNI field is valid.
pub const FLAG_I: u8 = 0x08;

/// The largest VNI (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// Bytes VXLAN adds in front of an inner Ethernet frame over IPv4 without options: outer
/// Ethernet (14), IPv4 (20), UDP (8), VXLAN (8).
pub const IPV4_OVERHEAD: usize = 14 + 20 + 8 + HEADER_LEN;

/// A view over a VXLAN header and the inner frame after it.
#[derive(Debug)]
pub struct Vxlan<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Vxlan<T> {
    pub const HEADER_LEN: usize = HEADER_LEN;

    /// Wraps `buf` without checking it; the accessors panic if it is shorter than
    /// [`HEADER_LEN`].
    #[inline]
    pub const fn new_unchecked(buf: T) -> Self {
        Vxlan { buf }
    }

    /// Wraps `buf` after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self> {
        let v = Self::new_unchecked(buf);
        v.check_len()?;
        Ok(v)
    }

    /// `Truncated` if the buffer is shorter than the header. After `Ok` no accessor panics.
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

    #[inline]
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS]
    }

    /// Whether the I flag says the VNI is valid.
    #[inline]
    pub fn vni_valid(&self) -> bool {
        self.flags() & FLAG_I != 0
    }

    /// The 24-bit VNI.
    #[inline]
    pub fn vni(&self) -> u32 {
        let b = &self.buf.as_ref()[field::VNI];
        u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2])
    }

    /// The inner Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Vxlan<T> {
    #[inline]
    pub fn set_flags(&mut self, f: u8) {
        self.buf.as_mut()[field::FLAGS] = f;
    }

    /// Stores the low 24 bits of `vni`.
    #[inline]
    pub fn set_vni(&mut self, vni: u32) {
        let b = &mut self.buf.as_mut()[field::VNI];
        b.copy_from_slice(&vni.to_be_bytes()[1..]);
    }

    /// The inner Ethernet frame.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[field::PAYLOAD]
    }
}

/// A VXLAN header as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanRepr {
    pub vni: u32,
}

impl VxlanRepr {
    /// Reads the header: `Truncated` if it is short, `Malformed` if the I flag is clear (RFC
    /// 7348: such a packet carries no VNI). Reserved bits are ignored, as the RFC asks.
    pub fn parse<T: AsRef<[u8]>>(v: &Vxlan<T>) -> Result<Self> {
        v.check_len()?;
        if !v.vni_valid() {
            return Err(Error::Malformed);
        }
        Ok(VxlanRepr { vni: v.vni() })
    }

    /// Writes the header: I flag set, reserved fields zero. `Malformed` (and nothing written)
    /// if the VNI does not fit 24 bits, `Truncated` if the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Vxlan<T>) -> Result<()> {
        if self.vni > MAX_VNI {
            return Err(Error::Malformed);
        }
        v.check_len()?;
        let b = v.buf.as_mut();
        b[..HEADER_LEN].fill(0);
        v.set_flags(FLAG_I);
        v.set_vni(self.vni);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VNI 56 (0x000038) with the I flag, then the first bytes of an inner frame.
    const VNI_56: [u8; 12] = [
        0x08, 0x00, 0x00, 0x00, // flags: I; reserved
        0x00, 0x00, 0x38, 0x00, // VNI 56; reserved
        0xff, 0xff, 0xff, 0xff, // inner destination MAC begins
    ];

    #[test]
    fn parse_fixture() {
        let v = Vxlan::new_checked(&VNI_56[..]).unwrap();
        assert!(v.vni_valid());
        assert_eq!(v.vni(), 56);
        assert_eq!(v.payload(), &[0xff; 4]);
        assert_eq!(VxlanRepr::parse(&v), Ok(VxlanRepr { vni: 56 }));
    }

    #[test]
    fn emit_fixture_and_largest_vni() {
        let mut b = [0xaau8; 12];
        VxlanRepr { vni: 56 }
            .emit(&mut Vxlan::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(&b[..8], &VNI_56[..8]);
        assert_eq!(&b[8..], &[0xaa; 4], "the inner frame is not touched");
        VxlanRepr { vni: MAX_VNI }
            .emit(&mut Vxlan::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(&b[..8], &[0x08, 0, 0, 0, 0xff, 0xff, 0xff, 0]);
    }

    #[test]
    fn bad_headers_are_refused() {
        assert_eq!(
            Vxlan::new_checked(&VNI_56[..7]).unwrap_err(),
            Error::Truncated
        );
        let mut no_i = VNI_56;
        no_i[0] = 0x00;
        assert_eq!(
            VxlanRepr::parse(&Vxlan::new_unchecked(&no_i[..])),
            Err(Error::Malformed)
        );
        // Reserved bits set by a sender are ignored on receive.
        let mut reserved = VNI_56;
        reserved[0] |= 0xf7;
        reserved[1] = 0xff;
        reserved[7] = 0xff;
        assert_eq!(
            VxlanRepr::parse(&Vxlan::new_unchecked(&reserved[..])),
            Ok(VxlanRepr { vni: 56 })
        );
        let mut b = [0x55u8; 8];
        assert_eq!(
            VxlanRepr { vni: MAX_VNI + 1 }.emit(&mut Vxlan::new_unchecked(&mut b[..])),
            Err(Error::Malformed)
        );
        assert_eq!(b, [0x55; 8], "nothing written on error");
        let mut short = [0u8; 7];
        assert_eq!(
            VxlanRepr { vni: 1 }.emit(&mut Vxlan::new_unchecked(&mut short[..])),
            Err(Error::Truncated)
        );
    }
}
