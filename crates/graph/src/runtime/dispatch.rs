//! The dispatch loop, the hottest code in veclane: every input node polled, then every
//! pending frame run in node order until the graph is empty, and the buffers each node
//! emitted moved to the pending frames of their next nodes.

use buffer::Pool;

use super::Runtime;
use crate::{BUFFER_TRACED, CONSUMED, Env, FRAME_SIZE, IDLE_POLL_EVERY, NodeIndex, Point, clock};

impl Runtime {
    /// One pass: poll every input node, then run internal nodes until nothing is pending.
    /// Returns the buffers the input nodes produced.
    pub fn dispatch(&mut self, pool: &mut Pool) -> usize {
        let mut produced = 0;
        // One clock read per node call, as VPP does: a node is charged from the end of the
        // previous call (its frame's enqueue and trace marking included) to its own end.
        let mut t = clock::stamp();
        let start = t;
        for k in 0..self.inputs.len() {
            if self.idle_skip[k] > 0 {
                self.idle_skip[k] -= 1;
                continue;
            }
            let i = usize::from(self.inputs[k]);
            let mut out = std::mem::take(&mut self.buf_scratch);
            let mut next = std::mem::take(&mut self.next_scratch);
            out.clear();
            next.clear();
            {
                let s = &mut self.slots[i];
                let env = Env {
                    pool,
                    errors: &mut s.errors,
                    trace: &mut self.trace,
                    capture: &mut self.capture,
                    node: i as NodeIndex,
                    extra: &mut self.extra,
                    ready: &self.ready,
                    nexts: &s.nexts,
                };
                s.node.poll(env, FRAME_SIZE, &mut out, &mut next);
            }
            let n = out.len().min(next.len());
            let s = &mut self.slots[i];
            s.stats.calls += 1;
            s.stats.vectors += n as u64;
            let now = clock::stamp();
            s.stats.clocks += now.wrapping_sub(t);
            t = now;
            if n == 0 && s.node.idle() {
                self.idle_skip[k] = IDLE_POLL_EVERY - 1;
            }
            if n > 0 {
                if self.capture.wants(Point::Rx) {
                    for &b in &out[..n] {
                        let rx_if = pool.meta(b).rx_if;
                        self.capture.record(pool, Point::Rx, rx_if, b);
                    }
                }
                if self.trace_quota[i] > 0 {
                    for &b in &out[..n] {
                        if self.trace_quota[i] == 0 {
                            break;
                        }
                        pool.meta_mut(b).flags |= BUFFER_TRACED;
                        self.trace.push_start(i as NodeIndex, b);
                        self.trace_quota[i] -= 1;
                    }
                }
                self.enqueue(i, &out[..n], &next[..n], pool);
                produced += n;
            }
            self.enqueue_extra(i, pool);
            self.buf_scratch = out;
            self.next_scratch = next;
        }
        // Run pending frames in node order until the graph is empty.
        while let Some(i) = self.next_ready() {
            let mut frame = std::mem::take(&mut self.buf_scratch);
            frame.clear();
            if self.slots[i].pending.len() <= FRAME_SIZE {
                // The whole backlog is one frame: swap the vectors instead of copying.
                std::mem::swap(&mut frame, &mut self.slots[i].pending);
                self.ready[i / 64] &= !(1 << (i % 64));
            } else {
                frame.extend(self.slots[i].pending.drain(..FRAME_SIZE));
            }
            let mut next = std::mem::take(&mut self.next_scratch);
            next.clear();
            next.resize(frame.len(), 0);
            if self.tracing {
                for &b in &frame {
                    if pool.meta(b).flags & BUFFER_TRACED != 0 {
                        self.trace.push(i as NodeIndex, b, &[]);
                    }
                }
            }
            {
                let s = &mut self.slots[i];
                let env = Env {
                    pool,
                    errors: &mut s.errors,
                    trace: &mut self.trace,
                    capture: &mut self.capture,
                    node: i as NodeIndex,
                    extra: &mut self.extra,
                    ready: &self.ready,
                    nexts: &s.nexts,
                };
                s.node.process(env, &frame, &mut next);
            }
            self.enqueue_extra(i, pool);
            let s = &mut self.slots[i];
            s.stats.calls += 1;
            s.stats.vectors += frame.len() as u64;
            let now = clock::stamp();
            s.stats.clocks += now.wrapping_sub(t);
            t = now;
            self.enqueue_frame(i, frame, &next, pool);
            self.next_scratch = next;
        }
        for k in 0..self.inputs.len() {
            self.slots[usize::from(self.inputs[k])].node.end_dispatch();
        }
        if produced > 0 {
            // `t` is the last node's end: no clock read of its own.
            self.busy += t.wrapping_sub(start);
        }
        produced
    }

    /// The first slot, in node order, with a pending frame.
    #[inline]
    fn next_ready(&self) -> Option<usize> {
        let k = self.ready.iter().position(|&w| w != 0)?;
        Some(k * 64 + self.ready[k].trailing_zeros() as usize)
    }

    /// [`enqueue`](Self::enqueue) of a whole frame the runtime owns: when every buffer goes
    /// to one node whose pending frame is empty, the frame becomes that node's pending frame
    /// as it is (the vectors swap; no copy). `frame` (or the vector it swapped with) goes
    /// back to the scratch.
    fn enqueue_frame(&mut self, from: usize, mut frame: Vec<u32>, next: &[u16], pool: &mut Pool) {
        // The frame's one next, worked out once for both ways on.
        let one = if frame.len() == next.len() {
            uniform(next)
        } else {
            None
        };
        if let Some(n0) = one
            && n0 != CONSUMED
            && let Some(&to) = self.slots[from].nexts.get(usize::from(n0))
            && self.slots[usize::from(to)].pending.is_empty()
        {
            let to = usize::from(to);
            std::mem::swap(&mut frame, &mut self.slots[to].pending);
            self.ready[to / 64] |= 1 << (to % 64);
        } else {
            self.enqueue_as(from, &frame, next, one, pool);
        }
        self.buf_scratch = frame;
    }

    /// Appends `bufs` to slot `to`'s pending frame.
    #[inline]
    fn pend(&mut self, to: NodeIndex, bufs: &[u32]) {
        let to = usize::from(to);
        self.slots[to].pending.extend_from_slice(bufs);
        self.ready[to / 64] |= 1 << (to % 64);
    }

    /// Moves the buffers node `from` emitted beyond its frame ([`Ctx::emit`]) on.
    #[inline]
    fn enqueue_extra(&mut self, from: usize, pool: &mut Pool) {
        if self.extra.is_empty() {
            return;
        }
        let extra = std::mem::take(&mut self.extra);
        for &(b, n) in &extra {
            self.enqueue(from, &[b], &[n], pool);
        }
        self.extra = extra;
        self.extra.clear();
    }

    /// Moves buffers to the pending frames of their next nodes. A next index the node did not
    /// declare is a bug in that node: the buffer is freed and counted, never lost.
    fn enqueue(&mut self, from: usize, bufs: &[u32], next: &[u16], pool: &mut Pool) {
        let k = bufs.len().min(next.len());
        self.enqueue_as(from, &bufs[..k], &next[..k], uniform(&next[..k]), pool);
    }

    /// [`enqueue`](Self::enqueue) of `bufs` and `next` of one length, `one` the next index
    /// they all have (see [`uniform`]) if the caller worked it out.
    fn enqueue_as(
        &mut self,
        from: usize,
        bufs: &[u32],
        next: &[u16],
        one: Option<u16>,
        pool: &mut Pool,
    ) {
        // Most frames go to one next node whole: one bulk copy instead of a push per buffer.
        // A frame the node consumed whole (an output node's) needs no walk at all.
        if let Some(n0) = one {
            if n0 == CONSUMED {
                return;
            }
            if let Some(&to) = self.slots[from].nexts.get(usize::from(n0)) {
                self.pend(to, bufs);
                return;
            }
        }
        for (&b, &n) in bufs.iter().zip(next) {
            if n == CONSUMED {
                continue;
            }
            match self.slots[from].nexts.get(usize::from(n)) {
                Some(&to) => self.pend(to, &[b]),
                None => {
                    pool.free(b);
                    self.undeclared_next += 1;
                }
            }
        }
    }
}

/// The next index every buffer of a frame has, if they all have one. No early exit: the fold
/// compiles to a few wide compares for a whole frame.
#[inline(always)]
fn uniform(next: &[u16]) -> Option<u16> {
    let &n0 = next.first()?;
    (next.iter().fold(0, |acc, &n| acc | (n ^ n0)) == 0).then_some(n0)
}
