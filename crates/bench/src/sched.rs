//! Real-time priority for the placement probe's threads, the one system call the harness makes
//! through `libc` (rustix has no scheduler-policy call).

/// Puts the calling thread in `SCHED_FIFO` at `priority`: it then preempts every normal
/// thread on its CPU (a busy-polling DUT included) until it blocks or exits. Needs root or
/// `CAP_SYS_NICE`.
pub fn make_current_thread_fifo(priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is an initialised `sched_param` that outlives the call, which only reads
    // it; pid 0 names the calling thread, whose policy is all that changes.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
