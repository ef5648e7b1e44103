//! The documented exit codes (crates/cli/src/exit.rs, docs/router.md): 0 ok, 1 rejected input,
//! 2 runtime error — checked on the built binary for every subcommand that can tell them apart
//! without a running shaper or namespaces.

use std::path::PathBuf;

mod common;

/// `linkshare ARGS`: the exit code (`None` if killed by a signal) and stdout then stderr.
fn linkshare(args: &[&str]) -> (Option<i32>, String) {
    let (code, out, err) = common::linkshare(args);
    ((code >= 0).then_some(code), format!("{out}{err}"))
}

fn scratch() -> PathBuf {
    common::scratch("exit")
}

const VALID: &str =
    "qdisc = \"htb\"\ndefault = \"root\"\n[[class]]\nname = \"root\"\nrate = \"1mbit\"\n";
const INVALID: &str =
    "qdisc = \"htb\"\ndefault = \"root\"\n[[class]]\nname = \"root\"\nrate = \"fast\"\n";
const CBQ: &str =
    "qdisc = \"cbq\"\ndefault = \"a\"\n[[class]]\nname = \"root\"\nrate = \"1mbit\"\n\
[[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"1mbit\"\n";

#[test]
fn every_subcommand_follows_the_documented_exit_codes() {
    let d = scratch();
    let valid = d.join("valid.toml");
    let bad = d.join("invalid.toml");
    let cbq = d.join("cbq.toml");
    std::fs::write(&valid, VALID).expect("write");
    std::fs::write(&bad, INVALID).expect("write");
    std::fs::write(&cbq, CBQ).expect("write");
    let (v, b, c) = (
        valid.to_str().expect("utf-8"),
        bad.to_str().expect("utf-8"),
        cbq.to_str().expect("utf-8"),
    );
    let locks = d.join("locks");
    let locks = locks.to_str().expect("utf-8");
    let ctl = d.join("none.sock");
    let ctl = ctl.to_str().expect("utf-8");
    let missing = "/nonexistent/policy.toml";
    // A short scenario whose expectation holds, and the same with one that cannot.
    let expect = |max: &str| {
        format!(
            "duration = \"1s\"\n[link]\nrate = \"1mbit\"\n[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"100kbit\"\n[[expect]]\nflow = \"u\"\nmetric = \"owd_p99\"\nmax = \"{max}\"\n"
        )
    };
    let met = d.join("met.toml");
    let unmet = d.join("unmet.toml");
    std::fs::write(&met, expect("1s")).expect("write");
    std::fs::write(&unmet, expect("1us")).expect("write");
    let out = d.join("out");
    let (met, unmet, out) = (
        met.to_str().expect("utf-8"),
        unmet.to_str().expect("utf-8"),
        out.to_str().expect("utf-8"),
    );
    let cases: Vec<(Vec<&str>, i32)> = vec![
        // Usage.
        (vec!["--help"], 0),
        (vec!["frobnicate"], 1),
        (vec!["check"], 1),
        (vec!["check", v, "--no-such-flag"], 1),
        // check / export: valid, invalid, unreadable.
        (vec!["check", v], 0),
        (vec!["check", b], 1),
        (vec!["check", missing], 2),
        (vec!["export", "tc", v, "--dev", "eth0"], 0),
        (vec!["export", "tc", b, "--dev", "eth0"], 1),
        (vec!["export", "tc", c, "--dev", "eth0"], 1),
        (vec!["export", "tc", missing, "--dev", "eth0"], 2),
        // run: rejected before anything is opened, then runtime errors.
        (
            vec!["run", "--policy", v, "--dev", "x0", "--lock-dir", locks],
            1,
        ),
        (
            vec![
                "run",
                "--policy",
                v,
                "--dev",
                "x0",
                "--dev",
                "x0",
                "--lock-dir",
                locks,
            ],
            1,
        ),
        (
            vec![
                "run",
                "--policy",
                b,
                "--dev",
                "x0",
                "--dev",
                "x1",
                "--lock-dir",
                locks,
            ],
            1,
        ),
        (
            vec![
                "run",
                "--policy",
                v,
                "--dev",
                "x0",
                "--dev",
                "x1",
                "--emulate",
                "bogus=1",
                "--lock-dir",
                locks,
            ],
            1,
        ),
        // An invalid or repeated --path-delay is a rejected option (1), like --emulate: the
        // service unit does not restart on 1 (dist/systemd/linkshare@.service).
        (
            vec![
                "run",
                "--policy",
                v,
                "--dev",
                "x0",
                "--dev",
                "x1",
                "--path-delay",
                "10.0.0.1=soon",
                "--lock-dir",
                locks,
            ],
            1,
        ),
        (
            vec![
                "run",
                "--policy",
                v,
                "--dev",
                "x0",
                "--dev",
                "x1",
                "--path-delay",
                "10.0.0.1=5ms",
                "--path-delay",
                "10.0.0.1=6ms",
                "--lock-dir",
                locks,
            ],
            1,
        ),
        // --rx-split direction gives each of two workers an interface: other counts are a
        // rejected option, before anything is opened.
        (
            vec![
                "run",
                "--policy",
                v,
                "--dev",
                "x0",
                "--dev",
                "x1",
                "--rx-split",
                "direction",
                "--lock-dir",
                locks,
            ],
            1,
        ),
        (
            vec![
                "run",
                "--policy",
                v,
                "--dev",
                "x0",
                "--dev",
                "x1",
                "--workers",
                "3",
                "--rx-split",
                "direction",
                "--lock-dir",
                locks,
            ],
            1,
        ),
        (
            vec![
                "run",
                "--policy",
                v,
                "--dev",
                "x0",
                "--dev",
                "x1",
                "--rx-split",
                "sideways",
            ],
            1,
        ),
        // Man pages and completions (hidden, for packagers): ok, or a rejected shell.
        (vec!["completions", "bash"], 0),
        (vec!["completions", "tcsh"], 1),
        (
            vec![
                "run",
                "--policy",
                missing,
                "--dev",
                "x0",
                "--dev",
                "x1",
                "--lock-dir",
                locks,
            ],
            2,
        ),
        (
            vec![
                "run",
                "--policy",
                v,
                "--dev",
                "nonexist0",
                "--dev",
                "nonexist1",
                "--lock-dir",
                locks,
                "--control",
                ctl,
            ],
            2,
        ),
        // The control commands: an unknown action is rejected, no shaper is a runtime error.
        (vec!["class", "frob", "a", "--control", ctl], 1),
        (
            vec!["class", "change", "a", "--rate", "1mbit", "--control", ctl],
            2,
        ),
        (vec!["stat", "--control", ctl], 2),
        (vec!["reload", v, "--control", ctl], 2),
        (vec!["reload", missing, "--control", ctl], 2),
        // sim: unreadable scenario.
        (vec!["sim", "/nonexistent/scenario.toml"], 2),
        // sim: an [[expect]] met, and one not met (the report is written all the same).
        (vec!["sim", met, "--out", out], 0),
        (vec!["sim", unmet, "--out", out], 3),
    ];
    let mut wrong = Vec::new();
    for (args, want) in &cases {
        let (code, text) = linkshare(args);
        if code != Some(*want) {
            wrong.push(format!(
                "linkshare {}: exit {code:?}, documented {want}\n{}",
                args.join(" "),
                text.lines().take(3).collect::<Vec<_>>().join("\n")
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
