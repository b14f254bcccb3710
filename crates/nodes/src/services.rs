//! What `ip4-session` reads: the services of every network (VIP, port and protocol to their
//! backends), which VRFs keep sessions at all, and the session table the workers share.
//!
//! The control thread builds a new [`Services`] on every change and publishes it; a worker
//! loads it once per frame. A VRF without services keeps no sessions: its packets never
//! visit `ip4-session`, and `ethernet-input` forwards them itself as before.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use session::{Maglev, Owner, Table};

/// Where a service listens: (VRF slot, IP protocol, VIP, port). The same VIP in two networks
/// is two services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VipKey {
    pub vrf: u32,
    pub proto: u8,
    pub vip: u32,
    pub port: u16,
}

/// A backend a service balances to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    /// The backend's id within its service, stable while it stays (sessions name it, and
    /// removing it kills exactly its sessions).
    pub id: u32,
    pub addr: u32,
    pub port: u16,
}

/// One service as the packet path sees it.
#[derive(Debug)]
pub struct Service {
    /// The service's id (sessions name it).
    pub id: u32,
    /// The backends new flows go to (the ready ones, else the serving terminating ones),
    /// chosen by [`Service::pick`]'s Maglev table; empty: new flows are dropped.
    pub backends: Vec<Backend>,
    pub maglev: Option<Maglev>,
    /// With ClientIP affinity: each client's backend (kept across publications).
    pub affinity: Option<Arc<Affinity>>,
    /// Where a flow reached through this entry goes once translated, when not the VRF it
    /// came in (a NodePort or external IP: from the underlay's table to the network's), and
    /// the source address it then gets (none: the client's own).
    pub external: Option<External>,
}

/// How an external flow (a NodePort, an external IP) is translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct External {
    /// The VRF slot of the service's network.
    pub vrf: u32,
    /// The source its backends see (`externalTrafficPolicy: Cluster`), or the client's.
    pub source: Option<u32>,
}

/// ClientIP session affinity: the backend each client's last new flow went to, and when.
/// Only new flows of a service with affinity read or write it (under its lock); established
/// flows never do.
#[derive(Debug)]
pub struct Affinity {
    timeout_ms: u32,
    clients: Mutex<HashMap<u32, (u32, u32)>>,
}

/// The most clients one service remembers; when full, expired ones are forgotten first,
/// and a client that finds no room is balanced as without affinity.
pub const AFFINITY_CLIENTS: usize = 65536;

impl Affinity {
    pub fn new(timeout_ms: u32) -> Affinity {
        Affinity {
            timeout_ms,
            clients: Mutex::default(),
        }
    }

    pub fn timeout_ms(&self) -> u32 {
        self.timeout_ms
    }

    /// The backend client `c` went to last, if that was within the timeout of `now`.
    pub fn get(&self, c: u32, now: u32) -> Option<u32> {
        let m = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let &(backend, at) = m.get(&c)?;
        (!session::idle_longer_than(now, at, self.timeout_ms)).then_some(backend)
    }

    /// Records that client `c`'s new flow went to `backend` at `now`.
    pub fn set(&self, c: u32, backend: u32, now: u32) {
        let mut m = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= AFFINITY_CLIENTS && !m.contains_key(&c) {
            let t = self.timeout_ms;
            m.retain(|_, &mut (_, at)| !session::idle_longer_than(now, at, t));
            if m.len() >= AFFINITY_CLIENTS {
                return;
            }
        }
        m.insert(c, (backend, now));
    }
}

impl Service {
    /// A service over `backends`, with a Maglev table sized for them.
    pub fn new(id: u32, backends: Vec<Backend>) -> Service {
        let ids: Vec<u64> = backends
            .iter()
            .map(|b| u64::from(b.addr) << 16 | u64::from(b.port))
            .collect();
        let maglev = (!ids.is_empty())
            .then(|| Maglev::new(&ids, Maglev::size_for(ids.len())).ok())
            .flatten();
        Service {
            id,
            backends,
            maglev,
            affinity: None,
            external: None,
        }
    }

    /// This service as external clients reach it (see [`External`]).
    pub fn with_external(mut self, x: Option<External>) -> Service {
        self.external = x;
        self
    }

    /// This service with ClientIP affinity kept in `a`.
    pub fn with_affinity(mut self, a: Option<Arc<Affinity>>) -> Service {
        self.affinity = a;
        self
    }

    /// The backend of a new flow from client `client` whose hash is `h` at `now`: the
    /// client's last backend while its affinity lasts and the backend is usable, else by
    /// Maglev (and remembered, with affinity).
    pub fn choose(&self, client: u32, h: u64, now: u32) -> Option<&Backend> {
        let Some(a) = &self.affinity else {
            return self.pick(h);
        };
        let sticky = a
            .get(client, now)
            .and_then(|id| self.backends.iter().find(|b| b.id == id));
        let b = sticky.or_else(|| self.pick(h))?;
        a.set(client, b.id, now);
        Some(b)
    }

    /// The backend of a new flow whose hash is `h`.
    #[inline]
    pub fn pick(&self, h: u64) -> Option<&Backend> {
        let m = self.maglev.as_ref()?;
        self.backends.get(m.pick(h))
    }
}

/// Every service of the node, published as a whole.
#[derive(Debug, Default)]
pub struct Services {
    pub vips: HashMap<VipKey, Arc<Service>, session::FixedState>,
    /// (VRF slot, VIP) of every service, whatever its port and protocol.
    pub addrs: HashSet<(u32, u32), session::FixedState>,
    /// Whether VRF slot `i` keeps sessions (it has a service).
    pub stateful: Vec<bool>,
}

impl Services {
    #[inline]
    pub fn stateful(&self, vrf: u32) -> bool {
        self.stateful.get(vrf as usize).copied().unwrap_or(false)
    }
}

/// The session table and what each worker's `ip4-session` takes from it: its [`Owner`]
/// (one per worker) and the clock every worker reads sessions' times in.
#[derive(Debug)]
pub struct Sessions {
    pub table: Arc<Table>,
    owners: Mutex<Vec<Owner>>,
    /// Each owner's counters as its worker last copied them (once a frame).
    stats: Mutex<Vec<Arc<OwnerStats>>>,
    /// Time zero of the sessions' millisecond clock.
    pub start: Instant,
}

impl Sessions {
    pub fn new(table: Arc<Table>, owners: Vec<Owner>) -> Sessions {
        Sessions {
            table,
            owners: Mutex::new(owners),
            stats: Mutex::default(),
            start: Instant::now(),
        }
    }

    /// A table of `max` sessions for `workers` workers, with the default timeouts.
    pub fn with_capacity(max: u32, workers: u32) -> Result<Sessions, session::ConfigError> {
        let (table, owners) = Table::new(session::Config {
            max_sessions: max,
            workers,
            timeouts: session::Timeouts::default(),
        })?;
        Ok(Sessions::new(table, owners))
    }

    /// The next worker's owner (each graph's `ip4-session` takes one when it is built), and
    /// where its worker copies the owner's counters.
    pub fn take_owner(&self) -> Option<(Owner, Arc<OwnerStats>)> {
        let mut o = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        let owner = (!o.is_empty()).then(|| o.remove(0))?;
        let stats = Arc::new(OwnerStats::default());
        let mut all = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        all.push(stats.clone());
        Some((owner, stats))
    }

    /// Gives an owner back (its graph is gone) for the next graph to take, with its
    /// sessions and counters.
    pub fn give_back(&self, owner: Owner, stats: Arc<OwnerStats>) {
        let mut all = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|s| !Arc::ptr_eq(s, &stats));
        let mut o = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        o.push(owner);
    }

    /// Every owner's counters, summed.
    pub fn counters(&self) -> session::Counters {
        let mut sum = session::Counters::default();
        for s in self.stats.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            sum.add(&s.load());
        }
        sum
    }

    /// The sessions' clock now: milliseconds since the table was made (wrapping).
    #[inline]
    pub fn now(&self) -> u32 {
        self.start.elapsed().as_millis() as u32
    }
}

/// One owner's [`session::Counters`], copied by its worker once a frame and read by the
/// control thread: relaxed atomics, no lock on the worker's side.
#[derive(Debug, Default)]
pub struct OwnerStats([AtomicU64; 8]);

impl OwnerStats {
    pub fn store(&self, c: &session::Counters) {
        let v = [
            c.created,
            c.refused_full,
            c.evicted_embryonic,
            c.expired,
            c.killed,
            c.insert_collisions,
            c.exists,
            c.reverse_in_use,
        ];
        for (a, v) in self.0.iter().zip(v) {
            a.store(v, Ordering::Relaxed);
        }
    }

    pub fn load(&self) -> session::Counters {
        let [
            created,
            refused_full,
            evicted_embryonic,
            expired,
            killed,
            insert_collisions,
            exists,
            reverse_in_use,
        ] = self.0.each_ref().map(|a| a.load(Ordering::Relaxed));
        session::Counters {
            created,
            refused_full,
            evicted_embryonic,
            expired,
            killed,
            insert_collisions,
            exists,
            reverse_in_use,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(affinity: Option<u32>) -> Service {
        let backends = (0..4)
            .map(|i| Backend {
                id: i,
                addr: 0x0a01_0010 + i,
                port: 8080,
            })
            .collect();
        Service::new(1, backends).with_affinity(affinity.map(|t| Arc::new(Affinity::new(t))))
    }

    /// With affinity a client keeps its backend whatever its flows' hashes, until its last
    /// new flow is older than the timeout; without, the hash decides.
    #[test]
    fn affinity_holds_a_client_until_it_times_out() {
        let s = service(Some(1000));
        let first = s.choose(7, 1, 0).unwrap().id;
        for h in 2..200u64 {
            assert_eq!(
                s.choose(7, h.wrapping_mul(0x9e37_79b9_7f4a_7c15), 500)
                    .unwrap()
                    .id,
                first
            );
        }
        // 1000 ms after the last (at 500): forgotten; another hash may pick another backend.
        let later: Vec<u32> = (0..64u64)
            .map(|h| {
                service(None)
                    .choose(7, h.wrapping_mul(0x9e37_79b9_7f4a_7c15), 0)
                    .unwrap()
                    .id
            })
            .collect();
        assert!(
            later.iter().any(|&b| b != later[0]),
            "hashes spread without affinity"
        );
        assert_eq!(s.affinity.as_ref().unwrap().get(7, 1501), None);
        assert_eq!(s.affinity.as_ref().unwrap().get(7, 1499), Some(first));
    }

    /// The client map is bounded: full of live clients, a new client is balanced without
    /// being remembered; expired ones make room.
    #[test]
    fn the_client_map_is_bounded() {
        let a = Affinity::new(1000);
        for c in 0..AFFINITY_CLIENTS as u32 {
            a.set(c, 1, 0);
        }
        a.set(u32::MAX, 2, 10);
        assert_eq!(a.get(u32::MAX, 10), None, "no room: not remembered");
        a.set(u32::MAX, 2, 5000);
        assert_eq!(a.get(u32::MAX, 5000), Some(2), "the expired made room");
        assert_eq!(a.clients.lock().unwrap().len(), 1);
    }
}
