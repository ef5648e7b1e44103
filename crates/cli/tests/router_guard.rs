//! `linkshare run` guarded against its own users: a control client that never reads or never
//! ends its line cannot stall forwarding, a second instance on the same interfaces is refused
//! with the owner's pid, and `--dev` naming one interface twice or both ends of one veth is
//! refused. Namespaces a, r, c of the lab's testbed; the shaper runs in r.

use std::io::Write;
use std::net::UdpSocket;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The namespace testbed of `linkshare lab` (crate linkshare-lab), with its shared gate
/// (`netns_test_can_run`: skip with the reason, or fail under LINKSHARE_REQUIRE_NETNS=1).
use linkshare_lab::testbed;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Bed {
    shaper: Option<Child>,
    // Dropped after the shaper is killed (Drop below): deletes the namespaces.
    bed: testbed::Testbed,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(mut ch) = self.shaper.take() {
            let _ = ch.kill();
            let _ = ch.wait();
        }
    }
}

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_linkshare")
}

impl Bed {
    fn new() -> Option<Bed> {
        if !testbed::netns_test_can_run() {
            return None;
        }
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        match testbed::Testbed::new() {
            Ok(bed) => Some(Bed {
                shaper: None,
                bed,
                _serial: serial,
            }),
            Err(e) => {
                testbed::netns_test_skipped(&format!("cannot build the testbed: {e:#}"));
                None
            }
        }
    }

    fn control(&self, tag: &str) -> PathBuf {
        self.bed.dir.join(format!("{tag}.sock"))
    }

    /// `linkshare run` in r with `args` (after `run`), its lock files in the scratch directory.
    fn run_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.bed.ns_r, exe(), "run", "--lock-dir"])
            .arg(self.bed.dir.join("locks"))
            .args(args);
        c
    }

    /// Start the shaper bridging r's two interfaces and wait for its control socket.
    fn start(&mut self, policy: &Path) {
        let ctl = self.control("main");
        let ch = self
            .run_cmd(&["--dev", &self.bed.dev_ra, "--dev", &self.bed.dev_rc])
            .arg("--policy")
            .arg(policy)
            .arg("--control")
            .arg(&ctl)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn linkshare run");
        self.shaper = Some(ch);
        let t0 = Instant::now();
        while !ctl.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "shaper did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A policy with `n` leaves under one 100 Mbit/s root (a large `stat` reply).
fn many_classes(n: usize) -> String {
    let mut s = String::from(
        "qdisc = \"htb\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \"100mbit\"\n",
    );
    for i in 0..n {
        s.push_str(&format!(
            "[[class]]\nname = \"c{i}\"\nparent = \"root\"\nrate = \"50kbit\"\nceil = \"100mbit\"\n"
        ));
    }
    s
}

/// UDP from a to c at about 2000 datagrams/s for `secs`; returns the arrival times at c
/// (seconds since `t0`).
fn udp_flow(bed: &testbed::Testbed, t0: Instant, secs: f64) -> Vec<f64> {
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = testbed::spawn_in_ns(&bed.ns_c, move || {
        let s = UdpSocket::bind((testbed::ADDR_C, 7100)).expect("bind sink");
        s.set_read_timeout(Some(Duration::from_millis(50))).ok();
        let _ = tx.send(());
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while t0.elapsed().as_secs_f64() < secs + 0.3 {
            if s.recv(&mut buf).is_ok() {
                got.push(t0.elapsed().as_secs_f64());
            }
        }
        got
    })
    .expect("sink thread");
    rx.recv().expect("sink ready");
    let src = testbed::spawn_in_ns(&bed.ns_a, move || {
        let s = UdpSocket::bind((testbed::ADDR_A, 0)).expect("bind source");
        while t0.elapsed().as_secs_f64() < secs {
            let _ = s.send_to(&[0u8; 200], (testbed::ADDR_C, 7100));
            std::thread::sleep(Duration::from_micros(500));
        }
    })
    .expect("source thread");
    let _ = src.join();
    sink.join().expect("sink")
}

/// The longest gap between consecutive arrivals within [from, to).
fn longest_gap(arrivals: &[f64], from: f64, to: f64) -> f64 {
    let mut last = from;
    let mut worst: f64 = 0.0;
    for &t in arrivals.iter().filter(|t| **t >= from && **t < to) {
        worst = worst.max(t - last);
        last = t;
    }
    worst.max(to - last)
}

#[test]
fn misbehaving_control_clients_do_not_stall_forwarding() {
    let Some(mut b) = Bed::new() else { return };
    let p = b
        .bed
        .write_file("many.toml", &many_classes(1000))
        .expect("write policy");
    b.start(&p);
    b.bed.wait_reachable().expect("reachable");
    let ctl = b.control("main");
    let t0 = Instant::now();
    let misbehave = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        // Asks for the large stat reply (control protocol 1) and never reads it.
        let mut silent = UnixStream::connect(&ctl).expect("connect");
        silent
            .write_all(b"{\"v\":1,\"cmd\":\"stat\"}\n")
            .expect("send stat");
        // Sends one endless line without a newline.
        let mut endless = UnixStream::connect(&ctl).expect("connect");
        endless
            .set_write_timeout(Some(Duration::from_millis(200)))
            .ok();
        let chunk = [b'x'; 4096];
        let mut sent = 0usize;
        while t0.elapsed() < Duration::from_secs(4) {
            match endless.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        (silent, endless, sent)
    });
    let arrivals = udp_flow(&b.bed, t0, 4.5);
    let (_silent, _endless, sent) = misbehave.join().expect("clients");
    let gap = longest_gap(&arrivals, 1.2, 4.4);
    eprintln!(
        "{} datagrams arrived, longest gap {:.3} s after the clients came; endless client wrote {sent} bytes",
        arrivals.len(),
        gap
    );
    assert!(
        gap < 0.3,
        "forwarding stalled {gap:.3} s while control clients misbehaved"
    );
    // The shaper still answers, and counted what it did to the two clients.
    let out = Command::new(exe())
        .args(["stat", "--json", "--control"])
        .arg(b.control("main"))
        .output()
        .expect("stat");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stat json");
    let c = &st["control"];
    assert!(c["slow_dropped"].as_u64() >= Some(1), "{c}");
    assert!(c["oversize_refused"].as_u64() >= Some(1), "{c}");
}

/// Run `cmd` and collect its output; a shaper that starts instead of refusing is stopped after
/// `secs` (and then shows as killed, not as a clean refusal).
fn run_briefly(cmd: &mut Command, secs: u64) -> Output {
    let mut ch = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn linkshare run");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if ch.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = ch.kill();
    ch.wait_with_output().expect("wait for linkshare run")
}

fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_second_instance_on_the_same_interfaces_is_refused_with_the_owners_pid() {
    let Some(mut b) = Bed::new() else { return };
    let p = b
        .bed
        .write_file("one.toml", &many_classes(1))
        .expect("write policy");
    b.start(&p);
    let owner = b.shaper.as_ref().map(Child::id).unwrap_or(0);
    // Same pair, the pair reversed, and one shared interface with another: all refused.
    let ra = b.bed.dev_ra.clone();
    let rc = b.bed.dev_rc.clone();
    for (i, devs) in [[&ra, &rc], [&rc, &ra]].iter().enumerate() {
        let mut cmd = b.run_cmd(&["--dev", devs[0], "--dev", devs[1]]);
        cmd.arg("--policy")
            .arg(&p)
            .arg("--control")
            .arg(b.control(&format!("second{i}")));
        let out = run_briefly(&mut cmd, 3);
        let text = output_text(&out);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains("in use by linkshare"), "{text}");
        // `ip netns exec` runs the shaper as its own child or by exec: the owner is the spawned
        // process or its only child.
        let pid_named = text.contains(&format!("pid {owner}")) || {
            let kids = std::fs::read_to_string(format!("/proc/{owner}/task/{owner}/children"))
                .unwrap_or_default();
            kids.split_whitespace()
                .any(|k| text.contains(&format!("pid {k}")))
        };
        assert!(pid_named, "owner pid {owner} not named: {text}");
    }
    // Once the owner is gone (SIGKILL: no cleanup), its interfaces are free again.
    if let Some(mut ch) = b.shaper.take() {
        let _ = Command::new("kill")
            .args(["-KILL", &ch.id().to_string()])
            .status();
        let _ = ch.wait();
    }
    std::thread::sleep(Duration::from_millis(200));
    b.start(&p);
}

#[test]
fn the_same_interface_twice_or_both_ends_of_one_veth_are_refused() {
    let Some(b) = Bed::new() else { return };
    let p = b
        .bed
        .write_file("one.toml", &many_classes(1))
        .expect("write policy");
    testbed::ip(&[
        "-n",
        &b.bed.ns_r,
        "link",
        "add",
        "lsloop0",
        "type",
        "veth",
        "peer",
        "name",
        "lsloop1",
    ])
    .expect("veth in r");
    for d in ["lsloop0", "lsloop1"] {
        testbed::ip(&["-n", &b.bed.ns_r, "link", "set", d, "up"]).expect("up");
    }
    let ra = b.bed.dev_ra.clone();
    let cases: [(&str, &str, &str); 3] = [
        (&ra, &ra, "same interface"),
        ("lsloop0", "lsloop1", "two ends of one veth"),
        ("lsloop1", "lsloop0", "two ends of one veth"),
    ];
    for (i, (d0, d1, want)) in cases.iter().enumerate() {
        let mut c = b.run_cmd(&["--dev", d0, "--dev", d1]);
        c.arg("--policy")
            .arg(&p)
            .arg("--control")
            .arg(b.control(&format!("loop{i}")));
        let out = run_briefly(&mut c, 3);
        let text = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "--dev {d0} --dev {d1}: {text}");
        assert!(text.contains(want), "--dev {d0} --dev {d1}: {text}");
    }
}

/// The rate of class `name` in the forward direction of a `stat --json`.
fn class_rate(ctl: &Path, name: &str) -> Option<u64> {
    let out = Command::new(exe())
        .args(["stat", "--json", "--control"])
        .arg(ctl)
        .output()
        .ok()?;
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    st["directions"][0]["classes"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)?["rate_bps"]
        .as_u64()
}

#[test]
fn class_change_write_survives_sighup_and_keeps_the_files_comments() {
    let Some(mut b) = Bed::new() else { return };
    let text = format!("# two classes\n{}", many_classes(2));
    let p = b.bed.write_file("p.toml", &text).expect("write policy");
    b.start(&p);
    let ctl = b.control("main");
    let class = |args: &[&str]| {
        Command::new(exe())
            .arg("class")
            .args(args)
            .arg("--control")
            .arg(&ctl)
            .output()
            .expect("class")
    };
    // Without --write a SIGHUP reverts to the file; with --write it keeps the change.
    let out = class(&["change", "c1", "--rate", "70kbit"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(class_rate(&ctl, "c1"), Some(70_000));
    let out = class(&["change", "c1", "--rate", "60kbit", "--write"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let file = std::fs::read_to_string(&p).expect("read policy");
    let want = text.replace(
        "name = \"c1\"\nparent = \"root\"\nrate = \"50kbit\"",
        "name = \"c1\"\nparent = \"root\"\nrate = \"60kbit\"",
    );
    assert_ne!(want, text);
    assert_eq!(file, want);
    let pid = b.shaper.as_ref().map(Child::id).expect("shaper");
    let _ = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        class_rate(&ctl, "c1"),
        Some(60_000),
        "SIGHUP kept the written change"
    );
    // A mistyped class gets a suggestion and changes nothing.
    let out = class(&["change", "c11", "--rate", "1mbit"]);
    let t = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("did you mean `c1`"), "{t}");
}
