//! The packet-rate measurements (seeds 001 and 004, issue 6): forwarding rate against the
//! scheduler and the number of classes, SFQ under a small-packet flood, and rate accuracy per
//! frame size.

use super::bed::{bed, n_classes, one_class, unlimited, Via, PFIFO};
use super::flood::{fmt_opt, measure_flood, small_flood, Flood, Measured, UDP_OVERHEAD};
use super::Table;

pub(super) fn forwarding(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "offered (kpps)",
            "forwarded (kpps)",
            "shaper CPU (ns/pkt)",
            "machine CPU (ns/pkt)",
            "machine CPU / kernel HTB's",
        ],
        "60-byte frames from one UDP sender as fast as it can (sendmmsg), counted at C's interface, median of `--repeat` runs; policies never limit (10 Gbit/s). Shaper CPU is the linkshare process's \
         user + system time per forwarded packet; machine CPU is all busy time of the machine \
         (sender, bridge or shaper, receiver) per forwarded packet, and its last column that \
         figure over the kernel's HTB row of the same run. The first row has no router: A and \
         C share one veth pair, so it is what the sender and the sink cost alone, the floor \
         under every router's machine CPU on this testbed. Seed 001 Table 4 compares FIFO with \
         CBQ on a 1998 PC router.",
    );
    let rows: Vec<(&str, Via, String)> = vec![
        (Via::Direct.name(), Via::Direct, String::new()),
        ("no shaper (bridge)", Via::None, String::new()),
        ("kernel HTB, 1 class", Via::Kernel, unlimited(PFIFO)),
        (
            "linkshare pfifo (no scheduler)",
            Via::Linkshare,
            format!("qdisc = {PFIFO}\n"),
        ),
        ("linkshare HTB, 1 class", Via::Linkshare, unlimited(PFIFO)),
        (
            "linkshare HTB, 1 class, --rx-ring v3",
            Via::LinkshareV3,
            unlimited(PFIFO),
        ),
        (
            "linkshare HTB, 1 class, --io xdp",
            Via::LinkshareXdp,
            unlimited(PFIFO),
        ),
        (
            "linkshare HTB, 1 class, --io xdp-generic",
            Via::LinkshareXdpGeneric,
            unlimited(PFIFO),
        ),
        (
            "linkshare CBQ, 1 class",
            Via::Linkshare,
            n_classes("cbq", 1, 10_000, PFIFO),
        ),
    ];
    let mut measured = Vec::with_capacity(rows.len());
    for (label, via, policy) in rows {
        let b = bed(via, &policy)?;
        measured.push((label, via, measure_flood(&b, small_flood(1, 1), secs)?));
    }
    let kernel = measured
        .iter()
        .find(|(_, via, _)| *via == Via::Kernel)
        .map(|(_, _, m)| m.machine_ns_per_pkt());
    for (label, _, m) in measured {
        let ratio = kernel
            .map(|k| m.machine_ns_per_pkt() / k)
            .filter(|r| r.is_finite());
        t.row(vec![
            label.into(),
            format!("{:.0}", m.sent as f64 / (secs + 0.3) / 1e3),
            format!("{:.0}", m.kpps()),
            fmt_opt(m.shaper_ns_per_pkt(), 0),
            format!("{:.0}", m.machine_ns_per_pkt()),
            fmt_opt(ratio, 2),
        ]);
    }
    Ok(t)
}

pub(super) fn classes(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "classes",
            "kernel HTB (kpps)",
            "linkshare HTB (kpps)",
            "linkshare HTB CPU (ns/pkt)",
            "linkshare CBQ (kpps)",
            "linkshare CBQ CPU (ns/pkt)",
            "linkshare HTB --io xdp (kpps)",
            "linkshare HTB --io xdp CPU (ns/pkt)",
        ],
        "60-byte frames spread round robin over N UDP destination ports, one filter and one \
         class per port (`protocol = \"udp\"`, `dst_port`), under a 10 Gbit/s root: the cost \
         of classification and scheduling against the number of classes. Seed 001 Table 5 lost \
         22 % of ALTQ's forwarding rate from 1 to 100 classes. The linkshare HTB and CBQ \
         columns use AF_PACKET (`--io packet`), the last two AF_XDP.",
    );
    for n in [1usize, 5, 10, 20, 50, 100] {
        let ports = n as u16;
        let k = measure_flood(
            &bed(Via::Kernel, &n_classes("htb", n, 10_000, PFIFO))?,
            small_flood(ports, 1),
            secs,
        )?;
        let h = measure_flood(
            &bed(Via::Linkshare, &n_classes("htb", n, 10_000, PFIFO))?,
            small_flood(ports, 1),
            secs,
        )?;
        let c = measure_flood(
            &bed(Via::Linkshare, &n_classes("cbq", n, 10_000, PFIFO))?,
            small_flood(ports, 1),
            secs,
        )?;
        let x = measure_flood(
            &bed(Via::LinkshareXdp, &n_classes("htb", n, 10_000, PFIFO))?,
            small_flood(ports, 1),
            secs,
        )?;
        t.row(vec![
            n.to_string(),
            format!("{:.0}", k.kpps()),
            format!("{:.0}", h.kpps()),
            fmt_opt(h.shaper_ns_per_pkt(), 0),
            format!("{:.0}", c.kpps()),
            fmt_opt(c.shaper_ns_per_pkt(), 0),
            format!("{:.0}", x.kpps()),
            fmt_opt(x.shaper_ns_per_pkt(), 0),
        ]);
    }
    Ok(t)
}

pub(super) fn sfq_flood(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "forwarded (kpps)",
            "shaper CPU (ns/pkt)",
            "machine CPU (ns/pkt)",
        ],
        "60-byte frames from 64 UDP flows (source ports) as fast as the sender can; policies \
         never limit. Seed 004 measured SFQ alone and under HTB at high packet rates. This \
         kernel has no sfq module, so its column is HTB with pfifo.",
    );
    let sfq = "\"sfq\"";
    let rows: Vec<(&str, Via, String)> = vec![
        ("no shaper (bridge)", Via::None, String::new()),
        ("kernel HTB + pfifo", Via::Kernel, unlimited(PFIFO)),
        (
            "linkshare FIFO",
            Via::Linkshare,
            format!("qdisc = {PFIFO}\n"),
        ),
        ("linkshare SFQ", Via::Linkshare, "qdisc = \"sfq\"\n".into()),
        ("linkshare HTB + SFQ", Via::Linkshare, unlimited(sfq)),
    ];
    for (label, via, policy) in rows {
        let m = measure_flood(&bed(via, &policy)?, small_flood(1, 64), secs)?;
        t.row(vec![
            label.into(),
            format!("{:.0}", m.kpps()),
            fmt_opt(m.shaper_ns_per_pkt(), 0),
            format!("{:.0}", m.machine_ns_per_pkt()),
        ]);
    }
    Ok(t)
}

pub(super) fn accuracy(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "class rate",
            "frame size (bytes)",
            "offered (Mbit/s)",
            "kernel HTB (Mbit/s, error)",
            "linkshare (Mbit/s, error)",
            "linkshare --catch-up-ms 0 (Mbit/s, error)",
        ],
        "One HTB class of the given rate (default burst) fed 30 % above its rate with UDP \
         frames of one size; the rate is the frame bytes (Ethernet header included, as both \
         HTBs count them) arriving at C per second. An offered rate below 1.3 × the class rate \
         means the sender could not go faster: the error then says nothing about the shaper. \
         `--catch-up-ms 0` is the shaper without the replay of late wake-ups: what the machine's \
         own load costs a class whose loop comes back late.",
    );
    for rate_mbit in [1u64, 10, 100] {
        for frame in [64usize, 512, 1500] {
            let payload = frame - UDP_OVERHEAD;
            let want = rate_mbit as f64 * 1e6;
            let f = || Flood {
                payload,
                ports: 1,
                flows: 1,
                rate_bps: Some(want * 1.3),
                tos: 0,
                hosts: None,
            };
            let policy = one_class(&format!("{rate_mbit}mbit"), PFIFO);
            let k = measure_flood(&bed(Via::Kernel, &policy)?, f(), secs)?;
            let l = measure_flood(&bed(Via::Linkshare, &policy)?, f(), secs)?;
            let n = measure_flood(&bed(Via::LinkshareNoCatchUp, &policy)?, f(), secs)?;
            let cell = |m: &Measured| {
                format!(
                    "{:.3} ({:+.2} %)",
                    m.mbit(),
                    100.0 * (m.mbit() * 1e6 - want) / want
                )
            };
            let offered = l.sent as f64 * (frame * 8) as f64 / (secs + 0.3) / 1e6;
            t.row(vec![
                format!("{rate_mbit} Mbit/s"),
                frame.to_string(),
                format!("{offered:.1}"),
                cell(&k),
                cell(&l),
                cell(&n),
            ]);
        }
    }
    Ok(t)
}

/// Issue 14's CPU target as it is written: machine CPU per forwarded 60-byte frame through an
/// HTB of 1 and of 100 classes, each linkshare row over the kernel's HTB with the same classes
/// and flood in the same run, beside the floor (no router: the sender and the sink alone).
pub(super) fn cpu_per_frame(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "classes",
            "router B",
            "forwarded (kpps)",
            "shaper CPU (ns/pkt)",
            "machine CPU (ns/pkt)",
            "machine CPU / kernel HTB's",
        ],
        "60-byte frames from one UDP sender as fast as it can, spread round robin over one \
         destination port per class (one filter and one class per port under a 10 Gbit/s root, \
         as in `classes`), counted at C's interface, median of `--repeat` runs. Machine CPU is \
         the busy time of all CPUs (wall time minus idle, iowait and steal: not the tick-sampled \
         user and system counters, which miss a ring drained between two ticks; crates/lab/src/\
         bench/cpu.rs) per forwarded frame; the last column is over the kernel's HTB row with \
         the same classes. Targets (issue 14): ≤ 1.0 with AF_PACKET, ≤ 0.5 with `--io xdp`. \
         The first row has no router: what the sender and the sink cost alone.",
    );
    let floor = measure_flood(&bed(Via::Direct, "")?, small_flood(1, 1), secs)?;
    let mut rows = vec![("–".to_string(), Via::Direct.name().to_string(), floor, None)];
    for n in [1usize, 100] {
        let policy = n_classes("htb", n, 10_000, PFIFO);
        let flood = || small_flood(n as u16, 1);
        let kernel = measure_flood(&bed(Via::Kernel, &policy)?, flood(), secs)?;
        let k = kernel.machine_ns_per_pkt();
        rows.push((n.to_string(), "kernel HTB".into(), kernel, Some(k)));
        for (label, via) in [
            ("linkshare HTB, AF_PACKET", Via::Linkshare),
            ("linkshare HTB, AF_PACKET --rx-ring v3", Via::LinkshareV3),
            ("linkshare HTB, --io xdp", Via::LinkshareXdp),
            (
                "linkshare HTB, AF_PACKET --rx-coalesce-us 50",
                Via::LinkshareCoalesce,
            ),
            (
                "linkshare HTB, --io xdp --rx-coalesce-us 50",
                Via::LinkshareXdpCoalesce,
            ),
        ] {
            let m = measure_flood(&bed(via, &policy)?, flood(), secs)?;
            rows.push((n.to_string(), label.into(), m, Some(k)));
        }
    }
    let kernel_1 = rows.get(1).map(|r| r.2.machine_ns_per_pkt());
    for (classes, label, m, kernel) in rows {
        let ratio = kernel
            .or(kernel_1)
            .map(|k| m.machine_ns_per_pkt() / k)
            .filter(|r| r.is_finite());
        t.row(vec![
            classes,
            label,
            format!("{:.0}", m.kpps()),
            fmt_opt(m.shaper_ns_per_pkt(), 0),
            format!("{:.0}", m.machine_ns_per_pkt()),
            fmt_opt(ratio, 2),
        ]);
    }
    Ok(t)
}
