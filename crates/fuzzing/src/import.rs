//! `import_tc`, `import_libreqos`, `import_pf`: arbitrary text through the importers of
//! `linkshare-interop`.
//!
//! Invariants: the importers are total (a policy or located errors, never a panic), and an
//! accepted import is TOML that the policy parser reads — it may still be refused by `check`
//! (an oversubscribed tree is the user's, not the importer's, problem), but it must not be
//! malformed text, and checking it must not panic.

use linkshare_config::Policy;
use linkshare_interop::{ImportError, Imported};

/// Inputs larger than this are cut, as for the policy target.
const MAX_TEXT: usize = 64 * 1024;

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(&data[..data.len().min(MAX_TEXT)]).ok()
}

fn accepted(r: Result<Imported, ImportError>, what: &str) {
    let Ok(i) = r else { return };
    if let Err(e) = i.toml.parse::<toml::Table>() {
        panic!("{what}: the imported policy is not TOML: {e}\n{}", i.toml);
    }
    if let Ok(p) = Policy::parse(&i.toml, "imported.toml") {
        let _ = p.render_tree();
    }
}

pub fn tc(data: &[u8]) {
    let Some(t) = text(data) else { return };
    accepted(
        linkshare_interop::tc::import::import_script(t, "fuzz.tc", None),
        "tc",
    );
}

/// network.json, a line `---`, then ShapedDevices.csv; the policy is checked with the
/// subscriber table the import wrote.
pub fn libreqos(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let (net, csv) = t.split_once("\n---\n").unwrap_or((t, ""));
    let opts = linkshare_interop::libreqos::Options::default();
    let r =
        linkshare_interop::libreqos::import(net, "network.json", csv, "ShapedDevices.csv", &opts);
    let Ok(i) = r else { return };
    if let Err(e) = i.toml.parse::<toml::Table>() {
        panic!("libreqos: the imported policy is not TOML: {e}\n{}", i.toml);
    }
    let table = i.subscribers.clone();
    let read = move |_: &std::path::Path| Ok(table.clone());
    if let Ok(p) = Policy::parse_with(&i.toml, "imported.toml", &read) {
        let _ = p.render_tree();
    }
}

pub fn pf(data: &[u8]) {
    let Some(t) = text(data) else { return };
    accepted(linkshare_interop::pf::import(t, "pf.conf", None), "pf");
}
