//! Unblocking a thread caught in a system call on a peer's eventfd.
//!
//! A ring's eventfd is one open file description shared with the peer, which can clear
//! O_NONBLOCK on it and fill its counter, so that a write of ours waits until the peer reads.
//! Reads never wait (queue/interrupt.rs reads with RWF_NOWAIT), and writes come only after a
//! poll says they cannot block, but eventfds accept no RWF_NOWAIT on writes, and a peer that
//! fills the counter between our poll and our write still catches us. The remedy is a signal:
//! [`install`] gives [`SIGNAL`] a handler that does nothing, without SA_RESTART, so that a
//! thread it reaches inside a blocked `write` gets EINTR back; [`interrupt`] sends it to one
//! thread of this process. The daemon's watchdog sends it to a worker that made no progress
//! for a while (a non-blocking system call is never interrupted by it: only one that waits);
//! the queue that got EINTR ends that peer's connection.

use std::io;
use std::sync::Once;

/// The signal: a real-time one nothing else here uses.
pub fn signal_number() -> libc::c_int {
    libc::SIGRTMIN() + 5
}

extern "C" fn nothing(_: libc::c_int) {}

static INSTALLED: Once = Once::new();

/// Installs the handler, once per process.
pub fn install() {
    INSTALLED.call_once(|| {
        // SAFETY: a zeroed `sigaction` is a valid value (no flags, empty mask once
        // sigemptyset has run); the handler is an `extern "C"` function that touches nothing,
        // so it is async-signal-safe; the old action is not asked for (null).
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = nothing as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(signal_number(), &sa, std::ptr::null_mut())
        };
        if r != 0 {
            tracing::warn!(
                reason = %io::Error::last_os_error(),
                "cannot install the handler that unblocks workers"
            );
        }
    });
}

/// This thread's id, for [`interrupt`].
pub fn current_thread() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// Sends the signal to thread `tid` of this process: a system call it waits in returns EINTR.
pub fn interrupt(tid: i32) -> io::Result<()> {
    // SAFETY: tgkill takes plain integers and touches no memory of ours. It reaches only a
    // thread of this process (the thread group is ours): if `tid` ended, the call fails with
    // ESRCH, or reaches another of our threads, whose handler does nothing.
    let r = unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            libc::c_long::from(tid),
            libc::c_long::from(signal_number()),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
