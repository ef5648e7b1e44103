//! What an interface's driver reports through ethtool's ioctl (`SIOCETHTOOL`,
//! include/uapi/linux/ethtool.h): receive VLAN offload, receive queues, line speed.
//!
//! ## Principles
//! * **"The driver does not say" is an answer, not an error**: each query returns `None` when
//!   the driver does not implement the request (veth answers some, not all), and the caller
//!   falls back (a line rate from the policy, one queue, offload assumed off).
//! * **The request structs are the uapi's, field for field**, declared beside the one query
//!   that uses each.

use std::os::fd::AsRawFd;

use super::own;

/// Send ethtool request `data` (a struct starting with its `cmd` word) for interface `name`;
/// `None` when the driver does not answer it.
fn ethtool<T>(name: &str, data: &mut T) -> Option<()> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    // SAFETY: all-zero is a valid ifreq.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let b = name.as_bytes();
    if b.len() >= req.ifr_name.len() {
        return None;
    }
    for (d, s) in req.ifr_name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: plain system call.
    let fd = own(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
        .ok()?;
    // SAFETY: `req` is a valid ifreq whose data points at a live ethtool request.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    (r == 0).then_some(())
}

/// Whether interface `name` takes VLAN tags out of received frames in hardware (rx-vlan
/// offload, `ethtool -k`'s `rx-vlan-offload`, read as `ETH_FLAG_RXVLAN` of `ETHTOOL_GFLAGS`,
/// which reports the 802.1Q `NETIF_F_HW_VLAN_CTAG_RX` feature); `None` when the driver does
/// not answer.
pub fn rx_vlan_offload(name: &str) -> Option<bool> {
    const ETHTOOL_GFLAGS: u32 = 0x25;
    const ETH_FLAG_RXVLAN: u32 = 1 << 8;
    /// `struct ethtool_value`.
    #[repr(C)]
    struct Value {
        cmd: u32,
        data: u32,
    }
    let mut v = Value {
        cmd: ETHTOOL_GFLAGS,
        data: 0,
    };
    ethtool(name, &mut v)?;
    Some(v.data & ETH_FLAG_RXVLAN != 0)
}

/// Receive queues of interface `name` as its driver reports them (`ETHTOOL_GCHANNELS`: the
/// larger of its receive-only and combined channels; veth reports its receive queues), `None`
/// when the driver does not say. Unlike sysfs this answers in any network namespace.
pub fn rx_queue_count(name: &str) -> Option<u32> {
    /// `struct ethtool_channels`.
    #[repr(C)]
    #[derive(Default)]
    struct Channels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    let mut c = Channels {
        cmd: ETHTOOL_GCHANNELS,
        ..Channels::default()
    };
    ethtool(name, &mut c)?;
    Some(c.rx_count.max(c.combined_count)).filter(|n| *n > 0)
}

/// The interface's line rate in bit/s as its driver reports it (`ETHTOOL_GSET`), `None` when
/// the driver reports none or an unknown speed.
pub fn link_speed_bps(name: &str) -> Option<u64> {
    /// `struct ethtool_cmd` (the legacy, fixed-size settings request).
    #[repr(C)]
    struct EthtoolCmd {
        cmd: u32,
        supported: u32,
        advertising: u32,
        speed: u16,
        duplex: u8,
        port: u8,
        phy_address: u8,
        transceiver: u8,
        autoneg: u8,
        mdio_support: u8,
        maxtxpkt: u32,
        maxrxpkt: u32,
        speed_hi: u16,
        eth_tp_mdix: u8,
        eth_tp_mdix_ctrl: u8,
        lp_advertising: u32,
        reserved: [u32; 2],
    }
    const ETHTOOL_GSET: u32 = 1;
    // SAFETY: all-zero is a valid value of this plain-data struct.
    let mut cmd: EthtoolCmd = unsafe { std::mem::zeroed() };
    cmd.cmd = ETHTOOL_GSET;
    ethtool(name, &mut cmd)?;
    let mbit = u32::from(cmd.speed) | (u32::from(cmd.speed_hi) << 16);
    // SPEED_UNKNOWN is -1 (all ones); 0 means none either.
    (mbit != 0 && mbit != u32::MAX && mbit != 0xffff).then(|| u64::from(mbit) * 1_000_000)
}
