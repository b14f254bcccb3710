//! veclane's daemon as a device under test: `veclane run` as a child process with a
//! configuration the harness wrote, driven over its control API.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::dut::{Counts, RunningDut};
use crate::proc::{DutError, stop_child};

/// The program, as errors name it.
const DUT: &str = "veclane";

/// A `veclane run` child, stopped with SIGTERM (then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    dir: PathBuf,
    /// The namespace it runs in, when the harness made one for it: deleted after the daemon
    /// stopped (fields drop after `Drop::drop`).
    netns: Option<crate::underlay::VethNetns>,
}

impl Daemon {
    /// Starts `bin run` with `config` in runtime directory `dir`, and waits for its control
    /// socket and its memif socket.
    pub fn start(bin: &Path, dir: &Path, config: &str) -> Result<Daemon, DutError> {
        Daemon::start_under(&[], bin, dir, config, Duration::from_secs(10))
    }

    /// As [`start`](Self::start), run under `wrapper` (e.g. valgrind and its options), which
    /// may take `timeout` to bring the sockets up.
    pub fn start_under(
        wrapper: &[String],
        bin: &Path,
        dir: &Path,
        config: &str,
        timeout: Duration,
    ) -> Result<Daemon, DutError> {
        Daemon::start_waiting(wrapper, bin, dir, config, timeout, true)
    }

    fn start_waiting(
        wrapper: &[String],
        bin: &Path,
        dir: &Path,
        config: &str,
        timeout: Duration,
        memif_socket: bool,
    ) -> Result<Daemon, DutError> {
        let conf = dir.join("veclane.toml");
        std::fs::write(&conf, config)
            .map_err(DutError::io(format!("writing {}", conf.display())))?;
        let log_path = dir.join("daemon.log");
        let log = std::fs::File::create(&log_path)
            .map_err(DutError::io(format!("creating {}", log_path.display())))?;
        let mut cmd = match wrapper.split_first() {
            Some((w, args)) => {
                let mut c = Command::new(w);
                c.args(args).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let child = cmd
            .arg("run")
            .arg("--config")
            .arg(&conf)
            .arg("--runtime-dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(DutError::io(format!("cannot start {}", bin.display())))?;
        let mut d = Daemon {
            child,
            dir: dir.to_path_buf(),
            netns: None,
        };
        let deadline = Instant::now() + timeout;
        // The sockets exist before the configuration is applied; a request is answered only
        // after (its interfaces are up then).
        let sockets =
            || dir.join("ctl.sock").exists() && (!memif_socket || dir.join("memif.sock").exists());
        while !(sockets() && d.call(&api::Request::ShowInterface { name: None }).is_ok()) {
            if let Ok(Some(st)) = d.child.try_wait() {
                return Err(DutError::Exited {
                    dut: DUT,
                    log: format!("({st}) {}", d.log()),
                });
            }
            if Instant::now() > deadline {
                return Err(DutError::Timeout {
                    dut: DUT,
                    what: "no control and memif sockets, or no answer on the control socket".into(),
                    waited: timeout,
                    log: d.log(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(d)
    }

    /// As [`start`](Self::start), for a daemon with no memif socket of its own (every
    /// interface a slave on another's): waits for its control socket only.
    pub fn start_without_memif_socket(
        bin: &Path,
        dir: &Path,
        config: &str,
    ) -> Result<Daemon, DutError> {
        Daemon::start_waiting(&[], bin, dir, config, Duration::from_secs(10), false)
    }

    /// As [`start_without_memif_socket`](Self::start_without_memif_socket), the daemon run
    /// inside network namespace `ns` (a node's, in a two-node topology).
    pub fn start_in_netns(
        ns: &str,
        bin: &Path,
        dir: &Path,
        config: &str,
    ) -> Result<Daemon, DutError> {
        let wrapper = ["ip", "netns", "exec", ns].map(String::from);
        Daemon::start_waiting(&wrapper, bin, dir, config, Duration::from_secs(10), false)
    }

    /// The daemon, keeping `ns` (the namespace it runs in) until it has stopped.
    pub fn holding(mut self, ns: crate::underlay::VethNetns) -> Daemon {
        self.netns = Some(ns);
        self
    }

    /// The process id (valgrind's, when run under it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `timeout` for the daemon to exit (it is killed after).
    pub fn stop_within(mut self, timeout: Duration) -> Result<(), DutError> {
        if stop_child(&mut self.child, Some(Signal::TERM), timeout) {
            Ok(())
        } else {
            Err(DutError::Killed {
                dut: DUT,
                waited: timeout,
            })
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log"))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    pub fn call(&self, req: &api::Request) -> Result<api::Reply, DutError> {
        api::Client::connect(&self.dir.join("ctl.sock"))
            .and_then(|mut c| c.call(req))
            .map_err(|e| DutError::reply(DUT, e.to_string()))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop_child(&mut self.child, Some(Signal::TERM), Duration::from_secs(5));
    }
}

impl RunningDut for Daemon {
    fn pid(&self) -> u32 {
        Daemon::pid(self)
    }

    fn counts(&mut self) -> Result<Option<Counts>, DutError> {
        let ifs = match self.call(&api::Request::ShowInterface { name: None })? {
            api::Reply::Interfaces { interfaces } => interfaces,
            other => return Err(DutError::reply(DUT, format!("show interface: {other:?}"))),
        };
        // Every memif interface faces the generator (in l3fwd it sends on one and receives
        // on the other; in the node scenarios it is the remote node and every pod at once),
        // and so does a kernel uplink (the node scenarios' kernel underlay).
        let facing = || {
            ifs.iter().filter(|i| {
                matches!(
                    i.device,
                    api::DeviceInfo::Memif { .. }
                        | api::DeviceInfo::AfPacket { .. }
                        | api::DeviceInfo::AfXdp { .. }
                )
            })
        };
        let mut c = Counts {
            rx: facing().map(|i| i.rx_packets).sum(),
            tx: facing().map(|i| i.tx_packets).sum(),
        };
        if let Some(ns) = &self.netns {
            // Over a veth, frames the kernel lost between the generator and the daemon are
            // the underlay's: those on the way in reached the uplink as far as the check is
            // concerned (the veth's drops, and the daemon's ring drops in its rx errors);
            // those on the way out left the daemon and never reached the generator's socket.
            // With XDP in veth's driver, a frame the socket could not take (ring full, no
            // fill buffer) is also a drop in veth's own counters: count it once.
            let l = ns.losses()?;
            let kernel_rx_errors: u64 = ifs
                .iter()
                .map(|i| match &i.device {
                    api::DeviceInfo::AfPacket { .. } => i.rx_errors,
                    api::DeviceInfo::AfXdp { attach, .. } if attach == "driver" => i.rx_no_buffer,
                    api::DeviceInfo::AfXdp { .. } => i.rx_errors,
                    _ => 0,
                })
                .sum();
            c.rx += kernel_rx_errors + l.into_dut;
            c.tx = c.tx.saturating_sub(l.out_of_dut);
        }
        Ok(Some(c))
    }

    fn drops(&mut self) -> String {
        match self.call(&api::Request::ShowErrors) {
            Ok(api::Reply::Errors { errors }) => errors
                .iter()
                .filter(|e| e.count > 0)
                .map(|e| format!("{}:{}={}", e.node, e.reason, e.count))
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        }
    }

    fn clear_runtime(&mut self) {
        let _ = self.call(&api::Request::Clear {
            what: api::Clear::Runtime,
        });
    }

    fn runtime(&mut self) -> Vec<api::WorkerRuntime> {
        match self.call(&api::Request::ShowRuntime) {
            Ok(api::Reply::Runtime { workers }) => workers,
            _ => Vec::new(),
        }
    }

    fn stop(self: Box<Self>, timeout: Duration) -> Result<(), DutError> {
        self.stop_within(timeout)
    }
}
