//! The VPP-like command language of `veclane ctl`: each command line maps onto one
//! [`Request`]; each [`Reply`](crate::Reply) formats as text. A wrong argument gets a message
//! that names it and shows the command's one-line help.
//!
//! A verb is one entry of [`COMMANDS`], as a VPP CLI command is one `VLIB_CLI_COMMAND`: the
//! words that name it, its usage and help (`veclane ctl help`, `docs/ctl.md`), and the
//! function that parses its arguments (`verbs.rs`). [`parse`] walks the table. Replies are
//! formatted per reply, not per verb (`reply.rs`). Whether a request changes the
//! configuration is the request's ([`Request::is_change`]): the daemon logs changes from
//! every client, and the CNI plugin sends requests without this language.

mod policy;
mod reply;
mod verbs;

pub mod monitor;

pub use reply::format;

use crate::{ParseError, Request};
// The tests name the requests' parts through `super::*`, as they did when the parsers lived
// in this file.
#[cfg(test)]
use crate::{CapturePoint, Role, RouteSpec, TapSpec, Via};

/// Reads a verb's arguments into its request.
type ParseFn = fn(&mut Words<'_>) -> Result<Request, CliError>;

/// One verb: what names it, how it is used, and how its arguments are read.
#[derive(Debug)]
pub struct Command {
    /// The words that name it, each with its aliases after `|` (`show interface|int`). The
    /// longest path that begins a command line picks its verb (`show interface rx-placement`
    /// over `show interface`).
    pub path: &'static str,
    /// The whole command with its arguments, as help and `docs/ctl.md` show it.
    pub usage: &'static str,
    /// What it does, in one line.
    pub help: &'static str,
    /// Reads the words after the path into a request; `None`: `veclane ctl` serves the verb
    /// itself (`monitor` polls the daemon for counters), it is here for help and the docs.
    parse: Option<ParseFn>,
}

impl Command {
    /// Its path's words, each as its name and aliases.
    fn words(&self) -> impl Iterator<Item = std::str::Split<'static, char>> {
        self.path.split(' ').map(|w| w.split('|'))
    }

    /// How many words of `line`, from its start, name this verb's path so far.
    fn matched(&self, line: &[&str]) -> usize {
        self.words()
            .zip(line)
            .take_while(|(names, word)| names.clone().any(|n| n == **word))
            .count()
    }

    /// The name (not an alias) of its path's word `i`.
    fn word(&self, i: usize) -> &'static str {
        self.path
            .split(' ')
            .nth(i)
            .and_then(|w| w.split('|').next())
            .unwrap_or("")
    }

    /// Its path by the words' names, without the aliases.
    fn name(&self) -> String {
        let names: Vec<&str> = self.words().map(|mut w| w.next().unwrap_or("")).collect();
        names.join(" ")
    }
}

/// Every command, in the order help and `docs/ctl.md` list them.
pub const COMMANDS: &[Command] = &[
    Command {
        path: "show version",
        usage: "show version",
        help: "daemon version, workers and runtime directory",
        parse: Some(|_| Ok(Request::ShowVersion)),
    },
    Command {
        path: "show interface|int|interfaces",
        usage: "show interface [IF]",
        help: "interfaces: state, addresses, counters; `queues rx N tx N` are the queues in use (none while a memif is not connected), a memif's `max-queues` its limits (master: the most a peer may open; slave: what it asks for)",
        parse: Some(verbs::show_interface),
    },
    Command {
        path: "show interface|int|interfaces rx-placement",
        usage: "show interface rx-placement",
        help: "which worker (core) polls each rx queue",
        parse: Some(|_| Ok(Request::ShowRxPlacement)),
    },
    Command {
        path: "show runtime|run",
        usage: "show runtime",
        help: "per worker, per node: calls, vectors, clocks per packet (ns: one read of the CPU's time-stamp counter per node call when Linux keeps time with it, clocksource `tsc`, else of the monotonic clock)",
        parse: Some(|_| Ok(Request::ShowRuntime)),
    },
    Command {
        path: "show buffers",
        usage: "show buffers",
        help: "per worker: buffers in its pool, free and in use (at rest, those held by rings and queues); the memif regions mapped from peers against their budget",
        parse: Some(|_| Ok(Request::ShowBuffers)),
    },
    Command {
        path: "show copy-engine",
        usage: "show copy-engine",
        help: "the copy engines: configured and chosen, DSA work queues found, per worker counters",
        parse: Some(|_| Ok(Request::ShowCopyEngine)),
    },
    Command {
        path: "show errors|error",
        usage: "show errors",
        help: "every non-zero error counter, by node",
        parse: Some(|_| Ok(Request::ShowErrors)),
    },
    Command {
        path: "show trace",
        usage: "show trace",
        help: "packets traced through the graph",
        parse: Some(|_| Ok(Request::ShowTrace)),
    },
    Command {
        path: "trace add",
        usage: "trace add NODE N",
        help: "trace the next N packets input node NODE produces (e.g. memif-input)",
        parse: Some(verbs::trace_add),
    },
    Command {
        path: "clear",
        usage: "clear runtime|errors|trace|interfaces",
        help: "reset those counters or records",
        parse: Some(verbs::clear),
    },
    Command {
        path: "create interface memif",
        usage: "create interface memif id N socket PATH master|slave [rx-queues N] [tx-queues N] [ring-size N] [buffer-size N] [region-limit-mib N] [secret S] [hw-addr MAC] [name NAME] [network NET] [mtu N] [mode ethernet|ip] [rx-mode polling|interrupt|adaptive] [use-dma] [netns NS] [pod ID] [allowed-sources A.B.C.D/L,...]",
        help: "a memif interface; PATH relative to the runtime directory (a file socket named over the API must be there), @name for abstract sockets; a master with `netns` listens inside that network namespace (a pod's: `ip netns` name or path); `pod` records the container id; `mode ip` carries bare IPv4 packets; `rx-mode polling` keeps the workers holding its queues polling; `use-dma` offloads its copies to an Intel DSA work queue; `allowed-sources` drops packets from any other source (anti-spoofing)",
        parse: Some(verbs::create_memif),
    },
    Command {
        path: "create interface tap",
        usage: "create interface tap host-if-name NAME [netns NS] [queues N] [mtu N] [host-mac MAC] [hw-addr MAC] [name NAME] [network NET] [pod ID] [allowed-sources A.B.C.D/L,...]",
        help: "a tap device named NAME inside network namespace NS (a pod's), up, with virtio-net headers and N queues; our side is interface NAME (default tapN)",
        parse: Some(verbs::create_tap),
    },
    Command {
        path: "create interface af-xdp",
        usage: "create interface af-xdp host-if NAME [queues N] [mode auto|copy|zero-copy] [hw-addr MAC] [name NAME]",
        help: "an uplink through AF_XDP (an XSK and UMEM per queue, veclane's XDP program on the interface)",
        parse: Some(verbs::create_af_xdp),
    },
    Command {
        path: "create interface af-packet",
        usage: "create interface af-packet host-if NAME [queues N] [rx-ring frames|blocks] [udp-gso on|off] [hw-addr MAC] [name NAME]",
        help: "an uplink on a kernel interface (AF_PACKET rings, PACKET_FANOUT over N queues; receive slots handed over a frame at a time, or TPACKET_V3 blocks)",
        parse: Some(verbs::create_af_packet),
    },
    Command {
        path: "network add",
        usage: "network add NET vni N range A.B.C.D/L [range A.B.C.D/L]... [uplink IF] [no-df] [owner NAME]",
        help: "an isolated network with a VRF of its own; pod interfaces attach with `network NET`; `owner` names the controller that manages it (the node agent: veclane-agent)",
        parse: Some(verbs::network_add),
    },
    Command {
        path: "network del|delete",
        usage: "network del NET",
        help: "delete a network no interface is attached to, and its VRF",
        parse: Some(verbs::network_del),
    },
    Command {
        path: "show network|networks",
        usage: "show network",
        help: "networks: VNI, ranges, VRF, interfaces",
        parse: Some(|_| Ok(Request::ShowNetwork)),
    },
    Command {
        path: "delete interface|int",
        usage: "delete interface IF",
        help: "delete an interface: its addresses, routes through it, neighbours and queues go; its peer is disconnected",
        parse: Some(verbs::delete_interface),
    },
    Command {
        path: "set interface|int state",
        usage: "set interface state IF up|down",
        help: "administrative state",
        parse: Some(verbs::set_state),
    },
    Command {
        path: "set interface|int ip address|addr",
        usage: "set interface ip address [del] IF A.B.C.D/L",
        help: "add (or delete) an interface address",
        parse: Some(verbs::set_ip_address),
    },
    Command {
        path: "set interface|int mtu",
        usage: "set interface mtu IF N",
        help: "the largest IPv4 packet IF sends (bigger ones: ICMP fragmentation needed, or dropped without DF)",
        parse: Some(verbs::set_mtu),
    },
    Command {
        path: "set interface|int allowed-sources",
        usage: "set interface allowed-sources IF any | none | A.B.C.D/L...",
        help: "anti-spoofing: IF takes packets (and ARP claims) only from these sources, dropping and counting the rest; `any` turns the check off",
        parse: Some(verbs::set_allowed_sources),
    },
    Command {
        path: "set interface|int ip table",
        usage: "set interface ip table IF VRF",
        help: "the IPv4 table packets received on IF are routed in",
        parse: Some(verbs::set_ip_table),
    },
    Command {
        path: "ip route",
        usage: "ip route add|del A.B.C.D/L via NH [IF] [table VRF | network NET]",
        help: "a static route; in a network, a next hop outside its ranges is a remote VTEP (the route goes through the VXLAN tunnel to it)",
        parse: Some(verbs::ip_route),
    },
    Command {
        path: "service add",
        usage: "service add NAME vip A.B.C.D port P [tcp|udp|sctp] [network NET | table N] [local] [affinity SECONDS] [backend A.B.C.D:P[=ready|terminating|not-ready]]... [node-port P] [external-ip A.B.C.D[,...]] [external-table N] [external-local | external-source A.B.C.D]",
        help: "a service: new flows to VIP:P are balanced (Maglev) over the ready backends, or the terminating ones while none is ready; `local` sends new flows only to backends on this node (internalTrafficPolicy Local); `affinity` keeps a client's new flows on its last backend for SECONDS (sessionAffinity ClientIP); `node-port` and `external-ip` let clients in `external-table` (default 0) in too, from `external-source` or, with `external-local`, only to this node's backends and from their own address ([services.md](services.md#from-outside-the-network-nodeports-and-external-ips)); a name in use is replaced, and backends that leave have their sessions flushed",
        parse: Some(verbs::service_add),
    },
    Command {
        path: "service del|delete",
        usage: "service del NAME",
        help: "delete a service and flush its sessions",
        parse: Some(verbs::service_del),
    },
    Command {
        path: "show service|services",
        usage: "show service",
        help: "services: VIP, port, protocol, backends and their states, live sessions",
        parse: Some(|_| Ok(Request::ShowService)),
    },
    Command {
        path: "show session|sessions",
        usage: "show session [network NET] [service NAME] [client A.B.C.D] [limit N]",
        help: "the session table's use and counters, and its sessions (at most 1000 unless `limit`): client, destination, backend, state, idle time",
        parse: Some(verbs::show_session),
    },
    Command {
        path: "policy add",
        usage: "policy add NAME [on IF[,IF]...] [isolate ingress|egress]... [ingress|egress [from|to PEER[,PEER]...] [port PORT[,PORT]...]]...",
        help: "a network policy (Kubernetes' semantics) on interfaces IF: each `ingress`/`egress` starts an allow rule; PEER is A.B.C.D/L[!EXCEPT/L]... or set:NAME, PORT is tcp|udp|sctp[/P[-Q]] or icmp; a name in use is replaced and established flows are judged again",
        parse: Some(policy::policy_add),
    },
    Command {
        path: "policy del|delete",
        usage: "policy del NAME",
        help: "delete a network policy (its interfaces' flows are judged again)",
        parse: Some(policy::policy_del),
    },
    Command {
        path: "address-set add",
        usage: "address-set add NAME none | A.B.C.D/L[,A.B.C.D/L]...",
        help: "a named address set for policies' peers (`set:NAME`); a name in use is replaced",
        parse: Some(policy::set_add),
    },
    Command {
        path: "address-set del|delete",
        usage: "address-set del NAME",
        help: "delete an address set (rules naming it then match nothing)",
        parse: Some(policy::set_del),
    },
    Command {
        path: "show policy|policies",
        usage: "show policy",
        help: "policies, address sets, and each interface's rules with the new flows each allowed and the flows denied",
        parse: Some(|_| Ok(Request::ShowPolicy)),
    },
    Command {
        path: "show vxlan tunnel|tunnels",
        usage: "show vxlan tunnel",
        help: "VXLAN tunnels: network, VNI, VTEPs, uplink, MTU, routes, counters",
        parse: Some(|_| Ok(Request::ShowVxlanTunnel)),
    },
    Command {
        path: "show ip fib",
        usage: "show ip fib [table VRF]",
        help: "routes and what they resolve to",
        parse: Some(verbs::show_ip_fib),
    },
    Command {
        path: "show ip fib summary",
        usage: "show ip fib summary",
        help: "how many routes each table (VRF) holds",
        parse: Some(|_| Ok(Request::ShowIpFibSummary)),
    },
    Command {
        path: "monitor",
        usage: "monitor [interval SECS] [count N]",
        help: "live rates: per interface packets and Mbit/s (L2) each way, errors and ring-full drops; per worker and node packets/s, vectors per call and ns per packet; redrawn every interval (default 1 s) on a terminal, one line per interface and busy node otherwise; until ctrl-c or N intervals",
        parse: None,
    },
    Command {
        path: "show ip neighbors|neighbours|neighbor|arp",
        usage: "show ip neighbors",
        help: "ARP neighbours, learned and static, after a line with the learned ones' count, caps (`[daemon.neighbours]`) and what the caps and aging did",
        parse: Some(|_| Ok(Request::ShowIpNeighbors)),
    },
    Command {
        path: "set ip neighbor|neighbour|arp",
        usage: "set ip neighbor [del] IF A.B.C.D MAC",
        help: "a static ARP neighbour",
        parse: Some(verbs::set_ip_neighbor),
    },
    Command {
        path: "pcap trace",
        usage: "pcap trace rx|tx|drop... on IF|any FILE [max N]",
        help: "capture packets at those points into FILE (written at off), a file of the capture directory ([daemon] capture-dir, default the runtime directory); any other path is refused",
        parse: Some(verbs::pcap_on),
    },
    Command {
        path: "pcap trace off",
        usage: "pcap trace off",
        help: "stop capturing and write the file",
        parse: Some(|_| Ok(Request::PcapOff)),
    },
];

/// The help text: every command with its line.
pub fn help() -> String {
    let mut s = String::from("commands:\n");
    for c in COMMANDS {
        s.push_str(&format!("  {}\n      {}\n", c.usage, c.help));
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
    for c in COMMANDS {
        let usage = c.usage.replace('|', "\\|");
        s.push_str(&format!("| `{usage}` | {} |\n", c.help));
    }
    s
}

/// The usage and help of every command whose usage begins with `prefix`: a verb's errors show
/// its own and those of the verbs that go on from its path.
fn usage_of(prefix: &str) -> String {
    COMMANDS
        .iter()
        .filter(|c| c.usage.starts_with(prefix))
        .map(|c| format!("usage: {}  ({})", c.usage, c.help))
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
    cmd: &'static Command,
}

impl<'a> Words<'a> {
    fn err(&self, msg: String) -> CliError {
        CliError {
            message: format!("{msg}\n{}", usage_of(&self.cmd.name())),
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

/// Parses one command line (already split into words): the verb whose path begins it, then
/// the verb's own arguments.
pub fn parse(words: &[&str]) -> Result<Request, CliError> {
    let verbs = COMMANDS.iter().filter(|c| c.parse.is_some());
    let verb = verbs
        .clone()
        .filter(|c| c.matched(words) == c.words().count())
        .max_by_key(|c| c.words().count());
    let Some(cmd) = verb else {
        return Err(no_verb(words, verbs));
    };
    let mut w = Words {
        w: words,
        i: cmd.words().count(),
        cmd,
    };
    let r = cmd.parse.expect("a verb with a parser")(&mut w)?;
    w.done()?;
    Ok(r)
}

/// Why no verb's path begins `words`: the word where every path left it, what would have
/// gone on, and the usage of the verbs it was on the way to.
fn no_verb<'a>(words: &[&str], verbs: impl Iterator<Item = &'a Command> + Clone) -> CliError {
    let depth = verbs.clone().map(|c| c.matched(words)).max().unwrap_or(0);
    let near: Vec<&Command> = verbs.filter(|c| c.matched(words) == depth).collect();
    if words.is_empty() {
        return CliError {
            message: format!("missing command (try `help`)\n{}", usage_of("")),
        };
    }
    if depth == 0 {
        return CliError {
            message: format!(
                "unknown command {:?}; `veclane ctl help` lists them",
                words.join(" ")
            ),
        };
    }
    let mut next: Vec<&str> = Vec::new();
    for c in &near {
        if !next.contains(&c.word(depth)) {
            next.push(c.word(depth));
        }
    }
    let expected = match next.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    let said: Vec<&str> = (0..depth).map(|i| near[0].word(i)).collect();
    let said = said.join(" ");
    let message = match words.get(depth) {
        None => format!("missing {expected}"),
        Some(x) => format!("unknown `{said} {x}`: expected {expected}"),
    };
    CliError {
        message: format!("{message}\n{}", usage_of(&said)),
    }
}

#[cfg(test)]
mod tests;
