//! Packet capture (`pcap trace`): copies of the packets seen at one or more capture points,
//! kept in memory by the worker and written out by the control thread when capture stops, as
//! VPP does. The packet path pays one branch per frame while capture is off.

use buffer::Pool;

/// Where a packet was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Point {
    /// As an input node produced it.
    Rx,
    /// As an output node sent it.
    Tx,
    /// As `error-drop` freed it.
    Drop,
}

/// What to capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub rx: bool,
    pub tx: bool,
    pub drop: bool,
    /// Only packets of this interface (rx interface for rx and drop, tx interface for tx);
    /// `None` captures every interface.
    pub ifindex: Option<u32>,
    /// Packets to keep; later ones are counted but not copied.
    pub max_packets: usize,
    /// Bytes of each packet to keep (the snap length).
    pub snaplen: usize,
}

/// One captured packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
    pub point: Point,
    pub ifindex: u32,
    /// The packet's length on the wire (may exceed `data.len()`).
    pub len: u32,
    pub data: Vec<u8>,
}

/// A worker's capture state.
#[derive(Debug, Default)]
pub struct Capture {
    filter: Option<Filter>,
    packets: Vec<Captured>,
    /// Matching packets not kept because `max_packets` was reached.
    pub missed: u64,
}

impl Capture {
    pub fn start(&mut self, f: Filter) {
        self.packets.clear();
        self.missed = 0;
        self.filter = Some(f);
    }

    /// Stops capturing and hands over what was captured.
    pub fn stop(&mut self) -> (Vec<Captured>, u64) {
        self.filter = None;
        (
            std::mem::take(&mut self.packets),
            std::mem::take(&mut self.missed),
        )
    }

    pub fn filter(&self) -> Option<&Filter> {
        self.filter.as_ref()
    }

    pub fn captured(&self) -> usize {
        self.packets.len()
    }

    /// Whether any packet at `point` could be captured (one check per frame).
    #[inline]
    pub fn wants(&self, point: Point) -> bool {
        match &self.filter {
            None => false,
            Some(f) => match point {
                Point::Rx => f.rx,
                Point::Tx => f.tx,
                Point::Drop => f.drop,
            },
        }
    }

    /// Records buffer chain `b` seen at `point` on interface `ifindex`, if the filter says so.
    pub fn record(&mut self, pool: &Pool, point: Point, ifindex: u32, b: u32) {
        let Some(f) = &self.filter else { return };
        if !self.wants(point) || f.ifindex.is_some_and(|i| i != ifindex) {
            return;
        }
        if self.packets.len() >= f.max_packets {
            self.missed += 1;
            return;
        }
        let snap = f.snaplen;
        let mut data = Vec::new();
        pool.read_chain(b, &mut data);
        let len = data.len() as u32;
        data.truncate(snap);
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        self.packets.push(Captured {
            unix_ns,
            point,
            ifindex,
            len,
            data,
        });
    }
}

/// Writes packets as a classic pcap file (microsecond timestamps, Ethernet link type).
pub fn write_pcap(
    w: &mut impl std::io::Write,
    packets: &[Captured],
    snaplen: u32,
) -> std::io::Result<()> {
    let mut hdr = Vec::with_capacity(24);
    hdr.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    hdr.extend_from_slice(&2u16.to_le_bytes());
    hdr.extend_from_slice(&4u16.to_le_bytes());
    hdr.extend_from_slice(&0i32.to_le_bytes());
    hdr.extend_from_slice(&0u32.to_le_bytes());
    hdr.extend_from_slice(&snaplen.to_le_bytes());
    hdr.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    w.write_all(&hdr)?;
    for p in packets {
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&((p.unix_ns / 1_000_000_000) as u32).to_le_bytes());
        r[4..8].copy_from_slice(&((p.unix_ns % 1_000_000_000 / 1000) as u32).to_le_bytes());
        r[8..12].copy_from_slice(&(p.data.len() as u32).to_le_bytes());
        r[12..16].copy_from_slice(&p.len.to_le_bytes());
        w.write_all(&r)?;
        w.write_all(&p.data)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use buffer::PoolConfig;

    #[test]
    fn filter_and_limits() {
        let mut pool = Pool::new(PoolConfig {
            count: 8,
            data_size: 64,
            headroom: 0,
        })
        .unwrap();
        let b = pool.from_bytes(&[7u8; 100]).unwrap();
        let mut c = Capture::default();
        c.record(&pool, Point::Rx, 0, b);
        assert_eq!(c.captured(), 0, "off captures nothing");
        c.start(Filter {
            rx: true,
            tx: false,
            drop: false,
            ifindex: Some(3),
            max_packets: 2,
            snaplen: 80,
        });
        assert!(c.wants(Point::Rx) && !c.wants(Point::Tx));
        c.record(&pool, Point::Rx, 2, b);
        c.record(&pool, Point::Tx, 3, b);
        c.record(&pool, Point::Rx, 3, b);
        c.record(&pool, Point::Rx, 3, b);
        c.record(&pool, Point::Rx, 3, b);
        let (p, missed) = c.stop();
        assert_eq!((p.len(), missed), (2, 1));
        assert_eq!((p[0].len, p[0].data.len()), (100, 80));
        let mut file = Vec::new();
        write_pcap(&mut file, &p, 80).unwrap();
        assert_eq!(file.len(), 24 + 2 * (16 + 80));
        assert_eq!(&file[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(
            u32::from_le_bytes(file[24 + 8..24 + 12].try_into().unwrap()),
            80
        );
        assert_eq!(
            u32::from_le_bytes(file[24 + 12..24 + 16].try_into().unwrap()),
            100
        );
        pool.free(b);
    }
}
