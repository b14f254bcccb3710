//! `veclane gen`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use memif::{InterfaceConfig, SocketPath};
use trafgen::{FrameSpec, GenConfig, GenReport, Role};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoleArg {
    /// Listen and copy (the switch's receive path).
    Primary,
    /// Connect and write frames in place in shared memory (zero-copy).
    Secondary,
}

#[derive(Args, Debug)]
pub struct GenArgs {
    /// memif socket: a path, or @name for an abstract socket.
    #[arg(long)]
    socket: String,
    #[arg(long, value_enum, default_value = "secondary")]
    role: RoleArg,
    /// memif interface id.
    #[arg(long, default_value_t = 0)]
    id: u32,
    /// Loop mode: also connect interface id N on the same socket and receive there what the
    /// device under test forwarded from --id (one loop, one core, sends and receives).
    #[arg(long, conflicts_with_all = ["tx_only", "rx_only"])]
    rx_id: Option<u32>,
    #[arg(long)]
    secret: Option<String>,
    /// Frame size in bytes (Ethernet header to payload end, no FCS), 64..9216.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Send rate in packets per second (e.g. 1e6); flat out when absent.
    #[arg(long)]
    rate: Option<f64>,
    /// With --rate, act as a port on a wire: frames the ring has no room for are lost (and
    /// counted) instead of retried, so the offered load stays what was asked for.
    #[arg(long, requires = "rate")]
    drop_when_full: bool,
    /// Frames to send (default: unlimited within --duration).
    #[arg(long)]
    count: Option<u64>,
    /// Seconds to send; with --rx-only, the longest to listen.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Number of flows (UDP source ports).
    #[arg(long, default_value_t = 1)]
    flows: u16,
    /// Number of destination addresses, counting up from the default 10.10.2.2; with
    /// --flows, frames cycle through every (port, address) pair.
    #[arg(long, default_value_t = 1)]
    dst_ips: u16,
    /// Source MAC of the frames sent (default 02:00:00:00:00:01).
    #[arg(long, value_parser = parse_mac)]
    src_mac: Option<api::MacAddr>,
    /// Destination MAC (default 02:00:00:00:00:02): the switch's interface.
    #[arg(long, value_parser = parse_mac)]
    dst_mac: Option<api::MacAddr>,
    /// Source IPv4 address (default 10.10.1.2).
    #[arg(long)]
    src_ip: Option<std::net::Ipv4Addr>,
    /// First destination IPv4 address (default 10.10.2.2).
    #[arg(long)]
    dst_ip: Option<std::net::Ipv4Addr>,
    /// Frames per burst, 1..256.
    #[arg(long, default_value_t = 64)]
    burst: usize,
    /// At most this many frames in flight, sent and not yet back (loop mode, a closed loop):
    /// a device under test then finds at most this many at a poll, as when it is not
    /// overloaded. Frames not back 200 ms after the last that came back count as lost.
    #[arg(long, requires = "rx_id", value_parser = clap::value_parser!(u64).range(1..))]
    window: Option<u64>,
    /// Only send.
    #[arg(long, conflicts_with = "rx_only")]
    tx_only: bool,
    /// Only receive (a sink). It sleeps on the ring's interrupt whenever the ring is empty,
    /// so that it shares a CPU well (see --rx-poll).
    #[arg(long)]
    rx_only: bool,
    /// With --rx-only, busy-poll instead of sleeping when idle: for a sink pinned (--cpu) to
    /// a CPU of its own, where polling saves the wake-up.
    #[arg(long, requires = "rx_only")]
    rx_poll: bool,
    /// Do not read the timestamps of received frames: no latency in the report, about 15
    /// instructions a frame less (what the benchmarks' throughput trials do).
    #[arg(long, conflicts_with = "tx_only")]
    no_latency: bool,
    /// Read every frame of ours that comes back whole and check the bytes after its probe
    /// against what was sent; frames that differ are counted as corrupt (the exit status is
    /// then 1).
    #[arg(long, conflicts_with = "tx_only")]
    check_payload: bool,
    /// Queue pairs (secondary: requested; primary: most accepted).
    #[arg(long, default_value_t = 1)]
    queues: u16,
    /// log2 of the ring size, 1..14.
    #[arg(long, default_value_t = 10)]
    ring_log2: u8,
    /// Shared buffer size in bytes (secondary).
    #[arg(long, default_value_t = 2048)]
    buffer_size: u32,
    /// Pin to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Seconds to wait for the peer.
    #[arg(long, default_value_t = 10.0)]
    connect_timeout: f64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_mac(s: &str) -> Result<api::MacAddr, String> {
    api::parse_mac(s).map_err(|e| e.to_string())
}

fn secs(name: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v >= 0.0) {
        bail!("--{name} {v} must be a non-negative number of seconds");
    }
    Ok(Duration::from_secs_f64(v))
}

pub fn run(a: GenArgs) -> anyhow::Result<()> {
    let iface = |id: u32| InterfaceConfig {
        id,
        name: format!("gen{id}"),
        secret: a.secret.clone(),
        s2m_rings: a.queues,
        m2s_rings: a.queues,
        log2_ring_size: a.ring_log2,
        buffer_size: a.buffer_size,
        ..Default::default()
    };
    let cfg = GenConfig {
        role: match a.role {
            RoleArg::Primary => Role::Primary,
            RoleArg::Secondary => Role::Secondary,
        },
        socket: SocketPath::parse(&a.socket),
        iface: iface(a.id),
        rx_iface: a.rx_id.map(iface),
        spec: {
            let d = FrameSpec::default();
            FrameSpec {
                size: a.size,
                flows: a.flows,
                dst_ips: a.dst_ips,
                src_mac: a.src_mac.unwrap_or(d.src_mac),
                dst_mac: a.dst_mac.unwrap_or(d.dst_mac),
                src_ip: a.src_ip.unwrap_or(d.src_ip),
                dst_ip: a.dst_ip.unwrap_or(d.dst_ip),
                ..d
            }
        },
        send: !a.rx_only,
        receive: !a.tx_only,
        rate_pps: a.rate,
        drop_when_full: a.drop_when_full,
        burst: a.burst,
        window: a.window,
        count: a.count,
        duration: secs("duration", a.duration)?,
        connect_timeout: secs("connect-timeout", a.connect_timeout)?,
        cpu: a.cpu,
        idle_sleep: !a.rx_poll,
        latency: !a.no_latency,
        check_payload: a.check_payload,
        ..Default::default()
    };
    cfg.iface.validate()?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    let report = trafgen::run::run(&cfg, &stop)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, cfg.latency);
    }
    if report.rx_corrupt > 0 {
        anyhow::bail!(
            "{} frame(s) came back with other bytes after the probe than were sent",
            report.rx_corrupt
        );
    }
    Ok(())
}

fn print_report(r: &GenReport, latency: bool) {
    println!("role        {}   frame {} B (no FCS)", r.role, r.frame_size);
    if r.tx_refused + r.tx_shortfall > 0 || r.tx_offered != r.tx_packets {
        println!(
            "sent        {} of {} frames offered in {:.3} s ({:.3} Mpps): {} lost to a full ring, {} the generator fell behind on",
            r.tx_packets, r.tx_offered, r.tx_window_s, r.tx_mpps, r.tx_refused, r.tx_shortfall
        );
    } else {
        println!(
            "sent        {} frames in {:.3} s ({:.3} Mpps; {} retried on a full ring)",
            r.tx_packets, r.tx_window_s, r.tx_mpps, r.tx_ring_full
        );
    }
    println!(
        "received    {} frames   {} bytes in {:.3} s   foreign {}  corrupt {}  reordered {}  gaps {}  bad descriptors {}",
        r.rx_packets,
        r.rx_bytes,
        r.rx_window_s,
        r.rx_foreign,
        r.rx_corrupt,
        r.rx_reordered,
        r.rx_seq_gaps,
        r.rx_bad_desc
    );
    if r.rx_packets > 0 {
        println!(
            "rate        {:.3} Mpps   {:.3} Gbps L2 (frame bytes)   {:.3} Gbps L1 (frame + 20 B)",
            r.rx_mpps, r.rx_gbps_l2, r.rx_gbps_l1
        );
        let l = &r.latency;
        if latency {
            println!(
                "latency ns  min {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
                l.min_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns
            );
        }
    }
    if let Some(reason) = &r.last_disconnect_reason {
        println!("disconnect  {reason}");
    }
}
