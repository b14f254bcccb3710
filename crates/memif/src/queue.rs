//! The data path: four queue kinds, one per (role, direction).
//!
//! | role      | ring | queue          | what it does                                           |
//! |-----------|------|----------------|--------------------------------------------------------|
//! | primary   | S2M  | [`PrimaryRx`]  | validates each descriptor, copies into local buffers   |
//! | primary   | M2S  | [`PrimaryTx`]  | copies local buffers into buffers the peer posted      |
//! | secondary | S2M  | [`SecondaryTx`]| writes frames in place into its own shared buffers     |
//! | secondary | M2S  | [`SecondaryRx`]| reads frames in place, then reposts the buffers        |
//!
//! The primary trusts nothing in the ring: each descriptor is snapshotted once and checked
//! (region index, `offset + length` against the mapped size in u64, length > 0, whole chains);
//! the distance between the peer's index and ours is checked against the ring size, and a
//! peer that breaks that rule is faulted: the control thread then sends DISCONNECT with the
//! reason. Bad packets are dropped and counted by reason; they never stall the queue.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use buffer::{NONE, Pool};
use copy_engine::{CopyReq, Engine};

use crate::ring::{DESC_FLAG_NEXT, Desc, RING_FLAG_MASK_INT, Ring};
use crate::shm::SharedMemory;

/// Link state shared by the control thread and the queues of one connection.
#[derive(Debug, Default)]
pub struct Link {
    up: AtomicBool,
    fault: Mutex<Option<String>>,
}

impl Link {
    pub(crate) fn new_up() -> Arc<Link> {
        Arc::new(Link {
            up: AtomicBool::new(true),
            fault: Mutex::new(None),
        })
    }

    #[inline]
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    pub(crate) fn set_down(&self) {
        self.up.store(false, Ordering::Release);
    }

    /// Marks the peer as broken; the first reason wins and is sent in DISCONNECT.
    pub fn fault(&self, reason: String) {
        let mut f = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(reason);
        }
        self.set_down();
    }

    pub(crate) fn take_fault(&self) -> Option<String> {
        self.fault.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The connection is gone; drop the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memif link is down")]
pub struct LinkDown;

/// Per-queue counters. One thread writes (the queue's owner), any thread reads.
#[derive(Debug, Default)]
pub struct QueueCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Descriptor pointing outside a region, zero length, or longer than allowed.
    pub drop_bad_desc: AtomicU64,
    /// Whole packet larger than `max_frame`.
    pub drop_oversize: AtomicU64,
    /// No local buffer for a received packet (it stays in the ring).
    pub no_buffer: AtomicU64,
    /// A send found the ring full (or too few slots for the next packet).
    pub ring_full: AtomicU64,
    /// Packets a send could not place because of `ring_full`.
    pub tx_no_room: AtomicU64,
    pub interrupts_sent: AtomicU64,
    pub interrupts_received: AtomicU64,
}

#[inline]
fn bump(c: &AtomicU64, n: u64) {
    // Single writer: a load and a store are enough and cost no locked instruction.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// A plain copy of [`QueueCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    pub packets: u64,
    pub bytes: u64,
    pub drop_bad_desc: u64,
    pub drop_oversize: u64,
    pub no_buffer: u64,
    pub ring_full: u64,
    pub tx_no_room: u64,
    pub interrupts_sent: u64,
    pub interrupts_received: u64,
}

impl QueueCounters {
    pub fn snapshot(&self) -> QueueStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        QueueStats {
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            drop_bad_desc: l(&self.drop_bad_desc),
            drop_oversize: l(&self.drop_oversize),
            no_buffer: l(&self.no_buffer),
            ring_full: l(&self.ring_full),
            tx_no_room: l(&self.tx_no_room),
            interrupts_sent: l(&self.interrupts_sent),
            interrupts_received: l(&self.interrupts_received),
        }
    }
}

/// What every queue has: its ring, interrupt eventfd, link and counters.
#[derive(Debug)]
pub(crate) struct QueueBase {
    pub ring: Ring,
    pub irq: OwnedFd,
    pub link: Arc<Link>,
    pub counters: Arc<QueueCounters>,
    pub index: u16,
    pub interrupt_mode: bool,
}

impl QueueBase {
    pub(crate) fn new(ring: Ring, irq: OwnedFd, link: Arc<Link>, index: u16) -> QueueBase {
        QueueBase {
            ring,
            irq,
            link,
            counters: Arc::default(),
            index,
            interrupt_mode: false,
        }
    }

    /// Producer side: wake the consumer unless it masked interrupts.
    #[inline]
    fn signal(&self) {
        if self.ring.flags() & RING_FLAG_MASK_INT == 0 {
            // The eventfd is one open file description shared with the peer, which can clear
            // O_NONBLOCK on it and fill its counter so that a plain write would block us. Write
            // only when poll says a write cannot block; a counter that is full already means
            // "wake up". (A peer that races poll and write precisely can still stall this
            // thread; eventfds support neither RWF_NOWAIT nor reopening via /proc.)
            let mut p = [rustix::event::PollFd::new(
                &self.irq,
                rustix::event::PollFlags::OUT,
            )];
            let zero = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            if matches!(rustix::event::poll(&mut p, Some(&zero)), Ok(1))
                && p[0].revents().contains(rustix::event::PollFlags::OUT)
            {
                let _ = rustix::io::write(&self.irq, &1u64.to_ne_bytes());
                bump(&self.counters.interrupts_sent, 1);
            }
        }
    }

    /// Consumer side: mask or unmask the peer's signals on this ring.
    fn set_interrupt_mode(&mut self, on: bool) {
        self.interrupt_mode = on;
        self.ring.set_flags(if on { 0 } else { RING_FLAG_MASK_INT });
    }

    /// Consumer side, for a caller that sleeps on many queues at once: `on` unmasks the
    /// peer's signals and returns `ready()` (the lost-wakeup re-check); `!on` clears the
    /// eventfd and masks signals again unless the queue is in interrupt mode.
    fn arm(&self, on: bool, ready: impl Fn() -> bool) -> bool {
        if on {
            self.ring.set_flags(0);
            return ready();
        }
        let mut b = [0u8; 8];
        // The fd is non-blocking (set when the ring was added).
        if matches!(rustix::io::read(&self.irq, &mut b), Ok(8)) {
            bump(&self.counters.interrupts_received, 1);
        }
        if !self.interrupt_mode {
            self.ring.set_flags(RING_FLAG_MASK_INT);
        }
        false
    }

    /// Consumer side: sleep until the peer signals or `timeout_ms` passes, unless `ready()`
    /// already holds after unmasking (the lost-wakeup re-check). Returns `ready()`.
    fn wait(&self, timeout_ms: i32, ready: impl Fn() -> bool) -> bool {
        self.ring.set_flags(0);
        if !ready()
            && let Ok(r) = crate::sock::wait_readable(&[self.irq.as_fd()], timeout_ms)
            && r[0]
        {
            let mut b = [0u8; 8];
            // The fd is non-blocking (set when the ring was added).
            let _ = rustix::io::read(&self.irq, &mut b);
            bump(&self.counters.interrupts_received, 1);
        }
        if !self.interrupt_mode {
            self.ring.set_flags(RING_FLAG_MASK_INT);
        }
        ready()
    }
}

macro_rules! queue_common {
    ($t:ty) => {
        impl $t {
            /// Queue (ring) index within its direction.
            pub fn index(&self) -> u16 {
                self.base.index
            }
            pub fn ring_size(&self) -> u16 {
                self.base.ring.size()
            }
            pub fn counters(&self) -> &Arc<QueueCounters> {
                &self.base.counters
            }
            pub fn stats(&self) -> QueueStats {
                self.base.counters.snapshot()
            }
            pub fn is_up(&self) -> bool {
                self.base.link.is_up()
            }
            /// The eventfd this queue's peer signals (or that we signal, for tx queues).
            pub fn interrupt_fd(&self) -> BorrowedFd<'_> {
                self.base.irq.as_fd()
            }
        }
    };
}

/// The consumer side of both receive queues: interrupt mode, sleeping, arming; "work" is a
/// published packet or a link gone down.
macro_rules! rx_common {
    ($t:ty) => {
        impl $t {
            fn has_work(&self) -> bool {
                matches!(self.pending(), Ok(n) if n > 0) || !self.is_up()
            }

            pub fn set_interrupt_mode(&mut self, on: bool) {
                self.base.set_interrupt_mode(on);
            }

            /// Sleeps until the peer signals packets or `timeout_ms` passes; true if packets
            /// wait.
            pub fn wait(&self, timeout_ms: i32) -> bool {
                self.base.wait(timeout_ms, || self.has_work())
            }

            /// For a worker sleeping on many queues (see `interrupt_fd`): `arm(true)` unmasks
            /// the peer's signals and returns true if packets already wait (or the link is
            /// down); `arm(false)` after the sleep clears the eventfd and masks signals again.
            pub fn arm(&self, on: bool) -> bool {
                self.base.arm(on, || self.has_work())
            }
        }
    };
}

/// Descriptor checks shared by both roles: a view of the peer's regions.
#[derive(Debug, Clone)]
pub(crate) struct Regions(pub Arc<[Arc<SharedMemory>]>);

impl Regions {
    #[inline]
    fn valid(&self, d: &Desc) -> bool {
        match self.0.get(usize::from(d.region)) {
            Some(r) => d.length > 0 && r.check(u64::from(d.offset), u64::from(d.length)).is_ok(),
            None => false,
        }
    }
}

/// A connected peer's regions as a [`buffer::ExtSource`]: single-copy receive leaves payloads
/// here, and transmit copies them out of here straight into another peer's buffers.
#[derive(Debug, Clone)]
pub struct PeerMemory(Regions);

impl buffer::ExtSource for PeerMemory {
    fn read(&self, region: u16, offset: u64, dst: &mut [u8]) -> bool {
        self.0
            .0
            .get(usize::from(region))
            .is_some_and(|r| r.read(offset, dst).is_ok())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl PeerMemory {
    /// The address of `len` bytes at `offset` of `region`, bounds-checked.
    fn addr(&self, region: u16, offset: u64, len: u64) -> Option<*mut u8> {
        self.0.0.get(usize::from(region))?.addr(offset, len).ok()
    }
}

/// Primary, S2M: receives by copying out of the peer's buffers into a local pool.
#[derive(Debug)]
pub struct PrimaryRx {
    base: QueueBase,
    regions: Regions,
    cursor: u16,
    max_frame: u32,
    segs: Vec<Desc>,
    /// Single-copy: slots consumed but still holding payloads (tail not yet moved).
    held: bool,
    /// Copies of one receive call waiting for the engine (see `recv_split_via`).
    copies: Vec<RxCopy>,
    reqs: Vec<CopyReq>,
}
queue_common!(PrimaryRx);

// SAFETY: `reqs` is scratch space that only holds addresses during one `recv_split_via` call
// (cleared before use, every address retired before the call returns); between calls its
// stale pointers are never read. Everything else in a `PrimaryRx` is `Send`.
unsafe impl Send for PrimaryRx {}

/// One receive copy, recorded while walking the ring: from a validated range of a peer
/// region into a local buffer's room. Addresses are resolved only once the walk (and every
/// buffer allocation) is done.
#[derive(Debug, Clone, Copy)]
struct RxCopy {
    region: u16,
    offset: u64,
    buf: u32,
    at: u32,
    len: u32,
}

/// Where receive copies go: done at once, or recorded for the engine.
enum Copier<'a> {
    Now,
    Later(&'a mut Vec<RxCopy>),
}

impl Copier<'_> {
    /// Copies `len` bytes at `(region, offset)` of the peer's memory (already validated) to
    /// byte `at` of buffer `buf`'s room.
    #[inline]
    fn copy(
        &mut self,
        pool: &mut Pool,
        regions: &Regions,
        (region, offset): (u16, u64),
        buf: u32,
        at: usize,
        len: usize,
    ) {
        match self {
            Copier::Now => {
                // Validated by `Regions::valid` before; a failure here is impossible, and
                // would only leave zeros in our own buffer.
                let _ = regions.0[usize::from(region)]
                    .read(offset, &mut pool.room_mut(buf)[at..at + len]);
            }
            Copier::Later(v) => v.push(RxCopy {
                region,
                offset,
                buf,
                at: at as u32,
                len: len as u32,
            }),
        }
    }
}
rx_common!(PrimaryRx);

impl PrimaryRx {
    pub(crate) fn new(base: QueueBase, regions: Regions, max_frame: u32) -> PrimaryRx {
        let cursor = base.ring.tail();
        let n = usize::from(base.ring.size());
        PrimaryRx {
            base,
            regions,
            cursor,
            max_frame,
            segs: Vec::with_capacity(n),
            held: false,
            copies: Vec::new(),
            reqs: Vec::new(),
        }
    }

    /// The peer's memory, for single-copy forwarding (register it with the pool).
    pub fn peer_memory(&self) -> PeerMemory {
        PeerMemory(self.regions.clone())
    }

    /// Gives the slots of packets received with `hdr > 0` back to the peer. Call once every
    /// packet from them has been sent or dropped (the end of a dispatch).
    pub fn release(&mut self) {
        if self.held {
            self.held = false;
            self.base.ring.set_tail(self.cursor);
        }
    }

    /// Slots the peer has published and we have not consumed, or `LinkDown` (after faulting
    /// the link) when the peer's index is further ahead than a ring can hold.
    fn pending(&self) -> Result<u16, LinkDown> {
        let head = self.base.ring.head();
        let n = head.wrapping_sub(self.cursor);
        if n > self.base.ring.size() {
            self.base.link.fault(format!(
                "S2M ring {}: head {head} is {n} slots past tail {}, ring holds {}",
                self.base.index,
                self.cursor,
                self.base.ring.size()
            ));
            return Err(LinkDown);
        }
        Ok(n)
    }

    /// Receives up to `max` packets into `pool`, appending their head buffer indices to `out`.
    pub fn recv(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
    ) -> Result<usize, LinkDown> {
        self.recv_split(pool, out, max, 0, 0)
    }

    /// Single-copy receive: copies only the first `hdr` bytes of each packet into a local
    /// buffer and leaves the rest in the peer's buffer as the buffer's external segment
    /// (`source` is the id under which the caller registered [`peer_memory`](Self::peer_memory)
    /// with the pool). The slots stay held until [`release`](Self::release). Chained packets
    /// are copied whole. `hdr == 0` is the classic receive.
    pub fn recv_split(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
        hdr: usize,
        source: u32,
    ) -> Result<usize, LinkDown> {
        self.recv_split_via(pool, out, max, hdr, source, None)
    }

    /// As [`recv_split`](Self::recv_split), with every copy out of the peer's memory going
    /// through `engine`. The copies of one call are submitted as one batch once the ring walk
    /// is done, and retired before the call returns and before any slot goes back to the
    /// peer. A synchronous engine (the CPU backend: every batch copied within `submit`) and
    /// `None` both copy inline during the walk, which is the same work without a second pass
    /// over the batch (about 55 instructions a packet).
    pub fn recv_split_via(
        &mut self,
        pool: &mut Pool,
        out: &mut Vec<u32>,
        max: usize,
        hdr: usize,
        source: u32,
        engine: Option<&mut Engine>,
    ) -> Result<usize, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        let n = self.pending()?;
        if n == 0 {
            return Ok(0);
        }
        let ring = &self.base.ring;
        let end = self.cursor.wrapping_add(n);
        let mut slot = self.cursor;
        let (mut packets, mut bytes, mut bad, mut oversize) = (0usize, 0u64, 0u64, 0u64);
        let data_size = pool.data_size();
        self.copies.clear();
        let engine = engine.filter(|e| e.caps().asynchronous);
        let mut copier = if engine.is_some() {
            Copier::Later(&mut self.copies)
        } else {
            Copier::Now
        };
        'packets: while slot != end && packets < max {
            let start = slot;
            let first = ring.desc(slot);
            slot = slot.wrapping_add(1);
            let single = first.flags & DESC_FLAG_NEXT == 0;
            let (ok, total) = if single {
                // Almost every packet: one descriptor, no need for the chain scratch.
                (self.regions.valid(&first), u64::from(first.length))
            } else {
                self.segs.clear();
                self.segs.push(first);
                let mut total = u64::from(first.length);
                let mut ok = self.regions.valid(&first);
                loop {
                    if slot == end {
                        // The chain is not complete yet: leave it for the next call, unless it
                        // already spans the whole ring and so never can be.
                        if start == self.cursor && n == ring.size() {
                            self.base.link.fault(format!(
                                "S2M ring {}: descriptor chain longer than the ring",
                                self.base.index
                            ));
                            return Err(LinkDown);
                        }
                        slot = start;
                        break 'packets;
                    }
                    let d = ring.desc(slot);
                    slot = slot.wrapping_add(1);
                    ok &= self.regions.valid(&d);
                    total += u64::from(d.length);
                    self.segs.push(d);
                    if d.flags & DESC_FLAG_NEXT == 0 {
                        break;
                    }
                }
                (ok, total)
            };
            if !ok {
                bad += 1;
                continue;
            }
            if total > u64::from(self.max_frame) {
                oversize += 1;
                continue;
            }
            if single && hdr != 0 && total as usize > hdr {
                let Some(b) = pool.alloc() else {
                    bump(&self.base.counters.no_buffer, 1);
                    slot = start;
                    break;
                };
                copier.copy(
                    pool,
                    &self.regions,
                    (first.region, u64::from(first.offset)),
                    b,
                    0,
                    hdr,
                );
                let m = pool.meta_mut(b);
                m.len = hdr as u16;
                m.total_len = total as u32;
                m.ext = buffer::Ext {
                    source,
                    region: first.region,
                    offset: u64::from(first.offset) + hdr as u64,
                    len: total as u32 - hdr as u32,
                };
                out.push(b);
                packets += 1;
                bytes += total;
                self.held = true;
                continue;
            }
            let segs: &[Desc] = if single {
                std::slice::from_ref(&first)
            } else {
                &self.segs
            };
            match copy_in(
                pool,
                &self.regions,
                segs,
                total as usize,
                data_size,
                &mut copier,
            ) {
                Some(h) => {
                    out.push(h);
                    packets += 1;
                    bytes += total;
                }
                None => {
                    bump(&self.base.counters.no_buffer, 1);
                    slot = start;
                    break;
                }
            }
        }
        if let Some(e) = engine
            && !self.copies.is_empty()
        {
            self.reqs.clear();
            let rooms = pool.room_ptrs();
            for c in &self.copies {
                let r = &self.regions.0[usize::from(c.region)];
                // Both ranges were checked when recorded (descriptor against its region, the
                // copy against the room it was sized for); a miss here is impossible, and
                // would leave stale bytes of an earlier packet in our own buffer.
                let (Ok(src), Some(dst)) = (
                    r.addr(c.offset, u64::from(c.len)),
                    rooms.ptr(c.buf, c.at as usize, c.len as usize),
                ) else {
                    continue;
                };
                push_copy(&mut self.reqs, src, dst, c.len as usize);
            }
            // SAFETY: every source is a bounds-checked range of a peer mapping that
            // `self.regions` keeps alive for the whole call; every destination is a
            // bounds-checked range of a local buffer's room, derived from one exclusive
            // borrow of the pool (`rooms`) that lasts until the batch is retired below, and
            // no two destinations overlap (each buffer's ranges are disjoint by
            // construction). Local and peer memory never overlap. We wait for retirement
            // before the pool is touched again or any slot goes back to the peer.
            unsafe { copy_and_wait(e, &self.reqs) };
            // The pool's memory was lent to the engine until here: keeping the borrow alive to
            // this point makes the compiler refuse any pool access while copies are in flight.
            #[allow(clippy::drop_non_drop)]
            drop(rooms);
        }
        if slot != self.cursor {
            self.cursor = slot;
            if !self.held {
                ring.set_tail(slot);
            }
        }
        let c = &self.base.counters;
        bump(&c.packets, packets as u64);
        bump(&c.bytes, bytes);
        if bad != 0 {
            bump(&c.drop_bad_desc, bad);
        }
        if oversize != 0 {
            bump(&c.drop_oversize, oversize);
        }
        Ok(packets)
    }
}

/// Copies validated segments into a fresh local chain; `None` if the pool is short.
#[inline]
fn copy_in(
    pool: &mut Pool,
    regions: &Regions,
    segs: &[Desc],
    total: usize,
    data_size: usize,
    copier: &mut Copier<'_>,
) -> Option<u32> {
    if let [d] = segs
        && total <= data_size
    {
        let b = pool.alloc()?;
        copier.copy(pool, regions, (d.region, u64::from(d.offset)), b, 0, total);
        let m = pool.meta_mut(b);
        m.len = total as u16;
        m.total_len = total as u32;
        return Some(b);
    }
    let nbufs = total.div_ceil(data_size).max(1);
    if pool.available() < nbufs {
        return None;
    }
    let head = pool.alloc()?;
    let (mut cur, mut fill) = (head, 0usize);
    for d in segs {
        let mut off = 0usize;
        let len = d.length as usize;
        while off < len {
            if fill == data_size {
                let nb = pool.alloc()?;
                pool.meta_mut(cur).len = fill as u16;
                pool.link(cur, nb);
                cur = nb;
                fill = 0;
            }
            let n = (len - off).min(data_size - fill);
            copier.copy(
                pool,
                regions,
                (d.region, u64::from(d.offset) + off as u64),
                cur,
                fill,
                n,
            );
            fill += n;
            off += n;
        }
    }
    pool.meta_mut(cur).len = fill as u16;
    pool.meta_mut(head).total_len = total as u32;
    Some(head)
}

/// Primary, M2S: sends by copying local buffers into buffers the peer posted.
#[derive(Debug)]
pub struct PrimaryTx {
    base: QueueBase,
    regions: Regions,
    cursor: u16,
    plan: Vec<Desc>,
    pieces: Vec<(*const u8, usize)>,
    reqs: Vec<CopyReq>,
}
queue_common!(PrimaryTx);

// SAFETY: `pieces` and `reqs` are scratch space that only holds addresses during one `send`
// call (cleared at its start, never dereferenced after it); everything else is `Send`.
unsafe impl Send for PrimaryTx {}

impl PrimaryTx {
    pub(crate) fn new(base: QueueBase, regions: Regions) -> PrimaryTx {
        let cursor = base.ring.tail();
        let n = usize::from(base.ring.size());
        PrimaryTx {
            base,
            regions,
            cursor,
            plan: Vec::with_capacity(n),
            pieces: Vec::with_capacity(4),
            reqs: Vec::with_capacity(n * 2),
        }
    }

    /// A buffer the peer posted must lie inside one of its regions; otherwise the link faults.
    fn check_posted(&self, d: &Desc) -> Result<(), LinkDown> {
        if self.regions.valid(d) {
            return Ok(());
        }
        self.base.link.fault(format!(
            "M2S ring {}: posted buffer region {} offset {} length {} is not inside a region",
            self.base.index, d.region, d.offset, d.length
        ));
        Err(LinkDown)
    }

    /// Sends packets (local chains) in order; returns how many were consumed from the front of
    /// `pkts`: placed, or dropped and counted (`drop_oversize`: larger than all the buffers
    /// the peer posted; `drop_bad_desc`: an external segment whose memory is gone). The caller
    /// still owns every buffer and frees them. Copies are done inline on the CPU.
    pub fn send(&mut self, pool: &Pool, pkts: &[u32]) -> Result<usize, LinkDown> {
        self.send_via(pool, pkts, None)
    }

    /// As [`send`](Self::send), with every payload copy going through `engine` (the head is
    /// published once the engine retired the batch). External segments (single-copy
    /// forwarding) are copied straight from the rx peer's buffer into this peer's.
    pub fn send_via(
        &mut self,
        pool: &Pool,
        pkts: &[u32],
        engine: Option<&mut Engine>,
    ) -> Result<usize, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        let ring = &self.base.ring;
        let head = ring.head();
        let posted = head.wrapping_sub(self.cursor);
        if posted > ring.size() {
            self.base.link.fault(format!(
                "M2S ring {}: head {head} is {posted} slots past tail {}, ring holds {}",
                self.base.index,
                self.cursor,
                ring.size()
            ));
            return Err(LinkDown);
        }
        self.reqs.clear();
        let mut slot = self.cursor;
        let mut left = posted;
        let (mut sent, mut dropped, mut bytes, mut lost) = (0usize, 0u64, 0u64, 0u64);
        // The peer memory of the last external source seen (a burst mostly has one).
        let mut last_src: Option<(u32, Option<&PeerMemory>)> = None;
        let mut peer_of = |id: u32| -> Option<&PeerMemory> {
            match last_src {
                Some((i, m)) if i == id => m,
                _ => {
                    let m = pool
                        .ext_source(id)
                        .and_then(|s| s.as_any().downcast_ref::<PeerMemory>());
                    last_src = Some((id, m));
                    m
                }
            }
        };
        'packets: for &p in pkts {
            // Fast path, almost every packet: one local buffer (and at most one external
            // segment) that fits the next posted buffer.
            let m = pool.meta(p);
            if m.next == NONE && left > 0 {
                let d = ring.desc(slot);
                let local = pool.data(p);
                let total = local.len() + m.ext.len as usize;
                if total as u64 <= u64::from(d.length) {
                    self.check_posted(&d)?;
                    let ext_src = if m.ext.len != 0 {
                        let e = m.ext;
                        match peer_of(e.source)
                            .and_then(|pm| pm.addr(e.region, e.offset, u64::from(e.len)))
                        {
                            Some(a) => Some(a),
                            None => {
                                lost += 1;
                                sent += 1;
                                dropped += 1;
                                continue 'packets;
                            }
                        }
                    } else {
                        None
                    };
                    let r = &self.regions.0[usize::from(d.region)];
                    let Ok(dst) = r.addr(u64::from(d.offset), total as u64) else {
                        // `valid` covered the whole posted buffer; unreachable.
                        break;
                    };
                    if !local.is_empty() {
                        push_copy(&mut self.reqs, local.as_ptr(), dst, local.len());
                    }
                    if let Some(a) = ext_src {
                        // SAFETY: `local.len() + ext.len == total` and `dst` is valid for
                        // `total` bytes (checked by `addr` just above).
                        let d2 = unsafe { dst.add(local.len()) };
                        push_copy(&mut self.reqs, a.cast_const(), d2, m.ext.len as usize);
                    }
                    ring.set_desc_len_flags(slot, total as u32, 0);
                    slot = slot.wrapping_add(1);
                    left -= 1;
                    sent += 1;
                    bytes += total as u64;
                    continue;
                }
            }
            // Where each piece of the packet comes from: local data, then any external segment.
            self.pieces.clear();
            let mut b = p;
            while b != NONE {
                let d = pool.data(b);
                if !d.is_empty() {
                    self.pieces.push((d.as_ptr(), d.len()));
                }
                let e = pool.meta(b).ext;
                if e.len != 0 {
                    let src = peer_of(e.source)
                        .and_then(|m| m.addr(e.region, e.offset, u64::from(e.len)));
                    match src {
                        Some(a) => self.pieces.push((a.cast_const(), e.len as usize)),
                        None => {
                            lost += 1;
                            sent += 1;
                            dropped += 1;
                            continue 'packets;
                        }
                    }
                }
                b = pool.meta(b).next;
            }
            let total: usize = self.pieces.iter().map(|x| x.1).sum();
            // Plan: snapshot posted buffers until they hold the packet, touching nothing.
            self.plan.clear();
            let mut cap = 0u64;
            while cap < total as u64 || self.plan.is_empty() {
                if usize::from(left) == self.plan.len() {
                    break;
                }
                let d = ring.desc(slot.wrapping_add(self.plan.len() as u16));
                self.check_posted(&d)?;
                cap += u64::from(d.length);
                self.plan.push(d);
            }
            if cap < total as u64 && self.plan.len() == usize::from(ring.size()) {
                // Larger than every buffer the peer posted put together: it can never fit.
                bump(&self.base.counters.drop_oversize, 1);
                sent += 1;
                dropped += 1;
                continue;
            }
            if cap < total as u64 || self.plan.is_empty() {
                bump(&self.base.counters.ring_full, 1);
                bump(&self.base.counters.tx_no_room, (pkts.len() - sent) as u64);
                break;
            }
            // Map the pieces onto the planned buffers.
            let mut k = 0usize;
            let mut dfill = 0u32;
            for &(src, len) in &self.pieces {
                let mut off = 0usize;
                while off < len {
                    let d = &self.plan[k];
                    if dfill == d.length {
                        k += 1;
                        dfill = 0;
                        continue;
                    }
                    let n = (len - off).min((d.length - dfill) as usize);
                    let r = &self.regions.0[usize::from(d.region)];
                    let Ok(dst) = r.addr(u64::from(d.offset) + u64::from(dfill), n as u64) else {
                        // Validated when planned; unreachable, and harmless if reached.
                        break;
                    };
                    // SAFETY: `off + n <= len` and `src` is valid for `len` bytes (a pool
                    // slice borrowed for this call, or a bounds-checked peer range whose
                    // mapping the pool's source keeps alive).
                    let s = unsafe { src.add(off) };
                    push_copy(&mut self.reqs, s, dst, n);
                    dfill += n as u32;
                    off += n;
                }
            }
            let used = k + 1;
            for (i, d) in self.plan[..used].iter().enumerate() {
                let last = i + 1 == used;
                let len = if last { dfill } else { d.length };
                ring.set_desc_len_flags(
                    slot.wrapping_add(i as u16),
                    len,
                    if last { 0 } else { DESC_FLAG_NEXT },
                );
            }
            slot = slot.wrapping_add(used as u16);
            left -= used as u16;
            sent += 1;
            bytes += total as u64;
        }
        if !self.reqs.is_empty() {
            match engine {
                Some(e) => {
                    // SAFETY: every request was built above from a live pool slice or a
                    // bounds-checked range of a mapping kept alive by an `Arc` for the whole
                    // call; destinations are posted peer buffers no other request of ours
                    // writes; `push_copy` already copied any request whose source and
                    // destination overlap. We wait for retirement before returning, so
                    // nobody touches the ranges while the engine works.
                    unsafe { copy_and_wait(e, &self.reqs) };
                }
                // SAFETY: as above; the copies happen now.
                None => unsafe { copy_engine::copy_now(&self.reqs) },
            }
        }
        if slot != self.cursor {
            self.cursor = slot;
            ring.set_tail(slot);
            self.base.signal();
        }
        bump(&self.base.counters.packets, sent as u64 - dropped);
        bump(&self.base.counters.bytes, bytes);
        if lost != 0 {
            bump(&self.base.counters.drop_bad_desc, lost);
        }
        Ok(sent)
    }
}

/// Adds one copy, or does it at once with `memmove` when source and destination overlap (a
/// peer whose S2M buffer overlaps an M2S buffer it posted: only its own bytes get mixed up).
fn push_copy(reqs: &mut Vec<CopyReq>, src: *const u8, dst: *mut u8, len: usize) {
    let (s, d) = (src as usize, dst as usize);
    if s < d + len && d < s + len {
        // SAFETY: both ranges are valid for `len` bytes (see the caller); `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, len) };
        return;
    }
    reqs.push(CopyReq {
        src,
        dst,
        len: len as u32,
    });
}

/// Submits a batch, waiting out `Full` by retiring older batches, and waits until the batch
/// itself is retired: the copies are done when this returns.
///
/// # Safety
/// As [`Engine::submit`].
unsafe fn copy_and_wait(e: &mut Engine, reqs: &[CopyReq]) {
    let t = loop {
        // SAFETY: forwarded from the caller.
        match unsafe { e.submit(reqs) } {
            Ok(t) => break t,
            Err(_) => {
                e.poll(|_| {});
                std::hint::spin_loop();
            }
        }
    };
    while !e.is_retired(t) {
        e.poll(|_| {});
        std::hint::spin_loop();
    }
}

/// The secondary's own buffers for one ring: slot `j` always uses buffer `j`.
#[derive(Debug)]
pub(crate) struct SlotBuffers {
    pub region: Arc<SharedMemory>,
    pub region_index: u16,
    pub base: u64,
    pub size: u32,
}

impl SlotBuffers {
    #[inline]
    fn offset(&self, slot: u16, mask: u16) -> u64 {
        self.base + u64::from(slot & mask) * u64::from(self.size)
    }

    /// The descriptor of `slot`'s own buffer: `length` bytes (a full buffer when posting an
    /// empty one), region and offset always from our records, never from the ring.
    #[inline]
    fn desc(&self, slot: u16, mask: u16, length: u32, flags: u16) -> Desc {
        Desc {
            flags,
            region: self.region_index,
            length,
            offset: self.offset(slot, mask) as u32,
            metadata: 0,
        }
    }
}

/// Where one packet's bytes go: its consecutive slots' buffers.
#[derive(Debug)]
pub struct PacketWriter<'a> {
    bufs: &'a SlotBuffers,
    first_slot: u16,
    mask: u16,
    len: usize,
}

impl PacketWriter<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes `bytes` at packet offset `at`, across buffer boundaries; bytes past the packet's
    /// length are ignored.
    #[inline]
    pub fn write(&mut self, at: usize, bytes: &[u8]) {
        let size = self.bufs.size as usize;
        let end = (at + bytes.len()).min(self.len);
        let mut pos = at;
        while pos < end {
            let seg = pos / size;
            let within = pos % size;
            let n = (end - pos).min(size - within);
            let off = self
                .bufs
                .offset(self.first_slot.wrapping_add(seg as u16), self.mask)
                + within as u64;
            let _ = self.bufs.region.write(off, &bytes[pos - at..pos - at + n]);
            pos += n;
        }
    }
}

/// Secondary, S2M: writes packets straight into its shared buffers (no staging copy).
#[derive(Debug)]
pub struct SecondaryTx {
    base: QueueBase,
    bufs: SlotBuffers,
    head: u16,
}
queue_common!(SecondaryTx);

impl SecondaryTx {
    pub(crate) fn new(base: QueueBase, bufs: SlotBuffers) -> SecondaryTx {
        let head = base.ring.head();
        SecondaryTx { base, bufs, head }
    }

    /// Bytes one slot holds; longer packets take several slots.
    pub fn buffer_size(&self) -> usize {
        self.bufs.size as usize
    }

    /// Free slots, or `LinkDown` if the peer moved `tail` past our `head`.
    pub fn free_slots(&self) -> Result<u16, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        let tail = self.base.ring.tail();
        let inflight = self.head.wrapping_sub(tail);
        if inflight > self.base.ring.size() {
            self.base.link.fault(format!(
                "S2M ring {}: tail {tail} moved past head {}",
                self.base.index, self.head
            ));
            return Err(LinkDown);
        }
        Ok(self.base.ring.size() - inflight)
    }

    /// Slots published that the primary has not yet consumed.
    pub fn in_flight(&self) -> Result<u16, LinkDown> {
        Ok(self.base.ring.size() - self.free_slots()?)
    }

    /// Sends `lens.len()` packets or as many as fit; `fill(i, writer)` writes packet `i` in
    /// place. Returns how many packets were consumed from the front of `lens`: sent, or
    /// dropped and counted in `drop_oversize` because they need more slots than the ring has.
    pub fn send_with(
        &mut self,
        lens: &[u32],
        mut fill: impl FnMut(usize, &mut PacketWriter<'_>),
    ) -> Result<usize, LinkDown> {
        let mut free = self.free_slots()?;
        let ring = &self.base.ring;
        let mask = ring.size() - 1;
        let size = self.bufs.size;
        let mut slot = self.head;
        let (mut sent, mut dropped, mut bytes) = (0usize, 0u64, 0u64);
        for (i, &len) in lens.iter().enumerate() {
            let nseg = len.div_ceil(size).max(1);
            if nseg > u32::from(ring.size()) {
                // Can never fit, however empty the ring gets: drop it rather than stall.
                bump(&self.base.counters.drop_oversize, 1);
                sent += 1;
                dropped += 1;
                continue;
            }
            if nseg > u32::from(free) {
                bump(&self.base.counters.ring_full, 1);
                bump(&self.base.counters.tx_no_room, (lens.len() - i) as u64);
                break;
            }
            let mut w = PacketWriter {
                bufs: &self.bufs,
                first_slot: slot,
                mask,
                len: len as usize,
            };
            fill(i, &mut w);
            let mut left = len;
            for s in 0..nseg {
                let seg = left.min(size);
                left -= seg;
                let last = s + 1 == nseg;
                let sl = slot.wrapping_add(s as u16);
                let flags = if last { 0 } else { DESC_FLAG_NEXT };
                ring.set_desc(sl, self.bufs.desc(sl, mask, seg, flags));
            }
            slot = slot.wrapping_add(nseg as u16);
            free -= nseg as u16;
            sent += 1;
            bytes += u64::from(len);
        }
        if slot != self.head {
            self.head = slot;
            ring.set_head(slot);
            self.base.signal();
        }
        bump(&self.base.counters.packets, sent as u64 - dropped);
        bump(&self.base.counters.bytes, bytes);
        Ok(sent)
    }
}

/// One received packet, read in place from the secondary's own buffers.
#[derive(Debug)]
pub struct RxPacket<'a> {
    bufs: &'a SlotBuffers,
    segs: &'a [u32],
    first_slot: u16,
    mask: u16,
    len: usize,
}

impl RxPacket<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of slots (descriptors) the packet used.
    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    /// Copies packet bytes from offset `at` into `dst`; returns how many were copied.
    pub fn read(&self, at: usize, dst: &mut [u8]) -> usize {
        let mut pos = 0usize; // packet offset of the current segment
        let mut done = 0usize;
        for (i, &seg) in self.segs.iter().enumerate() {
            let seg = seg as usize;
            let want = at + done;
            if want < pos + seg && done < dst.len() {
                let within = want - pos;
                let n = (seg - within).min(dst.len() - done);
                let off = self
                    .bufs
                    .offset(self.first_slot.wrapping_add(i as u16), self.mask)
                    + within as u64;
                let _ = self.bufs.region.read(off, &mut dst[done..done + n]);
                done += n;
            }
            pos += seg;
        }
        done
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len];
        self.read(0, &mut v);
        v
    }
}

/// Secondary, M2S: receives in place and reposts each buffer once the callback returns.
#[derive(Debug)]
pub struct SecondaryRx {
    base: QueueBase,
    bufs: SlotBuffers,
    cursor: u16,
    lens: Vec<u32>,
}
queue_common!(SecondaryRx);
rx_common!(SecondaryRx);

impl SecondaryRx {
    /// Posts every slot's buffer to the primary (head = tail + ring size).
    pub(crate) fn new(base: QueueBase, bufs: SlotBuffers) -> SecondaryRx {
        let cursor = base.ring.tail();
        let ring = &base.ring;
        let mask = ring.size() - 1;
        for i in 0..ring.size() {
            let s = cursor.wrapping_add(i);
            ring.set_desc(s, bufs.desc(s, mask, bufs.size, 0));
            ring.set_desc(
                s,
                Desc {
                    flags: 0,
                    region: bufs.region_index,
                    length: bufs.size,
                    offset: bufs.offset(s, mask) as u32,
                    metadata: 0,
                },
            );
        }
        ring.set_head(cursor.wrapping_add(ring.size()));
        SecondaryRx {
            base,
            bufs,
            cursor,
            lens: Vec::with_capacity(usize::from(mask) + 1),
        }
    }

    fn pending(&self) -> Result<u16, LinkDown> {
        let tail = self.base.ring.tail();
        let n = tail.wrapping_sub(self.cursor);
        if n > self.base.ring.size() {
            self.base.link.fault(format!(
                "M2S ring {}: tail {tail} is {n} slots past our cursor {}, ring holds {}",
                self.base.index,
                self.cursor,
                self.base.ring.size()
            ));
            return Err(LinkDown);
        }
        Ok(n)
    }

    /// Hands up to `max` packets to `f` in order, then reposts their buffers.
    pub fn recv_with(
        &mut self,
        max: usize,
        mut f: impl FnMut(&RxPacket<'_>),
    ) -> Result<usize, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        let n = self.pending()?;
        if n == 0 {
            return Ok(0);
        }
        let ring = &self.base.ring;
        let mask = ring.size() - 1;
        let end = self.cursor.wrapping_add(n);
        let mut slot = self.cursor;
        let (mut packets, mut bytes, mut bad) = (0usize, 0u64, 0u64);
        'packets: while slot != end && packets < max {
            let start = slot;
            self.lens.clear();
            let mut ok = true;
            loop {
                if slot == end {
                    if start == self.cursor && n == ring.size() {
                        self.base.link.fault(format!(
                            "M2S ring {}: descriptor chain longer than the ring",
                            self.base.index
                        ));
                        return Err(LinkDown);
                    }
                    slot = start;
                    break 'packets;
                }
                // Only flags and length are the primary's; region and offset are ours and
                // are never read back from shared memory.
                let d = ring.desc(slot);
                slot = slot.wrapping_add(1);
                ok &= d.length <= self.bufs.size && (d.length > 0 || d.flags & DESC_FLAG_NEXT == 0);
                self.lens.push(d.length.min(self.bufs.size));
                if d.flags & DESC_FLAG_NEXT == 0 {
                    break;
                }
            }
            if !ok {
                bad += 1;
                continue;
            }
            let len = self.lens.iter().map(|&l| l as usize).sum();
            f(&RxPacket {
                bufs: &self.bufs,
                segs: &self.lens,
                first_slot: start,
                mask,
                len,
            });
            packets += 1;
            bytes += len as u64;
        }
        // Repost the consumed buffers: region, offset and capacity rewritten from our records.
        let mut s = self.cursor;
        while s != slot {
            ring.set_desc(s, self.bufs.desc(s, mask, self.bufs.size, 0));
            s = s.wrapping_add(1);
        }
        if slot != self.cursor {
            self.cursor = slot;
            ring.set_head(slot.wrapping_add(ring.size()));
        }
        let c = &self.base.counters;
        bump(&c.packets, packets as u64);
        bump(&c.bytes, bytes);
        if bad != 0 {
            bump(&c.drop_bad_desc, bad);
        }
        Ok(packets)
    }
}
