//! Helpers shared by the interop tests.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use memif::{Client, Event, Listener, PeerInfo, PrimaryQueues, SecondaryQueues};

/// Polls our secondary until it is connected to `peer` (panics after 10 s with the reason).
pub fn connected_secondary(c: &mut Client, peer: &str) -> (PeerInfo, SecondaryQueues) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = c.interfaces();
        assert!(
            Instant::now() < deadline,
            "no connection to {peer}: {:?} {st:?}",
            c.last_connect_error(st[0].id)
        );
        c.poll(Duration::from_millis(10)).unwrap();
        if let Some(Event::Connected { queues, peer, .. }) = c.next_event() {
            return (peer, queues);
        }
    }
}

/// Polls our primary until `peer` has connected to it (panics after 10 s).
pub fn connected_primary(l: &mut Listener, peer: &str) -> (PeerInfo, PrimaryQueues) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "{peer} never connected: {:?}",
            l.interfaces()
        );
        l.poll(Duration::from_millis(10)).unwrap();
        if let Some(Event::Connected { queues, peer, .. }) = l.next_event() {
            return (peer, queues);
        }
    }
}
