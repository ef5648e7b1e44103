//! DiffServ code point names (RFC 2474, 2597, 3246, 8622).
//!
//! `ef` (46), `af11`…`af43` (AF class x, drop precedence y = 8x + 2y), `cs0`…`cs7` (8n), `be`
//! (0, same as `cs0`), `le` (1, RFC 8622 lower effort), or a number 0–63.

/// Parse a DSCP name or number (case-insensitive). `None` if unknown or out of range.
pub fn parse(name: &str) -> Option<u8> {
    let n = name.trim().to_ascii_lowercase();
    if let Ok(v) = n.parse::<u8>() {
        return (v < 64).then_some(v);
    }
    if let Some(hex) = n.strip_prefix("0x") {
        return u8::from_str_radix(hex, 16).ok().filter(|v| *v < 64);
    }
    match n.as_str() {
        "ef" => return Some(46),
        "be" | "df" | "default" => return Some(0),
        "le" | "lowereffort" => return Some(1),
        "va" | "voice-admit" => return Some(44),
        _ => {}
    }
    // Names with a digit suffix, matched on characters (never sliced at a byte index) and with
    // digits converted only once known to be digits: the parser is total on any string.
    if let Some(d) = n.strip_prefix("cs").and_then(single_digit) {
        return (d <= 7).then(|| d * 8);
    }
    if let Some(rest) = n.strip_prefix("af") {
        let mut chars = rest.chars();
        let digits = (chars.next(), chars.next(), chars.next());
        if let (Some(x), Some(y), None) = digits {
            let x = x.to_digit(10).unwrap_or(0);
            let y = y.to_digit(10).unwrap_or(0);
            if (1..=4).contains(&x) && (1..=3).contains(&y) {
                return u8::try_from(8 * x + 2 * y).ok();
            }
        }
    }
    None
}

/// The value of a string made of exactly one ASCII digit.
fn single_digit(s: &str) -> Option<u8> {
    match s.as_bytes() {
        [d @ b'0'..=b'9'] => Some(d - b'0'),
        _ => None,
    }
}

/// The conventional name of a code point, if it has one.
pub fn name(dscp: u8) -> Option<&'static str> {
    const NAMES: [(u8, &str); 23] = [
        (0, "be"),
        (1, "le"),
        (8, "cs1"),
        (10, "af11"),
        (12, "af12"),
        (14, "af13"),
        (16, "cs2"),
        (18, "af21"),
        (20, "af22"),
        (22, "af23"),
        (24, "cs3"),
        (26, "af31"),
        (28, "af32"),
        (30, "af33"),
        (32, "cs4"),
        (34, "af41"),
        (36, "af42"),
        (38, "af43"),
        (40, "cs5"),
        (44, "va"),
        (46, "ef"),
        (48, "cs6"),
        (56, "cs7"),
    ];
    NAMES.iter().find(|(v, _)| *v == dscp).map(|(_, n)| *n)
}

/// All names [`parse`] accepts (for error messages).
pub const KNOWN_NAMES: &str = "ef, af11..af43, cs0..cs7, be, le, va, or a number 0-63";

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names() {
        assert_eq!(parse("ef"), Some(46));
        assert_eq!(parse("AF11"), Some(10));
        assert_eq!(parse("af43"), Some(38));
        assert_eq!(parse("cs1"), Some(8));
        assert_eq!(parse("cs7"), Some(56));
        assert_eq!(parse("cs0"), Some(0));
        assert_eq!(parse("be"), Some(0));
        assert_eq!(parse("le"), Some(1));
        assert_eq!(parse("63"), Some(63));
        assert_eq!(parse("64"), None);
        assert_eq!(parse("af44"), None);
        assert_eq!(parse("af51"), None);
        assert_eq!(parse("cs8"), None);
        assert_eq!(parse("efx"), None);
        for v in 0..64 {
            if let Some(n) = name(v) {
                assert_eq!(parse(n), Some(v));
            }
        }
    }

    /// Inputs the first fuzzing pass (issue 13) found: a multi-byte character where the parser
    /// sliced at a byte index (panic in release), and digits that are not digits (overflow).
    #[test]
    fn fuzz_findings_are_refused() {
        for s in [
            "cé",
            "cs#",
            "af1#",
            "a\u{e9}1",
            "é",
            "csé",
            "afé",
            "af\u{e9}",
            "cs\u{10ffff}",
        ] {
            assert_eq!(parse(s), None, "{s:?}");
        }
    }

    proptest::proptest! {
        /// The parser is total: any string gives a code point below 64 or `None`, never a panic.
        #[test]
        fn parse_is_total(s in "\\PC{0,6}") {
            if let Some(v) = parse(&s) {
                proptest::prop_assert!(v < 64);
            }
        }

        /// A `cs`/`af` prefix with any ASCII tail: accepted values are in range and name-consistent.
        #[test]
        fn prefixed_shapes(p in "(cs|af|CS|Af)", rest in "[ -~]{0,3}") {
            let s = format!("{p}{rest}");
            if let Some(v) = parse(&s) {
                proptest::prop_assert!(v < 64);
                proptest::prop_assert_eq!(name(v).map(parse), Some(Some(v)));
            }
        }
    }
}
