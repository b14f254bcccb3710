//! Intel DSA (Data Streaming Accelerator), the copy device of Sapphire Rapids and later
//! Xeons: its formats ([`hw`]), finding the work queues a process may use ([`sysfs`]), the
//! CPU instructions that submit to them ([`cpu_features`]), a software work queue that
//! executes descriptors as the specification says behind the [`model::Portal`] a device's
//! portal will have ([`model`]), and the engine that turns batches of copies into
//! descriptors and retires them in order, finishing faults on the CPU ([`engine`]). It is
//! verified against the model only; the real portal (MOVDIR64B, ENQCMD, `write()`) and the
//! engine's place among [`crate::Kind`]s are still to come. `reference/dsa.md` is the design
//! brief.

pub mod engine;
pub mod hw;
pub mod model;
pub mod sysfs;

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
