//! A session's protocol states and their idle timeouts (the table in the crate's
//! documentation says why each is what it is).

/// A session's protocol state, each with its own idle timeout ([`Timeouts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// TCP with no packet seen in the reverse direction yet.
    TcpEmbryonic,
    /// TCP with replies seen, no FIN or RST.
    TcpEstablished,
    /// TCP after a FIN in either direction or an RST.
    TcpClosing,
    /// UDP (and any protocol but TCP and ICMP) with no reply seen.
    UdpUnreplied,
    UdpReplied,
    Icmp,
}

/// Idle timeouts in milliseconds of the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub tcp_embryonic: u32,
    pub tcp_established: u32,
    pub tcp_closing: u32,
    pub udp_unreplied: u32,
    pub udp_replied: u32,
    pub icmp: u32,
}

impl Default for Timeouts {
    /// The reasons are in the table of the crate's documentation.
    fn default() -> Timeouts {
        Timeouts {
            tcp_embryonic: 10_000,
            tcp_established: 7_440_000,
            tcp_closing: 30_000,
            udp_unreplied: 30_000,
            udp_replied: 120_000,
            icmp: 30_000,
        }
    }
}

impl Timeouts {
    pub const fn of(&self, s: State) -> u32 {
        match s {
            State::TcpEmbryonic => self.tcp_embryonic,
            State::TcpEstablished => self.tcp_established,
            State::TcpClosing => self.tcp_closing,
            State::UdpUnreplied => self.udp_unreplied,
            State::UdpReplied => self.udp_replied,
            State::Icmp => self.icmp,
        }
    }

    /// The largest timeout: idle times are compared as signed 32-bit differences, so every
    /// timeout must stay under 2^31 ms (24 days).
    pub(crate) fn max(&self) -> u32 {
        [
            self.tcp_embryonic,
            self.tcp_established,
            self.tcp_closing,
            self.udp_unreplied,
            self.udp_replied,
            self.icmp,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }
}
