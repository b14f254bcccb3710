//! Intel DSA (Data Streaming Accelerator), the copy device of Sapphire Rapids and later
//! Xeons: its formats ([`hw`]), finding the work queues a process may use ([`sysfs`]), the
//! CPU instructions that submit to them ([`cpu_features`]), opening a queue and submitting to
//! it with MOVDIR64B, ENQCMD or `write()` ([`device`]), a software work queue that executes
//! descriptors as the specification says behind the same [`model::Portal`] ([`model`]), the
//! engine that turns batches of copies into descriptors and retires them in order, finishing
//! faults on the CPU ([`engine`]), and [`DsaPool`], which hands each engine a queue of its
//! own.
//!
//! What has been verified, and against what: the formats against the kernel's
//! `<linux/idxd.h>`; the engine against the model (every fault the specification names) and,
//! through the real `write()` path, against the model serving a FIFO in another thread; the
//! MOVDIR64B store where the CPU has it. No device was at hand: on real hardware `veclane
//! copy-engine check` is the proof.

pub mod device;
pub mod engine;
pub mod hw;
pub mod model;
pub mod sysfs;

use std::collections::HashSet;
use std::path::PathBuf;

use engine::{DsaConfig, DsaEngine};
use model::{Fault, Model, ModelConfig, Portal, Refused};
use sysfs::{Discovery, WorkQueue, WqMode};

/// Where the engines' work queues come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Every usable work queue discovery finds (`/sys/bus/dsa/devices`, `/dev/dsa`).
    Discover,
    /// Only this one (`/dev/dsa/wq0.0`, or its name `wq0.0`).
    Queue(PathBuf),
    /// The software model, for tests: no device is touched. With `fault_every` > 0, every
    /// that many descriptors one stops part way with a page fault (finished on the CPU).
    Model { fault_every: u32 },
}

impl Source {
    /// The source a `dsa-queue` setting names: none or `discover` for discovery, `model`
    /// for the model (with `fault_every`), anything else a queue's name or path.
    pub fn from_setting(queue: Option<&str>, fault_every: u32) -> Source {
        match queue {
            None | Some("discover") => Source::Discover,
            Some("model") => Source::Model { fault_every },
            Some(q) => Source::Queue(q.into()),
        }
    }
}

/// A queue an engine was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    /// `wq0.0` (or `model`).
    pub wq: String,
    pub path: String,
    pub mode: &'static str,
    /// `movdir64b`, `enqcmd`, `write` or `model`.
    pub how: &'static str,
    pub config: DsaConfig,
    /// Each choice that was not the fastest, with its reason.
    pub notes: Vec<String>,
}

/// Hands DSA engines a work queue each: a dedicated queue to one engine only, a shared one to
/// any number. Discovery runs once, when the pool is made.
#[derive(Debug)]
pub struct DsaPool {
    source: Source,
    found: Discovery,
    cpu: CpuFeatures,
    /// Dedicated queues already given out.
    taken: HashSet<String>,
    models: u32,
    /// Copies shorter than this are made on the CPU (`DsaConfig::inline_max`).
    inline_below: u32,
}

impl DsaPool {
    pub fn new(source: Source) -> DsaPool {
        let found = match &source {
            Source::Model { .. } => Discovery::default(),
            _ => sysfs::discover_default(),
        };
        DsaPool::with(source, found, cpu_features())
    }

    /// A pool over what discovery found (tests give a fake tree's).
    pub fn with(source: Source, found: Discovery, cpu: CpuFeatures) -> DsaPool {
        DsaPool {
            source,
            found,
            cpu,
            taken: HashSet::new(),
            models: 0,
            inline_below: DsaConfig::default().inline_max,
        }
    }

    /// Engines opened from now on make copies shorter than `bytes` on the CPU (default 256:
    /// below that, a descriptor costs the core more than the copy).
    pub fn set_inline_below(&mut self, bytes: u32) {
        self.inline_below = bytes;
    }

    pub fn discovery(&self) -> &Discovery {
        &self.found
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Why no engine can be had, or `None` when one can (without opening anything).
    pub fn unusable(&self) -> Option<String> {
        if matches!(self.source, Source::Model { .. }) {
            return None;
        }
        let mine = self.candidates();
        if mine.is_empty() {
            return Some(match &self.source {
                Source::Queue(p) => format!(
                    "DSA work queue {} is not usable: {}",
                    p.display(),
                    self.found
                        .unusable
                        .iter()
                        .find(|(id, _)| p.ends_with(id))
                        .map_or_else(|| self.found.why_none(), |(_, why)| why.clone())
                ),
                _ => format!("no usable DSA work queue: {}", self.found.why_none()),
            });
        }
        None
    }

    fn candidates(&self) -> Vec<&WorkQueue> {
        self.found
            .usable
            .iter()
            .filter(|w| match &self.source {
                Source::Queue(p) => p == &w.dev_path || p.as_os_str() == w.id.as_str(),
                _ => true,
            })
            .collect()
    }

    /// An engine on the next free work queue.
    ///
    /// # Errors
    ///
    /// No queue is usable or free, or opening each one failed: the message says why for each.
    pub fn open(&mut self) -> Result<(DsaEngine, Assigned), String> {
        if let Source::Model { fault_every } = self.source {
            self.models += 1;
            let cfg = DsaConfig {
                inline_max: self.inline_below,
                ..DsaConfig::default()
            };
            let mcfg = ModelConfig {
                depth: cfg.credits,
                max_batch_size: cfg.max_batch_size,
                max_transfer_size: cfg.max_transfer_size,
                ..ModelConfig::default()
            };
            let portal = FaultEvery {
                model: Model::new(mcfg),
                every: u64::from(fault_every),
                sent: 0,
            };
            let a = Assigned {
                wq: format!("model{}", self.models - 1),
                path: "(software model)".into(),
                mode: "dedicated",
                how: "model",
                config: cfg,
                notes: vec![
                    "the software model, not a device: it verifies the engine, and says \
                     nothing of a device's speed"
                        .into(),
                ],
            };
            return Ok((DsaEngine::new(Box::new(portal), cfg), a));
        }
        if let Some(why) = self.unusable() {
            return Err(why);
        }
        let mut why = Vec::new();
        let queues: Vec<WorkQueue> = self.candidates().into_iter().cloned().collect();
        for wq in queues {
            if wq.mode == WqMode::Dedicated && self.taken.contains(&wq.id) {
                why.push(format!(
                    "{}: dedicated, already given to another engine",
                    wq.id
                ));
                continue;
            }
            match device::open(&wq, self.cpu, &device::RealSys) {
                Ok(o) => {
                    if wq.mode == WqMode::Dedicated {
                        self.taken.insert(wq.id.clone());
                    }
                    let cfg = DsaConfig {
                        inline_max: self.inline_below,
                        ..config_for(&wq, o.batches)
                    };
                    let a = Assigned {
                        wq: wq.id.clone(),
                        path: wq.dev_path.display().to_string(),
                        mode: match wq.mode {
                            WqMode::Dedicated => "dedicated",
                            WqMode::Shared => "shared",
                        },
                        how: o.how.name(),
                        config: cfg,
                        notes: o.notes,
                    };
                    return Ok((DsaEngine::new(Box::new(o.portal), cfg), a));
                }
                Err(e) => why.push(format!("{}: {e}", wq.id)),
            }
        }
        Err(format!("no free DSA work queue: {}", why.join("; ")))
    }
}

/// The engine's limits on `wq`.
pub fn config_for(wq: &WorkQueue, batches: bool) -> DsaConfig {
    let d = DsaConfig::default();
    DsaConfig {
        // A shared queue's depth is everyone's: take a fair part of it.
        credits: match wq.mode {
            WqMode::Dedicated => wq.size.clamp(1, 128) as usize,
            WqMode::Shared => (wq.size / 4).clamp(1, 32) as usize,
        },
        max_batch_size: if batches {
            wq.max_batch_size.clamp(2, 256)
        } else {
            1
        },
        max_transfer_size: u32::try_from(wq.max_transfer_size).unwrap_or(u32::MAX),
        ..d
    }
}

/// The model, with a page fault injected into every `every`th descriptor.
struct FaultEvery {
    model: Model,
    every: u64,
    sent: u64,
}

impl Portal for FaultEvery {
    unsafe fn submit(&mut self, d: &hw::Descriptor) -> Result<(), Refused> {
        self.sent += 1;
        if self.every > 0 && self.sent.is_multiple_of(self.every) {
            let n = self.model.executed + self.model.queued() as u64;
            let len = if d.opcode() == hw::opcode::BATCH {
                64
            } else {
                d.xfer_size
            };
            self.model.inject_at(
                n,
                Fault::Partial {
                    index: (self.sent / self.every % 2) as u32,
                    at: len / 3,
                    write: (self.sent / self.every).is_multiple_of(3),
                },
            );
        }
        // SAFETY: the engine's promise, passed on.
        unsafe { self.model.submit(d) }
    }

    fn progress(&mut self) {
        self.model.progress();
    }
}

/// The submission instructions this CPU has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    /// MOVDIR64B: a 64-byte atomic store, how descriptors go to a dedicated work queue.
    pub movdir64b: bool,
    /// ENQCMD: a 64-byte store a shared work queue may refuse, how descriptors go to one.
    pub enqcmd: bool,
}

/// Which submission instructions the CPU has (CPUID leaf 7, sub-leaf 0: ECX bit 28 is
/// MOVDIR64B, bit 29 ENQCMD). Without them a work queue is still usable through `write()`
/// on its character device.
pub fn cpu_features() -> CpuFeatures {
    #[cfg(target_arch = "x86_64")]
    {
        let max = std::arch::x86_64::__cpuid(0).eax;
        if max < 7 {
            return CpuFeatures::default();
        }
        let ecx = std::arch::x86_64::__cpuid_count(7, 0).ecx;
        CpuFeatures {
            movdir64b: ecx & (1 << 28) != 0,
            enqcmd: ecx & (1 << 29) != 0,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    CpuFeatures::default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_features_agree_with_the_kernel() {
        // The kernel lists the same bits as flags in /proc/cpuinfo.
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let Some(flags) = info.lines().find(|l| l.starts_with("flags")) else {
            return;
        };
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        let c = super::cpu_features();
        assert_eq!(c.movdir64b, has("movdir64b"), "{c:?}");
        // The kernel hides enqcmd where it does not support PASIDs for user space, so only
        // one direction holds.
        assert!(!has("enqcmd") || c.enqcmd, "{c:?}");
    }
}
