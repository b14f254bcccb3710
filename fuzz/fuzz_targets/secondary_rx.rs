//! The secondary's receive path over an M2S ring the (hostile) primary wrote: tail, flags and
//! lengths chosen by the fuzzer. No panic; every packet handed up stays within our buffers.
#![no_main]

use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use memif::shm::SharedMemory;

#[derive(Arbitrary, Debug)]
struct Input {
    log2: u8,
    bufsize: u16,
    rounds: Vec<(u16, Vec<(u8, u16, u32)>)>,
}

fuzz_target!(|inp: Input| {
    let log2 = 1 + inp.log2 % 8;
    let size = u32::from(inp.bufsize.max(64)) % 4096 + 64;
    let ring_bytes = 128 + 16 * (1usize << log2);
    let rings = Arc::new(SharedMemory::anonymous(ring_bytes).unwrap());
    let bufs = Arc::new(SharedMemory::anonymous((size as usize) << log2).unwrap());
    let Ok((mut rx, link)) = memif::testing::secondary_rx(rings.clone(), 0, log2, bufs, size) else { return };
    let ring = memif::ring::Ring::new(rings, 0, log2, memif::RingLayout::CacheLine64).unwrap();
    for (tail, descs) in inp.rounds.iter().take(16) {
        for (i, (flags, _, len)) in descs.iter().take(64).enumerate() {
            ring.set_desc_len_flags(i as u16, *len, u16::from(*flags));
        }
        ring.set_tail(*tail);
        let r = rx.recv_with(usize::from(*tail % 300), |p| {
            assert!(p.len() <= p.segments() * size as usize);
            let v = p.to_vec();
            assert_eq!(v.len(), p.len());
        });
        if r.is_err() {
            assert!(!link.is_up());
            break;
        }
    }
});
