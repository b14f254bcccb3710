//! Shared by the fuzz targets that run the protocol graph (`ip4_graph`, `vxlan_uplink`).

use graph::Runtime;

/// Fragments for us held for reassembly: each is copied into the reassembly store and its
/// buffer freed there, so it is accounted for, neither sent nor dropped (the datagram, once
/// complete, continues in the last fragment's place).
pub fn held_for_reassembly(rt: &Runtime) -> u64 {
    rt.errors()
        .iter()
        .filter(|(n, r, _)| *n == "ip4-reassembly" && r.starts_with("fragment held"))
        .map(|(_, _, c)| c)
        .sum()
}
