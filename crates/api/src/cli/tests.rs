use super::*;

fn p(s: &str) -> Result<Request, CliError> {
    parse(&s.split_whitespace().collect::<Vec<_>>())
}

/// `docs/ctl.md` is generated from [`COMMANDS`]; `VECLANE_BLESS=1` rewrites it.
#[test]
fn ctl_reference_is_the_committed_doc() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ctl.md");
    let want = reference_markdown();
    if std::env::var_os("VECLANE_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} differs from the command table: run `VECLANE_BLESS=1 cargo test -p api ctl_reference`",
        path.display()
    );
}

#[test]
fn verbs() {
    assert_eq!(
        p("show interface").unwrap(),
        Request::ShowInterface { name: None }
    );
    assert_eq!(
        p("show interface rx-placement").unwrap(),
        Request::ShowRxPlacement
    );
    assert_eq!(
        p("trace add memif-input 50").unwrap(),
        Request::TraceAdd {
            node: "memif-input".into(),
            count: 50
        }
    );
    assert_eq!(
        p("ip route add 10.1.0.0/16 via 10.0.0.2 memif0/1 table 3").unwrap(),
        Request::IpRoute {
            add: true,
            route: RouteSpec {
                prefix: "10.1.0.0/16".parse().unwrap(),
                via: Via::Address([10, 0, 0, 2].into()),
                interface: Some("memif0/1".into()),
                table: 3,
                network: None,
            }
        }
    );
    assert_eq!(
        p("set interface ip address del memif0/0 10.0.0.1/24").unwrap(),
        Request::SetIpAddress {
            interface: "memif0/0".into(),
            address: "10.0.0.1/24".parse().unwrap(),
            delete: true
        }
    );
    let Request::CreateMemif(m) =
        p("create interface memif id 3 socket /tmp/x.sock slave ring-size 512").unwrap()
    else {
        panic!()
    };
    assert_eq!((m.id, m.role, m.ring_size), (3, Role::Slave, Some(512)));
    assert_eq!(
        p("pcap trace rx tx on memif0/0 /tmp/a.pcap max 10").unwrap(),
        Request::PcapOn {
            points: vec![CapturePoint::Rx, CapturePoint::Tx],
            interface: "memif0/0".into(),
            file: "/tmp/a.pcap".into(),
            max_packets: Some(10)
        }
    );
    assert_eq!(p("pcap trace off").unwrap(), Request::PcapOff);
    assert_eq!(
        p("delete interface memif0/2").unwrap(),
        Request::DeleteInterface {
            name: "memif0/2".into()
        }
    );
    assert!(
        p("delete interface")
            .unwrap_err()
            .contains("interface name")
    );
    assert_eq!(
        p("show ip fib table 2").unwrap(),
        Request::ShowIpFib { table: Some(2) }
    );
}

#[test]
fn wrong_arguments_are_named() {
    let e = p("set interface state memif0/0 sideways").unwrap_err();
    assert!(
        e.contains("\"sideways\"") && e.contains("usage: set interface state"),
        "{e}"
    );
    let e = p("ip route add 10.0.0.0/33 via 1.2.3.4").unwrap_err();
    assert!(e.contains("10.0.0.0/33"), "{e}");
    let e = p("create interface memif socket /x master").unwrap_err();
    assert!(e.contains("missing `id N`"), "{e}");
    let e = p("trace add memif-input lots").unwrap_err();
    assert!(e.contains("\"lots\""), "{e}");
    let e = p("show interface memif0/0 extra").unwrap_err();
    assert!(e.contains("\"extra\""), "{e}");
    let e = p("frobnicate").unwrap_err();
    assert!(e.contains("unknown command"), "{e}");
    let e = p("set ip neighbor memif0/0 10.0.0.2 zz:00:00:00:00:00").unwrap_err();
    assert!(
        e.contains("zz:00") && e.contains("aa:bb:cc:dd:ee:ff"),
        "{e}"
    );
    let e = p("ip route add 10.0.0.0/8 via nowhere").unwrap_err();
    assert!(e.contains("\"nowhere\"") && e.contains("or drop"), "{e}");
    assert_eq!(
        p("ip route add 10.0.0.0/8 via drop").unwrap(),
        Request::IpRoute {
            add: true,
            route: RouteSpec {
                prefix: "10.0.0.0/8".parse().unwrap(),
                via: Via::Drop,
                interface: None,
                table: 0,
                network: None,
            }
        }
    );
}

#[test]
fn pod_interfaces() {
    let Request::CreateTap(t) = p(
        "create interface tap host-if-name eth1 netns cni-1234 queues 2 mtu 9000 \
         host-mac 02:00:00:00:00:01 hw-addr 02:fe:00:00:00:09 network blue pod abc-1",
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(
        (t.host_if_name.as_str(), t.netns.as_deref(), t.queues, t.mtu),
        ("eth1", Some("cni-1234"), Some(2), Some(9000))
    );
    assert_eq!(t.host_mac.unwrap().0, [2, 0, 0, 0, 0, 1]);
    assert_eq!(t.mac.unwrap().0, [2, 0xfe, 0, 0, 0, 9]);
    assert_eq!(
        (t.network.as_deref(), t.pod.as_deref()),
        (Some("blue"), Some("abc-1"))
    );
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    let e = p("create interface tap netns x").unwrap_err();
    assert!(e.message.contains("host-if-name"), "{}", e.message);
    let e = p("create interface tap host-if-name eth1 host-mac nope").unwrap_err();
    assert!(e.message.contains("host-mac"), "{}", e.message);

    let mut bad = TapSpec::new("a/b");
    bad.queues = Some(0);
    bad.pod = Some("../etc".into());
    bad.host_mac = Some(crate::parse_mac("01:00:5e:00:00:01").unwrap());
    let problems = bad.problems().join("; ");
    for want in ["host-if-name", "queues", "pod", "host-mac"] {
        assert!(problems.contains(want), "{want}: {problems}");
    }

    let Request::CreateMemif(m) =
        p("create interface memif id 0 socket @pod master netns /proc/1/ns/net pod c1").unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (m.netns.as_deref(), m.pod.as_deref(), m.use_dma),
        (Some("/proc/1/ns/net"), Some("c1"), false)
    );
    assert!(m.problems().is_empty());
    let Request::CreateMemif(m) =
        p("create interface memif id 0 socket @pod master use-dma").unwrap()
    else {
        panic!()
    };
    assert!(m.use_dma);
    let Request::CreateMemif(m) =
        p("create interface memif id 0 socket @pod slave netns x").unwrap()
    else {
        panic!()
    };
    assert!(
        m.problems().join(" ").contains("master"),
        "{:?}",
        m.problems()
    );
    assert_eq!(p("show copy-engine").unwrap(), Request::ShowCopyEngine);
    assert_eq!(p("show buffers").unwrap(), Request::ShowBuffers);
}

#[test]
fn allowed_sources() {
    let set = |s: &str| match p(s).unwrap() {
        Request::SetAllowedSources { interface, sources } => (interface, sources),
        r => panic!("{r:?}"),
    };
    let pfx = |s: &str| s.parse::<crate::Ipv4Prefix>().unwrap();
    assert_eq!(
        set("set interface allowed-sources tap0 any"),
        ("tap0".into(), None)
    );
    assert_eq!(
        set("set int allowed-sources tap0 none"),
        ("tap0".into(), Some(vec![]))
    );
    assert_eq!(
        set("set interface allowed-sources tap0 10.1.0.5/32 10.2.0.0/16,10.3.0.0/16"),
        (
            "tap0".into(),
            Some(vec![
                pfx("10.1.0.5/32"),
                pfx("10.2.0.0/16"),
                pfx("10.3.0.0/16")
            ])
        )
    );
    let e = p("set interface allowed-sources tap0").unwrap_err();
    assert!(e.to_string().contains("missing allowed source"), "{e}");
    let e = p("set interface allowed-sources tap0 10.1.0.5/40").unwrap_err();
    assert!(e.to_string().contains("allowed source"), "{e}");
    // At creation, before the options that follow.
    let Request::CreateTap(t) =
        p("create interface tap host-if-name eth1 allowed-sources 10.1.0.5/32 pod c1").unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (t.allowed_sources, t.pod.as_deref()),
        (Some(vec![pfx("10.1.0.5/32")]), Some("c1"))
    );
    let Request::CreateMemif(m) =
        p("create interface memif id 1 socket s master allowed-sources 10.9.0.0/24,10.1.0.5/32")
            .unwrap()
    else {
        panic!()
    };
    assert_eq!(m.allowed_sources.map(|v| v.len()), Some(2));
}

/// Both uplink kinds take the same words, AF_XDP its `mode` besides.
#[test]
fn uplink_interfaces() {
    let Request::CreateAfPacket(a) =
        p("create interface af-packet host-if eth0 queues 2 name up0 rx-ring blocks udp-gso off hw-addr 02:00:00:00:00:07")
            .unwrap()
    else {
        panic!()
    };
    let mut want = crate::AfPacketSpec::new("eth0");
    want.rx_ring = Some(crate::RxRing::Blocks);
    want.udp_gso = false;
    want.queues = Some(2);
    want.name = Some("up0".into());
    want.mac = Some(crate::parse_mac("02:00:00:00:00:07").unwrap());
    assert_eq!(a, want);
    let Request::CreateAfXdp(x) =
        p("create interface af-xdp mode zero-copy host-if eth1 queues 4 name x1").unwrap()
    else {
        panic!()
    };
    let mut want = crate::AfXdpSpec::new("eth1");
    want.queues = Some(4);
    want.name = Some("x1".into());
    want.mode = crate::XdpMode::ZeroCopy;
    assert_eq!(x, want);
    for (line, want) in [
        (
            "create interface af-packet queues 2",
            "missing `host-if NAME`",
        ),
        ("create interface af-xdp queues 2", "missing `host-if NAME`"),
        (
            "create interface af-packet host-if eth0 mode copy",
            "unknown argument \"mode\"",
        ),
        (
            "create interface af-packet host-if eth0 rx-ring v3",
            "rx-ring \"v3\": expected frames or blocks",
        ),
        (
            "create interface af-packet host-if eth0 udp-gso yes",
            "udp-gso \"yes\": expected on or off",
        ),
        (
            "create interface af-xdp host-if eth0 table 3",
            "unknown argument \"table\"",
        ),
        (
            "create interface af-xdp host-if eth0 mode fast",
            "mode \"fast\": expected auto",
        ),
        (
            "create interface af-packet host-if eth0 hw-addr nope",
            "hw-addr: ",
        ),
        (
            "create interface af-xdp host-if eth0 queues x",
            "queues \"x\" is not a valid number",
        ),
    ] {
        let e = p(line).unwrap_err();
        assert!(e.message.contains(want), "{line}: {}", e.message);
    }
}

#[test]
fn policies_and_address_sets() {
    let Request::PolicyAdd(policy) = p(
        "policy add default/db on tap1,tap2 isolate egress ingress from set:web,10.0.0.0/8!10.9.0.0/16 \
         port tcp/5432,tcp/8000-8100,icmp ingress",
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(policy.interfaces, ["tap1", "tap2"]);
    assert_eq!(policy.egress, Some(vec![]), "isolated, nothing allowed");
    let ingress = policy.ingress.unwrap();
    assert_eq!(ingress.len(), 2);
    assert_eq!(
        ingress[1],
        ::policy::Rule::default(),
        "a bare rule allows all"
    );
    let json = serde_json::to_string(&ingress[0]).unwrap();
    for want in [
        r#"{"set":"web"}"#,
        r#""except":["10.9.0.0/16"]"#,
        r#"{"protocol":"tcp","port":{"first":8000,"last":8100}}"#,
        r#"{"protocol":"icmp"}"#,
    ] {
        assert!(json.contains(want), "{want} in {json}");
    }
    for (line, want) in [
        ("policy add x from 10.0.0.0/8", "before `ingress`"),
        ("policy add x ingress port tcp/http", "no port"),
        ("policy add x ingress port gre", "protocol \"gre\""),
        (
            "policy add x isolate sideways",
            "expected ingress or egress",
        ),
        ("address-set add web", "missing members"),
    ] {
        let e = p(line).unwrap_err();
        assert!(e.message.contains(want), "{line}: {}", e.message);
    }
    let Request::AddressSetAdd(s) =
        p("address-set add web 10.1.0.5/32,10.1.0.6/32 10.2.0.0/24").unwrap()
    else {
        panic!()
    };
    assert_eq!(s.members.len(), 3);
    let Request::AddressSetAdd(s) = p("address-set add web none").unwrap() else {
        panic!()
    };
    assert!(s.members.is_empty());
}

/// A service's protocol: TCP unless said, UDP or SCTP by name.
#[test]
fn service_protocols() {
    for (word, want) in [
        ("", crate::types::Protocol::Tcp),
        (" udp", crate::types::Protocol::Udp),
        (" sctp", crate::types::Protocol::Sctp),
    ] {
        let line =
            format!("service add sig vip 10.96.0.10 port 36412{word} backend 10.1.0.5:36412");
        match p(&line) {
            Ok(Request::ServiceAdd(s)) => assert_eq!(
                (s.protocol, s.protocol.number()),
                (want, want.number()),
                "{line}"
            ),
            other => panic!("{line}: {other:?}"),
        }
    }
    assert_eq!(crate::types::Protocol::Sctp.number(), 132);
}
