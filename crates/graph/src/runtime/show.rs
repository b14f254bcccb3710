//! What the control thread asks of a worker's graph: `show runtime`, `show errors`, `show
//! trace`, `trace add`, `pcap trace`, and clearing them.

use super::Runtime;
use crate::{Captured, Filter, NodeKind, NodeStats, TraceError, clock};

impl Runtime {
    /// `trace add NODE N`: trace the next `n` buffers that input node `name` produces.
    pub fn trace_add(&mut self, name: &str, n: u32) -> Result<(), TraceError> {
        match self.node_index(name) {
            Some(i) if self.slots[usize::from(i)].info.kind == NodeKind::Input => {
                self.trace_quota[usize::from(i)] += n;
                self.tracing = true;
                Ok(())
            }
            Some(_) => Err(TraceError::NotInput(name.to_string())),
            None => Err(TraceError::NoNode(name.to_string())),
        }
    }

    /// Nanoseconds spent in dispatch loops that moved at least one buffer, since the
    /// runtime counters were cleared: with the time elapsed, how busy the worker is (a
    /// polling worker takes its whole core whatever this says).
    pub fn busy_ns(&self) -> u64 {
        clock::stamp_ns(self.busy)
    }

    /// `pcap trace ... on`: starts capturing (what was captured before is discarded).
    pub fn pcap_start(&mut self, f: Filter) {
        self.capture.start(f);
    }

    /// `pcap trace off`: stops and returns the captured packets and how many did not fit.
    pub fn pcap_stop(&mut self) -> (Vec<Captured>, u64) {
        self.capture.stop()
    }

    /// Packets captured so far, if capturing.
    pub fn pcap_status(&self) -> Option<(Filter, usize)> {
        self.capture
            .filter()
            .map(|f| (f.clone(), self.capture.captured()))
    }

    /// `show runtime`: per node name, kind, counters.
    pub fn runtime(&self) -> Vec<(&'static str, NodeKind, NodeStats)> {
        let per = clock::ns_per_stamp();
        self.slots
            .iter()
            .map(|s| {
                let stats = NodeStats {
                    clocks: (s.stats.clocks as f64 * per) as u64,
                    ..s.stats
                };
                (s.info.name, s.info.kind, stats)
            })
            .collect()
    }

    /// Buffers dropped because a node named a next index it never declared.
    pub fn undeclared_next_drops(&self) -> u64 {
        self.undeclared_next
    }

    /// `show errors`: (node, error name, count) for every non-zero counter.
    pub fn errors(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut v = Vec::new();
        for s in &self.slots {
            for (name, &n) in s.info.errors.iter().zip(&s.errors) {
                if n > 0 {
                    v.push((s.info.name, *name, n));
                }
            }
        }
        v
    }

    /// `show trace`: one block per traced buffer, its path through the nodes in order.
    pub fn show_trace(&self) -> String {
        let mut out = String::new();
        for (b, recs) in self.trace.by_buffer() {
            out.push_str(&format!("Packet (buffer {b})\n"));
            for (k, r) in recs.iter().enumerate() {
                // The runtime marks a traced buffer's arrival at a node with an empty record;
                // when the node added its own, print that one alone.
                if r.data().is_empty() && recs.get(k + 1).is_some_and(|n| n.node == r.node) {
                    continue;
                }
                let s = &self.slots[usize::from(r.node)];
                let text = if r.data().is_empty() {
                    String::new()
                } else {
                    s.node.format_trace(r.data())
                };
                out.push_str(&format!("  {:<16} {text}\n", s.info.name));
            }
        }
        out
    }

    pub fn clear_runtime(&mut self) {
        for s in &mut self.slots {
            s.stats = NodeStats::default();
        }
        self.busy = 0;
    }

    pub fn clear_errors(&mut self) {
        for s in &mut self.slots {
            s.errors.iter_mut().for_each(|e| *e = 0);
        }
    }

    /// Forgets all records and stops marking new buffers (buffers already marked keep
    /// their flag until freed).
    pub fn clear_trace(&mut self) {
        self.trace.clear();
        self.trace_quota.iter_mut().for_each(|q| *q = 0);
    }
}
