//! Driving FD.io VPP as a device under test, in the harness's topologies: l3fwd (two memif
//! masters and a route between them) and the seeds' node switch in singlenet and multinet
//! (an uplink memif and a pod memif per network; multinet with a VRF and a VXLAN tunnel per
//! network, see [`crate::node::vpp_topology`]).
//!
//! Checked against VPP 25.10 built by `scripts/build-vpp.sh`: the tests in
//! `crates/veclane/tests/vpp.rs` start it whenever that build (or `vpp` on PATH) exists.
//!
//! [`spawn`] writes `startup.conf` into a directory of its own and runs `vpp -c startup.conf`:
//! no hugepages (4 KiB pages for the main heap and the buffers), every plugin disabled but
//! memif (and vxlan where the topology asks for it), the main thread on the generator CPU and
//! a worker on each DUT CPU, the CLI, API and stats sockets in that directory (so instances do
//! not collide with a system VPP). It then configures the topology through `vppctl -s
//! DIR/cli.sock` (the `vppctl` next to the `vpp` binary, else on PATH); for l3fwd that is
//! what [`crate::l3fwd::veclane_config`] gives veclane:
//!
//! ```text
//! create memif socket id 1 filename DIR/memif.sock
//! create interface memif id 0 socket-id 1 ring-size R buffer-size B hw-addr 02:00:00:00:00:02 master
//! create interface memif id 1 socket-id 1 ring-size R buffer-size B hw-addr 02:00:00:00:01:02 master
//! set interface ip address memif1/0 10.10.1.1/24
//! set interface ip address memif1/1 10.10.2.1/24
//! set ip neighbor memif1/1 10.10.2.2 GEN_MAC static
//! set interface state memif1/0 up
//! set interface state memif1/1 up
//! ```
//!
//! The memif rx queues are created when the generator connects, in VPP's default rx mode,
//! polling; the workers poll them (only workers poll once workers exist). With N workers every
//! memif gets N queue pairs (`rx-queues N tx-queues N`) and VPP places rx queues on the
//! workers round robin. VPP's path per frame in l3fwd: memif-input, ethernet-input, ip4-input
//! (checksum, length, TTL), ip4-lookup, ip4-rewrite, memif1/1-output, memif1/1-tx; memif
//! input copies into VPP buffers and memif output copies out of them (two copies, like
//! veclane's `copy = "two"`).
//!
//! Counters for the cross-check come from `show interface` ([`parse_show_interface`]), per
//! node clocks from `show runtime` ([`parse_show_runtime`]), converted to nanoseconds with the
//! TSC rate `show cpu` reports. A configuration command succeeded when the CLI printed nothing
//! (VPP prints the error otherwise), except the `create` commands, which print the new
//! interface's name.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::dut::{Counts, RunningDut};
use crate::proc::DutError;

/// The program, as errors name it.
const DUT: &str = "vpp";

/// The memif socket id VPP knows our socket by (0 is VPP's default socket).
pub const SOCKET_ID: u32 = 1;
/// The interface the generator sends to (memif id 0) and its MAC (veclane's memif0/0).
pub const IF_IN: &str = "memif1/0";
pub const IF_IN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// The interface VPP forwards to (memif id 1) and its MAC (veclane's memif0/1).
pub const IF_OUT: &str = "memif1/1";
pub const IF_OUT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x02];

/// Why `--cost` (callgrind) cannot measure VPP, and what stands in for it.
pub const NO_COST: &str = "VPP cannot run under callgrind: its physical-memory allocator maps the buffer pool with MAP_FIXED into a range it reserved (pmalloc at 0x1000000000), which valgrind refuses (\"pmalloc_map_pages: failed to mmap 32 pages ... Invalid argument\", then \"failed to allocate buffer pool(s)\"); and this machine's VM exposes no hardware PMU for perf to count instructions with. VPP's own show runtime (clocks per packet per node, in ns in every run's per-node table) is the measure instead";

/// What a VPP instance is given.
#[derive(Debug, Clone)]
pub struct VppConfig {
    /// VPP's main thread (CLI, memif connection handling; it does not poll interfaces once
    /// there is a worker).
    pub gen_cpu: usize,
    /// The workers' CPUs: worker `i` polls queue `i` of every interface (VPP places rx
    /// queues on workers round robin). None: the main thread polls them.
    pub workers: Vec<usize>,
    pub ring_log2: u8,
    pub buffer_size: u32,
    /// What VPP is set up as.
    pub topology: VppTopology,
}

impl VppConfig {
    /// 1024-slot rings, 2048-byte buffers, the l3fwd topology.
    pub fn new(gen_cpu: usize, dut_cpu: usize) -> VppConfig {
        VppConfig {
            gen_cpu,
            workers: vec![dut_cpu],
            ring_log2: 10,
            buffer_size: 2048,
            topology: VppTopology::l3fwd(trafgen::FrameSpec::default().src_mac.0),
        }
    }
}

/// A topology as VPP is told it: memif masters on one socket, then CLI commands, and the
/// interfaces whose counters face the generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VppTopology {
    /// The memif interfaces (id, MAC), created first and brought up last.
    pub memifs: Vec<(u32, [u8; 6])>,
    /// `None`: they are masters on a socket in VPP's own directory
    /// ([`Vpp::memif_socket`]); a path: they are slaves connecting to that socket.
    pub slave_of: Option<PathBuf>,
    /// Everything between: addresses, tables, tunnels, neighbours, routes.
    pub commands: Vec<String>,
    /// Plugins beside memif (`vxlan` for multinet).
    pub plugins: Vec<&'static str>,
    /// Interfaces on which frames from the generator arrive, and from which frames for it
    /// leave (summed for [`RunningDut::counts`]).
    pub rx_from: Vec<String>,
    pub tx_to: Vec<String>,
}

impl VppTopology {
    /// veclane's l3fwd: 10.10.1.0/24 on memif id 0, 10.10.2.0/24 on id 1, the generator
    /// (`gen_mac`) at 10.10.2.2.
    pub fn l3fwd(gen_mac: [u8; 6]) -> VppTopology {
        VppTopology {
            memifs: vec![(0, IF_IN_MAC), (1, IF_OUT_MAC)],
            slave_of: None,
            commands: vec![
                format!("set interface ip address {IF_IN} 10.10.1.1/24"),
                format!("set interface ip address {IF_OUT} 10.10.2.1/24"),
                format!(
                    "set ip neighbor {IF_OUT} 10.10.2.2 {} static",
                    mac_str(gen_mac)
                ),
            ],
            plugins: Vec::new(),
            rx_from: vec![IF_IN.into()],
            tx_to: vec![IF_OUT.into()],
        }
    }
}

/// The name VPP gives memif `id` on our socket.
pub fn memif_name(id: u32) -> String {
    format!("memif{SOCKET_ID}/{id}")
}

/// `explicit` if given, else `vpp` on PATH, else `/usr/bin/vpp`, else the newest build
/// `scripts/build-vpp.sh` finished in its cache ([`cached`]); `None` if none is a file.
pub fn find(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    on_path("vpp")
        .or_else(|| {
            let p = PathBuf::from("/usr/bin/vpp");
            p.is_file().then_some(p)
        })
        .or_else(cached)
}

/// The `vpp` of the newest finished build in `scripts/build-vpp.sh`'s cache,
/// `${XDG_CACHE_HOME:-~/.cache}/veclane/vpp-*/build/bin/vpp` beside a `done` stamp.
pub fn cached() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?
        .join("veclane");
    std::fs::read_dir(base)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("vpp-"))
        .filter_map(|e| {
            let done = e.path().join("done");
            let bin = e.path().join("build/bin/vpp");
            let at = done.metadata().and_then(|m| m.modified()).ok()?;
            bin.is_file().then_some((at, bin))
        })
        .max_by_key(|(at, _)| *at)
        .map(|(_, bin)| bin)
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// The `vppctl` next to `vpp_bin`, else on PATH.
pub fn find_vppctl(vpp_bin: &Path) -> Option<PathBuf> {
    let sibling = vpp_bin.with_file_name("vppctl");
    if sibling.is_file() {
        return Some(sibling);
    }
    on_path("vppctl")
}

use crate::node::mac_str;

/// The startup configuration, with every socket and log under `dir` and `tag` naming the
/// shared-memory API segment (unique per instance).
pub fn startup_conf(cfg: &VppConfig, dir: &Path, tag: &str) -> String {
    let d = dir.display();
    format!(
        r#"unix {{
  nodaemon
  cli-listen {d}/cli.sock
  cli-no-pager
  cli-no-banner
  log {d}/vpp.log
  runtime-dir {d}
  poll-sleep-usec 1000
}}
api-segment {{
  prefix {tag}
}}
socksvr {{
  socket-name {d}/api.sock
}}
statseg {{
  socket-name {d}/stats.sock
}}
cpu {{
  main-core {main}
{workers}}}
memory {{
  main-heap-size 1G
  main-heap-page-size 4K
}}
buffers {{
  buffers-per-numa 16384
  page-size 4K
}}
plugins {{
  plugin default {{ disable }}
  plugin memif_plugin.so {{ enable }}
{plugins}}}
"#,
        main = cfg.gen_cpu,
        plugins = cfg
            .topology
            .plugins
            .iter()
            .map(|p| format!("  plugin {p}_plugin.so {{ enable }}\n"))
            .collect::<String>(),
        // No workers: the main thread polls the interfaces itself (sleeping poll-sleep-usec
        // between idle loops), for tests that want VPP beside a busy CPU rather than on it.
        workers = match cfg.workers.as_slice() {
            [] => String::new(),
            w => format!(
                "  corelist-workers {}\n",
                w.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
            ),
        },
    )
}

/// The CLI commands that build the topology on the memif socket `sock`, in order: the
/// socket, the memif masters, the topology's own commands, the memifs brought up.
pub fn setup_commands(cfg: &VppConfig, sock: &Path) -> Vec<String> {
    let ring = 1u32 << cfg.ring_log2;
    let bsize = cfg.buffer_size;
    // One queue pair per worker (the generator opens as many); the default is one.
    let queues = match cfg.workers.len() {
        0 | 1 => String::new(),
        n => format!(" rx-queues {n} tx-queues {n}"),
    };
    let t = &cfg.topology;
    let (sock, role) = match &t.slave_of {
        Some(p) => (p.as_path(), "slave"),
        None => (sock, "master"),
    };
    let mut v = vec![format!(
        "create memif socket id {SOCKET_ID} filename {}",
        sock.display()
    )];
    v.extend(t.memifs.iter().map(|&(id, mac)| {
        format!(
            "create interface memif id {id} socket-id {SOCKET_ID} ring-size {ring} buffer-size {bsize} hw-addr {} {role}{queues}",
            mac_str(mac)
        )
    }));
    v.extend(t.commands.iter().cloned());
    v.extend(
        t.memifs
            .iter()
            .map(|&(id, _)| format!("set interface state {} up", memif_name(id))),
    );
    v
}

/// Whether configuration command `cmd` succeeded, judged by what the CLI printed: nothing,
/// or for `create interface memif` and `create vxlan tunnel` one line, the new interface's
/// name.
pub fn check_reply(cmd: &str, out: &str) -> Result<(), DutError> {
    let out = out.trim();
    if out.is_empty() {
        return Ok(());
    }
    let created = [
        ("create interface memif", format!("memif{SOCKET_ID}/")),
        ("create vxlan tunnel", "vxlan_tunnel".to_string()),
    ];
    if out.lines().count() == 1
        && created
            .iter()
            .any(|(c, name)| cmd.starts_with(c) && out.starts_with(name.as_str()))
    {
        return Ok(());
    }
    Err(DutError::reply(DUT, format!("refused `{cmd}`: {out}")))
}

/// One interface of `show interface`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VppInterface {
    pub name: String,
    pub index: u32,
    pub up: bool,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// `drops`: frames this interface's graph path dropped.
    pub drops: u64,
    pub rx_miss: u64,
    pub tx_error: u64,
    /// Every counter as printed, in order (including the ones above).
    pub counters: Vec<(String, u64)>,
}

impl VppInterface {
    fn add(&mut self, name: &str, value: u64) {
        match name {
            "rx packets" => self.rx_packets = value,
            "rx bytes" => self.rx_bytes = value,
            "tx packets" => self.tx_packets = value,
            "tx bytes" => self.tx_bytes = value,
            "drops" => self.drops = value,
            "rx-miss" => self.rx_miss = value,
            "tx-error" => self.tx_error = value,
            _ => {}
        }
        self.counters.push((name.to_string(), value));
    }
}

/// Parses `show interface`: a header, then per interface a line `name idx state [mtu]
/// [counter value]` starting in column 0 and one indented `counter value` line per further
/// counter (counters that are zero are not printed).
pub fn parse_show_interface(out: &str) -> Vec<VppInterface> {
    let mut v: Vec<VppInterface> = Vec::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let counter = if line.starts_with(char::is_whitespace) {
            // A further counter of the current interface (or the header: no interface yet).
            if v.is_empty() {
                continue;
            }
            &words[..]
        } else {
            let (Some(name), Some(Ok(index)), Some(state)) = (
                words.first(),
                words.get(1).map(|w| w.parse::<u32>()),
                words.get(2),
            ) else {
                continue;
            };
            v.push(VppInterface {
                name: (*name).to_string(),
                index,
                up: *state == "up",
                ..Default::default()
            });
            // The MTU column (`9000/0/0/0`) exists since VPP 19.04.
            let rest = &words[3..];
            match rest.first() {
                Some(w)
                    if w.contains('/') && w.bytes().all(|b| b.is_ascii_digit() || b == b'/') =>
                {
                    &rest[1..]
                }
                _ => rest,
            }
        };
        if let Some((last, name)) = counter.split_last()
            && !name.is_empty()
            && let Ok(value) = last.parse::<u64>()
            && let Some(i) = v.last_mut()
        {
            i.add(&name.join(" "), value);
        }
    }
    v
}

/// Frames interface `ifname`'s memif device dropped because the peer's ring was full, from
/// `show errors` (`count node reason severity` lines, one per thread and node: node
/// `<ifname>-tx`, reason `no free tx slots`).
pub fn no_free_tx_slots(show_errors: &str, ifname: &str) -> u64 {
    let node = format!("{ifname}-tx");
    show_errors
        .lines()
        .filter(|l| l.contains("no free tx slots"))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let count = w.next()?.parse::<u64>().ok()?;
            (w.next()? == node).then_some(count)
        })
        .sum()
}

/// VPP's clock rate in ticks per nanosecond from `show cpu` (`Base frequency:  2.10 GHz`,
/// VPP's measured TSC rate).
pub fn parse_base_ghz(out: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Base frequency:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|ghz| *ghz > 0.0)
}

/// The harness's name for VPP node `name`: per-interface output nodes (`memif1/1-output`,
/// `memif1/1-tx`) folded into one per kind (`interface-output`, `memif-tx`) so that rows of
/// different topologies line up; every other node keeps VPP's name.
fn node_column(name: &str) -> String {
    if let Some(dev) = name.strip_suffix("-output")
        && dev.contains('/')
    {
        return "interface-output".into();
    }
    if let Some(dev) = name.strip_suffix("-tx")
        && let Some((kind, _)) = dev.split_once('/')
    {
        let kind = kind.trim_end_matches(|c: char| c.is_ascii_digit());
        return format!("{kind}-tx");
    }
    name.to_string()
}

/// Parses `show runtime`: per thread a `Thread N name (lcore C)` line (absent with no
/// workers), `Time T, …`, a header, then per node `name state calls vectors suspends clocks
/// vectors/call`, where the state may be two words (`interrupt wait`) and clocks are per
/// vector (per call for a node without vectors). Returns the worker threads (thread 0, VPP's
/// main thread, only when it is the only one), clocks in nanoseconds at `tsc_per_ns`.
pub fn parse_show_runtime(out: &str, tsc_per_ns: f64) -> Vec<api::WorkerRuntime> {
    let mut threads: Vec<(usize, api::WorkerRuntime)> = Vec::new();
    let new = |core| api::WorkerRuntime {
        worker: 0,
        core,
        seconds: 0.0,
        busy_seconds: 0.0,
        loops: 0,
        sleeps: 0,
        nodes: Vec::new(),
    };
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Thread", n, ..] => {
                let core = line
                    .split_once("(lcore ")
                    .and_then(|(_, r)| r.trim_end_matches(')').trim().parse().ok());
                threads.push((n.parse().unwrap_or(threads.len()), new(core)));
            }
            ["Time", t, ..] => {
                if threads.is_empty() {
                    threads.push((0, new(None)));
                }
                if let Some(w) = threads.last_mut() {
                    w.1.seconds = t.trim_end_matches(',').parse().unwrap_or(0.0);
                    // `loops/sec L`: loops over the interval.
                    if let Some(i) = words.iter().position(|w| *w == "loops/sec")
                        && let Some(l) = words.get(i + 1).and_then(|l| l.parse::<f64>().ok())
                    {
                        w.1.loops = (l * w.1.seconds) as u64;
                    }
                }
            }
            [name, .., calls, vectors, suspends, clocks, per_call] if words.len() >= 7 => {
                let (Ok(calls), Ok(vectors), Ok(_), Ok(clocks), Ok(_)) = (
                    calls.parse::<u64>(),
                    vectors.parse::<u64>(),
                    suspends.parse::<u64>(),
                    clocks.parse::<f64>(),
                    per_call.parse::<f64>(),
                ) else {
                    continue;
                };
                let Some(w) = threads.last_mut() else {
                    continue;
                };
                let state = words[1..words.len() - 5].join(" ");
                let kind = match state.as_str() {
                    "polling" | "interrupt wait" => "input",
                    _ => "internal",
                };
                let per = if vectors > 0 { vectors } else { calls };
                let ns = (clocks * per as f64 / tsc_per_ns).round() as u64;
                let column = node_column(name);
                match w.1.nodes.iter_mut().find(|n| n.name == column) {
                    Some(n) => {
                        n.calls += calls;
                        n.vectors += vectors;
                        n.clocks += ns;
                    }
                    None => w.1.nodes.push(api::NodeRuntime {
                        name: column,
                        kind: kind.into(),
                        calls,
                        vectors,
                        clocks: ns,
                    }),
                }
            }
            _ => {}
        }
    }
    if threads.len() > 1 {
        threads.retain(|(n, _)| *n != 0);
    }
    threads
        .into_iter()
        .enumerate()
        .map(|(i, (_, mut w))| {
            w.worker = i;
            w
        })
        .collect()
}

/// A running VPP; stopped with SIGTERM (then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Vpp {
    child: Child,
    vppctl: PathBuf,
    /// The interfaces [`RunningDut::counts`] sums (see [`VppTopology`]).
    rx_from: Vec<String>,
    tx_to: Vec<String>,
    /// VPP's clock (the TSC) in ticks per nanosecond, from `show cpu`.
    tsc_per_ns: Option<f64>,
    command_line: String,
    dir: tempfile::TempDir,
}

/// Starts VPP (`vpp_bin -c DIR/startup.conf`), waits up to 30 s for its CLI, and configures
/// the l3fwd topology. `vppctl` defaults to [`find_vppctl`].
pub fn spawn(vpp_bin: &Path, vppctl: Option<&Path>, cfg: &VppConfig) -> Result<Vpp, DutError> {
    if !vpp_bin.is_file() {
        return Err(DutError::Missing(format!(
            "VPP not found at {}; install VPP or pass --vpp-bin",
            vpp_bin.display()
        )));
    }
    let vppctl = match vppctl {
        Some(p) if p.is_file() => p.to_path_buf(),
        Some(p) => {
            return Err(DutError::Missing(format!(
                "vppctl not found at {}",
                p.display()
            )));
        }
        None => find_vppctl(vpp_bin).ok_or_else(|| {
            DutError::Missing(format!(
                "vppctl not found next to {} or on PATH; VPP's CLI is driven through it (install VPP's vppctl)",
                vpp_bin.display()
            ))
        })?,
    };
    let dir = tempfile::Builder::new()
        .prefix("veclane-vpp")
        .tempdir()
        .map_err(DutError::io("cannot make a directory for VPP"))?;
    let conf = dir.path().join("startup.conf");
    let tag = crate::proc::instance_tag("vpp");
    std::fs::write(&conf, startup_conf(cfg, dir.path(), &tag))
        .map_err(DutError::io(format!("writing {}", conf.display())))?;
    let out_path = dir.path().join("vpp.out");
    let out_err = || DutError::io(format!("creating {}", out_path.display()));
    let out = File::create(&out_path).map_err(out_err())?;
    let err = out.try_clone().map_err(out_err())?;
    let child = Command::new(vpp_bin)
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(DutError::io(format!("cannot start {}", vpp_bin.display())))?;
    let mut vpp = Vpp {
        child,
        vppctl,
        rx_from: cfg.topology.rx_from.clone(),
        tx_to: cfg.topology.tx_to.clone(),
        tsc_per_ns: None,
        command_line: format!("{} -c {}", vpp_bin.display(), conf.display()),
        dir,
    };
    vpp.wait_cli(Duration::from_secs(30))?;
    let sock = vpp.memif_socket();
    for cmd in setup_commands(cfg, &sock) {
        let out = vpp.cli(&cmd)?;
        check_reply(&cmd, &out)
            .map_err(|e| DutError::reply(DUT, format!("{e}\n{}", vpp.log_tail(20))))?;
    }
    let ifs = vpp.interfaces()?;
    for name in cfg.topology.memifs.iter().map(|&(id, _)| memif_name(id)) {
        if !ifs.iter().any(|i| i.name == name && i.up) {
            return Err(DutError::reply(
                DUT,
                format!("no interface {name} up after configuration; show interface: {ifs:?}"),
            ));
        }
    }
    vpp.tsc_per_ns = parse_base_ghz(&vpp.cli("show cpu")?);
    Ok(vpp)
}

impl Vpp {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The socket VPP's memif masters listen on (a slave's is the one it was given).
    pub fn memif_socket(&self) -> PathBuf {
        self.dir.path().join("memif.sock")
    }

    /// The command that was run, for reports.
    pub fn command_line(&self) -> &str {
        &self.command_line
    }

    /// The startup configuration VPP was given.
    pub fn startup_conf(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("startup.conf")).unwrap_or_default()
    }

    fn cli_socket(&self) -> PathBuf {
        self.dir.path().join("cli.sock")
    }

    fn wait_cli(&mut self, timeout: Duration) -> Result<(), DutError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(DutError::Exited {
                    dut: DUT,
                    log: format!(
                        "({st}) while starting; command: {}\noutput:\n{}",
                        self.command_line,
                        self.log_tail(20)
                    ),
                });
            }
            if self.cli_socket().exists()
                && let Ok(v) = self.cli("show version")
                && v.contains("vpp")
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(DutError::Timeout {
                    dut: DUT,
                    what: format!("no answer on the CLI ({})", self.cli_socket().display()),
                    waited: timeout,
                    log: format!(
                        "command: {}\noutput:\n{}",
                        self.command_line,
                        self.log_tail(20)
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs one CLI command (`vppctl -s DIR/cli.sock CMD`) and returns what it printed.
    pub fn cli(&self, cmd: &str) -> Result<String, DutError> {
        let o = Command::new(&self.vppctl)
            .arg("-s")
            .arg(self.cli_socket())
            .args(cmd.split_whitespace())
            .stdin(Stdio::null())
            .output()
            .map_err(DutError::io(format!(
                "cannot run {}",
                self.vppctl.display()
            )))?;
        if !o.status.success() {
            return Err(DutError::reply(
                DUT,
                format!(
                    "vppctl `{cmd}` failed ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).replace('\r', ""))
    }

    /// Every interface's counters (`show interface`).
    pub fn interfaces(&self) -> Result<Vec<VppInterface>, DutError> {
        let out = self.cli("show interface")?;
        let v = parse_show_interface(&out);
        if v.is_empty() {
            return Err(DutError::reply(
                DUT,
                format!("cannot parse show interface: {out}"),
            ));
        }
        Ok(v)
    }

    /// Zeroes the interface counters (`clear interfaces`).
    pub fn clear_counters(&self) -> Result<(), DutError> {
        let out = self.cli("clear interfaces")?;
        check_reply("clear interfaces", &out)
    }

    /// The last `n` lines of VPP's output and log.
    pub fn log_tail(&self, n: usize) -> String {
        let mut s = std::fs::read_to_string(self.dir.path().join("vpp.out")).unwrap_or_default();
        s.push_str(&std::fs::read_to_string(self.dir.path().join("vpp.log")).unwrap_or_default());
        let v: Vec<&str> = s.lines().rev().take(n).collect();
        v.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Stops VPP (SIGTERM, SIGKILL after 5 s).
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        crate::proc::stop_child(
            &mut self.child,
            Some(rustix::process::Signal::TERM),
            Duration::from_secs(5),
        );
    }
}

impl RunningDut for Vpp {
    fn pid(&self) -> u32 {
        Vpp::pid(self)
    }

    fn counts(&mut self) -> Result<Option<Counts>, DutError> {
        let ifs = self.interfaces()?;
        let sum = |names: &[String], count: fn(&VppInterface) -> u64| {
            names.iter().try_fold(0u64, |acc, name| {
                ifs.iter()
                    .find(|i| i.name == *name)
                    .map(|i| acc + count(i))
                    .ok_or_else(|| DutError::reply(DUT, format!("no interface {name}")))
            })
        };
        // VPP counts a frame as sent in interface-output, before its memif device finds the
        // peer's ring full and drops it (error `no free tx slots` of node `<if>-tx`): those
        // never reached the generator.
        let errors = self.cli("show errors")?;
        let dropped: u64 = self
            .tx_to
            .iter()
            .map(|i| no_free_tx_slots(&errors, i))
            .sum();
        Ok(Some(Counts {
            rx: sum(&self.rx_from, |i| i.rx_packets)?,
            tx: sum(&self.tx_to, |i| i.tx_packets)? - dropped,
        }))
    }

    fn drops(&mut self) -> String {
        self.interfaces()
            .map(|ifs| {
                ifs.iter()
                    .filter(|i| i.drops + i.rx_miss + i.tx_error > 0)
                    .map(|i| {
                        format!(
                            "{}: drops={} rx-miss={} tx-error={}",
                            i.name, i.drops, i.rx_miss, i.tx_error
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    }

    fn clear_runtime(&mut self) {
        let _ = self.cli("clear runtime");
    }

    /// The workers' `show runtime` (VPP's main thread left out: it polls nothing once there
    /// are workers), clocks converted to nanoseconds; empty where VPP's TSC rate is unknown.
    fn runtime(&mut self) -> Vec<api::WorkerRuntime> {
        match (self.tsc_per_ns, self.cli("show runtime")) {
            (Some(tsc), Ok(out)) => parse_show_runtime(&out, tsc),
            _ => Vec::new(),
        }
    }

    fn stop(self: Box<Self>, _timeout: Duration) -> Result<(), DutError> {
        Vpp::stop(*self);
        Ok(())
    }
}

impl Drop for Vpp {
    fn drop(&mut self) {
        self.terminate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> VppConfig {
        VppConfig::new(0, 1)
    }

    #[test]
    fn startup_configuration() {
        let s = startup_conf(&cfg(), Path::new("/tmp/v"), "vl1vpp");
        assert_eq!(
            s,
            "unix {
  nodaemon
  cli-listen /tmp/v/cli.sock
  cli-no-pager
  cli-no-banner
  log /tmp/v/vpp.log
  runtime-dir /tmp/v
  poll-sleep-usec 1000
}
api-segment {
  prefix vl1vpp
}
socksvr {
  socket-name /tmp/v/api.sock
}
statseg {
  socket-name /tmp/v/stats.sock
}
cpu {
  main-core 0
  corelist-workers 1
}
memory {
  main-heap-size 1G
  main-heap-page-size 4K
}
buffers {
  buffers-per-numa 16384
  page-size 4K
}
plugins {
  plugin default { disable }
  plugin memif_plugin.so { enable }
}
"
        );
        // VPP's early parser only sees main-core when it comes first in the cpu section.
        let cpu = &s[s.find("cpu {").unwrap()..];
        assert!(cpu.lines().nth(1).unwrap().trim().starts_with("main-core"));
    }

    #[test]
    fn topology_commands() {
        let c = VppConfig {
            ring_log2: 11,
            buffer_size: 9216,
            ..cfg()
        };
        assert_eq!(
            setup_commands(&c, Path::new("/tmp/v/memif.sock")),
            [
                "create memif socket id 1 filename /tmp/v/memif.sock",
                "create interface memif id 0 socket-id 1 ring-size 2048 buffer-size 9216 hw-addr 02:00:00:00:00:02 master",
                "create interface memif id 1 socket-id 1 ring-size 2048 buffer-size 9216 hw-addr 02:00:00:00:01:02 master",
                "set interface ip address memif1/0 10.10.1.1/24",
                "set interface ip address memif1/1 10.10.2.1/24",
                "set ip neighbor memif1/1 10.10.2.2 02:00:00:00:00:01 static",
                "set interface state memif1/0 up",
                "set interface state memif1/1 up",
            ]
        );
        // Only memif unless the topology asks for more.
        assert!(!startup_conf(&c, Path::new("/v"), "t").contains("vxlan"));
        let vx = VppConfig {
            topology: VppTopology {
                plugins: vec!["vxlan"],
                ..c.topology.clone()
            },
            ..c
        };
        assert!(startup_conf(&vx, Path::new("/v"), "t").contains(
            "  plugin memif_plugin.so { enable }\n  plugin vxlan_plugin.so { enable }\n}"
        ));
        // Two workers: a queue pair each on both interfaces, both CPUs in the worker list.
        let two = VppConfig {
            workers: vec![1, 3],
            ..cfg()
        };
        assert!(
            setup_commands(&two, Path::new("/m"))[1].ends_with("master rx-queues 2 tx-queues 2")
        );
        assert!(startup_conf(&two, Path::new("/tmp/v"), "t").contains("corelist-workers 1,3\n"));
        // No workers: the main thread polls, and no worker list is given.
        let none = VppConfig {
            workers: vec![],
            ..cfg()
        };
        assert!(startup_conf(&none, Path::new("/v"), "t").contains("cpu {\n  main-core 0\n}\n"));
        assert!(!setup_commands(&none, Path::new("/m"))[1].contains("queues"));
    }

    #[test]
    fn a_slave_connects_to_the_socket_it_is_given() {
        let pod = VppConfig {
            topology: VppTopology {
                slave_of: Some("/node/memif.sock".into()),
                ..VppTopology::l3fwd([2, 0, 0, 0, 0, 1])
            },
            ..cfg()
        };
        let cmds = setup_commands(&pod, Path::new("/own/memif.sock"));
        assert_eq!(
            cmds[0],
            "create memif socket id 1 filename /node/memif.sock"
        );
        assert!(cmds[1].ends_with(" slave") && cmds[2].ends_with(" slave"));
    }

    #[test]
    fn replies() {
        assert!(check_reply("set interface state memif1/0 up", "\n").is_ok());
        assert!(
            check_reply(
                "create interface memif id 0 socket-id 1 master",
                "memif1/0\n"
            )
            .is_ok()
        );
        let e = check_reply(
            "set ip neighbor memif1/1 10.10.2.2 02:00:00:00:00:01 static",
            "set ip neighbor: unknown input `static'\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("unknown input") && e.contains("set ip neighbor memif1/1"),
            "{e}"
        );
        assert!(check_reply("create interface memif id 0", "memif1/0\nwarning\n").is_err());
        assert!(check_reply("create vxlan tunnel src 1.1.1.1", "vxlan_tunnel3\n").is_ok());
        assert!(check_reply("create vxlan tunnel src 1.1.1.1", "memif1/0\n").is_err());
        assert!(check_reply("create interface memif id 0", "vxlan_tunnel0\n").is_err());
    }

    #[test]
    fn parses_show_interface() {
        let out = "              Name               Idx    State  MTU (L3/IP4/IP6/MPLS)     Counter          Count     
local0                            0     down          0/0/0/0       
memif1/0                          1      up          9000/0/0/0     rx packets               5000000
                                                                    rx bytes               320000000
                                                                    drops                          3
                                                                    ip4                      5000000
                                                                    rx-miss                       12
memif1/1                          2      up          9000/0/0/0     tx packets               4999997
                                                                    tx bytes               319999808
                                                                    tx-error                       1
";
        let v = parse_show_interface(out);
        assert_eq!(v.len(), 3);
        assert_eq!(
            (v[0].name.as_str(), v[0].index, v[0].up),
            ("local0", 0, false)
        );
        assert!(v[0].counters.is_empty());
        let a = &v[1];
        assert_eq!(
            (
                a.name.as_str(),
                a.up,
                a.rx_packets,
                a.rx_bytes,
                a.drops,
                a.rx_miss
            ),
            ("memif1/0", true, 5_000_000, 320_000_000, 3, 12)
        );
        assert!(a.counters.contains(&("ip4".into(), 5_000_000)));
        let b = &v[2];
        assert_eq!(
            (
                b.name.as_str(),
                b.tx_packets,
                b.tx_bytes,
                b.tx_error,
                b.rx_packets
            ),
            ("memif1/1", 4_999_997, 319_999_808, 1, 0)
        );
        // Before VPP 19.04 there was no MTU column.
        let old = "              Name               Idx       State          Counter          Count
memif1/0                          1         up       rx packets                    10
";
        let v = parse_show_interface(old);
        assert_eq!((v[0].name.as_str(), v[0].rx_packets), ("memif1/0", 10));
        assert!(parse_show_interface("garbage\n").is_empty());
    }

    #[test]
    fn parses_show_runtime_per_worker_in_nanoseconds() {
        // VPP 25.10's layout, two threads, a multinet path (abridged).
        let out = "Thread 0 vpp_main (lcore 0)
Time 2.0, 10 sec internal node vector rate 0.00 loops/sec 1020.00
  vector rates in 0.0000e0, out 0.0000e0, drop 0.0000e0, punt 0.0000e0
             Name                 State         Calls          Vectors        Suspends         Clocks       Vectors/Call
unix-epoll-input                 polling              2040               0               0          4.20e4            0.00
---------------
Thread 1 vpp_wk_0 (lcore 1)
Time 2.0, 10 sec internal node vector rate 256.00 loops/sec 20000.00
  vector rates in 5.0000e6, out 5.0000e6, drop 0.0000e0, punt 0.0000e0
             Name                 State         Calls          Vectors        Suspends         Clocks       Vectors/Call
ethernet-input                   active             39062        10000000               0          8.00e0          256.00
ip4-vxlan-bypass                 active             19531         5000000               0          4.20e0          256.00
memif-input                      polling            40000        10000000               0          2.10e1          250.00
memif1/0-output                  active             19531         5000000               0          2.00e0          256.00
memif1/0-tx                      active             19531         5000000               0          4.20e1          256.00
memif1/1-output                  active             19531         5000000               0          2.00e0          256.00
memif1/1-tx                      active             19531         5000000               0          3.80e1          256.00
vxlan4-input                     active             19531         5000000               0          1.05e1          256.00
some-process                 interrupt wait            3               0               0          1.00e3            0.00
";
        let w = parse_show_runtime(out, 2.1);
        assert_eq!(
            w.len(),
            1,
            "the main thread is left out once there are workers"
        );
        let w = &w[0];
        assert_eq!(
            (w.worker, w.core, w.seconds, w.loops),
            (0, Some(1), 2.0, 40_000)
        );
        let node = |n: &str| w.nodes.iter().find(|x| x.name == n).unwrap().clone();
        let input = node("memif-input");
        assert_eq!((input.kind.as_str(), input.vectors), ("input", 10_000_000));
        // 21 ticks a packet at 2.1 GHz: 10 ns a packet.
        assert_eq!(input.clocks, 100_000_000);
        assert_eq!(node("vxlan4-input").clocks, 25_000_000);
        // Per-interface output nodes fold into one column per kind.
        let tx = node("memif-tx");
        assert_eq!(
            (tx.vectors, tx.clocks),
            (10_000_000, 100_000_000 + 90_476_190)
        );
        assert_eq!(node("interface-output").vectors, 10_000_000);
        assert!(!w.nodes.iter().any(|n| n.name.contains('/')));
        assert_eq!(node("some-process").kind, "input");
        // Through the harness's own arithmetic: ns per packet per node.
        let costs = crate::dut::node_costs(std::slice::from_ref(w));
        let cost = |n: &str| costs.iter().find(|c| c.0 == n).unwrap().1;
        assert!((cost("memif-input") - 10.0).abs() < 1e-9);
        assert!((cost("ethernet-input") - 8.0 / 2.1).abs() < 1e-6);
        // A single-threaded VPP has no Thread lines: its one thread is the worker.
        let single = "Time 1.0, 10 sec internal node vector rate 1.00 loops/sec 5.00
             Name                 State         Calls          Vectors        Suspends         Clocks       Vectors/Call
memif-input                      polling               10             100               0          1.00e1           10.00
";
        let w = parse_show_runtime(single, 1.0);
        assert_eq!((w.len(), w[0].core, w[0].nodes[0].clocks), (1, None, 1000));
        assert!(parse_show_runtime("garbage", 1.0).is_empty());
    }

    #[test]
    fn memif_drops_for_a_full_ring_are_read_per_interface_and_thread() {
        let out = "   Count                  Node                              Reason               Severity
      4386                memif1/1-tx                       no free tx slots               error
        10                memif1/10-tx                      no free tx slots               error
         7                memif1/1-tx                       no free tx slots               error
         3              ip4-input                     ip4 ttl <= 1                     error
";
        assert_eq!(no_free_tx_slots(out, "memif1/1"), 4393);
        assert_eq!(no_free_tx_slots(out, "memif1/10"), 10);
        assert_eq!(no_free_tx_slots(out, "memif1/0"), 0);
    }

    #[test]
    fn reads_the_tsc_rate_from_show_cpu() {
        let out = "Model name:               Intel(R) Xeon(R) CPU E5-2667 v4 @ 3.20GHz
Microarch model (family): [0x6] Broadwell ([0x4f] Broadwell-EP/EX) stepping 0x1
Flags:                    sse3 pclmulqdq ssse3 sse41 sse42 avx rdrand avx2 bmi2 rtm
Base frequency:           3.19 GHz
";
        assert_eq!(parse_base_ghz(out), Some(3.19));
        assert_eq!(parse_base_ghz("Base frequency: 0.00 GHz"), None);
        assert_eq!(parse_base_ghz(""), None);
    }

    #[test]
    fn missing_binaries_are_named() {
        let e = spawn(Path::new("/nonexistent/vpp"), None, &cfg()).unwrap_err();
        assert!(matches!(e, DutError::Missing(_)), "{e}");
        assert_eq!(
            e.to_string(),
            "VPP not found at /nonexistent/vpp; install VPP or pass --vpp-bin"
        );
        // A vpp without a vppctl beside it or on PATH (PATH is not changed here: an explicit
        // vppctl that does not exist takes the same path).
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("vpp");
        std::fs::write(&fake, "").unwrap();
        let e = spawn(&fake, Some(Path::new("/nonexistent/vppctl")), &cfg())
            .unwrap_err()
            .to_string();
        assert!(e.contains("vppctl not found at /nonexistent/vppctl"), "{e}");
        assert_eq!(find(Some(Path::new("/nonexistent/vpp"))), None);
        assert_eq!(find(Some(&fake)), Some(fake));
    }
}
