//! Pacing (issue 14 §5): how late the real shaper lets a throttled packet leave after the
//! instant its class became eligible, from the shaper's own lateness histogram (`stat`'s
//! `lateness_ns`: eligible instant → the kick of the transmit ring, see docs/router.md
//! "Pacing to the device").
//!
//! Each row is a fresh testbed whose only traffic is the row's paced UDP load, so the
//! histogram holds exactly that run. The kernel's HTB has no such figure (its watchdog's
//! lateness is not exported), so the table has no kernel column; the achieved rate is printed
//! beside the lateness so a row that paced badly shows it in both. Lateness is a property of
//! the machine as much as of the shaper: the table prints the load average around each row,
//! and the target (p99 ≤ 20 µs) is for an idle machine. Each load runs with the
//! datapath as an ordinary thread, at `--nice -10`, and under `--realtime 10` (SCHED_FIFO),
//! AF_PACKET and AF_XDP.

use super::bed::{bed, one_class, Via, BASE_PORT, PFIFO};
use super::flood::{measure_flood, Flood, UDP_OVERHEAD};
use super::floor;
use super::Table;

/// Three classes of one third each under `rate_mbit`, all borrowing to the root, each fed
/// half the root's rate on its own port (1.5 × overload: every class is throttled in turn).
fn three_classes(rate_mbit: u64) -> String {
    let mut s = format!(
        "qdisc = \"htb\"\ndefault = \"c0\"\n[[class]]\nname = \"root\"\nrate = \"{rate_mbit}mbit\"\n"
    );
    for k in 0..3 {
        s.push_str(&format!(
            "[[class]]\nname = \"c{k}\"\nparent = \"root\"\nrate = \"{}kbit\"\nceil = \"{rate_mbit}mbit\"\nleaf = {PFIFO}\n",
            rate_mbit * 1000 / 3
        ));
    }
    for k in 0..3 {
        s.push_str(&format!(
            "[[filter]]\nclass = \"c{k}\"\nprotocol = \"udp\"\ndst_port = \"{}\"\n",
            BASE_PORT + k
        ));
    }
    s
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

pub(super) fn pacing(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "load",
            "frame (bytes)",
            "rate (Mbit/s)",
            "achieved (Mbit/s)",
            "paced departures",
            "lateness p50 (µs)",
            "p99 (µs)",
            "max (µs)",
            "turns replayed",
            "timer wake-up p99 (µs)",
            "early wake at the end (µs)",
            "load average (1 min)",
        ],
        "HTB under a UDP overload of 1.5 × the root (three classes, each fed half the root on \
         its own port) or 1.3 × one class; lateness is the shaper's own histogram (`stat`: from \
         the instant a throttled class became eligible to the kick of the transmit ring), over \
         the whole run of a fresh testbed; turns replayed: how often the loop came back more than \
         50 µs late and replayed the missed time (`--catch-up-ms`). The floor rows are the \
         machine itself, with no traffic: a thread that only reads the clock, and the lateness \
         a departure due at a random instant would have when the thread is not running then \
         (interrupts, the tick, the hypervisor; bench/floor.rs) — no loop on this machine can \
         do better. The sleeping rows are the floor of a loop that sleeps until its departures: how \
         late a timerfd wakes a thread that waits for it in `epoll_wait` (on a VM, the host \
         resuming a halted vCPU) — the shaper's default arms its timer a learnt margin early \
         (`early wake`, at the end of the run) and spins the rest, so its tail is the timer's \
         tail beyond that margin; `timer wake-up p99` is that tail as the shaper itself measured \
         it in the row (`stat`'s `timer_wake_ns`). Target (issue 14): p99 ≤ 20 µs on an idle machine.",
    );
    let loads: [(&str, usize, u64); 4] = [
        ("3 classes", 1000, 10),
        ("3 classes", 1500, 100),
        ("1 class", 64, 1),
        ("1 class", 1500, 100),
    ];
    let vias = [
        Via::Linkshare,
        Via::LinkshareNice,
        Via::LinkshareRealtime,
        Via::LinkshareXdp,
        Via::LinkshareXdpRealtime,
        Via::LinksharePoll,
        Via::LinkshareXdpPoll,
    ];
    let rows = vias
        .iter()
        .flat_map(|&v| loads.iter().map(move |&(l, f, r)| (v, l, f, r)));
    for (via, load, frame, rate_mbit) in rows {
        let (policy, ports, factor) = if load == "1 class" {
            (one_class(&format!("{rate_mbit}mbit"), PFIFO), 1, 1.3)
        } else {
            (three_classes(rate_mbit), 3, 1.5)
        };
        let mut b = bed(via, &policy)?;
        let m = measure_flood(
            &b,
            Flood {
                payload: frame - UDP_OVERHEAD,
                ports,
                flows: 1,
                rate_bps: Some(rate_mbit as f64 * 1e6 * factor),
                tos: 0,
                hosts: None,
            },
            secs,
        )?;
        let st =
            b.t.router()
                .ok_or_else(|| anyhow::anyhow!("no router in the testbed"))?
                .stats()?;
        let g = |k: &str| st.extra.get(k).copied().unwrap_or(f64::NAN);
        t.row(vec![
            via.name().into(),
            load.into(),
            frame.to_string(),
            rate_mbit.to_string(),
            format!("{:.2}", m.mbit()),
            format!("{:.0}", g("lateness_samples")),
            format!("{:.1}", g("lateness_p50_us")),
            format!("{:.1}", g("lateness_p99_us")),
            format!("{:.0}", g("lateness_max_us")),
            format!("{:.0}", g("catch_up_turns")),
            // A loop that never slept on its timer (a fixed spin) has no sample to show.
            if g("timer_wake_samples") > 0.0 {
                format!("{:.1}", g("timer_wake_p99_us"))
            } else {
                "– (never slept)".into()
            },
            format!("{:.0}", g("early_wake_us")),
            load_average(),
        ]);
    }
    // The machine's own floor, with no traffic: what a perfect loop would measure (floor.rs).
    for (name, fifo) in [
        ("floor: a bare spin loop", None),
        ("floor: a bare spin loop, SCHED_FIFO 10", Some(10)),
    ] {
        let f = floor::measure(secs, fifo)?;
        let load = format!("none ({:.0} gaps > 20 µs a second)", f.gaps_over_20us_per_s);
        t.row(floor_row(name.into(), load, f.p50_us, f.p99_us, f.max_us));
    }
    // A loop that sleeps between departures has the timer's own wake-up latency as its floor.
    for period_us in [100, 500] {
        let f = floor::measure_sleeper(secs, period_us)?;
        let name = format!("floor: a thread sleeping {period_us} µs on a timer");
        let load = format!("none ({} wake-ups; p99.9 {:.1} µs)", f.wakes, f.p999_us);
        t.row(floor_row(name, load, f.p50_us, f.p99_us, f.max_us));
    }
    Ok(t)
}

/// A floor row of the table: its lateness quantiles in the lateness columns, nothing else.
fn floor_row(name: String, load: String, p50_us: f64, p99_us: f64, max_us: f64) -> Vec<String> {
    let dash = || "–".to_string();
    vec![
        name,
        load,
        dash(),
        dash(),
        dash(),
        dash(),
        format!("{p50_us:.1}"),
        format!("{p99_us:.1}"),
        format!("{max_us:.0}"),
        dash(),
        dash(),
        dash(),
        load_average(),
    ]
}
