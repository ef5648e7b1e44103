//! Replays every kept fuzz input (`fuzz/seeds/<target>/`, `fuzz/regressions/<target>/` and a local `fuzz/corpus/<target>/`) through
//! the harnesses on stable, so that what the fuzzer found once stays fixed without nightly.

use std::path::Path;

#[test]
fn every_kept_input_passes_its_harness() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut ran = 0usize;
    for (name, f) in linkshare_fuzzing::TARGETS {
        for kind in ["seeds", "regressions", "corpus"] {
            let dir = root.join(kind).join(name);
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut files: Vec<_> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect();
            files.sort();
            for p in files {
                let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                println!("{name}: {}", p.display());
                f(&data);
                ran += 1;
            }
        }
    }
    // The seeds are committed: an empty replay would mean the folders moved.
    assert!(
        ran >= 8,
        "only {ran} kept fuzz inputs were found under {}",
        root.display()
    );
}

#[test]
fn frame_harness_policy_is_valid_and_classifies() {
    // The harness's own policy must parse: otherwise every frame input would panic in setup.
    let p = linkshare_config::Policy::parse(linkshare_fuzzing::frame::POLICY, "t").unwrap();
    assert_eq!(p.classes().len(), 5);
}
