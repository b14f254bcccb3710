//! The veclane daemon (`veclane run`): reads its configuration (or starts on the embedded
//! default), creates its runtime directory, starts one pinned worker per configured core,
//! creates the interfaces, and then serves the control API on `ctl.sock` in the runtime
//! directory until asked to stop (SIGTERM in the front end), when it stops the workers and
//! removes its sockets.
//!
//! Threads: the calling thread becomes the control thread (memif handshakes, tables, API);
//! workers are described in [`worker`].

#![forbid(unsafe_code)]

pub mod control;
pub mod rib;
pub mod server;
pub mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use api::config::{Config, ConfigError, DEFAULT_CONFIG};

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot create the runtime directory {path}: {source}")]
    RuntimeDir {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Server(#[from] server::ServerError),
    #[error(transparent)]
    Control(#[from] control::ControlError),
}

/// The runtime directory the configuration asks for, or the default.
pub fn runtime_dir(cfg: &Config) -> PathBuf {
    cfg.daemon
        .runtime_dir
        .clone()
        .unwrap_or_else(api::runtime_dir)
}

/// Runs the daemon until `stop` is set. `ready` is called once the control socket accepts
/// connections, with its path.
pub fn run(
    cfg: &Config,
    stop: Arc<AtomicBool>,
    ready: impl FnOnce(&std::path::Path),
) -> Result<(), DaemonError> {
    let dir = runtime_dir(cfg);
    std::fs::create_dir_all(&dir).map_err(|source| DaemonError::RuntimeDir {
        path: dir.display().to_string(),
        source,
    })?;
    if let Some(c) = cfg.daemon.main_core {
        let mut set = rustix::thread::CpuSet::new();
        set.set(c);
        if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
            tracing::warn!(core = c, "cannot pin the control thread: {e}");
        }
    }
    let ctl_path = dir.join(api::CONTROL_SOCKET);
    let mut server = server::Server::bind(&ctl_path)?;
    let mut control = control::Control::new(cfg, dir.clone())?;
    tracing::info!(
        dir = %dir.display(),
        workers = control.workers(),
        "veclane running"
    );
    ready(&ctl_path);
    while !stop.load(Ordering::Relaxed) {
        control.tick();
        server.serve(&mut control, 20);
    }
    control.shutdown();
    drop(server);
    let _ = std::fs::remove_file(&ctl_path);
    tracing::info!("veclane stopped");
    Ok(())
}
