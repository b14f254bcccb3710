//! `pcap trace`: workers record packets at the chosen points; the control thread merges
//! their records in time order and writes one pcap file when the capture stops.

use std::path::PathBuf;

use api::{CapturePoint, Reply};

use super::{Control, ControlError};
use crate::worker::WorkerCmd;

/// Packets `pcap trace` keeps per worker unless told otherwise.
const PCAP_DEFAULT_MAX: u32 = 100_000;
/// Bytes kept of each packet.
const SNAPLEN: u32 = 9216;

/// A running capture: where it goes and how many packets it keeps.
pub(super) struct Capture {
    path: PathBuf,
    max: u32,
}

impl Control {
    pub(super) fn pcap_on(
        &mut self,
        points: &[CapturePoint],
        interface: &str,
        file: &str,
        max_packets: Option<u32>,
    ) -> Result<Reply, ControlError> {
        if self.pcap.is_some() {
            return Err(ControlError::Capture(
                "a capture is running already: `pcap trace off` first".into(),
            ));
        }
        let ifindex = if interface == "any" {
            None
        } else {
            Some(self.iface_index(interface)?)
        };
        let path = self.capture_path(file)?;
        // Fail now rather than after the capture.
        create(&path)?;
        let max = max_packets.unwrap_or(PCAP_DEFAULT_MAX);
        let f = graph::Filter {
            rx: points.contains(&CapturePoint::Rx),
            tx: points.contains(&CapturePoint::Tx),
            drop: points.contains(&CapturePoint::Drop),
            ifindex,
            max_packets: max as usize,
            snaplen: SNAPLEN as usize,
        };
        for w in &self.workers {
            w.send(WorkerCmd::PcapStart(f.clone()));
        }
        self.pcap = Some(Capture { path, max });
        Ok(Reply::Ok)
    }

    pub(super) fn pcap_off(&mut self) -> Result<Reply, ControlError> {
        let Some(Capture { path, max }) = self.pcap.take() else {
            return Err(ControlError::Capture(
                "no capture is running (`pcap trace rx on IF FILE` starts one)".into(),
            ));
        };
        let mut all = Vec::new();
        let mut missed = 0;
        for (p, m) in self.ask(WorkerCmd::PcapStop)? {
            all.extend(p);
            missed += m;
        }
        all.sort_by_key(|c| c.unix_ns);
        if all.len() > max as usize {
            missed += (all.len() - max as usize) as u64;
            all.truncate(max as usize);
        }
        let unwritable = |source| ControlError::Write {
            path: path.display().to_string(),
            source,
        };
        let mut f = std::io::BufWriter::new(create(&path)?);
        graph::capture::write_pcap(&mut f, &all, SNAPLEN)
            .and_then(|()| std::io::Write::flush(&mut f))
            .map_err(unwritable)?;
        Ok(Reply::Pcap {
            file: path.display().to_string(),
            packets: all.len() as u64,
            missed,
        })
    }

    /// Where a trace named `file` goes: `file` inside the capture directory (`[daemon]
    /// capture-dir`, default the runtime directory), named by itself or by a path whose
    /// directory is that one. Anything else (another directory, `..`, a path through a
    /// symbolic link to elsewhere) is refused: whoever may use the control socket may not
    /// make the daemon, which runs as root, write where it likes.
    fn capture_path(&self, file: &str) -> Result<PathBuf, ControlError> {
        let p = PathBuf::from(file);
        let p = if p.is_absolute() {
            p
        } else {
            self.capture_dir.join(p)
        };
        let outside = || {
            ControlError::Capture(format!(
                "pcap file {file}: not in the capture directory {} ([daemon] capture-dir)",
                self.capture_dir.display()
            ))
        };
        let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
            return Err(outside());
        };
        let inside = match (dir.canonicalize(), self.capture_dir.canonicalize()) {
            (Ok(d), Ok(c)) => d == c,
            _ => false,
        };
        if !inside || name == ".." {
            return Err(outside());
        }
        Ok(dir.join(name))
    }
}

/// Creates (or truncates) a trace file, refusing a symbolic link in its place (O_NOFOLLOW):
/// one planted there would send the write elsewhere.
fn create(path: &std::path::Path) -> Result<std::fs::File, ControlError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|source| ControlError::Write {
            path: path.display().to_string(),
            source,
        })
}
