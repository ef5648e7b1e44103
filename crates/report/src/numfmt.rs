//! Number formatting shared by every writer.
//!
//! All output files must be byte-identical for identical input, so floats are never printed with
//! `{}` (shortest round-trip, which is exact but noisy): they go through [`fixed`], which rounds
//! to a fixed number of decimals and then trims trailing zeros. Human-facing rates and sizes use
//! three significant digits and SI (rates) or binary (sizes) prefixes, as tc(8) prints them.

/// `value` rounded to at most `decimals` decimals, trailing zeros and a trailing dot removed;
/// `-0` prints as `0`. Non-finite values print as the empty string (an empty CSV cell).
pub fn fixed(value: f64, decimals: usize) -> String {
    if !value.is_finite() {
        return String::new();
    }
    let mut s = format!("{value:.decimals$}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s
}

/// Three significant digits (`4.97`, `49.7`, `497`), for values already scaled to a unit.
pub fn three_digits(value: f64) -> String {
    let a = value.abs();
    if a >= 99.95 {
        format!("{value:.0}")
    } else if a >= 9.995 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// A rate in bits per second in human units: `4.97 Mbit/s`, `812 kbit/s`, `0 bit/s`.
pub fn human_rate(bps: f64) -> String {
    if !bps.is_finite() {
        return "-".to_string();
    }
    let (div, unit) = rate_unit(bps.abs());
    if div == 1.0 {
        format!("{} {unit}", fixed(bps, 0))
    } else {
        format!("{} {unit}", three_digits(bps / div))
    }
}

/// The SI unit in which a rate of magnitude `max_bps` reads best, as `(divisor, name)`.
pub fn rate_unit(max_bps: f64) -> (f64, &'static str) {
    // Thresholds sit half a unit of the third digit below the next prefix, so that a value which
    // would print as "1000 kbit/s" prints as "1.00 Mbit/s" instead.
    if max_bps >= 999.5e6 {
        (1e9, "Gbit/s")
    } else if max_bps >= 999.5e3 {
        (1e6, "Mbit/s")
    } else if max_bps >= 999.5 {
        (1e3, "kbit/s")
    } else {
        (1.0, "bit/s")
    }
}

/// The binary unit in which a size of magnitude `max_bytes` reads best, as `(divisor, name)`.
pub fn size_unit(max_bytes: f64) -> (f64, &'static str) {
    if max_bytes >= 1024.0 * 1024.0 * 1024.0 {
        (1024.0 * 1024.0 * 1024.0, "GiB")
    } else if max_bytes >= 1024.0 * 1024.0 {
        (1024.0 * 1024.0, "MiB")
    } else if max_bytes >= 1024.0 {
        (1024.0, "KiB")
    } else {
        (1.0, "B")
    }
}

/// A byte count in human units: `1.46 MiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    let (div, unit) = size_unit(b);
    if div == 1.0 {
        format!("{bytes} {unit}")
    } else {
        format!("{} {unit}", three_digits(b / div))
    }
}

/// A ratio as a percentage with one decimal: `49.7%`.
pub fn percent(ratio: f64) -> String {
    if !ratio.is_finite() {
        return "-".to_string();
    }
    format!("{}%", fixed_pad(ratio * 100.0, 1))
}

/// `value` with exactly `decimals` decimals (no trimming), `-0.0` printed as `0.0`.
pub fn fixed_pad(value: f64, decimals: usize) -> String {
    if !value.is_finite() {
        return "-".to_string();
    }
    let s = format!("{value:.decimals$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_trims_and_rounds() {
        assert_eq!(fixed(1.5, 3), "1.5");
        assert_eq!(fixed(2.0, 3), "2");
        assert_eq!(fixed(1234567.891234, 3), "1234567.891");
        assert_eq!(fixed(0.1 + 0.2, 6), "0.3");
        assert_eq!(fixed(-0.0000001, 3), "0");
        assert_eq!(fixed(f64::NAN, 3), "");
        assert_eq!(fixed(100.0, 0), "100");
    }

    #[test]
    fn human_units() {
        assert_eq!(human_rate(4_970_000.0), "4.97 Mbit/s");
        assert_eq!(human_rate(812_345.0), "812 kbit/s");
        assert_eq!(human_rate(10e9), "10.0 Gbit/s");
        assert_eq!(human_rate(999_999.0), "1.00 Mbit/s");
        assert_eq!(human_rate(12.0), "12 bit/s");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(percent(0.4971), "49.7%");
        assert_eq!(fixed_pad(-0.01, 1), "0.0");
    }
}
