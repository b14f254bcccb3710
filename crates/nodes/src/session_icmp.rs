//! ICMP errors about a translated flow, translated too (`ip4-session`).
//!
//! An error (destination unreachable, fragmentation needed, time exceeded, parameter
//! problem) quotes the packet that caused it. When that packet belongs to a session, it
//! went out translated: the error must come back to the flow's end as that end sent or got
//! the packet, or its stack cannot match it to the connection (a client that never learns
//! the path's MTU stalls). So the quoted packet is translated back, and the outer addresses
//! with it where they are the translated ones (an error from the backend itself comes from
//! the VIP). Both the errors routers send and those veclane makes itself (its MTU's
//! fragmentation needed) pass here.

use session::{Deltas, Dir, Key, Lookup, Table};
use wire::Ipv4;
use wire::ipv4::MIN_HEADER_LEN;

/// ICMP types that quote a packet.
const ERRORS: [u8; 3] = [3, 11, 12];

/// What became of an ICMP error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Not an ICMP error quoting TCP, UDP or SCTP.
    NotError,
    /// About a flow of no session: left alone.
    NoSession,
    /// Translated: it relates to a session, and passes as the session does, routed in
    /// VRF slot `vrf` (the session's VRF on the side it goes to).
    Translated { vrf: u32 },
    /// The quote or the whole message is not in the first buffer.
    Short,
}

/// Whether the IPv4 packet `ip` (no options) is an ICMP error.
#[inline]
pub(crate) fn is_error(ip: &[u8]) -> bool {
    ip.get(9) == Some(&session::PROTO_ICMP)
        && ip.get(MIN_HEADER_LEN).is_some_and(|t| ERRORS.contains(t))
}

/// Translates the ICMP error `ip` (its head buffer, which must hold the whole message) if it
/// quotes a packet of a session of VRF `vrf` in `table`.
pub(crate) fn translate(table: &Table, vrf: u32, ip: &mut [u8]) -> Outcome {
    if !is_error(ip) {
        return Outcome::NotError;
    }
    let Some(h) = ip.first_chunk::<MIN_HEADER_LEN>() else {
        return Outcome::Short;
    };
    let total = usize::from(Ipv4::new_unchecked(h).total_len());
    // The quote: an IPv4 header (options allowed) and the first 8 bytes of its payload.
    const QUOTE: usize = MIN_HEADER_LEN + 8;
    let Some(q) = ip.get(QUOTE..) else {
        return Outcome::Short;
    };
    let ihl = usize::from(q.first().map_or(0, |v| v & 0x0f)) * 4;
    let proto = q.get(9).copied().unwrap_or(0);
    let translated = [session::PROTO_TCP, session::PROTO_UDP, session::PROTO_SCTP];
    if ihl < MIN_HEADER_LEN || !translated.contains(&proto) {
        return Outcome::NotError;
    }
    if ip.len() < total || total < QUOTE + ihl + 8 {
        return Outcome::Short;
    }
    let word = |ip: &[u8], o: usize| u32::from_be_bytes([ip[o], ip[o + 1], ip[o + 2], ip[o + 3]]);
    let port = |ip: &[u8], o: usize| u16::from_be_bytes([ip[o], ip[o + 1]]);
    let l4 = QUOTE + ihl;
    let quoted = Key::new(
        vrf as u16,
        proto,
        word(ip, QUOTE + 12),
        word(ip, QUOTE + 16),
        port(ip, l4),
        port(ip, l4 + 2),
    );
    let Lookup::Live(hit) = table.lookup(&quoted.reverse()) else {
        return Outcome::NoSession;
    };
    let (k, x) = (hit.session.key, hit.session.xlate);
    // The quote as its sender knew it, and the outer addresses to put back: (source as it
    // is, as it becomes), (destination as it is, as it becomes).
    let vrf_out = match hit.dir {
        Dir::Reverse => k.vrf,
        Dir::Forward => x.vrf,
    };
    let (src, dst, sport, dport, outer) = match hit.dir {
        // A forward packet, translated on its way out: back to the client's view.
        Dir::Reverse => (
            k.src,
            k.dst,
            k.sport,
            k.dport,
            [(x.dst, k.dst), (x.src, k.src)],
        ),
        // A reply, translated back on its way to the client: to the backend's view.
        Dir::Forward => (
            x.dst,
            x.src,
            x.dport,
            x.sport,
            [(k.src, x.src), (k.dst, x.dst)],
        ),
    };
    let old = (quoted.src, quoted.dst, quoted.sport, quoted.dport);
    let d = Deltas::of_rewrite(proto, old, (src, dst, sport, dport));
    // The quoted header and ports; the quoted UDP checksum too (TCP's is past the 8 bytes,
    // and SCTP's, a CRC of the whole packet, too).
    ip[QUOTE + 12..QUOTE + 16].copy_from_slice(&src.to_be_bytes());
    ip[QUOTE + 16..QUOTE + 20].copy_from_slice(&dst.to_be_bytes());
    ip[QUOTE + 10..QUOTE + 12].fill(0);
    let c = wire::checksum::checksum(&ip[QUOTE..QUOTE + ihl]);
    ip[QUOTE + 10..QUOTE + 12].copy_from_slice(&c.to_be_bytes());
    ip[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
    ip[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
    if proto == session::PROTO_UDP {
        let c = d.l4.apply_udp(port(ip, l4 + 6));
        ip[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    }
    // The outer source (an error from the backend comes from the VIP) and destination.
    let mut v = Ipv4::new_unchecked(&mut ip[..MIN_HEADER_LEN]);
    let (s, t) = (u32::from(v.src_addr()), u32::from(v.dst_addr()));
    let [(from, to_src), (was, to_dst)] = outer;
    if s == from {
        v.set_src_addr(to_src.into());
    }
    if t == was {
        v.set_dst_addr(to_dst.into());
    }
    v.fill_checksum();
    // The ICMP checksum over the whole message.
    let icmp = &mut ip[MIN_HEADER_LEN..total];
    icmp[2..4].fill(0);
    let c = wire::checksum::checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Outcome::Translated {
        vrf: u32::from(vrf_out),
    }
}

#[cfg(test)]
mod tests {
    use session::{Config, NewSession, Timeouts, Translation};

    use super::*;

    const CLIENT: [u8; 4] = [10, 1, 0, 5];
    const VIP: [u8; 4] = [10, 96, 0, 10];
    const BACKEND: [u8; 4] = [10, 1, 0, 12];
    const ROUTER: [u8; 4] = [10, 1, 0, 1];

    /// A table with one session: CLIENT:40000 -> VIP:80 (UDP) translated to BACKEND:8080.
    fn table() -> (std::sync::Arc<Table>, session::Owner) {
        table_to(0)
    }

    /// As [`table`], the translated packet going on in VRF `to` (an external flow's).
    fn table_to(to: u16) -> (std::sync::Arc<Table>, session::Owner) {
        let (t, mut owners) = Table::new(Config {
            max_sessions: 16,
            workers: 1,
            timeouts: Timeouts::default(),
        })
        .unwrap();
        let mut o = owners.remove(0);
        add(&mut o, session::PROTO_UDP, 8080, to);
        (t, o)
    }

    /// Adds to `o` a session CLIENT:40000 -> VIP:80 of `proto` translated to
    /// BACKEND:`dport`, going on in VRF `to`.
    fn add(o: &mut session::Owner, proto: u8, dport: u16, to: u16) {
        let k = Key::new(
            0,
            proto,
            u32::from_be_bytes(CLIENT),
            u32::from_be_bytes(VIP),
            40000,
            80,
        );
        let s = NewSession {
            xlate: Translation {
                dst: u32::from_be_bytes(BACKEND),
                dport,
                vrf: to,
                ..Translation::identity(&k)
            },
            ..NewSession::plain(k)
        };
        o.create(&s, 0).unwrap();
    }

    /// An ICMP error from `from` to `to` quoting a UDP datagram `q_src:q_sport ->
    /// q_dst:q_dport` (its header and 8 bytes), with valid checksums all through.
    fn error(from: [u8; 4], to: [u8; 4], q: Ends) -> Vec<u8> {
        let mut quoted = Vec::new();
        etherparse::PacketBuilder::ipv4(q.0, q.2, 63)
            .udp(q.1, q.3)
            .write(&mut quoted, &[0x5a; 16])
            .unwrap();
        quoted.truncate(28);
        let mut v = Vec::new();
        etherparse::PacketBuilder::ipv4(from, to, 64)
            .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(
                etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded {
                    next_hop_mtu: 1450,
                },
            ))
            .write(&mut v, &quoted)
            .unwrap();
        v
    }

    /// A packet's (src, sport, dst, dport).
    type Ends = ([u8; 4], u16, [u8; 4], u16);

    /// The outer (src, dst), the quoted (src, sport, dst, dport), after checking every
    /// checksum the message carries.
    fn read(v: &[u8]) -> (([u8; 4], [u8; 4]), Ends) {
        let outer = etherparse::Ipv4HeaderSlice::from_slice(v).unwrap();
        assert_eq!(
            outer.header_checksum(),
            outer.to_header().calc_header_checksum()
        );
        let total = usize::from(outer.total_len());
        assert_eq!(wire::checksum::checksum(&v[20..total]), 0, "icmp checksum");
        let q = etherparse::Ipv4HeaderSlice::from_slice(&v[28..]).unwrap();
        assert_eq!(q.header_checksum(), q.to_header().calc_header_checksum());
        let p = |o: usize| u16::from_be_bytes([v[o], v[o + 1]]);
        (
            (outer.source(), outer.destination()),
            (q.source(), p(48), q.destination(), p(50)),
        )
    }

    /// An error about the client's translated packet (from a router on the way, or from the
    /// backend itself) reaches the client as about its packet to the VIP.
    #[test]
    fn an_error_about_a_forward_packet_reads_as_the_client_sent_it() {
        let (t, _o) = table();
        let mut e = error(ROUTER, CLIENT, (CLIENT, 40000, BACKEND, 8080));
        assert_eq!(translate(&t, 0, &mut e), Outcome::Translated { vrf: 0 });
        assert_eq!(read(&e), ((ROUTER, CLIENT), (CLIENT, 40000, VIP, 80)));
        let mut e = error(BACKEND, CLIENT, (CLIENT, 40000, BACKEND, 8080));
        assert_eq!(translate(&t, 0, &mut e), Outcome::Translated { vrf: 0 });
        assert_eq!(
            read(&e),
            ((VIP, CLIENT), (CLIENT, 40000, VIP, 80)),
            "from the VIP"
        );
    }

    /// An error about a reply (sent to the VIP) reaches the backend as about its own packet.
    #[test]
    fn an_error_about_a_reply_reads_as_the_backend_sent_it() {
        let (t, _o) = table();
        let mut e = error(ROUTER, VIP, (VIP, 80, CLIENT, 40000));
        assert_eq!(translate(&t, 0, &mut e), Outcome::Translated { vrf: 0 });
        assert_eq!(
            read(&e),
            ((ROUTER, BACKEND), (BACKEND, 8080, CLIENT, 40000))
        );
    }

    /// Errors about no session, in another VRF, cut short, or not errors at all are left as
    /// they are.
    #[test]
    fn anything_else_is_left_alone() {
        let (t, _o) = table();
        let foreign = error(ROUTER, CLIENT, (CLIENT, 40001, BACKEND, 8080));
        for (vrf, mut e, want) in [
            (0, foreign.clone(), Outcome::NoSession),
            (
                1,
                error(ROUTER, CLIENT, (CLIENT, 40000, BACKEND, 8080)),
                Outcome::NoSession,
            ),
            (0, foreign[..40].to_vec(), Outcome::Short),
        ] {
            let before = e.clone();
            assert_eq!(translate(&t, vrf, &mut e), want);
            assert_eq!(e, before, "untouched");
        }
        let mut udp = Vec::new();
        etherparse::PacketBuilder::ipv4(CLIENT, VIP, 64)
            .udp(1, 2)
            .write(&mut udp, b"x")
            .unwrap();
        assert_eq!(translate(&t, 0, &mut udp), Outcome::NotError);
    }

    /// An error quoting SCTP is translated as one quoting UDP is: addresses and ports (the
    /// quoted CRC32c lies past the 8 bytes an error must quote).
    #[test]
    fn an_error_about_sctp_is_translated_too() {
        let (t, mut o) = table();
        add(&mut o, session::PROTO_SCTP, 9090, 0);
        let mut e = error(ROUTER, CLIENT, (CLIENT, 40000, BACKEND, 9090));
        // The quoted packet becomes SCTP: its protocol, then both checksums made right.
        e[28 + 9] = session::PROTO_SCTP;
        e[28 + 10..28 + 12].fill(0);
        let c = wire::checksum::checksum(&e[28..48]);
        e[28 + 10..28 + 12].copy_from_slice(&c.to_be_bytes());
        e[22..24].fill(0);
        let c = wire::checksum::checksum(&e[20..]);
        e[22..24].copy_from_slice(&c.to_be_bytes());
        assert_eq!(translate(&t, 0, &mut e), Outcome::Translated { vrf: 0 });
        assert_eq!(read(&e), ((ROUTER, CLIENT), (CLIENT, 40000, VIP, 80)));
    }

    /// For a session that changes VRF (a NodePort's), an error about the forward packet
    /// arrives on the backend's side and goes on in the client's VRF, and one about a reply
    /// the other way; the error in the wrong VRF finds no session.
    #[test]
    fn an_external_flows_errors_change_vrf_with_it() {
        let (t, _o) = table_to(5);
        let mut e = error(ROUTER, CLIENT, (CLIENT, 40000, BACKEND, 8080));
        assert_eq!(translate(&t, 0, &mut e.clone()), Outcome::NoSession);
        assert_eq!(translate(&t, 5, &mut e), Outcome::Translated { vrf: 0 });
        assert_eq!(read(&e), ((ROUTER, CLIENT), (CLIENT, 40000, VIP, 80)));
        let mut e = error(ROUTER, VIP, (VIP, 80, CLIENT, 40000));
        assert_eq!(translate(&t, 5, &mut e.clone()), Outcome::NoSession);
        assert_eq!(translate(&t, 0, &mut e), Outcome::Translated { vrf: 5 });
    }
}
