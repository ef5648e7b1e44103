//! Typed values read from [`Raw`] ones. Each reader reports its own problems to the [`Sink`]
//! (with the value's position) and returns `None` when the value is unusable.
//!
//! Principles: a reader checks one value alone (type, unit, range) and says what to write
//! instead; it never looks at the rest of the policy. Here the scalars every table uses
//! (strings, integers, rates, sizes, times, fractions, booleans, words); tc's units and the
//! hints for a mistyped one in [`units`]; the header fields a filter matches (DSCP, TOS,
//! protocols, prefixes, ports) in [`header`].

mod header;
mod units;

use linkshare_core::units::{Rate, Size};
use toml::Spanned;

use crate::diag::suggest;
use crate::raw::Raw;
use crate::source::Sink;

pub(crate) use header::*;
use units::{split_unit, unit_error, RATE_HELP, SIZE_HELP};

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
