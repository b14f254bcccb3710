//! Signalling through an eventfd the peer controls. The eventfd of a ring is one open file
//! description shared with the peer, which can clear O_NONBLOCK on it, fill its counter, or
//! drain it, at any moment: no read or write of ours may block on it.

mod common;
mod evil;

use std::time::{Duration, Instant};

use common::*;
use memif::Listener;
use memif::ring::Desc;

use evil::*;

#[test]
fn a_peer_cannot_stall_our_signalling_through_its_eventfd() {
    // The peer makes the shared eventfd blocking and fills its counter: our producer must skip
    // the signal instead of blocking in write().
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let (ev, [_, m2s_irq], mut queues) = connected_with_blocking_eventfds(&mut l);
    rustix::io::write(&m2s_irq, &0xffff_ffff_ffff_fffeu64.to_ne_bytes()).unwrap();
    let m2s = &ev.m2s;
    m2s.set_desc(
        0,
        Desc {
            flags: 0,
            region: 0,
            length: 2048,
            offset: RINGS as u32,
            metadata: 0,
        },
    );
    m2s.set_head(1);
    let mut pool = pool();
    let b = pool.from_bytes(&[5; 64]).unwrap();
    // Would hang forever in write() without the POLLOUT check.
    assert_eq!(queues.tx[0].send(&pool, &[b]).unwrap(), 1);
    assert_eq!(queues.tx[0].stats().interrupts_sent, 0);
    pool.free(b);
}

#[test]
fn a_peer_cannot_stall_our_receive_through_its_eventfd() {
    // The peer makes the eventfd it signals us on blocking and leaves its counter at zero: our
    // consumer clearing it (after a sleep, or when arming) must not block in read().
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let (e, _irqs, mut queues) = connected_with_blocking_eventfds(&mut l);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let rx = queues.rx.remove(0);
    std::thread::spawn(move || {
        let mut rx = rx;
        rx.set_interrupt_mode(true);
        // Would hang forever in read() without the POLLIN check.
        rx.arm(false);
        assert!(!rx.wait(10));
        let _ = done_tx.send(rx.stats().interrupts_received);
    });
    let received = done_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the consumer blocked on the peer's eventfd");
    assert_eq!(received, 0, "no signal came");
    drop(e);
}

/// A hostile secondary connected with one ring each way whose eventfds it made blocking
/// again after we set O_NONBLOCK on the shared description (as a peer can): the peer (with
/// its rings), the two eventfds (S2M, M2S) and our queues.
fn connected_with_blocking_eventfds(
    l: &mut Listener,
) -> (
    EvilConnected,
    [std::os::fd::OwnedFd; 2],
    memif::PrimaryQueues,
) {
    let irqs = [eventfd(), eventfd()];
    let (e, queues) = evil_connected_with(l, 0, &irqs);
    for fd in &irqs {
        let fl = rustix::fs::fcntl_getfl(fd).unwrap();
        rustix::fs::fcntl_setfl(fd, fl - rustix::fs::OFlags::NONBLOCK).unwrap();
    }
    (e, irqs, queues)
}

/// The system call thread `tid` of this process is blocked in, if any: its number (read(2) is
/// 0), from /proc.
fn blocked_syscall(tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

#[test]
fn a_peer_racing_our_receive_cannot_stall_it() {
    // The peer signals and drains the blocking eventfd it signals us on as fast as it can, so
    // that it is often readable when we look and empty when we read: a poll-then-read would
    // be caught blocked in read(2) with nothing to read. The peer stops signalling as soon as
    // it sees that, which a hostile peer would do too (then we would wait for ever).
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut l = listener(&dir, vec![cfg(0)]);
    let (e, [s2m_irq, _], mut queues) = connected_with_blocking_eventfds(&mut l);
    let rx = queues.rx.remove(0);
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rx = rx;
        rx.set_interrupt_mode(true);
        let _ = tid_tx.send(rustix::thread::gettid().as_raw_nonzero().get());
        for _ in 0..1_000_000 {
            rx.arm(false);
        }
        let _ = done_tx.send(());
    });
    let tid = tid_rx.recv().unwrap();
    // A million rounds take half a second alone; a busy machine may take much longer.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut b = [0u8; 8];
    let stalled = loop {
        if done_rx.try_recv().is_ok() {
            break false;
        }
        assert!(
            Instant::now() < deadline,
            "the consumer neither finished nor stalled"
        );
        rustix::io::write(&s2m_irq, &1u64.to_ne_bytes()).unwrap();
        std::thread::yield_now();
        let _ = rustix::io::preadv2(
            &s2m_irq,
            &mut [std::io::IoSliceMut::new(&mut b)],
            u64::MAX,
            rustix::io::ReadWriteFlags::NOWAIT,
        );
        if blocked_syscall(tid) == Some(0) {
            // Let the blocked read go, so that the thread ends.
            std::thread::sleep(Duration::from_millis(20));
            if blocked_syscall(tid) == Some(0) {
                rustix::io::write(&s2m_irq, &1u64.to_ne_bytes()).unwrap();
                break true;
            }
        }
    };
    assert!(
        !stalled,
        "the consumer was caught blocked in read(2) on the peer's eventfd"
    );
    drop(e);
}
