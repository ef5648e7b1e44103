//! Errors of a scenario and where they are: [`ScenarioError`] (every diagnostic, located as
//! file:line:col) and [`Doc`], which turns a byte span of the document into a line and column.
//!
//! Rule: every message of the scenario format is built through `Doc::err` (or [`toml_error`] for
//! serde's), so each one points at the value it is about.

use std::fmt;
use std::ops::Range;

use linkshare_config::{ConfigError, Diagnostic, Severity};

/// A rejected scenario: every diagnostic (file:line:col, message, help), as `linkshare check`
/// prints them for policies. Problems of an inline or referenced policy come from the policy
/// checker and point into the file they are in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub diagnostics: Vec<Diagnostic>,
}

impl ScenarioError {
    pub(crate) fn one(
        file: &str,
        line: usize,
        col: usize,
        message: String,
        help: Option<String>,
    ) -> Self {
        ScenarioError {
            diagnostics: vec![Diagnostic {
                severity: Severity::Error,
                file: file.to_string(),
                line,
                col,
                message,
                help,
            }],
        }
    }
    /// The first error (there is always one).
    pub fn first(&self) -> Option<&Diagnostic> {
        self.diagnostics
            .iter()
            .find(|d| d.is_error())
            .or(self.diagnostics.first())
    }
}

impl From<ConfigError> for ScenarioError {
    fn from(e: ConfigError) -> Self {
        ScenarioError {
            diagnostics: e.diagnostics,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Locates byte offsets of one document.
pub(crate) struct Doc<'a> {
    pub(crate) text: &'a str,
    pub(crate) origin: &'a str,
}

/// A TOML or serde error of `doc`, located, with a pointer to the format for unknown keys.
pub(crate) fn toml_error(doc: &Doc<'_>, e: &toml::de::Error) -> ScenarioError {
    let span = e.span().unwrap_or(0..0);
    let msg = e
        .message()
        .trim()
        .lines()
        .next()
        .unwrap_or("invalid TOML")
        .to_string();
    let help = unknown_field(&msg).map(|field| unknown_field_help(doc.text, span.start, field));
    doc.err(span, msg, help)
}

/// Top-level keys of a scenario: written below a `[table]` header they belong to that table.
const TOP_LEVEL: &[&str] = &["name", "duration", "seed", "sample", "policy"];

/// `policy` out of "unknown field `policy`, expected one of …".
fn unknown_field(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// The last `[table]` or `[[table]]` header before byte `offset`, as written.
fn header_before(text: &str, offset: usize) -> Option<&str> {
    let before = text.get(..offset.min(text.len()))?;
    before
        .lines()
        .map(str::trim)
        .rfind(|l| l.starts_with('['))
        .map(|l| l.split('#').next().unwrap_or(l).trim_end())
}

/// The fix for an unknown key: TOML's scope for a top-level key written below a table, the
/// policy's filters for a flow's `class`, else the format's reference.
fn unknown_field_help(text: &str, offset: usize, field: &str) -> String {
    let header = header_before(text, offset);
    match header {
        Some(h) if h == "[[flow]]" && field == "class" => {
            "a flow does not name its class: the policy's filters classify packets by DSCP and \
             addresses. Mark the flow (e.g. `dscp = \"ef\"`, or give it `src`/`dst`/`dport`) and \
             add a `[[policy.filter]]` with `class = \"…\"` and the same `dscp = \"ef\"` (or \
             addresses and ports); unmatched flows go to the policy's `default` class"
                .to_string()
        }
        Some(h) if TOP_LEVEL.contains(&field) => format!(
            "in TOML every key after `{h}` belongs to `{h}`: move `{field} = …` above the first \
             [table] header, with the scenario's other top-level keys"
        ),
        _ => "see docs/scenario-format.md for the keys a scenario accepts".to_string(),
    }
}

impl Doc<'_> {
    pub(super) fn err(
        &self,
        span: Range<usize>,
        message: impl Into<String>,
        help: Option<String>,
    ) -> ScenarioError {
        let (line, col) = line_col(self.text, span.start);
        ScenarioError::one(self.origin, line, col, message.into(), help)
    }
}

pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before.get(start..).map(|s| s.chars().count()).unwrap_or(0) + 1;
    (line, col)
}
