//! The stats plane at subscriber scale (issue 35): a shaper of 50,000 classes (one /32 filter
//! each; `LINKSHARE_SCALE_CLASSES` changes it) in the namespace testbed. Idle, nothing on its
//! datapath grows with the classes, so a ping through it answers in well under 5 ms (median
//! 32 ms at 50,000 classes and 268 ms at 100,000 when the loop walked every class ten times a
//! second); `stat --top`, `--parent`, `--class` pick their rows in the
//! shaper; a full `stat --json` arrives in pages and has every class; `/metrics` stays small
//! by default (per-parent series beyond 10,000 classes), `?top=N` adds the busiest leaves,
//! `?classes=all` streams every class's series, and all pass `promtool check metrics`.
//!
//! Root, namespaces, promtool and ping: skips without them, fails under
//! LINKSHARE_REQUIRE_NETNS=1.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use linkshare_lab::testbed;
use serde_json::Value;

const PORT: u16 = 9479;
const SITES: usize = 25;

/// Kills the shaper before the testbed goes.
struct Shaper(Child);

impl Drop for Shaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An HTB of `n` subscribers under 25 sites, subscriber `i` matched by destination
/// 10.100+i/65536.(i/256%256).(i%256); anything else goes to `dflt`.
fn policy(n: usize) -> String {
    let mut p = String::from(
        "qdisc = \"htb\"\ndefault = \"dflt\"\n[[class]]\nname = \"root\"\nrate = \"10gbit\"\n\
         [[class]]\nname = \"dflt\"\nparent = \"root\"\nrate = \"1mbit\"\nceil = \"10gbit\"\n",
    );
    for s in 0..SITES {
        p += &format!(
            "[[class]]\nname = \"site{s}\"\nparent = \"root\"\nrate = \"{}mbit\"\nceil = \"10gbit\"\n",
            9000 / SITES
        );
    }
    for i in 0..n {
        p += &format!(
            "[[class]]\nname = \"sub{i}\"\nparent = \"site{}\"\nrate = \"10kbit\"\n\
             ceil = \"100mbit\"\nquantum = 1514\n",
            i % SITES
        );
    }
    for i in 0..n {
        p += &format!("[[filter]]\nclass = \"sub{i}\"\ndst = \"{}\"\n", addr(i));
    }
    p
}

fn addr(i: usize) -> String {
    format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256)
}

fn cli(ctl: &std::path::Path, args: &[&str]) -> (Duration, String) {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_linkshare"))
        .args(args)
        .arg("--control")
        .arg(ctl)
        .output()
        .expect("run linkshare");
    let took = t0.elapsed();
    assert!(
        out.status.success(),
        "linkshare {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (took, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn stat(ctl: &std::path::Path, args: &[&str]) -> Value {
    let mut a = vec!["stat", "--json"];
    a.extend_from_slice(args);
    let (_, out) = cli(ctl, &a);
    serde_json::from_str(&out).expect("stat JSON")
}

fn names(st: &Value) -> Vec<String> {
    st["directions"][0]["classes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn get(ns: &str, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
    testbed::in_ns(ns, move || {
        let mut s = TcpStream::connect(("127.0.0.1", PORT)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        s.write_all(req.as_bytes()).expect("send request");
        let mut got = String::new();
        s.read_to_string(&mut got).expect("read response");
        assert!(
            got.starts_with("HTTP/1.1 200"),
            "{}",
            &got[..got.len().min(300)]
        );
        got.split_once("\r\n\r\n")
            .map(|x| x.1.to_string())
            .unwrap_or_default()
    })
    .expect("namespace thread")
}

fn promtool_ok(text: &str) {
    let mut ch = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    ch.stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = ch.wait_with_output().expect("promtool output");
    // Lint remarks (e.g. counters without _total in 0.0.4) print but do not fail; errors do.
    assert!(
        out.status.success() || String::from_utf8_lossy(&out.stderr).contains("lint"),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Round-trip times (ms) of `n` pings from a to c through the shaper, 20 ms apart. ping takes
/// its receive times from the kernel (SO_TIMESTAMP), so a busy machine delaying the test's own
/// threads does not count: what is measured is the shaper's forwarding.
fn ping_ms(bed: &testbed::Testbed, n: usize) -> Vec<f64> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", &bed.ns_a, "ping", "-n", "-i", "0.02", "-W", "2",
        ])
        .args(["-c", &n.to_string(), "10.77.0.2"])
        .output()
        .expect("run ping");
    let mut ms: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split(' ').next()?.parse().ok())
        .collect();
    ms.sort_by(f64::total_cmp);
    ms
}

#[test]
fn fifty_thousand_classes_idle_latency_stat_and_metrics() {
    if !testbed::netns_test_can_run() {
        return;
    }
    if Command::new("promtool").arg("--version").output().is_err() {
        testbed::netns_test_skipped(
            "promtool not found (apt-get install prometheus; scripts/test does it as root)",
        );
        return;
    }
    if Command::new("ping").arg("-V").output().is_err() {
        testbed::netns_test_skipped(
            "ping not found (apt-get install iputils-ping; scripts/test does it as root)",
        );
        return;
    }
    let n: usize = std::env::var("LINKSHARE_SCALE_CLASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let bed = match testbed::Testbed::new() {
        Ok(b) => b,
        Err(e) => {
            testbed::netns_test_skipped(&format!("cannot build the namespace testbed: {e:#}"));
            return;
        }
    };
    let path = bed.dir.join("scale.toml");
    std::fs::write(&path, policy(n)).expect("write policy");
    let ctl = bed.dir.join("ctl.sock");
    let t0 = Instant::now();
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.ns_r,
            env!("CARGO_BIN_EXE_linkshare"),
            "run",
        ])
        .arg("--policy")
        .arg(&path)
        .args(["--dev", &bed.dev_ra, "--dev", &bed.dev_rc, "--io", "packet"])
        .args(["--metrics", &format!("127.0.0.1:{PORT}"), "--control"])
        .arg(&ctl)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the shaper");
    let _shaper = Shaper(child);
    while !ctl.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "shaper did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("{n} classes: control socket after {:?}", t0.elapsed());

    // Idle latency: nothing on the datapath walks the classes (when the loop walked them ten
    // times a second, the median ping at 50,000 classes was 32 ms on the 2-core VM; 0.12 ms
    // without).
    let rtts = ping_ms(&bed, 60);
    assert!(rtts.len() >= 50, "pings lost: {} of 60 back", rtts.len());
    let p50 = rtts[rtts.len() / 2];
    eprintln!(
        "idle ping: p50 {p50} ms p99 {} ms",
        rtts[rtts.len() * 99 / 100]
    );
    assert!(p50 < 5.0, "idle ping p50 {p50} ms");

    // Traffic to two subscribers of site5 (sub5 more than sub30), through the shaper.
    let (a, b) = (addr(5), addr(30));
    let sender = testbed::spawn_in_ns(&bed.ns_a, move || {
        let _ = Command::new("ip")
            .args(["route", "add", "10.100.0.0/16", "via", "10.77.0.2"])
            .status();
        let s = UdpSocket::bind("10.77.0.1:0").expect("bind in a");
        let buf = [0x42u8; 1000];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(1500) {
            for _ in 0..3 {
                let _ = s.send_to(&buf, format!("{a}:9"));
            }
            let _ = s.send_to(&buf, format!("{b}:9"));
            std::thread::sleep(Duration::from_millis(2));
        }
    })
    .expect("sender thread in a");
    std::thread::sleep(Duration::from_millis(700));
    let _ = stat(&ctl, &["--top", "1"]); // a snapshot to measure the rates from
    let _ = sender.join();
    std::thread::sleep(Duration::from_millis(600));

    let (took, _) = cli(&ctl, &["stat", "--top", "20"]);
    eprintln!("stat --top 20: {took:?}");
    let top = stat(&ctl, &["--parent", "site5", "--top", "2"]);
    assert_eq!(names(&top), ["sub5", "sub30"], "{top}");
    assert_eq!(
        top["directions"][0]["class_count"].as_u64(),
        Some((n + SITES + 2) as u64)
    );
    let by_bytes = stat(&ctl, &["--top", "20", "--by", "backlog"]);
    assert_eq!(names(&by_bytes).len(), 20);
    let one = stat(&ctl, &["--class", "sub30"]);
    assert_eq!(names(&one), ["sub30"]);
    assert!(one["directions"][0]["classes"][0]["sent_packets"].as_u64() > Some(0));

    // Every class, in pages of one snapshot.
    let t1 = Instant::now();
    let all = stat(&ctl, &[]);
    eprintln!("stat --json of every class: {:?}", t1.elapsed());
    let all = names(&all);
    assert_eq!(all.len(), n + SITES + 2);
    let distinct: std::collections::HashSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a class twice across pages");

    // /metrics: per-parent series by default at this size, the busiest leaves on request.
    let t2 = Instant::now();
    let m = get(&bed.ns_r, "/metrics");
    eprintln!("/metrics: {} bytes in {:?}", m.len(), t2.elapsed());
    promtool_ok(&m);
    assert!(
        m.contains("linkshare_parent_children{"),
        "no per-parent series"
    );
    assert!(m.contains("class=\"site5\""));
    assert!(
        !m.contains("class=\"sub5\""),
        "leaf series by default beyond 10,000"
    );
    let m = get(&bed.ns_r, "/metrics?top=2");
    promtool_ok(&m);
    assert!(m.contains("class=\"sub5\"") && m.contains("direction=\"forward\""));
    // Every class's series, written piece by piece (no response too large), still valid.
    let t3 = Instant::now();
    let m = get(&bed.ns_r, "/metrics?classes=all");
    eprintln!(
        "/metrics?classes=all: {} bytes in {:?}",
        m.len(),
        t3.elapsed()
    );
    let sent = m
        .lines()
        .filter(|l| l.starts_with("linkshare_class_sent_bytes_total{"))
        .filter(|l| l.contains("direction=\"forward\""))
        .count();
    assert_eq!(sent, n + SITES + 2, "one sent-bytes series per class");
    assert!(
        m.contains("class=\"sub5\",parent=\"site5\""),
        "a subscriber by name and node"
    );
    promtool_ok(&m);
}
