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
pub mod devices;
pub mod metrics;
pub mod metrics_http;
pub mod rib;
pub mod server;
pub mod service;
pub mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use api::config::{Config, ConfigError, DEFAULT_CONFIG, default_config_text};

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
    #[error("{0}")]
    Metrics(String),
    #[error("{0}: the daemon stops, for the service manager to start it again")]
    WorkerDied(String),
}

/// The runtime directory the configuration asks for, or the default.
pub fn runtime_dir(cfg: &Config) -> PathBuf {
    cfg.daemon
        .runtime_dir
        .clone()
        .unwrap_or_else(api::runtime_dir)
}

/// What the front end's signal handlers set.
#[derive(Debug, Clone, Default)]
pub struct Signals {
    /// SIGTERM, SIGINT: stop.
    pub stop: Arc<AtomicBool>,
    /// SIGHUP: read the configuration file again and apply the differences.
    pub reload: Arc<AtomicBool>,
}

/// How a reload reads the configuration again: the file, with the command line's overrides
/// applied as they were at start (`None`: the daemon runs the embedded default).
pub type Reread<'a> = Option<&'a dyn Fn() -> Result<Config, ConfigError>>;

/// Runs the daemon until `signals.stop` is set. `reread` gives the configuration again on
/// `signals.reload`. `ready` is called
/// once the control socket accepts connections and every worker is pinned, with the
/// socket's path. Under systemd (`NOTIFY_SOCKET`) readiness, reloads and stopping are told
/// to it, and its watchdog (`WATCHDOG_USEC`) is fed from the control loop.
pub fn run(
    cfg: &Config,
    reread: Reread<'_>,
    signals: Signals,
    ready: impl FnOnce(&std::path::Path),
) -> Result<(), DaemonError> {
    raise_fd_limit();
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
    let mut server = server::Server::bind(&ctl_path, &cfg.daemon.control_socket)?;
    let mut control = control::Control::new(cfg, dir.clone())?;
    let metrics = match &cfg.daemon.metrics {
        Some(addr) => {
            Some(metrics::Exporter::start(addr, ctl_path.clone()).map_err(DaemonError::Metrics)?)
        }
        None => None,
    };
    tracing::info!(
        dir = %dir.display(),
        workers = control.workers(),
        "veclane running"
    );
    ready(&ctl_path);
    let mut service = service::Service::new();
    service.ready(&format!(
        "{} worker(s), control socket {}",
        control.workers(),
        ctl_path.display()
    ));
    let mut running = cfg.clone();
    let mut died = None;
    while !signals.stop.load(Ordering::Relaxed) {
        if signals.reload.swap(false, Ordering::Relaxed) {
            service.reloading();
            running = reload(&mut control, running, reread);
            service.ready("configuration reloaded");
        }
        control.tick();
        server.serve(&mut control, 20);
        // A worker stuck for good (control/watchdog.rs): systemd's watchdog restarts us.
        if control.healthy() {
            service.feed_watchdog();
        }
        // A worker that panicked is gone with its queues: stop rather than limp on.
        if let Some(why) = control.dead_worker() {
            tracing::error!(reason = %why, "a worker ended: stopping");
            died = Some(why);
            break;
        }
    }
    service.stopping();
    drop(metrics);
    control.shutdown();
    drop(server);
    let _ = std::fs::remove_file(&ctl_path);
    tracing::info!("veclane stopped");
    match died {
        Some(why) => Err(DaemonError::WorkerDied(why)),
        None => Ok(()),
    }
}

/// Raises the soft limit on open files to the hard one. A memif pod may hold hundreds of the
/// daemon's descriptors (regions, and an eventfd per ring), and the usual soft default
/// (1024) would run out at a handful of pods while the hard limit (the unit's
/// `LimitNOFILE`, or the system's) allows many more.
fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let l = getrlimit(Resource::Nofile);
    if l.current == l.maximum {
        return;
    }
    let raised = rustix::process::Rlimit {
        current: l.maximum,
        maximum: l.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::info!(
            from = l.current.unwrap_or(u64::MAX),
            to = l.maximum.unwrap_or(u64::MAX),
            "raised the open-file limit to the hard limit"
        ),
        Err(e) => tracing::warn!(reason = %e, "cannot raise the open-file limit"),
    }
}

/// Reads the configuration again and applies what changed; returns the configuration now
/// running.
fn reload(control: &mut control::Control, running: Config, reread: Reread<'_>) -> Config {
    let Some(reread) = reread else {
        tracing::warn!(
            "reload: the daemon runs the embedded default configuration; nothing to read"
        );
        return running;
    };
    let new = match reread() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(reason = %e, "reload refused: the file is not valid; nothing changed");
            return running;
        }
    };
    match control.reload(&running, &new) {
        control::reload::Reloaded::Applied(done) => {
            tracing::info!(changes = %done.join("; "), "configuration reloaded");
            new
        }
        control::reload::Reloaded::Partly { applied, failed } => {
            tracing::error!(
                changes = %applied.join("; "),
                failed = %failed.join("; "),
                "configuration reloaded in part"
            );
            new
        }
        control::reload::Reloaded::Refused(why) => {
            tracing::error!(
                cannot_apply_live = %why.join("; "),
                "reload refused: these changes need a restart; nothing changed"
            );
            running
        }
    }
}

#[cfg(test)]
mod tests {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

    /// A soft open-file limit below the hard one is raised to it.
    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_one() {
        let l = getrlimit(Resource::Nofile);
        let Some(hard) = l.maximum.filter(|&h| h > 256) else {
            panic!(
                "the hard open-file limit is {:?}: too low to test",
                l.maximum
            );
        };
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(256),
                maximum: Some(hard),
            },
        )
        .unwrap();
        super::raise_fd_limit();
        assert_eq!(getrlimit(Resource::Nofile).current, Some(hard));
    }
}
