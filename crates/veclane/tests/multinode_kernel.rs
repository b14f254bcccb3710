//! Two veclane daemons, each in its own network namespace with an uplink on a veth into one
//! Linux bridge, once over AF_PACKET and once over AF_XDP (root only; without it the test says
//! why and passes). Networks blue
//! (VNI 56) and red (VNI 88) both use 10.10.0.0/16; the pods are `veclane gen` over memif:
//! senders on node A, sinks on node B. Each sink receives exactly its own network's stream,
//! and tshark on the bridge sees each stream inside its own VNI between the two VTEPs.

mod daemon_common;
mod kernel_common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daemon_common::*;
use kernel_common::*;

/// Node `n` (1: A, the senders' side; 2: B, the sinks') with its uplink of `kind`
/// (`af-packet` or `af-xdp`).
fn node_config(n: u8, kind: &str) -> String {
    let other = 3 - n;
    let uplink = if kind == "af-packet" {
        "host-v0"
    } else {
        "xdp-v0"
    };
    let mut c = format!(
        "[daemon]\nmode = \"interrupt\"\nbuffers = 8192\n\n\
         [[{kind}]]\nhost-if = \"v0\"\naddresses = [\"192.0.2.{n}/24\"]\n\n"
    );
    for (id, net, vni) in [(0, "blue", 56), (1, "red", 88)] {
        // gen sends from 10.10.1.2 to 10.10.2.2, to MAC 02:00:00:00:00:02, from ...:01.
        c.push_str(&format!(
            "[[network]]\nname = \"{net}\"\nvni = {vni}\nranges = [\"10.10.0.0/16\"]\nuplink = \"{uplink}\"\n\n\
             [[interface]]\nname = \"{net}-pod\"\nsocket = \"pods.sock\"\nid = {id}\nrole = \"master\"\n\
             mac = \"02:00:00:00:00:02\"\nnetwork = \"{net}\"\naddresses = [\"10.10.{n}.1/24\"]\n\n\
             [[neighbor]]\ninterface = \"{net}-pod\"\nip = \"10.10.{n}.2\"\nmac = \"02:00:00:00:00:01\"\n\n\
             [[route]]\nprefix = \"10.10.{other}.0/24\"\nvia = \"192.0.2.{other}\"\nnetwork = \"{net}\"\n\n"
        ));
    }
    c
}

/// `veclane gen` on `socket` interface `id` with `args`, its JSON report on stdout.
fn run_gen(socket: &std::path::Path, id: u32, args: &[&str]) -> Child {
    Command::new(BIN)
        .args(["gen", "--json", "--socket"])
        .arg(socket)
        .args(["--id", &id.to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn report(c: Child) -> serde_json::Value {
    let out = c.wait_with_output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn two_daemons_over_af_packet_keep_blue_and_red_apart() {
    two_daemons_keep_blue_and_red_apart("af-packet");
}

/// AF_XDP on veth: the XDP program runs in veth's driver mode only up to an MTU of about a
/// page, and the UMEM's 2048-byte frames take MTU 1500 frames; so the links are at 1500.
#[test]
fn two_daemons_over_af_xdp_keep_blue_and_red_apart() {
    two_daemons_keep_blue_and_red_apart("af-xdp");
}

/// Resolves the paths from A's pods `ids` (the underlay, then ARP inside each tunnel,
/// answered by B's proxy) with single frames.
fn resolve(a: &Daemon, b: &Daemon, ids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for &id in ids {
        while a.ok("show ip neighbors").matches("10.10.2.2").count() <= id as usize {
            assert!(
                Instant::now() < deadline,
                "A: {}\nB: {}",
                a.ok("show errors"),
                b.ok("show errors")
            );
            let _ = report(run_gen(
                &a.path("pods.sock"),
                id,
                &["--tx-only", "--count", "1"],
            ));
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Between two veclane nodes nothing but their own ARP refreshes a learned neighbour. With
/// `age-seconds = 1` a stream from A's blue pod to B's outlives every learned neighbour's
/// age several times over (the VTEPs on the underlay, B's pod on A's tunnel, A's pod on
/// B's) and loses nothing: each node asks its silent neighbours again before forgetting
/// them, from its address on the uplink or, in a tunnel, on behalf of its own pod, and each
/// answers. Without the probes every age lost the stream's next packets to a glean.
#[test]
fn neighbours_in_use_are_asked_again_not_lost() {
    if let Some(why) = unable() {
        println!("skipped: {why}");
        return;
    }
    let lab = Lab::with_mtu(&["a", "b"], 9000);
    let config = |n| {
        node_config(n, "af-packet").replacen(
            "\n\n",
            "\n\n[daemon.neighbours]\nage-seconds = 1\n\n",
            1,
        )
    };
    let a = Daemon::start_in(Some(&lab.ns("a")), &config(1));
    let b = Daemon::start_in(Some(&lab.ns("b")), &config(2));
    resolve(&a, &b, &[0]);
    let sink = run_gen(&b.path("pods.sock"), 0, &["--rx-only", "--duration", "7"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !b
        .interfaces()
        .iter()
        .any(|i| i.name == "blue-pod" && i.connected)
    {
        assert!(Instant::now() < deadline, "{}", b.ok("show interface"));
        std::thread::sleep(Duration::from_millis(5));
    }
    let args = ["--tx-only", "--count", "2500", "--rate", "500"];
    let sent = report(run_gen(&a.path("pods.sock"), 0, &args));
    let got = report(sink);
    assert_eq!(sent["tx_packets"].as_u64(), Some(2500), "{sent}");
    assert_eq!(
        got["rx_packets"].as_u64(),
        Some(2500),
        "sink: {got}\nA: {}\n{}\nB: {}",
        a.ok("show errors"),
        a.ok("show ip neighbors"),
        b.ok("show ip neighbors")
    );
    for d in [&a, &b] {
        let n = d.ok("show ip neighbors");
        assert!(d.neighbour_summary("asked again ") >= 4, "{n}");
        assert_eq!(d.neighbour_summary("expired "), 0, "{n}");
        assert!(
            n.contains("10.10."),
            "the tunnel's neighbour is still there: {n}"
        );
    }
}

fn two_daemons_keep_blue_and_red_apart(kind: &str) {
    if let Some(why) = unable() {
        println!("skipped: {why}");
        return;
    }
    let lab = Lab::with_mtu(&["a", "b"], if kind == "af-xdp" { 1500 } else { 9000 });
    let a = Daemon::start_in(Some(&lab.ns("a")), &node_config(1, kind));
    let b = Daemon::start_in(Some(&lab.ns("b")), &node_config(2, kind));
    let (pods_a, pods_b) = (a.path("pods.sock"), b.path("pods.sock"));

    resolve(&a, &b, &[0, 1]);

    let cap = Capture::start(&lab, a.path("bridge.pcap"));
    let sinks = [0u32, 1].map(|id| run_gen(&pods_b, id, &["--rx-only", "--duration", "4"]));
    // The senders start once B says both sinks are connected (a fixed head start was too
    // short on a busy machine, right after a build).
    let deadline = Instant::now() + Duration::from_secs(10);
    while b
        .interfaces()
        .iter()
        .filter(|i| i.name.ends_with("-pod") && i.connected)
        .count()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "sinks: {}",
            b.ok("show interface")
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let senders = [(0u32, "3000"), (1, "2000")]
        .map(|(id, n)| run_gen(&pods_a, id, &["--tx-only", "--count", n, "--rate", "20000"]));
    let sent = senders.map(report);
    let got = sinks.map(report);
    let size = sent[0]["frame_size"].as_u64().unwrap() as usize;
    let seen = cap.stop(Some(8 + size));
    for ((s, g), want) in sent.iter().zip(&got).zip([3000u64, 2000]) {
        assert_eq!(s["tx_packets"].as_u64(), Some(want), "{s}");
        assert_eq!(
            (g["rx_packets"].as_u64(), g["rx_foreign"].as_u64()),
            (Some(want), Some(0)),
            "sink: {g}\nA: {}\nB: {}",
            a.ok("show errors"),
            b.ok("show errors")
        );
    }
    // On the bridge: blue's 3000 inside VNI 56 and red's 2000 inside VNI 88, A's VTEP to B's,
    // from 10.10.1.2 to 10.10.2.2 (in super-packets that may carry both networks' datagrams:
    // their inner flows, alike, give the same outer UDP flow).
    let count = |vni: &str| {
        seen.iter()
            .filter(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                f[0] == vni && f[1] == "192.0.2.1,10.10.1.2" && f[2] == "192.0.2.2,10.10.2.2"
            })
            .count()
    };
    assert_eq!(
        (count("56"), count("88")),
        (3000, 2000),
        "{:?}",
        &seen[..seen.len().min(5)]
    );
    let t = a.ok("show vxlan tunnel");
    eprintln!("node A ({kind}):\n{t}");
    assert!(t.contains("blue") && t.contains("red"), "{t}");
    let i = a.ok("show interface");
    assert!(i.contains(&format!("{kind} host-if v0")), "{i}");
    // One burst of 64 large frames (their payload left in the pod's memory by single-copy
    // receive) leaves A's AF_PACKET uplink as UDP super-packets, runs of one outer flow
    // longer than B's receive slot, counted beside the datagrams they held; AF_XDP has none.
    let sent = report(run_gen(
        &pods_a,
        0,
        &["--tx-only", "--count", "64", "--size", "1400"],
    ));
    assert_eq!(sent["tx_packets"].as_u64(), Some(64), "{sent}");
    let up = a.interfaces().into_iter().find(|i| i.name.ends_with("-v0"));
    let up = up.unwrap();
    eprintln!(
        "super-packets {} ({} datagrams), refused {}, of {} sent",
        up.tx_super_packets,
        up.tx_super_packet_datagrams,
        up.tx_super_packets_refused,
        up.tx_packets
    );
    if kind == "af-packet" {
        assert!(
            up.tx_super_packets > 0
                && up.tx_super_packet_datagrams >= 2 * up.tx_super_packets
                && up.tx_super_packet_datagrams <= up.tx_packets,
            "{up:?}"
        );
        let i = a.ok("show interface");
        assert!(i.contains("tx super-packets"), "{i}");
    } else {
        assert_eq!(
            up.tx_super_packets + up.tx_super_packet_datagrams,
            0,
            "{up:?}"
        );
    }
}
