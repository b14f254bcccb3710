//! Packet rates of the AF_PACKET and AF_XDP uplinks on a veth pair, against plain packet
//! sockets, all in one run.
//!
//! ```sh
//! cargo run --release -p uplink --example af_packet_rate [SECONDS [RUNS]]   # as root
//! ```
//!
//! Each cell is measured RUNS times (default 3) and the run with the median receive rate is
//! shown, with the lowest and highest receive rates beside it: a shared machine's neighbours
//! move single runs by a factor of two.
//!
//! In a fresh network namespace with one veth pair `va`–`vb`, for 64- and 1500-byte frames
//! (lengths as handed to the socket; veth carries no FCS), with the sender pinned to CPU 0
//! and the receiver to CPU 1, each for SECONDS (default 2):
//!
//! - `uplink tx → plain rx`: a `TxQueue` on `va` sending batches of 256 from a buffer pool
//!   (one `send` kick per batch), a plain socket reading `vb` one `recv` per frame;
//! - `plain tx → uplink rx`: a plain socket `sendmmsg`-ing batches of 64 on `vb`, an
//!   `RxQueue` on `va` copying into pool buffers (and freeing them);
//! - `uplink tx → uplink rx`: both rings;
//! - `plain tx → plain rx`: the baseline, both sides plain sockets.
//!
//! What is measured: veth delivers a frame to the peer's sockets in the *sender's* context
//! (`veth_xmit` hands it to the peer's backlog, processed in the NET_RX softirq of the
//! sending CPU, RPS being off), so CPU 0 pays for transmit, veth, the receive stack and the
//! copy into the receiving socket's queue or ring; CPU 1 pays only for taking frames out
//! (a `recv` per frame, or a ring walk plus a copy into pool buffers). "sent" counts frames
//! the sender's system calls accepted; "received" those the receiver took out; the
//! difference is dropped at the receiving socket (its buffer or ring full) and shown as
//! loss. Kernel `pktgen` would take the sender's system calls out of the picture; the
//! example says whether it is available.
//!
//! With an AF_XDP receiver, CPU 0 also runs the XDP program and the copy into the UMEM (veth's
//! XDP runs in the NAPI poll the sender's `veth_xmit` schedules on its own CPU). A copy-mode
//! AF_XDP sender builds an skb per frame inside its `sendto`, as AF_PACKET's does.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use rustix::thread::{CpuSet, sched_setaffinity};
use uplink::{AfPacket, AfPacketConfig, AfXdp, AfXdpConfig, PacketSocket};

const SENDER_CPU: usize = 0;
const RECEIVER_CPU: usize = 1;

fn pin(cpu: usize) {
    let mut set = CpuSet::new();
    set.set(cpu);
    if let Err(e) = sched_setaffinity(None, &set) {
        eprintln!("warning: cannot pin to CPU {cpu}: {e}");
    }
}

#[derive(Clone, Copy)]
enum Side {
    Uplink,
    Xdp,
    Plain,
}

struct Outcome {
    sent: u64,
    received: u64,
    secs: f64,
    kernel_drops: u64,
}

impl Outcome {
    fn recv_rate(&self) -> f64 {
        self.received as f64 / self.secs
    }
}

fn frames(size: usize) -> Vec<Vec<u8>> {
    (0..256).map(|i| common::frame(i, size)).collect()
}

/// One measurement: a sender on CPU 0 and a receiver on CPU 1 for `dur`.
fn measure(tx: Side, rx: Side, size: usize, dur: Duration, ifs: (u32, u32)) -> Outcome {
    let (va, vb) = ifs;
    let stop_tx = Arc::new(AtomicBool::new(false));
    let stop_rx = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(std::sync::Barrier::new(3));
    // The sender always uses vb, the receiver va.
    let receiver = {
        let (stop, received, ready) = (stop_rx.clone(), received.clone(), ready.clone());
        thread::spawn(move || {
            pin(RECEIVER_CPU);
            match rx {
                Side::Plain => {
                    let s = PacketSocket::open(va).unwrap();
                    s.set_recv_buffer(64 << 20).unwrap();
                    let mut buf = vec![0u8; 2048];
                    ready.wait();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        while let Ok(Some(_)) = s.try_recv(&mut buf) {
                            n += 1;
                        }
                    }
                    received.store(n, Ordering::Relaxed);
                    0
                }
                Side::Uplink => {
                    let (mut q, _tx) = AfPacket::open("va", AfPacketConfig::default())
                        .unwrap()
                        .into_queues()
                        .pop()
                        .unwrap();
                    let mut pool = Pool::new(PoolConfig::default()).unwrap();
                    let mut out = Vec::with_capacity(256);
                    ready.wait();
                    q.refresh_kernel_stats();
                    let before = q.counters().snapshot();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        out.clear();
                        n += q.recv(&mut pool, &mut out, 256).packets as u64;
                        pool.free_bulk(&out);
                    }
                    q.refresh_kernel_stats();
                    let after = q.counters().snapshot();
                    received.store(n, Ordering::Relaxed);
                    after.kernel_drops - before.kernel_drops
                }
                Side::Xdp => {
                    let (mut q, tx) = AfXdp::open("va", AfXdpConfig::default())
                        .unwrap()
                        .into_queues()
                        .pop()
                        .unwrap();
                    let mut pool = Pool::new(PoolConfig::default()).unwrap();
                    let mut out = Vec::with_capacity(256);
                    let drops = |q: &mut uplink::af_xdp::RxQueue| {
                        q.refresh_kernel_stats();
                        let c = q.counters().snapshot();
                        c.kernel_drops + c.rx_ring_full
                    };
                    ready.wait();
                    let before = drops(&mut q);
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        out.clear();
                        n += q.recv(&mut pool, &mut out, 256).packets as u64;
                        pool.free_bulk(&out);
                    }
                    let after = drops(&mut q);
                    received.store(n, Ordering::Relaxed);
                    drop((q, tx));
                    after - before
                }
            }
        })
    };
    let sender = {
        let (stop, ready) = (stop_tx.clone(), ready.clone());
        thread::spawn(move || {
            pin(SENDER_CPU);
            let f = frames(size);
            let mut sent = 0u64;
            match tx {
                Side::Plain => {
                    let s = PacketSocket::open(vb).unwrap();
                    let refs: Vec<&[u8]> = f.iter().map(|v| v.as_slice()).collect();
                    ready.wait();
                    let t = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        for chunk in refs.chunks(64) {
                            sent += s.send_batch(chunk).unwrap_or(0) as u64;
                        }
                    }
                    (sent, t.elapsed())
                }
                Side::Uplink => {
                    let (_rx, mut q) = AfPacket::open("vb", AfPacketConfig::default())
                        .unwrap()
                        .into_queues()
                        .pop()
                        .unwrap();
                    let mut pool = Pool::new(PoolConfig::default()).unwrap();
                    let pkts: Vec<u32> = f.iter().map(|v| pool.from_bytes(v).unwrap()).collect();
                    ready.wait();
                    let t = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        // The ring holds copies: the same buffers go again and again.
                        sent += q.send(&pool, &pkts).map_or(0, |s| s.sent as u64);
                    }
                    (sent, t.elapsed())
                }
                Side::Xdp => {
                    let (rx, mut q) = AfXdp::open("vb", AfXdpConfig::default())
                        .unwrap()
                        .into_queues()
                        .pop()
                        .unwrap();
                    let mut pool = Pool::new(PoolConfig::default()).unwrap();
                    let pkts: Vec<u32> = f.iter().map(|v| pool.from_bytes(v).unwrap()).collect();
                    ready.wait();
                    let t = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        // The UMEM holds copies: the same buffers go again and again.
                        sent += q.send(&pool, &pkts).map_or(0, |s| s.sent as u64);
                    }
                    let took = t.elapsed();
                    drop((rx, q));
                    (sent, took)
                }
            }
        })
    };
    ready.wait();
    thread::sleep(dur);
    stop_tx.store(true, Ordering::Relaxed);
    let (sent, took) = sender.join().unwrap();
    // Let the receiver drain what is already queued for it.
    thread::sleep(Duration::from_millis(200));
    stop_rx.store(true, Ordering::Relaxed);
    let kernel_drops = receiver.join().unwrap();
    Outcome {
        sent,
        received: received.load(Ordering::Relaxed),
        secs: took.as_secs_f64(),
        kernel_drops,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("needs two CPUs (sender on 0, receiver on 1); this machine has {cpus}");
        return;
    }
    let Some(ns) = common::Netns::enter() else {
        return;
    };
    ns.veth("va", "vb", 1500);
    let ifs = (ns.ifindex("va"), ns.ifindex("vb"));
    let pktgen = std::path::Path::new("/proc/net/pktgen").exists();
    println!(
        "kernel pktgen: {}",
        if pktgen {
            "present (not used: this example measures socket senders)"
        } else {
            "not available (no /proc/net/pktgen; modules cannot be loaded here), so the senders are sockets"
        }
    );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!("kernel {}, {cpus} CPUs", kernel.trim());
    println!(
        "veth pair in namespace {}; sender pinned to CPU {SENDER_CPU}, receiver to CPU {RECEIVER_CPU}; {secs} s per run, median of {runs} runs",
        ns.name
    );
    println!(
        "delivery to the receiving socket runs in the sender CPU's softirq (see the source)\n"
    );
    println!(
        "{:<24} {:>5} {:>10} {:>10} {:>15} {:>7} {:>11}",
        "path", "bytes", "sent Mpps", "recv Mpps", "recv min-max", "loss %", "ring drops"
    );
    let dur = Duration::from_secs_f64(secs);
    for size in [64usize, 1500] {
        for (name, tx, rx) in [
            ("uplink tx -> plain rx", Side::Uplink, Side::Plain),
            ("plain tx -> uplink rx", Side::Plain, Side::Uplink),
            ("uplink tx -> uplink rx", Side::Uplink, Side::Uplink),
            ("plain tx -> plain rx", Side::Plain, Side::Plain),
            ("xdp tx -> plain rx", Side::Xdp, Side::Plain),
            ("plain tx -> xdp rx", Side::Plain, Side::Xdp),
            ("xdp tx -> xdp rx", Side::Xdp, Side::Xdp),
        ] {
            let mut all: Vec<Outcome> =
                (0..runs).map(|_| measure(tx, rx, size, dur, ifs)).collect();
            all.sort_by(|a, b| a.recv_rate().total_cmp(&b.recv_rate()));
            let o = &all[all.len() / 2];
            let loss = if o.sent == 0 {
                0.0
            } else {
                100.0 * (o.sent.saturating_sub(o.received)) as f64 / o.sent as f64
            };
            let drops = match rx {
                Side::Uplink | Side::Xdp => o.kernel_drops.to_string(),
                Side::Plain => "-".into(),
            };
            let spread = format!(
                "{:.3}-{:.3}",
                all[0].recv_rate() / 1e6,
                all[all.len() - 1].recv_rate() / 1e6
            );
            println!(
                "{name:<24} {size:>5} {:>10.3} {:>10.3} {spread:>15} {loss:>7.1} {drops:>11}",
                o.sent as f64 / o.secs / 1e6,
                o.recv_rate() / 1e6,
            );
        }
    }
}
