//! The neighbour table against a hostile underlay host: a Linux namespace behind veclane's
//! AF_PACKET uplink sends ARP requests for the node's address from 3,000 addresses of the
//! uplink's subnet (as a spoofer, or a compromised neighbour, would to fill the table).
//! veclane learns up to its per-interface cap and refuses the rest (counted), stays
//! responsive, and a host it learned before the flood still reaches it. A learned host
//! that falls silent is asked again before it is forgotten, and forgotten only if it does not
//! answer.

mod daemon_common;
mod kernel_common;
mod pod_common;

use daemon_common::Daemon;
use kernel_common::{Lab, ping_from};
use pod_common::{python, skip, wait_line};

const CONFIG: &str = "[daemon]\nmode = \"interrupt\"\nbuffers = 4096\n\n\
     [daemon.neighbours]\nper-interface = 64\nstale-seconds = 600\n\n\
     [[af-packet]]\nhost-if = \"v0\"\naddresses = [\"10.50.0.1/16\"]\nmtu = 1500\n\n";

/// The summary line's numbers: (learned, refused).
fn learned(d: &Daemon) -> (u64, u64) {
    (d.neighbour_summary(""), d.neighbour_summary("refused "))
}

/// Host 10.50.0.9 in `ext` pings the node until it answers (it is learned then). Its first
/// ping may be lost: the host sends it the moment our ARP reply arrives, and the worker can
/// route the echo's reply before the control thread has installed what that ARP request
/// taught it (a glean then).
fn host_reaches(lab: &Lab, d: &Daemon) {
    lab.exec("ext", &["ip", "addr", "add", "10.50.0.9/16", "dev", "v0"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ping_from(lab, "ext", "10.50.0.1", 1) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{}\n{}",
            d.ok("show errors"),
            d.ok("show ip neighbors")
        );
    }
}

#[test]
fn an_arp_flood_from_the_underlay_fills_only_its_share() {
    if skip() {
        return;
    }
    let lab = Lab::with_mtu(&["node", "ext", "bad"], 1500);
    let d = Daemon::start_in(Some(&lab.ns("node")), CONFIG);
    // The host is learned before the flood.
    host_reaches(&lab, &d);
    assert_eq!(learned(&d).0, 1, "{}", d.ok("show ip neighbors"));
    // 3,000 requests for the node's address, each from another sender (10.50.1.0 on), from
    // a raw socket: what a table-filling attacker sends.
    let code = "import socket,struct\n\
         s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('v0',0))\n\
         me=s.getsockname()[4]\n\
         for n in range(3000):\n  ip=bytes([10,50,1+n//250,1+n%250])\n  \
         mac=bytes([2,0x66,0,0,n>>8,n&255])\n  \
         f=b'\\xff'*6+mac+b'\\x08\\x06'+struct.pack('!HHBBH',1,0x0800,6,4,1)+mac+ip+\
         b'\\x00'*6+bytes([10,50,0,1])\n  s.send(f)\n\
         print('sent',flush=True)\n";
    let mut c = python(&lab, "bad", code);
    assert_eq!(wait_line(&mut c), "sent");
    let _ = c.wait();
    // The workers report what they see; the control thread takes it in batches.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (mut n, mut refused) = learned(&d);
    while n + refused < 3001 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        (n, refused) = learned(&d);
    }
    let errors = d.ok("show errors");
    let queue_full: u64 = errors
        .lines()
        .filter(|l| l.contains("learned-neighbour queue full"))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(n, 64, "the interface's share");
    assert_eq!(
        n + refused + queue_full,
        3001,
        "every sender learned, refused or dropped at the queue: {errors}"
    );
    // The host learned before the flood still reaches the node, and the daemon answers.
    assert!(ping_from(&lab, "ext", "10.50.0.1", 3) >= 2);
    assert!(d.ok("show ip neighbors").contains("10.50.0.9"));
}

/// With `age-seconds = 1`, a Linux host the node learned is asked again (a unicast ARP
/// request from the node's address) each time it has been silent for a second, answers, and
/// stays; once it stops answering ARP it is forgotten three requests later.
#[test]
fn a_silent_host_is_asked_again_and_forgotten_only_unanswered() {
    if skip() {
        return;
    }
    let lab = Lab::with_mtu(&["node", "ext"], 1500);
    let config = CONFIG.replace("stale-seconds = 600", "age-seconds = 1");
    let d = Daemon::start_in(Some(&lab.ns("node")), &config);
    host_reaches(&lab, &d);
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let n = d.ok("show ip neighbors");
    assert!(n.contains("10.50.0.9"), "{n}");
    assert!(d.neighbour_summary("asked again ") >= 2, "{n}");
    assert_eq!(d.neighbour_summary("expired "), 0, "{n}");
    assert!(
        d.ok("show errors")
            .contains("arp request sent to a silent neighbour")
    );
    // The host stops answering ARP: asked three times, then forgotten.
    lab.exec("ext", &["ip", "link", "set", "v0", "arp", "off"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while d.neighbour_summary("expired ") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            d.ok("show ip neighbors")
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(!d.ok("show ip neighbors").contains("10.50.0.9"));
}
