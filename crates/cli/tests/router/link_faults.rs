//! Faults of the links under a running shaper: IP fragments through several workers (the
//! AF_PACKET fanout group must hand each fragment over as it came, not a reassembled datagram
//! that fits no ring slot), a link that goes down and up (the socket's pending error must
//! be read, or a level-triggered epoll reports it ready on every wait and the loop spins), an
//! interface deleted and re-created under traffic (a new ifindex: the port must reopen) and an
//! MTU raised under the shaper (its ring slots and frame checks must follow).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::helpers::{in_ns, udp_rtts, udp_sink, udp_source, Lab, ONE_CLASS, TWO_HALVES};

/// CPU seconds (user + system) process `pid` has used so far, from /proc/PID/stat.
fn cpu_seconds(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name (which may hold spaces) in parentheses: utime and stime
    // are the 14th and 15th fields of the whole line, the 12th and 13th after ") ".
    let rest = &s[s.rfind(')').expect("stat line") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: plain query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / hz
}

/// 3000-byte UDP datagrams leave `a` as two IPv4 fragments each (MTU 1500); through two
/// workers over AF_PACKET every datagram must arrive whole.
#[test]
fn fragmented_datagrams_pass_through_two_workers() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("two.toml", TWO_HALVES);
    lab.start_with(&p, &["--workers", "2", "--io", "packet"]);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7501], t0, 1.5);
    let sent = udp_source(&lab, 7501, 1e6, 3000, t0, 0.1, 0.7)
        .join()
        .unwrap();
    let got = sink.join().unwrap();
    assert!(sent >= 10, "the source sent {sent} datagrams");
    let whole = got[0].iter().filter(|(_, n, _)| *n == 3000).count() as u64;
    let st = lab.stat();
    assert_eq!(
        whole, sent,
        "{whole} of {sent} fragmented datagrams arrived whole through --workers 2: {st}"
    );
    let frags: u64 = (0..2)
        .map(|i| st["interfaces"][i]["fragments"].as_u64().unwrap_or(0))
        .sum();
    assert!(frags >= 2 * sent, "fragments counted: {frags}, {st}");
}

/// `ip link set DEV down; up` on the shaper's interface: the shaper must not spin (it did, at
/// 100 % of a core for ever) and must forward again once the link is back.
#[test]
fn a_link_flap_neither_spins_the_loop_nor_stops_forwarding() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--io", "packet"]);
    let pid = lab.shaper.as_ref().unwrap().id();
    let ip = |args: &[&str]| {
        let st = Command::new("ip")
            .args(["netns", "exec", &lab.r, "ip", "link", "set", &lab.ra])
            .args(args)
            .status()
            .unwrap();
        assert!(st.success(), "ip link set {args:?}");
    };
    ip(&["down"]);
    std::thread::sleep(Duration::from_millis(300));
    ip(&["up"]);
    // Let the link come back (veth carrier) and the loop settle, then measure it idle.
    std::thread::sleep(Duration::from_millis(500));
    let c0 = cpu_seconds(pid);
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let cpu = (cpu_seconds(pid) - c0) / w0.elapsed().as_secs_f64();
    let st = lab.stat();
    // An idle loop wakes every 100 ms and uses well under 1 % of a core; a spinning one takes
    // all the CPU it is given (on a loaded 2-core machine still over 10 %).
    assert!(
        cpu < 0.05,
        "the idle shaper used {:.1} % of a core after a link flap: {st}",
        cpu * 100.0
    );
    assert!(
        st["interfaces"][0]["socket_errors"].as_u64().unwrap_or(0) >= 1,
        "the link's error was read and counted: {st}"
    );
    eprintln!("idle CPU after a link flap: {:.2} % of a core", cpu * 100.0);
    let rtts = udp_rtts(&lab, 7502, 10, Duration::from_millis(20));
    let answered = rtts.iter().filter(|r| **r < 1000.0).count();
    assert!(answered >= 8, "forwarding after the flap: {rtts:?}");
}

/// `ip ARGS` (the namespace given with `-n` in ARGS); the test fails if it does.
fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("ip");
    assert!(st.success(), "ip {args:?}");
}

/// The MAC address of `dev` in namespace `ns` (`ip -br link`: name, state, address, flags).
fn mac(ns: &str, dev: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", ns, "-br", "link", "show", dev])
        .output()
        .expect("ip link show");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("no address for {dev}: {text}"))
        .to_string()
}

/// Delete the shaper's interface towards c while a sends to c through it (its veth peer in c
/// goes too), then re-create the pair under the same names and addresses: the shaper must
/// notice the new interface (a new ifindex under the old name), reopen its port and forward
/// again. Before, its sockets stayed bound to the dead index and nothing crossed again.
#[test]
fn an_interface_deleted_and_recreated_under_traffic_is_rebound() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--io", "packet"]);
    let (mac_rc, mac_vc) = (mac(&lab.r, &lab.rc), mac(&lab.c, &lab.vc));
    let t0 = Instant::now();
    // 4 Mbit/s of 1000-byte datagrams from 0.1 s to 3 s, through the 10 Mbit/s class.
    let source = udp_source(&lab, 7503, 4e6, 1000, t0, 0.1, 3.0);
    std::thread::sleep(Duration::from_millis(600));
    ip(&["-n", &lab.r, "link", "del", &lab.rc]);
    std::thread::sleep(Duration::from_millis(400));
    ip(&[
        "link", "add", &lab.vc, "netns", &lab.c, "address", &mac_vc, "type", "veth", "peer",
        "name", &lab.rc, "netns", &lab.r, "address", &mac_rc,
    ]);
    ip(&["-n", &lab.c, "addr", "add", "10.77.0.2/24", "dev", &lab.vc]);
    for (ns, dev) in [(&lab.c, &lab.vc), (&lab.r, &lab.rc)] {
        ip(&["-n", ns, "link", "set", dev, "up"]);
        let d = dev.clone();
        in_ns(ns, move || linkshare_lab::testbed::offloads_off(&d));
    }
    // The sink listens on the re-created interface's address until after the source stops.
    let sink = udp_sink(&lab, &[7503], t0, 3.5);
    let sent = source.join().unwrap();
    let got = sink.join().unwrap();
    let st = lab.stat();
    let after = got[0].iter().filter(|(t, _, _)| *t >= 2.0).count();
    assert!(sent >= 100, "the source sent {sent} datagrams");
    assert!(
        after >= 50,
        "{after} datagrams crossed in the last second of traffic after the interface came back \
         ({} in all): {st}",
        got[0].len()
    );
    assert!(
        st["interfaces"][1]["rebinds"].as_u64().unwrap_or(0) >= 1,
        "the port was reopened and counted: {st}"
    );
    let rtts = udp_rtts(&lab, 7504, 10, Duration::from_millis(20));
    let answered = rtts.iter().filter(|r| **r < 1000.0).count();
    assert!(answered >= 8, "both ways after the rebind: {rtts:?}");
}

/// Raise the MTU of every interface on the path to 4000 under a running shaper: 3000-byte
/// datagrams then leave a unfragmented and must cross whole. Before, the receive ring's slots
/// (2 KiB) cut them and the transmit check refused anything over 1518 bytes.
#[test]
fn an_mtu_change_is_followed_and_larger_frames_pass() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--io", "packet"]);
    for (ns, dev) in [
        (&lab.a, &lab.va),
        (&lab.r, &lab.ra),
        (&lab.r, &lab.rc),
        (&lab.c, &lab.vc),
    ] {
        ip(&["-n", ns, "link", "set", dev, "mtu", "4000"]);
    }
    // The shaper looks at its interfaces every 100 ms.
    std::thread::sleep(Duration::from_millis(400));
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7505], t0, 1.5);
    let sent = udp_source(&lab, 7505, 2e6, 3000, t0, 0.1, 0.8)
        .join()
        .unwrap();
    let got = sink.join().unwrap();
    let st = lab.stat();
    let whole = got[0].iter().filter(|(_, n, _)| *n == 3000).count() as u64;
    assert!(sent >= 10, "the source sent {sent} datagrams");
    assert_eq!(whole, sent, "3000-byte datagrams at MTU 4000: {st}");
    for i in 0..2 {
        let ifc = &st["interfaces"][i];
        assert!(ifc["rebinds"].as_u64().unwrap_or(0) >= 1, "{st}");
        assert_eq!(ifc["fragments"].as_u64().unwrap_or(0), 0, "{st}");
    }
}
