//! `linkshare bench sched --workers N` (issue 14 §4): the sharded HTB on N threads against one
//! worker, in one JSON object; bad uses are refused with a message.

use std::process::Command;

use serde_json::Value;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_linkshare")
}

#[test]
fn two_workers_report_the_aggregate_and_the_ratio() {
    let out = Command::new(exe())
        .args([
            "bench",
            "sched",
            "--workers",
            "2",
            "--leaves",
            "1024",
            "--packets",
            "200000",
            "--warmup",
            "0",
            "--json",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run linkshare: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["subports"], 2, "at least one subport per worker: {v}");
    let (one, two) = (&v["one_worker"], &v["workers"]);
    assert_eq!(one["workers"], 1);
    assert_eq!(two["workers"], 2);
    for r in [one, two] {
        // Every packet asked for was dequeued (each worker runs its half, rounded up).
        assert!(r["packets"].as_u64().unwrap_or(0) >= 200_000, "{r}");
        assert!(r["mpps"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
        assert_eq!(r["refused"], 0, "{r}");
    }
    let per = two["per_worker_mpps"].as_array().map_or(0, |a| a.len());
    assert_eq!(per, 2, "{two}");
    let ratio = v["ratio"].as_f64().unwrap_or(0.0);
    let want = two["mpps"].as_f64().unwrap_or(0.0) / one["mpps"].as_f64().unwrap_or(1.0);
    assert!((ratio - want).abs() < 1e-9, "{ratio} vs {want}");
}

#[test]
fn workers_are_refused_where_they_cannot_apply() {
    for (args, msg) in [
        (vec!["--workers", "2", "--qdisc", "cbq"], "HTB only"),
        (vec!["--workers", "0"], "--workers must be"),
        (vec!["--workers", "2", "--levels", "2"], "--levels 3"),
    ] {
        let out = Command::new(exe())
            .args(["bench", "sched", "--leaves", "64", "--packets", "1000"])
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run linkshare: {e}"));
        assert_ne!(out.status.code(), Some(0), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}
