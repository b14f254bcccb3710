//! One test between the pods: `iperf3` for TCP and UDP, an echo of our own for request and
//! response, and around each the machine's CPU time and every counter on the way.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::topo::{POD_B, Pods};
use super::{PodRow, PodTest};
use crate::proc::DutError;
use crate::underlay::link_stats;

/// The port iperf3 and the echo listen on in the server pod.
const PORT: u16 = 5201;

/// Runs `test` for `secs` seconds with the programs in the pods on CPU `app_cpu`.
pub fn run(pods: &Pods, test: PodTest, secs: f64, app_cpu: usize) -> Result<PodRow, DutError> {
    let before = Snapshot::take(pods)?;
    let t0 = Instant::now();
    let mut row = PodRow::new(pods.path, test);
    match test {
        PodTest::Rr => rr(pods, secs, app_cpu, &mut row)?,
        _ => iperf(pods, test, secs, app_cpu, &mut row)?,
    }
    // Frames still on their way are delivered or dropped (and counted) by now.
    std::thread::sleep(Duration::from_millis(100));
    let wall = t0.elapsed().as_secs_f64();
    let after = Snapshot::take(pods)?;
    let tick = rustix::param::clock_ticks_per_second() as f64;
    row.cpus_busy = (after.busy - before.busy) as f64 / tick / wall;
    row.softirq_cpus = (after.softirq - before.softirq) as f64 / tick / wall;
    row.dut_cpus = match (before.dut_ns, after.dut_ns) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b) as f64 / 1e9 / wall),
        _ => None,
    };
    let d = |f: fn(&Snapshot) -> u64| f(&after).saturating_sub(f(&before));
    let (tx, rx, rx_dropped, path) = (
        d(|s| s.pods_tx),
        d(|s| s.pods_rx),
        d(|s| s.pods_rx_dropped),
        d(|s| s.path_dropped),
    );
    row.dropped_on_path = path;
    row.path_drops = after
        .path_detail
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.saturating_sub(*before.path_detail.get(k).unwrap_or(&0)),
            )
        })
        .filter(|(_, v)| *v > 0)
        .collect();
    row.dropped_leaving_pods = d(|s| s.pods_tx_dropped);
    row.dropped_entering_pods = rx_dropped;
    row.socket_drops = d(|s| s.socket_drops);
    // A TCP super-frame is one packet to the pod's device and many to the path: the count
    // balances for UDP and the echo only.
    if test != PodTest::Tcp1 && test != PodTest::Tcp4 {
        row.unaccounted = Some(tx as i64 - rx as i64 - rx_dropped as i64 - path as i64);
    }
    Ok(row)
}

/// `iperf3` from pod A to pod B.
fn iperf(
    pods: &Pods,
    test: PodTest,
    secs: f64,
    cpu: usize,
    row: &mut PodRow,
) -> Result<(), DutError> {
    let cpu = cpu.to_string();
    let mut server = Command::new("ip")
        .args(["netns", "exec", &pods.b.name, "taskset", "-c", &cpu])
        .args(["iperf3", "-s", "-1", "--forceflush", "-B", POD_B])
        .args(["-p", &PORT.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(DutError::io("cannot start iperf3 (apt-get install iperf3)"))?;
    let mut out = BufReader::new(server.stdout.take().expect("piped"));
    let mut line = String::new();
    while !line.contains("listening") {
        line.clear();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = server.wait();
            return Err(DutError::Unsupported("iperf3 -s did not start".into()));
        }
    }
    let mut client = Command::new("ip");
    client
        .args(["netns", "exec", &pods.a.name, "taskset", "-c", &cpu])
        .args(["iperf3", "-J", "-c", POD_B, "-p", &PORT.to_string()])
        .args(["-t", &format!("{secs}")]);
    match test {
        PodTest::Tcp4 => {
            client.args(["-P", "4"]);
        }
        PodTest::Udp64 | PodTest::Udp1400 => {
            let payload = test.frame().unwrap_or(64) - UDP_OVERHEAD;
            client.args(["-u", "-b", "0", "-l", &payload.to_string()]);
        }
        _ => {}
    }
    let done = client
        .output()
        .map_err(DutError::io("cannot run iperf3 -c"))?;
    let _ = server.kill();
    let _ = server.wait();
    let j: serde_json::Value = serde_json::from_slice(&done.stdout).map_err(|e| {
        DutError::Unsupported(format!(
            "iperf3 -c printed no JSON ({e}): {}",
            String::from_utf8_lossy(&done.stderr)
        ))
    })?;
    if let Some(e) = j["error"].as_str() {
        return Err(DutError::Unsupported(format!("iperf3: {e}")));
    }
    let end = &j["end"];
    match test {
        PodTest::Udp64 | PodTest::Udp1400 => {
            let s = &end["sum"];
            let (sent, lost, t) = (
                s["packets"].as_u64().unwrap_or(0),
                s["lost_packets"].as_u64().unwrap_or(0),
                s["seconds"].as_f64().unwrap_or(secs),
            );
            row.sent_kpps = Some(sent as f64 / t / 1e3);
            row.kpps = Some(sent.saturating_sub(lost) as f64 / t / 1e3);
            row.lost_pct = Some(if sent == 0 {
                0.0
            } else {
                lost as f64 * 100.0 / sent as f64
            });
        }
        _ => {
            row.gbps = end["sum_received"]["bits_per_second"]
                .as_f64()
                .map(|b| b / 1e9);
            row.retransmits = end["sum_sent"]["retransmits"].as_u64();
        }
    }
    Ok(())
}

/// Ethernet (with its FCS), IPv4 and UDP headers: a frame of `n` bytes carries `n - 46`.
const UDP_OVERHEAD: usize = 14 + 4 + 20 + 8;

/// Request and response over one TCP connection, one byte each way (what `netperf TCP_RR`
/// does), as many as `secs` allows: the round trips' percentiles and rate.
fn rr(pods: &Pods, secs: f64, cpu: usize, row: &mut PodRow) -> Result<(), DutError> {
    let in_ns = |what: &'static str| {
        move |e: uplink::netns::NetnsError| DutError::Unsupported(format!("{what}: {e}"))
    };
    let b = POD_B.parse::<Ipv4Addr>().expect("an address");
    let listener = uplink::netns::run_in(&pods.b.path(), || {
        TcpListener::bind(SocketAddr::from((b, PORT + 1)))
    })
    .map_err(in_ns("the echo's listener"))?
    .map_err(DutError::io("cannot listen for the echo"))?;
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let _ = trafgen::pin_to_cpu(cpu);
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut b = [0u8; 1];
        while s.read(&mut b)? == 1 {
            s.write_all(&b)?;
        }
        Ok(())
    });
    let mut s = uplink::netns::run_in(&pods.a.path(), || {
        TcpStream::connect_timeout(&SocketAddr::from((b, PORT + 1)), Duration::from_secs(5))
    })
    .map_err(in_ns("the echo's client"))?
    .map_err(DutError::io("cannot connect to the echo"))?;
    s.set_nodelay(true)
        .and_then(|()| s.set_read_timeout(Some(Duration::from_secs(2))))
        .map_err(DutError::io("echo socket"))?;
    // The client on a thread of its own, pinned as the server is.
    let client = std::thread::spawn(move || -> std::io::Result<(Vec<u64>, f64)> {
        let _ = trafgen::pin_to_cpu(cpu);
        let mut lat = Vec::with_capacity(1 << 20);
        let start = Instant::now();
        let mut b = [7u8; 1];
        while start.elapsed().as_secs_f64() < secs {
            let t = Instant::now();
            s.write_all(&b)?;
            s.read_exact(&mut b)?;
            lat.push(t.elapsed().as_nanos() as u64);
        }
        Ok((lat, start.elapsed().as_secs_f64()))
    });
    let got = client.join().expect("the echo's client does not panic");
    let _ = server.join();
    let (mut lat, took) = got.map_err(DutError::io("echo round trip"))?;
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    row.rr_per_s = Some(lat.len() as f64 / took);
    row.p50_us = Some(pct(0.5));
    row.p99_us = Some(pct(0.99));
    Ok(())
}

/// The counters a test is measured by, at one moment.
struct Snapshot {
    /// The machine's busy and softirq time, in clock ticks (`/proc/stat`).
    busy: u64,
    softirq: u64,
    /// veclane's threads' CPU time together, when it is the path.
    dut_ns: Option<u64>,
    /// Both pods' `eth0`: packets sent and received, and dropped either way.
    pods_tx: u64,
    pods_rx: u64,
    pods_tx_dropped: u64,
    pods_rx_dropped: u64,
    /// Datagrams the pods' UDP sockets had no room for (`RcvbufErrors`).
    socket_drops: u64,
    /// Dropped on the path: veclane's drop counters, or the router's devices'.
    path_dropped: u64,
    /// The same by counter.
    path_detail: BTreeMap<String, u64>,
}

impl Snapshot {
    fn take(pods: &Pods) -> Result<Snapshot, DutError> {
        let stat = std::fs::read_to_string("/proc/stat")
            .map_err(DutError::io("cannot read /proc/stat"))?;
        let f: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let get = |i: usize| f.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal
        let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
        let mut s = Snapshot {
            busy,
            softirq: get(6),
            dut_ns: None,
            pods_tx: 0,
            pods_rx: 0,
            pods_tx_dropped: 0,
            pods_rx_dropped: 0,
            socket_drops: 0,
            path_dropped: 0,
            path_detail: BTreeMap::new(),
        };
        for ns in [&pods.a, &pods.b] {
            let [l] = link_stats(&ns.name, ["eth0"])?;
            s.pods_tx += l.tx;
            s.pods_rx += l.rx;
            s.pods_tx_dropped += l.tx_dropped;
            s.pods_rx_dropped += l.rx_dropped;
            s.socket_drops += udp_rcvbuf_errors(ns)?;
        }
        if !pods.daemons.is_empty() {
            // Every daemon's threads, or none when one's cannot be read.
            s.dut_ns = pods
                .daemons
                .iter()
                .map(|d| {
                    crate::proc::thread_times(d.pid())
                        .map(|t| t.iter().map(|t| t.run_ns).sum::<u64>())
                })
                .sum::<Option<u64>>();
        }
        for d in &pods.daemons {
            dut_drops(d, &mut s.path_detail)?;
        }
        for (r, devs) in &pods.between {
            for dev in devs {
                let [l] = link_stats(&r.name, [*dev])?;
                *s.path_detail.entry(format!("{dev}: dropped")).or_default() +=
                    l.tx_dropped + l.rx_dropped;
            }
        }
        s.path_dropped = s.path_detail.values().sum();
        Ok(s)
    }
}

/// What veclane dropped, added into `into` by counter: every error count that is one, and
/// what the kernel dropped for an uplink's receive ring (the two-node paths): that uplink's
/// `rx_errors`, which holds those and its input node's own drops (left out of the error
/// counts for it).
fn dut_drops(d: &crate::daemon::Daemon, into: &mut BTreeMap<String, u64>) -> Result<(), DutError> {
    let api::Reply::Interfaces { interfaces } =
        d.call(&api::Request::ShowInterface { name: None })?
    else {
        return Err(DutError::reply("veclane", "show interface"));
    };
    let uplinks = interfaces.iter().filter(|i| {
        matches!(
            i.device,
            api::DeviceInfo::AfPacket { .. } | api::DeviceInfo::AfXdp { .. }
        )
    });
    for i in uplinks {
        *into.entry(format!("{}: rx_errors", i.name)).or_default() += i.rx_errors;
    }
    match d.call(&api::Request::ShowErrors)? {
        api::Reply::Errors { errors } => {
            let drops = errors
                .iter()
                .filter(|e| !e.reason.contains("not an error"))
                .filter(|e| !in_rx_errors(&e.node, &e.reason));
            for e in drops {
                *into.entry(format!("{}: {}", e.node, e.reason)).or_default() += e.count;
            }
            Ok(())
        }
        r => Err(DutError::reply("veclane", format!("{r:?}"))),
    }
}

/// Whether an uplink's `rx_errors` counts this error already.
fn in_rx_errors(node: &str, reason: &str) -> bool {
    matches!(node, "af-packet-input" | "af-xdp-input")
        && ["no buffer", "truncated", "inconsistent", "outside the UMEM"]
            .iter()
            .any(|w| reason.contains(w))
}

/// The UDP datagrams namespace `ns`'s sockets had no room for.
fn udp_rcvbuf_errors(ns: &crate::underlay::Netns) -> Result<u64, DutError> {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "cat", "/proc/net/snmp"])
        .output()
        .map_err(DutError::io("cannot read /proc/net/snmp"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap_or(""), udp.next().unwrap_or(""));
    Ok(names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0))
}
