use std::ptr;

use super::*;

/// splitmix64: tiny, deterministic, good enough to pick lengths and offsets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n`; `n > 0`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }

    /// A length of at most `max`: mostly packet-sized, sometimes 0, sometimes as large as fits.
    fn len(&mut self, max: usize) -> usize {
        let len = match self.below(16) {
            0 => 0,
            1..=7 => 1 + self.below(64),
            8..=13 => 1 + self.below(2048),
            _ => 1 + self.below(max),
        };
        len.min(max)
    }
}

const SRC_LEN: usize = 1 << 20;
const DST_LEN: usize = 1 << 20;
/// Batches per round; each writes only its own region of the destination buffer, so batches
/// in flight together never overlap.
const REGIONS: usize = 8;
const REGION_LEN: usize = DST_LEN / REGIONS;
const MAX_REQS: usize = 32;

/// One request as offsets: (source offset, destination offset, length).
type Planned = (usize, usize, usize);

fn plan_batch(rng: &mut Rng, region: usize) -> Vec<Planned> {
    let count = rng.below(MAX_REQS + 1);
    let seg = REGION_LEN / count.max(1);
    (0..count)
        .map(|i| {
            let len = rng.len(seg);
            let dst = region * REGION_LEN + i * seg + rng.below(seg - len + 1);
            let src = rng.below(SRC_LEN - len + 1);
            (src, dst, len)
        })
        .collect()
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// Random rounds of random batches through `engine`, polling at random moments, compared
/// with the same copies done on slices; checks tickets and reports along the way.
fn check_random_rounds(mut engine: Engine, seed: u64, rounds: usize) -> Stats {
    let mut rng = Rng(seed);
    let mut src = vec![0u8; SRC_LEN];
    let mut dst = vec![0u8; DST_LEN];
    let mut reference = vec![0u8; DST_LEN];
    let mut submitted: Vec<(Ticket, usize)> = Vec::new();
    let mut retired: Vec<Retired> = Vec::new();
    let mut fulls = 0u64;
    let mut bytes = 0u64;
    for round in 0..rounds {
        // Rewriting the sources is allowed: every earlier ticket is retired.
        rng.fill(&mut src);
        let plan: Vec<Vec<Planned>> = (0..1 + rng.below(REGIONS))
            .map(|region| plan_batch(&mut rng, region))
            .collect();
        let src_base = src.as_ptr();
        let dst_base = dst.as_mut_ptr();
        for batch in &plan {
            let reqs: Vec<CopyReq> = batch
                .iter()
                .map(|&(s, d, len)| CopyReq {
                    src: src_base.wrapping_add(s),
                    dst: dst_base.wrapping_add(d),
                    len: len as u32,
                })
                .collect();
            bytes += batch.iter().map(|&(_, _, len)| len as u64).sum::<u64>();
            loop {
                // SAFETY: every range lies inside `src` or `dst`, which outlive the round and
                // are not touched until `drain` below; destinations within the batch are in
                // disjoint segments and other batches of the round use other regions.
                match unsafe { engine.submit(&reqs) } {
                    Ok(ticket) => {
                        submitted.push((ticket, reqs.len()));
                        break;
                    }
                    Err(SubmitError::Full) => {
                        fulls += 1;
                        engine.poll(|r| retired.push(r));
                        std::thread::yield_now();
                    }
                }
            }
            if rng.below(2) == 0 {
                engine.poll(|r| retired.push(r));
            }
        }
        engine.drain(|r| retired.push(r));
        assert_eq!(engine.inflight(), 0);
        assert_eq!(engine.retired_through(), submitted.last().map(|&(t, _)| t));
        for &(s, d, len) in plan.iter().flatten() {
            reference[d..d + len].copy_from_slice(&src[s..s + len]);
        }
        if let Some(at) = first_difference(&dst, &reference) {
            panic!(
                "{} engine, seed {seed}, round {round}: dst[{at}] is {:#04x}, reference {:#04x}",
                engine.caps().kind,
                dst[at],
                reference[at]
            );
        }
    }

    // Every ticket reported exactly once, in submission order, with its batch's size.
    assert_eq!(retired.len(), submitted.len());
    for (i, (report, &(ticket, count))) in retired.iter().zip(&submitted).enumerate() {
        assert_eq!(ticket.get(), i as u64 + 1, "tickets are 1, 2, 3, ...");
        assert_eq!(report.ticket, ticket);
        assert_eq!((report.hw_copies + report.cpu_copies) as usize, count);
        assert!(engine.is_retired(ticket));
    }
    let stats = engine.stats();
    assert_eq!(stats.batches, submitted.len() as u64);
    assert_eq!(
        stats.copies,
        submitted.iter().map(|&(_, n)| n as u64).sum::<u64>()
    );
    assert_eq!(stats.bytes, bytes);
    assert_eq!(stats.full, fulls);
    stats
}

/// Every backend this host can run: the CPU, the copy thread, and DSA over the software
/// model (every copy to the hardware: `inline_max` 1).
fn engines() -> Vec<(Kind, Engine)> {
    vec![
        (Kind::Cpu, Engine::new(Kind::Cpu).unwrap()),
        (Kind::Thread, Engine::new(Kind::Thread).unwrap()),
        (Kind::Dsa, dsa_model(16)),
    ]
}

fn dsa_model(credits: usize) -> Engine {
    use crate::dsa::engine::DsaConfig;
    use crate::dsa::model::{Model, ModelConfig};
    let model = Model::new(ModelConfig {
        depth: credits,
        ..ModelConfig::default()
    });
    Engine::dsa_over(
        Box::new(model),
        DsaConfig {
            inline_max: 1,
            credits,
            ..DsaConfig::default()
        },
    )
}

#[test]
fn random_batches_match_reference_dsa_on_the_model() {
    let stats = check_random_rounds(dsa_model(16), 5, 100);
    assert!(stats.batches > 100);
}

#[test]
fn random_batches_match_reference_dsa_on_the_model_few_credits() {
    let stats = check_random_rounds(dsa_model(3), 6, 100);
    assert!(stats.batches > 100);
}

#[test]
fn dsa_on_this_host_says_why_not() {
    if !crate::dsa::sysfs::discover_default().usable.is_empty() {
        eprintln!("skipped: this host has a usable DSA work queue");
        return;
    }
    let e = Engine::new(Kind::Dsa).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
    assert!(e.to_string().contains("DSA"), "{e}");
}

#[test]
fn auto_is_the_cpu_without_a_queue_and_says_why() {
    use crate::dsa::{CpuFeatures, DsaPool, Source, sysfs::Discovery};
    let none = Discovery {
        none: Some("no DSA device: /sys/bus/dsa/devices does not exist".into()),
        ..Discovery::default()
    };
    let mut pool = DsaPool::with(Source::Discover, none, CpuFeatures::default());
    let s = Engine::select(Kind::Auto, &mut pool).unwrap();
    assert_eq!(s.engine.caps().kind, Kind::Cpu);
    assert!(s.dsa.is_none());
    let why = s.why_not_dsa.unwrap();
    assert!(why.contains("does not exist"), "{why}");
    let e = Engine::select(Kind::Dsa, &mut pool).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    // The model, asked for by name, is always there, and says what it is.
    let mut model = DsaPool::new(Source::Model { fault_every: 0 });
    let s = Engine::select(Kind::Auto, &mut model).unwrap();
    assert_eq!(s.engine.caps().kind, Kind::Dsa);
    let a = s.dsa.unwrap();
    assert_eq!(a.how, "model");
    assert!(a.notes[0].contains("not a device"));
}

#[test]
fn random_batches_match_reference_cpu() {
    let stats = check_random_rounds(Engine::new(Kind::Cpu).unwrap(), 1, 100);
    assert_eq!(stats.full, 0);
}

#[test]
fn random_batches_match_reference_cpu_small_ring() {
    let stats = check_random_rounds(Engine::with_max_inflight(Kind::Cpu, 3).unwrap(), 2, 100);
    assert!(stats.full > 0, "the small ring never filled: {stats:?}");
}

#[test]
fn random_batches_match_reference_thread() {
    let stats = check_random_rounds(Engine::new(Kind::Thread).unwrap(), 3, 100);
    assert_eq!(stats.full, 0);
}

#[test]
fn random_batches_match_reference_thread_small_ring() {
    // Fewer slots than batches per round: the ring wraps and `Full` is hit and recovered from.
    let stats = check_random_rounds(Engine::with_max_inflight(Kind::Thread, 3).unwrap(), 4, 100);
    assert!(stats.full > 0, "the small ring never filled: {stats:?}");
}

#[test]
fn cpu_reports_cpu_copies_and_thread_reports_offloaded_copies() {
    let src = [1u8, 2, 3];
    let mut dst = [0u8; 3];
    for (kind, mut engine) in engines() {
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let reqs = [
            CopyReq {
                src: s,
                dst: d,
                len: 2,
            },
            CopyReq {
                src: s.wrapping_add(2),
                dst: d.wrapping_add(2),
                len: 1,
            },
        ];
        // SAFETY: both arrays live through the drain; the destinations are disjoint.
        unsafe { engine.submit(&reqs) }.unwrap();
        let mut reports = Vec::new();
        engine.drain(|r| reports.push(r));
        let (hw, cpu) = if kind == Kind::Cpu { (0, 2) } else { (2, 0) };
        assert_eq!(
            reports,
            [Retired {
                ticket: Ticket(1),
                hw_copies: hw,
                cpu_copies: cpu
            }]
        );
        assert_eq!(dst, src);
        dst = [0; 3];
    }
}

#[test]
fn empty_submit_gets_a_ticket_that_retires_in_order() {
    let src = [0xabu8; 100];
    let mut dst = [0u8; 100];
    for (kind, mut engine) in engines() {
        let copy = [CopyReq {
            src: src.as_ptr(),
            dst: dst.as_mut_ptr(),
            len: 100,
        }];
        // SAFETY: empty batches touch nothing; `copy` stays inside the arrays, which live
        // through the drain.
        let tickets = unsafe {
            [
                engine.submit(&[]).unwrap(),
                engine.submit(&copy).unwrap(),
                engine.submit(&[]).unwrap(),
            ]
        };
        assert_eq!(tickets.map(Ticket::get), [1, 2, 3], "{kind}");
        let mut reports = Vec::new();
        engine.drain(|r| reports.push((r.ticket, r.hw_copies + r.cpu_copies)));
        assert_eq!(
            reports,
            [(tickets[0], 0), (tickets[1], 1), (tickets[2], 0)],
            "{kind}"
        );
        assert_eq!(dst, src);
        dst = [0; 100];
    }
}

#[test]
fn zero_length_requests_touch_nothing() {
    let nothing = CopyReq {
        src: ptr::null(),
        dst: ptr::null_mut(),
        len: 0,
    };
    for (_, mut engine) in engines() {
        // SAFETY: zero-length requests are never dereferenced.
        unsafe { engine.submit(&[nothing, nothing]) }.unwrap();
        assert_eq!(engine.drain(|_| {}), 1);
        // SAFETY: as above.
        unsafe { copy_now(&[nothing]) };
    }
}

#[test]
fn thread_submit_returns_full_at_max_inflight() {
    let mut engine = Engine::with_max_inflight(Kind::Thread, 2).unwrap();
    // SAFETY: empty batches touch no memory.
    let first = unsafe { engine.submit(&[]) }.unwrap();
    // SAFETY: as above.
    let second = unsafe { engine.submit(&[]) }.unwrap();
    // Full comes from unreported tickets, not from the copy thread's progress, so it is
    // certain here whether or not the thread has run yet.
    // SAFETY: as above.
    assert_eq!(unsafe { engine.submit(&[]) }, Err(SubmitError::Full));
    assert_eq!(engine.inflight(), 2);
    assert_eq!(engine.stats().full, 1);
    assert_eq!(engine.stats().batches, 2);

    let mut reports = Vec::new();
    engine.drain(|r| reports.push(r.ticket));
    assert_eq!(reports, [first, second]);
    // SAFETY: as above.
    let third = unsafe { engine.submit(&[]) }.unwrap();
    assert_eq!(third.get(), 3);
    engine.quiesce();
    assert!(engine.is_retired(third));
}

#[test]
fn cpu_submit_returns_full_at_max_inflight() {
    let mut engine = Engine::with_max_inflight(Kind::Cpu, 2).unwrap();
    // SAFETY: empty batches touch no memory.
    unsafe {
        engine.submit(&[]).unwrap();
        engine.submit(&[]).unwrap();
        assert_eq!(engine.submit(&[]), Err(SubmitError::Full));
    }
    assert_eq!(engine.poll(|_| {}), 2);
    // SAFETY: as above.
    assert_eq!(unsafe { engine.submit(&[]) }.map(Ticket::get), Ok(3));
}

#[test]
fn thread_poll_never_blocks_and_retires_only_finished_batches() {
    let src = vec![0x5au8; 64 << 10];
    let mut dst = vec![0u8; 64 << 10];
    let mut engine = ThreadEngine::with_max_inflight(2).unwrap();
    engine.hold(true);
    let half = 32 << 10;
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let reqs = [
        CopyReq {
            src: s,
            dst: d,
            len: half as u32,
        },
        CopyReq {
            src: s.wrapping_add(half),
            dst: d.wrapping_add(half),
            len: half as u32,
        },
    ];
    // SAFETY: each batch copies its own half; the buffers live through the drain and are
    // not touched before it.
    let (first, second) = unsafe {
        (
            engine.submit(&reqs[..1]).unwrap(),
            engine.submit(&reqs[1..]).unwrap(),
        )
    };
    // SAFETY: an empty batch touches no memory.
    assert_eq!(unsafe { engine.submit(&[]) }, Err(SubmitError::Full));
    // The copy thread is held before its first batch: nothing can be reported, and polling
    // returns at once.
    for _ in 0..1000 {
        assert_eq!(
            engine.poll(|r| panic!("{r:?} reported while the copy thread is held")),
            0
        );
    }
    assert!(!engine.is_retired(first));
    assert_eq!(engine.retired_through(), None);
    assert_eq!(engine.inflight(), 2);

    engine.hold(false);
    let mut reports = Vec::new();
    while reports.len() < 2 {
        engine.poll(|r| reports.push(r.ticket));
        std::thread::yield_now();
    }
    assert_eq!(reports, [first, second]);
    assert_eq!(engine.retired_through(), Some(second));
    assert_eq!(dst, src);
}

#[test]
fn quiesce_drains_everything_in_flight() {
    let src = vec![0xc3u8; 8 << 20];
    let mut dst = vec![0u8; 8 << 20];
    let mut engine = Engine::new(Kind::Thread).unwrap();
    let chunk = 1 << 20;
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let mut last = None;
    for offset in (0..src.len()).step_by(chunk) {
        let req = CopyReq {
            src: s.wrapping_add(offset),
            dst: d.wrapping_add(offset),
            len: chunk as u32,
        };
        // SAFETY: each batch copies its own megabyte, inside both buffers, which live through
        // `quiesce` and are not touched before it.
        last = Some(unsafe { engine.submit(&[req]) }.unwrap());
    }
    engine.quiesce();
    assert_eq!(engine.inflight(), 0);
    assert_eq!(engine.retired_through(), last);
    assert_eq!(engine.poll(|r| panic!("{r:?} reported twice")), 0);
    assert!(dst == src);
}

#[test]
fn drop_finishes_accepted_copies() {
    let src = vec![0x77u8; 4 << 20];
    let mut dst = vec![0u8; 4 << 20];
    {
        let mut engine = ThreadEngine::new().unwrap();
        engine.hold(true);
        let req = CopyReq {
            src: src.as_ptr(),
            dst: dst.as_mut_ptr(),
            len: src.len() as u32,
        };
        // SAFETY: the buffers outlive the engine, whose drop waits for the copy.
        unsafe { engine.submit(&[req]) }.unwrap();
        // Dropped with the copy thread held before the batch: drop must release and wait.
    }
    assert!(dst == src);
}

#[test]
fn copy_now_copies_without_tickets() {
    let src: Vec<u8> = (0..=255).collect();
    let mut dst = vec![0u8; 256];
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let reqs = [
        CopyReq {
            src: s,
            dst: d,
            len: 128,
        },
        CopyReq {
            src: s.wrapping_add(128),
            dst: d.wrapping_add(128),
            len: 128,
        },
    ];
    // SAFETY: disjoint halves of two distinct buffers.
    unsafe { copy_now(&reqs) };
    assert_eq!(dst, src);
}

#[test]
fn kind_parses_its_names_and_rejects_others() {
    for kind in Kind::ALL {
        assert_eq!(kind.to_string().parse::<Kind>(), Ok(kind));
    }
    assert_eq!("cpu".parse::<Kind>(), Ok(Kind::Cpu));
    assert_eq!("thread".parse::<Kind>(), Ok(Kind::Thread));
    assert_eq!("dsa".parse::<Kind>(), Ok(Kind::Dsa));
    assert_eq!("auto".parse::<Kind>(), Ok(Kind::Auto));
    for wrong in ["DSA", "CPU", "", " cpu", "automatic"] {
        let message = wrong.parse::<Kind>().unwrap_err().to_string();
        assert_eq!(
            message,
            format!(
                "unknown copy engine {wrong:?}: expected one of \"cpu\", \"thread\", \"dsa\", \"auto\""
            )
        );
    }
}

#[test]
fn caps_describe_the_backend() {
    let cpu = Engine::new(Kind::Cpu).unwrap().caps();
    assert_eq!(
        cpu,
        Caps {
            kind: Kind::Cpu,
            asynchronous: false,
            max_batch: usize::MAX,
            inline_below: u32::MAX,
            max_inflight: CpuEngine::DEFAULT_MAX_INFLIGHT
        }
    );
    let thread = Engine::with_max_inflight(Kind::Thread, 7).unwrap().caps();
    assert_eq!(
        thread,
        Caps {
            kind: Kind::Thread,
            asynchronous: true,
            max_batch: usize::MAX,
            inline_below: 0,
            max_inflight: 7
        }
    );
}

#[test]
#[should_panic(expected = "max_inflight must be at least 1")]
fn zero_max_inflight_is_refused() {
    let _ = Engine::with_max_inflight(Kind::Thread, 0);
}

#[test]
fn engine_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Engine>();
}
