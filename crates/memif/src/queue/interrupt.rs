//! Interrupts: the ring's eventfd and its `MASK_INT` flag, from both sides.

use std::os::fd::AsFd;

use super::QueueBase;
use super::counters::bump;
use crate::ring::RING_FLAG_MASK_INT;

impl QueueBase {
    /// Producer side: wake the consumer unless it masked interrupts.
    #[inline]
    pub(super) fn signal(&self) {
        if self.ring.flags() & RING_FLAG_MASK_INT == 0 {
            // The eventfd is one open file description shared with the peer, which can clear
            // O_NONBLOCK on it and fill its counter so that a plain write would block us. Write
            // only when poll says a write cannot block; a counter that is full already means
            // "wake up". (A peer that races poll and write precisely can still stall this
            // thread; eventfds support neither RWF_NOWAIT nor reopening via /proc.)
            if self.irq_ready(rustix::event::PollFlags::OUT) {
                let _ = rustix::io::write(&self.irq, &1u64.to_ne_bytes());
                bump(&self.counters.interrupts_sent, 1);
            }
        }
    }

    /// Consumer side: clears the eventfd's counter; whether there was a signal. The eventfd is
    /// shared with the peer, which can clear O_NONBLOCK on it (we set it when the ring was
    /// added), and a read of an empty blocking eventfd would never return: read only when
    /// poll says a read cannot block. (As for `signal`, a peer that drains the counter
    /// precisely between our poll and read can still stall this thread.)
    fn take_signal(&self) -> bool {
        if !self.irq_ready(rustix::event::PollFlags::IN) {
            return false;
        }
        let mut b = [0u8; 8];
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
