//! The transmit side's UDP super-packets ([`super::udp_gso`]): a second packet socket of the
//! queue, without a ring, with virtio-net headers (`PACKET_VNET_HDR`), through which a run of
//! datagrams of one flow leaves in one `sendmsg`, gathered straight from the buffers (the
//! kernel's one copy; the ring costs ours and its). Payload in a memif peer's memory (a
//! single-copy packet's external segment) is read into the socket's bounce buffer first, as
//! the ring path does. The ring keeps everything else, and is kicked before a super-packet
//! goes, so that a flow's datagrams leave in order.

use std::io::IoSlice;
use std::os::fd::OwnedFd;

use buffer::Pool;
use rustix::io::Errno;
use rustix::net::{SendAncillaryBuffer, SendFlags};

use super::LinkError;
use super::udp_gso::{MAX_HDRS, MAX_TX_SEGMENTS, Udp4};

/// The largest super-packet: an IPv4 datagram's 64 KiB, less room for its headers.
const MAX_SUPER_PAYLOAD: usize = 65_535 - 60 - 8;

/// A run of datagrams that can leave as one super-packet, as [`GsoSocket::run`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// Datagrams, from the front of the packets offered.
    pub(crate) n: usize,
    /// Their headers' layout (the same in each).
    at: Udp4,
    /// Each one's payload but the last's: the super-packet's segment size.
    size: usize,
    /// Their payloads in all.
    payload: usize,
}

/// What became of a run offered to [`GsoSocket::send`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Gone as one super-packet: the datagrams' bytes, each with its headers (what the wire
    /// carries once the kernel or a device has cut it).
    Whole(usize),
    /// Not sent (no socket buffer, the kernel refused the offload, a peer's memory gone):
    /// send it the plain way.
    Refused,
}

/// A queue's socket for super-packets.
#[derive(Debug)]
pub(crate) struct GsoSocket {
    fd: OwnedFd,
    /// The kernel refused a super-packet as malformed once: it does not take `GSO_UDP_L4`
    /// from a packet socket, or not on this device; the queue sends plainly from then on.
    refused: bool,
    /// Super-packets are longer than this: a receive slot of a peer with our MTU holds a
    /// frame up to it.
    above: usize,
    /// The external segments of the run being sent, one after the other.
    bounce: Vec<u8>,
}

impl GsoSocket {
    /// Sends super-packets of more than `above` bytes only: the frame a receive slot
    /// (`PACKET_RX_RING`, TPACKET_V2) of a peer with this MTU holds. A larger one is queued
    /// whole on the peer's socket, and lost only when that is full, counted as the datagrams
    /// it stood for; one that fitted a slot would be lost, when the ring is full, as one
    /// frame in the kernel's count.
    pub(crate) fn new(fd: OwnedFd, above: usize) -> GsoSocket {
        GsoSocket {
            fd,
            refused: false,
            above,
            bounce: Vec::new(),
        }
    }

    /// How many packets from the front of `pkts` can leave as one super-packet: two or more
    /// untagged UDP/IPv4 datagrams of one flow, their headers in their first buffers, every
    /// payload the first's size but the last's, which may be shorter, more than `above`
    /// bytes in all. `None`: send the first plainly.
    pub(crate) fn run(&self, pool: &Pool, pkts: &[u32]) -> Option<Run> {
        if self.refused || pkts.len() < 2 {
            return None;
        }
        let (at, size) = datagram(pool, pkts[0])?;
        let first = &pool.data(pkts[0])[..at.hdrs()];
        let mut payload = size;
        let mut n = 1;
        for &p in &pkts[1..pkts.len().min(MAX_TX_SEGMENTS)] {
            let Some((a, s)) = datagram(pool, p) else {
                break;
            };
            if a != at || s > size || payload + s > MAX_SUPER_PAYLOAD {
                break;
            }
            if !at.same_flow(first, &pool.data(p)[..at.hdrs()]) {
                break;
            }
            payload += s;
            n += 1;
            if s < size {
                break;
            }
        }
        (n >= 2 && at.hdrs() + payload > self.above).then_some(Run {
            n,
            at,
            size,
            payload,
        })
    }

    /// Sends the front of `pkts` that [`GsoSocket::run`] found to be `r` as one super-packet.
    pub(crate) fn send(&mut self, pool: &Pool, pkts: &[u32], r: Run) -> Result<Sent, LinkError> {
        let Run {
            at,
            size,
            payload: total,
            ..
        } = r;
        let run = &pkts[..r.n];
        let n = at.hdrs();
        let mut head = [0u8; crate::vnet::LEN + MAX_HDRS];
        let (vnet, hdr) = head.split_at_mut(crate::vnet::LEN);
        vnet.copy_from_slice(&crate::vnet::udp4_super_packet(n, at.udp, size));
        hdr[..n].copy_from_slice(&pool.data(run[0])[..n]);
        at.make_super(&mut hdr[..n], total);
        // External segments first (a source gone: the plain path drops and counts them).
        self.bounce.clear();
        for &p in run {
            let mut b = p;
            while b != buffer::NONE {
                if !pool.read_ext(b, &mut self.bounce) {
                    return Ok(Sent::Refused);
                }
                b = pool.meta(b).next;
            }
        }
        let mut iov = Vec::with_capacity(2 * run.len() + 1);
        iov.push(IoSlice::new(&head[..crate::vnet::LEN + n]));
        let mut ext = &self.bounce[..];
        for &p in run {
            let mut b = p;
            let mut skip = n;
            while b != buffer::NONE {
                let d = pool.data(b);
                if d.len() > skip {
                    iov.push(IoSlice::new(&d[skip..]));
                }
                skip = skip.saturating_sub(d.len());
                let (e, rest) = ext.split_at(pool.meta(b).ext.len as usize);
                if !e.is_empty() {
                    iov.push(IoSlice::new(e));
                }
                ext = rest;
                b = pool.meta(b).next;
            }
        }
        let mut control = SendAncillaryBuffer::default();
        match rustix::net::sendmsg(&self.fd, &iov, &mut control, SendFlags::DONTWAIT) {
            Ok(_) => Ok(Sent::Whole(n * run.len() + total)),
            Err(Errno::NXIO | Errno::NODEV) => Err(LinkError::Vanished),
            Err(Errno::NETDOWN) => Err(LinkError::Down),
            Err(Errno::INVAL | Errno::MSGSIZE | Errno::OPNOTSUPP | Errno::PROTONOSUPPORT) => {
                self.refused = true;
                Ok(Sent::Refused)
            }
            // No socket buffer, a busy device: this run goes the plain way.
            Err(_) => Ok(Sent::Refused),
        }
    }
}

/// The headers and payload size of the datagram `p`, if it may join a super-packet: its
/// headers in its first buffer, its length what its chain holds (with an external segment
/// after its last buffer, and nowhere else).
fn datagram(pool: &Pool, p: u32) -> Option<(Udp4, usize)> {
    let at = Udp4::parse(pool.data(p))?;
    let total = pool.meta(p).total_len as usize;
    let mut held = 0;
    let mut b = p;
    while b != buffer::NONE {
        let m = pool.meta(b);
        if m.ext.len != 0 && m.next != buffer::NONE {
            return None;
        }
        held += usize::from(m.len) + m.ext.len as usize;
        b = m.next;
    }
    let size = total.checked_sub(at.hdrs()).filter(|&s| s > 0)?;
    (held == total).then_some((at, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Pool {
        Pool::new(buffer::PoolConfig {
            count: 128,
            data_size: 2048,
            headroom: 0,
        })
        .unwrap()
    }

    fn dgram(pool: &mut Pool, payload: usize, port: u8) -> u32 {
        let mut f = super::super::udp_gso::tests::datagram(&vec![1; payload], &[], 1);
        f[35] = port;
        pool.from_bytes(&f).unwrap()
    }

    fn socket() -> GsoSocket {
        let fd = rustix::net::socket(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::DGRAM,
            None,
        )
        .unwrap();
        GsoSocket::new(fd, 1500)
    }

    #[test]
    fn runs_are_one_flow_of_one_size_ending_at_a_shorter_datagram() {
        let mut pool = pool();
        let s = socket();
        let p: Vec<u32> = [
            (1000, 1),
            (1000, 1),
            (400, 1),
            (1000, 1),
            (1000, 2),
            (1000, 2),
            (1200, 2),
        ]
        .iter()
        .map(|&(len, port)| dgram(&mut pool, len, port))
        .collect();
        let n = |s: &GsoSocket, p: &[u32]| s.run(&pool, p).map_or(0, |r| r.n);
        assert_eq!(n(&s, &p), 3, "the shorter third ends the run");
        assert_eq!(n(&s, &p[3..]), 0, "another flow follows");
        assert_eq!(n(&s, &p[4..]), 2, "a longer datagram does not join");
        assert_eq!(n(&s, &p[6..]), 0, "alone");
        let small = GsoSocket::new(socket().fd, 42 + 2400);
        assert_eq!(n(&small, &p), 0, "2400 bytes of payload: not above");
        assert_eq!(n(&small, &p[4..]), 0, "2000");
        let smaller = GsoSocket::new(socket().fd, 42 + 1999);
        assert_eq!(n(&smaller, &p[4..]), 2, "2000: above");
    }

    #[test]
    fn runs_stop_at_the_segment_limit_and_at_what_cannot_be_gathered() {
        let mut pool = pool();
        let s = socket();
        let p: Vec<u32> = (0..MAX_TX_SEGMENTS + 2)
            .map(|_| dgram(&mut pool, 100, 1))
            .collect();
        assert_eq!(s.run(&pool, &p).map(|r| r.n), Some(MAX_TX_SEGMENTS));
        let short = pool.meta(p[1]).total_len - 1;
        pool.meta_mut(p[1]).total_len = short;
        assert_eq!(
            s.run(&pool, &p).map_or(0, |r| r.n),
            0,
            "a chain that holds more than its length says"
        );
    }
    /// A memif peer's memory, as single-copy packets leave their payload in it.
    #[derive(Debug)]
    struct PeerMemory(Vec<u8>);

    impl buffer::ExtSource for PeerMemory {
        fn read(&self, _region: u16, offset: u64, dst: &mut [u8]) -> bool {
            let at = offset as usize;
            let Some(src) = self.0.get(at..at + dst.len()) else {
                return false;
            };
            dst.copy_from_slice(src);
            true
        }
    }

    /// Datagrams whose payload ends in a peer's memory join a super-packet, their bytes
    /// gathered in order: the headers once, then each payload, local part then external.
    #[test]
    fn payload_in_a_peers_memory_is_gathered_in_order() {
        let mut pool = pool();
        let peer: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
        pool.set_ext_source(3, Some(std::sync::Arc::new(PeerMemory(peer.clone()))));
        // Three datagrams of 1000 bytes of payload: 100 local, 900 at 1000 * i in the peer.
        let p: Vec<u32> = (0..3u64)
            .map(|i| {
                let f = super::super::udp_gso::tests::datagram(&vec![1; 1000], &[], 1);
                let b = pool.from_bytes(&f[..42 + 100]).unwrap();
                let m = pool.meta_mut(b);
                m.total_len = f.len() as u32;
                m.ext = buffer::Ext {
                    source: 3,
                    region: 0,
                    offset: 1000 * i,
                    len: 900,
                };
                b
            })
            .collect();
        let (ours, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::DGRAM,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let mut s = GsoSocket::new(ours, 1500);
        let r = s.run(&pool, &p).expect("a run");
        assert_eq!((r.n, r.size, r.payload), (3, 1000, 3000));
        assert_eq!(s.send(&pool, &p, r).unwrap(), Sent::Whole(3 * 42 + 3000));
        let mut got = vec![0u8; 8192];
        let n = rustix::net::recv(&theirs, &mut got, rustix::net::RecvFlags::empty())
            .unwrap()
            .0;
        let got = &got[crate::vnet::LEN + 42..n];
        for i in 0..3 {
            let d = &got[1000 * i..1000 * (i + 1)];
            assert_eq!(d[..100], [1; 100], "datagram {i}: its local part");
            assert_eq!(
                d[100..],
                peer[1000 * i..1000 * i + 900],
                "datagram {i}: the peer's"
            );
        }
        // The peer's memory gone: the run is refused, for the plain path to count.
        pool.set_ext_source(3, None);
        assert_eq!(s.send(&pool, &p, r).unwrap(), Sent::Refused);
        pool.free_bulk(&p);
    }
}
