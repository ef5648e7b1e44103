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

#[test]
fn control_seeds_reach_every_reply() {
    // The committed control seeds must drive the dispatcher into every kind of reply (a reload
    // accepted and one rejected included), or the fuzzer starts blind.
    use linkshare_router::control::{answer, reply_name, Offline};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/control");
    let mut seen = std::collections::BTreeSet::new();
    let mut kinds = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let data = std::fs::read(e.expect("dir entry").path()).expect("seed");
        let mut o = Offline::new(linkshare_fuzzing::control::POLICY, "fuzz.toml")
            .unwrap_or_else(|d| panic!("{d}"));
        for raw in data.split(|&b| b == b'\n') {
            let line = linkshare_router::control::server::request_text(raw);
            let r = answer(&mut o, &line);
            if let linkshare_router::control::Response::Error(e) = &r {
                kinds.insert(format!("{:?}", e.kind));
            }
            seen.insert(reply_name(&r));
        }
    }
    for want in ["hello", "stat", "policy", "reloaded", "error"] {
        assert!(
            seen.contains(want),
            "no seed gets a `{want}` reply: {seen:?}"
        );
    }
    for want in [
        "BadRequest",
        "UnknownRequest",
        "UnsupportedVersion",
        "PolicyRejected",
        "Unshaped",
    ] {
        assert!(
            kinds.contains(want),
            "no seed gets a {want} error: {kinds:?}"
        );
    }
}
