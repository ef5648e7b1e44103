//! The gate of every namespace test: run when namespaces can be built here, else skip with
//! the reason, or fail when CI requires the namespace tests to run.
//!
//! A skipped namespace test must not pass silently: each test records `ran NAME` or `skipped
//! NAME` in the file named by [`NETNS_LOG_ENV`] (scripts/test counts them), and with
//! [`REQUIRE_NETNS_ENV`]`=1` a test that cannot run panics instead of skipping.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::netns::unavailable;

/// Environment variable under which a namespace test that cannot run fails instead of skipping
/// (`.ci/run` sets it to 1).
pub const REQUIRE_NETNS_ENV: &str = "LINKSHARE_REQUIRE_NETNS";
/// Environment variable naming a file to which every namespace test appends `ran NAME` or
/// `skipped NAME` (scripts/test counts them).
pub const NETNS_LOG_ENV: &str = "LINKSHARE_NETNS_LOG";

/// The gate of every namespace test (router, lab, export tc): `true` when namespaces can be
/// built here (recorded as `ran`); otherwise the test is skipped with the reason, see
/// [`netns_test_skipped`]. The test is named by its thread (libtest names it after the test).
pub fn netns_test_can_run() -> bool {
    let test = current_test();
    let test = test.as_str();
    let why = unavailable().or_else(|| {
        let ok = Command::new("ip")
            .args(["netns", "list"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        (!ok).then(|| "`ip netns` does not work here".to_string())
    });
    match why {
        None => {
            netns_test_record("ran", test);
            true
        }
        Some(why) => {
            netns_test_skipped(&why);
            false
        }
    }
}

/// A namespace test cannot run: it panics when [`REQUIRE_NETNS_ENV`] is `1` (CI must not pass
/// on a test that did nothing), else prints `SKIP` with the reason and records `skipped`.
pub fn netns_test_skipped(why: &str) {
    let require = std::env::var(REQUIRE_NETNS_ENV).is_ok_and(|v| v == "1");
    let log = std::env::var_os(NETNS_LOG_ENV).map(PathBuf::from);
    skip_or_fail(&current_test(), why, require, log.as_deref());
}

fn skip_or_fail(test: &str, why: &str, require: bool, log: Option<&Path>) {
    if require {
        panic!("{test} cannot run ({why}) and {REQUIRE_NETNS_ENV}=1 requires it");
    }
    eprintln!("SKIP {test}: {why}");
    record(log, "skipped", test);
}

fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string()
}

fn netns_test_record(outcome: &str, test: &str) {
    let log = std::env::var_os(NETNS_LOG_ENV).map(PathBuf::from);
    record(log.as_deref(), outcome, test);
}

fn record(log: Option<&Path>, outcome: &str, test: &str) {
    let Some(path) = log else { return };
    let line = format!("{outcome} {test}\n");
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = r {
        eprintln!("warning: cannot record to {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace test that cannot run is recorded as skipped, and fails when required.
    #[test]
    fn a_namespace_test_that_cannot_run_is_counted_and_fails_when_required() {
        let log = std::env::temp_dir().join(format!("lsnetns-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        skip_or_fail("t1", "no namespaces here", false, Some(&log));
        let failed =
            std::panic::catch_unwind(|| skip_or_fail("t2", "none", true, Some(&log))).is_err();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        assert!(failed, "a required namespace test skipped silently");
        assert_eq!(text, "skipped t1\n", "recorded once, as skipped");
    }
}
