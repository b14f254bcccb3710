//! NodePorts and external IPs against the Linux kernel: a host on the underlay (a namespace
//! behind veclane's AF_PACKET uplink) connects to the node's address on a NodePort, and to an
//! external IP, and reaches the blue network's tap pods. With the Cluster policy the
//! backends see the service's source address and answer through it; with Local only the
//! node's own backends take flows, and they see the client's address. TCP and UDP; the
//! answers come from the address and port the client used; deleting the service closes the
//! entrance.

mod daemon_common;
mod kernel_common;
mod pod_common;

use std::collections::{BTreeMap, BTreeSet};

use daemon_common::Daemon;
use kernel_common::Lab;
use pod_common::{CONFIG, Server, python as py, skip, tap_pod};

/// The node's uplink: 192.0.2.1 on the underlay, where the client is 192.0.2.9.
fn config() -> String {
    format!(
        "{CONFIG}[[af-packet]]\nhost-if = \"v0\"\naddresses = [\"192.0.2.1/24\"]\nmtu = 1500\n\n"
    )
}

/// A TCP server on 8080 and a UDP one on 8053 in pod `ns`: each answers with its name and
/// the address its peer came from.
fn server(lab: &Lab, ns: &str, name: &str) -> Server {
    let code = format!(
        "import socket,threading\nname={name:?}\n\
         def tcp():\n  s=socket.socket()\n  s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n  \
         s.bind(('0.0.0.0',8080))\n  s.listen(64)\n  while True:\n    c,a=s.accept()\n    \
         c.sendall(('%s %s\\n'%(name,a[0])).encode())\n    c.close()\n\
         def udp():\n  u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n  u.bind(('0.0.0.0',8053))\n  \
         while True:\n    d,a=u.recvfrom(100)\n    u.sendto(('%s %s'%(name,a[0])).encode(),a)\n\
         threading.Thread(target=tcp,daemon=True).start()\n\
         threading.Thread(target=udp,daemon=True).start()\n\
         import time\ntime.sleep(0.2)\nprint('ready',flush=True)\nthreading.Event().wait()\n"
    );
    Server::program(lab, ns, &code)
}

/// What `n` TCP connections (or UDP datagrams, each from its own socket) from `ns` to
/// `addr:port` were answered with: how many answers each "name peer" gave, and the
/// addresses the UDP answers came from. Failures count as "failed".
fn ask(lab: &Lab, ns: &str, (addr, port): (&str, u16), udp: bool, n: u32) -> Answers {
    let code = format!(
        "import socket,collections\nn=collections.Counter()\nsrc=set()\n\
         for i in range({n}):\n  try:\n    if {udp}:\n      \
         u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n      u.settimeout(2)\n      \
         u.sendto(b'hi',({addr:?},{port}))\n      d,a=u.recvfrom(100)\n      \
         src.add('%s:%d'%a)\n      u.close()\n    else:\n      \
         c=socket.create_connection(({addr:?},{port}),timeout=2)\n      d=b''\n      \
         while not d.endswith(b'\\n'):\n        x=c.recv(100)\n        if not x: raise EOFError()\n        d+=x\n      c.close()\n    \
         n[d.decode().strip().replace(' ','@')]+=1\n  except Exception: n['failed']+=1\n\
         print(' '.join('%s=%d'%kv for kv in sorted(n.items())),flush=True)\n\
         print(' '.join(sorted(src)) or '-',flush=True)\n",
        udp = if udp { "True" } else { "False" },
    );
    let mut c = py(lab, ns, &code);
    let mut out = std::io::BufRead::lines(std::io::BufReader::new(c.stdout.take().unwrap()));
    let mut next = || out.next().unwrap().unwrap().trim().to_string();
    let (names, from) = (next(), next());
    let _ = c.wait();
    Answers {
        by: names
            .split_whitespace()
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.replace('@', " "), v.parse().ok()?))
            })
            .collect(),
        from: from
            .split_whitespace()
            .filter(|s| *s != "-")
            .map(str::to_string)
            .collect(),
    }
}

/// `veclane ctl` that must fail; its error.
fn refused(d: &Daemon, line: &str) -> String {
    let (ok, _, err) = d.ctl(line);
    assert!(!ok, "`{line}` succeeded");
    err
}

#[derive(Debug)]
struct Answers {
    /// "name peer" → how many times.
    by: BTreeMap<String, u32>,
    /// Where UDP answers came from.
    from: BTreeSet<String>,
}

fn pod(d: &Daemon, lab: &Lab, ns: &str, addr: &str) {
    pod_in(d, lab, ns, "blue", addr);
}

fn pod_in(d: &Daemon, lab: &Lab, ns: &str, network: &str, addr: &str) {
    tap_pod(d, lab, ns, network, addr);
    // The underlay's addresses through the gateway too, as a pod of the default network
    // routes everything (for the Local policy's answers to the client's own address).
    lab.exec(
        ns,
        &[
            "ip",
            "route",
            "add",
            "192.0.2.0/24",
            "via",
            "169.254.1.1",
            "dev",
            "eth1",
        ],
    );
}

const BACKENDS: &str = "backend 10.1.0.11:8080,10.1.0.12:8080,10.1.9.9:8080";

#[test]
fn node_ports_and_external_ips_reach_a_network_from_the_underlay() {
    if skip() {
        return;
    }
    let lab = Lab::with_mtu(&["node", "ext", "b1", "b2"], 1500);
    let d = Daemon::start_in(Some(&lab.ns("node")), &config());
    lab.exec("ext", &["ip", "addr", "add", "192.0.2.9/24", "dev", "v0"]);
    lab.exec(
        "ext",
        &["ip", "route", "add", "198.51.100.0/24", "via", "192.0.2.1"],
    );
    pod(&d, &lab, "b1", "10.1.0.11");
    pod(&d, &lab, "b2", "10.1.0.12");
    let _s = [server(&lab, "b1", "b1"), server(&lab, "b2", "b2")];
    // A third backend elsewhere: 10.1.9.9 is routed nowhere, so only the Local policy's
    // choice of the node's own backends keeps flows from it. Here it is not ready.
    d.ok(&format!(
        "service add web network blue vip 10.96.0.10 port 80 tcp {BACKENDS}=not-ready \
         node-port 30080 external-ip 198.51.100.7 external-source 10.1.255.1"
    ));
    let show = d.ok("show service");
    assert!(
        show.contains("node-port 30080, external-ip 198.51.100.7, from table 0, source 10.1.255.1"),
        "{show}"
    );

    // Cluster: spread over both pods, which see the service's source address.
    let a = ask(&lab, "ext", ("192.0.2.1", 30080), false, 40);
    let b1 = a.by.get("b1 10.1.255.1").copied().unwrap_or(0);
    let b2 = a.by.get("b2 10.1.255.1").copied().unwrap_or(0);
    assert!(
        b1 + b2 == 40 && b1 >= 8 && b2 >= 8,
        "{a:?}\n{}",
        d.ok("show errors")
    );
    let a = ask(&lab, "ext", ("198.51.100.7", 80), false, 10);
    assert_eq!(
        a.by.keys().map(|k| &k[3..]).collect::<BTreeSet<_>>(),
        BTreeSet::from(["10.1.255.1"]),
        "{a:?}"
    );
    assert_eq!(a.by.values().sum::<u32>(), 10, "{a:?}");
    let s = d.ok("show session service web");
    assert!(
        s.contains("192.0.2.9:") && s.contains("192.0.2.1:30080"),
        "{s}"
    );
    let s = d.ok("show session network blue");
    assert!(
        s.contains("192.0.2.1:30080"),
        "the network it goes on in lists it: {s}"
    );
    let s = d.ok("show session network red");
    assert!(!s.contains("192.0.2.1:30080"), "{s}");

    // UDP, Local: only the node's pods (the not-ready 10.1.9.9 made ready is elsewhere),
    // which see the client's own address; the answers come from the node's address and port.
    d.ok("service add dns network blue vip 10.96.0.10 port 53 udp \
          backend 10.1.0.11:8053,10.1.0.12:8053,10.1.9.9:8053 node-port 30053 external-local");
    let a = ask(&lab, "ext", ("192.0.2.1", 30053), true, 30);
    assert_eq!(
        a.by.values().sum::<u32>(),
        30,
        "{a:?}\n{}",
        d.ok("show errors")
    );
    assert!(
        a.by.keys()
            .all(|k| k == "b1 192.0.2.9" || k == "b2 192.0.2.9"),
        "{a:?}"
    );
    assert_eq!(a.from, BTreeSet::from(["192.0.2.1:30053".to_string()]));

    // Local with no backend here: dropped and counted, the Cluster entrances unchanged.
    d.ok(
        "service add far network blue vip 10.96.0.11 port 80 tcp backend 10.1.9.9:8080 \
          node-port 30081 external-local",
    );
    let a = ask(&lab, "ext", ("192.0.2.1", 30081), false, 2);
    assert_eq!(a.by.get("failed"), Some(&2), "{a:?}");
    assert!(
        d.ok("show errors")
            .contains("service has no usable backend")
    );

    // Entrances are one service's each; the VXLAN port is no NodePort.
    // The source is ours in blue (a remote node's ARP for it is answered), and no pod's.
    assert!(d.ok("show ip fib").contains("10.1.255.1/32"));
    let e = refused(
        &d,
        "service add web4 network blue vip 10.96.0.13 port 80 tcp \
         backend 10.1.0.11:8080 node-port 30084 external-source 10.1.0.12",
    );
    assert!(e.contains("external-source 10.1.0.12 is routed"), "{e}");
    let e = refused(
        &d,
        "service add web2 network blue vip 10.96.0.12 port 80 tcp \
                   backend 10.1.0.11:8080 node-port 30080 external-local",
    );
    assert!(
        e.contains("192.0.2.1:30080 tcp in table 0 is service web's"),
        "{e}"
    );
    let e = refused(
        &d,
        "service add vx network blue vip 10.96.0.12 port 80 udp \
                   backend 10.1.0.11:8080 node-port 4789 external-local",
    );
    assert!(e.contains("VXLAN's"), "{e}");
    let e = refused(
        &d,
        "service add web3 network blue vip 10.96.0.12 port 80 tcp \
                   backend 10.1.0.11:8080 node-port 30082",
    );
    assert!(e.contains("external-source"), "{e}");

    // The node itself still answers on its address, and a deleted service's entrance is gone.
    assert!(kernel_common::ping_from(&lab, "ext", "192.0.2.1", 2) >= 1);
    d.ok("service del web");
    let a = ask(&lab, "ext", ("192.0.2.1", 30080), false, 2);
    assert_eq!(a.by.get("failed"), Some(&2), "{a:?}");
    assert!(
        !d.ok("show ip fib").contains("10.1.255.1/32"),
        "the source went with it"
    );
}

/// A NodePort reached from a pod: blue's pods reach blue's backends on the node's address,
/// TCP and UDP, the answers from the address and port they used and the backends seeing
/// the pod's own address (the internal policy, as through the ClusterIP); a backend that
/// reaches its own service that way is hairpinned; a pod of red, another network with the
/// same addresses, does not get in.
#[test]
fn a_node_port_from_a_pod_of_its_network() {
    if skip() {
        return;
    }
    let lab = Lab::with_mtu(&["node", "b1", "b2", "c1", "r1"], 1500);
    let d = Daemon::start_in(Some(&lab.ns("node")), &config());
    pod(&d, &lab, "b1", "10.1.0.11");
    pod(&d, &lab, "b2", "10.1.0.12");
    pod(&d, &lab, "c1", "10.1.0.21");
    pod_in(&d, &lab, "r1", "red", "10.1.0.21");
    let _s = [server(&lab, "b1", "b1"), server(&lab, "b2", "b2")];
    for (name, port, proto, target, node_port) in [
        ("web", 80, "tcp", 8080, 30080),
        ("dns", 53, "udp", 8053, 30053),
    ] {
        d.ok(&format!(
            "service add {name} network blue vip 10.96.0.10 port {port} {proto} \
             backend 10.1.0.11:{target},10.1.0.12:{target} node-port {node_port} \
             external-source 10.1.255.1"
        ));
    }

    let a = ask(&lab, "c1", ("192.0.2.1", 30080), false, 20);
    let b1 = a.by.get("b1 10.1.0.21").copied().unwrap_or(0);
    let b2 = a.by.get("b2 10.1.0.21").copied().unwrap_or(0);
    assert!(
        b1 + b2 == 20 && b1 >= 3 && b2 >= 3,
        "{a:?}\n{}",
        d.ok("show errors")
    );
    let s = d.ok("show session service web");
    assert!(
        s.contains("10.1.0.21:") && s.contains("192.0.2.1:30080"),
        "{s}"
    );
    let a = ask(&lab, "c1", ("192.0.2.1", 30053), true, 10);
    assert_eq!(a.by.values().sum::<u32>(), 10, "{a:?}");
    assert!(!a.by.contains_key("failed"), "{a:?}");
    assert_eq!(a.from, BTreeSet::from(["192.0.2.1:30053".to_string()]));

    // A backend to its own service through the NodePort: every connection answered.
    let a = ask(&lab, "b1", ("192.0.2.1", 30080), false, 10);
    assert!(
        !a.by.contains_key("failed") && a.by.values().sum::<u32>() == 10,
        "{a:?}"
    );
    // Red's pod, with the same address in another network: no entrance there.
    let a = ask(&lab, "r1", ("192.0.2.1", 30080), false, 2);
    assert_eq!(a.by.get("failed"), Some(&2), "{a:?}");
}

/// A pod's bulk answer through a NodePort: its kernel hands the tap TCP super-frames, which
/// veclane keeps whole through the service's translation (both addresses change, so the
/// partial checksum moves with them) and cuts into segments for the uplink, where the
/// client's kernel checks every segment's checksum; the client compares every byte.
#[test]
fn a_pods_bulk_answer_leaves_the_uplink_in_segments() {
    if skip() {
        return;
    }
    let lab = Lab::with_mtu(&["node", "ext", "b1"], 1500);
    let d = Daemon::start_in(Some(&lab.ns("node")), &config());
    lab.exec("ext", &["ip", "addr", "add", "192.0.2.9/24", "dev", "v0"]);
    pod(&d, &lab, "b1", "10.1.0.11");
    let _s = Server::program(
        &lab,
        "b1",
        "import socket\ns=socket.socket()\ns.bind(('0.0.0.0',8090))\ns.listen(1)\n\
         print('ready',flush=True)\nwhile True:\n  c,_=s.accept()\n  \
         c.sendall(bytes(range(256))*8192)\n  c.close()\n",
    );
    d.ok(
        "service add bulk network blue vip 10.96.0.20 port 90 tcp backend 10.1.0.11:8090 \
         node-port 30090 external-source 10.1.255.1",
    );
    let mut c = py(
        &lab,
        "ext",
        "import socket\nc=socket.create_connection(('192.0.2.1',30090),timeout=10)\n\
         b=bytearray()\nwhile True:\n  d=c.recv(65536)\n  if not d: break\n  b+=d\n\
         print(len(b) if b==bytes(range(256))*8192 else 'corrupt %d'%len(b),flush=True)\n",
    );
    let got = pod_common::wait_line(&mut c);
    let _ = c.wait();
    let errors = d.ok("show errors");
    assert_eq!(got, (256 * 8192).to_string(), "{errors}");
    for counter in [
        "TCP super-frame taken whole",
        "TCP super-frame cut into segments",
    ] {
        assert!(errors.contains(counter), "{counter}: {errors}");
    }
    assert!(!errors.contains("no buffers for every segment"), "{errors}");
}
