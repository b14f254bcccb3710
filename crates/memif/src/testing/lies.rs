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

/// One lie: its name, and the act that tells it to interface `id` of a primary and checks
/// the answer (panicking, the lie's name in the message, if the answer is wrong).
#[derive(Debug, Clone, Copy)]
pub struct Lie {
    pub name: &'static str,
    pub tell: fn(&mut dyn Primary, u32),
}

/// Every lie, in the order of the groups below.
pub fn all() -> Vec<Lie> {
    [MESSAGE_LIES, REGION_LIES, RING_LIES, FLOOD_LIES, STALL_LIES].concat()
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
pub const MESSAGE_LIES: &[Lie] = &[
    Lie {
        name: "a short message",
        tell: |p, _| {
            let e = Evil::connect(p);
            e.chan.send_raw(&[1u8; 64], &[]).unwrap();
            e.expect_disconnect(p, "malformed message: 64 bytes instead of 128");
        },
    },
    Lie {
        name: "a long message",
        tell: |p, _| {
            let e = Evil::connect(p);
            e.chan.send_raw(&[0u8; 200], &[]).unwrap();
            e.expect_disconnect(p, "malformed message");
        },
    },
    Lie {
        name: "an unknown message type",
        tell: |p, _| {
            let e = Evil::connect(p);
            let mut m = [0u8; 128];
            m[0] = 0x42;
            e.chan.send_raw(&m, &[]).unwrap();
            e.expect_disconnect(p, "unknown message type 0x42");
        },
    },
    Lie {
        name: "a region before INIT",
        tell: |p, _| {
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
        },
    },
    Lie {
        name: "another protocol version",
        tell: |p, id| {
            let e = Evil::connect(p);
            e.send(init_msg(0x0100, id), None);
            e.expect_disconnect(p, "incompatible protocol version 0x0100");
        },
    },
    Lie {
        name: "INIT twice",
        tell: |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            e.send(init_msg(VERSION, id), None);
            e.expect_disconnect(p, "unexpected message INIT during setup");
        },
    },
    Lie {
        name: "HELLO from the secondary",
        tell: |p, id| {
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
        },
    },
    Lie {
        name: "unterminated strings (tolerated: a name is bounded, never run past)",
        tell: |p, id| {
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
    },
];

/// After INIT, tells `region` with `fd` and expects `want`.
fn bad_region(p: &mut dyn Primary, id: u32, region: Msg, fd: Option<OwnedFd>, want: &str) {
    let e = Evil::connect(p);
    e.init(p, id);
    e.send(region, fd.as_ref());
    e.expect_disconnect(p, want);
}

fn region(index: u16, size: u64) -> Msg {
    Msg::AddRegion { index, size }
}

/// Regions refused before they are mapped.
pub const REGION_LIES: &[Lie] = &[
    Lie {
        name: "a region without its fd",
        tell: |p, id| bad_region(p, id, region(0, 4096), None, "missing memory region fd"),
    },
    Lie {
        name: "a region out of order",
        tell: |p, id| {
            let fd = memfd(4096, SealFlags::SHRINK);
            let want = "unexpected region index 1, expected 0";
            bad_region(p, id, region(1, 4096), Some(fd), want)
        },
    },
    Lie {
        name: "an unsealed region",
        tell: |p, id| {
            let fd = memfd(4096, SealFlags::empty());
            let want = "not sealed against shrinking";
            bad_region(p, id, region(0, 4096), Some(fd), want)
        },
    },
    Lie {
        name: "a region smaller than announced",
        tell: |p, id| {
            let fd = memfd(4096, SealFlags::SHRINK);
            let want = "region fd is 4096 bytes, smaller than the 8192 bytes announced";
            bad_region(p, id, region(0, 8192), Some(fd), want)
        },
    },
    Lie {
        name: "an empty region",
        tell: |p, id| {
            let fd = memfd(4096, SealFlags::SHRINK);
            bad_region(
                p,
                id,
                region(0, 0),
                Some(fd),
                "region 0: size 0 out of range",
            )
        },
    },
    Lie {
        name: "a region of a terabyte",
        tell: |p, id| {
            let fd = memfd(4096, SealFlags::SHRINK);
            let want = "size 1099511627776 out of range";
            bad_region(p, id, region(0, 1 << 40), Some(fd), want)
        },
    },
    Lie {
        name: "a region that is an eventfd",
        tell: |p, id| bad_region(p, id, region(0, 8), Some(eventfd()), "not a regular file"),
    },
    Lie {
        // Its owner can punch a hole (seals do not stop that) and take the freed page, and
        // the primary's next touch of the hole is SIGBUS. Refused whether or not the huge
        // page pool could back it.
        name: "a sealed region of huge pages",
        tell: |p, id| {
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
            bad_region(p, id, region(0, 2 << 20), Some(fd), want)
        },
    },
];

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

/// Rings refused before they are used.
pub const RING_LIES: &[Lie] = &[
    Lie {
        name: "a ring without its eventfd",
        tell: |p, id| {
            let want = "missing ring interrupt fd";
            bad_ring(p, id, add_ring(true, 0, 0, 0, 10), false, want)
        },
    },
    Lie {
        name: "a ring out of order",
        tell: |p, id| {
            let want = "unexpected S2M ring index 1, expected 0";
            bad_ring(p, id, add_ring(true, 1, 0, 0, 10), true, want)
        },
    },
    Lie {
        name: "a ring in an unknown region",
        tell: |p, id| {
            let want = "S2M ring 0 in unknown region 3";
            bad_ring(p, id, add_ring(true, 0, 3, 0, 10), true, want)
        },
    },
    Lie {
        name: "a misaligned ring",
        tell: |p, id| {
            let want = "not 8-byte aligned";
            bad_ring(p, id, add_ring(false, 0, 0, 4, 10), true, want)
        },
    },
    Lie {
        name: "a ring past its region",
        tell: |p, id| {
            let want = "does not fit its region";
            bad_ring(p, id, add_ring(false, 0, 0, 40000, 10), true, want)
        },
    },
    Lie {
        name: "a ring whose end overflows",
        tell: |p, id| {
            let want = "does not fit its region";
            bad_ring(p, id, add_ring(false, 0, 0, u32::MAX - 7, 10), true, want)
        },
    },
    Lie {
        name: "a ring of 2^15 slots",
        tell: |p, id| {
            let want = "log2 size 15 too large";
            bad_ring(p, id, add_ring(true, 0, 0, 0, 15), true, want)
        },
    },
    Lie {
        name: "a ring with private headers",
        tell: |p, id| {
            let ring = Msg::AddRing(AddRing {
                flags: 1,
                index: 0,
                region: 0,
                offset: 0,
                log2_ring_size: 10,
                private_hdr_size: 8,
            });
            bad_ring(p, id, ring, true, "private headers not supported")
        },
    },
    Lie {
        // Its read end would block our reads.
        name: "a ring whose interrupt fd is a pipe",
        tell: |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            let _shm = good_region(&e, p, RINGS as usize);
            let (pipe_r, _pipe_w) = rustix::pipe::pipe().unwrap();
            e.send(add_ring(true, 0, 0, 0, 10), Some(&pipe_r));
            e.expect_disconnect(p, "S2M ring 0: interrupt fd is not an eventfd");
        },
    },
    Lie {
        name: "a ring with an eventfd and a pipe",
        tell: |p, id| ring_with_two_fds(p, id, true),
    },
    Lie {
        name: "a ring with a pipe and an eventfd",
        tell: |p, id| ring_with_two_fds(p, id, false),
    },
    Lie {
        name: "three rings where two are the most",
        tell: |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            let _shm = good_region(&e, p, 2 * RINGS as usize);
            for i in 0..2 {
                e.send(add_ring(true, i, 0, 0, 10), Some(&eventfd()));
                assert_eq!(e.recv(p), Some(Msg::Ack));
            }
            e.send(add_ring(true, 2, 0, 0, 10), Some(&eventfd()));
            e.expect_disconnect(p, "too many S2M rings");
        },
    },
    Lie {
        name: "CONNECT without rings both ways",
        tell: |p, id| {
            let rings = [add_ring(true, 0, 0, 0, 10)];
            connect_with_rings(p, id, RINGS as usize, &rings, "need at least one each")
        },
    },
    Lie {
        name: "a ring never initialised",
        tell: |p, id| {
            // The M2S ring past the two a good region initialises: its cookie is 0.
            let rings = [
                add_ring(true, 0, 0, 0, 10),
                add_ring(false, 0, 0, RINGS as u32, 10),
            ];
            let size = (RINGS + RING_STRIDE) as usize;
            connect_with_rings(p, id, size, &rings, "wrong cookie on M2S ring 0")
        },
    },
];

/// Floods of fds and messages.
pub const FLOOD_LIES: &[Lie] = &[Lie {
    // Extra fds on a message are closed; thousands of messages without waiting for a
    // reply end the connection at the first one out of place.
    name: "fds on INIT, then a flood of ACKs",
    tell: |p, id| {
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
    },
}];

/// Stalls and peers that vanish.
pub const STALL_LIES: &[Lie] = &[
    Lie {
        // One peer holds the interface after INIT and says nothing more: a second is
        // refused while it does, and the first is let go when its handshake times out.
        name: "a stall after INIT",
        tell: |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            let e2 = Evil::connect(p);
            e2.send(init_msg(VERSION, id), None);
            e2.expect_disconnect(p, "already connected");
            e.expect_disconnect(p, "handshake timeout");
        },
    },
    Lie {
        name: "a peer that vanishes with a region mapped",
        tell: |p, id| {
            let e = Evil::connect(p);
            e.init(p, id);
            let _shm = good_region(&e, p, RINGS as usize);
            vanish(e, p, id);
        },
    },
];

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
