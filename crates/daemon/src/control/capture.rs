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
        let path = {
            let p = PathBuf::from(file);
            if p.is_absolute() {
                p
            } else {
                self.runtime_dir.join(p)
            }
        };
        let unwritable = |source| ControlError::Write {
            path: path.display().to_string(),
            source,
        };
        // Fail now rather than after the capture.
        std::fs::File::create(&path).map_err(unwritable)?;
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
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).map_err(unwritable)?);
        graph::capture::write_pcap(&mut f, &all, SNAPLEN)
            .and_then(|()| std::io::Write::flush(&mut f))
            .map_err(unwritable)?;
        Ok(Reply::Pcap {
            file: path.display().to_string(),
            packets: all.len() as u64,
            missed,
        })
    }
}
