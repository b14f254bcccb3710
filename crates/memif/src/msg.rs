//! memif control messages: exactly 128 bytes, little-endian, packed (FD.io VPP's memif.h).
//!
//! Parsing is two-step, as in rust-vmm's vhost: [`Msg::parse`] checks size and type, then
//! reads the type's exact `repr(C)` struct ([`wire`]) and converts it into owned values;
//! whether a message is acceptable *now* is the handshake's business. [`Msg::encode`] builds
//! the same struct and takes its bytes, so every field offset is written once, in [`wire`].

/// Protocol version 2.0; INIT must carry exactly this.
pub const VERSION: u16 = 0x0200;
/// The size of every control message.
pub const MSG_LEN: usize = 128;
/// The ring cookie, `MEMIF_COOKIE`.
pub const COOKIE: u32 = 0x03E3_1F20;
/// Highest ring log2 size anyone supports.
pub const MAX_LOG2_RING_SIZE: u8 = 14;
/// `MEMIF_MSG_ADD_RING_FLAG_S2M`.
pub const ADD_RING_FLAG_S2M: u16 = 1;

/// A fixed-size NUL-padded string field. The peer may fill every byte; nothing here assumes a
/// terminator.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FixedStr<const N: usize>(pub [u8; N]);

impl<const N: usize> FixedStr<N> {
    /// Encodes `s`, truncated to `N - 1` bytes so that the field stays NUL-terminated as
    /// every C peer expects.
    pub fn new(s: &str) -> Self {
        let mut b = [0u8; N];
        let n = s.len().min(N - 1);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        FixedStr(b)
    }

    /// The bytes before the first NUL (all `N` if there is none).
    pub fn as_bytes(&self) -> &[u8] {
        let end = self.0.iter().position(|&c| c == 0).unwrap_or(N);
        &self.0[..end]
    }

    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    /// Printable form; bytes that are not UTF-8 become U+FFFD, control characters are escaped.
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(self.as_bytes())
            .chars()
            .flat_map(char::escape_debug)
            .collect()
    }
}

impl<const N: usize> Default for FixedStr<N> {
    fn default() -> Self {
        FixedStr([0; N])
    }
}

impl<const N: usize> core::fmt::Debug for FixedStr<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", self.to_string_lossy())
    }
}

/// Interface mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ethernet,
    Ip,
    PuntInject,
    Unknown(u8),
}

impl From<u8> for Mode {
    fn from(v: u8) -> Self {
        match v {
            0 => Mode::Ethernet,
            1 => Mode::Ip,
            2 => Mode::PuntInject,
            x => Mode::Unknown(x),
        }
    }
}

impl From<Mode> for u8 {
    fn from(m: Mode) -> u8 {
        match m {
            Mode::Ethernet => 0,
            Mode::Ip => 1,
            Mode::PuntInject => 2,
            Mode::Unknown(x) => x,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub name: FixedStr<32>,
    pub min_version: u16,
    pub max_version: u16,
    /// Highest region *index* accepted.
    pub max_region: u16,
    /// Highest M2S ring *index* accepted.
    pub max_m2s_ring: u16,
    /// Highest S2M ring *index* accepted.
    pub max_s2m_ring: u16,
    pub max_log2_ring_size: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Init {
    pub version: u16,
    pub id: u32,
    pub mode: Mode,
    pub secret: FixedStr<24>,
    pub name: FixedStr<32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddRing {
    pub flags: u16,
    pub index: u16,
    pub region: u16,
    pub offset: u32,
    pub log2_ring_size: u8,
    pub private_hdr_size: u16,
}

impl AddRing {
    pub fn is_s2m(&self) -> bool {
        self.flags & ADD_RING_FLAG_S2M != 0
    }
}

use zerocopy::FromBytes;

/// One decoded control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    Ack,
    Hello(Hello),
    Init(Init),
    AddRegion { index: u16, size: u64 },
    AddRing(AddRing),
    Connect { if_name: FixedStr<32> },
    Connected { if_name: FixedStr<32> },
    Disconnect { code: u32, reason: FixedStr<96> },
}

/// Why bytes are not a control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MsgError {
    #[error("malformed message: {0} bytes instead of 128")]
    BadSize(usize),
    #[error("unknown message type {0:#x}")]
    UnknownType(u16),
}

impl Msg {
    pub fn type_code(&self) -> u16 {
        match self {
            Msg::Ack => wire::ACK,
            Msg::Hello(_) => wire::HELLO,
            Msg::Init(_) => wire::INIT,
            Msg::AddRegion { .. } => wire::ADD_REGION,
            Msg::AddRing(_) => wire::ADD_RING,
            Msg::Connect { .. } => wire::CONNECT,
            Msg::Connected { .. } => wire::CONNECTED,
            Msg::Disconnect { .. } => wire::DISCONNECT,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Msg::Ack => "ACK",
            Msg::Hello(_) => "HELLO",
            Msg::Init(_) => "INIT",
            Msg::AddRegion { .. } => "ADD_REGION",
            Msg::AddRing(_) => "ADD_RING",
            Msg::Connect { .. } => "CONNECT",
            Msg::Connected { .. } => "CONNECTED",
            Msg::Disconnect { .. } => "DISCONNECT",
        }
    }

    /// Whether this message carries one file descriptor.
    pub fn carries_fd(&self) -> bool {
        matches!(self, Msg::AddRegion { .. } | Msg::AddRing(_))
    }

    /// Decodes a received datagram. Unused bytes are ignored (VPP does not clear them).
    ///
    /// Step one checks the size and the type; step two reads the type's [`wire`] struct from
    /// the body and converts it into owned values. No byte offset is written here: they are the
    /// wire structs' field offsets, asserted against memif.h.
    pub fn parse(b: &[u8]) -> Result<Msg, MsgError> {
        let m = wire::Msg::ref_from_bytes(b).map_err(|_| MsgError::BadSize(b.len()))?;
        Ok(match m.msg_type.get() {
            wire::ACK => Msg::Ack,
            wire::HELLO => Msg::Hello(m.body::<wire::Hello>().into()),
            wire::INIT => Msg::Init(m.body::<wire::Init>().into()),
            wire::ADD_REGION => {
                let r = m.body::<wire::AddRegion>();
                Msg::AddRegion {
                    index: r.index.get(),
                    size: r.size.get(),
                }
            }
            wire::ADD_RING => Msg::AddRing(m.body::<wire::AddRing>().into()),
            wire::CONNECT => Msg::Connect {
                if_name: FixedStr(m.body::<wire::Connect>().if_name),
            },
            wire::CONNECTED => Msg::Connected {
                if_name: FixedStr(m.body::<wire::Connected>().if_name),
            },
            wire::DISCONNECT => {
                let d = m.body::<wire::Disconnect>();
                Msg::Disconnect {
                    code: d.code.get(),
                    reason: FixedStr(d.string),
                }
            }
            t => return Err(MsgError::UnknownType(t)),
        })
    }

    /// Encodes into the 128-byte wire form, unused bytes zero: the type's [`wire`] struct,
    /// framed by [`wire::Msg::new`].
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let t = self.type_code();
        let m = match self {
            Msg::Ack => wire::Msg::new(t, &()),
            Msg::Hello(h) => wire::Msg::new(t, &wire::Hello::from(h)),
            Msg::Init(i) => wire::Msg::new(t, &wire::Init::from(i)),
            Msg::AddRegion { index, size } => wire::Msg::new(
                t,
                &wire::AddRegion {
                    index: (*index).into(),
                    size: (*size).into(),
                },
            ),
            Msg::AddRing(r) => wire::Msg::new(t, &wire::AddRing::from(r)),
            Msg::Connect { if_name } => wire::Msg::new(t, &wire::Connect { if_name: if_name.0 }),
            Msg::Connected { if_name } => {
                wire::Msg::new(t, &wire::Connected { if_name: if_name.0 })
            }
            Msg::Disconnect { code, reason } => wire::Msg::new(
                t,
                &wire::Disconnect {
                    code: (*code).into(),
                    string: reason.0,
                },
            ),
        };
        zerocopy::transmute!(m)
    }

    /// A DISCONNECT carrying `reason` (truncated to 95 bytes).
    pub fn disconnect(reason: &str) -> Msg {
        Msg::Disconnect {
            code: 0,
            reason: FixedStr::new(reason),
        }
    }
}

/// The wire layout: `memif_msg_t` and its bodies from memif.h, as `repr(C)` structs whose
/// fields all have alignment 1 (so, like the C `__attribute__((packed))`, there is no padding,
/// which the `IntoBytes` derive proves). Multi-byte fields are little-endian: the protocol is
/// host-native, every host memif runs on is little-endian, and gomemif hard-codes it.
/// Sizes and absolute offsets are asserted below against memif.h's structs (their `offsetof`).
pub mod wire {
    use zerocopy::byteorder::little_endian::{U16, U32, U64};
    use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

    pub const ACK: u16 = 1;
    pub const HELLO: u16 = 2;
    pub const INIT: u16 = 3;
    pub const ADD_REGION: u16 = 4;
    pub const ADD_RING: u16 = 5;
    pub const CONNECT: u16 = 6;
    pub const CONNECTED: u16 = 7;
    pub const DISCONNECT: u16 = 8;

    /// Bytes after the type: the body union (100 bytes, DISCONNECT's) and the padding that
    /// `aligned(128)` adds.
    pub const BODY_LEN: usize = super::MSG_LEN - 2;

    /// `memif_msg_t`: the type, then the body of that type at offset 2.
    #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    pub struct Msg {
        pub msg_type: U16,
        pub body: [u8; BODY_LEN],
    }

    impl Msg {
        /// Frames `body` as a message of type `msg_type`, the rest zero.
        pub fn new<T: IntoBytes + Immutable>(msg_type: u16, body: &T) -> Msg {
            const { assert!(size_of::<T>() <= BODY_LEN) };
            let mut m = Msg {
                msg_type: msg_type.into(),
                body: [0; BODY_LEN],
            };
            m.body[..size_of::<T>()].copy_from_slice(body.as_bytes());
            m
        }

        /// The body read as `T` (a copy: the struct's fields are unaligned).
        pub fn body<T: FromBytes + KnownLayout + Immutable>(&self) -> T {
            const { assert!(size_of::<T>() <= BODY_LEN) };
            // The assertion above makes this infallible; the fallback is never taken and
            // keeps a panic out of the parser.
            T::read_from_prefix(&self.body).map_or_else(|_| T::new_zeroed(), |(t, _)| t)
        }
    }

    /// `memif_msg_hello_t`.
    #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    pub struct Hello {
        pub name: [u8; 32],
        pub min_version: U16,
        pub max_version: U16,
        pub max_region: U16,
        pub max_m2s_ring: U16,
        pub max_s2m_ring: U16,
        pub max_log2_ring_size: u8,
    }

    /// `memif_msg_init_t`.
    #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    pub struct Init {
        pub version: U16,
        pub id: U32,
        pub mode: u8,
        pub secret: [u8; 24],
        pub name: [u8; 32],
    }

    /// `memif_msg_add_region_t` (the region fd travels beside it).
    #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    pub struct AddRegion {
        pub index: U16,
        pub size: U64,
    }

    /// `memif_msg_add_ring_t` (the ring's eventfd travels beside it).
    #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    pub struct AddRing {
        pub flags: U16,
        pub index: U16,
        pub region: U16,
        pub offset: U32,
        pub log2_ring_size: u8,
        pub private_hdr_size: U16,
    }

    /// `memif_msg_connect_t`.
    #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    pub struct Connect {
        pub if_name: [u8; 32],
    }

    /// `memif_msg_connected_t`.
    #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    pub struct Connected {
        pub if_name: [u8; 32],
    }

    /// `memif_msg_disconnect_t`.
    #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    pub struct Disconnect {
        pub code: U32,
        pub string: [u8; 96],
    }

    use core::mem::offset_of;

    // Sizes from memif.h, offsets as absolute positions in the 128-byte message (§1.3).
    const _: () = assert!(size_of::<Msg>() == super::MSG_LEN);
    const _: () = assert!(offset_of!(Msg, body) == 2);
    const B: usize = offset_of!(Msg, body);

    const _: () = assert!(size_of::<Hello>() == 43);
    const _: () = assert!(B + offset_of!(Hello, name) == 2);
    const _: () = assert!(B + offset_of!(Hello, min_version) == 34);
    const _: () = assert!(B + offset_of!(Hello, max_version) == 36);
    const _: () = assert!(B + offset_of!(Hello, max_region) == 38);
    const _: () = assert!(B + offset_of!(Hello, max_m2s_ring) == 40);
    const _: () = assert!(B + offset_of!(Hello, max_s2m_ring) == 42);
    const _: () = assert!(B + offset_of!(Hello, max_log2_ring_size) == 44);

    const _: () = assert!(size_of::<Init>() == 63);
    const _: () = assert!(B + offset_of!(Init, version) == 2);
    const _: () = assert!(B + offset_of!(Init, id) == 4);
    const _: () = assert!(B + offset_of!(Init, mode) == 8);
    const _: () = assert!(B + offset_of!(Init, secret) == 9);
    const _: () = assert!(B + offset_of!(Init, name) == 33);

    const _: () = assert!(size_of::<AddRegion>() == 10);
    const _: () = assert!(B + offset_of!(AddRegion, index) == 2);
    const _: () = assert!(B + offset_of!(AddRegion, size) == 4);

    const _: () = assert!(size_of::<AddRing>() == 13);
    const _: () = assert!(B + offset_of!(AddRing, flags) == 2);
    const _: () = assert!(B + offset_of!(AddRing, index) == 4);
    const _: () = assert!(B + offset_of!(AddRing, region) == 6);
    const _: () = assert!(B + offset_of!(AddRing, offset) == 8);
    const _: () = assert!(B + offset_of!(AddRing, log2_ring_size) == 12);
    const _: () = assert!(B + offset_of!(AddRing, private_hdr_size) == 13);

    const _: () = assert!(size_of::<Connect>() == 32);
    const _: () = assert!(size_of::<Connected>() == 32);
    const _: () = assert!(B + offset_of!(Connect, if_name) == 2);
    const _: () = assert!(B + offset_of!(Connected, if_name) == 2);

    // The largest body: it ends at byte 102, and `aligned(128)` pads the rest.
    const _: () = assert!(size_of::<Disconnect>() == 100);
    const _: () = assert!(B + offset_of!(Disconnect, code) == 2);
    const _: () = assert!(B + offset_of!(Disconnect, string) == 6);
}

impl From<wire::Hello> for Hello {
    fn from(w: wire::Hello) -> Hello {
        Hello {
            name: FixedStr(w.name),
            min_version: w.min_version.get(),
            max_version: w.max_version.get(),
            max_region: w.max_region.get(),
            max_m2s_ring: w.max_m2s_ring.get(),
            max_s2m_ring: w.max_s2m_ring.get(),
            max_log2_ring_size: w.max_log2_ring_size,
        }
    }
}

impl From<&Hello> for wire::Hello {
    fn from(h: &Hello) -> wire::Hello {
        wire::Hello {
            name: h.name.0,
            min_version: h.min_version.into(),
            max_version: h.max_version.into(),
            max_region: h.max_region.into(),
            max_m2s_ring: h.max_m2s_ring.into(),
            max_s2m_ring: h.max_s2m_ring.into(),
            max_log2_ring_size: h.max_log2_ring_size,
        }
    }
}

impl From<wire::Init> for Init {
    fn from(w: wire::Init) -> Init {
        Init {
            version: w.version.get(),
            id: w.id.get(),
            mode: w.mode.into(),
            secret: FixedStr(w.secret),
            name: FixedStr(w.name),
        }
    }
}

impl From<&Init> for wire::Init {
    fn from(i: &Init) -> wire::Init {
        wire::Init {
            version: i.version.into(),
            id: i.id.into(),
            mode: i.mode.into(),
            secret: i.secret.0,
            name: i.name.0,
        }
    }
}

impl From<wire::AddRing> for AddRing {
    fn from(w: wire::AddRing) -> AddRing {
        AddRing {
            flags: w.flags.get(),
            index: w.index.get(),
            region: w.region.get(),
            offset: w.offset.get(),
            log2_ring_size: w.log2_ring_size,
            private_hdr_size: w.private_hdr_size.get(),
        }
    }
}

impl From<&AddRing> for wire::AddRing {
    fn from(r: &AddRing) -> wire::AddRing {
        wire::AddRing {
            flags: r.flags.into(),
            index: r.index.into(),
            region: r.region.into(),
            offset: r.offset.into(),
            log2_ring_size: r.log2_ring_size,
            private_hdr_size: r.private_hdr_size.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HELLO as VPP sends it, at the offsets of memif.h's `memif_msg_hello_t`.
    #[test]
    fn hello_fixture_offsets() {
        let mut b = [0u8; 128];
        b[0] = 2;
        b[2..9].copy_from_slice(b"VPP 25.");
        b[34..36].copy_from_slice(&0x0200u16.to_le_bytes());
        b[36..38].copy_from_slice(&0x0200u16.to_le_bytes());
        b[38..40].copy_from_slice(&256u16.to_le_bytes());
        b[40..42].copy_from_slice(&256u16.to_le_bytes());
        b[42..44].copy_from_slice(&255u16.to_le_bytes());
        b[44] = 14;
        let Msg::Hello(h) = Msg::parse(&b).unwrap() else {
            panic!("not hello")
        };
        assert_eq!(h.name.to_string_lossy(), "VPP 25.");
        assert_eq!(
            (
                h.max_region,
                h.max_m2s_ring,
                h.max_s2m_ring,
                h.max_log2_ring_size
            ),
            (256, 256, 255, 14)
        );
        assert_eq!(Msg::Hello(h).encode(), b);
    }

    #[test]
    fn add_ring_fixture_offsets() {
        let r = AddRing {
            flags: 1,
            index: 3,
            region: 2,
            offset: 16512,
            log2_ring_size: 10,
            private_hdr_size: 0,
        };
        let b = Msg::AddRing(r).encode();
        assert_eq!(&b[0..2], &[5, 0]);
        assert_eq!(&b[8..12], &16512u32.to_le_bytes());
        assert_eq!(b[12], 10);
        assert_eq!(Msg::parse(&b).unwrap(), Msg::AddRing(r));
    }

    #[test]
    fn every_message_round_trips() {
        let msgs = [
            Msg::Ack,
            Msg::Init(Init {
                version: VERSION,
                id: 0xdead_beef,
                mode: Mode::Ip,
                secret: FixedStr::new("s3cret"),
                name: FixedStr::new("pod"),
            }),
            Msg::AddRegion {
                index: 1,
                size: 1 << 33,
            },
            Msg::Connect {
                if_name: FixedStr::new("memif0/1"),
            },
            Msg::Connected {
                if_name: FixedStr::new("x"),
            },
            Msg::disconnect("incorrect secret"),
        ];
        for m in msgs {
            assert_eq!(Msg::parse(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn rejects_wrong_size_and_type() {
        assert_eq!(Msg::parse(&[0u8; 127]), Err(MsgError::BadSize(127)));
        assert_eq!(Msg::parse(&[0u8; 129]), Err(MsgError::BadSize(129)));
        assert_eq!(Msg::parse(&[0u8; 128]), Err(MsgError::UnknownType(0)));
        let mut b = [0u8; 128];
        b[0] = 9;
        assert_eq!(Msg::parse(&b), Err(MsgError::UnknownType(9)));
    }

    #[test]
    fn unterminated_strings_are_bounded() {
        let s = FixedStr::<24>([b'a'; 24]);
        assert_eq!(s.as_bytes().len(), 24);
        assert_eq!(FixedStr::<24>::new(&"b".repeat(40)).as_bytes().len(), 23);
        assert_eq!(
            FixedStr::<8>([0xff, b'\n', 0, 0, 0, 0, 0, 0]).to_string_lossy(),
            "\u{fffd}\\n"
        );
    }
}
