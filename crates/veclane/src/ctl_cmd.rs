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
    let req = match api::cli::parse(&words) {
        Ok(r) => r,
        Err(e) => bail!("{e}"),
    };
    let path = a
        .socket
        .unwrap_or_else(|| api::runtime_dir().join(api::CONTROL_SOCKET));
    let mut c = api::Client::connect(&path)?;
    let reply = c.call(&req)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
    } else {
        print!("{}", api::cli::format(&reply));
    }
    Ok(())
}
