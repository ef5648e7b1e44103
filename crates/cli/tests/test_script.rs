//! `scripts/test` reuses what is built: the README's first command builds the workspace in
//! release, and compiling the test profile from nothing took 35 minutes on 2 cores. Its choice
//! (`scripts/test-profile`) is checked on target directories made up for the purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-profile")
}

/// The profile chosen for target directory `target`, and what it said about the build.
fn choose(target: &Path) -> (String, String) {
    let out = Command::new("bash")
        .arg(script())
        .env("CARGO_TARGET_DIR", target)
        .env_remove("LINKSHARE_TEST_PROFILE")
        .output()
        .expect("run scripts/test-profile");
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn touch(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, b"").unwrap();
}

#[test]
fn the_tests_reuse_the_release_build_or_say_how_long_the_build_takes() {
    let dir = std::env::temp_dir().join(format!("linkshare-test-profile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Nothing built: the dev profile, with the expected time in minutes.
    let (p, why) = choose(&dir);
    assert_eq!(p, "dev", "{why}");
    assert!(why.contains("minutes on"), "{why}");
    // `cargo run --release` has built the binary: the tests reuse that build.
    let bin = dir.join("release/linkshare");
    touch(&bin);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (p, why) = choose(&dir);
    assert_eq!(p, "release", "{why}");
    assert!(why.contains("cargo run --release"), "{why}");
    // A dev test build exists (and no release one): it is reused.
    touch(&dir.join("debug/deps/check-0123abcd"));
    let (p, why) = choose(&dir);
    assert_eq!(p, "dev", "{why}");
    assert!(why.contains("reusing the test build"), "{why}");
    let _ = std::fs::remove_dir_all(&dir);
}
