//! `policy` and `scenario`: arbitrary text through the policy and scenario parsers.
//!
//! Both must be total: a file is accepted or refused with located diagnostics, never a panic. An
//! accepted policy must also render its tree and build its scheduler (HTB, CBQ, DRR or a leaf at
//! the root) without panicking; a build error is allowed (it is reported to the user) but must
//! not be a panic.

use linkshare_config::Policy;
use linkshare_core::PacketMeta;

/// Inputs larger than this are cut: the parsers' cost is what matters, not copying megabytes.
const MAX_TEXT: usize = 64 * 1024;

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(&data[..data.len().min(MAX_TEXT)]).ok()
}

pub fn policy(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Ok(p) = Policy::parse(t, "fuzz.toml") {
        let _ = p.render_tree();
        let _ = p.filter_descriptions();
        let _ = p.build::<PacketMeta>();
    }
}

pub fn scenario(data: &[u8]) {
    let Some(t) = text(data) else { return };
    // `policy = "PATH"` reads a file: a device or pseudo-file would make the harness read forever,
    // which is the user's own choice of path and not a parser defect.
    if ["/dev", "/proc", "/sys"].iter().any(|d| t.contains(d)) {
        return;
    }
    let _ = linkshare_sim::Scenario::parse_with(t, "fuzz.toml", std::path::Path::new(""), "fuzz");
}
