//! The bound on the memory queued packets hold (`run --queue-memory`): a flood into a class
//! whose own queue could hold far more is cut at the bound (counted as `memory_drops`), and the
//! backlog never holds more frames than the bound has room for. Before, only the leaves' own
//! limits applied, so a flood towards every subscriber of a large table could take all memory.

use std::time::Instant;

use linkshare_router::membound::{per_frame, FRAME_BUFFER};

use crate::helpers::{class, udp_sink, udp_source, Lab};

/// One slow class with a deep queue: 1000 packets, far beyond the bound below.
const SLOW_DEEP: &str = r#"
qdisc = "htb"
default = "root"
[[class]]
name = "root"
rate = "1mbit"
leaf = { type = "pfifo", limit = 1000 }
"#;

#[test]
fn a_flood_is_cut_at_the_queue_memory_bound_and_counted() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", SLOW_DEEP);
    // Room for 100 frames in all.
    let frames = 100u64;
    let bound = (frames * per_frame(FRAME_BUFFER)).to_string();
    lab.start_with(&p, &["--io", "packet", "--queue-memory", &bound]);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7511], t0, 0.9);
    // 20 Mbit/s of 200-byte datagrams into a 1 Mbit/s class for half a second.
    let sent = udp_source(&lab, 7511, 20e6, 200, t0, 0.1, 0.6)
        .join()
        .unwrap();
    let st = lab.stat();
    let _ = sink.join().unwrap();
    assert!(sent >= 1000, "the source sent {sent} datagrams");
    assert_eq!(
        st["queue_memory"].as_u64(),
        bound.parse::<u64>().ok(),
        "{st}"
    );
    let drops = st["memory_drops"].as_u64().unwrap_or(0);
    assert!(drops > 0, "nothing dropped at the bound: {st}");
    let backlog = class(&st, "root")["backlog_packets"]
        .as_u64()
        .unwrap_or(u64::MAX);
    assert!(
        backlog <= frames,
        "{backlog} frames queued past a bound of {frames}: {st}"
    );
}
