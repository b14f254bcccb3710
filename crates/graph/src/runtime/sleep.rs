//! Between dispatch loops: the nodes' housekeeping, and a worker with nothing to poll
//! sleeping until an input node's device or its command fd wakes it.

use std::os::fd::BorrowedFd;

use rustix::event::epoll;

use super::Runtime;

impl Runtime {
    /// Every node's [`Node::housekeeping`](crate::Node::housekeeping); the worker calls it
    /// before it sleeps and every few thousand dispatch loops.
    pub fn housekeeping(&mut self) {
        // Idle input nodes are polled at the next loop: the worker may be about to sleep,
        // and a command that wakes it must find them polled.
        self.idle_skip.fill(0);
        for s in &mut self.slots {
            s.node.housekeeping();
        }
    }

    /// Whether an input node holds a queue that must be polled (see
    /// [`Node::keeps_awake`](crate::Node::keeps_awake)): then the worker does not sleep.
    pub fn keeps_awake(&self) -> bool {
        self.inputs
            .iter()
            .any(|&k| self.slots[usize::from(k)].node.keeps_awake())
    }

    /// Sleeps until an input node's device signals work, `wake` becomes readable (the worker's
    /// command fd) or `timeout_ms` passes. Returns false at once, without sleeping, if an
    /// input node already has work. Interrupts are masked again before it returns, so a
    /// polling worker is never signalled.
    pub fn sleep(&mut self, wake: BorrowedFd<'_>, timeout_ms: i32) -> bool {
        let mut pending = false;
        for k in 0..self.inputs.len() {
            pending |= self.slots[usize::from(self.inputs[k])].node.arm(true);
        }
        let slept = !pending && {
            // Register the wake fds for this sleep only: the set of queues changes between
            // sleeps, and a sleep is rare enough (an idle worker) that two syscalls per fd cost
            // nothing that matters; nothing is allocated.
            let ep = &self.epoll;
            let mut watch = |fd: BorrowedFd<'_>| {
                // EEXIST (one fd handed twice) is harmless: it is watched already.
                let _ = epoll::add(ep, fd, epoll::EventData::new_u64(0), epoll::EventFlags::IN);
            };
            self.each_wake_fd(wake, &mut watch);
            let ts = rustix::event::Timespec {
                tv_sec: i64::from(timeout_ms / 1000),
                tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
            };
            let mut events = [core::mem::MaybeUninit::<epoll::Event>::uninit(); 1];
            let _ = epoll::wait(ep, &mut events[..], Some(&ts));
            let mut unwatch = |fd: BorrowedFd<'_>| {
                let _ = epoll::delete(ep, fd);
            };
            self.each_wake_fd(wake, &mut unwatch);
            true
        };
        for k in 0..self.inputs.len() {
            self.slots[usize::from(self.inputs[k])].node.arm(false);
        }
        slept
    }

    /// Hands `f` the worker's own `wake` fd and every fd the input nodes wake on.
    fn each_wake_fd(&self, wake: BorrowedFd<'_>, f: &mut dyn FnMut(BorrowedFd<'_>)) {
        f(wake);
        for &i in &self.inputs {
            self.slots[usize::from(i)].node.wake_fds(f);
        }
    }
}
