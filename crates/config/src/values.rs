//! Typed values read from [`Raw`] ones: rates, sizes, integers, DSCP, TOS, protocols, prefixes and
//! port ranges. Each reader reports its own problems to the [`Sink`] (with the value's position)
//! and returns `None` when the value is unusable.

use std::net::IpAddr;

use linkshare_core::classify::IpPrefix;
use linkshare_core::units::{Rate, Size, UnitError};
use toml::Spanned;

use crate::diag::suggest;
use crate::raw::Raw;
use crate::source::Sink;

/// Rate units tc(8) accepts, for "did you mean".
const RATE_UNITS: &[&str] = &[
    "bit", "kbit", "mbit", "gbit", "tbit", "kibit", "mibit", "gibit", "tibit", "bps", "kbps",
    "mbps", "gbps", "tbps", "kibps", "mibps", "gibps", "tibps",
];
const RATE_HELP: &str =
    "rates are bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps (bytes/s, as tc means them), \
                         e.g. \"10mbit\"";
/// Size units tc(8) accepts.
const SIZE_UNITS: &[&str] = &["b", "k", "kb", "m", "mb", "g", "gb", "kbit", "mbit", "gbit"];
const SIZE_HELP: &str =
    "sizes are bytes: b, k/kb, m/mb, g/gb (1024-based, as tc means them), e.g. \"15k\"";

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

fn wrong_type(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>, expected: &str, example: &str) {
    sink.error(
        &v.span(),
        format!("{ctx}: expected {expected}, found {}", v.get_ref().kind()),
        format!("write it like {example}"),
    );
}

/// A string value.
pub(crate) fn string<'v>(
    sink: &mut Sink,
    ctx: &str,
    v: &'v Spanned<Raw>,
    example: &str,
) -> Option<&'v str> {
    match v.get_ref() {
        Raw::Str(s) => Some(s),
        _ => {
            wrong_type(sink, ctx, v, "a string", example);
            None
        }
    }
}

/// An integer in `lo..=hi`. A quoted number is an error with the fix.
pub(crate) fn int(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>, lo: i64, hi: i64) -> Option<i64> {
    match v.get_ref() {
        Raw::Int(n) if (lo..=hi).contains(n) => Some(*n),
        Raw::Int(n) => {
            sink.error(
                &v.span(),
                format!("{ctx}: {n} is out of range"),
                format!("use a value from {lo} to {hi}"),
            );
            None
        }
        Raw::Str(s) if s.trim().parse::<i64>().is_ok() => {
            sink.error(
                &v.span(),
                format!("{ctx}: expected an integer, found the string \"{s}\""),
                format!("remove the quotes: {}", s.trim()),
            );
            None
        }
        _ => {
            wrong_type(sink, ctx, v, "an integer", &format!("{lo}"));
            None
        }
    }
}

fn split_unit(text: &str) -> (&str, &str) {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    (num, unit.trim())
}

/// The magnitude of one `unit`, in bits (per second for rates), as the core parses it.
fn unit_bits(unit: &str, rate: bool) -> Option<u128> {
    if rate {
        Rate::parse(&format!("1{unit}")).ok().map(|r| r.0 as u128)
    } else {
        Size::parse(&format!("1{unit}"))
            .ok()
            .map(|s| s.0 as u128 * 8)
    }
}

/// What a mistyped unit meant, in bits (per second for rates), read as networking writes units:
/// a prefix letter (`k`, `m`, `g`, `t`, with `i` for binary) and a base — `bit` or a lowercase `b`
/// is a bit, `byte` or an uppercase `B` a byte, tc's `bps` a byte per second. Sizes are bytes
/// unless the word says `bit`. `None` when the word does not say.
fn intended_bits(unit: &str, rate: bool) -> Option<u128> {
    let mut chars = unit.chars().peekable();
    let exp = match chars.peek().map(|c| c.to_ascii_lowercase()) {
        Some('k') => 1,
        Some('m') => 2,
        Some('g') => 3,
        Some('t') => 4,
        _ => 0,
    };
    if exp > 0 {
        chars.next();
    }
    let binary = exp > 0 && chars.peek() == Some(&'i');
    if binary {
        chars.next();
    }
    let base: String = chars.collect();
    let lower = base.to_ascii_lowercase();
    let unit_bits: u128 = if lower.contains("bit") {
        1
    } else if lower.contains("byte") || base.contains('B') || lower.starts_with("bps") {
        8
    } else if base.starts_with('b') {
        if rate {
            1
        } else {
            8
        }
    } else if !rate && (exp > 0 || base.is_empty()) {
        8
    } else {
        return None;
    };
    let step: u128 = if binary || !rate { 1024 } else { 1000 };
    Some(unit_bits * step.pow(exp))
}

/// The known unit closest to a mistyped one among those of the magnitude it meant; none rather
/// than one of another magnitude (a hint must never multiply the value).
fn unit_hint<'u>(unit: &str, units: &[&'u str], rate: bool) -> Option<&'u str> {
    if unit.len() > 16 {
        return None;
    }
    let want = intended_bits(unit, rate)?;
    let same: Vec<&str> = units
        .iter()
        .copied()
        .filter(|u| unit_bits(u, rate) == Some(want))
        .collect();
    let lower = unit.to_ascii_lowercase();
    same.into_iter()
        .min_by_key(|u| crate::diag::edit_distance(&lower, u))
}

fn unit_error(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>, text: &str, e: &UnitError, rate: bool) {
    let (units, help) = if rate {
        (RATE_UNITS, RATE_HELP)
    } else {
        (SIZE_UNITS, SIZE_HELP)
    };
    let what = if rate { "rate" } else { "size" };
    match e {
        UnitError::UnknownUnit { .. } => {
            let (num, unit) = split_unit(text);
            let help = match unit_hint(unit, units, rate) {
                Some(u) => format!("did you mean \"{num}{u}\"? {help}"),
                None => help.to_string(),
            };
            sink.error(
                &v.span(),
                format!("{ctx}: \"{text}\" has an unknown {what} unit `{unit}`"),
                help,
            );
        }
        UnitError::NotANumber { .. } => sink.error(
            &v.span(),
            format!("{ctx}: \"{text}\" is not a number followed by a unit"),
            help,
        ),
        UnitError::OutOfRange { .. } => sink.error(
            &v.span(),
            format!("{ctx}: \"{text}\" is out of range"),
            format!("use a positive {what} that fits in 64 bits; {help}"),
        ),
    }
}

/// A rate: a string with a tc unit, or an integer read as bits per second (with a warning).
pub(crate) fn rate(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<Rate> {
    match v.get_ref() {
        Raw::Str(s) => match Rate::parse_with_warning(s) {
            Ok((r, warning)) => {
                if let Some(w) = warning {
                    let (num, unit) = split_unit(s);
                    let lower = unit.to_ascii_lowercase();
                    let bits = format!("{num}{}bit", &lower[..lower.len().saturating_sub(3)]);
                    sink.warn(
                        &v.span(),
                        format!("{ctx}: {}", w.message),
                        format!("write \"{bits}\" for bits per second, or \"{num}{lower}\" to keep bytes per second"),
                    );
                }
                Some(r)
            }
            Err(e) => {
                unit_error(sink, ctx, v, s, &e, true);
                None
            }
        },
        Raw::Int(n) if *n >= 0 => {
            let r = Rate(*n as u64);
            sink.warn(
                &v.span(),
                format!("{ctx}: bare number {n} read as bits per second ({r})"),
                format!("write a unit to say what you mean, e.g. \"{r}\""),
            );
            Some(r)
        }
        Raw::Int(n) => {
            sink.error(
                &v.span(),
                format!("{ctx}: rate {n} is negative"),
                RATE_HELP.to_string(),
            );
            None
        }
        _ => {
            wrong_type(sink, ctx, v, "a rate", "\"10mbit\"");
            None
        }
    }
}

/// A size in bytes: a string with a tc unit or an integer (bytes).
pub(crate) fn size(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<u64> {
    match v.get_ref() {
        Raw::Str(s) => match Size::parse(s) {
            Ok(sz) => Some(sz.0),
            Err(e) => {
                unit_error(sink, ctx, v, s, &e, false);
                None
            }
        },
        Raw::Int(n) if *n >= 0 => Some(*n as u64),
        Raw::Int(n) => {
            sink.error(
                &v.span(),
                format!("{ctx}: size {n} is negative"),
                SIZE_HELP.to_string(),
            );
            None
        }
        _ => {
            wrong_type(sink, ctx, v, "a size", "\"15k\" or 1500");
            None
        }
    }
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

const TIME_HELP: &str = "times need a unit: \"5ms\", \"1.5s\", \"200us\" (only 0 may be bare)";

/// A time: a string with a unit (`"5ms"`), or the integer 0. A bare number in a string is
/// refused: tc reads it as microseconds, which surprises more than it helps.
pub(crate) fn time(
    sink: &mut Sink,
    ctx: &str,
    v: &Spanned<Raw>,
) -> Option<linkshare_core::units::Duration> {
    use linkshare_core::units::Duration;
    match v.get_ref() {
        Raw::Int(0) => Some(Duration::ZERO),
        Raw::Str(s) if s.trim() == "0" => Some(Duration::ZERO),
        Raw::Str(s) if s.trim().parse::<f64>().is_ok() => {
            sink.error(
                &v.span(),
                format!("{ctx}: \"{s}\" has no unit"),
                format!(
                    "write \"{}ms\" or \"{}us\"; {TIME_HELP}",
                    s.trim(),
                    s.trim()
                ),
            );
            None
        }
        Raw::Str(s) => match Duration::parse(s) {
            Ok(d) => Some(d),
            Err(_) => {
                let (num, unit) = split_unit(s);
                let help = match suggest(unit, ["s", "ms", "us", "ns", "sec", "msec", "usec"]) {
                    Some(u) => format!("did you mean \"{num}{u}\"? {TIME_HELP}"),
                    None => TIME_HELP.to_string(),
                };
                sink.error(&v.span(), format!("{ctx}: \"{s}\" is not a time"), help);
                None
            }
        },
        Raw::Int(n) => {
            sink.error(
                &v.span(),
                format!("{ctx}: {n} has no unit"),
                format!("write \"{n}ms\" or \"{n}us\"; {TIME_HELP}"),
            );
            None
        }
        _ => {
            wrong_type(sink, ctx, v, "a time", "\"5ms\"");
            None
        }
    }
}

/// A number in `lo..=hi`: an integer, a float, or a percentage string (`"2%"` is 0.02).
pub(crate) fn fraction(
    sink: &mut Sink,
    ctx: &str,
    v: &Spanned<Raw>,
    lo: f64,
    hi: f64,
) -> Option<f64> {
    let x = match v.get_ref() {
        Raw::Int(n) => *n as f64,
        Raw::Float(f) => *f,
        Raw::Str(s) => match s.trim().strip_suffix('%').map(|p| p.trim().parse::<f64>()) {
            Some(Ok(p)) => p / 100.0,
            _ => {
                sink.error(
                    &v.span(),
                    format!("{ctx}: \"{s}\" is not a number or a percentage"),
                    format!("write a number from {lo} to {hi}, or a percentage like \"2%\""),
                );
                return None;
            }
        },
        _ => {
            wrong_type(sink, ctx, v, "a number", &format!("{hi}"));
            return None;
        }
    };
    if !x.is_finite() || x < lo || x > hi {
        sink.error(
            &v.span(),
            format!("{ctx}: {x} is out of range"),
            format!("use a value from {lo} to {hi}"),
        );
        return None;
    }
    Some(x)
}

/// A boolean.
pub(crate) fn boolean(sink: &mut Sink, ctx: &str, v: &Spanned<Raw>) -> Option<bool> {
    match v.get_ref() {
        Raw::Bool(b) => Some(*b),
        Raw::Str(s) if matches!(s.trim(), "true" | "false" | "yes" | "no" | "on" | "off") => {
            let b = matches!(s.trim(), "true" | "yes" | "on");
            sink.error(
                &v.span(),
                format!("{ctx}: expected a boolean, found the string \"{s}\""),
                format!("write {b} without quotes"),
            );
            None
        }
        _ => {
            wrong_type(sink, ctx, v, "a boolean", "true");
            None
        }
    }
}

/// One of a fixed set of words, case-insensitive.
pub(crate) fn word<T: Copy>(
    sink: &mut Sink,
    ctx: &str,
    v: &Spanned<Raw>,
    choices: &[(&'static str, T)],
) -> Option<T> {
    let example = format!("\"{}\"", choices.first().map(|c| c.0).unwrap_or(""));
    let s = string(sink, ctx, v, &example)?;
    let w = s.trim().to_ascii_lowercase();
    if let Some((_, t)) = choices.iter().find(|(n, _)| *n == w) {
        return Some(*t);
    }
    let names: Vec<&str> = choices.iter().map(|c| c.0).collect();
    let help = match suggest(&w, names.iter().copied()) {
        Some(n) => format!("did you mean \"{n}\"? one of: {}", names.join(", ")),
        None => format!("one of: {}", names.join(", ")),
    };
    sink.error(&v.span(), format!("{ctx}: unknown value \"{s}\""), help);
    None
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
