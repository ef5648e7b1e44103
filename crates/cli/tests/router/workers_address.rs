//! `--workers 2 --placement address` with a subscriber table shaping both directions under one
//! uplink: each subscriber's frames, downloads and uploads, are received by the worker that
//! schedules its class (nothing handed over), the subscribers are spread over both workers,
//! and the aggregate of each direction stays at the uplink's rate.

use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::{in_ns, Lab};

/// Subscribers in the table, and those that send and receive.
const SUBSCRIBERS: usize = 1000;
const ACTIVE: usize = 32;
/// The uplink, both directions (bit/s), and what is offered in each (about twice as much).
const UPLINK: f64 = 8e6;

fn addr(i: usize) -> String {
    format!("100.64.{}.{}", i / 250, 1 + i % 250)
}

fn policy() -> String {
    "qdisc = \"htb\"\ndefault = \"other\"\nsubscribers = \"subs.csv\"\n\
     [[class]]\nname = \"root\"\nrate = \"8mbit\"\nupload_rate = \"8mbit\"\n\
     [[class]]\nname = \"other\"\nparent = \"root\"\nrate = \"1mbit\"\nceil = \"8mbit\"\n\
     upload_rate = \"1mbit\"\nupload_ceil = \"8mbit\"\n\
     [[plan]]\nname = \"p\"\nrate = \"5kbit\"\nceil = \"8mbit\"\nupload_rate = \"5kbit\"\n\
     upload_ceil = \"8mbit\"\n"
        .to_string()
}

fn table() -> String {
    let mut t = String::from("name,parent,plan,addresses\n");
    for i in 0..SUBSCRIBERS {
        t += &format!("s{i},root,p,{}\n", addr(i));
    }
    t
}

/// The root's sent bytes of direction `d` and the shaper's uptime.
fn root_sent(st: &Value, d: usize) -> u64 {
    st["directions"][d]["classes"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == "root"))
        .and_then(|c| c["sent_bytes"].as_u64())
        .unwrap_or_else(|| panic!("no root in direction {d}: {st}"))
}

/// Paced UDP of 1000-byte datagrams, `pps` a second for `secs`, from `from` (an address to
/// bind, port 0) to the `to` addresses in turn, port 9.
fn udp_burst(from: String, to: Vec<String>, pps: u64, secs: f64) {
    let s = UdpSocket::bind((from.as_str(), 0)).expect("bind the sender");
    let buf = [0x5au8; 1000];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        let due = (t0.elapsed().as_secs_f64() * pps as f64) as u64;
        while sent < due {
            let _ = s.send_to(&buf, (to[sent as usize % to.len()].as_str(), 9));
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One UDP sender per subscriber address for the uploads (each bound to its address).
fn uploads(addrs: Vec<String>, to: String, pps_each: u64, secs: f64) {
    let socks: Vec<UdpSocket> = addrs
        .iter()
        .map(|a| UdpSocket::bind((a.as_str(), 0)).expect("bind a subscriber address"))
        .collect();
    let buf = [0xa5u8; 1000];
    let t0 = Instant::now();
    let mut sent = 0u64;
    let pps = pps_each * socks.len() as u64;
    while t0.elapsed().as_secs_f64() < secs {
        let due = (t0.elapsed().as_secs_f64() * pps as f64) as u64;
        while sent < due {
            let _ = socks[sent as usize % socks.len()].send_to(&buf, (to.as_str(), 9));
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn subscribers_by_address_stay_on_one_worker() {
    let Some(mut lab) = Lab::new() else { return };
    std::fs::write(lab.control().with_file_name("subs.csv"), table()).expect("write the table");
    let p = lab.write_policy("p.toml", &policy());
    let active: Vec<String> = (0..ACTIVE).map(|i| addr(i * 31)).collect();
    // c owns the active subscribers' addresses; a reaches them through the shaper.
    for a in &active {
        let ok = Command::new("ip")
            .args([
                "-n",
                &lab.c,
                "addr",
                "add",
                &format!("{a}/32"),
                "dev",
                &lab.vc,
            ])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip addr add {a} in c");
    }
    let ok = Command::new("ip")
        .args([
            "-n",
            &lab.a,
            "route",
            "add",
            "100.64.0.0/16",
            "via",
            "10.77.0.2",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "route in a");
    lab.start_with(&p, &["--workers", "2", "--placement", "address"]);

    // Twice the uplink in each direction for 3 s.
    let pps = (2.0 * UPLINK / 8000.0) as u64;
    let secs = 3.0;
    let (a, c) = (lab.a.clone(), lab.c.clone());
    let to = active.clone();
    let d =
        std::thread::spawn(move || in_ns(&a, move || udp_burst("10.77.0.1".into(), to, pps, secs)));
    let from = active.clone();
    let u = std::thread::spawn(move || {
        in_ns(&c, move || {
            uploads(from, "10.77.0.1".into(), pps / ACTIVE as u64, secs)
        })
    });
    // Three windows of 0.5 s while both directions are offered twice the uplink.
    std::thread::sleep(Duration::from_millis(1000));
    let mut prev = lab.stat();
    let mut rates = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(500));
        let st = lab.stat();
        let dt = st["uptime_s"].as_f64().unwrap() - prev["uptime_s"].as_f64().unwrap();
        let r: Vec<f64> = (0..2)
            .map(|k| (root_sent(&st, k) - root_sent(&prev, k)) as f64 * 8.0 / dt)
            .collect();
        // The bound of core/src/shard: at most the root's rate plus P + N(Q + L) bytes
        // (about 17.6 KB here) in any interval, and 3 % for the snapshots' skew.
        for (k, &bps) in r.iter().enumerate() {
            let most = UPLINK * 1.03 + 17_600.0 * 8.0 / dt;
            assert!(
                bps <= most,
                "direction {k}: {bps} bit/s above the uplink: {st}"
            );
        }
        rates.push(r);
        prev = st;
    }
    let _ = d.join();
    let _ = u.join();
    eprintln!("per 0.5 s window, download and upload bit/s: {rates:?}");
    // The uplink was the limit: offered twice over, each direction got most of it.
    for r in &rates {
        for &bps in r {
            assert!(bps > UPLINK * 0.7, "the uplink was not reached: {rates:?}");
        }
    }
    let st = lab.stat();
    let w = st["workers"].as_array().expect("workers");
    assert_eq!(w.len(), 2, "{st}");
    let rx: Vec<u64> = w
        .iter()
        .map(|x| x["rx_packets"].as_u64().unwrap())
        .collect();
    let handed: u64 = w.iter().map(|x| x["handed_off"].as_u64().unwrap()).sum();
    let total: u64 = rx.iter().sum();
    eprintln!("received per worker {rx:?}, handed over {handed}");
    // Subscribers on both workers, and every subscriber frame received by its own worker (the
    // little that is handed over is other traffic: the default class's, e.g. IPv6 neighbour
    // discovery, which is steered by a key no subscriber has).
    assert!(
        rx.iter().all(|&n| n > total / 10),
        "subscribers not spread: {rx:?}"
    );
    assert!(
        handed * 100 <= total,
        "{handed} of {total} frames handed over: {st}"
    );
    // Each active subscriber was shaped in both directions.
    for a in active.iter().take(4) {
        let i = (0..SUBSCRIBERS).find(|&i| addr(i) == *a).unwrap();
        for d in 0..2 {
            let sent = st["directions"][d]["classes"]
                .as_array()
                .and_then(|v| v.iter().find(|c| c["name"] == format!("s{i}")))
                .and_then(|c| c["sent_packets"].as_u64())
                .unwrap_or(0);
            assert!(sent > 0, "s{i} direction {d}: nothing sent: {st}");
        }
    }
}
