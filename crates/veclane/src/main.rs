//! `veclane`: the command-line front end. Argument parsing and printing live here; the work is
//! done by the library crates. Built without the default `harness` feature it is the production
//! daemon (`run`, `ctl`) and links neither the generator nor the benchmark harness.

#![forbid(unsafe_code)]

#[cfg(feature = "harness")]
mod bench_cmd;
mod copy_engine_cmd;
mod ctl_cmd;
#[cfg(feature = "harness")]
mod gen_cmd;
mod run_cmd;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "veclane",
    version,
    about = "Userspace vector packet dataplane for container networks"
)]
struct Cli {
    /// How log lines are written to stderr: `text` for people, `json` (one object per line,
    /// fields `timestamp`, `level`, `target`, `message` and the event's own, such as
    /// `interface`, `peer_pid`, `reason`) for log collectors. The level is VECLANE_LOG's
    /// (tracing's env-filter syntax; default `info` for `run`, `warn` otherwise).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the daemon (foreground) on a configuration file or the embedded default.
    Run(run_cmd::RunArgs),
    /// Talk to the running daemon: `veclane ctl show interface`, `veclane ctl help`.
    Ctl(ctl_cmd::CtlArgs),
    /// The copy engines: `veclane copy-engine check` tests each backend (DSA included, where a
    /// work queue is usable) and measures it beside the CPU.
    CopyEngine(copy_engine_cmd::CopyEngineArgs),
    /// Generate and/or sink UDP traffic over a memif interface.
    #[cfg(feature = "harness")]
    Gen(gen_cmd::GenArgs),
    /// Run a benchmark scenario (default: p2p over all frame sizes, veclane and testpmd).
    #[cfg(feature = "harness")]
    Bench(Box<bench_cmd::BenchArgs>),
    /// Write the man pages and shell completions generated from these definitions (for
    /// packaging: scripts/package.sh).
    #[command(hide = true)]
    GenerateAssets {
        /// Directory to write `man/` and `completions/` under.
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let level = if matches!(cli.cmd, Cmd::Run(_)) {
        "info"
    } else {
        "warn"
    };
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("VECLANE_LOG").unwrap_or_else(|_| level.into());
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => log.init(),
        LogFormat::Json => log
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
    let r = match cli.cmd {
        Cmd::Run(a) => run_cmd::run(a),
        Cmd::Ctl(a) => ctl_cmd::run(a),
        Cmd::CopyEngine(a) => copy_engine_cmd::run(a),
        #[cfg(feature = "harness")]
        Cmd::Gen(a) => gen_cmd::run(a),
        #[cfg(feature = "harness")]
        Cmd::Bench(a) => bench_cmd::run(*a),
        Cmd::GenerateAssets { out } => generate_assets(&out),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("veclane: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Man pages (`veclane.1`, `veclane-run.1`, ...) and completions for bash, zsh and fish,
/// from the clap definitions of this build.
fn generate_assets(out: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    use clap::CommandFactory;
    let man = out.join("man");
    let comp = out.join("completions");
    std::fs::create_dir_all(&man).with_context(|| format!("creating {}", man.display()))?;
    std::fs::create_dir_all(&comp).with_context(|| format!("creating {}", comp.display()))?;
    let cmd = Cli::command();
    clap_mangen::generate_to(cmd.clone(), &man).context("writing the man pages")?;
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        clap_complete::generate_to(shell, &mut cmd.clone(), "veclane", &comp)
            .with_context(|| format!("writing the {shell} completion"))?;
    }
    Ok(())
}
