//! veclane against a real VPP (25.10, `scripts/build-vpp.sh`'s build, or `vpp` on PATH) over
//! memif, in both roles: VPP pings veclane and the pod behind it, with frames of one buffer
//! and with jumbo frames that both sides carry as memif chains, and a pod behind veclane
//! pings VPP. Skipped, saying so, where VPP is not built (it takes half an hour, once per
//! machine).

mod daemon_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bench::vpp::{Vpp, VppConfig, VppTopology, memif_name};
use daemon_common::*;

const VECLANE_MAC: &str = "02:00:00:00:00:a0";
const POD_GW_MAC: &str = "02:00:00:00:00:a1";
const POD_MAC: [u8; 6] = [2, 0, 0, 0, 0xb1, 0];
const VPP_MAC: [u8; 6] = [2, 0, 0, 0, 0xc0, 1];

fn vpp_bin() -> Option<PathBuf> {
    let v = bench::vpp::find(None);
    if v.is_none() {
        println!("skipped: VPP is not built here (scripts/build-vpp.sh, once per machine)");
    }
    v
}

/// veclane: `to-vpp` (memif id 0, 10.10.1.1/24) towards VPP at 10.10.1.2, in `role`, and
/// `pod` (id 1, master, 10.10.2.1/24) with this test's pod at 10.10.2.2 behind it. As
/// slave, `to-vpp` connects to `vpp_sock`.
fn veclane_config(role: &str, vpp_sock: Option<&Path>) -> String {
    let sock = vpp_sock.map_or("memif.sock".into(), |p| p.display().to_string());
    format!(
        r#"
[daemon]
mode = "adaptive"
buffers = 8192

[[interface]]
name = "to-vpp"
socket = "{sock}"
id = 0
role = "{role}"
mac = "{VECLANE_MAC}"
addresses = ["10.10.1.1/24"]

[[interface]]
name = "pod"
socket = "pods.sock"
id = 1
role = "master"
mac = "{POD_GW_MAC}"
addresses = ["10.10.2.1/24"]

[[neighbor]]
interface = "pod"
ip = "10.10.2.2"
mac = "02:00:00:00:b1:00"
"#
    )
}

/// VPP with one memif (id 0) at 10.10.1.2/24, the pod's subnet routed via veclane; a slave
/// of `slave_of`, or a master on its own socket. Its main thread polls (no worker), on the
/// CPU veclane's control thread uses, so that veclane's worker has the other.
fn start_vpp(bin: &Path, slave_of: Option<&Path>) -> Vpp {
    let m = memif_name(0);
    let cfg = VppConfig {
        workers: vec![],
        topology: VppTopology {
            memifs: vec![(0, VPP_MAC)],
            slave_of: slave_of.map(Path::to_path_buf),
            commands: vec![
                format!("set interface ip address {m} 10.10.1.2/24"),
                format!("ip route add 10.10.2.0/24 via 10.10.1.1 {m}"),
            ],
            plugins: vec!["ping"],
            rx_from: vec![m.clone()],
            tx_to: vec![m],
        },
        ..VppConfig::new(0, 1)
    };
    bench::vpp::spawn(bin, None, &cfg).unwrap()
}

/// `Statistics: N sent, M received, …` of VPP's `ping`: (sent, received).
fn ping_stats(out: &str) -> (u32, u32) {
    let line = out
        .lines()
        .find(|l| l.starts_with("Statistics:"))
        .unwrap_or_else(|| panic!("no statistics in VPP's ping output:\n{out}"));
    let n: Vec<u32> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (n[0], n[1])
}

/// Answers echo requests on the pod while `f` runs; returns what the pod got.
fn serving<T: Send>(pods: &mut Pods, f: impl FnOnce() -> T + Send) -> (T, Vec<Vec<u8>>) {
    std::thread::scope(|s| {
        let job = s.spawn(f);
        let mut got = Vec::new();
        while !job.is_finished() {
            for fr in pods.recv(1, 64, Duration::from_millis(5)) {
                if let Some(r) = echo_reply(&fr, POD_MAC) {
                    pods.send(1, &[r]);
                }
                got.push(fr);
            }
        }
        (job.join().unwrap(), got)
    })
}

/// VPP pings `dst` `n` times with `size` bytes of data; (sent, received).
fn vpp_ping(vpp: &Vpp, dst: &str, n: u32, size: u32) -> (u32, u32) {
    let out = vpp
        .cli(&format!("ping {dst} size {size} repeat {n} interval 0.05"))
        .unwrap();
    ping_stats(&out)
}

/// Waits until veclane reports `to-vpp` connected.
fn wait_vpp_connected(d: &Daemon) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !d.ok("show interface").lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.first() == Some(&"to-vpp") && w.get(3) == Some(&"up")
    }) {
        assert!(
            Instant::now() < deadline,
            "VPP did not connect:\n{}",
            d.ok("show interface")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check(d: &Daemon, vpp: &Vpp, pods: &mut Pods) {
    // VPP → veclane: one-buffer frames, then 8000 bytes of data (an 8042-byte frame: a memif
    // chain of four 2048-byte buffers each way; veclane answers with a chain). The first
    // ping may be lost while VPP resolves veclane's address.
    let (sent, got) = vpp_ping(vpp, "10.10.1.1", 5, 56);
    assert!(got >= 4, "{got} of {sent}\n{}", d.ok("show errors"));
    let (sent, got) = vpp_ping(vpp, "10.10.1.1", 5, 8000);
    assert_eq!(got, sent, "jumbo pings\n{}", d.ok("show errors"));
    // VPP → the pod, forwarded by veclane both ways.
    let ((sent, got), seen) = serving(pods, || vpp_ping(vpp, "10.10.2.2", 5, 56));
    assert_eq!(got, sent, "{}", d.ok("show errors"));
    assert!(seen.len() >= 5);
    let ((sent, got), _) = serving(pods, || vpp_ping(vpp, "10.10.2.2", 3, 8000));
    assert_eq!(got, sent, "jumbo through veclane\n{}", d.ok("show errors"));
    // The pod → VPP through veclane: veclane resolves VPP with ARP (its first packet is
    // the request), VPP answers every echo.
    let gw = mac(POD_GW_MAC);
    let mut replies = 0;
    for seq in 0..20u16 {
        pods.send(1, &[ping(POD_MAC, gw, [10, 10, 2, 2], [10, 10, 1, 2], seq)]);
        replies += pods
            .recv(1, 1, Duration::from_millis(200))
            .iter()
            .filter(|f| f.len() > 34 && f[23] == 1 && f[34] == 0)
            .count();
    }
    assert!(replies >= 18, "{replies} of 20\n{}", d.ok("show errors"));
}

#[test]
fn vpp_slave_talks_to_a_veclane_master() {
    let Some(bin) = vpp_bin() else { return };
    let d = Daemon::start(&veclane_config("master", None));
    let mut pods = Pods::connect(&d.path("pods.sock"), &[1]);
    let vpp = start_vpp(&bin, Some(&d.path("memif.sock")));
    wait_vpp_connected(&d);
    check(&d, &vpp, &mut pods);
}

#[test]
fn veclane_slave_talks_to_a_vpp_master() {
    let Some(bin) = vpp_bin() else { return };
    let vpp = start_vpp(&bin, None);
    let d = Daemon::start(&veclane_config("slave", Some(&vpp.memif_socket())));
    let mut pods = Pods::connect(&d.path("pods.sock"), &[1]);
    wait_vpp_connected(&d);
    check(&d, &vpp, &mut pods);
}

/// A memif in ip mode (bare IPv4, no Ethernet, no ARP) between a VPP slave (`mode ip`) and a
/// veclane master: VPP pings veclane's address on it (one buffer and chained), and the pod
/// behind veclane's Ethernet memif, forwarded between the two modes both ways.
#[test]
fn vpp_in_ip_mode_talks_to_a_veclane_master_in_ip_mode() {
    let Some(bin) = vpp_bin() else { return };
    let d = Daemon::start(&format!(
        r#"
[daemon]
mode = "adaptive"
buffers = 8192

[[interface]]
name = "to-vpp"
socket = "memif.sock"
id = 0
role = "master"
mode = "ip"
addresses = ["10.10.5.1/24"]

[[interface]]
name = "pod"
socket = "pods.sock"
id = 1
role = "master"
mac = "{POD_GW_MAC}"
addresses = ["10.10.2.1/24"]

[[neighbor]]
interface = "pod"
ip = "10.10.2.2"
mac = "02:00:00:00:b1:00"
"#
    ));
    assert!(d.ok("show interface to-vpp").contains("mode ip"));
    let mut pods = Pods::connect(&d.path("pods.sock"), &[1]);
    let m = memif_name(0);
    let cfg = VppConfig {
        workers: vec![],
        topology: VppTopology {
            memifs: vec![],
            slave_of: Some(d.path("memif.sock")),
            commands: vec![
                "create interface memif id 0 socket-id 1 slave mode ip".into(),
                format!("set interface ip address {m} 10.10.5.2/24"),
                format!("ip route add 10.10.2.0/24 via 10.10.5.1 {m}"),
                format!("set interface state {m} up"),
            ],
            plugins: vec!["ping"],
            rx_from: vec![m.clone()],
            tx_to: vec![m],
        },
        ..VppConfig::new(0, 1)
    };
    let vpp = bench::vpp::spawn(&bin, None, &cfg).unwrap();
    wait_vpp_connected(&d);
    // The first reply may be lost: veclane's next hop on a link without ARP is taken as
    // resolved by the first packet to it.
    let (sent, got) = vpp_ping(&vpp, "10.10.5.1", 5, 56);
    assert!(got >= 4, "{got} of {sent}\n{}", d.ok("show errors"));
    let (sent, got) = vpp_ping(&vpp, "10.10.5.1", 5, 8000);
    assert_eq!(got, sent, "jumbo pings in ip mode\n{}", d.ok("show errors"));
    let ((sent, got), seen) = serving(&mut pods, || vpp_ping(&vpp, "10.10.2.2", 5, 56));
    assert_eq!(got, sent, "through veclane\n{}", d.ok("show errors"));
    // The pod saw Ethernet frames from veclane's MAC.
    assert!(seen.iter().all(|f| f[6..12] == mac(POD_GW_MAC)));
    let errors = d.ok("show errors");
    assert!(!errors.contains("not IPv4"), "{errors}");
}
