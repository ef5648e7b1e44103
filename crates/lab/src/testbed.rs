//! The namespace testbed shared by `linkshare lab` and `linkshare lab bench`: hosts A, B, C of the
//! seeds as three network namespaces.
//!
//! ```text
//!   sender (A)                 router (B)                  sink (C)
//!   dev_a 10.77.0.1 ── veth ── dev_ra   dev_rc ── veth ── dev_c 10.77.0.2
//!                              └─ Router ─┘
//! ```
//!
//! B has no addresses: the [`Router`] bridges `dev_ra` and `dev_rc` (a bump in the wire), so A and
//! C share one L2 segment and every frame from A to C crosses the router's scheduler. The router
//! is either `linkshare run` ([`LinkshareRouter`]) or a Linux bridge, bare or with the kernel's HTB
//! from `export tc` ([`KernelRouter`]).
//!
//! Names carry the process id and a sequence number (`lslab<pid>x<seq>a`), so parallel runs and
//! test binaries never collide. Everything is removed on every exit path: [`Drop`] stops the
//! router and deletes the namespaces (which takes the veths with them); SIGINT and SIGTERM only
//! set a flag ([`install_signal_handlers`], [`interrupted`]) that the run loop polls, so the
//! unwinding path is the ordinary one. The router child gets `PR_SET_PDEATHSIG`, so it dies with
//! us even on SIGKILL; namespaces left behind by a killed run are removed by the next
//! [`Testbed::new`] ([`remove_stale`]).

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

/// Prefix of every namespace this module creates; `lslab<pid>x<seq>{a,r,c}`.
const PREFIX: &str = "lslab";
/// The sender's and the sink's address on the shared segment.
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
pub const ADDR_C: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

static SEQ: AtomicU32 = AtomicU32::new(0);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Make SIGINT and SIGTERM set the flag [`interrupted`] reads instead of killing the process, so
/// a run stops at its next check and cleans up through `Drop`.
/// Nice value of the lab's threads and of the router it starts (they inherit it).
pub const LAB_NICE: i32 = -10;

/// Run the lab's traffic threads and its router ahead of whatever else the machine does: a
/// userspace shaper or a socket writer that waits for a CPU turns background load into lost link
/// time (a shaper starved on a busy 2-core machine sent 43.7 of 50 Mbit/s). Threads and processes
/// started afterwards inherit the nice value. Returns a note when it could not be raised.
pub fn raise_priority() -> Option<String> {
    // SAFETY: plain system call on the calling thread (Linux's per-thread nice).
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, LAB_NICE) };
    (r != 0).then(|| {
        format!(
            "the lab could not raise its priority (nice {LAB_NICE}: {}): other load on the machine can cost the real run link time",
            std::io::Error::last_os_error()
        )
    })
}

pub fn install_signal_handlers() -> anyhow::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler only stores to an
        // atomic, which is async-signal-safe.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            bail!(
                "cannot install the signal handler: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived (after [`install_signal_handlers`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Run `ip ARGS`; on failure the error carries the command and ip's message.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run `ip` (install iproute2)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Run `ip -n NS -batch -` with `lines` on stdin.
pub fn ip_batch(ns: &str, lines: &[String]) -> anyhow::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut ch = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run `ip` (install iproute2)")?;
    if let Some(mut stdin) = ch.stdin.take() {
        stdin.write_all(lines.join("\n").as_bytes())?;
        stdin.write_all(b"\n")?;
    }
    let out = ch.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "`ip -n {ns} -batch` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Why a testbed cannot be built here (not root, no `ip`, no namespaces), or `None` if it can.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(
            "the lab needs root (network namespaces and veth pairs): run it with sudo".into(),
        );
    }
    match Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        _ => Some("the lab needs the `ip` command of iproute2 (e.g. apt install iproute2)".into()),
    }
}

/// Environment variable under which a namespace test that cannot run fails instead of skipping
/// (`.ci/run` sets it to 1).
#[allow(dead_code)] // used by the namespace tests, which include this file
pub const REQUIRE_NETNS_ENV: &str = "LINKSHARE_REQUIRE_NETNS";
/// Environment variable naming a file to which every namespace test appends `ran NAME` or
/// `skipped NAME` (scripts/test counts them).
#[allow(dead_code)] // used by the namespace tests, which include this file
pub const NETNS_LOG_ENV: &str = "LINKSHARE_NETNS_LOG";

/// The gate of every namespace test (router, lab, export tc): `true` when namespaces can be
/// built here (recorded as `ran`); otherwise the test is skipped with the reason, see
/// [`netns_test_skipped`]. The test is named by its thread (libtest names it after the test).
#[allow(dead_code)] // used by the namespace tests, which include this file
pub fn netns_test_can_run() -> bool {
    let test = current_test();
    let test = test.as_str();
    let why = unavailable().or_else(|| {
        let ok = Command::new("ip")
            .args(["netns", "list"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        (!ok).then(|| "`ip netns` does not work here".to_string())
    });
    match why {
        None => {
            netns_test_record("ran", test);
            true
        }
        Some(why) => {
            netns_test_skipped(&why);
            false
        }
    }
}

/// A namespace test cannot run: it panics when [`REQUIRE_NETNS_ENV`] is `1` (CI must not pass
/// on a test that did nothing), else prints `SKIP` with the reason and records `skipped`.
#[allow(dead_code)] // used by the namespace tests, which include this file
pub fn netns_test_skipped(why: &str) {
    let require = std::env::var(REQUIRE_NETNS_ENV).is_ok_and(|v| v == "1");
    let log = std::env::var_os(NETNS_LOG_ENV).map(PathBuf::from);
    skip_or_fail(&current_test(), why, require, log.as_deref());
}

#[allow(dead_code)] // used by the namespace tests, which include this file
fn skip_or_fail(test: &str, why: &str, require: bool, log: Option<&Path>) {
    if require {
        panic!("{test} cannot run ({why}) and {REQUIRE_NETNS_ENV}=1 requires it");
    }
    eprintln!("SKIP {test}: {why}");
    record(log, "skipped", test);
}

#[allow(dead_code)] // used by the namespace tests, which include this file
fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string()
}

#[allow(dead_code)] // used by the namespace tests, which include this file
fn netns_test_record(outcome: &str, test: &str) {
    let log = std::env::var_os(NETNS_LOG_ENV).map(PathBuf::from);
    record(log.as_deref(), outcome, test);
}

#[allow(dead_code)] // used by the namespace tests, which include this file
fn record(log: Option<&Path>, outcome: &str, test: &str) {
    let Some(path) = log else { return };
    let line = format!("{outcome} {test}\n");
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = r {
        eprintln!("warning: cannot record to {}: {e}", path.display());
    }
}

/// Run `f` in a new thread that has joined network namespace `ns`; returns its result.
pub fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    spawn_in_ns(ns, f)?
        .join()
        .map_err(|_| anyhow::anyhow!("a thread in namespace {ns} panicked"))
}

/// Spawn a thread that joins network namespace `ns` and runs `f`.
pub fn spawn_in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<std::thread::JoinHandle<T>> {
    let file = open_ns(ns)?;
    let name = ns.to_string();
    Ok(std::thread::spawn(move || {
        // SAFETY: a valid fd to a netns file; setns affects only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if r != 0 {
            // Never run the work in the wrong namespace.
            panic!("setns {name}: {}", std::io::Error::last_os_error());
        }
        drop(file);
        f()
    }))
}

fn open_ns(ns: &str) -> anyhow::Result<std::fs::File> {
    let path = format!("/var/run/netns/{ns}");
    std::fs::File::open(&path).with_context(|| format!("cannot open namespace {path}"))
}

/// Turn off transmit checksum offload and segmentation offloads on `dev` (in the calling
/// thread's namespace), so frames captured by AF_PACKET on the peer are complete, MTU-sized and
/// checksummed. Best effort: a device without the feature keeps its defaults.
pub fn offloads_off(dev: &str) {
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
    if fd < 0 {
        return;
    }
    for cmd in [
        0x17u32, /* ETHTOOL_STXCSUM */
        0x1f,    /* ETHTOOL_STSO */
        0x24,    /* ETHTOOL_SGSO */
        0x2c,    /* ETHTOOL_SGRO */
    ] {
        let mut v = EthtoolValue { cmd, data: 0 };
        let mut req = Ifreq {
            name: [0; 16],
            data: (&mut v as *mut EthtoolValue).cast(),
            pad: [0; 16],
        };
        let n = dev.len().min(15);
        req.name[..n].copy_from_slice(&dev.as_bytes()[..n]);
        // SAFETY: `req` is a valid ifreq pointing at a live ethtool_value.
        unsafe {
            libc::ioctl(fd, 0x8946 /* SIOCETHTOOL */, &mut req)
        };
    }
    // SAFETY: closing the fd we opened.
    unsafe { libc::close(fd) };
}

/// Names of the namespaces that exist now.
pub fn netns_list() -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Delete the testbed namespaces of processes that no longer exist (a run killed with SIGKILL).
pub fn remove_stale() {
    for ns in netns_list() {
        let Some(rest) = ns.strip_prefix(PREFIX) else {
            continue;
        };
        let Some((pid, _)) = rest.split_once('x') else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", &ns]);
        }
    }
}

/// One class's counters as a router reports them (the names of `tc -s class show`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassCounters {
    pub name: String,
    pub parent: Option<String>,
    pub rate_bps: f64,
    pub ceil_bps: f64,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub lends: u64,
    pub borrows: u64,
    pub backlog_bytes: u64,
    /// `can_send`, `may_borrow`, `cant_send`.
    pub mode: String,
    /// HTB's rate and ceil tokens in bytes (negative in debt).
    pub tokens: i64,
    pub ctokens: i64,
}

/// A snapshot of the router's forward direction.
#[derive(Clone, Debug, Default)]
pub struct RouterStats {
    pub classes: Vec<ClassCounters>,
    /// Scheduler kind (`htb`, …).
    pub kind: String,
    pub enqueued_packets: u64,
    pub dequeued_packets: u64,
    pub dequeued_bytes: u64,
    pub drops: std::collections::BTreeMap<String, u64>,
    pub overlimits: u64,
    pub marked: u64,
    /// Router-specific gauges for the summary (`lateness_p50_us`, …).
    pub extra: std::collections::BTreeMap<String, f64>,
}

/// What forwards A's frames to C in namespace B.
pub trait Router: Send {
    /// `linkshare` or `kernel-htb`: how the summary names the router.
    fn name(&self) -> &'static str;
    /// Start forwarding between `bed.dev_ra` (from A) and `bed.dev_rc` (to C) with `policy`.
    fn start(&mut self, bed: &Testbed, policy: &Path) -> anyhow::Result<()>;
    /// The forward direction's counters now.
    fn stats(&mut self) -> anyhow::Result<RouterStats>;
    /// Stop forwarding; idempotent, called by the testbed's `Drop` before the namespaces go.
    fn stop(&mut self);
    /// The forwarding process, when the router is one (for its CPU time).
    fn pid(&self) -> Option<u32> {
        None
    }
}

/// `linkshare run` in namespace B, started from the current executable.
pub struct LinkshareRouter {
    exe: PathBuf,
    /// Extra arguments for `run` (`--emulate delay=..`, `--device-buffer N`).
    pub extra_args: Vec<String>,
    child: Option<Child>,
    control: PathBuf,
}

impl LinkshareRouter {
    pub fn new(extra_args: Vec<String>) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the linkshare executable")?;
        Ok(LinkshareRouter {
            exe,
            extra_args,
            child: None,
            control: PathBuf::new(),
        })
    }
}

impl Router for LinkshareRouter {
    fn name(&self) -> &'static str {
        "linkshare"
    }

    fn start(&mut self, bed: &Testbed, policy: &Path) -> anyhow::Result<()> {
        self.control = bed.dir.join("ctl.sock");
        let ns = open_ns(&bed.ns_r)?;
        let ns_fd = ns.as_raw_fd();
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run")
            .arg("--policy")
            .arg(policy)
            .args(["--dev", &bed.dev_ra, "--dev", &bed.dev_rc, "--control"])
            .arg(&self.control)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: between fork and exec the closure makes only async-signal-safe system calls
        // (setns, prctl) on an fd that stays open in the parent until spawn returns.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(ns_fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Die with the lab, even if it is killed with SIGKILL.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", self.exe.display()))?;
        drop(ns);
        let stderr = child.stderr.take();
        self.child = Some(child);
        // Forward the shaper's messages, and keep its last words for an error.
        let last = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        if let Some(err) = stderr {
            let last = last.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                    if !line.starts_with("linkshare: running") {
                        eprintln!("router: {line}");
                    }
                    if let Ok(mut l) = last.lock() {
                        *l = line;
                    }
                }
            });
        }
        let t0 = Instant::now();
        loop {
            if self.control.exists() && linkshare_router::control::stat(&self.control).is_ok() {
                return Ok(());
            }
            if let Some(ch) = self.child.as_mut() {
                if let Ok(Some(st)) = ch.try_wait() {
                    std::thread::sleep(Duration::from_millis(50));
                    let msg = last.lock().map(|l| l.clone()).unwrap_or_default();
                    bail!("`linkshare run` in the router namespace exited ({st}): {msg}");
                }
            }
            if t0.elapsed() > Duration::from_secs(10) || interrupted() {
                bail!("`linkshare run` did not open its control socket within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid(&self) -> Option<u32> {
        self.child_pid()
    }

    fn stats(&mut self) -> anyhow::Result<RouterStats> {
        let st = linkshare_router::control::stat(&self.control)?;
        Ok(parse_stat(&serde_json::to_value(&st)?))
    }

    fn stop(&mut self) {
        if let Some(mut ch) = self.child.take() {
            // SIGTERM: the shaper drains and exits; SIGKILL if it does not within 2 s.
            if let Ok(pid) = i32::try_from(ch.id()) {
                // SAFETY: signalling our own child by its pid.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
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
    }
}

impl LinkshareRouter {
    fn child_pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for LinkshareRouter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Linux bridge in namespace B joining its two veths — with [`KernelRouter::htb`], the
/// policy exported by `linkshare export tc` on the bridge's port towards C (the kernel's HTB and
/// u32 filters), with [`KernelRouter::bridge`] no shaping at all.
pub struct KernelRouter {
    /// The exporter (`export_tc::tc_script`) when shaping; passed in so that this module does
    /// not depend on the rest of the binary (tests include it on its own).
    script: Option<ScriptFn>,
    ns: String,
    dev: String,
    /// The policy's classes in file order: class `i` is tc's `1:<i+1>`.
    classes: Vec<(String, Option<String>, f64, f64)>,
}

/// Turns a policy into a `tc -batch` script for a device.
pub type ScriptFn = fn(&linkshare_config::Policy, &str) -> anyhow::Result<String>;

impl KernelRouter {
    /// The kernel's HTB from the policy, set up by the script `export` writes.
    pub fn htb(export: ScriptFn) -> Self {
        KernelRouter {
            script: Some(export),
            ns: String::new(),
            dev: String::new(),
            classes: Vec::new(),
        }
    }
    /// A plain bridge: the policy is ignored.
    pub fn bridge() -> Self {
        KernelRouter {
            script: None,
            ns: String::new(),
            dev: String::new(),
            classes: Vec::new(),
        }
    }
}

fn tc(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("tc")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run `tc` (install iproute2)")?;
    if !out.status.success() {
        bail!(
            "`tc {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Router for KernelRouter {
    fn name(&self) -> &'static str {
        if self.script.is_some() {
            "kernel-htb"
        } else {
            "bridge"
        }
    }

    fn start(&mut self, bed: &Testbed, policy: &Path) -> anyhow::Result<()> {
        self.ns = bed.ns_r.clone();
        self.dev = bed.dev_rc.clone();
        let ns = bed.ns_r.as_str();
        ip(&["-n", ns, "link", "add", "br0", "type", "bridge"])?;
        // Forward at once: no STP listening and learning delay.
        ip(&[
            "-n",
            ns,
            "link",
            "set",
            "br0",
            "type",
            "bridge",
            "forward_delay",
            "0",
            "stp_state",
            "0",
        ])?;
        ip(&["-n", ns, "link", "set", &bed.dev_ra, "master", "br0"])?;
        ip(&["-n", ns, "link", "set", &bed.dev_rc, "master", "br0"])?;
        ip(&["-n", ns, "link", "set", "br0", "up"])?;
        let Some(export) = self.script else {
            return Ok(());
        };
        let text = std::fs::read_to_string(policy)
            .with_context(|| format!("cannot read {}", policy.display()))?;
        let origin = policy.display().to_string();
        let p = linkshare_config::Policy::parse(&text, &origin)
            .map_err(|e| anyhow::anyhow!("{}", linkshare_router::render_config_error(&text, &e)))?;
        self.classes = p
            .classes()
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    c.parent.clone(),
                    c.rate.bits_per_sec() as f64,
                    c.ceil.bits_per_sec() as f64,
                )
            })
            .collect();
        let script = export(&p, &bed.dev_rc)?;
        let file = bed.dir.join("policy.tc");
        std::fs::write(&file, script)
            .with_context(|| format!("cannot write {}", file.display()))?;
        let file = file.display().to_string();
        tc(&["-n", ns, "-batch", &file]).context("the kernel refused the exported policy")?;
        Ok(())
    }

    fn stats(&mut self) -> anyhow::Result<RouterStats> {
        let mut st = RouterStats {
            kind: if self.script.is_some() { "htb" } else { "none" }.into(),
            ..RouterStats::default()
        };
        if self.script.is_none() {
            return Ok(st);
        }
        let classes = tc(&["-n", &self.ns, "-s", "class", "show", "dev", &self.dev])?;
        st.classes = parse_tc_classes(&classes, &self.classes);
        let qdisc = tc(&["-n", &self.ns, "-s", "qdisc", "show", "dev", &self.dev])?;
        // The root HTB's line: "Sent B bytes P pkt (dropped D, overlimits O requeues R)".
        if let Some(sent) = qdisc.lines().find(|l| l.trim_start().starts_with("Sent")) {
            let w = numbers(sent);
            st.dequeued_bytes = w.first().copied().unwrap_or(0);
            st.dequeued_packets = w.get(1).copied().unwrap_or(0);
            let dropped = w.get(2).copied().unwrap_or(0);
            st.overlimits = w.get(3).copied().unwrap_or(0);
            st.drops.insert("dropped".into(), dropped);
            st.enqueued_packets = st.dequeued_packets + dropped;
        }
        Ok(st)
    }

    fn stop(&mut self) {
        // The bridge and the qdisc go with the namespace.
    }
}

/// The unsigned integers in `line`, in order ("Sent 12 bytes 3 pkt (dropped 0, …" → 12, 3, 0 …).
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// `tc -s class show` of an HTB tree exported from a policy whose classes (name, parent, rate,
/// ceil) are `names` in file order (class `i` is `1:<i+1>`, hex).
pub fn parse_tc_classes(
    text: &str,
    names: &[(String, Option<String>, f64, f64)],
) -> Vec<ClassCounters> {
    let mut out: Vec<ClassCounters> = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first().copied() {
            Some("class") if w.len() > 2 => {
                let minor = w[2]
                    .split_once(':')
                    .and_then(|(_, m)| usize::from_str_radix(m, 16).ok());
                let Some((name, parent, rate, ceil)) = minor
                    .and_then(|m| m.checked_sub(1))
                    .and_then(|i| names.get(i))
                else {
                    continue;
                };
                out.push(ClassCounters {
                    name: name.clone(),
                    parent: parent.clone(),
                    rate_bps: *rate,
                    ceil_bps: *ceil,
                    ..ClassCounters::default()
                });
            }
            Some("Sent") => {
                if let Some(c) = out.last_mut() {
                    let n = numbers(line);
                    c.sent_bytes = n.first().copied().unwrap_or(0);
                    c.sent_packets = n.get(1).copied().unwrap_or(0);
                    c.drops = n.get(2).copied().unwrap_or(0);
                    c.overlimits = n.get(3).copied().unwrap_or(0);
                }
            }
            Some("backlog") => {
                if let Some(c) = out.last_mut() {
                    // "backlog 1514b 1p requeues 0": tc prints sizes with units (b, Kb, Mb).
                    c.backlog_bytes = w.get(1).map_or(0, |b| tc_size(b));
                }
            }
            Some("lended:") => {
                if let Some(c) = out.last_mut() {
                    let n = numbers(line);
                    c.lends = n.first().copied().unwrap_or(0);
                    c.borrows = n.get(1).copied().unwrap_or(0);
                }
            }
            Some("tokens:") => {
                if let Some(c) = out.last_mut() {
                    // tc prints HTB's tokens in 64-ns scheduler ticks; in bytes at the class's
                    // rate (ceil for ctokens), as linkshare reports them.
                    let t = |k: usize| -> i64 {
                        w.get(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0)
                    };
                    let to_bytes = |ticks: i64, bps: f64| (ticks as f64 * 64e-9 * bps / 8.0) as i64;
                    c.tokens = to_bytes(t(1), c.rate_bps);
                    c.ctokens = to_bytes(t(3), c.ceil_bps);
                }
            }
            _ => {}
        }
    }
    out
}

/// A size as tc prints it: `1514b`, `15Kb`, `2Mb` (1024-based), or a bare number.
fn tc_size(s: &str) -> u64 {
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n: u64 = digits.parse().unwrap_or(0);
    let unit = &s[digits.len()..];
    match unit.to_ascii_lowercase().as_str() {
        "kb" | "k" => n * 1024,
        "mb" | "m" => n * 1024 * 1024,
        _ => n,
    }
}

/// The forward direction of a `stat --json` object (see docs/router.md).
pub fn parse_stat(st: &Value) -> RouterStats {
    let d = &st["directions"][0];
    let u = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let classes = d["classes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| ClassCounters {
            name: c["name"].as_str().unwrap_or("?").to_string(),
            parent: c["parent"].as_str().map(str::to_string),
            rate_bps: f(c, "rate_bps"),
            ceil_bps: f(c, "ceil_bps"),
            sent_bytes: u(c, "sent_bytes"),
            sent_packets: u(c, "sent_packets"),
            drops: u(c, "drops"),
            overlimits: u(c, "overlimits"),
            lends: u(c, "lended"),
            borrows: u(c, "borrowed"),
            backlog_bytes: u(c, "backlog_bytes"),
            mode: c["mode"].as_str().unwrap_or("").to_string(),
            tokens: c["tokens"].as_i64().unwrap_or(0),
            ctokens: c["ctokens"].as_i64().unwrap_or(0),
        })
        .collect();
    let q = &d["qdisc"];
    let mut drops = std::collections::BTreeMap::new();
    for key in ["refused_by_reason", "dropped_by_reason"] {
        for (k, v) in q[key].as_object().into_iter().flatten() {
            *drops.entry(k.clone()).or_insert(0) += v.as_u64().unwrap_or(0);
        }
    }
    let mut extra = std::collections::BTreeMap::new();
    let late = &st["lateness_ns"];
    extra.insert("lateness_p50_us".to_string(), f(late, "p50") / 1e3);
    extra.insert("lateness_p99_us".to_string(), f(late, "p99") / 1e3);
    extra.insert("lateness_max_us".to_string(), f(late, "max") / 1e3);
    extra.insert("lateness_samples".to_string(), f(late, "samples"));
    RouterStats {
        classes,
        kind: d["kind"].as_str().unwrap_or("none").to_string(),
        enqueued_packets: u(q, "enqueued"),
        dequeued_packets: u(q, "dequeued"),
        dequeued_bytes: u(q, "dequeued_bytes"),
        drops,
        overlimits: u(q, "overlimits"),
        marked: u(q, "marked"),
        extra,
    }
}

/// Three namespaces joined by two veth pairs; see the module comment.
pub struct Testbed {
    pub ns_a: String,
    pub ns_r: String,
    pub ns_c: String,
    pub dev_a: String,
    pub dev_ra: String,
    pub dev_rc: String,
    pub dev_c: String,
    /// Scratch directory (policy file, control socket), removed on drop.
    pub dir: PathBuf,
    router: Option<Box<dyn Router>>,
}

impl Testbed {
    /// Build the namespaces and links. Fails with the reason when not root or `ip` is missing.
    pub fn new() -> anyhow::Result<Testbed> {
        if let Some(why) = unavailable() {
            bail!("{why}");
        }
        remove_stale();
        let tag = format!(
            "{PREFIX}{}x{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        // Interface names are limited to 15 bytes: `l<pid>x<seq>` plus a role letter.
        let short = format!("l{}x{}", std::process::id(), SEQ.load(Ordering::SeqCst) - 1);
        let dir = std::env::temp_dir().join(&tag);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let mut bed = Testbed {
            ns_a: format!("{tag}a"),
            ns_r: format!("{tag}r"),
            ns_c: format!("{tag}c"),
            dev_a: format!("{short}a"),
            dev_ra: format!("{short}p"),
            dev_rc: format!("{short}q"),
            dev_c: format!("{short}c"),
            dir,
            router: None,
        };
        let created = bed.build();
        match created {
            Ok(()) => Ok(bed),
            Err(e) => {
                drop(bed);
                Err(e)
            }
        }
    }

    fn build(&mut self) -> anyhow::Result<()> {
        for ns in [&self.ns_a, &self.ns_r, &self.ns_c] {
            ip(&["netns", "add", ns])?;
        }
        ip(&[
            "link",
            "add",
            &self.dev_a,
            "netns",
            &self.ns_a,
            "type",
            "veth",
            "peer",
            "name",
            &self.dev_ra,
            "netns",
            &self.ns_r,
        ])?;
        ip(&[
            "link",
            "add",
            &self.dev_c,
            "netns",
            &self.ns_c,
            "type",
            "veth",
            "peer",
            "name",
            &self.dev_rc,
            "netns",
            &self.ns_r,
        ])?;
        ip(&[
            "-n",
            &self.ns_a,
            "addr",
            "add",
            &format!("{ADDR_A}/24"),
            "dev",
            &self.dev_a,
        ])?;
        ip(&[
            "-n",
            &self.ns_c,
            "addr",
            "add",
            &format!("{ADDR_C}/24"),
            "dev",
            &self.dev_c,
        ])?;
        for (ns, dev) in [
            (&self.ns_a, &self.dev_a),
            (&self.ns_r, &self.dev_ra),
            (&self.ns_r, &self.dev_rc),
            (&self.ns_c, &self.dev_c),
        ] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            let d = dev.clone();
            in_ns(ns, move || offloads_off(&d))?;
        }
        Ok(())
    }

    /// Give A the source addresses and C the destination addresses of the flows (as /32 on the
    /// shared segment, with on-link routes both ways), so a policy's address filters see the
    /// scenario's addresses.
    pub fn add_flow_addresses(&self, srcs: &[Ipv4Addr], dsts: &[Ipv4Addr]) -> anyhow::Result<()> {
        let mut a = Vec::new();
        let mut c = Vec::new();
        for s in srcs {
            if *s != ADDR_A {
                a.push(format!("addr add {s}/32 dev {}", self.dev_a));
                c.push(format!("route add {s}/32 dev {}", self.dev_c));
            }
        }
        for d in dsts {
            if *d != ADDR_C {
                c.push(format!("addr add {d}/32 dev {}", self.dev_c));
                a.push(format!("route add {d}/32 dev {}", self.dev_a));
            }
        }
        ip_batch(&self.ns_a, &a)?;
        ip_batch(&self.ns_c, &c)
    }

    /// Route metrics for TCP in A, one host route per destination: `(dst, initcwnd, rto_min in
    /// ms)` — the kernel reads a connection's initial window and minimum RTO from its route.
    pub fn set_tcp_routes(&self, routes: &[(Ipv4Addr, u32, u64)]) -> anyhow::Result<()> {
        let lines: Vec<String> = routes
            .iter()
            .map(|(d, cwnd, rto)| {
                format!(
                    "route replace {d}/32 dev {} initcwnd {cwnd} rto_min {rto}ms",
                    self.dev_a
                )
            })
            .collect();
        ip_batch(&self.ns_a, &lines)
    }

    /// Start `router` in B with `policy`; the testbed owns it from now on and stops it first
    /// when dropped.
    pub fn start_router(
        &mut self,
        mut router: Box<dyn Router>,
        policy: &Path,
    ) -> anyhow::Result<()> {
        let r = router.start(self, policy);
        self.router = Some(router);
        r
    }

    pub fn router(&mut self) -> Option<&mut (dyn Router + 'static)> {
        self.router.as_deref_mut()
    }

    /// Wait until A reaches C through B (neighbours resolved, the router forwarding): UDP
    /// datagrams from A until one arrives at a socket in C.
    pub fn wait_reachable(&self) -> anyhow::Result<()> {
        let sink = in_ns(&self.ns_c, || std::net::UdpSocket::bind((ADDR_C, 5299)))??;
        sink.set_read_timeout(Some(Duration::from_millis(100)))?;
        let src = in_ns(&self.ns_a, || std::net::UdpSocket::bind((ADDR_A, 0)))??;
        let t0 = Instant::now();
        let mut buf = [0u8; 16];
        while t0.elapsed() < Duration::from_secs(10) && !interrupted() {
            src.send_to(b"hello", (ADDR_C, 5299))?;
            if sink.recv(&mut buf).is_ok() {
                return Ok(());
            }
        }
        bail!("C is not reachable from A through the router after 10 s")
    }

    /// Write `text` to `name` in the scratch directory.
    pub fn write_file(&self, name: &str, text: &str) -> anyhow::Result<PathBuf> {
        let p = self.dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
        Ok(p)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Some(mut r) = self.router.take() {
            r.stop();
        }
        for ns in [&self.ns_a, &self.ns_r, &self.ns_c] {
            if Path::new(&format!("/var/run/netns/{ns}")).exists() {
                if let Err(e) = ip(&["netns", "del", ns]) {
                    eprintln!("warning: {e}");
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace test that cannot run is recorded as skipped, and fails when required.
    #[test]
    fn a_namespace_test_that_cannot_run_is_counted_and_fails_when_required() {
        let log = std::env::temp_dir().join(format!("lsnetns-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        skip_or_fail("t1", "no namespaces here", false, Some(&log));
        let failed =
            std::panic::catch_unwind(|| skip_or_fail("t2", "none", true, Some(&log))).is_err();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        assert!(failed, "a required namespace test skipped silently");
        assert_eq!(text, "skipped t1\n", "recorded once, as skipped");
    }

    #[test]
    fn tc_class_statistics_become_counters() {
        let text = "class htb 1:1 root rate 10Mbit ceil 10Mbit burst 2750b cburst 2750b \n \
Sent 1500 bytes 3 pkt (dropped 0, overlimits 2 requeues 0) \n \
backlog 0b 0p requeues 0\n \
lended: 0 borrowed: 0 giants: 0\n \
tokens: 34375 ctokens: 34375\n\n\
class htb 1:2 parent 1:1 leaf 3: prio 0 rate 2Mbit ceil 10Mbit burst 1750b cburst 2750b \n \
Sent 15000 bytes 10 pkt (dropped 4, overlimits 7 requeues 0) \n \
backlog 3Kb 2p requeues 0\n \
lended: 6 borrowed: 4 giants: 0\n \
tokens: -1000 ctokens: 5000\n";
        let names = vec![
            ("root".to_string(), None, 10e6, 10e6),
            ("voice".to_string(), Some("root".to_string()), 2e6, 10e6),
        ];
        let c = parse_tc_classes(text, &names);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].name.as_str(), c[0].sent_bytes, c[0].sent_packets),
            ("root", 1500, 3)
        );
        assert_eq!(c[0].overlimits, 2);
        let v = &c[1];
        assert_eq!(v.name, "voice");
        assert_eq!(v.parent.as_deref(), Some("root"));
        assert_eq!(
            (v.sent_bytes, v.sent_packets, v.drops, v.overlimits),
            (15000, 10, 4, 7)
        );
        assert_eq!((v.lends, v.borrows), (6, 4));
        assert_eq!(v.backlog_bytes, 3 * 1024);
        // 1000 ticks of 64 ns at 2 Mbit/s = 16 bytes of debt; 5000 ticks at 10 Mbit/s = 400 bytes.
        assert_eq!((v.tokens, v.ctokens), (-16, 400));
    }
}
