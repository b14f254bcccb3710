//! Batching copies for a copy engine (or the CPU, at once).

use copy_engine::{CopyReq, Engine};

/// Adds one copy, or does it at once with `memmove` when source and destination overlap (a
/// peer whose S2M buffer overlaps an M2S buffer it posted: only its own bytes get mixed up).
pub(super) fn push_copy(reqs: &mut Vec<CopyReq>, src: *const u8, dst: *mut u8, len: usize) {
    let (s, d) = (src as usize, dst as usize);
    if s < d + len && d < s + len {
        // SAFETY: both ranges are valid for `len` bytes (see the caller); `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, len) };
        return;
    }
    reqs.push(CopyReq {
        src,
        dst,
        len: len as u32,
    });
}

/// Submits a batch, waiting out `Full` by retiring older batches, and waits until the batch
/// itself is retired: the copies are done when this returns.
///
/// # Safety
/// As [`Engine::submit`].
pub(super) unsafe fn copy_and_wait(e: &mut Engine, reqs: &[CopyReq]) {
    let t = loop {
        // SAFETY: forwarded from the caller.
        match unsafe { e.submit(reqs) } {
            Ok(t) => break t,
            Err(_) => {
                e.poll(|_| {});
                std::hint::spin_loop();
            }
        }
    };
    while !e.is_retired(t) {
        e.poll(|_| {});
        std::hint::spin_loop();
    }
}
