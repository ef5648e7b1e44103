//! Several workers (issue 14 §4, §6): forwarding rate and CPU per frame with one and two
//! datapath threads, and the rate of a parent shared by classes on different workers.
//!
//! Both measurements spread the traffic over many flows (source ports), as a router's traffic
//! is: the kernel hands a flow to one worker (AF_PACKET fanout by flow hash, or the receive
//! queue a veth picks by flow hash), so one flow could never use two workers.

use super::bed::{bed, n_classes, Via, PFIFO};
use super::flood::{fmt_opt, measure_flood, small_flood, Flood, UDP_OVERHEAD};
use super::Table;

/// Source ports of the floods here.
const FLOWS: u16 = 32;

pub(super) fn workers(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "router B",
            "forwarded (kpps)",
            "shaper CPU (ns/pkt)",
            "machine CPU (ns/pkt)",
        ],
        "60-byte frames from 32 UDP flows to 2 destination ports as fast as the sender can \
         (sendmmsg), counted at C's interface, median of `--repeat` runs. The policy is an HTB \
         root of 10 Gbit/s with two classes (one per port), which never limits: with two \
         workers each class lives on its own worker and the root is shared between them. \
         Shaper CPU is the linkshare process (all its threads) per forwarded frame; machine \
         CPU is all busy time of the machine (sender, bridge or shaper, receiver). On a \
         2-core machine the sender and the receiver take one core's worth of the two, so two \
         workers cannot double the rate here; the per-CPU figures say what a core costs.",
    );
    let policy = n_classes("htb", 2, 10_000, PFIFO);
    let rows: Vec<(&str, Via)> = vec![
        ("no shaper (bridge)", Via::None),
        ("kernel HTB, 2 classes", Via::Kernel),
        ("linkshare HTB, 1 worker", Via::Linkshare),
        ("linkshare HTB, --workers 2", Via::LinkshareWorkers2),
        ("linkshare HTB, --io xdp, 1 worker", Via::LinkshareXdp),
        (
            "linkshare HTB, --io xdp --workers 2",
            Via::LinkshareXdpWorkers2,
        ),
    ];
    for (label, via) in rows {
        let b = bed(via, if via == Via::None { "" } else { &policy })?;
        let m = measure_flood(&b, small_flood(2, FLOWS), secs)?;
        t.row(vec![
            label.into(),
            format!("{:.0}", m.kpps()),
            fmt_opt(m.shaper_ns_per_pkt(), 0),
            format!("{:.0}", m.machine_ns_per_pkt()),
        ]);
    }
    Ok(t)
}

pub(super) fn shared_parent(secs: f64) -> anyhow::Result<Table> {
    let mut t = Table::new(
        &[
            "root rate",
            "kernel HTB (Mbit/s, error)",
            "linkshare 1 worker (Mbit/s, error)",
            "linkshare --workers 2 (Mbit/s, error)",
            "linkshare --io xdp --workers 2 (Mbit/s, error)",
        ],
        "A root of the given rate with two classes at half of it each (ceil: the root), one \
         per UDP destination port, each fed 1500-byte frames at 0.8 × the root's rate (1.6 × \
         in all) from 32 flows: the aggregate at C against the root's rate. With two workers \
         the classes are on different workers and share the root through the shards' gates \
         and pool (crates/core/src/shard; target: within 0.5 %).",
    );
    for rate_mbit in [10u64, 100] {
        let policy = n_classes("htb", 2, rate_mbit, PFIFO);
        let want = rate_mbit as f64 * 1e6;
        let f = || Flood {
            payload: 1500 - UDP_OVERHEAD,
            ports: 2,
            flows: FLOWS,
            rate_bps: Some(want * 1.6),
            tos: 0,
            hosts: None,
        };
        let mut cells = vec![format!("{rate_mbit} Mbit/s")];
        for via in [
            Via::Kernel,
            Via::Linkshare,
            Via::LinkshareWorkers2,
            Via::LinkshareXdpWorkers2,
        ] {
            let m = measure_flood(&bed(via, &policy)?, f(), secs)?;
            cells.push(format!(
                "{:.3} ({:+.2} %)",
                m.mbit(),
                100.0 * (m.mbit() * 1e6 - want) / want
            ));
        }
        t.row(cells);
    }
    Ok(t)
}
