//! Generated frames: Ethernet / IPv4 / UDP / probe / filler, optionally inside VXLAN.
//!
//! Frame size means the bytes in the memif buffer: Ethernet header through the last payload
//! byte, no FCS (what `dpdk-testpmd --txpkts` means too). The probe sits right after the UDP
//! header: magic (u16), stream (u16), sequence (u64), send time in ns (u64), little-endian.
//!
//! With [`FrameSpec::vxlan`] the frame is what a remote node's VTEP puts on the underlay: the
//! frame above (the *inner* frame, `size` bytes) behind an outer Ethernet, IPv4 (DF, TTL 64),
//! UDP (to port 4789, checksum 0) and VXLAN header (RFC 7348), 50 bytes more in all. With
//! [`FrameSpec::networks`] the frames spread over several networks: network `k` adds `k` to
//! the second octet of both inner addresses (10.10.x.y becomes 10.(10+k).x.y) and to the VNI.

use core::net::Ipv4Addr;

use wire::{EtherType, Ethernet, IpProtocol, Ipv4, MacAddr, Udp, Vxlan, VxlanRepr};

pub const PROBE_MAGIC: u16 = 0x4c56; // "VL"
/// Offset of the probe in a plain frame: 14 (Ethernet) + 20 (IPv4) + 8 (UDP).
pub const PROBE_OFFSET: usize = 42;
pub const PROBE_LEN: usize = 20;
/// Bytes VXLAN over IPv4 puts in front of the inner frame.
pub const VXLAN_OVERHEAD: usize = wire::vxlan::IPV4_OVERHEAD;
/// The most header bytes a frame's probe can end at: a probe inside VXLAN.
pub const MAX_HEAD: usize = VXLAN_OVERHEAD + PROBE_OFFSET + PROBE_LEN;
/// Offset of the UDP source port, varied per flow (of the inner frame).
pub const SRC_PORT_OFFSET: usize = 34;
/// Offsets of the IPv4 header checksum and addresses, varied with `dst_ips` and `networks`
/// (of the inner frame).
pub const IP_CHECK_OFFSET: usize = 24;
pub const SRC_IP_OFFSET: usize = 26;
pub const DST_IP_OFFSET: usize = 30;
/// Offset of the VNI in a VXLAN frame.
pub const VNI_OFFSET: usize = 46;
pub const MIN_FRAME: usize = PROBE_OFFSET + PROBE_LEN + 2;
pub const MAX_FRAME: usize = 9216;

/// The outer headers of frames sent into a VXLAN tunnel: from the remote VTEP (`src_*`) to
/// the node's (`dst_*`), VNI `vni` for network 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanSpec {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub vni: u32,
}

/// What the generator sends.
#[derive(Debug, Clone)]
pub struct FrameSpec {
    /// The (inner) frame's size; with `vxlan` the frame on the wire is 50 bytes longer.
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
    /// Send the frames inside VXLAN with these outer headers.
    pub vxlan: Option<VxlanSpec>,
    /// Spread the frames over this many networks, in turn (see the module doc).
    pub networks: u16,
    /// Network `k`'s (inner) destination MAC, one per network (a switch's MAC in a network
    /// may differ per network, as a VXLAN tunnel's does per VNI); empty: `dst_mac` in all.
    pub dst_macs: Vec<MacAddr>,
    /// (Inner) frame sizes taken in turn, frame by frame (an IMIX); `size` is then the
    /// largest of them. Empty: every frame is `size`.
    pub mix: Vec<usize>,
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
            vxlan: None,
            networks: 1,
            dst_macs: Vec::new(),
            mix: Vec::new(),
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
        if self.wire_len() > MAX_FRAME {
            return Err(SpecError(format!(
                "frame size {} with VXLAN is {} bytes on the wire, more than {MAX_FRAME}",
                self.size,
                self.wire_len()
            )));
        }
        if !self.mix.is_empty() && self.mix.iter().max() != Some(&self.size) {
            return Err(SpecError(format!(
                "the largest of the mixed sizes {:?} must be the frame size {}",
                self.mix, self.size
            )));
        }
        if let Some(s) = self.mix.iter().find(|&&s| s < MIN_FRAME) {
            return Err(SpecError(format!(
                "mixed frame size {s} is under the smallest, {MIN_FRAME}"
            )));
        }
        if self.flows == 0 {
            return Err(SpecError("flows must be at least 1".into()));
        }
        if self.dst_ips == 0 {
            return Err(SpecError("destination addresses must be at least 1".into()));
        }
        if self.networks == 0 {
            return Err(SpecError("networks must be at least 1".into()));
        }
        if !self.dst_macs.is_empty() && self.dst_macs.len() != usize::from(self.networks) {
            return Err(SpecError(format!(
                "{} destination MACs for {} networks",
                self.dst_macs.len(),
                self.networks
            )));
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
        let last = u32::from(self.networks) - 1;
        for a in [self.src_ip, self.dst_ip] {
            if u32::from(a.octets()[1]) + last > 255 {
                return Err(SpecError(format!(
                    "{} networks from {a} run past the second octet's 255",
                    self.networks
                )));
            }
        }
        if let Some(v) = &self.vxlan
            && v.vni + last > wire::vxlan::MAX_VNI
        {
            return Err(SpecError(format!(
                "{} networks from VNI {} run past the largest VNI {}",
                self.networks,
                v.vni,
                wire::vxlan::MAX_VNI
            )));
        }
        Ok(())
    }

    /// Where the inner frame starts: 0, or 50 behind VXLAN.
    #[inline]
    pub fn inner_offset(&self) -> usize {
        if self.vxlan.is_some() {
            VXLAN_OVERHEAD
        } else {
            0
        }
    }

    /// Where the probe starts in the frame on the wire.
    #[inline]
    pub fn probe_offset(&self) -> usize {
        self.inner_offset() + PROBE_OFFSET
    }

    /// The frame's length on the wire: `size`, plus 50 with VXLAN.
    #[inline]
    pub fn wire_len(&self) -> usize {
        self.inner_offset() + self.size
    }

    /// The (inner) size of frame number `c`: `size`, or the mix's entry for it.
    #[inline]
    pub fn size_of(&self, c: u64) -> usize {
        if self.mix.is_empty() {
            self.size
        } else {
            self.mix[(c % self.mix.len() as u64) as usize]
        }
    }

    /// Writes the lengths of a frame whose inner frame is `size` bytes into `head` (its
    /// headers, as [`FrameSpec::patch`] takes them): the inner IPv4 and UDP lengths and the
    /// IPv4 checksum, and with VXLAN the outer ones. For a mix; a frame of `size` needs none.
    #[inline]
    pub fn set_len(&self, head: &mut [u8], size: usize) {
        let o = self.inner_offset();
        let ip_len = (size - 14) as u16;
        let set = |h: &mut [u8], ip_len: u16| {
            h[16..18].copy_from_slice(&ip_len.to_be_bytes());
            h[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
            h[IP_CHECK_OFFSET..IP_CHECK_OFFSET + 2].fill(0);
            let c = wire::checksum::checksum(&h[14..34]);
            h[IP_CHECK_OFFSET..IP_CHECK_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
        };
        set(&mut head[o..], ip_len);
        if o != 0 {
            set(head, ip_len + o as u16);
        }
    }

    /// The full frame for sequence 0 of stream 0 in network 0; filler bytes count up from
    /// the probe.
    pub fn template(&self) -> Result<Vec<u8>, SpecError> {
        self.validate()?;
        let o = self.inner_offset();
        let mut f = vec![0u8; self.wire_len()];
        for (i, b) in f[o + PROBE_OFFSET + PROBE_LEN..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let bad = |e: wire::Error| SpecError(format!("cannot build frame: {e}"));
        if let Some(v) = &self.vxlan {
            let mut eth = Ethernet::new_checked(&mut f[..]).map_err(bad)?;
            eth.set_dst(v.dst_mac);
            eth.set_src(v.src_mac);
            eth.set_ethertype(EtherType::Ipv4);
            let udp_len = self.wire_len() - 14 - 20;
            Ipv4::emit(
                &mut f[14..],
                v.src_ip,
                v.dst_ip,
                IpProtocol::Udp,
                64,
                udp_len,
            )
            .map_err(bad)?;
            Udp::emit(&mut f[34..], 0xc000, wire::vxlan::UDP_PORT, udp_len - 8).map_err(bad)?;
            VxlanRepr { vni: v.vni }
                .emit(&mut Vxlan::new_unchecked(&mut f[42..]))
                .map_err(bad)?;
        }
        let inner = &mut f[o..];
        let mut eth = Ethernet::new_checked(&mut inner[..]).map_err(bad)?;
        eth.set_dst(self.dst_macs.first().copied().unwrap_or(self.dst_mac));
        eth.set_src(self.src_mac);
        eth.set_ethertype(EtherType::Ipv4);
        let udp_len = self.size - 14 - 20;
        Ipv4::emit(
            &mut inner[14..],
            self.src_ip,
            self.dst_ip,
            IpProtocol::Udp,
            64,
            udp_len,
        )
        .map_err(bad)?;
        // UDP checksum 0 ("none", allowed in IPv4): the probe changes every frame.
        Udp::emit(&mut inner[34..], self.src_port, self.dst_port, udp_len - 8).map_err(bad)?;
        Ok(f)
    }

    #[inline]
    pub fn src_port_for(&self, seq: u64) -> u16 {
        self.src_port.wrapping_add(rem(seq, self.flows) as u16)
    }

    /// The destination address of frame `seq` in network 0: the address steps once per
    /// round of ports.
    #[inline]
    pub fn dst_ip_for(&self, seq: u64) -> Ipv4Addr {
        let k = (seq / u64::from(self.flows)) % u64::from(self.dst_ips);
        Ipv4Addr::from(u32::from(self.dst_ip).wrapping_add(k as u32))
    }

    /// `a` moved into network `net` (its second octet plus `net`).
    #[inline]
    pub fn in_network(a: Ipv4Addr, net: u16) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(a).wrapping_add(u32::from(net) << 16))
    }

    /// Whether [`patch`](Self::patch) writes the same bytes into every frame (one flow, one
    /// destination, one network): then a buffer that holds a patched frame's header needs
    /// only the next probe.
    pub fn patch_is_constant(&self) -> bool {
        self.flows <= 1 && self.dst_ips <= 1 && self.networks <= 1
    }

    /// Writes frame `seq`'s source port, and (with several destination addresses or another
    /// network than 0) its addresses and IPv4 header checksum, and its VNI, into `head` (the
    /// frame's first bytes, at least through the inner UDP header, holding the template's).
    #[inline]
    pub fn patch(&self, head: &mut [u8], seq: u64, net: u16) {
        let o = self.inner_offset();
        let port = self.src_port_for(seq);
        head[o + SRC_PORT_OFFSET..o + SRC_PORT_OFFSET + 2].copy_from_slice(&port.to_be_bytes());
        if let Some(v) = &self.vxlan {
            // The outer source port from the flow, as an encapsulating switch hashes it.
            let outer = 0xc000 | (port & 0x3fff);
            head[SRC_PORT_OFFSET..SRC_PORT_OFFSET + 2].copy_from_slice(&outer.to_be_bytes());
            if self.networks > 1 {
                let vni = (v.vni + u32::from(net)).to_be_bytes();
                head[VNI_OFFSET..VNI_OFFSET + 3].copy_from_slice(&vni[1..]);
            }
        }
        if let Some(m) = self.dst_macs.get(usize::from(net))
            && self.networks > 1
        {
            head[o..o + 6].copy_from_slice(&m.0);
        }
        if self.dst_ips > 1 || self.networks > 1 {
            let (src, dst) = (
                Self::in_network(self.src_ip, net),
                Self::in_network(self.dst_ip_for(seq), net),
            );
            let ip = &mut head[o + 14..o + 34];
            ip[SRC_IP_OFFSET - 14..SRC_IP_OFFSET - 10].copy_from_slice(&src.octets());
            ip[DST_IP_OFFSET - 14..DST_IP_OFFSET - 10].copy_from_slice(&dst.octets());
            ip[IP_CHECK_OFFSET - 14..IP_CHECK_OFFSET - 12].fill(0);
            let c = wire::checksum::checksum(ip);
            ip[IP_CHECK_OFFSET - 14..IP_CHECK_OFFSET - 12].copy_from_slice(&c.to_be_bytes());
        }
    }
}

/// `seq % d` (`d` 0 taken as 1) without a division for one flow or a power of two of them:
/// this runs for every frame sent, and a 64-bit division takes tens of cycles.
#[inline]
fn rem(seq: u64, d: u16) -> u64 {
    let d = u64::from(d.max(1));
    if d.is_power_of_two() {
        seq & (d - 1)
    } else {
        seq % d
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

    /// Reads the probe of a received frame, plain or inside VXLAN (`frame` holds at least its
    /// first [`MAX_HEAD`] bytes, or all of it); `None` if it is not one of ours.
    #[inline]
    pub fn parse(frame: &[u8]) -> Option<Probe> {
        Self::parse_in(frame, Self::is_vxlan(frame))
    }

    /// [`parse`](Self::parse) of a frame already known to be VXLAN (`vxlan`, as
    /// [`is_vxlan`](Self::is_vxlan) says) or not.
    #[inline]
    pub fn parse_in(frame: &[u8], vxlan: bool) -> Option<Probe> {
        let o = if vxlan { VXLAN_OVERHEAD } else { 0 };
        let b = frame.get(o + PROBE_OFFSET..o + PROBE_OFFSET + PROBE_LEN)?;
        if u16::from_le_bytes([b[0], b[1]]) != PROBE_MAGIC || frame[o + 12..o + 14] != [0x08, 0x00]
        {
            return None;
        }
        Some(Probe {
            stream: u16::from_le_bytes([b[2], b[3]]),
            seq: u64::from_le_bytes(b[4..12].try_into().ok()?),
            sent_ns: u64::from_le_bytes(b[12..20].try_into().ok()?),
        })
    }

    /// Whether `frame` (at least its first 38 bytes) is IPv4 without options carrying UDP to
    /// the VXLAN port.
    #[inline]
    pub fn is_vxlan(frame: &[u8]) -> bool {
        frame.len() >= 38
            && frame[12..14] == [0x08, 0x00]
            && frame[14] == 0x45
            && frame[23] == 17
            && frame[36..38] == wire::vxlan::UDP_PORT.to_be_bytes()
    }
}

/// Where a received frame's filler begins: right after its probe, inside VXLAN (`vxlan`) or
/// not.
pub fn filler_offset(vxlan: bool) -> usize {
    let o = if vxlan { VXLAN_OVERHEAD } else { 0 };
    o + PROBE_OFFSET + PROBE_LEN
}

/// Whether `bytes`, a received frame's filler from its byte `from` on, are what every frame
/// carries there ([`FrameSpec::template`]: filler byte `i` is `i` modulo 256).
pub fn filler_intact(bytes: &[u8], from: usize) -> bool {
    // The filler's pattern twice over: any 256 bytes of it start somewhere in the first half.
    static PATTERN: [u8; 512] = {
        let mut p = [0u8; 512];
        let mut i = 0;
        while i < 512 {
            p[i] = i as u8;
            i += 1;
        }
        p
    };
    let phase = from % 256;
    // Every piece of 256 bytes starts at the same phase of the pattern.
    bytes
        .chunks(256)
        .all(|c| c == &PATTERN[phase..phase + c.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outer headers of the tests' VXLAN frames.
    fn outer() -> VxlanSpec {
        VxlanSpec {
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 0x11]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 0x12]),
            src_ip: Ipv4Addr::new(192, 168, 0, 2),
            dst_ip: Ipv4Addr::new(192, 168, 0, 1),
            vni: 100,
        }
    }

    #[test]
    fn a_frame_s_filler_is_intact_until_one_byte_changes() {
        for (size, vxlan) in [(64usize, false), (1500, false), (9000, false), (1500, true)] {
            let spec = FrameSpec {
                size,
                vxlan: vxlan.then(outer),
                ..Default::default()
            };
            let t = spec.template().unwrap();
            let o = filler_offset(vxlan);
            assert_eq!(Probe::is_vxlan(&t), vxlan, "{size}");
            assert!(filler_intact(&t[o..], 0), "{size} {vxlan}");
            // Any piece of it, from wherever it starts.
            for from in [1usize, 255, 256, 300, 1000] {
                if from < t.len() - o {
                    assert!(filler_intact(&t[o + from..], from), "{size} from {from}");
                    assert!(
                        !filler_intact(&t[o + from..], from + 1),
                        "{size} from {from}"
                    );
                }
            }
            for at in [o, o + (t.len() - o) / 2, t.len() - 1] {
                let mut f = t.clone();
                f[at] ^= 0x10;
                assert!(!filler_intact(&f[o..], 0), "{size}: byte {at} changed");
            }
        }
        assert!(filler_intact(&[], 7));
    }

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
            spec.patch(&mut f, seq, 0);
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
        one.patch(&mut f, 5, 0);
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
    fn vxlan_frames_carry_the_inner_frame_and_spread_over_networks() {
        let macs: Vec<MacAddr> = (0..3).map(|k| MacAddr([0x02, 9, 9, 9, 9, k])).collect();
        let spec = FrameSpec {
            size: 128,
            networks: 3,
            dst_macs: macs.clone(),
            vxlan: Some(outer()),
            ..Default::default()
        };
        let t = spec.template().unwrap();
        assert_eq!(t.len(), 128 + 50);
        let probe = Probe {
            stream: 7,
            seq: 9,
            sent_ns: 11,
        };
        for net in 0..3u16 {
            let mut f = t.clone();
            spec.patch(&mut f, 5, net);
            f[spec.probe_offset()..spec.probe_offset() + PROBE_LEN]
                .copy_from_slice(&probe.encode());
            // An independent parser sees outer IPv4/UDP to 4789, a VXLAN header with the
            // network's VNI, and the inner frame with the network's addresses.
            let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
                panic!("not ipv4")
            };
            assert!(ip.header().dont_fragment());
            assert_eq!(ip.header().total_len(), 128 + 50 - 14);
            assert_eq!(
                ip.header().destination_addr(),
                Ipv4Addr::new(192, 168, 0, 1)
            );
            let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
                panic!("not udp")
            };
            assert_eq!(u.destination_port(), 4789);
            assert!(u.source_port() >= 0xc000);
            assert_eq!(usize::from(u.length()), 128 + 16);
            let v = Vxlan::new_checked(u.payload()).unwrap();
            assert_eq!(VxlanRepr::parse(&v).unwrap().vni, 100 + u32::from(net));
            assert_eq!(v.payload()[..6], macs[usize::from(net)].0);
            let inner = etherparse::SlicedPacket::from_ethernet(v.payload()).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = inner.net else {
                panic!("inner not ipv4")
            };
            assert_eq!(ip.header().total_len(), 128 - 14);
            assert_eq!(
                ip.header().source_addr(),
                Ipv4Addr::new(10, 10 + net as u8, 1, 2)
            );
            assert_eq!(
                ip.header().destination_addr(),
                Ipv4Addr::new(10, 10 + net as u8, 2, 2)
            );
            assert!(
                wire::Ipv4::new_checked(&v.payload()[14..])
                    .unwrap()
                    .checksum_ok()
            );
            assert!(wire::Ipv4::new_checked(&f[14..]).unwrap().checksum_ok());
            assert_eq!(Probe::parse(&f), Some(probe));
            // What the node delivers after decapsulation parses the same.
            assert_eq!(Probe::parse(v.payload()), Some(probe));
        }
        let too_many = |networks, vni| {
            FrameSpec {
                networks,
                vxlan: Some(VxlanSpec {
                    vni,
                    ..spec.vxlan.clone().unwrap()
                }),
                dst_macs: Vec::new(),
                ..spec.clone()
            }
            .validate()
        };
        assert!(too_many(247, 100).unwrap_err().0.contains("second octet"));
        assert!(
            too_many(2, wire::vxlan::MAX_VNI)
                .unwrap_err()
                .0
                .contains("VNI")
        );
        assert!(too_many(246, 100).is_ok());
        let big = FrameSpec {
            size: MAX_FRAME,
            ..spec.clone()
        };
        assert!(big.validate().unwrap_err().0.contains("on the wire"));
    }

    /// A mix: frame by frame the sizes in turn, each frame's lengths and checksums right,
    /// plain and in VXLAN.
    #[test]
    fn mixed_sizes_take_turns_with_their_own_lengths() {
        for vxlan in [false, true] {
            let spec = FrameSpec {
                size: 1518,
                mix: vec![64, 570, 64, 1518],
                vxlan: vxlan.then(outer),
                ..Default::default()
            };
            let t = spec.template().unwrap();
            assert_eq!(t.len(), spec.wire_len());
            for c in 0..8u64 {
                let size = spec.size_of(c);
                assert_eq!(size, [64, 570, 64, 1518][c as usize % 4]);
                let o = spec.inner_offset();
                let mut f = t[..o + size].to_vec();
                spec.set_len(&mut f, size);
                spec.patch(&mut f, c, 0);
                let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
                let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
                    panic!("not ipv4")
                };
                assert_eq!(usize::from(ip.header().total_len()), o + size - 14);
                assert!(wire::Ipv4::new_checked(&f[14..]).unwrap().checksum_ok());
                let inner = &f[o..];
                let ip = wire::Ipv4::new_checked(&inner[14..]).unwrap();
                assert!(ip.checksum_ok(), "{c}");
                assert_eq!(usize::from(ip.total_len()), size - 14);
                let u = wire::Udp::new_checked(ip.payload()).unwrap();
                assert_eq!(usize::from(u.len()), size - 34);
            }
        }
        let bad = FrameSpec {
            size: 1500,
            mix: vec![64, 1518],
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().0.contains("largest"));
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
