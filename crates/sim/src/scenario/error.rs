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
    let help = if msg.starts_with("unknown field") {
        Some("see docs/scenario-format.md for the keys a scenario accepts".to_string())
    } else {
        None
    };
    doc.err(span, msg, help)
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
