//! Deterministic cost of the primary receive path, for instruction counting:
//!
//! ```sh
//! cargo build --release -p memif --example rx_cost
//! valgrind --tool=callgrind --toggle-collect='*PrimaryRx*recv*' target/release/examples/rx_cost 64 2000 128 8
//! ```
//!
//! It lays out one S2M ring of 256 single-descriptor packets of SIZE bytes in anonymous memory,
//! then ROUNDS times publishes BATCH of them (default 256) and receives them in one call,
//! freeing the buffers. Instructions in `recv` divided by BATCH·ROUNDS packets is the
//! per-packet cost of validation, allocation and copy, independent of timing and neighbours.
//! HDR (default 0) is single copy's header length (`memif-input` passes 128 when single copy
//! is on). Receives go through `recv_split_via` with a CPU copy engine, HDR opaque to the
//! optimiser, exactly as `memif-input` calls it, so that the code measured is the code it
//! runs; under `--cost` it receives about 8 packets a call, so BATCH 8 includes the per-call
//! overhead the way the daemon pays it.

use std::sync::Arc;

use buffer::{Pool, PoolConfig};
use memif::RingLayout;
use memif::ring::{Desc, Ring};
use memif::shm::SharedMemory;

fn main() {
    let mut args = std::env::args().skip(1);
    let size: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let hdr: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let batch: u16 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(256)
        .clamp(1, 256);
    let mut engine = copy_engine::Engine::Cpu(copy_engine::CpuEngine::new());
    let layout = RingLayout::CacheLine64;
    let ring_bytes = layout.ring_bytes(8) as usize;
    let buf_base = ring_bytes.next_multiple_of(4096);
    let region = Arc::new(
        SharedMemory::anonymous(buf_base + 256 * 2048.max(size as usize)).expect("region"),
    );
    let (mut rx, _link) =
        memif::testing::primary_rx(std::slice::from_ref(&region), 0, 8, layout, 9216)
            .expect("queue");
    let ring = Ring::new(region, 0, 8, layout).expect("ring");
    ring.init();
    for i in 0..256u16 {
        let offset = (buf_base + usize::from(i) * 2048.max(size as usize)) as u32;
        ring.set_desc(
            i,
            Desc {
                flags: 0,
                region: 0,
                length: size,
                offset,
                metadata: 0,
            },
        );
    }
    let data = size.next_multiple_of(1024).clamp(2048, 64512) as u16;
    let mut pool = Pool::new(PoolConfig {
        count: 1024,
        data_size: data,
        headroom: 128,
    })
    .expect("pool");
    let mut out = Vec::with_capacity(256);
    let mut head = 0u16;
    let mut total = 0usize;
    for _ in 0..rounds {
        head = head.wrapping_add(batch);
        ring.set_head(head);
        out.clear();
        let hdr = std::hint::black_box(hdr);
        total += rx
            .recv_split_via(
                &mut pool,
                &mut out,
                usize::from(batch),
                hdr,
                0,
                Some(&mut engine),
            )
            .expect("recv");
        pool.free_bulk(&out);
        rx.release();
    }
    assert_eq!(total, usize::from(batch) * rounds as usize);
    println!("{total} packets of {size} B");
}
