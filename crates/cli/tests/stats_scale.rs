//! Issue 35's "done when": a shaper of 100,000 subscribers (`LINKSHARE_SCALE_SUBSCRIBERS`
//! changes it) from a subscriber table with circuit ids, under 25 sites, shaping both
//! directions with fq_codel per subscriber, in the namespace testbed: it starts, a ping
//! through it is answered, one subscriber's `class change` takes effect and `stat` shows it
//! (found by its circuit id), one full `/metrics` scrape carries every class's series (with
//! `circuit_id`, `direction` and `parent` labels), and `stat --top 20` picks the busiest.
//! Outcomes are asserted, timings printed, never asserted (issue 35's targets are measured by
//! `linkshare lab bench --only scale`). Also: `stat --parent`/`--class`, a full `stat --json`
//! in pages, `/metrics?top=N`, and the default `/metrics` staying small (per-parent series
//! beyond 10,000 classes); those two pass `promtool check metrics` (the full scrape, ~300 MB,
//! is counted as it streams in: promtool takes about a minute over it).
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

/// An HTB of 25 sites taking its subscribers from `subs.csv` ([`table`]), both directions,
/// fq_codel per subscriber; anything else goes to `dflt`.
fn policy() -> String {
    let mut p = String::from(
        "qdisc = \"htb\"\ndefault = \"dflt\"\nsubscribers = \"subs.csv\"\n\
         [[class]]\nname = \"root\"\nrate = \"10gbit\"\nupload_rate = \"10gbit\"\n\
         [[class]]\nname = \"dflt\"\nparent = \"root\"\nrate = \"1mbit\"\nceil = \"10gbit\"\n\
         upload_rate = \"1mbit\"\nupload_ceil = \"10gbit\"\n\
         [[plan]]\nname = \"p\"\nrate = \"10kbit\"\nceil = \"100mbit\"\nquantum = 1514\n\
         upload_rate = \"10kbit\"\nupload_ceil = \"20mbit\"\nleaf = \"fq_codel\"\n",
    );
    for s in 0..SITES {
        p += &format!(
            "[[class]]\nname = \"site{s}\"\nparent = \"root\"\nrate = \"{}mbit\"\nceil = \"10gbit\"\n\
             upload_rate = \"{}mbit\"\nupload_ceil = \"10gbit\"\n",
            9000 / SITES,
            9000 / SITES
        );
    }
    p
}

/// The subscriber table of [`policy`]: `n` subscribers, subscriber `i` of circuit `C{i}` at
/// address 10.100+i/65536.(i/256%256).(i%256).
fn table(n: usize) -> String {
    let mut t = String::with_capacity(n * 48);
    t += "name,circuit_id,parent,plan,addresses\n";
    for i in 0..n {
        t += &format!("sub{i},C{i},site{},p,{}\n", i % SITES, addr(i));
    }
    t
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

/// What a full scrape of every class carried, counted line by line as it streams in (a scrape
/// of 100,000 subscribers in both directions is about 300 MB: never held whole).
#[derive(Debug, Default)]
struct Scrape {
    bytes: usize,
    /// `linkshare_class_sent_bytes_total` series per direction (forward, reverse).
    sent: [usize; 2],
    /// Of those, the series with a `circuit_id` label.
    with_id: usize,
    /// Lines containing `want`.
    wanted: usize,
}

fn scrape_all(ns: &str, want: &'static str) -> Scrape {
    let req = "GET /metrics?classes=all HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
    testbed::in_ns(ns, move || {
        use std::io::BufRead;
        let mut s = TcpStream::connect(("127.0.0.1", PORT)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        s.write_all(req.as_bytes()).expect("send request");
        let mut r = std::io::BufReader::with_capacity(1 << 20, s);
        let mut line = String::new();
        r.read_line(&mut line).expect("status line");
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        let mut out = Scrape::default();
        loop {
            line.clear();
            let n = r.read_line(&mut line).expect("read the scrape");
            if n == 0 {
                return out;
            }
            out.bytes += n;
            if line.contains(want) {
                out.wanted += 1;
            }
            if !line.starts_with("linkshare_class_sent_bytes_total{") {
                continue;
            }
            if line.contains("direction=\"forward\"") {
                out.sent[0] += 1;
            } else if line.contains("direction=\"reverse\"") {
                out.sent[1] += 1;
            }
            if line.contains("circuit_id=\"") {
                out.with_id += 1;
            }
        }
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

/// The class row of `name` (or of circuit id `name`) in direction `d` of a `stat --class`.
fn row(st: &Value, d: usize) -> &Value {
    &st["directions"][d]["classes"][0]
}

#[test]
fn a_hundred_thousand_subscribers_start_ping_change_scrape_and_top() {
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
    let n: usize = std::env::var("LINKSHARE_SCALE_SUBSCRIBERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let classes = n + SITES + 2;
    let bed = match testbed::Testbed::new() {
        Ok(b) => b,
        Err(e) => {
            testbed::netns_test_skipped(&format!("cannot build the namespace testbed: {e:#}"));
            return;
        }
    };
    let path = bed.dir.join("scale.toml");
    std::fs::write(&path, policy()).expect("write policy");
    std::fs::write(bed.dir.join("subs.csv"), table(n)).expect("write the table");
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
    eprintln!("{n} subscribers: control socket after {:?}", t0.elapsed());

    // Ping through the idle shaper: answered.
    let rtts = ping_ms(&bed, 40);
    assert!(rtts.len() >= 30, "pings lost: {} of 40 back", rtts.len());
    eprintln!(
        "idle ping: p50 {} ms p99 {} ms",
        rtts[rtts.len() / 2],
        rtts[rtts.len() * 99 / 100]
    );

    // Traffic to two subscribers of site5 (sub5 more than sub30), through the shaper.
    let (a, b) = (addr(5), addr(30));
    let sender = testbed::spawn_in_ns(&bed.ns_a, move || {
        let _ = Command::new("ip")
            .args(["route", "add", "10.100.0.0/16", "via", "10.77.0.2"])
            .status();
        let s = UdpSocket::bind("10.77.0.1:0").expect("bind in a");
        let buf = [0x42u8; 1000];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(1200) {
            for _ in 0..3 {
                let _ = s.send_to(&buf, format!("{a}:9"));
            }
            let _ = s.send_to(&buf, format!("{b}:9"));
            std::thread::sleep(Duration::from_millis(2));
        }
    })
    .expect("sender thread in a");
    std::thread::sleep(Duration::from_millis(600));
    let _ = stat(&ctl, &["--top", "1"]); // a snapshot to measure the rates from
    let _ = sender.join();
    std::thread::sleep(Duration::from_millis(300));

    // stat --top 20: twenty rows of every class, the busiest first.
    let t1 = Instant::now();
    let top = stat(&ctl, &["--top", "20"]);
    eprintln!("stat --top 20: {:?}", t1.elapsed());
    assert_eq!(names(&top).len(), 20, "{top}");
    assert_eq!(
        top["directions"][0]["class_count"].as_u64(),
        Some(classes as u64)
    );
    let top2 = stat(&ctl, &["--parent", "site5", "--top", "2"]);
    assert_eq!(names(&top2), ["sub5", "sub30"], "{top2}");
    // `?top=N` adds the busiest leaves to a scrape, with their labels; valid for promtool.
    let m = get(&bed.ns_r, "/metrics?top=2");
    promtool_ok(&m);
    assert!(
        m.contains("class=\"sub5\",parent=\"site5\",circuit_id=\"C5\""),
        "the busiest subscriber, labelled"
    );
    assert!(m.contains("direction=\"forward\""));

    // One subscriber's change among n: effective, visible in stat (found by its circuit
    // id), no other subscriber touched.
    let before = stat(&ctl, &["--class", "sub31"]);
    let t2 = Instant::now();
    let (took, _) = cli(
        &ctl,
        &[
            "class", "change", "sub30", "--rate", "2mbit", "--ceil", "5mbit",
        ],
    );
    eprintln!("class change of one subscriber: {took:?}");
    let one = stat(&ctl, &["--class", "C30"]);
    eprintln!("change to stat showing it: {:?}", t2.elapsed());
    assert_eq!(names(&one), ["sub30"], "{one}");
    let r = row(&one, 0);
    assert_eq!(r["circuit_id"], "C30", "{one}");
    assert_eq!(r["rate_bps"].as_u64(), Some(2_000_000), "{one}");
    assert_eq!(r["ceil_bps"].as_u64(), Some(5_000_000), "{one}");
    assert!(
        r["sent_packets"].as_u64() > Some(0),
        "its counters kept: {one}"
    );
    let after = stat(&ctl, &["--class", "sub31"]);
    for k in ["rate_bps", "ceil_bps"] {
        assert_eq!(row(&after, 0)[k], row(&before, 0)[k], "sub31 touched");
    }
    // The upload side of the subscriber is its own class (the change was to the download).
    assert_eq!(row(&one, 1)["circuit_id"], "C30", "{one}");

    // One full scrape: every class's series in both directions, labelled.
    let t3 = Instant::now();
    let m = scrape_all(
        &bed.ns_r,
        "class=\"sub30\",parent=\"site5\",circuit_id=\"C30\"",
    );
    eprintln!(
        "/metrics?classes=all: {} bytes in {:?}",
        m.bytes,
        t3.elapsed()
    );
    assert_eq!(
        m.sent,
        [classes, classes],
        "one sent-bytes series per class and direction"
    );
    assert_eq!(
        m.with_id,
        2 * n,
        "every subscriber's circuit id, both directions"
    );
    // 13 families of per-class series (the drops only where there are some), both directions.
    assert!(
        m.wanted >= 2 * 12,
        "sub30 by name, node and circuit id: {m:?}"
    );

    // The default scrape stays small (per-parent series at this size), and is valid.
    let m = get(&bed.ns_r, "/metrics");
    promtool_ok(&m);
    assert!(
        m.contains("linkshare_parent_children{"),
        "no per-parent series"
    );
    assert!(!m.contains("class=\"sub5\""), "leaf series by default");

    // Every class, in pages of one snapshot.
    let t5 = Instant::now();
    let all = stat(&ctl, &[]);
    eprintln!("stat --json of every class: {:?}", t5.elapsed());
    let all = names(&all);
    assert_eq!(all.len(), classes);
    let distinct: std::collections::HashSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a class twice across pages");
    eprintln!("whole test: {:?}", t0.elapsed());
}
