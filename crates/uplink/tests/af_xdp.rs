//! The AF_XDP uplink against the real kernel: veth pairs in a network namespace per test,
//! plain packet sockets (or a second AF_XDP uplink, to steer frames to a queue) on the far end.
//!
//! veth has native XDP (driver mode) but no zero-copy AF_XDP, so everything here runs in copy
//! mode; a veth's XDP receive queue is the queue its peer transmitted on, which is how the
//! multi-queue tests steer frames: an AF_XDP socket transmits on the queue it is bound to.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use buffer::{Ext, ExtSource, Pool, PoolConfig};
use common::{Netns, collect, frame, seq_of, xdp_available};
use uplink::af_xdp::{RxQueue, TxQueue};
use uplink::{AfXdp, AfXdpConfig, AfXdpError, LinkError, PacketSocket, XdpAttach, XskMode};

const WAIT: Duration = Duration::from_secs(5);

/// A namespace of its own, or `None` (skip, said why) when not root or without AF_XDP.
fn setup() -> Option<Netns> {
    let ns = Netns::enter()?;
    xdp_available().then_some(ns)
}

fn pool(data_size: u16) -> Pool {
    Pool::new(PoolConfig {
        count: 2048,
        data_size,
        headroom: 128,
    })
    .unwrap()
}

fn one_queue(up: AfXdp) -> (RxQueue, TxQueue) {
    up.into_queues().pop().unwrap()
}

/// A frame with an 802.1Q tag (VID 100, PCP 1) after the MAC addresses.
fn tagged(seq: u32, len: usize) -> Vec<u8> {
    let mut f = frame(seq, len - 4);
    f.splice(12..12, [0x81, 0x00, 0x20, 0x64]);
    f
}

/// Receives until `want` test frames came (or `timeout`), returning their bytes and how many
/// buffers each took; every buffer goes back to the pool.
fn recv_frames(
    q: &mut RxQueue,
    pool: &mut Pool,
    want: usize,
    max: usize,
    timeout: Duration,
) -> Vec<(Vec<u8>, usize)> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut heads = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        heads.clear();
        q.recv(pool, &mut heads, max);
        if heads.is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
        for &h in &heads {
            let mut v = Vec::new();
            pool.read_chain(h, &mut v);
            assert_eq!(v.len(), pool.meta(h).total_len as usize, "total_len");
            if seq_of(&v).is_some() {
                got.push((v, pool.chain_len(h)));
            }
        }
        pool.free_bulk(&heads);
    }
    got
}

/// Waits until `ip -d link show` shows no XDP program on `name`. Not at once: while another
/// thread of this process spawns a program (the tests run `ip` all the time), the child holds
/// a copy of every descriptor until its `exec` closes them, the BPF link's included, and the
/// kernel detaches the program when the last copy closes.
fn detached(ns: &Netns, name: &str) {
    let deadline = Instant::now() + WAIT;
    while ns.has_xdp(name) {
        assert!(
            Instant::now() < deadline,
            "an XDP program is still attached to {name}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends `frames` on an AF_XDP transmit queue (retrying while its frames are in flight).
fn send_all(tx: &mut TxQueue, pool: &mut Pool, frames: &[Vec<u8>]) {
    let pkts: Vec<u32> = frames.iter().map(|f| pool.from_bytes(f).unwrap()).collect();
    let mut from = 0;
    let deadline = Instant::now() + WAIT;
    while from < pkts.len() {
        assert!(
            Instant::now() < deadline,
            "stuck at {from} of {}",
            pkts.len()
        );
        from += tx.send(pool, &pkts[from..]).unwrap().consumed;
    }
    pool.free_bulk(&pkts);
}

#[test]
fn received_frames_arrive_intact_and_long_ones_as_chains() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let up = AfXdp::open("u0", AfXdpConfig::default()).unwrap();
    assert_eq!(
        (up.ifindex(), up.mac(), up.mtu()),
        (ns.ifindex("u0"), ns.mac("u0"), 1500)
    );
    // veth: native XDP, no zero-copy AF_XDP.
    assert_eq!(
        (up.mode(), up.attach_mode()),
        (XskMode::Copy, XdpAttach::Driver)
    );
    assert!(up.driver_mode_refusal().is_none());
    assert_eq!(up.frame_size(), 2048);
    assert!(ns.has_xdp("u0"));
    let (mut rx, _tx) = one_queue(up);
    let mut pool = pool(512);
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let plain_u0 = PacketSocket::open(ns.ifindex("u0")).unwrap();
    let mut sent: Vec<Vec<u8>> = [60, 1514, 61, 512, 513, 1024]
        .iter()
        .enumerate()
        .map(|(i, &len)| frame(i as u32, len))
        .collect();
    // A tag in the frame's bytes stays there: XDP sees the frame as it came.
    sent.push(tagged(6, 1518));
    for f in &sent {
        h0.send(f).unwrap();
    }
    let mut got = recv_frames(&mut rx, &mut pool, sent.len(), 256, WAIT);
    got.sort_by_key(|(f, _)| seq_of(f));
    assert_eq!(got.len(), sent.len());
    for ((f, bufs), s) in got.iter().zip(&sent) {
        assert!(f == s, "frame {:?} of {} bytes differs", seq_of(s), s.len());
        assert_eq!(
            *bufs,
            s.len().div_ceil(512),
            "buffers for {} bytes",
            s.len()
        );
    }
    let st = rx.counters().snapshot();
    assert_eq!(
        (st.packets, st.no_buffer, st.bad_desc),
        (sent.len() as u64, 0, 0)
    );
    // The program took them before the kernel's stack: a plain socket on u0 saw none.
    assert!(collect(&plain_u0, 1, Duration::from_millis(200)).is_empty());
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn sent_chains_and_external_segments_arrive_intact() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let (_rx, mut tx) = one_queue(AfXdp::open("u0", AfXdpConfig::default()).unwrap());
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    h0.set_recv_buffer(8 << 20).unwrap();
    // 512-byte buffers: a 1514-byte frame is a chain of 3.
    let mut pool = pool(512);
    let frames: Vec<Vec<u8>> = [60, 512, 513, 1514, 1024]
        .iter()
        .enumerate()
        .map(|(i, &len)| frame(i as u32, len))
        .collect();
    let mut pkts: Vec<u32> = frames.iter().map(|f| pool.from_bytes(f).unwrap()).collect();
    // A single-copy packet: 100 bytes here, the rest in a peer's memory.
    let ext = frame(5, 1400);
    pool.set_ext_source(1, Some(std::sync::Arc::new(Peer(ext.clone()))));
    let b = pool.from_bytes(&ext[..100]).unwrap();
    let m = pool.meta_mut(b);
    m.ext = Ext {
        source: 1,
        region: 0,
        offset: 100,
        len: 1300,
    };
    m.total_len = 1400;
    pkts.push(b);
    assert_eq!(pool.chain_len(pkts[3]), 3);
    let st = tx.send(&pool, &pkts).unwrap();
    assert_eq!((st.consumed, st.sent), (6, 6));
    pool.free_bulk(&pkts);
    let mut got = collect(&h0, 6, WAIT);
    got.sort_by_key(|f| seq_of(f));
    let mut want = frames;
    want.push(ext);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(g == w, "frame {:?} of {} bytes differs", seq_of(w), w.len());
    }
    let c = tx.counters().snapshot();
    let bytes: usize = want.iter().map(Vec::len).sum();
    assert_eq!((c.packets, c.bytes), (6, bytes as u64));
    // Every frame completes: the UMEM frames are all free again.
    let deadline = Instant::now() + WAIT;
    while tx.in_flight() != 0 {
        assert!(
            Instant::now() < deadline,
            "{} frames never completed",
            tx.in_flight()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(pool.available(), pool.capacity());
}

#[derive(Debug)]
struct Peer(Vec<u8>);

impl ExtSource for Peer {
    fn read(&self, region: u16, offset: u64, dst: &mut [u8]) -> bool {
        let o = offset as usize;
        if region != 0 || o + dst.len() > self.0.len() {
            return false;
        }
        dst.copy_from_slice(&self.0[o..o + dst.len()]);
        true
    }
}

/// Sends ten frames numbered from `first` on transmit queue `k` of `from` and returns what
/// each receive queue of `to` got.
fn steer(
    from: &mut [(RxQueue, TxQueue)],
    to: &mut [(RxQueue, TxQueue)],
    k: usize,
    first: u32,
    pool: &mut Pool,
) -> Vec<BTreeSet<u32>> {
    let frames: Vec<Vec<u8>> = (first..first + 10)
        .map(|i| frame(i, 60 + i as usize % 100))
        .collect();
    send_all(&mut from[k].1, pool, &frames);
    let mut per_queue = Vec::new();
    for (rx, _) in to.iter_mut() {
        let got = recv_frames(rx, pool, 10, 256, Duration::from_millis(300));
        for (f, _) in &got {
            assert_eq!(*f, frame(seq_of(f).unwrap(), f.len()), "changed on the way");
        }
        per_queue.push(got.iter().filter_map(|(f, _)| seq_of(f)).collect());
    }
    per_queue
}

#[test]
fn two_queues_each_carry_their_own_frames_both_ways() {
    let Some(ns) = setup() else { return };
    ns.veth_queues("u0", "h0", 1500, 2);
    let cfg = AfXdpConfig {
        queues: 2,
        ..Default::default()
    };
    let mut u0 = AfXdp::open("u0", cfg).unwrap().into_queues();
    // The far end is an AF_XDP uplink too: its socket on queue k transmits on queue k, and a
    // veth's XDP receive queue is the queue its peer transmitted on.
    let mut h0 = AfXdp::open("h0", cfg).unwrap().into_queues();
    assert_eq!((u0[1].0.queue(), u0[1].1.queue()), (1, 1));
    let mut pool = pool(2048);
    let ten = |first: u32| (first..first + 10).collect::<BTreeSet<u32>>();
    let none = BTreeSet::new();
    assert_eq!(
        steer(&mut h0, &mut u0, 0, 0, &mut pool),
        [ten(0), none.clone()]
    );
    assert_eq!(
        steer(&mut h0, &mut u0, 1, 100, &mut pool),
        [none.clone(), ten(100)]
    );
    assert_eq!(
        steer(&mut u0, &mut h0, 0, 200, &mut pool),
        [ten(200), none.clone()]
    );
    assert_eq!(steer(&mut u0, &mut h0, 1, 300, &mut pool), [none, ten(300)]);
    for (rx, tx) in &u0 {
        assert_eq!(rx.counters().snapshot().packets, 10);
        assert_eq!(tx.counters().snapshot().packets, 10);
    }
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn frames_for_a_queue_without_a_socket_pass_to_the_kernel_stack() {
    let Some(ns) = setup() else { return };
    ns.veth_queues("u0", "h0", 1500, 2);
    // A socket on queue 0 only: the map has no entry for queue 1.
    let mut u0 = AfXdp::open("u0", AfXdpConfig::default())
        .unwrap()
        .into_queues();
    let mut h0 = AfXdp::open(
        "h0",
        AfXdpConfig {
            queues: 2,
            ..Default::default()
        },
    )
    .unwrap()
    .into_queues();
    let plain_u0 = PacketSocket::open(ns.ifindex("u0")).unwrap();
    let mut pool = pool(2048);
    let ten = |first: u32| (first..first + 10).collect::<BTreeSet<u32>>();
    let seqs = |got: Vec<Vec<u8>>| {
        got.iter()
            .filter_map(|f| seq_of(f))
            .collect::<BTreeSet<u32>>()
    };
    // Queue 0: redirected to our socket, unseen by the stack.
    assert_eq!(steer(&mut h0, &mut u0, 0, 0, &mut pool), [ten(0)]);
    assert_eq!(
        seqs(collect(&plain_u0, 10, Duration::from_millis(300))),
        BTreeSet::new()
    );
    // Queue 1: no socket, XDP_PASS: the stack (and so a packet socket) has them.
    assert_eq!(
        steer(&mut h0, &mut u0, 1, 100, &mut pool),
        [BTreeSet::new()]
    );
    assert_eq!(seqs(collect(&plain_u0, 10, WAIT)), ten(100));
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_larger_mtu_needs_larger_frames_and_skb_mode_on_veth() {
    let Some(ns) = setup() else { return };
    // The largest MTU a 4096-byte UMEM frame carries: 4096 - 256 headroom - 18 (tagged).
    ns.veth("u0", "h0", 3822);
    let up = AfXdp::open("u0", AfXdpConfig::default()).unwrap();
    assert_eq!(up.frame_size(), 4096);
    // veth refuses driver-mode XDP when the peer's MTU does not fit one page with the XDP
    // headroom and skb overhead (3506 here); auto falls back to generic XDP.
    assert_eq!(
        (up.attach_mode(), up.mode()),
        (XdpAttach::Skb, XskMode::Copy)
    );
    let why = up.driver_mode_refusal().unwrap();
    assert_eq!(why.raw_os_error(), Some(libc::ERANGE), "{why}");
    let (mut rx, tx) = one_queue(up);
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let sent = [
        frame(0, 3000),
        frame(1, 3836),
        tagged(2, 3840),
        frame(3, 60),
    ];
    for f in &sent {
        h0.send(f).unwrap();
    }
    let mut pool = pool(2048);
    let mut got = recv_frames(&mut rx, &mut pool, sent.len(), 256, WAIT);
    got.sort_by_key(|(f, _)| seq_of(f));
    let got: Vec<Vec<u8>> = got.into_iter().map(|(f, _)| f).collect();
    assert_eq!(got, sent);
    rx.refresh_kernel_stats();
    assert_eq!(rx.counters().snapshot().kernel_drops, 0);
    drop((rx, tx));
    detached(&ns, "u0");

    // Driver mode asked for explicitly: refused, saying why.
    let e = AfXdp::open(
        "u0",
        AfXdpConfig {
            attach: XdpAttach::Driver,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            AfXdpError::Attach {
                mode: XdpAttach::Driver,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("MTU 3506 at 4 KiB pages"), "{e}");
    detached(&ns, "u0");

    // One more byte of MTU and no UMEM frame holds the largest frame.
    ns.ip(&["link", "set", "u0", "mtu", "3823"]);
    let e = AfXdp::open("u0", AfXdpConfig::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "af_xdp \"u0\": the interface's MTU 3823 is too large: a 4096-byte UMEM frame holds \
         frames of MTU 3822 at most (after the kernel's 256 bytes of headroom and 18 of \
         Ethernet and VLAN headers); lower the MTU to 3822 or less"
    );
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn the_program_is_detached_when_the_last_queue_is_dropped_and_never_replaced() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    assert!(!ns.has_xdp("u0"));
    let up = AfXdp::open("u0", AfXdpConfig::default()).unwrap();
    assert!(ns.has_xdp("u0"));
    // A second uplink, in either mode, finds the program there and refuses.
    for attach in [XdpAttach::Auto, XdpAttach::Skb] {
        let cfg = AfXdpConfig {
            attach,
            ..Default::default()
        };
        let e = AfXdp::open("u0", cfg).unwrap_err();
        assert!(matches!(e, AfXdpError::XdpBusy { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("another XDP program is already attached"),
            "{e}"
        );
    }
    let (rx, tx) = one_queue(up);
    drop(tx);
    assert!(ns.has_xdp("u0"), "the receive queue still holds it");
    drop(rx);
    detached(&ns, "u0");
    // And an uplink can be opened again.
    let up = AfXdp::open("u0", AfXdpConfig::default()).unwrap();
    assert!(ns.has_xdp("u0"));
    drop(up);
    detached(&ns, "u0");
}

/// What the child prints once its uplink is open.
const CHILD_READY: &str = "AF-XDP-CHILD-ATTACHED";

/// Run as a child process by the next test: holds an uplink on the interface the environment
/// names until killed. Does nothing in a normal test run.
#[test]
fn child_holding_an_uplink() {
    let Ok(name) = std::env::var("VECLANE_AF_XDP_CHILD") else {
        return;
    };
    let _up = AfXdp::open(&name, AfXdpConfig::default()).unwrap();
    println!("{CHILD_READY}");
    std::thread::sleep(Duration::from_secs(60));
}

/// Kills the child however the test ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_program_is_detached_when_the_process_is_killed() {
    use std::io::BufRead;
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    // The child inherits this thread's network namespace.
    let mut child = Child(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_holding_an_uplink",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("VECLANE_AF_XDP_CHILD", "u0")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(child.0.stdout.take().unwrap()).lines();
    // libtest prints "test NAME ... " before the test's own output, on the same line.
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.contains(CHILD_READY))),
        "the child never attached"
    );
    assert!(ns.has_xdp("u0"));
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // The link's fd closed with the process: the kernel detached the program.
    detached(&ns, "u0");
    AfXdp::open("u0", AfXdpConfig::default()).unwrap();
}

#[test]
fn zero_copy_is_refused_on_veth_and_auto_falls_back_to_copy() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let cfg = AfXdpConfig {
        mode: XskMode::ZeroCopy,
        ..Default::default()
    };
    let e = AfXdp::open("u0", cfg).unwrap_err();
    assert!(
        matches!(e, AfXdpError::ZeroCopyUnsupported { queue: 0, .. }),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("af_xdp \"u0\" queue 0: the driver does not support zero-copy AF_XDP"),
        "{e}"
    );
    detached(&ns, "u0");
    for mode in [XskMode::Auto, XskMode::Copy] {
        let up = AfXdp::open(
            "u0",
            AfXdpConfig {
                mode,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(up.mode(), XskMode::Copy);
    }
}

#[test]
fn a_link_going_down_and_vanishing_gives_errors_not_panics() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let (mut rx, mut tx) = one_queue(AfXdp::open("u0", AfXdpConfig::default()).unwrap());
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    let one = pool.from_bytes(&frame(1, 60)).unwrap();

    ns.ip(&["link", "set", "u0", "down"]);
    assert_eq!(tx.send(&pool, &[one]), Err(LinkError::Down));
    assert_eq!(tx.send(&pool, &[one]), Err(LinkError::Down), "still down");
    assert_eq!(
        tx.in_flight(),
        1,
        "the first was placed before the kick found the link down"
    );
    assert_eq!(rx.check_link(), Err(LinkError::Down));
    assert_eq!(tx.counters().snapshot().link_down, 2);

    ns.ip(&["link", "set", "u0", "up"]);
    assert_eq!(rx.check_link(), Ok(()));
    let two = pool.from_bytes(&frame(2, 60)).unwrap();
    assert_eq!(tx.send(&pool, &[two]).unwrap().sent, 1);
    // The frame queued while down goes out with it.
    let got: BTreeSet<u32> = collect(&h0, 2, WAIT)
        .iter()
        .filter_map(|f| seq_of(f))
        .collect();
    assert_eq!(got, BTreeSet::from([1, 2]));
    h0.send(&frame(3, 60)).unwrap();
    assert_eq!(
        recv_frames(&mut rx, &mut pool, 1, 256, WAIT).len(),
        1,
        "receive resumes"
    );

    ns.ip(&["link", "del", "u0"]);
    assert_eq!(tx.send(&pool, &[one]), Err(LinkError::Vanished));
    assert_eq!(tx.check_link(), Err(LinkError::Vanished));
    assert_eq!(rx.check_link(), Err(LinkError::Vanished));
    let mut out = Vec::new();
    assert_eq!(rx.recv(&mut pool, &mut out, 256).packets, 0);
    assert!(!rx.pending());
    assert!(!rx.arm());
    drop((rx, tx));
    pool.free_bulk(&[one, two]);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn no_free_tx_frame_stops_the_batch_and_is_counted() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    // 64 frames: 32 to receive into, 32 to send from.
    let cfg = AfXdpConfig {
        frames: 64,
        ..Default::default()
    };
    let (_rx, mut tx) = one_queue(AfXdp::open("u0", cfg).unwrap());
    assert_eq!(tx.capacity(), 32);
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    let frames: Vec<Vec<u8>> = (0..100).map(|i| frame(i, 100)).collect();
    let pkts: Vec<u32> = frames.iter().map(|f| pool.from_bytes(f).unwrap()).collect();
    let st = tx.send(&pool, &pkts).unwrap();
    assert_eq!((st.consumed, st.sent), (32, 32));
    let c = tx.counters().snapshot();
    assert_eq!((c.ring_full, c.tx_no_room, c.packets), (1, 68, 32));
    // The rest as the kernel completes frames: each UMEM frame is used three times or more.
    let mut from = 32;
    let deadline = Instant::now() + WAIT;
    while from < pkts.len() {
        assert!(Instant::now() < deadline);
        from += tx.send(&pool, &pkts[from..]).unwrap().consumed;
    }
    pool.free_bulk(&pkts);
    let got = collect(&h0, 100, WAIT);
    assert_eq!(got, frames, "every frame once, in order");
    let c = tx.counters().snapshot();
    assert_eq!((c.packets, c.bad_completion, c.kick_errors), (100, 0, 0));
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn oversize_and_runt_frames_are_refused_and_counted() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let (_rx, mut tx) = one_queue(AfXdp::open("u0", AfXdpConfig::default()).unwrap());
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    let frames = [
        frame(0, 1514),
        frame(1, 1515),
        tagged(2, 1518),
        tagged(3, 1519),
        frame(4, 60)[..13].to_vec(),
        frame(5, 60),
    ];
    let pkts: Vec<u32> = frames.iter().map(|f| pool.from_bytes(f).unwrap()).collect();
    let st = tx.send(&pool, &pkts).unwrap();
    assert_eq!(
        (st.consumed, st.sent, st.oversize, st.malformed),
        (6, 3, 2, 1)
    );
    pool.free_bulk(&pkts);
    let c = tx.counters().snapshot();
    assert_eq!((c.packets, c.oversize, c.malformed), (3, 2, 1));
    let got: Vec<u32> = collect(&h0, 3, WAIT)
        .iter()
        .filter_map(|f| seq_of(f))
        .collect();
    assert_eq!(got, [0, 2, 5]);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn an_empty_pool_drops_and_counts_but_gives_the_frames_back_to_the_kernel() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let cfg = AfXdpConfig {
        frames: 64,
        ..Default::default()
    };
    let (mut rx, _tx) = one_queue(AfXdp::open("u0", cfg).unwrap());
    assert_eq!(rx.capacity(), 32);
    let mut pool = pool(2048);
    let mut held = vec![0u32; pool.capacity()];
    assert!(pool.alloc_bulk(&mut held));
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    // More frames than the UMEM has receive frames, in bursts the fill ring can take.
    let mut dropped = 0;
    let mut out = Vec::new();
    for burst in 0..4 {
        for i in 0..20 {
            h0.send(&frame(burst * 20 + i, 100)).unwrap();
        }
        let deadline = Instant::now() + WAIT;
        while dropped < (burst as usize + 1) * 20 && Instant::now() < deadline {
            dropped += rx.recv(&mut pool, &mut out, 256).no_buffer;
        }
    }
    assert_eq!((dropped, out.len()), (80, 0));
    assert!(!rx.pending());
    pool.free_bulk(&held);
    h0.send(&frame(99, 100)).unwrap();
    assert_eq!(
        recv_frames(&mut rx, &mut pool, 1, 256, WAIT).len(),
        1,
        "still works"
    );
    rx.refresh_kernel_stats();
    let c = rx.counters().snapshot();
    assert_eq!(
        (c.no_buffer, c.packets, c.kernel_drops, c.fill_empty),
        (80, 1, 0, 0)
    );
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn bursts_of_a_whole_fill_ring_keep_flowing_without_arming() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let cfg = AfXdpConfig {
        frames: 64,
        ..Default::default()
    };
    let (mut rx, _tx) = one_queue(AfXdp::open("u0", cfg).unwrap());
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    // Each burst takes every receive frame; only `recv` gives them back (a busy poller never
    // arms), so a frame left off the fill ring would stall the next burst.
    for burst in 0..20u32 {
        let frames: Vec<Vec<u8>> = (0..32).map(|i| frame(burst * 32 + i, 64)).collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        assert_eq!(h0.send_batch(&refs).unwrap(), 32);
        let got = recv_frames(&mut rx, &mut pool, 32, 256, WAIT);
        assert_eq!(got.len(), 32, "burst {burst}");
    }
    rx.refresh_kernel_stats();
    let c = rx.counters().snapshot();
    assert_eq!((c.packets, c.kernel_drops, c.fill_empty), (640, 0, 0));
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn a_lone_frame_wakes_a_sleeper_through_the_socket() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let (mut rx, _tx) = one_queue(AfXdp::open("u0", AfXdpConfig::default()).unwrap());
    let h0 = PacketSocket::open(ns.ifindex("h0")).unwrap();
    let mut pool = pool(2048);
    let mut waits = Vec::new();
    for i in 0..9 {
        assert!(!rx.arm(), "nothing pending before the frame");
        h0.send(&frame(i, 60)).unwrap();
        let t = Instant::now();
        let fd = rx.fd();
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let one_s = rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        assert_eq!(rustix::event::poll(&mut fds, Some(&one_s)).unwrap(), 1);
        waits.push(t.elapsed());
        assert!(rx.pending());
        assert_eq!(recv_frames(&mut rx, &mut pool, 1, 256, WAIT).len(), 1);
    }
    waits.sort();
    // No batching timer: the kernel raises POLLIN as it posts the frame.
    assert!(
        waits[4] < Duration::from_millis(2),
        "wake-ups took {waits:?}"
    );
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn bad_configurations_are_refused_by_name() {
    let Some(ns) = setup() else { return };
    ns.veth("u0", "h0", 1500);
    let e = AfXdp::open("no-such-if", AfXdpConfig::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no interface named \"no-such-if\" in this network namespace"
    );
    let e = AfXdp::open("lo", AfXdpConfig::default()).unwrap_err();
    assert!(e.to_string().contains("not Ethernet"), "{e}");
    let bad = |cfg: AfXdpConfig| AfXdp::open("u0", cfg).unwrap_err().to_string();
    let d = AfXdpConfig::default();
    assert_eq!(
        bad(AfXdpConfig { frames: 100, ..d }),
        "af_xdp \"u0\": frames = 100 is invalid: a power of two from 64 to 1048576"
    );
    assert_eq!(
        bad(AfXdpConfig {
            frame_size: 3000,
            ..d
        }),
        "af_xdp \"u0\": frame_size = 3000 is invalid: 2048 or 4096 (or 0: from the MTU)"
    );
    assert_eq!(
        bad(AfXdpConfig { queues: 0, ..d }),
        "af_xdp \"u0\": queues = 0 is invalid: at least 1"
    );
    // The veth has one queue: the second socket's bind is refused, and nothing stays.
    let e = bad(AfXdpConfig { queues: 2, ..d });
    assert!(
        e.starts_with("af_xdp \"u0\": queues = 2 is invalid: at most the interface's queue count"),
        "{e}"
    );
    detached(&ns, "u0");
}
