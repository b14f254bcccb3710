//! `veclane copy-engine check`: the copy engines' self-test (`copy_engine::check`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use copy_engine::Kind;
use copy_engine::check::{self, CheckConfig};
use copy_engine::dsa::Source;

#[derive(Args, Debug)]
pub struct CopyEngineArgs {
    #[command(subcommand)]
    cmd: CopyEngineCmd,
}

#[derive(Subcommand, Debug)]
enum CopyEngineCmd {
    /// Copy patterned buffers of every size class through each backend, verify every byte,
    /// and print throughput and batch latency beside the CPU engine. Without a usable DSA
    /// work queue it says exactly why DSA was not tested. Fails if any byte is wrong.
    Check(CheckArgs),
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// Backends to test besides the CPU (always measured, as the reference).
    #[arg(long, value_delimiter = ',', default_values_t = [Kind::Cpu, Kind::Thread, Kind::Dsa])]
    engines: Vec<Kind>,
    /// The DSA work queue to test (`/dev/dsa/wq0.0` or `wq0.0`); default the first usable
    /// one discovery finds.
    #[arg(long)]
    wq: Option<PathBuf>,
    /// Test the engine on the software model of a work queue instead of a device (it checks
    /// the engine, not a device; its speed means nothing).
    #[arg(long, conflicts_with = "wq")]
    model: bool,
    /// Copy sizes in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = [64u32, 256, 512, 1500, 4096, 9000, 65536])]
    sizes: Vec<u32>,
    /// Copies per batch.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Milliseconds measured per size and backend.
    #[arg(long, default_value_t = 200)]
    ms: u64,
    /// DSA: copies shorter than this many bytes are made on the CPU, as the daemon's
    /// `dsa-inline-below` (0 sends every copy to the device).
    #[arg(long, default_value_t = 256)]
    inline_below: u32,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: CopyEngineArgs) -> anyhow::Result<()> {
    let CopyEngineCmd::Check(c) = a.cmd;
    anyhow::ensure!(c.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(
        c.sizes.iter().all(|&s| s > 0),
        "--sizes must all be at least 1"
    );
    let cfg = CheckConfig {
        kinds: c.engines,
        dsa: match (c.model, c.wq) {
            (true, _) => Source::Model { fault_every: 0 },
            (false, Some(p)) => Source::Queue(p),
            (false, None) => Source::Discover,
        },
        sizes: c.sizes,
        batch: c.batch,
        time: Duration::from_millis(c.ms),
        inline_below: c.inline_below,
    };
    let results = check::run(&cfg);
    if c.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", check::render(&results));
    }
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.kind.to_string())
        .collect();
    anyhow::ensure!(
        failed.is_empty(),
        "bytes copied wrong by: {}",
        failed.join(", ")
    );
    Ok(())
}
