//! The AF_XDP nodes in a real graph: `af-xdp-input` → a stand-in `ethernet-input` that sends
//! every frame out of the other interface → `af-xdp-output`, forwarding between two veth
//! pairs, with the worker sleeping in epoll on the AF_XDP sockets whenever the rings are
//! empty. The AF_PACKET version of the same is `graph_forward.rs`.

mod common;

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use buffer::{Pool, PoolConfig};
use common::{Netns, collect, frame, seq_of, xdp_available};
use graph::{Ctx, Node, Runtime};
use uplink::xdp_nodes::{QueueCommand, device_nodes};
use uplink::{AfXdp, AfXdpConfig, PacketSocket};

/// Crosses every frame over to the other uplink.
struct Cross {
    ifs: [u32; 2],
}

graph::node! {
    Cross: "ethernet-input", Internal;
    next CrossNext { Output = "af-xdp-output" }
}

impl Node for Cross {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            let m = ctx.pool.meta_mut(b);
            m.tx_if = if m.rx_if == self.ifs[0] {
                self.ifs[1]
            } else {
                self.ifs[0]
            };
            *n = CrossNext::Output.into();
        }
    }
}

/// Runs the graph until `done`, sleeping in epoll when idle; returns how often it slept.
fn run(rt: &mut Runtime, pool: &mut Pool, done: &AtomicBool) -> u32 {
    let wake = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap();
    let mut sleeps = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done.load(Ordering::Acquire) {
        assert!(Instant::now() < deadline, "stalled: {:?}", rt.errors());
        if rt.dispatch(pool) == 0 && rt.sleep(wake.as_fd(), 20) {
            sleeps += 1;
        }
    }
    sleeps
}

#[test]
fn forwards_between_two_af_xdp_uplinks_and_survives_one_vanishing() {
    let Some(ns) = Netns::enter() else { return };
    if !xdp_available() {
        return;
    }
    ns.veth("u0", "h0", 1500);
    // u1 with two queues, both polled by the worker.
    ns.veth_queues("u1", "h1", 1500, 2);
    let a = AfXdp::open("u0", AfXdpConfig::default()).unwrap();
    let b = AfXdp::open(
        "u1",
        AfXdpConfig {
            queues: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let ifs = [a.ifindex(), b.ifindex()];
    let (rx_cmd, rx_chan) = channel();
    let (tx_cmd, tx_chan) = channel();
    for up in [a, b] {
        let ifindex = up.ifindex();
        for (k, (rx, tx)) in up.into_queues().into_iter().enumerate() {
            rx_cmd
                .send(QueueCommand::Rx { ifindex, queue: rx })
                .unwrap();
            if k == 0 {
                tx_cmd
                    .send(QueueCommand::Tx { ifindex, queue: tx })
                    .unwrap();
            }
            // Queue 1's transmit side is dropped here: its socket stays open for receive.
        }
    }
    let (input, output) = device_nodes(rx_chan, tx_chan);
    let mut rt = Runtime::new(
        vec![Box::new(input), Box::new(Cross { ifs }), Box::new(output)],
        0,
    )
    .unwrap();
    let mut pool = Pool::new(PoolConfig {
        count: 4096,
        ..Default::default()
    })
    .unwrap();
    let (h0, h1) = (
        PacketSocket::open(ns.ifindex("h0")).unwrap(),
        PacketSocket::open(ns.ifindex("h1")).unwrap(),
    );
    h0.set_recv_buffer(8 << 20).unwrap();
    h1.set_recv_buffer(8 << 20).unwrap();

    // Both directions at once, in bursts with pauses, so the worker both polls and sleeps.
    const N: u32 = 600;
    let done = Arc::new(AtomicBool::new(false));
    let traffic = {
        let done = done.clone();
        std::thread::spawn(move || {
            for burst in 0..(N / 50) {
                for i in burst * 50..(burst + 1) * 50 {
                    let len = 60 + (i as usize * 37) % 1455;
                    h0.send(&frame(i, len)).unwrap();
                    h1.send(&frame(N + i, len)).unwrap();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let at_h1 = collect(&h1, N as usize, Duration::from_secs(10));
            let at_h0 = collect(&h0, N as usize, Duration::from_secs(10));
            done.store(true, Ordering::Release);
            (at_h0, at_h1, h0, h1)
        })
    };
    let sleeps = run(&mut rt, &mut pool, &done);
    let (at_h0, at_h1, h0, h1) = traffic.join().unwrap();
    let check = |got: &[Vec<u8>], first: u32| {
        let seqs: BTreeSet<u32> = got.iter().filter_map(|f| seq_of(f)).collect();
        assert_eq!(
            (got.len(), seqs.len()),
            (N as usize, N as usize),
            "lost or doubled"
        );
        for f in got {
            let s = seq_of(f).unwrap();
            assert!((first..first + N).contains(&s));
            assert_eq!(*f, frame(s, f.len()), "frame {s} changed");
            assert_eq!(f.len(), 60 + ((s - first) as usize * 37) % 1455);
        }
    };
    check(&at_h1, 0);
    check(&at_h0, N);
    assert_eq!(rt.errors(), vec![]);
    let runtime: std::collections::HashMap<_, _> =
        rt.runtime().into_iter().map(|(n, _, s)| (n, s)).collect();
    assert_eq!(runtime["af-xdp-input"].vectors, 2 * u64::from(N));
    assert_eq!(runtime["af-xdp-output"].vectors, 2 * u64::from(N));
    assert!(sleeps > 0, "the worker never slept");
    assert_eq!(pool.available(), pool.capacity());

    // u1 vanishes: frames for it fail once (link vanished), then find no tx queue; both of
    // its receive queues are dropped and counted when the worker next goes to sleep.
    ns.ip(&["link", "del", "u1"]);
    done.store(false, Ordering::Release);
    let traffic = {
        let done = done.clone();
        std::thread::spawn(move || {
            for i in 0..3 {
                h0.send(&frame(10_000 + i, 60)).unwrap();
                std::thread::sleep(Duration::from_millis(30));
            }
            std::thread::sleep(Duration::from_millis(100));
            done.store(true, Ordering::Release);
            h1
        })
    };
    run(&mut rt, &mut pool, &done);
    drop(traffic.join().unwrap());
    assert_eq!(
        rt.errors(),
        vec![
            ("af-xdp-input", "link down or vanished", 2),
            ("af-xdp-output", "interface has no tx queue", 2),
            ("af-xdp-output", "link down or vanished", 1),
        ]
    );
    assert_eq!(pool.available(), pool.capacity());
    // u0 still works, and still has its program.
    assert!(ns.has_xdp("u0"));
}
