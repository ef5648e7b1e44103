//! Every policy example in `docs/leaves.md` is accepted by the checker (`linkshare check`) and
//! builds, and together they use every leaf discipline.

use std::collections::BTreeSet;
use std::path::Path;

use linkshare_config::{LeafKind, Policy, QdiscKind};
use linkshare_core::PacketMeta;

/// The ```toml blocks of a markdown text, with the line each starts on.
fn toml_blocks(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, line) in md.lines().enumerate() {
        match &mut cur {
            None if line.trim_start().starts_with("```toml") => cur = Some((i + 2, String::new())),
            None => {}
            Some(_) if line.trim_start().starts_with("```") => out.extend(cur.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    assert!(cur.is_none(), "unterminated ```toml block");
    out
}

#[test]
fn every_example_in_leaves_md_is_accepted_and_covers_every_leaf() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/leaves.md");
    let md = std::fs::read_to_string(&path).unwrap();
    let blocks = toml_blocks(&md);
    assert!(blocks.len() >= 10, "only {} examples", blocks.len());
    let mut used = BTreeSet::new();
    let mut classful_drr = false;
    for (line, text) in &blocks {
        let origin = format!("docs/leaves.md (example at line {line})");
        let p = Policy::parse(text, &origin).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(p.warnings().is_empty(), "{origin}: {:?}", p.warnings());
        p.build::<PacketMeta>()
            .unwrap_or_else(|e| panic!("{origin}: {e}"));
        if let Some(l) = p.root_leaf() {
            used.insert(l.name());
        }
        for c in p.classes() {
            used.insert(c.leaf.name());
        }
        classful_drr |= p.kind() == QdiscKind::Drr;
    }
    for k in LeafKind::KNOWN {
        assert!(
            used.contains(k),
            "docs/leaves.md has no example using `{k}`"
        );
    }
    assert!(classful_drr, "docs/leaves.md has no classful drr example");
}

#[test]
fn every_leaf_has_a_section() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/leaves.md");
    let md = std::fs::read_to_string(&path).unwrap();
    for k in LeafKind::KNOWN {
        assert!(
            md.lines()
                .any(|l| l.starts_with("## ") && l.contains(&format!("`{k}`"))),
            "no section for `{k}`"
        );
    }
}
