//! Shared helpers: an in-process primary/secondary pair stepped deterministically.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use memif::{Client, Event, InterfaceConfig, Listener, PrimaryQueues, SecondaryQueues, SocketPath};

pub const Z: Duration = Duration::ZERO;

pub fn sock_path(dir: &tempfile::TempDir) -> SocketPath {
    SocketPath::File(dir.path().join("memif.sock"))
}

pub fn pool() -> Pool {
    Pool::new(PoolConfig {
        count: 8192,
        ..Default::default()
    })
    .unwrap()
}

/// Steps both ends until each reports Connected (or panics after 5 s).
pub fn connect(l: &mut Listener, c: &mut Client) -> (PrimaryQueues, SecondaryQueues) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut p, mut s) = (None, None);
    while p.is_none() || s.is_none() {
        assert!(
            Instant::now() < deadline,
            "no connection: {:?} {:?}",
            l.interfaces(),
            c.interfaces()
        );
        c.poll(Duration::from_millis(1)).unwrap();
        l.poll(Duration::from_millis(1)).unwrap();
        while let Some(e) = l.next_event() {
            match e {
                Event::Connected { queues, .. } => p = Some(queues),
                Event::Disconnected { reason, .. } => panic!("primary saw disconnect: {reason}"),
            }
        }
        while let Some(e) = c.next_event() {
            match e {
                Event::Connected { queues, .. } => s = Some(queues),
                Event::Disconnected { reason, .. } => panic!("secondary saw disconnect: {reason}"),
            }
        }
    }
    (p.unwrap(), s.unwrap())
}

/// Both ends of interface `ic` (the same configuration on each side), connected through a
/// socket in `dir`. The listener and the client come back too: the connection lasts as long
/// as they do.
pub fn connected(
    dir: &tempfile::TempDir,
    ic: InterfaceConfig,
) -> (Listener, Client, PrimaryQueues, SecondaryQueues) {
    let path = sock_path(dir);
    let mut l = Listener::bind(&path, vec![ic.clone()]).unwrap();
    let mut c = Client::new(&path, vec![ic]).unwrap();
    let (p, s) = connect(&mut l, &mut c);
    (l, c, p, s)
}

pub fn cfg(id: u32) -> InterfaceConfig {
    InterfaceConfig {
        id,
        name: format!("test{id}"),
        ..Default::default()
    }
}

/// A frame whose every byte depends on its sequence number and position.
pub fn frame(seq: u32, len: usize) -> Vec<u8> {
    testkit::seq_frame(seq.into(), len, testkit::Pattern::linear(31, 7))
}
