//! The end of a trial, as the counters see it: what the peer still had in hand when the run
//! stopped.

use std::time::{Duration, Instant};

use super::{Queues, Session};

impl Session {
    /// Waits, after a run, until the peer has taken every frame off our rings and returned
    /// what it will: receives (and discards) what arrives until nothing has for `quiet` and
    /// our transmit rings are empty, for `max` at most. Returns the frames received.
    ///
    /// A run ends once its drain bound passes, and on a busy host the peer may not have run
    /// by then: frames still in our rings are taken and forwarded later, where the run's
    /// report no longer sees them. A harness that compares the peer's counters with the
    /// report settles first and adds these frames to what came back (they do not count as
    /// received in the measurement: they came after it). A peer that went away ends the wait.
    pub fn settle(&mut self, quiet: Duration, max: Duration) -> u64 {
        let start = Instant::now();
        let mut last_rx = start;
        let mut got = 0u64;
        let mut out = Vec::with_capacity(256);
        let Session { peers, pool, .. } = self;
        loop {
            let mut n = 0u64;
            let mut down = false;
            for q in peers.iter_mut() {
                match q {
                    Queues::Primary(q) => {
                        for r in q.rx.iter_mut() {
                            out.clear();
                            down |= r.recv(pool, &mut out, 256).is_err();
                            pool.free_bulk(&out);
                            n += out.len() as u64;
                        }
                    }
                    Queues::Kernel(q) => {
                        for r in q.rx.iter_mut() {
                            out.clear();
                            r.recv(pool, &mut out, 256);
                            pool.free_bulk(&out);
                            n += out.len() as u64;
                        }
                    }
                    Queues::Secondary(q) => {
                        for r in q.rx.iter_mut() {
                            match r.recv_with(256, |_| {}) {
                                Ok(k) => n += k as u64,
                                Err(_) => down = true,
                            }
                        }
                    }
                }
            }
            let now = Instant::now();
            if n > 0 {
                got += n;
                last_rx = now;
            }
            let idle = now.duration_since(last_rx) >= quiet;
            if down || (peers.iter_mut().all(flushed) && idle) || now.duration_since(start) >= max {
                return got;
            }
            if n == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}

/// Whether the peer has taken every frame off `q`'s transmit rings (a ring whose link went
/// down counts as taken: nothing more will be).
pub(super) fn flushed(q: &mut Queues) -> bool {
    match q {
        Queues::Secondary(q) => q.tx.iter().all(|t| t.in_flight().map_or(true, |n| n == 0)),
        Queues::Primary(q) => {
            q.tx.iter_mut()
                .all(|t| t.in_flight().map_or(true, |n| n == 0))
        }
        // A qdisc-bypass send hands every frame to the driver within the call.
        Queues::Kernel(_) => true,
    }
}
