//! The daemon end to end: `veclane run` in a private runtime directory, memif pods played by
//! this test, `veclane ctl` driving it, tshark checking what it forwarded.

mod daemon_common;

use std::time::Duration;

use daemon_common::*;

/// `show interface` tells the truth about queues: none on a master nobody is connected to
/// (its limits are shown as limits), then the pairs the peer actually opened.
#[test]
fn unconnected_masters_show_no_queues_and_their_limits() {
    let d = Daemon::start(&two_port_config("adaptive"));
    let queues = |text: &str, name: &str| -> String {
        let mut lines = text.lines().skip_while(|l| !l.starts_with(name));
        let detail = lines
            .nth(1)
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        detail[detail.find("max-queues").unwrap()..].to_string()
    };
    let text = d.ok("show interface");
    for name in ["memif0/0", "memif0/1"] {
        assert_eq!(
            queues(&text, name),
            "max-queues rx 16 tx 16 region-limit 129 MiB mac MAC table 0 mtu 9000 queues rx 0 tx 0"
                .replace("MAC", if name == "memif0/0" { MAC0 } else { MAC1 }),
            "{text}"
        );
    }
    let _pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    let text = d.ok("show interface");
    for name in ["memif0/0", "memif0/1"] {
        assert!(queues(&text, name).ends_with("queues rx 1 tx 1"), "{text}");
    }
}

#[test]
fn single_copy_forwards_answers_and_resolves_checked_by_tshark() {
    forwards_answers_and_resolves("single");
}

#[test]
fn two_copy_forwards_answers_and_resolves_checked_by_tshark() {
    forwards_answers_and_resolves("two");
}

fn forwards_answers_and_resolves(copy: &str) {
    // Two-copy runs its receive and transmit copies on the worker-thread engine, single-copy
    // on the CPU engine: both engines behind the nodes, checked end to end.
    let engine = if copy == "two" { "thread" } else { "cpu" };
    let d = Daemon::start(&two_port_config_copy("adaptive", copy, engine));
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    let (m0, m1) = (mac(MAC0), mac(MAC1));

    // pod0 resolves its gateway; the daemon answers and learns pod0.
    pods.send(
        0,
        &[arp(
            1,
            POD0,
            [10, 0, 0, 2],
            [0; 6],
            [10, 0, 0, 1],
            [0xff; 6],
        )],
    );
    let r = pods.recv(0, 1, Duration::from_secs(5));
    assert_eq!(r.len(), 1, "no ARP reply");
    assert_eq!(&r[0][12..14], &[8, 6]);
    assert_eq!(&r[0][20..22], &[0, 2], "not a reply");
    assert_eq!(&r[0][22..28], &m0, "sender MAC");
    assert_eq!(&r[0][28..32], &[10, 0, 0, 1]);
    let pcap = d.path(&format!("fwd-{copy}.pcap"));
    d.ok(&format!("pcap trace rx tx drop on any {}", pcap.display()));

    // The first packet to pod1 makes the daemon ask for pod1's MAC; pod1 answers.
    pods.send(
        0,
        &[udp(POD0, m0, [10, 0, 0, 2], [10, 0, 1, 2], 64, &payload(0))],
    );
    let r = pods.recv(1, 1, Duration::from_secs(5));
    assert_eq!(r.len(), 1, "no ARP request on memif0/1");
    assert_eq!(&r[0][0..6], &[0xff; 6]);
    assert_eq!(&r[0][20..22], &[0, 1], "not a request");
    assert_eq!(&r[0][28..32], &[10, 0, 1, 1], "asked from our address");
    assert_eq!(&r[0][38..42], &[10, 0, 1, 2], "asked for pod1");
    pods.send(1, &[arp(2, POD1, [10, 0, 1, 2], m1, [10, 0, 1, 1], m1)]);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !d.ok("show ip neighbors").contains("10.0.1.2") {
        assert!(
            std::time::Instant::now() < deadline,
            "neighbour not learned"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let neigh = d.ok("show ip neighbors");
    assert!(
        neigh.contains("02:00:00:00:b1:00") && neigh.contains("02:00:00:00:b0:00"),
        "{neigh}"
    );

    // Forwarding: 200 frames of many sizes, checked here and by tshark below.
    let sent: Vec<Vec<u8>> = (0..200)
        .map(|i| udp(POD0, m0, [10, 0, 0, 2], [10, 0, 1, 2], 64, &payload(i)))
        .collect();
    pods.send(0, &sent);
    let got = pods.recv(1, sent.len(), Duration::from_secs(10));
    assert_eq!(got.len(), sent.len(), "{}", d.ok("show errors"));
    for (i, f) in got.iter().enumerate() {
        assert_routed_udp(f, (m1, POD1), &payload(i), i);
    }

    // ICMP echo to our address, and TTL expiry answered with Time Exceeded.
    pods.send(0, &[ping(POD0, m0, [10, 0, 0, 2], [10, 0, 0, 1], 7)]);
    let r = pods.recv(0, 1, Duration::from_secs(5));
    assert_eq!(r.len(), 1, "no echo reply: {}", d.ok("show errors"));
    let p = etherparse::SlicedPacket::from_ethernet(&r[0]).unwrap();
    let Some(etherparse::TransportSlice::Icmpv4(icmp)) = &p.transport else {
        panic!("not ICMP")
    };
    assert!(matches!(
        icmp.icmp_type(),
        etherparse::Icmpv4Type::EchoReply(h) if h.seq == 7 && h.id == 0x4242
    ));
    pods.send(
        0,
        &[udp(POD0, m0, [10, 0, 0, 2], [10, 0, 1, 2], 1, b"expires")],
    );
    let r = pods.recv(0, 1, Duration::from_secs(5));
    assert_eq!(r.len(), 1, "no time exceeded: {}", d.ok("show errors"));
    let p = etherparse::SlicedPacket::from_ethernet(&r[0]).unwrap();
    let Some(etherparse::TransportSlice::Icmpv4(icmp)) = &p.transport else {
        panic!("not ICMP")
    };
    assert!(matches!(
        icmp.icmp_type(),
        etherparse::Icmpv4Type::TimeExceeded(_)
    ));

    let out = d.ok("pcap trace off");
    assert!(out.contains("wrote"), "{out}");
    let errors = d.ok("show errors");
    assert!(errors.contains("ttl"), "ttl expiry is counted: {errors}");

    // tshark, an independent parser, reads what the daemon wrote.
    let t = std::process::Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&pcap)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-T",
            "fields",
            "-E",
            "separator=;",
            "-e",
            "eth.src",
            "-e",
            "eth.dst",
            "-e",
            "ip.ttl",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.checksum.status",
            "-e",
            "icmp.type",
            "-e",
            "arp.opcode",
            "-e",
            "udp.payload",
        ])
        .output()
        .expect("tshark is installed by scripts/setup.sh");
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let text = String::from_utf8(t.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(';').collect()).collect();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let forwarded: Vec<&Vec<&str>> = rows
        .iter()
        .filter(|r| r[2] == "63" && r[1] == "02:00:00:00:b1:00")
        .collect();
    assert_eq!(
        forwarded.len(),
        200,
        "forwarded frames in the capture:\n{text}"
    );
    for (i, r) in forwarded.iter().enumerate() {
        assert_eq!(r[0], MAC1, "source MAC");
        assert_eq!(r[3], "1", "ip checksum status (1 = good): {r:?}");
        assert_eq!(r[4], "1", "udp checksum status (1 = good): {r:?}");
        assert_eq!(r[7], hex(&payload(i)), "payload of frame {i}");
    }
    let received = rows
        .iter()
        .filter(|r| r[2] == "64" && !r[7].is_empty())
        .count();
    assert!(received >= 200, "rx copies: {received}");
    assert!(rows.iter().any(|r| r[5] == "0"), "echo reply captured");
    assert!(
        rows.iter()
            .any(|r| r[5] == "11" && r[3].split(',').all(|x| x == "1")),
        "time exceeded captured"
    );
    assert!(rows.iter().any(|r| r[6] == "1"), "arp request captured");
    assert!(rows.iter().any(|r| r[6] == "2"), "arp reply captured");
}

#[test]
fn overlapping_prefixes_in_two_vrfs_forward_independently() {
    let mut cfg = String::from("[daemon]\nmode = \"interrupt\"\nbuffers = 4096\n");
    for (id, table, addr, nb_mac) in [
        (0, 1, "10.0.0.1/24", None),
        (1, 1, "10.0.1.1/24", Some("02:00:00:00:c1:01")),
        (2, 2, "10.0.0.1/24", None),
        (3, 2, "10.0.1.1/24", Some("02:00:00:00:c2:03")),
    ] {
        cfg.push_str(&format!(
            "[[interface]]\nsocket = \"memif.sock\"\nid = {id}\nrole = \"master\"\nmac = \"02:00:00:00:0{table}:0{id}\"\ntable = {table}\naddresses = [\"{addr}\"]\n"
        ));
        if let Some(m) = nb_mac {
            cfg.push_str(&format!(
                "[[neighbor]]\ninterface = \"memif0/{id}\"\nip = \"10.0.1.2\"\nmac = \"{m}\"\n"
            ));
        }
    }
    // The same prefix in both tables.
    cfg.push_str("[[route]]\nprefix = \"192.168.0.0/16\"\nvia = \"10.0.1.2\"\ntable = 1\n");
    cfg.push_str("[[route]]\nprefix = \"192.168.0.0/16\"\nvia = \"10.0.1.2\"\ntable = 2\n");
    let d = Daemon::start(&cfg);
    let fib = d.ok("show ip fib table 2");
    assert!(
        fib.contains("192.168.0.0/16") && fib.contains("memif0/3"),
        "{fib}"
    );
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1, 2, 3]);
    d.wait_connected(4);
    let to = |src_if: u32, n: usize| -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                udp(
                    POD0,
                    mac(&format!(
                        "02:00:00:00:0{}:0{src_if}",
                        if src_if < 2 { 1 } else { 2 }
                    )),
                    [10, 0, 0, 2],
                    [192, 168, 5, i as u8],
                    64,
                    format!("from {src_if} #{i}").as_bytes(),
                )
            })
            .collect()
    };
    pods.send(0, &to(0, 20));
    pods.send(2, &to(2, 30));
    let a = pods.recv(1, 20, Duration::from_secs(5));
    let b = pods.recv(3, 30, Duration::from_secs(5));
    assert_eq!((a.len(), b.len()), (20, 30), "{}", d.ok("show errors"));
    assert!(a.iter().all(|f| f[0..6] == mac("02:00:00:00:c1:01")
        && f.ends_with(b"")
        && String::from_utf8_lossy(&f[42..]).starts_with("from 0")));
    assert!(b.iter().all(|f| f[0..6] == mac("02:00:00:00:c2:03")
        && String::from_utf8_lossy(&f[42..]).starts_with("from 2")));
    // Nothing leaked into the other VRF.
    assert!(pods.recv(1, 1, Duration::from_millis(300)).is_empty());
    assert!(pods.recv(3, 1, Duration::from_millis(300)).is_empty());
    // Deleting table 1's route leaves table 2's working.
    d.ok("ip route del 192.168.0.0/16 via 10.0.1.2 table 1");
    pods.send(0, &to(0, 5));
    pods.send(2, &to(2, 5));
    assert_eq!(pods.recv(3, 5, Duration::from_secs(5)).len(), 5);
    assert!(pods.recv(1, 1, Duration::from_millis(300)).is_empty());
}

#[test]
fn ctl_verbs_against_the_running_daemon() {
    let d = Daemon::start(&two_port_config("interrupt"));
    let help = d.ok("help");
    for verb in [
        "show interface",
        "show interface rx-placement",
        "show runtime",
        "show errors",
        "show trace",
        "trace add",
        "clear runtime|errors|trace",
        "create interface memif",
        "set interface state",
        "set interface ip address",
        "set interface ip table",
        "ip route add|del",
        "show ip fib",
        "show ip neighbors",
        "pcap trace",
    ] {
        assert!(help.contains(verb), "help lacks {verb}");
    }
    let out =
        d.ok("create interface memif id 7 socket extra.sock master hw-addr 02:00:00:00:07:07");
    assert!(out.contains("memif1/7"), "{out}");
    let out = d.ok(&format!(
        "create interface memif id 3 socket {} slave",
        d.path("elsewhere.sock").display()
    ));
    assert!(out.contains("memif2/3"), "{out}");
    d.ok("set interface ip address memif1/7 172.16.0.1/24");
    d.ok("set interface ip table memif1/7 4");
    d.ok("set interface state memif1/7 down");
    let sh = d.ok("show interface memif1/7");
    assert!(
        sh.contains("down") && sh.contains("table 4") && sh.contains("172.16.0.1/24"),
        "{sh}"
    );
    assert!(sh.contains("02:00:00:00:07:07"), "{sh}");
    d.ok("set interface state memif1/7 up");
    d.ok("ip route add 10.99.0.0/16 via 172.16.0.9 table 4");
    d.ok("set ip neighbor memif1/7 172.16.0.9 02:00:00:00:09:09");
    let fib = d.ok("show ip fib table 4");
    assert!(
        fib.contains("10.99.0.0/16") && fib.contains("via 172.16.0.9 memif1/7 02:00:00:00:09:09"),
        "{fib}"
    );
    assert!(
        fib.contains("172.16.0.1/32") && fib.contains("receive"),
        "{fib}"
    );
    d.ok("ip route del 10.99.0.0/16 via 172.16.0.9 table 4");
    assert!(!d.ok("show ip fib table 4").contains("10.99.0.0/16"));
    d.ok("set ip neighbor del memif1/7 172.16.0.9 02:00:00:00:09:09");
    assert!(!d.ok("show ip neighbors").contains("172.16.0.9"));
    d.ok("set interface ip address del memif1/7 172.16.0.1/24");
    assert!(!d.ok("show ip fib table 4").contains("172.16.0.1/32"));
    let pl = d.ok("show interface rx-placement");
    assert!(pl.contains("memif0/0") && pl.contains("worker 0"), "{pl}");
    let rt = d.ok("show runtime");
    assert!(rt.contains("memif-input"), "{rt}");
    d.ok("trace add memif-input 10");
    d.ok("show trace");
    d.ok("clear trace");
    d.ok("clear runtime");
    d.ok("clear errors");
    d.ok("clear interfaces");
    d.ok("show errors");
    let v = d.ok("show version");
    assert!(v.contains("1 worker"), "{v}");
    // Wrong arguments: a message naming them, a failing exit status.
    for (line, named) in [
        ("set interface state memif0/0 sideways", "sideways"),
        ("set interface state nosuch0 up", "nosuch0"),
        ("ip route add 10.0.0.0/40 via 10.0.0.2", "10.0.0.0/40"),
        ("ip route add 10.5.0.0/16 via 10.9.9.9", "10.9.9.9"),
        ("ip route del 10.5.0.0/16 via 10.0.0.2", "10.5.0.0/16"),
        ("trace add no-such-node 5", "no-such-node"),
        (
            "create interface memif id 0 socket memif.sock master",
            "id 0",
        ),
        (
            "create interface memif id 9 socket memif.sock slave",
            "other role",
        ),
        ("set interface ip table memif0/0 4294967296", "4294967296"),
        ("show ip fib table 77", "77"),
        ("pcap trace off", "no capture"),
        ("frobnicate now", "unknown command"),
    ] {
        let (ok, _, err) = d.ctl(line);
        assert!(!ok, "`{line}` should fail");
        assert!(err.contains(named), "`{line}`: {err}");
    }
    // A malformed request over the raw socket gets an error, not a hang-up.
    use std::io::{BufRead, Write};
    let mut s = std::os::unix::net::UnixStream::connect(d.ctl_path()).unwrap();
    s.write_all(b"{\"request\":\"reboot\"}\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(&s).read_line(&mut line).unwrap();
    assert!(line.contains("malformed request"), "{line}");
}

#[test]
fn idle_daemon_sleeps_and_stops_on_sigterm() {
    let mut d = Daemon::start(&two_port_config("adaptive"));
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    d.ok("set ip neighbor memif0/1 10.0.1.2 02:00:00:00:b1:00");
    let m0 = mac(MAC0);
    let frames: Vec<Vec<u8>> = (0..2000)
        .map(|i| udp(POD0, m0, [10, 0, 0, 2], [10, 0, 1, 2], 64, &payload(i)))
        .collect();
    // In rounds that fit pod1's receive ring (this test reads only between rounds).
    for chunk in frames.chunks(500) {
        pods.send(0, chunk);
        assert_eq!(
            pods.recv(1, chunk.len(), Duration::from_secs(10)).len(),
            chunk.len()
        );
    }
    // Connected, no traffic: the workers sleep on the memif eventfds.
    let t0 = cpu_seconds(d.pid());
    std::thread::sleep(Duration::from_secs(10));
    let used = cpu_seconds(d.pid()) - t0;
    println!(
        "idle daemon: {:.3} s of CPU in 10 s ({:.2} % of a core)",
        used,
        used * 10.0
    );
    assert!(used < 0.2, "idle daemon used {used} s of CPU in 10 s");
    // And it still forwards at once after the sleep.
    pods.send(0, &frames[..10]);
    assert_eq!(pods.recv(1, 10, Duration::from_secs(5)).len(), 10);
    let status = d.terminate();
    assert!(status.success(), "{status:?}");
    assert!(!d.ctl_path().exists(), "control socket removed");
}

#[test]
fn deleting_an_interface_removes_everything_of_it_and_nothing_else() {
    let d = Daemon::start(&two_port_config("interrupt"));
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    d.ok("set ip neighbor memif0/1 10.0.1.2 02:00:00:00:b1:00");
    let m0 = mac(MAC0);
    let frames: Vec<Vec<u8>> = (0..200)
        .map(|i| udp(POD0, m0, [10, 0, 0, 2], [10, 0, 1, 2], 64, &payload(i)))
        .collect();
    let through = |pods: &mut Pods, n: usize| {
        pods.send(0, &frames[..n]);
        assert_eq!(pods.recv(1, n, Duration::from_secs(5)).len(), n);
    };
    through(&mut pods, 200);
    let fds_before = fd_count(d.pid());

    // A third interface on a socket of its own, with an address, a neighbour and a static
    // route through it, and a pod connected to it.
    d.ok(
        "create interface memif id 0 socket extra.sock master name extra hw-addr 02:00:00:00:00:a2",
    );
    d.ok("set interface ip address extra 10.0.2.1/24");
    d.ok("set ip neighbor extra 10.0.2.2 02:00:00:00:b2:00");
    d.ok("ip route add 172.16.0.0/12 via 10.0.2.2");
    let mut extra = Pods::connect(&d.path("extra.sock"), &[0]);
    d.wait_connected(3);
    let fib = d.ok("show ip fib");
    assert!(
        fib.contains("10.0.2.0/24") && fib.contains("172.16.0.0/12"),
        "{fib}"
    );
    through(&mut pods, 100);

    d.ok("delete interface extra");
    assert_eq!(
        extra.await_disconnect(0),
        "peer disconnected: interface deleted"
    );
    let fib = d.ok("show ip fib");
    for gone in ["10.0.2.", "172.16.0.0/12", "extra"] {
        assert!(!fib.contains(gone), "{gone} left in\n{fib}");
    }
    assert!(!d.ok("show ip neighbors").contains("10.0.2.2"));
    let ifs = d.ok("show interface");
    assert!(!ifs.contains("extra"), "{ifs}");
    assert!(
        !d.path("extra.sock").exists(),
        "its socket was its own: closed"
    );
    let (ok, _, err) = d.ctl("delete interface extra");
    assert!(!ok && err.contains("no interface named \"extra\""), "{err}");
    // The others did not blink: still connected on their first connection, still forwarding.
    through(&mut pods, 200);
    let interfaces = d.interfaces();
    assert_eq!(interfaces.len(), 2);
    for i in &interfaces {
        assert!(
            i.connected && i.connects == 1 && i.disconnects == 0,
            "{i:?}"
        );
    }
    // Nothing leaked: the peer's region, eventfds and the socket are closed once the worker
    // has dropped the queues.
    drop(extra);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fd_count(d.pid()) > fds_before {
        assert!(
            std::time::Instant::now() < deadline,
            "{} fds open, {fds_before} before the interface existed",
            fd_count(d.pid())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The slot is reused, and the name is free again.
    let out = d.ok("create interface memif id 0 socket extra.sock master name extra");
    assert!(out.contains("extra (index 2)"), "{out}");
    through(&mut pods, 50);
}

#[test]
fn networks_with_the_same_range_stay_apart() {
    let mut cfg = String::from(
        "[daemon]\nmode = \"interrupt\"\nbuffers = 4096\n\n\
         [[network]]\nname = \"blue\"\nvni = 56\nranges = [\"10.1.0.0/16\"]\n\n\
         [[network]]\nname = \"red\"\nvni = 88\nranges = [\"10.1.0.0/16\"]\n",
    );
    for (id, net, addr, nb_mac) in [
        (0, "blue", "10.1.0.1/24", None),
        (1, "blue", "10.1.1.1/24", Some("02:00:00:00:c1:01")),
        (2, "red", "10.1.0.1/24", None),
        (3, "red", "10.1.1.1/24", Some("02:00:00:00:c2:03")),
    ] {
        cfg.push_str(&format!(
            "[[interface]]\nsocket = \"memif.sock\"\nid = {id}\nrole = \"master\"\nmac = \"02:00:00:00:0a:0{id}\"\nnetwork = \"{net}\"\naddresses = [\"{addr}\"]\n"
        ));
        if let Some(m) = nb_mac {
            cfg.push_str(&format!(
                "[[neighbor]]\ninterface = \"memif0/{id}\"\nip = \"10.1.1.2\"\nmac = \"{m}\"\n"
            ));
        }
    }
    let d = Daemon::start(&cfg);
    let nets = d.ok("show network");
    assert!(
        nets.contains("memif0/0 memif0/1") && nets.contains("memif0/2 memif0/3"),
        "{nets}"
    );
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1, 2, 3]);
    d.wait_connected(4);
    let to = |src_if: u32, n: usize| -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                udp(
                    POD0,
                    mac(&format!("02:00:00:00:0a:0{src_if}")),
                    [10, 1, 0, 2],
                    [10, 1, 1, 2],
                    64,
                    format!("from {src_if} #{i}").as_bytes(),
                )
            })
            .collect()
    };
    pods.send(0, &to(0, 20));
    pods.send(2, &to(2, 30));
    let blue = pods.recv(1, 20, Duration::from_secs(5));
    let red = pods.recv(3, 30, Duration::from_secs(5));
    assert_eq!((blue.len(), red.len()), (20, 30), "{}", d.ok("show errors"));
    assert!(blue.iter().all(|f| f[0..6] == mac("02:00:00:00:c1:01")
        && String::from_utf8_lossy(&f[42..]).starts_with("from 0")));
    assert!(red.iter().all(|f| f[0..6] == mac("02:00:00:00:c2:03")
        && String::from_utf8_lossy(&f[42..]).starts_with("from 2")));
    // Nothing crossed over.
    assert!(pods.recv(1, 1, Duration::from_millis(200)).is_empty());
    assert!(pods.recv(3, 1, Duration::from_millis(200)).is_empty());

    // Refusals name what is wrong.
    for (line, named) in [
        (
            "network del blue",
            "still has interfaces: memif0/0, memif0/1",
        ),
        (
            "network add green vni 56 range 10.9.0.0/16",
            "vni 56 is network blue's",
        ),
        (
            "network add blue vni 99 range 10.9.0.0/16",
            "\"blue\" exists already",
        ),
        (
            "network add green vni 99 range 10.9.0.5/16",
            "host bits set",
        ),
        (
            "network add green vni 16777216 range 10.9.0.0/16",
            "over 24 bits",
        ),
        (
            "network add green vni 99 range 10.9.0.0/16 owner \u{7f}",
            "owner \"\\u{7f}\" must be 1 to 31 printable characters",
        ),
        ("network del purple", "no network named \"purple\""),
        (
            "create interface memif id 9 socket memif.sock master network purple",
            "no network named \"purple\"",
        ),
    ] {
        let (ok, _, err) = d.ctl(line);
        assert!(!ok, "`{line}` should fail");
        assert!(err.contains(named), "`{line}`: {err}");
    }
    // A network added and removed at run time, with an interface in it, and its manager.
    d.ok("network add green vni 99 range 10.9.0.0/16 owner veclane-agent");
    let green = d.ok("show network");
    assert!(
        green
            .lines()
            .any(|l| l.starts_with("green") && l.contains("veclane-agent")),
        "{green}"
    );
    let table: u32 = green
        .lines()
        .find(|l| l.starts_with("green"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{green}"));
    assert!(table > 0);
    d.ok("create interface memif id 4 socket memif.sock master network green");
    let (ok, _, err) = d.ctl("set interface ip address memif0/4 10.1.0.1/24");
    assert!(
        !ok && err.contains("outside network green's ranges"),
        "{err}"
    );
    let (ok, _, err) = d.ctl("set interface ip table memif0/4 5");
    assert!(!ok && err.contains("attached to network green"), "{err}");
    d.ok("set interface ip address memif0/4 10.9.0.1/24");
    assert!(
        d.ok(&format!("show ip fib table {table}"))
            .contains("10.9.0.1/32")
    );
    d.ok("delete interface memif0/4");
    d.ok("network del green");
    assert!(!d.ok("show network").contains("green"));
    let (ok, _, err) = d.ctl(&format!("show ip fib table {table}"));
    assert!(!ok && err.contains("does not exist"), "{err}");
    // Table ids are any u32.
    d.ok("create interface memif id 5 socket memif.sock master");
    d.ok("set interface ip table memif0/5 4000000000");
    d.ok("set interface ip address memif0/5 10.7.0.1/24");
    assert!(d.ok("show ip fib table 4000000000").contains("10.7.0.1/32"));
    d.ok("delete interface memif0/5");
    // Blue and red forwarded throughout.
    pods.send(0, &to(0, 5));
    assert_eq!(pods.recv(1, 5, Duration::from_secs(5)).len(), 5);
}

/// The README's walk-through: a sink (`veclane gen --rx-only`) and a paced sender (`--tx-only
/// --rate`) as two processes. On a machine of two CPUs they share one (the daemon's worker
/// has the other); when either busy-polled, the scheduler ran them by turns of milliseconds,
/// and the sink reported those milliseconds as the path's latency. Both now sleep while they
/// have nothing to do: each takes a small part of a CPU at 5 kpps, every frame arrives, and
/// the sink reports latencies (their size is for `veclane bench`, not a test).
#[test]
fn separate_sink_and_paced_sender_sleep_between_frames() {
    let config = api::Config::embedded_default().to_toml();
    let d = Daemon::start(&config);
    let sock = d.path("memif.sock");
    let spawn_gen = |args: &[&str]| {
        std::process::Command::new(BIN)
            .arg("gen")
            .arg("--socket")
            .arg(&sock)
            .args(args)
            // As the README: both on CPU 0, the daemon's worker on CPU 1.
            .args(["--cpu", "0"])
            .arg("--json")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The sink also reads every frame whole: the daemon must hand each one on unchanged.
    let sink = spawn_gen(&[
        "--id",
        "1",
        "--rx-only",
        "--duration",
        "5",
        "--check-payload",
    ]);
    // The sender starts once the sink is connected (on a busy machine it took longer than
    // the 300 ms this waited, and the first frames found no sink).
    d.wait_connected(1);
    let sender = spawn_gen(&[
        "--id",
        "0",
        "--tx-only",
        "--rate",
        "5000",
        "--duration",
        "3",
        "--size",
        "1500",
    ]);
    std::thread::sleep(Duration::from_millis(1000));
    let (s0, t0) = (cpu_seconds(sink.id()), cpu_seconds(sender.id()));
    std::thread::sleep(Duration::from_millis(1500));
    let (s1, t1) = (cpu_seconds(sink.id()), cpu_seconds(sender.id()));
    let report = |c: std::process::Child| -> serde_json::Value {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success());
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let sent = report(sender);
    let got = report(sink);
    println!(
        "in 1.5 s at 5 kpps: sink {:.3} s of CPU, sender {:.3} s; latency {}",
        s1 - s0,
        t1 - t0,
        got["latency"]
    );
    // A busy-polling loop takes the whole 1.5 s (both, sharing a CPU: 0.75 s each).
    assert!(s1 - s0 < 0.5, "the sink polled: {} s", s1 - s0);
    assert!(t1 - t0 < 0.5, "the sender spun: {} s", t1 - t0);
    assert_eq!(got["rx_packets"], sent["tx_packets"], "{got}\n{sent}");
    assert_eq!(
        (got["rx_corrupt"].as_u64(), got["rx_foreign"].as_u64()),
        (Some(0), Some(0)),
        "{got}"
    );
    assert!(got["latency"]["p50_ns"].as_u64().unwrap() > 0, "{got}");
}
