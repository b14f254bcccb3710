//! Hostile peers written by hand, for the hostile tests: a secondary that can say anything,
//! one that completes the handshake and then writes whatever it likes, and their helpers.
#![allow(dead_code)]

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use memif::msg::{AddRing, FixedStr, Init, Mode, Msg, VERSION};
use memif::ring::{Desc, Ring, RingLayout};
use memif::shm::SharedMemory;
use memif::sock::Channel;
use memif::{Event, InterfaceConfig, Listener};
use rustix::fs::{MemfdFlags, SealFlags};

use super::common::*;

/// Tests here count the process's open fds, so they run one at a time.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// A secondary written by hand, that can say anything.
pub struct Evil {
    pub chan: Channel,
}

impl Evil {
    pub fn connect(l: &mut Listener) -> Evil {
        let chan = Channel::connect(l.path()).unwrap();
        l.poll(Z).unwrap();
        let e = Evil { chan };
        assert!(matches!(e.recv(l), Some(Msg::Hello(_))));
        e
    }

    pub fn send(&self, m: Msg, fd: Option<&OwnedFd>) {
        self.chan.send(&m, fd.map(|f| f.as_fd())).unwrap();
    }

    /// Lets the listener run, then returns the next reply.
    pub fn recv(&self, l: &mut Listener) -> Option<Msg> {
        for _ in 0..2000 {
            l.poll(Duration::from_millis(1)).unwrap();
            match self.chan.recv() {
                Ok(Some(r)) => return Some(Msg::parse(&r.data.unwrap()).unwrap()),
                Ok(None) => {}
                Err(_) => return None,
            }
        }
        None
    }

    pub fn expect_disconnect(self, l: &mut Listener, want: &str) {
        match self.recv(l) {
            Some(Msg::Disconnect { reason, .. }) => {
                let r = reason.to_string_lossy();
                assert!(r.contains(want), "reason {r:?} does not contain {want:?}");
            }
            other => panic!("expected DISCONNECT {want:?}, got {other:?}"),
        }
        // ...and the socket is closed after it.
        assert!(self.recv(l).is_none());
    }

    pub fn init(&self, l: &mut Listener, id: u32) {
        self.send(
            Msg::Init(Init {
                version: VERSION,
                id,
                mode: Mode::Ethernet,
                secret: FixedStr::default(),
                name: FixedStr::new("evil"),
            }),
            None,
        );
        assert_eq!(self.recv(l), Some(Msg::Ack));
    }
}

pub fn memfd(size: u64, seals: SealFlags) -> OwnedFd {
    let fd =
        rustix::fs::memfd_create("evil", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, size).unwrap();
    if !seals.is_empty() {
        rustix::fs::fcntl_add_seals(&fd, seals).unwrap();
    }
    fd
}

pub fn eventfd() -> OwnedFd {
    rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )
    .unwrap()
}

pub fn listener(dir: &tempfile::TempDir, ifaces: Vec<InterfaceConfig>) -> Listener {
    Listener::bind(&sock_path(dir), ifaces).unwrap()
}

pub fn add_ring(s2m: bool, index: u16, region: u16, offset: u32, log2: u8) -> Msg {
    Msg::AddRing(AddRing {
        flags: u16::from(s2m),
        index,
        region,
        offset,
        log2_ring_size: log2,
        private_hdr_size: 0,
    })
}

/// Sets up one sealed region of `size` bytes holding initialised rings at 0 and `stride`.
pub fn good_region(e: &Evil, l: &mut Listener, size: usize) -> Arc<SharedMemory> {
    let shm = Arc::new(SharedMemory::create("evil", size).unwrap());
    for off in [0u64, 16512] {
        if let Ok(r) = Ring::new(shm.clone(), off, 10, RingLayout::CacheLine64) {
            r.init();
        }
    }
    e.chan
        .send(
            &Msg::AddRegion {
                index: 0,
                size: size as u64,
            },
            shm.fd(),
        )
        .unwrap();
    assert_eq!(e.recv(l), Some(Msg::Ack));
    shm
}

/// A hand-made secondary that completes the handshake and then writes whatever it likes.
pub struct EvilConnected {
    pub _e: Evil,
    pub shm: Arc<SharedMemory>,
    pub s2m: Ring,
    pub m2s: Ring,
}

pub const RINGS: u64 = 2 * 16512;

pub fn evil_connected(l: &mut Listener, id: u32) -> (EvilConnected, memif::PrimaryQueues) {
    evil_connected_with(l, id, &[eventfd(), eventfd()])
}

/// As [`evil_connected`], the rings' eventfds (S2M, M2S) being `irqs` (the peer keeps its
/// own descriptors of them).
pub fn evil_connected_with(
    l: &mut Listener,
    id: u32,
    irqs: &[std::os::fd::OwnedFd; 2],
) -> (EvilConnected, memif::PrimaryQueues) {
    let e = Evil::connect(l);
    e.init(l, id);
    let size = RINGS as usize + 2048 * 2048;
    let shm = good_region(&e, l, size);
    e.send(add_ring(true, 0, 0, 0, 10), Some(&irqs[0]));
    assert_eq!(e.recv(l), Some(Msg::Ack));
    e.send(add_ring(false, 0, 0, 16512, 10), Some(&irqs[1]));
    assert_eq!(e.recv(l), Some(Msg::Ack));
    e.send(
        Msg::Connect {
            if_name: FixedStr::new("evil"),
        },
        None,
    );
    assert!(matches!(e.recv(l), Some(Msg::Connected { .. })));
    let q = match l.next_event() {
        Some(Event::Connected { queues, .. }) => queues,
        other => panic!("{other:?}"),
    };
    let s2m = Ring::new(shm.clone(), 0, 10, RingLayout::CacheLine64).unwrap();
    let m2s = Ring::new(shm.clone(), 16512, 10, RingLayout::CacheLine64).unwrap();
    (
        EvilConnected {
            _e: e,
            shm,
            s2m,
            m2s,
        },
        q,
    )
}

impl EvilConnected {
    pub fn post(&self, slot: u16, d: Desc) {
        self.s2m.set_desc(slot, d);
    }
    pub fn buf(&self, slot: u16) -> u32 {
        (RINGS + u64::from(slot) * 2048) as u32
    }
}
