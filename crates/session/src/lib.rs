//! Flow and session state for service load balancing (DNAT/SNAT) and stateful policy.
//!
//! `session` owns the table of sessions the workers share: for each session its two keys
//! (the flow as the client sent it, and its replies as they come back after translation),
//! the translation and its cached checksum deltas, the service and backend it was balanced
//! to, its cached policy verdict, and its protocol state and idle time. It also owns the
//! per-worker [`Owner`]s that create and free sessions, and Maglev ([`maglev`]) for choosing a
//! backend. It never touches packets (callers pass keys, TCP flags and a clock), never
//! allocates after [`Table::new`], and never takes a lock on the path of an established flow:
//! a lookup reads two seqlocked buckets and a seqlocked record and writes nothing; `observe`
//! stores only what changed; only creating and freeing a session lock the buckets involved.
//!
//! # Layout and memory
//!
//! | part | per session | what |
//! |---|---|---|
//! | hash buckets | 128 B | one two-line bucket (a sequence word, five 24-byte slots: key, value) per session; a session's two entries fill the table to 40% |
//! | record | 64 B | one line: seqlock/generation, key, translation (addresses, ports, VRF), checksum deltas, service, backend, interface, created, last seen, status |
//! | owner | 16 B | a free-ring slot, two eviction-list links and the list's interface |
//!
//! About 208 bytes a session: a million sessions in 199 MiB ([`Table::memory_bytes`]).
//!
//! A key hashes (folded multiplications under a per-table random seed, so that a remote sender
//! cannot aim at a bucket) to two candidate buckets; an entry goes in the emptier one and never
//! moves. A hash entry's value holds the session id, the direction and the generation of the
//! record; the record's seqlock word *is* its generation (even while live, odd while free or
//! being written), so a reader that raced with the session's freeing and the record's reuse
//! sees a mismatch and probes again instead of mixing two sessions.
//!
//! # Timeouts
//!
//! Idle timeouts by state, in milliseconds of the caller's wrapping clock ([`Timeouts`]):
//!
//! | state | default | why |
//! |---|---|---|
//! | TCP embryonic (handshake not complete) | 10 s | nothing is lost when it goes: the connection is not up, and each retransmitted SYN refreshes it (gaps of 1, 2, 4, 8 s); short, so SYN floods do not hold the table (cnat uses 30 s for everything but established TCP) |
//! | TCP established | 2 h 4 min | RFC 5382 REQ-5: a NAT must keep an idle established TCP connection at least 2 h 4 min, so that the default 2 h keepalive finds it alive (Linux keeps 5 days, kube-proxy sets 24 h, cnat 1 h) |
//! | TCP closing (FIN either way, or RST) | 30 s | long enough for retransmitted FINs and the last ACKs; Linux keeps FIN_WAIT 120 s and CLOSE 10 s, and a half-closed connection that still carries data keeps refreshing it |
//! | UDP without reply | 30 s | Linux `nf_conntrack_udp_timeout` |
//! | UDP replied | 120 s | Linux `nf_conntrack_udp_timeout_stream` |
//! | ICMP echo | 30 s | Linux `nf_conntrack_icmp_timeout` |
//!
//! Other protocols are tracked like UDP. A forward SYN (without ACK) on a closing session
//! makes it embryonic again: a new connection reusing the four-tuple keeps its backend.
//!
//! # Eviction
//!
//! Memory is fixed at creation. A new session needs a free id of its owner and a free slot in
//! each key's two buckets:
//!
//! - with no free id, the owner evicts the **oldest session not established of the interface
//!   holding the most such sessions** (a list per interface in creation order; established
//!   ones are dropped from a list when they reach its head, so finding the victim is O(1)
//!   amortised in sessions and linear in the interfaces with unestablished sessions): a
//!   flooding pod evicts its own flows, and another pod's new flow takes the flooder's place;
//! - with a key's two buckets full, it evicts, from the entries in those buckets, its own
//!   oldest session that is not established (evicting one elsewhere would free no slot here);
//! - an established session is never evicted: if there is nothing to evict the
//!   creation is refused and counted (`refused_full`, `insert_collisions`).
//!
//! So a flood of new flows (a SYN flood, a UDP scan) can only displace other flows that no one
//! answered; established flows keep their state until they are idle, closed or killed.
//!
//! # Threads
//!
//! One [`Owner`] per worker creates, frees and sweeps the sessions of its id range, with no
//! contention with other owners. Any worker may look up and [`Table::observe`] any session (a
//! reply often arrives on another worker). The control thread kills sessions
//! ([`Table::kill`], [`Table::kill_backend`]): they then look up as [`Lookup::Killed`] until
//! their owner's [`Owner::sweep`] frees them.

#![forbid(unsafe_code)]

pub mod checksum;
mod evict;
pub mod fixed_hash;
pub mod key;
pub mod maglev;
mod owner;
mod record;
mod table;
mod timeouts;

pub use checksum::{Delta, Deltas};
pub use fixed_hash::{FixedHasher, FixedState};
pub use key::{Fields, Key, PROTO_ICMP, PROTO_SCTP, PROTO_TCP, PROTO_UDP};
pub use maglev::{Maglev, MaglevError};
pub use owner::{Counters, CreateError, Owner, Swept};
pub use record::{
    Dir, EPOCH_BITS, Established, Forwarding, LAST_SEEN_GRAIN, MAX_BACKEND_ID, NONE, NewSession,
    Session, Translation, Verdict, idle_longer_than, tcp_flags,
};
pub use table::{
    Config, ConfigError, Handle, Hit, Lookup, MAX_SESSIONS, Records, SLOTS, Seen, Table,
};
pub use timeouts::{State, Timeouts};
