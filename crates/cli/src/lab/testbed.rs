//! The namespace testbed of `linkshare lab`: hosts A, B, C of the seeds as network namespaces,
//! A — B — C joined by veth pairs, B forwarding at layer 2 with a Linux bridge (optionally with
//! the kernel's HTB on its port towards C) or with `linkshare run`.
//!
//! Names carry the process id and a sequence number, so runs never collide. Everything is torn
//! down when the [`Bed`] is dropped — on return, on error and on panic — and on SIGINT/SIGTERM
//! by [`install_signal_cleanup`], which removes every namespace this process created.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

/// Addresses of A and C (one /24: B is a bump in the wire).
pub const ADDR_A: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 79, 0, 1);
pub const ADDR_C: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 79, 0, 2);

static SEQ: AtomicU32 = AtomicU32::new(0);
/// Namespaces this process created and has not removed yet (for the signal handler).
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How router B forwards.
#[derive(Clone, Debug)]
pub enum RouterKind {
    /// A Linux bridge, no shaping.
    Bridge,
    /// A Linux bridge with the policy (TOML text) exported to the kernel's HTB on the port
    /// towards C.
    Kernel(String),
    /// `linkshare run` with the policy (TOML text) from B's port towards A to its port towards C,
    /// and extra `linkshare run` arguments.
    Linkshare { policy: String, args: Vec<String> },
}

/// Check that a testbed can be built here: root, `ip` and `tc`, working `ip netns`.
pub fn preflight() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("`linkshare lab` builds network namespaces and needs root: run it with sudo");
    }
    for tool in ["ip", "tc"] {
        let ok = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            bail!("`{tool}` was not found: install iproute2 (apt-get install iproute2)");
        }
    }
    Ok(())
}

/// Run `ip ARGS`; an error carries ip's own message.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running `ip`")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Run `f` on a thread that has joined network namespace `ns`; sockets it creates live in `ns`
/// (and stay there when handed back to other threads).
pub fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    let path = format!("/var/run/netns/{ns}");
    let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
    std::thread::spawn(move || {
        // SAFETY: a valid fd of a namespace file; setns affects only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if r != 0 {
            return Err(anyhow!(
                "setns({path}): {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| anyhow!("a thread in namespace {ns} panicked"))?
}

/// Turn off checksum offload, TSO, GSO and GRO on `dev` of the calling thread's namespace, so
/// that AF_PACKET sees complete, checksummed, MTU-sized frames (what a NIC's wire carries).
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
    // SAFETY: a plain socket call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return;
    }
    // ETHTOOL_STXCSUM, _STSO, _SGSO, _SGRO
    for cmd in [0x17u32, 0x1f, 0x24, 0x2c] {
        let mut v = EthtoolValue { cmd, data: 0 };
        let mut req = Ifreq {
            name: [0; 16],
            data: (&mut v as *mut EthtoolValue).cast(),
            pad: [0; 16],
        };
        let n = dev.len().min(15);
        req.name[..n].copy_from_slice(&dev.as_bytes()[..n]);
        // SAFETY: `req` is a valid ifreq pointing at a live ethtool_value (SIOCETHTOOL).
        unsafe { libc::ioctl(fd, 0x8946, &mut req) };
    }
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
}

/// Remove every namespace this process created (signal path: best effort, no allocation-free
/// guarantee needed since it runs on the handler thread, not in signal context).
pub fn remove_all_live() {
    let names: Vec<String> = LIVE
        .lock()
        .map(|mut l| l.drain(..).collect())
        .unwrap_or_default();
    for ns in names {
        let _ = ip(&["netns", "del", &ns]);
    }
}

/// On SIGINT, SIGTERM or SIGHUP: remove this process's namespaces, then exit 130/143/129.
/// Call once before building testbeds.
pub fn install_signal_cleanup() -> anyhow::Result<()> {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = (|| {
            // Block the signals in this and every later thread; a dedicated thread waits for them.
            // SAFETY: sigset operations on a local set; pthread_sigmask on the calling thread.
            let set = unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::sigaddset(&mut set, s);
                }
                if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                    bail!("cannot block SIGINT/SIGTERM for cleanup");
                }
                set
            };
            std::thread::spawn(move || {
                let mut sig: libc::c_int = 0;
                // SAFETY: waits on a valid signal set.
                unsafe { libc::sigwait(&set, &mut sig) };
                eprintln!("linkshare lab: signal {sig}: removing the testbed");
                remove_all_live();
                std::process::exit(128 + sig);
            });
            Ok(())
        })();
    });
    result
}

/// One testbed: namespaces A, B, C, the veths and B's forwarder.
pub struct Bed {
    a: String,
    b: String,
    c: String,
    /// B's ports towards A and towards C, and C's interface.
    ba: String,
    bc: String,
    cdev: String,
    dir: PathBuf,
    router: Option<Child>,
    router_pid: Option<u32>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.stop_router();
        for ns in [&self.a, &self.b, &self.c] {
            let _ = ip(&["netns", "del", ns]);
        }
        if let Ok(mut l) = LIVE.lock() {
            l.retain(|n| n != &self.a && n != &self.b && n != &self.c);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Bed {
    /// Build the namespaces and links and start B's forwarder.
    pub fn new(kind: RouterKind) -> anyhow::Result<Bed> {
        let tag = format!(
            "{}x{}",
            std::process::id() % 100_000,
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let dir = std::env::temp_dir().join(format!("linkshare-lab-{tag}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut bed = Bed {
            a: format!("lsla{tag}"),
            b: format!("lslb{tag}"),
            c: format!("lslc{tag}"),
            ba: format!("lba{tag}"),
            bc: format!("lbc{tag}"),
            cdev: format!("lc{tag}"),
            dir,
            router: None,
            router_pid: None,
        };
        for ns in [bed.a.clone(), bed.b.clone(), bed.c.clone()] {
            ip(&["netns", "add", &ns])?;
            if let Ok(mut l) = LIVE.lock() {
                l.push(ns);
            }
        }
        let adev = format!("la{tag}");
        ip(&[
            "link", "add", &adev, "netns", &bed.a, "type", "veth", "peer", "name", &bed.ba,
            "netns", &bed.b,
        ])?;
        ip(&[
            "link", "add", &bed.cdev, "netns", &bed.c, "type", "veth", "peer", "name", &bed.bc,
            "netns", &bed.b,
        ])?;
        ip(&[
            "-n",
            &bed.a,
            "addr",
            "add",
            &format!("{ADDR_A}/24"),
            "dev",
            &adev,
        ])?;
        ip(&[
            "-n",
            &bed.c,
            "addr",
            "add",
            &format!("{ADDR_C}/24"),
            "dev",
            &bed.cdev,
        ])?;
        for (ns, dev) in [
            (&bed.a, &adev),
            (&bed.b, &bed.ba),
            (&bed.b, &bed.bc),
            (&bed.c, &bed.cdev),
        ] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            let d = dev.clone();
            in_ns(ns, move || offloads_off(&d))?;
        }
        bed.start(kind)?;
        bed.wait_reachable()?;
        Ok(bed)
    }

    pub fn ns_a(&self) -> &str {
        &self.a
    }
    pub fn ns_c(&self) -> &str {
        &self.c
    }
    pub fn addr_c(&self) -> std::net::Ipv4Addr {
        ADDR_C
    }
    /// C's interface (where arriving traffic is counted).
    pub fn dev_c(&self) -> &str {
        &self.cdev
    }
    /// The control socket of `linkshare run` in B.
    pub fn control(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }
    /// The process id of `linkshare run`, when B runs it.
    pub fn router_pid(&self) -> Option<u32> {
        self.router_pid
    }

    fn start(&mut self, kind: RouterKind) -> anyhow::Result<()> {
        match kind {
            RouterKind::Bridge | RouterKind::Kernel(_) => {
                let br = "br0";
                ip(&["-n", &self.b, "link", "add", br, "type", "bridge"])?;
                // Forward at once: no STP listening/learning delay.
                ip(&[
                    "-n",
                    &self.b,
                    "link",
                    "set",
                    br,
                    "type",
                    "bridge",
                    "forward_delay",
                    "0",
                    "stp_state",
                    "0",
                ])?;
                ip(&["-n", &self.b, "link", "set", &self.ba, "master", br])?;
                ip(&["-n", &self.b, "link", "set", &self.bc, "master", br])?;
                ip(&["-n", &self.b, "link", "set", br, "up"])?;
                if let RouterKind::Kernel(text) = kind {
                    let policy = linkshare_config::Policy::parse(&text, "lab policy")
                        .map_err(|e| anyhow!("{e}"))?;
                    let script = crate::export_tc::tc_script(&policy, &self.bc)?;
                    let file = self.dir.join("policy.tc");
                    std::fs::write(&file, script)?;
                    let out = Command::new("tc")
                        .args(["-n", &self.b, "-batch"])
                        .arg(&file)
                        .output()
                        .context("running tc -batch")?;
                    if !out.status.success() {
                        bail!(
                            "the kernel rejected the exported policy: {}",
                            String::from_utf8_lossy(&out.stderr).trim()
                        );
                    }
                }
            }
            RouterKind::Linkshare { policy: text, args } => {
                let policy = self.dir.join("policy.toml");
                std::fs::write(&policy, text)?;
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                self.start_linkshare(&policy, &args)?;
            }
        }
        Ok(())
    }

    /// Start `linkshare run --policy POLICY --dev B→A --dev B→C` in B, plus `extra` arguments,
    /// and wait until its control socket answers.
    pub fn start_linkshare(
        &mut self,
        policy: &std::path::Path,
        extra: &[&str],
    ) -> anyhow::Result<()> {
        let exe = std::env::current_exe().context("finding the linkshare executable")?;
        let child = Command::new("ip")
            .args(["netns", "exec", &self.b])
            .arg(&exe)
            .arg("run")
            .arg("--policy")
            .arg(policy)
            .args(["--dev", &self.ba, "--dev", &self.bc, "--control"])
            .arg(self.control())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting linkshare run in B")?;
        self.router_pid = Some(child.id());
        self.router = Some(child);
        let t0 = Instant::now();
        while !self.control().exists() {
            if let Some(ch) = self.router.as_mut() {
                if let Ok(Some(st)) = ch.try_wait() {
                    bail!("linkshare run in B exited at start ({st})");
                }
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("linkshare run in B did not open its control socket within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Stop B's `linkshare run` (SIGTERM, then SIGKILL after 2 s).
    pub fn stop_router(&mut self) {
        if let Some(mut ch) = self.router.take() {
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(ch.id() as libc::pid_t, libc::SIGTERM) };
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(2) {
                if let Ok(Some(_)) = ch.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = ch.kill();
            let _ = ch.wait();
        }
        self.router_pid = None;
    }

    /// Wait until A reaches C through B (ARP resolved, the forwarder up): UDP datagrams from A
    /// until one arrives at a socket in C.
    fn wait_reachable(&self) -> anyhow::Result<()> {
        let sink = in_ns(&self.c, || std::net::UdpSocket::bind((ADDR_C, 5299)))??;
        sink.set_read_timeout(Some(Duration::from_millis(100)))?;
        let src = in_ns(&self.a, || std::net::UdpSocket::bind((ADDR_A, 0)))??;
        let t0 = Instant::now();
        let mut buf = [0u8; 16];
        while t0.elapsed() < Duration::from_secs(10) {
            src.send_to(b"hello", (ADDR_C, 5299))?;
            if sink.recv(&mut buf).is_ok() {
                return Ok(());
            }
        }
        bail!("C is not reachable from A through B after 10 s")
    }
}
