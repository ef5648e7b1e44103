//! What every topic module shares: the testbed (`Lab`: namespaces a, r, c and the shaper in r,
//! its control socket and `stat`), `class()` to read a class's row of `stat`, traffic in the
//! namespaces (`in_ns`, bulk TCP goodput, paced UDP sources and sinks, `frame_rate`, UDP echo
//! RTTs, `median`, `within`) and the policies more than one module uses.

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
pub(crate) fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    testbed::in_ns(ns, f).expect("namespace thread")
}

/// Namespaces a (sender), r (shaper), c (sink) of the promoted testbed, with the shaper started
/// by `ip netns exec` from the test's own build of the binary.
pub(crate) struct Lab {
    pub(crate) a: String,
    pub(crate) r: String,
    pub(crate) c: String,
    /// The interfaces of the shaper (towards a, towards c) and a's interface.
    pub(crate) ra: String,
    pub(crate) rc: String,
    pub(crate) va: String,
    /// c's interface (the peer of `rc`).
    pub(crate) vc: String,
    dir: PathBuf,
    pub(crate) shaper: Option<Child>,
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
    pub(crate) fn new() -> Option<Lab> {
        Self::with_queues(1)
    }

    /// A testbed whose veths have `queues` receive and transmit queues.
    pub(crate) fn with_queues(queues: u32) -> Option<Lab> {
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
            vc: bed.dev_c.clone(),
            dir: bed.dir.clone(),
            shaper: None,
            _bed: bed,
            _serial: serial,
        })
    }

    pub(crate) fn control(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }

    pub(crate) fn write_policy(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    pub(crate) fn start(&mut self, policy: &PathBuf) {
        self.start_with(policy, &[]);
    }

    pub(crate) fn start_with(&mut self, policy: &PathBuf, extra: &[&str]) {
        self.start_within(policy, extra, Duration::from_secs(5));
    }

    /// [`Self::start_with`], for a policy large enough to take longer than 5 s to load.
    pub(crate) fn start_within(&mut self, policy: &PathBuf, extra: &[&str], within: Duration) {
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
            assert!(t0.elapsed() < within, "shaper did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn cli(&self, args: &[&str]) -> (i32, String, String) {
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
    pub(crate) fn sigterm_exits_cleanly(&mut self, within: Duration) {
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
    pub(crate) fn run_refused(&self, p: &Path, extra: &[&str]) -> (i32, String) {
        let policy = p.to_str().unwrap();
        let mut args = vec!["run", "--policy", policy, "--dev", "lo", "--dev", "lo"];
        args.extend_from_slice(extra);
        let (code, _, err) = self.cli(&args);
        (code, err)
    }

    pub(crate) fn stat(&self) -> Value {
        let (code, out, err) = self.cli(&["stat", "--json"]);
        assert_eq!(code, 0, "stat failed: {err}");
        serde_json::from_str(&out).unwrap()
    }
}

pub(crate) fn class<'a>(st: &'a Value, name: &str) -> &'a Value {
    st["directions"][0]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no class {name} in {st}"))
}

/// Bulk TCP from a to c for `secs`; returns goodput in bit/s measured at the receiver after a
/// 0.5 s warm-up.
pub(crate) fn tcp_goodput(lab: &Lab, secs: f64) -> f64 {
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
pub(crate) fn tcp_at_ten_mbit(lab: &Lab) -> Value {
    let bps = tcp_goodput(lab, 3.0);
    eprintln!("goodput {:.2} Mbit/s", bps / 1e6);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
    lab.stat()
}

/// Receives UDP on `ports` in namespace c for `secs`; per port, (seconds since `t0`, payload
/// bytes, datagram id) of every datagram.
pub(crate) type Arrivals = Vec<Vec<(f64, usize, u64)>>;

pub(crate) fn udp_sink(
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
pub(crate) fn udp_source(
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
pub(crate) fn frame_rate(arr: &[(f64, usize, u64)], from: f64, to: f64) -> f64 {
    let b: usize = arr
        .iter()
        .filter(|(t, _, _)| *t >= from && *t < to)
        .map(|(_, n, _)| (n + 42).max(60))
        .sum();
    b as f64 * 8.0 / (to - from)
}

pub(crate) fn within(x: f64, want: f64, tol: f64) -> bool {
    (x - want).abs() <= want * tol
}

/// Echo server in c on `port` for `secs`; client in a sends `n` probes `gap` apart; RTTs in ms
/// (a lost probe counts as 1000 ms).
pub(crate) fn udp_rtts(lab: &Lab, port: u16, n: usize, gap: Duration) -> Vec<f64> {
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

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub(crate) const ONE_CLASS: &str = r#"
qdisc = "htb"
default = "root"
[[class]]
name = "root"
rate = "10mbit"
"#;

/// Two top-level classes of 5 Mbit/s under a 10 Mbit/s root, each free to borrow up to it.
pub(crate) const TWO_HALVES: &str = r#"
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

/// Queues hold ~0.3-0.5 s at the class rates, so a sender thread that a loaded 2-core machine
/// stalls for a moment does not empty its class; `a`'s (80 packets) drains within 0.4 s of
/// its stop, before the borrowing window.
pub(crate) const THREE_CLASSES: &str = r#"
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

pub(crate) const TWO_CLASSES: &str = r#"
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
