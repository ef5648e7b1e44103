//! `linkshare lab` with `[uplink]` (issue 37 §3, issue 40 §4): the uplink's policy runs as the
//! router's `--reverse-policy` at the uplink's rate, so a download's ACKs queue behind it as in
//! the simulator; with `--kernel` the kernel's own qdisc (CAKE, in a user-mode Linux guest where
//! this kernel has none) runs it on the router's port towards the sender. A 20 Mbit/s download
//! over a 100 kbit/s uplink CAKE is held back by its ACK clock without the ACK filter and gets
//! most of the link with `ack_filter = "on"` (scenarios/cake-ack-filter.toml), and the summary's
//! `uplink` counts the ACKs the filter dropped. Skips with the reason when not root or without
//! `ip netns` (the kernel's test also without user-mode Linux where it needs it), and fails
//! instead under LINKSHARE_REQUIRE_NETNS=1.

use std::process::Command;
use std::sync::Mutex;

use linkshare_lab::testbed;
use serde_json::Value;

/// One lab run at a time: two at once would share the machine's CPUs and the ACK clocks.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

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
policy = {{ qdisc = {{ type = "cake", bandwidth = "100kbit", ack_filter = "{ack_filter}" }} }}
[[flow]]
name = "download"
kind = "tcp"
src = "192.0.2.10"
dst = "10.0.0.2"
cc = "cubic"
"#
    )
}

/// What one run of the download measured.
struct Run {
    /// The download's goodput, Mbit/s.
    mbps: f64,
    notes: String,
    /// The summary's `uplink`: the return direction's scheduler over the run.
    uplink: Value,
}

impl Run {
    fn ack_filtered(&self) -> u64 {
        self.uplink["drops"]["ack_filter"].as_u64().unwrap_or(0)
    }
    /// Bytes per packet the uplink sent (ACKs of 52 IP bytes with timestamps, 66 with their
    /// Ethernet header, and a few echo replies).
    fn mean_size(&self) -> f64 {
        let packets = self.uplink["dequeued_packets"].as_f64().unwrap_or(0.0);
        self.uplink["extra"]["dequeued_bytes"]
            .as_f64()
            .unwrap_or(0.0)
            / packets.max(1.0)
    }
}

/// The download through the lab (`kernel`: through the kernel's qdiscs).
fn download(ack_filter: &str, kernel: bool) -> Run {
    let side = if kernel { "kernel" } else { "linkshare" };
    let dir = std::env::temp_dir().join(format!(
        "lslabuplink-{}-{side}-{ack_filter}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sc = dir.join("uplink.toml");
    std::fs::write(&sc, scenario(ack_filter)).unwrap();
    let out_dir = dir.join("out");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_linkshare"));
    cmd.arg("lab").arg(&sc).arg("--out").arg(&out_dir);
    if kernel {
        cmd.arg("--kernel");
    }
    let out = cmd.output().unwrap();
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
    let run = Run {
        mbps: bps / 1e6,
        notes: s["lab"]["notes"].to_string(),
        uplink: s["uplink"].clone(),
    };
    eprintln!(
        "{side}, ack_filter {ack_filter}: download {:.2} Mbit/s, uplink {}",
        run.mbps, run.uplink
    );
    run
}

/// CAKE shapes the uplink itself (`bandwidth`, as operators set it): COBALT's target is then
/// 182 ms and drops hardly any ACK, so without the filter the download is what its ACK clock
/// allows. Both ACK filter settings through one side: the filter drops ACKs only when on, the uplink
/// carried ACKs of an Ethernet frame's size, and the filtered download gets more. The runs'
/// notes, for what each side says.
fn off_and_on(kernel: bool) -> String {
    let off = download("off", kernel);
    let on = download("on", kernel);
    assert!(!off.notes.contains("not built"), "{}", off.notes);
    for r in [&off, &on] {
        assert!(r.uplink.is_object(), "the uplink's counters: {}", r.uplink);
        let size = r.mean_size();
        assert!(
            (60.0..=80.0).contains(&size),
            "{size} bytes a packet: {}",
            r.uplink
        );
    }
    assert_eq!(off.ack_filtered(), 0, "{}", off.uplink);
    assert!(on.ack_filtered() > 0, "{}", on.uplink);
    // 100 kbit/s carries ~190 ACKs/s of 66 bytes on the wire: without the filter the ACK clock
    // allows well under the 20 Mbit/s link.
    assert!(off.mbps < 12.0, "off: {} Mbit/s", off.mbps);
    assert!(
        on.mbps > 1.5 * off.mbps,
        "on {} Mbit/s, off {} Mbit/s",
        on.mbps,
        off.mbps
    );
    off.notes
}

#[test]
fn a_slow_uplink_holds_a_download_back_until_cake_filters_its_acks() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let notes = off_and_on(false);
    assert!(!notes.contains("--kernel"), "{notes}");
}

/// The same through the kernel's CAKE: `lab --kernel` builds the uplink on the kernel's side.
#[test]
fn the_kernels_cake_on_the_uplink_filters_acks_too() {
    if !testbed::netns_test_can_run() {
        return;
    }
    let missing = !linkshare_lab::uml::missing_qdiscs("qdisc add dev x root cake\n")
        .unwrap()
        .is_empty();
    if missing {
        if let Some(why) = linkshare_lab::uml::unavailable() {
            testbed::netns_test_skipped(&why);
            return;
        }
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let notes = off_and_on(true);
    assert!(
        notes.contains("kernel's qdisc on the router's port"),
        "{notes}"
    );
}
