//! A reference kernel where the host's lacks a qdisc: user-mode Linux (Debian's
//! `user-mode-linux`, Linux 6.1 as an ordinary process, every net/sched module), so that
//! `lab --kernel` and `compare --kernel` can hold linkshare against the kernel's own CAKE, HFSC,
//! fq_codel, sfq or netem on any machine (docs/lab.md, docs/fidelity.md).
//!
//! Principles:
//! * **Only when needed.** [`missing_qdiscs`] asks the host's kernel whether it takes each qdisc
//!   a `tc` script uses (it adds one to `lo` in a scratch namespace); only a qdisc the host
//!   refuses sends the kernel side into the guest, and the command says so.
//! * **The same binary, the same command.** The guest's root is the host's `/`, read-only
//!   (hostfs), so the current executable and the scenario are there at their own paths; the
//!   command runs again inside with [`IN_GUEST_ENV`] set (it never boots a guest from a guest).
//!   Directories given as writable are mounted at their paths, so the outputs land on the host.
//! * **One CPU, the host's clock.** Rates up to tens of Mbit/s behave; the guest is a reference
//!   for what the kernel's disciplines decide, not for the host's speed.
//! * **The guest first, and checked.** A guest that waits for a host CPU is frozen, and what it
//!   records is the host's load. As root it runs under SCHED_FIFO ([`GUEST_FIFO`]; its tasks
//!   inherit it), which wakes it ahead of ordinary work (nice −10 alone left it waiting 40–60 %
//!   of the time at load 5); otherwise at the lab's nice value. Every run measures how long the
//!   guest waited ([`check`]), and the caller refuses or marks the figures of a starved one.
//!
//! The guest's init (written to a scratch directory under /var/tmp, which the guest sees through
//! the read-only root) mounts proc, sys and fresh tmpfs on /tmp and /run, loads the modules the
//! lab uses, runs the command with its stdout and stderr in files of the scratch directory, and
//! powers off. The host copies those files to its own stdout and stderr as they grow and returns
//! the command's exit status. The recipe follows ../shared/uml (MIT), rewritten here.

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::testbed::ip;

pub mod check;
pub use check::GuestCheck;

/// Set (to 1) in the guest's environment: the command is already inside user-mode Linux.
pub const IN_GUEST_ENV: &str = "LINKSHARE_IN_UML";
/// The user-mode kernel's executable (Debian's `user-mode-linux` installs it on the PATH).
const KERNEL: &str = "linux";
/// Where Debian puts the user-mode kernel's modules (`<dir>/<version>/…`).
const MODULES: &str = "/usr/lib/uml/modules";
/// Modules the lab may need, loaded before the command runs (the guest has no /lib/modules of
/// its own, so the kernel's automatic loading would not find them).
const PRELOAD: &[&str] = &[
    "veth",
    "bridge",
    "sch_htb",
    "sch_cake",
    "sch_hfsc",
    "sch_fq_codel",
    "sch_sfq",
    "sch_netem",
    "sch_tbf",
    "sch_drr",
    "sch_prio",
    "cls_u32",
    "cls_flower",
    "cls_matchall",
    "cls_basic",
    "em_meta",
    "act_skbedit",
    "tcp_bbr",
];
/// The guest's real-time priority (SCHED_FIFO) where it may have one: above the lab's own
/// SCHED_FIFO threads' 10, below the kernel's threaded interrupts' 50.
pub const GUEST_FIFO: i32 = 20;
/// Overrides [`GUEST_FIFO`]: a priority (1–99), or `0`/`off` for the lab's nice value only.
pub const FIFO_ENV: &str = "LINKSHARE_UML_FIFO";
/// Environment passed into the guest besides [`IN_GUEST_ENV`]: linkshare's own variables.
const PASS_ENV_PREFIX: &str = "LINKSHARE_";

/// True inside a guest started by [`Guest::run`].
pub fn in_guest() -> bool {
    std::env::var(IN_GUEST_ENV).is_ok_and(|v| v == "1")
}

/// Why no guest can be booted here, or `None` when one can.
pub fn unavailable() -> Option<String> {
    if find_on_path(KERNEL).is_none() {
        return Some(format!(
            "no user-mode Linux kernel (`{KERNEL}`) on the PATH: install it with \
             `apt-get install user-mode-linux kmod` (Debian; scripts/uml does it)"
        ));
    }
    if !Path::new(MODULES).is_dir() {
        return Some(format!(
            "the user-mode kernel's modules are not in {MODULES} (reinstall user-mode-linux)"
        ));
    }
    None
}

fn find_on_path(exe: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(exe))
            .find(|f| f.is_file())
    })
}

/// The qdisc kinds a `tc -batch` script adds (`qdisc add|replace … KIND …`), in first-seen order.
pub fn qdisc_kinds(script: &str) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for line in script.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 3 || w[0] != "qdisc" || !matches!(w[1], "add" | "replace" | "change") {
            continue;
        }
        let mut i = 2;
        while i < w.len() {
            match w[i] {
                "dev" | "parent" | "handle" => i += 2,
                "root" | "ingress" | "clsact" if i + 1 < w.len() => i += 1,
                "estimator" => i += 3,
                kind => {
                    if !kinds.iter().any(|k| k == kind) {
                        kinds.push(kind.to_string());
                    }
                    break;
                }
            }
        }
    }
    kinds
}

/// The qdiscs of `script` that the running kernel refuses (each tried on `lo` in a scratch
/// namespace). Empty when the kernel takes them all, or inside a guest (never a guest in a
/// guest: what the guest's kernel refuses is an error of the run itself).
pub fn missing_qdiscs(script: &str) -> anyhow::Result<Vec<String>> {
    if in_guest() {
        return Ok(Vec::new());
    }
    let kinds = qdisc_kinds(script);
    if kinds.is_empty() {
        return Ok(kinds);
    }
    let ns = format!("lsprobe{}", std::process::id());
    ip(&["netns", "add", &ns]).context("cannot create a namespace to probe the kernel's qdiscs")?;
    let mut missing = Vec::new();
    for k in kinds {
        let ok = Command::new("tc")
            .args(["-n", &ns, "qdisc", "add", "dev", "lo", "root", &k])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let _ = Command::new("tc")
            .args(["-n", &ns, "qdisc", "del", "dev", "lo", "root"])
            .stderr(Stdio::null())
            .status();
        if !ok {
            missing.push(k);
        }
    }
    let _ = ip(&["netns", "del", &ns]);
    Ok(missing)
}

/// One boot of the user-mode kernel running one command.
pub struct Guest {
    /// The guest's memory (`linux mem=`), e.g. `2G`.
    pub mem: String,
    /// Host directories the guest may write, mounted at their own paths.
    pub rw: Vec<PathBuf>,
    /// Host directories the guest must see although its own /tmp and /run hide them (a
    /// scenario under /tmp), mounted read-only at their own paths.
    pub ro: Vec<PathBuf>,
    /// Copy the command's stdout to our stderr (when ours carries something else, e.g. JSON).
    pub stdout_to_stderr: bool,
    /// Run the guest under SCHED_FIFO at this priority (root), else at the lab's nice value;
    /// `None`: the nice value only.
    pub fifo: Option<i32>,
}

/// What one boot of the guest returned: the command's exit status and how the guest fared on
/// the host.
#[derive(Clone, Debug)]
pub struct GuestRun {
    pub rc: i32,
    pub check: GuestCheck,
}

impl Default for Guest {
    fn default() -> Self {
        Guest {
            mem: "2G".into(),
            rw: Vec::new(),
            ro: Vec::new(),
            stdout_to_stderr: false,
            fifo: fifo_from(std::env::var(FIFO_ENV).ok().as_deref()),
        }
    }
}

/// The guest's SCHED_FIFO priority from [`FIFO_ENV`]'s value: unset or unreadable is
/// [`GUEST_FIFO`], `0` or `off` none.
fn fifo_from(v: Option<&str>) -> Option<i32> {
    match v.map(str::trim) {
        None => Some(GUEST_FIFO),
        Some("0" | "off") => None,
        Some(p) => Some(p.parse::<i32>().map_or(GUEST_FIFO, |p| p.clamp(1, 99))),
    }
}

impl Guest {
    /// Boot, run `argv` in the current directory, power off. The command's stdout and stderr are
    /// copied to ours as they grow; returns its exit status and the guest's check (also printed
    /// on stderr, with a warning when the guest was starved). An error when the guest could not
    /// be booted or did not finish (the end of its console is in the message).
    pub fn run(&self, argv: &[OsString]) -> anyhow::Result<GuestRun> {
        if let Some(why) = unavailable() {
            bail!("{why}");
        }
        let Some(program) = argv.first() else {
            bail!("no command to run in the guest");
        };
        let work = scratch_dir()?;
        let result = self.run_in(&work, program, &argv[1..]);
        let _ = std::fs::remove_dir_all(&work);
        result
    }

    fn run_in(
        &self,
        work: &Path,
        program: &OsString,
        args: &[OsString],
    ) -> anyhow::Result<GuestRun> {
        let init = work.join("init");
        std::fs::write(&init, self.init_script(work, program, args)?)
            .with_context(|| format!("cannot write {}", init.display()))?;
        set_executable(&init)?;
        let console = std::fs::File::create(work.join("console"))?;
        let mut cmd = Command::new(KERNEL);
        // The guest's one CPU is host tasks: under SCHED_FIFO where allowed (the guest's tasks
        // inherit it), so that it runs as soon as it has work; else at the lab's nice value.
        let fifo = self.fifo;
        // SAFETY: sched_setscheduler and setpriority are async-signal-safe system calls on the
        // child alone; nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                let rt = fifo.is_some_and(|p| {
                    let param = libc::sched_param { sched_priority: p };
                    libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
                });
                if !rt {
                    libc::setpriority(libc::PRIO_PROCESS, 0, crate::testbed::LAB_NICE);
                }
                Ok(())
            });
        }
        let mut child = cmd
            .arg(format!("mem={}", self.mem))
            .args(["quiet", "rootfstype=hostfs", "rootflags=/", "ro"])
            .arg(format!("init={}", init.display()))
            .args(["con=null", "con0=fd:0,fd:1"])
            .stdin(Stdio::null())
            .stdout(console.try_clone()?)
            .stderr(console)
            .spawn()
            .with_context(|| format!("cannot start `{KERNEL}` (user-mode Linux)"))?;
        let policy = scheduling_of(child.id());
        let sampler = check::Sampler::start(child.id());
        let done = Arc::new(AtomicBool::new(false));
        let copier = {
            let (done, work) = (done.clone(), work.to_path_buf());
            let to_stderr = self.stdout_to_stderr;
            std::thread::spawn(move || copy_outputs(&work, &done, to_stderr))
        };
        let status = child.wait();
        let check = sampler.stop(&policy);
        done.store(true, Ordering::Relaxed);
        let _ = copier.join();
        status.context("waiting for the user-mode kernel")?;
        eprintln!("{}", check.summary());
        if let Some(why) = check.starved() {
            eprintln!("warning: {why}");
        }
        let rc = std::fs::read_to_string(work.join("rc")).unwrap_or_default();
        match rc.trim().parse::<i32>() {
            Ok(rc) => Ok(GuestRun { rc, check }),
            Err(_) => {
                let console = std::fs::read_to_string(work.join("console")).unwrap_or_default();
                let tail: Vec<&str> = console.lines().rev().take(15).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                bail!(
                    "the user-mode guest did not finish the command; the end of its console:\n{}",
                    tail.join("\n")
                )
            }
        }
    }

    /// The guest's PID 1: mounts, modules, the command, its status, power off.
    fn init_script(
        &self,
        work: &Path,
        program: &OsString,
        args: &[OsString],
    ) -> anyhow::Result<String> {
        let cwd = std::env::current_dir().context("no current directory")?;
        let mut s = String::from("#!/bin/sh\n");
        s.push_str("export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
        s.push_str(&format!("export HOME=/root {IN_GUEST_ENV}=1\n"));
        for (k, v) in std::env::vars_os() {
            let key = k.to_string_lossy();
            if key.starts_with(PASS_ENV_PREFIX) && key != IN_GUEST_ENV {
                s.push_str(&format!("export {}={}\n", key, quote(v.as_bytes())));
            }
        }
        s.push_str("mount -t proc proc /proc\nmount -t sysfs sys /sys\n");
        s.push_str("mount -t tmpfs tmp /tmp\nmount -t tmpfs run /run\n");
        // The modules by their own directory: the host's root may have no /lib/modules to mount
        // them on, so modprobe gets a root under /tmp whose lib/modules holds them.
        s.push_str(&format!(
            "mkdir -p /tmp/.uml/lib\nln -s {MODULES} /tmp/.uml/lib/modules\n\
             for m in {}; do modprobe -q -d /tmp/.uml \"$m\" 2>/dev/null; done\n",
            PRELOAD.join(" ")
        ));
        let mut writable = vec![work.to_path_buf()];
        for d in &self.rw {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            writable.push(
                d.canonicalize()
                    .with_context(|| format!("cannot resolve {}", d.display()))?,
            );
        }
        // Read-only ones first: a writable directory may lie inside one. The current directory
        // too when the guest's own /tmp or /run would hide it.
        let mut ro = self.ro.clone();
        if cwd.starts_with("/tmp") || cwd.starts_with("/run") {
            ro.push(cwd.clone());
        }
        for d in &ro {
            let Ok(d) = d.canonicalize() else { continue };
            let q = quote(d.as_os_str().as_bytes());
            s.push_str(&format!(
                "mkdir -p {q}; mount -t hostfs none {q} -o {q}; mount -o remount,ro {q}\n"
            ));
        }
        for d in &writable {
            let q = quote(d.as_os_str().as_bytes());
            s.push_str(&format!("mkdir -p {q}; mount -t hostfs none {q} -o {q}\n"));
        }
        // Temporary files in the guest's own /run: a read-only mount may cover /tmp.
        s.push_str("mkdir -p /run/tmp; export TMPDIR=/run/tmp\nip link set lo up\n");
        s.push_str(&format!("cd {}\n", quote(cwd.as_os_str().as_bytes())));
        let w = |f: &str| quote(work.join(f).as_os_str().as_bytes());
        s.push_str(&quote(program.as_bytes()));
        for a in args {
            s.push(' ');
            s.push_str(&quote(a.as_bytes()));
        }
        s.push_str(&format!(
            " >{} 2>{}\necho $? >{}\nsync\npoweroff -f\n",
            w("stdout"),
            w("stderr"),
            w("rc")
        ));
        Ok(s)
    }
}

/// The host scheduling of process `pid`, in words ("SCHED_FIFO 20", "nice -10").
fn scheduling_of(pid: u32) -> String {
    let pid = pid as libc::pid_t;
    // SAFETY: plain system calls reading another process's scheduling; `param` is ours.
    let (policy, prio, nice) = unsafe {
        let mut param = libc::sched_param { sched_priority: 0 };
        let policy = libc::sched_getscheduler(pid);
        let _ = libc::sched_getparam(pid, &mut param);
        let nice = libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t);
        (policy, param.sched_priority, nice)
    };
    match policy {
        libc::SCHED_FIFO => format!("SCHED_FIFO {prio}"),
        libc::SCHED_RR => format!("SCHED_RR {prio}"),
        _ => format!("nice {nice}"),
    }
}

/// A fresh directory under /var/tmp (not /tmp: the guest mounts its own /tmp and must see this
/// one through the host's root).
fn scratch_dir() -> anyhow::Result<PathBuf> {
    let base = Path::new("/var/tmp");
    for n in 0..1000u32 {
        let d = base.join(format!("linkshare-uml.{}.{n}", std::process::id()));
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", d.display())),
        }
    }
    bail!("cannot create a scratch directory under /var/tmp")
}

fn set_executable(p: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", p.display()))
}

/// Copy what the guest's command writes to `work/stdout` and `work/stderr` to ours, every
/// 200 ms until `done`, then the rest (stdout to our stderr with `to_stderr`).
fn copy_outputs(work: &Path, done: &AtomicBool, to_stderr: bool) {
    let mut at = [0u64; 2];
    loop {
        let last = done.load(Ordering::Relaxed);
        for (i, name) in ["stdout", "stderr"].iter().enumerate() {
            let Ok(mut f) = std::fs::File::open(work.join(name)) else {
                continue;
            };
            let mut buf = Vec::new();
            if f.seek(SeekFrom::Start(at[i])).is_ok() && f.read_to_end(&mut buf).is_ok() {
                at[i] += buf.len() as u64;
                let _ = if i == 0 && !to_stderr {
                    std::io::stdout().write_all(&buf)
                } else {
                    std::io::stderr().write_all(&buf)
                };
            }
        }
        if last {
            let _ = std::io::stdout().flush();
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `s` as one word for `sh`: single-quoted, with `'` written as `'\''`.
fn quote(s: &[u8]) -> String {
    let s = String::from_utf8_lossy(s);
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_read_from_an_exported_script() {
        let script = "qdisc replace dev eth0 root handle 1: cake bandwidth 20mbit diffserv4\n\
                      qdisc add dev eth0 parent 1:2 handle 2: fq_codel\n\
                      class add dev eth0 parent 1: classid 1:1 hfsc sc rate 1mbit\n\
                      qdisc add dev eth0 parent 1:3 handle 3: cake\n\
                      filter add dev eth0 parent 1: protocol ip u32 match ip tos 0 0\n";
        assert_eq!(qdisc_kinds(script), vec!["cake", "fq_codel"]);
        assert_eq!(
            qdisc_kinds("qdisc add dev x root handle 1: hfsc default 2"),
            vec!["hfsc"]
        );
        assert!(qdisc_kinds("# nothing\n").is_empty());
    }

    #[test]
    fn the_guests_priority_can_be_set_or_turned_off() {
        assert_eq!(fifo_from(None), Some(GUEST_FIFO));
        assert_eq!(fifo_from(Some("off")), None);
        assert_eq!(fifo_from(Some("0")), None);
        assert_eq!(fifo_from(Some(" 30 ")), Some(30));
        assert_eq!(fifo_from(Some("500")), Some(99));
        assert_eq!(fifo_from(Some("high")), Some(GUEST_FIFO));
    }

    #[test]
    fn words_are_quoted_for_sh() {
        assert_eq!(quote(b"plain"), "'plain'");
        assert_eq!(quote(b"it's a b"), r"'it'\''s a b'");
    }
}
