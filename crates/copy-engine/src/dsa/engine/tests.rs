use super::*;
use crate::dsa::model::{Fault, Model, ModelConfig};
use crate::{CopyReq, SubmitError};

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const LEN: usize = 1 << 16;

/// Random batches through the engine over `model`, against a reference copy; every
/// ticket reported once, in order, with its batch's count.
fn rounds(model: Model, cfg: DsaConfig, seed: u64, batches: usize) -> DsaEngine {
    let mut e = DsaEngine::new(Box::new(model), cfg);
    let mut rng = Rng(seed);
    let src: Vec<u8> = (0..LEN).map(|_| rng.next() as u8).collect();
    let mut dst = vec![0u8; LEN];
    let mut reference = vec![0u8; LEN];
    let mut submitted = Vec::new();
    let mut retired = Vec::new();
    for b in 0..batches {
        // Each batch writes its own 64 KiB / batches slice of dst, in pieces.
        let span = LEN / batches;
        let base = b * span;
        let mut reqs = Vec::new();
        let mut at = 0;
        while at < span {
            let len = (1 + rng.below(3000) as usize).min(span - at);
            let s = rng.below((LEN - len) as u64) as usize;
            reqs.push(CopyReq {
                src: src.as_ptr().wrapping_add(s),
                dst: dst.as_mut_ptr().wrapping_add(base + at),
                len: len as u32,
            });
            reference[base + at..base + at + len].copy_from_slice(&src[s..s + len]);
            at += len;
        }
        loop {
            // SAFETY: every range is inside `src` or `dst`, alive until the drain below;
            // each batch writes its own span of `dst`.
            match unsafe { e.submit(&reqs) } {
                Ok(t) => {
                    submitted.push((t, reqs.len()));
                    break;
                }
                Err(SubmitError::Full) => {
                    e.poll(|r| retired.push(r));
                }
            }
        }
        if rng.below(2) == 0 {
            e.poll(|r| retired.push(r));
        }
    }
    e.drain(|r| retired.push(r));
    assert_eq!(dst, reference, "seed {seed}");
    assert_eq!(retired.len(), submitted.len());
    for (k, (r, &(t, n))) in retired.iter().zip(&submitted).enumerate() {
        assert_eq!((r.ticket, t.get()), (t, k as u64 + 1));
        assert_eq!((r.hw_copies + r.cpu_copies) as usize, n);
    }
    assert_eq!(e.inflight(), 0);
    e
}

fn small() -> DsaConfig {
    DsaConfig {
        ring: 64,
        credits: 4,
        max_batch_size: 8,
        max_transfer_size: 1024,
        inline_max: 64,
        timeout: Duration::from_millis(1),
        redo_after: Duration::from_millis(1),
    }
}

fn model() -> Model {
    Model::new(ModelConfig {
        depth: 4,
        max_batch_size: 8,
        max_transfer_size: 1024,
        ..ModelConfig::default()
    })
}

#[test]
fn batches_retire_in_order_with_the_right_bytes() {
    let e = rounds(model(), small(), 7, 64);
    let s = e.dsa_stats();
    assert!(s.descriptors >= 64 && s.hw_pieces > s.descriptors, "{s:?}");
    assert_eq!((s.recovered, s.watchdog, s.fallback), (0, 0, 0));
    assert!(e.tripped().is_none());
}

#[test]
fn page_faults_and_list_faults_are_finished_on_the_cpu() {
    let mut m = model();
    for k in (0..200).step_by(3) {
        m.inject_at(
            k,
            Fault::Partial {
                index: (k % 5) as u32,
                at: 100,
                write: k % 2 == 0,
            },
        );
    }
    for k in (1..200).step_by(7) {
        m.inject_at(k, Fault::ListFault { after: 1 });
    }
    let e = rounds(m, small(), 11, 64);
    let s = e.dsa_stats();
    assert!(s.recovered > 10, "{s:?}");
    assert!(e.tripped().is_none(), "{:?}", e.tripped());
}

#[test]
fn a_lost_record_waits_then_is_redone_and_trips_the_breaker() {
    let mut m = model();
    m.inject_at(3, Fault::Lost);
    let mut e = rounds(m, small(), 13, 16);
    let s = e.dsa_stats();
    assert_eq!(s.watchdog, 1, "{s:?}");
    assert!(
        e.tripped().unwrap().contains("not written"),
        "{:?}",
        e.tripped()
    );
    // Once tripped, every batch is copied on the CPU (however many batches the
    // rounds above submitted before the watchdog fired: that depends on timing).
    one_batch_on_the_cpu(&mut e, 4, 256);
    assert_eq!(e.dsa_stats().fallback, s.fallback + 1);
}

/// Submits one batch of `n` pieces of `len` bytes and drains: it must come back copied,
/// all `n` on the CPU.
fn one_batch_on_the_cpu(e: &mut DsaEngine, n: usize, len: usize) {
    let src: Vec<u8> = (0..n * len).map(|i| i as u8).collect();
    let mut dst = vec![0u8; n * len];
    let reqs: Vec<CopyReq> = (0..n)
        .map(|k| CopyReq {
            src: src.as_ptr().wrapping_add(k * len),
            dst: dst.as_mut_ptr().wrapping_add(k * len),
            len: len as u32,
        })
        .collect();
    // SAFETY: both buffers outlive the engine's use of them (drained below).
    let t = unsafe { e.submit(&reqs) }.expect("never Full for a batch the CPU copies");
    let mut got = Vec::new();
    e.drain(|r| got.push(r));
    assert_eq!(
        (
            got.len(),
            got[0].ticket,
            got[0].hw_copies,
            got[0].cpu_copies
        ),
        (1, t, 0, n as u32)
    );
    assert_eq!(dst, src);
}

#[test]
fn a_fault_outside_the_copy_is_redone_and_trips_the_breaker() {
    let mut m = model();
    m.inject_at(2, Fault::Stray { at: 10 });
    let e = rounds(m, small(), 19, 16);
    let why = e.tripped().expect("tripped");
    assert!(why.contains("0x1000") && why.contains("outside"), "{why}");
    assert!(e.dsa_stats().recovered >= 1);
}

#[test]
fn a_hardware_error_is_redone_and_trips_the_breaker() {
    let mut m = model();
    m.inject_at(2, Fault::HwError);
    let e = rounds(m, small(), 17, 16);
    assert!(e.tripped().unwrap().contains("0x20"), "{:?}", e.tripped());
}

#[test]
fn a_batch_too_big_for_the_queue_is_copied_on_the_cpu() {
    let mut e = DsaEngine::new(Box::new(model()), small());
    // 40 pieces need 5 batches of 8: more than the 4 credits there will ever be.
    one_batch_on_the_cpu(&mut e, 40, 512);
    assert_eq!(e.dsa_stats().fallback, 1);
    assert!(e.tripped().is_none());
}

#[test]
fn a_full_shared_queue_sends_its_copies_to_the_cpu() {
    let m = Model::new(ModelConfig {
        depth: 1,
        dedicated: false,
        max_batch_size: 8,
        max_transfer_size: 1024,
        ..ModelConfig::default()
    });
    let e = rounds(m, small(), 23, 32);
    assert!(e.dsa_stats().recovered > 0, "{:?}", e.dsa_stats());
    assert!(e.tripped().is_none(), "{:?}", e.tripped());
}

#[test]
fn no_credit_no_copy() {
    // A model that never executes: every credit stays taken.
    struct Hold;
    impl Portal for Hold {
        unsafe fn submit(&mut self, _: &Descriptor) -> Result<(), crate::dsa::model::Refused> {
            Ok(())
        }
    }
    let cfg = DsaConfig {
        timeout: Duration::from_secs(3600),
        ..small()
    };
    let mut e = DsaEngine::new(Box::new(Hold), cfg);
    let src = vec![1u8; 4096];
    let mut dst = vec![0u8; 4096];
    let req = [CopyReq {
        src: src.as_ptr(),
        dst: dst.as_mut_ptr(),
        len: 512,
    }];
    for _ in 0..4 {
        // SAFETY: both buffers outlive the engine (it is forgotten below, never dropped
        // while a copy could land).
        assert!(unsafe { e.submit(&req) }.is_ok());
    }
    // SAFETY: as above.
    assert_eq!(unsafe { e.submit(&req) }, Err(SubmitError::Full));
    assert_eq!(e.stats().full, 1);
    assert_eq!(e.poll(|_| {}), 0);
    assert_eq!(e.inflight(), 4);
    // Dropping would wait (forever) for records this portal never writes.
    std::mem::forget(e);
    assert_eq!(dst[0], 0);
}
