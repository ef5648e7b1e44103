//! Changing the running policy: a large reload built off the datapath does not pause
//! forwarding; `class change` and `reload` during traffic lose no queued packet and keep the
//! qdisc's counters conserved (AF_PACKET and AF_XDP, one and two workers); a bad reload keeps the
//! old policy and reports what `check` reports.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::helpers::{class, udp_sink, udp_source, Lab, TWO_CLASSES};

/// A policy of `n` leaves under a 20 Mbit/s root (the stream is 2 Mbit/s); `variant` moves rate between the first two
/// (what a class change does). Unfiltered traffic goes to `c0`.
fn many_classes(n: usize, variant: u64) -> String {
    let mut s = String::from(
        "qdisc = \"htb\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \"20mbit\"\n",
    );
    for i in 0..n {
        let kbit = match (i, variant % 2) {
            (0, 0) | (1, 1) => 4000,
            (0, _) | (1, _) => 2000,
            _ => 1,
        };
        s.push_str(&format!(
            "[[class]]\nname = \"c{i}\"\nparent = \"root\"\nrate = \"{kbit}kbit\"\nceil = \"10mbit\"\nquantum = 1500\n"
        ));
    }
    s
}

/// Reloads are built off the datapath (router/src/builder.rs): reloading a 10,000-class policy
/// three times takes the control client far longer than any gap it leaves in a paced stream
/// (the loop only installs the built scheduler). When the build ran on the loop, each reload
/// stopped forwarding for the whole build.
#[test]
fn reloading_a_large_policy_does_not_pause_forwarding() {
    let Some(mut lab) = Lab::new() else { return };
    const N: usize = 10_000;
    let p = lab.write_policy("p.toml", &many_classes(N, 0));
    lab.start(&p);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7001], t0, 6.0);
    let src = udp_source(&lab, 7001, 2e6, 500, t0, 0.0, 5.5);
    std::thread::sleep(Duration::from_millis(1500));
    let mut took = Vec::new();
    for v in 1..=3u64 {
        let q = lab.write_policy(&format!("p{v}.toml"), &many_classes(N, v));
        let t = Instant::now();
        let (code, _, err) = lab.cli(&["reload", q.to_str().unwrap()]);
        assert_eq!(code, 0, "reload {v} failed: {err}");
        took.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let reloads_end = t0.elapsed().as_secs_f64();
    src.join().unwrap();
    let got = sink.join().unwrap();
    let times: Vec<f64> = got[0]
        .iter()
        .map(|a| a.0)
        .filter(|&t| (1.0..=reloads_end + 0.2).contains(&t))
        .collect();
    assert!(times.len() > 100, "too few arrivals: {}", times.len());
    let max_gap_ms = times
        .windows(2)
        .map(|w| (w[1] - w[0]) * 1e3)
        .fold(0.0, f64::max);
    eprintln!(
        "reloads of {N} classes took {took:?} ms; largest gap in the stream {max_gap_ms:.1} ms"
    );
    let st = lab.stat();
    assert_eq!(st["reloads"]["ok"], 3, "{}", st["reloads"]);
    let shortest = took.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        max_gap_ms < 100.0 && max_gap_ms < shortest,
        "forwarding paused {max_gap_ms:.1} ms while reloads took {took:?} ms"
    );
}

/// What a reload's summary says about queued packets: `None` for a change applied in place
/// (the queues stayed where they were: nothing moved, nothing dropped), else the packets a new
/// tree took over and those lost ("...; moved N queued packets (K classified again), dropped M").
fn moved_and_dropped(out: &str) -> Option<(u64, u64)> {
    if out.contains(" in place: ") {
        return None;
    }
    let num_after = |k: &str| -> u64 {
        let i = out.find(k).unwrap_or_else(|| panic!("no `{k}` in {out}")) + k.len();
        out[i..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    Some((num_after("; moved"), num_after(", dropped")))
}

/// How the one change among many is made.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Change {
    /// `reload FILE` of the policy with the new rate (the shaper diffs the two).
    ReloadFile,
    /// `class change s1 --rate 4mbit --write`: by name, no policy text on the control socket
    /// either way, and the file written.
    ClassByName,
}

#[test]
fn one_change_among_20000_classes_is_applied_in_place() {
    one_change_among_many(Change::ReloadFile);
}

#[test]
fn one_class_change_by_name_among_20000_classes_is_applied_in_place() {
    one_change_among_many(Change::ClassByName);
}

/// A change among many: a policy of 20,000 subscribers (one class and one address filter each,
/// over 1 MiB of TOML, so `reload FILE` must send its path and `class change` must not send
/// the text), one subscriber's rate raised under traffic. The change is applied in place: the
/// reply names the one class changed, that class drains at its new rate with no packet lost,
/// and a class that had traffic before and none since keeps every counter and its tokens
/// exactly.
fn one_change_among_many(how: Change) {
    let Some(mut lab) = Lab::new() else { return };
    const N: usize = 20_000;
    let policy = |s1_kbit: u32| {
        let mut s = String::from(
            "qdisc = \"htb\"\ndefault = \"s0\"\n[[class]]\nname = \"root\"\nrate = \"3gbit\"\n",
        );
        for i in 0..N {
            let kbit = match i {
                1 => s1_kbit,
                2 | 3 => 1000,
                _ => 100,
            };
            s.push_str(&format!(
                "[[class]]\nname = \"s{i}\"\nparent = \"root\"\nrate = \"{kbit}kbit\"\n\
                 leaf = {{ type = \"pfifo\", limit = 2000 }}\n\
                 [[filter]]\nclass = \"s{i}\"\nprotocol = \"udp\"\ndst_port = \"{}\"\n",
                10_000 + i
            ));
        }
        s
    };
    let p = lab.write_policy("p.toml", &policy(1000));
    lab.start_within(&p, &[], Duration::from_secs(30));
    let q = lab.write_policy("q.toml", &policy(4000));
    let size = std::fs::metadata(&q).unwrap().len();
    assert!(size > 1 << 20, "the policy should be over 1 MiB: {size}");
    let t0 = Instant::now();
    // s1: 2 Mbit/s offered to a 1 Mbit/s class (a standing queue builds); s2: steady, under its
    // rate; s3: a short burst, then idle.
    let sink = udp_sink(&lab, &[10_001, 10_002, 10_003], t0, 10.0);
    let s1 = udp_source(&lab, 10_001, 2e6, 500, t0, 0.0, 8.0);
    let s2 = udp_source(&lab, 10_002, 0.5e6, 500, t0, 0.0, 8.0);
    let s3 = udp_source(&lab, 10_003, 0.5e6, 500, t0, 0.0, 0.3);
    std::thread::sleep(Duration::from_millis(1200));
    let keys = [
        "sent_bytes",
        "sent_packets",
        "drops",
        "overlimits",
        "lended",
        "borrowed",
        "giants",
        "backlog_packets",
        "tokens",
        "ctokens",
        "rate_bps",
        "ceil_bps",
    ];
    let row = |st: &serde_json::Value, name: &str| -> Vec<String> {
        let c = class(st, name);
        keys.iter().map(|k| format!("{k}={}", c[k])).collect()
    };
    let before = lab.stat();
    let s3_before = row(&before, "s3");
    let s2_sent_before = class(&before, "s2")["sent_packets"].as_u64().unwrap();
    assert!(class(&before, "s1")["backlog_packets"].as_u64().unwrap() > 20);
    let (code, out, err) = match how {
        Change::ReloadFile => lab.cli(&["reload", q.to_str().unwrap()]),
        Change::ClassByName => lab.cli(&["class", "change", "s1", "--rate", "4mbit", "--write"]),
    };
    assert_eq!(code, 0, "the change failed: {out}{err}");
    // The change is in effect once the reply is here.
    let change_at = t0.elapsed().as_secs_f64();
    eprintln!("one change among {N} classes: {out}");
    assert!(
        out.contains("in place: 1 changed (s1); 0 added, 0 removed, 20000 kept unchanged"),
        "{out}"
    );
    if how == Change::ClassByName {
        // Written into the file the shaper runs: the edited policy is the one with s1's new
        // rate, every other class as it was.
        assert!(out.contains("wrote the change into"), "{out}");
        let written = linkshare_config::Policy::load(&p).expect("the written policy is valid");
        let want = linkshare_config::Policy::parse(&policy(4000), "p.toml").expect("valid");
        assert_eq!(written.classes(), want.classes());
    }
    let after = lab.stat();
    assert_eq!(class(&after, "s1")["rate_bps"], 4_000_000);
    assert_eq!(s3_before, row(&after, "s3"), "an untouched class changed");
    let s2_sent_after = class(&after, "s2")["sent_packets"].as_u64().unwrap();
    assert!(s2_sent_after >= s2_sent_before, "s2's counters went back");
    let offered = [s1.join().unwrap(), s2.join().unwrap(), s3.join().unwrap()];
    let got = sink.join().unwrap();
    // After the change s1 drains its queue at up to 4 Mbit/s: well above the 1 Mbit/s before.
    let before_rate = crate::helpers::frame_rate(&got[0], 0.5, 1.1);
    // The sources run until 8 s: the window ends before they stop however long the reload took
    // (its build is off the datapath and may be slow on a busy machine).
    let (from, to) = (change_at + 0.1, (change_at + 0.6).min(7.9));
    assert!(from < to, "the reload took until {change_at:.1} s");
    let rate = crate::helpers::frame_rate(&got[0], from, to);
    eprintln!("s1: {before_rate:.0} bit/s before, {rate:.0} bit/s after the change");
    assert!(
        rate > 1.5 * before_rate,
        "s1 did not speed up: {before_rate:.0} then {rate:.0} bit/s"
    );
    let st = lab.stat();
    for (i, name) in ["s1", "s2", "s3"].iter().enumerate() {
        let c = class(&st, name);
        let sent = c["sent_packets"].as_u64().unwrap();
        assert_eq!(c["drops"], 0, "{name} dropped");
        assert_eq!(c["backlog_packets"], 0, "{name} still queued");
        assert_eq!(
            offered[i], sent,
            "{name}: offered {} sent {sent}",
            offered[i]
        );
        assert_eq!(got[i].len() as u64, sent, "{name}: sent but not received");
    }
    assert_eq!(st["reloads"]["ok"], 1);
}

#[test]
fn class_change_and_reload_during_traffic_lose_no_queued_packet() {
    change_and_reload_lose_nothing("packet", 1);
}

#[test]
fn class_change_and_reload_under_af_xdp_lose_no_queued_packet() {
    change_and_reload_lose_nothing("xdp", 1);
}

/// The same with two workers (`--workers 2`): the tree's top-level classes are dealt to two
/// threads, a frame received by the other one is handed over, and `stat`, `class change` and
/// `reload` see one tree.
#[test]
fn two_workers_lose_no_queued_packet_across_class_change_and_reload() {
    change_and_reload_lose_nothing("packet", 2);
}

/// Two workers over AF_XDP: the veths get two queues, each worker binds one on each side.
#[test]
fn two_workers_over_af_xdp_lose_no_queued_packet() {
    change_and_reload_lose_nothing("xdp", 2);
}

fn change_and_reload_lose_nothing(io: &str, workers: usize) {
    let Some(mut lab) = Lab::with_queues(workers as u32) else {
        return;
    };
    let p = lab.write_policy("p.toml", TWO_CLASSES);
    let w = workers.to_string();
    lab.start_with(&p, &["--io", io, "--workers", &w]);
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[6001, 6002], t0, 4.5);
    let sa = udp_source(&lab, 6001, 5e6, 1000, t0, 0.0, 2.4);
    let sb = udp_source(&lab, 6002, 10e6, 1000, t0, 0.0, 2.4);
    std::thread::sleep(Duration::from_millis(800));
    let (code, out, err) = lab.cli(&["class", "change", "b", "--rate", "4mbit", "--ceil", "4mbit"]);
    assert_eq!(code, 0, "class change failed: {out}{err}");
    eprintln!("class change: {out}");
    match moved_and_dropped(&out) {
        // One worker: the new rate applied to the running tree, b's queue where it was.
        None => assert!(workers == 1 && out.contains("1 changed (b)"), "{out}"),
        Some((moved, dropped)) => {
            assert!(moved > 0, "nothing was queued at the change: {out}");
            assert_eq!(dropped, 0, "{out}");
        }
    }
    assert_eq!(class(&lab.stat(), "b")["rate_bps"], 4_000_000);
    std::thread::sleep(Duration::from_millis(600));
    let p2 = lab.write_policy("p2.toml", &TWO_CLASSES.replace("3mbit", "2mbit"));
    let (code, out, err) = lab.cli(&["reload", p2.to_str().unwrap()]);
    assert_eq!(code, 0, "reload failed: {out}{err}");
    eprintln!("reload: {out}");
    match moved_and_dropped(&out) {
        None => assert!(workers == 1 && out.contains("2 changed (a, b)"), "{out}"),
        Some((moved, dropped)) => assert!(moved > 0 && dropped == 0, "{out}"),
    }
    let st = lab.stat();
    assert_eq!(class(&st, "a")["rate_bps"], 2_000_000);
    // The reloaded file has b at 6 Mbit/s again.
    assert_eq!(class(&st, "b")["rate_bps"], 6_000_000);
    let offered = [sa.join().unwrap(), sb.join().unwrap()];
    // Let the queues drain (300 packets at 2 Mbit/s ≈ 1.2 s).
    let t = Instant::now();
    let st = loop {
        let st = lab.stat();
        if st["directions"][0]["backlog_packets"] == 0 {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "backlog does not drain: {st}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let got = sink.join().unwrap();
    let q = &st["directions"][0]["qdisc"];
    let n = |k: &str| q[k].as_u64().unwrap();
    assert_eq!(
        n("enqueued"),
        n("dequeued") + n("dropped") + n("backlog_packets"),
        "conservation: {q}"
    );
    for (i, name) in ["a", "b"].iter().enumerate() {
        let cl = class(&st, name);
        let sent = cl["sent_packets"].as_u64().unwrap();
        let drops = cl["drops"].as_u64().unwrap();
        eprintln!(
            "class {name}: offered {} sent {sent} dropped {drops} received {}",
            offered[i],
            got[i].len()
        );
        // Every datagram offered is either sent or counted as a drop; every one sent arrived.
        assert_eq!(offered[i], sent + drops, "class {name} lost packets: {st}");
        assert_eq!(
            got[i].len() as u64,
            sent,
            "class {name}: sent but not received"
        );
    }
    let ifs = &st["interfaces"];
    assert!(ifs[0]["io"].as_str().unwrap().starts_with(io), "{st}");
    let ws = st["workers"].as_array().map_or(0, |w| w.len());
    if workers > 1 {
        assert_eq!(ws, workers, "one row per worker: {st}");
        let sum = |k: &str| -> u64 {
            st["workers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w[k].as_u64().unwrap())
                .sum()
        };
        eprintln!(
            "workers: {} handed over, {} taken over, {} refused (inbox full), {} lost",
            sum("handed_off"),
            sum("taken_over"),
            sum("handoff_full"),
            sum("handoff_lost")
        );
        assert_eq!(sum("handed_off"), sum("taken_over"), "{st}");
        assert_eq!(sum("handoff_full") + sum("handoff_lost"), 0, "{st}");
        // Both workers scheduled traffic: a and b live on different shards.
        for w in st["workers"].as_array().unwrap() {
            assert!(
                w["sent_packets"].as_u64().unwrap() > 0,
                "an idle worker: {st}"
            );
        }
        // SIGTERM: the control thread stops every worker's receiving, then each drains and
        // ends; the process exits 0 and removes its socket.
        lab.sigterm_exits_cleanly(Duration::from_secs(5));
    } else {
        assert_eq!(ws, 0, "{st}");
    }
    assert_eq!(ifs[0]["rx_ring_drops"], 0, "{st}");
    assert_eq!(ifs[1]["tx_errors"], 0, "{st}");
}

/// Subscribers added and removed by reloads under traffic: two subscribers that stay carry
/// steady streams across four reloads that each remove 100 subscribers and add 100 others
/// (applied to the running tree in place, docs/router.md "Reload"); not one of their packets is
/// lost, and their counters continue (never reset). Each reply counts what changed and names
/// the first few, never the classes kept.
#[test]
fn subscribers_added_and_removed_under_traffic_lose_nothing_of_the_others() {
    let Some(mut lab) = Lab::new() else { return };
    const N: usize = 2_000;
    // Subscribers s0..N, less s100..s199 on odd versions, which have n100..n199 instead.
    let policy = |v: usize| {
        let mut s = String::from(
            "qdisc = \"htb\"\ndefault = \"s0\"\n[[class]]\nname = \"root\"\nrate = \"3gbit\"\n",
        );
        for i in 0..N {
            let name = match (v % 2, i) {
                (1, 100..=199) => format!("n{i}"),
                _ => format!("s{i}"),
            };
            s.push_str(&format!(
                "[[class]]\nname = \"{name}\"\nparent = \"root\"\nrate = \"1mbit\"\n\
                 leaf = {{ type = \"fq_codel\" }}\n\
                 [[filter]]\nclass = \"{name}\"\nprotocol = \"udp\"\ndst_port = \"{}\"\n",
                10_000 + i
            ));
        }
        s
    };
    let p = lab.write_policy("p.toml", &policy(0));
    lab.start_within(&p, &[], Duration::from_secs(30));
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[10_001, 10_002], t0, 9.0);
    let s1 = udp_source(&lab, 10_001, 0.5e6, 500, t0, 0.0, 7.0);
    let s2 = udp_source(&lab, 10_002, 0.3e6, 200, t0, 0.0, 7.0);
    std::thread::sleep(Duration::from_millis(800));
    let mut last = [0u64; 2];
    for v in 1..=4 {
        let q = lab.write_policy(&format!("p{v}.toml"), &policy(v));
        let (code, out, err) = lab.cli(&["reload", q.to_str().unwrap()]);
        assert_eq!(code, 0, "reload {v} failed: {out}{err}");
        let (gone, new) = if v % 2 == 1 { ("s", "n") } else { ("n", "s") };
        assert!(
            out.contains(&format!(
                "100 added ({new}100, {new}101, {new}102, {new}103, {new}104 and 95 more)"
            )) && out.contains(&format!("100 removed ({gone}100, {gone}101, ")),
            "reload {v}: {out}"
        );
        // The root and the 1,900 subscribers that stay.
        assert!(out.contains("1901 kept unchanged"), "reload {v}: {out}");
        std::thread::sleep(Duration::from_millis(300));
        let st = lab.stat();
        for (k, name) in ["s1", "s2"].iter().enumerate() {
            let sent = class(&st, name)["sent_packets"].as_u64().unwrap();
            assert!(
                sent > last[k],
                "reload {v}: {name}'s count went from {} to {sent}",
                last[k]
            );
            last[k] = sent;
        }
    }
    let offered = [s1.join().unwrap(), s2.join().unwrap()];
    let got = sink.join().unwrap();
    let st = lab.stat();
    assert_eq!(st["reloads"]["ok"], 4, "{}", st["reloads"]);
    for (i, name) in ["s1", "s2"].iter().enumerate() {
        let c = class(&st, name);
        let sent = c["sent_packets"].as_u64().unwrap();
        assert_eq!(c["drops"], 0, "{name} dropped");
        assert_eq!(
            offered[i], sent,
            "{name}: offered {} sent {sent}",
            offered[i]
        );
        assert_eq!(got[i].len() as u64, sent, "{name}: sent but not received");
    }
}

#[test]
fn bad_reload_keeps_old_policy_and_says_what_check_says() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", TWO_CLASSES);
    lab.start(&p);
    let bad = lab.write_policy(
        "bad.toml",
        &TWO_CLASSES.replace("rate = \"3mbit\"", "rate = \"fast\""),
    );
    let check = Command::new(env!("CARGO_BIN_EXE_linkshare"))
        .arg("check")
        .arg(&bad)
        .output()
        .unwrap();
    let check_err = String::from_utf8_lossy(&check.stderr).trim().to_string();
    assert!(check_err.contains("bad.toml:"), "{check_err}");
    let (code, _, err) = lab.cli(&["reload", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&check_err),
        "reload's error differs from check's:\n--- check\n{check_err}\n--- reload\n{err}"
    );
    assert!(err.contains("the running policy stays"), "{err}");
    let (code, _, err) = lab.cli(&["class", "change", "a", "--rate", "lots"]);
    assert_eq!(code, 1, "{err}");
    let st = lab.stat();
    assert_eq!(class(&st, "a")["rate_bps"], 3_000_000);
    assert_eq!(class(&st, "b")["rate_bps"], 6_000_000);
    // Still forwarding under the old policy.
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[6001], t0, 1.0);
    udp_source(&lab, 6001, 1e6, 500, t0, 0.1, 0.6)
        .join()
        .unwrap();
    assert!(
        !sink.join().unwrap()[0].is_empty(),
        "no traffic after a rejected reload"
    );
    // The control socket is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(lab.control())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "control socket mode {mode:o}");
}
