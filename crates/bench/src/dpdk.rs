//! What every DPDK application the harness starts shares: EAL arguments without hugepages or
//! PCI, `net_memif` vdevs, port statistics, and the installed version.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The installed DPDK version, as the package manager states it.
pub fn version() -> Option<String> {
    let o = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "dpdk"])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// EAL's runtime directory for `file_prefix` (as `eal_get_runtime_dir` computes it).
pub(crate) fn runtime_dir(file_prefix: &str) -> PathBuf {
    let base = if rustix::process::geteuid().is_root() {
        PathBuf::from("/var/run")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp"))
    };
    base.join("dpdk").join(file_prefix)
}

/// Removes the runtime files (config, fbarrays) EAL leaves behind when an application with
/// `file_prefix`, ours alone, has exited. An empty prefix names no instance (it would be
/// every DPDK application's directory) and is left alone.
pub(crate) fn remove_runtime_dir(file_prefix: &str) {
    if !file_prefix.is_empty() {
        let _ = std::fs::remove_dir_all(runtime_dir(file_prefix));
    }
}

/// One memif port's options.
#[derive(Debug, Clone)]
pub struct MemifPort {
    pub server: bool,
    pub socket: PathBuf,
    pub id: u32,
    pub rsize_log2: u8,
    pub bsize: u32,
    pub secret: Option<String>,
}

impl MemifPort {
    /// Port `id` on `socket`, without a secret: DPDK listens on the socket if `server`, else
    /// connects to it; rings of 2^`rsize_log2` slots, buffers of `bsize` bytes.
    pub fn new(server: bool, socket: &Path, id: u32, rsize_log2: u8, bsize: u32) -> MemifPort {
        MemifPort {
            server,
            socket: socket.to_path_buf(),
            id,
            rsize_log2,
            bsize,
            secret: None,
        }
    }

    pub fn vdev(&self, name: &str) -> String {
        let mut v = format!(
            "{name},role={},socket={},socket-abstract=no,id={},rsize={},bsize={}",
            if self.server { "server" } else { "client" },
            self.socket.display(),
            self.id,
            self.rsize_log2,
            self.bsize
        );
        if let Some(s) = &self.secret {
            v.push_str(&format!(",secret={s}"));
        }
        v
    }
}

/// The EAL arguments of every DPDK application we start: no hugepages (`--no-huge -m 1024`),
/// no PCI scan, memif PMD logs at info (connections show in the log), the file prefix `prefix`
/// (one per process, so that instances do not share runtime files), lcores on CPUs
/// `main_lcore` and `other_lcores` with `main_lcore` as the main one, and `ports` as vdevs
/// `net_memif0..` in order (DPDK port ids follow). Lcore ids are the CPU numbers (`-l`), unless
/// a forwarding lcore must share the main lcore's CPU: then the lcores are numbered from 0, the
/// main one first, and mapped onto their CPUs (`--lcores 0@M,1@A,...`).
pub fn eal_args(
    prefix: &str,
    main_lcore: usize,
    other_lcores: &[usize],
    ports: &[MemifPort],
) -> Vec<String> {
    let shared = other_lcores.contains(&main_lcore);
    let mut v: Vec<String> = [
        "--no-huge",
        "-m",
        "1024",
        "--no-pci",
        "--log-level",
        "pmd.net.memif:info",
    ]
    .map(String::from)
    .to_vec();
    v.push(format!("--file-prefix={prefix}"));
    if shared {
        let map: Vec<String> = std::iter::once(main_lcore)
            .chain(other_lcores.iter().copied())
            .enumerate()
            .map(|(id, cpu)| format!("{id}@{cpu}"))
            .collect();
        v.push(format!("--lcores={}", map.join(",")));
        v.push("--main-lcore=0".into());
    } else {
        let mut lcores = vec![main_lcore];
        lcores.extend_from_slice(other_lcores);
        lcores.sort_unstable();
        lcores.dedup();
        let lcores: Vec<String> = lcores.iter().map(usize::to_string).collect();
        v.push("-l".into());
        v.push(lcores.join(","));
        v.push(format!("--main-lcore={main_lcore}"));
    }
    for (i, p) in ports.iter().enumerate() {
        v.push(format!("--vdev={}", p.vdev(&format!("net_memif{i}"))));
    }
    v
}

/// `show port stats` numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_missed: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eal_arguments() {
        let port = |id| MemifPort::new(true, Path::new("/tmp/x/memif.sock"), id, 10, 2048);
        assert_eq!(
            eal_args("p1", 1, &[0], &[port(0), port(1)]).join(" "),
            "--no-huge -m 1024 --no-pci --log-level pmd.net.memif:info --file-prefix=p1 \
             -l 0,1 --main-lcore=1 \
             --vdev=net_memif0,role=server,socket=/tmp/x/memif.sock,socket-abstract=no,id=0,rsize=10,bsize=2048 \
             --vdev=net_memif1,role=server,socket=/tmp/x/memif.sock,socket-abstract=no,id=1,rsize=10,bsize=2048"
        );
        assert!(
            eal_args("p", 1, &[], &[])
                .join(" ")
                .contains("-l 1 --main-lcore=1")
        );
        // A forwarding lcore on the main lcore's CPU: lcores numbered, then mapped.
        assert!(
            eal_args("p", 0, &[1, 0], &[])
                .join(" ")
                .contains("--lcores=0@0,1@1,2@0 --main-lcore=0")
        );
    }
}
