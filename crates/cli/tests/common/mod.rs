//! What the CLI's integration tests share: running the built binary, running a helper command,
//! a scratch directory, and a network namespace removed on drop.
//!
//! Each test file includes it with `mod common;` and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The `linkshare` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_linkshare");

/// Run `linkshare ARGS`: exit code (-1 if killed by a signal), stdout, stderr.
pub fn linkshare(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {BIN}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run a helper command (`ip`, `tc`) quietly; whether it succeeded.
pub fn run(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A scratch directory of this test process, `tag` telling the test files apart.
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ls{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

/// Write `text` as `name` in `dir`; the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    p
}

/// A network namespace, deleted on drop.
pub struct Ns(pub String);

impl Drop for Ns {
    fn drop(&mut self) {
        run("ip", &["netns", "del", &self.0]);
    }
}
