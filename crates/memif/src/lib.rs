//! memif, protocol 2.0: the FD.io shared-memory packet interface, in both roles.
//!
//! This crate owns every fd, socket and shared mapping of a memif interface: the control
//! channel ([`sock`]), the handshake in both roles ([`primary::Listener`],
//! [`secondary::Client`]), the regions ([`shm`]), the rings ([`ring`]), the data path
//! ([`queue`]) and the device's graph nodes, `memif-input` and `memif-output`
//! ([`nodes`]). It is wire-compatible with VPP, libmemif, DPDK `net_memif` and gomemif.
//! [`abtime`] times its receive loops' prefetch on and off for measurements (a feature, off
//! by default).
//!
//! The secondary (slave) creates all memory; the primary (master) maps it. Everything the peer
//! wrote is hostile: control messages are parsed into owned values and checked against the
//! handshake state; region fds must be sealed and as large as announced before we map them;
//! ring placement is proved once; every descriptor is read once into a local copy and checked
//! in u64 arithmetic (a receive loop also peeks at the offset of one a few slots on, used only
//! as a prefetch hint that cannot leave the mapping); peer indices are clamped to the ring
//! size. A peer that breaks the protocol is disconnected with a reason it receives in
//! DISCONNECT and we log and count. This crate never panics on peer input and never blocks on
//! the data path.
//!
//! It must never parse packets (that is `wire`) or make forwarding decisions.

pub mod abtime;
pub mod budget;
mod fair;
pub mod msg;
pub mod nodes;
pub mod primary;
pub mod queue;
pub mod ring;
pub mod secondary;
pub mod shm;
pub mod sock;
pub mod unblock;

pub use budget::{RegionBudget, default_region_budget};
pub use msg::Mode;
pub use primary::{Listener, PrimaryQueues};
pub use queue::{
    LinkDown, PacketWriter, PrimaryRx, PrimaryTx, QueueStats, RxPacket, SecondaryRx, SecondaryTx,
    TxRun,
};
pub use ring::RingLayout;
pub use secondary::{Client, SecondaryQueues};
pub use shm::SealPolicy;
pub use sock::SocketPath;

use std::time::Duration;

/// One memif interface, in either role.
#[derive(Debug, Clone)]
pub struct InterfaceConfig {
    /// Interface id, unique per socket and role.
    pub id: u32,
    /// Our name for it, sent in CONNECT/CONNECTED (31 bytes at most go on the wire).
    pub name: String,
    /// Shared secret (23 bytes at most); `None` accepts peers with any or no secret.
    pub secret: Option<String>,
    pub mode: Mode,
    /// Secondary: S2M rings to create. Primary: the most S2M rings to accept.
    pub s2m_rings: u16,
    /// Secondary: M2S rings to create. Primary: the most M2S rings to accept.
    pub m2s_rings: u16,
    /// Secondary: ring size (2^n). Primary: the largest accepted (advertised in HELLO).
    pub log2_ring_size: u8,
    /// Secondary: bytes per shared buffer (not negotiated; the primary reads capacities from
    /// descriptors).
    pub buffer_size: u32,
    /// Ring header layout: must match the peer's build (64 on x86-64).
    pub layout: RingLayout,
    /// Primary: largest packet accepted from the peer, chains included.
    pub max_frame: u32,
    /// Primary: whether peer regions must be sealed against shrinking.
    pub seals: SealPolicy,
    /// Primary: the most regions a peer may add.
    pub max_regions: u16,
    /// Primary: the most bytes a peer's regions may take together (each is mapped whole).
    pub max_mapped: u64,
    /// Secondary: delay between connection attempts.
    pub reconnect_interval: Duration,
    /// Both: a handshake that takes longer than this is abandoned.
    pub handshake_timeout: Duration,
}

impl Default for InterfaceConfig {
    fn default() -> Self {
        InterfaceConfig {
            id: 0,
            name: "memif0".into(),
            secret: None,
            mode: Mode::Ethernet,
            s2m_rings: 1,
            m2s_rings: 1,
            log2_ring_size: 10,
            buffer_size: 2048,
            layout: RingLayout::CacheLine64,
            max_frame: 9216,
            seals: SealPolicy::Require,
            max_regions: 256,
            max_mapped: DEFAULT_MAX_MAPPED,
            reconnect_interval: Duration::from_millis(500),
            handshake_timeout: Duration::from_secs(3),
        }
    }
}

/// What a primary lets one peer's regions take together unless told
/// ([`InterfaceConfig::max_mapped`]): 16 GiB.
pub const DEFAULT_MAX_MAPPED: u64 = 16 << 30;

/// A configuration value out of range; the message names the field and the allowed range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("memif interface {id}: {msg}")]
pub struct ConfigError {
    pub id: u32,
    pub msg: String,
}

impl InterfaceConfig {
    /// Checks a socket's interfaces: each valid, ids unique. Both roles, before any fd exists.
    pub(crate) fn validate_all(ifaces: &[InterfaceConfig]) -> Result<(), ConfigError> {
        for (i, c) in ifaces.iter().enumerate() {
            c.validate()?;
            if ifaces[..i].iter().any(|o| o.id == c.id) {
                return Err(ConfigError {
                    id: c.id,
                    msg: "interface id used twice on one socket".into(),
                });
            }
        }
        Ok(())
    }

    /// Checks one interface added to a socket that already serves `existing` ids.
    pub(crate) fn validate_added(
        &self,
        mut existing: impl Iterator<Item = u32>,
        socket: &SocketPath,
    ) -> Result<(), ConfigError> {
        self.validate()?;
        if existing.any(|id| id == self.id) {
            return Err(ConfigError {
                id: self.id,
                msg: format!("interface id {} already exists on {socket}", self.id),
            });
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |msg: String| Err(ConfigError { id: self.id, msg });
        if !(1..=255).contains(&self.s2m_rings) || !(1..=255).contains(&self.m2s_rings) {
            return err(format!(
                "queue counts s2m={} m2s={} must each be 1..=255",
                self.s2m_rings, self.m2s_rings
            ));
        }
        if !(1..=msg::MAX_LOG2_RING_SIZE).contains(&self.log2_ring_size) {
            return err(format!(
                "log2 ring size {} must be 1..=14 (ring sizes 2..16384)",
                self.log2_ring_size
            ));
        }
        if !(64..=65535).contains(&self.buffer_size) {
            return err(format!(
                "buffer size {} must be 64..=65535",
                self.buffer_size
            ));
        }
        if self.secret.as_ref().is_some_and(|s| s.len() > 23) {
            return err("secret longer than 23 bytes".into());
        }
        if self.name.len() > 31 {
            return err(format!("name {:?} longer than 31 bytes", self.name));
        }
        if !(64..=65535).contains(&self.max_frame) {
            return err(format!("max frame {} must be 64..=65535", self.max_frame));
        }
        if self.max_regions == 0 || self.max_regions > 256 {
            return err(format!("max regions {} must be 1..=256", self.max_regions));
        }
        if self.max_mapped == 0 {
            return err("max mapped bytes must be at least 1".into());
        }
        Ok(())
    }

    /// The secondary's check on top of [`validate`](Self::validate): the buffers it will
    /// allocate for its rings fit one region. (A primary's ring counts are the most it
    /// accepts; the peer decides, and allocates.)
    pub(crate) fn validate_region(&self) -> Result<(), ConfigError> {
        let slots = u64::from(self.s2m_rings + self.m2s_rings) << self.log2_ring_size;
        if slots * u64::from(self.buffer_size) >= 1 << 32 {
            return Err(ConfigError {
                id: self.id,
                msg: format!(
                    "{slots} buffers of {} bytes exceed the 4 GiB a region's u32 offsets can address",
                    self.buffer_size
                ),
            });
        }
        Ok(())
    }
}

/// What the peer told us about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerInfo {
    /// Application name from HELLO (primary peer) or INIT (secondary peer).
    pub app_name: String,
    /// Interface name from CONNECT/CONNECTED.
    pub if_name: String,
    pub s2m_rings: u16,
    pub m2s_rings: u16,
    pub log2_ring_size: u8,
    pub regions: usize,
    /// The peer process, as the kernel gave it (SO_PEERCRED); `None` where it gave none.
    pub pid: Option<i32>,
}

/// Something that happened to an interface, returned by `poll`.
#[derive(Debug)]
pub enum Event<Q> {
    /// The handshake completed; the queues are ready to be moved to workers.
    Connected { id: u32, peer: PeerInfo, queues: Q },
    /// The connection ended; every queue of it now returns `LinkDown`.
    Disconnected { id: u32, reason: String },
}

impl<Q> Event<Q> {
    /// The interface it is about.
    pub fn id(&self) -> u32 {
        match self {
            Event::Connected { id, .. } | Event::Disconnected { id, .. } => *id,
        }
    }

    /// The same event with its queues transformed (wrapped into a caller's own type, say).
    pub fn map<R>(self, f: impl FnOnce(Q) -> R) -> Event<R> {
        match self {
            Event::Connected { id, peer, queues } => Event::Connected {
                id,
                peer,
                queues: f(queues),
            },
            Event::Disconnected { id, reason } => Event::Disconnected { id, reason },
        }
    }
}

/// Interface state and counters the control plane keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceStatus {
    pub id: u32,
    pub name: String,
    pub connected: bool,
    pub peer: Option<PeerInfo>,
    pub connects: u64,
    pub disconnects: u64,
    /// Handshakes we refused or peers we disconnected for breaking the protocol.
    pub protocol_errors: u64,
    pub last_disconnect_reason: Option<String>,
}

impl InterfaceStatus {
    /// Bookkeeping when a connection completes, the same in both roles.
    pub(crate) fn record_connect(&mut self, socket: &SocketPath, peer: &PeerInfo) {
        self.connected = true;
        self.connects += 1;
        self.peer = Some(peer.clone());
        tracing::info!(socket = %socket, id = self.id, peer = %peer.app_name, "memif connected");
    }

    /// Bookkeeping when a connection (or handshake) ends, the same in both roles; returns the
    /// `Disconnected` event to emit if the interface had been connected.
    pub(crate) fn record_close<Q>(
        &mut self,
        socket: &SocketPath,
        reason: &str,
        was_connected: bool,
        protocol_error: bool,
    ) -> Option<Event<Q>> {
        self.connected = false;
        self.disconnects += u64::from(was_connected);
        self.protocol_errors += u64::from(protocol_error);
        self.last_disconnect_reason = Some(reason.to_string());
        if protocol_error {
            tracing::warn!(socket = %socket, id = self.id, "memif peer broke the protocol: {reason}");
        } else {
            tracing::info!(socket = %socket, id = self.id, "memif disconnected: {reason}");
        }
        was_connected.then(|| Event::Disconnected {
            id: self.id,
            reason: reason.to_string(),
        })
    }
}

/// How a role reports a peer that misbehaved during the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal(pub String);

impl<T: Into<String>> From<T> for Refusal {
    fn from(s: T) -> Self {
        Refusal(s.into())
    }
}

pub(crate) fn set_nonblocking(fd: std::os::fd::BorrowedFd<'_>) {
    if let Ok(fl) = rustix::fs::fcntl_getfl(fd) {
        let _ = rustix::fs::fcntl_setfl(fd, fl | rustix::fs::OFlags::NONBLOCK);
    }
}

/// Errors from setting up a socket.
pub mod sock_error {
    /// Why a listener or client could not be created.
    #[derive(Debug, thiserror::Error)]
    pub enum BindError {
        #[error(transparent)]
        Config(#[from] crate::ConfigError),
        #[error("{0}")]
        Io(#[from] std::io::Error),
    }
}

#[doc(hidden)]
pub mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_limit_binds_the_secondary_not_the_primarys_maxima() {
        // A primary accepting up to 255 rings each way of 8192 slots: the peer decides how
        // many it makes and allocates them, so this is a valid primary configuration...
        let big = InterfaceConfig {
            s2m_rings: 255,
            m2s_rings: 255,
            log2_ring_size: 13,
            ..Default::default()
        };
        assert!(InterfaceConfig::validate_all(std::slice::from_ref(&big)).is_ok());
        // ...but a secondary asking for as many would need a region past 4 GiB.
        let e = big.validate_region().unwrap_err();
        assert!(e.to_string().contains("exceed the 4 GiB"), "{e}");
        let small = InterfaceConfig {
            log2_ring_size: 13,
            ..Default::default()
        };
        assert!(small.validate_region().is_ok());
    }
}
