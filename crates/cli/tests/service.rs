//! The systemd unit `dist/systemd/linkshare@.service`, run as systemd would run it, without
//! systemd: the unit's own `ExecStart=` (its `%i`, `${LINKSHARE_IN}`, `${LINKSHARE_OUT}` and
//! `$LINKSHARE_OPTS` filled in as systemd.service(5) and systemd.exec(5) say), under the unit's
//! `CapabilityBoundingSet=` and `NoNewPrivileges=` (applied with setpriv(1)), with
//! `$NOTIFY_SOCKET` bound by the test. Checked: READY=1 once running; `ExecReload=` gives
//! RELOADING=1 then READY=1, also for a policy that does not validate (the old one stays);
//! SIGTERM gives STOPPING=1 and exit 0; an invalid policy exits with a status in
//! `RestartPreventExitStatus=` and a missing interface with one that is not (so systemd
//! retries it). Needs root and `ip netns` (skips, or fails under LINKSHARE_REQUIRE_NETNS=1).

use std::io::Write as _;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const UNIT: &str = include_str!("../../../dist/systemd/linkshare@.service");

/// The value of `Key=` in the unit (the last one, as systemd keeps for these keys).
fn unit_value(key: &str) -> String {
    let prefix = format!("{key}=");
    UNIT.lines()
        .rev()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("the unit has no {key}="))
        .trim()
        .to_string()
}

/// Namespace gate, as the other namespace tests (crates/lab/src/testbed/gate.rs): `true` when
/// root with `ip netns`; otherwise skip with the reason, or fail under LINKSHARE_REQUIRE_NETNS=1.
fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip")
        .args(["netns", "list"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let setpriv = Command::new("setpriv")
        .arg("--help")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let (outcome, why) = match (root, ip, setpriv) {
        (true, true, true) => ("ran", None),
        (false, _, _) => ("skipped", Some("needs root")),
        (_, false, _) => ("skipped", Some("`ip netns` does not work here")),
        (_, _, false) => ("skipped", Some("setpriv (util-linux) is missing")),
    };
    if let Some(why) = why {
        if std::env::var("LINKSHARE_REQUIRE_NETNS").is_ok_and(|v| v == "1") {
            panic!("{test} cannot run ({why}) and LINKSHARE_REQUIRE_NETNS=1 requires it");
        }
        eprintln!("SKIP {test}: {why}");
    }
    if let Some(log) = std::env::var_os("LINKSHARE_NETNS_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            // One write of the whole line: `writeln!` may issue several, which another test
            // process appending at the same moment could split (and the count lose a name).
            let _ = f.write_all(format!("{outcome} {test}\n").as_bytes());
        }
    }
    why.is_none()
}

/// A namespace with two veth pairs; the shaper bridges `x1` and `y1`. Deleted on drop.
struct Netns {
    name: String,
    dir: PathBuf,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("lsvc-{tag}-{}", std::process::id());
        let dir = std::env::temp_dir().join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        // The unit's `User=` is stood in for by nobody (65534), who must own the directory
        // that stands in for /etc/linkshare and /run/linkshare (control socket, locks).
        let c = std::ffi::CString::new(dir.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: a valid path; chown(2) has no other preconditions.
        let r = unsafe { libc::chown(c.as_ptr(), NOBODY, NOBODY) };
        assert_eq!(r, 0, "chown {}", dir.display());
        let ns = Netns { name, dir };
        ns.ip(&["netns", "add", &ns.name]);
        for (a, b) in [("x0", "x1"), ("y0", "y1")] {
            ns.ip(&[
                "-n", &ns.name, "link", "add", a, "type", "veth", "peer", "name", b,
            ]);
        }
        for d in ["x0", "x1", "y0", "y1"] {
            ns.ip(&["-n", &ns.name, "link", "set", d, "up"]);
        }
        // veths come with rx-vlan offload on, which keeps `--io auto` off AF_XDP (VLAN tags
        // would be stripped); these carry no VLANs, and the AF_XDP check below needs it off.
        linkshare_lab::testbed::in_ns(&ns.name, || {
            for d in ["x1", "y1"] {
                linkshare_lab::testbed::set_rx_vlan_offload(d, false);
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
        ns
    }

    fn ip(&self, args: &[&str]) {
        let st = Command::new("ip")
            .args(args)
            .status()
            .unwrap_or_else(|e| panic!("ip: {e}"));
        assert!(st.success(), "ip {args:?} failed");
    }

    /// The unit's `ExecStart=` for instance `inst` whose files are in this namespace's
    /// directory (standing in for /etc/linkshare) and whose env file names IN and OUT;
    /// `$LINKSHARE_OPTS` keeps the control socket and locks in that directory too.
    fn exec_start(&self, inst: &str, dev_in: &str, dev_out: &str) -> Vec<String> {
        let etc = self.dir.display().to_string();
        let opts = format!("--control {etc}/{inst}.sock --lock-dir {etc} --device-buffer 3028");
        let line = unit_value("ExecStart")
            .replace("/usr/bin/linkshare", env!("CARGO_BIN_EXE_linkshare"))
            .replace("/etc/linkshare", &etc)
            .replace("%i", inst);
        // ${VAR}: one word; $VAR: split at white space (systemd.service(5), "Command lines").
        let mut words = Vec::new();
        for w in line.split_whitespace() {
            match w {
                "${LINKSHARE_IN}" => words.push(dev_in.to_string()),
                "${LINKSHARE_OUT}" => words.push(dev_out.to_string()),
                "$LINKSHARE_OPTS" => words.extend(opts.split_whitespace().map(String::from)),
                w => {
                    assert!(
                        !w.contains('$') && !w.contains('%'),
                        "unexpanded {w} in {line}"
                    );
                    words.push(w.to_string());
                }
            }
        }
        words
    }

    /// `ip netns exec NS setpriv <the unit's limits> -- ARGV`: its bounding set, and when it
    /// names a `User=`, a user that is not root (nobody) holding the unit's
    /// `AmbientCapabilities=` only.
    fn command(&self, argv: &[String]) -> Command {
        let caps = setpriv_caps(&unit_value("CapabilityBoundingSet"));
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, "setpriv"]);
        if UNIT.lines().any(|l| l.starts_with("User=")) {
            let ambient = setpriv_caps(&unit_value("AmbientCapabilities"));
            c.arg(format!("--reuid={NOBODY}"))
                .arg(format!("--regid={NOBODY}"))
                .arg("--clear-groups")
                .arg(format!("--inh-caps={ambient}"))
                .arg(format!("--ambient-caps={ambient}"));
        }
        if unit_value("NoNewPrivileges") == "yes" {
            c.arg("--no-new-privs");
        }
        c.arg(format!("--bounding-set=-all,{caps}"))
            .arg("--")
            .args(argv);
        c
    }
}

/// uid and gid of nobody, standing in for the unit's `User=`.
const NOBODY: u32 = 65534;

/// `CAP_NET_RAW CAP_BPF` as setpriv(1) takes it: `+net_raw,+bpf`.
fn setpriv_caps(unit_list: &str) -> String {
    unit_list
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_ascii_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const POLICY: &str = "qdisc = \"htb\"\ndefault = \"bulk\"\noverhead = 10\nlinklayer = \"atm\"\n\
[[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
[[class]]\nname = \"bulk\"\nparent = \"root\"\nrate = \"10mbit\"\n";

/// The next notification on `sock` (panics after 10 s).
fn next_message(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => return String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("no notification within 10 s: {e}"),
        }
    }
}

fn notify_socket(dir: &Path) -> (UnixDatagram, PathBuf) {
    let path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap_or_else(|e| panic!("bind: {e}"));
    let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
    // Writable by the service's user, as systemd's own notification socket is.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
        .unwrap_or_else(|e| panic!("chmod: {e}"));
    (sock, path)
}

#[test]
fn the_unit_starts_reloads_and_stops_the_shaper_with_sd_notify() {
    if !can_run("the_unit_starts_reloads_and_stops_the_shaper_with_sd_notify") {
        return;
    }
    assert_eq!(unit_value("Type"), "notify");
    let ns = Netns::new("run");
    let policy = ns.dir.join("wan.toml");
    std::fs::write(&policy, POLICY).unwrap_or_else(|e| panic!("{e}"));
    let (sock, sock_path) = notify_socket(&ns.dir);
    let argv = ns.exec_start("wan", "x1", "y1");
    let mut child = ns
        .command(&argv)
        .env("NOTIFY_SOCKET", &sock_path)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {argv:?}: {e}"));
    let ready = next_message(&sock);
    assert!(ready.starts_with("READY=1"), "{ready}");
    assert!(ready.contains("STATUS=shaping x1 -> y1"), "{ready}");

    // ExecReload=/bin/kill -HUP $MAINPID. MAINPID is the shaper: `ip netns exec` and setpriv
    // exec it in place, so the child's pid is the shaper's, as systemd's main pid would be.
    let reload = || {
        let cmd = unit_value("ExecReload").replace("$MAINPID", &child.id().to_string());
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let st = Command::new(words[0])
            .args(&words[1..])
            .status()
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
        assert!(st.success(), "{cmd}");
        let r = next_message(&sock);
        assert!(r.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{r}");
        let again = next_message(&sock);
        assert!(again.starts_with("READY=1"), "{again}");
    };
    reload();
    // A policy that does not validate: reported, the running one stays, READY=1 again.
    std::fs::write(&policy, "qdisc = \"hbt\"\n").unwrap_or_else(|e| panic!("{e}"));
    reload();
    assert!(
        child.try_wait().ok().flatten().is_none(),
        "the shaper exited on a bad reload"
    );

    // systemctl stop: SIGTERM.
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let stop = next_message(&sock);
    assert!(stop.starts_with("STOPPING=1"), "{stop}");
    let t0 = Instant::now();
    let st = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(st.code(), Some(0), "exit after SIGTERM");
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn invalid_config_exits_are_the_ones_the_unit_does_not_restart() {
    if !can_run("invalid_config_exits_are_the_ones_the_unit_does_not_restart") {
        return;
    }
    let prevent: Vec<i32> = unit_value("RestartPreventExitStatus")
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    assert_eq!(unit_value("Restart"), "on-failure");
    let ns = Netns::new("exit");
    let run = |inst: &str, text: &str, dev_in: &str, dev_out: &str| {
        std::fs::write(ns.dir.join(format!("{inst}.toml")), text).unwrap_or_else(|e| panic!("{e}"));
        let dir = ns.dir.join(inst);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let (sock, sock_path) = notify_socket(&dir);
        let out = ns
            .command(&ns.exec_start(inst, dev_in, dev_out))
            .env("NOTIFY_SOCKET", &sock_path)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        // It never said READY=1.
        let _ = sock.set_nonblocking(true);
        let mut buf = [0u8; 64];
        assert!(sock.recv(&mut buf).is_err(), "a failed start notified");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // An invalid policy (exit 1): restarting cannot help, systemd must not retry.
    let (code, err) = run("bad", "qdisc = \"hbt\"\n", "x1", "y1");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("unknown qdisc"), "{err}");
    assert!(prevent.contains(&1), "RestartPreventExitStatus lacks 1");
    // The same interface twice (an invalid configuration, exit 1).
    let (code, err) = run("loop", POLICY, "x1", "x1");
    assert_eq!(code, Some(1), "{err}");
    // A missing interface (exit 2, runtime): it may appear later, systemd retries.
    let (code, err) = run("gone", POLICY, "x1", "nosuch0");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        !prevent.contains(&2),
        "RestartPreventExitStatus must let 2 restart"
    );
}

/// `WatchdogSec=`: systemd sets `$WATCHDOG_USEC`; the shaper (one loop, and `--workers 2`
/// through the control thread) sends `WATCHDOG=1` every half of it.
#[test]
fn the_shaper_feeds_the_watchdog_the_unit_asks_for() {
    if !can_run("the_shaper_feeds_the_watchdog_the_unit_asks_for") {
        return;
    }
    assert!(
        unit_value("WatchdogSec")
            .trim_end_matches('s')
            .parse::<u32>()
            .is_ok(),
        "the unit sets WatchdogSec= in seconds"
    );
    let ns = Netns::new("wd");
    std::fs::write(ns.dir.join("wan.toml"), POLICY).unwrap_or_else(|e| panic!("{e}"));
    for workers in ["1", "2"] {
        let dir = ns.dir.join(format!("w{workers}"));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let (sock, sock_path) = notify_socket(&dir);
        let mut argv = ns.exec_start("wan", "x1", "y1");
        argv.extend(["--workers".to_string(), workers.to_string()]);
        let child = ns
            .command(&argv)
            .env("NOTIFY_SOCKET", &sock_path)
            .env("WATCHDOG_USEC", "400000")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {argv:?}: {e}"));
        let ready = next_message(&sock);
        assert!(ready.starts_with("READY=1"), "{ready}");
        let t0 = Instant::now();
        let mut pings = 0;
        while pings < 3 {
            let m = next_message(&sock);
            if m == "WATCHDOG=1" {
                pings += 1;
            }
        }
        // Three pings of a 0.4 s watchdog come within about 0.4 s (every 0.2 s).
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "--workers {workers}: 3 pings took {:?}",
            t0.elapsed()
        );
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        // As the unit's user, with its capabilities, AF_XDP opens (these veths have one
        // queue: two workers fall back to AF_PACKET for that reason alone).
        let err = String::from_utf8_lossy(&out.stderr);
        let io_ok = workers != "1" || err.contains("(io xdp");
        assert!(
            io_ok && !err.contains("AF_XDP unavailable"),
            "--workers {workers}: {err}"
        );
    }
}

/// A policy edited into an invalid one, then a restart: the shaper starts with the last policy
/// it accepted (kept in the unit's `StateDirectory=`), says so, and a fixed file is taken by
/// the next reload.
#[test]
fn an_invalid_policy_at_restart_runs_the_last_good_one() {
    if !can_run("an_invalid_policy_at_restart_runs_the_last_good_one") {
        return;
    }
    assert_eq!(unit_value("StateDirectory"), "linkshare");
    let ns = Netns::new("lastgood");
    let state = ns.dir.join("state");
    std::fs::create_dir_all(&state).unwrap_or_else(|e| panic!("{e}"));
    let c = std::ffi::CString::new(state.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::chown(c.as_ptr(), NOBODY, NOBODY) }, 0);
    let policy = ns.dir.join("wan.toml");
    let start = |tag: &str| {
        let dir = ns.dir.join(tag);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let (sock, sock_path) = notify_socket(&dir);
        let argv = ns.exec_start("wan", "x1", "y1");
        let child = ns
            .command(&argv)
            .env("NOTIFY_SOCKET", &sock_path)
            .env("STATE_DIRECTORY", &state)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {argv:?}: {e}"));
        (child, sock)
    };
    let stop = |child: std::process::Child| -> String {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    std::fs::write(&policy, POLICY).unwrap_or_else(|e| panic!("{e}"));
    let (child, sock) = start("first");
    assert!(next_message(&sock).starts_with("READY=1"));
    // The copy is written off the datapath; give it a moment.
    let saved = state.join("wan.last-good/current/policy.toml");
    let t0 = Instant::now();
    while !saved.is_file() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = stop(child);
    assert_eq!(
        std::fs::read_to_string(&saved).ok().as_deref(),
        Some(POLICY),
        "the accepted policy is kept"
    );

    std::fs::write(&policy, "qdisc = \"hbt\"\n").unwrap_or_else(|e| panic!("{e}"));
    let (child, sock) = start("second");
    let ready = next_message(&sock);
    assert!(ready.starts_with("READY=1"), "{ready}");
    // Fixed and reloaded: the file given is read again (and kept in turn).
    let fixed = POLICY.replace("10mbit", "8mbit");
    std::fs::write(&policy, &fixed).unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    assert!(next_message(&sock).starts_with("RELOADING=1"));
    assert!(next_message(&sock).starts_with("READY=1"));
    let t0 = Instant::now();
    while std::fs::read_to_string(&saved).ok().as_deref() != Some(fixed.as_str())
        && t0.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let err = stop(child);
    assert!(
        err.contains("not a valid policy; starting with the last good policy"),
        "{err}"
    );
    assert!(
        err.contains("unknown qdisc"),
        "the invalid file's diagnostics: {err}"
    );
    assert_eq!(
        std::fs::read_to_string(&saved).ok().as_deref(),
        Some(fixed.as_str()),
        "the reloaded policy is kept"
    );
}

/// The unit's exposure as `systemd-analyze security` scores it (offline, on this file), held
/// to "OK" (≤ 3.0; docs/router.md states the score).
#[test]
fn the_unit_scores_ok_in_systemd_analyze_security() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        if std::env::var("LINKSHARE_REQUIRE_NETNS").is_ok_and(|v| v == "1") {
            panic!("systemd-analyze is missing and LINKSHARE_REQUIRE_NETNS=1 requires this test");
        }
        eprintln!("SKIP the_unit_scores_ok_in_systemd_analyze_security: no systemd-analyze");
        return;
    }
    let dir = std::env::temp_dir().join(format!("linkshare-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let unit = dir.join("linkshare@wan.service");
    std::fs::write(&unit, UNIT).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&unit)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    let score: f64 = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for linkshare@wan.service:")
                .nth(1)
        })
        .and_then(|r| r.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no score in: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert!(score <= 3.0, "exposure {score}: {text}");
}
