//! Time, rates and sizes, with parsing and printing in the units of tc(8).
//!
//! * [`Time`] is an instant in integer nanoseconds since an arbitrary epoch chosen by the driver
//!   (the simulator starts at 0, the router uses the monotonic clock). [`Duration`] is a span of
//!   nanoseconds. No floating point is used for either.
//! * [`Rate`] is bits per second.
//! * [`Size`] is bytes.
//!
//! Parsing follows tc(8) exactly, including its most frequently asked trap: `kbps` means kilo*bytes*
//! per second, `kbit` kilo*bits*. Rates use SI prefixes (1000), sizes use binary ones (1024), as tc
//! does. Units are case-insensitive like tc's, but a mixed-case unit such as `Mbps` (which many people
//! write meaning megabits) parses as tc reads it *and* yields a [`UnitWarning`] so the user can see
//! what they actually asked for.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// Nanoseconds in a second.
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// An instant, in nanoseconds since the driver's epoch.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

/// A span of time in nanoseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

/// A rate in bits per second.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

/// A size in bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time elapsed since `earlier`, zero if `earlier` is in the future (clocks that stand still or
    /// go backwards are tolerated).
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_SEC as f64
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_micros(us: u64) -> Self {
        Duration(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * NS_PER_SEC)
    }
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_SEC as f64
    }
    /// Parse a time as tc(8) writes it: `s`, `sec`, `secs`, `ms`, `msec`, `msecs`, `us`, `usec`,
    /// `usecs`, also `ns` and `m`/`min`. A bare number means microseconds, as in tc.
    pub fn parse(text: &str) -> Result<Duration, UnitError> {
        let (num, unit) = split_number(text)?;
        let unit_l = unit.to_ascii_lowercase();
        let scale: f64 = match unit_l.as_str() {
            "" | "us" | "usec" | "usecs" => 1e3,
            "ns" | "nsec" | "nsecs" => 1.0,
            "ms" | "msec" | "msecs" => 1e6,
            "s" | "sec" | "secs" => 1e9,
            "min" | "m" => 60e9,
            _ => {
                return Err(UnitError::UnknownUnit {
                    text: text.to_string(),
                    kind: "time",
                })
            }
        };
        to_integer(num * scale, text).map(Duration)
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, t: Time) -> Duration {
        self.saturating_since(t)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}

impl Rate {
    pub const fn bps(bits_per_sec: u64) -> Self {
        Rate(bits_per_sec)
    }
    pub const fn kbit(k: u64) -> Self {
        Rate(k * 1_000)
    }
    pub const fn mbit(m: u64) -> Self {
        Rate(m * 1_000_000)
    }
    pub const fn gbit(g: u64) -> Self {
        Rate(g * 1_000_000_000)
    }
    pub fn bits_per_sec(self) -> u64 {
        self.0
    }
    /// Bytes per second (rounded down).
    pub fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }
    /// Time to send `bytes` at this rate, rounded up to the nanosecond. `None` for a zero rate.
    pub fn tx_time(self, bytes: u64) -> Option<Duration> {
        if self.0 == 0 {
            return None;
        }
        let ns = (bytes as u128 * 8 * NS_PER_SEC as u128).div_ceil(self.0 as u128);
        Some(Duration(ns.min(u64::MAX as u128) as u64))
    }
    /// Bytes this rate sends in `d` (rounded down).
    pub fn bytes_in(self, d: Duration) -> u64 {
        let b = self.0 as u128 * d.0 as u128 / (8 * NS_PER_SEC as u128);
        b.min(u64::MAX as u128) as u64
    }

    /// Parse a rate as tc(8) writes it. See the module docs for the units.
    pub fn parse(text: &str) -> Result<Rate, UnitError> {
        Self::parse_with_warning(text).map(|(r, _)| r)
    }

    /// Parse a rate and report a likely unit mistake (e.g. `Mbps`, which tc reads as megabytes
    /// per second).
    pub fn parse_with_warning(text: &str) -> Result<(Rate, Option<UnitWarning>), UnitError> {
        let (num, unit) = split_number(text)?;
        let unit_l = unit.to_ascii_lowercase();
        let scale: f64 = match unit_l.as_str() {
            "" | "bit" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            "tbit" => 1e12,
            "kibit" => 1024.0,
            "mibit" => 1024.0 * 1024.0,
            "gibit" => 1024.0 * 1024.0 * 1024.0,
            "tibit" => 1024.0f64.powi(4),
            "bps" => 8.0,
            "kbps" => 8e3,
            "mbps" => 8e6,
            "gbps" => 8e9,
            "tbps" => 8e12,
            "kibps" => 8.0 * 1024.0,
            "mibps" => 8.0 * 1024.0 * 1024.0,
            "gibps" => 8.0 * 1024.0f64.powi(3),
            "tibps" => 8.0 * 1024.0f64.powi(4),
            _ => {
                return Err(UnitError::UnknownUnit {
                    text: text.to_string(),
                    kind: "rate",
                });
            }
        };
        let rate = Rate(to_integer(num * scale, text)?);
        let warning = if unit_l.ends_with("bps") && unit != unit_l {
            Some(UnitWarning {
                text: text.to_string(),
                message: format!(
                    "`{text}` is read as tc reads it: {} {}bytes per second ({}); \
                     if you meant bits per second write `{}{}bit`",
                    format_num(num),
                    byte_prefix(&unit_l[..unit_l.len() - 3]),
                    rate,
                    format_num(num),
                    &unit_l[..unit_l.len() - 3]
                ),
            })
        } else {
            None
        };
        Ok((rate, warning))
    }
}

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }
    /// Parse a size as tc(8) writes it: `b` or bare bytes, `k`/`kb` (1024), `m`/`mb`, `g`/`gb`,
    /// and `kbit`/`mbit`/`gbit` (bits, 1024-based as in tc).
    pub fn parse(text: &str) -> Result<Size, UnitError> {
        let (num, unit) = split_number(text)?;
        let unit_l = unit.to_ascii_lowercase();
        let scale: f64 = match unit_l.as_str() {
            "" | "b" => 1.0,
            "k" | "kb" => 1024.0,
            "m" | "mb" => 1024.0 * 1024.0,
            "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
            "kbit" => 1024.0 / 8.0,
            "mbit" => 1024.0 * 1024.0 / 8.0,
            "gbit" => 1024.0 * 1024.0 * 1024.0 / 8.0,
            _ => {
                return Err(UnitError::UnknownUnit {
                    text: text.to_string(),
                    kind: "size",
                })
            }
        };
        to_integer(num * scale, text).map(Size)
    }
}

/// A unit that parses but is probably not what the user meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitWarning {
    pub text: String,
    pub message: String,
}

/// Why a quantity did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("`{text}` is not a number followed by a unit")]
    NotANumber { text: String },
    #[error("`{text}` has an unknown {kind} unit; {}", unit_hint(kind))]
    UnknownUnit { text: String, kind: &'static str },
    #[error("`{text}` is out of range (negative, not finite or too large)")]
    OutOfRange { text: String },
}

fn unit_hint(kind: &str) -> &'static str {
    match kind {
        "rate" => {
            "write bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps (bytes/s, as tc means them)"
        }
        "size" => "write b, k/kb, m/mb, g/gb (1024-based, as tc means them)",
        _ => "write s, ms, us or ns",
    }
}

fn split_number(text: &str) -> Result<(f64, &str), UnitError> {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    if num.is_empty() {
        return Err(UnitError::NotANumber {
            text: text.to_string(),
        });
    }
    let n: f64 = num.parse().map_err(|_| UnitError::NotANumber {
        text: text.to_string(),
    })?;
    Ok((n, unit.trim()))
}

fn to_integer(v: f64, text: &str) -> Result<u64, UnitError> {
    if !v.is_finite() || v < 0.0 || v >= u64::MAX as f64 {
        return Err(UnitError::OutOfRange {
            text: text.to_string(),
        });
    }
    Ok(v.round() as u64)
}

/// The word for a rate unit's prefix: `m` → `mega`, `ki` → `kibi`.
fn byte_prefix(p: &str) -> &'static str {
    match p {
        "k" => "kilo",
        "m" => "mega",
        "g" => "giga",
        "t" => "tera",
        "ki" => "kibi",
        "mi" => "mebi",
        "gi" => "gibi",
        "ti" => "tebi",
        _ => "",
    }
}

fn format_num(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{}", n as u64)
    } else {
        format!("{n}")
    }
}

/// Prints the largest unit that represents the value exactly, else with up to 3 decimals.
fn fmt_scaled(f: &mut fmt::Formatter<'_>, v: u64, units: &[(u64, &str)]) -> fmt::Result {
    for &(scale, name) in units {
        if v >= scale {
            if v.is_multiple_of(scale) {
                return write!(f, "{}{}", v / scale, name);
            }
            let x = v as f64 / scale as f64;
            let s = format!("{x:.3}");
            let s = s.trim_end_matches('0').trim_end_matches('.');
            return write!(f, "{s}{name}");
        }
    }
    let last = units.last().map(|u| u.1).unwrap_or("");
    write!(f, "{v}{last}")
}

impl fmt::Display for Rate {
    /// Canonical form: bits per second with SI prefixes, e.g. `10mbit`, `1.5mbit`, `64kbit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_scaled(
            f,
            self.0,
            &[
                (1_000_000_000_000, "tbit"),
                (1_000_000_000, "gbit"),
                (1_000_000, "mbit"),
                (1_000, "kbit"),
                (1, "bit"),
            ],
        )
    }
}

impl fmt::Display for Size {
    /// Canonical form: `1500b`, `15k`, `1.5m` (1024-based, as tc).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 1024 || !self.0.is_multiple_of(1024) && self.0 < 64 * 1024 {
            return write!(f, "{}b", self.0);
        }
        fmt_scaled(
            f,
            self.0,
            &[(1 << 30, "g"), (1 << 20, "m"), (1 << 10, "k"), (1, "b")],
        )
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return write!(f, "0s");
        }
        fmt_scaled(
            f,
            self.0,
            &[
                (NS_PER_SEC, "s"),
                (1_000_000, "ms"),
                (1_000, "us"),
                (1, "ns"),
            ],
        )
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_follow_tc() {
        assert_eq!(Rate::parse("10mbit").unwrap(), Rate(10_000_000));
        assert_eq!(Rate::parse("1.5mbit").unwrap(), Rate(1_500_000));
        assert_eq!(Rate::parse("1050kbit").unwrap(), Rate(1_050_000));
        assert_eq!(Rate::parse("64kbit").unwrap(), Rate(64_000));
        assert_eq!(Rate::parse("10gbit").unwrap(), Rate(10_000_000_000));
        assert_eq!(Rate::parse("800").unwrap(), Rate(800));
        assert_eq!(Rate::parse("800bit").unwrap(), Rate(800));
        // bytes per second, as tc means them
        assert_eq!(Rate::parse("100bps").unwrap(), Rate(800));
        assert_eq!(Rate::parse("1kbps").unwrap(), Rate(8_000));
        assert_eq!(Rate::parse("1mbps").unwrap(), Rate(8_000_000));
        assert_eq!(Rate::parse("1kibit").unwrap(), Rate(1024));
    }

    #[test]
    fn mixed_case_bps_warns() {
        let (r, w) = Rate::parse_with_warning("10Mbps").unwrap();
        assert_eq!(r, Rate(80_000_000));
        let w = w.expect("warning");
        assert!(w.message.contains("10mbit"), "{}", w.message);
        assert!(
            w.message.contains("10 megabytes per second (80mbit)"),
            "{}",
            w.message
        );
        let w = Rate::parse_with_warning("2KiBps")
            .unwrap()
            .1
            .expect("warning");
        assert!(
            w.message.contains("2 kibibytes per second"),
            "{}",
            w.message
        );
        let w = Rate::parse_with_warning("100Bps")
            .unwrap()
            .1
            .expect("warning");
        assert!(w.message.contains("100 bytes per second"), "{}", w.message);
        assert!(Rate::parse_with_warning("10mbps").unwrap().1.is_none());
        assert!(Rate::parse_with_warning("10Mbit").unwrap().1.is_none());
    }

    #[test]
    fn sizes_follow_tc() {
        assert_eq!(Size::parse("15k").unwrap(), Size(15 * 1024));
        assert_eq!(Size::parse("15kb").unwrap(), Size(15 * 1024));
        assert_eq!(Size::parse("4.8k").unwrap(), Size(4915));
        assert_eq!(Size::parse("1m").unwrap(), Size(1 << 20));
        assert_eq!(Size::parse("1500").unwrap(), Size(1500));
        assert_eq!(Size::parse("1500b").unwrap(), Size(1500));
        assert_eq!(Size::parse("8kbit").unwrap(), Size(1024));
    }

    #[test]
    fn times_parse() {
        assert_eq!(
            Duration::parse("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(Duration::parse("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(Duration::parse("2ms").unwrap(), Duration::from_millis(2));
        assert_eq!(Duration::parse("10").unwrap(), Duration::from_micros(10));
        assert_eq!(
            Duration::parse("1.5s").unwrap(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn bad_units_are_errors() {
        assert!(matches!(
            Rate::parse("10mbitt"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(matches!(
            Rate::parse("fast"),
            Err(UnitError::NotANumber { .. })
        ));
        assert!(matches!(
            Size::parse("15q"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(matches!(Size::parse(""), Err(UnitError::NotANumber { .. })));
        assert!(Rate::parse("1e400").is_err());
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        for s in ["10mbit", "1.5mbit", "64kbit", "10gbit", "1bit", "1050kbit"] {
            let r = Rate::parse(s).unwrap();
            assert_eq!(Rate::parse(&r.to_string()).unwrap(), r, "{s} -> {r}");
        }
        assert_eq!(Rate(10_000_000).to_string(), "10mbit");
        assert_eq!(Rate(1_500_000).to_string(), "1.5mbit");
        assert_eq!(Size(15 * 1024).to_string(), "15k");
        assert_eq!(Size(1500).to_string(), "1500b");
        assert_eq!(Duration::from_millis(500).to_string(), "500ms");
    }

    #[test]
    fn tx_time_and_bytes_in_are_exact() {
        assert_eq!(Rate::mbit(8).tx_time(1000), Some(Duration::from_millis(1)));
        assert_eq!(Rate(0).tx_time(1), None);
        assert_eq!(Rate::mbit(8).bytes_in(Duration::from_secs(1)), 1_000_000);
    }
}
