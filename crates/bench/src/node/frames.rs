//! The frames the generator sends in a node trial: the remote node's on the uplink and each
//! network's pod's.

use super::{GEN_MAC, NODE_VTEP, REMOTE_VTEP, UPLINK_MAC, VNI_BASE, ip, octet, pod_mac};
use crate::Shape;
use trafgen::{FrameSpec, MacAddr, VxlanSpec};

/// What the remote node sends in `shape`: network `k`'s frames from 10.(10+k).1.2 to its pod
/// 10.(10+k).2.2, to the node's uplink MAC (singlenet) or inside VXLAN to the tunnel's MAC
/// (multinet: the one the node answers ARP with in that network).
pub(super) fn uplink_spec(shape: Shape, size: usize, networks: u16) -> FrameSpec {
    let (size, mix) = crate::trial::frame_spec_size(size);
    let base = FrameSpec {
        size,
        mix,
        src_mac: MacAddr(GEN_MAC),
        dst_mac: MacAddr(UPLINK_MAC),
        src_ip: "10.10.1.2".parse().expect("an address"),
        dst_ip: "10.10.2.2".parse().expect("an address"),
        networks,
        ..Default::default()
    };
    match shape {
        Shape::Singlenet => base,
        Shape::Multinet => FrameSpec {
            dst_macs: (0..networks)
                .map(|k| {
                    MacAddr(api::vxlan_tunnel_mac(
                        ip(NODE_VTEP),
                        VNI_BASE + u32::from(k),
                        ip(REMOTE_VTEP),
                    ))
                })
                .collect(),
            vxlan: Some(VxlanSpec {
                src_mac: MacAddr(GEN_MAC),
                dst_mac: MacAddr(UPLINK_MAC),
                src_ip: ip(REMOTE_VTEP),
                dst_ip: ip(NODE_VTEP),
                vni: VNI_BASE,
            }),
            ..base
        },
    }
}

/// What network `k`'s pod sends: from 10.(10+k).2.2 to a remote pod, 10.(10+k).1.2.
pub(super) fn pod_spec(size: usize, k: u16) -> FrameSpec {
    let o = octet(k) as u8;
    let (size, mix) = crate::trial::frame_spec_size(size);
    FrameSpec {
        size,
        mix,
        src_mac: MacAddr(GEN_MAC),
        dst_mac: MacAddr(pod_mac(k)),
        src_ip: [10, o, 2, 2].into(),
        dst_ip: [10, o, 1, 2].into(),
        ..Default::default()
    }
}
