//! An owner's eviction order: its sessions that are not established yet, one list per
//! interface they came in on, each in creation order.
//!
//! When the owner must make room, the interface holding the most such sessions gives up its
//! oldest. So a pod that floods new flows only ever evicts its own, and another pod's new
//! flow, which finds the table full of the flood, takes the flooder's oldest place: the
//! flood cannot starve others of room, whatever its rate. Sessions that became established
//! stay on their list until they reach its head, where they are dropped (each once: O(1)
//! amortised); a list's count includes them until then.

use std::collections::HashMap;

use crate::FixedState;

/// End of a list.
const NIL: u32 = u32::MAX;
/// Not on any list.
const OFF: u32 = u32::MAX - 1;

/// Bytes kept per session id: two links and the list it is on.
pub(crate) const BYTES_PER_SESSION: usize = 3 * size_of::<u32>();

#[derive(Debug, Clone, Copy)]
struct Ends {
    head: u32,
    tail: u32,
    count: u32,
}

#[derive(Debug)]
pub(crate) struct Lists {
    prev: Box<[u32]>,
    next: Box<[u32]>,
    /// The interface whose list id `i` is on, or `OFF`.
    on: Box<[u32]>,
    lists: HashMap<u32, Ends, FixedState>,
}

impl Lists {
    pub(crate) fn new(len: u32) -> Lists {
        Lists {
            prev: vec![NIL; len as usize].into(),
            next: vec![NIL; len as usize].into(),
            on: vec![OFF; len as usize].into(),
            // Room for the interfaces of a busy node without growing on the packet path.
            lists: HashMap::with_capacity_and_hasher(256, FixedState::default()),
        }
    }

    /// Puts `i` at the end of interface `ifx`'s list.
    pub(crate) fn push_back(&mut self, i: u32, ifx: u32) {
        let iu = i as usize;
        debug_assert_eq!(self.on[iu], OFF);
        let e = self.lists.entry(ifx).or_insert(Ends {
            head: NIL,
            tail: NIL,
            count: 0,
        });
        self.prev[iu] = e.tail;
        self.next[iu] = NIL;
        match e.tail {
            NIL => e.head = i,
            t => self.next[t as usize] = i,
        }
        e.tail = i;
        e.count += 1;
        self.on[iu] = ifx;
    }

    /// Takes `i` off its list, if it is on one.
    pub(crate) fn unlink(&mut self, i: u32) {
        let iu = i as usize;
        let ifx = self.on[iu];
        if ifx == OFF {
            return;
        }
        let (p, n) = (self.prev[iu], self.next[iu]);
        if let Some(e) = self.lists.get_mut(&ifx) {
            match p {
                NIL => e.head = n,
                p => self.next[p as usize] = n,
            }
            match n {
                NIL => e.tail = p,
                n => self.prev[n as usize] = p,
            }
            e.count -= 1;
            if e.count == 0 {
                self.lists.remove(&ifx);
            }
        }
        self.on[iu] = OFF;
        self.prev[iu] = NIL;
        self.next[iu] = NIL;
    }

    /// The session to evict: the oldest not established (`established(i)` false) of the
    /// interface with the most on its list; established ones met at heads are dropped.
    pub(crate) fn victim(&mut self, established: impl Fn(u32) -> bool) -> Option<u32> {
        loop {
            let head = self.lists.values().max_by_key(|e| e.count)?.head;
            if !established(head) {
                return Some(head);
            }
            self.unlink(head);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interface_with_the_most_gives_up_its_oldest() {
        let mut l = Lists::new(16);
        for i in 0..10 {
            l.push_back(i, 7); // a flood from interface 7
        }
        l.push_back(10, 1);
        l.push_back(11, 1);
        assert_eq!(l.victim(|_| false), Some(0));
        l.unlink(0);
        // 1 to 3 got established meanwhile: dropped from the head as they are met.
        assert_eq!(l.victim(|i| i < 4), Some(4));
        assert_eq!(l.lists[&7].count, 6);
        for i in 4..10 {
            l.unlink(i);
        }
        // Interface 7's list is gone; interface 1 is the only one left.
        assert!(!l.lists.contains_key(&7));
        assert_eq!(l.victim(|_| false), Some(10));
        l.unlink(10);
        l.unlink(11);
        assert_eq!(l.victim(|_| false), None);
        assert!(l.lists.is_empty());
    }
}
