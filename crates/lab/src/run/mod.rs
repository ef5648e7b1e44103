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
//!
//! Submodules, one concern each: `setup` the scenario turned into what the lab runs (policy
//! file, router options, addresses, route metrics, and what is not reproduced), `measure` the
//! run itself (testbed, traffic, snapshots at each sample), `result` the measurements turned
//! into the simulator's result model, `fct` the arriving flows grouped and timed as the
//! simulator does, `offered` whether the UDP sources kept to their schedules (a starved sender
//! is said in the run's notes). Nothing here prints on stdout.

mod fct;
mod measure;
mod offered;
mod result;
mod setup;
#[cfg(test)]
mod tests;

use std::path::Path;

use anyhow::Context;
use linkshare_sim::model::SimResult;
use linkshare_sim::scenario::FlowKind;

use crate::testbed::{self, LinkshareRouter};
use crate::traffic::{self, Plan};
use crate::uml;

use measure::measure;
use result::build_result;
use setup::{
    load, policy_text, router_args, separate_sources, tcp_routes, unsupported, uplink_policy_text,
};

/// The default scenario: three classes on 10 Mbit/s for 15 s, embedded so that `linkshare lab`
/// works from a clean clone.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../../scenarios/lab-default.toml");
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
    /// The scenario's `[[expect]]`, judged on this run's figures.
    pub expectations: Vec<linkshare_sim::expect::Verdict>,
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
    let uplink_text = match uplink_policy_text(&sc, &text, &base)? {
        Some((t, n)) => {
            notes.extend(n);
            Some(t)
        }
        None => None,
    };
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
    // The kernel's side: its qdiscs from `export tc`, refused before anything is built when this
    // kernel lacks one (the CLI then runs this side in a user-mode Linux guest), and the link's
    // delay on netem where the kernel has it.
    let mut kernel_router = None;
    if kernel {
        let p = linkshare_config::Policy::parse(&policy_text, &sc.origin)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let script = kernel_script(&sc.origin, &policy_text, uplink_text.as_deref())?;
        let missing = uml::missing_qdiscs(&script)?;
        if !missing.is_empty() {
            eprintln!(
                "{}: error: --kernel: this kernel has no {} (the policy needs it); linkshare lab --kernel and compare --kernel run the kernel's side in a user-mode Linux guest when `linux` is installed (apt-get install user-mode-linux kmod, or scripts/uml)",
                sc.origin,
                missing
                    .iter()
                    .map(|k| format!("sch_{k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return Ok(Err(2));
        }
        let mut r =
            testbed::KernelRouter::htb(linkshare_interop::tc::export::tc_script).named_for(&p);
        let netem = uml::missing_qdiscs("qdisc add dev x root netem\n")?.is_empty();
        if netem {
            r.return_delay_ns = 2 * sc.link.delay.0;
        }
        if uplink_text.is_some() {
            r.reverse_policy = Some(setup::UPLINK_FILE.into());
        }
        // The uplink has its own note below.
        let uplink_arg = |a: &&String| *a == "--reverse-policy" || *a == setup::UPLINK_FILE;
        let not_emulated: Vec<&String> = if netem {
            router_args
                .iter()
                .filter(|a| {
                    !a.starts_with("--emulate")
                        && !a.starts_with("delay=")
                        && !a.starts_with("rate=")
                })
                .filter(|a| !uplink_arg(a))
                .collect()
        } else {
            router_args.iter().filter(|a| !uplink_arg(a)).collect()
        };
        if netem && sc.link.delay.0 > 0 {
            notes.push(format!(
                "--kernel: the link's delay is netem's on the return path ({} ms from C to A{}), so the base RTT is 2 x delay but UDP one-way delays read the delay lower",
                2 * sc.link.delay.0 / 1_000_000,
                if sc.uplink.is_some() {
                    ", on C's port before the uplink's qdisc"
                } else {
                    ""
                }
            ));
        }
        if sc.link.rate.0 > 0 {
            notes.push(format!(
                "--kernel: the link's serialisation at {} is not emulated (the kernel's qdisc sends onto a veth), so its packets arrive one serialisation time earlier than the simulator's and linkshare's",
                sc.link.rate
            ));
        }
        if !not_emulated.is_empty() {
            notes.push(format!(
                "--kernel: {} are not emulated ({})",
                if netem {
                    "the flows' extra_delay and the device buffer"
                } else {
                    "the kernel here has no netem, so the link's delays, the flows' extra_delay and the device buffer"
                },
                not_emulated
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        if let Some(u) = &sc.uplink {
            notes.push(format!(
                "--kernel: [uplink] ({}) is the kernel's qdisc on the router's port towards A (its policy as `export tc` writes it), so ACKs and echo replies queue there",
                u.rate
            ));
        }
        kernel_router = Some(r);
    }

    testbed::install_signal_handlers()?;
    if let Some(n) = testbed::raise_priority() {
        notes.push(n);
    }
    let router: Box<dyn testbed::Router> = match kernel_router {
        Some(r) => Box::new(r),
        None => Box::new(LinkshareRouter::new(router_args)?),
    };
    eprintln!(
        "lab: {} — {} flows for {:.1} s through {} in network namespaces{}",
        sc.name,
        plans.len(),
        duration,
        router.name(),
        if uml::in_guest() {
            " (user-mode Linux guest)"
        } else {
            ""
        }
    );
    let measured = measure(
        &sc,
        &plans,
        &routes,
        &policy_text,
        uplink_text.as_deref(),
        router,
    )?;
    let interrupted = measured.interrupted;
    if !interrupted {
        let skipped: Vec<u64> = measured
            .live
            .iter()
            .map(|l| l.late_skipped_ns.load(std::sync::atomic::Ordering::Relaxed))
            .collect();
        if let Some(n) = offered::shortfall_note(&plans, &skipped) {
            eprintln!("warning: {n}");
            notes.push(n);
        }
    }
    let failures: Vec<String> = measured
        .live
        .iter()
        .filter_map(|l| l.error.lock().ok().and_then(|e| e.clone()))
        .collect();
    let result = build_result(&sc, &plans, measured, notes);
    let expectations = linkshare_sim::expect::judge_all(&sc.expects, &result.summary);
    Ok(Ok(LabRun {
        result,
        failures,
        interrupted,
        expectations,
    }))
}

/// The note a run's notes carry when its UDP sources woke late and skipped part of their
/// schedules (the machine starved them), if one does.
pub fn senders_starved(result: &SimResult) -> Option<&str> {
    result
        .summary
        .lab
        .as_ref()?
        .notes
        .iter()
        .find(|n| n.starts_with(offered::NOTE_START))
        .map(String::as_str)
}

/// The qdiscs the kernel's side of `scenario` (its policy as `export tc` writes it) needs and
/// this kernel refuses: where non-empty, `--kernel` runs in a user-mode Linux guest
/// ([`uml`]). Empty when the scenario cannot be read or exported (the run itself then says
/// why), and inside a guest.
pub fn kernel_qdiscs_missing(scenario: Option<&Path>) -> Vec<String> {
    if uml::in_guest() {
        return Vec::new();
    }
    let text = match scenario {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(_) => return Vec::new(),
        },
        None => DEFAULT_SCENARIO.to_string(),
    };
    let sc = match scenario {
        Some(p) => linkshare_sim::Scenario::load(p),
        None => linkshare_sim::Scenario::parse(&text, DEFAULT_ORIGIN),
    };
    let Ok(sc) = sc else {
        return Vec::new();
    };
    let base = scenario
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let Ok((policy, _)) = policy_text(&sc, &text, &base) else {
        return Vec::new();
    };
    let uplink = uplink_policy_text(&sc, &text, &base)
        .ok()
        .flatten()
        .map(|(t, _)| t);
    kernel_script(&sc.origin, &policy, uplink.as_deref())
        .ok()
        .and_then(|s| uml::missing_qdiscs(&s).ok())
        .unwrap_or_default()
}

/// The `tc -batch` script of the kernel's side: the policy as `export tc` writes it and, with
/// an `[uplink]`, the uplink's after it (for the qdiscs the kernel must have; the router sets
/// each up on its own port).
fn kernel_script(origin: &str, policy: &str, uplink: Option<&str>) -> anyhow::Result<String> {
    use linkshare_interop::tc::export::tc_script;
    let p = linkshare_config::Policy::parse(policy, origin).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut script =
        tc_script(&p, "probe0").context("--kernel runs the policy on the kernel's qdiscs")?;
    if let Some(u) = uplink {
        let what = format!("{origin} [uplink]");
        let p = linkshare_config::Policy::parse(u, &what).map_err(|e| anyhow::anyhow!("{e}"))?;
        script.push_str(
            &tc_script(&p, "probe1")
                .context("--kernel runs the [uplink] policy on the kernel's qdiscs")?,
        );
    }
    Ok(script)
}

/// The distinct values of `it`, in first-seen order.
pub(super) fn unique<T: PartialEq + Copy>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}
