//! An AF_XDP uplink: a host kernel interface whose frames an XDP program steers to AF_XDP
//! sockets, one socket per queue, each with its own UMEM.
//!
//! On open we create an XSKMAP and load a six-instruction XDP program
//! (`bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS)`, [`program`]), attach it to
//! the interface through a BPF link (driver mode, or the generic skb mode when the driver has
//! no native XDP or refuses it), and bind one socket per queue id, inserted into the map at
//! that id. Frames arriving on a queue with a socket go to it before the kernel's stack sees
//! them; any others (a queue without a socket) go on to the stack. The program is detached
//! when the last queue is dropped, and by the kernel when the process exits, however it exits.
//!
//! Each socket has a UMEM of `frames` frames split in two halves: receive frames cycle
//! through the fill and rx rings, transmit frames through the tx and completion rings
//! (`ring.rs`, `umem.rs`). Receive copies each frame into pool buffers and gives the UMEM frame
//! straight back, so the pool never holds UMEM memory and a slow graph cannot starve the fill
//! ring. Transmit copies each chain into a free UMEM frame.
//!
//! Copy mode (`XDP_COPY`) works on any interface with XDP; zero-copy (`XDP_ZEROCOPY`) needs a
//! driver that implements it (veth does not). Both use `XDP_USE_NEED_WAKEUP`.
//!
//! # Limits
//!
//! A frame must fit one UMEM frame after the kernel's 256 bytes of headroom (AF_XDP
//! multi-buffer, `XDP_USE_SG`, is not used): MTU 1774 with 2048-byte frames, 3822 with
//! 4096-byte frames. A veth in driver mode further needs its peer's MTU to fit one page with
//! the XDP headroom (at most 3506 at 4 KiB pages); auto attach falls back to skb mode there.
//!
//! The references are the kernel's "AF_XDP" documentation (Documentation/networking/af_xdp.rst)
//! and libbpf's `xsk.h` for the ring protocol.

mod counters;
pub(crate) mod program;
mod ring;
mod rx;
mod sys;
mod tx;
mod umem;

use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::net::xdp::{
    SocketAddrXdp, SocketAddrXdpFlags, XDP_PGOFF_RX_RING, XDP_PGOFF_TX_RING,
    XDP_UMEM_PGOFF_COMPLETION_RING, XDP_UMEM_PGOFF_FILL_RING, XdpRingOffset, XdpUmemReg,
    XdpUmemRegFlags,
};
use rustix::net::{AddressFamily, SocketFlags, SocketType, sockopt};

pub use crate::af_packet::{Interface, LinkError, SendStats};
pub use counters::{RxCounters, RxStats, TxCounters, TxStats};
pub use rx::{RecvStats, RxQueue};
pub use tx::TxQueue;

use crate::af_packet::LookupError;
use program::{ProgramError, XdpProgram};
use ring::{ConsRing, Desc, Offsets, ProdRing};
use umem::Umem;

/// The kernel's headroom before a frame it copies into a UMEM frame (XDP_PACKET_HEADROOM).
const XDP_PACKET_HEADROOM: u32 = 256;
/// Ethernet header plus one VLAN tag: the most a frame exceeds its MTU by.
const L2_OVERHEAD: u32 = 18;
/// `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17): descriptors one copy-mode `sendto` may send.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// How a socket's frames get between the driver and the UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XskMode {
    /// Zero-copy where the driver has it, else copy. An opened uplink reports which.
    #[default]
    Auto,
    /// The kernel copies each frame between its own buffers and the UMEM.
    Copy,
    /// The driver receives into and sends from the UMEM itself.
    ZeroCopy,
}

impl fmt::Display for XskMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XskMode::Auto => "auto",
            XskMode::Copy => "copy",
            XskMode::ZeroCopy => "zero-copy",
        })
    }
}

/// Where the XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpAttach {
    /// Driver mode, or skb mode if the driver has no native XDP or refuses it. An opened
    /// uplink reports which.
    #[default]
    Auto,
    /// In the driver, before an skb exists (`XDP_FLAGS_DRV_MODE`).
    Driver,
    /// Generic XDP, on the skb at the start of the kernel's receive path
    /// (`XDP_FLAGS_SKB_MODE`): any interface, slower, copy mode only.
    Skb,
}

impl fmt::Display for XdpAttach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XdpAttach::Auto => "auto",
            XdpAttach::Driver => "driver",
            XdpAttach::Skb => "skb",
        })
    }
}

/// How to open an AF_XDP uplink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// Sockets on queue ids `0..queues` (at most the interface's queue count).
    pub queues: u16,
    pub mode: XskMode,
    pub attach: XdpAttach,
    /// UMEM frames per queue, a power of two from 64: half receive (the fill and rx rings'
    /// size), half transmit (the tx and completion rings'). Default 4096: 2048 frames of
    /// slack each way.
    pub frames: u32,
    /// Bytes per UMEM frame, 2048 or 4096; 0 picks 2048 when the MTU fits, else 4096.
    pub frame_size: u32,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig {
            queues: 1,
            mode: XskMode::Auto,
            attach: XdpAttach::Auto,
            frames: 4096,
            frame_size: 0,
        }
    }
}

/// Why an AF_XDP uplink could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AfXdpError {
    #[error(
        "interface name {0:?} is invalid: it must be 1 to 15 bytes without '/', whitespace or NUL"
    )]
    BadName(String),
    #[error("no interface named {0:?} in this network namespace")]
    NoSuchInterface(String),
    #[error(
        "interface {name:?} has link type {link_type}, not Ethernet ({}): AF_XDP uplinks carry Ethernet frames",
        libc::ARPHRD_ETHER
    )]
    NotEthernet { name: String, link_type: u16 },
    #[error(
        "this kernel has no AF_XDP sockets (socket(AF_XDP) failed with EAFNOSUPPORT: it was built without CONFIG_XDP_SOCKETS)"
    )]
    Unsupported,
    #[error("af_xdp {name:?}: {field} = {value} is invalid: {want}")]
    Config {
        name: String,
        field: &'static str,
        value: u64,
        want: String,
    },
    #[error(
        "af_xdp {name:?}: the interface's MTU {mtu} is too large: a {frame_size}-byte UMEM frame holds frames of MTU {max} at most (after the kernel's 256 bytes of headroom and 18 of Ethernet and VLAN headers); lower the MTU to {max} or less"
    )]
    MtuTooLarge {
        name: String,
        mtu: u32,
        frame_size: u32,
        max: u32,
    },
    #[error("af_xdp {name:?}: the kernel refused the XDP program: {source}; verifier log: {log}")]
    Program {
        name: String,
        source: io::Error,
        log: String,
    },
    #[error(
        "af_xdp {name:?}: another XDP program is already attached to the interface ({source}); `ip -d link show {name}` names it: detach it first, veclane does not replace it"
    )]
    XdpBusy { name: String, source: io::Error },
    #[error("af_xdp {name:?}: attaching the XDP program in {mode} mode failed: {source}{hint}")]
    Attach {
        name: String,
        mode: XdpAttach,
        source: io::Error,
        hint: &'static str,
    },
    #[error(
        "af_xdp {name:?} queue {queue}: the driver does not support zero-copy AF_XDP ({source}); use mode copy or auto"
    )]
    ZeroCopyUnsupported {
        name: String,
        queue: u16,
        source: io::Error,
    },
    #[error("af_xdp {name:?} queue {queue}: {step}: {source}")]
    Os {
        name: String,
        queue: u16,
        step: &'static str,
        source: io::Error,
    },
}

/// One queue's AF_XDP socket, shared by its [`RxQueue`] and [`TxQueue`]; it keeps the XDP
/// program attached while any queue of the uplink lives.
#[derive(Debug)]
pub(crate) struct Socket {
    fd: OwnedFd,
    _program: Arc<XdpProgram>,
}

/// An opened uplink: the interface and its queue pairs, before they go to workers.
#[derive(Debug)]
pub struct AfXdp {
    interface: Interface,
    mode: XskMode,
    attach: XdpAttach,
    driver_refusal: Option<io::Error>,
    frame_size: u32,
    queues: Vec<(RxQueue, TxQueue)>,
}

impl AfXdp {
    /// Attaches the XDP program to `host_if` (in the calling thread's network namespace) and
    /// opens a socket on each of its queues `0..cfg.queues`. Either everything opens or
    /// nothing stays behind: an error closes the sockets and detaches the program.
    pub fn open(host_if: &str, cfg: AfXdpConfig) -> Result<AfXdp, AfXdpError> {
        let name = || host_if.to_string();
        let interface = Interface::lookup(host_if).map_err(|e| match e {
            LookupError::BadName => AfXdpError::BadName(name()),
            LookupError::NoSuchInterface => AfXdpError::NoSuchInterface(name()),
            LookupError::NotEthernet(link_type) => AfXdpError::NotEthernet {
                name: name(),
                link_type,
            },
            LookupError::Os(step, source) => AfXdpError::Os {
                name: name(),
                queue: 0,
                step,
                source,
            },
        })?;
        let geo = Geometry::check(&interface, &cfg)?;
        drop(xsk_socket().map_err(|e| os_error(&interface, 0, "socket(AF_XDP)", e))?);
        let mut program =
            XdpProgram::load(u32::from(cfg.queues)).map_err(|e| program_error(&interface, e))?;
        let (attach, driver_refusal) = program
            .attach(interface.ifindex, cfg.attach)
            .map_err(|e| program_error(&interface, e))?;
        let program = Arc::new(program);
        let mut queues = Vec::with_capacity(usize::from(cfg.queues));
        let mut mode = XskMode::Copy;
        for q in 0..cfg.queues {
            let (rx, tx, m) = open_queue(&interface, &geo, q, cfg.mode, &program)?;
            program
                .insert(u32::from(q), rx.fd())
                .map_err(|e| os_error(&interface, q, "BPF_MAP_UPDATE_ELEM (XSKMAP)", e))?;
            mode = m;
            queues.push((rx, tx));
        }
        Ok(AfXdp {
            interface,
            mode,
            attach,
            driver_refusal,
            frame_size: geo.frame_size,
            queues,
        })
    }

    pub fn interface(&self) -> &Interface {
        &self.interface
    }

    pub fn ifindex(&self) -> u32 {
        self.interface.ifindex
    }

    pub fn mac(&self) -> [u8; 6] {
        self.interface.mac
    }

    pub fn mtu(&self) -> u32 {
        self.interface.mtu
    }

    /// The mode the sockets were bound in: [`XskMode::Copy`] or [`XskMode::ZeroCopy`].
    pub fn mode(&self) -> XskMode {
        self.mode
    }

    /// Where the program was attached: [`XdpAttach::Driver`] or [`XdpAttach::Skb`].
    pub fn attach_mode(&self) -> XdpAttach {
        self.attach
    }

    /// Why driver mode was refused, when [`XdpAttach::Auto`] fell back to skb mode.
    pub fn driver_mode_refusal(&self) -> Option<&io::Error> {
        self.driver_refusal.as_ref()
    }

    /// Bytes per UMEM frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// The queue pairs, to hand to workers (keep their counters first). The XDP program stays
    /// attached until the last of them is dropped.
    pub fn into_queues(self) -> Vec<(RxQueue, TxQueue)> {
        self.queues
    }
}

fn os_error(i: &Interface, queue: u16, step: &'static str, source: io::Error) -> AfXdpError {
    if source.raw_os_error() == Some(libc::EAFNOSUPPORT) {
        return AfXdpError::Unsupported;
    }
    AfXdpError::Os {
        name: i.name.clone(),
        queue,
        step,
        source,
    }
}

fn program_error(i: &Interface, e: ProgramError) -> AfXdpError {
    let name = i.name.clone();
    match e {
        ProgramError::Map(source) => AfXdpError::Os {
            name,
            queue: 0,
            step: "BPF_MAP_CREATE (XSKMAP)",
            source,
        },
        ProgramError::Load(source, log) => AfXdpError::Program { name, source, log },
        ProgramError::Busy(source) => AfXdpError::XdpBusy { name, source },
        ProgramError::Attach(mode, source) => {
            let hint = match source.raw_os_error() {
                Some(libc::ERANGE) => {
                    " (the MTU, or a veth peer's, is too large for XDP in driver mode: a veth takes at most one page per frame, MTU 3506 at 4 KiB pages; attach in skb mode or auto)"
                }
                Some(libc::EOPNOTSUPP) => {
                    " (the driver has no native XDP; attach in skb mode or auto)"
                }
                Some(libc::ENOSPC) => {
                    " (a veth needs at least as many rx queues as its peer has tx queues)"
                }
                _ => "",
            };
            AfXdpError::Attach {
                name,
                mode,
                source,
                hint,
            }
        }
    }
}

/// Checked UMEM sizes for every queue of one interface.
#[derive(Debug)]
struct Geometry {
    frame_size: u32,
    /// Receive frames (the fill and rx rings' size), then as many transmit frames.
    half: u32,
}

impl Geometry {
    fn check(i: &Interface, cfg: &AfXdpConfig) -> Result<Geometry, AfXdpError> {
        let bad = |field, value: u32, want: String| AfXdpError::Config {
            name: i.name.clone(),
            field,
            value: u64::from(value),
            want,
        };
        if cfg.queues == 0 {
            return Err(bad("queues", 0, "at least 1".into()));
        }
        if !cfg.frames.is_power_of_two() || !(64..=1 << 20).contains(&cfg.frames) {
            let want = "a power of two from 64 to 1048576".into();
            return Err(bad("frames", cfg.frames, want));
        }
        let holds = |size: u32| size - XDP_PACKET_HEADROOM - L2_OVERHEAD;
        let frame_size = match cfg.frame_size {
            0 if i.mtu <= holds(2048) => 2048,
            0 => 4096,
            s @ (2048 | 4096) => s,
            s => {
                return Err(bad(
                    "frame_size",
                    s,
                    "2048 or 4096 (or 0: from the MTU)".into(),
                ));
            }
        };
        if i.mtu > holds(frame_size) {
            return Err(AfXdpError::MtuTooLarge {
                name: i.name.clone(),
                mtu: i.mtu,
                frame_size,
                max: holds(frame_size),
            });
        }
        Ok(Geometry {
            frame_size,
            half: cfg.frames / 2,
        })
    }

    fn rx_len(&self) -> u64 {
        u64::from(self.half) * u64::from(self.frame_size)
    }
}

type Step<T> = Result<T, (&'static str, io::Error)>;

fn step<T, E: Into<io::Error>>(name: &'static str, r: Result<T, E>) -> Step<T> {
    r.map_err(|e| (name, e.into()))
}

fn xsk_socket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::XDP,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

fn offsets(o: XdpRingOffset) -> io::Result<Offsets> {
    let flags = o.flags.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel's rings have no flags word (Linux 5.4 or later is needed)",
        )
    })?;
    Ok(Offsets {
        producer: o.producer,
        consumer: o.consumer,
        flags,
        desc: o.desc,
    })
}

/// Opens queue `q` in `mode`.
fn open_queue(
    i: &Interface,
    geo: &Geometry,
    q: u16,
    mode: XskMode,
    program: &Arc<XdpProgram>,
) -> Result<(RxQueue, TxQueue, XskMode), AfXdpError> {
    open_socket(i, geo, q, mode, program).map_err(|(step, e)| {
        if mode == XskMode::ZeroCopy && step == "bind" && e.raw_os_error() == Some(libc::EOPNOTSUPP)
        {
            AfXdpError::ZeroCopyUnsupported {
                name: i.name.clone(),
                queue: q,
                source: e,
            }
        } else {
            bind_error(i, q, (step, e))
        }
    })
}

/// A failed bind on a queue past the first usually means the interface has fewer queues.
fn bind_error(i: &Interface, q: u16, (step, e): (&'static str, io::Error)) -> AfXdpError {
    if step == "bind" && q > 0 && e.raw_os_error() == Some(libc::EINVAL) {
        return AfXdpError::Config {
            name: i.name.clone(),
            field: "queues",
            value: u64::from(q) + 1,
            want: format!(
                "at most the interface's queue count (`ethtool -l {}`; a veth has as many as its numrxqueues and numtxqueues), and queue {q} was refused",
                i.name
            ),
        };
    }
    os_error(i, q, step, e)
}

/// One AF_XDP socket on queue `q` with its UMEM and four rings, bound in `mode` and ready
/// (not yet in the map); returns the mode obtained.
fn open_socket(
    i: &Interface,
    geo: &Geometry,
    q: u16,
    mode: XskMode,
    program: &Arc<XdpProgram>,
) -> Step<(RxQueue, TxQueue, XskMode)> {
    let fd = step("socket(AF_XDP)", xsk_socket())?;
    let half = geo.half;
    let len = 2 * geo.rx_len();
    let umem = step("mmap UMEM", Umem::new(len as usize))?;
    let reg = XdpUmemReg {
        addr: umem.addr(),
        len: umem.len(),
        chunk_size: geo.frame_size,
        headroom: 0,
        flags: XdpUmemRegFlags::empty(),
        tx_metadata_len: 0,
    };
    step("XDP_UMEM_REG", sockopt::set_xdp_umem_reg(&fd, reg))?;
    step(
        "XDP_UMEM_FILL_RING",
        sockopt::set_xdp_umem_fill_ring_size(&fd, half),
    )?;
    step(
        "XDP_UMEM_COMPLETION_RING",
        sockopt::set_xdp_umem_completion_ring_size(&fd, half),
    )?;
    step("XDP_RX_RING", sockopt::set_xdp_rx_ring_size(&fd, half))?;
    step("XDP_TX_RING", sockopt::set_xdp_tx_ring_size(&fd, half))?;
    let off = step("XDP_MMAP_OFFSETS", sockopt::xdp_mmap_offsets(&fd))?;
    // The rings are mapped before bind: the kernel maps them only while the socket is unbound.
    let b = fd.as_fd();
    let mapped = "mmap rings";
    let fill: ProdRing<u64> = step(
        mapped,
        offsets(off.fr).and_then(|o| ProdRing::new(b, XDP_UMEM_PGOFF_FILL_RING, o, half)),
    )?;
    let comp: ConsRing<u64> = step(
        mapped,
        offsets(off.cr).and_then(|o| ConsRing::new(b, XDP_UMEM_PGOFF_COMPLETION_RING, o, half)),
    )?;
    let rx: ConsRing<Desc> = step(
        mapped,
        offsets(off.rx).and_then(|o| ConsRing::new(b, XDP_PGOFF_RX_RING, o, half)),
    )?;
    let tx: ProdRing<Desc> = step(
        mapped,
        offsets(off.tx).and_then(|o| ProdRing::new(b, XDP_PGOFF_TX_RING, o, half)),
    )?;
    // Copy-mode transmit builds an skb per frame, charged to the send buffer until the frame
    // completes: let the whole ring be in flight, forcing past wmem_max when we may.
    let sndbuf = half as usize * (geo.frame_size as usize + 1024);
    if sockopt::set_socket_send_buffer_size_force(&fd, sndbuf).is_err() {
        let _ = sockopt::set_socket_send_buffer_size(&fd, sndbuf);
    }
    // Neither flag (auto): the kernel tries zero-copy and falls back to copy by itself
    // (`xp_assign_dev`); XDP_OPTIONS then says which it got.
    let forced = match mode {
        XskMode::Auto => SocketAddrXdpFlags::empty(),
        XskMode::Copy => SocketAddrXdpFlags::XDP_COPY,
        XskMode::ZeroCopy => SocketAddrXdpFlags::XDP_ZEROCOPY,
    };
    let addr = SocketAddrXdp::new(
        forced | SocketAddrXdpFlags::XDP_USE_NEED_WAKEUP,
        i.ifindex,
        u32::from(q),
    );
    // A socket on this queue that was just closed (the interface deleted and made again, or
    // a zero-copy attempt refused a moment ago) is let go by the kernel a little later, and
    // until then bind says EBUSY: wait for it, briefly (this is the control thread).
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        match rustix::net::bind(&fd, &addr) {
            Err(rustix::io::Errno::BUSY) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r => {
                step("bind", r)?;
                break;
            }
        }
    }
    let options = step("XDP_OPTIONS", sockopt::xdp_options(&fd))?;
    let zero_copy = options.contains(rustix::net::xdp::XdpOptionsFlags::XDP_OPTIONS_ZEROCOPY);
    // One copy-mode sendto may send the whole ring (Linux 6.17; older kernels send 32 and
    // say EAGAIN, which the transmit kick handles).
    let _ = crate::af_packet::sys::set_int(
        fd.as_fd(),
        libc::SOL_XDP,
        XDP_MAX_TX_SKB_BUDGET,
        half as libc::c_int,
    );
    let sock = Arc::new(Socket {
        fd,
        _program: program.clone(),
    });
    let (rx_area, tx_area) = umem.split(geo.rx_len());
    let rxq = RxQueue::new(
        rx,
        fill,
        sock.clone(),
        rx_area,
        i.ifindex,
        q,
        geo.frame_size,
        zero_copy,
    );
    let txq = TxQueue::new(
        tx,
        comp,
        sock,
        tx_area,
        i.ifindex,
        q,
        geo.frame_size,
        i.mtu,
        zero_copy,
    );
    let got = if zero_copy {
        XskMode::ZeroCopy
    } else {
        XskMode::Copy
    };
    Ok((rxq, txq, got))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_move_between_threads() {
        fn send<T: Send>() {}
        send::<AfXdp>();
        send::<RxQueue>();
        send::<TxQueue>();
        send::<crate::xdp_nodes::QueueCommand>();
    }

    #[test]
    fn frame_size_follows_the_mtu() {
        let i = |mtu| Interface {
            name: "u0".into(),
            ifindex: 1,
            mac: [0; 6],
            mtu,
        };
        let geo = |mtu, frame_size| {
            Geometry::check(
                &i(mtu),
                &AfXdpConfig {
                    frame_size,
                    ..Default::default()
                },
            )
            .map(|g| (g.frame_size, g.half))
        };
        assert_eq!(geo(1500, 0).unwrap(), (2048, 2048));
        assert_eq!(geo(1774, 0).unwrap(), (2048, 2048), "2048 - 256 - 18");
        assert_eq!(geo(1775, 0).unwrap(), (4096, 2048));
        assert_eq!(geo(1500, 4096).unwrap(), (4096, 2048));
        assert_eq!(geo(3822, 0).unwrap(), (4096, 2048));
        assert!(matches!(
            geo(3823, 0),
            Err(AfXdpError::MtuTooLarge { max: 3822, .. })
        ));
        assert!(matches!(
            geo(1775, 2048),
            Err(AfXdpError::MtuTooLarge { max: 1774, .. })
        ));
    }
}
