use buffer::{Pool, PoolConfig};

use super::*;

#[test]
fn round_robin_gives_every_queue_the_first_turn_in_turn() {
    let mut rr = super::RoundRobin::default();
    let firsts: Vec<usize> = (0..6).map(|_| rr.turn(3).next().unwrap()).collect();
    assert_eq!(firsts, [0, 1, 2, 0, 1, 2]);
    assert_eq!(rr.turn(3).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(rr.turn(3).collect::<Vec<_>>(), [1, 2, 0]);
    // Queues come and go: the turn stays in range.
    assert_eq!(rr.turn(1).collect::<Vec<_>>(), [0]);
    assert_eq!(rr.turn(0).count(), 0);
    assert_eq!(rr.turn(2).count(), 2);
}

/// Produces `per_poll` one-byte buffers counting up from `start`.
struct Gen {
    name: &'static str,
    per_poll: usize,
    value: u8,
}

crate::node! {
    Gen: "gen", Input;
    next GenNext { Classify = "classify" }
}

impl Node for Gen {
    fn name(&self) -> &'static str {
        self.name
    }
    fn poll(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        room: usize,
        out: &mut Vec<u32>,
        next: &mut Vec<u16>,
    ) {
        for _ in 0..self.per_poll.min(room) {
            let b = ctx.pool.from_bytes(&[self.value]).unwrap();
            self.value = self.value.wrapping_add(1);
            out.push(b);
            next.push(GenNext::Classify.into());
        }
    }
}

/// Even bytes go on, odd ones are dropped with a named error.
struct Classify;

crate::node! {
    Classify: "classify", Internal;
    next ClassifyNext { Sink = "sink", Drop = "error-drop" }
    error ClassifyError { Odd = "odd byte" }
    trace ClassifyTrace { value: u8 }
}

impl core::fmt::Display for ClassifyTrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "value {}", self.value)
    }
}

impl Node for Classify {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        for (b, n) in bufs.iter().zip(next.iter_mut()) {
            let v = ctx.pool.data(*b)[0];
            if ctx.is_traced(*b) {
                ctx.trace(*b, ClassifyTrace { value: v });
            }
            if v.is_multiple_of(2) {
                *n = ClassifyNext::Sink.into();
            } else {
                ctx.count_error(ClassifyError::Odd);
                *n = ClassifyNext::Drop.into();
            }
        }
    }
}

struct Sink(std::sync::Arc<std::sync::atomic::AtomicU64>);

crate::node! { Sink: "sink", Internal; }

impl Node for Sink {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        self.0
            .fetch_add(bufs.len() as u64, std::sync::atomic::Ordering::Relaxed);
        ctx.pool.free_bulk(bufs);
        next.fill(CONSUMED);
    }
}

struct Drop;

crate::node! { Drop: "error-drop", Internal; }

impl Node for Drop {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        ctx.pool.free_bulk(bufs);
        next.fill(CONSUMED);
    }
}

fn graph(sunk: &std::sync::Arc<std::sync::atomic::AtomicU64>) -> Runtime {
    Runtime::new(
        vec![
            Box::new(Gen {
                name: "gen-a",
                per_poll: 200,
                value: 0,
            }),
            Box::new(Gen {
                name: "gen-b",
                per_poll: 200,
                value: 1,
            }),
            Box::new(Classify),
            Box::new(Sink(sunk.clone())),
            Box::new(Drop),
        ],
        64,
    )
    .unwrap()
}

#[test]
fn buffers_follow_their_nexts_and_are_all_accounted_for() {
    let sunk = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut rt = graph(&sunk);
    let mut pool = Pool::new(PoolConfig {
        count: 1024,
        data_size: 64,
        headroom: 0,
    })
    .unwrap();
    for _ in 0..10 {
        assert_eq!(rt.dispatch(&mut pool), 400);
    }
    assert_eq!(sunk.load(std::sync::atomic::Ordering::Relaxed), 2000);
    assert_eq!(rt.errors(), vec![("classify", "odd byte", 2000)]);
    assert_eq!(pool.available(), 1024, "every buffer was freed");
    let stats: std::collections::HashMap<_, _> =
        rt.runtime().into_iter().map(|(n, _, s)| (n, s)).collect();
    assert_eq!((stats["gen-a"].calls, stats["gen-a"].vectors), (10, 2000));
    // 400 pending buffers per pass run as a full frame of 256 and one of 144.
    assert_eq!(
        (stats["classify"].calls, stats["classify"].vectors),
        (20, 4000)
    );
    assert_eq!(stats["error-drop"].vectors, 2000);
    rt.clear_runtime();
    rt.clear_errors();
    assert!(rt.errors().is_empty());
    assert_eq!(rt.runtime()[0].2, NodeStats::default());
}

/// A sink that takes `ms` milliseconds over each frame.
struct Slow(u64);

crate::node! { Slow: "sink", Internal; }

impl Node for Slow {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        std::thread::sleep(std::time::Duration::from_millis(self.0));
        ctx.pool.free_bulk(bufs);
        next.fill(CONSUMED);
    }
}

#[test]
fn node_clocks_and_busy_time_are_nanoseconds() {
    let mut rt = Runtime::new(
        vec![
            Box::new(Gen {
                name: "gen",
                per_poll: 10,
                value: 0,
            }),
            Box::new(Classify),
            Box::new(Slow(5)),
            Box::new(Drop),
        ],
        0,
    )
    .unwrap();
    let mut pool = Pool::new(PoolConfig {
        count: 64,
        data_size: 64,
        headroom: 0,
    })
    .unwrap();
    let t = std::time::Instant::now();
    for _ in 0..4 {
        rt.dispatch(&mut pool);
    }
    let real = t.elapsed().as_nanos() as u64;
    let stats: std::collections::HashMap<_, _> =
        rt.runtime().into_iter().map(|(n, _, s)| (n, s)).collect();
    // Four frames of 5 ms each in the sink; the clocks' rate is an estimate: 2% leeway.
    let sink = stats["sink"].clocks;
    assert!(sink >= 19_600_000, "sink {sink} ns for 4 x 5 ms");
    let all: u64 = stats.values().map(|s| s.clocks).sum();
    assert!(all <= real + real / 50, "{all} ns charged in {real} ns");
    let busy = rt.busy_ns();
    assert!(
        busy >= sink && busy <= real + real / 50,
        "busy {busy} ns, sink {sink}, {real}"
    );
}

#[test]
fn trace_follows_marked_buffers_only() {
    let sunk = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut rt = graph(&sunk);
    let mut pool = Pool::new(PoolConfig {
        count: 1024,
        data_size: 64,
        headroom: 0,
    })
    .unwrap();
    rt.trace_add("gen-a", 2).unwrap();
    assert!(rt.trace_add("classify", 1).is_err());
    assert!(rt.trace_add("nope", 1).is_err());
    rt.dispatch(&mut pool);
    let t = rt.show_trace();
    assert_eq!(t.matches("Packet (buffer").count(), 2, "{t}");
    assert!(
        t.contains("gen-a") && t.contains("value 0") && t.contains("sink"),
        "{t}"
    );
    assert!(t.contains("value 1") && t.contains("error-drop"), "{t}");
    rt.clear_trace();
    rt.dispatch(&mut pool);
    assert_eq!(rt.show_trace(), "");
}

#[test]
fn bad_graphs_are_refused_by_name() {
    struct Lost;
    crate::node! {
        Lost: "lost", Internal;
        next LostNext { Lookup = "ip4-lokup" }
    }
    impl Node for Lost {}
    let e = Runtime::new(vec![Box::new(Lost)], 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "node \"lost\": next node \"ip4-lokup\" does not exist"
    );
    let e = Runtime::new(vec![Box::new(Drop), Box::new(Drop)], 0).unwrap_err();
    assert!(matches!(e, GraphError::Duplicate("error-drop")), "{e:?}");
}

#[test]
fn an_idle_input_is_polled_once_in_a_while_and_after_housekeeping() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    /// Counts its polls; idle while `idle` says so.
    struct Quiet(Arc<AtomicBool>, Arc<AtomicU64>);
    crate::node! { Quiet: "quiet", Input; }
    impl Node for Quiet {
        fn poll(&mut self, _: &mut Ctx<'_, Self>, _: usize, _: &mut Vec<u32>, _: &mut Vec<u16>) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        fn idle(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }
    }
    let (idle, polls) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU64::new(0)));
    let gen_a = Gen {
        name: "gen",
        per_poll: 0,
        value: 0,
    };
    let mut rt = Runtime::new(
        vec![
            Box::new(Quiet(idle.clone(), polls.clone())),
            Box::new(gen_a),
            Box::new(Classify),
            Box::new(Sink(Arc::new(AtomicU64::new(0)))),
            Box::new(Drop),
        ],
        0,
    )
    .unwrap();
    let mut pool = Pool::new(PoolConfig::default()).unwrap();
    let calls = |rt: &Runtime, name| rt.runtime().iter().find(|r| r.0 == name).unwrap().2.calls;
    let n = u64::from(IDLE_POLL_EVERY);
    for _ in 0..2 * n {
        rt.dispatch(&mut pool);
    }
    assert_eq!(polls.load(Ordering::Relaxed), 2, "polled once in {n} loops");
    assert_eq!(
        calls(&rt, "gen"),
        2 * n,
        "a node with work is polled every loop"
    );
    rt.housekeeping();
    rt.dispatch(&mut pool);
    assert_eq!(
        polls.load(Ordering::Relaxed),
        3,
        "polled at once after housekeeping"
    );
    // Busy again (a queue placed on it): polled at its next turn, then every loop.
    idle.store(false, Ordering::Relaxed);
    for _ in 0..n {
        rt.dispatch(&mut pool);
    }
    assert_eq!(polls.load(Ordering::Relaxed), 4);
    for _ in 0..10 {
        rt.dispatch(&mut pool);
    }
    assert_eq!(polls.load(Ordering::Relaxed), 14);
}
