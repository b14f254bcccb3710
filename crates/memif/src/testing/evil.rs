//! A secondary written by hand that can say anything, for tests that play a hostile peer
//! against a primary: an in-process [`Listener`] the test steps itself, or a daemon in
//! another process that runs on its own ([`Remote`]). The same lies ([`super::lies`]) are
//! told to both.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::{MemfdFlags, SealFlags};

use crate::Listener;
use crate::msg::{AddRing, FixedStr, Init, Mode, Msg, VERSION};
use crate::ring::{Ring, RingLayout};
use crate::shm::SharedMemory;
use crate::sock::{Channel, SocketPath};

/// The primary a hostile peer talks to.
pub trait Primary {
    /// The socket its peers connect to.
    fn socket(&self) -> SocketPath;
    /// Lets it run for a moment before the peer looks for its reply.
    fn step(&mut self);
}

impl Primary for Listener {
    fn socket(&self) -> SocketPath {
        self.path().clone()
    }

    fn step(&mut self) {
        self.poll(Duration::from_millis(1))
            .expect("the listener's poll failed");
    }
}

/// A primary in another process (a daemon), known by its socket: it runs on its own, so a
/// step only waits.
#[derive(Debug)]
pub struct Remote(pub SocketPath);

impl Primary for Remote {
    fn socket(&self) -> SocketPath {
        self.0.clone()
    }

    fn step(&mut self) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How long a peer waits for a reply: long enough for a daemon on a busy machine, and for a
/// handshake timeout of a few seconds to pass.
pub const PATIENCE: Duration = Duration::from_secs(8);

/// A secondary written by hand, that can say anything.
#[derive(Debug)]
pub struct Evil {
    pub chan: Channel,
}

impl Evil {
    /// Connects and takes the primary's HELLO.
    pub fn connect(p: &mut dyn Primary) -> Evil {
        let chan = Channel::connect(&p.socket()).expect("connect to the primary's socket");
        p.step();
        let e = Evil { chan };
        let hello = e.recv(p);
        assert!(matches!(hello, Some(Msg::Hello(_))), "no HELLO: {hello:?}");
        e
    }

    pub fn send(&self, m: Msg, fd: Option<&OwnedFd>) {
        self.chan
            .send(&m, fd.map(|f| f.as_fd()))
            .expect("send to the primary");
    }

    /// Lets the primary run, then returns its next message: `None` once the socket is
    /// closed, or if nothing came within [`PATIENCE`].
    pub fn recv(&self, p: &mut dyn Primary) -> Option<Msg> {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            match self.chan.recv() {
                Ok(Some(r)) => return Some(Msg::parse(&r.data.ok()?).expect("a message we parse")),
                Ok(None) => p.step(),
                Err(_) => return None,
            }
        }
        None
    }

    /// The next message is a DISCONNECT whose reason contains `want`, and the socket is
    /// closed after it.
    pub fn expect_disconnect(self, p: &mut dyn Primary, want: &str) {
        match self.recv(p) {
            Some(Msg::Disconnect { reason, .. }) => {
                let r = reason.to_string_lossy();
                assert!(r.contains(want), "reason {r:?} does not contain {want:?}");
            }
            other => panic!("expected DISCONNECT {want:?}, got {other:?}"),
        }
        assert!(
            self.recv(p).is_none(),
            "the socket stayed open after DISCONNECT"
        );
    }

    /// INIT for interface `id` in Ethernet mode, acknowledged.
    pub fn init(&self, p: &mut dyn Primary, id: u32) {
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
        assert_eq!(self.recv(p), Some(Msg::Ack), "INIT for {id}");
    }
}

/// A memfd of `size` bytes with `seals` added.
pub fn memfd(size: u64, seals: SealFlags) -> OwnedFd {
    let fd = rustix::fs::memfd_create("evil", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .expect("memfd_create");
    rustix::fs::ftruncate(&fd, size).expect("ftruncate");
    if !seals.is_empty() {
        rustix::fs::fcntl_add_seals(&fd, seals).expect("add seals");
    }
    fd
}

/// A non-blocking eventfd.
pub fn eventfd() -> OwnedFd {
    rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )
    .expect("eventfd")
}

/// Ring `index` (S2M if `s2m`) in `region` at `offset`, 2^`log2` slots.
pub const fn ring(s2m: bool, index: u16, region: u16, offset: u32, log2: u8) -> AddRing {
    AddRing {
        flags: s2m as u16,
        index,
        region,
        offset,
        log2_ring_size: log2,
        private_hdr_size: 0,
    }
}

/// ADD_RING for [`ring`]`(s2m, index, region, offset, log2)`.
pub fn add_ring(s2m: bool, index: u16, region: u16, offset: u32, log2: u8) -> Msg {
    Msg::AddRing(ring(s2m, index, region, offset, log2))
}

/// Where the second ring of a [`good_region`] starts: two rings of 1024 slots with 64-byte
/// headers take `2 * RING_STRIDE`.
pub const RING_STRIDE: u64 = 16512;

/// Bytes the two rings of a [`good_region`] take; buffers may follow.
pub const RINGS: u64 = 2 * RING_STRIDE;

/// Adds region 0: `size` sealed bytes holding initialised rings of 1024 slots at 0 and at
/// [`RING_STRIDE`] (where they fit), acknowledged.
pub fn good_region(e: &Evil, p: &mut dyn Primary, size: usize) -> Arc<SharedMemory> {
    let shm = Arc::new(SharedMemory::create("evil", size).expect("a region"));
    for off in [0, RING_STRIDE] {
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
        .expect("send ADD_REGION");
    assert_eq!(e.recv(p), Some(Msg::Ack), "region of {size} bytes");
    shm
}

/// A hand-made secondary that completed the handshake and now writes whatever it likes:
/// one region holding both rings of 1024 slots and 2048 buffers of 2048 bytes after them.
#[derive(Debug)]
pub struct EvilConnected {
    pub e: Evil,
    pub shm: Arc<SharedMemory>,
    pub s2m: Ring,
    pub m2s: Ring,
}

/// Connects interface `id` by hand, the rings' eventfds (S2M, M2S) being `irqs` (the peer
/// keeps its own descriptors of them), and waits for CONNECTED.
pub fn connect_by_hand(p: &mut dyn Primary, id: u32, irqs: &[OwnedFd; 2]) -> EvilConnected {
    let e = Evil::connect(p);
    e.init(p, id);
    let shm = good_region(&e, p, RINGS as usize + 2048 * 2048);
    e.send(add_ring(true, 0, 0, 0, 10), Some(&irqs[0]));
    assert_eq!(e.recv(p), Some(Msg::Ack));
    e.send(
        add_ring(false, 0, 0, RING_STRIDE as u32, 10),
        Some(&irqs[1]),
    );
    assert_eq!(e.recv(p), Some(Msg::Ack));
    e.send(
        Msg::Connect {
            if_name: FixedStr::new("evil"),
        },
        None,
    );
    let reply = e.recv(p);
    assert!(matches!(reply, Some(Msg::Connected { .. })), "{reply:?}");
    let ring = |at| Ring::new(shm.clone(), at, 10, RingLayout::CacheLine64).expect("a ring");
    EvilConnected {
        s2m: ring(0),
        m2s: ring(RING_STRIDE),
        shm,
        e,
    }
}

impl EvilConnected {
    pub fn post(&self, slot: u16, d: crate::ring::Desc) {
        self.s2m.set_desc(slot, d);
    }

    /// The offset of buffer `slot` in the region.
    pub fn buf(&self, slot: u16) -> u32 {
        (RINGS + u64::from(slot) * 2048) as u32
    }
}
