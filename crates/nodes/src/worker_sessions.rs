//! A worker's own part of the sessions, which its `ethernet-input` and `ip4-session` share:
//! the owner of its share of the session table (which creates, frees and sweeps those
//! sessions), and its flow cache.
//!
//! The flow cache is an exact-match cache in front of the shared table, as Open vSwitch's
//! exact-match cache is in front of its classifier ("The Design and Implementation of Open
//! vSwitch", NSDI 2015): a direct-mapped array, indexed by a hash of a packet's key, of copies
//! of what one direction of a session needs to forward a packet (its rewrite and checksum
//! deltas), each with the session's handle and status word as they were when copied.
//! `ip4-session` fills it with each packet of an established flow it forwards whose
//! session's state such packets leave as it is ([`session::Forwarding::steady`]: a
//! UDP flow's either direction, a TCP connection's segments without SYN, FIN or RST once it
//! is established, all within one network). `ethernet-input` then forwards the flow's next
//! packets itself, in the pass that checks their IPv4 headers and looks up their routes,
//! without visiting `ip4-session` or probing the shared table: a copy stands for its session
//! only while the session's generation and status word are those it was made with (not
//! freed, killed, re-judged or moved on in its TCP state since: [`session::Records::refresh`],
//! which also keeps the session's last-seen time as the packet would have) and the policies
//! are those it was judged under. Anything else goes to `ip4-session`, which finds the change.
//!
//! A packet that meets another flow's copy in its slot (a collision, or a flow whose copy a
//! newer one replaced) simply goes to `ip4-session`: the cache changes the cost of a packet,
//! never its fate. Its size bounds its memory: [`CACHE_SLOTS`] × 64 bytes (1 MiB) a worker.
//! With 4,000 flows a worker sent in turn, 4096 slots missed 51% of their packets and 16384
//! miss 11%; a two-way array of 4096 sets missed 9% but cost 11 instructions more a packet
//! on a hit (docs/results/2026-11-30-many-flows.md).
//!
//! A miss does not end the cache's use for the rest of the frame: the packets of other flows
//! after it are still forwarded from it. Those of the missed packet's own flow are not (they
//! would overtake it, which waits for `ip4-session`): a flow without a copy, or whose copy no
//! longer holds, misses for the rest of the frame anyway (copies are made after it); a flow
//! whose copy holds but whose packet went there (a SYN, FIN or RST) is remembered in the
//! frame's filter ([`Missed`], a bit per slot modulo 64), and a packet whose slot's bit is
//! set goes there too (another flow on the same bit only takes the longer way). A packet
//! whose flow cannot be told (not TCP or UDP, a later fragment, a header cut short) still
//! ends the cache's use for the frame, and so do misses that are nearly all of a frame's
//! packets (more flows than slots: probing would cost more than it saves).
//!
//! The two nodes run on the worker's thread one after the other; each takes the lock once a
//! frame, never contended (the control thread does not touch it).

use std::cell::Cell;
use std::sync::{Arc, Mutex, MutexGuard};

use session::{Delta, Forwarding, Handle, Owner, tcp_flags};
use wire::ipv4::MIN_HEADER_LEN;

use crate::ETH_HDR;
use crate::services::{OwnerStats, Sessions};

/// How many copies a worker's flow cache holds (a power of two).
pub const CACHE_SLOTS: usize = 16384;

/// The most time one frame's sweep accounts for (ms).
const SWEEP_SPAN_MS: u32 = 2;

/// How many session ids a worker's sweep looks at per frame, at least and at most.
const SWEEP_MIN: u32 = 64;
const SWEEP_MAX: u32 = 4096;

/// A worker's part of the sessions, shared by its nodes.
#[derive(Debug, Clone)]
pub struct WorkerSessions(Arc<Mutex<Local>>);

impl WorkerSessions {
    /// Takes one of `sessions`' owners (none left: a graph built past the table's workers,
    /// which then creates no session).
    pub fn new(sessions: &Arc<Sessions>) -> WorkerSessions {
        WorkerSessions(Arc::new(Mutex::new(Local {
            sessions: Arc::clone(sessions),
            owner: sessions.take_owner(),
            swept_at: sessions.now(),
            cache: FlowCache::new(),
        })))
    }

    /// The worker's part, for one frame.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Local> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug)]
pub(crate) struct Local {
    sessions: Arc<Sessions>,
    /// This worker's share of the table, and where its counters are copied for `show`.
    owner: Option<(Owner, Arc<OwnerStats>)>,
    /// When the owner last swept (the sessions' clock).
    swept_at: u32,
    pub(crate) cache: FlowCache,
}

impl Local {
    pub(crate) fn owner(&mut self) -> Option<&mut Owner> {
        self.owner.as_mut().map(|(o, _)| o)
    }

    /// The owner's share of a sweep at `now`, at the end of a frame that used the sessions,
    /// and its counters copied for `show`. Every id about once a second while frames come
    /// at least every couple of milliseconds; when they come slower, a little each frame (a
    /// pass then takes longer, which only lets expired sessions linger: they are refreshed
    /// by nothing and evicted like any unestablished one). The work of a frame stays small
    /// and does not grow with the time a slow frame took.
    pub(crate) fn sweep(&mut self, now: u32) {
        let Some((o, stats)) = self.owner.as_mut() else {
            return;
        };
        let elapsed = now.wrapping_sub(self.swept_at).min(SWEEP_SPAN_MS);
        let budget = (u64::from(o.ids().len() as u32) * u64::from(elapsed) / 1000) as u32;
        o.sweep(now, budget.clamp(SWEEP_MIN, SWEEP_MAX));
        self.swept_at = now;
        stats.store(&o.counters());
    }
}

impl Drop for Local {
    /// The owner outlives the graph: the next graph built on these sessions takes it.
    fn drop(&mut self) {
        if let Some((o, stats)) = self.owner.take() {
            self.sessions.give_back(o, stats);
        }
    }
}

/// One direction of a session as the cache keeps it (one cache line), in the form the
/// packet's headers take it.
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(64))]
pub(crate) struct Cached {
    /// The packet's key ([`key_of`]); `[0, 0]` in an empty slot, which no TCP or UDP
    /// packet's key is.
    w: [u64; 2],
    /// The addresses and ports the packet leaves with, as the headers hold them (for a
    /// session a service does not translate, those it came with).
    addrs: [u8; 8],
    ports: [u8; 4],
    /// The IPv4 checksum's change (the rewrite's and the TTL's decrement) and the L4
    /// checksum's, in the host's order of the header's words: the one's-complement sum does
    /// not depend on byte order (RFC 1071 §2(B)).
    ip: Delta,
    l4: Delta,
    /// Its route after the rewrite: the adjacency, as the VRF's table gave it at the low
    /// half of version `fib` (a table changes 2^32 times before an old half comes back,
    /// and a copy of a session still alive is made again long before).
    adj: u32,
    fib: u32,
    tcp: bool,
    /// The session, and its status word when copied.
    handle: Handle,
    status: u64,
}

const _: () = assert!(size_of::<Cached>() == 64);

/// The IPv4 checksum's change when the TTL (the high byte of its word) drops by one: ¬m + m'
/// is 0xfeff (RFC 1624), taken in the host's order.
const TTL_DECREMENT: Delta = Delta(u16::from_ne_bytes(0xfeffu16.to_be_bytes()));

/// Byte offsets, from the start of the Ethernet header, of the IPv4 header, its TTL and
/// checksum, the addresses and ports, and the UDP and TCP checksums.
const IP_AT: usize = ETH_HDR;
const TTL_AT: usize = IP_AT + 8;
const CHECK_AT: usize = IP_AT + 10;
const ADDRS_AT: usize = IP_AT + 12;
const PORTS_AT: usize = IP_AT + MIN_HEADER_LEN;
const UDP_CHECK_AT: usize = PORTS_AT + 6;
const TCP_CHECK_AT: usize = PORTS_AT + 16;

/// The cache's key of a packet of VRF `vrf` whose IPv4 header (without options) and first
/// four L4 bytes are `h`: its addresses and ports as they lie in the header (not swapped
/// into numbers), its protocol and its VRF.
#[inline(always)]
pub(crate) fn key_of(vrf: u32, h: &[u8; MIN_HEADER_LEN + 4]) -> [u64; 2] {
    let addrs = u64::from_ne_bytes(*h[12..].first_chunk::<8>().expect("24 bytes"));
    let ports = u32::from_ne_bytes(*h[20..].first_chunk::<4>().expect("24 bytes"));
    [
        addrs,
        u64::from(ports) | u64::from(h[9]) << 32 | u64::from(vrf) << 40,
    ]
}

#[derive(Debug)]
pub(crate) struct FlowCache {
    slots: Box<[Cached; CACHE_SLOTS]>,
    /// The policy epoch every copy's verdict (allow) was made in: when the policies change,
    /// the cache is emptied before its next use.
    epoch: u32,
}

impl FlowCache {
    fn new() -> FlowCache {
        let slots = vec![Cached::default(); CACHE_SLOTS].into_boxed_slice();
        FlowCache {
            slots: slots.try_into().expect("CACHE_SLOTS copies"),
            epoch: 0,
        }
    }

    /// The slot of the key `w`: the top bits of a multiplicative hash of both words.
    #[inline(always)]
    fn slot(w: [u64; 2]) -> usize {
        let h = (w[0] ^ w[1]).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> (64 - CACHE_SLOTS.trailing_zeros())) as usize & (CACHE_SLOTS - 1)
    }

    /// Empties the cache if its copies were judged under policies older than `epoch`.
    fn judged_in(&mut self, epoch: u32) {
        if self.epoch != epoch {
            self.slots.fill(Cached::default());
            self.epoch = epoch;
        }
    }

    /// Keeps a copy of `f`, the session a packet of VRF `vrf` whose headers begin `h` (with
    /// TCP flags `flags`) was just forwarded by through adjacency `adj` (looked up in the
    /// VRF's table at version `fib`), judged allowed in policy `epoch`, if its packets may
    /// be forwarded from it: within one network and steady. It takes the slot of whatever
    /// was there. Whether it was kept.
    #[inline]
    pub(crate) fn put(
        &mut self,
        (vrf, h, flags): (u32, &[u8; MIN_HEADER_LEN + 4], u8),
        f: &Forwarding,
        (adj, fib): (u32, u64),
        epoch: u32,
    ) -> bool {
        if f.vrf != vrf || !f.steady(flags) {
            return false;
        }
        self.judged_in(epoch);
        let w = key_of(vrf, h);
        let host = |d: Delta| Delta(d.0.swap_bytes());
        self.slots[Self::slot(w)] = Cached {
            w,
            addrs: f.addrs.to_be_bytes(),
            ports: f.ports.to_be_bytes(),
            ip: host(f.deltas.ip).add(TTL_DECREMENT),
            l4: host(f.deltas.l4),
            adj,
            fib: fib as u32,
            tcp: h[9] == session::PROTO_TCP,
            handle: f.handle,
            status: f.status(),
        };
        true
    }

    /// A frame's view of the cache, for `ethernet-input`, under policy `epoch`, with the
    /// frame's filter of missed flows `missed` (empty).
    pub(crate) fn frame<'a>(
        &'a mut self,
        table: &'a session::Table,
        (epoch, now): (u32, u32),
        missed: &'a Missed,
    ) -> Frame<'a> {
        self.judged_in(epoch);
        Frame {
            slots: &self.slots,
            records: table.records(),
            now,
            missed,
        }
    }
}

/// A frame's filter of missed flows (see the module).
#[derive(Debug, Default)]
pub(crate) struct Missed {
    /// The slots of the flows whose copy held but one of whose packets the frame sent to
    /// `ip4-session` (a SYN, FIN or RST), one bit per slot modulo 64.
    held: Cell<u64>,
    /// The frame gave up on the cache: nearly all its packets missed (more flows than
    /// slots), probing costs more than it saves, and the rest of it goes the long way.
    gave_up: Cell<bool>,
}

/// Why [`Frame::hit`] gave no copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    /// The packet's flow goes to `ip4-session` (its later packets in the frame do too): the
    /// packets of other flows after it may still be forwarded from the cache.
    Flow,
    /// The packet's flow cannot be told: the frame's packets after it go the long way too.
    Unknown,
}

/// What `ethernet-input` needs of the sessions for one frame.
#[derive(Clone, Copy)]
pub(crate) struct Frame<'a> {
    slots: &'a [Cached; CACHE_SLOTS],
    records: session::Records<'a>,
    now: u32,
    missed: &'a Missed,
}

impl<'a> Frame<'a> {
    /// The frame gives up on the cache (see [`Missed`]).
    pub(crate) fn give_up(&self) {
        self.missed.gave_up.set(true);
    }

    pub(crate) fn gave_up(&self) -> bool {
        self.missed.gave_up.get()
    }

    /// The copy to forward the packet `f` of VRF `vrf` by (from its Ethernet header on, in
    /// one buffer; its IPv4 header checked and without options, `len` bytes long), if it is
    /// TCP or UDP with its header whole, not a later fragment, carries no SYN, FIN or RST,
    /// no packet of its flow went to `ip4-session` earlier in the frame, and its session's
    /// copy in the cache still holds: the packet is observed in its session then. Otherwise
    /// `ip4-session` takes it, and [`Miss`] says whether the frame's later packets of other
    /// flows may still be forwarded from the cache.
    #[inline(always)]
    pub(crate) fn hit(&self, vrf: u32, f: &[u8], len: u32) -> Result<&'a Cached, Miss> {
        let h = f
            .first_chunk::<{ UDP_CHECK_AT + 2 }>()
            .ok_or(Miss::Unknown)?;
        // The fragment offset (the low 13 bits of the IPv4 header's bytes 6 and 7) and the
        // protocol (byte 9) in one word: a first fragment or none, of TCP or UDP.
        // (In the host's order: no swap.)
        let frag_proto =
            u32::from_ne_bytes(*h[IP_AT + 6..].first_chunk::<4>().ok_or(Miss::Unknown)?)
                & u32::from_ne_bytes([0x1f, 0xff, 0, 0xff]);
        let first_of = |proto: u8| u32::from_ne_bytes([0, 0, 0, proto]);
        const TCP_LEN: usize = IP_AT + MIN_HEADER_LEN + wire::tcp::MIN_HEADER_LEN;
        // The TCP flags' byte, 13 into the TCP header (0 for UDP).
        let flags = match frag_proto {
            x if x == first_of(session::PROTO_UDP) && len >= (MIN_HEADER_LEN + 8) as u32 => 0,
            x if x == first_of(session::PROTO_TCP) && len >= (TCP_LEN - IP_AT) as u32 => {
                f.first_chunk::<TCP_LEN>().ok_or(Miss::Unknown)?[PORTS_AT + 13]
            }
            _ => return Err(Miss::Unknown),
        };
        let w = key_of(vrf, h[IP_AT..].first_chunk().ok_or(Miss::Unknown)?);
        let s = FlowCache::slot(w);
        let c = &self.slots[s];
        // Without its copy, or with a copy that no longer holds, the flow's later packets in
        // the frame miss too (ip4-session copies only after the frame): nothing to remember.
        if c.w != w {
            return Err(Miss::Flow);
        }
        let (held, bit) = (self.missed.held.get(), 1u64 << (s & 63));
        if flags & (tcp_flags::SYN | tcp_flags::FIN | tcp_flags::RST) != 0 {
            self.missed.held.set(held | bit);
            return Err(Miss::Flow);
        }
        if held != 0 && held & bit != 0 || !self.records.refresh(c.handle, c.status, self.now) {
            return Err(Miss::Flow);
        }
        Ok(c)
    }
}

impl Cached {
    /// Its route (the adjacency) if the VRF's table is still at version `fib`; `None` if
    /// it changed (`ip4-session` then looks the route up and copies the session again).
    #[inline(always)]
    pub(crate) fn route(&self, fib: u64) -> Option<u32> {
        (self.fib == fib as u32).then_some(self.adj)
    }

    /// Forwards the packet `f` (as [`Frame::hit`] took it, from its Ethernet header on) as
    /// its session says, leaving with the Ethernet header `hdr`: the header, the TTL, the
    /// addresses and ports written, both checksums updated. `false` (nothing written) when
    /// the TTL would expire.
    #[inline(always)]
    pub(crate) fn forward(&self, hdr: &[u8; ETH_HDR], f: &mut [u8]) -> bool {
        let Some(h) = f.first_chunk_mut::<{ UDP_CHECK_AT + 2 }>() else {
            return false;
        };
        if h[TTL_AT] <= 1 {
            return false;
        }
        h[..ETH_HDR].copy_from_slice(hdr);
        h[TTL_AT] -= 1;
        let check = |h: &[u8], at: usize| u16::from_ne_bytes([h[at], h[at + 1]]);
        // ¬HC + Δ needs one end-around carry (both are 16 bits).
        let s = u32::from(!check(h, CHECK_AT)) + u32::from(self.ip.0);
        let c = !((s & 0xffff) + (s >> 16)) as u16;
        h[CHECK_AT..CHECK_AT + 2].copy_from_slice(&c.to_ne_bytes());
        h[ADDRS_AT..ADDRS_AT + 8].copy_from_slice(&self.addrs);
        h[PORTS_AT..PORTS_AT + 4].copy_from_slice(&self.ports);
        if !self.tcp {
            let c = self.l4.apply_udp(check(h, UDP_CHECK_AT));
            h[UDP_CHECK_AT..UDP_CHECK_AT + 2].copy_from_slice(&c.to_ne_bytes());
        } else if let Some(t) = f.get_mut(TCP_CHECK_AT..TCP_CHECK_AT + 2) {
            let c = self.l4.apply(u16::from_ne_bytes([t[0], t[1]]));
            t.copy_from_slice(&c.to_ne_bytes());
        }
        true
    }
}
