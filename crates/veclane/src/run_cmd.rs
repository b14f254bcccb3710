//! `veclane run`: the daemon in the foreground until SIGTERM or SIGINT.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Configuration file (TOML). Without one the daemon starts on the embedded default: two
    /// memif master interfaces on memif.sock in the runtime directory, routed to each other.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Runtime directory (sockets); overrides the file. Default: $XDG_RUNTIME_DIR/veclane,
    /// else /run/veclane.
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// Print the embedded default configuration and exit.
    #[arg(long)]
    print_default_config: bool,
    /// Validate this configuration file, print every problem with its line and column, and
    /// exit (status 0 when it is valid).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["config", "print_default_config"])]
    check_config: Option<PathBuf>,
}

pub fn run(a: RunArgs) -> anyhow::Result<()> {
    if a.print_default_config {
        print!("{}", daemon::default_config_text());
        return Ok(());
    }
    if let Some(p) = &a.check_config {
        let c = daemon::Config::load(p)?;
        println!(
            "{}: valid: {} worker(s), {} interface(s) ({}), {} route(s), {} neighbour(s)",
            p.display(),
            c.daemon.workers.len().max(1),
            c.interface.len(),
            c.interface_names().join(", "),
            c.route.len(),
            c.neighbor.len()
        );
        return Ok(());
    }
    // The command line's override wins over the file, at start and on every reload (SIGHUP).
    let overridden = |mut c: daemon::Config| {
        if let Some(d) = &a.runtime_dir {
            c.daemon.runtime_dir = Some(d.clone());
        }
        c
    };
    let cfg = overridden(match &a.config {
        Some(p) => daemon::Config::load(p)?,
        None => daemon::Config::embedded_default(),
    });
    let reread = a
        .config
        .as_deref()
        .map(|p| move || daemon::Config::load(p).map(overridden));
    let signals = daemon::Signals::default();
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, signals.stop.clone())
            .context("installing signal handlers")?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, signals.reload.clone())
        .context("installing signal handlers")?;
    let reread_dyn: daemon::Reread<'_> = reread
        .as_ref()
        .map(|f| f as &dyn Fn() -> Result<daemon::Config, daemon::ConfigError>);
    daemon::run(&cfg, reread_dyn, signals, |ctl| {
        tracing::info!(control_socket = %ctl.display(), "ready");
    })?;
    Ok(())
}
