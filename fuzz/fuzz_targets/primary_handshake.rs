//! A hostile secondary speaking to a real listener over a real socket: arbitrary messages
//! (well-formed or not), each with no fd, a sealed or unsealed memfd of some size, an eventfd,
//! or several fds. The listener must never panic, and must keep serving afterwards.
#![no_main]

use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use memif::msg::{AddRing, FixedStr, Init, Mode, Msg, VERSION};
use memif::sock::{Channel, SocketPath};
use memif::{InterfaceConfig, Listener};
use rustix::fs::{MemfdFlags, SealFlags};

#[derive(Arbitrary, Debug)]
enum Fd {
    None,
    Sealed(u16),
    Unsealed(u16),
    Event,
    Three,
}

#[derive(Arbitrary, Debug)]
enum Step {
    Raw(Vec<u8>),
    Init { id: u8, mode: u8, secret: bool, version: u16 },
    AddRegion { index: u16, size: u32 },
    AddRing { s2m: bool, index: u16, region: u16, offset: u32, log2: u8, hdr: u16 },
    Connect,
    Disconnect,
    Ack,
}

fn memfd(size: u16, seal: bool) -> OwnedFd {
    let fd = rustix::fs::memfd_create("fz", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, u64::from(size) * 64).unwrap();
    if seal {
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK).unwrap();
    }
    fd
}

fuzz_target!(|steps: Vec<(Step, Fd)>| {
    let dir = tempfile::tempdir().unwrap();
    let path = SocketPath::File(dir.path().join("f.sock"));
    let cfg = InterfaceConfig { handshake_timeout: Duration::from_secs(60), ..Default::default() };
    let mut l = Listener::bind(&path, vec![cfg]).unwrap();
    let c = Channel::connect(&path).unwrap();
    l.poll(Duration::ZERO).unwrap();
    for (step, fd) in steps.iter().take(64) {
        let bytes = match step {
            Step::Raw(b) => b.clone(),
            Step::Init { id, mode, secret, version } => Msg::Init(Init {
                version: if *version % 4 == 0 { *version } else { VERSION },
                id: u32::from(*id % 3),
                mode: Mode::from(*mode % 4),
                secret: FixedStr::new(if *secret { "x" } else { "" }),
                name: FixedStr::new("fuzz"),
            })
            .encode()
            .to_vec(),
            Step::AddRegion { index, size } => Msg::AddRegion { index: *index % 4, size: u64::from(*size) }.encode().to_vec(),
            Step::AddRing { s2m, index, region, offset, log2, hdr } => Msg::AddRing(AddRing {
                flags: u16::from(*s2m),
                index: *index % 4,
                region: *region % 4,
                offset: *offset,
                log2_ring_size: *log2 % 16,
                private_hdr_size: *hdr % 2,
            })
            .encode()
            .to_vec(),
            Step::Connect => Msg::Connect { if_name: FixedStr::new("f") }.encode().to_vec(),
            Step::Disconnect => Msg::disconnect("bye").encode().to_vec(),
            Step::Ack => Msg::Ack.encode().to_vec(),
        };
        let fds: Vec<OwnedFd> = match fd {
            Fd::None => vec![],
            Fd::Sealed(s) => vec![memfd(*s, true)],
            Fd::Unsealed(s) => vec![memfd(*s, false)],
            Fd::Event => vec![rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap()],
            Fd::Three => (0..3).map(|_| memfd(64, true)).collect(),
        };
        let b: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
        if c.send_raw(&bytes, &b).is_err() {
            break;
        }
        l.poll(Duration::ZERO).unwrap();
        while l.next_event().is_some() {}
    }
    drop(c);
    l.poll(Duration::from_millis(1)).unwrap();
    // Still serving: a fresh connection gets HELLO.
    let c2 = Channel::connect(&path).unwrap();
    l.poll(Duration::ZERO).unwrap();
    let r = c2.recv().unwrap().expect("HELLO");
    assert!(matches!(Msg::parse(&r.data.unwrap()), Ok(Msg::Hello(_))));
});
