//! systemd's readiness protocol (sd_notify(3)) for `Type=notify` units, written out here rather
//! than linking libsystemd: one datagram of `KEY=VALUE` lines to the unix socket named by
//! `$NOTIFY_SOCKET`.
//!
//! Principles (sd_notify(3), systemd.service(5) "Type=notify"):
//! * `READY=1` once the sockets are open and the control socket listens; `RELOADING=1` with
//!   `MONOTONIC_USEC=` (CLOCK_MONOTONIC in µs, which systemd 253+ requires with it) when a SIGHUP
//!   reload starts, then `READY=1` when it is done; `STOPPING=1` when the drain begins; `STATUS=`
//!   a line `systemctl status` shows.
//! * `$NOTIFY_SOCKET` is a path, or an abstract socket name written with a leading `@`.
//! * `WATCHDOG=1` every half of `$WATCHDOG_USEC` (`WatchdogSec=`, sd_watchdog_enabled(3)) from
//!   the loop that forwards, after a turn of it: a loop that hangs stops the pings and systemd
//!   restarts the unit. With workers, the control thread pings only while every worker's loop
//!   has turned within the interval ([`Watchdog`]).
//! * Without `$NOTIFY_SOCKET` (not run by systemd) nothing is sent. Failing to send is not an
//!   error of the shaper: the datagram is best effort, as in libsystemd, and is reported once.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable systemd sets for `Type=notify` services.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Send `state` (newline-separated `KEY=VALUE` assignments) to the socket named by
/// `$NOTIFY_SOCKET`. `Ok(false)` when the variable is unset or empty.
pub fn notify(state: &str) -> std::io::Result<bool> {
    match std::env::var_os(NOTIFY_SOCKET) {
        Some(path) if !path.is_empty() => {
            send_to(&path.to_string_lossy(), state)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Send `state` to the notification socket `socket` (a path, or `@name` for an abstract one).
pub fn send_to(socket: &str, state: &str) -> std::io::Result<()> {
    let addr = match socket.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None => SocketAddr::from_pathname(socket)?,
    };
    let sock = UnixDatagram::unbound()?;
    let n = sock.send_to_addr(state.as_bytes(), &addr)?;
    if n != state.len() {
        return Err(std::io::Error::other("short write to $NOTIFY_SOCKET"));
    }
    Ok(())
}

/// When to send `WATCHDOG=1`: every half of the interval systemd asked for, as
/// sd_watchdog_enabled(3) advises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watchdog {
    /// The unit's `WatchdogSec=`, in ns.
    pub interval_ns: u64,
    next: u64,
}

impl Watchdog {
    /// From the environment systemd sets (`$WATCHDOG_USEC`, and `$WATCHDOG_PID` when the
    /// request is for one process only); `None` when no watchdog is asked of this process.
    pub fn from_env() -> Option<Watchdog> {
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        Self::from_values(usec.as_deref(), pid.as_deref(), std::process::id())
    }

    /// [`Watchdog::from_env`] on given values: `usec` must be a positive integer, and `pid`,
    /// when set, this process's id.
    pub fn from_values(usec: Option<&str>, pid: Option<&str>, my_pid: u32) -> Option<Watchdog> {
        let usec: u64 = usec?.trim().parse().ok().filter(|u| *u > 0)?;
        if let Some(p) = pid {
            if p.trim().parse::<u32>().ok() != Some(my_pid) {
                return None;
            }
        }
        Some(Watchdog {
            interval_ns: usec.saturating_mul(1000),
            next: 0,
        })
    }

    /// Whether a ping is due at `now` (monotonic ns); if so, the next one is half an
    /// interval later.
    pub fn due(&mut self, now: u64) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now.saturating_add(self.interval_ns / 2);
        true
    }
}

/// `notify`, with a failure reported on stderr (the shaper keeps running).
pub fn tell(state: &str) {
    if let Err(e) = notify(state) {
        eprintln!("linkshare: cannot notify systemd ({state:?}): {e}");
    }
}

/// The `RELOADING=1` message: with the monotonic clock in µs, as systemd expects.
pub fn reloading_message(monotonic_ns: u64) -> String {
    format!(
        "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the policy",
        monotonic_ns / 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).unwrap_or_else(|e| panic!("recv: {e}"));
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn messages_reach_a_path_socket_named_by_the_environment() {
        let dir = std::env::temp_dir().join(format!("linkshare-notify-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).unwrap_or_else(|e| panic!("bind: {e}"));
        let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
        // The only test in this crate that touches NOTIFY_SOCKET: no other test reads it.
        std::env::set_var(NOTIFY_SOCKET, &path);
        assert!(notify("READY=1").unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(recv(&sock), "READY=1");
        tell(&reloading_message(5_000_000_123));
        let r = recv(&sock);
        assert!(r.starts_with("RELOADING=1\n"), "{r}");
        assert!(r.contains("MONOTONIC_USEC=5000000\n"), "{r}");
        tell("STOPPING=1");
        assert_eq!(recv(&sock), "STOPPING=1");
        std::env::remove_var(NOTIFY_SOCKET);
        assert!(!notify("READY=1").unwrap_or_else(|e| panic!("{e}")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn abstract_sockets_are_written_with_an_at() {
        let name = format!("linkshare-notify-test-{}", std::process::id());
        let addr =
            SocketAddr::from_abstract_name(name.as_bytes()).unwrap_or_else(|e| panic!("addr: {e}"));
        let sock = UnixDatagram::bind_addr(&addr).unwrap_or_else(|e| panic!("bind: {e}"));
        let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
        send_to(&format!("@{name}"), "READY=1\nSTATUS=shaping")
            .unwrap_or_else(|e| panic!("send: {e}"));
        assert_eq!(recv(&sock), "READY=1\nSTATUS=shaping");
    }

    #[test]
    fn the_watchdog_pings_every_half_interval_for_this_process_only() {
        assert_eq!(Watchdog::from_values(None, None, 7), None);
        assert_eq!(Watchdog::from_values(Some("0"), None, 7), None);
        assert_eq!(Watchdog::from_values(Some("x"), None, 7), None);
        assert_eq!(Watchdog::from_values(Some("5000000"), Some("8"), 7), None);
        let mut w = Watchdog::from_values(Some("5000000"), Some("7"), 7)
            .unwrap_or_else(|| panic!("a watchdog for pid 7"));
        assert_eq!(w.interval_ns, 5_000_000_000);
        assert!(w.due(1_000));
        assert!(!w.due(1_000 + 2_499_999_999));
        assert!(w.due(1_000 + 2_500_000_000));
        assert!(!w.due(1_000 + 2_600_000_000));
    }

    #[test]
    fn a_missing_socket_is_an_error_not_a_panic() {
        assert!(send_to("/nonexistent/linkshare/notify.sock", "READY=1").is_err());
    }
}
