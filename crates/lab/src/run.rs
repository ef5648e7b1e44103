//! A scenario's flows as real kernel traffic through a real router, in network namespaces —
//! hosts A, B, C of the seeds (`linkshare lab [SCENARIO]`, docs/lab.md).
//!
//! The scenario file is the one `linkshare sim` reads. Its policy runs in the router namespace
//! ([`testbed::Router`]: `linkshare run`), its flows become sockets in the sender and sink
//! namespaces ([`traffic`]), in real time. Every `sample` the router's class counters (the
//! control socket's `stat`) and the flows' delivered bytes are recorded; at the end the same
//! result model the simulator produces ([`linkshare_sim::model::SimResult`], marked with
//! `lab`) is returned, for the CLI to print as the same table and write as the same files.
//!
//! Codes returned by [`execute`]: 1 invalid scenario, 2 unreadable file or no testbed (not root,
//! no `ip`); the CLI adds 1 for a failed flow and 130 when interrupted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use linkshare_sim::metrics::{jain, Hist};
use linkshare_sim::model::{
    ClassState, ClassSummary, FlowSummary, LabInfo, LinkSummary, QdiscSummary, Sample, SeriesKind,
    SimResult, Summary,
};
use linkshare_sim::scenario::FlowKind;
use linkshare_sim::Scenario;

use crate::testbed::{self, ClassCounters, LinkshareRouter, RouterStats, Testbed};
use crate::traffic::{self, FlowLive, Plan, Traffic};

/// The default scenario: three classes on 10 Mbit/s for 15 s, embedded so that `linkshare lab`
/// works from a clean clone.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../scenarios/lab-default.toml");
pub const DEFAULT_ORIGIN: &str = "scenarios/lab-default.toml (embedded)";

/// Exit code of an interrupted run.
pub const EXIT_INTERRUPTED: i32 = 130;
/// At most this many flows (one or two threads each).
const MAX_FLOWS: usize = 256;

/// One lab run, measured: the simulator's result model, and what went wrong.
pub struct LabRun {
    pub result: SimResult,
    /// Flows that failed (one message each).
    pub failures: Vec<String>,
    /// Stopped by SIGINT/SIGTERM: the result covers the time that ran.
    pub interrupted: bool,
}

/// Run `scenario` (the embedded default if `None`) in the lab, through linkshare or (`kernel`)
/// the kernel's HTB, and measure it; prints nothing on stdout. `Err(code)`: the scenario could
/// not be used or the testbed is unavailable (the reason is printed on stderr).
pub fn execute(scenario: Option<&Path>, kernel: bool) -> anyhow::Result<Result<LabRun, i32>> {
    let (sc, text) = match load(scenario) {
        Ok(x) => x,
        Err(code) => return Ok(Err(code)),
    };
    if let Some(why) = testbed::unavailable() {
        eprintln!("error: {why}");
        return Ok(Err(2));
    }
    let base = scenario
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let (policy_text, mut notes) = policy_text(&sc, &text, &base)?;
    let duration = sc.duration.as_secs_f64();
    if sc.flows.len() > MAX_FLOWS {
        eprintln!(
            "{}: error: the lab runs at most {MAX_FLOWS} flows, the scenario has {}",
            sc.origin,
            sc.flows.len()
        );
        return Ok(Err(1));
    }
    let link_delay = sc.link.delay.as_secs_f64();
    let mut plans = Vec::new();
    for (i, f) in sc.flows.iter().enumerate() {
        match Plan::new(f, duration, sc.seed.wrapping_add(i as u64), link_delay) {
            Ok(p) => plans.push(p),
            Err(e) => {
                eprintln!("{}: error: {e}", sc.origin);
                return Ok(Err(1));
            }
        }
    }
    match separate_sources(&sc, &mut plans) {
        Ok(n) => notes.extend(n),
        Err(e) => {
            eprintln!("{}: error: {e}", sc.origin);
            return Ok(Err(1));
        }
    }
    // Every congestion control the flows ask for, before building anything.
    let ccs = unique(plans.iter().filter_map(|p| match &p.spec.kind {
        FlowKind::Tcp(t) => Some(traffic::linux_cc(t.cc)),
        _ => None,
    }));
    if let Err(e) = traffic::check_congestion(ccs) {
        eprintln!("{}: error: {e:#}", sc.origin);
        return Ok(Err(1));
    }
    notes.extend(unsupported(&sc));
    let (routes, route_notes) = tcp_routes(&plans);
    notes.extend(route_notes);
    let router_args = router_args(&sc, &plans);
    if kernel && !router_args.is_empty() {
        notes.push(format!(
            "--kernel: the kernel here has no netem, so the link's delays, the flows' extra_delay and the device buffer ({}) are not emulated",
            router_args.join(" ")
        ));
    }

    testbed::install_signal_handlers()?;
    if let Some(n) = testbed::raise_priority() {
        notes.push(n);
    }
    eprintln!(
        "lab: {} — {} flows for {:.1} s through {} in network namespaces",
        sc.name,
        plans.len(),
        duration,
        if kernel {
            "the kernel's HTB"
        } else {
            "linkshare"
        }
    );
    let router: Box<dyn testbed::Router> = if kernel {
        // Fail before building anything when the kernel cannot take the policy.
        let p = linkshare_config::Policy::parse(&policy_text, &sc.origin)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        linkshare_interop::tc::export::tc_script(&p, "probe0")
            .context("--kernel runs the policy on the kernel's HTB")?;
        Box::new(testbed::KernelRouter::htb(
            linkshare_interop::tc::export::tc_script,
        ))
    } else {
        Box::new(LinkshareRouter::new(router_args)?)
    };
    let measured = measure(&sc, &plans, &routes, &policy_text, router)?;
    let interrupted = measured.interrupted;
    let failures: Vec<String> = measured
        .live
        .iter()
        .filter_map(|l| l.error.lock().ok().and_then(|e| e.clone()))
        .collect();
    let result = build_result(&sc, &plans, measured, notes);
    Ok(Ok(LabRun {
        result,
        failures,
        interrupted,
    }))
}

/// The scenario and its text; on failure the diagnostics are printed and the exit code returned.
fn load(path: Option<&Path>) -> Result<(Scenario, String), i32> {
    let (text, origin, base, stem) = match path {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => (
                t,
                p.display().to_string(),
                p.parent().map(Path::to_path_buf).unwrap_or_default(),
                p.file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("scenario")
                    .to_string(),
            ),
            Err(e) => {
                eprintln!("{}: error: cannot read the scenario: {e}", p.display());
                return Err(2);
            }
        },
        None => (
            DEFAULT_SCENARIO.to_string(),
            DEFAULT_ORIGIN.to_string(),
            PathBuf::from("scenarios"),
            "lab-default".to_string(),
        ),
    };
    match Scenario::parse_with(&text, &origin, &base, &stem) {
        Ok(mut sc) => {
            if sc.sweep.take().is_some() {
                eprintln!(
                    "{origin}: note: the lab runs the file without its [sweep] (one point at a time: copy the point's values into the file)"
                );
            }
            Ok((sc, text))
        }
        Err(e) => {
            for d in &e.diagnostics {
                if d.line > 0 && d.file == origin {
                    eprintln!("{}", d.render_with_source(&text));
                } else {
                    eprintln!("{d}");
                }
            }
            Err(1)
        }
    }
}

/// The policy file for `linkshare run`: the scenario's `policy = "path"` file, its inline
/// `[policy]` table written out, or (no policy) one HTB class at the link rate.
fn policy_text(sc: &Scenario, text: &str, base: &Path) -> anyhow::Result<(String, Vec<String>)> {
    let doc: toml::Table = toml::from_str(text).context("scenario is not TOML")?;
    match doc.get("policy") {
        Some(toml::Value::String(p)) => {
            let path = base.join(p);
            let t = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read the policy {}", path.display()))?;
            Ok((t, Vec::new()))
        }
        Some(toml::Value::Table(t)) => Ok((
            toml::to_string(t).context("cannot write the inline policy")?,
            Vec::new(),
        )),
        _ => Ok((
            format!(
                "qdisc = \"htb\"\ndefault = \"link\"\n[[class]]\nname = \"link\"\nrate = \"{}bit\"\n",
                sc.link.rate.0
            ),
            vec![format!(
                "the scenario has no policy: the lab shapes the link rate with one HTB class `link` (the simulator uses a pfifo of {} packets)",
                sc.link.queue
            )],
        )),
    }
}

/// What the lab does not reproduce, said in the summary.
fn unsupported(sc: &Scenario) -> Vec<String> {
    let mut notes = Vec::new();
    if sc.link.timer_hz > 0 || sc.link.clock_hz > 0 {
        notes.push(
            "`timer_hz`/`clock_hz` are not applied: linkshare run wakes at exact deadlines".into(),
        );
    }
    if sc.link.overhead != 14 {
        notes.push(format!(
            "the routers charge whole Ethernet frames (IP length + 14 bytes, as the kernel's HTB does): `overhead = 14` in the simulator's terms; this scenario has overhead = {}",
            sc.link.overhead
        ));
    }
    let no_delack: Vec<&str> = sc
        .flows
        .iter()
        .filter(|f| matches!(&f.kind, FlowKind::Tcp(t) if !t.delayed_ack))
        .map(|f| f.name.as_str())
        .collect();
    if !no_delack.is_empty() {
        notes.push(format!(
            "`delayed_ack = false` is not reproduced: the kernel's receivers delay ACKs (with Linux's quick-ACK at start) for {}",
            list(&no_delack)
        ));
    }
    notes
}

/// Names for a note: all of them up to four, else the first three and how many more.
fn list(names: &[&str]) -> String {
    if names.len() <= 4 {
        names.join(", ")
    } else {
        format!("{} and {} more", names[..3].join(", "), names.len() - 3)
    }
}

/// `run` options from the scenario: the link's delay as a delay line in each direction, each
/// flow's `extra_delay` as a path delay on its source address (both directions), the device
/// buffer. Base RTT of a flow = 2 × (delay + extra_delay), as in the simulator.
fn router_args(sc: &Scenario, plans: &[Plan]) -> Vec<String> {
    let mut a = Vec::new();
    if sc.link.delay.0 > 0 {
        a.push("--emulate".to_string());
        a.push(format!(
            "delay={d}ns,reverse_delay={d}ns",
            d = sc.link.delay.0
        ));
    }
    let paths = unique(
        plans
            .iter()
            .filter(|p| p.spec.extra_delay.0 > 0)
            .map(|p| (p.src, p.spec.extra_delay.0)),
    );
    for (src, d) in paths {
        a.push("--path-delay".to_string());
        a.push(format!("{src}={d}ns"));
    }
    if sc.link.device_buffer > 0 {
        a.push("--device-buffer".to_string());
        a.push(sc.link.device_buffer.to_string());
    }
    a
}

/// The router keys a flow's `extra_delay` by its source address, so flows that share a source
/// but not an extra delay get their own: the first extra delay of a source keeps the address,
/// each other one moves to a free address of the same /24 that the policy classifies exactly as
/// the original (the simulator's class is the one reported). Returns the notes to print.
fn separate_sources(sc: &Scenario, plans: &mut [Plan]) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut used: Vec<std::net::Ipv4Addr> = plans.iter().flat_map(|p| [p.src, p.dst]).collect();
    used.extend([testbed::ADDR_A, testbed::ADDR_C]);
    for src in unique(plans.iter().map(|p| p.src)) {
        let delays = unique(
            plans
                .iter()
                .filter(|p| p.src == src)
                .map(|p| p.spec.extra_delay),
        );
        for d in delays.into_iter().skip(1) {
            let idx: Vec<usize> = (0..plans.len())
                .filter(|&i| plans[i].src == src && plans[i].spec.extra_delay == d)
                .collect();
            let same_class = |cand: std::net::Ipv4Addr| {
                idx.iter().all(|&i| {
                    let mut moved = plans[i].clone();
                    moved.spec.src = std::net::IpAddr::V4(cand);
                    class_of(sc, &moved) == class_of(sc, &plans[i])
                })
            };
            let o = src.octets();
            let found = (1..=254u8)
                .map(|h| std::net::Ipv4Addr::new(o[0], o[1], o[2], h))
                .find(|c| !used.contains(c) && same_class(*c));
            let names: Vec<&str> = idx.iter().map(|&i| plans[i].spec.name.as_str()).collect();
            let Some(cand) = found else {
                anyhow::bail!(
                    "flows {} share source {src} with other flows but not their extra_delay; the lab keys a path's delay by source address and finds no free address in {src}/24 that the policy classifies the same: give them their own `src`",
                    list(&names)
                );
            };
            notes.push(format!(
                "flows {} send from {cand} instead of {src}: their extra_delay ({:.1} ms) differs from the other flows of {src}, and the router keys path delays by source address (the policy classifies {cand} the same)",
                list(&names),
                d.as_secs_f64() * 1e3
            ));
            used.push(cand);
            for i in idx {
                plans[i].src = cand;
            }
        }
    }
    Ok(notes)
}

/// `init_cwnd` and `min_rto` of the TCP flows as route metrics in the sender namespace, one
/// route per destination: (destination, initcwnd, rto_min in ms). Flows to one destination that
/// disagree get the first flow's values, said in a note.
fn tcp_routes(plans: &[Plan]) -> (Vec<(std::net::Ipv4Addr, u32, u64)>, Vec<String>) {
    let mut routes: Vec<(std::net::Ipv4Addr, u32, u64, &str)> = Vec::new();
    let mut notes = Vec::new();
    for p in plans {
        let FlowKind::Tcp(t) = &p.spec.kind else {
            continue;
        };
        let ms = t.min_rto.0.div_ceil(1_000_000).max(1);
        match routes.iter().find(|r| r.0 == p.dst) {
            Some(r) if (r.1, r.2) != (t.init_cwnd, ms) => notes.push(format!(
                "flow `{}` runs with init_cwnd {} and min_rto {} ms (those of `{}`, the first TCP flow to {}): the lab sets them per destination route",
                p.spec.name, r.1, r.2, r.3, p.dst
            )),
            Some(_) => {}
            None => routes.push((p.dst, t.init_cwnd, ms, &p.spec.name)),
        }
    }
    (routes.into_iter().map(|r| (r.0, r.1, r.2)).collect(), notes)
}

/// Everything one run measured.
struct Measured {
    live: Vec<Arc<FlowLive>>,
    /// Router snapshots: index 0 at t0, then one per sample.
    snapshots: Vec<(f64, RouterStats)>,
    /// Flow delivered/sent/received at each snapshot.
    flow_marks: Vec<Vec<(u64, u64, u64)>>,
    /// Flow sent/received after the drain time that follows each flow's stop.
    drained: Vec<(u64, u64)>,
    elapsed: f64,
    interrupted: bool,
    router: &'static str,
}

fn measure(
    sc: &Scenario,
    plans: &[Plan],
    routes: &[(std::net::Ipv4Addr, u32, u64)],
    policy_text: &str,
    router: Box<dyn testbed::Router>,
) -> anyhow::Result<Measured> {
    let mut bed = Testbed::new()?;
    let srcs: Vec<_> = unique(plans.iter().map(|p| p.src));
    let dsts: Vec<_> = unique(plans.iter().map(|p| p.dst));
    if let Some(both) = srcs.iter().find(|a| dsts.contains(a)) {
        anyhow::bail!(
            "{}: address {both} is both a source and a destination; the lab puts sources on the sender and destinations on the sink",
            sc.origin
        );
    }
    bed.add_flow_addresses(&srcs, &dsts)?;
    bed.set_tcp_routes(routes)?;
    let policy = bed.write_file("policy.toml", policy_text)?;
    let name = router.name();
    bed.start_router(router, &policy)?;
    bed.wait_reachable()?;

    let live: Vec<Arc<FlowLive>> = plans.iter().map(|_| Arc::default()).collect();
    let (mut traffic, t0) = Traffic::start(plans, &live, &bed.ns_a, &bed.ns_c)?;
    let duration = sc.duration.as_secs_f64();
    let sample = sc.sample.as_secs_f64();
    let mut snapshots = Vec::new();
    let mut flow_marks = Vec::new();
    let marks = |live: &[Arc<FlowLive>]| -> Vec<(u64, u64, u64)> {
        live.iter()
            .map(|l| {
                (
                    l.delivered.load(Ordering::Relaxed),
                    l.packets_sent.load(Ordering::Relaxed),
                    l.packets_received.load(Ordering::Relaxed),
                )
            })
            .collect()
    };
    let mut interrupted = false;
    let mut k = 0u64;
    loop {
        let due = (k as f64 * sample).min(duration);
        // Sleep until `due`, waking to notice a signal.
        loop {
            if testbed::interrupted() {
                interrupted = true;
                break;
            }
            let now = Instant::now().saturating_duration_since(t0).as_secs_f64();
            if now >= due && Instant::now() >= t0 {
                break;
            }
            std::thread::sleep(Duration::from_secs_f64((due - now).clamp(0.0005, 0.05)));
        }
        if interrupted {
            break;
        }
        let router = bed.router().context("the router is gone")?;
        let st = router.stats()?;
        snapshots.push((due, st));
        flow_marks.push(marks(&live));
        if due >= duration {
            break;
        }
        k += 1;
    }
    let elapsed = Instant::now()
        .saturating_duration_since(t0)
        .as_secs_f64()
        .min(duration);
    if interrupted {
        // One last snapshot so the partial report covers the time that ran.
        if let Some(r) = bed.router() {
            if let Ok(st) = r.stats() {
                snapshots.push((elapsed, st));
                flow_marks.push(marks(&live));
            }
        }
    }
    // UDP and ping receivers keep counting for max(0.5 s, 2 × base RTT) after each flow's stop,
    // so what is still in flight then is not lost.
    let drain_until = plans
        .iter()
        .filter(|p| !matches!(p.spec.kind, FlowKind::Tcp(_)))
        .map(|p| p.stop + p.drain())
        .fold(0.0f64, f64::max);
    while !interrupted && !testbed::interrupted() {
        let now = Instant::now().saturating_duration_since(t0).as_secs_f64();
        if now >= drain_until {
            break;
        }
        std::thread::sleep(Duration::from_secs_f64(
            (drain_until - now).clamp(0.001, 0.05),
        ));
    }
    let drained = live
        .iter()
        .map(|l| {
            (
                l.packets_sent.load(Ordering::Relaxed),
                l.packets_received.load(Ordering::Relaxed),
            )
        })
        .collect();
    traffic.finish();
    drop(bed);
    Ok(Measured {
        live,
        snapshots,
        flow_marks,
        drained,
        elapsed,
        interrupted,
        router: name,
    })
}

fn unique<T: PartialEq + Copy>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

fn class_mode(m: &str) -> &'static str {
    match m {
        "can_send" => "can_send",
        "may_borrow" => "may_borrow",
        "cant_send" => "cant_send",
        _ => "unknown",
    }
}

/// The simulator's result model from what the lab measured.
fn build_result(sc: &Scenario, plans: &[Plan], m: Measured, notes: Vec<String>) -> SimResult {
    let dur = if m.interrupted {
        m.elapsed.max(1e-3)
    } else {
        sc.duration.as_secs_f64()
    };
    let empty = RouterStats::default();
    let first = m.snapshots.first().map(|s| &s.1).unwrap_or(&empty);
    let last = m.snapshots.last().map(|s| &s.1).unwrap_or(&empty);
    let base_of = |name: &str| -> ClassCounters {
        first
            .classes
            .iter()
            .find(|c| c.name == name)
            .cloned()
            .unwrap_or_default()
    };

    // Time series.
    let mut samples = Vec::new();
    let mut class_states = Vec::new();
    for w in 1..m.snapshots.len() {
        let (t_prev, prev) = (&m.snapshots[w - 1].0, &m.snapshots[w - 1].1);
        let (t, cur) = (m.snapshots[w].0, &m.snapshots[w].1);
        let span = (t - t_prev).max(1e-9);
        for c in &cur.classes {
            let p = prev
                .classes
                .iter()
                .find(|x| x.name == c.name)
                .cloned()
                .unwrap_or_default();
            let bytes = c.sent_bytes.saturating_sub(p.sent_bytes);
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Class,
                name: c.name.clone(),
                bytes,
                rate_bps: bytes as f64 * 8.0 / span,
                backlog_bytes: c.backlog_bytes,
                drops: c.drops.saturating_sub(p.drops),
                rtt_ms: None,
            });
            class_states.push(ClassState {
                time_s: t,
                class: c.name.clone(),
                mode: class_mode(&c.mode),
                tokens_bytes: Some(c.tokens),
                ctokens_bytes: Some(c.ctokens),
                avgidle_us: None,
            });
        }
        for (i, p) in plans.iter().enumerate() {
            let (d1, s1, r1) = m.flow_marks[w][i];
            let (d0, s0, r0) = m.flow_marks[w - 1][i];
            let bytes = d1.saturating_sub(d0);
            let rtts: Vec<f64> = m.live[i]
                .rtt
                .lock()
                .map(|v| {
                    v.iter()
                        .filter(|(at, _)| *at > *t_prev && *at <= t)
                        .map(|x| x.1)
                        .collect()
                })
                .unwrap_or_default();
            let udp = matches!(p.spec.kind, FlowKind::Udp(_));
            samples.push(Sample {
                time_s: t,
                kind: SeriesKind::Flow,
                name: p.spec.name.clone(),
                bytes,
                rate_bps: bytes as f64 * 8.0 / span,
                backlog_bytes: 0,
                drops: if udp {
                    s1.saturating_sub(s0).saturating_sub(r1.saturating_sub(r0))
                } else {
                    0
                },
                rtt_ms: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
            });
        }
    }

    // Classes.
    let mut classes = BTreeMap::new();
    let mut link_bytes = 0u64;
    for c in &last.classes {
        let b = base_of(&c.name);
        let bytes = c.sent_bytes.saturating_sub(b.sent_bytes);
        if c.parent.is_none() {
            link_bytes += bytes;
        }
        classes.insert(
            c.name.clone(),
            ClassSummary {
                bytes,
                packets: c.sent_packets.saturating_sub(b.sent_packets),
                drops: c.drops.saturating_sub(b.drops),
                rate_bps: bytes as f64 * 8.0 / dur,
                parent: c.parent.clone(),
                assigned_rate_bps: c.rate_bps,
                ceil_bps: c.ceil_bps,
                overlimits: c.overlimits.saturating_sub(b.overlimits),
                lends: c.lends.saturating_sub(b.lends),
                borrows: c.borrows.saturating_sub(b.borrows),
            },
        );
    }
    if last.classes.is_empty() {
        let bytes = last.dequeued_bytes.saturating_sub(first.dequeued_bytes);
        link_bytes = bytes;
        classes.insert(
            last.kind.clone(),
            ClassSummary {
                bytes,
                packets: last.dequeued_packets.saturating_sub(first.dequeued_packets),
                rate_bps: bytes as f64 * 8.0 / dur,
                assigned_rate_bps: sc.link.rate.0 as f64,
                ceil_bps: sc.link.rate.0 as f64,
                overlimits: last.overlimits,
                ..ClassSummary::default()
            },
        );
    }

    // Flows.
    let mss = sc.link.mtu.saturating_sub(40).max(1) as u64;
    let mut flows = BTreeMap::new();
    let mut rtt_points = Vec::new();
    let mut per_class: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, p) in plans.iter().enumerate() {
        let l = &m.live[i];
        // Bytes delivered by the end of the run (what the simulator counts); packets sent and
        // received after the drain time.
        let delivered = m
            .flow_marks
            .last()
            .and_then(|f| f.get(i))
            .map_or(0, |x| x.0);
        let (sent, received) = m.drained.get(i).copied().unwrap_or_default();
        let retransmits = l.retransmits.load(Ordering::Relaxed);
        let active = (p.stop.min(dur) - p.start).max(0.0);
        let goodput = if active > 0.0 {
            delivered as f64 * 8.0 / active
        } else {
            0.0
        };
        let class = class_of(sc, p);
        let mut rtt = Hist::default();
        if let Ok(v) = l.rtt.lock() {
            for (at, ms) in v.iter() {
                rtt.record((ms * 1e6) as u64);
                rtt_points.push((*at, p.spec.name.clone(), *ms));
            }
        }
        let owd = l.owd.lock().map(|h| h.clone()).unwrap_or_default();
        let (kind, packets_sent, lost, rtt_ms, owd_ms) = match &p.spec.kind {
            FlowKind::Tcp(_) => (
                "tcp",
                delivered.div_ceil(mss),
                retransmits,
                (rtt.n > 0).then(|| rtt.to_stats_ms()),
                None,
            ),
            FlowKind::Udp(_) => (
                "udp",
                sent,
                sent.saturating_sub(received),
                None,
                (owd.n > 0).then(|| owd.to_stats_ms()),
            ),
            FlowKind::Ping(_) => (
                "ping",
                sent,
                sent.saturating_sub(received),
                (rtt.n > 0).then(|| rtt.to_stats_ms()),
                None,
            ),
        };
        if kind != "ping" {
            per_class.entry(class.clone()).or_default().push(goodput);
        }
        flows.insert(
            p.spec.name.clone(),
            FlowSummary {
                kind: kind.to_string(),
                class,
                bytes_delivered: delivered,
                goodput_bps: goodput,
                packets_sent,
                packets_lost: lost,
                retransmits: if kind == "tcp" { retransmits } else { 0 },
                rtt_ms,
                owd_ms,
                timeouts: 0,
                cwnd_reductions: 0,
            },
        );
    }
    let fairness = per_class
        .into_iter()
        .filter(|(c, _)| !c.is_empty())
        .map(|(c, xs)| (c, jain(&xs)))
        .collect();

    let summary = Summary {
        scenario: sc.name.clone(),
        duration_s: dur,
        seed: sc.seed,
        link: LinkSummary {
            rate_bps: sc.link.rate.0 as f64,
            utilisation: link_bytes as f64 * 8.0 / (sc.link.rate.0 as f64 * dur),
            delay_ms: sc.link.delay.0 as f64 / 1e6,
            mtu: sc.link.mtu,
            device_buffer_bytes: sc.link.device_buffer,
            timer_hz: 0,
            clock_hz: 0,
        },
        classes,
        flows,
        fairness,
        qdisc: QdiscSummary {
            kind: last.kind.clone(),
            enqueued_packets: last.enqueued_packets.saturating_sub(first.enqueued_packets),
            dequeued_packets: last.dequeued_packets.saturating_sub(first.dequeued_packets),
            drops: last.drops.clone(),
            marked: last.marked,
            overlimits: last.overlimits.saturating_sub(first.overlimits),
            extra: last.extra.clone(),
        },
        lab: Some(LabInfo {
            router: m.router.to_string(),
            wall_clock_s: m.elapsed,
            interrupted: m.interrupted,
            notes,
        }),
        events: 0,
    };
    SimResult {
        summary,
        samples,
        class_states,
        rtt_points,
    }
}

/// The class the policy's classifier puts the flow in (what the simulator reports).
fn class_of(sc: &Scenario, p: &Plan) -> String {
    let Some(policy) = &sc.policy else {
        return "link".to_string();
    };
    let proto = match p.spec.kind {
        FlowKind::Tcp(_) => 6,
        FlowKind::Udp(_) => 17,
        FlowKind::Ping(_) => 1,
    };
    let mut meta = linkshare_core::PacketMeta {
        tos: p.spec.tos,
        proto,
        src: p.spec.src,
        dst: p.spec.dst,
        src_port: if proto == 1 { 0 } else { p.spec.sport },
        dst_port: if proto == 1 { 0 } else { p.spec.dport },
        ..linkshare_core::PacketMeta::default()
    };
    meta.flow_hash = linkshare_core::wire::flow_hash(&meta, 0);
    policy.class_of(&meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses_and_has_three_classes() {
        let sc = Scenario::parse_with(
            DEFAULT_SCENARIO,
            DEFAULT_ORIGIN,
            Path::new("scenarios"),
            "lab-default",
        )
        .unwrap();
        let (text, notes) = policy_text(&sc, DEFAULT_SCENARIO, Path::new("scenarios")).unwrap();
        assert!(notes.is_empty());
        let p = linkshare_config::Policy::parse(&text, "inline").unwrap();
        let leaves = p.classes().iter().filter(|c| c.parent.is_some()).count();
        assert_eq!(leaves, 3, "{text}");
        assert!(sc.duration.as_secs_f64() <= 20.0);
    }

    #[test]
    fn no_policy_becomes_one_class_at_link_rate() {
        let text =
            "[link]\nrate = \"2mbit\"\n[[flow]]\nname = \"u\"\nkind = \"udp\"\nrate = \"1mbit\"\n";
        let sc = Scenario::parse(text, "t.toml").unwrap();
        let (p, notes) = policy_text(&sc, text, Path::new("")).unwrap();
        assert_eq!(notes.len(), 1);
        let pol = linkshare_config::Policy::parse(&p, "gen").unwrap();
        assert_eq!(pol.classes().len(), 1);
        assert_eq!(
            class_of(&sc, &Plan::new(&sc.flows[0], 10.0, 1, 0.0).unwrap()),
            "link"
        );
    }

    #[test]
    fn link_delay_and_buffer_become_run_options() {
        let text = "[link]\nrate = \"2mbit\"\ndelay = \"20ms\"\ndevice_buffer = 3000\n";
        let sc = Scenario::parse(text, "t.toml").unwrap();
        assert_eq!(
            router_args(&sc, &[]),
            [
                "--emulate",
                "delay=20000000ns,reverse_delay=20000000ns",
                "--device-buffer",
                "3000"
            ]
        );
    }

    fn plans(sc: &Scenario) -> Vec<Plan> {
        let d = sc.link.delay.as_secs_f64();
        sc.flows
            .iter()
            .map(|f| Plan::new(f, 10.0, 1, d).unwrap())
            .collect()
    }

    /// A 10 Mbit/s link (with `delay`) whose HTB sends `filter_src` to class `low`, the rest to
    /// `other`, followed by `flows`.
    fn two_class_scenario(delay: &str, filter_src: &str, flows: &str) -> Scenario {
        let text = format!(
            r#"
[link]
rate = "10mbit"
delay = "{delay}"
[policy]
qdisc = "htb"
default = "other"
[[policy.class]]
name = "root"
rate = "10mbit"
[[policy.class]]
name = "low"
parent = "root"
rate = "5mbit"
[[policy.class]]
name = "other"
parent = "root"
rate = "5mbit"
[[policy.filter]]
class = "low"
src = "{filter_src}"
{flows}"#
        );
        match Scenario::parse(&text, "t.toml") {
            Ok(sc) => sc,
            Err(e) => panic!("{e}\n{text}"),
        }
    }

    /// Flows that share a source but not an extra delay get their own source address, chosen so
    /// that the policy's address filter still classifies them the same; each source's extra
    /// delay becomes one `--path-delay`.
    #[test]
    fn extra_delays_become_path_delays_on_separate_sources() {
        let sc = two_class_scenario(
            "10ms",
            "10.5.0.0/30",
            r#"
[[flow]]
name = "near"
kind = "udp"
rate = "1mbit"
src = "10.5.0.1"
[[flow]]
name = "far"
kind = "udp"
rate = "1mbit"
src = "10.5.0.1"
extra_delay = "5ms"
[[flow]]
name = "ping"
kind = "ping"
src = "10.5.0.1"
extra_delay = "5ms"
"#,
        );
        let mut ps = plans(&sc);
        let notes = separate_sources(&sc, &mut ps).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        // 10.5.0.2 is the first free address in the filter's /30.
        let moved = std::net::Ipv4Addr::new(10, 5, 0, 2);
        assert_eq!(ps[0].src, std::net::Ipv4Addr::new(10, 5, 0, 1));
        assert_eq!((ps[1].src, ps[2].src), (moved, moved));
        for p in &ps {
            assert_eq!(class_of(&sc, p), "low", "{}", p.spec.name);
        }
        assert_eq!(
            router_args(&sc, &ps),
            [
                "--emulate",
                "delay=10000000ns,reverse_delay=10000000ns",
                "--path-delay",
                "10.5.0.2=5000000ns"
            ]
        );
        // Base RTT 2·(10 + 5) ms; receivers drain for twice that, at least 0.5 s.
        assert!((ps[1].base_rtt - 0.030).abs() < 1e-12);
        assert_eq!(ps[1].drain(), 0.5);
    }

    /// No free address classifies the same: a clear error instead of a silent change of class.
    #[test]
    fn separate_sources_refuses_to_change_a_class() {
        let sc = two_class_scenario(
            "0ms",
            "10.5.0.1/32",
            r#"
[[flow]]
name = "a"
kind = "udp"
rate = "1mbit"
src = "10.5.0.1"
[[flow]]
name = "b"
kind = "udp"
rate = "1mbit"
src = "10.5.0.1"
extra_delay = "5ms"
"#,
        );
        let mut ps = plans(&sc);
        let e = separate_sources(&sc, &mut ps).unwrap_err().to_string();
        assert!(e.contains("flows b") && e.contains("own `src`"), "{e}");
    }

    #[test]
    fn tcp_knobs_become_one_route_per_destination() {
        let text = r#"
[link]
rate = "10mbit"
[[flow]]
name = "a"
kind = "tcp"
dst = "10.9.0.1"
init_cwnd = 4
min_rto = "50ms"
[[flow]]
name = "b"
kind = "tcp"
dst = "10.9.0.1"
[[flow]]
name = "c"
kind = "tcp"
dst = "10.9.0.2"
"#;
        let sc = Scenario::parse(text, "t.toml").unwrap();
        let (routes, notes) = tcp_routes(&plans(&sc));
        let d1 = std::net::Ipv4Addr::new(10, 9, 0, 1);
        let d2 = std::net::Ipv4Addr::new(10, 9, 0, 2);
        assert_eq!(routes, [(d1, 4, 50), (d2, 10, 200)]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("`b`") && notes[0].contains("`a`"),
            "{notes:?}"
        );
    }
}
