//! Creating a tap: the device in its namespace, its offloads, MAC, MTU and state, and a
//! receive and a transmit queue on each of its fds.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use super::rx::RxQueue;
use super::tx::TxQueue;
use super::{VNET_HDR_LEN, sys};
use crate::netns::{NetnsError, run_in};

/// How to make a tap.
#[derive(Debug, Clone)]
pub struct TapConfig {
    /// The device's name in its namespace (`eth1`).
    pub name: String,
    /// The namespace to create it in (a path: `/var/run/netns/NAME`, `/proc/PID/ns/net`);
    /// `None`: the caller's.
    pub netns: Option<std::path::PathBuf>,
    /// Queues (fds), at least 1.
    pub queues: u16,
    /// The device's MTU; `None` leaves the kernel's (1500).
    pub mtu: Option<u16>,
    /// The device's MAC (the pod's side); `None` leaves the kernel's random one.
    pub mac: Option<[u8; 6]>,
}

/// Why a tap could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("tap {name}: an interface of that name exists in the namespace already")]
    Exists { name: String },
    #[error("tap {name}: {step}: {source}")]
    Os {
        name: String,
        step: &'static str,
        source: io::Error,
    },
}

/// An open tap device and its queues.
#[derive(Debug)]
pub struct Tap {
    name: String,
    ifindex: u32,
    mac: [u8; 6],
    mtu: u16,
    queues: Vec<(RxQueue, TxQueue)>,
}

impl Tap {
    /// Creates the device (in `cfg.netns` if given), sets its MAC and MTU and brings it up.
    pub fn open(cfg: &TapConfig) -> Result<Tap, TapError> {
        match &cfg.netns {
            Some(p) => run_in(p, || Tap::open_here(cfg))?,
            None => Tap::open_here(cfg),
        }
    }

    /// The device's name in its namespace.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its index in its namespace.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The pod side's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    pub fn mtu(&self) -> u16 {
        self.mtu
    }

    pub fn into_queues(self) -> Vec<(RxQueue, TxQueue)> {
        self.queues
    }

    fn open_here(cfg: &TapConfig) -> Result<Tap, TapError> {
        let name = cfg.name.clone();
        let os = |step: &'static str| {
            let name = name.clone();
            move |source: io::Error| TapError::Os { name, step, source }
        };
        let sock = rustix::net::socket(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::DGRAM,
            None,
        )
        .map_err(io::Error::from)
        .map_err(os("socket"))?;
        match sys::ifindex(sock.as_fd(), &name) {
            Ok(_) => return Err(TapError::Exists { name }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(os("SIOCGIFINDEX")(e)),
        }
        let mut fds = Vec::with_capacity(usize::from(cfg.queues.max(1)));
        for q in 0..cfg.queues.max(1) {
            let fd = rustix::fs::open(
                "/dev/net/tun",
                OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(io::Error::from)
            .map_err(os("open /dev/net/tun"))?;
            let mut flags =
                libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR | libc::IFF_MULTI_QUEUE;
            if q == 0 {
                flags |= libc::IFF_TUN_EXCL;
            }
            match sys::tun_set_iff(fd.as_fd(), &name, flags) {
                Err(e) if q == 0 && e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(TapError::Exists { name });
                }
                r => r.map_err(os("TUNSETIFF"))?,
            }
            sys::tun_set_vnet_hdr_size(fd.as_fd(), VNET_HDR_LEN as libc::c_int)
                .map_err(os("TUNSETVNETHDRSZ"))?;
            sys::tun_set_offload(
                fd.as_fd(),
                libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO_ECN,
            )
            .map_err(os("TUNSETOFFLOAD"))?;
            fds.push(Arc::new(fd));
        }
        if let Some(mac) = cfg.mac {
            sys::set_hwaddr(sock.as_fd(), &name, mac).map_err(os("SIOCSIFHWADDR"))?;
        }
        if let Some(mtu) = cfg.mtu {
            sys::set_mtu(sock.as_fd(), &name, mtu).map_err(os("SIOCSIFMTU"))?;
        }
        sys::set_up(sock.as_fd(), &name).map_err(os("SIOCSIFFLAGS"))?;
        let ifindex = sys::ifindex(sock.as_fd(), &name).map_err(os("SIOCGIFINDEX"))?;
        let mac = sys::hwaddr(sock.as_fd(), &name).map_err(os("SIOCGIFHWADDR"))?;
        let mtu = sys::mtu(sock.as_fd(), &name).map_err(os("SIOCGIFMTU"))?;
        let queues = fds
            .into_iter()
            .map(|fd| {
                let rx = RxQueue::shared(fd.clone());
                let tx = TxQueue::shared(fd);
                (rx, tx)
            })
            .collect();
        Ok(Tap {
            name,
            ifindex,
            mac,
            mtu,
            queues,
        })
    }
}
