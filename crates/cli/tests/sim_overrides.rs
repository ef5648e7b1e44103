//! `linkshare sim` with `--seed N` and `--set KEY=VALUE`, and a `[sweep]` over a scenario whose
//! policy is a classless qdisc written as an inline table (issue 38).

use std::path::PathBuf;
use std::process::{Command, Output};

fn linkshare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linkshare"))
        .args(args)
        .output()
        .expect("run linkshare")
}

const SCENARIO: &str = r#"name = "ovr"
duration = "500ms"
[link]
rate = "10mbit"
[policy]
qdisc = { type = "pfifo", limit = 64 }
[[flow]]
name = "in"
kind = "udp"
rate = "12mbit"
size = 1000
[[flow]]
name = "t"
kind = "tcp"
"#;

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("linkshare-sim-ovr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn summary(args: &[&str]) -> serde_json::Value {
    let out = linkshare(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("summary.json on stdout")
}

#[test]
fn seed_and_set_change_the_run() {
    let p = scratch("ovr.toml", SCENARIO);
    let p = p.to_str().unwrap();
    let base = summary(&["sim", p, "--json"]);
    assert_eq!(base["seed"], 1);
    let s3 = summary(&["sim", p, "--json", "--seed", "3"]);
    assert_eq!(s3["seed"], 3);
    // A seed other than 1 jitters starts and ACKs: the TCP flow's run differs.
    assert_ne!(base["flows"]["t"], s3["flows"]["t"]);
    assert_eq!(s3, summary(&["sim", p, "--json", "--seed", "3"]));
    // --set edits a key as a sweep axis does.
    let small = summary(&["sim", p, "--json", "--set", "flow.in.size=500"]);
    let sent = |s: &serde_json::Value| s["flows"]["in"]["packets_sent"].as_u64().unwrap();
    assert!(
        sent(&small) > sent(&base) * 19 / 10,
        "{} vs {}",
        sent(&small),
        sent(&base)
    );
    let tight = summary(&["sim", p, "--json", "--set", "policy.qdisc.limit=4"]);
    // A 4-packet queue holds the UDP flow's one-way delay far below the 64-packet one's.
    let owd = |s: &serde_json::Value| s["flows"]["in"]["owd_ms"]["max"].as_f64().unwrap();
    assert!(
        owd(&tight) * 4.0 < owd(&base),
        "{} vs {}",
        owd(&tight),
        owd(&base)
    );
}

#[test]
fn bad_overrides_name_the_edit() {
    let p = scratch("bad.toml", SCENARIO);
    let p = p.to_str().unwrap();
    let out = linkshare(&["sim", p, "--set", "flow.nope.size=64"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no [[flow]] is named `nope`"), "{err}");
    let out = linkshare(&["sim", p, "--set", "flow.in.size=99999"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("with flow.in.size = 99999"), "{err}");
    let out = linkshare(&["sim", p, "--set", "no-equals-sign"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not `key=value`"));
}

#[test]
fn sweep_over_an_inline_qdisc_writes_every_figure() {
    let text = format!(
        "{SCENARIO}[[sweep.axis]]\nkey = \"seed\"\nvalues = [1, 2]\n\
         [[sweep.axis]]\nkey = \"policy.qdisc.limit\"\nvalues = [8, 64]\n"
    );
    let p = scratch("sweep.toml", &text);
    let out_dir = p.with_file_name("sweep-out");
    let out = linkshare(&[
        "sim",
        p.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(out_dir.join("sweep.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for col in [
        "seed,limit,kind,name",
        "loss",
        "retransmits",
        "rtt_p99_ms",
        "owd_p99_ms",
    ] {
        assert!(header.contains(col), "{header}");
    }
    // 4 points × (1 class + 2 flows).
    assert_eq!(csv.lines().count(), 1 + 4 * 3, "{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("sweep.json")).unwrap())
            .unwrap();
    // Axis values keep their type.
    assert_eq!(json["axes"][1]["values"][0], 8);
    assert_eq!(json["points"][3]["values"][1], 64);
    // `--point` runs one point of it.
    let one = summary(&["sim", p.to_str().unwrap(), "--point", "3", "--json"]);
    assert_eq!(one["seed"], 2);
}

#[test]
fn seeds_give_means_and_confidence_intervals() {
    let p = scratch("seeds.toml", SCENARIO);
    let out_dir = p.with_file_name("seeds-out");
    let out = linkshare(&[
        "sim",
        p.to_str().unwrap(),
        "--seeds",
        "4",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("mean over 4 seeds"), "{stdout}");
    // Four runs, one per seed, in sweep.csv; their intervals in sweep-ci.csv.
    let sweep = std::fs::read_to_string(out_dir.join("sweep.csv")).unwrap();
    let header: Vec<&str> = sweep.lines().next().unwrap().split(',').collect();
    assert_eq!(header[..2], ["point", "seed"]);
    let rate_col = header.iter().position(|c| *c == "rate_bps").unwrap();
    let t_rates: Vec<f64> = sweep
        .lines()
        .filter(|l| l.contains(",flow,t,"))
        .map(|l| l.split(',').nth(rate_col).unwrap().parse().unwrap())
        .collect();
    assert_eq!(t_rates.len(), 4);
    let ci = std::fs::read_to_string(out_dir.join("sweep-ci.csv")).unwrap();
    assert!(
        ci.starts_with("kind,name,figure,n,mean,sd,ci95,low,high\n"),
        "{ci}"
    );
    let row: Vec<&str> = ci
        .lines()
        .find(|l| l.starts_with("flow,t,rate_bps,"))
        .expect("the TCP flow's rate")
        .split(',')
        .collect();
    assert_eq!(row[3], "4");
    let mean: f64 = row[4].parse().unwrap();
    assert!(
        (mean - t_rates.iter().sum::<f64>() / 4.0).abs() < 1e-3,
        "{row:?} {t_rates:?}"
    );
    let half: f64 = row[6].parse().unwrap();
    assert!(
        half > 0.0,
        "seeds other than 1 jitter TCP: the runs differ ({t_rates:?})"
    );

    // --seeds and --seed exclude each other; --seeds needs at least 2.
    let out = linkshare(&["sim", p.to_str().unwrap(), "--seeds", "3", "--seed", "2"]);
    assert!(!out.status.success());
    let out = linkshare(&["sim", p.to_str().unwrap(), "--seeds", "1"]);
    assert!(!out.status.success());
}
