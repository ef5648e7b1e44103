//! `summary.json`: the run's [`Summary`](crate::model::Summary), pretty-printed.
//!
//! The field names are the serialisation of the model types (see `docs/outputs.md`). Maps are
//! `BTreeMap`s, so keys come out sorted and the file is byte-identical for identical input.

use std::io;
use std::path::Path;

use crate::model::SimResult;

/// The text of `summary.json` (pretty JSON, two-space indent, trailing newline).
pub fn summary_json(result: &SimResult) -> io::Result<String> {
    let mut text = serde_json::to_string_pretty(&result.summary).map_err(io::Error::other)?;
    text.push('\n');
    Ok(text)
}

/// Write `summary.json` to `path`.
pub fn write_summary_json(result: &SimResult, path: &Path) -> io::Result<()> {
    std::fs::write(path, summary_json(result)?)
}
