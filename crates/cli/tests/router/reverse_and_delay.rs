//! The reverse direction and link emulation: a `--reverse-policy` shapes c -> a (one and two
//! workers); `--emulate` delays after the scheduler, and `reverse_delay` with `--path-delay`
//! make up the round trip.

use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::helpers::{
    frame_rate, in_ns, median, udp_rtts, within, Lab, ONE_CLASS, THREE_CLASSES, TWO_CLASSES,
};

#[test]
fn reverse_policy_shapes_the_reverse_direction() {
    reverse_shaped(1);
}

/// With two workers the reverse policy is cut into shards too (each worker owns one shard of
/// each direction).
#[test]
fn reverse_policy_shapes_the_reverse_direction_with_two_workers() {
    reverse_shaped(2);
}

/// c -> a UDP to port 6100 through a reverse policy whose class for it has 4 Mbit/s.
fn reverse_shaped(workers: usize) {
    let Some(mut lab) = Lab::new() else { return };
    let (fwd, rev) = if workers == 1 {
        (ONE_CLASS.to_string(), ONE_CLASS.replace("10mbit", "4mbit"))
    } else {
        (
            THREE_CLASSES.to_string(),
            TWO_CLASSES
                .replace("6001", "6100")
                .replace("\"3mbit\"", "\"4mbit\"")
                .replace("\"6mbit\"", "\"5mbit\""),
        )
    };
    let p = lab.write_policy("p.toml", &fwd);
    let rp = lab.write_policy("r.toml", &rev);
    let w = workers.to_string();
    lab.start_with(
        &p,
        &["--reverse-policy", rp.to_str().unwrap(), "--workers", &w],
    );
    // c -> a: bind the sink in a, send from c.
    let a = lab.a.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = std::thread::spawn(move || {
        in_ns(&a, move || {
            let s = UdpSocket::bind("10.77.0.1:6100").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            tx.send(()).unwrap();
            let mut buf = [0u8; 2048];
            let mut arr = Vec::new();
            let t0 = Instant::now();
            while let Ok(n) = s.recv(&mut buf) {
                arr.push((t0.elapsed().as_secs_f64(), n, 0u64));
            }
            arr
        })
    });
    rx.recv().unwrap();
    let c = lab.c.clone();
    in_ns(&c, move || {
        let s = UdpSocket::bind("10.77.0.2:0").unwrap();
        let buf = vec![0u8; 1000];
        let t0 = Instant::now();
        let mut i = 0u64;
        while t0.elapsed() < Duration::from_millis(2000) {
            let _ = s.send_to(&buf, "10.77.0.1:6100");
            i += 1;
            if i.is_multiple_of(4) {
                std::thread::sleep(Duration::from_micros(1000)); // ~30 Mbit/s offered
            }
        }
    });
    let arr = sink.join().unwrap();
    let r = frame_rate(&arr, 0.5, 1.9);
    eprintln!("reverse direction {:.3} Mbit/s", r / 1e6);
    assert!(within(r, 4e6, 0.03), "reverse rate {r}");
    let st = lab.stat();
    assert_eq!(st["directions"][1]["shaped"], true, "{st}");
    let name = if workers == 1 { "root" } else { "a" };
    let row = st["directions"][1]["classes"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name).cloned())
        .unwrap_or_default();
    assert_eq!(row["rate_bps"], 4_000_000, "{st}");
}

#[test]
fn emulated_delay_applies_after_the_scheduler() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--emulate", "delay=40ms,seed=5"]);
    let c = lab.c.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        in_ns(&c, move || {
            let l = TcpListener::bind("10.77.0.2:5002").unwrap();
            tx.send(()).unwrap();
            let _ = l.accept().unwrap();
        })
    });
    rx.recv().unwrap();
    let a = lab.a.clone();
    let rtt = in_ns(&a, move || {
        let t0 = Instant::now();
        let _s =
            TcpStream::connect_timeout(&"10.77.0.2:5002".parse().unwrap(), Duration::from_secs(3))
                .expect("connect");
        t0.elapsed()
    });
    server.join().unwrap();
    eprintln!("connect took {rtt:?}");
    // SYN goes a -> c through the 40 ms line; the reply comes back unshaped and undelayed
    // (no `reverse_delay`).
    assert!(rtt >= Duration::from_millis(40), "{rtt:?}");
    assert!(rtt < Duration::from_millis(1000), "{rtt:?}");
    let st = lab.stat();
    assert_eq!(st["directions"][0]["emulate"]["lost"], 0, "{st}");
}

/// `reverse_delay` delays the reverse direction too, and `--path-delay` adds a per-host delay in
/// both directions keyed by the host's address: a UDP echo from 10.77.0.1 with 10 ms each way
/// and 5 ms for the host measures 2·(10 + 5) = 30 ms; a second host without a path delay 20 ms.
#[test]
fn reverse_and_per_host_delays_make_the_round_trip() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(
        &p,
        &[
            "--emulate",
            "delay=10ms,reverse_delay=10ms",
            "--path-delay",
            "10.77.0.1=5ms",
            "--path-delay",
            "10.77.0.9=40ms",
        ],
    );
    let rtts = udp_rtts(&lab, 7301, 20, Duration::from_millis(20));
    let m = median(&rtts);
    eprintln!("RTT with path delay: median {m:.2} ms of {rtts:?}");
    assert!((m - 30.0).abs() <= 1.0 + 0.05 * 30.0, "median {m} ms");
    assert!(
        rtts.iter().all(|r| *r >= 30.0),
        "below the emulated delay: {rtts:?}"
    );
    // Another sender address on a, without a path delay: 2·10 ms.
    let (a, va) = (lab.a.clone(), lab.va.clone());
    in_ns(&a, move || {
        let st = Command::new("ip")
            .args(["addr", "add", "10.77.0.3/24", "dev", &va])
            .status()
            .unwrap();
        assert!(st.success());
    });
    let c = lab.c.clone();
    let echo = std::thread::spawn(move || {
        in_ns(&c, move || {
            let s = UdpSocket::bind(("10.77.0.2", 7302)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut buf = [0u8; 16];
            for _ in 0..10 {
                let Ok((k, from)) = s.recv_from(&mut buf) else {
                    return;
                };
                let _ = s.send_to(&buf[..k], from);
            }
        })
    });
    let a = lab.a.clone();
    let plain = in_ns(&a, move || {
        let s = UdpSocket::bind("10.77.0.3:0").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 16];
        std::thread::sleep(Duration::from_millis(100));
        for i in 0..10u64 {
            let t = Instant::now();
            s.send_to(&i.to_be_bytes(), ("10.77.0.2", 7302)).unwrap();
            if s.recv(&mut buf).is_ok() {
                out.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        out
    });
    echo.join().unwrap();
    let m2 = median(&plain);
    eprintln!("RTT without path delay: median {m2:.2} ms of {plain:?}");
    assert!((m2 - 20.0).abs() <= 1.0 + 0.05 * 20.0, "median {m2} ms");
    let st = lab.stat();
    for d in 0..2 {
        let e = &st["directions"][d]["emulate"];
        assert_eq!(e["delay_ns"], 10_000_000, "{st}");
        assert_eq!(e["path_delays"].as_array().map(Vec::len), Some(2), "{st}");
        assert_eq!(e["line_full"], 0, "{st}");
        assert!(e["limit_bytes"].as_u64().unwrap() >= 256 * 1024, "{st}");
    }
}
