//! `veclane ctl`: VPP-like commands against the running daemon.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

#[derive(Args, Debug)]
pub struct CtlArgs {
    /// Control socket. Default: ctl.sock in $XDG_RUNTIME_DIR/veclane, else /run/veclane.
    #[arg(long, short)]
    socket: Option<PathBuf>,
    /// Print the daemon's reply as JSON.
    #[arg(long)]
    json: bool,
    /// The command, e.g. `show interface` (`help` lists them all).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    words: Vec<String>,
}

pub fn run(a: CtlArgs) -> anyhow::Result<()> {
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    if words.is_empty() || words == ["help"] || words == ["?"] {
        print!("{}", api::cli::help());
        return Ok(());
    }
    let path = a
        .socket
        .clone()
        .unwrap_or_else(|| api::runtime_dir().join(api::CONTROL_SOCKET));
    if words.first() == Some(&"monitor") {
        return monitor(&path, &words[1..]);
    }
    let req = match api::cli::parse(&words) {
        Ok(r) => r,
        Err(e) => bail!("{e}"),
    };
    let mut c = api::Client::connect(&path)?;
    let reply = c.call(&req)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
    } else {
        print!("{}", api::cli::format(&reply));
    }
    Ok(())
}

/// `monitor [interval SECS] [count N]`: rates between readings, redrawn on a terminal, as
/// lines otherwise.
fn monitor(path: &std::path::Path, words: &[&str]) -> anyhow::Result<()> {
    use std::io::{IsTerminal, Write};
    let (mut interval, mut count) = (1.0f64, None::<u64>);
    let mut w = words.iter();
    while let Some(&k) = w.next() {
        let v = w
            .next()
            .ok_or_else(|| anyhow::anyhow!("monitor: `{k}` needs a value"))?;
        match k {
            "interval" => {
                interval = v
                    .parse()
                    .ok()
                    .filter(|&s: &f64| (0.1..=3600.0).contains(&s))
                    .ok_or_else(|| {
                        anyhow::anyhow!("monitor: interval {v:?}: seconds from 0.1 to 3600")
                    })?
            }
            "count" => {
                count = Some(
                    v.parse()
                        .map_err(|_| anyhow::anyhow!("monitor: count {v:?} is not a number"))?,
                )
            }
            _ => bail!("monitor: unknown `{k}`: usage: monitor [interval SECS] [count N]"),
        }
    }
    let mut c = api::Client::connect(path)?;
    let mut read = || -> anyhow::Result<api::cli::monitor::Sample> {
        let interfaces = match c.call(&api::Request::ShowInterface { name: None })? {
            api::Reply::Interfaces { interfaces } => interfaces,
            r => bail!("unexpected reply {r:?}"),
        };
        let workers = match c.call(&api::Request::ShowRuntime)? {
            api::Reply::Runtime { workers } => workers,
            r => bail!("unexpected reply {r:?}"),
        };
        Ok(api::cli::monitor::Sample {
            interfaces,
            workers,
        })
    };
    let screen = std::io::stdout().is_terminal();
    let mut prev = read()?;
    let mut t = std::time::Instant::now();
    let mut shown = 0u64;
    while count.is_none_or(|n| shown < n) {
        std::thread::sleep(std::time::Duration::from_secs_f64(interval));
        let cur = read()?;
        let secs = t.elapsed().as_secs_f64();
        t = std::time::Instant::now();
        let at = humantime_now();
        let text = api::cli::monitor::render(&prev, &cur, secs, screen, &at);
        let mut out = std::io::stdout().lock();
        if screen {
            // Home and clear, then the screen: one write, so it does not flicker.
            write!(out, "\x1b[H\x1b[2J{text}")?;
        } else {
            write!(out, "{text}")?;
        }
        out.flush()?;
        prev = cur;
        shown += 1;
    }
    Ok(())
}

/// The wall-clock time as `HH:MM:SS` (UTC).
fn humantime_now() -> String {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{:02}:{:02}:{:02}", s / 3600 % 24, s / 60 % 60, s % 60)
}
