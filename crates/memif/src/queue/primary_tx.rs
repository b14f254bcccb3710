//! Primary, M2S: copies local packets (and single copy's external segments) into buffers the
//! peer posted.

use buffer::{Meta, NONE, Pool};
use copy_engine::{CopyReq, Engine};

use super::copy::{copy_and_wait, push_copy};
use super::counters::bump;
use super::regions::{PeerMemory, Peers, Regions};
use super::{LinkDown, QueueBase};
use crate::ring::{DESC_FLAG_NEXT, Desc};

/// Primary, M2S: sends by copying local buffers into buffers the peer posted.
#[derive(Debug)]
pub struct PrimaryTx {
    base: QueueBase,
    regions: Regions,
    cursor: u16,
    /// The head as last read: `seen - cursor` buffers are posted and not yet filled.
    seen: u16,
    /// The most buffers the peer has had posted and unfilled at once: its posting depth,
    /// which it returns to once it has taken every frame we placed (see `in_flight`).
    posted_max: u16,
    plan: Vec<Desc>,
    pieces: Vec<(*const u8, usize)>,
    reqs: Vec<CopyReq>,
}
queue_common!(PrimaryTx);

// SAFETY: `pieces` and `reqs` are scratch space that only holds addresses during one `send`
// call (cleared at its start, never dereferenced after it); everything else is `Send`.
unsafe impl Send for PrimaryTx {}

impl PrimaryTx {
    /// The peer's regions this queue copies to or from (all of the connection's).
    pub fn memory(&self) -> Vec<std::sync::Arc<crate::shm::SharedMemory>> {
        self.regions.0.to_vec()
    }
}

impl PrimaryTx {
    pub(crate) fn new(base: QueueBase, regions: Regions) -> PrimaryTx {
        let cursor = base.ring.tail();
        let n = usize::from(base.ring.size());
        PrimaryTx {
            base,
            regions,
            cursor,
            seen: cursor,
            posted_max: 0,
            plan: Vec::with_capacity(n),
            pieces: Vec::with_capacity(4),
            reqs: Vec::with_capacity(n * 2),
        }
    }

    /// Reads the peer's head: the buffers posted and not yet filled (`seen` and the most
    /// posted at once follow). `LinkDown`, and the link faulted, when the head is further
    /// ahead than a ring holds.
    fn read_posted(&mut self) -> Result<u16, LinkDown> {
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
        self.seen = head;
        self.posted_max = self.posted_max.max(posted);
        Ok(posted)
    }

    /// Frames placed that the peer has not taken yet, as far as the ring shows: the peer
    /// re-posts a buffer once it has read the frame in it, so every frame is taken when as
    /// many buffers are posted again as the most it ever had posted. A peer that posts fewer
    /// buffers than before keeps this above zero; callers bound their wait. `LinkDown` when
    /// the link is down or the peer's index is further ahead than a ring can hold.
    pub fn in_flight(&mut self) -> Result<u16, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        let posted = self.base.ring.head().wrapping_sub(self.cursor);
        if posted > self.base.ring.size() {
            return Err(LinkDown);
        }
        self.posted_max = self.posted_max.max(posted);
        Ok(self.posted_max - posted)
    }

    /// Sends packets (local chains) in order; returns how many were consumed from the front of
    /// `pkts`: placed, or dropped and counted (`drop_oversize`: larger than all the buffers
    /// the peer posted; `drop_bad_desc`: an external segment whose memory is gone). The caller
    /// still owns every buffer and frees them. Copies are done inline on the CPU.
    pub fn send(&mut self, pool: &Pool, pkts: &[u32]) -> Result<usize, LinkDown> {
        self.send_via(pool, pkts, &Peers::default(), None)
    }

    /// As [`send`](Self::send), with every payload copy going through `engine` (the head is
    /// published once the engine retired the batch). External segments (single-copy
    /// forwarding) are copied straight from the rx peer's buffer (found in `peers`) into this
    /// peer's; one whose source `peers` does not have is dropped and counted. A synchronous
    /// engine (the CPU backend) and `None` copy each single-buffer packet inline, in
    /// `send_direct`, as the receive side does: the same work without a
    /// batch to build and walk.
    pub fn send_via(
        &mut self,
        pool: &Pool,
        pkts: &[u32],
        peers: &Peers,
        engine: Option<&mut Engine>,
    ) -> Result<usize, LinkDown> {
        self.send_where(pool, pkts, peers, engine, |_| true)
            .map(|r| r.sent)
    }

    /// As [`send_via`](Self::send_via), for the run at the front of `pkts` of packets whose
    /// `tx_if` is `tx_if` (a graph's output node is handed frames that may mix interfaces).
    /// The loop that places the packets finds where the run ends as it reads their
    /// metadata, which spares the caller a pass of its own.
    pub fn send_run(
        &mut self,
        pool: &Pool,
        pkts: &[u32],
        peers: &Peers,
        engine: Option<&mut Engine>,
        tx_if: u32,
    ) -> Result<TxRun, LinkDown> {
        self.send_where(pool, pkts, peers, engine, |m| m.tx_if == tx_if)
    }

    /// `send_via` for the packets at the front of `pkts` that are `ours`.
    #[inline(always)]
    fn send_where(
        &mut self,
        pool: &Pool,
        pkts: &[u32],
        peers: &Peers,
        engine: Option<&mut Engine>,
        ours: impl Fn(&Meta) -> bool + Copy,
    ) -> Result<TxRun, LinkDown> {
        if !self.base.link.is_up() {
            return Err(LinkDown);
        }
        // The peer's head is read again only when the buffers known to be posted from the
        // last read are fewer than the packets: its line is the peer's, and a read after the
        // peer moved it (it re-posts after every burst it takes) is a miss. The slow path
        // below (chains, packets over several buffers) always works from a fresh read:
        // whether a packet can ever fit depends on everything posted.
        let mut posted = self.seen.wrapping_sub(self.cursor);
        let cached = usize::from(posted) >= pkts.len();
        if !cached {
            posted = self.read_posted()?;
        }
        self.reqs.clear();
        // Copies shorter than this are made at once: all of them without an asynchronous
        // engine, the short ones with one that would make them on the CPU anyway.
        let below = match &engine {
            Some(e) if e.caps().asynchronous => e.caps().inline_below as usize,
            _ => usize::MAX,
        };
        let (mut slot, mut left, mut sent, mut bytes) = if below == usize::MAX {
            self.send_direct(pool, pkts, peers, posted, ours)
        } else {
            (self.cursor, posted, 0, 0)
        };
        // Where the run ends: the direct loop stopped at its end, or at a packet of it that it
        // does not place (the general loop below does), or found no room.
        let direct = sent;
        let len = sent
            + pkts[sent..]
                .iter()
                .position(|&p| !ours(pool.meta(p)))
                .unwrap_or(pkts.len() - sent);
        let pkts = &pkts[..len];
        if cached && sent < len {
            left = self.read_posted()? - slot.wrapping_sub(self.cursor);
        }
        let ring = &self.base.ring;
        let (mut dropped, mut lost) = (0u64, 0u64);
        // Copies made at once; counted as short when an asynchronous engine would have
        // taken the longer ones.
        let mut short = 0u64;
        let mut peer_of = |id: u32| peers.get(id);
        for &p in &pkts[sent..] {
            // Fast path, almost every packet of an asynchronous engine (with copies on the
            // CPU, `send_direct` took them): one local buffer (and at most one external
            // segment) that fits the next posted buffer.
            let m = pool.meta(p);
            if m.next == NONE && left > 0 {
                let d = ring.desc(slot);
                let local = pool.data(p);
                let total = local.len() + m.ext.len as usize;
                if total as u64 <= u64::from(d.length) {
                    check_posted(&self.base, &self.regions, &d)?;
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
                                continue;
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
                        copy_or_push(
                            local.len() < below,
                            &mut short,
                            &mut self.reqs,
                            local.as_ptr(),
                            dst,
                            local.len(),
                        );
                    }
                    if let Some(a) = ext_src {
                        // SAFETY: `local.len() + ext.len == total` and `dst` is valid for
                        // `total` bytes (checked by `addr` just above).
                        let d2 = unsafe { dst.add(local.len()) };
                        let n = m.ext.len as usize;
                        copy_or_push(n < below, &mut short, &mut self.reqs, a.cast_const(), d2, n);
                    }
                    ring.set_desc_len_flags(slot, total as u32, 0);
                    slot = slot.wrapping_add(1);
                    left -= 1;
                    sent += 1;
                    bytes += total as u64;
                    continue;
                }
            }
            // Slow path: a chain, or a packet that needs several posted buffers.
            let Some(total) = gather_pieces(&mut self.pieces, pool, p, &mut peer_of) else {
                lost += 1;
                sent += 1;
                dropped += 1;
                continue;
            };
            let placed = place_chain(
                &self.base,
                &self.regions,
                &mut self.plan,
                &self.pieces,
                &mut self.reqs,
                (slot, left),
                total,
            )?;
            match placed {
                Placement::Placed(used) => {
                    slot = slot.wrapping_add(used);
                    left -= used;
                    sent += 1;
                    bytes += total as u64;
                }
                Placement::Oversize => {
                    // Larger than every buffer the peer posted put together: it can never fit.
                    bump(&self.base.counters.drop_oversize, 1);
                    sent += 1;
                    dropped += 1;
                }
                Placement::NoRoom => {
                    bump(&self.base.counters.ring_full, 1);
                    bump(&self.base.counters.tx_no_room, (pkts.len() - sent) as u64);
                    break;
                }
            }
        }
        let mut engine = engine;
        if short != 0
            && below != usize::MAX
            && let Some(e) = engine.as_deref_mut()
        {
            e.note_short(short);
        }
        run_copies(&self.reqs, engine);
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
        Ok(TxRun {
            len,
            sent,
            single: direct == len,
        })
    }
}

/// What [`PrimaryTx::send_run`] did with the run at the front of the packets it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxRun {
    /// How many packets the run has (all for the interface).
    pub len: usize,
    /// How many of them were consumed, from the front: placed, or dropped and counted. The
    /// rest found no room.
    pub sent: usize,
    /// Every packet of the run is one buffer (it is known without reading them again; false
    /// says only that this was not seen).
    pub single: bool,
}

impl PrimaryTx {
    /// The send loop of almost every packet when copies are made on the CPU: one local
    /// buffer (and at most one external segment) into the next posted buffer, checked once
    /// against its region and copied at once. Stops at the first packet it does not place (a
    /// chain, one larger than the posted buffer, an external segment whose memory is gone, a
    /// posted buffer outside the peer's regions, no buffer posted) and leaves it, and all
    /// after it, to the general loop of [`send_via`](Self::send_via), which handles and
    /// counts it. Returns the slot it stopped at, the posted buffers left, and the packets
    /// and bytes it sent.
    // A function of its own: inlined into the general loop, it shares that loop's register
    // pressure and spills more (--cost at 64 B: 4 instructions a packet more).
    #[inline(never)]
    fn send_direct(
        &self,
        pool: &Pool,
        pkts: &[u32],
        peers: &Peers,
        posted: u16,
        ours: impl Fn(&Meta) -> bool,
    ) -> (u16, u16, usize, u64) {
        let ring = &self.base.ring;
        let regions = &*self.regions.0;
        let n = pkts.len().min(usize::from(posted));
        let (cursor, mut bytes) = (self.cursor, 0u64);
        // One count for the packet, its slot and what is left: fewer values live in the
        // loop, fewer of them spilled.
        let mut i = 0;
        while i < n {
            let slot = cursor.wrapping_add(i as u16);
            let (m, local) = pool.meta_data(pkts[i]);
            let total = local.len() + m.ext.len as usize;
            let d = ring.desc(slot);
            if !ours(m) || m.next != NONE || total > d.length as usize || d.length == 0 {
                break;
            }
            let Some(dst) = regions
                .get(usize::from(d.region))
                .and_then(|r| r.range(u64::from(d.offset), u64::from(d.length)).ok())
            else {
                break;
            };
            dst.write_at(0, local);
            if m.ext.len != 0 {
                let e = m.ext;
                let Some(src) = peers
                    .get(e.source)
                    .and_then(|pm| pm.range(e.region, e.offset, u64::from(e.len)))
                else {
                    break;
                };
                dst.copy_at(local.len(), src);
            }
            ring.set_desc_len_flags(slot, total as u32, 0);
            bytes += total as u64;
            i += 1;
        }
        (cursor.wrapping_add(i as u16), posted - i as u16, i, bytes)
    }
}

/// One copy of the fast path: done now (`inline`: the engine is synchronous or absent, or the
/// copy is shorter than the engine would take), or added to the batch. `src` and `dst` are
/// valid for `len` bytes: a pool slice borrowed for the call or a bounds-checked peer range,
/// and a bounds-checked posted buffer.
#[inline(always)]
fn copy_or_push(
    inline: bool,
    short: &mut u64,
    reqs: &mut Vec<CopyReq>,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    if inline {
        *short += 1;
        // SAFETY: both ranges are valid for `len` bytes (see above), and `copy` allows them
        // to overlap (a peer whose S2M buffer overlaps an M2S buffer it posted).
        unsafe { std::ptr::copy(src, dst, len) };
    } else {
        push_copy(reqs, src, dst, len);
    }
}

/// Where a packet that takes the slow path went.
enum Placement {
    /// Into this many posted buffers, from the first free slot on.
    Placed(u16),
    /// Nowhere: larger than every buffer the peer posted put together.
    Oversize,
    /// Nowhere yet: too few posted buffers now.
    NoRoom,
}

/// Lists where each piece of packet `p` comes from (each buffer's local data, then the last
/// one's external segment) and returns its length; `None` if an external segment's memory is
/// gone.
fn gather_pieces<'a>(
    pieces: &mut Vec<(*const u8, usize)>,
    pool: &'a Pool,
    p: u32,
    peer_of: &mut impl FnMut(u32) -> Option<&'a PeerMemory>,
) -> Option<usize> {
    pieces.clear();
    let mut b = p;
    while b != NONE {
        let d = pool.data(b);
        if !d.is_empty() {
            pieces.push((d.as_ptr(), d.len()));
        }
        let e = pool.meta(b).ext;
        if e.len != 0 {
            let a = peer_of(e.source)?.addr(e.region, e.offset, u64::from(e.len))?;
            pieces.push((a.cast_const(), e.len as usize));
        }
        b = pool.meta(b).next;
    }
    Some(pieces.iter().map(|x| x.1).sum())
}

/// Places a packet of `total` bytes, from `pieces`, into the posted buffers from `slot` on
/// (`left` of them posted): plans the buffers first (snapshots, touching nothing), then adds
/// the copies to `reqs` and writes the descriptors' lengths and NEXT flags.
fn place_chain(
    base: &QueueBase,
    regions: &Regions,
    plan: &mut Vec<Desc>,
    pieces: &[(*const u8, usize)],
    reqs: &mut Vec<CopyReq>,
    (slot, left): (u16, u16),
    total: usize,
) -> Result<Placement, LinkDown> {
    let ring = &base.ring;
    plan.clear();
    let mut cap = 0u64;
    while cap < total as u64 || plan.is_empty() {
        if usize::from(left) == plan.len() {
            break;
        }
        let d = ring.desc(slot.wrapping_add(plan.len() as u16));
        check_posted(base, regions, &d)?;
        cap += u64::from(d.length);
        plan.push(d);
    }
    if cap < total as u64 && plan.len() == usize::from(ring.size()) {
        return Ok(Placement::Oversize);
    }
    if cap < total as u64 || plan.is_empty() {
        return Ok(Placement::NoRoom);
    }
    // Map the pieces onto the planned buffers.
    let mut k = 0usize;
    let mut dfill = 0u32;
    for &(src, len) in pieces {
        let mut off = 0usize;
        while off < len {
            let d = &plan[k];
            if dfill == d.length {
                k += 1;
                dfill = 0;
                continue;
            }
            let n = (len - off).min((d.length - dfill) as usize);
            let r = &regions.0[usize::from(d.region)];
            let Ok(dst) = r.addr(u64::from(d.offset) + u64::from(dfill), n as u64) else {
                // Validated when planned; unreachable, and harmless if reached.
                break;
            };
            // SAFETY: `off + n <= len` and `src` is valid for `len` bytes (a pool
            // slice borrowed for this call, or a bounds-checked peer range whose
            // mapping the pool's source keeps alive).
            let s = unsafe { src.add(off) };
            push_copy(reqs, s, dst, n);
            dfill += n as u32;
            off += n;
        }
    }
    let used = k + 1;
    for (i, d) in plan[..used].iter().enumerate() {
        let last = i + 1 == used;
        let len = if last { dfill } else { d.length };
        ring.set_desc_len_flags(
            slot.wrapping_add(i as u16),
            len,
            if last { 0 } else { DESC_FLAG_NEXT },
        );
    }
    Ok(Placement::Placed(used as u16))
}

/// A buffer the peer posted must lie inside one of its regions; otherwise the link faults.
fn check_posted(base: &QueueBase, regions: &Regions, d: &Desc) -> Result<(), LinkDown> {
    if regions.valid(d) {
        return Ok(());
    }
    base.link.fault(format!(
        "M2S ring {}: posted buffer region {} offset {} length {} is not inside a region",
        base.index, d.region, d.offset, d.length
    ));
    Err(LinkDown)
}

/// Runs a send's copies: on `engine`, waiting for them to retire, or at once on the CPU.
fn run_copies(reqs: &[CopyReq], engine: Option<&mut Engine>) {
    if reqs.is_empty() {
        return;
    }
    match engine {
        Some(e) => {
            // SAFETY: every request was built by `send_via` from a live pool slice or a
            // bounds-checked range of a mapping kept alive by an `Arc` for the whole call;
            // destinations are posted peer buffers no other request of ours writes;
            // `push_copy` already copied any request whose source and destination overlap.
            // We wait for retirement before returning, so nobody touches the ranges while
            // the engine works.
            unsafe { copy_and_wait(e, reqs) };
        }
        // SAFETY: as above; the copies happen now.
        None => unsafe { copy_engine::copy_now(reqs) },
    }
}
