//! The request/response floor a worker on a CPU of its own puts under the pods: blocking
//! round trips between two threads over a socket pair, across the pods' CPU and the
//! worker's (each way a wake-up from the other CPU, as a worker's write to a tap wakes the
//! pod blocked reading it), and on the pods' CPU alone (where the kernel's own paths do
//! their work and their wake-ups).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use serde::Serialize;

/// Round trips measured, after as many again to warm up.
const ROUND_TRIPS: usize = 20_000;

/// Percentiles of a blocking round trip, µs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WakeFloor {
    pub cross_cpu_p50_us: f64,
    pub cross_cpu_p99_us: f64,
    pub same_cpu_p50_us: f64,
    pub same_cpu_p99_us: f64,
}

/// Measures round trips between `app_cpu` and `worker_cpu`, then on `app_cpu` alone.
pub fn measure(app_cpu: usize, worker_cpu: usize) -> std::io::Result<WakeFloor> {
    let (cross_cpu_p50_us, cross_cpu_p99_us) = round_trips(app_cpu, worker_cpu)?;
    let (same_cpu_p50_us, same_cpu_p99_us) = round_trips(app_cpu, app_cpu)?;
    Ok(WakeFloor {
        cross_cpu_p50_us,
        cross_cpu_p99_us,
        same_cpu_p50_us,
        same_cpu_p99_us,
    })
}

/// (p50, p99) in µs of a byte sent by a thread on `a` to one on `b` and back, each reading
/// blocked until it comes; both threads are this function's own (the caller's CPU affinity
/// is left alone).
fn round_trips(a: usize, b: usize) -> std::io::Result<(f64, f64)> {
    let (mut here, mut there) = UnixStream::pair()?;
    let echo = std::thread::spawn(move || {
        let _ = trafgen::pin_to_cpu(b);
        let mut c = [0u8; 1];
        while there.read_exact(&mut c).is_ok() && there.write_all(&c).is_ok() {}
    });
    let timer = std::thread::spawn(move || -> std::io::Result<Vec<f64>> {
        let _ = trafgen::pin_to_cpu(a);
        let mut c = [0u8; 1];
        let mut us = Vec::with_capacity(ROUND_TRIPS);
        for k in 0..2 * ROUND_TRIPS {
            let t = Instant::now();
            here.write_all(&c)?;
            here.read_exact(&mut c)?;
            if k >= ROUND_TRIPS {
                us.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        Ok(us)
    });
    let mut us = timer.join().expect("the timing thread panicked")?;
    let _ = echo.join();
    us.sort_by(f64::total_cmp);
    Ok((us[us.len() / 2], us[us.len() * 99 / 100]))
}

#[cfg(test)]
mod tests {
    /// Both floors come out, in order (a p99 is no smaller than its p50), on CPU 0 whatever
    /// the machine has.
    #[test]
    fn floors_are_measured() {
        let f = super::measure(0, 0).unwrap();
        assert!(0.0 < f.cross_cpu_p50_us && f.cross_cpu_p50_us <= f.cross_cpu_p99_us);
        assert!(0.0 < f.same_cpu_p50_us && f.same_cpu_p50_us <= f.same_cpu_p99_us);
    }
}
