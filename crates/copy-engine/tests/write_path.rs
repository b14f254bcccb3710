//! The DSA engine through the real `write()` path: discovery over a fake sysfs tree whose
//! work queue's character device is a FIFO, opened and written by the engine exactly as it
//! would `/dev/dsa/wq0.0`; on the other end a thread plays the device, reading each 64-byte
//! descriptor and executing it with the software model, its completion records written from
//! that thread as a device's are, behind the engine's back.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use copy_engine::dsa::hw::{Descriptor, opcode};
use copy_engine::dsa::model::{Model, ModelConfig, Portal};
use copy_engine::dsa::{CpuFeatures, DsaPool, Source, sysfs};
use copy_engine::{CopyReq, Engine};

struct Tree(PathBuf);

impl Tree {
    fn new(tag: &str, mode: &str) -> Tree {
        let root = std::env::temp_dir().join(format!("veclane-wp-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let sys = root.join("sys");
        for (dir, attrs) in [
            (
                "dsa0",
                &[
                    ("state", "enabled"),
                    ("version", "0x100"),
                    ("numa_node", "0"),
                ][..],
            ),
            (
                "wq0.0",
                &[
                    ("state", "enabled"),
                    ("type", "user"),
                    ("mode", mode),
                    ("name", "veclane"),
                    ("size", "16"),
                    ("max_batch_size", "32"),
                    ("max_transfer_size", "2097152"),
                    ("block_on_fault", "0"),
                ][..],
            ),
        ] {
            fs::create_dir_all(sys.join(dir)).unwrap();
            for (k, v) in attrs {
                fs::write(sys.join(dir).join(k), format!("{v}\n")).unwrap();
            }
        }
        fs::create_dir_all(root.join("dev")).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            root.join("dev/wq0.0"),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        Tree(root)
    }

    fn discover(&self) -> sysfs::Discovery {
        sysfs::discover(&self.0.join("sys"), &self.0.join("dev"))
    }

    fn fifo(&self) -> PathBuf {
        self.0.join("dev/wq0.0")
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The device: reads descriptors from the FIFO and executes them until `stop`; with `mute`,
/// reads them and does nothing (a device that never completes).
fn device(fifo: &Path, stop: Arc<AtomicBool>, mute: bool) -> thread::JoinHandle<(u64, u64)> {
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(fifo)
        .unwrap();
    thread::spawn(move || {
        let mut m = Model::new(ModelConfig {
            depth: 16,
            max_batch_size: 32,
            ..ModelConfig::default()
        });
        let (mut seen, mut batches) = (0u64, 0u64);
        let mut b = [0u8; 64];
        rustix::fs::fcntl_setfl(&f, rustix::fs::OFlags::NONBLOCK).unwrap();
        while !stop.load(Ordering::Acquire) {
            match f.read(&mut b) {
                Ok(64) => {
                    let d = Descriptor::from_bytes(&b);
                    seen += 1;
                    batches += u64::from(d.opcode() == opcode::BATCH);
                    if !mute {
                        // SAFETY: the engine keeps what the descriptor names valid until
                        // the record is written (the test's buffers outlive the engine).
                        unsafe { m.submit(&d) }.unwrap();
                        m.progress();
                    }
                }
                Ok(n) => panic!("a descriptor of {n} bytes"),
                Err(_) => thread::sleep(Duration::from_micros(50)),
            }
        }
        (seen, batches)
    })
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

#[test]
fn copies_go_through_write_and_come_back_right() {
    let t = Tree::new("ok", "dedicated");
    let stop = Arc::new(AtomicBool::new(false));
    let dev = device(&t.fifo(), stop.clone(), false);
    let mut pool = DsaPool::with(Source::Discover, t.discover(), CpuFeatures::default());
    let (e, a) = pool.open().expect("the fake queue opens");
    assert_eq!(
        (a.wq.as_str(), a.how, a.mode),
        ("wq0.0", "write", "dedicated")
    );
    assert_eq!(a.config.max_batch_size, 1, "write() takes no batches");
    assert!(
        a.notes.iter().any(|n| n.contains("MOVDIR64B")),
        "{:?}",
        a.notes
    );
    // A dedicated queue has one owner: a second engine gets none.
    let again = pool.open().unwrap_err();
    assert!(again.contains("already given"), "{again}");
    let mut e = Engine::Dsa(Box::new(e));

    let sizes = [64usize, 300, 1500, 9000, 2048, 257, 70_000];
    let mut src = Vec::new();
    let mut dst = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        src.push(pattern(n, i as u8));
        dst.push(vec![0u8; n]);
    }
    for round in 0..20 {
        let reqs: Vec<CopyReq> = (0..sizes.len())
            .filter(|i| (i + round) % 3 != 0)
            .map(|i| CopyReq {
                src: src[i].as_ptr(),
                dst: dst[i].as_mut_ptr(),
                len: sizes[i] as u32,
            })
            .collect();
        let t = loop {
            // SAFETY: the buffers outlive the engine's use of them (waited for below).
            match unsafe { e.submit(&reqs) } {
                Ok(t) => break t,
                Err(_) => {
                    e.poll(|_| {});
                }
            }
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !e.is_retired(t) {
            e.poll(|_| {});
            assert!(Instant::now() < deadline, "ticket {t:?} never retired");
            thread::yield_now();
        }
        for i in (0..sizes.len()).filter(|i| (i + round) % 3 != 0) {
            assert_eq!(dst[i], src[i], "round {round}, copy {i}");
            dst[i].fill(0);
        }
    }
    let Engine::Dsa(d) = &e else { unreachable!() };
    let s = d.dsa_stats();
    assert!(d.tripped().is_none(), "{:?}", d.tripped());
    assert!(s.descriptors > 0 && s.inline > 0, "{s:?}");
    drop(e);
    stop.store(true, Ordering::Release);
    let (seen, batches) = dev.join().unwrap();
    assert_eq!(batches, 0, "no batch descriptor went through write()");
    assert_eq!(seen, s.descriptors, "every descriptor reached the device");
}

#[test]
fn a_device_that_never_answers_is_finished_on_the_cpu_and_left() {
    let t = Tree::new("mute", "shared");
    let stop = Arc::new(AtomicBool::new(false));
    let dev = device(&t.fifo(), stop.clone(), true);
    let mut pool = DsaPool::with(Source::Discover, t.discover(), CpuFeatures::default());
    let (mut e, a) = pool.open().unwrap();
    assert_eq!(a.mode, "shared");
    // A shared queue may be given to several engines.
    assert!(pool.open().is_ok());
    let src = pattern(4096, 7);
    let mut dst = vec![0u8; 4096];
    let req = [CopyReq {
        src: src.as_ptr(),
        dst: dst.as_mut_ptr(),
        len: 4096,
    }];
    // SAFETY: the buffers outlive the engine's use of them.
    let tk = unsafe { e.submit(&req) }.unwrap();
    let start = Instant::now();
    while e.retired_through().is_none_or(|r| r < tk) {
        e.poll(|_| {});
        assert!(start.elapsed() < Duration::from_secs(10), "never retired");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(dst, src);
    assert!(
        e.tripped().is_some_and(|w| w.contains("not written")),
        "{:?}",
        e.tripped()
    );
    assert_eq!(e.dsa_stats().watchdog, 1);
    // From now on the CPU copies, at once.
    dst.fill(0);
    // SAFETY: as above.
    let tk = unsafe { e.submit(&req) }.unwrap();
    e.poll(|_| {});
    assert!(e.retired_through() >= Some(tk));
    assert_eq!(dst, src);
    stop.store(true, Ordering::Release);
    let (seen, _) = dev.join().unwrap();
    assert_eq!(seen, 1, "only the first copy went to the device");
}

#[test]
fn a_named_queue_that_is_not_usable_says_why() {
    let t = Tree::new("named", "dedicated");
    fs::write(t.0.join("sys/wq0.0/state"), "disabled\n").unwrap();
    let pool = DsaPool::with(
        Source::Queue("wq0.0".into()),
        t.discover(),
        CpuFeatures::default(),
    );
    let why = pool.unusable().unwrap();
    assert!(
        why.contains("wq0.0") && why.contains("not enabled"),
        "{why}"
    );
}
