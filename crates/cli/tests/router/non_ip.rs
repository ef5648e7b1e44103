//! Frames that are not IP under each `non_ip` choice: frames of a custom EtherType (0x88b5,
//! IEEE 802's local experimental one) sent from a towards c are shaped in the default class
//! (the default), passed unshaped, or dropped, and counted by what became of them. Before
//! `non_ip` existed every such frame passed unshaped, taking transmit slots past the policy.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::{class, in_ns, Lab};
use crate::malformed_and_exit::send_raw;

const ETHERTYPE: u16 = 0x88b5;
const FRAMES: usize = 20;

fn policy(non_ip: &str) -> String {
    format!(
        "{non_ip}qdisc = \"htb\"\ndefault = \"root\"\n[[class]]\nname = \"root\"\nrate = \"10mbit\"\n"
    )
}

/// `FRAMES` frames of [`ETHERTYPE`], 100 bytes each, broadcast.
fn custom_frames() -> Vec<Vec<u8>> {
    (0..FRAMES)
        .map(|i| {
            let mut f = vec![0u8; 100];
            f[..6].copy_from_slice(&[0xff; 6]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
            f[14] = i as u8;
            f
        })
        .collect()
}

/// An AF_PACKET socket in the calling thread's namespace receiving [`ETHERTYPE`] on `dev`.
fn listen(dev: &str) -> i32 {
    let c = std::ffi::CString::new(dev).unwrap();
    // SAFETY: valid C string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert!(idx > 0, "no {dev}");
    let proto = ETHERTYPE.to_be();
    // SAFETY: plain socket call.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK,
            i32::from(proto),
        )
    };
    assert!(fd >= 0);
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = idx as i32;
    // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    assert_eq!(r, 0, "bind");
    fd
}

/// Frames waiting on `fd`, read and counted; closes it.
fn drain(fd: i32) -> usize {
    let mut buf = [0u8; 2048];
    let mut n = 0;
    // SAFETY: `buf` is valid for its length; `fd` is ours.
    while unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) } > 0 {
        n += 1;
    }
    // SAFETY: closing our fd.
    unsafe { libc::close(fd) };
    n
}

/// Send the custom frames from a; how many reached c, and `stat` after.
fn send_and_count(lab: &Lab) -> (usize, Value) {
    let vc = lab.vc.clone();
    let fd = in_ns(&lab.c, move || listen(&vc));
    let va = lab.va.clone();
    in_ns(&lab.a, move || send_raw(&va, &custom_frames()));
    std::thread::sleep(Duration::from_millis(300));
    (drain(fd), lab.stat())
}

fn counter(st: &Value, key: &str) -> u64 {
    st["interfaces"][0][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key}: {st}"))
}

#[test]
fn non_ip_frames_are_shaped_passed_or_dropped_as_the_policy_says() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", &policy(""));
    lab.start(&p);
    let sent = |st: &Value| class(st, "root")["sent_packets"].as_u64().unwrap();
    let before = lab.stat();

    // The default: shaped in the default class, then forwarded.
    let (got, st) = send_and_count(&lab);
    assert_eq!(got, FRAMES, "shaped frames arrive: {st}");
    assert!(counter(&st, "non_ip_shaped") >= FRAMES as u64, "{st}");
    assert!(
        sent(&st) >= sent(&before) + FRAMES as u64,
        "the class sent them: {st}"
    );
    assert_eq!(counter(&st, "non_ip_passed"), 0, "{st}");

    // `pass`: forwarded unshaped; the class sees none of them.
    let q = lab.write_policy("pass.toml", &policy("non_ip = \"pass\"\n"));
    let (code, _, err) = lab.cli(&["reload", q.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let before = lab.stat();
    let (got, st) = send_and_count(&lab);
    assert_eq!(got, FRAMES, "passed frames arrive: {st}");
    assert!(
        counter(&st, "non_ip_passed") >= counter(&before, "non_ip_passed") + FRAMES as u64,
        "{st}"
    );
    assert_eq!(
        counter(&st, "non_ip_shaped"),
        counter(&before, "non_ip_shaped"),
        "{st}"
    );

    // `drop`: none crosses, each is counted.
    let q = lab.write_policy("drop.toml", &policy("non_ip = \"drop\"\n"));
    let (code, _, err) = lab.cli(&["reload", q.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let before = lab.stat();
    let (got, st) = send_and_count(&lab);
    assert_eq!(got, 0, "dropped frames arrive: {st}");
    assert!(
        counter(&st, "non_ip_dropped") >= counter(&before, "non_ip_dropped") + FRAMES as u64,
        "{st}"
    );
}
