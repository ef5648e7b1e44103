//! Reading a scenario file whole: the scenario ([`crate::scenario`]) and, when the file has a
//! `[sweep]`, every point of it built ([`crate::sweep`]).
//!
//! Principle: the module graph has no cycle. A sweep point is a scenario, so `sweep` depends on
//! `scenario`; the file as a whole needs both, so it is read here, above them: `scenario` parses
//! a document and accepts the `[sweep]` key without reading it, this module reads that section
//! (with its spans, so errors still point at the line) and asks `sweep` to expand it.

use std::path::Path;

use serde::Deserialize;

use crate::scenario::{toml_error, Doc, Scenario, ScenarioError};
use crate::sweep::{expand, RawSweep};

/// The document's `[sweep]` section alone (every other key is the scenario's business).
#[derive(Deserialize)]
struct SweepSection {
    sweep: Option<RawSweep>,
}

impl Scenario {
    /// Read and check a scenario file. A `policy = "path"` is relative to the file's directory.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        Self::load_with(path, &[], None)
    }

    /// [`Scenario::load`] with keys set and the seed replaced ([`crate::overrides::apply`]).
    pub fn load_with(
        path: &Path,
        edits: &[crate::overrides::Override],
        seed: Option<u64>,
    ) -> Result<Scenario, ScenarioError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ScenarioError::one(
                &origin,
                0,
                0,
                format!("cannot read the scenario: {e}"),
                Some("check the path".into()),
            )
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("scenario")
            .to_string();
        crate::overrides::apply(&text, &origin, &base, &stem, edits, seed)
    }

    /// Parse a scenario from text; `origin` names it in messages, relative policy paths are
    /// resolved against the current directory.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        Self::parse_with(text, origin, Path::new(""), "scenario")
    }

    /// Parse with an explicit base directory for `policy = "path"` and a default name.
    pub fn parse_with(
        text: &str,
        origin: &str,
        base: &Path,
        default_name: &str,
    ) -> Result<Scenario, ScenarioError> {
        let mut sc = Self::parse_base(text, origin, base, default_name)?;
        let doc = Doc { text, origin };
        let section: SweepSection = toml::from_str(text).map_err(|e| toml_error(&doc, &e))?;
        if let Some(rs) = section.sweep {
            sc.sweep = Some(expand(rs, text, origin, base, default_name, &sc.name)?);
        }
        Ok(sc)
    }
}
