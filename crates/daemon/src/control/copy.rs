//! The copy engines: the one every worker's memif nodes start with (`copy-engine`), the DSA
//! engines given to them when an interface with `use-dma` first needs one, the work queues
//! they come from, and `show copy-engine`.

use std::sync::Arc;

use api::{CopyEngineInfo, EngineInfo};
use copy_engine::dsa::{DsaPool, Source};
use copy_engine::{Engine, Kind};
use memif::nodes::{EngineCounters, QueueCommand};

use super::{Control, ControlError};
use crate::worker::WorkerHandle;

/// The memif node an engine serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Input,
    Output,
}

impl Side {
    fn node(self) -> &'static str {
        match self {
            Side::Input => "memif-input",
            Side::Output => "memif-output",
        }
    }
}

/// One engine some worker's node holds.
#[derive(Debug)]
struct Entry {
    worker: usize,
    side: Side,
    use_dma: bool,
    kind: Kind,
    queue: Option<String>,
    notes: Vec<String>,
    counters: Arc<EngineCounters>,
}

/// What the control thread knows of the copy engines.
#[derive(Debug)]
pub(super) struct Copy {
    configured: Kind,
    pool: DsaPool,
    /// Why DSA is not in use where it was asked for (`auto`, `use-dma`).
    why_not_dsa: Option<String>,
    entries: Vec<Entry>,
    /// Memory registered for the device: what (`worker 0 buffers`, `memif1 regions`) and
    /// how (`37.7 MB, populated`).
    registered: std::collections::BTreeMap<String, String>,
}

/// A worker's two default engines, for [`crate::worker::spawn`].
#[derive(Debug)]
pub struct NodeEngines {
    pub input: (Engine, Arc<EngineCounters>),
    pub output: (Engine, Arc<EngineCounters>),
}

impl Copy {
    pub(super) fn new(d: &api::config::DaemonSection) -> Copy {
        Copy {
            configured: d.copy_engine,
            pool: {
                let mut p = DsaPool::new(Source::from_setting(
                    d.dsa_queue.as_deref(),
                    d.dsa_model_fault_every,
                ));
                p.set_inline_below(d.dsa_inline_below);
                p
            },
            why_not_dsa: None,
            entries: Vec::new(),
            registered: Default::default(),
        }
    }

    /// Whether any DSA engine may copy here: a work queue (or the model) is usable. Memory
    /// a DSA engine may copy to or from is then registered.
    pub(super) fn may_use_dsa(&self) -> bool {
        self.pool.unusable().is_none()
    }

    /// Whether an interface's copies on `worker`'s `side` node go to DSA: those of a
    /// `use-dma` interface if the node was given a DSA engine, the others if its default
    /// engine is DSA.
    pub(super) fn on_dsa(&self, worker: usize, side: Side, use_dma: bool) -> bool {
        self.entries.iter().any(|e| {
            e.worker == worker && e.side == side && e.kind == Kind::Dsa && (use_dma || !e.use_dma)
        })
    }

    /// Records memory registered for the device (logged when it failed).
    pub(super) fn registered(
        &mut self,
        what: String,
        bytes: usize,
        r: &std::io::Result<copy_engine::Registered>,
    ) {
        let how = copy_engine::describe_registration(bytes, r);
        if r.is_err() {
            tracing::warn!(memory = %what, "{how}: the device will fault on its first copies");
        } else {
            tracing::debug!(memory = %what, "registered for DSA: {how}");
        }
        self.registered.insert(what, how);
    }

    /// Worker `worker`'s default engines.
    pub(super) fn for_worker(&mut self, worker: usize) -> Result<NodeEngines, ControlError> {
        let mut one = |side: Side| -> Result<(Engine, Arc<EngineCounters>), ControlError> {
            let s = Engine::select(self.configured, &mut self.pool).map_err(|error| {
                ControlError::Worker {
                    index: worker,
                    error,
                }
            })?;
            if let Some(why) = s.why_not_dsa
                && self.why_not_dsa.is_none()
            {
                tracing::info!(reason = %why, "copy-engine auto: the CPU copies");
                self.why_not_dsa = Some(why);
            }
            let counters = Arc::new(EngineCounters::default());
            if let Some(a) = &s.dsa {
                tracing::info!(
                    worker,
                    node = side.node(),
                    queue = %a.wq,
                    how = a.how,
                    "DSA engine"
                );
            }
            self.entries.push(Entry {
                worker,
                side,
                use_dma: false,
                kind: s.engine.caps().kind,
                queue: s.dsa.as_ref().map(|a| format!("{} {}", a.wq, a.how)),
                notes: s.dsa.map(|a| a.notes).unwrap_or_default(),
                counters: counters.clone(),
            });
            Ok((s.engine, counters))
        };
        Ok(NodeEngines {
            input: one(Side::Input)?,
            output: one(Side::Output)?,
        })
    }

    /// Makes sure `w`'s node on `side` can copy `ifindex`'s packets on DSA, and tells it to:
    /// its default engine if that is DSA, else a DSA engine given to it now (once). What the
    /// interface's copies go through, for `show interface`.
    pub(super) fn use_dma(&mut self, w: &WorkerHandle, side: Side, ifindex: u32) -> String {
        let on = |e: &Entry| e.worker == w.index && e.side == side;
        if let Some(e) = self.entries.iter().find(|e| on(e) && e.kind == Kind::Dsa) {
            if e.use_dma {
                send(w, side, QueueCommand::UseDma { ifindex });
            }
            return format!("dsa {}", e.queue.as_deref().unwrap_or(""));
        }
        match self.pool.open() {
            Ok((engine, a)) => {
                let counters = Arc::new(EngineCounters::default());
                tracing::info!(
                    worker = w.index,
                    node = side.node(),
                    queue = %a.wq,
                    how = a.how,
                    "DSA engine for use-dma interfaces"
                );
                let queue = format!("{} {}", a.wq, a.how);
                self.entries.push(Entry {
                    worker: w.index,
                    side,
                    use_dma: true,
                    kind: Kind::Dsa,
                    queue: Some(queue.clone()),
                    notes: a.notes,
                    counters: counters.clone(),
                });
                send(
                    w,
                    side,
                    QueueCommand::DmaEngine {
                        engine: Box::new(Engine::Dsa(Box::new(engine))),
                        counters,
                    },
                );
                send(w, side, QueueCommand::UseDma { ifindex });
                format!("dsa {queue}")
            }
            Err(why) => {
                if self.why_not_dsa.as_deref() != Some(&why) {
                    tracing::warn!(
                        reason = %why,
                        "use-dma: no DSA engine, the interface's copies stay on {}",
                        self.configured
                    );
                    self.why_not_dsa = Some(why.clone());
                }
                let kind = self
                    .entries
                    .iter()
                    .find(|e| on(e))
                    .map_or(Kind::Cpu, |e| e.kind);
                format!("{kind} (use-dma: {why})")
            }
        }
    }

    /// What the default engines of worker `w` are (`show interface` of an interface without
    /// `use-dma`).
    pub(super) fn default_kind(&self, worker: usize) -> String {
        self.entries
            .iter()
            .find(|e| e.worker == worker && !e.use_dma)
            .map_or_else(
                || self.configured.to_string(),
                |e| match &e.queue {
                    Some(q) => format!("{} {q}", e.kind),
                    None => e.kind.to_string(),
                },
            )
    }

    pub(super) fn info(&self) -> CopyEngineInfo {
        let found = self.pool.discovery();
        CopyEngineInfo {
            configured: self.configured,
            dsa_source: match self.pool.source() {
                Source::Discover => "discover".into(),
                Source::Queue(q) => q.display().to_string(),
                Source::Model { .. } => "model (the software model: no device)".into(),
            },
            dsa_queues: found
                .usable
                .iter()
                .map(|w| {
                    format!(
                        "{} {:?} size {} max-batch {} max-transfer {} numa {} {}",
                        w.id,
                        w.mode,
                        w.size,
                        w.max_batch_size,
                        w.max_transfer_size,
                        w.numa_node,
                        w.dev_path.display()
                    )
                    .to_lowercase()
                })
                .collect(),
            dsa_unusable: found
                .unusable
                .iter()
                .map(|(what, why)| format!("{what}: {why}"))
                .chain(found.none.clone())
                .collect(),
            why_not_dsa: self.why_not_dsa.clone(),
            registered: self
                .registered
                .iter()
                .map(|(what, how)| format!("{what}: {how}"))
                .collect(),
            engines: self
                .entries
                .iter()
                .map(|e| {
                    let c = e.counters.snapshot();
                    EngineInfo {
                        worker: e.worker,
                        node: e.side.node().into(),
                        role: if e.use_dma { "use-dma" } else { "default" }.into(),
                        kind: e.kind,
                        queue: e.queue.clone(),
                        notes: e.notes.clone(),
                        batches: c.stats.batches,
                        copies: c.stats.copies,
                        bytes: c.stats.bytes,
                        full: c.stats.full,
                        descriptors: c.dsa.descriptors,
                        short: c.stats.short,
                        inline: c.dsa.inline,
                        recovered: c.dsa.recovered,
                        watchdog: c.dsa.watchdog,
                        fallback: c.dsa.fallback,
                        tripped: c.tripped,
                    }
                })
                .collect(),
        }
    }
}

fn send(w: &WorkerHandle, side: Side, c: QueueCommand) {
    let _ = match side {
        Side::Input => w.queues::<QueueCommand>().rx.send(c),
        Side::Output => w.queues::<QueueCommand>().tx.send(c),
    };
}

impl Control {
    pub(super) fn show_copy_engine(&self) -> CopyEngineInfo {
        self.copy.info()
    }
}
