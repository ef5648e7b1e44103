//! `linkshare run` on real interfaces: namespaces a, r, c joined by veth pairs a<->r and r<->c,
//! the shaper in r bridging its two veths, real kernel sockets in a and c.
//! Skips (with the reason printed) when not root or when `ip netns` does not work.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

static SEQ: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn must_ip(args: &[&str]) {
    assert!(ip(args), "ip {args:?} failed");
}

/// Run `f` in a thread that has joined network namespace `ns`.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns");
        use std::os::fd::AsRawFd;
        // SAFETY: valid fd to a netns file; affects only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}");
        f()
    })
    .join()
    .expect("namespace thread panicked")
}

/// Turn off transmit checksum offload and segmentation on `dev` (current namespace), so frames
/// captured by AF_PACKET on the peer are complete, MTU-sized and checksummed.
fn offloads_off(dev: &str) {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct Ifreq {
        name: [u8; 16],
        data: *mut libc::c_void,
        pad: [u8; 16],
    }
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    assert!(fd >= 0);
    for cmd in [
        0x17u32, /* STXCSUM */
        0x1f,    /* STSO */
        0x24,    /* SGSO */
        0x2c,    /* SGRO */
    ] {
        let mut v = EthtoolValue { cmd, data: 0 };
        let mut req = Ifreq {
            name: [0; 16],
            data: (&mut v as *mut EthtoolValue).cast(),
            pad: [0; 16],
        };
        req.name[..dev.len()].copy_from_slice(dev.as_bytes());
        // SAFETY: `req` is a valid ifreq pointing at a live ethtool_value.
        unsafe { libc::ioctl(fd, 0x8946, &mut req) };
    }
    // SAFETY: closing the fd we opened.
    unsafe { libc::close(fd) };
}

struct Lab {
    a: String,
    r: String,
    c: String,
    ra: String,
    rc: String,
    dir: PathBuf,
    shaper: Option<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut ch) = self.shaper.take() {
            let _ = ch.kill();
            let _ = ch.wait();
        }
        for ns in [&self.a, &self.r, &self.c] {
            ip(&["netns", "del", ns]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Lab {
    fn new() -> Option<Lab> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP: not root");
            return None;
        }
        let tag = format!(
            "{}{}",
            std::process::id() % 100000,
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let a = format!("lsta{tag}");
        if !ip(&["netns", "add", &a]) {
            eprintln!("SKIP: `ip netns add` does not work here");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("lsrt{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        let lab = Lab {
            r: format!("lstr{tag}"),
            c: format!("lstc{tag}"),
            a,
            ra: format!("ra{tag}"),
            rc: format!("rc{tag}"),
            dir,
            shaper: None,
        };
        must_ip(&["netns", "add", &lab.r]);
        must_ip(&["netns", "add", &lab.c]);
        let (va, vc) = (format!("va{tag}"), format!("vc{tag}"));
        must_ip(&[
            "link", "add", &va, "netns", &lab.a, "type", "veth", "peer", "name", &lab.ra, "netns",
            &lab.r,
        ]);
        must_ip(&[
            "link", "add", &vc, "netns", &lab.c, "type", "veth", "peer", "name", &lab.rc, "netns",
            &lab.r,
        ]);
        must_ip(&["-n", &lab.a, "addr", "add", "10.77.0.1/24", "dev", &va]);
        must_ip(&["-n", &lab.c, "addr", "add", "10.77.0.2/24", "dev", &vc]);
        for (ns, dev) in [
            (&lab.a, &va),
            (&lab.r, &lab.ra),
            (&lab.r, &lab.rc),
            (&lab.c, &vc),
        ] {
            must_ip(&["-n", ns, "link", "set", dev, "up"]);
            must_ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        for (ns, dev) in [
            (&lab.a, &va),
            (&lab.c, &vc),
            (&lab.r, &lab.ra),
            (&lab.r, &lab.rc),
        ] {
            let d = dev.clone();
            in_ns(ns, move || offloads_off(&d));
        }
        Some(lab)
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

#[test]
fn tcp_is_shaped_to_policy_rate_and_arp_passes() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start(&p);
    let bps = tcp_goodput(&lab, 3.0);
    eprintln!("goodput {:.2} Mbit/s", bps / 1e6);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
    let st = lab.stat();
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
    // The frames went through the memory-mapped rings: blocks walked, batches kicked.
    assert!(ifs[0]["rx_blocks"].as_u64().unwrap() > 0, "{st}");
    let kicks = ifs[1]["tx_kicks"].as_u64().unwrap();
    assert!(kicks > 0 && kicks <= tx_out, "{st}");
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
    eprintln!(
        "lateness {} ; tx {tx_out} frames in {kicks} kicks",
        st["lateness_ns"]
    );
}

fn udp_blast(lab: &Lab, ports: &'static [u16], secs: f64) {
    let a = lab.a.clone();
    in_ns(&a, move || {
        let s = UdpSocket::bind("10.77.0.1:0").unwrap();
        let buf = vec![0u8; 1000];
        let t0 = Instant::now();
        let mut i = 0usize;
        // ~40 Mbit/s offered, spread over the ports.
        while t0.elapsed().as_secs_f64() < secs {
            let port = ports[i % ports.len()];
            let _ = s.send_to(&buf, ("10.77.0.2", port));
            i += 1;
            if i.is_multiple_of(5) {
                std::thread::sleep(Duration::from_micros(1000));
            }
        }
    });
}

const TWO_CLASSES: &str = r#"
qdisc = "htb"
default = "b"
[[class]]
name = "root"
rate = "10mbit"
[[class]]
name = "a"
parent = "root"
rate = "3mbit"
ceil = "3mbit"
[[class]]
name = "b"
parent = "root"
rate = "7mbit"
ceil = "7mbit"
[[filter]]
class = "a"
protocol = "udp"
dst_port = "6001"
"#;

#[test]
fn two_classes_share_as_policy_says_and_reload_keeps_queue() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", TWO_CLASSES);
    lab.start(&p);
    udp_blast(&lab, &[6001, 6002], 1.0);
    let s1 = lab.stat();
    udp_blast(&lab, &[6001, 6002], 2.0);
    let s2 = lab.stat();
    let rate = |c: &str| {
        let b1 = class(&s1, c)["sent_bytes"].as_u64().unwrap();
        let b2 = class(&s2, c)["sent_bytes"].as_u64().unwrap();
        let dt = s2["uptime_s"].as_f64().unwrap() - s1["uptime_s"].as_f64().unwrap();
        (b2 - b1) as f64 * 8.0 / dt
    };
    let (ra, rb) = (rate("a"), rate("b"));
    eprintln!("a {:.2} Mbit/s b {:.2} Mbit/s", ra / 1e6, rb / 1e6);
    assert!((2.8e6..=3.1e6).contains(&ra), "class a at {ra}");
    assert!((6.6e6..=7.1e6).contains(&rb), "class b at {rb}");

    // Reload while packets are queued: a changed rate, nothing dropped by the change.
    let queued = s2["directions"][0]["backlog_packets"].as_u64().unwrap();
    let drops_before: u64 = ["a", "b"]
        .iter()
        .map(|c| class(&s2, c)["drops"].as_u64().unwrap())
        .sum();
    let p2 = lab.write_policy("p2.toml", &TWO_CLASSES.replace("7mbit", "5mbit"));
    let (code, out, err) = lab.cli(&["reload", p2.to_str().unwrap()]);
    assert_eq!(code, 0, "reload failed: {out}{err}");
    let s3 = lab.stat();
    assert_eq!(class(&s3, "b")["rate_bps"], 5_000_000);
    let drops_after: u64 = ["a", "b"]
        .iter()
        .map(|c| class(&s3, c)["drops"].as_u64().unwrap())
        .sum();
    assert_eq!(drops_before, drops_after, "reload dropped packets");
    assert!(class(&s3, "b")["sent_bytes"].as_u64() >= class(&s2, "b")["sent_bytes"].as_u64());
    eprintln!("queued at reload: {queued}; {out}");

    // `class change` during traffic: the new rate applies, no queued packet lost.
    udp_blast(&lab, &[6001, 6002], 0.3);
    let s_pre = lab.stat();
    let (code, out, err) = lab.cli(&["class", "change", "b", "--rate", "4mbit", "--ceil", "4mbit"]);
    assert_eq!(code, 0, "class change failed: {out}{err}");
    let s_post = lab.stat();
    assert_eq!(class(&s_post, "b")["rate_bps"], 4_000_000);
    let d = |st: &Value| -> u64 {
        ["a", "b"]
            .iter()
            .map(|c| class(st, c)["drops"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(d(&s_pre), d(&s_post), "class change dropped packets");
    let (code, _, _) = lab.cli(&[
        "class", "add", "extra", "--parent", "root", "--rate", "1mbit",
    ]);
    assert_eq!(code, 0);
    assert_eq!(class(&lab.stat(), "extra")["rate_bps"], 1_000_000);
    let (code, _, err) = lab.cli(&["class", "del", "nosuch"]);
    assert_ne!(code, 0, "{err}");
    let (code, out, err) = lab.cli(&["reload", p2.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");

    // An invalid reload is rejected with the check error, the old policy stays.
    let bad = lab.write_policy(
        "bad.toml",
        &TWO_CLASSES.replace("rate = \"3mbit\"", "rate = \"fast\""),
    );
    let (code, _, err) = lab.cli(&["reload", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("error"), "{err}");
    let s4 = lab.stat();
    assert_eq!(class(&s4, "b")["rate_bps"], 5_000_000);
    assert_eq!(class(&s4, "a")["rate_bps"], 3_000_000);
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
    let va = lab.ra.replacen("ra", "va", 1);
    let a = lab.a.clone();
    in_ns(&a, move || {
        send_raw(
            &va,
            &[
                ipv4_frame(3, 46, 60),   // bad IHL
                ipv4_frame(5, 1400, 60), // total length beyond the frame
                ipv4_frame(5, 46, 60),   // fine (padded to 60)
                ipv4_frame(5, 46, 60),   // fine
            ],
        )
    });
    std::thread::sleep(Duration::from_millis(200));
    let st = lab.stat();
    let m = &st["interfaces"][0]["malformed"];
    assert_eq!(m["bad_ihl"], 1, "{st}");
    assert_eq!(m["bad_ipv4_total_length"], 1, "{st}");
    assert!(
        class(&st, "root")["sent_packets"].as_u64().unwrap() >= 2,
        "{st}"
    );

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

    let mut ch = lab.shaper.take().unwrap();
    // SAFETY: signalling our own child (`ip netns exec` execs the shaper in place).
    unsafe { libc::kill(ch.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = ch.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "shaper did not exit on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(!lab.control().exists(), "control socket left behind");
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
    // SYN goes a -> c through the 40 ms line; the reply comes back unshaped.
    assert!(rtt >= Duration::from_millis(40), "{rtt:?}");
    assert!(rtt < Duration::from_millis(1000), "{rtt:?}");
    let st = lab.stat();
    assert_eq!(st["directions"][0]["emulate"]["lost"], 0, "{st}");
}
