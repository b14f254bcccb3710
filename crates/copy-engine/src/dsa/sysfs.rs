//! Finding DSA work queues a process may use: the idxd driver's sysfs tree
//! (`/sys/bus/dsa/devices/`, `Documentation/ABI/stable/sysfs-driver-dma-idxd` in the kernel)
//! and its character devices (`/dev/dsa/wq<m>.<n>`), read directly as DPDK and VPP do. Both
//! roots can be moved (`VECLANE_DSA_SYSFS`, `VECLANE_DSA_DEV`), so that a fake tree stands in
//! for a device in tests. Every work queue found is either usable or listed with the reason it
//! is not, so that `auto` selection and `veclane copy-engine check` can say why DSA was not
//! used.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The sysfs directory of the DSA bus.
pub const SYSFS_ROOT: &str = "/sys/bus/dsa/devices";
/// Where the work queues' character devices are.
pub const DEV_ROOT: &str = "/dev/dsa";

/// How a work queue takes descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqMode {
    /// One owner; descriptors go in with MOVDIR64B (or `write()`), never refused.
    Dedicated,
    /// Many owners; descriptors go in with ENQCMD (or `write()`), which may be refused when
    /// the queue is full.
    Shared,
}

/// A usable work queue: enabled, of type `user`, on an enabled device, its character device
/// present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkQueue {
    /// `wq<m>.<n>`.
    pub id: String,
    /// `dsa<m>`.
    pub device: String,
    /// The queue's `name` attribute (the administrator's label for it).
    pub name: String,
    pub dev_path: PathBuf,
    pub mode: WqMode,
    /// Descriptors that may be outstanding at once (a batch counts one).
    pub size: u32,
    pub max_batch_size: u32,
    /// The hardware refuses larger transfers: longer copies are split.
    pub max_transfer_size: u64,
    pub block_on_fault: bool,
    /// The device's NUMA node (-1: none).
    pub numa_node: i32,
    /// The device's version (`0x100`, `0x200`): 1.0 allows no batch through `write()`.
    pub version: u32,
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    pub usable: Vec<WorkQueue>,
    /// Work queues (or devices) that cannot be used, and why.
    pub unusable: Vec<(String, String)>,
    /// Why there is nothing at all to look at, if so.
    pub none: Option<String>,
}

impl Discovery {
    /// One line saying why no work queue is usable (for logs and `auto` selection).
    pub fn why_none(&self) -> String {
        if let Some(n) = &self.none {
            return n.clone();
        }
        if self.unusable.is_empty() {
            return "no DSA work queue is configured (accel-config creates them)".into();
        }
        self.unusable
            .iter()
            .map(|(what, why)| format!("{what}: {why}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn attr(dir: &Path, name: &str) -> Option<String> {
    fs::read_to_string(dir.join(name))
        .ok()
        .map(|s| s.trim().to_string())
}

/// A decimal or `0x` hexadecimal number.
fn num(s: Option<String>) -> Option<u64> {
    let s = s?;
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Searches the roots named by `VECLANE_DSA_SYSFS` and `VECLANE_DSA_DEV`, or the system's.
pub fn discover_default() -> Discovery {
    let sysfs =
        std::env::var_os("VECLANE_DSA_SYSFS").map_or_else(|| SYSFS_ROOT.into(), PathBuf::from);
    let dev = std::env::var_os("VECLANE_DSA_DEV").map_or_else(|| DEV_ROOT.into(), PathBuf::from);
    discover(&sysfs, &dev)
}

/// Searches `sysfs` (the DSA bus's devices directory) for work queues, whose character
/// devices are under `dev`.
pub fn discover(sysfs: &Path, dev: &Path) -> Discovery {
    let mut d = Discovery::default();
    let entries = match fs::read_dir(sysfs) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            d.none = Some(format!(
                "no DSA device: {} does not exist (no device, or the idxd driver is not loaded)",
                sysfs.display()
            ));
            return d;
        }
        Err(e) => {
            d.none = Some(format!("cannot read {}: {e}", sysfs.display()));
            return d;
        }
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let wqs: Vec<&String> = names.iter().filter(|n| n.starts_with("wq")).collect();
    if !names.iter().any(|n| n.starts_with("dsa")) {
        d.none = Some(format!("no DSA device under {}", sysfs.display()));
        return d;
    }
    for id in wqs {
        let dir = sysfs.join(id);
        let Some(m) = id
            .strip_prefix("wq")
            .and_then(|s| s.split_once('.'))
            .map(|(m, _)| m.to_string())
        else {
            continue;
        };
        let device = format!("dsa{m}");
        let ddir = sysfs.join(&device);
        let mut refuse = |why: String| d.unusable.push((id.clone(), why));
        if attr(&ddir, "state").as_deref() != Some("enabled") {
            refuse(format!("its device {device} is not enabled"));
            continue;
        }
        match attr(&dir, "state").as_deref() {
            Some("enabled") => {}
            s => {
                refuse(format!("not enabled (state {})", s.unwrap_or("unknown")));
                continue;
            }
        }
        match attr(&dir, "type").as_deref() {
            Some("user") => {}
            t => {
                refuse(format!(
                    "a {} work queue, not a user one (accel-config --type=user)",
                    t.unwrap_or("unknown")
                ));
                continue;
            }
        }
        let mode = match attr(&dir, "mode").as_deref() {
            Some("dedicated") => WqMode::Dedicated,
            Some("shared") => WqMode::Shared,
            m => {
                refuse(format!("unknown mode {}", m.unwrap_or("(none)")));
                continue;
            }
        };
        let dev_path = dev.join(id);
        if !dev_path.exists() {
            refuse(format!("no character device {}", dev_path.display()));
            continue;
        }
        let (Some(size), Some(max_batch_size), Some(max_transfer_size)) = (
            num(attr(&dir, "size")),
            num(attr(&dir, "max_batch_size")),
            num(attr(&dir, "max_transfer_size")),
        ) else {
            refuse("size, max_batch_size or max_transfer_size unreadable".into());
            continue;
        };
        if size == 0 || max_transfer_size == 0 {
            refuse("size or max_transfer_size is 0".into());
            continue;
        }
        d.usable.push(WorkQueue {
            id: id.clone(),
            name: attr(&dir, "name").unwrap_or_default(),
            dev_path,
            mode,
            size: u32::try_from(size).unwrap_or(u32::MAX),
            max_batch_size: u32::try_from(max_batch_size).unwrap_or(u32::MAX),
            max_transfer_size,
            block_on_fault: attr(&dir, "block_on_fault").as_deref() == Some("1"),
            numa_node: attr(&ddir, "numa_node")
                .and_then(|s| s.parse().ok())
                .unwrap_or(-1),
            version: num(attr(&ddir, "version")).map_or(0, |v| v as u32),
            device,
        });
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs tree and /dev under a temporary directory.
    struct Tree {
        root: PathBuf,
    }

    impl Tree {
        fn new(tag: &str) -> Tree {
            let root =
                std::env::temp_dir().join(format!("veclane-dsa-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(root.join("sys")).unwrap();
            fs::create_dir_all(root.join("dev")).unwrap();
            Tree { root }
        }

        fn sys(&self) -> PathBuf {
            self.root.join("sys")
        }

        fn dev(&self) -> PathBuf {
            self.root.join("dev")
        }

        fn device(&self, m: u32, state: &str) {
            let d = self.sys().join(format!("dsa{m}"));
            fs::create_dir_all(&d).unwrap();
            for (k, v) in [("state", state), ("version", "0x100"), ("numa_node", "0")] {
                fs::write(d.join(k), format!("{v}\n")).unwrap();
            }
        }

        fn wq(&self, id: &str, state: &str, ty: &str, mode: &str, with_dev: bool) {
            let d = self.sys().join(id);
            fs::create_dir_all(&d).unwrap();
            for (k, v) in [
                ("state", state),
                ("type", ty),
                ("mode", mode),
                ("name", "dp_test"),
                ("size", "16"),
                ("max_batch_size", "32"),
                ("max_transfer_size", "2097152"),
                ("block_on_fault", "0"),
            ] {
                fs::write(d.join(k), format!("{v}\n")).unwrap();
            }
            if with_dev {
                fs::write(self.dev().join(id), "").unwrap();
            }
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    #[test]
    fn no_bus_no_device() {
        let t = Tree::new("nobus");
        let d = discover(&t.root.join("missing"), &t.dev());
        assert!(d.usable.is_empty());
        assert!(d.why_none().contains("does not exist"), "{}", d.why_none());
        let d = discover(&t.sys(), &t.dev());
        assert!(d.why_none().contains("no DSA device"), "{}", d.why_none());
    }

    #[test]
    fn each_unusable_queue_says_why() {
        let t = Tree::new("unusable");
        t.device(0, "enabled");
        t.device(1, "disabled");
        t.wq("wq0.0", "disabled", "user", "dedicated", true);
        t.wq("wq0.1", "enabled", "kernel", "dedicated", true);
        t.wq("wq0.2", "enabled", "user", "dedicated", false);
        t.wq("wq1.0", "enabled", "user", "shared", true);
        let d = discover(&t.sys(), &t.dev());
        assert!(d.usable.is_empty());
        let why: Vec<String> = d
            .unusable
            .iter()
            .map(|(w, r)| format!("{w}: {r}"))
            .collect();
        assert_eq!(why.len(), 4, "{why:?}");
        for want in [
            "wq0.0: not enabled",
            "wq0.1: a kernel work queue",
            "wq0.2: no character device",
            "wq1.0: its device dsa1 is not enabled",
        ] {
            assert!(why.iter().any(|w| w.starts_with(want)), "{want}: {why:?}");
        }
        assert!(d.why_none().contains("wq0.1: a kernel work queue"));
    }

    #[test]
    fn dedicated_and_shared_user_queues_are_found() {
        let t = Tree::new("usable");
        t.device(0, "enabled");
        t.wq("wq0.0", "enabled", "user", "dedicated", true);
        t.wq("wq0.1", "enabled", "user", "shared", true);
        let d = discover(&t.sys(), &t.dev());
        assert!(d.unusable.is_empty(), "{:?}", d.unusable);
        let got: Vec<(&str, WqMode)> = d.usable.iter().map(|w| (w.id.as_str(), w.mode)).collect();
        assert_eq!(
            got,
            [("wq0.0", WqMode::Dedicated), ("wq0.1", WqMode::Shared)]
        );
        let w = &d.usable[0];
        assert_eq!(
            (
                w.device.as_str(),
                w.size,
                w.max_batch_size,
                w.max_transfer_size,
                w.version
            ),
            ("dsa0", 16, 32, 2 << 20, 0x100)
        );
        assert_eq!(w.dev_path, t.dev().join("wq0.0"));
        assert_eq!(w.name, "dp_test");
    }
}
