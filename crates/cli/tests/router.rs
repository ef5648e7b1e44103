//! `linkshare run` on real interfaces: namespaces a, r, c joined by veth pairs a<->r and r<->c,
//! the shaper in r bridging its two veths, real kernel sockets in a and c.
//! Skips (with the reason printed) when not root or when `ip netns` does not work, and fails
//! instead under LINKSHARE_REQUIRE_NETNS=1 (`testbed::netns_test_can_run`, as .ci/run sets).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The namespace testbed of `linkshare lab` (crate linkshare-lab), with its shared gate
/// (`netns_test_can_run`: skip with the reason, or fail under LINKSHARE_REQUIRE_NETNS=1).
use linkshare_lab::testbed;

/// One testbed at a time: the tests measure rates and delays, and on a 2-core machine two
/// testbeds pushing traffic at once starve each other's shaper and senders.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run `f` in a thread that has joined network namespace `ns`.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    testbed::in_ns(ns, f).expect("namespace thread")
}

/// Namespaces a (sender), r (shaper), c (sink) of the promoted testbed, with the shaper started
/// by `ip netns exec` from the test's own build of the binary.
struct Lab {
    a: String,
    r: String,
    c: String,
    /// The interfaces of the shaper (towards a, towards c) and a's interface.
    ra: String,
    rc: String,
    va: String,
    dir: PathBuf,
    shaper: Option<Child>,
    // Dropped after `shaper` is killed (Drop below): deletes the namespaces.
    _bed: testbed::Testbed,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut ch) = self.shaper.take() {
            let _ = ch.kill();
            let _ = ch.wait();
        }
    }
}

impl Lab {
    fn new() -> Option<Lab> {
        Self::with_queues(1)
    }

    /// A testbed whose veths have `queues` receive and transmit queues.
    fn with_queues(queues: u32) -> Option<Lab> {
        if !testbed::netns_test_can_run() {
            return None;
        }
        // A test that panicked while holding the lock has cleaned up in Drop: go on.
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let bed = match testbed::Testbed::with_queues(queues) {
            Ok(b) => b,
            Err(e) => {
                testbed::netns_test_skipped(&format!("cannot build the namespace testbed: {e:#}"));
                return None;
            }
        };
        Some(Lab {
            a: bed.ns_a.clone(),
            r: bed.ns_r.clone(),
            c: bed.ns_c.clone(),
            ra: bed.dev_ra.clone(),
            rc: bed.dev_rc.clone(),
            va: bed.dev_a.clone(),
            dir: bed.dir.clone(),
            shaper: None,
            _bed: bed,
            _serial: serial,
        })
    }

    fn control(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }

    fn write_policy(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn start(&mut self, policy: &PathBuf) {
        self.start_with(policy, &[]);
    }

    fn start_with(&mut self, policy: &PathBuf, extra: &[&str]) {
        let ch = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.r,
                env!("CARGO_BIN_EXE_linkshare"),
                "run",
                "--policy",
            ])
            .arg(policy)
            .args(["--dev", &self.ra, "--dev", &self.rc, "--control"])
            .arg(self.control())
            // These tests cover the AF_PACKET port (tests/router_xdp.rs covers AF_XDP) unless a
            // test picks its I/O.
            .args(if extra.contains(&"--io") {
                &[][..]
            } else {
                &["--io", "packet"][..]
            })
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        self.shaper = Some(ch);
        let t0 = Instant::now();
        while !self.control().exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "shaper did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_linkshare"))
            .args(args)
            .arg("--control")
            .arg(self.control())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// SIGTERM the shaper: it must exit 0 within `within` and remove its control socket.
    fn sigterm_exits_cleanly(&mut self, within: Duration) {
        let mut ch = self.shaper.take().unwrap();
        // SAFETY: signalling our own child (`ip netns exec` execs the shaper in place).
        unsafe { libc::kill(ch.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = ch.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < within, "shaper did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status:?}");
        assert!(!self.control().exists(), "control socket left behind");
    }

    /// `linkshare run` with policy `p` on `lo` and the `extra` options, expected to be refused
    /// before anything starts: its exit code and stderr.
    fn run_refused(&self, p: &Path, extra: &[&str]) -> (i32, String) {
        let policy = p.to_str().unwrap();
        let mut args = vec!["run", "--policy", policy, "--dev", "lo", "--dev", "lo"];
        args.extend_from_slice(extra);
        let (code, _, err) = self.cli(&args);
        (code, err)
    }

    fn stat(&self) -> Value {
        let (code, out, err) = self.cli(&["stat", "--json"]);
        assert_eq!(code, 0, "stat failed: {err}");
        serde_json::from_str(&out).unwrap()
    }
}

fn class<'a>(st: &'a Value, name: &str) -> &'a Value {
    st["directions"][0]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no class {name} in {st}"))
}

const ONE_CLASS: &str = r#"
qdisc = "htb"
default = "root"
[[class]]
name = "root"
rate = "10mbit"
"#;

/// Bulk TCP from a to c for `secs`; returns goodput in bit/s measured at the receiver after a
/// 0.5 s warm-up.
fn tcp_goodput(lab: &Lab, secs: f64) -> f64 {
    let c = lab.c.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        in_ns(&c, move || {
            let l = TcpListener::bind("10.77.0.2:5001").unwrap();
            tx.send(()).unwrap();
            let (mut s, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 65536];
            let t0 = Instant::now();
            let mut counted = 0u64;
            let mut start: Option<Instant> = None;
            loop {
                let n = s.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break;
                }
                if t0.elapsed() >= Duration::from_millis(500) {
                    start.get_or_insert_with(Instant::now);
                    counted += n as u64;
                }
            }
            let el = start.map(|s| s.elapsed().as_secs_f64()).unwrap_or(1.0);
            counted as f64 * 8.0 / el
        })
    });
    rx.recv().unwrap();
    let a = lab.a.clone();
    in_ns(&a, move || {
        let mut s =
            TcpStream::connect_timeout(&"10.77.0.2:5001".parse().unwrap(), Duration::from_secs(3))
                .expect("tcp connect through the shaper");
        let buf = vec![0x5au8; 16384];
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < secs {
            s.write_all(&buf).unwrap();
        }
    });
    server.join().unwrap()
}

/// One bulk TCP connection for 3 s through a 10 Mbit/s class: its goodput must be 9–10 Mbit/s.
/// Returns the shaper's `stat` after it.
fn tcp_at_ten_mbit(lab: &Lab) -> Value {
    let bps = tcp_goodput(lab, 3.0);
    eprintln!("goodput {:.2} Mbit/s", bps / 1e6);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
    lab.stat()
}

/// `--rx-split direction` with TCP: the data (received by worker 0 and scheduled by the worker
/// owning class `c`) and the ACKs (the reverse direction is unshaped: received and sent on by
/// worker 1) take two workers; the connection gets its class's rate, each interface's frames
/// are received by its worker alone and once, and every shaped packet leaves once.
#[test]
fn a_worker_per_direction_carries_tcp_at_its_class_rate_once() {
    worker_per_direction_tcp("packet");
}

/// The same with AF_XDP receiving (native XDP on the veth, each worker's sockets on its own
/// interface) and AF_PACKET transmitting on the other interface.
#[test]
fn a_worker_per_direction_over_af_xdp_carries_tcp_at_its_class_rate_once() {
    worker_per_direction_tcp("xdp");
}

fn worker_per_direction_tcp(io: &str) {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", THREE_CLASSES);
    lab.start_with(
        &p,
        &["--workers", "2", "--rx-split", "direction", "--io", io],
    );
    let st = tcp_at_ten_mbit(&lab);
    let ifs = &st["interfaces"];
    let sent = class(&st, "root")["sent_packets"].as_u64().unwrap();
    let tx_out = ifs[1]["tx_packets"].as_u64().unwrap();
    let non_ip = ifs[0]["non_ip_passed"].as_u64().unwrap();
    assert_eq!(tx_out, sent + non_ip, "every shaped frame left once: {st}");
    // Worker 0 received everything that came in on IN (the data), worker 1 everything on OUT
    // (the ACKs), and nothing was received twice.
    let w = &st["workers"];
    for i in 0..2 {
        let got = w[i]["rx_packets"].as_u64().unwrap();
        assert!(got > 0, "worker {i} received nothing: {st}");
        assert_eq!(got, ifs[i]["rx_packets"].as_u64().unwrap(), "{st}");
    }
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
    assert_eq!(ifs[1]["rx_ring_drops"], 0, "{st}");
    timer_floor_reported(&st);
}

/// A class paced at 10 Mbit/s (a departure every 1.2 ms, longer than any early-wake margin)
/// puts the loop to sleep on its timer: `stat` reports how late the timer woke it, merged over
/// the workers.
fn timer_floor_reported(st: &serde_json::Value) {
    let t = &st["timer_wake_ns"];
    let n = |k: &str| {
        t[k].as_u64()
            .unwrap_or_else(|| panic!("no timer_wake_ns.{k}: {st}"))
    };
    assert!(n("samples") > 0, "{st}");
    assert!(
        n("p50") <= n("p99") && n("p99") <= n("max") && n("mean") <= n("max"),
        "{st}"
    );
}

#[test]
fn tcp_is_shaped_to_policy_rate_and_arp_passes() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start(&p);
    let st = tcp_at_ten_mbit(&lab);
    let ifs = &st["interfaces"];
    assert!(
        ifs[0]["non_ip_passed"].as_u64().unwrap() >= 1,
        "ARP must pass: {st}"
    );
    let root = class(&st, "root");
    let sent = root["sent_packets"].as_u64().unwrap();
    // Every shaped packet left on OUT; OUT also carried the non-IP frames from IN.
    let tx_out = ifs[1]["tx_packets"].as_u64().unwrap();
    let non_ip = ifs[0]["non_ip_passed"].as_u64().unwrap();
    assert_eq!(tx_out, sent + non_ip, "{st}");
    assert_eq!(ifs[1]["tx_errors"], 0, "{st}");
    assert!(st["lateness_us"]["samples"].as_u64().unwrap() > 0);
    timer_floor_reported(&st);
    // The frames went through the memory-mapped rings (the default V2 receive ring: frames
    // read from their slots, no V3 blocks), transmitted in batches.
    assert!(ifs[0]["rx_packets"].as_u64().unwrap() >= sent, "{st}");
    assert_eq!(ifs[0]["rx_blocks"], 0, "{st}");
    let kicks = ifs[1]["tx_kicks"].as_u64().unwrap();
    assert!(kicks > 0 && kicks <= tx_out, "{st}");
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
    eprintln!(
        "lateness {} ; tx {tx_out} frames in {kicks} kicks",
        st["lateness_ns"]
    );
}

/// A policy of `n` leaves under a 20 Mbit/s root (the stream is 2 Mbit/s); `variant` moves rate between the first two
/// (what a class change does). Unfiltered traffic goes to `c0`.
fn many_classes(n: usize, variant: u64) -> String {
    let mut s = String::from(
        "qdisc = \"htb\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \"20mbit\"\n",
    );
    for i in 0..n {
        let kbit = match (i, variant % 2) {
            (0, 0) | (1, 1) => 4000,
            (0, _) | (1, _) => 2000,
            _ => 1,
        };
        s.push_str(&format!(
            "[[class]]\nname = \"c{i}\"\nparent = \"root\"\nrate = \"{kbit}kbit\"\nceil = \"10mbit\"\nquantum = 1500\n"
        ));
    }
    s
}

/// Reloads are built off the datapath (router/src/builder.rs): reloading a 10,000-class policy
/// three times takes the control client far longer than any gap it leaves in a paced stream
/// (the loop only installs the built scheduler). When the build ran on the loop, each reload
/// stopped forwarding for the whole build.
#[test]
fn reloading_a_large_policy_does_not_pause_forwarding() {
    let Some(mut lab) = Lab::new() else { return };
    const N: usize = 10_000;
    let p = lab.write_policy("p.toml", &many_classes(N, 0));
    lab.start(&p);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7001], t0, 6.0);
    let src = udp_source(&lab, 7001, 2e6, 500, t0, 0.0, 5.5);
    std::thread::sleep(Duration::from_millis(1500));
    let mut took = Vec::new();
    for v in 1..=3u64 {
        let q = lab.write_policy(&format!("p{v}.toml"), &many_classes(N, v));
        let t = Instant::now();
        let (code, _, err) = lab.cli(&["reload", q.to_str().unwrap()]);
        assert_eq!(code, 0, "reload {v} failed: {err}");
        took.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let reloads_end = t0.elapsed().as_secs_f64();
    src.join().unwrap();
    let got = sink.join().unwrap();
    let times: Vec<f64> = got[0]
        .iter()
        .map(|a| a.0)
        .filter(|&t| (1.0..=reloads_end + 0.2).contains(&t))
        .collect();
    assert!(times.len() > 100, "too few arrivals: {}", times.len());
    let max_gap_ms = times
        .windows(2)
        .map(|w| (w[1] - w[0]) * 1e3)
        .fold(0.0, f64::max);
    eprintln!(
        "reloads of {N} classes took {took:?} ms; largest gap in the stream {max_gap_ms:.1} ms"
    );
    let st = lab.stat();
    assert_eq!(st["reloads"]["ok"], 3, "{}", st["reloads"]);
    let shortest = took.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        max_gap_ms < 100.0 && max_gap_ms < shortest,
        "forwarding paused {max_gap_ms:.1} ms while reloads took {took:?} ms"
    );
}

/// `--realtime 10` puts the datapath thread under SCHED_FIFO at priority 10, and it still
/// shapes exactly.
#[test]
fn realtime_datapath_runs_under_sched_fifo_and_shapes() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--realtime", "10"]);
    // Field 40 of /proc/PID/stat is rt_priority and 41 the policy.
    let (stat, field) = proc_stat(&lab);
    assert_eq!(field(40), "10", "rt_priority: {stat}");
    assert_eq!(field(41), libc::SCHED_FIFO.to_string(), "policy: {stat}");
    let bps = tcp_goodput(&lab, 2.0);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
}

/// The shaper's `/proc/PID/stat` line, and its field N (1-based, as proc(5) numbers them).
fn proc_stat(lab: &Lab) -> (String, impl Fn(usize) -> String) {
    let pid = lab.shaper.as_ref().unwrap().id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields 1 and 2 are the pid and "(comm)"; field 3 starts after the last ')'.
    let rest: Vec<String> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .map(str::to_string)
        .collect();
    (stat, move |n: usize| rest[n - 3].clone())
}

/// `--nice -5` runs the datapath thread at nice -5 (it still shapes); an out-of-range value
/// is refused before anything starts.
#[test]
fn nice_datapath_runs_at_its_nice_value() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    let (code, err) = lab.run_refused(&p, &["--nice", "30"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--nice"), "{err}");
    lab.start_with(&p, &["--nice", "-5"]);
    // Field 19 of /proc/PID/stat is nice (the main thread runs the loop).
    let (stat, field) = proc_stat(&lab);
    assert_eq!(field(19), "-5", "nice: {stat}");
    let bps = tcp_goodput(&lab, 1.5);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
}

/// `--cpus LIST` pins the datapath thread to the list's first CPU (it still shapes); a CPU the
/// process may not use, or a malformed list, is refused before anything starts.
#[test]
fn cpus_pin_the_datapath_thread() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    let run = |lab: &Lab, cpus: &str| {
        lab.cli(&[
            "run",
            "--policy",
            p.to_str().unwrap(),
            "--dev",
            "lo",
            "--dev",
            "lo",
            "--cpus",
            cpus,
        ])
    };
    let (code, _, err) = run(&lab, "1023");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--cpus") && err.contains("CPU 1023") && err.contains("allowed"),
        "{err}"
    );
    let (code, _, err) = run(&lab, "2-1");
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("backwards"), "{err}");
    // The last CPU this test may use (the shaper inherits the same set).
    let allowed = linkshare_router::affinity::allowed().unwrap();
    let cpu = *allowed.last().unwrap();
    lab.start_with(&p, &["--cpus", &cpu.to_string()]);
    let pid = lab.shaper.as_ref().unwrap().id();
    // The main thread runs the loop.
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
        .unwrap_or("");
    assert_eq!(list, cpu.to_string(), "{status}");
    let bps = tcp_goodput(&lab, 1.5);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
    lab.sigterm_exits_cleanly(Duration::from_secs(5));
    // Two workers on a list of two CPUs (the first and the last allowed; one CPU twice on a
    // one-CPU machine is refused, so give it once): worker i on the i-th.
    let two: Vec<usize> = if allowed.len() > 1 {
        vec![allowed[0], cpu]
    } else {
        vec![cpu]
    };
    let list = two
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let two_classes = lab.write_policy("two.toml", TWO_HALVES);
    lab.start_with(&two_classes, &["--workers", "2", "--cpus", &list]);
    let pid = lab.shaper.as_ref().unwrap().id();
    let t0 = Instant::now();
    let pinned = loop {
        let mut seen = Vec::new();
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
        {
            let dir = t.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if let Some(i) = comm.trim().strip_prefix("linkshare-w") {
                let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
                let cpus = status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .map(|v| v.trim().to_string())
                    .unwrap_or_default();
                seen.push((i.parse::<usize>().unwrap(), cpus));
            }
        }
        seen.sort();
        if seen.len() == 2 || t0.elapsed() > Duration::from_secs(5) {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let want: Vec<(usize, String)> = (0..2)
        .map(|i| (i, two[i % two.len()].to_string()))
        .collect();
    assert_eq!(pinned, want);
    let bps = tcp_goodput(&lab, 1.5);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s with two workers"
    );
}

/// Two top-level classes of 5 Mbit/s under a 10 Mbit/s root, each free to borrow up to it.
const TWO_HALVES: &str = r#"
qdisc = "htb"
default = "a"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "a"
parent = "root"
rate = "5mbit"
ceil = "10mbit"
[[class]]
name = "b"
parent = "root"
rate = "5mbit"
ceil = "10mbit"
"#;

/// With two workers, `a` on worker 0 and `b` on worker 1, and traffic for `a` alone: worker 1
/// is idle, yet its shard's half of the root must reach `a` through the pool. A gate mints only
/// when polled, so an idle worker polls its gate every millisecond; before it did, `a` got its
/// own 5 Mbit/s and no more.
#[test]
fn a_lone_busy_worker_gets_the_whole_root() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("two.toml", TWO_HALVES);
    lab.start_with(&p, &["--workers", "2"]);
    let rx = |lab: &Lab| -> Vec<u64> {
        let st = lab.stat();
        (0..2)
            .map(|i| st["workers"][i]["rx_packets"].as_u64().unwrap_or(0))
            .collect()
    };
    // The kernel deals a flow to a worker by a hash of its addresses and ports; a flow that
    // worker 1 receives wakes it, and then its gate is polled anyway. The case that matters is
    // a flow worker 1 never sees. UDP one way (a TCP connection's acknowledgements could land on
    // the other worker), from a new source port each try until one lands on worker 0 (each
    // does with probability 1/2): 15 Mbit/s offered to `a` alone.
    for _ in 0..12 {
        let before = rx(&lab);
        let t0 = Instant::now();
        let sink = udp_sink(&lab, &[7401], t0, 1.8);
        let src = udp_source(&lab, 7401, 15e6, 1000, t0, 0.0, 1.6);
        src.join().unwrap();
        let got = sink.join().unwrap();
        let after = rx(&lab);
        let (w0, w1) = (after[0] - before[0], after[1] - before[1]);
        if w1 * 10 > w0 {
            continue;
        }
        let bps = frame_rate(&got[0], 0.6, 1.6);
        assert!(
            (9.7e6..=10.2e6).contains(&bps),
            "{bps} bit/s with worker 1 idle ({w1} frames against {w0}): its shard's share did \
             not reach the busy one"
        );
        return;
    }
    panic!("twelve flows in a row were dealt to worker 1");
}

/// The V3 (block) receive ring still shapes exactly; its frames arrive in retired blocks.
#[test]
fn tpacket_v3_receive_ring_shapes_too() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--rx-ring", "v3"]);
    let bps = tcp_goodput(&lab, 2.0);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
    let st = lab.stat();
    let ifs = &st["interfaces"];
    assert!(ifs[0]["rx_blocks"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
}

/// Receives UDP on `ports` in namespace c for `secs`; per port, (seconds since `t0`, payload
/// bytes, datagram id) of every datagram.
type Arrivals = Vec<Vec<(f64, usize, u64)>>;

fn udp_sink(
    lab: &Lab,
    ports: &'static [u16],
    t0: Instant,
    secs: f64,
) -> std::thread::JoinHandle<Arrivals> {
    let c = lab.c.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        in_ns(&c, move || {
            let socks: Vec<UdpSocket> = ports
                .iter()
                .map(|p| {
                    let s = UdpSocket::bind(("10.77.0.2", *p)).unwrap();
                    s.set_nonblocking(true).unwrap();
                    s
                })
                .collect();
            tx.send(()).unwrap();
            let mut got: Arrivals = vec![Vec::new(); ports.len()];
            let mut buf = vec![0u8; 65536];
            while t0.elapsed().as_secs_f64() < secs {
                let mut any = false;
                for (i, s) in socks.iter().enumerate() {
                    while let Ok(n) = s.recv(&mut buf) {
                        let id = u64::from_be_bytes(buf[..8].try_into().unwrap());
                        got[i].push((t0.elapsed().as_secs_f64(), n, id));
                        any = true;
                    }
                }
                if !any {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            got
        })
    });
    rx.recv().unwrap();
    h
}

/// Sends `payload`-byte datagrams from a to `port` at `bps` (UDP payload bits) between `from` and
/// `to` seconds after `t0`; returns how many the kernel accepted. Each carries its number.
fn udp_source(
    lab: &Lab,
    port: u16,
    bps: f64,
    payload: usize,
    t0: Instant,
    from: f64,
    to: f64,
) -> std::thread::JoinHandle<u64> {
    let a = lab.a.clone();
    std::thread::spawn(move || {
        in_ns(&a, move || {
            let s = UdpSocket::bind("10.77.0.1:0").unwrap();
            let mut buf = vec![0u8; payload];
            let gap = payload as f64 * 8.0 / bps;
            while t0.elapsed().as_secs_f64() < from {
                std::thread::sleep(Duration::from_millis(1));
            }
            let start = t0.elapsed().as_secs_f64();
            let mut sent = 0u64;
            loop {
                let now = t0.elapsed().as_secs_f64();
                if now >= to {
                    break;
                }
                // Catch up in small bursts to the planned schedule.
                while (sent as f64) * gap <= now - start {
                    buf[..8].copy_from_slice(&sent.to_be_bytes());
                    if s.send_to(&buf, ("10.77.0.2", port)).is_ok() {
                        sent += 1;
                    } else {
                        break;
                    }
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            sent
        })
    })
}

/// Frame bits per second (payload + 42 bytes of UDP, IPv4 and Ethernet headers, at least the
/// 60-byte minimum frame) that arrived in [from, to): the bytes the shaper charges.
fn frame_rate(arr: &[(f64, usize, u64)], from: f64, to: f64) -> f64 {
    let b: usize = arr
        .iter()
        .filter(|(t, _, _)| *t >= from && *t < to)
        .map(|(_, n, _)| (n + 42).max(60))
        .sum();
    b as f64 * 8.0 / (to - from)
}

fn within(x: f64, want: f64, tol: f64) -> bool {
    (x - want).abs() <= want * tol
}

/// Queues hold ~0.3-0.5 s at the class rates, so a sender thread that a loaded 2-core machine
/// stalls for a moment does not empty its class; `a`'s (80 packets) drains within 0.4 s of
/// its stop, before the borrowing window.
const THREE_CLASSES: &str = r#"
qdisc = "htb"
default = "c"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "a"
parent = "root"
rate = "2mbit"
ceil = "10mbit"
leaf = { type = "pfifo", limit = 80 }
[[class]]
name = "b"
parent = "root"
rate = "3mbit"
ceil = "10mbit"
leaf = { type = "pfifo", limit = 300 }
[[class]]
name = "c"
parent = "root"
rate = "5mbit"
ceil = "10mbit"
leaf = { type = "pfifo", limit = 300 }
[[filter]]
class = "a"
protocol = "udp"
dst_port = "7001"
[[filter]]
class = "b"
protocol = "udp"
dst_port = "7002"
[[filter]]
class = "c"
protocol = "udp"
dst_port = "7003"
"#;

#[test]
fn three_udp_classes_get_their_rates_and_borrow_when_one_stops() {
    three_classes(1);
}

/// The shared parent across workers: `a` and `c` on worker 0, `b` on worker 1 (round robin),
/// the root's 10 Mbit/s shared through the shards' gates and pool (core/src/shard): the same
/// rates, the same borrowing, within the same 2 %.
#[test]
fn two_workers_share_the_root_rate_and_borrow_across_shards() {
    three_classes(2);
}

/// `--rx-split direction`: worker 0 alone receives on the first interface and worker 1 on the
/// second (each transmits on the other); the shards, their shared root and the hand-over of a
/// frame to the worker owning its class are the same, so are the rates and the borrowing.
#[test]
fn a_worker_per_direction_shares_the_root_rate_and_borrows_across_shards() {
    three_classes_with(2, &["--rx-split", "direction"]);
}

/// `--rx-coalesce-us 1000`: 200-byte datagrams at 21 Mbit/s (≈ 13,000 a second, 13 in a
/// coalescing time: above coalesce.rs's 4) make the loop sleep up to 1 ms after its thin
/// turns, but never past the margin before a departure: the classes keep their rates and
/// their borrowing within the same 2 %, and `stat` counts the sleeps. A value above the 1 ms
/// bound is refused before anything starts.
#[test]
fn receive_coalescing_keeps_the_rates_and_the_borrowing() {
    let Some(lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", THREE_CLASSES);
    let (code, err) = lab.run_refused(&p, &["--rx-coalesce-us", "5000"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("--rx-coalesce-us"), "{err}");
    drop(lab);
    let st = three_classes_sized(1, &["--rx-coalesce-us", "1000"], 200).expect("the testbed");
    let slept = st["rx_coalesced"].as_u64().unwrap_or(0);
    eprintln!("coalescing sleeps: {slept}");
    assert!(slept > 100, "receive coalescing never slept: {slept}");
}

fn three_classes(workers: usize) {
    three_classes_with(workers, &[]);
}

fn three_classes_with(workers: usize, extra: &[&str]) {
    three_classes_sized(workers, extra, 1000);
}

/// The three classes with UDP datagrams of `size` bytes; returns `stat` at the end.
fn three_classes_sized(workers: usize, extra: &[&str], size: usize) -> Option<Value> {
    let mut lab = Lab::new()?;
    let p = lab.write_policy("p.toml", THREE_CLASSES);
    let w = workers.to_string();
    let mut args = vec!["--workers", &w];
    args.extend_from_slice(extra);
    lab.start_with(&p, &args);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7001, 7002, 7003], t0, 5.0);
    // Each class is offered 7 Mbit/s (21 Mbit/s into 10): all three are overloaded.
    let srcs: Vec<_> = [(7001, 2.6), (7002, 4.6), (7003, 4.6)]
        .iter()
        .map(|&(port, to)| udp_source(&lab, port, 7e6, size, t0, 0.0, to))
        .collect();
    for s in srcs {
        s.join().unwrap();
    }
    let st = lab.stat();
    let got = sink.join().unwrap();
    let r: Vec<f64> = got.iter().map(|a| frame_rate(a, 1.0, 2.5)).collect();
    eprintln!(
        "all overloaded: a {:.3} b {:.3} c {:.3} Mbit/s",
        r[0] / 1e6,
        r[1] / 1e6,
        r[2] / 1e6
    );
    for (x, want) in r.iter().zip([2e6, 3e6, 5e6]) {
        assert!(within(*x, want, 0.02), "{x} not within 2 % of {want}");
    }
    // a stopped at 2.6 s: b and c borrow its 2 Mbit/s and keep the link full.
    let b = frame_rate(&got[1], 3.2, 4.5);
    let c = frame_rate(&got[2], 3.2, 4.5);
    eprintln!("a stopped: b {:.3} c {:.3} Mbit/s", b / 1e6, c / 1e6);
    assert!(within(b + c, 10e6, 0.02), "b+c {}: {st}", b + c);
    if workers == 1 {
        // HTB splits a's share by quantum: b 3.75, c 6.25 Mbit/s.
        assert!(b > 3.3e6 && c > 5.5e6, "no borrowing: b {b} c {c}");
    } else {
        // Across shards the spare goes first to the shard whose guarantee it is (a's shard,
        // holding c; core/src/shard, "Differences from one HTB"): each keeps at least its rate
        // and the root stays full.
        assert!(
            b > 2.94e6 && c > 4.9e6,
            "a class lost its rate: b {b} c {c}"
        );
    }
    if workers == 1 {
        // Across shards the root lends through the pool, not as HTB's `lend`.
        assert!(class(&st, "b")["borrowed"].as_u64().unwrap() > 0, "{st}");
    }
    assert!(class(&st, "root")["lended"].as_u64().is_some());
    assert_eq!(st["interfaces"][0]["rx_ring_drops"], 0, "{st}");
    Some(st)
}

/// A machine too busy to run the shaper on time (SIGSTOP for 6 ms of every 30, about what a
/// loaded CPU does to an ordinary thread): by default the loop replays the missed time when it
/// comes back and the class keeps its rate; with `--catch-up-ms 0` its bucket (about 2 ms at 10
/// Mbit/s) overflows at every pause and the class loses about an eighth of its rate, which is
/// what a late watchdog does to the kernel's HTB.
#[test]
fn a_paused_shaper_catches_up_its_rate_unless_told_not_to() {
    let on = paused_rate(&[]);
    let off = paused_rate(&["--catch-up-ms", "0"]);
    let (Some((on, turns)), Some((off, off_turns))) = (on, off) else {
        return;
    };
    eprintln!(
        "paused 6 ms in 30: catch-up {:.3} Mbit/s ({turns} turns replayed), none {:.3} Mbit/s",
        on / 1e6,
        off / 1e6
    );
    assert!(within(on, 10e6, 0.01), "with catch-up: {on}");
    assert!(turns > 0, "no turn replayed");
    assert!(
        off < 0.95 * 10e6,
        "without catch-up the rate was kept: {off}"
    );
    assert_eq!(off_turns, 0);
}

/// 10 Mbit/s class offered 13 Mbit/s of UDP while the shaper is paused 6 ms every 30 ms; the
/// frame rate at the sink over [1, 3) s and the shaper's replayed turns.
fn paused_rate(extra: &[&str]) -> Option<(f64, u64)> {
    let mut lab = Lab::new()?;
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, extra);
    let pid = lab.shaper.as_ref().unwrap().id() as i32;
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7001], t0, 3.2);
    let src = udp_source(&lab, 7001, 13e6, 1000, t0, 0.0, 3.2);
    while t0.elapsed().as_secs_f64() < 3.1 {
        std::thread::sleep(Duration::from_millis(24));
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(6));
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
    src.join().unwrap();
    let got = sink.join().unwrap();
    let st = lab.stat();
    Some((
        frame_rate(&got[0], 1.0, 3.0),
        st["catch_up_turns"].as_u64().unwrap(),
    ))
}

const PRIO_BULK: &str = r#"
qdisc = "htb"
default = "bulk"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "interactive"
parent = "root"
rate = "1mbit"
ceil = "10mbit"
prio = 0
[[class]]
name = "bulk"
parent = "root"
rate = "9mbit"
ceil = "10mbit"
prio = 1
leaf = { type = "pfifo", limit = 200 }
[[filter]]
class = "interactive"
protocol = "udp"
dst_port = "7100"
"#;

/// Echo server in c on `port` for `secs`; client in a sends `n` probes `gap` apart; RTTs in ms
/// (a lost probe counts as 1000 ms).
fn udp_rtts(lab: &Lab, port: u16, n: usize, gap: Duration) -> Vec<f64> {
    let c = lab.c.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let echo = std::thread::spawn(move || {
        in_ns(&c, move || {
            let s = UdpSocket::bind(("10.77.0.2", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            tx.send(()).unwrap();
            let mut buf = [0u8; 64];
            while !stop2.load(Ordering::SeqCst) {
                if let Ok((k, from)) = s.recv_from(&mut buf) {
                    let _ = s.send_to(&buf[..k], from);
                }
            }
        })
    });
    rx.recv().unwrap();
    let a = lab.a.clone();
    let rtts = in_ns(&a, move || {
        let s = UdpSocket::bind("10.77.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        for i in 0..n as u64 {
            let t = Instant::now();
            s.send_to(&i.to_be_bytes(), ("10.77.0.2", port)).unwrap();
            let mut rtt = 1000.0;
            while t.elapsed() < Duration::from_millis(300) {
                match s.recv(&mut buf) {
                    Ok(8) if buf[..8] == i.to_be_bytes() => {
                        rtt = t.elapsed().as_secs_f64() * 1e3;
                        break;
                    }
                    Ok(_) => continue,
                    Err(_) => break,
                }
            }
            out.push(rtt);
            std::thread::sleep(gap);
        }
        out
    });
    stop.store(true, Ordering::SeqCst);
    echo.join().unwrap();
    rtts
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[test]
fn priority_class_rtt_stays_low_under_saturating_bulk() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", PRIO_BULK);
    lab.start(&p);
    let t0 = Instant::now();
    // 50 Mbit/s of bulk into a 10 Mbit/s link: five times the link, so that the bulk queue
    // stays full even when a busy machine delays the sender's thread now and then. It runs
    // until every probe is done: a probe the full queue drops waits 300 ms for its echo, so the
    // 15 through the bulk class can take 4.5 s after the 0.5 s warm-up and the ~0.6 s of
    // interactive probes (with 3.2 s the queue drained under the last probes when more than
    // half of the first ones were lost, and the bulk median fell to 12 ms).
    let bulk = udp_source(&lab, 7200, 50e6, 1400, t0, 0.0, 6.0);
    std::thread::sleep(Duration::from_millis(500));
    let prio = udp_rtts(&lab, 7100, 40, Duration::from_millis(15));
    let through_bulk = udp_rtts(&lab, 7201, 15, Duration::from_millis(15));
    bulk.join().unwrap();
    let (mp, mb) = (median(&prio), median(&through_bulk));
    eprintln!("RTT under load: interactive median {mp:.2} ms, bulk class median {mb:.2} ms");
    let st = lab.stat();
    assert!(
        class(&st, "bulk")["drops"].as_u64().unwrap() > 0,
        "bulk not saturated: {st}"
    );
    assert!(mp < 5.0, "interactive RTT {mp} ms: {prio:?}");
    assert!(mb > 4.0 * mp && mb > 20.0, "bulk RTT {mb} ms vs {mp}");
}

const TWO_CLASSES: &str = r#"
qdisc = "htb"
default = "rest"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "a"
parent = "root"
rate = "3mbit"
ceil = "3mbit"
leaf = { type = "pfifo", limit = 300 }
[[class]]
name = "b"
parent = "root"
rate = "6mbit"
ceil = "6mbit"
leaf = { type = "pfifo", limit = 300 }
[[class]]
name = "rest"
parent = "root"
rate = "1mbit"
[[filter]]
class = "a"
protocol = "udp"
dst_port = "6001"
[[filter]]
class = "b"
protocol = "udp"
dst_port = "6002"
"#;

fn moved_and_dropped(out: &str) -> (u64, u64) {
    // "...: moved N queued packets, dropped M; kept ..."
    let num_after = |k: &str| -> u64 {
        let i = out.find(k).unwrap_or_else(|| panic!("no `{k}` in {out}")) + k.len();
        out[i..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (num_after("moved"), num_after("dropped"))
}

#[test]
fn class_change_and_reload_during_traffic_lose_no_queued_packet() {
    change_and_reload_lose_nothing("packet", 1);
}

#[test]
fn class_change_and_reload_under_af_xdp_lose_no_queued_packet() {
    change_and_reload_lose_nothing("xdp", 1);
}

/// The same with two workers (`--workers 2`): the tree's top-level classes are dealt to two
/// threads, a frame received by the other one is handed over, and `stat`, `class change` and
/// `reload` see one tree.
#[test]
fn two_workers_lose_no_queued_packet_across_class_change_and_reload() {
    change_and_reload_lose_nothing("packet", 2);
}

/// Two workers over AF_XDP: the veths get two queues, each worker binds one on each side.
#[test]
fn two_workers_over_af_xdp_lose_no_queued_packet() {
    change_and_reload_lose_nothing("xdp", 2);
}

fn change_and_reload_lose_nothing(io: &str, workers: usize) {
    let Some(mut lab) = Lab::with_queues(workers as u32) else {
        return;
    };
    let p = lab.write_policy("p.toml", TWO_CLASSES);
    let w = workers.to_string();
    lab.start_with(&p, &["--io", io, "--workers", &w]);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[6001, 6002], t0, 4.5);
    let sa = udp_source(&lab, 6001, 5e6, 1000, t0, 0.0, 2.4);
    let sb = udp_source(&lab, 6002, 10e6, 1000, t0, 0.0, 2.4);
    std::thread::sleep(Duration::from_millis(800));
    let (code, out, err) = lab.cli(&["class", "change", "b", "--rate", "4mbit", "--ceil", "4mbit"]);
    assert_eq!(code, 0, "class change failed: {out}{err}");
    let (moved, dropped) = moved_and_dropped(&out);
    eprintln!("class change: {out}");
    assert!(moved > 0, "nothing was queued at the change: {out}");
    assert_eq!(dropped, 0, "{out}");
    assert_eq!(class(&lab.stat(), "b")["rate_bps"], 4_000_000);
    std::thread::sleep(Duration::from_millis(600));
    let p2 = lab.write_policy("p2.toml", &TWO_CLASSES.replace("3mbit", "2mbit"));
    let (code, out, err) = lab.cli(&["reload", p2.to_str().unwrap()]);
    assert_eq!(code, 0, "reload failed: {out}{err}");
    let (moved, dropped) = moved_and_dropped(&out);
    eprintln!("reload: {out}");
    assert!(moved > 0 && dropped == 0, "{out}");
    let st = lab.stat();
    assert_eq!(class(&st, "a")["rate_bps"], 2_000_000);
    // The reloaded file has b at 6 Mbit/s again.
    assert_eq!(class(&st, "b")["rate_bps"], 6_000_000);
    let offered = [sa.join().unwrap(), sb.join().unwrap()];
    // Let the queues drain (300 packets at 2 Mbit/s ≈ 1.2 s).
    let t = Instant::now();
    let st = loop {
        let st = lab.stat();
        if st["directions"][0]["backlog_packets"] == 0 {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "backlog does not drain: {st}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let got = sink.join().unwrap();
    let q = &st["directions"][0]["qdisc"];
    let n = |k: &str| q[k].as_u64().unwrap();
    assert_eq!(
        n("enqueued"),
        n("dequeued") + n("dropped") + n("backlog_packets"),
        "conservation: {q}"
    );
    for (i, name) in ["a", "b"].iter().enumerate() {
        let cl = class(&st, name);
        let sent = cl["sent_packets"].as_u64().unwrap();
        let drops = cl["drops"].as_u64().unwrap();
        eprintln!(
            "class {name}: offered {} sent {sent} dropped {drops} received {}",
            offered[i],
            got[i].len()
        );
        // Every datagram offered is either sent or counted as a drop; every one sent arrived.
        assert_eq!(offered[i], sent + drops, "class {name} lost packets: {st}");
        assert_eq!(
            got[i].len() as u64,
            sent,
            "class {name}: sent but not received"
        );
    }
    let ifs = &st["interfaces"];
    assert!(ifs[0]["io"].as_str().unwrap().starts_with(io), "{st}");
    let ws = st["workers"].as_array().map_or(0, |w| w.len());
    if workers > 1 {
        assert_eq!(ws, workers, "one row per worker: {st}");
        let sum = |k: &str| -> u64 {
            st["workers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w[k].as_u64().unwrap())
                .sum()
        };
        eprintln!(
            "workers: {} handed over, {} taken over, {} refused (inbox full), {} lost",
            sum("handed_off"),
            sum("taken_over"),
            sum("handoff_full"),
            sum("handoff_lost")
        );
        assert_eq!(sum("handed_off"), sum("taken_over"), "{st}");
        assert_eq!(sum("handoff_full") + sum("handoff_lost"), 0, "{st}");
        // Both workers scheduled traffic: a and b live on different shards.
        for w in st["workers"].as_array().unwrap() {
            assert!(
                w["sent_packets"].as_u64().unwrap() > 0,
                "an idle worker: {st}"
            );
        }
        // SIGTERM: the control thread stops every worker's receiving, then each drains and
        // ends; the process exits 0 and removes its socket.
        lab.sigterm_exits_cleanly(Duration::from_secs(5));
    } else {
        assert_eq!(ws, 0, "{st}");
    }
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
    assert_eq!(ifs[1]["tx_errors"], 0, "{st}");
}

#[test]
fn bad_reload_keeps_old_policy_and_says_what_check_says() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", TWO_CLASSES);
    lab.start(&p);
    let bad = lab.write_policy(
        "bad.toml",
        &TWO_CLASSES.replace("rate = \"3mbit\"", "rate = \"fast\""),
    );
    let check = Command::new(env!("CARGO_BIN_EXE_linkshare"))
        .arg("check")
        .arg(&bad)
        .output()
        .unwrap();
    let check_err = String::from_utf8_lossy(&check.stderr).trim().to_string();
    assert!(check_err.contains("bad.toml:"), "{check_err}");
    let (code, _, err) = lab.cli(&["reload", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&check_err),
        "reload's error differs from check's:\n--- check\n{check_err}\n--- reload\n{err}"
    );
    assert!(err.contains("the running policy stays"), "{err}");
    let (code, _, err) = lab.cli(&["class", "change", "a", "--rate", "lots"]);
    assert_eq!(code, 1, "{err}");
    let st = lab.stat();
    assert_eq!(class(&st, "a")["rate_bps"], 3_000_000);
    assert_eq!(class(&st, "b")["rate_bps"], 6_000_000);
    // Still forwarding under the old policy.
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[6001], t0, 1.0);
    udp_source(&lab, 6001, 1e6, 500, t0, 0.1, 0.6)
        .join()
        .unwrap();
    assert!(
        !sink.join().unwrap()[0].is_empty(),
        "no traffic after a rejected reload"
    );
    // The control socket is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(lab.control())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "control socket mode {mode:o}");
}

#[test]
fn reverse_policy_shapes_the_reverse_direction() {
    reverse_shaped(1);
}

/// With two workers the reverse policy is cut into shards too (each worker owns one shard of
/// each direction).
#[test]
fn reverse_policy_shapes_the_reverse_direction_with_two_workers() {
    reverse_shaped(2);
}

/// c -> a UDP to port 6100 through a reverse policy whose class for it has 4 Mbit/s.
fn reverse_shaped(workers: usize) {
    let Some(mut lab) = Lab::new() else { return };
    let (fwd, rev) = if workers == 1 {
        (ONE_CLASS.to_string(), ONE_CLASS.replace("10mbit", "4mbit"))
    } else {
        (
            THREE_CLASSES.to_string(),
            TWO_CLASSES
                .replace("6001", "6100")
                .replace("\"3mbit\"", "\"4mbit\"")
                .replace("\"6mbit\"", "\"5mbit\""),
        )
    };
    let p = lab.write_policy("p.toml", &fwd);
    let rp = lab.write_policy("r.toml", &rev);
    let w = workers.to_string();
    lab.start_with(
        &p,
        &["--reverse-policy", rp.to_str().unwrap(), "--workers", &w],
    );
    // c -> a: bind the sink in a, send from c.
    let a = lab.a.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = std::thread::spawn(move || {
        in_ns(&a, move || {
            let s = UdpSocket::bind("10.77.0.1:6100").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            tx.send(()).unwrap();
            let mut buf = [0u8; 2048];
            let mut arr = Vec::new();
            let t0 = Instant::now();
            while let Ok(n) = s.recv(&mut buf) {
                arr.push((t0.elapsed().as_secs_f64(), n, 0u64));
            }
            arr
        })
    });
    rx.recv().unwrap();
    let c = lab.c.clone();
    in_ns(&c, move || {
        let s = UdpSocket::bind("10.77.0.2:0").unwrap();
        let buf = vec![0u8; 1000];
        let t0 = Instant::now();
        let mut i = 0u64;
        while t0.elapsed() < Duration::from_millis(2000) {
            let _ = s.send_to(&buf, "10.77.0.1:6100");
            i += 1;
            if i.is_multiple_of(4) {
                std::thread::sleep(Duration::from_micros(1000)); // ~30 Mbit/s offered
            }
        }
    });
    let arr = sink.join().unwrap();
    let r = frame_rate(&arr, 0.5, 1.9);
    eprintln!("reverse direction {:.3} Mbit/s", r / 1e6);
    assert!(within(r, 4e6, 0.03), "reverse rate {r}");
    let st = lab.stat();
    assert_eq!(st["directions"][1]["shaped"], true, "{st}");
    let name = if workers == 1 { "root" } else { "a" };
    let row = st["directions"][1]["classes"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name).cloned())
        .unwrap_or_default();
    assert_eq!(row["rate_bps"], 4_000_000, "{st}");
}

#[test]
fn namespaces_are_removed_even_when_a_test_panics() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let n2 = names.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let Some(mut lab) = Lab::new() else { return };
        n2.lock()
            .unwrap()
            .extend([lab.a.clone(), lab.r.clone(), lab.c.clone()]);
        let p = lab.write_policy("p.toml", ONE_CLASS);
        lab.start(&p);
        panic!("deliberate panic with the shaper running");
    }));
    let names = names.lock().unwrap().clone();
    if names.is_empty() {
        return; // `ip netns` unavailable: Lab::new printed why
    }
    assert!(r.is_err());
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    for n in &names {
        assert!(
            !list.split_whitespace().any(|w| w == n),
            "namespace {n} left behind: {list}"
        );
    }
}

/// Send raw Ethernet frames out of `dev` (current namespace).
fn send_raw(dev: &str, frames: &[Vec<u8>]) {
    let c = std::ffi::CString::new(dev).unwrap();
    // SAFETY: valid C string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert!(idx > 0);
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    assert!(fd >= 0);
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = idx as i32;
    sll.sll_halen = 6;
    sll.sll_addr = [0xff; 8];
    for f in frames {
        // SAFETY: buffers valid for their lengths.
        let n = unsafe {
            libc::sendto(
                fd,
                f.as_ptr().cast(),
                f.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert!(n > 0, "raw send failed");
    }
    // SAFETY: closing our fd.
    unsafe { libc::close(fd) };
}

fn ipv4_frame(ihl: u8, total_len: u16, frame_len: usize) -> Vec<u8> {
    let mut f = vec![0u8; frame_len];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12] = 0x08;
    f[13] = 0x00;
    f[14] = 0x40 | ihl;
    f[16..18].copy_from_slice(&total_len.to_be_bytes());
    f[23] = 17;
    f
}

#[test]
fn malformed_frames_are_counted_and_sigterm_exits_cleanly() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start(&p);
    let va = lab.va.clone();
    let before = lab.stat();
    let mut first_frag = ipv4_frame(5, 46, 60);
    first_frag[20] = 0x20; // MF, offset 0
    let mut later_frag = ipv4_frame(5, 46, 60);
    later_frag[21] = 0x08; // offset 64 bytes, last fragment
    let mut v6 = vec![0u8; 14 + 40];
    v6[12] = 0x86;
    v6[13] = 0xdd;
    v6[14] = 0x60;
    v6[18..20].copy_from_slice(&1000u16.to_be_bytes()); // payload length beyond the frame
    v6[20] = 59;
    let mut lldp = vec![0u8; 60];
    lldp[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]);
    lldp[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    lldp[12] = 0x88;
    lldp[13] = 0xcc;
    let mut truncated = ipv4_frame(5, 46, 60);
    truncated.truncate(20); // Ethernet header and 6 bytes of IPv4
    let a = lab.a.clone();
    in_ns(&a, move || {
        send_raw(
            &va,
            &[
                ipv4_frame(3, 46, 60),   // bad IHL
                ipv4_frame(5, 1400, 60), // total length beyond the frame
                ipv4_frame(5, 10, 60),   // total length below the header
                truncated,
                v6,
                ipv4_frame(5, 46, 60), // fine (padded to 60)
                ipv4_frame(5, 46, 60), // fine
                first_frag,
                later_frag,
                lldp,
            ],
        )
    });
    std::thread::sleep(Duration::from_millis(200));
    let st = lab.stat();
    let m = &st["interfaces"][0]["malformed"];
    assert_eq!(m["bad_ihl"], 1, "{st}");
    assert_eq!(m["bad_ipv4_total_length"], 2, "{st}");
    assert_eq!(m["truncated_ipv4"], 1, "{st}");
    assert_eq!(m["bad_ipv6_payload_length"], 1, "{st}");
    assert_eq!(st["interfaces"][0]["fragments"], 2, "{st}");
    let sent = |s: &Value| class(s, "root")["sent_packets"].as_u64().unwrap();
    assert!(
        sent(&st) >= sent(&before) + 4,
        "fine frames and fragments must pass: {st}"
    );
    let non_ip = |s: &Value| s["interfaces"][0]["non_ip_passed"].as_u64().unwrap();
    assert!(non_ip(&st) > non_ip(&before), "LLDP must pass: {st}");

    // SIGHUP reloads the file given at start.
    std::fs::write(&p, ONE_CLASS.replace("10mbit", "5mbit")).unwrap();
    let pid = lab.shaper.as_ref().unwrap().id() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    let t0 = Instant::now();
    while class(&lab.stat(), "root")["rate_bps"] != 5_000_000 {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "SIGHUP did not reload"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        class(&lab.stat(), "root")["sent_packets"].as_u64().unwrap() >= 2,
        "counters kept"
    );

    lab.sigterm_exits_cleanly(Duration::from_secs(3));
}

#[test]
fn emulated_delay_applies_after_the_scheduler() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--emulate", "delay=40ms,seed=5"]);
    let c = lab.c.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        in_ns(&c, move || {
            let l = TcpListener::bind("10.77.0.2:5002").unwrap();
            tx.send(()).unwrap();
            let _ = l.accept().unwrap();
        })
    });
    rx.recv().unwrap();
    let a = lab.a.clone();
    let rtt = in_ns(&a, move || {
        let t0 = Instant::now();
        let _s =
            TcpStream::connect_timeout(&"10.77.0.2:5002".parse().unwrap(), Duration::from_secs(3))
                .expect("connect");
        t0.elapsed()
    });
    server.join().unwrap();
    eprintln!("connect took {rtt:?}");
    // SYN goes a -> c through the 40 ms line; the reply comes back unshaped and undelayed
    // (no `reverse_delay`).
    assert!(rtt >= Duration::from_millis(40), "{rtt:?}");
    assert!(rtt < Duration::from_millis(1000), "{rtt:?}");
    let st = lab.stat();
    assert_eq!(st["directions"][0]["emulate"]["lost"], 0, "{st}");
}

/// `reverse_delay` delays the reverse direction too, and `--path-delay` adds a per-host delay in
/// both directions keyed by the host's address: a UDP echo from 10.77.0.1 with 10 ms each way
/// and 5 ms for the host measures 2·(10 + 5) = 30 ms; a second host without a path delay 20 ms.
#[test]
fn reverse_and_per_host_delays_make_the_round_trip() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(
        &p,
        &[
            "--emulate",
            "delay=10ms,reverse_delay=10ms",
            "--path-delay",
            "10.77.0.1=5ms",
            "--path-delay",
            "10.77.0.9=40ms",
        ],
    );
    let rtts = udp_rtts(&lab, 7301, 20, Duration::from_millis(20));
    let m = median(&rtts);
    eprintln!("RTT with path delay: median {m:.2} ms of {rtts:?}");
    assert!((m - 30.0).abs() <= 1.0 + 0.05 * 30.0, "median {m} ms");
    assert!(
        rtts.iter().all(|r| *r >= 30.0),
        "below the emulated delay: {rtts:?}"
    );
    // Another sender address on a, without a path delay: 2·10 ms.
    let (a, va) = (lab.a.clone(), lab.va.clone());
    in_ns(&a, move || {
        let st = Command::new("ip")
            .args(["addr", "add", "10.77.0.3/24", "dev", &va])
            .status()
            .unwrap();
        assert!(st.success());
    });
    let c = lab.c.clone();
    let echo = std::thread::spawn(move || {
        in_ns(&c, move || {
            let s = UdpSocket::bind(("10.77.0.2", 7302)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut buf = [0u8; 16];
            for _ in 0..10 {
                let Ok((k, from)) = s.recv_from(&mut buf) else {
                    return;
                };
                let _ = s.send_to(&buf[..k], from);
            }
        })
    });
    let a = lab.a.clone();
    let plain = in_ns(&a, move || {
        let s = UdpSocket::bind("10.77.0.3:0").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 16];
        std::thread::sleep(Duration::from_millis(100));
        for i in 0..10u64 {
            let t = Instant::now();
            s.send_to(&i.to_be_bytes(), ("10.77.0.2", 7302)).unwrap();
            if s.recv(&mut buf).is_ok() {
                out.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        out
    });
    echo.join().unwrap();
    let m2 = median(&plain);
    eprintln!("RTT without path delay: median {m2:.2} ms of {plain:?}");
    assert!((m2 - 20.0).abs() <= 1.0 + 0.05 * 20.0, "median {m2} ms");
    let st = lab.stat();
    for d in 0..2 {
        let e = &st["directions"][d]["emulate"];
        assert_eq!(e["delay_ns"], 10_000_000, "{st}");
        assert_eq!(e["path_delays"].as_array().map(Vec::len), Some(2), "{st}");
        assert_eq!(e["line_full"], 0, "{st}");
        assert!(e["limit_bytes"].as_u64().unwrap() >= 256 * 1024, "{st}");
    }
}

/// Figures for docs/router.md (not part of the suite):
/// `cargo test -p linkshare --test router -- --ignored --nocapture measure_forwarding_and_lateness`
#[test]
#[ignore]
fn measure_forwarding_and_lateness() {
    for (label, policy) in [
        (
            "pfifo",
            "qdisc = { type = \"pfifo\", limit = 10000 }\n".to_string(),
        ),
        ("htb 1gbit", ONE_CLASS.replace("10mbit", "1gbit")),
    ] {
        let Some(mut lab) = Lab::new() else { return };
        let p = lab.write_policy("p.toml", &policy);
        lab.start(&p);
        let t0 = Instant::now();
        let sink = udp_sink(&lab, &[7300], t0, 3.5);
        let a = lab.a.clone();
        let offered = in_ns(&a, move || {
            let s = UdpSocket::bind("10.77.0.1:0").unwrap();
            s.connect("10.77.0.2:7300").unwrap();
            let mut buf = [0u8; 18]; // 60-byte frames
            let mut n = 0u64;
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(3) {
                buf[..8].copy_from_slice(&n.to_be_bytes());
                if s.send(&buf).is_ok() {
                    n += 1;
                }
            }
            n
        });
        let got = sink.join().unwrap();
        let st = lab.stat();
        let i0 = &st["interfaces"][0];
        eprintln!(
            "{label}: offered {offered} frames of 60 bytes in 3 s ({:.0} kpps), received {} ({:.0} kpps); shaper rx {} ring drops {} rx blocks {}, tx kicks {} for {} frames",
            offered as f64 / 3e3,
            got[0].len(),
            got[0].len() as f64 / 3e3,
            i0["rx_packets"],
            i0["rx_ring_drops"],
            i0["rx_blocks"],
            st["interfaces"][1]["tx_kicks"],
            st["interfaces"][1]["tx_packets"],
        );
    }
    // Pacing lateness with three classes overloading 10 Mbit/s.
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", THREE_CLASSES);
    lab.start(&p);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7001, 7002, 7003], t0, 5.0);
    let srcs: Vec<_> = [7001, 7002, 7003]
        .iter()
        .map(|&port| udp_source(&lab, port, 7e6, 1000, t0, 0.0, 5.0))
        .collect();
    for s in srcs {
        s.join().unwrap();
    }
    sink.join().unwrap();
    let st = lab.stat();
    eprintln!(
        "pacing lateness at 10 Mbit/s, 1028-byte IP packets: {}",
        st["lateness_ns"]
    );
}

const CBQ_TWO: &str = r#"
qdisc = "cbq"
default = "b"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "a"
parent = "root"
rate = "3mbit"
borrow = false
leaf = { type = "pfifo", limit = 40 }
[[class]]
name = "b"
parent = "root"
rate = "7mbit"
borrow = true
leaf = { type = "pfifo", limit = 40 }
[[filter]]
class = "a"
protocol = "udp"
dst_port = "7301"
"#;

/// CBQ runs in the real shaper through the same interface as in the simulator: two overloaded
/// classes get their allocations, and the one allowed to borrow takes the link when the other
/// stops.
#[test]
fn cbq_classes_get_their_allocations_and_borrow_on_the_real_shaper() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("cbq.toml", CBQ_TWO);
    lab.start(&p);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7301, 7302], t0, 4.6);
    let srcs = [
        udp_source(&lab, 7301, 8e6, 1000, t0, 0.0, 2.6),
        udp_source(&lab, 7302, 12e6, 1000, t0, 0.0, 4.5),
    ];
    for s in srcs {
        s.join().unwrap();
    }
    let st = lab.stat();
    let got = sink.join().unwrap();
    let (a, b) = (frame_rate(&got[0], 1.0, 2.5), frame_rate(&got[1], 1.0, 2.5));
    eprintln!(
        "cbq both overloaded: a {:.3} b {:.3} Mbit/s",
        a / 1e6,
        b / 1e6
    );
    assert!(
        within(a, 3e6, 0.03),
        "a {a} not within 3 % of 3 Mbit/s: {st}"
    );
    assert!(
        within(b, 7e6, 0.03),
        "b {b} not within 3 % of 7 Mbit/s: {st}"
    );
    let alone = frame_rate(&got[1], 3.2, 4.4);
    eprintln!("cbq a stopped: b {:.3} Mbit/s", alone / 1e6);
    assert!(within(alone, 10e6, 0.03), "b alone {alone}: {st}");
}

/// The typed control protocol on the running shaper: `stat --capabilities` reports protocol 1
/// and its requests; an unversioned request of the old untyped protocol gets a version error
/// and the shaper keeps answering; a tree declared breadth-first reads back with the right
/// parents, in `stat --json` and in the human form's indentation.
#[test]
fn control_protocol_versions_capabilities_and_parents_on_the_running_shaper() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy(
        "tree.toml",
        "qdisc = \"htb\"\ndefault = \"a1\"\n\
         [[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
         [[class]]\nname = \"A\"\nparent = \"root\"\nrate = \"5mbit\"\n\
         [[class]]\nname = \"B\"\nparent = \"root\"\nrate = \"5mbit\"\n\
         [[class]]\nname = \"a1\"\nparent = \"A\"\nrate = \"5mbit\"\n\
         [[class]]\nname = \"b1\"\nparent = \"B\"\nrate = \"5mbit\"\n",
    );
    lab.start(&p);
    let (code, out, err) = lab.cli(&["stat", "--capabilities", "--json"]);
    assert_eq!(code, 0, "{err}");
    let hello: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hello["version"], 1, "{hello}");
    assert!(
        hello["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "reload"),
        "{hello}"
    );
    // An old client's request.
    let mut s = std::os::unix::net::UnixStream::connect(lab.control()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"{\"cmd\":\"stat\"}\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&s), &mut line).unwrap();
    let r: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(r["reply"], "error", "{r}");
    assert_eq!(r["kind"], "unsupported_version", "{r}");
    drop(s);
    let st = lab.stat();
    for (name, parent) in [
        ("root", None),
        ("A", Some("root")),
        ("B", Some("root")),
        ("a1", Some("A")),
        ("b1", Some("B")),
    ] {
        let c = class(&st, name);
        assert_eq!(c["parent"].as_str(), parent, "parent of {name}: {st}");
    }
    let (code, out, err) = lab.cli(&["stat"]);
    assert_eq!(code, 0, "{err}");
    let indent = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("class {name} ")))
            .map(|l| l.len() - l.trim_start().len())
            .unwrap_or_else(|| panic!("no class {name} in:\n{out}"))
    };
    assert_eq!(
        [indent("root"), indent("B"), indent("b1")],
        [2, 4, 6],
        "{out}"
    );
    // tc's vocabulary: handles as export tc writes them, rates in tc's units (issue 15 §5).
    assert!(
        out.contains("class b1 (1:5) rate 5Mbit ceil 5Mbit"),
        "{out}"
    );
    let (code, out, err) = lab.cli(&["stat", "--tc"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("class htb 1:5 parent 1:3 leaf 6: prio 0 rate 5Mbit ceil 5Mbit  # b1"),
        "{out}"
    );
    // --json on the commands that change the shaper (issue 15 §4): one object, the typed reply.
    let (code, out, err) = lab.cli(&["class", "change", "b1", "--ceil", "10mbit", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r["reply"], "reloaded", "{r}");
    assert!(r["kept"].as_array().is_some_and(|k| k.len() == 5), "{r}");
    assert_eq!(r["written"], Value::Null, "{r}");
    let bad = lab.write_policy("bad.toml", "qdisc = \"htb\"\n");
    let (code, out, _) = lab.cli(&["reload", bad.to_str().unwrap_or_default(), "--json"]);
    assert_eq!(code, 1, "{out}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(
        (r["reply"].as_str(), r["kind"].as_str()),
        (Some("error"), Some("policy_rejected")),
        "{r}"
    );
}

/// The policy's link layer on the real shaper: an ATM policy (tc-stab semantics) charges each
/// 1514-byte frame 32 cells = 1696 bytes, so a 4 Mbit/s class carries 4 × 1514/1696 = 3.57
/// Mbit/s of frames; without it the same class carries 4 Mbit/s. 4 % apart from each other's
/// figure at most, so the two cannot be mistaken (12 % apart); a quiet run is within ~1 %. A
/// 30 KB burst lets the class make up for a shaper that a loaded machine stalls for a moment.
#[test]
fn atm_link_layer_charges_whole_cells_on_the_real_shaper() {
    let Some(mut lab) = Lab::new() else { return };
    let policy = |keys: &str| {
        format!(
            "qdisc = \"htb\"\ndefault = \"dsl\"\n{keys}\n[[class]]\nname = \"dsl\"\nrate = \"4mbit\"\n\
             burst = \"30k\"\nleaf = {{ type = \"pfifo\", limit = 200 }}\n"
        )
    };
    let measure = |lab: &Lab| {
        let t0 = Instant::now();
        let sink = udp_sink(lab, &[7001], t0, 3.5);
        let src = udp_source(lab, 7001, 8e6, 1472, t0, 0.0, 3.0);
        src.join().unwrap_or_else(|_| panic!("source"));
        let got = sink.join().unwrap_or_else(|_| panic!("sink"));
        frame_rate(&got[0], 1.0, 3.0)
    };
    let mut got = Vec::new();
    for (i, (name, keys, want)) in [
        ("ethernet", "", 4e6),
        (
            "atm",
            "overhead = 0\nlinklayer = \"atm\"",
            4e6 * 1514.0 / 1696.0,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let p = lab.write_policy(&format!("{name}.toml"), &policy(keys));
        if i == 0 {
            lab.start(&p);
        } else {
            // A reload over the control socket: the link layer follows the policy.
            let (code, _, err) = lab.cli(&["reload", p.to_str().unwrap_or_default()]);
            assert_eq!(code, 0, "{err}");
        }
        let r = measure(&lab);
        got.push(format!("{name} {:.3} (want {:.3})", r / 1e6, want / 1e6));
        assert!(within(r, want, 0.04), "Mbit/s of frames: {got:?}");
    }
}
