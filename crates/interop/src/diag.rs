//! Located diagnostics for the importers, printed like `linkshare check`'s:
//! `FILE:LINE: error: what is wrong`, the offending line, and a `help:` line.

use std::fmt;

/// One problem in an input file. `line` is 1-based; 0 when the problem is about the whole file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    pub file: String,
    pub line: usize,
    pub message: String,
    pub help: Option<String>,
}

impl Diag {
    pub fn new(file: &str, line: usize, message: impl Into<String>) -> Diag {
        Diag {
            file: file.to_string(),
            line,
            message: message.into(),
            help: None,
        }
    }

    pub fn help(mut self, help: impl Into<String>) -> Diag {
        self.help = Some(help.into());
        self
    }

    /// `FILE:LINE: SEVERITY: message`, the source line (cut at 200 characters) when `text` has
    /// it, and the help.
    pub fn render(&self, severity: &str, text: Option<&str>) -> String {
        let mut s = if self.line > 0 {
            format!("{}:{}: {severity}: {}", self.file, self.line, self.message)
        } else {
            format!("{}: {severity}: {}", self.file, self.message)
        };
        if let Some(src) = text
            .filter(|_| self.line > 0)
            .and_then(|t| t.lines().nth(self.line - 1))
        {
            let shown: String = src.chars().take(200).collect();
            let w = self.line.to_string().len();
            s.push_str(&format!("\n{:w$} |\n{} | {shown}", "", self.line));
        }
        if let Some(h) = &self.help {
            s.push_str(&format!("\n  help: {h}"));
        }
        s
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render("error", None))
    }
}

/// An import that failed: every error found (the importers go on after a bad line where they
/// can, so that one run shows all of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    pub errors: Vec<Diag>,
}

impl ImportError {
    pub fn one(d: Diag) -> ImportError {
        ImportError { errors: vec![d] }
    }

    /// Every error rendered with its source line from `text`.
    pub fn render(&self, text: Option<&str>) -> String {
        let parts: Vec<String> = self
            .errors
            .iter()
            .map(|d| d.render("error", text))
            .collect();
        parts.join("\n\n")
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(None))
    }
}

impl std::error::Error for ImportError {}

impl From<Diag> for ImportError {
    fn from(d: Diag) -> ImportError {
        ImportError::one(d)
    }
}
