//! `linkshare check` from the outside: the contract example of issue 2 is accepted, and each
//! broken variant the issue lists gets one precise `file:line:col` error with a fix, exit code 1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

const EXAMPLE: &str = include_str!("../../../policies/example.toml");

fn linkshare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linkshare"))
        .args(args)
        .output()
        .expect("run linkshare")
}

/// Write `text` to a scratch file named `name` and run `linkshare check` on it.
fn check(name: &str, text: &str) -> (i32, String, String, PathBuf) {
    let dir = std::env::temp_dir().join(format!("linkshare-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let out = linkshare(&["check", path.to_str().unwrap()]);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        path,
    )
}

/// Replace exactly one occurrence of `from` in the example (the variant must really differ).
fn variant(from: &str, to: &str) -> String {
    assert_eq!(EXAMPLE.matches(from).count(), 1, "`{from}` is not unique");
    EXAMPLE.replacen(from, to, 1)
}

/// The policy is rejected with exactly one error at `line:col`, whose message and help contain
/// the given fragments.
fn assert_one_error(name: &str, text: &str, line: usize, col: usize, message: &str, help: &str) {
    let (code, stdout, stderr, path) = check(name, text);
    assert_eq!(code, 1, "exit code for {name}\n{stderr}");
    assert!(
        stdout.is_empty(),
        "nothing on stdout for an invalid policy: {stdout}"
    );
    let located = format!("{}:{line}:{col}: error: ", path.display());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains(": error: ")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].starts_with(&located),
        "expected `{located}` in\n{stderr}"
    );
    assert!(
        errors[0].contains(message),
        "expected `{message}` in\n{stderr}"
    );
    let help_line = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("help: "))
        .unwrap_or_else(|| panic!("no help line in\n{stderr}"));
    assert!(
        help_line.contains(help),
        "expected `{help}` in\n{help_line}"
    );
    assert!(stderr.contains("policy is invalid: 1 error"), "{stderr}");
}

#[test]
fn the_contract_example_is_accepted_and_its_tree_printed() {
    let (code, stdout, stderr, _) = check("example.toml", EXAMPLE);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("htb  default=bulk"), "{stdout}");
    for want in [
        "root            rate 10mbit",
        "├─ interactive  rate 2mbit   ceil 10mbit",
        "└─ bulk         rate 8mbit   ceil 10mbit  burst 15k    cburst 3k",
        "dscp ef",
        "udp dst 10.0.0.0/8 dport 5000-5010  -> interactive",
        "-> bulk (default)",
    ] {
        assert!(stdout.contains(want), "missing `{want}` in\n{stdout}");
    }
}

/// `check` prints the policy's worst-case queue memory as the shaper counts it: the example's
/// two leaves of 1000 packets hold 2000 frames, each a whole receive buffer.
#[test]
fn check_prints_the_worst_case_queue_memory() {
    use linkshare_router::membound::{per_frame, FRAME_BUFFER};
    let (code, stdout, stderr, _) = check("example.toml", EXAMPLE);
    assert_eq!(code, 0, "{stderr}");
    let want = format!("2000 frames of {} bytes", per_frame(FRAME_BUFFER));
    let line = stdout
        .lines()
        .find(|l| l.starts_with("worst-case queue memory: "))
        .unwrap_or_else(|| panic!("no worst-case line in\n{stdout}"));
    assert!(line.contains(&want), "{line}");
    assert!(line.contains("--queue-memory"), "{line}");
}

#[test]
fn children_promised_more_than_the_parent() {
    assert_one_error(
        "children.toml",
        &variant("rate = \"8mbit\"", "rate = \"9mbit\""),
        11,
        8,
        "children's guaranteed rates add up to 11mbit (interactive 2mbit + bulk 9mbit), above its rate 10mbit",
        "lower the children's rates by 1mbit in total",
    );
}

#[test]
fn ceil_below_rate() {
    let text = variant(
        "rate = \"2mbit\"\nceil = \"10mbit\"",
        "rate = \"2mbit\"\nceil = \"1mbit\"",
    );
    assert_one_error(
        "ceil.toml",
        &text,
        18,
        8,
        "class `interactive`: ceil 1mbit is below rate 2mbit",
        "raise ceil to at least 2mbit",
    );
}

#[test]
fn unknown_parent() {
    let text = variant(
        "name = \"interactive\"\nparent = \"root\"",
        "name = \"interactive\"\nparent = \"rot\"",
    );
    assert_one_error(
        "parent.toml",
        &text,
        16,
        10,
        "class `interactive`: unknown parent `rot`",
        "did you mean \"root\"?",
    );
}

#[test]
fn cyclic_parent() {
    let text = variant(
        "name = \"root\"\nrate",
        "name = \"root\"\nparent = \"bulk\"\nrate",
    );
    assert_one_error(
        "cycle.toml",
        &text,
        11,
        10,
        "parent chain loops back to itself: root -> bulk -> root",
        "give one class in the loop another parent",
    );
}

#[test]
fn burst_below_one_mtu() {
    assert_one_error(
        "burst.toml",
        &variant("burst = \"15k\"", "burst = \"1k\""),
        28,
        9,
        "class `bulk`: burst 1k is smaller than one MTU (1500 bytes)",
        "set burst to at least \"1500b\"",
    );
}

#[test]
fn unknown_dscp_name() {
    assert_one_error(
        "dscp.toml",
        &variant("dscp = \"ef\"", "dscp = \"af51\""),
        38,
        8,
        "unknown DSCP name \"af51\"",
        "known names: ef, af11..af43, cs0..cs7, be",
    );
}

#[test]
fn filter_to_a_class_with_children() {
    assert_one_error(
        "nonleaf.toml",
        &variant("class = \"interactive\"\ndscp", "class = \"root\"\ndscp"),
        37,
        9,
        "class `root` has children, so it is not a leaf",
        "send the filter to one of its leaves instead: interactive, bulk",
    );
}

#[test]
fn default_class_that_does_not_exist() {
    assert_one_error(
        "default.toml",
        &variant("default = \"bulk\"", "default = \"bluk\""),
        6,
        11,
        "default class `bluk` does not exist",
        "did you mean \"bulk\"?",
    );
}

#[test]
fn unit_typo() {
    assert_one_error(
        "unit.toml",
        &variant("rate = \"2mbit\"", "rate = \"2mbitt\""),
        17,
        8,
        "`rate`: \"2mbitt\" has an unknown rate unit `mbitt`",
        "did you mean \"2mbit\"?",
    );
}

#[test]
fn every_error_is_reported_not_just_the_first() {
    let text = variant("rate = \"2mbit\"", "rate = \"2mbitt\"").replacen(
        "default = \"bulk\"",
        "default = \"bluk\"",
        1,
    );
    let (code, _, stderr, _) = check("two.toml", &text);
    assert_eq!(code, 1);
    assert!(stderr.contains("policy is invalid: 2 errors"), "{stderr}");
}

#[test]
fn json_output_describes_the_tree() {
    let (_, _, _, path) = check("json.toml", EXAMPLE);
    let out = linkshare(&["check", "--json", path.to_str().unwrap()]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let classes = v["classes"].as_array().expect("classes array");
    assert_eq!(classes.len(), 3);
    let bulk = classes
        .iter()
        .find(|c| c["name"] == "bulk")
        .expect("bulk class");
    assert_eq!(bulk["ceil_bps"].as_f64(), Some(10e6));

    // An invalid policy: errors in the JSON, exit code 1.
    let (_, _, _, bad) = check(
        "json-bad.toml",
        &variant("dscp = \"ef\"", "dscp = \"af51\""),
    );
    let out = linkshare(&["check", "--json", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(1), "{v}");
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    // Exit code 2: the file cannot be read (1 is kept for an invalid policy).
    let out = linkshare(&["check", "/nonexistent/policy.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/policy.toml"), "{stderr}");
}

#[test]
fn every_shipped_policy_checks() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) != Some("toml") {
            continue;
        }
        let out = linkshare(&["check", path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        n += 1;
    }
    assert!(n >= 3, "only {n} policies found");
}

#[test]
fn help_documents_every_command_and_version_prints() {
    let out = linkshare(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in ["sim", "check", "run", "stat", "class", "reload", "seeds"] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(cmd)),
            "`{cmd}` missing from --help:\n{help}"
        );
    }
    let out = linkshare(&["--version"]);
    assert!(out.status.success());
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(v.starts_with("linkshare "), "{v}");
    assert!(v.contains(env!("CARGO_PKG_VERSION")), "{v}");
}

/// The CBQ contract example of issue 4: `check --json` shows the root options as written and
/// each class's estimator parameters as the scheduler will use them, derived when not given.
#[test]
fn json_shows_cbq_options_and_derived_parameters() {
    let policy = r#"
qdisc = "cbq"
default = "video"
scheduler = "prr"
guideline = "formal"
efficient = false
altq_compat = false
undertime_clock = "actual"
offtime_unit = "bytes"

[[class]]
name = "root"
rate = "1.5mbit"

[[class]]
name = "agencyA"
parent = "root"
rate = "1050kbit"
borrow = true

[[class]]
name = "video"
parent = "agencyA"
rate = "450kbit"
prio = 1
borrow = true
maxburst = 16
minburst = 2
avgpkt = 1000
leaf = "pfifo"
"#;
    let (code, _, stderr, path) = check("cbq.toml", policy);
    assert_eq!(code, 0, "{stderr}");
    let out = linkshare(&["check", "--json", path.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["qdisc"], "cbq");
    assert_eq!(v["cbq"]["scheduler"], "prr");
    assert_eq!(v["cbq"]["guideline"], "formal");
    assert_eq!(v["cbq"]["undertime_clock"], "actual");
    assert_eq!(v["cbq"]["offtime_unit"], "bytes");
    let video = v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "video")
        .expect("class video");
    let k = &video["cbq"];
    assert_eq!(k["maxburst"], 16);
    assert_eq!(k["minburst"], 2);
    assert_eq!(k["avgpkt_bytes"], 1000);
    // By hand, with g = 31/32: ptime = 1000 B at 1.5 Mbit/s = 5.333 ms; cptime = 1000 B at
    // 450 kbit/s − ptime = 12.444 ms; maxidle = cptime·((32/31)^16 − 1) = 8.238 ms;
    // offtime = cptime·(1 + 32·(32/31 − 1)) = 25.290 ms; minidle = 1500 B at 450 kbit/s = 26.667 ms.
    let near = |key: &str, want_ns: f64| {
        let got = k[key].as_f64().unwrap_or_else(|| panic!("{key} in {k}"));
        assert!(
            (got - want_ns).abs() <= want_ns * 1e-3,
            "{key}: {got} ns, by hand {want_ns} ns"
        );
    };
    near("maxidle_ns", 8.2378e6);
    near("offtime_ns", 25.2903e6);
    near("minidle_ns", 26.6667e6);
    // An HTB policy has no CBQ section.
    let (_, _, _, htb) = check("htb-json.toml", EXAMPLE);
    let out = linkshare(&["check", "--json", htb.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert!(
        v["cbq"].is_null() && v["classes"][0]["cbq"].is_null(),
        "{v}"
    );
}

/// `check --json` gives the `offtime` the scheduler runs with: where ALTQ's formula runs away
/// (a large `minburst`), its first-order term by default, ALTQ's formula under `altq_compat`.
#[test]
fn json_shows_the_offtime_in_effect_for_a_large_minburst() {
    let policy = |compat: bool| {
        format!(
            "qdisc = \"cbq\"\ndefault = \"video\"\naltq_compat = {compat}\n\
             [[class]]\nname = \"root\"\nrate = \"1.5mbit\"\n\
             [[class]]\nname = \"video\"\nparent = \"root\"\nrate = \"450kbit\"\n\
             maxburst = 100\nminburst = 99\navgpkt = 1000\n"
        )
    };
    // By hand: cptime = 1000 B at 450 kbit/s − at 1.5 Mbit/s = 12.444 ms. First-order term:
    // cptime·(1 + 98·32/31) = 1271.34 ms; ALTQ's: cptime·(1 + 32·((32/31)^98 − 1)) = 8555.04 ms,
    // more than twice the first.
    for (compat, want_ms) in [(false, 1271.34), (true, 8555.04)] {
        let (code, _, stderr, path) = check(&format!("offtime-{compat}.toml"), &policy(compat));
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stderr.contains("minburst 99"),
            "the runaway is warned about: {stderr}"
        );
        let out = linkshare(&["check", "--json", path.to_str().unwrap_or_default()]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        let video = v["classes"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == "video"))
            .unwrap_or_else(|| panic!("class video in {v}"));
        let got = video["cbq"]["offtime_ns"].as_f64().unwrap_or(0.0) / 1e6;
        assert!(
            (got - want_ms).abs() <= want_ms * 1e-3,
            "altq_compat = {compat}: offtime {got} ms, by hand {want_ms} ms"
        );
    }
}

/// `export tc --json` (issue 15 §4): one object with the script and each class's tc handles, the
/// same ones `linkshare stat` shows.
#[test]
fn export_tc_json_names_every_class_handle() {
    let dir = common::scratch("export-json");
    let p = common::write(
        &dir,
        "p.toml",
        "qdisc = \"htb\"\ndefault = \"b\"\n[[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
         [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"2mbit\"\n\
         [[class]]\nname = \"b\"\nparent = \"root\"\nrate = \"8mbit\"\n",
    );
    let (code, out, err) = common::linkshare(&[
        "export",
        "tc",
        p.to_str().unwrap_or_default(),
        "--dev",
        "eth1",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["dev"], "eth1");
    assert!(
        v["script"]
            .as_str()
            .is_some_and(|s| s.contains("classid 1:3 htb rate 8000000bit")),
        "{v}"
    );
    let c = &v["classes"];
    assert_eq!(
        (c[0]["classid"].as_str(), c[0]["handle"].as_str()),
        (Some("1:1"), None),
        "{v}"
    );
    assert_eq!(
        (
            c[2]["name"].as_str(),
            c[2]["classid"].as_str(),
            c[2]["handle"].as_str()
        ),
        (Some("b"), Some("1:3"), Some("4:")),
        "{v}"
    );
}
