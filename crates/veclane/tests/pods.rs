//! Pod interfaces through the daemon, against the Linux kernel: tap devices created inside
//! pods' namespaces carry ping, UDP and TCP between pods of one network and nothing between
//! networks with the same addresses; memif masters listen inside a pod's namespace; a thousand
//! pod interfaces come and go and leave no fd, buffer or device behind.

mod daemon_common;
mod kernel_common;
mod pod_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use daemon_common::{Daemon, fd_count};
use kernel_common::{Lab, ping_from};
use pod_common::{CONFIG, interface, python, skip, tap_pod, wait_line};

#[test]
fn tap_pods_reach_their_own_network_only() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "b1", "b2", "r1"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    let b1 = tap_pod(&d, &lab, "b1", "blue", "10.1.0.5");
    let b2 = tap_pod(&d, &lab, "b2", "blue", "10.1.0.6");
    let r1 = tap_pod(&d, &lab, "r1", "red", "10.1.0.6");

    // Red's pod cannot reach blue's 10.1.0.5: red has no route there, and the pod is told
    // so (net unreachable, from the pods' gateway); that is all red's interface ever sends.
    assert_eq!(ping_from(&lab, "r1", "10.1.0.5", 2), 0, "red reached blue");
    let to_red = interface(&d, &r1).tx_packets;
    assert_eq!(to_red, 2, "{}", d.ok("show errors"));
    // Ping within blue, both ways; red's 10.1.0.6 is not blue's.
    assert_eq!(ping_from(&lab, "b1", "10.1.0.6", 3), 3);
    assert_eq!(ping_from(&lab, "b2", "10.1.0.5", 3), 3);

    // TCP within blue: 1 MB handed to the tap in super-frames (its segmentation offload),
    // kept whole through the graph and written to the other pod as they came (their
    // checksums partial: the receiving kernel does not check them, so the server compares
    // every byte).
    let mut server = python(
        &lab,
        "b2",
        "import socket\ns=socket.socket()\ns.bind(('10.1.0.6',5001))\ns.listen(1)\n\
         print('ready',flush=True)\nc,_=s.accept()\nb=bytearray()\nwhile True:\n  \
         d=c.recv(65536)\n  if not d: break\n  b+=d\n\
         print(len(b) if b==bytes(range(256))*4096 else 'corrupt',flush=True)\n",
    );
    assert_eq!(wait_line(&mut server), "ready");
    let mut client = python(
        &lab,
        "b1",
        "import socket\ns=socket.create_connection(('10.1.0.6',5001),timeout=10)\n\
         s.sendall(bytes(range(256))*4096)\ns.close()\nprint('sent',flush=True)\n",
    );
    assert_eq!(wait_line(&mut client), "sent");
    assert_eq!(wait_line(&mut server), (256 * 4096).to_string());
    let _ = (client.wait(), server.wait());

    assert_eq!(
        interface(&d, &r1).tx_packets,
        to_red,
        "blue's traffic reached red"
    );
    let show = d.ok("show interface");
    assert!(show.contains("pod cid-b1"), "{show}");
    assert!(show.contains("tap host-if-name eth1"), "{show}");
    let (i1, i2) = (interface(&d, &b1), interface(&d, &b2));
    assert!(
        i1.rx_bytes > 1 << 20 && i2.tx_bytes > 1 << 20,
        "{i1:?} {i2:?}"
    );
    assert_eq!((i1.rx_errors, i2.tx_no_room), (0, 0));
    // Nothing dropped on the way but red's pings (no route in red to 10.1.0.5).
    let errors = d.ok("show errors");
    assert!(
        !errors
            .lines()
            .any(|l| l.contains("tap-") && !l.contains("not an error")),
        "tap errors: {errors}"
    );
    // The pods' kernels handed TCP over in super-frames, which went from tap to tap whole.
    assert!(errors.contains("TCP super-frame taken whole"), "{errors}");
    assert!(errors.contains("TCP super-frame written whole"), "{errors}");
    assert!(!errors.contains("gso-ip4"), "{errors}");

    // Deleting a pod's interface takes its device out of the pod.
    d.ok(&format!("delete interface {b2}"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while Command::new("ip")
        .args(["-n", &lab.ns("b2"), "link", "show", "eth1"])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "eth1 stayed in b2");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ping_from(&lab, "b1", "10.1.0.6", 1), 0);
    // A bad request is refused with its reason, and changes nothing.
    let (ok, _, err) = d.ctl(&format!(
        "create interface tap host-if-name eth1 netns {} network blue",
        lab.ns("b1")
    ));
    assert!(!ok && err.contains("eth1"), "{err}");
    let (ok, _, err) = d.ctl("create interface tap host-if-name eth1 netns no-such-pod-ns");
    assert!(!ok && err.contains("no-such-pod-ns"), "{err}");
}

#[test]
fn memif_master_listens_inside_the_pods_namespace() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "p1", "p2"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    // The same abstract name in two pods is two sockets.
    for (id, pod) in [(0, "p1"), (1, "p2")] {
        d.ok(&format!(
            "create interface memif id 0 socket @pod.sock master netns {} network blue \
             name pod{id} pod cid-{pod}",
            lab.ns(pod)
        ));
    }
    let show = d.ok("show interface");
    assert!(show.contains(&format!("netns {}", lab.ns("p1"))), "{show}");
    // A gen in p1 connects to @pod.sock there; nothing listens on it in the node's namespace.
    let gen_in = |ns: &str| {
        Command::new("ip")
            .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_veclane"), "gen"])
            .args(["--socket", "@pod.sock", "--id", "0", "--rx-only"])
            .args(["--duration", "1", "--connect-timeout", "2", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    let out = gen_in(&lab.ns("p1"));
    assert!(
        out.status.success(),
        "gen in p1: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = gen_in(&lab.ns("node"));
    assert!(
        !out.status.success(),
        "a gen in the node's namespace connected"
    );
    let i = interface(&d, "pod0");
    assert!(
        i.connects >= 1 || i.last_disconnect_reason.is_some(),
        "{i:?}"
    );
}

#[test]
fn a_thousand_pod_interfaces_come_and_go_leaving_nothing() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "pod"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    let pod = lab.ns("pod");
    let buffers = |d: &Daemon| {
        let r = d.api().call(&api::Request::ShowBuffers).unwrap();
        let api::Reply::Buffers { workers, .. } = r else {
            panic!("{r:?}")
        };
        workers.iter().map(|w| w.free).sum::<usize>()
    };
    let mut api = d.api();
    let mut call = |r: api::Request| match api.call(&r).unwrap() {
        api::Reply::Error { message, .. } => panic!("{r:?}: {message}"),
        ok => ok,
    };
    // One round first, so that lazily made things (closer threads) exist before counting.
    let round = |call: &mut dyn FnMut(api::Request) -> api::Reply, k: usize| {
        let mut tap = api::TapSpec::new("eth1");
        tap.netns = Some(pod.clone());
        tap.network = Some("blue".into());
        tap.pod = Some(format!("cid-{k}"));
        call(api::Request::CreateTap(tap));
        let mut m = api::MemifSpec::new(0, "@pod.sock", api::Role::Master);
        m.netns = Some(pod.clone());
        m.network = Some("red".into());
        m.name = Some("pod-memif".into());
        call(api::Request::CreateMemif(m));
        for name in ["tap0", "pod-memif"] {
            call(api::Request::DeleteInterface { name: name.into() });
        }
    };
    round(&mut call, 0);
    std::thread::sleep(Duration::from_millis(300));
    let (fds, free) = (fd_count(d.pid()), buffers(&d));
    let t = Instant::now();
    for k in 1..=1000 {
        round(&mut call, k);
    }
    let took = t.elapsed();
    eprintln!("1000 tap + memif pod interfaces created and deleted in {took:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = (fd_count(d.pid()), buffers(&d));
        if now == (fds, free) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fds, free buffers: {now:?}, were {:?}",
            (fds, free)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = Command::new("ip")
        .args(["-n", &pod, "-o", "link", "show"])
        .output()
        .unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(!left.contains("eth1"), "{left}");
    assert_eq!(interface_count(&d), 0);
}

fn interface_count(d: &Daemon) -> usize {
    d.interfaces().len()
}

/// (dispatch loops, sleeps) of worker 0.
fn loops_and_sleeps(d: &Daemon) -> (u64, u64) {
    let r = d.api().call(&api::Request::ShowRuntime).unwrap();
    let api::Reply::Runtime { workers } = r else {
        panic!("{r:?}")
    };
    (workers[0].loops, workers[0].sleeps)
}

/// A pod that asks for `rx-mode polling` keeps the worker holding its queue polling in a
/// daemon whose workers otherwise sleep when idle; once it goes, the worker sleeps again.
#[test]
fn a_memif_in_polling_mode_keeps_its_worker_polling() {
    if skip() {
        return;
    }
    let d = Daemon::start(CONFIG);
    d.ok(
        "create interface memif id 0 socket poll.sock master rx-mode polling network blue name p0",
    );
    let _pod = daemon_common::Pods::connect(&d.path("poll.sock"), &[0]);
    d.wait_connected(1);
    assert!(
        d.ok("show interface rx-placement").contains("polling"),
        "{}",
        d.ok("show interface rx-placement")
    );
    std::thread::sleep(Duration::from_millis(100));
    let (l0, s0) = loops_and_sleeps(&d);
    std::thread::sleep(Duration::from_millis(500));
    let (l1, s1) = loops_and_sleeps(&d);
    assert!(
        l1 - l0 > 10_000 && s1 - s0 <= 1,
        "polling: {} loops, {} sleeps in 0.5 s",
        l1 - l0,
        s1 - s0
    );
    d.ok("delete interface p0");
    std::thread::sleep(Duration::from_millis(100));
    let (l0, _) = loops_and_sleeps(&d);
    std::thread::sleep(Duration::from_millis(500));
    let (l1, _) = loops_and_sleeps(&d);
    assert!(l1 - l0 < 1_000, "asleep again: {} loops in 0.5 s", l1 - l0);
}

/// A memif master accepts 16 rings each way unless told: a peer asking for 32 gets 16, and
/// holds 33 of the daemon's fds at most (the socket and one eventfd a ring; its regions'
/// fds are closed once mapped). `rx-queues` raises the limit.
#[test]
fn a_memif_master_accepts_what_a_pod_needs_unless_told() {
    let d = Daemon::start_in(None, CONFIG);
    d.ok("create interface memif id 0 socket big.sock master network blue name m0");
    d.ok(
        "create interface memif id 0 socket bigger.sock master network blue name m1 \
          rx-queues 32 tx-queues 32",
    );
    let before = fd_count(d.pid());
    let connect = |sock: &str| {
        let cfg = memif::InterfaceConfig {
            s2m_rings: 32,
            m2s_rings: 32,
            log2_ring_size: 8,
            ..Default::default()
        };
        let path = memif::SocketPath::File(d.path(sock));
        let mut c = memif::Client::new(&path, vec![cfg]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            c.poll(Duration::from_millis(10)).unwrap();
            if let Some(memif::Event::Connected { queues, .. }) = c.next_event() {
                return (c, queues.tx.len(), queues.rx.len());
            }
            assert!(Instant::now() < deadline, "{:?}", c.last_connect_error(0));
        }
    };
    let (_c0, tx, rx) = connect("big.sock");
    assert_eq!((tx, rx), (16, 16));
    let deadline = Instant::now() + Duration::from_secs(5);
    while interface(&d, "m0").rx_queues != 16 {
        assert!(Instant::now() < deadline, "{:?}", interface(&d, "m0"));
        std::thread::sleep(Duration::from_millis(10));
    }
    let held = fd_count(d.pid()) - before;
    assert!(held <= 33, "a connected peer holds {held} fds");
    let (_c1, tx, rx) = connect("bigger.sock");
    assert_eq!((tx, rx), (32, 32));
}
