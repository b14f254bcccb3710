//! veclane against the Linux kernel's own VXLAN, over an AF_PACKET uplink, in network
//! namespaces this test makes (root only; without it the test says why and passes).
//!
//! A Linux bridge joins three namespaces: veclane's (uplink `va`, 192.0.2.1) and two Linux
//! VTEPs, one per network, because this kernel has no VRF device (CONFIG_NET_VRF is off) to
//! put both networks in one: blue's at 192.0.2.3 (`vxlan` id 56) and red's at 192.0.2.4 (id
//! 88), each with the same inner address 10.1.3.1/16. In veclane, blue and red both use
//! 10.1.0.0/16 with a pod (this test, over memif) at 10.1.1.2 behind 10.1.1.1. Pings go both
//! ways, UDP both ways, every packet lands in its own network, and tshark on the bridge sees
//! the right VNI around the right inner addresses.

mod daemon_common;
mod kernel_common;

use std::time::{Duration, Instant};

use daemon_common::*;
use kernel_common::*;

const POD_MAC: &str = "02:00:00:00:99:01";

fn config() -> String {
    let mut c = String::from(
        "[daemon]\nmode = \"interrupt\"\nbuffers = 4096\n\n\
         [[af-packet]]\nhost-if = \"v0\"\naddresses = [\"192.0.2.1/24\"]\nmtu = 1500\n\n",
    );
    for (id, net, vni, vtep) in [(0, "blue", 56, 3), (1, "red", 88, 4)] {
        c.push_str(&format!(
            "[[network]]\nname = \"{net}\"\nvni = {vni}\nranges = [\"10.1.0.0/16\"]\nuplink = \"host-v0\"\n\n\
             [[interface]]\nname = \"{net}-pod\"\nsocket = \"pods.sock\"\nid = {id}\nrole = \"master\"\n\
             mac = \"02:00:00:00:01:0{id}\"\nnetwork = \"{net}\"\naddresses = [\"10.1.1.1/24\"]\n\n\
             [[neighbor]]\ninterface = \"{net}-pod\"\nip = \"10.1.1.2\"\nmac = \"{POD_MAC}\"\n\n\
             [[route]]\nprefix = \"10.1.3.0/24\"\nvia = \"192.0.2.{vtep}\"\nnetwork = \"{net}\"\n\n"
        ));
    }
    c
}

/// Serves the pods (answering echo requests) while `f` runs; returns what each pod got.
fn serving<T: Send>(pods: &mut Pods, f: impl FnOnce() -> T + Send) -> (T, [Vec<Vec<u8>>; 2]) {
    std::thread::scope(|s| {
        let job = s.spawn(f);
        let mut got: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
        while !job.is_finished() {
            for id in [0u32, 1] {
                for fr in pods.recv(id, 64, Duration::from_millis(5)) {
                    if let Some(r) = echo_reply(&fr, mac(POD_MAC)) {
                        pods.send(id, &[r]);
                    }
                    got[id as usize].push(fr);
                }
            }
        }
        (job.join().unwrap(), got)
    })
}

#[test]
fn a_linux_vtep_per_network_talks_to_veclane_pods_over_af_packet() {
    if let Some(why) = unable() {
        println!("skipped: {why}");
        return;
    }
    let lab = Lab::new(&["a", "l3", "l4"]);
    lab.linux_vtep("l3", 56, "192.0.2.3", "192.0.2.1", "10.1.3.1/16");
    lab.linux_vtep("l4", 88, "192.0.2.4", "192.0.2.1", "10.1.3.1/16");
    let d = Daemon::start_in(Some(&lab.ns("a")), &config());
    let mut pods = Pods::connect(&d.path("pods.sock"), &[0, 1]);
    d.wait_connected(3);
    // The underlay first: each Linux VTEP reaches veclane's uplink address (the first reply
    // may be lost while veclane resolves the VTEP, as in VPP: a glean drops its packet).
    for ns in ["l3", "l4"] {
        let n = ping_from(&lab, ns, "192.0.2.1", 3);
        assert!(n >= 2, "{ns}: {n} of 3\n{}", d.ok("show errors"));
    }
    // A ping larger than the links: Linux sends the 12028-byte request in two fragments (its
    // link's MTU is 9000), veclane reassembles it, answers, and fragments the answer for its
    // uplink's MTU of 1500 (as a host does), which Linux reassembles.
    let n = ping_size_from(&lab, "l3", "192.0.2.1", 3, 12_000);
    let errors = d.ok("show errors");
    assert_eq!(n, 3, "a 12028-byte ping: {n} of 3\n{errors}");
    for want in ["datagram reassembled", "packet fragmented"] {
        assert!(errors.contains(want), "{want}:\n{errors}");
    }

    // First contact from each network's Linux VTEP: its first echo reply may be lost to a
    // glean, as in VPP (Linux sends the request the moment veclane's ARP reply lands, and the
    // worker can route the answer before the control thread has installed what that ARP
    // request taught it). One ping each; after it every ping counts.
    for ns in ["l3", "l4"] {
        let _ = ping_from(&lab, ns, "10.1.1.1", 1);
    }
    // Blue's Linux VTEP pings veclane in blue (10.1.1.1) and blue's pod (10.1.1.2): ARP
    // inside the tunnel is answered by veclane's proxy; the pod answers its own pings.
    let (n, got) = serving(&mut pods, || {
        (
            ping_from(&lab, "l3", "10.1.1.1", 3),
            ping_from(&lab, "l3", "10.1.1.2", 3),
        )
    });
    assert_eq!(
        n,
        (3, 3),
        "{}\n{}",
        d.ok("show errors"),
        d.ok("show vxlan tunnel")
    );
    assert_eq!(got[0].len(), 3, "blue's pod got blue's pings");
    assert!(got[1].is_empty(), "red's pod got none: {:?}", got[1]);
    // Red's, with the same addresses, reaches red's pod only.
    let (n, got) = serving(&mut pods, || ping_from(&lab, "l4", "10.1.1.2", 4));
    assert_eq!(n, 4);
    assert_eq!((got[0].len(), got[1].len()), (0, 4));

    // The other way: each pod pings 10.1.3.1 and its own network's Linux answers.
    for (id, seqs) in [(0u32, 0..5u16), (1, 100..105)] {
        let src_mac = mac(POD_MAC);
        let gw = mac(&format!("02:00:00:00:01:0{id}"));
        let reqs: Vec<Vec<u8>> = seqs
            .clone()
            .map(|s| ping(src_mac, gw, [10, 1, 1, 2], [10, 1, 3, 1], s))
            .collect();
        let mut replies = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        // The first may go to ARP inside the tunnel; send until five replies came.
        while replies.len() < 5 && Instant::now() < deadline {
            pods.send(id, &reqs[replies.len()..replies.len() + 1]);
            replies.extend(
                pods.recv(id, 1, Duration::from_millis(300))
                    .into_iter()
                    .filter(|f| f.len() > 34 && f[23] == 1 && f[34] == 0),
            );
        }
        assert_eq!(replies.len(), 5, "pod {id}: {}", d.ok("show errors"));
        assert!(pods.recv(1 - id, 1, Duration::from_millis(100)).is_empty());
    }

    // UDP both ways, captured on the bridge. Pod to Linux, counted by a socket in each
    // network's namespace.
    let cap = Capture::start(&lab, d.path("bridge.pcap"));
    for (id, ns) in [(0u32, "l3"), (1, "l4")] {
        let sink = udp_sink(&lab, ns, 7001, 20);
        let gw = mac(&format!("02:00:00:00:01:0{id}"));
        let frames: Vec<Vec<u8>> = (0..20)
            .map(|i| {
                let macs = testkit::Macs {
                    src: mac(POD_MAC),
                    dst: gw,
                };
                let payload = format!("pod{id} #{i}");
                let (src, dst) = ([10, 1, 1, 2], [10, 1, 3, 1]);
                testkit::udp4_frame_ports(macs, src, dst, 64, (7000, 7001), payload.as_bytes())
            })
            .collect();
        pods.send(id, &frames);
        let out = sink.wait_with_output().unwrap();
        let got: usize = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap();
        assert_eq!(got, 20, "{ns}: {}", d.ok("show errors"));
    }
    // Linux to pod.
    for (id, ns) in [(0u32, "l3"), (1, "l4")] {
        lab.exec(
            ns,
            &[
                "python3",
                "-c",
                "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
                 [s.sendto(b'linux %d' % i, ('10.1.1.2', 7002)) for i in range(15)]",
            ],
        );
        let got = pods.recv(id, 15, Duration::from_secs(5));
        assert_eq!(got.len(), 15, "{}", d.ok("show errors"));
        assert!(got.iter().all(|f| f[42..].starts_with(b"linux")));
        assert!(pods.recv(1 - id, 1, Duration::from_millis(100)).is_empty());
    }

    // tshark on the bridge: each VNI only between veclane and its network's VTEP, around the
    // network's inner addresses, from a source port in the dynamic range when veclane sent.
    let seen = cap.stop(None);
    let (mut blue, mut red) = (0, 0);
    for l in &seen {
        let f: Vec<&str> = l.split('\t').collect();
        let (vni, srcs, dsts, sport) = (f[0], f[1], f[2], f[3]);
        let outer: Vec<&str> = srcs.split(',').chain(dsts.split(',')).collect();
        let vtep = match vni {
            "56" => {
                blue += 1;
                "192.0.2.3"
            }
            "88" => {
                red += 1;
                "192.0.2.4"
            }
            _ => panic!("unexpected vni: {l}"),
        };
        assert!(
            srcs.starts_with("192.0.2.") && dsts.starts_with("192.0.2.") && outer.contains(&vtep),
            "{l}"
        );
        assert!(
            outer.iter().filter(|a| a.starts_with("10.1.")).count() == 2,
            "inner IPv4 in 10.1/16: {l}"
        );
        if srcs.starts_with("192.0.2.1,") {
            let outer_sport: u16 = sport.split(',').next().unwrap().parse().unwrap();
            assert!(outer_sport >= 49152, "{l}");
        }
    }
    assert!(blue >= 35 && red >= 35, "blue {blue}, red {red}: {seen:?}");

    // A VNI spoofer: red's VTEP (192.0.2.4) sends with blue's VNI. veclane has no blue tunnel
    // from there, so nothing reaches blue (or red) and the attempt is counted.
    lab.exec(
        "l4",
        &[
            "ip",
            "link",
            "add",
            "vxs",
            "type",
            "vxlan",
            "id",
            "56",
            "dstport",
            "4789",
            "local",
            "192.0.2.4",
            "remote",
            "192.0.2.1",
            "dev",
            "v0",
        ],
    );
    lab.exec("l4", &["ip", "addr", "add", "10.2.3.1/16", "dev", "vxs"]);
    lab.exec("l4", &["ip", "link", "set", "vxs", "up"]);
    lab.exec("l4", &["ip", "route", "add", "10.1.1.2/32", "dev", "vxs"]);
    lab.exec(
        "l4",
        &[
            "ip",
            "neigh",
            "add",
            "10.1.1.2",
            "lladdr",
            "02:00:00:00:01:00",
            "dev",
            "vxs",
        ],
    );
    let (n, got) = serving(&mut pods, || ping_from(&lab, "l4", "10.1.1.2", 3));
    assert_eq!(n, 0);
    assert!(got[0].is_empty() && got[1].is_empty(), "{got:?}");
    let e = d.ok("show errors");
    assert!(
        e.lines().any(
            |l| l.contains("vxlan from a vtep with no tunnel for its vni")
                && l.split_whitespace()
                    .next()
                    .and_then(|c| c.parse::<u64>().ok())
                    >= Some(3)
        ),
        "{e}"
    );

    // Counters: each tunnel carried its own network's packets.
    let t = d.ok("show vxlan tunnel");
    for l in t.lines().skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (rx, tx): (u64, u64) = (f[8].parse().unwrap(), f[9].parse().unwrap());
        assert!(rx >= 20 && tx >= 20, "{t}");
    }
    let i = d.ok("show interface host-v0");
    assert!(i.contains("af-packet host-if v0"), "{i}");

    // MTU: the uplink's 1500 leaves 1450 inside the tunnel. A 1500-byte inner packet with DF
    // gets ICMP fragmentation needed (MTU 1450) back at the pod; once the uplink is at 9000,
    // it reaches the Linux VTEP.
    let jumbo = || {
        let macs = testkit::Macs {
            src: mac(POD_MAC),
            dst: mac("02:00:00:00:01:00"),
        };
        let payload = b"pod".repeat(1472 / 3);
        let (src, dst) = ([10, 1, 1, 2], [10, 1, 3, 1]);
        let mut v = testkit::udp4_frame_ports(macs, src, dst, 64, (7000, 7001), &payload);
        v.resize(14 + 1500, b'.');
        v[20] |= 0x40;
        let len = (v.len() - 14) as u16;
        v[16..18].copy_from_slice(&len.to_be_bytes());
        v[38..40].copy_from_slice(&(len - 20).to_be_bytes());
        v[40..42].fill(0);
        let mut h = etherparse::Ipv4Header::from_slice(&v[14..]).unwrap().0;
        h.header_checksum = h.calc_header_checksum();
        v[14..34].copy_from_slice(&h.to_bytes());
        v
    };
    pods.send(0, &[jumbo()]);
    let back = pods.recv(0, 1, Duration::from_secs(5));
    assert_eq!(back.len(), 1, "{}", d.ok("show errors"));
    let p = etherparse::SlicedPacket::from_ethernet(&back[0]).unwrap();
    let Some(etherparse::TransportSlice::Icmpv4(m)) = &p.transport else {
        panic!("no icmp: {:?}", back[0])
    };
    assert_eq!(
        m.icmp_type(),
        etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded { next_hop_mtu: 1450 }
        )
    );
    d.ok("set interface mtu host-v0 9000");
    assert!(d.ok("show vxlan tunnel").contains("8950"));
    let sink = udp_sink(&lab, "l3", 7001, 1);
    pods.send(0, &[jumbo()]);
    let out = sink.wait_with_output().unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        got.lines().last(),
        Some("1"),
        "{got}\n{}",
        d.ok("show errors")
    );
}
