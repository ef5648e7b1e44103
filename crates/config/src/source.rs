//! Source positions, and diagnostics rendered with the source line they point into.
//!
//! Principles (what they prevent: a per-diagnostic scan from the start of the line made `check`
//! quadratic, 46 s for 40,000 warned classes, and echoing whole lines wrote 104 MB for a 50 MB
//! one-line file):
//! * the text is indexed once, in linear time: the byte offset of every line start, and every
//!   [`CHECKPOINT`] bytes the number of characters before that point; a lookup is a binary search
//!   plus a scan of at most one checkpoint interval, whatever the lengths of the file and line;
//! * an echoed source line is a window of at most [`ECHO_MAX_CHARS`] characters around the column,
//!   with `…` where it is cut, so output per diagnostic is bounded;
//! * a report shows at most [`SHOWN_PER_SEVERITY`] diagnostics of each severity in file order and
//!   counts the rest (`… and 39,980 more warnings`); `check --json` still lists every one;
//! * diagnostics that say the same thing of different classes (the message with its quoted names
//!   and numbers set aside) are summarised: the first [`SHOWN_PER_KIND`] are shown,
//!   the rest become one line that counts them and gives their line range.

use std::cell::Cell;
use std::ops::Range;

use crate::diag::{Diagnostic, Severity};

/// Longest source line echoed under a diagnostic, in characters.
pub const ECHO_MAX_CHARS: usize = 200;
/// Diagnostics of each severity shown by [`render_report`] before the rest are summarised.
pub const SHOWN_PER_SEVERITY: usize = 20;
/// Diagnostics of one kind (same message but for names and numbers) shown before the rest of
/// that kind are summarised in one line.
pub const SHOWN_PER_KIND: usize = 3;
/// Bytes between two character-count checkpoints.
const CHECKPOINT: usize = 1024;

/// Turns byte offsets into 1-based line and column (in characters), and back.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    /// Byte offset at which each line starts.
    starts: Vec<usize>,
    /// `(byte, chars before it)` at the first character boundary at or after each multiple of
    /// [`CHECKPOINT`]; increasing in both.
    marks: Vec<(usize, usize)>,
    /// Bytes examined by lookups beyond the binary searches (for the complexity test).
    scanned: Cell<usize>,
}

impl<'a> LineIndex<'a> {
    /// O(n) in the text's length.
    pub(crate) fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        let mut marks = vec![(0, 0)];
        let mut next = CHECKPOINT;
        for (chars, (i, c)) in text.char_indices().enumerate() {
            if i >= next {
                marks.push((i, chars));
                next = (i / CHECKPOINT + 1) * CHECKPOINT;
            }
            if c == '\n' {
                starts.push(i + 1);
            }
        }
        LineIndex {
            text,
            starts,
            marks,
            scanned: Cell::new(0),
        }
    }

    /// Characters before byte `offset` (a character boundary, at most the text's length).
    fn chars_before(&self, offset: usize) -> usize {
        let m = match self.marks.binary_search_by_key(&offset, |&(b, _)| b) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let (b, c) = self.marks[m];
        self.scanned.set(self.scanned.get() + (offset - b));
        c + self
            .text
            .get(b..offset)
            .map_or(offset - b, |s| s.chars().count())
    }

    /// Byte offset of the character with index `chars` (or the end of the text).
    fn byte_of_char(&self, chars: usize) -> usize {
        let m = match self.marks.binary_search_by_key(&chars, |&(_, c)| c) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let (b, c) = self.marks[m];
        let rest = &self.text[b..];
        let skip = rest
            .char_indices()
            .nth(chars - c)
            .map_or(rest.len(), |(i, _)| i);
        self.scanned.set(self.scanned.get() + skip);
        b + skip
    }

    /// Line (0-based) holding byte `offset`.
    fn line_of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_of(offset);
        let col = self.chars_before(offset) - self.chars_before(self.starts[line]);
        (line + 1, col + 1)
    }

    /// Byte range of line `line` (1-based), without its `\n` or `\r\n`.
    fn line_range(&self, line: usize) -> Option<(usize, usize)> {
        let start = *self.starts.get(line.checked_sub(1)?)?;
        let mut end = self.starts.get(line).map_or(self.text.len(), |&s| s - 1);
        if self.text[start..end].ends_with('\r') {
            end -= 1;
        }
        Some((start, end))
    }
}

/// A file's text, indexed once, to render any number of its diagnostics.
pub struct Source<'a> {
    index: LineIndex<'a>,
}

impl<'a> Source<'a> {
    /// O(n) in the text's length.
    pub fn new(text: &'a str) -> Self {
        Source {
            index: LineIndex::new(text),
        }
    }

    /// The diagnostic, the source line it points into (a window of at most [`ECHO_MAX_CHARS`]
    /// characters around the column) and a caret under its column, as rustc prints them.
    /// O(log n + [`ECHO_MAX_CHARS`] + checkpoint interval).
    pub fn render(&self, d: &Diagnostic) -> String {
        let mut out = format!("{}: {}: {}", d.location(), d.severity, d.message);
        if let Some((src, caret)) = self.echo(d.line, d.col) {
            let num = d.line.to_string();
            let pad = " ".repeat(num.len());
            out.push_str(&format!("\n{pad} |\n{num} | {src}\n{pad} | {caret}^"));
        }
        if let Some(help) = &d.help {
            out.push_str(&format!("\n  help: {help}"));
        }
        out
    }

    /// The echoed window of line `line` and the padding that puts a caret under column `col`.
    fn echo(&self, line: usize, col: usize) -> Option<(String, String)> {
        let text = self.index.text;
        let (start, end) = self.index.line_range(line)?;
        let col0 = col.saturating_sub(1);
        // Window start, in characters from the line start: the column half-way in when the line
        // is long enough to need a window.
        let first = if end - start <= ECHO_MAX_CHARS {
            0
        } else {
            col0.saturating_sub(ECHO_MAX_CHARS / 2)
        };
        let from = if first == 0 {
            start
        } else {
            let line_chars = self.index.chars_before(start);
            self.index.byte_of_char(line_chars + first).min(end)
        };
        let mut shown: String = text[from..end].chars().take(ECHO_MAX_CHARS).collect();
        let cut_end = from + shown.len() < end;
        let mut caret: String = shown
            .chars()
            .take(col0 - first.min(col0))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        if first > 0 {
            shown.insert(0, '…');
            caret.insert(0, ' ');
        }
        if cut_end {
            shown.push('…');
        }
        Some((shown, caret))
    }
}

/// The diagnostics rendered with their source lines, each followed by a blank line: at most
/// [`SHOWN_PER_KIND`] of each kind and [`SHOWN_PER_SEVERITY`] of each severity, in the order
/// given, then one line per summarised kind and one line per severity
/// counting those not shown. Linear in the text's length plus the number of diagnostics.
pub fn render_report(text: &str, diags: &[Diagnostic]) -> String {
    render_report_for(None, text, diags)
}

/// [`render_report`] for the policy file `origin` whose text is `text`: diagnostics of other
/// files (its subscriber table) are rendered without a source line, since their message names
/// the row and the field.
pub fn render_report_for(origin: Option<&str>, text: &str, diags: &[Diagnostic]) -> String {
    let src = Source::new(text);
    let elsewhere = Source::new("");
    let mut out = String::new();
    let mut hidden = [0usize; 2];
    let mut shown = [0usize; 2];
    // Per kind (severity, template): how many were seen, the first one's message, line range.
    let mut kinds: std::collections::HashMap<(usize, String), Kind> =
        std::collections::HashMap::new();
    let mut order: Vec<(usize, String)> = Vec::new();
    for d in diags {
        let k = usize::from(d.severity == Severity::Warning);
        let key = (k, template(&d.message));
        let kind = kinds.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            Kind {
                seen: 0,
                summarised: 0,
                example: d.message.clone(),
                lines: (usize::MAX, 0),
            }
        });
        kind.seen += 1;
        if kind.seen > SHOWN_PER_KIND {
            kind.summarised += 1;
            kind.lines.1 = kind.lines.1.max(d.line);
            kind.lines.0 = kind.lines.0.min(d.line);
            continue;
        }
        if shown[k] == SHOWN_PER_SEVERITY {
            hidden[k] += 1;
            continue;
        }
        shown[k] += 1;
        let own = origin.is_none_or(|o| o == d.file);
        out.push_str(&if own { &src } else { &elsewhere }.render(d));
        out.push_str("\n\n");
    }
    let mut lines = [0usize; 2];
    for key in &order {
        let kind = &kinds[key];
        if kind.summarised == 0 {
            continue;
        }
        // The summary lines are bounded too: past the cap their diagnostics are only counted.
        if lines[key.0] == SHOWN_PER_SEVERITY {
            hidden[key.0] += kind.summarised;
            continue;
        }
        lines[key.0] += 1;
        let name = if key.0 == 0 { "error" } else { "warning" };
        let plural = if kind.summarised == 1 { "" } else { "s" };
        out.push_str(&format!(
            "… and {} more {name}{plural} like \"{}\" (lines {}–{})\n\n",
            thousands(kind.summarised),
            cut(&kind.example, ECHO_MAX_CHARS),
            thousands(kind.lines.0),
            thousands(kind.lines.1),
        ));
    }
    for (k, name) in [(0, "error"), (1, "warning")] {
        if hidden[k] > 0 {
            let plural = if hidden[k] == 1 { "" } else { "s" };
            out.push_str(&format!(
                "… and {} more {name}{plural} not shown (`check --json` lists them all)\n\n",
                thousands(hidden[k])
            ));
        }
    }
    out
}

/// One kind of diagnostic in a report.
struct Kind {
    seen: usize,
    summarised: usize,
    example: String,
    /// First and last line of the summarised ones.
    lines: (usize, usize),
}

/// A message with what varies between classes set aside: text between backquotes becomes `…`
/// and every run of digits `N`, so "class `c7`: quantum 100 bytes" and "class `c8`: quantum 100
/// bytes" are one kind.
fn template(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut quoted = false;
    let mut digits = false;
    for ch in msg.chars() {
        if ch == '`' {
            if !quoted {
                out.push_str("`…`");
            }
            quoted = !quoted;
            digits = false;
            continue;
        }
        if quoted {
            continue;
        }
        if ch.is_ascii_digit() {
            if !digits {
                out.push('N');
            }
            digits = true;
            continue;
        }
        digits = false;
        out.push(ch);
    }
    out
}

/// At most `max` characters of `s`, with `…` where it is cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// `39990` → `39,990`.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

impl Diagnostic {
    /// The diagnostic followed by the offending source line and a caret under the column, as
    /// rustc prints them. `text` is the whole file the diagnostic points into. Indexes `text`
    /// (linear in its size): to render many diagnostics of one file, use [`Source`] or
    /// [`render_report`](crate::render_report), which index it once.
    pub fn render_with_source(&self, text: &str) -> String {
        Source::new(text).render(self)
    }
}

/// Collects diagnostics for one document.
pub(crate) struct Sink<'a> {
    index: LineIndex<'a>,
    origin: &'a str,
    pub(crate) diags: Vec<Diagnostic>,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(text: &'a str, origin: &'a str) -> Self {
        Sink {
            index: LineIndex::new(text),
            origin,
            diags: Vec::new(),
        }
    }

    pub(crate) fn push(
        &mut self,
        severity: Severity,
        span: &Range<usize>,
        message: String,
        help: Option<String>,
    ) {
        let (line, col) = self.index.line_col(span.start);
        self.diags.push(Diagnostic {
            severity,
            file: self.origin.to_string(),
            line,
            col,
            message,
            help,
        });
    }

    pub(crate) fn error(
        &mut self,
        span: &Range<usize>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.push(Severity::Error, span, message.into(), Some(help.into()));
    }

    pub(crate) fn warn(
        &mut self,
        span: &Range<usize>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.push(Severity::Warning, span, message.into(), Some(help.into()));
    }

    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        self.index.line_col(offset)
    }

    /// The file name diagnostics of this document carry.
    pub(crate) fn origin(&self) -> &str {
        self.origin
    }

    pub(crate) fn has_errors(&self) -> bool {
        self.diags.iter().any(|d| d.is_error())
    }

    /// Diagnostics in file order (stable for equal positions): this document's first, then
    /// those of the tables it names (a subscriber table), each in line order.
    pub(crate) fn finish(mut self) -> Vec<Diagnostic> {
        let origin = self.origin;
        self.diags.sort_by(|a, b| {
            (a.file != origin, a.line, a.col).cmp(&(b.file != origin, b.line, b.col))
        });
        self.diags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(line: usize, col: usize, severity: Severity) -> Diagnostic {
        Diagnostic {
            severity,
            file: "p.toml".into(),
            line,
            col,
            message: "something".into(),
            help: Some("fix it".into()),
        }
    }

    #[test]
    fn line_col_is_one_based_in_chars() {
        let idx = LineIndex::new("ab\nc\u{e9}d\n\nx");
        assert_eq!(idx.line_col(0), (1, 1));
        assert_eq!(idx.line_col(1), (1, 2));
        assert_eq!(idx.line_col(3), (2, 1));
        // 'd' comes after a two-byte character: byte 6, column 3.
        assert_eq!(idx.line_col(6), (2, 3));
        assert_eq!(idx.line_col(8), (3, 1));
        assert_eq!(idx.line_col(9), (4, 1));
    }

    /// Columns on a long line agree with counting characters from the line's start, for offsets
    /// on both sides of the index's checkpoints and after multi-byte characters.
    #[test]
    fn columns_on_long_lines_are_exact() {
        let text: String = (0..20_000)
            .map(|i| if i % 7 == 0 { 'é' } else { 'a' })
            .chain("\nxé€y".chars())
            .collect();
        let idx = LineIndex::new(&text);
        for (off, _) in text.char_indices().step_by(37) {
            let line_start = text[..off].rfind('\n').map_or(0, |i| i + 1);
            let want = text[line_start..off].chars().count() + 1;
            assert_eq!(idx.line_col(off).1, want, "offset {off}");
        }
    }

    /// The complexity bound (counting each diagnostic's column from the start of its line made
    /// many diagnostics on one long line quadratic): lookups scan a bounded
    /// number of bytes each, whatever the line's length.
    #[test]
    fn lookups_scan_a_bounded_number_of_bytes() {
        let text = "x".repeat(4 << 20);
        let idx = LineIndex::new(&text);
        let queries = 10_000;
        for q in 0..queries {
            let _ = idx.line_col(q * (text.len() / queries));
        }
        let per_lookup = idx.scanned.get() / queries;
        assert!(per_lookup <= 4096, "{per_lookup} bytes scanned per lookup");
    }

    /// 40,000 different warnings render as at most `SHOWN_PER_SEVERITY` with their source, then
    /// one line that counts the rest.
    #[test]
    fn report_is_capped_and_counts_the_rest() {
        let text: String = (0..40_000)
            .map(|i| format!("rate = \"{i}kbit\"\n"))
            .collect();
        let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"];
        let mut diags: Vec<Diagnostic> = (1..=40_000)
            .map(|l| {
                let mut d = diag(l, 8, Severity::Warning);
                // A different message for each: no two are of one kind.
                d.message = format!("{} {}", words[l % 7], words[(l / 7) % 7]).repeat(1 + l / 49);
                d.message.truncate(60);
                d.message = format!("warned {}", d.message.replace(' ', &"x".repeat(l % 5)));
                d
            })
            .collect();
        diags.push(diag(7, 1, Severity::Error));
        let out = render_report(&text, &diags);
        assert_eq!(out.matches(": warning: warned").count(), SHOWN_PER_SEVERITY);
        assert_eq!(out.matches("error: something").count(), 1);
        let kinds: std::collections::HashSet<String> =
            diags.iter().map(|d| template(&d.message)).collect();
        assert!(kinds.len() > 100, "{} kinds", kinds.len());
        assert!(
            out.contains(" more warnings not shown"),
            "{}",
            &out[out.len().saturating_sub(300)..]
        );
        assert!(
            out.len() < 300 * (2 * SHOWN_PER_SEVERITY + 3),
            "{} bytes",
            out.len()
        );
    }

    /// Warnings that say the same of different classes are one kind: the first
    /// `SHOWN_PER_KIND` are shown, the rest summarised in one line with their line range.
    #[test]
    fn identical_warnings_are_summarised() {
        let text: String = (0..1000).map(|i| format!("rate = \"{i}kbit\"\n")).collect();
        let mut diags: Vec<Diagnostic> = (1..=1000)
            .map(|l| {
                let mut d = diag(l, 8, Severity::Warning);
                d.message = format!("class `c{l}`: quantum {l} bytes is below 1000; using 1000");
                d
            })
            .collect();
        let mut other = diag(500, 1, Severity::Warning);
        other.message = "something else".into();
        diags.push(other);
        let out = render_report(&text, &diags);
        assert_eq!(out.matches(": warning: class").count(), SHOWN_PER_KIND);
        assert_eq!(out.matches("warning: something else").count(), 1);
        assert!(
            out.contains("… and 997 more warnings like \"class `c1`: quantum 1 bytes is below 1000; using 1000\" (lines 4–1,000)"),
            "{out}"
        );
        assert!(!out.contains("not shown"), "{out}");
    }

    #[test]
    fn templates_set_names_and_numbers_aside() {
        assert_eq!(
            template("class `a b`: rate 10 of 2000"),
            template("class `x`: rate 7 of 3")
        );
        assert_ne!(template("class `a`: rate"), template("class `a`: ceil"));
    }

    /// A 5 MB one-line file: the echo is a window of at most `ECHO_MAX_CHARS` characters around
    /// the column, marked with ellipses, and the caret is under the right character.
    #[test]
    fn long_lines_are_echoed_in_a_window() {
        let mut text = "é".repeat(5 << 20);
        let at = text.len() / 2;
        text.replace_range(at..at + 2, "ZZ");
        let idx = LineIndex::new(&text);
        let (line, col) = idx.line_col(at);
        let out = Source::new(&text).render(&diag(line, col, Severity::Error));
        let lines: Vec<&str> = out.lines().collect();
        let src = lines[2].trim_start_matches("1 | ");
        let caret = lines[3].trim_start_matches("  | ");
        assert!(src.chars().count() <= ECHO_MAX_CHARS + 2, "{}", src.len());
        assert!(src.starts_with('…') && src.ends_with('…'), "{src}");
        let under: Vec<char> = src.chars().collect();
        assert_eq!(under[caret.chars().count() - 1], 'Z', "{caret}");
        // Near the start of the line: no leading ellipsis.
        let out = Source::new(&text).render(&diag(1, 3, Severity::Error));
        let src = out.lines().nth(2).unwrap().trim_start_matches("1 | ");
        assert!(!src.starts_with('…') && src.ends_with('…'));
        // Short lines are echoed whole.
        let out = Source::new("a = 1\n").render(&diag(1, 5, Severity::Error));
        assert_eq!(out.lines().nth(2), Some("1 | a = 1"));
    }
}
