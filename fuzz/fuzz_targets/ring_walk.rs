//! The primary's data path over a ring whose every byte the fuzzer chose: header, indices,
//! descriptors, in one or two regions. No panic, no out-of-bounds access, no leaked buffers,
//! and a queue that faulted stays down. With `split`, single-copy receive: payloads stay in
//! the fuzzer's memory and are forwarded straight back into buffers it posted (which may
//! overlap them), then the slots are released. With `engine`, every copy goes through the
//! worker-thread copy engine (receive copies recorded during the walk, one batch per call).
#![no_main]

use std::sync::Arc;

use arbitrary::Arbitrary;
use buffer::{Pool, PoolConfig};
use libfuzzer_sys::fuzz_target;
use memif::RingLayout;
use memif::shm::SharedMemory;

#[derive(Arbitrary, Debug)]
struct Input {
    log2: u8,
    wide: bool,
    region1_pages: u8,
    max_frame: u16,
    split: bool,
    engine: bool,
    /// (offset in region 0, bytes) writes applied between bursts: the peer racing us.
    writes: Vec<(Vec<(u16, Vec<u8>)>, u8)>,
}

fuzz_target!(|inp: Input| {
    let log2 = inp.log2 % 9;
    let layout = if inp.wide { RingLayout::CacheLine128 } else { RingLayout::CacheLine64 };
    let r0 = Arc::new(SharedMemory::anonymous(65536).unwrap());
    let r1 = Arc::new(SharedMemory::anonymous(4096 * (1 + usize::from(inp.region1_pages % 8))).unwrap());
    let regions = [r0.clone(), r1];
    let rb = layout.ring_bytes(log2);
    let Ok((mut rx, rx_link)) = memif::testing::primary_rx(&regions, 0, log2, layout, u32::from(inp.max_frame).max(64)) else { return };
    let Ok((mut tx, tx_link)) = memif::testing::primary_tx(&regions, rb.next_multiple_of(8), log2, layout) else { return };
    let mut pool = Pool::new(PoolConfig { count: 512, data_size: 2048, headroom: 0 }).unwrap();
    let frame = pool.from_bytes(&[0xab; 3000]).unwrap();
    let small = pool.from_bytes(&[0xcd; 60]).unwrap();
    let hdr = if inp.split { 128 } else { 0 };
    let table = Arc::new(memif::queue::PeerTable::default());
    let mut peers = memif::queue::Peers::of(&table);
    if inp.split {
        table.attach(&mut pool, 0, rx.peer_memory());
        peers.refresh();
    }
    let mut engine = inp
        .engine
        .then(|| copy_engine::Engine::new(copy_engine::Kind::Thread).unwrap());
    let mut out = Vec::new();
    for (writes, n) in inp.writes.iter().take(32) {
        for (off, bytes) in writes.iter().take(16) {
            let _ = r0.write(u64::from(*off), &bytes[..bytes.len().min(64)]);
        }
        match rx.recv_split_via(&mut pool, &mut out, usize::from(*n), hdr, 0, engine.as_mut()) {
            Ok(_) => assert!(rx_link.is_up()),
            Err(_) => assert!(!rx.is_up()),
        }
        for &h in &out {
            let mut v = Vec::new();
            pool.read_chain(h, &mut v);
            assert_eq!(v.len() as u32, pool.meta(h).total_len);
            assert!(v.len() <= usize::from(inp.max_frame).max(64));
        }
        if inp.split {
            let _ = tx.send_via(&pool, &out, &peers, engine.as_mut());
        }
        pool.free_bulk(&out);
        out.clear();
        rx.release();
        let _ = tx.send(&pool, &[frame, small, frame]);
        let _ = tx_link.is_up();
    }
    pool.free(frame);
    pool.free(small);
    assert_eq!(pool.available(), pool.capacity());
    let _ = memif::testing::fault(&rx_link);
});
