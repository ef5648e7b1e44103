//! CAKE in the simulator, on the scenarios of what it is for: host isolation with unequal flow
//! counts and per-flow fairness from the same code (`cake-hosts.toml`, an ISP circuit), ping
//! under load on a home uplink against a big FIFO (`cake-home-uplink.toml`), the diffserv4 tins
//! under saturation (`cake-diffserv4.toml`) and the ACK filter on an asymmetric line
//! (`cake-ack-filter.toml`).

use std::path::Path;

use linkshare_sim::model::{SeriesKind, SimResult};
use linkshare_sim::{run, Scenario};

/// Mean rate in Mbit/s of the flows whose name is `prefix` or starts with `prefix.`, summed,
/// over the samples ending in (from, to].
fn rate(r: &SimResult, prefix: &str, from: f64, to: f64) -> f64 {
    let samples = r.samples.iter().filter(|s| {
        s.kind == SeriesKind::Flow
            && (s.name == prefix || s.name.starts_with(&format!("{prefix}.")))
            && s.time_s > from
            && s.time_s <= to
    });
    let (mut sum, mut times) = (0.0, std::collections::BTreeSet::new());
    for s in samples {
        sum += s.rate_bps / 1e6;
        times.insert((s.time_s * 1000.0) as u64);
    }
    assert!(!times.is_empty(), "no samples of {prefix}");
    sum / times.len() as f64
}

fn scenario(isolation: &str) -> (f64, f64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/cake-hosts.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("\"dual-srchost\"", &format!("\"{isolation}\""));
    let sc = Scenario::parse(&text, "scenarios/cake-hosts.toml").unwrap_or_else(|e| panic!("{e}"));
    let r = run(&sc, None).unwrap_or_else(|e| panic!("{e}"));
    (rate(&r, "many", 2.0, 6.0), rate(&r, "one", 2.0, 6.0))
}

#[test]
fn dual_srchost_shares_between_hosts_triple_isolate_between_flows() {
    let (many, one) = scenario("dual-srchost");
    eprintln!("dual-srchost: many {many:.2} one {one:.2} Mbit/s");
    assert!(many + one > 18.5, "{many} + {one}");
    assert!(
        (many - one).abs() / (many + one) < 0.05,
        "dual-srchost {many} / {one}"
    );
    let (many, one) = scenario("triple-isolate");
    eprintln!("triple-isolate: many {many:.2} one {one:.2} Mbit/s");
    assert!(many + one > 18.5, "{many} + {one}");
    let share = one / (many + one);
    assert!(
        (share - 1.0 / 17.0).abs() < 0.02,
        "triple-isolate one's share {share}"
    );
}

fn run_file(name: &str, edit: impl Fn(String) -> String) -> SimResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/{name}"));
    let text = edit(std::fs::read_to_string(&path).unwrap());
    let sc = Scenario::parse(&text, &format!("scenarios/{name}")).unwrap_or_else(|e| panic!("{e}"));
    run(&sc, None).unwrap_or_else(|e| panic!("{e}"))
}

/// `scenarios/cake-ack-filter.toml`: the download's ACKs saturate a narrow uplink; filtering
/// the redundant ones gives the download more of its link.
#[test]
fn the_ack_filter_frees_a_saturated_uplink_for_the_download() {
    let mut got = Vec::new();
    for mode in ["off", "on", "aggressive"] {
        let r = run_file("cake-ack-filter.toml", |t| {
            t.replace("ack_filter = \"on\"", &format!("ack_filter = \"{mode}\""))
        });
        let up = r.summary.uplink.as_ref().expect("an uplink summary");
        let filtered = up.drops.get("ack_filter").copied().unwrap_or(0);
        let down = rate(&r, "download", 2.0, 8.0);
        eprintln!(
            "ack_filter {mode}: download {down:.2} Mbit/s, {filtered} ACKs filtered, uplink {:?}",
            up.drops
        );
        got.push((down, filtered));
    }
    let [(off, f_off), (on, f_on), (aggr, f_aggr)] = got[..] else {
        unreachable!()
    };
    assert_eq!(f_off, 0);
    assert!(f_on > 0 && f_aggr > 0, "{f_on} {f_aggr}");
    assert!(on > off * 1.1, "on {on} vs off {off}");
    assert!(aggr > off * 1.1, "aggressive {aggr} vs off {off}");
}

/// The uplink charges an ACK as the routers and the kernel's CAKE do: its IP length (52 bytes
/// with timestamps) plus the link's framing. With `overhead = 14` each ACK takes 66 bytes of the
/// 100 kbit/s uplink, so the saturated uplink carries 52/66 as many of them and the ACK-clocked
/// download (no filter, CAKE shaping at the uplink's rate: COBALT's target 182 ms, no drops)
/// gets that much less.
#[test]
fn the_uplink_charges_each_ack_its_frame() {
    let run = |overhead: &str| {
        let r = run_file("cake-ack-filter.toml", |t| {
            t.replace(
                "ack_filter = \"on\"",
                "ack_filter = \"off\", bandwidth = \"100kbit\"",
            )
            .replace(
                "delay = \"10ms\"\n",
                &format!("delay = \"10ms\"\n{overhead}"),
            )
        });
        let up = r.summary.uplink.as_ref().expect("an uplink summary");
        (up.dequeued_packets as f64, rate(&r, "download", 2.0, 8.0))
    };
    let (acks_ip, down_ip) = run("");
    let (acks_frame, down_frame) = run("overhead = 14\n");
    eprintln!(
        "uplink packets {acks_ip} (52 B) vs {acks_frame} (66 B); download {down_ip:.2} vs {down_frame:.2} Mbit/s"
    );
    let ratio = acks_frame / acks_ip;
    assert!((ratio - 52.0 / 66.0).abs() < 0.04, "{ratio}");
    let ratio = down_frame / down_ip;
    assert!((ratio - 52.0 / 66.0).abs() < 0.08, "{ratio}");
}

/// `scenarios/cake-home-uplink.toml`: ping under load stays near the base RTT with CAKE and
/// grows by the FIFO's queue without it.
#[test]
fn cake_keeps_ping_low_under_load_where_a_big_fifo_does_not() {
    let ping_p50 = |r: &SimResult| {
        r.summary.flows["ping"]
            .rtt_ms
            .as_ref()
            .expect("ping RTTs")
            .p50
    };
    let cake = run_file("cake-home-uplink.toml", |t| t);
    let fifo = run_file("cake-home-uplink.toml", |t| {
        t.replace(
            "qdisc = { type = \"cake\", bandwidth = \"9500kbit\" }",
            "qdisc = { type = \"pfifo\", limit = 1000 }",
        )
    });
    let (c, f) = (ping_p50(&cake), ping_p50(&fifo));
    let (cu, fu) = (
        rate(&cake, "upload", 2.0, 8.0),
        rate(&fifo, "upload", 2.0, 8.0),
    );
    eprintln!("ping p50: cake {c:.1} ms, fifo {f:.1} ms; uploads {cu:.2} / {fu:.2} Mbit/s");
    // Base RTT 20 ms: CAKE adds a few ms, the FIFO hundreds.
    assert!(c < 30.0, "cake ping p50 {c}");
    assert!(f > 5.0 * c, "fifo ping p50 {f} vs cake {c}");
    // Both keep the line busy: CAKE shapes at 95 % of it.
    assert!(cu > 8.5 && fu > 9.0, "{cu} {fu}");
}

/// `scenarios/cake-diffserv4.toml`: each tin gets what its threshold gives it.
#[test]
fn diffserv4_tins_share_a_saturated_link_by_their_thresholds() {
    let r = run_file("cake-diffserv4.toml", |t| t);
    let (voice, video, web, backup) = (
        rate(&r, "voice", 2.0, 8.0),
        rate(&r, "video", 2.0, 8.0),
        rate(&r, "web", 2.0, 8.0),
        rate(&r, "backup", 2.0, 8.0),
    );
    let owd = r.summary.flows["voice"]
        .owd_ms
        .as_ref()
        .expect("voice delay");
    eprintln!(
        "diffserv4: voice {voice:.2} (owd p99 {:.1} ms) video {video:.2} web {web:.2} backup {backup:.2} Mbit/s",
        owd.p99
    );
    assert!(voice > 0.97, "voice {voice}");
    assert!(owd.p99 < 15.0, "voice owd p99 {}", owd.p99);
    let total = voice + video + web + backup;
    assert!(total > 18.5, "total {total}");
    // Video's threshold is half the rate; Bulk's 1/16 keeps it alive but small.
    assert!(video > 0.45 * 20.0, "video {video}");
    assert!(
        backup > 0.03 * 20.0 && backup < web,
        "backup {backup} web {web}"
    );
}
