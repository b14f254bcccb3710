//! Real-time priority for the placement probe's threads (rustix has no scheduler-policy call;
//! `thread-priority` makes the one `sched_setscheduler` the harness needs, so this crate holds
//! no unsafe code).

use thread_priority::{
    RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
    set_thread_priority_and_policy, thread_native_id,
};

/// Puts the calling thread in `SCHED_FIFO` at `priority` (1..=99): it then preempts every
/// normal thread on its CPU (a busy-polling DUT included) until it blocks or exits. Needs root
/// or `CAP_SYS_NICE`.
pub fn make_current_thread_fifo(priority: u8) -> std::io::Result<()> {
    let value = ThreadPriorityValue::try_from(priority).map_err(std::io::Error::other)?;
    set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Crossplatform(value),
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    )
    .map_err(|e| match e {
        thread_priority::Error::OS(errno) => std::io::Error::from_raw_os_error(errno),
        e => std::io::Error::other(e.to_string()),
    })
}
