//! The policy's `trust_dscp` and `wash`: a host in a that marks its datagrams EF gets the voice
//! class while its DSCP is trusted, and not once the policy stops trusting it; washed
//! datagrams reach c with DSCP 0 (and a header the kernel accepts).

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::helpers::{class, in_ns, Lab};

const POLICY: &str = r#"
qdisc = "htb"
default = "bulk"
[[class]]
name = "root"
rate = "20mbit"
[[class]]
name = "voice"
parent = "root"
rate = "2mbit"
ceil = "20mbit"
prio = 0
[[class]]
name = "bulk"
parent = "root"
rate = "18mbit"
ceil = "20mbit"
[[filter]]
dscp = "ef"
class = "voice"
"#;

/// Set an int socket option of `s`.
fn setsockopt(s: &UdpSocket, level: libc::c_int, opt: libc::c_int, v: libc::c_int) {
    // SAFETY: a valid socket and a c_int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt {opt}");
}

/// From a to c:`port`, `n` datagrams of 200 bytes marked EF (TOS 0xb8), 2 ms apart; in c, the
/// TOS byte of each that arrives (IP_RECVTOS).
fn ef_datagrams(lab: &Lab, port: u16, n: usize) -> Vec<u8> {
    let (tx, rx) = std::sync::mpsc::channel();
    let c = lab.c.clone();
    let sink = std::thread::spawn(move || {
        in_ns(&c, move || {
            let s = UdpSocket::bind(("10.77.0.2", port)).unwrap();
            setsockopt(&s, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            tx.send(()).unwrap();
            let mut tos = Vec::new();
            let t0 = Instant::now();
            while tos.len() < n && t0.elapsed() < Duration::from_secs(3) {
                if let Some(t) = recv_tos(&s) {
                    tos.push(t);
                }
            }
            tos
        })
    });
    rx.recv().unwrap();
    in_ns(&lab.a.clone(), move || {
        let s = UdpSocket::bind("10.77.0.1:0").unwrap();
        setsockopt(&s, libc::IPPROTO_IP, libc::IP_TOS, 0xb8);
        for _ in 0..n {
            s.send_to(&[0x17u8; 200], ("10.77.0.2", port)).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    sink.join().unwrap()
}

/// One datagram's TOS byte from its IP_TOS control message; `None` on a timeout.
fn recv_tos(s: &UdpSocket) -> Option<u8> {
    let mut buf = [0u8; 2048];
    let mut ctl = [0u8; 64];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; zeroed is a valid empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = ctl.len() as _;
    // SAFETY: the buffers msg points to outlive the call.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return None;
    }
    // SAFETY: walking the control messages the kernel wrote into `ctl`, with its macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                return Some(*libc::CMSG_DATA(c));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    None
}

fn sent(lab: &Lab, name: &str) -> u64 {
    class(&lab.stat(), name)["sent_packets"]
        .as_u64()
        .unwrap_or(0)
}

/// Trusted (the default), EF datagrams are voice's and arrive marked. With `trust_dscp = false`
/// the same datagrams are bulk's, counted as untrusted, and still arrive marked; with
/// `wash = true` too they arrive with DSCP 0 (ECN kept) and are counted as washed.
#[test]
fn an_untrusted_host_marking_ef_does_not_get_the_voice_class() {
    let Some(mut lab) = Lab::new() else { return };
    let trusted = lab.write_policy("trusted.toml", POLICY);
    lab.start(&trusted);
    let tos = ef_datagrams(&lab, 7501, 50);
    let (voice, bulk) = (sent(&lab, "voice"), sent(&lab, "bulk"));
    assert!(tos.len() >= 45 && tos.iter().all(|t| *t == 0xb8), "{tos:?}");
    assert!(voice >= 45, "trusted EF: voice sent {voice}, bulk {bulk}");

    let untrusted = lab.write_policy("untrusted.toml", &format!("trust_dscp = false\n{POLICY}"));
    let (code, _, err) = lab.cli(&["reload", untrusted.to_str().unwrap_or_default()]);
    assert_eq!(code, 0, "{err}");
    let tos = ef_datagrams(&lab, 7502, 50);
    let (voice2, bulk2) = (sent(&lab, "voice"), sent(&lab, "bulk"));
    assert!(tos.len() >= 45 && tos.iter().all(|t| *t == 0xb8), "{tos:?}");
    assert_eq!(voice2, voice, "untrusted EF reached voice");
    assert!(
        bulk2 - bulk >= 45,
        "untrusted EF: bulk sent {}",
        bulk2 - bulk
    );
    let st = lab.stat();
    let untrusted_count = st["interfaces"][0]["dscp_untrusted"].as_u64().unwrap_or(0);
    assert!(untrusted_count >= 45, "{}", st["interfaces"][0]);

    let washed = lab.write_policy(
        "washed.toml",
        &format!("trust_dscp = false\nwash = true\n{POLICY}"),
    );
    let (code, _, err) = lab.cli(&["reload", washed.to_str().unwrap_or_default()]);
    assert_eq!(code, 0, "{err}");
    let tos = ef_datagrams(&lab, 7503, 50);
    assert!(tos.len() >= 45 && tos.iter().all(|t| *t == 0), "{tos:?}");
    assert_eq!(sent(&lab, "voice"), voice, "washed EF reached voice");
    let st = lab.stat();
    let washed_count = st["interfaces"][0]["dscp_washed"].as_u64().unwrap_or(0);
    assert!(washed_count >= 45, "{}", st["interfaces"][0]);
    let (code, text, _) = lab.cli(&["stat"]);
    assert_eq!(code, 0);
    assert!(text.contains("dscp: untrusted"), "{text}");
}
