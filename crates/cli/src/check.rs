//! `linkshare check POLICY`: validate a policy file and show the class tree it describes.
//!
//! Diagnostics (errors and warnings) go to stderr with the offending source line (at most 20 of
//! each severity, the rest counted; long lines echoed as a window around the column, see
//! `linkshare_config::render_report`); on success the
//! tree goes to stdout. With `--json`, one JSON object goes to stdout instead (classes, filters,
//! warnings, errors) and nothing is printed on stderr.
//!
//! Exit codes: 0 valid (warnings allowed), 1 invalid policy, 2 the file cannot be read.

use std::path::PathBuf;

use clap::Args;
use linkshare_config::{render_report_for, ClassInfo, ConfigError, Diagnostic, Driver, Policy};
use serde_json::{json, Value};

/// Exit code: the policy is valid (possibly with warnings).
pub const EXIT_OK: i32 = 0;
/// Exit code: the policy has errors.
pub const EXIT_INVALID: i32 = 1;
/// Exit code: the file cannot be read (a runtime error; bad usage is 1, see `exit`).
pub const EXIT_USAGE: i32 = 2;

/// Validate a policy file and print its class tree, rates and warnings.
#[derive(Args, Debug, Clone)]
#[command(
    long_about = "Validate a policy file and print its class tree, rates and warnings.\n\n\
Every problem is reported as FILE:LINE:COL with what is wrong and a `help:` line with the fix; \
all problems are reported, not just the first.\n\n\
Exit status: 0 valid (warnings allowed), 1 invalid policy or bad usage, 2 unreadable file."
)]
pub struct CheckArgs {
    /// The policy file (TOML; see docs/policy-format.md)
    pub policy: PathBuf,
    /// Print one machine-readable JSON object (classes, filters, warnings, errors) on stdout
    #[arg(long)]
    pub json: bool,
}

/// Run `check`; returns the process exit code.
pub fn run(args: &CheckArgs) -> i32 {
    let origin = args.policy.display().to_string();
    let text = match std::fs::read_to_string(&args.policy) {
        Ok(t) => t,
        Err(e) => {
            let msg = format!("cannot read `{origin}`: {e}");
            if args.json {
                println!(
                    "{}",
                    json!({ "ok": false, "file": origin, "io_error": msg })
                );
            } else {
                eprintln!("error: {msg}");
            }
            return EXIT_USAGE;
        }
    };
    let result = Policy::parse(&text, &origin);
    if args.json {
        println!("{}", to_json(&origin, &result));
    } else {
        print_human(&origin, &text, &result);
    }
    match result {
        Ok(_) => EXIT_OK,
        Err(_) => EXIT_INVALID,
    }
}

fn print_human(origin: &str, text: &str, result: &Result<Policy, ConfigError>) {
    if let Ok(p) = result {
        print!("{}", p.render_tree());
        println!("{}", worst_case_memory(p));
    }
    print_diagnostics(origin, text, result);
}

/// The memory the policy's queues hold with every leaf full, as the shaper counts it (a whole
/// receive buffer per frame, `linkshare_router::membound`), to set `run --queue-memory` by.
fn worst_case_memory(p: &Policy) -> String {
    use linkshare_router::membound::{per_frame, FRAME_BUFFER};
    let frames = p.worst_case_frames();
    let bytes = frames.saturating_mul(per_frame(FRAME_BUFFER));
    format!(
        "worst-case queue memory: {} ({frames} frames of {} bytes with every leaf full; \
         `run --queue-memory` bounds it, default a quarter of RAM up to 1g)",
        linkshare_core::units::Size(bytes),
        per_frame(FRAME_BUFFER)
    )
}

/// `check`'s diagnostics on stderr: every warning or error with its source line, then the
/// summary (`policy is valid, with N warnings` / `policy is invalid: …`). Also used by
/// `linkshare import` on the policy it wrote. `text` is the policy file `origin`; diagnostics
/// in its subscriber table are shown without a source line (they name the row).
pub fn print_diagnostics(origin: &str, text: &str, result: &Result<Policy, ConfigError>) {
    let render_report = |text: &str, d: &[Diagnostic]| render_report_for(Some(origin), text, d);
    match result {
        Ok(p) => {
            eprint!("{}", render_report(text, p.warnings()));
            let n = p.warnings().len();
            if n > 0 {
                eprintln!(
                    "policy is valid, with {n} warning{}",
                    if n == 1 { "" } else { "s" }
                );
            }
        }
        Err(e) => {
            eprint!("{}", render_report(text, &e.diagnostics));
            let errors = e.errors().count();
            let warnings = e.warnings().count();
            eprintln!(
                "policy is invalid: {errors} error{}{}",
                if errors == 1 { "" } else { "s" },
                match warnings {
                    0 => String::new(),
                    1 => ", 1 warning".to_string(),
                    w => format!(", {w} warnings"),
                }
            );
        }
    }
}

fn diag_json(d: &Diagnostic) -> Value {
    json!({
        "severity": d.severity.name(),
        "file": d.file,
        "line": d.line,
        "col": d.col,
        "message": d.message,
        "help": d.help,
    })
}

/// CBQ's root options, as `check --json` shows them (null for other qdiscs).
fn cbq_options_json(p: &Policy) -> Value {
    match p.cbq_options() {
        Some(o) => json!({
            "scheduler": o.scheduler.name(),
            "guideline": o.guideline.name(),
            "efficient": o.efficient,
            "undertime_clock": o.undertime_clock.name(),
            "offtime_unit": o.offtime_unit.name(),
            "altq_compat": o.altq_compat,
        }),
        None => Value::Null,
    }
}

/// A CBQ class's keys with the derived `maxidle`/`minidle`/`offtime` filled in (null for other
/// qdiscs): what the scheduler will run with.
fn cbq_class_json(p: &Policy, c: &ClassInfo) -> Value {
    let (Some(k), Some(params)) = (c.cbq.as_ref(), p.cbq_params(&Driver::default())) else {
        return Value::Null;
    };
    let d = linkshare_core::cbq::derive(
        params.link.bits_per_sec(),
        c.rate.bits_per_sec(),
        k.avgpkt,
        params.mtu,
        k.maxburst,
        k.minburst,
    );
    json!({
        "borrow": k.borrow,
        "maxburst": d.maxburst,
        "minburst": d.minburst,
        "avgpkt_bytes": k.avgpkt,
        "maxidle_ns": k.maxidle.map_or(d.maxidle_ns, |t| t.as_nanos()),
        "minidle_ns": k.minidle.map_or(d.minidle_ns, |t| t.as_nanos()),
        "offtime_ns": k.offtime.map_or(d.offtime(params.bound_offtime), |t| t.as_nanos()),
        "extradelay_ns": k.extradelay.as_nanos(),
    })
}

fn to_json(origin: &str, result: &Result<Policy, ConfigError>) -> Value {
    match result {
        Ok(p) => {
            let classes: Vec<Value> = p
                .classes()
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "name": c.name,
                        "parent": c.parent,
                        "rate_bps": c.rate.bits_per_sec(),
                        "rate": c.rate.to_string(),
                        "ceil_bps": c.ceil.bits_per_sec(),
                        "ceil": c.ceil.to_string(),
                        "burst_bytes": c.burst,
                        "cburst_bytes": c.cburst,
                        "prio": c.prio,
                        "quantum_bytes": c.quantum,
                        "is_leaf": c.is_leaf,
                        "leaf": if c.is_leaf { Value::String(c.leaf.to_string()) } else { Value::Null },
                        "depth": c.depth,
                        "cbq": cbq_class_json(p, c),
                        "line": c.line,
                    })
                })
                .collect();
            let filters: Vec<Value> = p
                .filters()
                .iter()
                .zip(p.filter_descriptions())
                .map(|(f, text)| json!({ "class": f.class, "match": text, "line": f.line }))
                .collect();
            json!({
                "ok": true,
                "file": origin,
                "qdisc": p.kind_name(),
                "default": p.default_class(),
                "r2q": p.htb_params().r2q,
                "mtu": p.htb_params().mtu,
                "cbq": cbq_options_json(p),
                "classes": classes,
                "filters": filters,
                "subscribers": p.subscribers().map(|t| json!({
                    "file": t.file,
                    "first_class": t.first_class,
                    "count": p.classes().len() - t.first_class as usize,
                    "plans": t.plans.iter().map(|(n, k)| json!({ "plan": n, "subscribers": k })).collect::<Vec<_>>(),
                })),
                "upload": p.upload().is_some(),
                "warnings": p.warnings().iter().map(diag_json).collect::<Vec<_>>(),
                "errors": Vec::<Value>::new(),
            })
        }
        Err(e) => json!({
            "ok": false,
            "file": origin,
            "classes": Vec::<Value>::new(),
            "filters": Vec::<Value>::new(),
            "warnings": e.warnings().map(diag_json).collect::<Vec<_>>(),
            "errors": e.errors().map(diag_json).collect::<Vec<_>>(),
        }),
    }
}
