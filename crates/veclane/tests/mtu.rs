//! Jumbo frames and the interface MTU, end to end through the daemon: a 9000-byte IPv4
//! packet crosses memif to memif intact (chained in memif and in the graph); once the
//! outgoing interface's MTU is lowered, the same packet with DF set is answered with ICMP
//! fragmentation needed naming the MTU, and without DF is dropped under its own counter.

mod daemon_common;

use std::time::Duration;

use daemon_common::*;

const MAC0: &str = "02:00:00:00:00:a0";
const MAC1: &str = "02:00:00:00:00:a1";
const POD: &str = "02:00:00:00:b0:00";

fn config() -> String {
    format!(
        "[daemon]\nmode = \"interrupt\"\nbuffers = 4096\n\n\
         [[interface]]\nsocket = \"memif.sock\"\nid = 0\nrole = \"master\"\nmac = \"{MAC0}\"\n\
         addresses = [\"10.0.0.1/24\"]\n\n\
         [[interface]]\nsocket = \"memif.sock\"\nid = 1\nrole = \"master\"\nmac = \"{MAC1}\"\n\
         addresses = [\"10.0.1.1/24\"]\n\n\
         [[neighbor]]\ninterface = \"memif0/0\"\nip = \"10.0.0.2\"\nmac = \"{POD}\"\n\n\
         [[neighbor]]\ninterface = \"memif0/1\"\nip = \"10.0.1.2\"\nmac = \"{POD}\"\n"
    )
}

/// A UDP packet of `ip_len` bytes of IPv4 from pod 0 to pod 1, DF as asked.
fn packet(ip_len: usize, df: bool) -> Vec<u8> {
    let payload: Vec<u8> = (0..ip_len - 28).map(|i| (i * 7 % 251) as u8).collect();
    let mut v = udp(
        mac(POD),
        mac(MAC0),
        [10, 0, 0, 2],
        [10, 0, 1, 2],
        64,
        &payload,
    );
    if df {
        v[20] |= 0x40;
    } else {
        v[20] &= !0x40;
    }
    let mut h = etherparse::Ipv4Header::from_slice(&v[14..]).unwrap().0;
    h.header_checksum = h.calc_header_checksum();
    v[14..34].copy_from_slice(&h.to_bytes());
    v
}

#[test]
fn jumbo_frames_cross_and_the_mtu_is_enforced() {
    let d = Daemon::start(&config());
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    assert!(d.ok("show interface memif0/1").contains("mtu 9000"));

    let big = packet(9000, true);
    pods.send(0, std::slice::from_ref(&big));
    let got = pods.recv(1, 1, Duration::from_secs(5));
    assert_eq!(got.len(), 1, "{}", d.ok("show errors"));
    let f = &got[0];
    assert_eq!(f.len(), 14 + 9000);
    assert_eq!(f[22], 63, "routed: TTL 64 - 1");
    assert_eq!(f[42..], big[42..], "the payload arrived intact");
    let h = etherparse::Ipv4Header::from_slice(&f[14..]).unwrap().0;
    assert_eq!(h.header_checksum, h.calc_header_checksum());

    // Lower memif0/1's MTU: DF gets ICMP fragmentation needed with the MTU, from 10.0.0.1.
    d.ok("set interface mtu memif0/1 1500");
    assert!(d.ok("show interface memif0/1").contains("mtu 1500"));
    pods.send(0, &[packet(1501, true), packet(1500, true)]);
    let back = pods.recv(0, 1, Duration::from_secs(5));
    assert_eq!(back.len(), 1, "{}", d.ok("show errors"));
    let p = etherparse::SlicedPacket::from_ethernet(&back[0]).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
        panic!("no ipv4")
    };
    assert_eq!(ip.header().source(), [10, 0, 0, 1]);
    let Some(etherparse::TransportSlice::Icmpv4(m)) = &p.transport else {
        panic!("no icmp")
    };
    assert_eq!(
        m.icmp_type(),
        etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded { next_hop_mtu: 1500 }
        )
    );
    // The 1500-byte one fits and goes on.
    let fits = pods.recv(1, 1, Duration::from_secs(5));
    assert_eq!(fits.len(), 1);
    assert_eq!(fits[0].len(), 14 + 1500);

    // Without DF: dropped and counted, nothing comes back.
    pods.send(0, &[packet(1501, false)]);
    assert!(pods.recv(0, 1, Duration::from_millis(300)).is_empty());
    assert!(pods.recv(1, 1, Duration::from_millis(100)).is_empty());
    let e = d.ok("show errors");
    assert!(
        e.contains("over the interface mtu without df (not fragmented, dropped)"),
        "{e}"
    );
    for (line, named) in [
        ("set interface mtu memif0/1 40", "under the IPv4 minimum"),
        ("set interface mtu nosuch 1500", "no interface named"),
    ] {
        let (ok, _, err) = d.ctl(line);
        assert!(!ok && err.contains(named), "`{line}`: {err}");
    }
}
