//! memif control messages: exactly 128 bytes, little-endian, packed (reference/memif.md §1.3).
//!
//! Parsing is two-step, as in rust-vmm's vhost: [`Msg::parse`] checks size and type and
//! decodes fields; whether a message is acceptable *now* is the handshake's business.

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

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}
fn str_at<const N: usize>(b: &[u8], at: usize) -> FixedStr<N> {
    let mut x = [0u8; N];
    x.copy_from_slice(&b[at..at + N]);
    FixedStr(x)
}

impl Msg {
    pub fn type_code(&self) -> u16 {
        match self {
            Msg::Ack => 1,
            Msg::Hello(_) => 2,
            Msg::Init(_) => 3,
            Msg::AddRegion { .. } => 4,
            Msg::AddRing(_) => 5,
            Msg::Connect { .. } => 6,
            Msg::Connected { .. } => 7,
            Msg::Disconnect { .. } => 8,
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
    pub fn parse(b: &[u8]) -> Result<Msg, MsgError> {
        if b.len() != MSG_LEN {
            return Err(MsgError::BadSize(b.len()));
        }
        Ok(match u16_at(b, 0) {
            1 => Msg::Ack,
            2 => Msg::Hello(Hello {
                name: str_at(b, 2),
                min_version: u16_at(b, 34),
                max_version: u16_at(b, 36),
                max_region: u16_at(b, 38),
                max_m2s_ring: u16_at(b, 40),
                max_s2m_ring: u16_at(b, 42),
                max_log2_ring_size: b[44],
            }),
            3 => Msg::Init(Init {
                version: u16_at(b, 2),
                id: u32_at(b, 4),
                mode: b[8].into(),
                secret: str_at(b, 9),
                name: str_at(b, 33),
            }),
            4 => Msg::AddRegion {
                index: u16_at(b, 2),
                size: u64_at(b, 4),
            },
            5 => Msg::AddRing(AddRing {
                flags: u16_at(b, 2),
                index: u16_at(b, 4),
                region: u16_at(b, 6),
                offset: u32_at(b, 8),
                log2_ring_size: b[12],
                private_hdr_size: u16_at(b, 13),
            }),
            6 => Msg::Connect {
                if_name: str_at(b, 2),
            },
            7 => Msg::Connected {
                if_name: str_at(b, 2),
            },
            8 => Msg::Disconnect {
                code: u32_at(b, 2),
                reason: str_at(b, 6),
            },
            t => return Err(MsgError::UnknownType(t)),
        })
    }

    /// Encodes into the 128-byte wire form, unused bytes zero.
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0..2].copy_from_slice(&self.type_code().to_le_bytes());
        let put16 = |b: &mut [u8; MSG_LEN], at: usize, v: u16| {
            b[at..at + 2].copy_from_slice(&v.to_le_bytes())
        };
        match self {
            Msg::Ack => {}
            Msg::Hello(h) => {
                b[2..34].copy_from_slice(&h.name.0);
                put16(&mut b, 34, h.min_version);
                put16(&mut b, 36, h.max_version);
                put16(&mut b, 38, h.max_region);
                put16(&mut b, 40, h.max_m2s_ring);
                put16(&mut b, 42, h.max_s2m_ring);
                b[44] = h.max_log2_ring_size;
            }
            Msg::Init(i) => {
                put16(&mut b, 2, i.version);
                b[4..8].copy_from_slice(&i.id.to_le_bytes());
                b[8] = i.mode.into();
                b[9..33].copy_from_slice(&i.secret.0);
                b[33..65].copy_from_slice(&i.name.0);
            }
            Msg::AddRegion { index, size } => {
                put16(&mut b, 2, *index);
                b[4..12].copy_from_slice(&size.to_le_bytes());
            }
            Msg::AddRing(r) => {
                put16(&mut b, 2, r.flags);
                put16(&mut b, 4, r.index);
                put16(&mut b, 6, r.region);
                b[8..12].copy_from_slice(&r.offset.to_le_bytes());
                b[12] = r.log2_ring_size;
                put16(&mut b, 13, r.private_hdr_size);
            }
            Msg::Connect { if_name } | Msg::Connected { if_name } => {
                b[2..34].copy_from_slice(&if_name.0)
            }
            Msg::Disconnect { code, reason } => {
                b[2..6].copy_from_slice(&code.to_le_bytes());
                b[6..102].copy_from_slice(&reason.0);
            }
        }
        b
    }

    /// A DISCONNECT carrying `reason` (truncated to 95 bytes).
    pub fn disconnect(reason: &str) -> Msg {
        Msg::Disconnect {
            code: 0,
            reason: FixedStr::new(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HELLO as VPP sends it, offsets from reference/memif.md §1.3.
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
