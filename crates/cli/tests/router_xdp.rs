//! `linkshare run --io xdp` on real interfaces: namespaces a, r, c joined by veth pairs a<->r and
//! r<->c (the lab's testbed), the shaper in r forwarding between its two veths over AF_XDP.
//!
//! What is checked: frames of every kind (ARP, UDP both ways, TCP) cross over AF_XDP in native and
//! generic mode with the policy's rate kept within a few per cent; every exit path (SIGTERM,
//! SIGKILL, a failed start after one interface was attached) leaves no XDP program on either
//! interface; `--io xdp` that cannot work fails naming the step, and `--io auto` falls back to
//! AF_PACKET saying why. Skips (with the reason printed) when not root or when `ip netns` does not
//! work, and fails instead under LINKSHARE_REQUIRE_NETNS=1.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The namespace testbed of `linkshare lab` (crate linkshare-lab).
use linkshare_lab::testbed;

/// One testbed at a time (rates are measured on a 2-core machine).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    testbed::in_ns(ns, f).expect("namespace thread")
}

const ONE_CLASS: &str =
    "qdisc = \"htb\"\ndefault = \"root\"\n[[class]]\nname = \"root\"\nrate = \"10mbit\"\n";

struct Lab {
    a: String,
    r: String,
    c: String,
    va: String,
    vc: String,
    ra: String,
    rc: String,
    dir: PathBuf,
    shaper: Option<Child>,
    /// The policy `command_as` writes (one class unless a test says otherwise).
    policy: &'static str,
    /// Extra arguments of `linkshare run`.
    extra: Vec<String>,
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

    fn with_queues(queues: u32) -> Option<Lab> {
        if !testbed::netns_test_can_run() {
            return None;
        }
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
            va: bed.dev_a.clone(),
            vc: bed.dev_c.clone(),
            ra: bed.dev_ra.clone(),
            rc: bed.dev_rc.clone(),
            dir: bed.dir.clone(),
            shaper: None,
            policy: ONE_CLASS,
            extra: Vec::new(),
            _bed: bed,
            _serial: serial,
        })
    }

    fn control(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }
    fn stderr_path(&self) -> PathBuf {
        self.dir.join("shaper.err")
    }
    fn stderr(&self) -> String {
        std::fs::read_to_string(self.stderr_path()).unwrap_or_default()
    }

    fn command(&self, io: &str) -> Command {
        self.command_as(io, &[])
    }

    /// The shaper's command line, with `wrapper` (a program and its arguments that exec the
    /// rest, e.g. `setpriv`) between `ip netns exec` and the shaper.
    fn command_as(&self, io: &str, wrapper: &[&str]) -> Command {
        let policy = self.dir.join("p.toml");
        std::fs::write(&policy, self.policy).unwrap();
        let err = std::fs::File::create(self.stderr_path()).unwrap();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.r])
            .args(wrapper)
            .args([env!("CARGO_BIN_EXE_linkshare"), "run"])
            .arg("--policy")
            .arg(&policy)
            .args(["--dev", &self.ra, "--dev", &self.rc, "--io", io])
            .arg("--control")
            .arg(self.control())
            .arg("--lock-dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::from(err));
        cmd
    }

    /// Start the shaper with `--io io`; wait for its control socket.
    fn start(&mut self, io: &str) {
        self.start_as(io, &[]);
    }

    fn start_as(&mut self, io: &str, wrapper: &[&str]) {
        let _ = std::fs::remove_file(self.control());
        self.shaper = Some(self.command_as(io, wrapper).spawn().unwrap());
        let t0 = Instant::now();
        while !self.control().exists() {
            if let Some(Ok(Some(st))) = self.shaper.as_mut().map(|c| c.try_wait()) {
                panic!("shaper exited ({st}): {}", self.stderr());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "shaper did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The socket is bound just before the startup line is written: wait for the line too,
        // so a test reading stderr next sees it.
        while !self.stderr().contains("linkshare: running") {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "no startup line: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stat(&self) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_linkshare"))
            .args(["stat", "--json", "--control"])
            .arg(self.control())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "stat: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `ip link show` of one of r's interfaces.
    fn link(&self, dev: &str) -> String {
        let out = Command::new("ip")
            .args(["-n", &self.r, "link", "show", "dev", dev])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    fn xdp_attached(&self) -> bool {
        [&self.ra, &self.rc]
            .iter()
            .any(|d| self.link(d).contains("xdp"))
    }

    /// Wait (up to 3 s) until neither interface has an XDP program.
    fn wait_detached(&self) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(3) {
            if !self.xdp_attached() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn signal_and_wait(&mut self, sig: libc::c_int) -> std::process::ExitStatus {
        let mut ch = self.shaper.take().unwrap();
        // `ip netns exec` execs the shaper: the child is the shaper itself.
        // SAFETY: plain system call on our own child's pid.
        unsafe { libc::kill(ch.id() as i32, sig) };
        ch.wait().unwrap()
    }
}

/// `n` UDP datagrams a -> c, each answered by c: how many answers came back.
fn udp_echo(lab: &Lab, n: usize) -> usize {
    let sizes: Vec<usize> = (0..n).map(|i| 100 + i * 10).collect();
    udp_echo_sizes(lab, &sizes)
}

/// One UDP datagram a -> c per size (payload bytes), each echoed by c: how many came back intact.
fn udp_echo_sizes(lab: &Lab, sizes: &[usize]) -> usize {
    let (ca, cc) = (testbed::ADDR_A, testbed::ADDR_C);
    let srv = in_ns(&lab.c, move || UdpSocket::bind(SocketAddrV4::new(cc, 5300))).unwrap();
    srv.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut k = 0;
        while let Ok((m, from)) = srv.recv_from(&mut buf) {
            let _ = srv.send_to(&buf[..m], from);
            k += 1;
        }
        k
    });
    let sizes = sizes.to_vec();
    let got = in_ns(&lab.a, move || {
        let s = UdpSocket::bind(SocketAddrV4::new(ca, 0)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut got = 0;
        let mut buf = vec![0u8; 65536];
        for (i, n) in sizes.into_iter().enumerate() {
            let msg = vec![i as u8; n];
            s.send_to(&msg, SocketAddrV4::new(cc, 5300)).unwrap();
            if matches!(s.recv(&mut buf), Ok(m) if buf[..m] == msg[..]) {
                got += 1;
            }
        }
        got
    });
    let _ = echo.join();
    got
}

/// Goodput of one bulk TCP connection a -> c over `secs`, after a 0.5 s warm-up, in bit/s.
fn tcp_goodput(lab: &Lab, secs: f64) -> f64 {
    let cc = testbed::ADDR_C;
    let l = in_ns(&lab.c, move || {
        TcpListener::bind(SocketAddrV4::new(cc, 5301))
    })
    .unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let t0 = Instant::now();
        let (mut n, mut start) = (0u64, None);
        while let Ok(k) = s.read(&mut buf) {
            if k == 0 {
                break;
            }
            if t0.elapsed() >= Duration::from_millis(500) {
                start.get_or_insert_with(Instant::now);
                n += k as u64;
            }
        }
        n as f64 * 8.0 / start.map_or(1.0, |s: Instant| s.elapsed().as_secs_f64())
    });
    in_ns(&lab.a, move || {
        let mut s = TcpStream::connect_timeout(
            &std::net::SocketAddr::V4(SocketAddrV4::new(cc, 5301)),
            Duration::from_secs(3),
        )
        .unwrap();
        let buf = vec![0x5au8; 1 << 14];
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < secs + 0.5 {
            s.write_all(&buf).unwrap();
        }
    });
    server.join().unwrap()
}

/// UDP a -> c at twice the class rate for `secs`: the frame bit rate (payload + 42 bytes of
/// headers, what the shaper charges) that arrived at c between 0.5 s and `secs`.
fn udp_frame_rate(lab: &Lab, secs: f64) -> f64 {
    const PAYLOAD: usize = 1000;
    let (ca, cc) = (testbed::ADDR_A, testbed::ADDR_C);
    let sink = in_ns(&lab.c, move || UdpSocket::bind(SocketAddrV4::new(cc, 5302))).unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let t0 = Instant::now();
    let rx = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut bytes = 0usize;
        while let Ok(m) = sink.recv(&mut buf) {
            let t = t0.elapsed().as_secs_f64();
            if (0.5..secs).contains(&t) {
                bytes += m + 42;
            }
            if t > secs + 0.2 {
                break;
            }
        }
        bytes as f64 * 8.0 / (secs - 0.5)
    });
    in_ns(&lab.a, move || {
        let s = UdpSocket::bind(SocketAddrV4::new(ca, 0)).unwrap();
        let buf = [7u8; PAYLOAD];
        let gap = (PAYLOAD + 42) as f64 * 8.0 / 20e6;
        let mut sent = 0u64;
        while t0.elapsed().as_secs_f64() < secs {
            while (sent as f64) * gap <= t0.elapsed().as_secs_f64() {
                let _ = s.send_to(&buf, SocketAddrV4::new(cc, 5302));
                sent += 1;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    });
    rx.join().unwrap()
}

fn forwards_and_shapes(io: &str, want_mode: &str) {
    let Some(mut lab) = Lab::new() else { return };
    lab.start(io);
    let err = lab.stderr();
    assert!(
        err.contains(&format!("(io xdp {want_mode}/")),
        "startup line: {err}"
    );
    assert!(lab.xdp_attached(), "{}", lab.link(&lab.ra));
    // ARP, then UDP both ways (the reverse direction is unshaped).
    assert_eq!(udp_echo(&lab, 20), 20, "every echo must come back");
    let bps = tcp_goodput(&lab, 3.0);
    eprintln!("{io}: TCP goodput {:.2} Mbit/s", bps / 1e6);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "TCP goodput {bps} not within 9-10 Mbit/s"
    );
    let udp = udp_frame_rate(&lab, 3.0);
    let st = lab.stat();
    eprintln!("{io}: UDP frame rate {:.3} Mbit/s", udp / 1e6);
    assert!(
        (udp - 10e6).abs() <= 0.03 * 10e6,
        "UDP at {udp} bit/s, want 10 Mbit/s ± 3 %: {st}"
    );
    let ifs = &st["interfaces"];
    for i in 0..2 {
        let got = ifs[i]["io"].as_str().unwrap_or("");
        assert!(got.starts_with(&format!("xdp {want_mode}/")), "{st}");
        assert_eq!(ifs[i]["tx_errors"], 0, "{st}");
        assert_eq!(ifs[i]["rx_truncated"], 0, "{st}");
    }
    assert!(
        ifs[0]["non_ip_shaped"].as_u64().unwrap() >= 1,
        "ARP must be shaped (the default class) and cross: {st}"
    );
    assert!(ifs[0]["rx_packets"].as_u64().unwrap() > 1000, "{st}");
    // Every frame the scheduler let go left on OUT, with the non-IP frames from IN.
    let root = &st["directions"][0]["classes"][0];
    let sent = root["sent_packets"].as_u64().unwrap();
    let non_ip = ifs[0]["non_ip_passed"].as_u64().unwrap();
    assert_eq!(
        ifs[1]["tx_packets"].as_u64().unwrap(),
        sent + non_ip,
        "{st}"
    );
    // Batched: fewer transmit system calls than frames.
    let kicks = ifs[1]["tx_kicks"].as_u64().unwrap();
    assert!(kicks > 0 && kicks <= sent + non_ip, "{st}");
    let status = lab.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "{status}: {}", lab.stderr());
    assert!(
        lab.wait_detached(),
        "XDP left after SIGTERM: {}",
        lab.link(&lab.ra)
    );
}

#[test]
fn xdp_native_forwards_arp_udp_and_tcp_at_the_policy_rate() {
    forwards_and_shapes("xdp-native", "native");
}

#[test]
fn xdp_generic_forwards_arp_udp_and_tcp_at_the_policy_rate() {
    forwards_and_shapes("xdp-generic", "generic");
}

#[test]
fn sigkill_leaves_no_xdp_program_attached() {
    let Some(mut lab) = Lab::new() else { return };
    for io in ["xdp-native", "xdp-generic"] {
        lab.start(io);
        assert!(
            lab.link(&lab.ra).contains("prog/xdp"),
            "{}",
            lab.link(&lab.ra)
        );
        assert!(
            lab.link(&lab.rc).contains("prog/xdp"),
            "{}",
            lab.link(&lab.rc)
        );
        assert_eq!(udp_echo(&lab, 3), 3);
        let status = lab.signal_and_wait(libc::SIGKILL);
        assert!(!status.success());
        assert!(
            lab.wait_detached(),
            "{io}: XDP left after SIGKILL:\n{}\n{}",
            lab.link(&lab.ra),
            lab.link(&lab.rc)
        );
    }
}

/// MTU 9000 on OUT: a frame does not fit one AF_XDP chunk.
#[test]
fn xdp_that_cannot_open_fails_clearly_and_auto_falls_back_to_af_packet() {
    let Some(mut lab) = Lab::new() else { return };
    let ok = Command::new("ip")
        .args(["-n", &lab.r, "link", "set", "dev", &lab.rc, "mtu", "9000"])
        .status()
        .unwrap();
    assert!(ok.success());
    // Explicit: an error naming the interface and the reason, and IN (opened first, attached)
    // detached again on the way out.
    let out = lab.command("xdp").output().unwrap();
    let err = lab.stderr();
    assert_eq!(out.status.code(), Some(2), "a runtime error: {err}");
    assert!(
        err.contains(&lab.rc) && err.contains("AF_XDP") && err.contains("MTU 9000"),
        "{err}"
    );
    assert!(
        lab.wait_detached(),
        "XDP left after a failed start: {}",
        lab.link(&lab.ra)
    );
    // Auto: one line saying why, AF_PACKET on OUT, AF_XDP on IN, and frames still cross.
    lab.start("auto");
    let err = lab.stderr();
    let why: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("using AF_PACKET"))
        .collect();
    assert_eq!(why.len(), 1, "{err}");
    assert!(
        why[0].contains(&lab.rc) && why[0].contains("MTU 9000"),
        "{err}"
    );
    let st = lab.stat();
    assert!(
        st["interfaces"][0]["io"]
            .as_str()
            .unwrap_or("")
            .starts_with("xdp "),
        "{st}"
    );
    assert_eq!(st["interfaces"][1]["io"], "packet", "{st}");
    assert_eq!(udp_echo(&lab, 10), 10);
    let status = lab.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "{status}");
    assert!(lab.wait_detached(), "{}", lab.link(&lab.ra));
}

/// MTU 3700 on every veth end: native XDP on a veth refuses a peer MTU above what one page holds
/// (ERANGE), generic XDP takes it, and frames need 4096-byte chunks.
#[test]
fn native_refused_names_the_errno_and_xdp_falls_back_to_generic() {
    let Some(mut lab) = Lab::new() else { return };
    for (ns, dev) in [
        (&lab.a, &lab.va),
        (&lab.r, &lab.ra),
        (&lab.r, &lab.rc),
        (&lab.c, &lab.vc),
    ] {
        let ok = Command::new("ip")
            .args(["-n", ns, "link", "set", "dev", dev, "mtu", "3700"])
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let out = lab.command("xdp-native").output().unwrap();
    let err = lab.stderr();
    assert_eq!(out.status.code(), Some(2), "a runtime error: {err}");
    assert!(
        err.contains("BPF_LINK_CREATE BPF_XDP native") && err.contains("os error"),
        "{err}"
    );
    assert!(lab.wait_detached(), "{}", lab.link(&lab.ra));
    lab.start("xdp");
    let err = lab.stderr();
    let why: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("native XDP refused"))
        .collect();
    assert_eq!(why.len(), 2, "{err}");
    assert!(err.contains("(io xdp generic/copy)"), "{err}");
    assert!(
        lab.link(&lab.ra).contains("xdpgeneric"),
        "{}",
        lab.link(&lab.ra)
    );
    // Frames near the MTU cross both ways (a 3630-byte payload: 3658-byte IP packet, 3672-byte
    // frame, in a 4096-byte chunk after 256 bytes of headroom).
    assert_eq!(udp_echo_sizes(&lab, &[64, 1500, 3000, 3672 - 42]), 4);
    let st = lab.stat();
    assert_eq!(st["interfaces"][1]["tx_errors"], 0, "{st}");
    let status = lab.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "{status}");
    assert!(lab.wait_detached(), "{}", lab.link(&lab.ra));
}

/// Without CAP_BPF and CAP_SYS_ADMIN the kernel refuses `bpf()`: a machine where AF_XDP is not
/// available. `--io xdp` says which step failed with which errno; `--io auto` says why on one
/// line per interface and shapes over AF_PACKET.
#[test]
fn without_bpf_rights_xdp_names_the_step_and_auto_uses_af_packet() {
    let Some(mut lab) = Lab::new() else { return };
    let drop_bpf = [
        "setpriv",
        "--bounding-set=-bpf,-sys_admin,-perfmon",
        "--inh-caps=-bpf,-sys_admin,-perfmon",
    ];
    let out = lab.command_as("xdp", &drop_bpf).output().unwrap();
    let err = lab.stderr();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("BPF_MAP_CREATE") && err.contains("os error 1)"),
        "step and errno: {err}"
    );
    lab.start_as("auto", &drop_bpf);
    let err = lab.stderr();
    let why: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("AF_XDP unavailable") && l.contains("using AF_PACKET"))
        .collect();
    assert_eq!(why.len(), 2, "one line per interface: {err}");
    assert!(err.contains("(io packet)"), "{err}");
    let st = lab.stat();
    assert_eq!(st["interfaces"][0]["io"], "packet", "{st}");
    assert_eq!(udp_echo(&lab, 10), 10);
    assert!(!lab.xdp_attached());
}

/// A root with two top-level classes: two workers get one each.
const TWO_TOP: &str =
    "qdisc = \"htb\"\ndefault = \"x\"\n[[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
[[class]]\nname = \"x\"\nparent = \"root\"\nrate = \"5mbit\"\nceil = \"10mbit\"\n\
[[class]]\nname = \"y\"\nparent = \"root\"\nrate = \"5mbit\"\nceil = \"10mbit\"\n";

/// `--workers 2` over AF_XDP: too few receive queues is an error naming the fix (and nothing
/// stays attached), `auto` falls back to AF_PACKET saying why; with a queue per worker the
/// program is attached once per interface, frames cross, and SIGKILL and SIGTERM both leave
/// nothing attached.
#[test]
fn workers_over_af_xdp_need_a_queue_each_and_detach_on_every_exit() {
    {
        let Some(mut lab) = Lab::new() else { return };
        lab.policy = TWO_TOP;
        lab.extra = vec!["--workers".into(), "2".into()];
        let out = lab.command("xdp").output().unwrap();
        let err = lab.stderr();
        assert_eq!(out.status.code(), Some(2), "a runtime error: {err}");
        assert!(
            err.contains("one receive queue per worker") && err.contains("numrxqueues 2"),
            "{err}"
        );
        assert!(lab.wait_detached(), "XDP left: {}", lab.link(&lab.ra));
        lab.start("auto");
        let err = lab.stderr();
        let why = err
            .lines()
            .filter(|l| l.contains("using AF_PACKET"))
            .count();
        assert_eq!(why, 2, "one line per interface: {err}");
        assert_eq!(lab.stat()["interfaces"][0]["io"], "packet");
        assert_eq!(udp_echo(&lab, 5), 5);
        assert!(lab.signal_and_wait(libc::SIGTERM).success());
    }
    let Some(mut lab) = Lab::with_queues(2) else {
        return;
    };
    lab.policy = TWO_TOP;
    lab.extra = vec!["--workers".into(), "2".into()];
    for sig in [libc::SIGKILL, libc::SIGTERM] {
        lab.start("xdp");
        for dev in [&lab.ra, &lab.rc] {
            assert!(lab.link(dev).contains("prog/xdp"), "{}", lab.link(dev));
        }
        let st = lab.stat();
        assert!(
            st["interfaces"][0]["io"]
                .as_str()
                .unwrap_or("")
                .starts_with("xdp "),
            "{st}"
        );
        assert_eq!(st["workers"].as_array().map(|w| w.len()), Some(2), "{st}");
        assert_eq!(udp_echo(&lab, 5), 5);
        let status = lab.signal_and_wait(sig);
        assert_eq!(status.success(), sig == libc::SIGTERM, "{status}");
        assert!(
            lab.wait_detached(),
            "XDP left after signal {sig}:\n{}\n{}",
            lab.link(&lab.ra),
            lab.link(&lab.rc)
        );
    }
}

/// An interface with rx-vlan offload on hands AF_XDP its frames without their VLAN tags (the
/// NIC moved them into the descriptor): `--io auto` must keep AF_PACKET there, saying why on
/// one line, and still take AF_XDP on the other interface. Before, it took AF_XDP on both.
#[test]
fn auto_keeps_af_packet_where_rx_vlan_offload_would_strip_tags() {
    let Some(mut lab) = Lab::new() else { return };
    let ra = lab.ra.clone();
    let took = in_ns(&lab.r, move || testbed::set_rx_vlan_offload(&ra, true));
    assert!(took, "the veth took rx-vlan offload on");
    lab.start("auto");
    let err = lab.stderr();
    let why: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("using AF_PACKET"))
        .collect();
    assert_eq!(why.len(), 1, "{err}");
    assert!(
        why[0].contains(&lab.ra)
            && why[0].contains("rx-vlan offload")
            && why[0].contains("rxvlan off"),
        "{err}"
    );
    let st = lab.stat();
    assert_eq!(st["interfaces"][0]["io"], "packet", "{st}");
    assert!(
        st["interfaces"][1]["io"]
            .as_str()
            .unwrap_or("")
            .starts_with("xdp "),
        "the other interface (offload off) keeps AF_XDP: {st}"
    );
    assert_eq!(udp_echo(&lab, 5), 5);
    assert!(lab.signal_and_wait(libc::SIGTERM).success());
}
