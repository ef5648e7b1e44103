//! The header fields a filter matches: DSCP (names or numbers), TOS with a mask, transport
//! protocols, IPv4/IPv6 prefixes and port ranges.
//!
//! Principles: each field is written the way tc, iptables and nftables users write it, read
//! with the same reporting as the scalars ([`super::wrong_type`]); a value that means
//! something else than written (host bits set in a prefix) is a warning and is normalised,
//! one that cannot match anything is an error.

use std::net::IpAddr;

use linkshare_core::classify::IpPrefix;
use toml::Spanned;

use crate::diag::suggest;
use crate::raw::Raw;
use crate::source::Sink;

use super::{string, wrong_type};

/// Transport protocols by name.
pub(crate) const PROTOCOLS: &[(&str, u8)] = &[
    ("icmp", 1),
    ("tcp", 6),
    ("udp", 17),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmpv6", 58),
    ("sctp", 132),
];

/// Protocols whose ports the classifier reads (`linkshare_core::classify::transport_ports`):
/// TCP and UDP only.
pub(crate) fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17)
}

pub(crate) fn protocol_name(proto: u8) -> Option<&'static str> {
    PROTOCOLS.iter().find(|(_, n)| *n == proto).map(|(s, _)| *s)
}

/// One DSCP: a name, a number 0-63 (integer or string).
fn dscp_one(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<u8> {
    match v.get_ref() {
        Raw::Str(s) => match linkshare_core::dscp::parse(s) {
            Some(d) => Some(d),
            None => {
                let known = linkshare_core::dscp::KNOWN_NAMES;
                let names = dscp_names();
                let help = match suggest(s, names.iter().map(|s| s.as_str())) {
                    Some(n) => format!("did you mean \"{n}\"? known names: {known}"),
                    None => format!("known names: {known}"),
                };
                sink.error(&v.span(), format!("{ctx}: unknown DSCP name \"{s}\""), help);
                None
            }
        },
        Raw::Int(n) if (0..64).contains(n) => Some(*n as u8),
        Raw::Int(n) => {
            sink.error(
                &v.span(),
                format!("{ctx}: DSCP {n} is out of range"),
                "a DSCP is 0-63 (6 bits)".to_string(),
            );
            None
        }
        _ => {
            wrong_type(sink, ctx, v, "a DSCP name or number", "\"ef\" or 46");
            None
        }
    }
}

fn dscp_names() -> Vec<String> {
    let mut v: Vec<String> = ["ef", "be", "le", "va", "df"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend((0..8).map(|i| format!("cs{i}")));
    for x in 1..=4 {
        for y in 1..=3 {
            v.push(format!("af{x}{y}"));
        }
    }
    v
}

/// `dscp`: a name, a number, or an array of them.
pub(crate) fn dscp(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<Vec<u8>> {
    match v.get_ref() {
        Raw::Array(items) => {
            if items.is_empty() {
                sink.error(
                    &v.span(),
                    format!("{ctx}: empty list matches nothing"),
                    "list at least one code point, e.g. [\"ef\", \"cs5\"]",
                );
                return None;
            }
            let mut out = Vec::new();
            let mut ok = true;
            for it in items {
                match dscp_one(sink, ctx, it) {
                    Some(d) if !out.contains(&d) => out.push(d),
                    Some(_) => {}
                    None => ok = false,
                }
            }
            ok.then_some(out)
        }
        _ => dscp_one(sink, ctx, v).map(|d| vec![d]),
    }
}

fn parse_byte(s: &str) -> Option<u8> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `tos`: `"0x10"`, `"0x10/0xfc"` (value/mask) or an integer; the mask defaults to `0xff`.
pub(crate) fn tos(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<(u8, u8)> {
    let help = "write a byte, optionally with a mask: \"0x10\" or \"0x10/0xfc\"";
    match v.get_ref() {
        Raw::Int(n) => match u8::try_from(*n) {
            Ok(b) => Some((b, 0xff)),
            Err(_) => {
                sink.error(
                    &v.span(),
                    format!("{ctx}: {n} does not fit in a byte"),
                    help,
                );
                None
            }
        },
        Raw::Str(s) => {
            let (val, mask) = match s.split_once('/') {
                Some((a, b)) => (parse_byte(a), parse_byte(b)),
                None => (parse_byte(s), Some(0xff)),
            };
            match (val, mask) {
                (Some(val), Some(mask)) => {
                    if val & !mask != 0 {
                        sink.warn(
                            &v.span(),
                            format!("{ctx}: value {val:#04x} has bits outside mask {mask:#04x}; they are ignored"),
                            format!("write \"{:#04x}/{mask:#04x}\"", val & mask),
                        );
                    }
                    Some((val & mask, mask))
                }
                _ => {
                    sink.error(
                        &v.span(),
                        format!("{ctx}: \"{s}\" is not a byte or value/mask"),
                        help,
                    );
                    None
                }
            }
        }
        _ => {
            wrong_type(sink, ctx, v, "a TOS byte", "\"0x10/0xfc\"");
            None
        }
    }
}

/// `protocol`: a name or a number 0-255.
pub(crate) fn protocol(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<u8> {
    let names: Vec<&str> = PROTOCOLS.iter().map(|(n, _)| *n).collect();
    let known = format!("known protocols: {}, or a number 0-255", names.join(", "));
    match v.get_ref() {
        Raw::Int(n) => match u8::try_from(*n) {
            Ok(p) => Some(p),
            Err(_) => {
                sink.error(
                    &v.span(),
                    format!("{ctx}: protocol {n} is out of range"),
                    known,
                );
                None
            }
        },
        Raw::Str(s) => {
            let l = s.trim().to_ascii_lowercase();
            if let Some((_, p)) = PROTOCOLS.iter().find(|(n, _)| *n == l) {
                return Some(*p);
            }
            if matches!(l.as_str(), "ipv6-icmp" | "icmp6") {
                return Some(58);
            }
            if let Ok(p) = l.parse::<u8>() {
                return Some(p);
            }
            let help = match suggest(&l, names.iter().copied()) {
                Some(n) => format!("did you mean \"{n}\"? {known}"),
                None => known,
            };
            sink.error(&v.span(), format!("{ctx}: unknown protocol \"{s}\""), help);
            None
        }
        _ => {
            wrong_type(sink, ctx, v, "a protocol", "\"udp\" or 17");
            None
        }
    }
}

/// Parses `addr/len` or a bare address (a host prefix). Returns the prefix as written.
pub(crate) fn parse_prefix(s: &str) -> Option<IpPrefix> {
    let s = s.trim();
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = addr.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max)?,
        None => max,
    };
    Some(IpPrefix { addr, len })
}

/// The prefix with its host bits cleared.
pub(crate) fn mask_prefix(p: IpPrefix) -> IpPrefix {
    let addr = match p.addr {
        IpAddr::V4(a) => {
            let m = if p.len == 0 {
                0
            } else {
                u32::MAX << (32 - p.len as u32)
            };
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = if p.len == 0 {
                0
            } else {
                u128::MAX << (128 - p.len as u32)
            };
            IpAddr::V6((u128::from(a) & m).into())
        }
    };
    IpPrefix { addr, len: p.len }
}

pub(crate) fn fmt_prefix(p: &IpPrefix) -> String {
    format!("{}/{}", p.addr, p.len)
}

/// `src`/`dst`: an IPv4 or IPv6 prefix. Host bits set is a warning; they are cleared.
pub(crate) fn prefix(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<IpPrefix> {
    let s = string(sink, ctx, v, "\"10.0.0.0/8\" or \"2001:db8::/32\"")?;
    match parse_prefix(s) {
        Some(p) => {
            let m = mask_prefix(p);
            if m != p {
                sink.warn(
                    &v.span(),
                    format!(
                        "{ctx}: prefix {} has host bits set; it matches {}",
                        s.trim(),
                        fmt_prefix(&m)
                    ),
                    format!("write \"{}\"", fmt_prefix(&m)),
                );
            }
            Some(m)
        }
        None => {
            sink.error(
                &v.span(),
                format!("{ctx}: \"{s}\" is not an IP prefix"),
                "write an address with an optional length: \"10.0.0.0/8\", \"192.0.2.1\", \"2001:db8::/32\"",
            );
            None
        }
    }
}

/// `src_port`/`dst_port`: `80`, `"80"` or `"5000-5010"` (inclusive).
pub(crate) fn port_range(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<(u16, u16)> {
    let help = "write a port or an inclusive range: 80, \"80\" or \"5000-5010\" (0-65535)";
    match v.get_ref() {
        Raw::Int(n) => match u16::try_from(*n) {
            Ok(p) => Some((p, p)),
            Err(_) => {
                sink.error(&v.span(), format!("{ctx}: port {n} is out of range"), help);
                None
            }
        },
        Raw::Str(s) => {
            let (a, b) = s.split_once('-').unwrap_or((s, s));
            match (a.trim().parse::<u16>(), b.trim().parse::<u16>()) {
                (Ok(lo), Ok(hi)) if lo <= hi => Some((lo, hi)),
                (Ok(lo), Ok(hi)) => {
                    sink.error(
                        &v.span(),
                        format!("{ctx}: port range \"{s}\" is empty ({lo} is above {hi})"),
                        format!("write the lower port first: \"{hi}-{lo}\""),
                    );
                    None
                }
                _ => {
                    sink.error(
                        &v.span(),
                        format!("{ctx}: \"{s}\" is not a port or port range"),
                        help,
                    );
                    None
                }
            }
        }
        _ => {
            wrong_type(sink, ctx, v, "a port or port range", "\"5000-5010\"");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let p = parse_prefix("10.1.2.3/8").unwrap();
        assert_eq!(fmt_prefix(&mask_prefix(p)), "10.0.0.0/8");
        assert_eq!(
            fmt_prefix(&parse_prefix("192.0.2.1").unwrap()),
            "192.0.2.1/32"
        );
        assert_eq!(
            fmt_prefix(&mask_prefix(parse_prefix("2001:db8::1/32").unwrap())),
            "2001:db8::/32"
        );
        assert_eq!(
            fmt_prefix(&mask_prefix(parse_prefix("1.2.3.4/0").unwrap())),
            "0.0.0.0/0"
        );
        assert!(parse_prefix("10.0.0.0/33").is_none());
        assert!(parse_prefix("10.0.0/8").is_none());
        assert!(parse_prefix("::/129").is_none());
    }

    #[test]
    fn bytes() {
        assert_eq!(parse_byte("0x10"), Some(16));
        assert_eq!(parse_byte("0xfc"), Some(252));
        assert_eq!(parse_byte("184"), Some(184));
        assert_eq!(parse_byte("0x100"), None);
    }
}
