//! `linkshare lab`: a scenario's flows as real traffic through `linkshare run` in network
//! namespaces. The tests that build a testbed skip (with the reason printed) when not root or
//! when `ip netns` does not work, and fail instead under LINKSHARE_REQUIRE_NETNS=1; they run one at a time (`SERIAL`), and the lab's names carry its
//! pid, so they coexist with other test binaries' namespaces.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_linkshare")
}

/// The namespace testbed of `linkshare lab` (crate linkshare-lab), with its shared gate
/// (`netns_test_can_run`: skip with the reason, or fail under LINKSHARE_REQUIRE_NETNS=1).
use linkshare_lab::testbed;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lslabtest-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Namespaces whose name shows they belong to the lab process `pid`.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("lslab{pid}x");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// Processes whose command line mentions `needle` (the router started by a lab run).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(needle) {
                v.push(pid);
            }
        }
    }
    v
}

/// Three UDP classes, each offered more than its rate, for `secs`; HTB 5/3/2 Mbit/s on 10.
fn three_udp(secs: u32) -> String {
    format!(
        r#"
name = "lab-three-udp"
duration = "{secs}s"
sample = "500ms"
[link]
rate = "10mbit"
[policy]
qdisc = "htb"
default = "c"
[[policy.class]]
name = "root"
rate = "10mbit"
[[policy.class]]
name = "a"
parent = "root"
rate = "5mbit"
ceil = "10mbit"
[[policy.class]]
name = "b"
parent = "root"
rate = "3mbit"
ceil = "10mbit"
[[policy.class]]
name = "c"
parent = "root"
rate = "2mbit"
ceil = "10mbit"
[[policy.filter]]
class = "a"
dscp = "af11"
[[policy.filter]]
class = "b"
dscp = "cs1"
[[flow]]
name = "ua"
kind = "udp"
dscp = "af11"
rate = "7mbit"
size = 1000
[[flow]]
name = "ub"
kind = "udp"
dscp = "cs1"
rate = "5mbit"
size = 1000
[[flow]]
name = "uc"
kind = "udp"
rate = "4mbit"
size = 1000
[[flow]]
name = "probe"
kind = "ping"
dscp = "af11"
interval = "200ms"
"#
    )
}

#[test]
fn saturated_udp_classes_get_their_rates_and_namespaces_go() {
    rates_through(false);
}

/// `--kernel`: the same scenario through a bridge with the kernel's HTB (`export tc`) gets the
/// same rates, and the summary says which router ran.
#[test]
fn kernel_htb_gets_the_same_rates() {
    rates_through(true);
}

fn rates_through(kernel: bool) {
    if !testbed::netns_test_can_run() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch(if kernel { "rates-kernel" } else { "rates" });
    let sc = dir.join("three.toml");
    std::fs::write(&sc, three_udp(5)).unwrap();
    let out_dir = dir.join("out");
    let t0 = Instant::now();
    let child = Command::new(exe())
        .arg("lab")
        .arg(&sc)
        .arg("--out")
        .arg(&out_dir)
        // The kernel run prints its summary as JSON (`--json`, issue 15 §4), the other the table.
        .args(if kernel {
            &["--kernel", "--json"][..]
        } else {
            &[][..]
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
    assert!(t0.elapsed() < Duration::from_secs(20));
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    if kernel {
        let printed: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        assert_eq!(printed["classes"], s["classes"], "{printed}");
    } else {
        assert!(stdout.contains("measured in the lab"), "{stdout}");
    }
    let router = if kernel { "kernel-htb" } else { "linkshare" };
    assert_eq!(s["lab"]["router"], router, "{s}");
    assert_eq!(s["lab"]["interrupted"], false);
    for (class, want) in [("a", 5e6), ("b", 3e6), ("c", 2e6)] {
        let got = s["classes"][class]["rate_bps"].as_f64().unwrap();
        eprintln!(
            "class {class}: {:.3} Mbit/s (policy {:.0})",
            got / 1e6,
            want / 1e6
        );
        assert!(
            (got / want - 1.0).abs() < 0.03,
            "class {class}: {got} bit/s, policy {want}"
        );
        assert_eq!(
            s["classes"][class]["assigned_rate_bps"].as_f64(),
            Some(want)
        );
    }
    // The flows landed in the classes the policy's filters name, and arrived at the sink.
    assert_eq!(s["flows"]["ua"]["class"], "a");
    assert_eq!(s["flows"]["uc"]["class"], "c");
    let ua = s["flows"]["ua"]["goodput_bps"].as_f64().unwrap();
    assert!((ua / 5e6 - 1.0).abs() < 0.05, "ua goodput {ua}");
    // Overloaded: the sink lost what the class dropped; the probe measured its RTT.
    assert!(s["flows"]["ua"]["packets_lost"].as_u64().unwrap() > 0);
    assert!(s["flows"]["probe"]["rtt_ms"]["samples"].as_u64().unwrap() >= 10);
    assert!(out_dir.join("timeseries.csv").is_file());
    assert!(out_dir.join("report.html").is_file());
    let ts = std::fs::read_to_string(out_dir.join("timeseries.csv")).unwrap();
    // 10 samples of 4 classes and 4 flows.
    assert_eq!(ts.lines().count(), 1 + 10 * 8, "{ts}");

    assert!(
        namespaces_of(pid).is_empty(),
        "namespaces left: {:?}",
        namespaces_of(pid)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_mid_run_cleans_up() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("sigterm");
    let sc = dir.join("three.toml");
    std::fs::write(&sc, three_udp(30)).unwrap();
    let out_dir = dir.join("out");
    let mut child = Command::new(exe())
        .arg("lab")
        .arg(&sc)
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the testbed exists and the router runs, then let traffic flow a little.
    let t0 = Instant::now();
    let tag = format!("lslab{pid}x");
    while namespaces_of(pid).len() < 3 || processes_mentioning(&tag).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the lab did not start"
        );
        assert!(child.try_wait().unwrap().is_none(), "the lab exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(10),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "{status}");
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
    // The router (`linkshare run ... --control /tmp/lslab<pid>x0/ctl.sock`) is gone too.
    assert!(
        processes_mentioning(&tag).is_empty(),
        "{:?}",
        processes_mentioning(&tag)
    );
    // The partial report says so.
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(s["lab"]["interrupted"], true);
    let wall = s["lab"]["wall_clock_s"].as_f64().unwrap();
    assert!((1.0..10.0).contains(&wall), "{wall}");
    assert!(s["classes"]["a"]["bytes"].as_u64().unwrap() > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_scenario_is_reported_with_its_line() {
    let dir = scratch("bad");
    let sc = dir.join("bad.toml");
    std::fs::write(
        &sc,
        "[link]\nrate = \"10mbit\"\n[[flow]]\nname = \"x\"\nkind = \"quic\"\n",
    )
    .unwrap();
    let out = Command::new(exe()).arg("lab").arg(&sc).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("bad.toml:"), "{err}");
    let missing = Command::new(exe())
        .arg("lab")
        .arg(Path::new("/nonexistent/x.toml"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lab bench` refuses what it does not know, before building anything.
#[test]
fn bench_rejects_unknown_measurements() {
    let out = Command::new(exe())
        .args(["lab", "bench", "--only", "throughput,warp"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`warp`") && err.contains("forwarding"),
        "{err}"
    );
}

/// `lab bench --only forwarding`: every router forwards small frames, the shaper's CPU per
/// packet is measured for linkshare rows only, and the JSON carries the same table.
#[test]
fn bench_forwarding_measures_every_router() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("bench");
    let json = dir.join("bench.json");
    let out = Command::new(exe())
        .args([
            "lab",
            "bench",
            "--only",
            "forwarding",
            "--seconds",
            "0.5",
            "--repeat",
            "1",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("| router B |"), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["results"]["forwarding"].as_array().unwrap();
    // No router (the ends alone), bridge, kernel HTB, linkshare pfifo, HTB over AF_PACKET (V2,
    // V3), over AF_XDP (native, generic), CBQ.
    assert_eq!(rows.len(), 9, "{v}");
    assert!(
        rows[0]["router B"]
            .as_str()
            .unwrap()
            .starts_with("no router"),
        "{v}"
    );
    for io in ["--io xdp", "--io xdp-generic"] {
        assert!(
            rows.iter()
                .any(|r| r["router B"].as_str().unwrap().ends_with(io)),
            "no {io} row: {v}"
        );
    }
    for r in rows {
        let router = r["router B"].as_str().unwrap();
        let kpps: f64 = r["forwarded (kpps)"].as_str().unwrap().parse().unwrap();
        assert!(kpps > 1.0, "{router}: {kpps} kpps");
        let cpu = r["shaper CPU (ns/pkt)"].as_str().unwrap();
        if router.starts_with("linkshare") {
            let ns: f64 = cpu.parse().unwrap();
            assert!(ns > 10.0 && ns < 1e6, "{router}: {ns} ns/pkt");
        } else {
            assert_eq!(cpu, "–", "{router}");
        }
        // Every row's machine CPU over the kernel HTB row's, which is itself 1.
        let ratio: f64 = r["machine CPU / kernel HTB's"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(ratio > 0.0 && ratio < 1e3, "{router}: {ratio}");
        if router.starts_with("kernel HTB") {
            assert_eq!(r["machine CPU / kernel HTB's"], "1.00", "{router}");
        }
    }
    assert!(v["machine"]["cores"].as_u64().unwrap() >= 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `linkshare lab` on `scenario` (written to a scratch directory) and returns its
/// `summary.json`, its `timeseries.csv` and its stdout.
fn lab_run(name: &str, scenario: &str) -> (Value, String, String) {
    let dir = scratch(name);
    let sc = dir.join(format!("{name}.toml"));
    std::fs::write(&sc, scenario).unwrap();
    let out_dir = dir.join("out");
    let out = Command::new(exe())
        .arg("lab")
        .arg(&sc)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let ts = std::fs::read_to_string(out_dir.join("timeseries.csv")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (s, ts, stdout)
}

/// One meaning for `delay` and `extra_delay` (docs/scenario-format.md): base RTT =
/// 2·(delay + extra_delay) in the lab as in the simulator. Two pings share a source but not an
/// extra delay, so the lab moves one to its own address (and says so); a UDP flow that stops
/// just before the end loses nothing (its receiver drains).
#[test]
fn ping_rtt_is_twice_delay_plus_extra_delay() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (s, _, _) = lab_run(
        "rtt",
        r#"
name = "lab-rtt"
duration = "3s"
sample = "500ms"
[link]
rate = "10mbit"
delay = "10ms"
[[flow]]
name = "far"
kind = "ping"
src = "10.1.0.1"
interval = "50ms"
extra_delay = "5ms"
[[flow]]
name = "near"
kind = "ping"
src = "10.1.0.1"
interval = "50ms"
[[flow]]
name = "u"
kind = "udp"
rate = "1mbit"
size = 1000
extra_delay = "5ms"
stop = "2.99s"
"#,
    );
    for (flow, want) in [("far", 30.0), ("near", 20.0)] {
        let p50 = s["flows"][flow]["rtt_ms"]["p50"].as_f64().unwrap();
        eprintln!("{flow}: RTT p50 {p50:.2} ms, want {want} ms");
        assert!((p50 - want).abs() <= 1.0 + 0.05 * want, "{flow}: {p50} ms");
        assert_eq!(s["flows"][flow]["packets_lost"], 0, "{s}");
    }
    let notes = s["lab"]["notes"].to_string();
    assert!(
        notes.contains("send from") && notes.contains("instead of 10.1.0.1"),
        "{notes}"
    );
    assert!(!notes.contains("extra_delay` is not emulated"), "{notes}");
    // One-way: delay + extra_delay.
    let owd = s["flows"]["u"]["owd_ms"]["p50"].as_f64().unwrap();
    assert!((owd - 15.0).abs() <= 1.0 + 0.05 * 15.0, "owd {owd} ms");
    let sent = s["flows"]["u"]["packets_sent"].as_u64().unwrap();
    assert!(sent > 300, "{sent}");
    assert_eq!(
        s["flows"]["u"]["packets_lost"], 0,
        "in flight at stop is not lost: {s}"
    );
}

/// The lab's link serialises as a real one (and the simulator's wire) does: a datagram that
/// meets no queue reaches the sink after its serialisation time at `[link] rate` plus the
/// delay, not at the veth's speed. 1000-byte IP packets are 1014-byte frames: 8.11 ms at
/// 1 Mbit/s, so the one-way delay is 18.1 ms (10.0 without the emulated wire).
#[test]
fn a_packet_takes_its_serialisation_time_on_the_link() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (s, _, _) = lab_run(
        "wire",
        r#"
name = "lab-wire"
duration = "3s"
sample = "500ms"
[link]
rate = "1mbit"
delay = "10ms"
overhead = 14
[[flow]]
name = "u"
kind = "udp"
rate = "100kbit"
size = 1000
"#,
    );
    let want = 10.0 + 1014.0 * 8.0 / 1e6 * 1e3;
    let owd = s["flows"]["u"]["owd_ms"]["p50"].as_f64().unwrap();
    eprintln!("one-way delay p50 {owd:.2} ms, want {want:.2} ms");
    assert!((owd - want).abs() <= 1.5, "owd {owd} ms, want {want:.2}");
    assert_eq!(s["flows"]["u"]["packets_lost"], 0, "{s}");
}

/// At `stop` the source stops writing and what was written but not sent is bounded by
/// `TCP_NOTSENT_LOWAT` (= the simulator's `NOTSENT_LOWAT`): the sink receives at most that plus
/// one write plus what was in flight (the leaf's 30-packet queue, the path's BDP and the device
/// buffer) after `stop`. The flow runs NewReno (`reno`, checked by the source when it sets it).
#[test]
fn tcp_delivery_stops_soon_after_stop() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (start, stop) = (0.5, 2.5);
    let (s, ts, _) = lab_run(
        "tcpstop",
        &format!(
            r#"
name = "lab-tcp-stop"
duration = "4s"
sample = "100ms"
[link]
rate = "10mbit"
delay = "5ms"
overhead = 14
[policy]
qdisc = "htb"
default = "bulk"
[[policy.class]]
name = "root"
rate = "10mbit"
[[policy.class]]
name = "bulk"
parent = "root"
rate = "10mbit"
leaf = {{ type = "pfifo", limit = 30 }}
[[flow]]
name = "t"
kind = "tcp"
cc = "newreno"
start = "{start}s"
stop = "{stop}s"
"#
        ),
    );
    let mut before = 0u64;
    let mut after = 0u64;
    for l in ts.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        if f[1] != "flow" || f[2] != "t" {
            continue;
        }
        let t: f64 = f[0].parse().unwrap();
        let b: u64 = f[3].parse().unwrap();
        if t <= stop + 1e-9 {
            before += b;
        } else {
            after += b;
        }
    }
    let lowat = 16384u64;
    let in_flight = 30 * 1514 + 10_000_000 / 8 * 10 / 1000 + 3028;
    let bound = 2 * lowat + in_flight;
    eprintln!("delivered {before} B by stop, {after} B after (bound {bound} B)");
    assert!(
        before as f64 > 0.8 * 10e6 / 8.0 * (stop - start),
        "{before}"
    );
    assert!(after <= bound, "after stop {after} B > {bound} B");
    assert_eq!(s["flows"]["t"]["kind"], "tcp");
}

/// `lab bench --only scale` at a small size: linkshare, the kernel's HTB with hashed filters and
/// with linear ones each start, forward, answer probes, report memory and change a rate.
#[test]
fn bench_scale_measures_linkshare_and_both_kernel_forms() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("bench-scale");
    let json = dir.join("bench.json");
    let out = Command::new(exe())
        .args([
            "lab",
            "bench",
            "--only",
            "scale",
            "--subscribers",
            "300",
            "--seconds",
            "0.5",
            "--repeat",
            "1",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["results"]["scale"].as_array().unwrap();
    let routers: Vec<&str> = rows
        .iter()
        .map(|r| r["router B"].as_str().unwrap())
        .collect();
    assert_eq!(routers.len(), 4, "{v}");
    assert!(routers[0].starts_with("linkshare"), "{v}");
    assert!(routers[1].starts_with("linkshare --realtime"), "{v}");
    assert!(
        routers[2].contains("hashed") && routers[3].contains("linear"),
        "{v}"
    );
    for r in rows {
        let router = r["router B"].as_str().unwrap();
        let num = |k: &str| -> f64 {
            r[k].as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{router}: `{k}` is {}", r[k]))
        };
        assert!(num("start to forwarding (s)") > 0.0, "{router}");
        assert!(
            num("machine CPU (ns/frame, 10k addresses)") > 0.0,
            "{router}"
        );
        assert!(num("rate change (ms)") > 0.0, "{router}");
        let mem = r["memory"].as_str().unwrap();
        assert!(mem.contains("MB"), "{router}: {mem}");
        let idle = r["idle RTT p50 / p99 (µs)"].as_str().unwrap();
        assert!(
            idle.split(" / ")
                .all(|x| x.parse::<f64>().is_ok_and(|x| x > 0.0)),
            "{router}: {idle}"
        );
        let scrapes = r["scrapes"].as_str().unwrap();
        assert!(scrapes.contains(" × "), "{router}: {scrapes}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
