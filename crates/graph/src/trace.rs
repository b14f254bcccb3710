//! Packet trace: small fixed-size records in a ring, formatted only when shown.

use crate::NodeIndex;

/// Bytes of node data one record keeps.
pub const TRACE_DATA: usize = 48;

/// One node's record for one buffer.
#[derive(Debug, Clone, Copy)]
pub struct TraceRecord {
    pub seq: u64,
    pub node: NodeIndex,
    pub buffer: u32,
    /// The first record of a packet's journey (written by the input node that marked it).
    pub start: bool,
    len: u8,
    data: [u8; TRACE_DATA],
}

impl TraceRecord {
    pub fn data(&self) -> &[u8] {
        &self.data[..usize::from(self.len)]
    }
}

/// A bounded ring of trace records; the oldest are overwritten.
#[derive(Debug)]
pub struct TraceRing {
    recs: Vec<TraceRecord>,
    cap: usize,
    next: u64,
}

impl TraceRing {
    pub fn new(cap: usize) -> TraceRing {
        TraceRing {
            recs: Vec::with_capacity(cap),
            cap,
            next: 0,
        }
    }

    pub fn push(&mut self, node: NodeIndex, buffer: u32, data: &[u8]) {
        self.push_rec(node, buffer, data, false);
    }

    pub(crate) fn push_start(&mut self, node: NodeIndex, buffer: u32) {
        self.push_rec(node, buffer, &[], true);
    }

    fn push_rec(&mut self, node: NodeIndex, buffer: u32, data: &[u8], start: bool) {
        if self.cap == 0 {
            return;
        }
        let n = data.len().min(TRACE_DATA);
        let mut d = [0u8; TRACE_DATA];
        d[..n].copy_from_slice(&data[..n]);
        let r = TraceRecord {
            seq: self.next,
            node,
            buffer,
            start,
            len: n as u8,
            data: d,
        };
        if self.recs.len() < self.cap {
            self.recs.push(r);
        } else {
            self.recs[(self.next % self.cap as u64) as usize] = r;
        }
        self.next += 1;
    }

    pub fn clear(&mut self) {
        self.recs.clear();
        self.next = 0;
    }

    /// Records grouped by packet, in time order: a start record opens a packet's journey,
    /// later records for the same buffer index belong to it until the next start.
    pub fn by_buffer(&self) -> Vec<(u32, Vec<TraceRecord>)> {
        let mut recs = self.recs.clone();
        recs.sort_by_key(|r| r.seq);
        let mut out: Vec<(u32, Vec<TraceRecord>)> = Vec::new();
        let mut open: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for r in recs {
            if r.start {
                open.insert(r.buffer, out.len());
                out.push((r.buffer, vec![r]));
            } else if let Some(&j) = open.get(&r.buffer) {
                out[j].1.push(r);
            }
        }
        out
    }
}
