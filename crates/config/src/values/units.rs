//! tc(8)'s units for rates and sizes, and the fix for a mistyped one.
//!
//! Principles: the units are the core's ([`Rate::parse`], [`Size::parse`]); a hint names a
//! known unit of the magnitude the user meant, never one that would multiply the value, so
//! `8Mbs` is not "corrected" to a unit eight times off.

use linkshare_core::units::{Rate, Size, UnitError};
use toml::Spanned;

use crate::raw::Raw;
use crate::source::Sink;

/// Rate units tc(8) accepts, for "did you mean".
const RATE_UNITS: &[&str] = &[
    "bit", "kbit", "mbit", "gbit", "tbit", "kibit", "mibit", "gibit", "tibit", "bps", "kbps",
    "mbps", "gbps", "tbps", "kibps", "mibps", "gibps", "tibps",
];
pub(super) const RATE_HELP: &str =
    "rates are bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps (bytes/s, as tc means them), \
                         e.g. \"10mbit\"";
/// Size units tc(8) accepts.
const SIZE_UNITS: &[&str] = &["b", "k", "kb", "m", "mb", "g", "gb", "kbit", "mbit", "gbit"];
pub(super) const SIZE_HELP: &str =
    "sizes are bytes: b, k/kb, m/mb, g/gb (1024-based, as tc means them), e.g. \"15k\"";

pub(super) fn split_unit(text: &str) -> (&str, &str) {
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

pub(super) fn unit_error(
    sink: &mut Sink,
    ctx: &str,
    v: &Spanned<Raw>,
    text: &str,
    e: &UnitError,
    rate: bool,
) {
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
