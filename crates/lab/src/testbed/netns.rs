//! Network namespace plumbing: `ip` commands, threads that join a namespace, device offloads.
//!
//! Everything is done through iproute2's `ip` (ip-netns(8), ip-link(8)) rather than netlink by
//! hand: the commands are those a reader would type, and a failure carries the command and
//! ip's own message. Work inside a namespace runs on a thread that joined it with setns(2), so
//! the rest of the process stays where it was; such a thread panics rather than run in the
//! wrong namespace.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use super::bed::PREFIX;

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

pub(super) fn open_ns(ns: &str) -> anyhow::Result<std::fs::File> {
    let path = format!("/var/run/netns/{ns}");
    std::fs::File::open(&path).with_context(|| format!("cannot open namespace {path}"))
}

/// Turn off transmit checksum offload and segmentation offloads on `dev` (in the calling
/// thread's namespace), so frames captured by AF_PACKET on the peer are complete, MTU-sized and
/// checksummed, and rx-vlan offload, which keeps `linkshare run --io auto` off AF_XDP (the
/// testbed carries no VLANs). Best effort: a device without the feature keeps its defaults.
pub fn offloads_off(dev: &str) {
    set_rx_vlan_offload(dev, false);
    for cmd in [
        0x17u32, /* ETHTOOL_STXCSUM */
        0x1f,    /* ETHTOOL_STSO */
        0x24,    /* ETHTOOL_SGSO */
        0x2c,    /* ETHTOOL_SGRO */
    ] {
        ethtool_value(dev, cmd, 0);
    }
}

/// Turn rx-vlan offload (`ethtool -K DEV rxvlan on|off`) on or off on `dev`, in the calling
/// thread's namespace: `ETHTOOL_GFLAGS`, then `ETHTOOL_SFLAGS` with `ETH_FLAG_RXVLAN` changed.
/// Returns whether the device took it.
pub fn set_rx_vlan_offload(dev: &str, on: bool) -> bool {
    const ETHTOOL_GFLAGS: u32 = 0x25;
    const ETHTOOL_SFLAGS: u32 = 0x26;
    const ETH_FLAG_RXVLAN: u32 = 1 << 8;
    let Some(flags) = ethtool_value(dev, ETHTOOL_GFLAGS, 0) else {
        return false;
    };
    let want = if on {
        flags | ETH_FLAG_RXVLAN
    } else {
        flags & !ETH_FLAG_RXVLAN
    };
    ethtool_value(dev, ETHTOOL_SFLAGS, want).is_some()
}

/// One `SIOCETHTOOL` request carrying a `struct ethtool_value` (`cmd`, `data`) on `dev`, in the
/// calling thread's namespace: the value the kernel left in `data`, or `None` if it refused.
fn ethtool_value(dev: &str, cmd: u32, data: u32) -> Option<u32> {
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
        return None;
    }
    let mut v = EthtoolValue { cmd, data };
    let mut req = Ifreq {
        name: [0; 16],
        data: (&mut v as *mut EthtoolValue).cast(),
        pad: [0; 16],
    };
    let n = dev.len().min(15);
    req.name[..n].copy_from_slice(&dev.as_bytes()[..n]);
    // SAFETY: `req` is a valid ifreq pointing at a live ethtool_value.
    let ok = unsafe {
        libc::ioctl(fd, 0x8946 /* SIOCETHTOOL */, &mut req)
    } == 0;
    // SAFETY: closing the fd we opened.
    unsafe { libc::close(fd) };
    ok.then_some(v.data)
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
