//! A CAKE leaf under traffic: its tins' counters in `stat --json`, `stat --tc` and `/metrics`.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::helpers::{class, in_ns, Lab};

const METRICS_PORT: u16 = 9471;

/// A 4 Mbit/s root whose one class queues in a diffserv3 CAKE.
const CAKE_LEAF: &str = r#"
qdisc = "htb"
default = "bulk"
[[class]]
name = "root"
rate = "4mbit"
[[class]]
name = "bulk"
parent = "root"
rate = "4mbit"
leaf = { type = "cake", diffserv = "diffserv3" }
"#;

/// Send from a to c for `secs`: 1000-byte datagrams at about 8 Mbit/s unmarked, and one
/// 200-byte datagram every 10 ms with the TOS byte `tos`.
pub(crate) fn best_effort_and_marked(lab: &Lab, tos: u8, secs: f64) {
    in_ns(&lab.a.clone(), move || {
        let bulk = UdpSocket::bind("10.77.0.1:0").unwrap();
        let marked = UdpSocket::bind("10.77.0.1:0").unwrap();
        let v: libc::c_int = tos.into();
        // SAFETY: a valid socket and a c_int option value of the right size.
        let r = unsafe {
            libc::setsockopt(
                marked.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_TOS,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "IP_TOS");
        let t0 = Instant::now();
        let mut n = 0u64;
        while t0.elapsed().as_secs_f64() < secs {
            let _ = bulk.send_to(&[0x42u8; 1000], ("10.77.0.2", 9));
            if n.is_multiple_of(10) {
                let _ = marked.send_to(&[0x17u8; 200], ("10.77.0.2", 9));
            }
            n += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// GET `path` on the metrics port inside r; the body.
fn scrape(lab: &Lab, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n");
    in_ns(&lab.r.clone(), move || {
        let mut s = TcpStream::connect(("127.0.0.1", METRICS_PORT)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        got.split_once("\r\n\r\n")
            .map_or(got.clone(), |(_, b)| b.to_string())
    })
}

/// The value of the sample of `name` whose labels contain every one of `has`.
fn sample(text: &str, name: &str, has: &[&str]) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && has.iter().all(|h| l.contains(h)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Unmarked bulk over the class's rate and EF-marked datagrams through a CAKE leaf: the
/// snapshot's tins count them where the kernel's would (Best Effort and Voice), the bulk tin's
/// flow is bulk and its queue is dropped from; `stat --tc` prints tc-cake's table and
/// `/metrics` the per-tin series with the class's and the tin's labels.
#[test]
fn a_cake_leaf_shows_its_tins_in_stat_and_metrics() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("cake.toml", CAKE_LEAF);
    let metrics = format!("127.0.0.1:{METRICS_PORT}");
    lab.start_with(&p, &["--metrics", &metrics]);
    best_effort_and_marked(&lab, 0xb8, 1.5);

    let st = lab.stat();
    let cake = &class(&st, "bulk")["cake"];
    let tin = |name: &str| {
        cake["tins"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no tin {name} in {cake}"))
    };
    let names: Vec<&str> = cake["tins"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["Bulk", "Best Effort", "Voice"], "{cake}");
    let (be, voice, bulk) = (tin("Best Effort"), tin("Voice"), tin("Bulk"));
    let n = |t: &serde_json::Value, k: &str| t[k].as_u64().unwrap_or(0);
    eprintln!("best effort {be}\nvoice {voice}");
    assert!(n(&be, "packets") > 500 && n(&be, "bytes") > 500_000, "{be}");
    assert!(n(&voice, "packets") >= 50, "{voice}");
    assert_eq!(n(&bulk, "packets"), 0, "{bulk}");
    // Twice the rate offered: CAKE dropped from the bulk flow, and saw packets of 1042 bytes.
    assert!(n(&be, "drops") > 0, "{be}");
    assert!((1028..=1046).contains(&n(&be, "max_len")), "{be}");
    assert!(n(&be, "way_misses") >= 1, "{be}");
    assert!(cake["memory_used"].as_u64().unwrap_or(0) > 0, "{cake}");

    let (code, tc, err) = lab.cli(&["stat", "--tc"]);
    assert_eq!(code, 0, "{err}");
    assert!(tc.contains("qdisc cake 3: parent 1:2  # bulk"), "{tc}");
    assert!(
        tc.contains("                   Bulk  Best Effort        Voice\n  thresh"),
        "{tc}"
    );

    let (code, plain, err) = lab.cli(&["stat"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plain.contains("Best Effort        Voice\n") && plain.contains("  pk_delay"),
        "{plain}"
    );

    let text = scrape(&lab, "/metrics");
    let lab_be = [
        "class=\"bulk\"",
        "tin=\"Best Effort\"",
        "direction=\"forward\"",
    ];
    let sent = sample(&text, "linkshare_cake_tin_sent_packets_total", &lab_be);
    assert!(sent.is_some_and(|v| v > 500.0), "{text}");
    let voice = sample(
        &text,
        "linkshare_cake_tin_sent_packets_total",
        &["class=\"bulk\"", "tin=\"Voice\""],
    );
    assert!(voice.is_some_and(|v| v >= 50.0), "{text}");
    let drops = sample(&text, "linkshare_cake_tin_drops_total", &lab_be);
    assert!(drops.is_some_and(|v| v > 0.0), "{text}");
    // The per-class cardinality controls hold the tins too: `classes=parents` drops them.
    let parents = scrape(&lab, "/metrics?classes=parents");
    assert!(!parents.contains("tin=\""), "{parents}");
}
