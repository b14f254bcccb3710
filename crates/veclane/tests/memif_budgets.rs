//! What memif pods may cost the daemon: the memory their regions take, per interface and
//! for all of them together.

mod daemon_common;

use std::time::{Duration, Instant};

use daemon_common::*;
use memif::msg::Msg;
use memif::testing::evil::{Evil, Remote, good_region, memfd};

/// Two master interfaces on `memif.sock` (ids 0 and 1) with `daemon`, `iface0` and `iface1`
/// added to their sections.
fn two_masters(daemon: &str, iface0: &str, iface1: &str) -> String {
    format!(
        "[daemon]\nbuffers = 4096\n{daemon}\n\n\
         [[interface]]\nsocket = \"memif.sock\"\nid = 0\nrole = \"master\"\n{iface0}\n\n\
         [[interface]]\nsocket = \"memif.sock\"\nid = 1\nrole = \"master\"\n{iface1}\n"
    )
}

/// `region-limit-mib`: by default what a master's rings can use, twice over (one ring each
/// way of 1024 slots of 2048 bytes: 8 MiB, and one for the rings), shown by `show
/// interface`. A pod whose regions would take more is refused before they are mapped, the
/// DISCONNECT saying why, and a pod within it connects; an interface given more (for a
/// zero-copy peer) takes the region the other refused. A limit of 0, or one on a slave, is
/// refused with the reason.
#[test]
fn a_pods_regions_stay_within_its_interfaces_limit() {
    let one_each_way = "rx-queues = 1\ntx-queues = 1";
    let zero_copy = "region-limit-mib = 64";
    let d = Daemon::start(&two_masters("", one_each_way, zero_copy));
    let shown = d.ok("show interface memif0/0");
    assert!(shown.contains("region-limit 9 MiB"), "{shown}");
    assert!(
        d.ok("show interface memif0/1")
            .contains("region-limit 64 MiB")
    );

    let mut p = Remote(memif::SocketPath::File(d.path("memif.sock")));
    let e = Evil::connect(&mut p);
    e.init(&mut p, 0);
    let size = 10 << 20;
    e.send(
        Msg::AddRegion { index: 0, size },
        Some(&memfd(size, rustix::fs::SealFlags::SHRINK)),
    );
    e.expect_disconnect(
        &mut p,
        "regions would take 10485760 bytes, more than the 9437184 the interface allows",
    );
    // Two regions that fit one by one but not together.
    let e = Evil::connect(&mut p);
    e.init(&mut p, 0);
    let _first = good_region(&e, &mut p, 5 << 20);
    e.send(
        Msg::AddRegion {
            index: 1,
            size: 5 << 20,
        },
        Some(&memfd(5 << 20, rustix::fs::SealFlags::SHRINK)),
    );
    e.expect_disconnect(&mut p, "more than the 9437184 the interface allows");
    // The same 10 MiB on the interface given 64.
    let e = Evil::connect(&mut p);
    e.init(&mut p, 1);
    let _big = good_region(&e, &mut p, 10 << 20);
    drop(e);
    // A real pod (one ring each way, its buffers 4 MiB) gets the limited interface.
    let _pod = Pods::connect(&d.path("memif.sock"), &[0]);
    d.wait_connected(1);

    for (line, why) in [
        (
            "create interface memif id 5 socket memif.sock master region-limit-mib 0",
            "region-limit-mib must be at least 1",
        ),
        (
            "create interface memif id 5 socket other.sock slave region-limit-mib 8",
            "region-limit-mib is for the master role",
        ),
    ] {
        let (ok, _, err) = d.ctl(line);
        assert!(!ok && err.contains(why), "{line}: {err}");
    }
}

/// `[daemon] memif-memory-mib`: the regions of every pod together stay within it. A second
/// pod whose regions do not fit what the first left is refused before they are mapped
/// (DISCONNECT says why) and gets in, by its own retry, once the first has gone.
#[test]
fn memif_regions_of_all_pods_share_the_daemons_budget() {
    // A pod's regions here: two rings of 1024 slots and 2048 buffers of 2048 bytes, ~4.2 MB.
    let cfg = two_masters("memif-memory-mib = 6", "", "");
    let d = Daemon::start(&cfg);
    let first = Pods::connect(&d.path("memif.sock"), &[0]);
    d.wait_connected(1);
    let path = memif::SocketPath::File(d.path("memif.sock"));
    let pod1 = memif::InterfaceConfig {
        id: 1,
        name: "pod1".into(),
        reconnect_interval: Duration::from_millis(100),
        ..Default::default()
    };
    let mut second = Pods {
        client: memif::Client::new(&path, vec![pod1]).unwrap(),
        queues: std::collections::HashMap::new(),
    };
    // Refused during the handshake: no Disconnected event (it never connected), the reason
    // is in its status.
    let deadline = Instant::now() + Duration::from_secs(10);
    let why = loop {
        assert!(Instant::now() < deadline, "the second pod was not refused");
        second.client.poll(Duration::from_millis(10)).unwrap();
        if let Some(r) = &second.client.interfaces()[0].last_disconnect_reason {
            break r.clone();
        }
    };
    assert!(why.contains("over the budget of 6291456"), "{why}");
    let up = |d: &Daemon| d.interfaces().iter().filter(|i| i.connected).count();
    assert_eq!(up(&d), 1, "the first pod is untouched");
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !second.queues.contains_key(&1) {
        assert!(Instant::now() < deadline, "the second pod never got in");
        second.client.poll(Duration::from_millis(10)).unwrap();
        while let Some(e) = second.client.next_event() {
            if let memif::Event::Connected { id, queues, .. } = e {
                second.queues.insert(id, queues);
            }
        }
    }
    d.wait_connected(1);
}
