//! Which addresses a plugin's request may reach without a grant of the IP
//! literal (R36): the IANA IPv4 and IPv6 Special-Purpose Address Registries
//! (RFC 6890 and successors; snapshot of 2025-10-09), every row, plus the
//! address-space rows they sit in, as one table decided by the longest
//! matching prefix, as a router would.
//!
//! A row is public only where the registry says "globally reachable" and a
//! connection reaches one well-known host. Anycast service rows are internal
//! even where the registry calls them global: whichever instance is nearest
//! answers, usually the local router or the operator's network. Translation
//! and tunnel prefixes are judged by the IPv4 address the traffic goes to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// One row of the table.
#[derive(Debug)]
pub struct Row {
    /// The block.
    pub net: IpNet,
    /// The registry's name for the block.
    pub name: &'static str,
    /// Where the block is defined.
    pub rfc: &'static str,
    decision: Decision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// The public internet.
    Public,
    /// Not the public internet: refused unless granted by IP literal (or
    /// `localhost`, for loopback).
    Internal,
    /// The IPv4 address embedded in the IPv6 one decides: it is where the
    /// packets end up.
    Embedded(Embedding),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Embedding {
    /// In the last 32 bits (IPv4-mapped; NAT64 `/96`, RFC 6052).
    Low32,
    /// In bits 16–47, after `2002::/16` (6to4, RFC 3056).
    SixToFour,
}

use Decision::{Embedded, Internal, Public};
use Embedding::{Low32, SixToFour};

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len))
}

const fn v6(s: [u16; 8], len: u8) -> IpNet {
    let ip = Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
    IpNet::V6(Ipv6Net::new_assert(ip, len))
}

const fn row(net: IpNet, name: &'static str, rfc: &'static str, decision: Decision) -> Row {
    Row {
        net,
        name,
        rfc,
        decision,
    }
}

/// Every row, with why it is decided so where the name does not say.
#[rustfmt::skip]
pub const ROWS: &[Row] = &[
    // IPv4 address space: unicast is public unless a row below says not.
    row(v4(0, 0, 0, 0, 0), "IPv4 unicast", "RFC 791", Public),
    row(v4(224, 0, 0, 0, 4), "Multicast", "RFC 5771", Internal),
    // IPv4 Special-Purpose Address Registry.
    // Linux connects 0.0.0.0 to the local host.
    row(v4(0, 0, 0, 0, 8), "\"This network\"", "RFC 791", Internal),
    row(v4(0, 0, 0, 0, 32), "\"This host on this network\"", "RFC 1122", Internal),
    row(v4(10, 0, 0, 0, 8), "Private-Use", "RFC 1918", Internal),
    // The carrier's side of a carrier-grade NAT.
    row(v4(100, 64, 0, 0, 10), "Shared Address Space", "RFC 6598", Internal),
    row(v4(127, 0, 0, 0, 8), "Loopback", "RFC 1122", Internal),
    // Cloud metadata services live here (169.254.169.254).
    row(v4(169, 254, 0, 0, 16), "Link Local", "RFC 3927", Internal),
    row(v4(172, 16, 0, 0, 12), "Private-Use", "RFC 1918", Internal),
    row(v4(192, 0, 0, 0, 24), "IETF Protocol Assignments", "RFC 6890", Internal),
    // DS-Lite: the tunnel endpoints of the local network.
    row(v4(192, 0, 0, 0, 29), "IPv4 Service Continuity Prefix", "RFC 7335", Internal),
    row(v4(192, 0, 0, 8, 32), "IPv4 dummy address", "RFC 7600", Internal),
    // Anycast: the nearest PCP server is the local router.
    row(v4(192, 0, 0, 9, 32), "Port Control Protocol Anycast", "RFC 7723", Internal),
    // Anycast: the nearest TURN server is the operator's.
    row(v4(192, 0, 0, 10, 32), "Traversal Using Relays around NAT Anycast", "RFC 8155", Internal),
    row(v4(192, 0, 0, 170, 32), "NAT64/DNS64 Discovery", "RFC 8880", Internal),
    row(v4(192, 0, 0, 171, 32), "NAT64/DNS64 Discovery", "RFC 8880", Internal),
    row(v4(192, 0, 2, 0, 24), "Documentation (TEST-NET-1)", "RFC 5737", Internal),
    // Anycast DNS sinks, served by whichever operator is nearest.
    row(v4(192, 31, 196, 0, 24), "AS112-v4", "RFC 7535", Internal),
    // Anycast: the nearest multicast tunnel relay.
    row(v4(192, 52, 193, 0, 24), "AMT", "RFC 7450", Internal),
    // Deprecated anycast; the registry gives no reachability.
    row(v4(192, 88, 99, 0, 24), "Deprecated (6to4 Relay Anycast)", "RFC 7526", Internal),
    row(v4(192, 88, 99, 2, 32), "6a44-relay anycast address", "RFC 6751", Internal),
    row(v4(192, 168, 0, 0, 16), "Private-Use", "RFC 1918", Internal),
    row(v4(192, 175, 48, 0, 24), "Direct Delegation AS112 Service", "RFC 7534", Internal),
    // Test networks; also where "fake IP" DNS proxies put every name.
    row(v4(198, 18, 0, 0, 15), "Benchmarking", "RFC 2544", Internal),
    row(v4(198, 51, 100, 0, 24), "Documentation (TEST-NET-2)", "RFC 5737", Internal),
    row(v4(203, 0, 113, 0, 24), "Documentation (TEST-NET-3)", "RFC 5737", Internal),
    row(v4(240, 0, 0, 0, 4), "Reserved", "RFC 1112", Internal),
    row(v4(255, 255, 255, 255, 32), "Limited Broadcast", "RFC 8190", Internal),
    // IPv6 address space: only global unicast is the internet.
    row(v6([0; 8], 0), "Not global unicast", "RFC 4291", Internal),
    row(v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3), "Global Unicast", "RFC 4291", Public),
    // Deprecated; a stack that still honours it sends to the IPv4 address.
    row(v6([0; 8], 96), "IPv4-compatible Address", "RFC 4291", Internal),
    row(v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), "Site-Local (deprecated)", "RFC 3879", Internal),
    row(v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "Multicast", "RFC 4291", Internal),
    // IPv6 Special-Purpose Address Registry.
    row(v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "Loopback Address", "RFC 4291", Internal),
    row(v6([0; 8], 128), "Unspecified Address", "RFC 4291", Internal),
    row(v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96), "IPv4-mapped Address", "RFC 4291", Embedded(Low32)),
    // The well-known NAT64 prefix: the translator connects to the IPv4.
    row(v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96), "IPv4-IPv6 Translat.", "RFC 6052", Embedded(Low32)),
    // Local-use NAT64: where the IPv4 sits depends on the operator's prefix
    // length (RFC 6052 section 2.2), which the host cannot know, so no check
    // of it would be sound; the registry calls the block not global.
    row(v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), "IPv4-IPv6 Translat.", "RFC 8215", Internal),
    row(v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), "Discard-Only Address Block", "RFC 6666", Internal),
    row(v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64), "Dummy IPv6 Prefix", "RFC 9780", Internal),
    row(v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), "IETF Protocol Assignments", "RFC 2928", Internal),
    // A tunnel: packets are relayed to the IPv4 addresses it embeds.
    row(v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32), "TEREDO", "RFC 4380", Internal),
    row(v6([0x2001, 1, 0, 0, 0, 0, 0, 1], 128), "Port Control Protocol Anycast", "RFC 7723", Internal),
    row(v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128), "Traversal Using Relays around NAT Anycast", "RFC 8155", Internal),
    row(v6([0x2001, 1, 0, 0, 0, 0, 0, 3], 128), "DNS-SD Service Registration Protocol Anycast", "RFC 9665", Internal),
    row(v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48), "Benchmarking", "RFC 5180", Internal),
    row(v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32), "AMT", "RFC 7450", Internal),
    row(v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48), "AS112-v6", "RFC 7535", Internal),
    row(v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28), "Deprecated (previously ORCHID)", "RFC 4843", Internal),
    // Globally unique host identifiers: the registry calls them global.
    row(v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28), "ORCHIDv2", "RFC 7343", Public),
    row(v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28), "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", Public),
    row(v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), "Documentation", "RFC 3849", Internal),
    // 6to4: the relay sends the packets to the embedded IPv4 address.
    row(v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), "6to4", "RFC 3056", Embedded(SixToFour)),
    row(v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48), "Direct Delegation AS112 Service", "RFC 7534", Internal),
    row(v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), "Documentation", "RFC 9637", Internal),
    // Segment identifiers mean something only inside one operator's domain.
    row(v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16), "Segment Routing (SRv6) SIDs", "RFC 9602", Internal),
    row(v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "Unique-Local", "RFC 4193", Internal),
    row(v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "Link-Local Unicast", "RFC 4291", Internal),
];

/// The most specific row holding `ip` (the address-space rows hold every
/// address).
pub fn row_of(ip: IpAddr) -> Option<&'static Row> {
    ROWS.iter()
        .filter(|row| row.net.contains(&ip))
        .max_by_key(|row| row.net.prefix_len())
}

/// Whether `ip` is not the public internet, so reachable only by a grant of
/// that IP literal (or `localhost`, for loopback).
pub fn is_internal(ip: IpAddr) -> bool {
    match (row_of(ip).map(|row| row.decision), ip) {
        (Some(Public), _) => false,
        (Some(Embedded(at)), IpAddr::V6(v6)) => is_internal(IpAddr::V4(embedded(v6, at))),
        // Only IPv6 rows embed an address; no row at all cannot happen.
        (Some(Internal | Embedded(_)), _) | (None, _) => true,
    }
}

fn embedded(ip: Ipv6Addr, at: Embedding) -> Ipv4Addr {
    let bits = u128::from(ip);
    let shift = match at {
        Low32 => 0,
        SixToFour => 80,
    };
    // Truncation keeps exactly the 32 bits wanted.
    Ipv4Addr::from((bits >> shift) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row by its prefix, with an address in it and whether that
    /// address is internal — written out here, not read from the table.
    const CASES: &[(&str, &str, bool)] = &[
        ("0.0.0.0/0", "93.184.216.34", false),
        ("224.0.0.0/4", "239.255.255.250", true),
        ("0.0.0.0/8", "0.1.2.3", true),
        ("0.0.0.0/32", "0.0.0.0", true),
        ("10.0.0.0/8", "10.1.2.3", true),
        ("100.64.0.0/10", "100.127.255.254", true),
        ("127.0.0.0/8", "127.0.0.1", true),
        ("169.254.0.0/16", "169.254.169.254", true),
        ("172.16.0.0/12", "172.31.0.1", true),
        ("192.0.0.0/24", "192.0.0.200", true),
        ("192.0.0.0/29", "192.0.0.1", true),
        ("192.0.0.8/32", "192.0.0.8", true),
        ("192.0.0.9/32", "192.0.0.9", true),
        ("192.0.0.10/32", "192.0.0.10", true),
        ("192.0.0.170/32", "192.0.0.170", true),
        ("192.0.0.171/32", "192.0.0.171", true),
        ("192.0.2.0/24", "192.0.2.1", true),
        ("192.31.196.0/24", "192.31.196.1", true),
        ("192.52.193.0/24", "192.52.193.1", true),
        ("192.88.99.0/24", "192.88.99.1", true),
        ("192.88.99.2/32", "192.88.99.2", true),
        ("192.168.0.0/16", "192.168.1.1", true),
        ("192.175.48.0/24", "192.175.48.1", true),
        ("198.18.0.0/15", "198.19.255.255", true),
        ("198.51.100.0/24", "198.51.100.7", true),
        ("203.0.113.0/24", "203.0.113.7", true),
        ("240.0.0.0/4", "240.0.0.1", true),
        ("255.255.255.255/32", "255.255.255.255", true),
        ("::/0", "4000::1", true),
        ("2000::/3", "2606:4700::1111", false),
        ("::/96", "::127.0.0.1", true),
        ("fec0::/10", "fec0::1", true),
        ("ff00::/8", "ff02::1", true),
        ("::1/128", "::1", true),
        ("::/128", "::", true),
        ("::ffff:0.0.0.0/96", "::ffff:93.184.216.34", false),
        ("64:ff9b::/96", "64:ff9b::93.184.216.34", false),
        ("64:ff9b:1::/48", "64:ff9b:1::93.184.216.34", true),
        ("100::/64", "100::1", true),
        ("100:0:0:1::/64", "100:0:0:1::1", true),
        ("2001::/23", "2001:100::1", true),
        ("2001::/32", "2001:0:4136:e378:8000:63bf:3fff:fdd2", true),
        ("2001:1::1/128", "2001:1::1", true),
        ("2001:1::2/128", "2001:1::2", true),
        ("2001:1::3/128", "2001:1::3", true),
        ("2001:2::/48", "2001:2::1", true),
        ("2001:3::/32", "2001:3::1", true),
        ("2001:4:112::/48", "2001:4:112::1", true),
        ("2001:10::/28", "2001:10::1", true),
        ("2001:20::/28", "2001:20::1", false),
        ("2001:30::/28", "2001:30::1", false),
        ("2001:db8::/32", "2001:db8::1", true),
        ("2002::/16", "2002:5db8:d822::1", false),
        ("2620:4f:8000::/48", "2620:4f:8000::1", true),
        ("3fff::/20", "3fff::1", true),
        ("5f00::/16", "5f00::1", true),
        ("fc00::/7", "fd00::1", true),
        ("fe80::/10", "fe80::1", true),
    ];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn r36_every_special_purpose_row_is_decided_as_documented() {
        assert_eq!(CASES.len(), ROWS.len(), "a case per row, no more");
        for row in ROWS {
            let case = CASES
                .iter()
                .find(|(net, ..)| net.parse::<IpNet>().unwrap() == row.net)
                .unwrap_or_else(|| panic!("no case for {} ({})", row.net, row.name));
            let (_, sample, internal) = *case;
            let found = row_of(ip(sample)).unwrap();
            assert_eq!(found.net, row.net, "{sample} is in {}", found.name);
            assert_eq!(
                is_internal(ip(sample)),
                internal,
                "{sample} in {} ({}, {})",
                row.net,
                row.name,
                row.rfc
            );
        }
    }

    #[test]
    fn r36_embedded_ipv4_addresses_decide_translation_and_tunnel_prefixes() {
        for (address, internal) in [
            ("::ffff:127.0.0.1", true),
            ("::ffff:10.0.0.1", true),
            ("::ffff:169.254.169.254", true),
            ("64:ff9b::10.0.0.1", true),
            ("64:ff9b::169.254.169.254", true),
            ("64:ff9b::127.0.0.1", true),
            ("64:ff9b::198.18.0.1", true),
            ("64:ff9b::8.8.8.8", false),
            // 6to4 of 127.0.0.1, 169.254.169.254, 192.168.0.1, 8.8.8.8.
            ("2002:7f00:1::", true),
            ("2002:a9fe:a9fe::1", true),
            ("2002:c0a8:1:1::1", true),
            ("2002:808:808::1", false),
            // IPv4-compatible is refused whatever it embeds.
            ("::8.8.8.8", true),
        ] {
            assert_eq!(is_internal(ip(address)), internal, "{address}");
        }
    }
}
