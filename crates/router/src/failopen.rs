//! Fail-open: what forwards between IN and OUT while the shaper is not running.
//!
//! The choice: a kernel bridge of the two interfaces, unshaped, made when the shaper stops and
//! removed when it starts. A stopped shaper otherwise leaves the link down (fail-closed, the
//! default), which is the safe choice where the policy enforces something (a tenant's cap)
//! and the wrong one where the link matters more than its shaping (an office's only uplink).
//!
//! * `linkshare run --fail-open` removes the bridge before it opens its sockets (a bridge and
//!   the shaper both forwarding would send every frame twice) and makes it again when it
//!   exits, cleanly or with an error.
//! * What the shaper cannot do itself (killed by SIGKILL or the watchdog, a crash) the service
//!   manager does after it: `linkshare fail-open --dev IN --dev OUT` makes the bridge, run from
//!   the unit's `ExecStopPost=` (docs/router.md, "Fail-open"); a restart of the unit removes
//!   it again.
//!
//! The bridge is named after the pair ([`bridge_name`]: `lsfo` and a hash of both names), so
//! one machine can have several; it runs no STP (the ports forward at once) and has no address.
//! Its ports keep their own configuration; the shaper never touches a bridge not named so.

use std::io;

use crate::sys;

/// The fail-open bridge of interfaces `dev_in` and `dev_out`: `lsfo` and 8 hex digits of a
/// FNV-1a hash of the two names (within the 15 bytes of an interface name).
pub fn bridge_name(dev_in: &str, dev_out: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in dev_in.bytes().chain([0u8]).chain(dev_out.bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("lsfo{h:08x}")
}

/// Bridge `dev_in` and `dev_out` (the shaper is not running). Idempotent: a bridge already
/// there is completed and brought up.
pub fn open(dev_in: &str, dev_out: &str) -> io::Result<String> {
    let br = bridge_name(dev_in, dev_out);
    let ctx = |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    match sys::bridge::add(&br) {
        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => {
            return Err(ctx(format!("cannot create bridge {br}"))(e))
        }
        _ => {}
    }
    for dev in [dev_in, dev_out] {
        let idx = sys::ifindex(dev)?;
        match sys::bridge::add_port(&br, idx) {
            // Already a port of it.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            r => r.map_err(ctx(format!("cannot add {dev} to bridge {br}")))?,
        }
    }
    sys::set_link_up(&br, true).map_err(ctx(format!("cannot bring bridge {br} up")))?;
    Ok(br)
}

/// Remove the fail-open bridge of `dev_in` and `dev_out` (the shaper takes over); returns
/// whether there was one.
pub fn close(dev_in: &str, dev_out: &str) -> io::Result<bool> {
    let br = bridge_name(dev_in, dev_out);
    if sys::ifindex(&br).is_err() {
        return Ok(false);
    }
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("cannot remove bridge {br}: {e}"));
    sys::set_link_up(&br, false).map_err(ctx)?;
    sys::bridge::delete(&br).map_err(ctx)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::bridge_name;

    #[test]
    fn bridge_names_fit_an_interface_name_and_tell_pairs_apart() {
        let a = bridge_name("eth0", "eth1");
        assert!(a.len() < libc::IFNAMSIZ, "{a}");
        assert_eq!(a, bridge_name("eth0", "eth1"));
        assert_ne!(a, bridge_name("eth1", "eth0"));
        assert_ne!(bridge_name("eth0", "eth10"), bridge_name("eth01", "eth0"));
    }
}
