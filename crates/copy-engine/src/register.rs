//! Memory registration: the pages a copy device will read and write, faulted in before it
//! does.
//!
//! A DSA work queue in user mode addresses the process's virtual memory through the IOMMU
//! (shared virtual addressing). A page the process has never touched has no page-table entry
//! yet, so the device's first access to it is a page fault: with block-on-fault off (how
//! veclane's descriptors are built) the copy stops there, the completion record says how far
//! it got, and the engine finishes the rest on the CPU (the Intel DSA Architecture
//! Specification's partial completion). That is
//! correct but slow, and a fresh memif region or buffer pool is entirely untouched pages. So
//! whoever hands memory to a DSA engine registers it first: [`register`] asks the kernel to
//! populate the page tables of the whole range for writing (`MADV_POPULATE_WRITE`, Linux
//! 5.14), which allocates and maps every page without changing a byte of it. On an older
//! kernel (one that answers the advice on a fresh page of our own with EINVAL) it reads one
//! byte of every page instead, which maps them (a shared memfd's pages writable, an anonymous
//! mapping's pages to the zero page, which the device will still fault on once: counted by
//! the engine, harmless).
//!
//! Registering allocates and zeroes every page not yet there, so it takes time in proportion
//! to the range: it is made by the control thread when memory is first lent to a DSA engine,
//! never by a worker. The CPU and thread engines do not need it.

use std::io;

/// How [`register`] faulted a range in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// `MADV_POPULATE_WRITE`: every page allocated and mapped writable.
    Populated,
    /// The kernel lacks `MADV_POPULATE_WRITE` (older than 5.14): one byte of every page read.
    Touched,
}

const PAGE: usize = 4096;

/// Faults in every page of `len` bytes at `ptr` for writing, without changing their contents.
///
/// # Safety
///
/// `ptr..ptr + len` is memory mapped in this process, readable, and stays mapped for the call.
/// Other threads (or processes sharing the mapping) may read and write it meanwhile: nothing
/// here writes to it.
pub unsafe fn register(ptr: *mut u8, len: usize) -> io::Result<Registered> {
    if len == 0 {
        return Ok(Registered::Populated);
    }
    // madvise wants a page-aligned start: widen the range down to its first page (the page is
    // mapped, since `ptr` is in it).
    let skew = ptr as usize % PAGE;
    let start = ptr.wrapping_sub(skew);
    // SAFETY: the caller's range, widened to whole pages that contain it; POPULATE_WRITE
    // changes page tables, never contents.
    match unsafe {
        rustix::mm::madvise(
            start.cast(),
            len + skew,
            rustix::mm::Advice::LinuxPopulateWrite,
        )
    } {
        Ok(()) => Ok(Registered::Populated),
        Err(rustix::io::Errno::INVAL) if !populate_write_known() => {
            let mut at = 0;
            while at < len {
                // SAFETY: inside the caller's range; a volatile read of a byte others may
                // write is the access memif makes of shared memory everywhere.
                unsafe { ptr.add(at).read_volatile() };
                at += PAGE - (ptr as usize + at) % PAGE;
            }
            Ok(Registered::Touched)
        }
        Err(e) => Err(io::Error::from(e)),
    }
}

/// [`register`] for memory borrowed as a slice (a buffer pool, say): faults its pages in
/// without changing them.
pub fn register_slice(mem: &[u8]) -> io::Result<Registered> {
    // SAFETY: a borrowed slice is mapped and readable for the call; `register` writes nothing.
    unsafe { register(mem.as_ptr().cast_mut(), mem.len()) }
}

/// What was registered, for logs and `show copy-engine`: `37.7 MB, populated`.
pub fn describe(bytes: usize, r: &io::Result<Registered>) -> String {
    let mb = bytes as f64 / 1e6;
    match r {
        Ok(Registered::Populated) => format!("{mb:.1} MB, populated"),
        Ok(Registered::Touched) => format!("{mb:.1} MB, touched (no MADV_POPULATE_WRITE)"),
        Err(e) => format!("{mb:.1} MB, not registered: {e}"),
    }
}

/// Whether this kernel knows `MADV_POPULATE_WRITE`: EINVAL also means a mapping it cannot
/// populate (`PROT_NONE`, `VM_IO`), so the advice is tried once on a page of our own.
fn populate_write_known() -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KNOWN.get_or_init(|| {
        // SAFETY: a fresh private anonymous page, advised and unmapped here, used by nobody
        // else.
        unsafe {
            let Ok(p) = rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                PAGE,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            ) else {
                return true;
            };
            let known = rustix::mm::madvise(p, PAGE, rustix::mm::Advice::LinuxPopulateWrite)
                != Err(rustix::io::Errno::INVAL);
            let _ = rustix::mm::munmap(p, PAGE);
            known
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages of a mapping, from mincore(2).
    fn resident(ptr: *mut u8, len: usize) -> usize {
        let pages = len.div_ceil(PAGE);
        let mut v = vec![0u8; pages];
        // SAFETY: a page-aligned mapping of `len` bytes, one status byte per page.
        let r = unsafe { libc_mincore(ptr, len, v.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore");
        v.iter().filter(|&&b| b & 1 == 1).count()
    }

    unsafe extern "C" {
        #[link_name = "mincore"]
        fn libc_mincore(addr: *mut u8, len: usize, vec: *mut u8) -> i32;
    }

    #[test]
    fn populates_a_fresh_mapping_without_changing_it() {
        let len = 64 * PAGE;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap()
        .cast::<u8>();
        assert_eq!(resident(ptr, len), 0, "nothing touched yet");
        // SAFETY: inside the mapping above.
        unsafe { ptr.add(3 * PAGE).write(7) };
        // SAFETY: the mapping above; an unaligned start covers its whole first page.
        let how = unsafe { register(ptr.add(100), len - 100) }.unwrap();
        assert_eq!(how, Registered::Populated, "this kernel has POPULATE_WRITE");
        assert_eq!(resident(ptr, len), 64, "every page mapped");
        // SAFETY: the mapping above.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
        assert!(
            bytes
                .iter()
                .enumerate()
                .all(|(i, &b)| b == u8::from(i == 3 * PAGE) * 7)
        );
        // SAFETY: unmapping what was mapped.
        unsafe { rustix::mm::munmap(ptr.cast(), len) }.unwrap();
    }

    #[test]
    fn memory_that_cannot_be_written_is_an_error() {
        let len = 4 * PAGE;
        // SAFETY: a fresh inaccessible mapping, unmapped below.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::empty(),
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap()
        .cast::<u8>();
        // SAFETY: mapped, though not readable: the kernel refuses to populate it and nothing
        // reads it (the kernel knows the advice, so its EINVAL is about the mapping).
        let e = unsafe { register(ptr, len) }.unwrap_err();
        assert!(populate_write_known());
        assert!(matches!(e.raw_os_error(), Some(14 | 22)), "{e}");
        // SAFETY: unmapping what was mapped.
        unsafe { rustix::mm::munmap(ptr.cast(), len) }.unwrap();
    }
}
