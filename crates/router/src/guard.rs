//! What `linkshare run` refuses before it forwards a frame:
//!
//! * **A second shaper on an interface**: each interface is locked with flock(2) on
//!   `<lock dir>/<ifname>@<netns inode>.lock`, which holds the owner's pid. The kernel drops the
//!   lock when the process dies (SIGKILL included), so a stale file never blocks; the namespace
//!   inode keeps equal interface names of different network namespaces apart. The file is opened
//!   without following symlinks and removed at exit while still locked (so files do not pile up
//!   in the lock directory); a lock taken on a file that was removed meanwhile is taken again.
//! * **An interface name that is not one**: longer than IFNAMSIZ − 1 bytes, empty, `.`/`..`, or
//!   holding `/`, `:` or white space (names go into lock file paths).
//! * **A forwarding loop**: the same interface given twice (by name or by ifindex), or the two
//!   ends of one veth pair (the peer of one is the other: every frame sent on one comes back on
//!   the other). The peer comes from rtnetlink (RTM_GETLINK, rtnetlink(7)): `IFLA_LINK` is the
//!   peer's ifindex, `IFLA_LINK_NETNSID` present means the peer lives in another namespace, and
//!   `IFLA_LINKINFO`/`IFLA_INFO_KIND` names the driver (as in Linux's drivers/net/veth.c
//!   `veth_get_iflink` and net/core/rtnetlink.c `rtnl_fill_link_netnsid`).
//!
//! And what it warns of but runs anyway: a policy whose root is faster than the outgoing
//! interface (the speed the driver reports through ethtool, or `--line-rate`), where the queue
//! builds in the NIC instead of the scheduler and no class is shaped as configured.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::sys;

/// An input the shaper refuses to start with (exit code 1), as opposed to a runtime failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Locks held on the interfaces; released when dropped or when the process dies.
#[derive(Debug)]
pub struct InterfaceLocks {
    files: Vec<(File, PathBuf)>,
}

impl Drop for InterfaceLocks {
    fn drop(&mut self) {
        // Removed while still locked: a shaper that opens the path now creates a new file, and
        // one that opened the old file finds it removed once it gets the lock (and retries).
        for (_, path) in &self.files {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Refuse a name that cannot be a Linux interface's (`dev_valid_name` in net/core/dev.c).
pub fn check_interface_name(name: &str) -> anyhow::Result<()> {
    let bad = name.is_empty()
        || name.len() >= libc::IFNAMSIZ
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace());
    if bad {
        return Err(Refused(format!(
            "--dev {name:?} is not an interface name (1 to {} bytes, no `/`, `:` or white space); \
             `ip link` lists the interfaces",
            libc::IFNAMSIZ - 1
        ))
        .into());
    }
    Ok(())
}

/// Lock every interface in `devs` for this process, or say which process holds one.
pub fn lock_interfaces(dir: &Path, devs: &[&str]) -> anyhow::Result<InterfaceLocks> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let ns = std::fs::metadata("/proc/self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0);
    let mut files = Vec::new();
    for dev in devs {
        check_interface_name(dev)?;
        let path: PathBuf = dir.join(format!("{dev}@{ns}.lock"));
        let mut f = lock_file(&path, dev)?;
        f.set_len(0)?;
        f.rewind()?;
        writeln!(f, "{}", std::process::id())?;
        f.flush()?;
        files.push((f, path));
    }
    Ok(InterfaceLocks { files })
}

/// Open and lock `path` (the lock of interface `dev`), never through a symlink; a file removed
/// by its previous holder between our open and our lock is opened again.
fn lock_file(path: &Path, dev: &str) -> anyhow::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    for _ in 0..8 {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .with_context(|| format!("cannot open {} (a symlink is refused)", path.display()))?;
        // SAFETY: flock on an fd we own; no memory is passed.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()));
            }
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            let pid = pid.trim();
            anyhow::bail!(
                "interface {dev} is in use by linkshare (pid {}); stop that shaper first \
                 (lock {})",
                if pid.is_empty() { "unknown" } else { pid },
                path.display()
            );
        }
        let same = std::fs::symlink_metadata(path)
            .ok()
            .zip(f.metadata().ok())
            .is_some_and(|(p, o)| p.ino() == o.ino() && p.dev() == o.dev());
        if same {
            return Ok(f);
        }
    }
    anyhow::bail!("cannot lock {}: it keeps being replaced", path.display())
}

/// Refuse `--dev a --dev b` when forwarding between them would loop.
pub fn check_no_loop(a: &str, b: &str) -> anyhow::Result<()> {
    if a == b {
        return Err(Refused(format!(
            "--dev {a} is given twice: the same interface on both sides would forward every frame back to itself"
        ))
        .into());
    }
    let (Ok(ia), Ok(ib)) = (sys::ifindex(a), sys::ifindex(b)) else {
        return Ok(()); // a missing interface is reported when it is opened
    };
    if ia == ib {
        return Err(Refused(format!(
            "--dev {a} and --dev {b} are the same interface (ifindex {ia}): a forwarding loop"
        ))
        .into());
    }
    for (x, ix, y, iy) in [(a, ia, b, ib), (b, ib, a, ia)] {
        if let Ok(l) = link_info(ix) {
            if l.kind.as_deref() == Some("veth") && l.peer == Some(iy) && !l.peer_elsewhere {
                return Err(Refused(format!(
                    "--dev {x} and --dev {y} are the two ends of one veth pair: every frame sent \
                     on one comes back on the other (a forwarding loop); give interfaces of two \
                     different links"
                ))
                .into());
            }
        }
    }
    Ok(())
}

/// What rtnetlink says about an interface's link.
#[derive(Debug, Default, PartialEq)]
pub struct LinkInfo {
    /// `IFLA_LINK`: the peer's (or lower device's) ifindex.
    pub peer: Option<i32>,
    /// `IFLA_LINK_NETNSID` present: `peer` is an index in another namespace.
    pub peer_elsewhere: bool,
    /// `IFLA_INFO_KIND`: the link type (`veth`, `vlan`, …).
    pub kind: Option<String>,
}

const NLMSG_HDR: usize = 16;
const IFINFO: usize = 16;

/// Ask rtnetlink about interface `ifindex` (RTM_GETLINK).
pub fn link_info(ifindex: i32) -> std::io::Result<LinkInfo> {
    // SAFETY: plain socket(2) call; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = [0u8; NLMSG_HDR + IFINFO];
    req[0..4].copy_from_slice(&((NLMSG_HDR + IFINFO) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&libc::RTM_GETLINK.to_ne_bytes());
    req[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes()); // seq
    req[NLMSG_HDR] = libc::AF_UNSPEC as u8;
    req[NLMSG_HDR + 4..NLMSG_HDR + 8].copy_from_slice(&ifindex.to_ne_bytes());
    // SAFETY: sends `req.len()` bytes from a live buffer; the kernel is the default destination.
    let n = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 64 << 10];
    // SAFETY: receives into a live buffer of `buf.len()` bytes.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    parse_link_reply(&buf[..n as usize]).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "unexpected rtnetlink reply",
        )
    })
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

/// Route attributes (`struct rtattr`: length, type, payload padded to 4) of `b`.
fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(b, off)?);
        let ty = u16_at(b, off + 2)?;
        let payload = b.get(off + 4..off.checked_add(len)?)?;
        if len < 4 {
            return None;
        }
        off += (len + 3) & !3;
        Some((ty & 0x3fff, payload)) // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
    })
}

/// The link facts of one RTM_NEWLINK reply; `None` if it is not one (an error reply included).
pub fn parse_link_reply(b: &[u8]) -> Option<LinkInfo> {
    let len = u32::from_ne_bytes(b.get(0..4)?.try_into().ok()?) as usize;
    if u16_at(b, 4)? != libc::RTM_NEWLINK {
        return None;
    }
    let body = b.get(NLMSG_HDR + IFINFO..len.min(b.len()))?;
    let mut info = LinkInfo::default();
    for (ty, p) in attrs(body) {
        match ty {
            libc::IFLA_LINK => {
                info.peer = Some(i32::from_ne_bytes(p.get(0..4)?.try_into().ok()?));
            }
            libc::IFLA_LINK_NETNSID => info.peer_elsewhere = true,
            libc::IFLA_LINKINFO => {
                for (t, k) in attrs(p) {
                    if t == libc::IFLA_INFO_KIND {
                        let s = k.split(|&c| c == 0).next().unwrap_or(&[]);
                        info.kind = Some(String::from_utf8_lossy(s).into_owned());
                    }
                }
            }
            _ => {}
        }
    }
    Some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lsguard-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_second_lock_on_an_interface_names_the_owner_and_dropping_frees_it() {
        let dir = scratch("lock");
        let held = lock_interfaces(&dir, &["eth7", "eth8"]).expect("first lock");
        // flock locks belong to the open file: a second open in the same process conflicts.
        let e = lock_interfaces(&dir, &["eth9", "eth8"]).expect_err("second lock");
        let msg = format!("{e:#}");
        assert!(msg.contains("eth8"), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(held);
        let files = || std::fs::read_dir(&dir).map(|r| r.count()).unwrap_or(0);
        // eth9's file of the refused call stays; eth7's and eth8's went with their locks.
        assert_eq!(files(), 1, "lock files are removed with their locks");
        assert!(lock_interfaces(&dir, &["eth8"]).is_ok(), "freed on drop");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_symlinked_lock_file_and_names_that_are_not_interfaces_are_refused() {
        let dir = scratch("symlink");
        std::fs::create_dir_all(&dir).expect("dir");
        let ns = std::fs::metadata("/proc/self/ns/net")
            .map(|m| m.ino())
            .unwrap_or(0);
        let target = dir.join("victim");
        std::fs::write(&target, "precious\n").expect("victim");
        std::os::unix::fs::symlink(&target, dir.join(format!("eth5@{ns}.lock"))).expect("link");
        let e = lock_interfaces(&dir, &["eth5"]).expect_err("a symlink is not followed");
        assert!(format!("{e:#}").contains("symlink"), "{e:#}");
        assert_eq!(
            std::fs::read_to_string(&target).ok().as_deref(),
            Some("precious\n")
        );
        for bad in ["", "..", "a/b", "eth0:1", "x y", "abcdefghijklmnop"] {
            let e = lock_interfaces(&dir, &[bad]).expect_err(bad);
            assert!(e.downcast_ref::<Refused>().is_some(), "{bad:?}: {e:#}");
        }
        assert!(
            check_interface_name("abcdefghijklmno").is_ok(),
            "15 bytes fit"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_same_name_twice_is_a_loop() {
        let e = check_no_loop("eth0", "eth0").expect_err("refused");
        assert!(e.downcast_ref::<Refused>().is_some());
        assert!(check_no_loop("lo", "nonexistent0").is_ok());
        // The loopback device has no link peer: not a veth.
        let lo = sys::ifindex("lo").expect("lo");
        let info = link_info(lo).expect("rtnetlink answers");
        assert_eq!(info.kind, None, "{info:?}");
    }

    #[test]
    fn rtnetlink_attributes_are_parsed() {
        // RTM_NEWLINK, ifinfomsg, IFLA_LINK = 7, IFLA_LINKINFO { IFLA_INFO_KIND = "veth" }.
        let mut m = vec![0u8; NLMSG_HDR + IFINFO];
        m[4..6].copy_from_slice(&libc::RTM_NEWLINK.to_ne_bytes());
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&libc::IFLA_LINK.to_ne_bytes());
        m.extend_from_slice(&7i32.to_ne_bytes());
        m.extend_from_slice(&16u16.to_ne_bytes());
        m.extend_from_slice(&(libc::IFLA_LINKINFO | 0x8000).to_ne_bytes());
        m.extend_from_slice(&9u16.to_ne_bytes());
        m.extend_from_slice(&libc::IFLA_INFO_KIND.to_ne_bytes());
        m.extend_from_slice(b"veth\0\0\0\0");
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        let info = parse_link_reply(&m).expect("parsed");
        assert_eq!(
            info,
            LinkInfo {
                peer: Some(7),
                peer_elsewhere: false,
                kind: Some("veth".into())
            }
        );
        assert_eq!(parse_link_reply(&m[..10]), None, "truncated");
    }
}

/// The warning for a policy whose top-level classes' ceilings add up to more than the outgoing
/// interface's speed (`line_bps`, `None` when the driver reports none); `None` when it fits.
pub fn root_above_line(
    policy: &linkshare_config::Policy,
    line_bps: Option<u64>,
    dev: &str,
) -> Option<String> {
    let line = line_bps.filter(|b| *b > 0)?;
    let root = policy.root_rate().0;
    (root > line).then(|| {
        let names: Vec<&str> = policy
            .classes()
            .iter()
            .filter(|c| c.parent_id.is_none())
            .map(|c| c.name.as_str())
            .collect();
        format!(
            "{}: the policy's root ({}: {}) is faster than {dev} ({}): the queue will build in the \
             NIC, not in the scheduler, and classes will not get their rates; set the root's ceil \
             to at most {} (or give --line-rate if the driver's speed is wrong)",
            policy.origin(),
            names.join(" + "),
            linkshare_core::units::Rate(root),
            linkshare_core::units::Rate(line),
            linkshare_core::units::Rate(line),
        )
    })
}

#[cfg(test)]
mod rate_tests {
    use super::*;

    #[test]
    fn a_root_faster_than_the_interface_is_named() {
        let text =
            "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"root\"\nrate = \"2gbit\"\n\
                    [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"1mbit\"\n";
        let p = linkshare_config::Policy::parse(text, "p.toml").unwrap_or_else(|e| panic!("{e:?}"));
        let w = root_above_line(&p, Some(1_000_000_000), "eth1").unwrap_or_default();
        assert!(
            w.starts_with("p.toml: the policy's root (root: 2gbit) is faster than eth1 (1gbit)"),
            "{w}"
        );
        assert_eq!(root_above_line(&p, Some(10_000_000_000), "eth1"), None);
        assert_eq!(root_above_line(&p, None, "eth1"), None);
    }
}
