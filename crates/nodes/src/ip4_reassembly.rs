//! `ip4-reassembly`: fragmented datagrams addressed to us, put back together as a host must
//! (RFC 791 §3.2, RFC 1122 §3.3.2), VPP's `ip4-full-reassembly`. `ip4-local` sends every
//! fragment here; a datagram whose fragments have all arrived goes back to `ip4-local` whole
//! (a chain), as if it had come unfragmented: an echo request is answered, UDP dispatched.
//!
//! Forwarded fragments never come here: a router passes them on as they are.
//!
//! Every fragment's payload is copied into the datagram's own bytes and its buffer returned at
//! once, so reassembly holds no buffers, only memory, and that is bounded: at most
//! [`MAX_DATAGRAMS`] datagrams per worker, each at most 65,535 bytes in at most [`MAX_FRAGMENTS`]
//! fragments, and at most [`MAX_PER_SOURCE`] of them from one source (address and VRF): a new
//! datagram from a source that has that many evicts the source's own oldest, so that one sender of
//! endless first fragments churns its own datagrams, not everyone's. A datagram not complete within
//! the timeout ([`DEFAULT_TIMEOUT`]) is dropped; expiry is checked whenever fragments arrive, so an
//! idle worker keeps at most those bounds until the next one. A new datagram when the table is full
//! evicts the oldest. Overlapping or duplicated fragments drop the whole datagram (as Linux does
//! since it stopped trusting overlaps), and so does a fragment that contradicts the length the last
//! fragment set. Each outcome has its counter.

use std::time::Duration;

use graph::{CONSUMED, Ctx, Node, clock};
use wire::Ipv4;
use wire::ipv4::MIN_HEADER_LEN;

/// How long a datagram may take to arrive whole.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// Datagrams in reassembly at once, per worker.
pub const MAX_DATAGRAMS: usize = 64;
/// Fragments one datagram may come in.
pub const MAX_FRAGMENTS: usize = 64;
/// Datagrams in reassembly at once from one source (address and VRF), per worker.
pub const MAX_PER_SOURCE: usize = 16;
/// The largest IPv4 payload: a datagram is at most 65,535 bytes with its header.
const MAX_PAYLOAD: u32 = 65_535 - MIN_HEADER_LEN as u32;

/// What makes fragments one datagram's (RFC 791: source, destination, protocol,
/// identification), in the VRF it arrived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub vrf: u32,
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub protocol: u8,
    pub ident: u16,
}

/// One fragment, as [`Reassembler::add`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct Fragment<'a> {
    pub key: Key,
    /// Where its payload goes in the datagram, in bytes.
    pub offset: u32,
    /// More fragments follow (MF).
    pub more: bool,
    /// Its 20-byte header (the first fragment's becomes the datagram's).
    pub header: &'a [u8; MIN_HEADER_LEN],
    pub payload: &'a [u8],
}

/// What became of a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Kept; the datagram is not complete yet.
    Held,
    /// The datagram is complete: its bytes (header, then payload) are in the reassembler's
    /// output ([`Reassembler::take_output`]).
    Complete,
    /// The fragment, and the datagram it belonged to, were dropped for this reason.
    Dropped(Error),
}

/// Why a datagram in reassembly made way for a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Its source had [`MAX_PER_SOURCE`] in reassembly: its own oldest went.
    Source,
    /// The table held [`MAX_DATAGRAMS`]: the oldest of all went.
    Table,
}

#[derive(Debug)]
struct Datagram {
    key: Key,
    started: u64,
    header: Option<[u8; MIN_HEADER_LEN]>,
    /// The payload's length, once the last fragment (MF clear) has said it.
    total: Option<u32>,
    /// Byte ranges received, sorted and merged where they touch.
    ranges: Vec<(u32, u32)>,
    fragments: usize,
    data: Vec<u8>,
}

impl Datagram {
    fn complete(&self) -> bool {
        self.header.is_some()
            && self
                .total
                .is_some_and(|t| self.ranges.as_slice() == [(0, t)])
    }

    /// Records `[start, end)`; false if it overlaps a range already there.
    fn insert(&mut self, start: u32, end: u32) -> bool {
        let at = self.ranges.partition_point(|r| r.1 <= start);
        if self.ranges.get(at).is_some_and(|r| r.0 < end) {
            return false;
        }
        self.ranges.insert(at, (start, end));
        // Merge with the neighbours it touches.
        if at + 1 < self.ranges.len() && self.ranges[at].1 == self.ranges[at + 1].0 {
            self.ranges[at].1 = self.ranges[at + 1].1;
            self.ranges.remove(at + 1);
        }
        if at > 0 && self.ranges[at - 1].1 == self.ranges[at].0 {
            self.ranges[at - 1].1 = self.ranges[at].1;
            self.ranges.remove(at);
        }
        true
    }
}

/// The reassembly table: the node's state, kept apart from the graph so that its rules can
/// be tested with a made-up clock.
#[derive(Debug)]
pub struct Reassembler {
    timeout_ns: u64,
    table: Vec<Datagram>,
    output: Vec<u8>,
}

impl Reassembler {
    pub fn new(timeout: Duration) -> Reassembler {
        Reassembler {
            timeout_ns: timeout.as_nanos() as u64,
            table: Vec::new(),
            output: Vec::new(),
        }
    }

    /// Datagrams in reassembly.
    pub fn pending(&self) -> usize {
        self.table.len()
    }

    /// Drops every datagram older than the timeout at `now` (ns); returns how many.
    pub fn expire(&mut self, now: u64) -> usize {
        let before = self.table.len();
        let timeout = self.timeout_ns;
        self.table
            .retain(|d| now.saturating_sub(d.started) <= timeout);
        before - self.table.len()
    }

    /// Adds one fragment at `now` (ns). On [`Outcome::Complete`] the datagram is in
    /// [`take_output`](Self::take_output). A new datagram from a source with
    /// [`MAX_PER_SOURCE`] in reassembly evicts that source's oldest, and one when the table is
    /// full the oldest of all; the second value says which, if either, happened.
    pub fn add(&mut self, f: Fragment<'_>, now: u64) -> (Outcome, Option<Eviction>) {
        let len = f.payload.len() as u32;
        let end = f.offset + len;
        let mut evicted = None;
        let i = match self.table.iter().position(|d| d.key == f.key) {
            Some(i) => i,
            None => {
                if let Some(own) = self.sources_oldest(&f.key) {
                    self.table.swap_remove(own);
                    evicted = Some(Eviction::Source);
                } else if self.table.len() >= MAX_DATAGRAMS {
                    let oldest = (0..self.table.len())
                        .min_by_key(|&i| self.table[i].started)
                        .expect("the table is full");
                    self.table.swap_remove(oldest);
                    evicted = Some(Eviction::Table);
                }
                self.table.push(Datagram {
                    key: f.key,
                    started: now,
                    header: None,
                    total: None,
                    ranges: Vec::new(),
                    fragments: 0,
                    data: Vec::new(),
                });
                self.table.len() - 1
            }
        };
        let verdict = self.place(i, f, end);
        if let Err(e) = verdict {
            self.table.swap_remove(i);
            return (Outcome::Dropped(e), evicted);
        }
        if !self.table[i].complete() {
            return (Outcome::Held, evicted);
        }
        let d = self.table.swap_remove(i);
        let total = d.total.expect("complete");
        let mut header = d.header.expect("complete");
        {
            let mut ip = Ipv4::new_unchecked(&mut header[..]);
            ip.set_total_len((total + MIN_HEADER_LEN as u32) as u16);
            ip.set_flags_frag(0);
            ip.fill_checksum();
        }
        self.output.clear();
        self.output.extend_from_slice(&header);
        self.output.extend_from_slice(&d.data[..total as usize]);
        (Outcome::Complete, evicted)
    }

    /// The oldest datagram from `key`'s source (address and VRF) if that source has
    /// [`MAX_PER_SOURCE`] in reassembly.
    fn sources_oldest(&self, key: &Key) -> Option<usize> {
        let own = || {
            (0..self.table.len())
                .filter(|&i| self.table[i].key.src == key.src && self.table[i].key.vrf == key.vrf)
        };
        if own().count() < MAX_PER_SOURCE {
            return None;
        }
        own().min_by_key(|&i| self.table[i].started)
    }

    /// Checks fragment `f` (payload ending at `end`) against datagram `i` and stores it.
    fn place(&mut self, i: usize, f: Fragment<'_>, end: u32) -> Result<(), Error> {
        let d = &mut self.table[i];
        if f.more && !f.payload.len().is_multiple_of(8) {
            return Err(Error::Malformed);
        }
        if end > MAX_PAYLOAD {
            return Err(Error::TooLong);
        }
        if d.fragments >= MAX_FRAGMENTS {
            return Err(Error::TooManyFragments);
        }
        // The last fragment fixes the length; nothing may end past it or disagree with it.
        match (f.more, d.total) {
            (false, Some(t)) if t != end => return Err(Error::Overlap),
            (false, _) if d.ranges.last().is_some_and(|r| r.1 > end) => {
                return Err(Error::Overlap);
            }
            (true, Some(t)) if end >= t => return Err(Error::Overlap),
            _ => {}
        }
        if !d.insert(f.offset, end) {
            return Err(Error::Overlap);
        }
        if !f.more {
            d.total = Some(end);
        }
        if f.offset == 0 {
            d.header = Some(*f.header);
        }
        d.fragments += 1;
        if d.data.len() < end as usize {
            d.data.resize(end as usize, 0);
        }
        d.data[f.offset as usize..end as usize].copy_from_slice(f.payload);
        Ok(())
    }

    /// The last completed datagram: its header (length set, no longer a fragment, checksum
    /// filled) and payload.
    pub fn take_output(&self) -> &[u8] {
        &self.output
    }
}

#[derive(Debug)]
pub struct Ip4Reassembly {
    r: Reassembler,
    /// A fragment's bytes (its chain read out).
    scratch: Vec<u8>,
}

impl Default for Ip4Reassembly {
    fn default() -> Self {
        Ip4Reassembly::new(DEFAULT_TIMEOUT)
    }
}

impl Ip4Reassembly {
    pub fn new(timeout: Duration) -> Ip4Reassembly {
        Ip4Reassembly {
            r: Reassembler::new(timeout),
            scratch: Vec::new(),
        }
    }
}

graph::node! {
    Ip4Reassembly: "ip4-reassembly", Internal;
    next Next {
        Local = "ip4-local",
        Drop = "error-drop",
    }
    error Error {
        Held = "fragment held for reassembly (not an error)",
        Reassembled = "datagram reassembled (not an error)",
        Overlap = "overlapping, duplicate or contradicting fragment (datagram dropped)",
        Malformed = "fragment before the last not a multiple of 8 bytes (datagram dropped)",
        TooLong = "reassembled datagram over 65535 bytes (dropped)",
        TooManyFragments = "datagram in more than 64 fragments (dropped)",
        TimedOut = "datagram incomplete after the reassembly timeout (dropped)",
        Evicted = "datagram evicted: more than 64 in reassembly",
        EvictedSource = "datagram evicted: more than 16 in reassembly from its source",
        NoBuffer = "no buffer for the reassembled datagram or its fragment",
    }
}

impl Node for Ip4Reassembly {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        let now = clock::ticks();
        let expired = self.r.expire(now);
        if expired > 0 {
            ctx.count_errors(Error::TimedOut, expired as u64);
        }
        for (&b, n) in bufs.iter().zip(next.iter_mut()) {
            *n = Next::Drop.into();
            // ip4-input checked the header (20 bytes, no options) and trimmed the packet to
            // its total length; read it whole, external segment included.
            self.scratch.clear();
            ctx.pool.read_chain(b, &mut self.scratch);
            let Some((header, payload)) = self.scratch.split_first_chunk::<MIN_HEADER_LEN>() else {
                ctx.count_error(Error::Malformed);
                continue;
            };
            let ip = Ipv4::new_unchecked(&header[..]);
            let f = Fragment {
                key: Key {
                    vrf: ctx.pool.meta(b).vrf,
                    src: ip.src_addr().octets(),
                    dst: ip.dst_addr().octets(),
                    protocol: ip.protocol().to_raw(),
                    ident: ip.ident(),
                },
                offset: u32::from(ip.frag_offset()),
                more: ip.more_frags(),
                header,
                payload,
            };
            let (outcome, evicted) = self.r.add(f, now);
            match evicted {
                Some(Eviction::Table) => ctx.count_error(Error::Evicted),
                Some(Eviction::Source) => ctx.count_error(Error::EvictedSource),
                None => {}
            }
            match outcome {
                Outcome::Held => {
                    ctx.count_error(Error::Held);
                    ctx.pool.free(b);
                    *n = CONSUMED;
                }
                Outcome::Dropped(e) => ctx.count_error(e),
                // The completing fragment's buffer carries the datagram on: its metadata
                // (interface, VRF) is the datagram's.
                Outcome::Complete if ctx.pool.rewrite(b, self.r.take_output()) => {
                    ctx.count_error(Error::Reassembled);
                    *n = Next::Local.into();
                }
                Outcome::Complete => ctx.count_error(Error::NoBuffer),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn key(ident: u16) -> Key {
        Key {
            vrf: 0,
            src: [10, 0, 0, 7],
            dst: [10, 0, 0, 1],
            protocol: 1,
            ident,
        }
    }

    fn header(ident: u16) -> [u8; 20] {
        let mut h = [0u8; 20];
        let mut ip = Ipv4::new_unchecked(&mut h[..]);
        ip.set_version_ihl(0x45);
        ip.set_ident(ident);
        ip.set_ttl(64);
        ip.set_protocol(wire::IpProtocol::Icmp);
        ip.set_src_addr([10, 0, 0, 7].into());
        ip.set_dst_addr([10, 0, 0, 1].into());
        h
    }

    /// Adds bytes `[at, at + len)` of `data` as a fragment of datagram `ident`.
    fn add(
        r: &mut Reassembler,
        ident: u16,
        data: &[u8],
        at: usize,
        len: usize,
        now: u64,
    ) -> Outcome {
        add_from(r, [10, 0, 0, 7], ident, data, at, len, now)
    }

    /// [`add`] for a datagram from `src`.
    fn add_from(
        r: &mut Reassembler,
        src: [u8; 4],
        ident: u16,
        data: &[u8],
        at: usize,
        len: usize,
        now: u64,
    ) -> Outcome {
        let h = header(ident);
        r.add(
            Fragment {
                key: Key { src, ..key(ident) },
                offset: at as u32,
                more: at + len < data.len(),
                header: &h,
                payload: &data[at..at + len],
            },
            now,
        )
        .0
    }

    #[test]
    fn fragments_in_any_order_make_the_datagram() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let mut r = Reassembler::new(DEFAULT_TIMEOUT);
        // Last first, then the middle, then the first (with the header).
        assert_eq!(add(&mut r, 1, &data, 2960, 40, 0), Outcome::Held);
        assert_eq!(add(&mut r, 1, &data, 1480, 1480, 0), Outcome::Held);
        assert_eq!(r.pending(), 1);
        assert_eq!(add(&mut r, 1, &data, 0, 1480, 0), Outcome::Complete);
        assert_eq!(r.pending(), 0);
        let out = r.take_output();
        assert_eq!(&out[20..], &data[..]);
        let ip = Ipv4::new_checked(out).unwrap();
        assert_eq!(usize::from(ip.total_len()), 3020);
        assert_eq!((ip.more_frags(), ip.frag_offset()), (false, 0));
        assert!(ip.checksum_ok());
        assert_eq!(ip.ident(), 1);
    }

    #[test]
    fn overlaps_contradictions_and_bad_lengths_drop_the_datagram() {
        let data = vec![1u8; 2000];
        let mut r = Reassembler::new(DEFAULT_TIMEOUT);
        assert_eq!(add(&mut r, 1, &data, 0, 1000, 0), Outcome::Held);
        assert_eq!(
            add(&mut r, 1, &data, 992, 8, 0),
            Outcome::Dropped(Error::Overlap)
        );
        assert_eq!(r.pending(), 0);
        // A duplicate is an overlap too.
        assert_eq!(add(&mut r, 2, &data, 0, 1000, 0), Outcome::Held);
        assert_eq!(
            add(&mut r, 2, &data, 0, 1000, 0),
            Outcome::Dropped(Error::Overlap)
        );
        // Two last fragments that disagree on the length.
        let h = header(3);
        let last = |offset| Fragment {
            key: key(3),
            offset,
            more: false,
            header: &h,
            payload: &data[..8],
        };
        assert_eq!(r.add(last(800), 0).0, Outcome::Held);
        assert_eq!(r.add(last(1600), 0).0, Outcome::Dropped(Error::Overlap));
        // A fragment past the length the last one set.
        assert_eq!(r.add(last(800), 0).0, Outcome::Held);
        assert_eq!(
            add(&mut r, 3, &data, 1000, 8, 0),
            Outcome::Dropped(Error::Overlap)
        );
        // A middle fragment whose length is not a multiple of 8.
        assert_eq!(
            add(&mut r, 4, &data, 0, 999, 0),
            Outcome::Dropped(Error::Malformed)
        );
        // Past 65535 bytes.
        let big = vec![0u8; 70_000];
        assert_eq!(
            add(&mut r, 5, &big, 65_512, 16, 0),
            Outcome::Dropped(Error::TooLong)
        );
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn memory_is_bounded_in_datagrams_fragments_and_time() {
        let data = vec![0u8; 65_000];
        let mut r = Reassembler::new(Duration::from_millis(100));
        // A datagram in tiny fragments stops at the fragment limit.
        for i in 0..MAX_FRAGMENTS {
            assert_eq!(add(&mut r, 1, &data, i * 8, 8, 0), Outcome::Held);
        }
        assert_eq!(
            add(&mut r, 1, &data, MAX_FRAGMENTS * 8, 8, 0),
            Outcome::Dropped(Error::TooManyFragments)
        );
        // A full table evicts its oldest datagram for a new one (the datagrams from sources
        // of their own, none at its source's limit).
        for ident in 0..MAX_DATAGRAMS as u16 {
            let src = [10, 0, 1, ident as u8];
            assert_eq!(
                add_from(&mut r, src, 100 + ident, &data, 0, 8, u64::from(ident)),
                Outcome::Held
            );
        }
        let h = header(9999);
        let (o, evicted) = r.add(
            Fragment {
                key: key(9999),
                offset: 0,
                more: true,
                header: &h,
                payload: &data[..8],
            },
            1000,
        );
        assert_eq!(
            (o, evicted, r.pending()),
            (Outcome::Held, Some(Eviction::Table), MAX_DATAGRAMS)
        );
        // The evicted one (ident 100, the oldest) starts again from nothing.
        assert_eq!(
            add_from(&mut r, [10, 0, 1, 0], 100, &data, 8, 8, 2000),
            Outcome::Held
        );
        // Everything older than the timeout goes.
        assert_eq!(r.expire(50 * MS), 0);
        assert_eq!(r.expire(200 * MS), MAX_DATAGRAMS);
        assert_eq!(r.pending(), 0);
    }

    /// One source sending endless first fragments churns its own datagrams: another source's
    /// datagram, in reassembly meanwhile, still completes. With the table's limit alone the
    /// flood evicts it (64 new datagrams after it).
    #[test]
    fn one_source_cannot_evict_another_sources_datagram() {
        let data: Vec<u8> = (0..2000u32).map(|i| i as u8).collect();
        let mut r = Reassembler::new(DEFAULT_TIMEOUT);
        let (victim, flood) = ([10, 0, 0, 9], [10, 0, 0, 66]);
        assert_eq!(
            add_from(&mut r, victim, 7, &data, 0, 1000, 0),
            Outcome::Held
        );
        // A first fragment of datagram `ident` from `src` in `vrf`, added at `now`.
        let first = |r: &mut Reassembler, src, vrf, ident, now| {
            let h = header(ident);
            let f = Fragment {
                key: Key {
                    src,
                    vrf,
                    ..key(ident)
                },
                offset: 0,
                more: true,
                header: &h,
                payload: &data[..8],
            };
            r.add(f, now)
        };
        let mut own = 0;
        for ident in 0..1000u16 {
            let (o, evicted) = first(&mut r, flood, 0, ident, 1 + u64::from(ident));
            assert_eq!(o, Outcome::Held);
            assert_ne!(evicted, Some(Eviction::Table), "datagram {ident}");
            own += usize::from(evicted == Some(Eviction::Source));
        }
        assert_eq!(own, 1000 - MAX_PER_SOURCE);
        assert_eq!(r.pending(), 1 + MAX_PER_SOURCE);
        // The same address in another VRF is another source.
        assert_eq!(first(&mut r, flood, 5, 1, 2000), (Outcome::Held, None));
        assert_eq!(
            add_from(&mut r, victim, 7, &data, 1000, 1000, 2000),
            Outcome::Complete
        );
        assert_eq!(&r.take_output()[20..], &data[..]);
    }
}
