//! Bad input and the ways out: the namespaces are removed even when a test panics; malformed
//! frames are counted (and fragments, IPv6 and LLDP pass), SIGHUP reloads the policy file and
//! SIGTERM exits cleanly.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use linkshare_lab::testbed;

use crate::helpers::{class, in_ns, Lab, ONE_CLASS};

#[test]
fn namespaces_are_removed_even_when_a_test_panics() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let n2 = names.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let Some(mut lab) = Lab::new() else { return };
        n2.lock()
            .unwrap()
            .extend([lab.a.clone(), lab.r.clone(), lab.c.clone()]);
        let p = lab.write_policy("p.toml", ONE_CLASS);
        lab.start(&p);
        panic!("deliberate panic with the shaper running");
    }));
    let names = names.lock().unwrap().clone();
    if names.is_empty() {
        return; // `ip netns` unavailable: Lab::new printed why
    }
    assert!(r.is_err());
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    for n in &names {
        assert!(
            !list.split_whitespace().any(|w| w == n),
            "namespace {n} left behind: {list}"
        );
    }
}

/// Send raw Ethernet frames out of `dev` (current namespace).
pub(crate) fn send_raw(dev: &str, frames: &[Vec<u8>]) {
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
    let va = lab.va.clone();
    let before = lab.stat();
    let mut first_frag = ipv4_frame(5, 46, 60);
    first_frag[20] = 0x20; // MF, offset 0
    let mut later_frag = ipv4_frame(5, 46, 60);
    later_frag[21] = 0x08; // offset 64 bytes, last fragment
    let mut v6 = vec![0u8; 14 + 40];
    v6[12] = 0x86;
    v6[13] = 0xdd;
    v6[14] = 0x60;
    v6[18..20].copy_from_slice(&1000u16.to_be_bytes()); // payload length beyond the frame
    v6[20] = 59;
    let mut lldp = vec![0u8; 60];
    lldp[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]);
    lldp[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    lldp[12] = 0x88;
    lldp[13] = 0xcc;
    let mut truncated = ipv4_frame(5, 46, 60);
    truncated.truncate(20); // Ethernet header and 6 bytes of IPv4
    let a = lab.a.clone();
    in_ns(&a, move || {
        send_raw(
            &va,
            &[
                ipv4_frame(3, 46, 60),   // bad IHL
                ipv4_frame(5, 1400, 60), // total length beyond the frame
                ipv4_frame(5, 10, 60),   // total length below the header
                truncated,
                v6,
                ipv4_frame(5, 46, 60), // fine (padded to 60)
                ipv4_frame(5, 46, 60), // fine
                first_frag,
                later_frag,
                lldp,
            ],
        )
    });
    std::thread::sleep(Duration::from_millis(200));
    let st = lab.stat();
    let m = &st["interfaces"][0]["malformed"];
    assert_eq!(m["bad_ihl"], 1, "{st}");
    assert_eq!(m["bad_ipv4_total_length"], 2, "{st}");
    assert_eq!(m["truncated_ipv4"], 1, "{st}");
    assert_eq!(m["bad_ipv6_payload_length"], 1, "{st}");
    assert_eq!(st["interfaces"][0]["fragments"], 2, "{st}");
    let sent = |s: &Value| class(s, "root")["sent_packets"].as_u64().unwrap();
    assert!(
        sent(&st) >= sent(&before) + 4,
        "fine frames and fragments must pass: {st}"
    );
    let non_ip = |s: &Value| s["interfaces"][0]["non_ip_shaped"].as_u64().unwrap();
    assert!(
        non_ip(&st) > non_ip(&before),
        "LLDP must be shaped and pass: {st}"
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

    lab.sigterm_exits_cleanly(Duration::from_secs(3));
}
