//! Network policy against the Linux kernel: four tap pods, each serving TCP 80 and 8080 and
//! UDP 53. Every pod tries every other pod on every port, and what passes must be what an
//! oracle written here, apart from veclane's evaluator, computes from the same rules; then a
//! policy's address set changes and the matrix is tried again, an established connection
//! that the change denies included.

mod daemon_common;
mod kernel_common;
mod pod_common;

use std::collections::BTreeMap;
use std::io::Write;

use daemon_common::Daemon;
use kernel_common::Lab;
use pod_common::{CONFIG, Server, python, skip, tap_pod, wait_line};

const PODS: [(&str, &str); 4] = [
    ("p1", "10.1.0.1"),
    ("p2", "10.1.0.2"),
    ("p3", "10.1.0.3"),
    ("p4", "10.1.0.4"),
];
const PORTS: [(&str, u16); 3] = [("tcp", 80), ("tcp", 8080), ("udp", 53)];

/// The rules, as the oracle reads them: per pod, whether each direction is isolated and
/// what it allows (peer test, protocol, port test).
struct Oracle {
    frontend: Vec<&'static str>,
}

impl Oracle {
    /// Whether `src` may reach `dst` on (proto, port), by NetworkPolicy's rules: the source's
    /// egress and the destination's ingress must both allow it.
    fn allows(&self, src: &str, dst: &str, proto: &str, port: u16) -> bool {
        let addr = |p: &str| PODS.iter().find(|(n, _)| *n == p).unwrap().1;
        let in_frontend = |p: &str| self.frontend.contains(&p);
        // Egress: only p4 is isolated, and it may reach the frontend pods on any port.
        let egress = match src {
            "p4" => in_frontend(dst),
            _ => true,
        };
        // Ingress.
        let ingress = match dst {
            // web: anyone on tcp/80.
            "p2" => proto == "tcp" && port == 80,
            // db: the frontend on tcp/8080, and UDP 53 from 10.1.0.0/16 but 10.1.0.2.
            "p3" => {
                (in_frontend(src) && proto == "tcp" && port == 8080)
                    || (proto == "udp" && port == 53 && addr(src) != "10.1.0.2")
            }
            // lockdown: nothing comes in.
            "p4" => false,
            _ => true,
        };
        egress && ingress
    }
}

/// The probe program of pod `src`: every other pod on every port at once; one line of
/// `dst/proto/port=0|1`.
fn probe(src: &str) -> String {
    let targets: Vec<String> = PODS
        .iter()
        .filter(|(n, _)| *n != src)
        .flat_map(|(n, a)| {
            PORTS
                .iter()
                .map(move |(p, port)| format!("('{n}','{a}','{p}',{port})"))
        })
        .collect();
    format!(
        "import socket,threading\nres={{}}\n\
         def probe(n,a,p,port):\n  ok=False\n  try:\n    if p=='tcp':\n      \
         c=socket.create_connection((a,port),timeout=1.5)\n      ok=c.recv(100)!=b''\n      c.close()\n    \
         else:\n      u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n      u.settimeout(1.5)\n      \
         u.sendto(b'hi',(a,port))\n      ok=u.recvfrom(100)[0]!=b''\n  except Exception: pass\n  \
         res[(n,p,port)]=ok\n\
         ts=[threading.Thread(target=probe,args=t) for t in [{}]]\n\
         [t.start() for t in ts]\n[t.join() for t in ts]\n\
         print(' '.join('%s/%s/%d=%d'%(k[0],k[1],k[2],v) for k,v in sorted(res.items())),flush=True)\n",
        targets.join(",")
    )
}

/// Every pod to every pod on every port (the pods probing at once), against the oracle:
/// the differences.
fn differences(lab: &Lab, oracle: &Oracle) -> Vec<String> {
    let mut probes: Vec<_> = PODS
        .iter()
        .map(|(src, _)| (*src, python(lab, src, &probe(src))))
        .collect();
    let mut diff = Vec::new();
    for (src, c) in &mut probes {
        let l = wait_line(c);
        let _ = c.wait();
        let got: Vec<_> = l.split_whitespace().collect();
        assert_eq!(got.len(), 9, "{src}: {l}");
        for kv in got {
            let (k, v) = kv.split_once('=').unwrap();
            let mut p = k.split('/');
            let (dst, proto, port) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
            let (reached, want) = (
                v == "1",
                oracle.allows(src, dst, proto, port.parse().unwrap()),
            );
            if reached != want {
                diff.push(format!(
                    "{src} -> {dst} {proto}/{port}: reached {reached}, oracle {want}"
                ));
            }
        }
    }
    diff
}

#[test]
fn every_pod_reaches_exactly_what_the_policies_allow() {
    if skip() {
        return;
    }
    let mut names = vec!["node"];
    names.extend(PODS.iter().map(|(n, _)| *n));
    let lab = Lab::new(&names);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    let mut ifs = BTreeMap::new();
    for (pod, addr) in PODS {
        ifs.insert(pod, tap_pod(&d, &lab, pod, "blue", addr));
    }
    let _servers: Vec<Server> = PODS
        .iter()
        .map(|(p, _)| Server::start(&lab, p, p, &[80, 8080], &[53]))
        .collect();
    // Before any policy: everything reaches everything.
    let open = differences(&lab, &Oracle { frontend: vec![] })
        .into_iter()
        .filter(|d| d.contains("reached false"))
        .collect::<Vec<_>>();
    assert!(open.is_empty(), "without policies: {open:?}");

    d.ok("address-set add frontend 10.1.0.1/32");
    d.ok(&format!(
        "policy add default/web on {} ingress port tcp/80",
        ifs["p2"]
    ));
    d.ok(&format!(
        "policy add default/db on {} ingress from set:frontend port tcp/8080 \
         ingress from 10.1.0.0/16!10.1.0.2/32 port udp/53",
        ifs["p3"]
    ));
    d.ok(&format!(
        "policy add default/lockdown on {} isolate ingress egress to set:frontend",
        ifs["p4"]
    ));
    let oracle = Oracle {
        frontend: vec!["p1"],
    };
    let diff = differences(&lab, &oracle);
    assert!(diff.is_empty(), "{diff:#?}\n{}", d.ok("show policy"));

    // p1 holds a connection to the db; then the frontend is p2 instead of p1.
    let mut held = python(
        &lab,
        "p1",
        "import socket,sys\nc=socket.create_connection(('10.1.0.3',8080),timeout=2)\n\
         c.recv(100)\nprint('open',flush=True)\nsys.stdin.readline()\n\
         try:\n  c.sendall(b'ping')\n  print('ok' if c.recv(100)==b'ping' else 'closed',flush=True)\n\
         except Exception as e: print(type(e).__name__,flush=True)\n",
    );
    assert_eq!(wait_line(&mut held), "open");
    d.ok("address-set add frontend 10.1.0.2/32");
    held.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    assert_eq!(
        wait_line(&mut held),
        "TimeoutError",
        "the change denies an established flow"
    );
    let _ = held.wait();
    let oracle = Oracle {
        frontend: vec!["p2"],
    };
    let diff = differences(&lab, &oracle);
    assert!(diff.is_empty(), "{diff:#?}\n{}", d.ok("show policy"));

    // Counters: db's frontend rule allowed flows, its ingress denied some.
    let show = d.ok("show policy");
    assert!(show.contains("default/db ingress rule 0"), "{show}");
    assert!(
        show.contains("ingress isolated, egress open (default/db)"),
        "{show}"
    );
    let errors = d.ok("show errors");
    assert!(
        errors.contains("established flow denied by a policy change"),
        "{errors}"
    );
    // Deleting the policies opens everything again.
    for p in ["default/web", "default/db", "default/lockdown"] {
        d.ok(&format!("policy del {p}"));
    }
    let closed: Vec<String> = differences(&lab, &Oracle { frontend: vec![] })
        .into_iter()
        .filter(|d| d.contains("reached false"))
        .collect();
    assert!(closed.is_empty(), "after deleting the policies: {closed:?}");
}
