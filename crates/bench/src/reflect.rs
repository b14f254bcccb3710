//! `--dut none`: the generator's ceiling. A memif master that does nothing but hand each
//! frame from interface 0 to interface 1 (and back), on a thread of the harness pinned to the
//! DUT's CPU: no graph, no lookup, no header touched. From 0 to 1 it copies each frame once,
//! from the generator's transmit buffer into its receive buffer (the first 64 bytes through a
//! local buffer, the rest straight across, as veclane's single copy does): the least any memif
//! master can do, since the two interfaces' buffers are the peer's and distinct. What it
//! reaches is what the generator can offer and take back through memif on this machine; a
//! DUT within 10% of it flat out measured the generator, not itself, and the table says so.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use buffer::{Pool, PoolConfig};
use memif::queue::{PeerTable, Peers};
use memif::{Event, InterfaceConfig, Listener, PrimaryQueues, SocketPath};

use crate::dut::{Counts, DutError, RunningDut};

const DUT: &str = "none";
/// Bytes of each frame copied into a local buffer; the rest goes peer to peer.
const HDR: usize = 64;

/// A running reflector, stopped when dropped.
#[derive(Debug)]
pub struct Reflector {
    stop: Arc<AtomicBool>,
    /// Asked to stand still ([`RunningDut::pause`]), and standing still (parked).
    pause: Arc<AtomicBool>,
    parked: Arc<AtomicBool>,
    rx: Arc<AtomicU64>,
    tx: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<(), String>>>,
    sock: PathBuf,
}

/// Listens on `sock` for memif ids 0 and 1 (rings of 2^`ring_log2`, buffers of
/// `buffer_size`) and reflects between them on a thread pinned to `cpu`.
pub fn spawn(
    sock: &Path,
    ring_log2: u8,
    buffer_size: u32,
    cpu: usize,
) -> Result<Reflector, DutError> {
    let iface = |id: u32| InterfaceConfig {
        id,
        name: format!("none{id}"),
        log2_ring_size: ring_log2,
        buffer_size,
        ..Default::default()
    };
    let mut l = Listener::bind(
        &SocketPath::File(sock.to_path_buf()),
        vec![iface(0), iface(1)],
    )
    .map_err(|e| DutError::reply(DUT, format!("cannot listen on {}: {e}", sock.display())))?;
    // A burst's worth of buffers at a time, freed at once: a small pool stays in the cache
    // (one sized to the rings would stream through megabytes).
    let pool = Pool::new(PoolConfig {
        count: 1024,
        data_size: u16::try_from(buffer_size).unwrap_or(u16::MAX),
        ..Default::default()
    })
    .map_err(|e| DutError::reply(DUT, format!("buffer pool: {e:?}")))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (pause, parked) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (rx, tx) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (s, r, t) = (stop.clone(), rx.clone(), tx.clone());
    let still = (pause.clone(), parked.clone());
    let thread = std::thread::Builder::new()
        .name("reflector".into())
        .spawn(move || {
            trafgen::pin_to_cpu(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
            reflect(&mut l, pool, (&s, &still.0, &still.1), &r, &t)
        })
        .map_err(DutError::io("cannot start the reflector thread"))?;
    Ok(Reflector {
        stop,
        pause,
        parked,
        rx,
        tx,
        thread: Some(thread),
        sock: sock.to_path_buf(),
    })
}

/// The loop: control events now and then, and every rx queue of each interface drained into
/// the same queue of the other.
fn reflect(
    l: &mut Listener,
    mut pool: Pool,
    (stop, pause, parked): (&AtomicBool, &AtomicBool, &AtomicBool),
    rx: &AtomicU64,
    tx: &AtomicU64,
) -> Result<(), String> {
    let mut q: [Option<PrimaryQueues>; 2] = [None, None];
    // Interface 0's receive queues as the external sources 0.. of the pool, for the copy
    // straight into interface 1's buffers.
    let table = Arc::new(PeerTable::default());
    let mut peers = Peers::of(&table);
    let mut bufs = Vec::with_capacity(256);
    let mut iter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if pause.load(Ordering::Acquire) {
            // Parked, not polling: the CPU is another DUT's until `resume` unparks us.
            parked.store(true, Ordering::Release);
            std::thread::park();
            parked.store(false, Ordering::Release);
            continue;
        }
        iter += 1;
        if iter.is_multiple_of(1024) || q.iter().any(Option::is_none) {
            let idle = if q.iter().all(Option::is_some) { 0 } else { 1 };
            l.poll(Duration::from_millis(idle))
                .map_err(|e| e.to_string())?;
            while let Some(e) = l.next_event() {
                match e {
                    Event::Connected { id: 0, queues, .. } => {
                        for (i, r) in queues.rx.iter().enumerate() {
                            table.attach(&mut pool, i as u32, r.peer_memory());
                        }
                        peers.refresh();
                        q[0] = Some(queues);
                    }
                    Event::Connected { id: 1, queues, .. } => q[1] = Some(queues),
                    Event::Disconnected { id, .. } if id < 2 => q[id as usize] = None,
                    _ => {}
                }
            }
        }
        let [Some(a), Some(b)] = &mut q else { continue };
        let ntx = b.tx.len().max(1);
        for (i, r) in a.rx.iter_mut().enumerate() {
            bufs.clear();
            let got = r.recv_split(&mut pool, &mut bufs, 256, HDR, i as u32);
            if got.is_ok()
                && !bufs.is_empty()
                && let Some(t) = b.tx.get_mut(i % ntx)
            {
                let sent = t.send_via(&pool, &bufs, &peers, None).unwrap_or(0);
                rx.fetch_add(bufs.len() as u64, Ordering::Relaxed);
                tx.fetch_add(sent as u64, Ordering::Relaxed);
            }
            pool.free_bulk(&bufs);
            r.release();
        }
        back(b, a, &mut pool, &mut bufs);
    }
    Ok(())
}

/// The other way, uncounted (the generator sends nothing there in l3fwd): every rx queue of
/// `from` copied into the same tx queue of `to`.
fn back(from: &mut PrimaryQueues, to: &mut PrimaryQueues, pool: &mut Pool, bufs: &mut Vec<u32>) {
    let ntx = to.tx.len().max(1);
    for (i, r) in from.rx.iter_mut().enumerate() {
        bufs.clear();
        if r.recv(pool, bufs, 256).is_ok()
            && !bufs.is_empty()
            && let Some(t) = to.tx.get_mut(i % ntx)
        {
            let _ = t.send(pool, bufs);
        }
        pool.free_bulk(bufs);
    }
}

impl Reflector {
    pub fn memif_socket(&self) -> PathBuf {
        self.sock.clone()
    }

    fn halt(&mut self) -> Result<(), DutError> {
        self.stop.store(true, Ordering::Relaxed);
        self.pause.store(false, Ordering::Release);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => Err(DutError::reply(DUT, e)),
            Some(Err(_)) => Err(DutError::reply(DUT, "the reflector thread panicked")),
            _ => Ok(()),
        }
    }
}

impl RunningDut for Reflector {
    fn pid(&self) -> u32 {
        std::process::id()
    }

    /// Frames taken on interface 0 and put on interface 1 (the way l3fwd's generator counts).
    fn counts(&mut self) -> Result<Option<Counts>, DutError> {
        Ok(Some(Counts {
            rx: self.rx.load(Ordering::Relaxed),
            tx: self.tx.load(Ordering::Relaxed),
        }))
    }

    fn drops(&mut self) -> String {
        String::new()
    }

    /// Parks the reflector's thread (the harness's own process must not be stopped), and
    /// waits until it is parked.
    fn pause(&mut self) -> Result<(), DutError> {
        self.pause.store(true, Ordering::Release);
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while !self.parked.load(Ordering::Acquire) {
            if self.thread.as_ref().is_none_or(JoinHandle::is_finished) {
                return Err(DutError::reply(DUT, "the reflector thread has ended"));
            }
            if std::time::Instant::now() > deadline {
                return Err(DutError::reply(
                    DUT,
                    "the reflector did not pause within 1 s",
                ));
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    fn resume(&mut self) -> Result<(), DutError> {
        self.pause.store(false, Ordering::Release);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
        Ok(())
    }

    /// A thread of the harness: the process's times say nothing about it.
    fn thread_times(&self) -> Option<Vec<crate::proc::ThreadTime>> {
        None
    }

    fn stop(mut self: Box<Self>, _timeout: Duration) -> Result<(), DutError> {
        self.halt()
    }
}

impl Drop for Reflector {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_reflector_stands_still_until_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = spawn(&dir.path().join("memif.sock"), 10, 2048, 0).unwrap();
        r.pause().unwrap();
        assert!(r.parked.load(Ordering::Acquire));
        // Parked, it polls nothing: its thread sleeps (state S in /proc).
        let tid = {
            let task = format!("/proc/{}/task", std::process::id());
            std::fs::read_dir(task)
                .unwrap()
                .filter_map(|e| e.ok())
                .find(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "reflector")
                })
                .unwrap()
                .path()
        };
        let state = || {
            let s = std::fs::read_to_string(tid.join("stat")).unwrap();
            s[s.rfind(')').unwrap() + 2..].chars().next().unwrap()
        };
        assert_eq!(state(), 'S');
        r.resume().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while r.parked.load(Ordering::Acquire) {
            assert!(std::time::Instant::now() < deadline, "still parked");
            std::thread::yield_now();
        }
        // Paused and resumed again, then stopped while paused: it still stops.
        r.pause().unwrap();
        Box::new(r).stop(Duration::from_secs(1)).unwrap();
    }
}
