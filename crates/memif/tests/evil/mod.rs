//! The hostile peer of `memif::testing::evil` against an in-process listener, and the
//! helpers only these tests need.
#![allow(dead_code)]

use std::os::fd::OwnedFd;

use memif::{Event, InterfaceConfig, Listener};

pub use memif::testing::evil::*;

use super::common::*;

/// Tests here count the process's open fds, so they run one at a time.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

pub fn listener(dir: &tempfile::TempDir, ifaces: Vec<InterfaceConfig>) -> Listener {
    Listener::bind(&sock_path(dir), ifaces).unwrap()
}

pub fn evil_connected(l: &mut Listener, id: u32) -> (EvilConnected, memif::PrimaryQueues) {
    evil_connected_with(l, id, &[eventfd(), eventfd()])
}

/// As [`evil_connected`], the rings' eventfds (S2M, M2S) being `irqs` (the peer keeps its
/// own descriptors of them); the listener's queues of the connection too.
pub fn evil_connected_with(
    l: &mut Listener,
    id: u32,
    irqs: &[OwnedFd; 2],
) -> (EvilConnected, memif::PrimaryQueues) {
    let ev = connect_by_hand(l, id, irqs);
    let q = match l.next_event() {
        Some(Event::Connected { queues, .. }) => queues,
        other => panic!("{other:?}"),
    };
    (ev, q)
}
