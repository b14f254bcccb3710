//! The VPP-like command language of `veclane ctl`: each command line maps onto one
//! [`Request`]; each [`Reply`] formats as text. A wrong argument gets a message that names it
//! and shows the command's one-line help.

use crate::{
    AfPacketSpec, AfXdpSpec, CapturePoint, Clear, Ipv4Prefix, MemifSpec, NeighborSpec, ParseError,
    Reply, Request, Role, RouteSpec, TapSpec, Via,
};

/// Every command: its usage and one line of help.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "show version",
        "daemon version, workers and runtime directory",
    ),
    (
        "show interface [IF]",
        "interfaces: state, addresses, counters; `queues rx N tx N` are the queues in use (none while a memif is not connected), a memif's `max-queues` its limits (master: the most a peer may open; slave: what it asks for)",
    ),
    (
        "show interface rx-placement",
        "which worker (core) polls each rx queue",
    ),
    (
        "show runtime",
        "per worker, per node: calls, vectors, clocks per packet (ns: one read of the CPU's time-stamp counter per node call when Linux keeps time with it, clocksource `tsc`, else of the monotonic clock)",
    ),
    (
        "show buffers",
        "per worker: buffers in its pool, free and in use (at rest, those held by rings and queues)",
    ),
    (
        "show copy-engine",
        "the copy engines: configured and chosen, DSA work queues found, per worker counters",
    ),
    ("show errors", "every non-zero error counter, by node"),
    ("show trace", "packets traced through the graph"),
    (
        "trace add NODE N",
        "trace the next N packets input node NODE produces (e.g. memif-input)",
    ),
    (
        "clear runtime|errors|trace|interfaces",
        "reset those counters or records",
    ),
    (
        "create interface memif id N socket PATH master|slave [rx-queues N] [tx-queues N] [ring-size N] [buffer-size N] [secret S] [hw-addr MAC] [name NAME] [network NET] [mtu N] [mode ethernet|ip] [rx-mode polling|interrupt|adaptive] [use-dma] [netns NS] [pod ID]",
        "a memif interface; PATH relative to the runtime directory, @name for abstract sockets; a master with `netns` listens inside that network namespace (a pod's: `ip netns` name or path); `pod` records the container id; `mode ip` carries bare IPv4 packets; `rx-mode polling` keeps the workers holding its queues polling; `use-dma` offloads its copies to an Intel DSA work queue",
    ),
    (
        "create interface tap host-if-name NAME [netns NS] [queues N] [mtu N] [host-mac MAC] [hw-addr MAC] [name NAME] [network NET] [pod ID]",
        "a tap device named NAME inside network namespace NS (a pod's), up, with virtio-net headers and N queues; our side is interface NAME (default tapN)",
    ),
    (
        "create interface af-xdp host-if NAME [queues N] [mode auto|copy|zero-copy] [hw-addr MAC] [name NAME]",
        "an uplink through AF_XDP (an XSK and UMEM per queue, veclane's XDP program on the interface)",
    ),
    (
        "create interface af-packet host-if NAME [queues N] [hw-addr MAC] [name NAME]",
        "an uplink on a kernel interface (AF_PACKET, TPACKET_V3 rings, PACKET_FANOUT over N queues)",
    ),
    (
        "network add NET vni N range A.B.C.D/L [range A.B.C.D/L]... [uplink IF] [no-df] [owner NAME]",
        "an isolated network with a VRF of its own; pod interfaces attach with `network NET`; `owner` names the controller that manages it (the node agent: veclane-agent)",
    ),
    (
        "network del NET",
        "delete a network no interface is attached to, and its VRF",
    ),
    ("show network", "networks: VNI, ranges, VRF, interfaces"),
    (
        "delete interface IF",
        "delete an interface: its addresses, routes through it, neighbours and queues go; its peer is disconnected",
    ),
    ("set interface state IF up|down", "administrative state"),
    (
        "set interface ip address [del] IF A.B.C.D/L",
        "add (or delete) an interface address",
    ),
    (
        "set interface mtu IF N",
        "the largest IPv4 packet IF sends (bigger ones: ICMP fragmentation needed, or dropped without DF)",
    ),
    (
        "set interface ip table IF VRF",
        "the IPv4 table packets received on IF are routed in",
    ),
    (
        "ip route add|del A.B.C.D/L via NH [IF] [table VRF | network NET]",
        "a static route; in a network, a next hop outside its ranges is a remote VTEP (the route goes through the VXLAN tunnel to it)",
    ),
    (
        "show vxlan tunnel",
        "VXLAN tunnels: network, VNI, VTEPs, uplink, MTU, routes, counters",
    ),
    ("show ip fib [table VRF]", "routes and what they resolve to"),
    (
        "show ip fib summary",
        "how many routes each table (VRF) holds",
    ),
    (
        "monitor [interval SECS] [count N]",
        "live rates: per interface packets and Mbit/s (L2) each way, errors and ring-full drops; per worker and node packets/s, vectors per call and ns per packet; redrawn every interval (default 1 s) on a terminal, one line per interface and busy node otherwise; until ctrl-c or N intervals",
    ),
    ("show ip neighbors", "ARP neighbours, learned and static"),
    (
        "set ip neighbor [del] IF A.B.C.D MAC",
        "a static ARP neighbour",
    ),
    (
        "pcap trace rx|tx|drop... on IF|any FILE [max N]",
        "capture packets at those points into FILE (written at off)",
    ),
    ("pcap trace off", "stop capturing and write the file"),
];

/// The help text: every command with its line.
pub fn help() -> String {
    let mut s = String::from("commands:\n");
    for (usage, what) in COMMANDS {
        s.push_str(&format!("  {usage}\n      {what}\n"));
    }
    s
}

/// The command reference as Markdown: `docs/ctl.md` is this text (a test keeps them equal).
pub fn reference_markdown() -> String {
    let mut s = String::from(
        "# `veclane ctl` command reference\n\n\
         Generated from the control API's command table (`api::cli::COMMANDS`); a test fails when \
         this file and the table differ. Regenerate it with \
         `VECLANE_BLESS=1 cargo test -p api ctl_reference`.\n\n\
         `veclane ctl WORDS` sends one command to the daemon's control socket (`ctl.sock` in the \
         runtime directory, or `--socket PATH`) and prints the reply; `--json` prints the raw \
         reply; `veclane ctl help` lists the commands.\n\n\
         | command | what it does |\n|---|---|\n",
    );
    for (usage, what) in COMMANDS {
        let usage = usage.replace('|', "\\|");
        s.push_str(&format!("| `{usage}` | {what} |\n"));
    }
    s
}

fn usage_of(prefix: &str) -> String {
    COMMANDS
        .iter()
        .filter(|(u, _)| u.starts_with(prefix))
        .map(|(u, w)| format!("usage: {u}  ({w})"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A command line that does not parse: what is wrong, and the usage of the command meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub message: String,
}

impl CliError {
    /// Whether the message mentions `s` (tests look for the argument they got wrong).
    pub fn contains(&self, s: &str) -> bool {
        self.message.contains(s)
    }
}

/// Word cursor with error messages that name the command.
struct Words<'a> {
    w: &'a [&'a str],
    i: usize,
    cmd: &'static str,
}

impl<'a> Words<'a> {
    fn err(&self, msg: String) -> CliError {
        CliError {
            message: format!("{msg}\n{}", usage_of(self.cmd)),
        }
    }
    /// The next word as a value of a typed field, with that type's message when it is wrong.
    fn value<T: std::str::FromStr<Err = ParseError>>(&mut self, what: &str) -> Result<T, CliError> {
        let s = self.next(what)?;
        s.parse()
            .map_err(|e: ParseError| self.err(format!("{what}: {e}")))
    }
    fn next(&mut self, what: &str) -> Result<&'a str, CliError> {
        let r = self
            .w
            .get(self.i)
            .copied()
            .ok_or_else(|| self.err(format!("missing {what}")))?;
        self.i += 1;
        Ok(r)
    }
    fn peek(&self) -> Option<&'a str> {
        self.w.get(self.i).copied()
    }
    fn eat(&mut self, word: &str) -> bool {
        if self.peek() == Some(word) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn number<T: std::str::FromStr>(&mut self, what: &str) -> Result<T, CliError> {
        let s = self.next(what)?;
        s.parse()
            .map_err(|_| self.err(format!("{what} {s:?} is not a valid number")))
    }
    fn done(&self) -> Result<(), CliError> {
        match self.peek() {
            None => Ok(()),
            Some(x) => Err(self.err(format!("unexpected argument {x:?}"))),
        }
    }
}

/// Parses one command line (already split into words).
pub fn parse(words: &[&str]) -> Result<Request, CliError> {
    let mut w = Words {
        w: words,
        i: 0,
        cmd: "",
    };
    let first = w.next("command (try `help`)")?;
    let second = w.peek().unwrap_or("");
    let r = match (first, second) {
        ("show", "version") => {
            w.cmd = "show version";
            w.i += 1;
            Request::ShowVersion
        }
        ("show", "interface") | ("show", "int") | ("show", "interfaces") => {
            w.cmd = "show interface";
            w.i += 1;
            if w.eat("rx-placement") {
                Request::ShowRxPlacement
            } else {
                Request::ShowInterface {
                    name: w.peek().map(|s| {
                        w.i += 1;
                        s.to_string()
                    }),
                }
            }
        }
        ("show", "runtime") | ("show", "run") => {
            w.cmd = "show runtime";
            w.i += 1;
            Request::ShowRuntime
        }
        ("show", "buffers") => {
            w.cmd = "show buffers";
            w.i += 1;
            Request::ShowBuffers
        }
        ("show", "copy-engine") => {
            w.cmd = "show copy-engine";
            w.i += 1;
            Request::ShowCopyEngine
        }
        ("show", "errors") | ("show", "error") => {
            w.cmd = "show errors";
            w.i += 1;
            Request::ShowErrors
        }
        ("show", "trace") => {
            w.cmd = "show trace";
            w.i += 1;
            Request::ShowTrace
        }
        ("show", "ip") => {
            w.cmd = "show ip";
            w.i += 1;
            match w.next("fib or neighbors")? {
                "fib" => {
                    w.cmd = "show ip fib";
                    if w.eat("summary") {
                        return Ok(Request::ShowIpFibSummary);
                    }
                    let table = if w.eat("table") {
                        Some(w.number("table")?)
                    } else {
                        None
                    };
                    Request::ShowIpFib { table }
                }
                "neighbors" | "neighbours" | "neighbor" | "arp" => Request::ShowIpNeighbors,
                x => return Err(w.err(format!("unknown `show ip {x}`: expected fib or neighbors"))),
            }
        }
        ("trace", "add") => {
            w.cmd = "trace add";
            w.i += 1;
            let node = w.next("node name")?.to_string();
            let count = w.number("packet count")?;
            Request::TraceAdd { node, count }
        }
        ("clear", _) => {
            w.cmd = "clear";
            let what = match w.next("what to clear")? {
                "runtime" | "run" => Clear::Runtime,
                "errors" | "error" => Clear::Errors,
                "trace" => Clear::Trace,
                "interfaces" | "interface" => Clear::Interfaces,
                x => {
                    return Err(w.err(format!(
                        "cannot clear {x:?}: expected runtime, errors, trace or interfaces"
                    )));
                }
            };
            Request::Clear { what }
        }
        ("create", "interface") => {
            w.cmd = "create interface memif";
            w.i += 1;
            match w.next("interface type (memif, tap, af-packet or af-xdp)")? {
                "memif" => create_memif(&mut w)?,
                "tap" => {
                    w.cmd = "create interface tap";
                    create_tap(&mut w)?
                }
                "af-packet" => {
                    w.cmd = "create interface af-packet";
                    create_af_packet(&mut w)?
                }
                "af-xdp" => {
                    w.cmd = "create interface af-xdp";
                    create_af_xdp(&mut w)?
                }
                x => {
                    return Err(w.err(format!(
                        "unknown interface type {x:?}: expected memif, tap, af-packet or af-xdp"
                    )));
                }
            }
        }
        ("network", _) => {
            w.cmd = "network";
            match w.next("add or del")? {
                "add" => {
                    w.cmd = "network add";
                    let name = w.next("network name")?.to_string();
                    if !w.eat("vni") {
                        return Err(w.err("missing `vni N`".into()));
                    }
                    let vni = w.number("vni")?;
                    let mut ranges = Vec::new();
                    while w.eat("range") {
                        ranges.push(w.value("range")?);
                    }
                    if ranges.is_empty() {
                        return Err(w.err("missing `range A.B.C.D/L`".into()));
                    }
                    let uplink = if w.eat("uplink") {
                        Some(w.next("uplink interface")?.to_string())
                    } else {
                        None
                    };
                    let df = !w.eat("no-df");
                    let owner = if w.eat("owner") {
                        Some(w.next("owner name")?.to_string())
                    } else {
                        None
                    };
                    Request::NetworkAdd(crate::NetworkSpec {
                        name,
                        vni,
                        ranges,
                        uplink,
                        df,
                        owner,
                    })
                }
                "del" | "delete" => {
                    w.cmd = "network del";
                    Request::NetworkDel {
                        name: w.next("network name")?.to_string(),
                    }
                }
                x => return Err(w.err(format!("{x:?}: expected add or del"))),
            }
        }
        ("show", "network") | ("show", "networks") => {
            w.cmd = "show network";
            w.i += 1;
            Request::ShowNetwork
        }
        ("delete", "interface") | ("delete", "int") => {
            w.cmd = "delete interface";
            w.i += 1;
            Request::DeleteInterface {
                name: w.next("interface name")?.to_string(),
            }
        }
        ("set", "interface") | ("set", "int") => {
            w.i += 1;
            w.cmd = "set interface";
            match w.next("state, mtu or ip")? {
                "mtu" => {
                    w.cmd = "set interface mtu";
                    let interface = w.next("interface name")?.to_string();
                    let mtu = w.number("mtu")?;
                    Request::SetInterfaceMtu { interface, mtu }
                }
                "state" => {
                    w.cmd = "set interface state";
                    let interface = w.next("interface name")?.to_string();
                    let up = match w.next("up or down")? {
                        "up" => true,
                        "down" => false,
                        x => return Err(w.err(format!("state {x:?} must be up or down"))),
                    };
                    Request::SetState { interface, up }
                }
                "ip" => match w.next("address or table")? {
                    "address" | "addr" => {
                        w.cmd = "set interface ip address";
                        let delete = w.eat("del");
                        let interface = w.next("interface name")?.to_string();
                        let address = w.value("address")?;
                        Request::SetIpAddress {
                            interface,
                            address,
                            delete,
                        }
                    }
                    "table" => {
                        w.cmd = "set interface ip table";
                        let interface = w.next("interface name")?.to_string();
                        let table = w.number("table")?;
                        Request::SetIpTable { interface, table }
                    }
                    x => return Err(w.err(format!("unknown `set interface ip {x}`"))),
                },
                x => return Err(w.err(format!("unknown `set interface {x}`"))),
            }
        }
        ("set", "ip") => {
            w.i += 1;
            w.cmd = "set ip neighbor";
            match w.next("neighbor")? {
                "neighbor" | "neighbour" | "arp" => {}
                x => return Err(w.err(format!("unknown `set ip {x}`"))),
            }
            let delete = w.eat("del");
            let interface = w.next("interface name")?.to_string();
            let ip = w.next("address A.B.C.D")?;
            let ip = crate::parse_ipv4(ip).map_err(|e| w.err(format!("address: {e}")))?;
            let mac = w.next("MAC address")?;
            let mac = crate::parse_mac(mac).map_err(|e| w.err(format!("MAC: {e}")))?;
            Request::SetIpNeighbor {
                neighbor: NeighborSpec { interface, ip, mac },
                delete,
            }
        }
        ("ip", "route") => {
            w.i += 1;
            w.cmd = "ip route";
            let add = match w.next("add or del")? {
                "add" => true,
                "del" | "delete" => false,
                x => return Err(w.err(format!("{x:?}: expected add or del"))),
            };
            let prefix: Ipv4Prefix = w.value("prefix")?;
            if !w.eat("via") {
                return Err(w.err("missing `via NH`".into()));
            }
            let via: Via = w.value("next hop")?;
            let mut interface = None;
            let mut table = 0;
            let mut network = None;
            while let Some(x) = w.peek() {
                if x == "table" {
                    w.i += 1;
                    table = w.number("table")?;
                } else if x == "network" {
                    w.i += 1;
                    network = Some(w.next("network name")?.to_string());
                } else if interface.is_none() {
                    interface = Some(x.to_string());
                    w.i += 1;
                } else {
                    break;
                }
            }
            Request::IpRoute {
                add,
                route: RouteSpec {
                    prefix,
                    via,
                    interface,
                    table,
                    network,
                },
            }
        }
        ("show", "vxlan") => {
            w.cmd = "show vxlan tunnel";
            w.i += 1;
            match w.next("tunnel")? {
                "tunnel" | "tunnels" => Request::ShowVxlanTunnel,
                x => return Err(w.err(format!("unknown `show vxlan {x}`: expected tunnel"))),
            }
        }
        ("pcap", "trace") => {
            w.i += 1;
            w.cmd = "pcap trace";
            let mut points = Vec::new();
            loop {
                match w.next("rx, tx, drop, on or off")? {
                    "rx" => points.push(CapturePoint::Rx),
                    "tx" => points.push(CapturePoint::Tx),
                    "drop" => points.push(CapturePoint::Drop),
                    "off" => {
                        w.done()?;
                        return Ok(Request::PcapOff);
                    }
                    "on" => break,
                    x => {
                        return Err(w.err(format!(
                            "capture point {x:?}: expected rx, tx, drop, then on or off"
                        )));
                    }
                }
            }
            if points.is_empty() {
                return Err(w.err("name at least one of rx, tx, drop before `on`".into()));
            }
            let interface = w.next("interface name (or any)")?.to_string();
            let file = w.next("output file")?.to_string();
            let max_packets = if w.eat("max") {
                Some(w.number("max packets")?)
            } else {
                None
            };
            Request::PcapOn {
                points,
                interface,
                file,
                max_packets,
            }
        }
        _ => {
            return Err(CliError {
                message: format!(
                    "unknown command {:?}; `veclane ctl help` lists them",
                    words.join(" ")
                ),
            });
        }
    };
    w.done()?;
    Ok(r)
}

fn create_memif(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut id = None;
    let mut socket = None;
    let mut role = None;
    let mut spec = MemifSpec::new(0, "", Role::Master);
    while let Some(k) = w.peek() {
        w.i += 1;
        match k {
            "id" => id = Some(w.number("id")?),
            "socket" => socket = Some(w.next("socket path")?.to_string()),
            "master" => role = Some(Role::Master),
            "slave" => role = Some(Role::Slave),
            "rx-queues" => spec.rx_queues = Some(w.number("rx-queues")?),
            "tx-queues" => spec.tx_queues = Some(w.number("tx-queues")?),
            "ring-size" => spec.ring_size = Some(w.number("ring-size")?),
            "buffer-size" => spec.buffer_size = Some(w.number("buffer-size")?),
            "secret" => spec.secret = Some(w.next("secret")?.to_string()),
            "name" => spec.name = Some(w.next("name")?.to_string()),
            "network" => spec.network = Some(w.next("network name")?.to_string()),
            "mtu" => spec.mtu = Some(w.number("mtu")?),
            "netns" => spec.netns = Some(w.next("network namespace")?.to_string()),
            "pod" => spec.pod = Some(w.next("container id")?.to_string()),
            "mode" => {
                spec.mode = w
                    .next("ethernet or ip")?
                    .parse()
                    .map_err(|e: String| w.err(e))?
            }
            "use-dma" => spec.use_dma = true,
            "rx-mode" => {
                spec.rx_mode = Some(
                    w.next("polling, interrupt or adaptive")?
                        .parse()
                        .map_err(|e| w.err(format!("rx-mode: {e}")))?,
                )
            }
            "hw-addr" => {
                let m = w.next("MAC address")?;
                spec.mac = Some(crate::parse_mac(m).map_err(|e| w.err(format!("hw-addr: {e}")))?);
            }
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    spec.id = id.ok_or_else(|| w.err("missing `id N`".into()))?;
    spec.socket = socket.ok_or_else(|| w.err("missing `socket PATH`".into()))?;
    spec.role = role.ok_or_else(|| w.err("missing role: master or slave".into()))?;
    Ok(Request::CreateMemif(spec))
}

fn create_tap(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut spec = TapSpec::new("");
    let mut host = None;
    while let Some(k) = w.peek() {
        w.i += 1;
        match k {
            "host-if-name" => host = Some(w.next("interface name in the namespace")?.to_string()),
            "netns" => spec.netns = Some(w.next("network namespace")?.to_string()),
            "queues" => spec.queues = Some(w.number("queues")?),
            "mtu" => spec.mtu = Some(w.number("mtu")?),
            "name" => spec.name = Some(w.next("name")?.to_string()),
            "network" => spec.network = Some(w.next("network name")?.to_string()),
            "pod" => spec.pod = Some(w.next("container id")?.to_string()),
            "hw-addr" | "host-mac" => {
                let m = w.next("MAC address")?;
                let m = Some(crate::parse_mac(m).map_err(|e| w.err(format!("{k}: {e}")))?);
                if k == "hw-addr" {
                    spec.mac = m;
                } else {
                    spec.host_mac = m;
                }
            }
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    spec.host_if_name = host.ok_or_else(|| w.err("missing `host-if-name NAME`".into()))?;
    Ok(Request::CreateTap(spec))
}

fn create_af_packet(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut spec = AfPacketSpec::new("");
    let mut host = None;
    while let Some(k) = w.peek() {
        w.i += 1;
        match k {
            "host-if" => host = Some(w.next("host interface name")?.to_string()),
            "queues" => spec.queues = Some(w.number("queues")?),
            "name" => spec.name = Some(w.next("name")?.to_string()),
            "hw-addr" => {
                let m = w.next("MAC address")?;
                spec.mac = Some(crate::parse_mac(m).map_err(|e| w.err(format!("hw-addr: {e}")))?);
            }
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    spec.host_if = host.ok_or_else(|| w.err("missing `host-if NAME`".into()))?;
    Ok(Request::CreateAfPacket(spec))
}

fn create_af_xdp(w: &mut Words<'_>) -> Result<Request, CliError> {
    let mut spec = AfXdpSpec::new("");
    let mut host = None;
    while let Some(k) = w.peek() {
        w.i += 1;
        match k {
            "host-if" => host = Some(w.next("host interface name")?.to_string()),
            "queues" => spec.queues = Some(w.number("queues")?),
            "mode" => {
                spec.mode = w
                    .next("auto, copy or zero-copy")?
                    .parse()
                    .map_err(|e: String| w.err(e))?
            }
            "name" => spec.name = Some(w.next("name")?.to_string()),
            "hw-addr" => {
                let m = w.next("MAC address")?;
                spec.mac = Some(crate::parse_mac(m).map_err(|e| w.err(format!("hw-addr: {e}")))?);
            }
            x => return Err(w.err(format!("unknown argument {x:?}"))),
        }
    }
    spec.host_if = host.ok_or_else(|| w.err("missing `host-if NAME`".into()))?;
    Ok(Request::CreateAfXdp(spec))
}

/// Formats a reply as the text `veclane ctl` prints.
pub fn format(reply: &Reply) -> String {
    let mut s = String::new();
    match reply {
        Reply::Ok => {}
        Reply::Error { message, .. } => s.push_str(&format!("error: {message}\n")),
        Reply::Version {
            version,
            workers,
            runtime_dir,
        } => s.push_str(&format!(
            "veclane {version}, {workers} worker(s), runtime directory {runtime_dir}\n"
        )),
        Reply::Created { name, index } => s.push_str(&format!("{name} (index {index})\n")),
        Reply::Interfaces { interfaces } => {
            s.push_str(&format!(
                "{:<14} {:>3} {:<6} {:<5} {:>12} {:>14} {:>12} {:>14} {:>8} {:>8}\n",
                "Name",
                "Idx",
                "State",
                "Link",
                "rx packets",
                "rx bytes",
                "tx packets",
                "tx bytes",
                "rx err",
                "tx full"
            ));
            for i in interfaces {
                s.push_str(&format!(
                    "{:<14} {:>3} {:<6} {:<5} {:>12} {:>14} {:>12} {:>14} {:>8} {:>8}\n",
                    i.name,
                    i.index,
                    if i.admin_up { "up" } else { "down" },
                    if i.connected { "up" } else { "down" },
                    i.rx_packets,
                    i.rx_bytes,
                    i.tx_packets,
                    i.tx_bytes,
                    i.rx_errors,
                    i.tx_no_room
                ));
                s.push_str(&format!(
                    "    {} mac {} table {} mtu {} queues rx {} tx {}\n",
                    i.device, i.mac, i.table, i.mtu, i.rx_queues, i.tx_queues
                ));
                if let Some(n) = &i.network {
                    s.push_str(&format!("    network {n}\n"));
                }
                if let Some(p) = &i.pod {
                    s.push_str(&format!("    pod {p}\n"));
                }
                if !i.addresses.is_empty() {
                    let a: Vec<String> = i.addresses.iter().map(ToString::to_string).collect();
                    s.push_str(&format!("    addresses {}\n", a.join(" ")));
                }
                if let Some(p) = &i.peer {
                    s.push_str(&format!("    peer {p}\n"));
                }
                if let Some(r) = &i.last_disconnect_reason {
                    s.push_str(&format!(
                        "    connects {} disconnects {} last: {r}\n",
                        i.connects, i.disconnects
                    ));
                }
            }
        }
        Reply::RxPlacement { placement } => {
            for p in placement {
                s.push_str(&format!(
                    "interface {} queue {}: worker {} (core {}), {}{}\n",
                    p.interface,
                    p.queue,
                    p.worker,
                    p.core.map_or("any".to_string(), |c| c.to_string()),
                    p.mode,
                    if p.connected { "" } else { ", not connected" }
                ));
            }
        }
        Reply::CopyEngine { info } => {
            s.push_str(&format!("copy-engine {}", info.configured));
            s.push_str(&format!(", DSA work queues from {}\n", info.dsa_source));
            for q in &info.dsa_queues {
                s.push_str(&format!("  usable: {q}\n"));
            }
            for q in &info.dsa_unusable {
                s.push_str(&format!("  not usable: {q}\n"));
            }
            if let Some(w) = &info.why_not_dsa {
                s.push_str(&format!("  DSA not in use: {w}\n"));
            }
            for r in &info.registered {
                s.push_str(&format!("  registered: {r}\n"));
            }
            for e in &info.engines {
                s.push_str(&format!(
                    "worker {} {} {}: {}{}\n",
                    e.worker,
                    e.node,
                    e.role,
                    e.kind,
                    e.queue
                        .as_deref()
                        .map(|q| format!(" {q}"))
                        .unwrap_or_default()
                ));
                s.push_str(&format!(
                    "  {} batches, {} copies, {} bytes, {} full\n",
                    e.batches, e.copies, e.bytes, e.full
                ));
                if e.kind == crate::CopyEngine::Dsa {
                    s.push_str(&format!(
                        "  {} descriptors, {} short (made at once), {} inline, {} recovered on the CPU, {} watchdog, {} fallback\n",
                        e.descriptors, e.short, e.inline, e.recovered, e.watchdog, e.fallback
                    ));
                }
                for n in &e.notes {
                    s.push_str(&format!("  note: {n}\n"));
                }
                if let Some(t) = &e.tripped {
                    s.push_str(&format!("  tripped, on the CPU from now on: {t}\n"));
                }
            }
        }
        Reply::Buffers { workers } => {
            for b in workers {
                s.push_str(&format!(
                    "worker {} (core {}): {} buffers, {} free, {} in use\n",
                    b.worker,
                    b.core.map_or("any".to_string(), |c| c.to_string()),
                    b.total,
                    b.free,
                    b.total.saturating_sub(b.free)
                ));
            }
        }
        Reply::Runtime { workers } => {
            for w in workers {
                s.push_str(&format!(
                    "Thread {} vl_wk_{} (core {}): {:.1} s, {} loops, {} sleeps\n",
                    w.worker + 1,
                    w.worker,
                    w.core.map_or("any".to_string(), |c| c.to_string()),
                    w.seconds,
                    w.loops,
                    w.sleeps
                ));
                s.push_str(&format!(
                    "{:<22} {:<9} {:>12} {:>14} {:>14} {:>12} {:>10}\n",
                    "Name", "State", "Calls", "Vectors", "Clocks(ns)", "ns/Packet", "Vec/Call"
                ));
                for n in &w.nodes {
                    if n.calls == 0 {
                        continue;
                    }
                    let per_pkt = if n.vectors > 0 {
                        n.clocks as f64 / n.vectors as f64
                    } else {
                        0.0
                    };
                    s.push_str(&format!(
                        "{:<22} {:<9} {:>12} {:>14} {:>14} {:>12.2} {:>10.2}\n",
                        n.name,
                        if n.kind == "input" {
                            "polling"
                        } else {
                            "active"
                        },
                        n.calls,
                        n.vectors,
                        n.clocks,
                        per_pkt,
                        n.vectors as f64 / n.calls as f64
                    ));
                }
            }
        }
        Reply::Errors { errors } => {
            s.push_str(&format!("{:>12}  {:<20} {}\n", "Count", "Node", "Reason"));
            for e in errors {
                s.push_str(&format!("{:>12}  {:<20} {}\n", e.count, e.node, e.reason));
            }
        }
        Reply::Trace { text } => s.push_str(text),
        Reply::Fib { entries } => {
            let mut table = None;
            for e in entries {
                if table != Some(e.table) {
                    s.push_str(&format!("ipv4-VRF:{}\n", e.table));
                    table = Some(e.table);
                }
                s.push_str(&format!("  {:<20} {}\n", e.prefix.to_string(), e.path));
            }
        }
        Reply::FibSummary { tables } => {
            s.push_str(&format!("{:<10} {:>10}\n", "VRF", "Routes"));
            for t in tables {
                s.push_str(&format!("{:<10} {:>10}\n", t.table, t.routes));
            }
        }
        Reply::Networks { networks } => {
            s.push_str(&format!(
                "{:<16} {:>8} {:>6}  {:<36} {:<12} {:<14} {}\n",
                "Network", "VNI", "VRF", "Ranges", "Uplink", "Owner", "Interfaces"
            ));
            for n in networks {
                let ranges: Vec<String> = n.ranges.iter().map(ToString::to_string).collect();
                s.push_str(&format!(
                    "{:<16} {:>8} {:>6}  {:<36} {:<12} {:<14} {}\n",
                    n.name,
                    n.vni,
                    n.table,
                    ranges.join(" "),
                    n.uplink.as_deref().unwrap_or("-"),
                    n.owner.as_deref().unwrap_or("-"),
                    n.interfaces.join(" ")
                ));
            }
        }
        Reply::Tunnels { tunnels } => {
            s.push_str(&format!(
                "{:<14} {:<12} {:>8} {:<16} {:<16} {:<12} {:>5} {:>6} {:>12} {:>12}\n",
                "Name",
                "Network",
                "VNI",
                "Src",
                "Dst",
                "Uplink",
                "MTU",
                "Routes",
                "rx packets",
                "tx packets"
            ));
            for t in tunnels {
                s.push_str(&format!(
                    "{:<14} {:<12} {:>8} {:<16} {:<16} {:<12} {:>5} {:>6} {:>12} {:>12}\n",
                    t.name,
                    t.network,
                    t.vni,
                    t.src.to_string(),
                    t.dst.to_string(),
                    t.uplink,
                    t.mtu,
                    t.routes,
                    t.rx_packets,
                    t.tx_packets
                ));
            }
        }
        Reply::Neighbors { neighbors } => {
            s.push_str(&format!(
                "{:<16} {:<18} {:<8} {}\n",
                "IP", "MAC", "Flags", "Interface"
            ));
            for n in neighbors {
                s.push_str(&format!(
                    "{:<16} {:<18} {:<8} {}\n",
                    n.ip.to_string(),
                    n.mac.to_string(),
                    if n.static_entry { "S" } else { "D" },
                    n.interface
                ));
            }
        }
        Reply::Pcap {
            file,
            packets,
            missed,
        } => s.push_str(&format!(
            "wrote {packets} packets to {file}{}\n",
            if *missed > 0 {
                format!(" ({missed} more did not fit)")
            } else {
                String::new()
            }
        )),
    }
    s
}

pub mod monitor;

#[cfg(test)]
mod tests;
