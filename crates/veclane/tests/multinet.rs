//! Multinet across two daemons: networks blue (VNI 56) and red (VNI 88) both use 10.1.0.0/16;
//! the daemons are joined by an uplink (here a memif link between them: the kernel tests in
//! `uplink_kernel.rs` use AF_PACKET on veth). Routes to the other node's pods go through the
//! VXLAN tunnel each network gets to the other VTEP; ARP crosses the tunnel and is answered by
//! proxy; blue's packets reach only blue's pods, red's only red's; tunnels come and go with
//! their routes, and networks with their tunnels.

mod daemon_common;

use std::time::Duration;

use daemon_common::*;

const POD_MAC: &str = "02:00:00:00:99:01";

/// Node `n` (1 or 2): the uplink (A is master, B slave on A's socket), blue and red pods.
fn node_config(n: u8, uplink_socket: &str) -> String {
    let other = 3 - n;
    let role = if n == 1 { "master" } else { "slave" };
    let mut c = format!(
        "[daemon]\nmode = \"interrupt\"\nbuffers = 4096\n\n\
         [[network]]\nname = \"blue\"\nvni = 56\nranges = [\"10.1.0.0/16\"]\nuplink = \"uplink\"\n\n\
         [[network]]\nname = \"red\"\nvni = 88\nranges = [\"10.1.0.0/16\"]\nuplink = \"uplink\"\n\n\
         [[interface]]\nname = \"uplink\"\nsocket = \"{uplink_socket}\"\nid = 0\nrole = \"{role}\"\n\
         addresses = [\"192.0.2.{n}/24\"]\n\n"
    );
    for (id, net) in [(0, "blue"), (1, "red")] {
        c.push_str(&format!(
            "[[interface]]\nname = \"{net}-pod\"\nsocket = \"pods.sock\"\nid = {id}\nrole = \"master\"\n\
             mac = \"02:00:00:00:0{n}:0{id}\"\nnetwork = \"{net}\"\naddresses = [\"10.1.{n}.1/24\"]\n\n\
             [[neighbor]]\ninterface = \"{net}-pod\"\nip = \"10.1.{n}.2\"\nmac = \"{POD_MAC}\"\n\n\
             [[route]]\nprefix = \"10.1.{other}.0/24\"\nvia = \"192.0.2.{other}\"\nnetwork = \"{net}\"\n\n"
        ));
    }
    c
}

fn to_other(n: u8, id: u32, count: usize, tag: &str) -> Vec<Vec<u8>> {
    let other = 3 - n;
    (0..count)
        .map(|i| {
            udp(
                mac(POD_MAC),
                mac(&format!("02:00:00:00:0{n}:0{id}")),
                [10, 1, n, 2],
                [10, 1, other, 2],
                64,
                format!("{tag} #{i}").as_bytes(),
            )
        })
        .collect()
}

#[test]
fn two_nodes_carry_two_networks_with_one_range_apart() {
    let a = Daemon::start(&node_config(1, "uplink.sock"));
    let b = Daemon::start(&node_config(
        2,
        a.path("uplink.sock").to_str().expect("utf-8 path"),
    ));
    let mut pods_a = Pods::connect(&a.path("pods.sock"), &[0, 1]);
    let mut pods_b = Pods::connect(&b.path("pods.sock"), &[0, 1]);
    a.wait_connected(3);
    b.wait_connected(3);
    let tunnels = a.ok("show vxlan tunnel");
    assert!(
        tunnels.contains("blue") && tunnels.contains("red") && tunnels.contains("192.0.2.2"),
        "{tunnels}"
    );
    assert!(tunnels.contains("8950"), "inner MTU = 9000 - 50: {tunnels}");

    // The first packet of each network asks across the tunnel (ARP, answered by B's proxy);
    // once A learned the answer, packets flow.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for id in [0, 1] {
        loop {
            pods_a.send(id, &to_other(1, id, 1, "probe"));
            std::thread::sleep(Duration::from_millis(150));
            let n = a.ok("show ip neighbors");
            if n.matches("10.1.2.2").count() > id as usize {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no ARP answer: {n}\n{}",
                a.ok("show errors")
            );
        }
    }
    let _ = pods_b.recv(0, 100, Duration::from_millis(200));
    let _ = pods_b.recv(1, 100, Duration::from_millis(200));

    pods_a.send(0, &to_other(1, 0, 40, "blue"));
    pods_a.send(1, &to_other(1, 1, 30, "red"));
    let blue = pods_b.recv(0, 40, Duration::from_secs(5));
    let red = pods_b.recv(1, 30, Duration::from_secs(5));
    assert_eq!(
        (blue.len(), red.len()),
        (40, 30),
        "A: {}\nB: {}",
        a.ok("show errors"),
        b.ok("show errors")
    );
    for (frames, tag, id) in [(&blue, "blue", 0), (&red, "red", 1)] {
        for f in frames {
            assert_eq!(f[0..6], mac(POD_MAC));
            assert_eq!(f[6..12], mac(&format!("02:00:00:00:02:0{id}")));
            assert_eq!(f[22], 62, "routed twice: TTL 64 - 2");
            assert!(String::from_utf8_lossy(&f[42..]).starts_with(tag), "{tag}");
        }
    }
    assert!(pods_b.recv(0, 1, Duration::from_millis(200)).is_empty());
    assert!(pods_b.recv(1, 1, Duration::from_millis(200)).is_empty());
    // B's blue tunnel counted them in (column 9: rx packets), the probes too.
    let tb = b.ok("show vxlan tunnel");
    let rx = |net: &str| -> u64 {
        tb.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(net))
            .and_then(|l| l.split_whitespace().nth(8)?.parse().ok())
            .unwrap_or_else(|| panic!("{tb}"))
    };
    assert!((41..=45).contains(&rx("blue")), "{tb}");
    assert!((31..=35).contains(&rx("red")), "{tb}");

    // And back: B learned A's pods from A's ARP requests (their sender), so it needs no
    // probe; B's red pod reaches A's red pod only.
    pods_b.send(1, &to_other(2, 1, 25, "red back"));
    let back = pods_a.recv(1, 25, Duration::from_secs(5));
    assert_eq!(back.len(), 25, "{}", b.ok("show errors"));
    assert!(
        back.iter()
            .all(|f| String::from_utf8_lossy(&f[42..]).starts_with("red back"))
    );
    assert!(pods_a.recv(0, 1, Duration::from_millis(200)).is_empty());

    // A tunnel goes with its last route; red still works meanwhile.
    a.ok("ip route del 10.1.2.0/24 via 192.0.2.2 network blue");
    let t = a.ok("show vxlan tunnel");
    assert!(!t.contains("blue") && t.contains("red"), "{t}");
    pods_a.send(1, &to_other(1, 1, 10, "red again"));
    assert_eq!(pods_b.recv(1, 10, Duration::from_secs(5)).len(), 10);
    // Blue to node 2 has no route now: nothing leaves.
    pods_a.send(0, &to_other(1, 0, 5, "blue lost"));
    assert!(pods_b.recv(0, 1, Duration::from_millis(300)).is_empty());

    // The same route again (a reload, a reconcile) keeps its tunnel and its count.
    a.ok("ip route add 10.1.2.0/24 via 192.0.2.2 network red");
    let t = a.ok("show vxlan tunnel");
    let red = t
        .lines()
        .find(|l| l.contains(" red "))
        .unwrap_or_else(|| panic!("{t}"));
    assert_eq!(red.split_whitespace().nth(7), Some("1"), "one route: {t}");
    // Refusals name the problem.
    for (line, named) in [
        (
            "set interface ip address red-pod 10.1.2.5/24",
            "is a route through vxlan_tunnel",
        ),
        (
            "ip route add 10.1.9.0/24 via 192.0.2.1 network red",
            "a tunnel to it would loop",
        ),
        ("delete interface uplink", "uplink of tunnels"),
        (
            "ip route add 10.1.9.0/24 via 192.0.2.9 network blue table 3",
            "both set",
        ),
    ] {
        let (ok, _, err) = a.ctl(line);
        assert!(!ok && err.contains(named), "`{line}`: {err}");
    }
    a.ok("network add green vni 99 range 10.9.0.0/16");
    let (ok, _, err) = a.ctl("ip route add 10.9.2.0/24 via 192.0.2.2 network green");
    assert!(!ok && err.contains("has no uplink"), "{err}");
    // Deleting a network takes its tunnels.
    a.ok("delete interface red-pod");
    a.ok("network del red");
    let t = a.ok("show vxlan tunnel");
    assert_eq!(t.lines().count(), 1, "only the header left: {t}");
    a.ok("delete interface uplink");
}

#[test]
fn run_time_changes_do_not_touch_another_networks_traffic() {
    let a = Daemon::start(&node_config(1, "uplink.sock"));
    let b = Daemon::start(&node_config(
        2,
        a.path("uplink.sock").to_str().expect("utf-8 path"),
    ));
    let mut pods_a = Pods::connect(&a.path("pods.sock"), &[0, 1]);
    let mut pods_b = Pods::connect(&b.path("pods.sock"), &[0, 1]);
    a.wait_connected(3);
    b.wait_connected(3);
    // Resolve blue's path first (ARP across the tunnel).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !a.ok("show ip neighbors").contains("10.1.2.2") {
        pods_a.send(0, &to_other(1, 0, 1, "probe"));
        std::thread::sleep(Duration::from_millis(150));
        assert!(std::time::Instant::now() < deadline, "no ARP answer");
    }
    let _ = pods_b.recv(0, 100, Duration::from_millis(300));

    // Blue streams numbered packets from A to B for as long as red, a new network, an
    // interface and routes come and go on both nodes.
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let (changing, sent) = (AtomicBool::new(true), AtomicUsize::new(0));
    let got = std::thread::scope(|s| {
        let rx = s.spawn(|| {
            let mut got = Vec::new();
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                got.extend(pods_b.recv(0, 256, Duration::from_millis(20)));
                let done = !changing.load(Ordering::Acquire);
                if (done && got.len() >= sent.load(Ordering::Acquire))
                    || std::time::Instant::now() > deadline
                {
                    // A last look for stragglers.
                    got.extend(pods_b.recv(0, 256, Duration::from_millis(200)));
                    return got;
                }
            }
        });
        let tx = s.spawn(|| {
            let mut i = 0;
            while changing.load(Ordering::Acquire) {
                let chunk: Vec<Vec<u8>> = (i..i + 32)
                    .map(|k| {
                        udp(
                            mac(POD_MAC),
                            mac("02:00:00:00:01:00"),
                            [10, 1, 1, 2],
                            [10, 1, 2, 2],
                            64,
                            format!("stream #{k}").as_bytes(),
                        )
                    })
                    .collect();
                pods_a.send(0, &chunk);
                i += 32;
                sent.store(i, Ordering::Release);
                std::thread::sleep(Duration::from_micros(500));
            }
        });
        for (d, other) in [(&a, 2), (&b, 1)] {
            d.ok("network add green vni 99 range 10.9.0.0/16 uplink uplink");
            d.ok(&format!(
                "ip route add 10.9.{other}.0/24 via 192.0.2.{other} network green"
            ));
            d.ok(&format!(
                "ip route add 10.9.{}.0/24 via 192.0.2.{other} network green",
                other + 10
            ));
            assert!(d.ok("show vxlan tunnel").contains("green"));
            d.ok(&format!(
                "ip route del 10.9.{other}.0/24 via 192.0.2.{other} network green"
            ));
            // The tunnel's last route: the tunnel goes.
            d.ok(&format!(
                "ip route del 10.9.{}.0/24 via 192.0.2.{other} network green",
                other + 10
            ));
            assert!(!d.ok("show vxlan tunnel").contains("green"));
            d.ok("create interface memif id 7 socket extra.sock master network green name extra");
            d.ok("set interface ip address extra 10.9.7.1/24");
            d.ok("delete interface extra");
            d.ok("network del green");
            d.ok(&format!(
                "ip route del 10.1.{other}.0/24 via 192.0.2.{other} network red"
            ));
            d.ok(&format!(
                "ip route add 10.1.{other}.0/24 via 192.0.2.{other} network red"
            ));
        }
        changing.store(false, Ordering::Release);
        tx.join().unwrap();
        rx.join().unwrap()
    });
    let n = sent.load(Ordering::Acquire);
    eprintln!("{n} blue packets streamed across the changes");
    assert!(n > 2000, "the changes overlapped {n} packets only");
    assert_eq!(
        got.len(),
        n,
        "A: {}\nB: {}",
        a.ok("show errors"),
        b.ok("show errors")
    );
    // Every one, in order, and nothing but blue's.
    for (i, f) in got.iter().enumerate() {
        assert_eq!(
            String::from_utf8_lossy(&f[42..]),
            format!("stream #{i}"),
            "packet {i}"
        );
    }
    assert!(pods_b.recv(1, 1, Duration::from_millis(200)).is_empty());
}
