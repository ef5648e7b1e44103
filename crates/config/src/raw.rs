//! The raw document: every TOML value with its byte span, before any checking.
//!
//! Deserializing into fixed structs would stop at the first unknown key or wrong type. Instead the
//! document is read into a small spanned tree ([`Raw`]) that accepts any TOML, and validation walks
//! that tree reporting every problem with its position. A text that is not TOML at all gets one
//! located diagnostic ([`syntax_error`]), with the fix for the commonest slip (a unit unquoted).

use std::fmt;
use std::ops::Range;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use crate::source::LineIndex;
use crate::{ConfigError, Diagnostic, Severity};

/// A TOML value with spans on every nested value and key.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Raw {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Spanned<Raw>>),
    Table(Vec<(Spanned<String>, Spanned<Raw>)>),
}

impl Raw {
    /// What kind of value this is, for "expected X, found Y" messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Raw::Str(_) => "a string",
            Raw::Int(_) => "an integer",
            Raw::Float(_) => "a float",
            Raw::Bool(_) => "a boolean",
            Raw::Array(_) => "an array",
            Raw::Table(_) => "a table",
        }
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Raw, E> {
        i64::try_from(v)
            .map(Raw::Int)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Raw>>()? {
            items.push(item);
        }
        Ok(Raw::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Raw, A::Error> {
        visit_entries(map).map(Raw::Table)
    }
}

/// The entries of a TOML table in file order, keys and values with their spans.
type Entries = Vec<(Spanned<String>, Spanned<Raw>)>;

fn visit_entries<'de, A: MapAccess<'de>>(mut map: A) -> Result<Entries, A::Error> {
    let mut entries = Vec::new();
    // A TOML date-time arrives as a one-entry map whose key is not spanned; that fails here with a
    // message mentioning toml's private field name, which `syntax_error` rewrites.
    while let Some(key) = map.next_key::<Spanned<String>>()? {
        let value = map.next_value::<Spanned<Raw>>()?;
        entries.push((key, value));
    }
    Ok(entries)
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Raw, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

/// A policy as written, with the position of every key and value, not yet checked.
///
/// It deserializes from any TOML table, so it can be embedded in another document, e.g. a
/// simulator scenario with an inline `[policy]` table:
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Scenario {
///     policy: linkshare_config::PolicyDoc,
/// }
/// let text = "[policy]\nqdisc = \"htb\"\ndefault = \"a\"\n[[policy.class]]\nname = \"a\"\nrate = \"1mbit\"\n";
/// let scn: Scenario = toml::from_str(text).unwrap();
/// let policy = linkshare_config::Policy::from_spanned_table(scn.policy, text, "scn.toml").unwrap();
/// assert_eq!(policy.default_class(), "a");
/// ```
///
/// Spans are byte offsets into the whole document that was deserialized, so diagnostics point
/// into that document.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyDoc {
    pub(crate) entries: Vec<(Spanned<String>, Spanned<Raw>)>,
}

impl PolicyDoc {
    /// Span of the first key, used for problems of the table as a whole (a missing key).
    pub(crate) fn anchor(&self) -> Range<usize> {
        self.entries.first().map(|(k, _)| k.span()).unwrap_or(0..0)
    }
}

struct DocVisitor;

impl<'de> Visitor<'de> for DocVisitor {
    type Value = PolicyDoc;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a policy table")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<PolicyDoc, A::Error> {
        visit_entries(map).map(|entries| PolicyDoc { entries })
    }
}

impl<'de> Deserialize<'de> for PolicyDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PolicyDoc, D::Error> {
        d.deserialize_map(DocVisitor)
    }
}

/// Rewrites toml's messages where they leak implementation details.
pub(crate) fn syntax_message(msg: &str) -> String {
    let first = msg.trim().lines().next().unwrap_or("").trim();
    if msg.contains("$__toml_private_datetime") {
        return "dates and times are not valid in a policy".to_string();
    }
    first.to_string()
}

/// A TOML syntax error as a located diagnostic.
pub(crate) fn syntax_error(e: &toml::de::Error, text: &str, origin: &str) -> ConfigError {
    let index = LineIndex::new(text);
    let (line, col) = e.span().map(|s| index.line_col(s.start)).unwrap_or((1, 1));
    if let Some(d) = unquoted_unit(text, line, origin) {
        return ConfigError {
            diagnostics: vec![d],
        };
    }
    let message = syntax_message(e.message());
    let help = if message.contains("duplicate key") {
        "each key may appear once per table; remove or rename the repeated one"
    } else if message.contains("dates and times") {
        "write rates and sizes as strings with a unit, e.g. \"10mbit\""
    } else {
        "fix the TOML syntax: strings need double quotes (rate = \"10mbit\"), tables are `[[class]]`"
    };
    ConfigError {
        diagnostics: vec![Diagnostic {
            severity: Severity::Error,
            file: origin.to_string(),
            line,
            col,
            message: format!("invalid TOML: {message}"),
            help: Some(help.to_string()),
        }],
    }
}

/// The commonest TOML mistake in a policy: a value with a unit written without quotes
/// (`rate = 10mbit`). toml only says "expected newline"; say what to write instead.
fn unquoted_unit(text: &str, line: usize, origin: &str) -> Option<Diagnostic> {
    let src = text.lines().nth(line.checked_sub(1)?)?;
    let (key, value) = src.split_once('=')?;
    let value = value.split('#').next().unwrap_or("").trim();
    let digits = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|&i| i > 0)?;
    if !value[digits..].chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let key = key.trim();
    let col = src.find(value).map(|i| src[..i].chars().count() + 1)?;
    Some(Diagnostic {
        severity: Severity::Error,
        file: origin.to_string(),
        line,
        col,
        message: format!("invalid TOML: `{value}` must be quoted"),
        help: Some(format!(
            "write `{key} = \"{value}\"`: a value with a unit is a string"
        )),
    })
}
