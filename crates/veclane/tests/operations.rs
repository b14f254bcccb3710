//! Operating the daemon: metrics scraped over HTTP, logs, service integration, the live
//! view. Each test starts `veclane run` in a private runtime directory, as an operator
//! would, and checks what it exposes with independent tools (curl, a JSON parser, tmux).

mod daemon_common;

use std::time::{Duration, Instant};

use daemon_common::*;

const MAC0: &str = "02:00:00:00:00:a0";
const MAC1: &str = "02:00:00:00:00:a1";
const POD0: [u8; 6] = [2, 0, 0, 0, 0xb0, 0];

fn config(extra: &str) -> String {
    format!(
        r#"
[daemon]
mode = "adaptive"
buffers = 4096
{extra}

[[interface]]
socket = "memif.sock"
id = 0
role = "master"
mac = "{MAC0}"
addresses = ["10.0.0.1/24"]

[[interface]]
socket = "memif.sock"
id = 1
role = "master"
mac = "{MAC1}"
addresses = ["10.0.1.1/24"]

[[neighbor]]
interface = "memif0/1"
ip = "10.0.1.2"
mac = "02:00:00:00:b1:00"
"#
    )
}

/// A TCP port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `curl -s URL`: (HTTP status, content type, body).
fn curl(url: &str) -> (u16, String, String) {
    let out = std::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code} %{content_type}", url])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, tail) = text.rsplit_once('\n').unwrap_or(("", &text));
    let (code, ctype) = tail.split_once(' ').unwrap_or((tail, ""));
    (
        code.parse().unwrap_or(0),
        ctype.to_string(),
        body.to_string(),
    )
}

fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    daemon::metrics::value_of(text, name, labels)
        .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
}

/// The metrics endpoint during traffic and after it: every scrape answers, the interface
/// counters equal `show interface`'s, the node, worker, error, buffer, copy-engine and FIB
/// families are there with their labels.
#[test]
fn metrics_scraped_during_traffic_agree_with_show_interface() {
    let port = free_port();
    let d = Daemon::start(&config(&format!("metrics = \"127.0.0.1:{port}\"")));
    let url = format!("http://127.0.0.1:{port}/metrics");
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    let m0 = mac(MAC0);

    let mut scrapes = 0;
    let mut sent = 0;
    for round in 0..20 {
        let batch: Vec<Vec<u8>> = (0..50)
            .map(|k| {
                let payload = vec![(round * 50 + k) as u8; 100 + k];
                udp(POD0, m0, [10, 0, 0, 2], [10, 0, 1, 2], 64, &payload)
            })
            .collect();
        pods.send(0, &batch);
        sent += batch.len();
        // Scrape while the frames are in flight.
        let (code, ctype, body) = curl(&url);
        assert_eq!(code, 200, "{body}");
        assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
        assert!(body.trim_end().ends_with("# EOF"), "{body}");
        scrapes += 1;
        pods.recv(1, 50, Duration::from_secs(10));
    }
    assert_eq!(scrapes, 20);

    // Settled: the scrape and `show interface` read the same counters.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (body, shown) = loop {
        let (_, _, body) = curl(&url);
        let interfaces = d.interfaces();
        let rx = metric(
            &body,
            "veclane_interface_rx_packets_total",
            &[("interface", "memif0/0")],
        );
        if rx as usize >= sent || Instant::now() > deadline {
            break (body, interfaces);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for i in &shown {
        let l = [("interface", i.name.as_str()), ("kind", "memif")];
        for (name, want) in [
            ("veclane_interface_rx_packets_total", i.rx_packets),
            ("veclane_interface_rx_bytes_total", i.rx_bytes),
            ("veclane_interface_tx_packets_total", i.tx_packets),
            ("veclane_interface_tx_bytes_total", i.tx_bytes),
            ("veclane_interface_rx_errors_total", i.rx_errors),
            ("veclane_interface_tx_no_room_total", i.tx_no_room),
            ("veclane_interface_connects_total", i.connects),
        ] {
            assert_eq!(metric(&body, name, &l), want as f64, "{name} {l:?}");
        }
        assert_eq!(metric(&body, "veclane_interface_link_up", &l), 1.0);
    }
    assert_eq!(
        metric(
            &body,
            "veclane_interface_rx_packets_total",
            &[("interface", "memif0/0")]
        ),
        sent as f64
    );
    assert_eq!(
        metric(
            &body,
            "veclane_interface_tx_packets_total",
            &[("interface", "memif0/1")]
        ),
        sent as f64
    );
    // The other families, with their labels.
    assert!(
        metric(
            &body,
            "veclane_node_vectors_total",
            &[("worker", "0"), ("node", "ethernet-input")]
        ) >= sent as f64
    );
    assert!(
        metric(
            &body,
            "veclane_node_clocks_seconds_total",
            &[("node", "memif-input")]
        ) > 0.0
    );
    let busy = metric(&body, "veclane_worker_busy_ratio", &[("worker", "0")]);
    assert!((0.0..=1.0).contains(&busy), "{busy}");
    assert!(
        metric(
            &body,
            "veclane_worker_busy_seconds_total",
            &[("worker", "0")]
        ) > 0.0
    );
    assert_eq!(
        metric(&body, "veclane_buffers_total", &[("worker", "0")]),
        4096.0
    );
    assert!(
        metric(
            &body,
            "veclane_copy_engine_copies_total",
            &[("node", "memif-output"), ("engine", "cpu")]
        ) >= 0.0
    );
    assert!(metric(&body, "veclane_fib_entries", &[("table", "0")]) >= 4.0);
    // The neighbour table: its default caps, nothing refused.
    assert_eq!(metric(&body, "veclane_neighbours_capacity", &[]), 65536.0);
    assert_eq!(
        metric(&body, "veclane_neighbours_interface_capacity", &[]),
        4096.0
    );
    assert!(metric(&body, "veclane_neighbours", &[]) >= 0.0);
    for reason in ["full", "room"] {
        let refused = metric(
            &body,
            "veclane_neighbours_refused_total",
            &[("reason", reason)],
        );
        assert_eq!(refused, 0.0, "{reason}");
    }
    assert_eq!(metric(&body, "veclane_neighbours_expired_total", &[]), 0.0);
    assert_eq!(metric(&body, "veclane_neighbours_probes_total", &[]), 0.0);
    // The memif regions the two pods' interfaces mapped, within the default budget.
    let mapped = metric(&body, "veclane_memif_region_bytes", &[]);
    let budget = metric(&body, "veclane_memif_region_budget_bytes", &[]);
    assert!(
        mapped > 2.0 * 1e6 && mapped < budget,
        "{mapped} of {budget}"
    );
    assert_eq!(metric(&body, "veclane_build_info", &[]), 1.0);

    // The dashboard in docs/ is built on names this scrape has.
    let dash = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana-dashboard.json"
    ))
    .unwrap();
    let _: serde_json::Value = serde_json::from_str(&dash).unwrap();
    let mut names: Vec<&str> = dash
        .match_indices("veclane_")
        .map(|(i, _)| {
            let rest = &dash[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.len() >= 10, "{names:?}");
    for n in names {
        // A family with no series yet (no error counted) still has its TYPE line.
        let family = format!("# TYPE {} ", n.trim_end_matches("_total"));
        assert!(
            body.lines().any(|l| l.starts_with(&format!("{n}{{"))
                || l.starts_with(&format!("{n} "))
                || l.starts_with(&family)),
            "the dashboard uses {n}, which the scrape lacks"
        );
    }

    // A service and a policy: their sessions and rules are in the scrape.
    d.ok("service add m table 0 vip 10.96.0.1 port 53 udp backend 10.0.1.2:5353");
    d.ok("policy add p on memif0/0 egress port udp/5353");
    let to_vip: Vec<Vec<u8>> = (0..3u16)
        .map(|k| {
            let mut f = udp(POD0, m0, [10, 0, 0, 2], [10, 96, 0, 1], 64, b"q");
            f[34..36].copy_from_slice(&(4000 + k).to_be_bytes());
            f[36..38].copy_from_slice(&53u16.to_be_bytes());
            f[40..42].copy_from_slice(&[0, 0]);
            f
        })
        .collect();
    pods.send(0, &to_vip);
    let deadline = Instant::now() + Duration::from_secs(5);
    let body = loop {
        let (_, _, body) = curl(&url);
        if daemon::metrics::value_of(&body, "veclane_sessions", &[]) == Some(3.0) {
            break body;
        }
        assert!(Instant::now() < deadline, "{body}\n{}", d.ok("show errors"));
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(metric(&body, "veclane_sessions_created_total", &[]), 3.0);
    assert_eq!(
        metric(&body, "veclane_service_sessions", &[("service", "m")]),
        3.0
    );
    let rule = [("interface", "memif0/0"), ("rule", "p egress rule 0")];
    assert_eq!(metric(&body, "veclane_policy_rule_hits_total", &rule), 3.0);

    // Anything but GET /metrics is a clear 404.
    let (code, _, body) = curl(&format!("http://127.0.0.1:{port}/nope"));
    assert_eq!(code, 404);
    assert!(body.contains("/metrics"), "{body}");
}

/// A metrics address that is not one is refused at load with the reason, and one already
/// taken stops the daemon from starting with the reason.
#[test]
fn a_bad_or_busy_metrics_address_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("v.toml");
    std::fs::write(&cfg, config("metrics = \"localhost\"")).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["run", "--check-config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("metrics = \"localhost\" is not an address"),
        "{err}"
    );

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    std::fs::write(&cfg, config(&format!("metrics = \"127.0.0.1:{port}\""))).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["run", "--config"])
        .arg(&cfg)
        .arg("--runtime-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("metrics: cannot listen on 127.0.0.1"), "{err}");
}

/// Every line of a JSON log, parsed (a line that is not a JSON object fails the test).
fn json_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            assert!(v.is_object(), "{l}");
            v
        })
        .collect()
}

/// Waits until the JSON log holds a line for which `f` is true; that line.
fn await_log(
    path: &std::path::Path,
    what: &str,
    f: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = json_lines(path).into_iter().find(|v| f(v)) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "no log line {what} in\n{}",
            std::fs::read_to_string(path).unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--log-format json`: one JSON object per line with stable field names; a memif peer
/// connecting and leaving is logged once each with the interface, the peer's pid and the
/// reason; an API change and a refused request are logged, and a refusal repeated at once
/// is held back (counted), not logged again.
#[test]
fn json_logs_have_one_event_per_line_with_stable_fields() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let d = Daemon::start_opts(
        None,
        &config(""),
        &["--log-format", "json"],
        &[],
        Some(log.path()),
    );
    let pods = Pods::connect(&d.path("memif.sock"), &[0]);
    d.wait_connected(1);
    let me = std::process::id();
    let up = await_log(log.path(), "memif connected", |v| {
        v["message"] == "memif connected" && v["interface"] == "memif0/0"
    });
    assert_eq!(up["peer_pid"], me, "{up}");
    assert_eq!(up["level"], "INFO");
    assert!(
        up["timestamp"].is_string() && up["target"].is_string(),
        "{up}"
    );
    drop(pods);
    let down = await_log(log.path(), "memif disconnected", |v| {
        v["message"] == "memif disconnected" && v["interface"] == "memif0/0"
    });
    assert!(down["reason"].is_string(), "{down}");

    d.ok("ip route add 10.9.0.0/16 via 10.0.1.2 memif0/1");
    let change = await_log(log.path(), "API change", |v| {
        v["message"] == "configuration changed over the API"
    });
    assert_eq!(change["request"], "ip_route", "{change}");
    assert!(
        change["detail"].as_str().unwrap().contains("10.9.0.0"),
        "{change}"
    );
    for line in ["show interface nosuch0", "delete interface nosuch0"]
        .iter()
        .flat_map(|l| [l; 3])
    {
        let (ok, _, _) = d.ctl(line);
        assert!(!ok);
    }
    let refused = await_log(log.path(), "refusal", |v| v["message"] == "request refused");
    assert_eq!(refused["request"], "delete_interface");
    assert!(
        refused["reason"].as_str().unwrap().contains("nosuch0"),
        "{refused}"
    );
    std::thread::sleep(Duration::from_millis(200));
    let n = json_lines(log.path())
        .iter()
        .filter(|v| v["message"] == "request refused")
        .count();
    assert_eq!(
        n, 1,
        "repeats within a minute are held back; queries are not logged"
    );
}

/// Under a service manager: READY once the control socket answers and the workers are
/// pinned, the watchdog fed at half its period from the control loop, SIGHUP applying a
/// route added to the file (RELOADING then READY) and refusing a change of workers with the
/// list of what cannot be applied live (nothing changed), STOPPING on SIGTERM.
#[test]
fn notify_watchdog_and_sighup_reload() {
    use std::os::unix::net::UnixDatagram;
    let tmp = tempfile::tempdir().unwrap();
    let sock_path = tmp.path().join("notify.sock");
    let notify = UnixDatagram::bind(&sock_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let recv = || {
        let mut b = [0u8; 4096];
        let n = notify.recv(&mut b).expect("a notification");
        String::from_utf8_lossy(&b[..n]).into_owned()
    };
    let log = tmp.path().join("log.json");
    let mut d = Daemon::start_opts(
        None,
        &config(""),
        &["--log-format", "json"],
        &[
            ("NOTIFY_SOCKET", sock_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "200000"),
        ],
        Some(&log),
    );
    let first = recv();
    assert!(first.starts_with("READY=1\n"), "{first}");
    assert!(first.contains("STATUS=1 worker(s)"), "{first}");
    // The watchdog: 100 ms apart (half of 200 ms), from the control loop.
    let t = Instant::now();
    for _ in 0..3 {
        assert_eq!(recv(), "WATCHDOG=1\n");
    }
    let dt = t.elapsed();
    assert!(
        dt >= Duration::from_millis(150) && dt < Duration::from_secs(3),
        "{dt:?}"
    );

    // A route added to the file, then SIGHUP.
    let cfg_path = d.path("veclane.toml");
    let with_route = format!(
        "{}\n[[route]]\nprefix = \"10.7.0.0/16\"\nvia = \"10.0.1.2\"\ninterface = \"memif0/1\"\n",
        config("")
    );
    std::fs::write(&cfg_path, &with_route).unwrap();
    let hup = || {
        std::process::Command::new("kill")
            .args(["-HUP", &d.pid().to_string()])
            .status()
            .unwrap();
    };
    hup();
    let mut seen = Vec::new();
    while !seen.iter().any(|m: &String| m.starts_with("READY=1")) {
        let m = recv();
        if m != "WATCHDOG=1\n" {
            seen.push(m);
        }
    }
    assert!(
        seen[0].starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{seen:?}"
    );
    let fib = d.ok("show ip fib");
    assert!(
        fib.contains("10.7.0.0/16"),
        "the route is in: {fib}\n{}",
        std::fs::read_to_string(&log).unwrap()
    );
    let done = await_log(&log, "reloaded", |v| {
        v["message"] == "configuration reloaded"
    });
    assert!(
        done["changes"]
            .as_str()
            .unwrap()
            .contains("route 10.7.0.0/16 added"),
        "{done}"
    );

    // A worker count changed (and a route removed): refused as a whole.
    std::fs::write(&cfg_path, config("workers = [0, 1]")).unwrap();
    hup();
    let refused = await_log(&log, "refused", |v| {
        v["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("reload refused: these changes need a restart"))
    });
    let why = refused["cannot_apply_live"].as_str().unwrap();
    assert!(why.contains("[daemon] workers"), "{refused}");
    assert!(
        d.ok("show ip fib").contains("10.7.0.0/16"),
        "nothing changed"
    );
    assert!(
        !d.ok("show runtime").contains("vl_wk_1"),
        "still one worker"
    );

    // A file that does not parse: refused, nothing changed.
    std::fs::write(&cfg_path, "[daemon\n").unwrap();
    hup();
    await_log(&log, "invalid file", |v| {
        v["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("reload refused: the file is not valid"))
    });
    assert!(d.ok("show ip fib").contains("10.7.0.0/16"));

    assert!(d.terminate().success());
    let mut last = String::new();
    while let Ok(m) = {
        notify
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut b = [0u8; 4096];
        notify
            .recv(&mut b)
            .map(|n| String::from_utf8_lossy(&b[..n]).into_owned())
    } {
        last = m;
    }
    assert_eq!(last, "STOPPING=1\n");
}

/// Every reply names the control API version; a request naming another version is refused
/// with a clear message, and a client talking to a daemon that names another (or none) says
/// so instead of misreading its replies.
#[test]
fn control_api_versions_are_checked_both_ways() {
    use std::io::{BufRead, BufReader, Write};
    let d = Daemon::start(&config(""));
    let mut s = std::os::unix::net::UnixStream::connect(d.ctl_path()).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut ask = |line: &str| {
        s.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut reply = String::new();
        r.read_line(&mut reply).unwrap();
        serde_json::from_str::<serde_json::Value>(&reply).unwrap()
    };
    let v = ask(r#"{"request":"show_version"}"#);
    assert_eq!(v["api"], api::API_VERSION, "{v}");
    assert_eq!(v["reply"], "version");
    let v = ask(r#"{"request":"show_version","api":99}"#);
    assert_eq!(v["reply"], "error", "{v}");
    let m = v["message"].as_str().unwrap();
    assert!(
        m.contains("control API 1") && m.contains("speaks 99"),
        "{m}"
    );
    assert_eq!(v["code"], "version", "{v}");
    // Every refusal carries a code a client can act on without reading the message.
    for (line, code) in [
        (r#"{"request":"reboot"}"#, "malformed"),
        ("not json", "malformed"),
        (
            r#"{"request":"delete_interface","name":"nosuch"}"#,
            "no_interface",
        ),
        (r#"{"request":"network_del","name":"nosuch"}"#, "refused"),
    ] {
        let v = ask(line);
        assert_eq!(
            (v["reply"].as_str(), v["code"].as_str()),
            (Some("error"), Some(code)),
            "{line}: {v}"
        );
    }

    // A "daemon" of another build: its replies name no version.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sock");
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let t = std::thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        let mut line = String::new();
        BufReader::new(c.try_clone().unwrap())
            .read_line(&mut line)
            .unwrap();
        (&c).write_all(b"{\"reply\":\"ok\"}\n").unwrap();
        line
    });
    let out = std::process::Command::new(BIN)
        .args(["ctl", "--socket"])
        .arg(&path)
        .args(["show", "version"])
        .output()
        .unwrap();
    let sent = t.join().unwrap();
    assert!(sent.contains("\"api\":1"), "{sent}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("speaks control API (none"), "{err}");
    assert!(err.contains("this veclane speaks 1"), "{err}");
}

/// `[daemon] control-socket`: the socket gets the group and mode asked for.
#[test]
fn the_control_socket_has_the_configured_group_and_mode() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let groups = std::fs::read_to_string("/etc/group").unwrap();
    let (name, gid) = groups
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((f.first()?.to_string(), f.get(2)?.parse::<u32>().ok()?))
        })
        .find(|(_, g)| *g != 0)
        .expect("a group besides root's");
    let d = Daemon::start(&config(&format!(
        "control-socket = {{ group = \"{name}\", mode = \"0660\" }}"
    )));
    let m = std::fs::metadata(d.ctl_path()).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o660);
    assert_eq!(m.gid(), gid, "group {name}");
    d.ok("show version");
}

/// `veclane ctl monitor` on a terminal (tmux): the screen redraws with the interfaces and
/// the busy nodes, and shows the traffic's rate.
#[test]
fn monitor_redraws_rates_on_a_terminal() {
    let d = Daemon::start(&config(""));
    let mut pods = Pods::connect(&d.path("memif.sock"), &[0, 1]);
    d.wait_connected(2);
    let session = format!("vlmon{}", std::process::id());
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux")
    };
    let cmd = format!(
        "{BIN} ctl --socket {} monitor interval 0.5",
        d.ctl_path().display()
    );
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "160",
        "-y",
        "40",
        &cmd,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m0 = mac(MAC0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let screen = loop {
        let batch: Vec<Vec<u8>> = (0..50)
            .map(|k| udp(POD0, m0, [10, 0, 0, 2], [10, 0, 1, 2], 64, &[k as u8; 200]))
            .collect();
        pods.send(0, &batch);
        pods.recv(1, 50, Duration::from_secs(5));
        let cap = tmux(&["capture-pane", "-p", "-t", &session]);
        let screen = String::from_utf8_lossy(&cap.stdout).into_owned();
        let busy = screen
            .lines()
            .any(|l| l.starts_with("memif0/0") && l.split_whitespace().nth(2) != Some("0"));
        if (busy && screen.contains("ethernet-input")) || Instant::now() > deadline {
            break screen;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    tmux(&["kill-session", "-t", &session]);
    eprintln!("{screen}");
    assert!(screen.starts_with("veclane monitor"), "{screen}");
    assert!(
        screen.contains("Rx pps") && screen.contains("ns/pkt"),
        "{screen}"
    );
    let row = screen
        .lines()
        .find(|l| l.starts_with("memif0/0"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(row.contains(" up "), "{row}");
    assert_ne!(row.split_whitespace().nth(2), Some("0"), "a rate: {row}");
    assert!(screen.contains("ethernet-input"), "{screen}");
    // Not a terminal: plain lines, as many intervals as asked.
    let out = std::process::Command::new(BIN)
        .args(["ctl", "--socket"])
        .arg(d.ctl_path())
        .args(["monitor", "interval", "0.2", "count", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert_eq!(
        text.lines()
            .filter(|l| l.contains(" interface memif0/0 link up"))
            .count(),
        2,
        "{text}"
    );
    assert!(!text.contains('\x1b'), "no escapes off a terminal");
}

/// `pcap trace` writes only into the capture directory: a name, or a path there, works; a
/// file elsewhere, a way out with `..`, or a symbolic link planted in the directory (to a file
/// outside) is refused, and the file outside is untouched.
#[test]
fn pcap_traces_stay_in_the_capture_directory() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let capture = tempfile::tempdir().unwrap();
    let d = Daemon::start(&config(&format!(
        "capture-dir = \"{}\"",
        capture.path().display()
    )));
    std::os::unix::fs::symlink(&victim, capture.path().join("link.pcap")).unwrap();
    for file in [
        victim.display().to_string(),
        "../victim".to_string(),
        format!("{}/../victim", capture.path().display()),
        d.path("in-runtime-dir.pcap").display().to_string(),
    ] {
        let (ok, _, err) = d.ctl(&format!("pcap trace rx on any {file}"));
        assert!(
            !ok && err.contains("not in the capture directory"),
            "{file}: {err}"
        );
    }
    let (ok, _, err) = d.ctl("pcap trace rx on any link.pcap");
    assert!(!ok && err.contains("link.pcap"), "a planted link: {err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    for file in [
        "by-name.pcap".to_string(),
        capture.path().join("by-path.pcap").display().to_string(),
    ] {
        d.ok(&format!("pcap trace rx on any {file}"));
        assert!(d.ok("pcap trace off").contains("packets"), "{file}");
    }
    assert!(capture.path().join("by-name.pcap").exists());
    assert!(capture.path().join("by-path.pcap").exists());
}

/// Over the control API a memif socket file stays in the runtime directory: a path elsewhere,
/// a way out with `..`, or a directory link planted in it is refused (and nothing is made
/// outside); a name, a subdirectory, or an abstract socket works.
#[test]
fn api_memif_sockets_stay_in_the_runtime_directory() {
    let outside = tempfile::tempdir().unwrap();
    let d = Daemon::start(&config(""));
    std::os::unix::fs::symlink(outside.path(), d.path("out")).unwrap();
    for (i, socket) in [
        outside.path().join("x.sock").display().to_string(),
        "../x.sock".to_string(),
        "sub/../../x.sock".to_string(),
        "out/x.sock".to_string(),
        format!("{}/new/x.sock", outside.path().display()),
    ]
    .into_iter()
    .enumerate()
    {
        let (ok, _, err) = d.ctl(&format!(
            "create interface memif id {} socket {socket} master",
            10 + i
        ));
        assert!(
            !ok && err.contains("must be in the runtime directory"),
            "{socket}: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    for (i, socket) in [
        "ok.sock".to_string(),
        d.path("sub/ok.sock").display().to_string(),
        "@veclane-test-abstract".to_string(),
    ]
    .into_iter()
    .enumerate()
    {
        d.ok(&format!(
            "create interface memif id {} socket {socket} master",
            20 + i
        ));
    }
    assert!(d.path("sub/ok.sock").exists());
}
