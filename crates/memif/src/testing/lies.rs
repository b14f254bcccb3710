//! What a hostile secondary says during the handshake, each lie with the DISCONNECT it must
//! earn: told to the library's listener by memif's tests and to the daemon by veclane's
//! (two hostile pods at once, under the packaged unit's limits). Every lie ends with the
//! peer's socket closed, so the interface is free for the next one; a run of all of them
//! on one interface shows that each lie frees it.
//!
//! The interface a lie is told to must accept at most two rings each way of up to 2^14
//! slots, require sealed regions, and accept a region of 33 KiB ([`super::evil::RINGS`])
//! and more.

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::fs::{MemfdFlags, SealFlags};

use super::evil::*;
use crate::msg::{AddRing, FixedStr, Hello, Init, Mode, Msg, VERSION};

/// How a lie is told: to interface `id` of a primary.
pub type Tell = dyn Fn(&mut dyn Primary, u32) + Send + Sync;

/// One lie: its name, and the act that tells it to interface `id` of a primary and checks
/// the answer (panicking, the lie's name in the message, if the answer is wrong).
pub struct Lie {
    pub name: &'static str,
    pub tell: Box<Tell>,
}

impl std::fmt::Debug for Lie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

fn lie(name: &'static str, tell: impl Fn(&mut dyn Primary, u32) + Send + Sync + 'static) -> Lie {
    Lie {
        name,
        tell: Box::new(tell),
    }
}

/// Every lie, in the order of the groups below.
pub fn all() -> Vec<Lie> {
    let groups = [message_lies, region_lies, ring_lies, flood_lies, stall_lies];
    groups.iter().flat_map(|g| g()).collect()
}

/// Tells each of `lies` to interface `id`, the lie's name on a failure.
pub fn tell_all(p: &mut dyn Primary, id: u32, lies: &[Lie]) {
    for l in lies {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (l.tell)(p, id)));
        if let Err(e) = r {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("lie {:?} to interface {id}: {why}", l.name);
        }
    }
}

fn init_msg(version: u16, id: u32) -> Msg {
    Msg::Init(Init {
        version,
        id,
        mode: Mode::Ethernet,
        secret: FixedStr::default(),
        name: FixedStr::default(),
    })
}

/// Messages that are malformed or out of order. Five are refused before INIT (counted on
/// the listener), two after it (counted on the interface); the last is tolerated.
pub fn message_lies() -> Vec<Lie> {
    vec![
        lie("a short message", |p, _| {
            let e = Evil::connect(p);
            e.chan.send_raw(&[1u8; 64], &[]).unwrap();
            e.expect_disconnect(p, "malformed message: 64 bytes instead of 128");
        }),
        lie("a long message", |p, _| {
            let e = Evil::connect(p);
            e.chan.send_raw(&[0u8; 200], &[]).unwrap();
            e.expect_disconnect(p, "malformed message");
        }),
        lie("an unknown message type", |p, _| {
            let e = Evil::connect(p);
            let mut m = [0u8; 128];
            m[0] = 0x42;
            e.chan.send_raw(&m, &[]).unwrap();
            e.expect_disconnect(p, "unknown message type 0x42");
        }),
        lie("a region before INIT", |p, _| {
            let e = Evil::connect(p);
            let fd = memfd(4096, SealFlags::SHRINK);
            e.send(
                Msg::AddRegion {
                    index: 0,
                    size: 4096,
                },
                Some(&fd),
            );
            e.expect_disconnect(p, "unexpected message ADD_REGION before INIT");
        }),
        lie("another protocol version", |p, id| {
            let e = Evil::connect(p);
            e.send(init_msg(0x0100, id), None);
            e.expect_disconnect(p, "incompatible protocol version 0x0100");
        }),
        lie("INIT twice", |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            e.send(init_msg(VERSION, id), None);
            e.expect_disconnect(p, "unexpected message INIT during setup");
        }),
        lie("HELLO from the secondary", |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            e.send(
                Msg::Hello(Hello {
                    name: FixedStr::default(),
                    min_version: VERSION,
                    max_version: VERSION,
                    max_region: 0,
                    max_m2s_ring: 0,
                    max_s2m_ring: 0,
                    max_log2_ring_size: 0,
                }),
                None,
            );
            e.expect_disconnect(p, "unexpected message HELLO during setup");
        }),
        lie(
            "unterminated strings (tolerated: a name is bounded, never run past)",
            |p, id| {
                let e = Evil::connect(p);
                let mut init = Msg::Init(Init {
                    version: VERSION,
                    id,
                    mode: Mode::Ethernet,
                    secret: FixedStr([b'x'; 24]),
                    name: FixedStr([0xff; 32]),
                })
                .encode();
                init[65..].fill(0xee);
                e.chan.send_raw(&init, &[]).unwrap();
                assert_eq!(e.recv(p), Some(Msg::Ack));
                vanish(e, p, id);
            },
        ),
    ]
}

/// After INIT, tells `region` with `fd` and expects `want`.
fn bad_region(p: &mut dyn Primary, id: u32, region: Msg, fd: Option<OwnedFd>, want: &str) {
    let e = Evil::connect(p);
    e.init(p, id);
    e.send(region, fd.as_ref());
    e.expect_disconnect(p, want);
}

/// The fd a region lie hands over.
#[derive(Clone, Copy)]
enum RegionFd {
    None,
    /// A memfd of this many bytes, sealed against shrinking or not.
    Memfd(u64, bool),
    Eventfd,
}

/// Regions refused before they are mapped: each (what it is, its index and announced size,
/// its fd, the reason).
#[rustfmt::skip]
const BAD_REGIONS: &[(&str, u16, u64, RegionFd, &str)] = &[
    ("a region without its fd", 0, 4096, RegionFd::None, "missing memory region fd"),
    ("a region out of order", 1, 4096, RegionFd::Memfd(4096, true), "unexpected region index 1, expected 0"),
    ("an unsealed region", 0, 4096, RegionFd::Memfd(4096, false), "not sealed against shrinking"),
    ("a region smaller than announced", 0, 8192, RegionFd::Memfd(4096, true), "region fd is 4096 bytes, smaller than the 8192 bytes announced"),
    ("an empty region", 0, 0, RegionFd::Memfd(4096, true), "region 0: size 0 out of range"),
    ("a region of a terabyte", 0, 1 << 40, RegionFd::Memfd(4096, true), "size 1099511627776 out of range"),
    ("a region that is an eventfd", 0, 8, RegionFd::Eventfd, "not a regular file"),
];

/// Regions refused before they are mapped.
pub fn region_lies() -> Vec<Lie> {
    let mut lies: Vec<Lie> = BAD_REGIONS
        .iter()
        .map(|&(name, index, size, fd, want)| {
            lie(name, move |p, id| {
                let fd = match fd {
                    RegionFd::None => None,
                    RegionFd::Memfd(len, sealed) => {
                        let seals = if sealed {
                            SealFlags::SHRINK
                        } else {
                            SealFlags::empty()
                        };
                        Some(memfd(len, seals))
                    }
                    RegionFd::Eventfd => Some(eventfd()),
                };
                bad_region(p, id, Msg::AddRegion { index, size }, fd, want)
            })
        })
        .collect();
    lies.push(
        // Its owner can punch a hole (seals do not stop that) and take the freed page, and
        // the primary's next touch of the hole is SIGBUS. Refused whether or not the huge
        // page pool could back it.
        lie("a sealed region of huge pages", |p, id| {
            let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING | MemfdFlags::HUGETLB;
            let fd = match rustix::fs::memfd_create("evil-huge", flags) {
                Ok(fd) => fd,
                Err(e) => {
                    eprintln!("skipping the hugetlbfs region: memfd_create(MFD_HUGETLB): {e}");
                    return;
                }
            };
            rustix::fs::ftruncate(&fd, 2 << 20).unwrap();
            rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW).unwrap();
            let want = "region fd is on hugetlbfs";
            bad_region(
                p,
                id,
                Msg::AddRegion {
                    index: 0,
                    size: 2 << 20,
                },
                Some(fd),
                want,
            )
        }),
    );
    lies
}

/// After INIT and a good region of two rings, tells `ring` (with an eventfd if `with_fd`)
/// and expects `want`.
fn bad_ring(p: &mut dyn Primary, id: u32, ring: Msg, with_fd: bool, want: &str) {
    let e = Evil::connect(p);
    e.init(p, id);
    let _shm = good_region(&e, p, RINGS as usize);
    e.send(ring, with_fd.then(eventfd).as_ref());
    e.expect_disconnect(p, want);
}

/// Several fds on one ADD_RING: the first is the one (as in VPP, libmemif and DPDK), the
/// rest are closed. An eventfd first and a pipe after it is a good ring; a pipe first is
/// refused whatever follows it.
fn ring_with_two_fds(p: &mut dyn Primary, id: u32, first_is_eventfd: bool) {
    let e = Evil::connect(p);
    e.init(p, id);
    let _shm = good_region(&e, p, RINGS as usize);
    let (pipe_r, pipe_w) = rustix::pipe::pipe().unwrap();
    let ev = eventfd();
    let fds = if first_is_eventfd {
        [ev.as_fd(), pipe_r.as_fd()]
    } else {
        [pipe_r.as_fd(), ev.as_fd()]
    };
    e.chan
        .send_raw(&add_ring(true, 0, 0, 0, 10).encode(), &fds)
        .unwrap();
    drop((pipe_r, pipe_w, ev));
    if first_is_eventfd {
        assert_eq!(e.recv(p), Some(Msg::Ack));
        vanish(e, p, id);
    } else {
        e.expect_disconnect(p, "interrupt fd is not an eventfd");
    }
}

/// A CONNECT after `rings` (each with an eventfd) is answered with `want`.
fn connect_with_rings(p: &mut dyn Primary, id: u32, size: usize, rings: &[Msg], want: &str) {
    let e = Evil::connect(p);
    e.init(p, id);
    let _shm = good_region(&e, p, size);
    for r in rings {
        e.send(*r, Some(&eventfd()));
        assert_eq!(e.recv(p), Some(Msg::Ack));
    }
    e.send(
        Msg::Connect {
            if_name: FixedStr::new("x"),
        },
        None,
    );
    e.expect_disconnect(p, want);
}

/// Rings refused when they are added: each (what it is, the ADD_RING, whether an eventfd
/// comes with it, the reason).
#[rustfmt::skip]
const BAD_RINGS: &[(&str, AddRing, bool, &str)] = &[
    ("a ring without its eventfd", ring(true, 0, 0, 0, 10), false, "missing ring interrupt fd"),
    ("a ring out of order", ring(true, 1, 0, 0, 10), true, "unexpected S2M ring index 1, expected 0"),
    ("a ring in an unknown region", ring(true, 0, 3, 0, 10), true, "S2M ring 0 in unknown region 3"),
    ("a misaligned ring", ring(false, 0, 0, 4, 10), true, "not 8-byte aligned"),
    ("a ring past its region", ring(false, 0, 0, 40000, 10), true, "does not fit its region"),
    ("a ring whose end overflows", ring(false, 0, 0, u32::MAX - 7, 10), true, "does not fit its region"),
    ("a ring of 2^15 slots", ring(true, 0, 0, 0, 15), true, "log2 size 15 too large"),
    ("a ring with private headers", AddRing { private_hdr_size: 8, ..ring(true, 0, 0, 0, 10) }, true, "private headers not supported"),
];

/// Rings refused before they are used.
pub fn ring_lies() -> Vec<Lie> {
    let mut lies: Vec<Lie> = BAD_RINGS
        .iter()
        .map(|&(name, r, with_fd, want)| {
            lie(name, move |p, id| {
                bad_ring(p, id, Msg::AddRing(r), with_fd, want)
            })
        })
        .collect();
    lies.extend([
        // Its read end would block our reads.
        lie("a ring whose interrupt fd is a pipe", |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            let _shm = good_region(&e, p, RINGS as usize);
            let (pipe_r, _pipe_w) = rustix::pipe::pipe().unwrap();
            e.send(add_ring(true, 0, 0, 0, 10), Some(&pipe_r));
            e.expect_disconnect(p, "S2M ring 0: interrupt fd is not an eventfd");
        }),
        lie("a ring with an eventfd and a pipe", |p, id| {
            ring_with_two_fds(p, id, true)
        }),
        lie("a ring with a pipe and an eventfd", |p, id| {
            ring_with_two_fds(p, id, false)
        }),
        lie("three rings where two are the most", |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            let _shm = good_region(&e, p, 2 * RINGS as usize);
            for i in 0..2 {
                e.send(add_ring(true, i, 0, 0, 10), Some(&eventfd()));
                assert_eq!(e.recv(p), Some(Msg::Ack));
            }
            e.send(add_ring(true, 2, 0, 0, 10), Some(&eventfd()));
            e.expect_disconnect(p, "too many S2M rings");
        }),
        lie("CONNECT without rings both ways", |p, id| {
            let rings = [add_ring(true, 0, 0, 0, 10)];
            connect_with_rings(p, id, RINGS as usize, &rings, "need at least one each")
        }),
        lie("a ring never initialised", |p, id| {
            // The M2S ring past the two a good region initialises: its cookie is 0.
            let rings = [
                add_ring(true, 0, 0, 0, 10),
                add_ring(false, 0, 0, RINGS as u32, 10),
            ];
            let size = (RINGS + RING_STRIDE) as usize;
            connect_with_rings(p, id, size, &rings, "wrong cookie on M2S ring 0")
        }),
    ]);
    lies
}

/// Floods of fds and messages.
pub fn flood_lies() -> Vec<Lie> {
    vec![
        // Extra fds on a message are closed; thousands of messages without waiting for a
        // reply end the connection at the first one out of place.
        lie("fds on INIT, then a flood of ACKs", |p, id| {
            let e = Evil::connect(p);
            let fds: Vec<OwnedFd> = (0..4).map(|_| memfd(4096, SealFlags::SHRINK)).collect();
            let b: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
            e.chan
                .send_raw(&init_msg(VERSION, id).encode(), &b)
                .unwrap();
            assert_eq!(e.recv(p), Some(Msg::Ack));
            drop(fds);
            let sent = (0..5000)
                .take_while(|_| e.chan.send_raw(&Msg::Ack.encode(), &[]).is_ok())
                .count();
            assert!(sent > 0);
            e.expect_disconnect(p, "unexpected message ACK during setup");
        }),
    ]
}

/// Stalls and peers that vanish.
pub fn stall_lies() -> Vec<Lie> {
    vec![
        // One peer holds the interface after INIT and says nothing more: a second is
        // refused while it does, and the first is let go when its handshake times out.
        lie("a stall after INIT", |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            let e2 = Evil::connect(p);
            e2.send(init_msg(VERSION, id), None);
            e2.expect_disconnect(p, "already connected");
            e.expect_disconnect(p, "handshake timeout");
        }),
        lie("a peer that vanishes with a region mapped", |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            let _shm = good_region(&e, p, RINGS as usize);
            vanish(e, p, id);
        }),
    ]
}

/// Closes `e`'s socket in the middle of its handshake, then waits until interface `id` is
/// free again (INIT accepted), and leaves by a lie.
pub fn vanish(e: Evil, p: &mut dyn Primary, id: u32) {
    drop(e);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let e = Evil::connect(p);
        e.send(init_msg(VERSION, id), None);
        match e.recv(p) {
            Some(Msg::Ack) => {
                e.chan.send_raw(&[1u8; 64], &[]).unwrap();
                e.expect_disconnect(p, "malformed message");
                return;
            }
            Some(Msg::Disconnect { reason, .. })
                if reason.to_string_lossy().contains("already connected")
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => panic!("interface {id} after its peer vanished: {other:?}"),
        }
    }
}
