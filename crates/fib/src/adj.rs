//! Adjacencies (what to do once a route matched) and the neighbour table (ARP results).
//!
//! A route's next-hop value indexes the adjacency table. Workers read the table through
//! [`AdjReader::load`], one atomic load per frame, never a lock; the control thread edits a
//! private copy and publishes it whole (copy-on-write: adjacencies number in the thousands,
//! and change at control-plane speed; a batch of changes between [`AdjTable::hold`] and
//! [`AdjTable::release`] is published once). Learning a neighbour turns every `Glean`
//! adjacency waiting for it into a `Rewrite` (found through an index, not a scan).

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::{ArcSwap, Cache, Guard};

/// [`AdjReader::cache`]: the published table, kept until a newer one is.
pub type AdjCache = Cache<Arc<ArcSwap<Vec<Adjacency>>>, Arc<Vec<Adjacency>>>;

use crate::Ipv4Addr;

/// Index of an adjacency: the value an LPM route carries.
pub type AdjIndex = u32;

/// What happens to a packet whose route resolved here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adjacency {
    /// Send on `tx_if` with this Ethernet destination and source, if the IPv4 packet is at
    /// most `mtu` bytes (the interface's MTU, `u16::MAX` until one is set).
    Rewrite {
        tx_if: u32,
        next_hop: Ipv4Addr,
        dst: [u8; 6],
        src: [u8; 6],
        mtu: u16,
    },
    /// The next hop's MAC is not known yet: ask (ARP) on `tx_if`, drop or hold the packet.
    Glean { tx_if: u32, next_hop: Ipv4Addr },
    /// Addressed to one of our own addresses.
    Local,
    /// Discard (a blackhole route, or an adjacency that was deleted).
    Drop,
}

impl Adjacency {
    /// The (interface, next hop) a rewrite or glean adjacency leads to.
    pub fn target(&self) -> Option<(u32, Ipv4Addr)> {
        match *self {
            Adjacency::Rewrite {
                tx_if, next_hop, ..
            }
            | Adjacency::Glean { tx_if, next_hop } => Some((tx_if, next_hop)),
            _ => None,
        }
    }
}

/// A worker's handle on the published table.
#[derive(Debug, Clone)]
pub struct AdjReader {
    cur: Arc<ArcSwap<Vec<Adjacency>>>,
}

impl AdjReader {
    /// The current table, valid for as long as the guard is held (one frame).
    #[inline]
    pub fn load(&self) -> Guard<Arc<Vec<Adjacency>>> {
        self.cur.load()
    }

    /// A handle of one's own that keeps the current table and takes a newer one only when
    /// the writer published one (its `load`: one load and a comparison).
    pub fn cache(&self) -> AdjCache {
        Cache::new(Arc::clone(&self.cur))
    }
}

/// The control thread's side: adjacencies, interface MACs and learned neighbours.
#[derive(Debug)]
pub struct AdjTable {
    cur: Arc<ArcSwap<Vec<Adjacency>>>,
    adjs: Vec<Adjacency>,
    free: Vec<AdjIndex>,
    neighbours: HashMap<(u32, Ipv4Addr), [u8; 6]>,
    if_macs: HashMap<u32, [u8; 6]>,
    if_mtus: HashMap<u32, u16>,
    /// The adjacencies towards each (interface, next hop): what learning or forgetting a
    /// neighbour re-resolves, without a scan of the whole table.
    by_target: HashMap<(u32, Ipv4Addr), Vec<AdjIndex>>,
    /// While held ([`AdjTable::hold`]), changes are published once, at [`AdjTable::release`].
    held: bool,
    dirty: bool,
}

impl Default for AdjTable {
    fn default() -> Self {
        Self::new()
    }
}

impl AdjTable {
    /// Index 0 is always `Drop`, index 1 always `Local`.
    pub const DROP: AdjIndex = 0;
    pub const LOCAL: AdjIndex = 1;

    pub fn new() -> AdjTable {
        let adjs = vec![Adjacency::Drop, Adjacency::Local];
        AdjTable {
            cur: Arc::new(ArcSwap::from_pointee(adjs.clone())),
            adjs,
            free: Vec::new(),
            neighbours: HashMap::new(),
            if_macs: HashMap::new(),
            if_mtus: HashMap::new(),
            by_target: HashMap::new(),
            held: false,
            dirty: false,
        }
    }

    /// Holds back publishing re-resolved adjacencies: a batch of them (a tick's learned
    /// neighbours) costs one copy of the table, not one each. A new adjacency is published at
    /// once all the same (a route is about to point at it).
    pub fn hold(&mut self) {
        self.held = true;
    }

    /// Ends [`AdjTable::hold`], publishing once if anything changed.
    pub fn release(&mut self) {
        self.held = false;
        if std::mem::take(&mut self.dirty) {
            self.publish();
        }
    }

    pub fn reader(&self) -> AdjReader {
        AdjReader {
            cur: self.cur.clone(),
        }
    }

    fn publish(&mut self) {
        if self.held {
            self.dirty = true;
            return;
        }
        self.publish_now();
    }

    /// Publishes the table as it is, held changes included.
    fn publish_now(&mut self) {
        self.dirty = false;
        self.cur.store(Arc::new(self.adjs.clone()));
    }

    pub fn get(&self, i: AdjIndex) -> Option<Adjacency> {
        self.adjs.get(i as usize).copied()
    }

    /// Records interface `ifindex`'s own MAC (the source of every rewrite on it).
    pub fn set_interface_mac(&mut self, ifindex: u32, mac: [u8; 6]) {
        self.if_macs.insert(ifindex, mac);
        self.refresh(|i, _| i == ifindex);
    }

    /// Records interface `ifindex`'s MTU (the largest IPv4 packet a rewrite on it lets out).
    pub fn set_interface_mtu(&mut self, ifindex: u32, mtu: u16) {
        self.if_mtus.insert(ifindex, mtu);
        self.refresh(|i, _| i == ifindex);
    }

    /// Forgets what was recorded of interface `ifindex` (its MAC and MTU).
    pub fn forget_interface(&mut self, ifindex: u32) {
        self.if_macs.remove(&ifindex);
        self.if_mtus.remove(&ifindex);
        self.refresh(|i, _| i == ifindex);
    }

    /// The adjacency for `next_hop` via `tx_if`: a rewrite if the neighbour is known, else a
    /// glean that becomes one when it is learned.
    pub fn add_next_hop(&mut self, tx_if: u32, next_hop: Ipv4Addr) -> AdjIndex {
        let a = self.resolve(tx_if, next_hop);
        let i = match self.free.pop() {
            Some(i) => {
                self.adjs[i as usize] = a;
                i
            }
            None => {
                self.adjs.push(a);
                (self.adjs.len() - 1) as AdjIndex
            }
        };
        self.by_target.entry((tx_if, next_hop)).or_default().push(i);
        // Published at once, held or not: the caller is about to point a route at `i`, and
        // a worker that follows the route must find it (a held table would give it the
        // slot's old value until the batch ends).
        self.publish_now();
        i
    }

    /// Deletes an adjacency (its slot becomes `Drop`, then reusable). The caller removes the
    /// routes that pointed at it first.
    pub fn remove(&mut self, i: AdjIndex) {
        if i > Self::LOCAL
            && (i as usize) < self.adjs.len()
            && self.adjs[i as usize] != Adjacency::Drop
        {
            if let Some(t) = self.adjs[i as usize].target()
                && let Some(v) = self.by_target.get_mut(&t)
            {
                v.retain(|&x| x != i);
                if v.is_empty() {
                    self.by_target.remove(&t);
                }
            }
            self.adjs[i as usize] = Adjacency::Drop;
            self.free.push(i);
            self.publish();
        }
    }

    /// ARP learned (or refreshed) `ip -> mac` on `ifindex`: every adjacency towards it is
    /// re-resolved. Returns how many changed.
    pub fn learn(&mut self, ifindex: u32, ip: Ipv4Addr, mac: [u8; 6]) -> usize {
        if self.neighbours.insert((ifindex, ip), mac) == Some(mac) {
            return 0;
        }
        self.refresh_target(ifindex, ip)
    }

    /// Forgets a neighbour: its rewrites go back to glean.
    pub fn forget(&mut self, ifindex: u32, ip: Ipv4Addr) -> usize {
        if self.neighbours.remove(&(ifindex, ip)).is_none() {
            return 0;
        }
        self.refresh_target(ifindex, ip)
    }

    /// The MAC known for neighbour `ip` on `ifindex`.
    pub fn mac_of(&self, ifindex: u32, ip: Ipv4Addr) -> Option<[u8; 6]> {
        self.neighbours.get(&(ifindex, ip)).copied()
    }

    /// Every known neighbour (interface, address, MAC), in no order.
    pub fn each_neighbour(&self) -> impl Iterator<Item = (u32, Ipv4Addr, [u8; 6])> + '_ {
        self.neighbours.iter().map(|(&(i, a), &m)| (i, a, m))
    }

    /// How many neighbours are known.
    pub fn neighbour_count(&self) -> usize {
        self.neighbours.len()
    }

    /// Re-resolves the adjacencies towards (`tx_if`, `nh`) only; publishes once.
    fn refresh_target(&mut self, tx_if: u32, nh: Ipv4Addr) -> usize {
        let mut changed = 0;
        let idx = self
            .by_target
            .get(&(tx_if, nh))
            .cloned()
            .unwrap_or_default();
        for i in idx {
            let new = self.resolve(tx_if, nh);
            if new != self.adjs[i as usize] {
                self.adjs[i as usize] = new;
                changed += 1;
            }
        }
        if changed > 0 {
            self.publish();
        }
        changed
    }

    /// `show ip neighbors`: (interface, address, MAC), sorted.
    pub fn neighbours(&self) -> Vec<(u32, Ipv4Addr, [u8; 6])> {
        let mut v: Vec<_> = self.each_neighbour().collect();
        v.sort();
        v
    }

    fn resolve(&self, tx_if: u32, next_hop: Ipv4Addr) -> Adjacency {
        match (
            self.neighbours.get(&(tx_if, next_hop)),
            self.if_macs.get(&tx_if),
        ) {
            (Some(&dst), Some(&src)) => Adjacency::Rewrite {
                tx_if,
                next_hop,
                dst,
                src,
                mtu: self.if_mtus.get(&tx_if).copied().unwrap_or(u16::MAX),
            },
            _ => Adjacency::Glean { tx_if, next_hop },
        }
    }

    /// Re-resolves every adjacency whose (interface, next hop) `pick` selects; publishes once.
    fn refresh(&mut self, pick: impl Fn(u32, Ipv4Addr) -> bool) -> usize {
        let mut changed = 0;
        for i in 0..self.adjs.len() {
            let Some((tx_if, nh)) = self.adjs[i].target() else {
                continue;
            };
            if !pick(tx_if, nh) {
                continue;
            }
            let new = self.resolve(tx_if, nh);
            if new != self.adjs[i] {
                self.adjs[i] = new;
                changed += 1;
            }
        }
        if changed > 0 {
            self.publish();
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IF_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const NB_MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];

    #[test]
    fn glean_becomes_rewrite_when_the_neighbour_is_learned() {
        let mut t = AdjTable::new();
        let r = t.reader();
        t.set_interface_mac(3, IF_MAC);
        let nh = Ipv4Addr::new(10, 0, 0, 9);
        let a = t.add_next_hop(3, nh);
        let b = t.add_next_hop(3, nh); // a second route's adjacency to the same neighbour
        let snapshot = r.load();
        assert_eq!(
            snapshot[a as usize],
            Adjacency::Glean {
                tx_if: 3,
                next_hop: nh
            }
        );
        assert_eq!(t.learn(3, nh, NB_MAC), 2);
        assert_eq!(
            t.learn(3, nh, NB_MAC),
            0,
            "refresh with the same MAC changes nothing"
        );
        // A worker's snapshot taken before stays consistent; a new load sees the rewrite.
        assert_eq!(
            snapshot[a as usize],
            Adjacency::Glean {
                tx_if: 3,
                next_hop: nh
            }
        );
        let now = r.load();
        let want = Adjacency::Rewrite {
            tx_if: 3,
            next_hop: nh,
            dst: NB_MAC,
            src: IF_MAC,
            mtu: u16::MAX,
        };
        assert_eq!((now[a as usize], now[b as usize]), (want, want));
        assert_eq!(t.neighbours(), vec![(3, nh, NB_MAC)]);
        // Same address on another interface is another neighbour.
        assert_eq!(t.learn(4, nh, NB_MAC), 0);
        assert_eq!(t.forget(3, nh), 2);
        assert_eq!(
            r.load()[a as usize],
            Adjacency::Glean {
                tx_if: 3,
                next_hop: nh
            }
        );
    }

    #[test]
    fn removed_slots_are_reused_and_fixed_slots_stay() {
        let mut t = AdjTable::new();
        let a = t.add_next_hop(1, Ipv4Addr::new(192, 0, 2, 1));
        t.remove(a);
        t.remove(AdjTable::DROP);
        t.remove(AdjTable::LOCAL);
        assert_eq!(t.get(AdjTable::LOCAL), Some(Adjacency::Local));
        assert_eq!(t.get(a), Some(Adjacency::Drop));
        assert_eq!(t.add_next_hop(1, Ipv4Addr::new(192, 0, 2, 2)), a);
        // An interface MAC that arrives after the neighbour still completes the rewrite.
        t.learn(1, Ipv4Addr::new(192, 0, 2, 2), NB_MAC);
        assert!(matches!(t.get(a), Some(Adjacency::Glean { .. })));
        t.set_interface_mac(1, IF_MAC);
        assert!(matches!(
            t.get(a),
            Some(Adjacency::Rewrite {
                dst: NB_MAC,
                src: IF_MAC,
                mtu: u16::MAX,
                ..
            })
        ));
        t.set_interface_mtu(1, 1450);
        assert!(matches!(
            t.get(a),
            Some(Adjacency::Rewrite { mtu: 1450, .. })
        ));
    }

    /// Held changes reach readers once, at release; an index finds a neighbour's
    /// adjacencies, and a removed one leaves it.
    #[test]
    fn held_changes_publish_once_and_learning_uses_the_index() {
        let mut t = AdjTable::new();
        let r = t.reader();
        t.set_interface_mac(1, IF_MAC);
        t.hold();
        let nh = Ipv4Addr::new(10, 0, 0, 9);
        let a = t.add_next_hop(1, nh);
        let b = t.add_next_hop(1, nh);
        let before = r.load();
        assert!(
            matches!(before[b as usize], Adjacency::Glean { .. }),
            "new ones at once"
        );
        assert_eq!(t.learn(1, nh, NB_MAC), 2);
        assert!(
            Arc::ptr_eq(&before, &r.load()),
            "re-resolved ones wait while held"
        );
        t.release();
        let now = r.load();
        assert!(matches!(now[a as usize], Adjacency::Rewrite { .. }));
        assert!(matches!(now[b as usize], Adjacency::Rewrite { .. }));
        t.remove(a);
        assert_eq!(t.forget(1, nh), 1, "only the adjacency still there");
        assert_eq!(t.neighbour_count(), 0);
    }
}
