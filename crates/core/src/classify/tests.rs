//! Unit tests for the classifier; the property test against a naive scan is in
//! `tests/classify_props.rs`.

use super::*;
use crate::packet::{Fragment, PacketMeta, ParseIssue, L3};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn v4(s: &str) -> IpAddr {
    IpAddr::V4(s.parse::<Ipv4Addr>().unwrap())
}
fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
}
fn pfx(s: &str) -> IpPrefix {
    s.parse().unwrap()
}

fn tcp(src: IpAddr, sp: u16, dst: IpAddr, dp: u16) -> PacketMeta {
    let l3 = if src.is_ipv4() { L3::Ipv4 } else { L3::Ipv6 };
    PacketMeta {
        l3,
        proto: PROTO_TCP,
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        ..Default::default()
    }
}
fn with_tos(tos: u8) -> PacketMeta {
    PacketMeta {
        tos,
        ..Default::default()
    }
}
fn dscp(class: ClassId, values: &[u8]) -> FilterSpec {
    FilterSpec {
        class,
        dscp: Some(values.to_vec()),
        ..Default::default()
    }
}

/// Classify and cross-check with a first-match scan over `FilterSpec::matches`.
fn check(c: &Classifier, m: &PacketMeta) -> ClassId {
    let scan = c.filters().iter().position(|f| f.matches(m));
    assert_eq!(c.explain(m), scan, "compiled vs scan for {m:?}");
    c.classify(m)
}

#[test]
fn dscp_table() {
    let ef = crate::dscp::parse("ef").unwrap();
    let af41 = crate::dscp::parse("af41").unwrap();
    let c = Classifier::new(vec![dscp(1, &[ef]), dscp(2, &[af41, 8]), dscp(3, &[])], 9);
    assert_eq!(c.stats().table_filters, 2);
    assert_eq!(c.stats().tuples, 0);
    assert_eq!(c.stats().dead_filters, 1, "empty dscp list is dead");
    // ECN bits do not disturb the DSCP match.
    for ecn in 0..4 {
        assert_eq!(check(&c, &with_tos(ef << 2 | ecn)), 1);
        assert_eq!(check(&c, &with_tos(af41 << 2 | ecn)), 2);
        assert_eq!(check(&c, &with_tos(8 << 2 | ecn)), 2);
        assert_eq!(check(&c, &with_tos(ecn)), 9);
    }
    assert_eq!(check(&c, &with_tos(47 << 2)), 9);
    assert_eq!(c.explain(&with_tos(0)), None);
    assert_eq!(c.explain(&with_tos(ef << 2)), Some(0));
}

#[test]
fn dscp_out_of_range_is_ignored() {
    let f = dscp(1, &[64, 200]);
    assert!(!f.can_match());
    assert!(f.issues().contains(&FilterIssue::NoDscp));
    let c = Classifier::new(vec![f, dscp(2, &[100, 0])], 9);
    for tos in 0..=255u8 {
        let want = if tos >> 2 == 0 { 2 } else { 9 };
        assert_eq!(check(&c, &with_tos(tos)), want, "tos {tos}");
    }
}

#[test]
fn tos_mask() {
    // Low-delay TOS bit (0x10) under mask 0x1e, as in old `tc ... match ip tos 0x10 0x1e`.
    let f = FilterSpec {
        class: 4,
        tos: Some((0x10, 0x1e)),
        ..Default::default()
    };
    let c = Classifier::new(vec![f], 0);
    for tos in 0..=255u8 {
        let want = if tos & 0x1e == 0x10 { 4 } else { 0 };
        assert_eq!(check(&c, &with_tos(tos)), want, "tos {tos:#x}");
    }
}

#[test]
fn tos_and_dscp_together() {
    // DSCP ef plus ECN CE (3) only.
    let f = FilterSpec {
        class: 5,
        dscp: Some(vec![46, 10]),
        tos: Some((3, 3)),
        ..Default::default()
    };
    let c = Classifier::new(vec![f], 0);
    for tos in 0..=255u8 {
        let want = if (tos >> 2 == 46 || tos >> 2 == 10) && tos & 3 == 3 {
            5
        } else {
            0
        };
        assert_eq!(check(&c, &with_tos(tos)), want, "tos {tos:#x}");
    }
    // A contradiction is reported and dead.
    let bad = FilterSpec {
        class: 5,
        dscp: Some(vec![46]),
        tos: Some((0, 0xfc)),
        ..Default::default()
    };
    assert!(bad.issues().contains(&FilterIssue::TosDscpConflict));
    let c = Classifier::new(vec![bad], 0);
    assert_eq!(c.stats().dead_filters, 1);
    assert_eq!(check(&c, &with_tos(46 << 2)), 0);
}

#[test]
fn ipv4_prefixes() {
    let f = |class, p: &str| FilterSpec {
        class,
        dst: Some(pfx(p)),
        ..Default::default()
    };
    let c = Classifier::new(
        vec![f(1, "10.1.2.3/32"), f(2, "10.1.0.0/16"), f(3, "0.0.0.0/0")],
        9,
    );
    let any = v4("192.0.2.1");
    assert_eq!(check(&c, &tcp(any, 1, v4("10.1.2.3"), 2)), 1);
    assert_eq!(check(&c, &tcp(any, 1, v4("10.1.2.4"), 2)), 2);
    assert_eq!(check(&c, &tcp(any, 1, v4("10.1.255.255"), 2)), 2);
    assert_eq!(check(&c, &tcp(any, 1, v4("10.2.0.0"), 2)), 3);
    // /0 of IPv4 does not match IPv6.
    assert_eq!(
        check(&c, &tcp(v6("2001:db8::1"), 1, v6("2001:db8::2"), 2)),
        9
    );
    assert_eq!(check(&c, &tcp(v6("::1"), 1, v6("::ffff:10.1.2.3"), 2)), 9);
}

#[test]
fn ipv6_prefixes() {
    let f = |class, p: &str| FilterSpec {
        class,
        src: Some(pfx(p)),
        ..Default::default()
    };
    let c = Classifier::new(
        vec![f(1, "2001:db8::1/128"), f(2, "2001:db8::/32"), f(3, "::/0")],
        9,
    );
    let d = v6("2001:db8::99");
    assert_eq!(check(&c, &tcp(v6("2001:db8::1"), 1, d, 2)), 1);
    assert_eq!(check(&c, &tcp(v6("2001:db8:ffff::1"), 1, d, 2)), 2);
    assert_eq!(check(&c, &tcp(v6("2001:db9::"), 1, d, 2)), 3);
    // ::/0 does not match IPv4, and an IPv4-mapped address is IPv6 here.
    assert_eq!(check(&c, &tcp(v4("10.0.0.1"), 1, v4("10.0.0.2"), 2)), 9);
}

#[test]
fn host_bits_are_ignored() {
    // A prefix built by hand with host bits set matches like its network.
    let raw = IpPrefix {
        addr: v4("10.1.2.3"),
        len: 8,
    };
    assert!(raw.has_host_bits());
    let f = FilterSpec {
        class: 1,
        dst: Some(raw),
        ..Default::default()
    };
    assert!(matches!(
        f.issues().as_slice(),
        [FilterIssue::HostBits { .. }]
    ));
    assert!(f.can_match());
    let c = Classifier::new(vec![f], 0);
    assert_eq!(check(&c, &tcp(v4("1.1.1.1"), 1, v4("10.200.0.0"), 1)), 1);
    assert_eq!(check(&c, &tcp(v4("1.1.1.1"), 1, v4("11.0.0.0"), 1)), 0);
    // Too long for the family: matches nothing.
    let bad = FilterSpec {
        class: 1,
        dst: Some(IpPrefix {
            addr: v4("10.0.0.0"),
            len: 33,
        }),
        ..Default::default()
    };
    assert!(!bad.can_match());
    let c = Classifier::new(vec![bad], 0);
    assert_eq!(check(&c, &tcp(v4("1.1.1.1"), 1, v4("10.0.0.0"), 1)), 0);
}

#[test]
fn prefix_parsing() {
    let p = IpPrefix::parse_report("10.1.2.3/8").unwrap();
    assert_eq!(
        p.prefix,
        IpPrefix {
            addr: v4("10.0.0.0"),
            len: 8
        }
    );
    assert!(p.host_bits_cleared);
    let p = IpPrefix::parse_report(" 10.0.0.0/8 ").unwrap();
    assert!(!p.host_bits_cleared);
    assert_eq!(
        pfx("192.0.2.7"),
        IpPrefix {
            addr: v4("192.0.2.7"),
            len: 32
        }
    );
    assert_eq!(
        pfx("2001:db8::1"),
        IpPrefix {
            addr: v6("2001:db8::1"),
            len: 128
        }
    );
    assert_eq!(
        pfx("2001:db8:1:2::/32"),
        IpPrefix {
            addr: v6("2001:db8::"),
            len: 32
        }
    );
    assert_eq!(pfx("0.0.0.0/0").to_string(), "0.0.0.0/0");
    assert_eq!(pfx("1.2.3.4/0").addr, v4("0.0.0.0"));
    assert_eq!(pfx("::/0").to_string(), "::/0");
    assert_eq!("".parse::<IpPrefix>(), Err(PrefixError::Empty));
    assert!(matches!(
        "10.0.0/8".parse::<IpPrefix>(),
        Err(PrefixError::BadAddress { .. })
    ));
    assert!(matches!(
        "10.0.0.0/".parse::<IpPrefix>(),
        Err(PrefixError::BadLength { .. })
    ));
    assert!(matches!(
        "10.0.0.0/+8".parse::<IpPrefix>(),
        Err(PrefixError::BadLength { .. })
    ));
    assert!(matches!(
        "10.0.0.0/99999999999".parse::<IpPrefix>(),
        Err(PrefixError::BadLength { .. })
    ));
    assert!(matches!(
        "10.0.0.0/33".parse::<IpPrefix>(),
        Err(PrefixError::TooLong {
            len: 33,
            max: 32,
            ..
        })
    ));
    assert!(matches!(
        "::/129".parse::<IpPrefix>(),
        Err(PrefixError::TooLong { max: 128, .. })
    ));
    assert!(IpPrefix::new(v6("::"), 129).is_err());
    let err = "10.0.0.0/40".parse::<IpPrefix>().unwrap_err().to_string();
    assert!(err.contains("/40") && err.contains("/32"), "{err}");
}

#[test]
fn protocol() {
    let c = Classifier::new(
        vec![FilterSpec {
            class: 1,
            protocol: Some(PROTO_UDP),
            ..Default::default()
        }],
        0,
    );
    let mut m = tcp(v4("1.1.1.1"), 1, v4("2.2.2.2"), 2);
    assert_eq!(check(&c, &m), 0);
    m.proto = PROTO_UDP;
    assert_eq!(check(&c, &m), 1);
    // IPv6 with an unwalkable extension chain: protocol unknown.
    let mut m6 = tcp(v6("::1"), 1, v6("::2"), 2);
    m6.proto = PROTO_UDP;
    assert_eq!(check(&c, &m6), 1);
    m6.issue = Some(ParseIssue::ExtensionChain);
    assert_eq!(check(&c, &m6), 0);
}

#[test]
fn port_ranges() {
    let f = |class, sp: Option<(u16, u16)>, dp: Option<(u16, u16)>| FilterSpec {
        class,
        src_port: sp,
        dst_port: dp,
        ..Default::default()
    };
    let c = Classifier::new(
        vec![
            f(1, None, Some((80, 80))),
            f(2, Some((1024, 2047)), Some((5000, 5999))),
            f(3, None, Some((0, 65535))),
        ],
        9,
    );
    let (a, b) = (v4("1.1.1.1"), v4("2.2.2.2"));
    assert_eq!(check(&c, &tcp(a, 40000, b, 80)), 1);
    assert_eq!(check(&c, &tcp(a, 1024, b, 5999)), 2);
    assert_eq!(check(&c, &tcp(a, 2047, b, 5000)), 2);
    assert_eq!(check(&c, &tcp(a, 2048, b, 5000)), 3);
    assert_eq!(check(&c, &tcp(a, 0, b, 0)), 3);
    // ICMP has no ports, even if the meta carries zeros.
    let mut icmp = tcp(a, 0, b, 0);
    icmp.proto = 1;
    assert_eq!(check(&c, &icmp), 9);
    // Truncated transport header: portless.
    let mut trunc = tcp(a, 1, b, 80);
    trunc.issue = Some(ParseIssue::TruncatedL4);
    assert_eq!(check(&c, &trunc), 9);
    // An inverted range is dead and reported.
    let inv = f(4, None, Some((90, 80)));
    assert!(inv.issues().contains(&FilterIssue::EmptyPortRange {
        field: "dst_port",
        lo: 90,
        hi: 80
    }));
    let c = Classifier::new(vec![inv], 9);
    assert_eq!(check(&c, &tcp(a, 1, b, 85)), 9);
    // Ports with a protocol that has none.
    let icmp_ports = FilterSpec {
        class: 1,
        protocol: Some(1),
        dst_port: Some((0, 10)),
        ..Default::default()
    };
    assert!(!icmp_ports.can_match());
}

#[test]
fn later_fragments_do_not_match_port_filters() {
    let c = Classifier::new(
        vec![
            FilterSpec {
                class: 1,
                protocol: Some(PROTO_UDP),
                dst_port: Some((53, 53)),
                ..Default::default()
            },
            FilterSpec {
                class: 2,
                protocol: Some(PROTO_UDP),
                ..Default::default()
            },
        ],
        9,
    );
    let mut m = tcp(v4("1.1.1.1"), 5353, v4("2.2.2.2"), 53);
    m.proto = PROTO_UDP;
    m.frag = Fragment::First;
    assert_eq!(check(&c, &m), 1);
    m.frag = Fragment::Later;
    assert_eq!(
        check(&c, &m),
        2,
        "later fragment: ports unknown, falls to the protocol filter"
    );
    m.frag = Fragment::None;
    assert_eq!(check(&c, &m), 1);
}

#[test]
fn first_match_order() {
    let broad = FilterSpec {
        class: 1,
        dst: Some(pfx("10.0.0.0/8")),
        ..Default::default()
    };
    let narrow = FilterSpec {
        class: 2,
        dst: Some(pfx("10.1.1.1/32")),
        protocol: Some(PROTO_TCP),
        dst_port: Some((443, 443)),
        ..Default::default()
    };
    let m = tcp(v4("192.0.2.1"), 1000, v4("10.1.1.1"), 443);
    let other = tcp(v4("192.0.2.1"), 1000, v4("10.1.1.1"), 80);
    // Broader first: it wins even where the narrower would match.
    let c = Classifier::new(vec![broad.clone(), narrow.clone()], 9);
    assert_eq!(check(&c, &m), 1);
    assert_eq!(check(&c, &other), 1);
    // Narrower first: it wins where it matches, the broad one elsewhere.
    let c = Classifier::new(vec![narrow, broad], 9);
    assert_eq!(check(&c, &m), 2);
    assert_eq!(check(&c, &other), 1);
    // A TOS-table filter and a tuple filter: order across the two structures.
    let ef = dscp(3, &[46]);
    let tuple = FilterSpec {
        class: 4,
        protocol: Some(PROTO_TCP),
        ..Default::default()
    };
    let mut m = m;
    m.tos = 46 << 2;
    assert_eq!(
        check(&Classifier::new(vec![ef.clone(), tuple.clone()], 9), &m),
        3
    );
    assert_eq!(check(&Classifier::new(vec![tuple, ef], 9), &m), 4);
}

#[test]
fn default_class_and_non_ip() {
    let c = Classifier::new(vec![], 7);
    assert!(c.is_empty());
    assert_eq!(c.default_class(), 7);
    assert_eq!(check(&c, &PacketMeta::default()), 7);
    let arp = PacketMeta {
        l3: L3::Other(0x0806),
        ..Default::default()
    };
    // IP-field filters (even tos with mask 0, or 0.0.0.0/0) do not match non-IP frames; a
    // match-all filter does.
    let c = Classifier::new(
        vec![
            FilterSpec {
                class: 1,
                tos: Some((0, 0)),
                ..Default::default()
            },
            FilterSpec {
                class: 2,
                dst: Some(pfx("0.0.0.0/0")),
                ..Default::default()
            },
            FilterSpec::any(3),
        ],
        7,
    );
    assert_eq!(c.len(), 3);
    assert_eq!(check(&c, &arp), 3);
    assert_eq!(check(&c, &PacketMeta::default()), 1);
    let c = Classifier::new(vec![dscp(1, &[0])], 7);
    assert_eq!(check(&c, &arp), 7);
    assert_eq!(check(&c, &PacketMeta::default()), 1);
}

#[test]
fn big_port_bucket_uses_index() {
    // 200 port rules on one key: the bucket is a persistent segment tree, still first-match.
    let dst = Some(pfx("10.0.0.1/32"));
    let mut filters: Vec<FilterSpec> = (0..200u16)
        .map(|i| FilterSpec {
            class: u32::from(i),
            dst,
            dst_port: Some((i * 10, i * 10 + 25)),
            src_port: (i % 3 == 0).then_some((1000, 1999)),
            ..Default::default()
        })
        .collect();
    filters.push(FilterSpec {
        class: 999,
        dst,
        ..Default::default()
    });
    let c = Classifier::new(filters, 5000);
    assert_eq!(c.stats().largest_bucket, 200);
    for sp in [0, 999, 1000, 1999, 2000] {
        for dp in (0..2100).step_by(7) {
            check(&c, &tcp(v4("1.1.1.1"), sp, v4("10.0.0.1"), dp));
        }
    }
    // dp 31 is in the ranges of rules 1, 2, 3; rule 1 has no source range.
    assert_eq!(check(&c, &tcp(v4("1.1.1.1"), 5, v4("10.0.0.1"), 31)), 1);
    assert_eq!(check(&c, &tcp(v4("1.1.1.1"), 1500, v4("10.0.0.1"), 5)), 0);
    // Only rule 0 covers dp 5, and it needs sp 1000-1999: the portless catch-all wins.
    assert_eq!(check(&c, &tcp(v4("1.1.1.1"), 5, v4("10.0.0.1"), 5)), 999);
    assert_eq!(check(&c, &tcp(v4("1.1.1.1"), 5, v4("10.0.0.2"), 5)), 5000);
}

#[test]
fn many_subscribers_one_tuple() {
    let filters: Vec<FilterSpec> = (0..5000u32)
        .map(|i| FilterSpec {
            class: i,
            dst: Some(IpPrefix::host(IpAddr::V4(Ipv4Addr::from(0x6440_0000 + i)))),
            ..Default::default()
        })
        .collect();
    let c = Classifier::new(filters, 99_999);
    assert_eq!(c.stats().tuples, 1);
    assert_eq!(c.stats().buckets, 5000);
    for i in (0..5000u32).step_by(97) {
        let m = tcp(
            v4("8.8.8.8"),
            1,
            IpAddr::V4(Ipv4Addr::from(0x6440_0000 + i)),
            2,
        );
        assert_eq!(c.classify(&m), i);
    }
    assert_eq!(
        c.classify(&tcp(v4("8.8.8.8"), 1, v4("100.64.200.0"), 2)),
        99_999
    );
}
