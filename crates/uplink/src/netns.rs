//! Doing something inside another network namespace (a pod's): on a thread of its own that
//! enters the namespace with `setns(2)` and ends when the work is done, so that no other
//! thread of the daemon ever changes namespace. What the work creates there (a tap device, a
//! listening socket, a socket to configure an interface with) keeps that namespace for its
//! whole life, wherever its fd is used afterwards.

use std::io;
use std::path::{Path, PathBuf};

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

/// Where a network namespace given by name or path lives: a bare name is one of
/// `ip netns`'s (`/var/run/netns/NAME`), anything with a `/` a path (`/proc/PID/ns/net`, a
/// CNI runtime's bind mount).
pub fn netns_path(netns: &str) -> PathBuf {
    if netns.contains('/') {
        PathBuf::from(netns)
    } else {
        Path::new("/var/run/netns").join(netns)
    }
}

/// Why work in a namespace could not be done.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespace {path}: {source}")]
    Open { path: String, source: io::Error },
    #[error("{path} is no network namespace: {source}")]
    Enter { path: String, source: io::Error },
    #[error("the thread that entered network namespace {path} could not be started: {source}")]
    Thread { path: String, source: io::Error },
}

/// Runs `f` on a new thread inside the network namespace at `path`, and returns what it
/// returns. The namespace file is opened by the caller's thread (so relative paths and the
/// caller's mounts apply).
pub fn run_in<T: Send>(path: &Path, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
    let shown = path.display().to_string();
    let ns = std::fs::File::open(path).map_err(|source| NetnsError::Open {
        path: shown.clone(),
        source,
    })?;
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("vl_netns".into())
            .spawn_scoped(s, move || {
                move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&ns),
                    Some(LinkNameSpaceType::Network),
                )
                .map_err(|e| NetnsError::Enter {
                    path: shown.clone(),
                    source: e.into(),
                })?;
                Ok(f())
            })
            .map_err(|source| NetnsError::Thread {
                path: path.display().to_string(),
                source,
            })?;
        match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}
