//! Anti-spoofing against real senders: a pod's interface takes packets only from the sources
//! it was given. The Linux kernel in a tap pod sends UDP and ARP as other addresses (its own
//! addresses added to its device, so the kernel itself writes the forged headers), a memif
//! pod sends forged frames in Ethernet and in ip mode, and DPDK's testpmd floods forged UDP;
//! nothing forged reaches the pod behind, all of it is counted, and the allowed set can be
//! widened (a pod that routes for others) or turned off at run time.

mod daemon_common;
mod kernel_common;
mod pod_common;

use std::collections::BTreeMap;
use std::time::Duration;

use daemon_common::{Daemon, Pods, mac, udp};
use kernel_common::Lab;
use pod_common::{CONFIG, interface, python, skip, tap_pod, wait_line};

const SPOOFED: &str = "ip4 source address not allowed on this interface";

/// The daemon's count of `reason` (summed over nodes).
fn errors(d: &Daemon, reason: &str) -> u64 {
    d.ok("show errors")
        .lines()
        .filter(|l| l.contains(reason))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A UDP sink on port 7000 in pod `ns`: after `ready`, counts datagrams by source address
/// until 1.5 s pass without one; its counts when `wait_counts` is called.
fn sink(lab: &Lab, ns: &str) -> std::process::Child {
    let mut c = python(
        lab,
        ns,
        "import socket,collections\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         s.bind(('0.0.0.0',7000))\ns.settimeout(1.5)\nn=collections.Counter()\n\
         print('ready',flush=True)\n\
         try:\n  while True:\n    d,a=s.recvfrom(9000)\n    n[a[0]]+=1\n\
         except socket.timeout:\n  pass\n\
         print(' '.join('%s=%d'%kv for kv in sorted(n.items())) or '-',flush=True)\n",
    );
    assert_eq!(wait_line(&mut c), "ready");
    c
}

fn wait_counts(mut c: std::process::Child) -> BTreeMap<String, u64> {
    let line = wait_line(&mut c);
    let _ = c.wait();
    line.split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// From pod `ns`, `n` UDP datagrams to 10.1.0.6:7000 from each of `sources` (addresses on
/// its `eth1`, so that the kernel writes them as the source).
fn send_from(lab: &Lab, ns: &str, sources: &[&str], n: u32) {
    let code = format!(
        "import socket\nfor src in {sources:?}:\n  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n  \
         s.bind((src,0))\n  for i in range({n}): s.sendto(b'pod',('10.1.0.6',7000))\n\
         print('sent',flush=True)\n"
    );
    let mut c = python(lab, ns, &code);
    assert_eq!(wait_line(&mut c), "sent");
    let _ = c.wait();
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

#[test]
fn a_tap_pod_sends_only_as_itself() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "b1", "b2"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    let b1 = tap_pod(&d, &lab, "b1", "blue", "10.1.0.5");
    tap_pod(&d, &lab, "b2", "blue", "10.1.0.6");
    assert_eq!(
        interface(&d, &b1).allowed_sources,
        Some(vec!["10.1.0.5/32".parse().unwrap()])
    );
    assert!(
        d.ok(&format!("show interface {b1}"))
            .contains("allowed sources 10.1.0.5/32")
    );
    // The pod gives itself another pod's address and one from outside.
    for a in ["10.1.0.77/32", "8.8.8.8/32"] {
        lab.exec("b1", &["ip", "addr", "add", a, "dev", "eth1"]);
    }
    let all = ["10.1.0.5", "10.1.0.77", "8.8.8.8"];

    let s = sink(&lab, "b2");
    send_from(&lab, "b1", &all, 5);
    assert_eq!(wait_counts(s), counts(&[("10.1.0.5", 5)]));
    assert_eq!(errors(&d, SPOOFED), 10, "{}", d.ok("show errors"));

    // A pod that routes for others is given what it routes; then the check goes off.
    d.ok(&format!(
        "set interface allowed-sources {b1} 10.1.0.5/32 10.1.0.64/26"
    ));
    let s = sink(&lab, "b2");
    send_from(&lab, "b1", &all, 5);
    assert_eq!(wait_counts(s), counts(&[("10.1.0.5", 5), ("10.1.0.77", 5)]));
    assert_eq!(errors(&d, SPOOFED), 15);
    d.ok(&format!("set interface allowed-sources {b1} any"));
    assert_eq!(interface(&d, &b1).allowed_sources, None);
    let s = sink(&lab, "b2");
    send_from(&lab, "b1", &all, 5);
    assert_eq!(
        wait_counts(s),
        counts(&[("10.1.0.5", 5), ("10.1.0.77", 5), ("8.8.8.8", 5)])
    );
    assert_eq!(errors(&d, SPOOFED), 15);

    // `none`: nothing at all.
    d.ok(&format!("set interface allowed-sources {b1} none"));
    let s = sink(&lab, "b2");
    send_from(&lab, "b1", &all[..1], 5);
    assert_eq!(wait_counts(s), counts(&[]));
    assert_eq!(errors(&d, SPOOFED), 20);
    // Bad input is refused with its reason.
    let (ok, _, err) = d.ctl(&format!("set interface allowed-sources {b1} 10.1.0.5/33"));
    assert!(!ok && err.contains("10.1.0.5/33"), "{err}");
    let (ok, _, err) = d.ctl("set interface allowed-sources no-such-if any");
    assert!(!ok && err.contains("no-such-if"), "{err}");
}

/// The pod's kernel announces another pod's address (gratuitous ARP, as an address thief
/// would): not learned, counted, and traffic to that pod still reaches it.
#[test]
fn a_tap_pod_cannot_claim_another_address_with_arp() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "b1", "b2"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    let b1 = tap_pod(&d, &lab, "b1", "blue", "10.1.0.5");
    tap_pod(&d, &lab, "b2", "blue", "10.1.0.6");
    // Our side on b1's link holds the network's subnet, so that without the check the claim
    // would be learned (the subnet is on-link there).
    d.ok(&format!("set interface ip address {b1} 10.1.0.1/16"));
    // A raw ARP reply from b1's eth1: "10.1.0.6 is at b1's MAC", to our side's MAC.
    let ours = interface(&d, &b1).mac.to_string().replace(':', "");
    let code = format!(
        "import socket,fcntl,struct\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
         s.bind(('eth1',0))\nme=s.getsockname()[4]\nthem=bytes.fromhex('{ours}')\n\
         arp=struct.pack('!HHBBH',1,0x0800,6,4,2)+me+socket.inet_aton('10.1.0.6')+them+\
         socket.inet_aton('10.1.0.1')\nfor i in range(3): s.send(them+me+b'\\x08\\x06'+arp)\n\
         print('sent',flush=True)\n"
    );
    let mut c = python(&lab, "b1", &code);
    assert_eq!(wait_line(&mut c), "sent");
    let _ = c.wait();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while errors(&d, "arp sender address not allowed on this interface") < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            d.ok("show errors")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let neighbors = d.ok("show ip neighbors");
    assert!(
        !neighbors
            .lines()
            .any(|l| l.contains("10.1.0.6") && l.contains(&b1)),
        "{neighbors}"
    );
    // b2 still gets what is sent to it.
    let s = sink(&lab, "b2");
    send_from(&lab, "b1", &["10.1.0.5"], 3);
    assert_eq!(wait_counts(s), counts(&[("10.1.0.5", 3)]));
}

/// A memif pod in Ethernet mode and one in ip mode (veclane's own memif secondary) send
/// forged and honest UDP to a tap pod's kernel: only the honest arrives.
#[test]
fn memif_pods_send_only_as_themselves_in_both_modes() {
    if skip() {
        return;
    }
    let lab = Lab::new(&["node", "b2"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    tap_pod(&d, &lab, "b2", "blue", "10.1.0.6");
    let sock = d.path("pods.sock");
    let gw = "02:fe:00:00:10:01";
    for (id, mode, addr) in [(1, "ethernet", "10.1.0.11"), (2, "ip", "10.1.0.12")] {
        d.ok(&format!(
            "create interface memif id {id} socket {} master network blue name m{id} \
             mode {mode} hw-addr {gw} allowed-sources {addr}/32",
            sock.display()
        ));
    }
    let mut pods = Pods::connect_modes(&sock, &[(1, memif::Mode::Ethernet), (2, memif::Mode::Ip)]);
    let s = sink(&lab, "b2");
    let dgram = |src: [u8; 4]| {
        let f = udp(
            mac("02:00:00:00:00:11"),
            mac(gw),
            src,
            [10, 1, 0, 6],
            64,
            b"pod",
        );
        // Ports: the sink's 7000 (udp() writes testkit's ports, then the checksum is off).
        let mut f = f;
        f[36..38].copy_from_slice(&7000u16.to_be_bytes());
        f[40..42].copy_from_slice(&[0, 0]);
        f
    };
    let honest = |a: [u8; 4]| (0..4).map(|_| dgram(a)).collect::<Vec<_>>();
    let forged = |a: [u8; 4]| (0..3).map(|_| dgram(a)).collect::<Vec<_>>();
    pods.send(1, &honest([10, 1, 0, 11]));
    pods.send(1, &forged([10, 1, 0, 6]));
    pods.send(1, &forged([10, 1, 0, 12]));
    let bare = |v: Vec<Vec<u8>>| v.into_iter().map(|f| f[14..].to_vec()).collect::<Vec<_>>();
    pods.send(2, &bare(honest([10, 1, 0, 12])));
    pods.send(2, &bare(forged([10, 1, 0, 11])));
    pods.send(2, &bare(forged([1, 2, 3, 4])));
    assert_eq!(
        wait_counts(s),
        counts(&[("10.1.0.11", 4), ("10.1.0.12", 4)])
    );
    assert_eq!(errors(&d, SPOOFED), 12, "{}", d.ok("show errors"));
}

/// DPDK's testpmd, a memif client in Ethernet mode, floods UDP to a tap pod: forged as
/// another pod, none arrives and every frame is counted; as itself, it arrives.
#[test]
fn testpmd_floods_forged_udp_and_none_arrives() {
    if skip() {
        return;
    }
    let Some(bin) = bench::testpmd::find() else {
        assert!(std::env::var_os("CI").is_none(), "CI must install dpdk");
        eprintln!("SKIPPED: dpdk-testpmd not installed");
        return;
    };
    let lab = Lab::new(&["node", "b2"]);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    tap_pod(&d, &lab, "b2", "blue", "10.1.0.6");
    let sock = d.path("pmd.sock");
    let gw = "02:fe:00:00:20:01";
    d.ok(&format!(
        "create interface memif id 0 socket {} master network blue name pmd hw-addr {gw} \
         allowed-sources 10.1.0.20/32",
        sock.display()
    ));
    // testpmd runs in the node's namespace (where the socket's path is) for a moment.
    let flood = |src: &str| {
        let port = bench::dpdk::MemifPort {
            server: false,
            socket: sock.clone(),
            id: 0,
            rsize_log2: 10,
            bsize: 2048,
            secret: None,
        };
        let app = [
            "--forward-mode=txonly".to_string(),
            format!("--eth-peer=0,{gw}"),
            format!("--tx-ip={src},10.1.0.6"),
            "--tx-udp=7000,7000".to_string(),
        ];
        let tag = format!("spoof{}", std::process::id());
        let mut t = bench::testpmd::Testpmd::spawn(&bin, &tag, 1, 0, &[port], &app).unwrap();
        t.wait_link_up(0, Duration::from_secs(10)).unwrap();
        t.cmd("start").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        t.cmd("stop").unwrap();
        let sent = t.port_stats(0).unwrap().tx_packets;
        t.quit();
        sent
    };
    let s = sink(&lab, "b2");
    let sent = flood("10.1.0.21");
    assert!(sent > 1000, "testpmd sent {sent}");
    assert_eq!(wait_counts(s), counts(&[]));
    let dropped = errors(&d, SPOOFED);
    // Every frame the daemon took from the ring was dropped as forged; any rest were lost to
    // a full ring (counted by the interface), none went anywhere else.
    let rx = interface(&d, "pmd").rx_packets;
    assert!(
        dropped > 1000 && dropped == rx,
        "{dropped} of {rx} ({sent} sent)"
    );
    let s = sink(&lab, "b2");
    flood("10.1.0.20");
    let got = wait_counts(s);
    assert!(got.get("10.1.0.20").is_some_and(|&n| n > 100), "{got:?}");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(errors(&d, SPOOFED), dropped);
}
