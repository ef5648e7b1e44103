//! A scenario turned into what the lab runs: its policy file, the router's options, the flows'
//! addresses and route metrics, and notes for what the lab does not reproduce.
//!
//! The scenario is the simulator's (`linkshare-sim`), so each of its knobs either maps to a real
//! one (link delay, `[path]` impairments and device buffer as `linkshare run` options, a flow's `extra_delay` as a
//! path delay keyed by source address, `init_cwnd`/`min_rto`/`ecn` as route metrics: ip-route(8)) or
//! is said in a note, never silently dropped. A change the lab must make (a flow moved to
//! another source address) keeps the class the policy gives the flow.

use std::path::{Path, PathBuf};

use anyhow::Context;
use linkshare_sim::scenario::FlowKind;
use linkshare_sim::Scenario;

use crate::testbed;
use crate::traffic::Plan;

use super::result::class_of;
use super::{unique, DEFAULT_ORIGIN, DEFAULT_SCENARIO};

/// The scenario and its text; on failure the diagnostics are printed and the exit code returned.
pub(super) fn load(path: Option<&Path>) -> Result<(Scenario, String), i32> {
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
/// `[policy]` table written out, or (no policy) one HTB class at the link rate whose leaf is a
/// pfifo of `[link] queue` packets, the simulator's queue.
pub(super) fn policy_text(
    sc: &Scenario,
    text: &str,
    base: &Path,
) -> anyhow::Result<(String, Vec<String>)> {
    let doc: toml::Table = toml::from_str(text).context("scenario is not TOML")?;
    let line = Line {
        what: "link",
        rate: sc.link.rate.0,
        mtu: sc.link.mtu,
        queue: sc.link.queue,
        leaf: sc.policy.as_ref().and_then(|p| p.policy().root_leaf()),
    };
    line_policy(&line, doc.get("policy"), base)
}

/// The `--reverse-policy` file for `[uplink]`, as [`policy_text`] builds the link's: the
/// uplink's policy paced at the uplink's rate (or, without one, a pfifo of `[uplink] queue`
/// packets under one HTB class at that rate), so ACKs and echo replies queue in it as they do
/// on the simulator's uplink. `None` without `[uplink]`.
pub(super) fn uplink_policy_text(
    sc: &Scenario,
    text: &str,
    base: &Path,
) -> anyhow::Result<Option<(String, Vec<String>)>> {
    let Some(u) = &sc.uplink else {
        return Ok(None);
    };
    let doc: toml::Table = toml::from_str(text).context("scenario is not TOML")?;
    let line = Line {
        what: "uplink",
        rate: u.rate.0,
        mtu: sc.link.mtu,
        queue: u.queue,
        leaf: u.policy.as_ref().and_then(|p| p.policy().root_leaf()),
    };
    let value = doc
        .get("uplink")
        .and_then(|t| t.as_table())
        .and_then(|t| t.get("policy"));
    line_policy(&line, value, base).map(Some)
}

/// One direction's line as the simulator has it: the rate that pulls its scheduler, its MTU,
/// the pfifo limit without a policy and the policy's root leaf (a classless root), if any.
struct Line<'a> {
    /// `link` or `uplink`, for the notes.
    what: &'static str,
    rate: u64,
    mtu: u32,
    queue: u32,
    leaf: Option<&'a linkshare_config::LeafKind>,
}

/// The policy `value` (a path relative to `base`, an inline table, or none) as `linkshare run`
/// runs it on `line`.
fn line_policy(
    line: &Line,
    value: Option<&toml::Value>,
    base: &Path,
) -> anyhow::Result<(String, Vec<String>)> {
    match value {
        Some(toml::Value::String(p)) => {
            let path = base.join(p);
            let t = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read the policy {}", path.display()))?;
            paced_root(line, t)
        }
        Some(toml::Value::Table(t)) => paced_root(
            line,
            toml::to_string(t).context("cannot write the inline policy")?,
        ),
        _ => Ok((
            format!(
                "qdisc = \"htb\"\ndefault = \"{w}\"\n[[class]]\nname = \"{w}\"\nrate = \"{}bit\"\nleaf = {{ type = \"pfifo\", limit = {} }}\n",
                line.rate,
                line.queue,
                w = line.what
            ),
            vec![format!(
                "the scenario has no {w} policy: the lab shapes the {w} rate with one HTB class `{w}` whose leaf is a pfifo of {} packets (`[{w}] queue`, the simulator's pfifo)",
                line.queue,
                w = line.what
            )],
        )),
    }
}

/// A policy whose root is one discipline without a rate of its own (`qdisc = "fq_codel"`,
/// `pfifo`, `sfq`, …) runs in the simulator at the line's rate, the line's serialisation pulling
/// it as a NIC pulls its root qdisc. The lab's links are veth pairs, faster than any scenario:
/// run as written, the discipline would forward at whatever the machine manages (above
/// 1 Gbit/s) and never hold a queue. So the lab runs it as the leaf of one HTB class at the
/// line rate (burst and cburst one MTU), named as the simulator names its one class (the
/// discipline's name); the root's other keys (`overhead`, `linklayer`, `mtu`, …) stay at the
/// root. TBF (its own `rate`) and CAKE with a `bandwidth` shape by themselves and run as
/// written. A CAKE root without `bandwidth` is paced by the HTB class too, not given the line's
/// rate as its `bandwidth`: CAKE derives COBALT's target from its `bandwidth` (at least 1.5 MTU
/// times: 182 ms at 100 kbit/s, where the simulator's CAKE pulled by its line keeps 5 ms), so
/// that would run another AQM than the file's.
fn paced_root(line: &Line, text: String) -> anyhow::Result<(String, Vec<String>)> {
    let Some(leaf) = line.leaf else {
        return Ok((text, Vec::new()));
    };
    match leaf {
        linkshare_config::LeafKind::Tbf(_) => return Ok((text, Vec::new())),
        linkshare_config::LeafKind::Cake(c) if c.bandwidth.is_some() => {
            return Ok((text, Vec::new()))
        }
        _ => {}
    }
    let mut t: toml::Table = toml::from_str(&text).context("the policy is not TOML")?;
    let Some(q) = t.remove("qdisc") else {
        return Ok((text, Vec::new()));
    };
    let name = leaf.name();
    let mut class = toml::Table::new();
    class.insert("name".into(), name.into());
    class.insert("rate".into(), format!("{}bit", line.rate).into());
    // The smallest burst (one packet): the line serialises, it does not let a burst through
    // at the veth's speed after an idle spell.
    let mtu = i64::from(line.mtu);
    class.insert("burst".into(), mtu.into());
    class.insert("cburst".into(), mtu.into());
    class.insert("leaf".into(), q);
    t.insert("qdisc".into(), "htb".into());
    t.insert("default".into(), name.into());
    t.insert("class".into(), toml::Value::Array(vec![class.into()]));
    let note = format!(
        "the {w} policy's root `{name}` has no rate of its own: the lab runs it as the leaf of one HTB class at the {w} rate ({} bit/s), as the {w} paces it in the simulator",
        line.rate,
        w = line.what
    );
    Ok((
        toml::to_string(&t).context("cannot write the paced policy")?,
        vec![note],
    ))
}

/// What the lab does not reproduce, said in the summary.
pub(super) fn unsupported(sc: &Scenario) -> Vec<String> {
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

/// The uplink's policy file ([`uplink_policy_text`]) in the testbed's scratch directory, which
/// is the router's working directory.
pub(super) const UPLINK_FILE: &str = "uplink.toml";

/// `run` options from the scenario: the link's wire (serialisation at its rate after the
/// scheduler, then its delay; the delay again on the way back), each flow's `extra_delay` as a
/// path delay on its source address (both directions), `[link] device_buffer` (always), and
/// with `[uplink]` its policy ([`UPLINK_FILE`]) as `--reverse-policy`, so ACKs and echo replies
/// queue in it before the return path's delay line. Base RTT of a flow = 2 × (delay +
/// extra_delay), as in the simulator.
///
/// The wire is the router's device model, drained at the link's rate behind `device_buffer`
/// bytes, as the simulator's link: each frame goes onto the emulated line at its departure
/// from the model, which then adds only the delay and the `[path]` (one serialiser, not two).
/// It serialises as the simulator's does (store and forward): the lab's interfaces are
/// veths at ~10 Gbit/s, so without it a packet would cross a `[link]` of 10 Mbit/s in no time
/// and a class's burst after an idle spell (HTB's `burst`) would reach the receiver at veth
/// speed, every packet arriving its serialisation time (1.2 ms for 1514 bytes at 10 Mbit/s)
/// ahead of a real link's — the flow completion times' offset of docs/fidelity.md.
pub(super) fn router_args(sc: &Scenario, plans: &[Plan]) -> Vec<String> {
    let mut a = Vec::new();
    if sc.uplink.is_some() {
        a.push("--reverse-policy".to_string());
        a.push(UPLINK_FILE.to_string());
    }
    let mut emu = Vec::new();
    if sc.link.rate.0 > 0 {
        emu.push(format!("rate={}bit", sc.link.rate.0));
    }
    if sc.link.delay.0 > 0 {
        emu.push(format!(
            "delay={d}ns,reverse_delay={d}ns",
            d = sc.link.delay.0
        ));
    }
    if let Some(p) = &sc.path {
        emu.push(emulate_keys(p, sc.seed));
    }
    if !emu.is_empty() {
        a.push("--emulate".to_string());
        a.push(emu.join(","));
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
    // Always said, `0` included: the router's own default (1 ms of its rate and a frame, at
    // least 3 frames) would be a buffer the simulator does not have.
    a.push("--device-buffer".to_string());
    a.push(sc.link.device_buffer.to_string());
    a
}

/// `[path]` as `linkshare run --emulate` keys (the same [`linkshare_core::impair`] model runs
/// there, on OUT after the scheduler), seeded by the scenario's seed.
pub(super) fn emulate_keys(p: &linkshare_core::impair::ImpairSpec, seed: u64) -> String {
    use linkshare_core::impair::LossModel;
    let mut k = vec![
        format!("jitter={}ns", p.jitter_ns),
        format!("jitter_reorder={}", u8::from(p.jitter_reorder)),
        format!("reorder={}", p.reorder),
        format!("duplicate={}", p.duplicate),
        format!("seed={seed}"),
    ];
    k.push(match p.loss {
        LossModel::Bernoulli(x) => format!("loss={x}"),
        LossModel::GilbertElliott {
            p,
            r,
            bad_loss,
            good_loss,
        } => format!("ge={p}:{r}:{bad_loss}:{good_loss}"),
    });
    k.join(",")
}

/// The router keys a flow's `extra_delay` by its source address, so flows that share a source
/// but not an extra delay get their own: the first extra delay of a source keeps the address,
/// each other one moves to a free address of the same /24 that the policy classifies exactly as
/// the original (the simulator's class is the one reported). Returns the notes to print.
pub(super) fn separate_sources(sc: &Scenario, plans: &mut [Plan]) -> anyhow::Result<Vec<String>> {
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

/// `init_cwnd`, `min_rto` and `ecn` of the TCP flows as route metrics in the sender namespace,
/// one route per destination. Flows to one destination that disagree get the first flow's
/// values, said in a note.
pub(super) fn tcp_routes(plans: &[Plan]) -> (Vec<testbed::TcpRoute>, Vec<String>) {
    let mut routes: Vec<(testbed::TcpRoute, &str)> = Vec::new();
    let mut notes = Vec::new();
    for p in plans {
        let FlowKind::Tcp(t) = &p.spec.kind else {
            continue;
        };
        let want = testbed::TcpRoute {
            dst: p.dst,
            init_cwnd: t.init_cwnd,
            rto_min_ms: t.min_rto.0.div_ceil(1_000_000).max(1),
            ecn: t.ecn,
        };
        match routes.iter().find(|r| r.0.dst == p.dst) {
            Some((r, first)) if *r != want => notes.push(format!(
                "flow `{}` runs with init_cwnd {}, min_rto {} ms and ecn {} (those of `{first}`, the first TCP flow to {}): the lab sets them per destination route",
                p.spec.name, r.init_cwnd, r.rto_min_ms, r.ecn, p.dst
            )),
            Some(_) => {}
            None => routes.push((want, &p.spec.name)),
        }
    }
    (routes.into_iter().map(|r| r.0).collect(), notes)
}
