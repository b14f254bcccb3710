//! Interrupts: the ring's eventfd and its `MASK_INT` flag, from both sides.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

use super::QueueBase;
use super::counters::bump;
use crate::ring::RING_FLAG_MASK_INT;

/// The kernel refused RWF_NOWAIT on an eventfd read (older than 5.12): poll, then read.
static NOWAIT_UNSUPPORTED: AtomicBool = AtomicBool::new(false);

impl QueueBase {
    /// Producer side: wake the consumer unless it masked interrupts.
    #[inline]
    pub(super) fn signal(&self) {
        if self.ring.flags() & RING_FLAG_MASK_INT == 0 {
            // The eventfd is one open file description shared with the peer, which can clear
            // O_NONBLOCK on it and fill its counter so that a plain write would block us. Write
            // only when poll says a write cannot block; a counter that is full already means
            // "wake up". A peer that fills it between the poll and the write (eventfds take no
            // RWF_NOWAIT on writes) keeps us in write() until the daemon's watchdog interrupts
            // us (crate::unblock): EINTR, and the peer has shown what it is.
            if self.irq_ready(rustix::event::PollFlags::OUT) {
                self.write_signal();
            }
        }
    }

    /// Writes the signal. A write the daemon's watchdog interrupted (EINTR: the peer filled
    /// the counter after our poll, and we waited) ends the peer's connection.
    fn write_signal(&self) {
        match rustix::io::write(&self.irq, &1u64.to_ne_bytes()) {
            Err(rustix::io::Errno::INTR) => self.link.fault(
                "the peer's interrupt eventfd blocked our write (O_NONBLOCK cleared and its \
                 counter filled)"
                    .into(),
            ),
            _ => bump(&self.counters.interrupts_sent, 1),
        }
    }

    /// Consumer side: clears the eventfd's counter; whether there was a signal. The eventfd is
    /// shared with the peer, which can clear O_NONBLOCK on it (we set it when the ring was
    /// added) and drain it between any look of ours and our read: a plain read of an empty
    /// blocking eventfd would never return. `preadv2` with RWF_NOWAIT never waits, whatever
    /// the description's flags (eventfds honour it since Linux 5.12); an older kernel refuses
    /// the flag, and there the read comes only after a poll says it cannot block (which a
    /// peer racing us precisely can still defeat).
    fn take_signal(&self) -> bool {
        let mut b = [0u8; 8];
        if !NOWAIT_UNSUPPORTED.load(Ordering::Relaxed) {
            match rustix::io::preadv2(
                &self.irq,
                &mut [std::io::IoSliceMut::new(&mut b)],
                u64::MAX,
                rustix::io::ReadWriteFlags::NOWAIT,
            ) {
                Ok(n) => return n == 8,
                Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {
                    NOWAIT_UNSUPPORTED.store(true, Ordering::Relaxed);
                }
                Err(_) => return false,
            }
        }
        if !self.irq_ready(rustix::event::PollFlags::IN) {
            return false;
        }
        matches!(rustix::io::read(&self.irq, &mut b), Ok(8))
    }

    /// Whether the eventfd is ready for `what` (IN or OUT) right now: a zero-timeout poll.
    #[inline]
    fn irq_ready(&self, what: rustix::event::PollFlags) -> bool {
        let mut p = [rustix::event::PollFd::new(&self.irq, what)];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(rustix::event::poll(&mut p, Some(&zero)), Ok(1)) && p[0].revents().contains(what)
    }

    /// Consumer side: mask or unmask the peer's signals on this ring.
    pub(super) fn set_interrupt_mode(&mut self, on: bool) {
        self.interrupt_mode = on;
        self.ring.set_flags(if on { 0 } else { RING_FLAG_MASK_INT });
    }

    /// Consumer side, for a caller that sleeps on many queues at once: `on` unmasks the
    /// peer's signals and returns `ready()` (the lost-wakeup re-check); `!on` clears the
    /// eventfd and masks signals again unless the queue is in interrupt mode.
    pub(super) fn arm(&self, on: bool, ready: impl Fn() -> bool) -> bool {
        if on {
            self.ring.set_flags(0);
            return ready();
        }
        if self.take_signal() {
            bump(&self.counters.interrupts_received, 1);
        }
        if !self.interrupt_mode {
            self.ring.set_flags(RING_FLAG_MASK_INT);
        }
        false
    }

    /// Consumer side: sleep until the peer signals or `timeout_ms` passes, unless `ready()`
    /// already holds after unmasking (the lost-wakeup re-check). Returns `ready()`.
    pub(super) fn wait(&self, timeout_ms: i32, ready: impl Fn() -> bool) -> bool {
        self.ring.set_flags(0);
        if !ready()
            && let Ok(r) = crate::sock::wait_readable(&[self.irq.as_fd()], timeout_ms)
            && r[0]
        {
            self.take_signal();
            bump(&self.counters.interrupts_received, 1);
        }
        if !self.interrupt_mode {
            self.ring.set_flags(RING_FLAG_MASK_INT);
        }
        ready()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::queue::Link;
    use crate::ring::{Ring, RingLayout};
    use crate::shm::SharedMemory;
    use crate::unblock;

    /// The system call thread `tid` of this process waits in, if any (write(2) is 1).
    fn waiting_in(tid: i32) -> Option<u64> {
        let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
        s.split_whitespace().next()?.parse().ok()
    }

    /// The peer cleared O_NONBLOCK and filled the counter after our poll: our write waits in
    /// write(2) (the state is made here directly, the race being the peer's to win). The test
    /// plays the daemon's watchdog and interrupts the thread there; the write must end the
    /// peer's connection, not be taken for a signal sent.
    #[test]
    fn a_producer_caught_in_a_peers_write_cuts_the_peer_off_when_interrupted() {
        unblock::install();
        let shm = Arc::new(SharedMemory::anonymous(1 << 16).unwrap());
        let ring = Ring::new(shm, 0, 4, RingLayout::CacheLine64).unwrap();
        // Blocking, as a hostile peer leaves the shared description, and full.
        let irq = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap();
        rustix::io::write(&irq, &(u64::MAX - 1).to_ne_bytes()).unwrap();
        let link = Link::new_up();
        let base = QueueBase::new(ring, irq, link.clone(), 0);
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tid_tx.send(unblock::current_thread());
            base.write_signal();
            let _ = done_tx.send(base.counters.snapshot().interrupts_sent);
        });
        let tid = tid_rx.recv().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while waiting_in(tid) != Some(1) {
            assert!(
                Instant::now() < deadline,
                "the producer never got to write(2)"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        unblock::interrupt(tid).unwrap();
        let sent = done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the interrupted write did not return");
        assert_eq!(sent, 0, "an interrupted write counted as a signal sent");
        assert!(!link.is_up());
        let reason = link.take_fault().unwrap_or_default();
        assert!(reason.contains("eventfd blocked our write"), "{reason}");
    }
}
