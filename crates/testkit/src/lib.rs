//! Test fixtures shared by the workspace's tests and fuzz targets: the frames they send and
//! check, and stub nodes that run the protocol graph in-process. It owns fixtures only: it is
//! a `[dev-dependencies]` entry (or the fuzz workspace's dependency) and must never become a
//! runtime dependency of any crate.

mod frame;
pub mod stubs;

pub use frame::{
    Eth, Fill, Macs, Pattern, TEST_ETHERTYPE, UDP_PORTS, echo_request, icmp4_frame, ipv4_frame,
    seq_frame, seq_of, seq_payload, udp4_frame, udp4_frame_ports,
};
