//! Network policy on the packet path: the compiled policies of every interface, how
//! `ip4-session` judges a flow with them, and where it reports the flows it denies.
//!
//! A flow is judged once, when it starts, by the policies of both ends on this node: the
//! egress policies of the interface it came in on (its peer the destination after any
//! service translation, as Kubernetes evaluates policy on the endpoint) and the ingress
//! policies of the interface the FIB sends it out of (its peer the source). The verdict is
//! kept in the flow's session with the epoch of the policies it was made under; when the
//! control thread publishes new policies (a policy, an address set or an interface changed)
//! the epoch moves on and every session is judged again at its next packet, so a change
//! takes effect on established flows too.

use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use fib::LpmReader;
use fib::adj::Adjacency;
use policy::{Compiled, Direction, Verdict};

/// Every interface's compiled policies, published as a whole.
#[derive(Debug)]
pub struct Policies {
    /// Indexed by interface index; `None`: no policy applies to it.
    pub by_if: Vec<Option<Arc<Compiled>>>,
    /// The epoch verdicts made under these policies carry (never 0, which a session's
    /// verdict holds before any judgement).
    pub epoch: u32,
}

impl Default for Policies {
    fn default() -> Policies {
        Policies {
            by_if: Vec::new(),
            epoch: 1,
        }
    }
}

impl Policies {
    #[inline]
    pub fn of(&self, ifx: u32) -> Option<&Compiled> {
        self.by_if.get(ifx as usize)?.as_deref()
    }
}

/// A flow a policy denied, as reported to the control thread (which logs it, rate-limited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denied {
    /// The interface whose policy denied it, and in which direction.
    pub ifindex: u32,
    pub ingress: bool,
    pub proto: u8,
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    /// The flow was established: a policy change denied it.
    pub established: bool,
}

/// Where workers report denied flows: a bounded channel to the control thread; full, the
/// report is dropped (and counted by the node).
#[derive(Debug, Clone, Default)]
pub struct DenySink(Option<SyncSender<Denied>>);

impl DenySink {
    pub fn new(tx: SyncSender<Denied>) -> DenySink {
        DenySink(Some(tx))
    }

    /// Reports `d`; false if it could not be queued.
    pub(crate) fn report(&self, d: Denied) -> bool {
        self.0.as_ref().is_some_and(|tx| tx.try_send(d).is_ok())
    }
}

/// A flow as it is judged: where it came in, in which VRF, and its addresses and ports
/// after any service translation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judged {
    pub rx: u32,
    pub vrf: u32,
    pub proto: u8,
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
}

/// The tables a judgement reads.
pub(crate) struct Judge<'a> {
    pub policies: &'a Policies,
    pub vrfs: &'a [LpmReader],
    pub adjs: &'a [Adjacency],
}

impl Judge<'_> {
    /// The verdict on flow `f`, and if it is a denial, the interface and direction that
    /// denied it; `None` when no policy concerns either end.
    pub(crate) fn verdict(&self, f: &Judged) -> Option<(session::Verdict, Option<(u32, bool)>)> {
        let egress = self
            .policies
            .of(f.rx)
            .map(|c| c.evaluate(Direction::Egress, f.dst, f.proto, f.dport));
        let tx = self.tx_of(f.vrf, f.dst);
        let ingress = tx.and_then(|t| {
            let c = self.policies.of(t)?;
            Some(c.evaluate(Direction::Ingress, f.src, f.proto, f.dport))
        });
        if egress.is_none() && ingress.is_none() {
            return None;
        }
        if egress == Some(Verdict::Denied) {
            return Some((session::Verdict::Deny, Some((f.rx, false))));
        }
        if ingress == Some(Verdict::Denied) {
            return Some((session::Verdict::Deny, tx.map(|t| (t, true))));
        }
        Some((session::Verdict::Allow, None))
    }

    /// The interface the FIB sends `dst` out of in VRF `vrf`, if it is a neighbour's.
    fn tx_of(&self, vrf: u32, dst: u32) -> Option<u32> {
        let adj = self.vrfs.get(vrf as usize)?.lookup(dst.into())?;
        match self.adjs.get(adj as usize)? {
            Adjacency::Rewrite { tx_if, .. } | Adjacency::Glean { tx_if, .. } => Some(*tx_if),
            _ => None,
        }
    }
}
