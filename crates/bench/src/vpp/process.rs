//! A running VPP: the process, its CLI (through `vppctl`), and what the harness reads of it
//! as a [`RunningDut`].

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::parse::{
    VppInterface, no_free_tx_slots, parse_base_ghz, parse_show_interface, parse_show_runtime,
};
use super::startup::{setup_commands, startup_conf};
use super::{DUT, SOCKET_ID, VppConfig, find_vppctl, memif_name};
use crate::dut::{Counts, RunningDut};
use crate::proc::DutError;

/// Whether configuration command `cmd` succeeded, judged by what the CLI printed: nothing,
/// or for `create interface memif` and `create vxlan tunnel` one line, the new interface's
/// name, and for `set acl-plugin acl` the new ACL's index.
pub fn check_reply(cmd: &str, out: &str) -> Result<(), DutError> {
    let out = out.trim();
    if out.is_empty() {
        return Ok(());
    }
    let created = [
        ("create interface memif", format!("memif{SOCKET_ID}/")),
        ("create vxlan tunnel", "vxlan_tunnel".to_string()),
        ("set acl-plugin acl ", "ACL index:".to_string()),
    ];
    if out.lines().count() == 1
        && created
            .iter()
            .any(|(c, name)| cmd.starts_with(c) && out.starts_with(name.as_str()))
    {
        return Ok(());
    }
    Err(DutError::reply(DUT, format!("refused `{cmd}`: {out}")))
}
/// A running VPP; stopped with SIGTERM (then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Vpp {
    child: Child,
    vppctl: PathBuf,
    /// The interfaces [`RunningDut::counts`] sums (see [`VppTopology`]).
    rx_from: Vec<String>,
    tx_to: Vec<String>,
    /// VPP's clock (the TSC) in ticks per nanosecond, from `show cpu`.
    tsc_per_ns: Option<f64>,
    command_line: String,
    dir: tempfile::TempDir,
}

/// Starts VPP (`vpp_bin -c DIR/startup.conf`), waits up to 30 s for its CLI, and configures
/// the l3fwd topology. `vppctl` defaults to [`find_vppctl`].
pub fn spawn(vpp_bin: &Path, vppctl: Option<&Path>, cfg: &VppConfig) -> Result<Vpp, DutError> {
    if !vpp_bin.is_file() {
        return Err(DutError::Missing(format!(
            "VPP not found at {}; install VPP or pass --vpp-bin",
            vpp_bin.display()
        )));
    }
    let vppctl = match vppctl {
        Some(p) if p.is_file() => p.to_path_buf(),
        Some(p) => {
            return Err(DutError::Missing(format!(
                "vppctl not found at {}",
                p.display()
            )));
        }
        None => find_vppctl(vpp_bin).ok_or_else(|| {
            DutError::Missing(format!(
                "vppctl not found next to {} or on PATH; VPP's CLI is driven through it (install VPP's vppctl)",
                vpp_bin.display()
            ))
        })?,
    };
    let dir = tempfile::Builder::new()
        .prefix("veclane-vpp")
        .tempdir()
        .map_err(DutError::io("cannot make a directory for VPP"))?;
    let conf = dir.path().join("startup.conf");
    let tag = crate::proc::instance_tag("vpp");
    std::fs::write(&conf, startup_conf(cfg, dir.path(), &tag))
        .map_err(DutError::io(format!("writing {}", conf.display())))?;
    let out_path = dir.path().join("vpp.out");
    let out_err = || DutError::io(format!("creating {}", out_path.display()));
    let out = File::create(&out_path).map_err(out_err())?;
    let err = out.try_clone().map_err(out_err())?;
    let child = Command::new(vpp_bin)
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(DutError::io(format!("cannot start {}", vpp_bin.display())))?;
    let mut vpp = Vpp {
        child,
        vppctl,
        rx_from: cfg.topology.rx_from.clone(),
        tx_to: cfg.topology.tx_to.clone(),
        tsc_per_ns: None,
        command_line: format!("{} -c {}", vpp_bin.display(), conf.display()),
        dir,
    };
    vpp.wait_cli(Duration::from_secs(30))?;
    let sock = vpp.memif_socket();
    for cmd in setup_commands(cfg, &sock) {
        let out = vpp.cli(&cmd)?;
        check_reply(&cmd, &out)
            .map_err(|e| DutError::reply(DUT, format!("{e}\n{}", vpp.log_tail(20))))?;
    }
    let ifs = vpp.interfaces()?;
    for name in cfg.topology.memifs.iter().map(|&(id, _)| memif_name(id)) {
        if !ifs.iter().any(|i| i.name == name && i.up) {
            return Err(DutError::reply(
                DUT,
                format!("no interface {name} up after configuration; show interface: {ifs:?}"),
            ));
        }
    }
    vpp.tsc_per_ns = parse_base_ghz(&vpp.cli("show cpu")?);
    Ok(vpp)
}

impl Vpp {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The socket VPP's memif masters listen on (a slave's is the one it was given).
    pub fn memif_socket(&self) -> PathBuf {
        self.dir.path().join("memif.sock")
    }

    /// The command that was run, for reports.
    pub fn command_line(&self) -> &str {
        &self.command_line
    }

    /// The startup configuration VPP was given.
    pub fn startup_conf(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("startup.conf")).unwrap_or_default()
    }

    fn cli_socket(&self) -> PathBuf {
        self.dir.path().join("cli.sock")
    }

    fn wait_cli(&mut self, timeout: Duration) -> Result<(), DutError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(DutError::Exited {
                    dut: DUT,
                    log: format!(
                        "({st}) while starting; command: {}\noutput:\n{}",
                        self.command_line,
                        self.log_tail(20)
                    ),
                });
            }
            if self.cli_socket().exists()
                && let Ok(v) = self.cli("show version")
                && v.contains("vpp")
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(DutError::Timeout {
                    dut: DUT,
                    what: format!("no answer on the CLI ({})", self.cli_socket().display()),
                    waited: timeout,
                    log: format!(
                        "command: {}\noutput:\n{}",
                        self.command_line,
                        self.log_tail(20)
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs one CLI command (`vppctl -s DIR/cli.sock CMD`) and returns what it printed.
    pub fn cli(&self, cmd: &str) -> Result<String, DutError> {
        let o = Command::new(&self.vppctl)
            .arg("-s")
            .arg(self.cli_socket())
            .args(cmd.split_whitespace())
            .stdin(Stdio::null())
            .output()
            .map_err(DutError::io(format!(
                "cannot run {}",
                self.vppctl.display()
            )))?;
        if !o.status.success() {
            return Err(DutError::reply(
                DUT,
                format!(
                    "vppctl `{cmd}` failed ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).replace('\r', ""))
    }

    /// Every interface's counters (`show interface`).
    pub fn interfaces(&self) -> Result<Vec<VppInterface>, DutError> {
        let out = self.cli("show interface")?;
        let v = parse_show_interface(&out);
        if v.is_empty() {
            return Err(DutError::reply(
                DUT,
                format!("cannot parse show interface: {out}"),
            ));
        }
        Ok(v)
    }

    /// Zeroes the interface counters (`clear interfaces`).
    pub fn clear_counters(&self) -> Result<(), DutError> {
        let out = self.cli("clear interfaces")?;
        check_reply("clear interfaces", &out)
    }

    /// The last `n` lines of VPP's output and log.
    pub fn log_tail(&self, n: usize) -> String {
        let mut s = std::fs::read_to_string(self.dir.path().join("vpp.out")).unwrap_or_default();
        s.push_str(&std::fs::read_to_string(self.dir.path().join("vpp.log")).unwrap_or_default());
        let v: Vec<&str> = s.lines().rev().take(n).collect();
        v.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Stops VPP (SIGTERM, SIGKILL after 5 s).
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        crate::proc::stop_child(
            &mut self.child,
            Some(rustix::process::Signal::TERM),
            Duration::from_secs(5),
        );
    }
}

impl RunningDut for Vpp {
    fn pid(&self) -> u32 {
        Vpp::pid(self)
    }

    fn counts(&mut self) -> Result<Option<Counts>, DutError> {
        let ifs = self.interfaces()?;
        let sum = |names: &[String], count: fn(&VppInterface) -> u64| {
            names.iter().try_fold(0u64, |acc, name| {
                ifs.iter()
                    .find(|i| i.name == *name)
                    .map(|i| acc + count(i))
                    .ok_or_else(|| DutError::reply(DUT, format!("no interface {name}")))
            })
        };
        // VPP counts a frame as sent in interface-output, before its memif device finds the
        // peer's ring full and drops it (error `no free tx slots` of node `<if>-tx`): those
        // never reached the generator.
        let errors = self.cli("show errors")?;
        let dropped: u64 = self
            .tx_to
            .iter()
            .map(|i| no_free_tx_slots(&errors, i))
            .sum();
        Ok(Some(Counts {
            rx: sum(&self.rx_from, |i| i.rx_packets)?,
            tx: sum(&self.tx_to, |i| i.tx_packets)? - dropped,
        }))
    }

    fn drops(&mut self) -> String {
        self.interfaces()
            .map(|ifs| {
                ifs.iter()
                    .filter(|i| i.drops + i.rx_miss + i.tx_error > 0)
                    .map(|i| {
                        format!(
                            "{}: drops={} rx-miss={} tx-error={}",
                            i.name, i.drops, i.rx_miss, i.tx_error
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    }

    fn clear_runtime(&mut self) {
        let _ = self.cli("clear runtime");
    }

    /// The workers' `show runtime` (VPP's main thread left out: it polls nothing once there
    /// are workers), clocks converted to nanoseconds; empty where VPP's TSC rate is unknown.
    fn runtime(&mut self) -> Vec<api::WorkerRuntime> {
        match (self.tsc_per_ns, self.cli("show runtime")) {
            (Some(tsc), Ok(out)) => parse_show_runtime(&out, tsc),
            _ => Vec::new(),
        }
    }

    fn stop(self: Box<Self>, _timeout: Duration) -> Result<(), DutError> {
        Vpp::stop(*self);
        Ok(())
    }
}

impl Drop for Vpp {
    fn drop(&mut self) {
        self.terminate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vpp::find;

    #[test]
    fn replies() {
        assert!(check_reply("set interface state memif1/0 up", "\n").is_ok());
        assert!(
            check_reply(
                "create interface memif id 0 socket-id 1 master",
                "memif1/0\n"
            )
            .is_ok()
        );
        let e = check_reply(
            "set ip neighbor memif1/1 10.10.2.2 02:00:00:00:00:01 static",
            "set ip neighbor: unknown input `static'\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("unknown input") && e.contains("set ip neighbor memif1/1"),
            "{e}"
        );
        assert!(check_reply("create interface memif id 0", "memif1/0\nwarning\n").is_err());
        assert!(check_reply("create vxlan tunnel src 1.1.1.1", "vxlan_tunnel3\n").is_ok());
        assert!(check_reply("create vxlan tunnel src 1.1.1.1", "memif1/0\n").is_err());
        assert!(check_reply("create interface memif id 0", "vxlan_tunnel0\n").is_err());
        assert!(check_reply("set acl-plugin acl permit src 0.0.0.0/0", "ACL index:0\n").is_ok());
        assert!(check_reply("set acl-plugin acl permit src 0.0.0.0/0", "failed\n").is_err());
    }

    #[test]
    fn missing_binaries_are_named() {
        let e = spawn(Path::new("/nonexistent/vpp"), None, &VppConfig::new(0, 1)).unwrap_err();
        assert!(matches!(e, DutError::Missing(_)), "{e}");
        assert_eq!(
            e.to_string(),
            "VPP not found at /nonexistent/vpp; install VPP or pass --vpp-bin"
        );
        // A vpp without a vppctl beside it or on PATH (PATH is not changed here: an explicit
        // vppctl that does not exist takes the same path).
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("vpp");
        std::fs::write(&fake, "").unwrap();
        let e = spawn(
            &fake,
            Some(Path::new("/nonexistent/vppctl")),
            &VppConfig::new(0, 1),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("vppctl not found at /nonexistent/vppctl"), "{e}");
        assert_eq!(find(Some(Path::new("/nonexistent/vpp"))), None);
        assert_eq!(find(Some(&fake)), Some(fake));
    }
}
