//! SCTP's checksum (RFC 9260 §6.8): a CRC32c (RFC 3309) of the whole packet, which no
//! rewrite can update from deltas as the Internet checksum is. A packet whose ports a
//! service translates has it computed again (its addresses are not in it: SCTP has no
//! pseudo-header).

use wire::Ipv4;
use wire::ipv4::MIN_HEADER_LEN;

/// Where the checksum lies, from the IPv4 header (no options): bytes 8 to 11 of SCTP's
/// common header, after the ports and the verification tag.
const CHECKSUM_AT: usize = MIN_HEADER_LEN + 8;

/// Computes the checksum of the SCTP packet at `head` (an IPv4 packet without options whose
/// first buffer holds SCTP's common header) over its chain, and writes it. False, with the
/// checksum field zeroed, when the packet is shorter than its IPv4 length or its external
/// segment cannot be read.
pub(crate) fn fill_checksum(pool: &mut buffer::Pool, head: u32) -> bool {
    // A single-copy packet's payload, still in its pod's memory, is brought in first.
    if !pool.linearize_chain(head) {
        return false;
    }
    let d = pool.data_mut(head);
    let Some(h) = d.first_chunk_mut::<{ CHECKSUM_AT + 4 }>() else {
        return false;
    };
    h[CHECKSUM_AT..].fill(0);
    let total = usize::from(Ipv4::new_unchecked(&h[..MIN_HEADER_LEN]).total_len());
    // The SCTP packet: from the end of the IPv4 header to its total length, across the
    // chain.
    let (mut skip, mut left) = (MIN_HEADER_LEN, total.saturating_sub(MIN_HEADER_LEN));
    let (mut crc, mut b) = (0, head);
    while b != buffer::NONE && left > 0 {
        let data = pool.data(b);
        let part = data.get(skip..).unwrap_or_default();
        let part = &part[..part.len().min(left)];
        crc = crc32c::crc32c_append(crc, part);
        left -= part.len();
        skip = skip.saturating_sub(data.len());
        b = pool.meta(b).next;
    }
    if left != 0 {
        return false;
    }
    // Stored least significant byte first: the CRC is reflected (RFC 9260 Appendix A).
    pool.data_mut(head)[CHECKSUM_AT..CHECKSUM_AT + 4].copy_from_slice(&crc.to_le_bytes());
    true
}
