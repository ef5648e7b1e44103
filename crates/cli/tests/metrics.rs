//! `linkshare run --metrics` on real interfaces (the namespace testbed of router/: a, r, c
//! joined by veths, the shaper in r): /metrics is scraped over loopback inside r while UDP flows
//! from a to c, parsed by a real parser (`promtool check metrics`, Debian's `prometheus`
//! package; scripts/test installs it as root), and a class's sent-bytes counter must grow
//! between two scrapes. Skips like the other namespace tests, and fails instead under
//! LINKSHARE_REQUIRE_NETNS=1 (also when promtool is missing).

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The namespace testbed of `linkshare lab` (crate linkshare-lab).
use linkshare_lab::testbed;

const PORT: u16 = 9469;
const WEB_PORT: u16 = 9470;

const POLICY: &str = r#"
qdisc = "htb"
default = "bulk"
[[class]]
name = "root"
rate = "4mbit"
[[class]]
name = "bulk"
parent = "root"
rate = "2mbit"
ceil = "4mbit"
"#;

/// Kills the shaper before the testbed (and its namespaces) goes.
struct Shaper(Child);

impl Drop for Shaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `linkshare run` in r with `policy`, the metrics and dashboard endpoints and `extra`;
/// wait for its control socket.
fn start(bed: &testbed::Testbed, policy: &str, extra: &[&str]) -> Shaper {
    let path = bed.dir.join("p.toml");
    std::fs::write(&path, policy).expect("write policy");
    let ctl = bed.dir.join("ctl.sock");
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.ns_r,
            env!("CARGO_BIN_EXE_linkshare"),
            "run",
            "--policy",
        ])
        .arg(&path)
        .args(["--dev", &bed.dev_ra, "--dev", &bed.dev_rc, "--control"])
        .arg(&ctl)
        .args(["--metrics", &format!("127.0.0.1:{PORT}")])
        .args(["--web", &format!("127.0.0.1:{WEB_PORT}")])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the shaper");
    let shaper = Shaper(child);
    let t0 = Instant::now();
    while !ctl.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "shaper did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    shaper
}

/// GET `path` from the shaper's metrics port inside namespace `ns`; (head, body).
fn get(ns: &str, path: &str, accept: &str) -> (String, String) {
    get_from(ns, PORT, path, accept)
}

fn get_from(ns: &str, port: u16, path: &str, accept: &str) -> (String, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n");
    testbed::in_ns(ns, move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s.write_all(req.as_bytes()).expect("send request");
        let mut got = String::new();
        s.read_to_string(&mut got).expect("read response");
        let (h, b) = got.split_once("\r\n\r\n").unwrap_or((&got, ""));
        (h.to_string(), b.to_string())
    })
    .expect("namespace thread")
}

/// The value of the sample of `name` whose labels contain `has`.
fn value(text: &str, name: &str, has: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(has))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Headless Chromium in namespace `ns` loads the dashboard; its DOM after the page's scripts
/// ran, or a screenshot into `shot`.
fn chromium(ns: &str, shot: Option<&std::path::Path>) -> String {
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        ns,
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
    ]);
    match shot {
        Some(p) => {
            cmd.arg(format!("--screenshot={}", p.display()));
            cmd.arg("--window-size=1000,500");
        }
        None => {
            cmd.arg("--dump-dom");
        }
    }
    let out = cmd
        .arg(format!("http://127.0.0.1:{WEB_PORT}/"))
        .stderr(Stdio::null())
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `data-live-bps` of class `name`'s row in a dumped DOM.
fn dom_live_bps(dom: &str, name: &str) -> Option<f64> {
    let at = dom.find(&format!("data-class=\"{name}\""))?;
    let rest = &dom[at..];
    let v = rest.split("data-live-bps=\"").nth(1)?.split('"').next()?;
    v.parse().ok()
}

fn promtool(text: &str) -> (bool, String) {
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
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), msg)
}

#[test]
fn metrics_scraped_during_traffic_parse_and_grow() {
    if !testbed::netns_test_can_run() {
        return;
    }
    if Command::new("promtool").arg("--version").output().is_err() {
        testbed::netns_test_skipped(
            "promtool not found (apt-get install prometheus; scripts/test does it as root)",
        );
        return;
    }
    if Command::new("chromium").arg("--version").output().is_err() {
        testbed::netns_test_skipped(
            "chromium not found (apt-get install chromium; scripts/test does it as root)",
        );
        return;
    }
    let bed = match testbed::Testbed::new() {
        Ok(b) => b,
        Err(e) => {
            testbed::netns_test_skipped(&format!("cannot build the namespace testbed: {e:#}"));
            return;
        }
    };
    let _shaper = start(&bed, POLICY, &[]);
    let (policy, ctl) = (bed.dir.join("p.toml"), bed.dir.join("ctl.sock"));
    // UDP at ~8 Mbit/s from a to c for 5 s (room for a slow Chromium start), twice the ceiling,
    // so departures are paced (c need not listen: the frames cross the shaper).
    let sender = testbed::spawn_in_ns(&bed.ns_a, || {
        let s = UdpSocket::bind("10.77.0.1:0").expect("bind in a");
        let buf = [0x42u8; 1000];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            let _ = s.send_to(&buf, "10.77.0.2:9");
            std::thread::sleep(Duration::from_micros(1000));
        }
    })
    .expect("sender thread");
    // The dashboard's event stream, read for 2.8 s from the start of the traffic.
    let events = testbed::spawn_in_ns(&bed.ns_r, || {
        let mut s = TcpStream::connect(("127.0.0.1", WEB_PORT)).expect("connect to --web");
        s.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("send request");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let mut got = Vec::new();
        let t0 = Instant::now();
        let mut b = [0u8; 65536];
        while t0.elapsed() < Duration::from_millis(2800) {
            match s.read(&mut b) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(_) => {}
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    })
    .expect("events thread");
    // The page in headless Chromium during the traffic (it takes about a second to start).
    let ns_r = bed.ns_r.clone();
    let browser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        chromium(&ns_r, None)
    });
    std::thread::sleep(Duration::from_millis(800));
    let (head1, om1) = get(
        &bed.ns_r,
        "/metrics",
        "application/openmetrics-text; version=1.0.0",
    );
    std::thread::sleep(Duration::from_millis(1200));
    let (head2, text2) = get(&bed.ns_r, "/metrics", "text/plain");
    let _ = sender.join();

    assert!(head1.starts_with("HTTP/1.1 200"), "{head1}");
    assert!(
        head1.contains("application/openmetrics-text; version=1.0.0"),
        "{head1}"
    );
    assert!(om1.ends_with("# EOF\n"), "{om1}");
    assert!(head2.contains("text/plain; version=0.0.4"), "{head2}");
    let (ok, msg) = promtool(&text2);
    assert!(
        ok,
        "promtool check metrics refused the text format:\n{msg}\n{text2}"
    );
    eprintln!("promtool: {}", msg.trim());

    let lab = "class=\"bulk\"";
    let a = value(&om1, "linkshare_class_sent_bytes_total", lab).expect("bulk in scrape 1");
    let b = value(&text2, "linkshare_class_sent_bytes_total", lab).expect("bulk in scrape 2");
    eprintln!("bulk sent bytes: {a} then {b}");
    assert!(a > 0.0 && b > a, "sent bytes did not grow: {a} then {b}");
    let rx = value(
        &text2,
        "linkshare_port_rx_packets_total",
        &format!("dev=\"{}\"", bed.dev_ra),
    );
    assert!(rx.is_some_and(|v| v > 0.0), "{text2}");
    let n = value(&text2, "linkshare_pacing_lateness_seconds_count", "").or_else(|| {
        text2
            .lines()
            .find(|l| l.starts_with("linkshare_pacing_lateness_seconds_count "))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    });
    assert!(n.is_some_and(|v| v > 0.0), "{text2}");
    // Over its ceiling, the class is held back: overlimits and a backlog show it.
    let over = value(&text2, "linkshare_class_overlimits_total", lab);
    assert!(over.is_some_and(|v| v > 0.0), "{text2}");

    // The dashboard: the page, and snapshots every second in which bulk's rate moves.
    let (hp, page) = get_from(&bed.ns_r, WEB_PORT, "/", "*/*");
    assert!(
        hp.starts_with("HTTP/1.1 200") && hp.contains("text/html"),
        "{hp}"
    );
    assert!(page.contains("EventSource(\"/events\")"), "{page}");
    let stream = events.join().expect("events thread");
    assert!(stream.starts_with("HTTP/1.1 200"), "{stream}");
    assert!(
        stream.contains("Content-Type: text/event-stream"),
        "{stream}"
    );
    let rates: Vec<f64> = stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|j| serde_json::from_str::<serde_json::Value>(j).expect("event JSON"))
        .filter_map(|v| {
            v["directions"][0]["classes"]
                .as_array()?
                .iter()
                .find(|c| c["name"] == "bulk")?["live_rate_bps"]
                .as_f64()
        })
        .collect();
    eprintln!("bulk live rate in the events: {rates:?}");
    let first = stream
        .lines()
        .find(|l| l.starts_with("data: "))
        .unwrap_or("");
    eprintln!("first event: {}", &first[..first.len().min(160)]);
    assert!(rates.len() >= 3, "at least 3 events in 2.8 s: {rates:?}");
    assert!(
        rates.windows(2).any(|w| w[0] != w[1]) && rates.iter().any(|r| *r > 1e6),
        "the rate moves and reaches the class's share: {rates:?}"
    );

    // Chromium rendered the class tree with the live rates, and 1.5 s later the rates it shows
    // have moved. A screenshot is kept in the test's target directory.
    let dom1 = browser.join().expect("chromium thread");
    std::thread::sleep(Duration::from_millis(1500));
    let dom2 = chromium(&bed.ns_r, None);
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    chromium(&bed.ns_r, Some(&shot));
    for dom in [&dom1, &dom2] {
        assert!(
            dom.contains("data-class=\"root\"") && dom.contains("data-class=\"bulk\""),
            "{dom}"
        );
    }
    let (r1, r2) = (dom_live_bps(&dom1, "bulk"), dom_live_bps(&dom2, "bulk"));
    eprintln!(
        "dashboard bulk rate: {r1:?} then {r2:?}; screenshot {}",
        shot.display()
    );
    assert!(
        r1.is_some_and(|r| r > 1e6),
        "bulk's rate during traffic: {r1:?}\n{dom1}"
    );
    assert!(
        r1 != r2 && r2.is_some(),
        "rates did not move: {r1:?} {r2:?}"
    );
    assert!(
        std::fs::metadata(&shot).is_ok_and(|m| m.len() > 0),
        "no screenshot"
    );

    // A reload through the control socket is counted.
    let out = Command::new(env!("CARGO_BIN_EXE_linkshare"))
        .arg("reload")
        .arg(&policy)
        .arg("--control")
        .arg(&ctl)
        .output()
        .expect("run linkshare reload");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // /metrics serves a snapshot up to 500 ms old (docs/router.md, "Stats plane"): look again
    // for up to 3 s.
    let mut text3 = String::new();
    let mut ok = None;
    for _ in 0..30 {
        text3 = get(&bed.ns_r, "/metrics", "text/plain").1;
        ok = value(&text3, "linkshare_reloads_total", "result=\"ok\"");
        if ok == Some(1.0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(ok, Some(1.0), "{text3}");

    // Other paths and methods.
    let (h404, _) = get(&bed.ns_r, "/nope", "*/*");
    assert!(h404.starts_with("HTTP/1.1 404"), "{h404}");
}

/// Root with two top-level classes: with `--workers 2` each lives on its own worker.
const TWO_WORKER_POLICY: &str = r#"
qdisc = "htb"
default = "bulk"
[[class]]
name = "root"
rate = "4mbit"
[[class]]
name = "bulk"
parent = "root"
rate = "2mbit"
ceil = "4mbit"
[[class]]
name = "spare"
parent = "root"
rate = "2mbit"
ceil = "4mbit"
"#;

/// `--workers 2 --metrics --web`: the control thread serves the endpoints from the workers'
/// merged snapshot (gathered every 0.5 s): the text parses, a class's counter grows between
/// two scrapes, and the dashboard's snapshot has one row per worker.
#[test]
fn metrics_and_dashboard_are_served_with_two_workers() {
    if !testbed::netns_test_can_run() {
        return;
    }
    if Command::new("promtool").arg("--version").output().is_err() {
        testbed::netns_test_skipped(
            "promtool not found (apt-get install prometheus; scripts/test does it as root)",
        );
        return;
    }
    let bed = match testbed::Testbed::new() {
        Ok(b) => b,
        Err(e) => {
            testbed::netns_test_skipped(&format!("cannot build the namespace testbed: {e:#}"));
            return;
        }
    };
    let _shaper = start(
        &bed,
        TWO_WORKER_POLICY,
        &["--io", "packet", "--workers", "2"],
    );
    let sender = testbed::spawn_in_ns(&bed.ns_a, || {
        let s = UdpSocket::bind("10.77.0.1:0").expect("bind in a");
        let buf = [0x42u8; 1000];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(2500) {
            let _ = s.send_to(&buf, "10.77.0.2:9");
            std::thread::sleep(Duration::from_micros(1000));
        }
    })
    .expect("sender thread");
    std::thread::sleep(Duration::from_millis(900));
    let (_, t1) = get(&bed.ns_r, "/metrics", "text/plain");
    std::thread::sleep(Duration::from_millis(1200));
    let (head2, t2) = get(&bed.ns_r, "/metrics", "text/plain");
    let _ = sender.join();
    assert!(head2.starts_with("HTTP/1.1 200"), "{head2}");
    let (ok, msg) = promtool(&t2);
    assert!(ok, "promtool check metrics refused it:\n{msg}\n{t2}");
    let lab = "class=\"bulk\"";
    let a = value(&t1, "linkshare_class_sent_bytes_total", lab).expect("bulk in scrape 1");
    let b = value(&t2, "linkshare_class_sent_bytes_total", lab).expect("bulk in scrape 2");
    eprintln!("two workers: bulk sent bytes {a} then {b}");
    assert!(a > 0.0 && b > a, "sent bytes did not grow: {a} then {b}");
    assert!(value(&t2, "linkshare_class_sent_bytes_total", "class=\"spare\"").is_some());
    let (hs, snap) = get_from(&bed.ns_r, WEB_PORT, "/snapshot.json", "*/*");
    assert!(hs.starts_with("HTTP/1.1 200"), "{hs}");
    let v: serde_json::Value = serde_json::from_str(&snap).expect("snapshot JSON");
    assert_eq!(v["workers"].as_array().map(|w| w.len()), Some(2), "{v}");
    let roots = v["directions"][0]["classes"]
        .as_array()
        .map_or(0, |c| c.iter().filter(|c| c["name"] == "root").count());
    assert_eq!(roots, 1, "one root row: {v}");
}
