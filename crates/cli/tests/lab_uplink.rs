//! `linkshare lab` with `[uplink]` (issue 37 §3, issue 40 §4): the uplink's policy runs as the
//! router's `--reverse-policy` at the uplink's rate, so a download's ACKs queue behind it as in
//! the simulator. A 20 Mbit/s download over a 100 kbit/s uplink CAKE is held back by its ACK
//! clock without the ACK filter and gets most of the link with `ack_filter = "on"`
//! (scenarios/cake-ack-filter.toml). Skips with the reason when not root or without `ip netns`,
//! and fails instead under LINKSHARE_REQUIRE_NETNS=1.

use std::process::Command;

use linkshare_lab::testbed;
use serde_json::Value;

fn scenario(ack_filter: &str) -> String {
    format!(
        r#"
name = "lab-uplink-{ack_filter}"
duration = "5s"
sample = "250ms"
seed = 1
[link]
rate = "20mbit"
delay = "10ms"
[uplink]
rate = "100kbit"
policy = {{ qdisc = {{ type = "cake", ack_filter = "{ack_filter}" }} }}
[[flow]]
name = "download"
kind = "tcp"
src = "192.0.2.10"
dst = "10.0.0.2"
cc = "cubic"
"#
    )
}

/// The download's goodput (Mbit/s) through the lab, and the run's notes.
fn download(ack_filter: &str) -> (f64, String) {
    let dir = std::env::temp_dir().join(format!("lslabuplink-{}-{ack_filter}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sc = dir.join("uplink.toml");
    std::fs::write(&sc, scenario(ack_filter)).unwrap();
    let out_dir = dir.join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_linkshare"))
        .arg("lab")
        .arg(&sc)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0));
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let bps = s["flows"]["download"]["goodput_bps"].as_f64().unwrap();
    (bps / 1e6, s["lab"]["notes"].to_string())
}

#[test]
fn a_slow_uplink_holds_a_download_back_until_cake_filters_its_acks() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let (off, notes) = download("off");
    let (on, _) = download("on");
    eprintln!("download: ack_filter off {off:.2} Mbit/s, on {on:.2} Mbit/s");
    assert!(!notes.contains("not built"), "{notes}");
    assert!(notes.contains("uplink rate"), "{notes}");
    // 100 kbit/s carries ~190 ACKs/s of 66 bytes on the wire: without the filter the ACK clock
    // allows well under the 20 Mbit/s link.
    assert!(off < 12.0, "off: {off} Mbit/s");
    assert!(on > 1.5 * off, "on {on} Mbit/s, off {off} Mbit/s");
}
