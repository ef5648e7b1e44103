//! Forwarding through the shaper: bulk TCP at one class's rate with ARP passing, the V2 and V3
//! receive rings, TCP with a worker per direction (AF_PACKET and AF_XDP receiving), and the
//! ignored measurement of forwarding rate and pacing lateness for docs/router.md.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::helpers::{
    class, in_ns, tcp_at_ten_mbit, tcp_goodput, udp_sink, udp_source, Lab, ONE_CLASS, THREE_CLASSES,
};

/// `--rx-split direction` with TCP: the data (received by worker 0 and scheduled by the worker
/// owning class `c`) and the ACKs (the reverse direction is unshaped: received and sent on by
/// worker 1) take two workers; the connection gets its class's rate, each interface's frames
/// are received by its worker alone and once, and every shaped packet leaves once.
#[test]
fn a_worker_per_direction_carries_tcp_at_its_class_rate_once() {
    worker_per_direction_tcp("packet");
}

/// The same with AF_XDP receiving (native XDP on the veth, each worker's sockets on its own
/// interface) and AF_PACKET transmitting on the other interface.
#[test]
fn a_worker_per_direction_over_af_xdp_carries_tcp_at_its_class_rate_once() {
    worker_per_direction_tcp("xdp");
}

fn worker_per_direction_tcp(io: &str) {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", THREE_CLASSES);
    lab.start_with(
        &p,
        &["--workers", "2", "--rx-split", "direction", "--io", io],
    );
    let st = tcp_at_ten_mbit(&lab);
    let ifs = &st["interfaces"];
    let sent = class(&st, "root")["sent_packets"].as_u64().unwrap();
    let tx_out = ifs[1]["tx_packets"].as_u64().unwrap();
    let non_ip = ifs[0]["non_ip_passed"].as_u64().unwrap();
    assert_eq!(tx_out, sent + non_ip, "every shaped frame left once: {st}");
    // Worker 0 received everything that came in on IN (the data), worker 1 everything on OUT
    // (the ACKs), and nothing was received twice.
    let w = &st["workers"];
    for i in 0..2 {
        let got = w[i]["rx_packets"].as_u64().unwrap();
        assert!(got > 0, "worker {i} received nothing: {st}");
        assert_eq!(got, ifs[i]["rx_packets"].as_u64().unwrap(), "{st}");
    }
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
    assert_eq!(ifs[1]["rx_ring_drops"], 0, "{st}");
    timer_floor_reported(&st);
}

/// A class paced at 10 Mbit/s (a departure every 1.2 ms, longer than any early-wake margin)
/// puts the loop to sleep on its timer: `stat` reports how late the timer woke it, merged over
/// the workers.
fn timer_floor_reported(st: &serde_json::Value) {
    let t = &st["timer_wake_ns"];
    let n = |k: &str| {
        t[k].as_u64()
            .unwrap_or_else(|| panic!("no timer_wake_ns.{k}: {st}"))
    };
    assert!(n("samples") > 0, "{st}");
    assert!(
        n("p50") <= n("p99") && n("p99") <= n("max") && n("mean") <= n("max"),
        "{st}"
    );
}

#[test]
fn tcp_is_shaped_to_policy_rate_and_arp_passes() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start(&p);
    let st = tcp_at_ten_mbit(&lab);
    let ifs = &st["interfaces"];
    // ARP is not IP: shaped in the default class (`non_ip = "shape"`, the default), so it is
    // among the class's packets.
    assert!(
        ifs[0]["non_ip_shaped"].as_u64().unwrap() >= 1,
        "ARP must be shaped and cross: {st}"
    );
    let root = class(&st, "root");
    let sent = root["sent_packets"].as_u64().unwrap();
    // Every shaped packet left on OUT; OUT also carried the non-IP frames passed from IN.
    let tx_out = ifs[1]["tx_packets"].as_u64().unwrap();
    let non_ip = ifs[0]["non_ip_passed"].as_u64().unwrap();
    assert_eq!(tx_out, sent + non_ip, "{st}");
    assert_eq!(ifs[1]["tx_errors"], 0, "{st}");
    assert!(st["lateness_us"]["samples"].as_u64().unwrap() > 0);
    timer_floor_reported(&st);
    // The frames went through the memory-mapped rings (the default V2 receive ring: frames
    // read from their slots, no V3 blocks), transmitted in batches.
    assert!(ifs[0]["rx_packets"].as_u64().unwrap() >= sent, "{st}");
    assert_eq!(ifs[0]["rx_blocks"], 0, "{st}");
    let kicks = ifs[1]["tx_kicks"].as_u64().unwrap();
    assert!(kicks > 0 && kicks <= tx_out, "{st}");
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
    eprintln!(
        "lateness {} ; tx {tx_out} frames in {kicks} kicks",
        st["lateness_ns"]
    );
}

/// The V3 (block) receive ring still shapes exactly; its frames arrive in retired blocks.
#[test]
fn tpacket_v3_receive_ring_shapes_too() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--rx-ring", "v3"]);
    let bps = tcp_goodput(&lab, 2.0);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
    let st = lab.stat();
    let ifs = &st["interfaces"];
    assert!(ifs[0]["rx_blocks"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
}

/// Figures for docs/router.md (not part of the suite):
/// `cargo test -p linkshare --test router -- --ignored --nocapture measure_forwarding_and_lateness`
#[test]
#[ignore]
fn measure_forwarding_and_lateness() {
    for (label, policy) in [
        (
            "pfifo",
            "qdisc = { type = \"pfifo\", limit = 10000 }\n".to_string(),
        ),
        ("htb 1gbit", ONE_CLASS.replace("10mbit", "1gbit")),
    ] {
        let Some(mut lab) = Lab::new() else { return };
        let p = lab.write_policy("p.toml", &policy);
        lab.start(&p);
        let t0 = Instant::now();
        let sink = udp_sink(&lab, &[7300], t0, 3.5);
        let a = lab.a.clone();
        let offered = in_ns(&a, move || {
            let s = UdpSocket::bind("10.77.0.1:0").unwrap();
            s.connect("10.77.0.2:7300").unwrap();
            let mut buf = [0u8; 18]; // 60-byte frames
            let mut n = 0u64;
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(3) {
                buf[..8].copy_from_slice(&n.to_be_bytes());
                if s.send(&buf).is_ok() {
                    n += 1;
                }
            }
            n
        });
        let got = sink.join().unwrap();
        let st = lab.stat();
        let i0 = &st["interfaces"][0];
        eprintln!(
            "{label}: offered {offered} frames of 60 bytes in 3 s ({:.0} kpps), received {} ({:.0} kpps); shaper rx {} ring drops {} rx blocks {}, tx kicks {} for {} frames",
            offered as f64 / 3e3,
            got[0].len(),
            got[0].len() as f64 / 3e3,
            i0["rx_packets"],
            i0["rx_ring_drops"],
            i0["rx_blocks"],
            st["interfaces"][1]["tx_kicks"],
            st["interfaces"][1]["tx_packets"],
        );
    }
    // Pacing lateness with three classes overloading 10 Mbit/s.
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", THREE_CLASSES);
    lab.start(&p);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7001, 7002, 7003], t0, 5.0);
    let srcs: Vec<_> = [7001, 7002, 7003]
        .iter()
        .map(|&port| udp_source(&lab, port, 7e6, 1000, t0, 0.0, 5.0))
        .collect();
    for s in srcs {
        s.join().unwrap();
    }
    sink.join().unwrap();
    let st = lab.stat();
    eprintln!(
        "pacing lateness at 10 Mbit/s, 1028-byte IP packets: {}",
        st["lateness_ns"]
    );
}
