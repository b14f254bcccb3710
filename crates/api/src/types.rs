//! The value types every boundary shares: the configuration file, the control API, the
//! command line and the benchmark harness all name an interface's MAC, a prefix, a copy mode
//! or a role with these types, and each parses, prints and (de)serializes in exactly one way.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use copy_engine::Kind as CopyEngine;
pub use wire::MacAddr;

/// A value that does not parse: what it should have been, and what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not {expected}")]
pub struct ParseError {
    pub input: String,
    /// What a valid value looks like, e.g. `an IPv4 prefix A.B.C.D/L with L in 0..=32`.
    pub expected: String,
}

impl ParseError {
    fn new(input: &str, expected: impl Into<String>) -> ParseError {
        ParseError {
            input: input.to_string(),
            expected: expected.into(),
        }
    }
}

/// Implements `Serialize`/`Deserialize` through `Display`/`FromStr`, so a value has one
/// spelling in TOML, JSON and on the command line, and a bad one gets the `FromStr` message.
macro_rules! serde_via_str {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// A closed set of keywords: `ALL`, `name()`, `Display`, `FromStr` (naming the allowed values
/// when the input is none of them) and serde through those.
macro_rules! keywords {
    ($(#[$m:meta])* $t:ident { $($(#[$vm:meta])* $v:ident = $s:literal,)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $t {
            $($(#[$vm])* $v,)+
        }

        impl $t {
            /// Every value, in the order error messages list them.
            pub const ALL: &'static [$t] = &[$($t::$v,)+];

            /// The keyword in files and on the command line.
            pub const fn name(self) -> &'static str {
                match self {
                    $($t::$v => $s,)+
                }
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $t {
            type Err = ParseError;
            fn from_str(s: &str) -> Result<Self, ParseError> {
                $t::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    ParseError::new(s, format!("one of {}", one_of($t::ALL)))
                })
            }
        }

        serde_via_str!($t);
    };
}

fn one_of<T: fmt::Display>(all: &[T]) -> String {
    all.iter()
        .map(|v| format!("\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

keywords! {
    /// The memif role of an interface.
    Role {
        /// memif primary: we listen and map the peer's memory (the switch's usual role).
        Master = "master",
        /// memif secondary: we connect and own the memory (a pod's role).
        Slave = "slave",
    }
}

keywords! {
    /// How payloads travel between memif interfaces.
    CopyMode {
        /// Copied once, peer to peer; headers go through local buffers.
        Single = "single",
        /// Copied into local buffers and out again (VPP's path).
        Two = "two",
    }
}

keywords! {
    /// A transport protocol a service balances.
    Protocol {
        Tcp = "tcp",
        Udp = "udp",
        Sctp = "sctp",
    }
}

impl Protocol {
    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Sctp => 132,
        }
    }
}

keywords! {
    /// A service backend's state, as a Kubernetes EndpointSlice's conditions say it.
    #[derive(Default)]
    BackendState {
        /// Ready: takes new flows.
        #[default]
        Ready = "ready",
        /// Serving but terminating: takes new flows only while no backend is ready
        /// (kube-proxy's fallback), and keeps its sessions.
        Terminating = "terminating",
        /// Neither: takes no new flow, keeps its sessions.
        NotReady = "not-ready",
    }
}

keywords! {
    /// How workers wait for packets.
    RxMode {
        /// Never sleep.
        Polling = "polling",
        /// Sleep on the interfaces' eventfds whenever idle.
        Interrupt = "interrupt",
        /// Poll while busy, sleep after a millisecond without packets.
        Adaptive = "adaptive",
    }
}

/// An IPv4 address with a prefix length: an interface address (`10.0.0.1/24`, host bits
/// set) or a route's destination (see [`Ipv4Prefix::network`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Ipv4Prefix {
    /// `addr/len`, or `None` when `len` is over 32.
    pub fn new(addr: Ipv4Addr, len: u8) -> Option<Ipv4Prefix> {
        (len <= 32).then_some(Ipv4Prefix { addr, len })
    }

    /// The netmask as an integer (`/24`: `0xffff_ff00`).
    pub fn mask(self) -> u32 {
        match self.len {
            0 => 0,
            l => u32::MAX << (32 - u32::from(l)),
        }
    }

    /// The same prefix with its host bits cleared.
    pub fn network(self) -> Ipv4Prefix {
        Ipv4Prefix {
            addr: Ipv4Addr::from(u32::from(self.addr) & self.mask()),
            len: self.len,
        }
    }

    pub fn contains(self, a: Ipv4Addr) -> bool {
        u32::from(a) & self.mask() == u32::from(self.addr) & self.mask()
    }
}

impl fmt::Display for Ipv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Ipv4Prefix {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new(s, "an IPv4 prefix A.B.C.D/L with L in 0..=32");
        let (a, l) = s.split_once('/').ok_or_else(bad)?;
        let addr = a.parse().map_err(|_| bad())?;
        let len = l.parse().map_err(|_| bad())?;
        Ipv4Prefix::new(addr, len).ok_or_else(bad)
    }
}

serde_via_str!(Ipv4Prefix);

/// Where a static route sends its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    /// Discard (a blackhole route).
    Drop,
    /// Forward to this next hop.
    Address(Ipv4Addr),
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Via::Drop => f.write_str("drop"),
            Via::Address(a) => a.fmt(f),
        }
    }
}

impl FromStr for Via {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        if s == "drop" {
            return Ok(Via::Drop);
        }
        s.parse()
            .map(Via::Address)
            .map_err(|_| ParseError::new(s, "a next hop A.B.C.D, or drop"))
    }
}

serde_via_str!(Via);

/// Parses a MAC address with a message that says what one looks like.
pub fn parse_mac(s: &str) -> Result<MacAddr, ParseError> {
    s.parse()
        .map_err(|_| ParseError::new(s, "a MAC address aa:bb:cc:dd:ee:ff"))
}

/// Parses an IPv4 address with a message that says what one looks like.
pub fn parse_ipv4(s: &str) -> Result<Ipv4Addr, ParseError> {
    s.parse()
        .map_err(|_| ParseError::new(s, "an IPv4 address A.B.C.D"))
}

/// `#[serde(deserialize_with)]` for an IPv4 address whose error shows the value it got.
pub(crate) fn deserialize_ipv4<'de, D: Deserializer<'de>>(d: D) -> Result<Ipv4Addr, D::Error> {
    let s = String::deserialize(d)?;
    parse_ipv4(&s).map_err(serde::de::Error::custom)
}

/// A tunnel's MAC: locally administered, from (our VTEP, VNI, remote VTEP), so that two nodes
/// with the same configuration never present one MAC to a VTEP that learns MACs (Linux). A
/// remote VTEP learns it by ARP (the tunnel answers for the network's addresses); a traffic
/// generator standing in for one takes it from here.
pub fn vxlan_tunnel_mac(src: Ipv4Addr, vni: u32, dst: Ipv4Addr) -> [u8; 6] {
    let k = (u64::from(u32::from(src)) << 32 | u64::from(u32::from(dst))) ^ u64::from(vni) << 8;
    let mut h = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 29;
    let b = h.to_be_bytes();
    [0x02, b[0], b[1], b[2], b[3], b[4]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_round_trip_and_list_the_allowed_values() {
        for &m in CopyMode::ALL {
            assert_eq!(m.name().parse::<CopyMode>().unwrap(), m);
        }
        let e = "three".parse::<CopyMode>().unwrap_err();
        assert_eq!(e.to_string(), r#""three" is not one of "single", "two""#);
        let e = "boss".parse::<Role>().unwrap_err();
        assert!(e.to_string().contains(r#""master", "slave""#), "{e}");
        assert_eq!(
            serde_json::to_string(&RxMode::Adaptive).unwrap(),
            r#""adaptive""#
        );
        let e = serde_json::from_str::<RxMode>(r#""sleepy""#).unwrap_err();
        assert!(
            e.to_string()
                .contains(r#""polling", "interrupt", "adaptive""#),
            "{e}"
        );
    }

    #[test]
    fn prefixes() {
        let p: Ipv4Prefix = "10.1.2.3/24".parse().unwrap();
        assert_eq!(p.addr, Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(p.len, 24);
        assert_eq!(p.network().to_string(), "10.1.2.0/24");
        assert!(p.contains(Ipv4Addr::new(10, 1, 2, 200)));
        assert!(!p.contains(Ipv4Addr::new(10, 1, 3, 1)));
        let all: Ipv4Prefix = "0.0.0.0/0".parse().unwrap();
        assert_eq!(all.mask(), 0);
        assert!(all.contains(Ipv4Addr::new(192, 0, 2, 1)));
        for bad in ["10.0.0.0", "10.0.0.0/33", "10.0.0/8", "x/8", "10.0.0.0/"] {
            let e = bad.parse::<Ipv4Prefix>().unwrap_err();
            assert!(e.to_string().contains("A.B.C.D/L"), "{bad}: {e}");
        }
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#""10.1.2.3/24""#,
            "prefixes keep their host bits"
        );
    }

    #[test]
    fn via_and_mac() {
        assert_eq!("drop".parse::<Via>().unwrap(), Via::Drop);
        assert_eq!(
            "10.0.0.1".parse::<Via>().unwrap(),
            Via::Address(Ipv4Addr::new(10, 0, 0, 1))
        );
        assert!("10.0.0".parse::<Via>().is_err());
        let m = parse_mac("02:00:0a:0b:0c:ff").unwrap();
        assert_eq!(m.0, [2, 0, 0x0a, 0x0b, 0x0c, 0xff]);
        assert_eq!(serde_json::to_string(&m).unwrap(), r#""02:00:0a:0b:0c:ff""#);
        for bad in [
            "02:00:0a:0b:0c",
            "02:00:0a:0b:0c:ff:01",
            "2:0:a:b:c:ff",
            "zz:00:00:00:00:00",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
        let e = serde_json::from_str::<MacAddr>(r#""nope""#).unwrap_err();
        assert!(e.to_string().contains("aa:bb:cc:dd:ee:ff"), "{e}");
    }
}
