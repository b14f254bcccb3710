use super::*;

#[test]
fn embedded_default_parses() {
    let c = Config::embedded_default();
    assert_eq!(c.interface.len(), 2);
    assert_eq!(c.daemon.mode, RxMode::Adaptive);
    assert_eq!(c.interface_names(), ["memif0/0", "memif0/1"]);
    assert_eq!(c.interface[1].addresses[0].to_string(), "10.10.2.1/24");
}

#[test]
fn the_embedded_default_is_placed_on_the_cpus_this_process_may_use() {
    // The placement lines are there to be rewritten.
    assert!(DEFAULT_CONFIG.contains(&format!("\n{DEFAULT_WORKERS}\n")));
    assert!(DEFAULT_CONFIG.contains(&format!("\n{DEFAULT_MAIN_CORE}\n")));
    let cpus = usable_cpus();
    let c = Config::embedded_default();
    assert_eq!(c.daemon.main_core, Some(cpus[0]));
    assert_eq!(c.daemon.workers, [*cpus.get(1).unwrap_or(&cpus[0])]);
    assert_eq!(cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
    assert_eq!(cpu_list(&[1]), "1");
    assert_eq!(cpu_list(&[0, 2, 4, 5]), "0,2,4-5");
}

#[test]
fn a_core_outside_the_affinity_mask_is_refused_by_name() {
    let outside = usable_cpus().last().unwrap() + 1;
    let text = format!("[daemon]\nworkers = [{outside}]\n");
    let e = Config::parse(&text, "t").unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "core {outside} is not one this process may run on"
        )),
        "{e}"
    );
}

#[test]
fn serializes_to_what_it_parses_from() {
    let c = Config::embedded_default();
    let text = c.to_toml();
    assert_eq!(Config::parse(&text, "round trip").unwrap(), c);
    let mut c2 = c.clone();
    c2.daemon.copy = CopyMode::Two;
    c2.interface[0].ring_size = Some(256);
    c2.interface[0].up = false;
    c2.route.push(RouteSpec {
        prefix: "10.20.0.0/16".parse().unwrap(),
        via: Via::Drop,
        interface: None,
        table: 3,
        network: None,
    });
    c2.network.push(NetworkSpec {
        name: "blue".into(),
        vni: 56,
        ranges: vec!["10.1.0.0/16".parse().unwrap()],
        uplink: Some("host-eth0".into()),
        df: false,
        owner: Some("veclane-agent".into()),
    });
    let mut up = AfPacketSpec::new("eth0");
    up.mtu = Some(9000);
    up.addresses.push("192.0.2.1/24".parse().unwrap());
    c2.af_packet.push(up);
    assert_eq!(Config::parse(&c2.to_toml(), "round trip").unwrap(), c2);
}

fn problems(text: &str) -> Vec<String> {
    Config::parse(text, "x.toml")
        .unwrap_err()
        .problems()
        .iter()
        .map(|p| {
            let (l, c) = p.at.expect("problems in text have a position");
            format!("{l}:{c}: {}", p.message)
        })
        .collect()
}

#[test]
fn errors_name_the_problem() {
    let p = problems("[daemon]\nworkerz = [1]\n");
    assert!(p[0].contains("workerz"), "{p:?}");
    let p = problems("[[interface]]\nsocket = \"a\"\nid = 0\nrole = \"master\"\nmac = \"nope\"\n");
    assert!(
        p[0].contains("\"nope\"") && p[0].contains("aa:bb:cc:dd:ee:ff"),
        "{p:?}"
    );
    let p = problems("[[interface]]\nsocket = \"a\"\nid = 0\nrole = \"boss\"\n");
    assert!(
        p[0].contains("boss") && p[0].contains(r#""master", "slave""#),
        "{p:?}"
    );
    let p = problems("[daemon]\nworkers = [999]\n");
    assert!(p[0].contains("core 999"), "{p:?}");
    let p = problems("[[route]]\nprefix = \"1.2.3.0/40\"\nvia = \"1.1.1.1\"\n");
    assert!(p[0].contains("1.2.3.0/40"), "{p:?}");
    let p = problems("[daemon]\ncopy = \"three\"\n");
    assert!(
        p[0].starts_with("2:8:") && p[0].contains(r#""single", "two""#),
        "{p:?}"
    );
}

#[test]
fn every_problem_at_once_with_its_position() {
    let text = "\
[daemon]
mode = \"sleepy\"

[[interface]]
socket = \"a\"
id = 0
role = \"master\"
mac = \"02:00:00:00:00:zz\"

[[interface]]
socket = \"a\"
id = 1
role = \"master\"

[[route]]
prefix = \"10.0.0.0/8\"
via = \"somewhere\"

[[neighbor]]
interface = \"memif0/1\"
ip = \"10.0.0.300\"
mac = \"02:00:00:00:00:01\"

[bogus]
";
    let p = problems(text);
    assert_eq!(p.len(), 5, "{p:#?}");
    assert!(
        p[0].starts_with("2:8: [daemon]") && p[0].contains("sleepy"),
        "{p:?}"
    );
    assert!(
        p[1].starts_with("8:7: [[interface]]") && p[1].contains("zz"),
        "{p:?}"
    );
    assert!(
        p[2].starts_with("17:7: [[route]]") && p[2].contains("somewhere"),
        "{p:?}"
    );
    assert!(
        p[3].starts_with("21:6: [[neighbor]]") && p[3].contains("10.0.0.300"),
        "{p:?}"
    );
    assert!(p[4].starts_with("24:2:") && p[4].contains("bogus"), "{p:?}");
}

#[test]
fn semantic_problems_all_reported_at_their_items() {
    let text = "\
[daemon]
workers = [0, 0]
buffers = 10
dsa-model-fault-every = 3
dsa-inline-below = 100000

[[interface]]
socket = \"a\"
id = 0
role = \"master\"
ring-size = 1000
rx-placement = [1]

[[interface]]
socket = \"a\"
id = 0
role = \"slave\"

[[neighbor]]
interface = \"memif9/9\"
ip = \"10.0.0.1\"
mac = \"02:00:00:00:00:01\"
";
    let p = problems(text);
    let joined = p.join("\n");
    for want in [
        "1:1: [daemon] workers lists core 0 twice",
        "1:1: [daemon] buffers = 10 is too few",
        "1:1: [daemon] dsa-model-fault-every is for the software model only",
        "1:1: [daemon] dsa-inline-below = 100000 is out of range: 0 to 65536 bytes",
        "7:1: [[interface]] memif0/0 (socket \"a\" id 0): ring-size 1000 must be a power of two",
        "rx-placement core 1 has no worker",
        "14:1: [[interface]] memif0/0 (socket \"a\" id 0): socket and id are used twice",
        "the name \"memif0/0\" is used twice",
        "used as both",
        "19:1: [[neighbor]] 10.0.0.1: no interface named \"memif9/9\"",
    ] {
        assert!(joined.contains(want), "missing {want:?} in\n{joined}");
    }
    let shown = Config::parse(text, "x.toml").unwrap_err().to_string();
    assert!(shown.starts_with("x.toml: "), "{shown}");
    assert!(shown.contains("\n  x.toml:19:1: [[neighbor]]"), "{shown}");
}

#[test]
fn syntax_errors_have_positions() {
    let p = problems("[daemon]\nworkers = [1\n");
    assert!(p[0].starts_with("2:") || p[0].starts_with("3:"), "{p:?}");
}

#[test]
fn networks_and_their_interfaces() {
    let ok = "\
[[network]]
name = \"blue\"
vni = 56
ranges = [\"10.1.0.0/16\"]

[[network]]
name = \"red\"
vni = 88
ranges = [\"10.1.0.0/16\", \"192.168.0.0/24\"]

[[interface]]
socket = \"a\"
id = 0
role = \"master\"
network = \"blue\"
addresses = [\"10.1.0.1/24\"]

[[interface]]
socket = \"a\"
id = 1
role = \"master\"
network = \"red\"
addresses = [\"10.1.0.1/24\"]
";
    let c = Config::parse(ok, "ok.toml").unwrap();
    assert_eq!(c.network.len(), 2);
    assert_eq!(c.interface[1].network.as_deref(), Some("red"));
    assert!(c.network[1].contains("192.168.0.9".parse().unwrap()));
    assert_eq!(Config::parse(&c.to_toml(), "round trip").unwrap(), c);

    let bad = "\
[[network]]
name = \"blue\"
vni = 56
ranges = [\"10.1.0.5/16\"]

[[network]]
name = \"red\"
vni = 56
ranges = []

[[network]]
name = \"big vni\"
vni = 16777216
ranges = [\"10.9.0.0/16\"]

[[interface]]
socket = \"a\"
id = 0
role = \"master\"
network = \"green\"

[[interface]]
socket = \"a\"
id = 1
role = \"master\"
network = \"blue\"
addresses = [\"10.2.0.1/24\"]

[[interface]]
socket = \"a\"
id = 2
role = \"master\"
network = \"blue\"
table = 3
";
    let joined = problems(bad).join("\n");
    for want in [
        "1:1: [[network]] blue: range 10.1.0.5/16 has host bits set (did you mean 10.1.0.0/16?)",
        "6:1: [[network]] red: ranges is empty",
        "6:1: [[network]] red: vni 56 is network blue's already",
        "11:1: [[network]] big vni: name \"big vni\" must be",
        "vni 16777216 is over 24 bits",
        "16:1: [[interface]] memif0/0 (socket \"a\" id 0): no network named \"green\" (have: blue, red, big vni)",
        "address 10.2.0.1/24 is outside network blue's ranges",
        "table 3 and network \"blue\" both set",
    ] {
        assert!(joined.contains(want), "missing {want:?} in\n{joined}");
    }
}

#[test]
fn uplinks_and_network_routes_are_checked() {
    let p = problems(
        "[[network]]\nname = \"blue\"\nvni = 56\nranges = [\"10.1.0.0/16\"]\nuplink = \"host-eth9\"\n\n\
         [[af-packet]]\nhost-if = \"eth0\"\nmtu = 40\n\n\
         [[af-packet]]\nhost-if = \"eth0\"\nname = \"up2\"\n\n\
         [[route]]\nprefix = \"10.1.2.0/24\"\nvia = \"192.0.2.2\"\nnetwork = \"red\"\ntable = 3\n",
    );
    let want = [
        "1:1: [[network]] blue: uplink: no interface named \"host-eth9\" (have: host-eth0, up2)",
        "7:1: [[af-packet]] host-eth0: mtu 40 is under the IPv4 minimum of 68",
        "11:1: [[af-packet]] up2: host-if eth0 is used twice",
        "15:1: [[route]] 10.1.2.0/24: no network named \"red\"",
        "15:1: [[route]] 10.1.2.0/24: table and network both set: a network's routes are in its VRF",
    ];
    assert_eq!(p, want);
    let ok = Config::parse(
        "[[network]]\nname = \"blue\"\nvni = 56\nranges = [\"10.1.0.0/16\"]\nuplink = \"host-eth0\"\n\
         [[af-packet]]\nhost-if = \"eth0\"\n\
         [[route]]\nprefix = \"10.1.2.0/24\"\nvia = \"192.0.2.2\"\nnetwork = \"blue\"\n",
        "ok.toml",
    )
    .unwrap();
    assert_eq!(ok.af_packet[0].name(), "host-eth0");
    assert_eq!(ok.af_packet[0].rx_ring, None, "by the MTU");
    assert!(ok.af_packet[0].udp_gso, "on by default");
    assert!(ok.network[0].df);
    let blocks = Config::parse(
        "[[af-packet]]\nhost-if = \"eth0\"\nrx-ring = \"blocks\"\n",
        "b.toml",
    )
    .unwrap();
    assert_eq!(blocks.af_packet[0].rx_ring, Some(crate::RxRing::Blocks));
    let plain = Config::parse(
        "[[af-packet]]\nhost-if = \"eth0\"\nudp-gso = false\n",
        "p.toml",
    );
    assert!(!plain.unwrap().af_packet[0].udp_gso);
    let e = Config::parse(
        "[[af-packet]]\nhost-if = \"eth0\"\nrx-ring = \"v3\"\n",
        "b.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("unknown variant `v3`, expected `frames` or `blocks`"),
        "{e}"
    );
    // An af-xdp uplink is held to the same rules, its host interface against af-packet's too.
    let p = problems(
        "[daemon]\nworkers = [1]\n\n\
         [[af-packet]]\nhost-if = \"eth0\"\n\n\
         [[af-xdp]]\nhost-if = \"eth0\"\nqueues = 0\nrx-placement = [0]\n",
    );
    let want = [
        "7:1: [[af-xdp]] xdp-eth0: queues must be at least 1",
        "7:1: [[af-xdp]] xdp-eth0: host-if eth0 is used twice",
        "7:1: [[af-xdp]] xdp-eth0: rx-placement core 0 has no worker (workers = [1])",
    ];
    assert_eq!(p, want);
}

/// The example Kubernetes deployment's configuration (docs/k8s/daemonset.yaml) is one the
/// daemon takes.
#[test]
fn the_kubernetes_example_configuration_parses() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/k8s/daemonset.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap();
    let mut lines = yaml
        .lines()
        .skip_while(|l| l.trim() != "veclane.toml: |")
        .skip(1);
    let first = lines.next().unwrap();
    let indent = first.len() - first.trim_start().len();
    let toml: String = std::iter::once(first)
        .chain(
            lines.take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() >= indent),
        )
        .map(|l| format!("{}\n", l.get(indent..).unwrap_or("")))
        .collect();
    let c = Config::parse(&toml, "docs/k8s/daemonset.yaml").unwrap();
    assert_eq!(c.daemon.workers, [1]);
    assert_eq!(c.af_packet[0].name(), "uplink");
}

/// `[[service]]`, `[[address-set]]` and `[[policy]]`: a round trip, and their problems at
/// their items (their own, a name used twice, a network the file lacks).
#[test]
fn services_sets_and_policies() {
    let text = r#"
[[network]]
name = "blue"
vni = 56
ranges = ["10.1.0.0/16"]

[[service]]
name = "web"
network = "blue"
vip = "10.96.0.10"
port = 80
protocol = "tcp"
backends = [{ addr = "10.1.0.11", port = 8080 }, { addr = "10.1.0.12", port = 8080, state = "not-ready" }]

[[address-set]]
name = "frontend"
members = ["10.1.0.5/32"]

[[policy]]
name = "default/db"
interfaces = ["tap1"]
egress = []
[[policy.ingress]]
peers = [{ set = "frontend" }, { cidr = { prefix = "10.0.0.0/8", except = ["10.9.0.0/16"] } }]
ports = [{ protocol = "tcp", port = { first = 5432, last = 5432 } }]
"#;
    let c = Config::parse(text, "t").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.service[0].backends[1].state,
        crate::BackendState::NotReady
    );
    assert_eq!(c.policy[0].egress, Some(vec![]));
    assert_eq!(c.policy[0].ingress.as_ref().unwrap()[0].peers.len(), 2);
    assert_eq!(Config::parse(&c.to_toml(), "round trip").unwrap(), c);
    let bad = format!(
        "{text}\n[[service]]\nname = \"web\"\nnetwork = \"red\"\nvip = \"10.96.0.11\"\nport = 0\n\
         protocol = \"udp\"\n"
    );
    let p = problems(&bad).join("\n");
    for want in [
        "name is used twice",
        "no [[network]] named \"red\"",
        "port 0",
    ] {
        assert!(p.contains(want), "{want}: {p}");
    }
    let p = problems(&format!("{text}\n[[policy]]\nname = \"x\"\nbogus = 1\n")).join("\n");
    assert!(p.contains("bogus"), "{p}");
}
