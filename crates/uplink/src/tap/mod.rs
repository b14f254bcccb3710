//! A tap device for a pod: a kernel Ethernet interface (`eth1` in the pod's namespace) whose
//! other end is us. What the pod's stack sends on it we read from the device's fd; what we
//! write there the pod's stack receives. Ordinary programs in the pod (ping, curl, iperf3)
//! then reach the networks veclane routes.
//!
//! The device is created inside the pod's namespace (the fds are opened by a thread that
//! entered it, [`crate::netns`]), with `IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE`:
//! one fd per queue, each both a receive and a transmit queue, and a 12-byte virtio-net header
//! (`struct virtio_net_hdr_v1`) in front of every frame each way. `IFF_TUN_EXCL` on the first
//! makes creating a device whose name is taken fail instead of joining it. The device is not
//! persistent: the kernel removes it when its last fd closes, so nothing outlives the
//! interface (or the daemon). Each fd also holds the pod's namespace (a tun fd is a socket of
//! that namespace): deleting the interface, not the namespace, is what frees them.
//!
//! Offloads: the device announces checksum offload (`TUN_F_CSUM`), so the pod's stack may
//! leave a TCP or UDP checksum for us to complete (`VIRTIO_NET_HDR_F_NEEDS_CSUM`), which
//! receive does before the frame enters the graph, as every path out of it (memif, VXLAN,
//! another tap) needs a finished checksum; it is counted. It announces TCP segmentation
//! offload for IPv4 (`TUN_F_TSO4`, with ECN), so the pod's stack hands us TCP in super-frames
//! of up to 64 KiB, one system call for dozens of segments; receive cuts each into segments of
//! the size the header gives, as the kernel's software segmentation would (lengths, IDs,
//! sequence numbers, flags and checksums per segment), since no path out of the graph takes
//! a super-frame. Anything else marked for segmentation (UDP, IPv6: not announced) would be
//! dropped and counted (`gso`). What we write carries an all-zero header: a plain frame,
//! checksums as they are.
//!
//! Reading and writing are one system call per frame (`readv`/`writev`, fd non-blocking):
//! the kernel's tap has no rings to share. A frame lands in one pool buffer when it fits
//! (2048 bytes of data by default: any frame of a 1500-byte MTU) and in a chain otherwise,
//! by way of a per-queue overflow area, so no frame is ever cut.

mod sys;

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use buffer::{NONE, Pool};
use rustix::fs::{Mode, OFlags};
use wire::{EtherType, Ethernet, IpProtocol, Ipv4, Tcp, ipv4, tcp};

use crate::af_packet::counters::bump;
use crate::netns::{NetnsError, run_in};

/// `struct virtio_net_hdr_v1`: flags, gso_type, hdr_len, gso_size, csum_start,
/// csum_offset, num_buffers; native byte order (the kernel's default on a little-endian
/// host, and ours).
pub const VNET_HDR_LEN: usize = 12;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
/// With a GSO type: the super-frame carries ECN (its first segment keeps CWR).
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;
/// The smallest segment size a super-frame is cut into (IPv4's minimum MSS); a smaller one
/// would multiply one read into thousands of packets.
const MIN_MSS: usize = 536;
/// The most a tap hands us in one read: a 64 KiB super-frame and its header.
const OVERFLOW: usize = 65536 + VNET_HDR_LEN;
const ETH_HDR: usize = wire::ethernet::HEADER_LEN;

/// How to make a tap.
#[derive(Debug, Clone)]
pub struct TapConfig {
    /// The device's name in its namespace (`eth1`).
    pub name: String,
    /// The namespace to create it in (a path: `/var/run/netns/NAME`, `/proc/PID/ns/net`);
    /// `None`: the caller's.
    pub netns: Option<std::path::PathBuf>,
    /// Queues (fds), at least 1.
    pub queues: u16,
    /// The device's MTU; `None` leaves the kernel's (1500).
    pub mtu: Option<u16>,
    /// The device's MAC (the pod's side); `None` leaves the kernel's random one.
    pub mac: Option<[u8; 6]>,
}

/// Why a tap could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("tap {name}: an interface of that name exists in the namespace already")]
    Exists { name: String },
    #[error("tap {name}: {step}: {source}")]
    Os {
        name: String,
        step: &'static str,
        source: io::Error,
    },
}

/// An open tap device and its queues.
#[derive(Debug)]
pub struct Tap {
    name: String,
    ifindex: u32,
    mac: [u8; 6],
    mtu: u16,
    queues: Vec<(RxQueue, TxQueue)>,
}

impl Tap {
    /// Creates the device (in `cfg.netns` if given), sets its MAC and MTU and brings it up.
    pub fn open(cfg: &TapConfig) -> Result<Tap, TapError> {
        match &cfg.netns {
            Some(p) => run_in(p, || Tap::open_here(cfg))?,
            None => Tap::open_here(cfg),
        }
    }

    /// The device's name in its namespace.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its index in its namespace.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The pod side's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    pub fn mtu(&self) -> u16 {
        self.mtu
    }

    pub fn into_queues(self) -> Vec<(RxQueue, TxQueue)> {
        self.queues
    }

    fn open_here(cfg: &TapConfig) -> Result<Tap, TapError> {
        let name = cfg.name.clone();
        let os = |step: &'static str| {
            let name = name.clone();
            move |source: io::Error| TapError::Os { name, step, source }
        };
        let sock = rustix::net::socket(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::DGRAM,
            None,
        )
        .map_err(io::Error::from)
        .map_err(os("socket"))?;
        match sys::ifindex(sock.as_fd(), &name) {
            Ok(_) => return Err(TapError::Exists { name }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(os("SIOCGIFINDEX")(e)),
        }
        let mut fds = Vec::with_capacity(usize::from(cfg.queues.max(1)));
        for q in 0..cfg.queues.max(1) {
            let fd = rustix::fs::open(
                "/dev/net/tun",
                OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(io::Error::from)
            .map_err(os("open /dev/net/tun"))?;
            let mut flags =
                libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR | libc::IFF_MULTI_QUEUE;
            if q == 0 {
                flags |= libc::IFF_TUN_EXCL;
            }
            match sys::tun_set_iff(fd.as_fd(), &name, flags) {
                Err(e) if q == 0 && e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(TapError::Exists { name });
                }
                r => r.map_err(os("TUNSETIFF"))?,
            }
            sys::tun_set_vnet_hdr_size(fd.as_fd(), VNET_HDR_LEN as libc::c_int)
                .map_err(os("TUNSETVNETHDRSZ"))?;
            sys::tun_set_offload(
                fd.as_fd(),
                libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO_ECN,
            )
            .map_err(os("TUNSETOFFLOAD"))?;
            fds.push(Arc::new(fd));
        }
        if let Some(mac) = cfg.mac {
            sys::set_hwaddr(sock.as_fd(), &name, mac).map_err(os("SIOCSIFHWADDR"))?;
        }
        if let Some(mtu) = cfg.mtu {
            sys::set_mtu(sock.as_fd(), &name, mtu).map_err(os("SIOCSIFMTU"))?;
        }
        sys::set_up(sock.as_fd(), &name).map_err(os("SIOCSIFFLAGS"))?;
        let ifindex = sys::ifindex(sock.as_fd(), &name).map_err(os("SIOCGIFINDEX"))?;
        let mac = sys::hwaddr(sock.as_fd(), &name).map_err(os("SIOCGIFHWADDR"))?;
        let mtu = sys::mtu(sock.as_fd(), &name).map_err(os("SIOCGIFMTU"))?;
        let queues = fds
            .into_iter()
            .map(|fd| {
                let rx = RxQueue::shared(fd.clone());
                let tx = TxQueue {
                    fd,
                    scratch: Vec::new(),
                    counters: Arc::default(),
                };
                (rx, tx)
            })
            .collect();
        Ok(Tap {
            name,
            ifindex,
            mac,
            mtu,
            queues,
        })
    }
}

/// A receive queue's counters: one writer (the queue's worker), any reader.
#[derive(Debug, Default)]
pub struct RxCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames read and dropped because the pool had too few buffers.
    pub no_buffer: AtomicU64,
    /// Segmentation-offload super-frames that are not TCP/IPv4, or cut into segments under
    /// 536 bytes, dropped (never expected: only TCP/IPv4 segmentation is announced).
    pub gso: AtomicU64,
    /// Frames shorter than an Ethernet header or with an offload header pointing outside
    /// them, dropped.
    pub bad_frame: AtomicU64,
    /// Checksums the pod's stack left to offload, completed here.
    pub csum_completed: AtomicU64,
    /// TCP segmentation-offload super-frames cut into segments here.
    pub segmented: AtomicU64,
    /// Reads that failed for another reason than an empty queue.
    pub read_errors: AtomicU64,
}

/// A plain copy of [`RxCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxStats {
    pub packets: u64,
    pub bytes: u64,
    pub no_buffer: u64,
    pub gso: u64,
    pub bad_frame: u64,
    pub csum_completed: u64,
    pub segmented: u64,
    pub read_errors: u64,
}

impl RxCounters {
    pub fn snapshot(&self) -> RxStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RxStats {
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            no_buffer: l(&self.no_buffer),
            gso: l(&self.gso),
            bad_frame: l(&self.bad_frame),
            csum_completed: l(&self.csum_completed),
            segmented: l(&self.segmented),
            read_errors: l(&self.read_errors),
        }
    }
}

/// A transmit queue's counters: one writer (the queue's worker), any reader.
#[derive(Debug, Default)]
pub struct TxCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames shorter than an Ethernet header, or whose external part could not be read.
    pub malformed: AtomicU64,
    /// Writes the device refused for lack of room (`EAGAIN`, `ENOBUFS`).
    pub tx_no_room: AtomicU64,
    /// Frames not sent because the device was down (`EIO`) or gone.
    pub link_down: AtomicU64,
    /// Writes that failed for another reason.
    pub write_errors: AtomicU64,
}

/// A plain copy of [`TxCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TxStats {
    pub packets: u64,
    pub bytes: u64,
    pub malformed: u64,
    pub tx_no_room: u64,
    pub link_down: u64,
    pub write_errors: u64,
}

impl TxCounters {
    pub fn snapshot(&self) -> TxStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TxStats {
            packets: l(&self.packets),
            bytes: l(&self.bytes),
            malformed: l(&self.malformed),
            tx_no_room: l(&self.tx_no_room),
            link_down: l(&self.link_down),
            write_errors: l(&self.write_errors),
        }
    }
}

/// What one `recv` found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecvStats {
    pub packets: usize,
    pub no_buffer: u32,
    pub gso: u32,
    pub bad_frame: u32,
    /// Super-frames cut into segments (each segment is one of `packets`).
    pub segmented: u32,
    /// The device is gone (deleted inside its namespace): the queue will never read again.
    pub vanished: bool,
}

/// One queue's receive side.
#[derive(Debug)]
pub struct RxQueue {
    fd: Arc<OwnedFd>,
    /// Where a frame larger than one buffer goes on, before it is copied into a chain;
    /// allocated at the first such frame.
    overflow: Vec<u8>,
    /// A super-frame made contiguous, and one segment being built.
    linear: Vec<u8>,
    /// Segments of a super-frame that did not fit the caller's frame: handed out first at
    /// the next call. At most one super-frame's.
    pending: std::collections::VecDeque<(u32, u32)>,
    counters: Arc<RxCounters>,
}

/// Why a frame was not taken.
enum Lost {
    NoBuffer,
    Gso,
    Bad,
}

impl RxQueue {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A receive queue over `fd`: any fd that gives one frame, behind its virtio-net header,
    /// per read (a tap's; a `SOCK_SEQPACKET` socket standing in for one, in the hostile-input
    /// tests and the fuzz target, which write what a pod could).
    pub fn from_fd(fd: OwnedFd) -> RxQueue {
        RxQueue::shared(Arc::new(fd))
    }

    fn shared(fd: Arc<OwnedFd>) -> RxQueue {
        RxQueue {
            fd,
            overflow: Vec::new(),
            linear: Vec::new(),
            pending: std::collections::VecDeque::new(),
            counters: Arc::default(),
        }
    }

    /// Whether segments of a super-frame wait to be handed out (the worker must not sleep).
    pub fn pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Gives segments not handed out back to `pool`: before the queue is closed.
    pub fn release(&mut self, pool: &mut Pool) {
        for (b, _) in self.pending.drain(..) {
            pool.free(b);
        }
    }

    pub fn counters(&self) -> &Arc<RxCounters> {
        &self.counters
    }

    /// Reads up to `max` frames into pool buffers appended to `out` (their `rx_if` is the
    /// caller's to set).
    pub fn recv(&mut self, pool: &mut Pool, out: &mut Vec<u32>, max: usize) -> RecvStats {
        let mut st = RecvStats::default();
        let mut bytes = 0u64;
        let mut csum = 0u64;
        if self.overflow.is_empty() {
            self.overflow = vec![0; OVERFLOW];
        }
        // Every read counts, dropped or not: a pod writing frames that are all refused must
        // not hold the worker here.
        let mut reads = 0;
        loop {
            while st.packets < max
                && let Some((b, len)) = self.pending.pop_front()
            {
                out.push(b);
                st.packets += 1;
                bytes += u64::from(len);
            }
            if st.packets >= max || !self.pending.is_empty() || reads >= max {
                break;
            }
            reads += 1;
            let Some(b) = pool.alloc() else {
                // Read the frame anyway: left in the device it would keep the worker awake.
                match rustix::io::read(&*self.fd, &mut self.overflow) {
                    Ok(_) => {
                        st.no_buffer += 1;
                        continue;
                    }
                    Err(e) => {
                        self.read_error(e, &mut st);
                        break;
                    }
                }
            };
            let mut hdr = [0u8; VNET_HDR_LEN];
            let room = pool.room_mut(b);
            let first = room.len();
            let n = {
                let mut iov = [
                    IoSliceMut::new(&mut hdr),
                    IoSliceMut::new(room),
                    IoSliceMut::new(&mut self.overflow),
                ];
                rustix::io::readv(&*self.fd, &mut iov)
            };
            let n = match n {
                // The kernel returns the frame's whole length even when it cut the copy short
                // (a frame larger than the room given): such a frame is refused, and nothing
                // past what was read is ever looked at.
                Ok(n) if n > VNET_HDR_LEN + first + self.overflow.len() => {
                    pool.free(b);
                    st.bad_frame += 1;
                    continue;
                }
                Ok(n) => n,
                Err(e) => {
                    pool.free(b);
                    self.read_error(e, &mut st);
                    break;
                }
            };
            if hdr[1] & !VIRTIO_NET_HDR_GSO_ECN == VIRTIO_NET_HDR_GSO_TCPV4 {
                match self.segment(pool, b, &hdr, n, first) {
                    Ok(()) => st.segmented += 1,
                    Err(lost) => match lost {
                        Lost::NoBuffer => st.no_buffer += 1,
                        Lost::Gso => st.gso += 1,
                        Lost::Bad => st.bad_frame += 1,
                    },
                }
                continue;
            }
            match self.take(pool, b, &hdr, n, first, &mut csum) {
                Ok(len) => {
                    out.push(b);
                    st.packets += 1;
                    bytes += len as u64;
                }
                Err(lost) => {
                    pool.free(b);
                    match lost {
                        Lost::NoBuffer => st.no_buffer += 1,
                        Lost::Gso => st.gso += 1,
                        Lost::Bad => st.bad_frame += 1,
                    }
                }
            }
        }
        let c = &self.counters;
        if st.packets != 0 {
            bump(&c.packets, st.packets as u64);
            bump(&c.bytes, bytes);
        }
        if st.no_buffer + st.gso + st.bad_frame + st.segmented != 0 || csum != 0 {
            bump(&c.segmented, u64::from(st.segmented));
            bump(&c.no_buffer, u64::from(st.no_buffer));
            bump(&c.gso, u64::from(st.gso));
            bump(&c.bad_frame, u64::from(st.bad_frame));
            bump(&c.csum_completed, csum);
        }
        st
    }

    fn read_error(&self, e: rustix::io::Errno, st: &mut RecvStats) {
        match e {
            rustix::io::Errno::AGAIN | rustix::io::Errno::INTR => {}
            // The device was unregistered under the fd (`ip link del` in the pod).
            rustix::io::Errno::BADFD | rustix::io::Errno::NODEV => st.vanished = true,
            _ => bump(&self.counters.read_errors, 1),
        }
    }

    /// Makes buffer `b` (which holds the first `first` bytes of the frame, the rest being in
    /// the overflow area) the head of the frame's chain, its checksum completed.
    fn take(
        &mut self,
        pool: &mut Pool,
        b: u32,
        hdr: &[u8; VNET_HDR_LEN],
        n: usize,
        first: usize,
        csum: &mut u64,
    ) -> Result<usize, Lost> {
        let len = n.checked_sub(VNET_HDR_LEN).ok_or(Lost::Bad)?;
        if len < ETH_HDR {
            return Err(Lost::Bad);
        }
        if hdr[1] != VIRTIO_NET_HDR_GSO_NONE {
            return Err(Lost::Gso);
        }
        let head = len.min(first);
        let rest = len - head;
        if hdr[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
            let start = usize::from(u16::from_ne_bytes([hdr[6], hdr[7]]));
            let field = start + usize::from(u16::from_ne_bytes([hdr[8], hdr[9]]));
            if field + 2 > len || start > len {
                return Err(Lost::Bad);
            }
            // As the kernel's skb_checksum_help: the field holds the pseudo-header's sum;
            // sum from csum_start to the end, fold, invert, never 0 (UDP's "no checksum").
            let room = pool.room_mut(b);
            let (a, o) = if start < head {
                (&room[start..head], &self.overflow[..rest])
            } else {
                (&[][..], &self.overflow[start - head..rest])
            };
            let c = !wire::checksum::fold(sum_split(a, o));
            let c = if c == 0 { 0xffff } else { c }.to_be_bytes();
            for (k, byte) in c.into_iter().enumerate() {
                let at = field + k;
                if at < head {
                    room[at] = byte;
                } else {
                    self.overflow[at - head] = byte;
                }
            }
            *csum += 1;
        }
        let m = pool.meta_mut(b);
        m.len = head as u16;
        m.total_len = len as u32;
        if rest != 0 {
            // The rest as a chain of its own behind `b` (nothing is left behind if the pool
            // runs out: `from_bytes` frees what it took).
            let tail = pool
                .from_bytes(&self.overflow[..rest])
                .ok_or(Lost::NoBuffer)?;
            pool.link(b, tail);
        }
        Ok(len)
    }
}

impl RxQueue {
    /// Cuts a TCP/IPv4 super-frame (its first `first` bytes in `b`, the rest in the overflow
    /// area; `n` read with the header) into segments of the size the header gives, as the
    /// kernel's own software segmentation would: each with the headers, its IPv4 length, ID
    /// and checksum, its sequence number, FIN and PSH on the last only, CWR on the first only,
    /// and a full TCP checksum. They go to `pending`; `b` goes back to the pool.
    fn segment(
        &mut self,
        pool: &mut Pool,
        b: u32,
        hdr: &[u8; VNET_HDR_LEN],
        n: usize,
        first: usize,
    ) -> Result<(), Lost> {
        let len = n.saturating_sub(VNET_HDR_LEN);
        self.linear.clear();
        let head = len.min(first);
        self.linear.extend_from_slice(&pool.room_mut(b)[..head]);
        self.linear.extend_from_slice(&self.overflow[..len - head]);
        pool.free(b);
        let f = &self.linear;
        let mss = usize::from(u16::from_ne_bytes([hdr[4], hdr[5]]));
        // Ethernet, IPv4, TCP; the lengths from the headers, checked.
        let eth = Ethernet::new_checked(&f[..]).map_err(|_| Lost::Bad)?;
        if eth.ethertype() != EtherType::Ipv4 || eth.payload().len() < ipv4::MIN_HEADER_LEN {
            return Err(Lost::Bad);
        }
        let ip = Ipv4::new_unchecked(eth.payload());
        if ip.version() != 4
            || ip.header_len() < ipv4::MIN_HEADER_LEN
            || ip.protocol() != IpProtocol::Tcp
        {
            return Err(Lost::Bad);
        }
        let tcp_at = ETH_HDR + ip.header_len();
        let t = f
            .get(tcp_at..)
            .and_then(|t| Tcp::new_checked(t).ok())
            .ok_or(Lost::Bad)?;
        let hdrs = tcp_at + t.header_len();
        let payload = f.len() - hdrs;
        if mss < MIN_MSS || payload == 0 {
            return Err(Lost::Gso);
        }
        let (id0, src, dst) = (ip.ident(), ip.src_addr(), ip.dst_addr());
        let seq0 = t.seq_number();
        let count = payload.div_ceil(mss);
        let mut seg = Vec::with_capacity(hdrs + mss);
        for k in 0..count {
            let at = hdrs + k * mss;
            let chunk = &f[at..(at + mss).min(f.len())];
            seg.clear();
            seg.extend_from_slice(&f[..hdrs]);
            seg.extend_from_slice(chunk);
            let (ip, t) = seg[ETH_HDR..].split_at_mut(tcp_at - ETH_HDR);
            let mut ip = Ipv4::new_unchecked(ip);
            ip.set_total_len((hdrs - ETH_HDR + chunk.len()) as u16);
            ip.set_ident(id0.wrapping_add(k as u16));
            ip.fill_checksum();
            let mut t = Tcp::new_unchecked(t);
            t.set_seq_number(seq0.wrapping_add((k * mss) as u32));
            if k + 1 < count {
                t.clear_flags(tcp::flags::FIN | tcp::flags::PSH); // the last segment's alone
            }
            if k > 0 {
                t.clear_flags(tcp::flags::CWR); // the first segment's alone
            }
            t.fill_checksum(src, dst);
            let Some(nb) = pool.from_bytes(&seg) else {
                return Err(Lost::NoBuffer);
            };
            self.pending.push_back((nb, seg.len() as u32));
        }
        Ok(())
    }
}

/// The one's-complement sum of `a` followed by `b`, whatever the parity of `a`'s length.
fn sum_split(a: &[u8], b: &[u8]) -> u32 {
    if a.len().is_multiple_of(2) || b.is_empty() {
        return wire::checksum::accumulate(wire::checksum::accumulate(0, a), b);
    }
    let (last, a) = a.split_last().expect("odd length");
    let acc = wire::checksum::accumulate(0, a);
    let acc = wire::checksum::accumulate(acc, &[*last, b[0]]);
    wire::checksum::accumulate(acc, &b[1..])
}

/// What one `send` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendStats {
    /// Packets taken (sent or dropped as malformed); the rest found no room.
    pub consumed: usize,
    pub malformed: usize,
    /// The device is down; nothing was sent.
    pub link_down: bool,
    /// The device is gone.
    pub vanished: bool,
}

/// One queue's transmit side.
#[derive(Debug)]
pub struct TxQueue {
    fd: Arc<OwnedFd>,
    /// A packet's external part (a memif peer's memory), read out to be written.
    scratch: Vec<u8>,
    counters: Arc<TxCounters>,
}

impl TxQueue {
    pub fn counters(&self) -> &Arc<TxCounters> {
        &self.counters
    }

    /// Writes each packet of `bufs` (chains, external parts included) with an all-zero
    /// virtio-net header. The caller frees every buffer afterwards.
    pub fn send(&mut self, pool: &Pool, bufs: &[u32]) -> SendStats {
        const HDR: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];
        /// Segments of one frame written at once; a longer chain is linearised first.
        const MAX_IOV: usize = 16;
        let mut st = SendStats::default();
        let (mut packets, mut bytes) = (0u64, 0u64);
        let c = self.counters.clone();
        for &head in bufs {
            let mut len = 0;
            let mut iov: [IoSlice<'_>; MAX_IOV] = [IoSlice::new(&[]); MAX_IOV];
            iov[0] = IoSlice::new(&HDR);
            let mut k = 1;
            let mut linear = false;
            let mut i = head;
            while i != NONE {
                if k == MAX_IOV || pool.meta(i).ext.len != 0 {
                    linear = true;
                    break;
                }
                iov[k] = IoSlice::new(pool.data(i));
                len += iov[k].len();
                k += 1;
                i = pool.meta(i).next;
            }
            let mut unreadable = false;
            if linear {
                self.scratch.clear();
                let mut i = head;
                while i != NONE {
                    self.scratch.extend_from_slice(pool.data(i));
                    if pool.meta(i).ext.len != 0 && !pool.read_ext(i, &mut self.scratch) {
                        unreadable = true;
                    }
                    i = pool.meta(i).next;
                }
                iov[1] = IoSlice::new(&self.scratch);
                len = self.scratch.len();
                k = 2;
            }
            if len < ETH_HDR || unreadable {
                st.malformed += 1;
                st.consumed += 1;
                continue;
            }
            match rustix::io::writev(&*self.fd, &iov[..k]) {
                Ok(_) => {
                    packets += 1;
                    bytes += len as u64;
                    st.consumed += 1;
                }
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::NOBUFS) => break,
                Err(rustix::io::Errno::IO) => {
                    st.link_down = true;
                    break;
                }
                Err(rustix::io::Errno::BADFD | rustix::io::Errno::NODEV) => {
                    st.vanished = true;
                    break;
                }
                Err(_) => {
                    bump(&c.write_errors, 1);
                    st.consumed += 1;
                }
            }
        }
        bump(&c.packets, packets);
        bump(&c.bytes, bytes);
        let left = (bufs.len() - st.consumed) as u64;
        if st.malformed != 0 {
            bump(&c.malformed, st.malformed as u64);
        }
        if st.link_down || st.vanished {
            bump(&c.link_down, left);
        } else if left != 0 {
            bump(&c.tx_no_room, left);
        }
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP super-frame (FIN, PSH, CWR set; 5000 bytes) cut at 1448: segments that
    /// etherparse finds valid, in sequence, flags where the kernel puts them, the payload
    /// whole; a segment size under 536 and a frame that is not TCP are refused.
    #[test]
    fn a_super_frame_is_cut_as_the_kernel_would() {
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut frame = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1000, 2000, 0xffff_f000, 512)
            .fin()
            .psh()
            .cwr()
            .ack(7)
            .write(&mut frame, &payload)
            .unwrap();
        let mut pool = Pool::new(buffer::PoolConfig {
            count: 64,
            ..buffer::PoolConfig::default()
        })
        .unwrap();
        let fd = rustix::fs::open("/dev/null", OFlags::RDONLY, Mode::empty()).unwrap();
        let mut q = RxQueue::from_fd(fd);
        q.overflow = vec![0; OVERFLOW];
        let mut hdr = [0u8; VNET_HDR_LEN];
        hdr[1] = VIRTIO_NET_HDR_GSO_TCPV4;
        let cut = |q: &mut RxQueue, pool: &mut Pool, hdr: &[u8; VNET_HDR_LEN], f: &[u8]| {
            let b = pool.alloc().unwrap();
            let first = 100;
            pool.room_mut(b)[..first].copy_from_slice(&f[..first]);
            q.overflow[..f.len() - first].copy_from_slice(&f[first..]);
            q.segment(pool, b, hdr, f.len() + VNET_HDR_LEN, first)
        };
        hdr[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        assert!(cut(&mut q, &mut pool, &hdr, &frame).is_ok());
        let segs: Vec<(u32, u32)> = q.pending.drain(..).collect();
        assert_eq!(segs.len(), 4);
        let mut got = Vec::new();
        for (k, &(b, len)) in segs.iter().enumerate() {
            let mut v = Vec::new();
            pool.read_chain(b, &mut v);
            assert_eq!(v.len(), len as usize);
            let p = etherparse::SlicedPacket::from_ethernet(&v).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
                panic!()
            };
            let Some(etherparse::TransportSlice::Tcp(t)) = &p.transport else {
                panic!()
            };
            let ih = ip.header().to_header();
            assert_eq!(ih.header_checksum, ih.calc_header_checksum(), "segment {k}");
            assert_eq!(ih.identification, ip.header().identification());
            assert_eq!(
                t.checksum(),
                t.to_header().calc_checksum_ipv4(&ih, t.payload()).unwrap(),
                "segment {k}"
            );
            assert_eq!(
                t.sequence_number(),
                0xffff_f000u32.wrapping_add(1448 * k as u32)
            );
            let last = k == 3;
            assert_eq!(
                (t.fin(), t.psh(), t.cwr(), t.ack()),
                (last, last, k == 0, true)
            );
            got.extend_from_slice(t.payload());
            pool.free(b);
        }
        assert_eq!(got, payload);
        hdr[4..6].copy_from_slice(&100u16.to_ne_bytes());
        assert!(matches!(
            cut(&mut q, &mut pool, &hdr, &frame),
            Err(Lost::Gso)
        ));
        hdr[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        let mut udp = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1, 2)
            .write(&mut udp, &payload)
            .unwrap();
        assert!(matches!(cut(&mut q, &mut pool, &hdr, &udp), Err(Lost::Bad)));
        assert!(q.pending.is_empty());
        assert_eq!(pool.available(), pool.capacity());
    }

    #[test]
    fn a_sum_split_anywhere_is_the_sum_of_the_whole() {
        let data: Vec<u8> = (0..301u32).map(|i| (i * 37 + 11) as u8).collect();
        let whole = wire::checksum::fold(wire::checksum::accumulate(0, &data));
        for at in 0..=data.len() {
            let (a, b) = data.split_at(at);
            assert_eq!(
                wire::checksum::fold(sum_split(a, b)),
                whole,
                "split at {at}"
            );
        }
    }
}
