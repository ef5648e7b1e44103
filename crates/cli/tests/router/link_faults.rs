//! Faults of the links under a running shaper: IP fragments through several workers (the
//! AF_PACKET fanout group must hand each fragment over as it came, not a reassembled datagram
//! that fits no ring slot), and a link that goes down and up (the socket's pending error must
//! be read, or a level-triggered epoll reports it ready on every wait and the loop spins).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::helpers::{udp_rtts, udp_sink, udp_source, Lab, ONE_CLASS, TWO_HALVES};

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
