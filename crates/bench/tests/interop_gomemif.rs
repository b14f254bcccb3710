//! Interop with gomemif (go.fd.io/govpp/extras v0.1.0) as the memif primary: our secondary sends
//! at least 100 000 frames and checks every echoed frame's bytes, the count and the order.
//!
//! gomemif v0.1.0 cannot transmit chains (its WritePacket copies the packet's start into every
//! segment), so the peer echoes only frames that fit one of the M2S buffers we post; jumbo
//! frames are tested with 10240-byte buffers. See interop/gomemif-peer/README.md.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
mod common;

use std::time::{Duration, Instant};

use memif::{Client, InterfaceConfig, SocketPath};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn peer_binary() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = root.join("target/interop/gomemif-peer");
    if !bin.exists() {
        // scripts/setup.sh builds it; build it here too when run from a bare `cargo test`.
        let ok = Command::new("go")
            .args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(root.join("interop/gomemif-peer"))
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            if std::env::var_os("CI").is_some() {
                panic!("CI must build the gomemif peer (scripts/setup.sh does)");
            }
            eprintln!("SKIP: cannot build interop/gomemif-peer (is Go installed?)");
            return None;
        }
    }
    Some(bin)
}

struct Peer {
    child: Child,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Peer {
    fn start(bin: &PathBuf, sock: &std::path::Path, secret: &str) -> Peer {
        let mut child = Command::new(bin)
            .arg("-socket")
            .arg(sock)
            .args(["-id", "7", "-secret", secret, "-max-frame", "10240"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start gomemif peer");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        Peer { child, stdout }
    }

    /// SIGTERM, then the peer's closing JSON counters.
    fn stop(mut self) -> serde_json::Value {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let mut last = String::new();
        let mut line = String::new();
        while self.stdout.read_line(&mut line).unwrap_or(0) > 0 {
            last = std::mem::take(&mut line);
        }
        let _ = self.child.wait();
        serde_json::from_str(last.trim()).expect("peer's JSON counters")
    }
}

/// Frame `seq` of `len`: a pattern, with `seq` at 14..22 when it fits.
fn frame(seq: u64, len: usize) -> Vec<u8> {
    let pattern = testkit::Pattern {
        seq_width: 8,
        ..testkit::Pattern::linear(29, 13)
    };
    testkit::seq_frame(seq, len, pattern)
}

fn echo(sizes: &[usize], total: u64, buffer_size: u32) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(bin) = peer_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("gm.sock");
    let peer = Peer::start(&bin, &sock, "gosecret");
    // gomemif compares all 24 secret bytes and ignores ADD_RING's region (rings must sit in
    // region 0, as ours do).
    let cfg = InterfaceConfig {
        id: 7,
        secret: Some("gosecret".into()),
        buffer_size,
        ..Default::default()
    };
    let mut c = Client::new(&SocketPath::File(sock), vec![cfg]).unwrap();
    let (_, mut q) = common::connected_secondary(&mut c, "gomemif");
    let len_of = |s: u64| sizes[(s as usize / 5) % sizes.len()];
    let (mut sent, mut got) = (0u64, 0u64);
    let mut first_bad = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut lens = Vec::new();
    while got < total {
        assert!(
            Instant::now() < deadline,
            "stalled: sent {sent} got {got} {:?} {:?}",
            q.tx[0].stats(),
            q.rx[0].stats()
        );
        let room = (512 - (sent - got)).min(total - sent).min(32);
        lens.clear();
        lens.extend((sent..sent + room).map(|s| len_of(s) as u32));
        let base = sent;
        sent += q.tx[0]
            .send_with(&lens, |i, w| w.write(0, &frame(base + i as u64, w.len())))
            .unwrap() as u64;
        q.rx[0]
            .recv_with(256, |p| {
                if first_bad.is_none() && p.to_vec() != frame(got, len_of(got)) {
                    first_bad = Some((got, p.len()));
                }
                got += 1;
            })
            .unwrap();
        if got == sent && got < total {
            // Nothing in flight: let gomemif's goroutines run rather than spin against them.
            std::thread::yield_now();
        }
    }
    assert_eq!(
        first_bad, None,
        "first frame that came back wrong (seq, length)"
    );
    drop(q);
    drop(c);
    let counters = peer.stop();
    assert_eq!(counters["rx_packets"], total, "{counters}");
    assert_eq!(counters["tx_packets"], total, "{counters}");
    assert_eq!(counters["tx_errors"], 0, "{counters}");
}

#[test]
fn gomemif_primary_echoes_standard_frames() {
    echo(&[60, 64, 128, 256, 512, 1024, 1500, 2048], 100_000, 2048);
}

#[test]
fn gomemif_primary_echoes_jumbo_frames_in_large_buffers() {
    echo(&[64, 1500, 4000, 9000], 100_000, 10240);
}
