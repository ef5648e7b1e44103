//! How the datapath thread is run: `--realtime` (SCHED_FIFO), `--nice`, `--cpus` pinning (one
//! and two workers), and catching up the rate after the shaper is paused (`--catch-up-ms`).

use std::time::{Duration, Instant};

use crate::helpers::{
    frame_rate, tcp_goodput, udp_sink, udp_source, within, Lab, ONE_CLASS, TWO_HALVES,
};

/// `--realtime 10` puts the datapath thread under SCHED_FIFO at priority 10, and it still
/// shapes exactly.
#[test]
fn realtime_datapath_runs_under_sched_fifo_and_shapes() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, &["--realtime", "10"]);
    // Field 40 of /proc/PID/stat is rt_priority and 41 the policy.
    let (stat, field) = proc_stat(&lab);
    assert_eq!(field(40), "10", "rt_priority: {stat}");
    assert_eq!(field(41), libc::SCHED_FIFO.to_string(), "policy: {stat}");
    let bps = tcp_goodput(&lab, 2.0);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
}

/// The shaper's `/proc/PID/stat` line, and its field N (1-based, as proc(5) numbers them).
fn proc_stat(lab: &Lab) -> (String, impl Fn(usize) -> String) {
    let pid = lab.shaper.as_ref().unwrap().id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields 1 and 2 are the pid and "(comm)"; field 3 starts after the last ')'.
    let rest: Vec<String> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .map(str::to_string)
        .collect();
    (stat, move |n: usize| rest[n - 3].clone())
}

/// `--nice -5` runs the datapath thread at nice -5 (it still shapes); an out-of-range value
/// is refused before anything starts.
#[test]
fn nice_datapath_runs_at_its_nice_value() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    let (code, err) = lab.run_refused(&p, &["--nice", "30"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--nice"), "{err}");
    lab.start_with(&p, &["--nice", "-5"]);
    // Field 19 of /proc/PID/stat is nice (the main thread runs the loop).
    let (stat, field) = proc_stat(&lab);
    assert_eq!(field(19), "-5", "nice: {stat}");
    let bps = tcp_goodput(&lab, 1.5);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
}

/// `--cpus LIST` pins the datapath thread to the list's first CPU (it still shapes); a CPU the
/// process may not use, or a malformed list, is refused before anything starts.
#[test]
fn cpus_pin_the_datapath_thread() {
    let Some(mut lab) = Lab::new() else { return };
    let p = lab.write_policy("p.toml", ONE_CLASS);
    let run = |lab: &Lab, cpus: &str| {
        lab.cli(&[
            "run",
            "--policy",
            p.to_str().unwrap(),
            "--dev",
            "lo",
            "--dev",
            "lo",
            "--cpus",
            cpus,
        ])
    };
    let (code, _, err) = run(&lab, "1023");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--cpus") && err.contains("CPU 1023") && err.contains("allowed"),
        "{err}"
    );
    let (code, _, err) = run(&lab, "2-1");
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("backwards"), "{err}");
    // The last CPU this test may use (the shaper inherits the same set).
    let allowed = linkshare_router::affinity::allowed().unwrap();
    let cpu = *allowed.last().unwrap();
    lab.start_with(&p, &["--cpus", &cpu.to_string()]);
    let pid = lab.shaper.as_ref().unwrap().id();
    // The main thread runs the loop.
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
        .unwrap_or("");
    assert_eq!(list, cpu.to_string(), "{status}");
    let bps = tcp_goodput(&lab, 1.5);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s"
    );
    lab.sigterm_exits_cleanly(Duration::from_secs(5));
    // Two workers on a list of two CPUs (the first and the last allowed; one CPU twice on a
    // one-CPU machine is refused, so give it once): worker i on the i-th.
    let two: Vec<usize> = if allowed.len() > 1 {
        vec![allowed[0], cpu]
    } else {
        vec![cpu]
    };
    let list = two
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let two_classes = lab.write_policy("two.toml", TWO_HALVES);
    lab.start_with(&two_classes, &["--workers", "2", "--cpus", &list]);
    let pid = lab.shaper.as_ref().unwrap().id();
    let t0 = Instant::now();
    let pinned = loop {
        let mut seen = Vec::new();
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
        {
            let dir = t.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if let Some(i) = comm.trim().strip_prefix("linkshare-w") {
                let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
                let cpus = status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .map(|v| v.trim().to_string())
                    .unwrap_or_default();
                seen.push((i.parse::<usize>().unwrap(), cpus));
            }
        }
        seen.sort();
        if seen.len() == 2 || t0.elapsed() > Duration::from_secs(5) {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let want: Vec<(usize, String)> = (0..2)
        .map(|i| (i, two[i % two.len()].to_string()))
        .collect();
    assert_eq!(pinned, want);
    let bps = tcp_goodput(&lab, 1.5);
    assert!(
        (9.0e6..=10.0e6).contains(&bps),
        "goodput {bps} not within 9-10 Mbit/s with two workers"
    );
}

/// A machine too busy to run the shaper on time (SIGSTOP for 6 ms of every 30, about what a
/// loaded CPU does to an ordinary thread): by default the loop replays the missed time when it
/// comes back and the class keeps its rate; with `--catch-up-ms 0` its bucket (about 2 ms at 10
/// Mbit/s) overflows at every pause and the class loses about an eighth of its rate, which is
/// what a late watchdog does to the kernel's HTB.
#[test]
fn a_paused_shaper_catches_up_its_rate_unless_told_not_to() {
    let on = paused_rate(&[]);
    let off = paused_rate(&["--catch-up-ms", "0"]);
    let (Some((on, turns)), Some((off, off_turns))) = (on, off) else {
        return;
    };
    eprintln!(
        "paused 6 ms in 30: catch-up {:.3} Mbit/s ({turns} turns replayed), none {:.3} Mbit/s",
        on / 1e6,
        off / 1e6
    );
    assert!(within(on, 10e6, 0.01), "with catch-up: {on}");
    assert!(turns > 0, "no turn replayed");
    assert!(
        off < 0.95 * 10e6,
        "without catch-up the rate was kept: {off}"
    );
    assert_eq!(off_turns, 0);
}

/// 10 Mbit/s class offered 13 Mbit/s of UDP while the shaper is paused 6 ms every 30 ms; the
/// frame rate at the sink over [1, 3) s and the shaper's replayed turns.
fn paused_rate(extra: &[&str]) -> Option<(f64, u64)> {
    let mut lab = Lab::new()?;
    let p = lab.write_policy("p.toml", ONE_CLASS);
    lab.start_with(&p, extra);
    let pid = lab.shaper.as_ref().unwrap().id() as i32;
    let t0 = Instant::now();
    let sink = udp_sink(&lab, &[7001], t0, 3.2);
    let src = udp_source(&lab, 7001, 13e6, 1000, t0, 0.0, 3.2);
    while t0.elapsed().as_secs_f64() < 3.1 {
        std::thread::sleep(Duration::from_millis(24));
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(6));
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
    src.join().unwrap();
    let got = sink.join().unwrap();
    let st = lab.stat();
    Some((
        frame_rate(&got[0], 1.0, 3.0),
        st["catch_up_turns"].as_u64().unwrap(),
    ))
}
