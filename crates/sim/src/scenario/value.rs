//! Single values of the format: durations, rates, sizes, integers in a range, DSCP names,
//! booleans and IP addresses, each read from its spanned raw value, and the `opt_*` forms that
//! give a default when the key is absent.
//!
//! Rule: units are required where the format has them (a bare "5" is not a duration), and the
//! message names what was expected and what was found.

use std::net::{IpAddr, Ipv4Addr};

use linkshare_core::{dscp, Duration, Rate, Size};
use toml::Spanned;

use super::error::{Doc, ScenarioError};
use super::raw::{Val, SV};

pub(super) fn dur_val(doc: &Doc<'_>, v: &SV) -> Result<Duration, ScenarioError> {
    match v.get_ref() {
        Val::Int(0) => Ok(Duration::ZERO),
        Val::Str(s) => {
            let t = s.trim();
            if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
                if t.chars().all(|c| c == '0' || c == '.') {
                    return Ok(Duration::ZERO);
                }
                return Err(doc.err(
                    v.span(),
                    format!("`{s}` has no time unit"),
                    Some(format!("write e.g. \"{t}s\" or \"{t}ms\"")),
                ));
            }
            Duration::parse(s).map_err(|e| doc.err(v.span(), e.to_string(), None))
        }
        other => Err(doc.err(
            v.span(),
            format!(
                "expected a duration such as \"10ms\", found {}",
                val_kind(other)
            ),
            None,
        )),
    }
}

pub(super) fn rate_val(doc: &Doc<'_>, v: &SV) -> Result<Rate, ScenarioError> {
    match v.get_ref() {
        Val::Int(n) if *n >= 0 => Ok(Rate(*n as u64)),
        Val::Int(n) => Err(doc.err(
            v.span(),
            format!("rate {n} is negative"),
            Some("a rate is at least 0: write e.g. \"2mbit\" or 2000000 (bits per second)".into()),
        )),
        Val::Str(s) => Rate::parse(s).map_err(|e| doc.err(v.span(), e.to_string(), None)),
        other => Err(doc.err(
            v.span(),
            format!(
                "expected a rate such as \"10mbit\", found {}",
                val_kind(other)
            ),
            None,
        )),
    }
}

pub(super) fn size_val(doc: &Doc<'_>, v: &SV) -> Result<u64, ScenarioError> {
    match v.get_ref() {
        Val::Int(n) if *n >= 0 => Ok(*n as u64),
        Val::Int(n) => Err(doc.err(
            v.span(),
            format!("size {n} is negative"),
            Some("a size is at least 0: write e.g. 1500 (bytes) or \"64k\"".into()),
        )),
        Val::Str(s) => Size::parse(s)
            .map(|s| s.0)
            .map_err(|e| doc.err(v.span(), e.to_string(), None)),
        other => Err(doc.err(
            v.span(),
            format!(
                "expected a size such as 1500 or \"64k\", found {}",
                val_kind(other)
            ),
            None,
        )),
    }
}

pub(super) fn ip_size(doc: &Doc<'_>, v: &SV, min: u32, max: u32) -> Result<u32, ScenarioError> {
    let s = size_val(doc, v)?;
    if s < min as u64 || s > max as u64 {
        return Err(doc.err(
            v.span(),
            format!(
                "packet size {s} is out of range: IP packets of {min}..{max} bytes (the link MTU)"
            ),
            Some("`size` counts IP bytes, headers included".into()),
        ));
    }
    Ok(s as u32)
}

pub(super) fn int_val(doc: &Doc<'_>, v: &SV, min: i64, max: i64) -> Result<i64, ScenarioError> {
    match v.get_ref() {
        Val::Int(n) if *n >= min && *n <= max => Ok(*n),
        Val::Int(n) => Err(doc.err(v.span(), format!("{n} is out of range {min}..={max}"), None)),
        other => Err(doc.err(
            v.span(),
            format!("expected an integer, found {}", val_kind(other)),
            None,
        )),
    }
}

pub(super) fn dscp_val(doc: &Doc<'_>, v: &SV) -> Result<u8, ScenarioError> {
    match v.get_ref() {
        Val::Int(n) if (0..64).contains(n) => Ok(*n as u8),
        Val::Str(s) => dscp::parse(s).ok_or_else(|| {
            doc.err(
                v.span(),
                format!("unknown DSCP `{s}`"),
                Some(format!("write {}", dscp::KNOWN_NAMES)),
            )
        }),
        other => Err(doc.err(
            v.span(),
            format!("expected a DSCP name or 0-63, found {}", val_kind(other)),
            None,
        )),
    }
}

fn val_kind(v: &Val) -> &'static str {
    match v {
        Val::Str(_) => "a string",
        Val::Int(_) => "an integer",
        Val::Float(_) => "a float",
        Val::Bool(_) => "a boolean",
    }
}

pub(super) fn opt_dur(
    doc: &Doc<'_>,
    v: Option<&SV>,
    d: Duration,
) -> Result<Duration, ScenarioError> {
    v.map(|v| dur_val(doc, v)).unwrap_or(Ok(d))
}
pub(super) fn opt_size(doc: &Doc<'_>, v: Option<&SV>, d: u64) -> Result<u64, ScenarioError> {
    v.map(|v| size_val(doc, v)).unwrap_or(Ok(d))
}
pub(super) fn opt_int(
    doc: &Doc<'_>,
    v: Option<&SV>,
    d: i64,
    min: i64,
    max: i64,
) -> Result<i64, ScenarioError> {
    v.map(|v| int_val(doc, v, min, max)).unwrap_or(Ok(d))
}
pub(super) fn opt_bool(doc: &Doc<'_>, v: Option<&SV>, d: bool) -> Result<bool, ScenarioError> {
    match v {
        None => Ok(d),
        Some(v) => match v.get_ref() {
            Val::Bool(b) => Ok(*b),
            other => Err(doc.err(
                v.span(),
                format!("expected true or false, found {}", val_kind(other)),
                None,
            )),
        },
    }
}
pub(super) fn opt_addr(
    doc: &Doc<'_>,
    v: Option<&Spanned<String>>,
) -> Result<IpAddr, ScenarioError> {
    match v {
        None => Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        Some(s) => s.get_ref().trim().parse::<IpAddr>().map_err(|_| {
            doc.err(
                s.span(),
                format!("`{}` is not an IP address", s.get_ref()),
                None,
            )
        }),
    }
}
