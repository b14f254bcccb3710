//! A real work queue: its character device opened and descriptors handed to it, as the
//! kernel's idxd driver allows (its character device, portal mapping and `write()` path).
//!
//! Three ways in, chosen at open time and said in [`Opened::how`]:
//! - **MOVDIR64B** to the queue's mapped portal, for a dedicated queue when the CPU has the
//!   instruction: a posted 64-byte store the device never refuses (the engine counts credits,
//!   so it never overflows).
//! - **ENQCMD** to the portal, for a shared queue when the CPU has it: the device may refuse
//!   (the queue is full), which the instruction reports in ZF.
//! - **`write()`** on the character device: the kernel checks each descriptor and submits it
//!   itself. It needs no CPU feature and no privilege beyond the device file, and it is the
//!   only way in on kernels with the INTEL-SA-01084 gate (`mmap` of the portal is `EPERM`
//!   without `CAP_SYS_RAWIO`). The kernel refuses batch descriptors through it on every
//!   current device, so the engine sends each copy as its own descriptor
//!   ([`Opened::batches`] is false).
//!
//! The portal is uncached device memory: it is only ever written by the two instructions,
//! through a raw pointer, never read and never referenced. An `sfence` before each makes the
//! ordinary stores before it (the descriptor list, the cleared completion records) visible to
//! the device first.
//!
//! The system calls go through [`Sys`], so that tests can make `open` and `mmap` fail as a
//! kernel would (`EBUSY`, `EACCES`, `EPERM`).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use super::CpuFeatures;
use super::hw::Descriptor;
use super::model::{Portal, Refused};
use super::sysfs::{WorkQueue, WqMode};

/// How descriptors reach the work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Movdir64b,
    Enqcmd,
    Write,
}

impl How {
    pub fn name(self) -> &'static str {
        match self {
            How::Movdir64b => "movdir64b",
            How::Enqcmd => "enqcmd",
            How::Write => "write",
        }
    }
}

/// The system calls opening a work queue takes.
pub trait Sys {
    fn open(&self, path: &Path) -> io::Result<OwnedFd>;
    /// Maps the queue's portal page for writing.
    fn map_portal(&self, fd: &OwnedFd) -> io::Result<*mut u8>;
}

/// The kernel's.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealSys;

impl Sys for RealSys {
    fn open(&self, path: &Path) -> io::Result<OwnedFd> {
        use rustix::fs::{Mode, OFlags};
        Ok(rustix::fs::open(
            path,
            OFlags::RDWR | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    fn map_portal(&self, fd: &OwnedFd) -> io::Result<*mut u8> {
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: a fresh mapping chosen by the kernel (null hint), over nothing of ours; it
        // is only written through MOVDIR64B/ENQCMD and unmapped by `DevicePortal::drop`.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                4096,
                ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::POPULATE,
                fd,
                0,
            )
        }?;
        Ok(p.cast())
    }
}

/// A work queue opened for submission.
pub struct DevicePortal {
    fd: OwnedFd,
    /// The mapped portal page (null on the `write()` path).
    portal: *mut u8,
    how: How,
}

// SAFETY: the portal page and the fd belong to this value alone; submitting from another
// thread is as good as from this one (the device does not care which core writes).
unsafe impl Send for DevicePortal {}

impl std::fmt::Debug for DevicePortal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevicePortal")
            .field("how", &self.how)
            .finish_non_exhaustive()
    }
}

/// What [`open`] made of a work queue.
#[derive(Debug)]
pub struct Opened {
    pub portal: DevicePortal,
    pub how: How,
    /// Whether batch descriptors may be sent (not through `write()`).
    pub batches: bool,
    /// Why the queue is used this way (each choice that was not the fastest, with its reason).
    pub notes: Vec<String>,
}

/// Opens `wq` and picks the fastest way in that this CPU and kernel allow.
///
/// # Errors
///
/// The queue cannot be opened; the message says why in an operator's words.
pub fn open(wq: &WorkQueue, cpu: CpuFeatures, sys: &dyn Sys) -> Result<Opened, String> {
    let fd = sys.open(&wq.dev_path).map_err(|e| {
        let path = wq.dev_path.display();
        match e.raw_os_error() {
            Some(libc_errno::EBUSY) => format!(
                "{path}: busy (a dedicated work queue has one owner, and another process or \
                 engine holds it)"
            ),
            Some(libc_errno::EACCES) | Some(libc_errno::EPERM) => format!(
                "{path}: permission denied (root, or a udev rule giving the daemon's group \
                 access to /dev/dsa)"
            ),
            _ => format!("{path}: {e}"),
        }
    })?;
    let mut notes = Vec::new();
    let want = match wq.mode {
        WqMode::Dedicated if cpu.movdir64b => Some(How::Movdir64b),
        WqMode::Shared if cpu.enqcmd => Some(How::Enqcmd),
        WqMode::Dedicated => {
            notes.push("the CPU has no MOVDIR64B: descriptors go through write()".into());
            None
        }
        WqMode::Shared => {
            notes.push("the CPU has no ENQCMD: descriptors go through write()".into());
            None
        }
    };
    let mut portal = std::ptr::null_mut();
    let mut how = How::Write;
    if let Some(w) = want {
        match sys.map_portal(&fd) {
            Ok(p) => (portal, how) = (p, w),
            Err(e) if e.raw_os_error() == Some(libc_errno::EPERM) => notes.push(
                "the kernel refused to map the portal (EPERM: the INTEL-SA-01084 gate; \
                 CAP_SYS_RAWIO lifts it): descriptors go through write()"
                    .into(),
            ),
            Err(e) => notes.push(format!(
                "mapping the portal failed ({e}): descriptors go through write()"
            )),
        }
    }
    if how == How::Write {
        notes.push("write() takes no batch descriptors: each copy is its own descriptor".into());
    }
    Ok(Opened {
        portal: DevicePortal { fd, portal, how },
        how,
        batches: how != How::Write,
        notes,
    })
}

/// The errno values `open` tells apart (the same on every Linux architecture).
mod libc_errno {
    pub const EPERM: i32 = 1;
    pub const EACCES: i32 = 13;
    pub const EBUSY: i32 = 16;
    pub const EAGAIN: i32 = 11;
}

impl Portal for DevicePortal {
    unsafe fn submit(&mut self, d: &Descriptor) -> Result<(), Refused> {
        match self.how {
            How::Movdir64b => {
                // SAFETY: `portal` is this queue's mapped portal page (64-byte aligned), `d`
                // is 64 bytes aligned to 64; MOVDIR64B exists (checked at open). The caller
                // keeps what the descriptor names valid until its record is written.
                unsafe { movdir64b(self.portal, d) };
                Ok(())
            }
            How::Enqcmd => {
                // SAFETY: as for MOVDIR64B, with ENQCMD (checked at open).
                if unsafe { enqcmd(self.portal, d) } {
                    Ok(())
                } else {
                    Err(Refused::Full)
                }
            }
            How::Write => {
                let bytes = d.to_bytes();
                match rustix::io::write(self.fd.as_fd(), &bytes) {
                    Ok(64) => Ok(()),
                    // A shared queue that stayed full through the kernel's retries.
                    Err(e) if e.raw_os_error() == libc_errno::EAGAIN => Err(Refused::Full),
                    Err(e) if e == rustix::io::Errno::BUSY => Err(Refused::Full),
                    Ok(n) => Err(Refused::Failed(
                        format!("write() took {n} of 64 bytes").into(),
                    )),
                    Err(e) => Err(Refused::Failed(
                        format!("write() of a descriptor failed: {e}").into(),
                    )),
                }
            }
        }
    }
}

impl Drop for DevicePortal {
    fn drop(&mut self) {
        if !self.portal.is_null() {
            // SAFETY: the page `map_portal` mapped, unmapped once; nothing refers to it.
            let _ = unsafe { rustix::mm::munmap(self.portal.cast(), 4096) };
        }
        // Closing the fd (after this) drains the queue in the kernel.
    }
}

/// # Safety
///
/// `portal` is a work queue's mapped portal, and the CPU has MOVDIR64B.
#[cfg(target_arch = "x86_64")]
unsafe fn movdir64b(portal: *mut u8, d: &Descriptor) {
    // SAFETY: the caller's promise; the encoding is `66 0F 38 F8 /r` with ModRM 0x02:
    // movdir64b rax, [rdx] (the destination is the register, the 64-byte source in memory).
    unsafe {
        std::arch::asm!(
            "sfence",
            ".byte 0x66, 0x0f, 0x38, 0xf8, 0x02",
            in("rax") portal,
            in("rdx") std::ptr::from_ref(d),
            options(nostack, preserves_flags),
        );
    }
}

/// # Safety
///
/// `portal` is a work queue's mapped portal, and the CPU has ENQCMD. Whether the queue took
/// the descriptor.
#[cfg(target_arch = "x86_64")]
unsafe fn enqcmd(portal: *mut u8, d: &Descriptor) -> bool {
    let retry: u8;
    // SAFETY: the caller's promise; `F2 0F 38 F8 /r`, ModRM 0x02: enqcmd rax, [rdx]; ZF set
    // means the queue did not take it.
    unsafe {
        std::arch::asm!(
            "sfence",
            ".byte 0xf2, 0x0f, 0x38, 0xf8, 0x02",
            "setz {r}",
            r = out(reg_byte) retry,
            in("rax") portal,
            in("rdx") std::ptr::from_ref(d),
            options(nostack),
        );
    }
    retry == 0
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn movdir64b(_: *mut u8, _: &Descriptor) {
    unreachable!("no MOVDIR64B off x86-64 (cpu_features says so)")
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn enqcmd(_: *mut u8, _: &Descriptor) -> bool {
    unreachable!("no ENQCMD off x86-64 (cpu_features says so)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::path::PathBuf;

    fn wq(mode: WqMode, path: PathBuf) -> WorkQueue {
        WorkQueue {
            id: "wq0.0".into(),
            device: "dsa0".into(),
            name: "veclane".into(),
            dev_path: path,
            mode,
            size: 16,
            max_batch_size: 32,
            max_transfer_size: 2 << 20,
            block_on_fault: false,
            numa_node: 0,
            version: 0x100,
        }
    }

    /// Opens `/dev/null` (so there is a real fd), and fails as told.
    struct Fake {
        open_err: Option<i32>,
        map_err: Option<i32>,
        mapped: Cell<u32>,
    }

    impl Sys for Fake {
        fn open(&self, _: &Path) -> io::Result<OwnedFd> {
            match self.open_err {
                Some(e) => Err(io::Error::from_raw_os_error(e)),
                None => RealSys.open(Path::new("/dev/null")),
            }
        }
        fn map_portal(&self, _: &OwnedFd) -> io::Result<*mut u8> {
            self.mapped.set(self.mapped.get() + 1);
            Err(io::Error::from_raw_os_error(self.map_err.unwrap_or(19)))
        }
    }

    fn fake(open_err: Option<i32>, map_err: Option<i32>) -> Fake {
        Fake {
            open_err,
            map_err,
            mapped: Cell::new(0),
        }
    }

    const ALL: CpuFeatures = CpuFeatures {
        movdir64b: true,
        enqcmd: true,
    };

    #[test]
    fn open_errors_say_what_to_do() {
        let q = wq(WqMode::Dedicated, "/dev/dsa/wq0.0".into());
        let e = open(&q, ALL, &fake(Some(16), None)).unwrap_err();
        assert!(e.contains("busy") && e.contains("one owner"), "{e}");
        let e = open(&q, ALL, &fake(Some(13), None)).unwrap_err();
        assert!(e.contains("permission denied") && e.contains("udev"), "{e}");
        let e = open(&q, ALL, &fake(Some(2), None)).unwrap_err();
        assert!(e.contains("/dev/dsa/wq0.0"), "{e}");
    }

    #[test]
    fn the_portal_gate_falls_back_to_write() {
        let q = wq(WqMode::Dedicated, "/dev/dsa/wq0.0".into());
        let f = fake(None, Some(1));
        let o = open(&q, ALL, &f).unwrap();
        assert_eq!((o.how, o.batches, f.mapped.get()), (How::Write, false, 1));
        assert!(
            o.notes.iter().any(|n| n.contains("INTEL-SA-01084")),
            "{:?}",
            o.notes
        );
        // Any other mapping failure too, saying so.
        let o = open(&wq(WqMode::Shared, "/x".into()), ALL, &fake(None, Some(19))).unwrap();
        assert_eq!(o.how, How::Write);
        assert!(
            o.notes
                .iter()
                .any(|n| n.contains("mapping the portal failed"))
        );
    }

    #[test]
    fn without_the_instructions_nothing_is_mapped() {
        for mode in [WqMode::Dedicated, WqMode::Shared] {
            let f = fake(None, None);
            let o = open(&wq(mode, "/x".into()), CpuFeatures::default(), &f).unwrap();
            assert_eq!((o.how, f.mapped.get()), (How::Write, 0));
            let want = match mode {
                WqMode::Dedicated => "MOVDIR64B",
                WqMode::Shared => "ENQCMD",
            };
            assert!(o.notes.iter().any(|n| n.contains(want)), "{:?}", o.notes);
        }
    }

    #[test]
    fn write_refusals_are_told_apart() {
        // A pipe with its read end closed: write() fails with EPIPE, which is not "full".
        let (r, w) = rustix::pipe::pipe().unwrap();
        drop(r);
        // (Rust ignores SIGPIPE in every program it starts, tests included.)
        let mut p = DevicePortal {
            fd: w,
            portal: std::ptr::null_mut(),
            how: How::Write,
        };
        // SAFETY: nothing is executed: the descriptor never reaches a device.
        let got = unsafe { p.submit(&Descriptor::default()) };
        assert!(
            matches!(&got, Err(Refused::Failed(why)) if why.contains("write()")),
            "{got:?}"
        );
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn movdir64b_stores_the_descriptor_where_the_cpu_has_it() {
        if !super::super::cpu_features().movdir64b {
            eprintln!("skipped: this CPU has no MOVDIR64B (the write() path is what it uses)");
            return;
        }
        // MOVDIR64B is a 64-byte direct store to any write-back page too.
        let mut page = Box::new(Descriptor::default());
        let d = Descriptor::memmove(0x10c, 0x40, 0x1000, 0x2000, 64);
        // SAFETY: `page` is 64 bytes aligned to 64 and ours; the CPU has the instruction.
        unsafe { movdir64b(std::ptr::from_mut(&mut *page).cast(), &d) };
        assert_eq!(*page, d);
    }
}
