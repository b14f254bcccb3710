//! Generated frames: Ethernet / IPv4 / UDP / probe / filler.
//!
//! Frame size means the bytes in the memif buffer: Ethernet header through the last payload
//! byte, no FCS (what `dpdk-testpmd --txpkts` means too). The probe sits right after the UDP
//! header: magic (u16), stream (u16), sequence (u64), send time in ns (u64), little-endian.

use core::net::Ipv4Addr;

use wire::{EtherType, Ethernet, IpProtocol, Ipv4, MacAddr, Udp};

pub const PROBE_MAGIC: u16 = 0x4c56; // "VL"
/// Offset of the probe: 14 (Ethernet) + 20 (IPv4) + 8 (UDP).
pub const PROBE_OFFSET: usize = 42;
pub const PROBE_LEN: usize = 20;
/// Offset of the UDP source port, varied per flow.
pub const SRC_PORT_OFFSET: usize = 34;
/// Offsets of the IPv4 header checksum and destination address, varied with `dst_ips`.
pub const IP_CHECK_OFFSET: usize = 24;
pub const DST_IP_OFFSET: usize = 30;
pub const MIN_FRAME: usize = PROBE_OFFSET + PROBE_LEN + 2;
pub const MAX_FRAME: usize = 9216;

/// What the generator sends.
#[derive(Debug, Clone)]
pub struct FrameSpec {
    pub size: usize,
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
    /// UDP source ports: `src_port .. src_port + flows`.
    pub flows: u16,
    /// Destination addresses: `dst_ip .. dst_ip + dst_ips`. Frames cycle through every
    /// (port, address) pair, `flows × dst_ips` flows in all.
    pub dst_ips: u16,
}

impl Default for FrameSpec {
    fn default() -> Self {
        FrameSpec {
            size: 64,
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
            src_ip: Ipv4Addr::new(10, 10, 1, 2),
            dst_ip: Ipv4Addr::new(10, 10, 2, 2),
            src_port: 1024,
            dst_port: 5001,
            flows: 1,
            dst_ips: 1,
        }
    }
}

/// Why a frame spec is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

impl FrameSpec {
    pub fn validate(&self) -> Result<(), SpecError> {
        if !(MIN_FRAME..=MAX_FRAME).contains(&self.size) {
            return Err(SpecError(format!(
                "frame size {} must be {MIN_FRAME}..={MAX_FRAME}",
                self.size
            )));
        }
        if self.flows == 0 {
            return Err(SpecError("flows must be at least 1".into()));
        }
        if self.dst_ips == 0 {
            return Err(SpecError("destination addresses must be at least 1".into()));
        }
        if u32::from(self.dst_ip)
            .checked_add(u32::from(self.dst_ips) - 1)
            .is_none()
        {
            return Err(SpecError(format!(
                "{} destination addresses from {} run past 255.255.255.255",
                self.dst_ips, self.dst_ip
            )));
        }
        Ok(())
    }

    /// The full frame for sequence 0 of stream 0; filler bytes count up from the probe.
    pub fn template(&self) -> Result<Vec<u8>, SpecError> {
        self.validate()?;
        let mut f = vec![0u8; self.size];
        for (i, b) in f[PROBE_OFFSET + PROBE_LEN..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let bad = |e: wire::Error| SpecError(format!("cannot build frame: {e}"));
        let mut eth = Ethernet::new_checked(&mut f[..]).map_err(bad)?;
        eth.set_dst(self.dst_mac);
        eth.set_src(self.src_mac);
        eth.set_ethertype(EtherType::Ipv4);
        let udp_len = self.size - 14 - 20;
        Ipv4::emit(
            &mut f[14..],
            self.src_ip,
            self.dst_ip,
            IpProtocol::Udp,
            64,
            udp_len,
        )
        .map_err(bad)?;
        // UDP checksum 0 ("none", allowed in IPv4): the probe changes every frame.
        Udp::emit(&mut f[34..], self.src_port, self.dst_port, udp_len - 8).map_err(bad)?;
        Ok(f)
    }

    #[inline]
    pub fn src_port_for(&self, seq: u64) -> u16 {
        self.src_port
            .wrapping_add((seq % u64::from(self.flows)) as u16)
    }

    /// The destination address of frame `seq`: the address steps once per round of ports.
    #[inline]
    pub fn dst_ip_for(&self, seq: u64) -> Ipv4Addr {
        let k = (seq / u64::from(self.flows)) % u64::from(self.dst_ips);
        Ipv4Addr::from(u32::from(self.dst_ip).wrapping_add(k as u32))
    }

    /// Writes frame `seq`'s source port, and (with several destination addresses) its
    /// destination address and IPv4 header checksum, into `head` (the frame's first bytes,
    /// at least through the UDP header, holding the template's).
    #[inline]
    pub fn patch(&self, head: &mut [u8], seq: u64) {
        let port = self.src_port_for(seq);
        head[SRC_PORT_OFFSET..SRC_PORT_OFFSET + 2].copy_from_slice(&port.to_be_bytes());
        if self.dst_ips > 1 {
            head[DST_IP_OFFSET..DST_IP_OFFSET + 4].copy_from_slice(&self.dst_ip_for(seq).octets());
            head[IP_CHECK_OFFSET..IP_CHECK_OFFSET + 2].fill(0);
            let c = wire::checksum::checksum(&head[14..34]);
            head[IP_CHECK_OFFSET..IP_CHECK_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
}

/// The per-frame fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub stream: u16,
    pub seq: u64,
    pub sent_ns: u64,
}

impl Probe {
    #[inline]
    pub fn encode(&self) -> [u8; PROBE_LEN] {
        let mut b = [0u8; PROBE_LEN];
        b[0..2].copy_from_slice(&PROBE_MAGIC.to_le_bytes());
        b[2..4].copy_from_slice(&self.stream.to_le_bytes());
        b[4..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..20].copy_from_slice(&self.sent_ns.to_le_bytes());
        b
    }

    /// Reads the probe of a received frame; `None` if it is not one of ours.
    #[inline]
    pub fn parse(frame: &[u8]) -> Option<Probe> {
        let b = frame.get(PROBE_OFFSET..PROBE_OFFSET + PROBE_LEN)?;
        if u16::from_le_bytes([b[0], b[1]]) != PROBE_MAGIC || frame[12..14] != [0x08, 0x00] {
            return None;
        }
        Some(Probe {
            stream: u16::from_le_bytes([b[2], b[3]]),
            seq: u64::from_le_bytes(b[4..12].try_into().ok()?),
            sent_ns: u64::from_le_bytes(b[12..20].try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cycle_through_ports_and_addresses_with_valid_checksums() {
        let spec = FrameSpec {
            flows: 3,
            dst_ips: 2,
            ..Default::default()
        };
        let t = spec.template().unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for seq in 0..12u64 {
            let mut f = t.clone();
            spec.patch(&mut f, seq);
            let h: &[u8; 20] = f[14..34].try_into().unwrap();
            assert!(wire::checksum::ipv4_header_ok(h), "seq {seq}");
            let dst = Ipv4Addr::new(f[30], f[31], f[32], f[33]);
            let port = u16::from_be_bytes([f[34], f[35]]);
            seen.insert((dst, port));
        }
        // 3 ports x 2 addresses, every pair seen.
        assert_eq!(seen.len(), 6, "{seen:?}");
        assert!(seen.contains(&(Ipv4Addr::new(10, 10, 2, 3), 1026)));
        // One address: the header is left as the template made it.
        let one = FrameSpec::default();
        let mut f = one.template().unwrap();
        let before = f[14..34].to_vec();
        one.patch(&mut f, 5);
        assert_eq!(&f[14..34], &before[..]);
        assert!(
            FrameSpec {
                dst_ip: Ipv4Addr::new(255, 255, 255, 250),
                dst_ips: 10,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
    }

    #[test]
    fn template_is_a_valid_udp_frame() {
        let spec = FrameSpec {
            size: 128,
            ..Default::default()
        };
        let mut f = spec.template().unwrap();
        f[PROBE_OFFSET..PROBE_OFFSET + PROBE_LEN].copy_from_slice(
            &Probe {
                stream: 3,
                seq: 77,
                sent_ns: 5,
            }
            .encode(),
        );
        let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
            panic!("not ipv4")
        };
        assert_eq!(ip.header().total_len(), 128 - 14);
        assert_eq!(ip.header().destination_addr(), spec.dst_ip);
        let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
            panic!("not udp")
        };
        assert_eq!(
            (u.source_port(), u.destination_port(), u.length()),
            (1024, 5001, 128 - 34)
        );
        assert!(wire::Ipv4::new_checked(&f[14..]).unwrap().checksum_ok());
        assert_eq!(
            Probe::parse(&f),
            Some(Probe {
                stream: 3,
                seq: 77,
                sent_ns: 5
            })
        );
    }

    #[test]
    fn sizes_are_bounded() {
        for size in [MIN_FRAME - 1, MAX_FRAME + 1] {
            assert!(
                FrameSpec {
                    size,
                    ..Default::default()
                }
                .template()
                .is_err()
            );
        }
        assert_eq!(
            FrameSpec {
                size: 64,
                ..Default::default()
            }
            .template()
            .unwrap()
            .len(),
            64
        );
        assert_eq!(
            FrameSpec {
                size: 9000,
                ..Default::default()
            }
            .template()
            .unwrap()
            .len(),
            9000
        );
        assert_eq!(Probe::parse(&[0u8; 63]), None);
    }
}
