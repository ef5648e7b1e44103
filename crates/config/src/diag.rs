//! Diagnostics: what is wrong, where (file:line:col), and how to fix it.
//!
//! Every problem found in a policy becomes a [`Diagnostic`] that points at the offending value in
//! the file (1-based line and column, columns counted in characters), says what is wrong in the
//! user's own words (class names, the value they wrote) and carries a `help:` line with the fix.
//! Validation collects all of them instead of stopping at the first; a policy with at least one
//! error is rejected with a [`ConfigError`] holding every diagnostic, warnings included.

use std::fmt;

/// How bad a diagnostic is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The policy cannot be used.
    Error,
    /// The policy works, but probably not as intended.
    Warning,
}

impl Severity {
    /// `"error"` or `"warning"`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One problem, located in a file.
///
/// `line` and `col` are 1-based; both are 0 when the problem has no position (the file could not
/// be read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
    pub help: Option<String>,
}

/// `Diagnostic::render_with_source` is defined in `crate::source`, beside the line index it
/// needs: this module sits below `source` and imports nothing from it.
impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    pub(crate) fn location(&self) -> String {
        if self.line == 0 {
            self.file.clone()
        } else {
            format!("{}:{}:{}", self.file, self.line, self.col)
        }
    }
}

impl fmt::Display for Diagnostic {
    /// `policy.toml:12:8: error: class `video`: ceil 1mbit is below rate 2mbit`, then
    /// `  help: raise ceil to at least 2mbit or lower rate` on the next line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.location(),
            self.severity,
            self.message
        )?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// A rejected policy: every diagnostic found (errors and warnings, in file order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub diagnostics: Vec<Diagnostic>,
}

impl ConfigError {
    /// The errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }
    /// The warnings only.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| !d.is_error())
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        let n = self.errors().count();
        if n > 1 {
            write!(f, "\n{n} errors")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Edit distance counting a swap of two adjacent characters as one edit (so `ciel` is one edit
/// from `ceil`).
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
}

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub(crate) fn suggest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    // Names and units are short; a long word is no typo of one (and the edit distance is
    // quadratic in the lengths).
    if word.len() > 64 {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let limit = match word.chars().count() {
        0..=2 => 1,
        3..=5 => 2,
        _ => 3,
    };
    candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(edit_distance("ciel", "ceil"), 1);
        assert_eq!(suggest("ciel", ["name", "ceil", "cburst"]), Some("ceil"));
        assert_eq!(suggest("mbitt", ["bit", "kbit", "mbit"]), Some("mbit"));
        assert_eq!(suggest("zzzzzz", ["name", "ceil"]), None);
    }

    #[test]
    fn display_like_rustc() {
        let d = Diagnostic {
            severity: Severity::Error,
            file: "p.toml".into(),
            line: 12,
            col: 8,
            message: "class `video`: ceil 1mbit is below rate 2mbit".into(),
            help: Some("raise ceil to at least 2mbit or lower rate".into()),
        };
        assert_eq!(
            d.to_string(),
            "p.toml:12:8: error: class `video`: ceil 1mbit is below rate 2mbit\n  help: raise ceil to at least 2mbit or lower rate"
        );
    }
}
