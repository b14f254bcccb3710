//! Creations, removals, kills and sweeps against a `HashMap` model of the table's key space.

use std::collections::HashMap;

use proptest::prelude::*;
use session::{
    Config, CreateError, Dir, Handle, Key, Lookup, NewSession, Owner, PROTO_TCP, PROTO_UDP, Table,
    Timeouts, Translation,
};

#[derive(Debug, Clone)]
enum Op {
    /// Flow `f` source-NATed to port `p` (few ports: reverse keys collide often) by owner `w`.
    Create {
        f: u8,
        p: u8,
        w: bool,
    },
    Remove {
        f: u8,
    },
    Kill {
        f: u8,
    },
    Sweep {
        w: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..24u8, 0..6u8, any::<bool>()).prop_map(|(f, p, w)| Op::Create { f, p, w }),
        2 => (0..24u8).prop_map(|f| Op::Remove { f }),
        1 => (0..24u8).prop_map(|f| Op::Kill { f }),
        1 => any::<bool>().prop_map(|w| Op::Sweep { w }),
    ]
}

const SNAT: u32 = 0xc0a8_0001;

/// Flow `f`: a few clients to two servers, TCP and UDP, in two VRFs. Some flows' forward keys
/// are other flows' reverse keys, which the table must refuse like any taken key.
fn session(f: u8, p: u8) -> NewSession {
    let (vrf, proto) = (
        u16::from(f % 2),
        if f.is_multiple_of(3) {
            PROTO_UDP
        } else {
            PROTO_TCP
        },
    );
    let key = if f % 5 == 4 {
        // The server's side of a translated flow: another flow's reply.
        Key::new(vrf, proto, 0x0a00_0063, SNAT, 80, 7000 + u16::from(f % 6))
    } else {
        Key::new(
            vrf,
            proto,
            0x0a00_0010 + u32::from(f % 4),
            0x0a00_0063,
            40_000 + u16::from(f),
            80,
        )
    };
    NewSession {
        xlate: Translation {
            src: SNAT,
            sport: 7000 + u16::from(p),
            ..Translation::identity(&key)
        },
        service: u32::from(f),
        backend: u32::from(p),
        ..NewSession::plain(key)
    }
}

#[derive(Debug)]
struct Live {
    owner: usize,
    handle: Handle,
    new: NewSession,
    killed: bool,
}

struct Model {
    live: HashMap<Key, Live>,
    /// Every key in the table: (the session's forward key, the direction).
    keys: HashMap<Key, (Key, Dir)>,
}

impl Model {
    fn remove(&mut self, fwd: &Key) {
        let l = self.live.remove(fwd).unwrap();
        self.keys.remove(&l.new.key);
        self.keys.remove(&l.new.reverse_key());
    }

    /// Every key the model knows, and the keys of every flow, looked up in the table.
    fn check(&self, t: &Table) -> Result<(), TestCaseError> {
        let probes = (0..24u8).flat_map(|f| {
            (0..6).flat_map(move |p| [session(f, p).key, session(f, p).reverse_key()])
        });
        for k in probes {
            match (self.keys.get(&k), t.lookup(&k)) {
                (None, Lookup::Miss) => {}
                (Some((fwd, dir)), Lookup::Live(h) | Lookup::Killed(h)) => {
                    let l = &self.live[fwd];
                    prop_assert_eq!(h.dir, *dir);
                    prop_assert_eq!(h.handle, l.handle);
                    prop_assert_eq!(h.session.key, l.new.key);
                    prop_assert_eq!(h.session.xlate, l.new.xlate);
                    prop_assert_eq!(h.session.killed(), l.killed);
                    prop_assert_eq!(
                        (h.session.service, h.session.backend),
                        (l.new.service, l.new.backend)
                    );
                }
                (want, got) => prop_assert!(false, "{k:?}: model {want:?}, table {got:?}"),
            }
        }
        prop_assert_eq!(t.count_live(), self.live.len());
        Ok(())
    }
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let config = Config {
        max_sessions: 64,
        workers: 2,
        timeouts: Timeouts::default(),
    };
    let (t, mut owners): (_, Vec<Owner>) = Table::new(config).unwrap();
    let mut m = Model {
        live: HashMap::new(),
        keys: HashMap::new(),
    };
    for op in ops {
        match *op {
            Op::Create { f, p, w } => {
                let s = session(f, p);
                let got = owners[usize::from(w)].create(&s, 0);
                let want = if s.key == s.reverse_key() {
                    Err(CreateError::Looped)
                } else if m.keys.contains_key(&s.key) {
                    Err(CreateError::Exists)
                } else if m.keys.contains_key(&s.reverse_key()) {
                    Err(CreateError::ReverseInUse)
                } else {
                    Ok(())
                };
                prop_assert_eq!(got.map(|_| ()), want, "{:?}", op);
                if let Ok(handle) = got {
                    m.keys.insert(s.key, (s.key, Dir::Forward));
                    m.keys.insert(s.reverse_key(), (s.key, Dir::Reverse));
                    m.live.insert(
                        s.key,
                        Live {
                            owner: usize::from(w),
                            handle,
                            new: s,
                            killed: false,
                        },
                    );
                }
            }
            Op::Remove { f } => {
                let k = session(f, 0).key;
                if let Some(l) = m.live.get(&k) {
                    prop_assert!(owners[l.owner].remove(l.handle));
                    m.remove(&k);
                }
            }
            Op::Kill { f } => {
                let k = session(f, 0).key;
                let n = t.kill(|s| s.key == k);
                let l = m.live.get_mut(&k);
                prop_assert_eq!(n, usize::from(l.as_ref().is_some_and(|l| !l.killed)));
                if let Some(l) = l {
                    l.killed = true;
                }
            }
            Op::Sweep { w } => {
                let swept = owners[usize::from(w)].sweep(0, 64);
                let dead: Vec<Key> = m
                    .live
                    .iter()
                    .filter(|(_, l)| l.killed && l.owner == usize::from(w))
                    .map(|(k, _)| *k)
                    .collect();
                prop_assert_eq!(swept.killed as usize, dead.len());
                prop_assert_eq!(swept.expired, 0);
                for k in dead {
                    m.remove(&k);
                }
            }
        }
        m.check(&t)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn the_table_agrees_with_a_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops)?;
    }
}
