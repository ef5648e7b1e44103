//! Simulator speed: simulated packets per second of wall-clock time, and peak memory.
//!
//! Run with `cargo bench -p linkshare-sim --bench throughput` (a name filters: `-- fct`). Prints a
//! markdown table; peak RSS is the process's, so run one scenario alone for its own.
//! "Packets" are the packets the sources emitted (TCP segments including retransmissions, UDP
//! datagrams, echo requests); each one is scheduled, sent over the bottleneck (or dropped) and
//! delivered, and each TCP segment causes an ACK.

use std::time::Instant;

use linkshare_sim::{run, Scenario};

const UDP10: &str = r#"
name = "bench-udp-10"
duration = "20s"
sample = "100ms"
[link]
rate = "1gbit"
delay = "1ms"
device_buffer = "3k"
[[flow]]
name = "u"
kind = "udp"
count = 10
rate = "95mbit"
size = 1000
"#;

const TCP1: &str = r#"
name = "bench-tcp-1"
duration = "120s"
sample = "100ms"
[link]
rate = "100mbit"
delay = "10ms"
queue = 170
[[flow]]
name = "t"
kind = "tcp"
window = "4m"
"#;

const UDP10_HTB: &str = r#"
name = "bench-udp-10-htb"
duration = "20s"
sample = "100ms"
[link]
rate = "1gbit"
delay = "1ms"
device_buffer = "3k"
[policy]
qdisc = "htb"
default = "b"
[[policy.class]]
name = "root"
rate = "1gbit"
[[policy.class]]
name = "a"
parent = "root"
rate = "600mbit"
ceil = "1gbit"
[[policy.class]]
name = "b"
parent = "root"
rate = "400mbit"
ceil = "1gbit"
[[policy.filter]]
class = "a"
dscp = "af11"
[[flow]]
name = "ua"
kind = "udp"
count = 5
dscp = "af11"
rate = "95mbit"
size = 1000
[[flow]]
name = "ub"
kind = "udp"
count = 5
rate = "95mbit"
size = 1000
"#;

/// 10 000 short TCP flows arriving as a Poisson process over 100 Mbit/s (issue 37 §7); run it
/// alone (`-- fct`) for its own peak memory.
const FCT10K: &str = include_str!("../../../scenarios/fct-10k.toml");

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    println!("| scenario | simulated s | packets | events | wall s | packets/s | events/s | peak RSS MiB |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for text in [UDP10, TCP1, UDP10_HTB, FCT10K] {
        let sc = match Scenario::parse(text, "bench") {
            Ok(sc) => sc,
            Err(e) => {
                eprintln!("skipped: {e}");
                continue;
            }
        };
        if !filter.is_empty() && !filter.iter().any(|f| sc.name.contains(f.as_str())) {
            continue;
        }
        let t = Instant::now();
        let r = match run(&sc, None) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{}: {e}", sc.name);
                continue;
            }
        };
        let wall = t.elapsed().as_secs_f64();
        let packets: u64 = r.summary.flows.values().map(|f| f.packets_sent).sum();
        let rss = peak_rss_kib()
            .map(|k| format!("{:.1}", k as f64 / 1024.0))
            .unwrap_or_else(|| "?".into());
        println!(
            "| {} | {:.0} | {} | {} | {:.3} | {:.2} M | {:.2} M | {} |",
            sc.name,
            sc.duration.as_secs_f64(),
            packets,
            r.summary.events,
            wall,
            packets as f64 / wall / 1e6,
            r.summary.events as f64 / wall / 1e6,
            rss
        );
    }
}
