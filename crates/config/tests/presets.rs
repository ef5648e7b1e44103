//! Every policy shipped in `policies/` is valid, has no warnings and builds.

use linkshare_config::Policy;
use linkshare_core::PacketMeta;

#[test]
fn shipped_policies_are_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies");
    let mut n = 0;
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("toml"))
        .collect();
    paths.sort();
    for path in paths {
        let p = Policy::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            p.warnings().is_empty(),
            "{}: {:?}",
            path.display(),
            p.warnings()
        );
        p.build::<PacketMeta>()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        n += 1;
    }
    assert!(n >= 3, "only {n} policies");
}
