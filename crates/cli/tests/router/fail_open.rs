//! `--fail-open`: while the shaper is not running, a kernel bridge of its two interfaces
//! forwards (unshaped). Without a shaper and without the bridge nothing crosses (fail-closed);
//! `linkshare fail-open` (the unit's ExecStopPost) makes the bridge; `run --fail-open` removes
//! it before it forwards, so that no frame crosses twice, and makes it again when it exits.

use std::process::Command;
use std::time::{Duration, Instant};

use linkshare_router::failopen::bridge_name;

use crate::helpers::{class, udp_rtts, udp_sink, udp_source, Lab, ONE_CLASS};

fn answered(lab: &Lab, port: u16, n: usize) -> usize {
    udp_rtts(lab, port, n, Duration::from_millis(20))
        .iter()
        .filter(|r| **r < 1000.0)
        .count()
}

fn bridge_exists(lab: &Lab) -> bool {
    Command::new("ip")
        .args(["-n", &lab.r, "link", "show", &bridge_name(&lab.ra, &lab.rc)])
        .output()
        .expect("ip link show")
        .status
        .success()
}

#[test]
fn fail_open_bridges_the_link_while_the_shaper_is_not_running() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    // No shaper, no bridge: nothing crosses.
    assert_eq!(answered(&lab, 7521, 3), 0, "forwarded with nothing running");

    // What the unit's ExecStopPost runs after a kill.
    let st = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.r,
            env!("CARGO_BIN_EXE_linkshare"),
            "fail-open",
        ])
        .args(["--dev", &lab.ra, "--dev", &lab.rc])
        .status()
        .unwrap();
    assert!(st.success(), "linkshare fail-open");
    assert!(bridge_exists(&lab));
    assert!(answered(&lab, 7522, 10) >= 8, "the bridge forwards");

    // The shaper takes over: the bridge is gone and every datagram crosses once, shaped.
    lab.start_with(&p, &["--io", "packet", "--fail-open"]);
    assert!(
        !bridge_exists(&lab),
        "the bridge is removed when the shaper starts"
    );
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7523], t0, 1.2);
    let sent = udp_source(&lab, 7523, 1e6, 500, t0, 0.1, 0.6)
        .join()
        .unwrap();
    let got = sink.join().unwrap();
    let st = lab.stat();
    let mut ids: Vec<u64> = got[0].iter().map(|(_, _, id)| *id).collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "a datagram crossed twice: {st}");
    assert_eq!(n as u64, sent, "{st}");
    assert!(
        class(&st, "root")["sent_packets"].as_u64().unwrap_or(0) >= sent,
        "the shaper forwarded them: {st}"
    );

    // A clean exit bridges the link again.
    lab.sigterm_exits_cleanly(Duration::from_secs(5));
    assert!(
        bridge_exists(&lab),
        "the bridge is back after the shaper exits"
    );
    assert!(
        answered(&lab, 7524, 10) >= 8,
        "the bridge forwards after the shaper"
    );
}
