//! Services against the Linux kernel: tap pods on one node run TCP and UDP servers that name
//! themselves; a client pod's kernel connects to a VIP. Connections spread over the backends,
//! replies come from the VIP, removing a backend resets only its connections and sends no
//! new one to it, a terminating backend takes new flows only when no backend is ready, and the
//! same VIP in another network reaches that network's backends only. Across two nodes: a
//! backend on the other node, through a cluster IP and through a NodePort from the underlay.

mod daemon_common;
mod kernel_common;
mod pod_common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};

use daemon_common::Daemon;
use kernel_common::Lab;
use pod_common::{CONFIG, Server, python as py, skip, tap_pod, wait_line};

/// `n` TCP connections from pod `ns` to `vip:80`, each reading the server's name: how many
/// each name answered.
fn connections(lab: &Lab, ns: &str, vip: &str, n: u32) -> BTreeMap<String, u32> {
    connections_to(lab, ns, (vip, 80), n)
}

/// As [`connections`], to `port`.
fn connections_to(lab: &Lab, ns: &str, (vip, port): (&str, u16), n: u32) -> BTreeMap<String, u32> {
    let code = format!(
        "import socket,collections\nn=collections.Counter()\nfor i in range({n}):\n  \
         c=socket.create_connection(({vip:?},{port}),timeout=3)\n  b=b''\n  \
         while not b.endswith(b'\\n'): b+=c.recv(100)\n  n[b.decode().strip()]+=1\n  c.close()\n\
         print(' '.join('%s=%d'%kv for kv in sorted(n.items())),flush=True)\n"
    );
    let mut c = py(lab, ns, &code);
    let l = wait_line(&mut c);
    let _ = c.wait();
    counts(&l)
}

/// `n` UDP datagrams from pod `ns`, each from its own socket (port), to `vip:80`: how many
/// answers each name sent, and from which source the answers came.
fn datagrams(lab: &Lab, ns: &str, vip: &str, n: u32) -> (BTreeMap<String, u32>, String) {
    let code = format!(
        "import socket,collections\nn=collections.Counter()\nsrc=set()\nfor i in range({n}):\n  \
         u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n  u.settimeout(2)\n  \
         u.sendto(b'hi',({vip:?},80))\n  d,a=u.recvfrom(100)\n  n[d.decode()]+=1\n  \
         src.add('%s:%d'%a)\n  u.close()\n\
         print(' '.join('%s=%d'%kv for kv in sorted(n.items())),flush=True)\n\
         print(' '.join(sorted(src)),flush=True)\n"
    );
    let mut c = py(lab, ns, &code);
    // One reader for both lines: a reader per line could keep the second in its buffer.
    let mut out = BufReader::new(c.stdout.take().unwrap()).lines();
    let mut next = || out.next().unwrap().unwrap().trim().to_string();
    let (names, from) = (next(), next());
    let _ = c.wait();
    (counts(&names), from)
}

fn counts(l: &str) -> BTreeMap<String, u32> {
    l.split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Long-lived connections from pod `ns` to the VIP: their backends' names when opened, then,
/// once told, whether each still echoes.
struct Held {
    child: Child,
    stdin: ChildStdin,
}

impl Held {
    fn open(lab: &Lab, ns: &str, vip: &str, n: u32) -> (Held, Vec<String>) {
        let code = format!(
            "import socket,sys\ncs=[socket.create_connection(({vip:?},80),timeout=3) for i in range({n})]\n\
             def name(c):\n  b=b''\n  while not b.endswith(b'\\n'): b+=c.recv(100)\n  \
             return b.decode().strip()\n\
             print(' '.join(name(c) for c in cs),flush=True)\nsys.stdin.readline()\nr=[]\n\
             for c in cs:\n  try:\n    c.sendall(b'ping')\n    \
             r.append('ok' if c.recv(100)==b'ping' else 'closed')\n  \
             except Exception as e: r.append(type(e).__name__)\n\
             print(' '.join(r),flush=True)\n"
        );
        let mut child = py(lab, ns, &code);
        let names = wait_line(&mut child)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let stdin = child.stdin.take().unwrap();
        (Held { child, stdin }, names)
    }

    /// Whether each connection still echoes (`ok`), or how it failed.
    fn check(mut self) -> Vec<String> {
        self.stdin.write_all(b"go\n").unwrap();
        let r = wait_line(&mut self.child);
        let _ = self.child.wait();
        r.split_whitespace().map(str::to_string).collect()
    }
}

/// A tap pod as [`tap_pod`] makes it, routing the services' range (10.96.0.0/12) through its
/// gateway too.
fn service_pod(d: &Daemon, lab: &Lab, pod: &str, network: &str, addr: &str) -> String {
    let name = tap_pod(d, lab, pod, network, addr);
    let route = [
        "ip",
        "route",
        "add",
        "10.96.0.0/12",
        "via",
        "169.254.1.1",
        "dev",
        "eth1",
    ];
    lab.exec(pod, &route);
    name
}

const WEB: &str = "service add web network blue vip 10.96.0.10 port 80 tcp";
const DNS: &str = "service add dns network blue vip 10.96.0.10 port 80 udp";

#[test]
fn a_cluster_ip_spreads_flows_and_forgets_a_removed_backend() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "c1", "b1", "b2", "b3", "r1", "rb"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    let pods = [
        ("c1", "blue", "10.1.0.5"),
        ("b1", "blue", "10.1.0.11"),
        ("b2", "blue", "10.1.0.12"),
        ("b3", "blue", "10.1.0.13"),
        ("r1", "red", "10.1.0.5"),
        // red's backend has blue b1's address
        ("rb", "red", "10.1.0.11"),
    ];
    for (pod, net, addr) in pods {
        service_pod(&d, &lab, pod, net, addr);
    }
    let _servers: Vec<Server> = ["b1", "b2", "b3", "rb"]
        .iter()
        .map(|p| Server::start(&lab, p, p, &[8080], &[8080]))
        .collect();
    let all = "backend 10.1.0.11:8080,10.1.0.12:8080,10.1.0.13:8080";
    d.ok(&format!("{WEB} {all}"));
    d.ok(&format!("{DNS} {all}"));
    d.ok("service add web-red network red vip 10.96.0.10 port 80 tcp backend 10.1.0.11:8080");

    // 300 connections spread about evenly (Maglev over each connection's 5-tuple).
    let got = connections(&lab, "c1", "10.96.0.10", 300);
    assert_eq!(got.values().sum::<u32>(), 300, "{got:?}");
    for b in ["b1", "b2", "b3"] {
        let n = got.get(b).copied().unwrap_or(0);
        assert!((60..=140).contains(&n), "{b}: {n} of 300: {got:?}");
    }
    // Hairpin: a backend reaching its own service; the flows balanced to itself reach it
    // from the VIP, and its answers go back through veclane.
    let got = connections(&lab, "b1", "10.96.0.10", 30);
    assert_eq!(got.values().sum::<u32>(), 30, "{got:?}");
    assert!(got.get("b1").is_some_and(|&n| n > 0), "{got:?}");
    // UDP too, every answer from the VIP's address and port.
    let (got, from) = datagrams(&lab, "c1", "10.96.0.10", 90);
    assert_eq!(got.values().sum::<u32>(), 90, "{got:?}");
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(from, "10.96.0.10:80");
    // The same VIP in red is red's service: its one backend, never blue's.
    let got = connections(&lab, "r1", "10.96.0.10", 20);
    assert_eq!(got, BTreeMap::from([("rb".to_string(), 20)]));
    // An SCTP service on the same VIP and port is another one (no kernel here speaks SCTP:
    // its packets are tested in the nodes crate).
    d.ok("service add sig network blue vip 10.96.0.10 port 80 sctp backend 10.1.0.11:36412");
    let show = d.ok("show service");
    assert!(
        show.contains("web: network blue 10.96.0.10:80 tcp"),
        "{show}"
    );
    assert!(
        show.contains("sig: network blue 10.96.0.10:80 sctp"),
        "{show}"
    );
    assert!(
        d.ok("show session service web limit 5")
            .contains("-> 10.1.0."),
        "{}",
        d.ok("show session")
    );

    // Long-lived connections; the backend holding most of them leaves (which one that is
    // depends on the ports the kernel picks). Its connections are reset (the next segment
    // finds a live backend that knows no such connection), the others keep echoing.
    let (held, names) = Held::open(&lab, "c1", "10.96.0.10", 15);
    let gone = ["b1", "b2", "b3"]
        .into_iter()
        .max_by_key(|b| names.iter().filter(|n| n == b).count())
        .unwrap();
    let rest: Vec<String> = [
        ("b1", "10.1.0.11"),
        ("b2", "10.1.0.12"),
        ("b3", "10.1.0.13"),
    ]
    .iter()
    .filter(|(b, _)| *b != gone)
    .map(|(_, a)| format!("{a}:8080"))
    .collect();
    d.ok(&format!("{WEB} backend {}", rest.join(",")));
    let r = held.check();
    for (n, r) in names.iter().zip(&r) {
        if n == gone {
            assert_ne!(
                r, "ok",
                "a connection to the removed {gone} went on: {names:?} {r:?}"
            );
        } else {
            assert_eq!(r, "ok", "{names:?} {r:?}");
        }
    }
    let got = connections(&lab, "c1", "10.96.0.10", 60);
    assert!(
        !got.contains_key(gone) && got.values().sum::<u32>() == 60,
        "{got:?}"
    );

    // b1 and b2 terminating, b3 back but not ready: new flows to the terminating ones
    // (nothing is ready); then b3 ready: it alone.
    d.ok(&format!(
        "{WEB} backend 10.1.0.11:8080=terminating,10.1.0.12:8080=terminating,10.1.0.13:8080=not-ready"
    ));
    let got = connections(&lab, "c1", "10.96.0.10", 40);
    assert!(
        !got.contains_key("b3") && got.values().sum::<u32>() == 40,
        "{got:?}"
    );
    d.ok(&format!(
        "{WEB} backend 10.1.0.11:8080=terminating,10.1.0.12:8080=terminating,10.1.0.13:8080"
    ));
    let got = connections(&lab, "c1", "10.96.0.10", 20);
    assert_eq!(got, BTreeMap::from([("b3".to_string(), 20)]));

    // Deleted: nothing answers on the VIP; the network cannot go while it has services.
    let (ok, _, err) = d.ctl("network del red");
    assert!(!ok && err.contains("web-red"), "{err}");
    d.ok("service del web");
    let code = "import socket\ntry:\n  socket.create_connection(('10.96.0.10',80),timeout=1)\n  \
                print('connected')\nexcept Exception as e: print(type(e).__name__)\n";
    let mut c = py(&lab, "c1", code);
    assert_ne!(wait_line(&mut c), "connected");
    let _ = c.wait();
    let (ok, _, err) = d.ctl("service del web");
    assert!(!ok && err.contains("no service named"), "{err}");
}

/// A pod floods the VIP with SYNs from random ports (the backend answers each, the
/// flooder's kernel resets them) into a table of 1024 sessions: the table stays within its
/// size and the daemon's memory with it, no established connection of another pod is
/// evicted, and that pod's new connections are served during the flood.
#[test]
fn a_syn_flood_evicts_no_established_flow() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "c1", "a1", "b1"]);
    let config = CONFIG.replace("buffers = 4096\n", "buffers = 4096\nsessions = 1024\n");
    let d = Daemon::start_in(Some(&lab.ns("node")), &config);
    for (pod, addr) in [("c1", "10.1.0.5"), ("a1", "10.1.0.7"), ("b1", "10.1.0.11")] {
        service_pod(&d, &lab, pod, "blue", addr);
    }
    let _server = Server::start(&lab, "b1", "b1", &[8080], &[8080]);
    d.ok(&format!("{WEB} backend 10.1.0.11:8080"));
    let (held, names) = Held::open(&lab, "c1", "10.96.0.10", 5);
    assert_eq!(names.len(), 5);
    let rss = || {
        std::fs::read_to_string(format!("/proc/{}/status", d.pid()))
            .unwrap()
            .lines()
            .find_map(|l| {
                l.strip_prefix("VmRSS:")?
                    .trim()
                    .strip_suffix(" kB")?
                    .parse::<u64>()
                    .ok()
            })
            .unwrap()
    };
    let before = rss();
    let flood = "import socket,struct,random,time\n\
        s=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_TCP)\n\
        sa=socket.inet_aton('10.1.0.7');da=socket.inet_aton('10.96.0.10')\n\
        def csum(b):\n  t=sum(struct.unpack('!%dH'%(len(b)//2),b))\n  t=(t>>16)+(t&0xffff)\n  \
        t+=t>>16\n  return ~t&0xffff\n\
        n=0\nend=time.time()+3\nwhile time.time()<end:\n  for i in range(500):\n    \
        h=struct.pack('!HHIIBBHHH',random.randint(1024,65535),80,random.getrandbits(32),0,80,2,64240,0,0)\n    \
        c=csum(sa+da+struct.pack('!BBH',0,6,20)+h)\n    \
        s.sendto(h[:16]+struct.pack('!H',c)+h[18:],('10.96.0.10',0))\n    n+=1\n\
        print(n,flush=True)\n";
    let mut flooder = py(&lab, "a1", flood);
    // New connections from c1 while the flood runs.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let got = connections(&lab, "c1", "10.96.0.10", 20);
    assert_eq!(
        got,
        BTreeMap::from([("b1".to_string(), 20)]),
        "{}",
        d.ok("show errors")
    );
    let sent: u64 = wait_line(&mut flooder).parse().unwrap();
    let _ = flooder.wait();
    assert!(sent > 5000, "the flood sent {sent} SYNs");
    assert_eq!(
        held.check(),
        vec!["ok"; 5],
        "an established connection was lost"
    );
    let show = d.ok("show session limit 0");
    let totals = show.lines().next().unwrap().to_string();
    let live: u64 = totals.split_whitespace().next().unwrap().parse().unwrap();
    assert!(live <= 1024, "{totals}");
    let evicted: u64 = totals
        .split("evicted unestablished ")
        .nth(1)
        .and_then(|r| r.split(',').next()?.parse().ok())
        .unwrap();
    assert!(evicted > 1000, "{totals}");
    let grown = rss().saturating_sub(before);
    assert!(
        grown < 16 * 1024,
        "the daemon grew by {grown} kB during the flood"
    );
}

/// Services, address sets and policies in the configuration file: applied at start, and on
/// SIGHUP the ones gone are deleted and the new or changed ones (re)set, live.
#[test]
fn services_and_policies_come_from_the_file_and_reload_live() {
    let file = |backends: &str, with_policy: bool| {
        let mut s = format!(
            "{CONFIG}[[service]]\nname = \"web\"\nnetwork = \"blue\"\nvip = \"10.96.0.10\"\n\
             port = 80\nprotocol = \"tcp\"\nbackends = [{backends}]\n\n\
             [[address-set]]\nname = \"frontend\"\nmembers = [\"10.1.0.5/32\"]\n\n"
        );
        if with_policy {
            s.push_str(
                "[[policy]]\nname = \"default/db\"\ninterfaces = [\"tap9\"]\n\
                 [[policy.ingress]]\npeers = [{ set = \"frontend\" }]\n\
                 ports = [{ protocol = \"tcp\", port = { first = 5432, last = 5432 } }]\n",
            );
        }
        s
    };
    let first = file("{ addr = \"10.1.0.11\", port = 8080 }", true);
    let d = Daemon::start(&first);
    let show = d.ok("show service");
    assert!(show.contains("backends 10.1.0.11:8080\n"), "{show}");
    let show = d.ok("show policy");
    assert!(
        show.contains("policy default/db: ingress on tap9"),
        "{show}"
    );
    assert!(show.contains("address-set frontend: 1 members"), "{show}");
    // A second backend, terminating; the policy gone.
    let second = file(
        "{ addr = \"10.1.0.11\", port = 8080 }, { addr = \"10.1.0.12\", port = 8080, state = \"terminating\" }",
        false,
    );
    std::fs::write(d.path("veclane.toml"), &second).unwrap();
    std::process::Command::new("kill")
        .args(["-HUP", &d.pid().to_string()])
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !d.ok("show service").contains("10.1.0.12:8080=terminating") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            d.ok("show service")
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!d.ok("show policy").contains("default/db"));
}

/// ClientIP affinity: a client's connections all go to one backend while it lasts; when that
/// backend leaves, they all go to one other.
#[test]
fn affinity_keeps_a_client_on_one_backend() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "c1", "b1", "b2", "b3"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    let pods = [
        ("c1", "10.1.0.5"),
        ("b1", "10.1.0.11"),
        ("b2", "10.1.0.12"),
        ("b3", "10.1.0.13"),
    ];
    for (pod, addr) in pods {
        service_pod(&d, &lab, pod, "blue", addr);
    }
    let _servers: Vec<Server> = ["b1", "b2", "b3"]
        .iter()
        .map(|p| Server::start(&lab, p, p, &[8080], &[]))
        .collect();
    let all = ["10.1.0.11:8080", "10.1.0.12:8080", "10.1.0.13:8080"];
    d.ok(&format!("{WEB} affinity 60 backend {}", all.join(",")));
    let got = connections(&lab, "c1", "10.96.0.10", 30);
    assert_eq!(got.len(), 1, "one backend for one client: {got:?}");
    let (first, n) = got.into_iter().next().unwrap();
    assert_eq!(n, 30);
    // Its backend leaves: the client sticks to one other.
    let rest: Vec<&str> = all
        .iter()
        .copied()
        .filter(|b| !b.starts_with(&format!("10.1.0.1{}", &first[1..])))
        .collect();
    assert_eq!(rest.len(), 2);
    d.ok(&format!("{WEB} affinity 60 backend {}", rest.join(",")));
    let got = connections(&lab, "c1", "10.96.0.10", 20);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(!got.contains_key(&first), "{got:?}");
    // Without affinity the same client spreads.
    d.ok(&format!("{WEB} backend {}", all.join(",")));
    let got = connections(&lab, "c1", "10.96.0.10", 60);
    assert!(got.len() > 1, "{got:?}");
}

/// Two nodes, each a daemon in its own namespace with an AF_PACKET uplink on a bridge (MTU
/// 1500, so the tunnel's is 1450), network blue carried between them in VXLAN: a service on
/// node 1 balances a pod's connections over a backend on node 1 and one on node 2, whose
/// replies come back through the tunnel and are translated on node 1. A bulk transfer to the
/// backend on node 2 works too: node 1's "fragmentation needed" about the translated packets
/// is translated back, so the client's stack learns the path's MTU.
#[test]
fn a_service_balances_to_a_backend_on_another_node() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["n1", "n2", "c1", "b1", "b2"]);
    let node = |n: u8| {
        let cfg = format!(
            "[daemon]\nmode = \"interrupt\"\nbuffers = 4096\n\n\
             [[af-packet]]\nhost-if = \"v0\"\naddresses = [\"192.0.2.{n}/24\"]\nmtu = 1500\n\n\
             [[network]]\nname = \"blue\"\nvni = 56\nranges = [\"10.1.0.0/16\"]\nuplink = \"host-v0\"\n"
        );
        Daemon::start_in(Some(&lab.ns(&format!("n{n}"))), &cfg)
    };
    let (d1, d2) = (node(1), node(2));
    // The pods are in their own namespaces; node n's taps reach into them.
    for (d, pod, addr) in [
        (&d1, "c1", "10.1.0.5"),
        (&d1, "b1", "10.1.0.11"),
        (&d2, "b2", "10.1.0.12"),
    ] {
        service_pod(d, &lab, pod, "blue", addr);
    }
    // What the node agents would program: each node routes the other's pods to its VTEP.
    d1.ok("ip route add 10.1.0.12/32 via 192.0.2.2 network blue");
    d2.ok("ip route add 10.1.0.5/32 via 192.0.2.1 network blue");
    d2.ok("ip route add 10.1.0.11/32 via 192.0.2.1 network blue");
    let _servers: Vec<Server> = ["b1", "b2"]
        .iter()
        .map(|p| Server::start(&lab, p, p, &[8080], &[8080]))
        .collect();
    d1.ok(&format!("{WEB} backend 10.1.0.11:8080,10.1.0.12:8080"));
    d1.ok(&format!("{DNS} backend 10.1.0.11:8080,10.1.0.12:8080"));
    let got = connections(&lab, "c1", "10.96.0.10", 60);
    assert_eq!(
        got.values().sum::<u32>(),
        60,
        "{got:?}\n{}",
        d1.ok("show errors")
    );
    assert!(got.get("b2").is_some_and(|&n| n >= 10), "{got:?}");
    let (got, from) = datagrams(&lab, "c1", "10.96.0.10", 40);
    assert_eq!(got.values().sum::<u32>(), 40, "{got:?}");
    assert_eq!(from, "10.96.0.10:80");
    let tunnels = d1.ok("show vxlan tunnel");
    assert!(tunnels.contains("192.0.2.2"), "{tunnels}");

    // A NodePort on node 1 whose only backend is on node 2, from a host on the underlay
    // (c1's v0): the backend sees node 1's source address, which node 2 routes back to node
    // 1 (as an agent routes a node's source attachment), and answers through node 1.
    lab.exec("c1", &["ip", "addr", "add", "192.0.2.9/24", "dev", "v0"]);
    d2.ok("ip route add 10.1.255.1/32 via 192.0.2.1 network blue");
    d1.ok(
        "service add np network blue vip 10.96.0.10 port 83 tcp backend 10.1.0.12:8080 \
           node-port 30083 external-source 10.1.255.1",
    );
    let got = connections_to(&lab, "c1", ("192.0.2.1", 30083), 10);
    assert_eq!(
        got,
        BTreeMap::from([("b2".to_string(), 10)]),
        "{}\n{}",
        d1.ok("show errors"),
        d2.ok("show errors")
    );

    // internalTrafficPolicy Local: node 1's pod reaches node 1's backend only; without a
    // backend here, nothing.
    d1.ok("service add near network blue vip 10.96.0.10 port 82 tcp local backend 10.1.0.11:8080,10.1.0.12:8080");
    let got = connections_to(&lab, "c1", ("10.96.0.10", 82), 20);
    assert_eq!(
        got,
        BTreeMap::from([("b1".to_string(), 20)]),
        "{}",
        d1.ok("show errors")
    );
    d1.ok("service add near network blue vip 10.96.0.10 port 82 tcp local backend 10.1.0.12:8080");
    let code = "import socket\ntry:\n  socket.create_connection(('10.96.0.10',82),timeout=1)\n  \
                print('connected')\nexcept Exception as e: print(type(e).__name__)\n";
    let mut c = py(&lab, "c1", code);
    assert_ne!(wait_line(&mut c), "connected");
    let _ = c.wait();
    assert!(
        d1.ok("show errors")
            .contains("service has no usable backend")
    );
    // 512 KiB each way through a service whose only backend is across the tunnel.
    d1.ok("service add bulk network blue vip 10.96.0.10 port 81 tcp backend 10.1.0.12:8080");
    let bulk = "import socket,threading\n\
        c=socket.create_connection(('10.96.0.10',81),timeout=10)\n\
        b=b''\nwhile not b.endswith(b'\\n'): b+=c.recv(100)\n\
        data=bytes(range(256))*2048\n\
        threading.Thread(target=c.sendall,args=(data,),daemon=True).start()\n\
        got=0\ntry:\n  while got<len(data):\n    d=c.recv(65536)\n    if not d: break\n    \
        got+=len(d)\nexcept Exception as e: print(type(e).__name__,flush=True)\n\
        print(b.decode().strip(),got,flush=True)\n";
    let mut c = py(&lab, "c1", bulk);
    assert_eq!(
        wait_line(&mut c),
        format!("b2 {}", 256 * 2048),
        "{}",
        d1.ok("show errors")
    );
    let _ = c.wait();
    let errors = d1.ok("show errors");
    assert!(
        errors.contains("fragmentation needed") || errors.contains("mtu"),
        "{errors}"
    );
}
