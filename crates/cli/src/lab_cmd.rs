//! `linkshare lab [SCENARIO] [--out DIR] [--kernel]`, `linkshare lab bench` and `linkshare lab
//! soak`: the arguments and the printing; the lab itself (namespaces, traffic, measurement, the
//! soak's checks) is the `linkshare-lab` crate.
//!
//! Exit codes (crate `exit`): 0 ok, 1 invalid scenario, a flow failed or a soak check failed,
//! 2 unreadable file, no testbed (not root, no `ip`) or unwritable output, 3 an `[[expect]]` of
//! the scenario not met (the verdicts are printed after the table), 130 interrupted (the partial
//! report is still written). A busy host (compare's default thresholds) is a warning after the
//! table, not an exit code: the lab alone makes no claim about the simulator.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use linkshare_lab::bench::BenchOptions;
use linkshare_lab::{execute, EXIT_INTERRUPTED};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: Option<LabCommand>,
    /// Scenario file (the format `linkshare sim` reads); the embedded lab-default if omitted
    pub scenario: Option<PathBuf>,
    /// Output directory (default: out/<scenario name>-lab, or -lab-kernel with --kernel)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Route through the kernel's HTB instead of linkshare: a Linux bridge in the router
    /// namespace with the policy from `linkshare export tc` on its port towards the sink
    #[arg(long)]
    pub kernel: bool,
    /// Print the run's summary as JSON (the `summary.json` that `linkshare sim --json` prints)
    /// instead of the table; the report is written only with --out
    #[arg(long)]
    pub json: bool,
    /// Also write the figures `compare` measures (per class/host/tin per phase, pings, goodput)
    /// as JSON to FILE (how `compare --kernel` reads a side run in a user-mode Linux guest)
    #[arg(long, value_name = "FILE", hide = true)]
    pub figures: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// The seeds' overhead measurements on the real shaper, beside the kernel's HTB and no shaper
    Bench(BenchArgs),
    /// Saturate the real shaper for a long time with a reload or class change every second and
    /// misbehaving control clients; check conservation, flat RSS and bounded pauses (docs/soak.md)
    Soak(SoakArgs),
    /// Run a command in a user-mode Linux guest (Debian's user-mode-linux: every net/sched
    /// qdisc), the host's / read-only, --rw directories writable (scripts/uml; docs/lab.md)
    Uml(crate::uml_cmd::UmlArgs),
}

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// How long: seconds, or with a unit (`90s`, `30m`, `2h`)
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// Print the figures as JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// Longest gap allowed between two packets at the sink, milliseconds
    #[arg(long, default_value_t = 100)]
    pub max_pause_ms: u64,
    /// Run the shaper with `--realtime PRIO` (SCHED_FIFO datapath), and the traffic generator
    /// and sink under SCHED_FIFO too, so the machine's other load cannot pause them
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub realtime: Option<u8>,
}

/// `90`, `90s`, `30m`, `2h` as a duration.
fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let (num, mult) = match s.char_indices().last()? {
        (i, 's') => (&s[..i], 1),
        (i, 'm') => (&s[..i], 60),
        (i, 'h') => (&s[..i], 3600),
        _ => (s, 1),
    };
    let n: u64 = num.trim().parse().ok()?;
    Some(std::time::Duration::from_secs(n.checked_mul(mult)?))
}

#[derive(Args, Debug)]
#[command(
    long_about = "Run the seeds' overhead measurements on the real shaper beside the \
kernel's HTB and no shaper, and print them as Markdown tables (as recorded in BENCHMARKS.md).\n\n\
Needs root (network namespaces). Each figure is measured over --seconds in a fresh testbed; the \
whole suite takes about 5 minutes with the default 3 s."
)]
pub struct BenchArgs {
    /// Seconds of traffic per figure
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Run only these measurements (comma separated): throughput, rr, forwarding, classes, sfq,
    /// accuracy, priority, pacing, cpu, workers, shared-parent, scale
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Also write every figure as JSON to this file
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Measure each packet-flood figure and each TCP goodput this many times and report the median
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Subscriber counts of the `scale` measurement (comma separated; default 10000,100000;
    /// 1000000 where memory allows)
    #[arg(long, value_delimiter = ',')]
    pub subscribers: Vec<usize>,
}

pub fn run(args: &LabArgs) -> anyhow::Result<i32> {
    if let Some(LabCommand::Bench(b)) = &args.command {
        let opts = BenchOptions {
            seconds: b.seconds,
            only: b.only.clone(),
            json: b.json.clone(),
            repeat: b.repeat,
            subscribers: b.subscribers.clone(),
        };
        linkshare_lab::bench::run(&opts, |md| println!("{md}"))?;
        return Ok(crate::exit::OK);
    }
    if let Some(LabCommand::Soak(a)) = &args.command {
        let duration = parse_duration(&a.duration).ok_or_else(|| {
            crate::exit::invalid(format!(
                "--duration {}: give seconds or a unit, e.g. 90s, 30m, 2h",
                a.duration
            ))
        })?;
        let mut opts = linkshare_lab::soak::SoakOptions::new(duration);
        opts.max_pause = std::time::Duration::from_millis(a.max_pause_ms);
        opts.realtime = a.realtime;
        let r = linkshare_lab::soak::run(&opts)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print!("{}", r.text());
        }
        return Ok(if r.passed() {
            crate::exit::OK
        } else {
            crate::exit::INVALID
        });
    }
    if let Some(LabCommand::Uml(a)) = &args.command {
        return crate::uml_cmd::run(a);
    }
    if args.kernel {
        let missing = crate::uml_cmd::missing_for(args.scenario.as_deref());
        if !missing.is_empty() {
            return crate::uml_cmd::lab_in_guest(
                &missing,
                args.scenario.as_deref(),
                args.out.as_deref(),
            );
        }
    }
    let run = match execute(args.scenario.as_deref(), args.kernel)? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let suffix = if args.kernel { "lab-kernel" } else { "lab" };
    let result = run.result;
    if let Some(file) = &args.figures {
        crate::uml_cmd::write_figures(args.scenario.as_deref(), &result, file)?;
    }
    let out = match (&args.out, args.json) {
        (Some(d), _) => Some(d.clone()),
        (None, false) => Some(crate::sim_cmd::default_out_dir(&format!(
            "{}-{suffix}",
            result.summary.scenario
        ))),
        (None, true) => None,
    };
    let mut verdicts = linkshare_sim::expect::render("lab", &run.expectations);
    // The host while it ran, against compare's default thresholds (docs/lab.md "The host").
    if let Some(h) = result.summary.lab.as_ref().and_then(|l| l.host.as_ref()) {
        let why = linkshare_sim::compare::trust::HostThresholds::DEFAULT.reasons(h);
        if !why.is_empty() {
            verdicts.push_str(&format!(
                "warning: the host was busy while the lab ran ({}): these figures measure the host as much as the shaper\n",
                why.join("; ")
            ));
        }
    }
    if args.json {
        print!("{}", linkshare_report::summary_json(&result)?);
        eprint!("{verdicts}");
    } else {
        print!("{}", linkshare_report::render_table(&result));
        print!("{verdicts}");
    }
    let opts = linkshare_report::ReportOptions {
        command: Some(std::env::args().collect::<Vec<_>>().join(" ")),
    };
    if let Some(out) = out {
        match linkshare_report::write_all_with(&result, &out, &opts) {
            Ok(files) if !args.json => {
                let html = files
                    .iter()
                    .find(|p| p.extension().is_some_and(|e| e == "html"));
                println!(
                    "\nwrote {} files to {}{}",
                    files.len(),
                    out.display(),
                    html.map(|h| format!(" (open {})", h.display()))
                        .unwrap_or_default()
                );
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("{}: error: cannot write the report: {e}", out.display());
                return Ok(crate::exit::RUNTIME);
            }
        }
    }
    for f in &run.failures {
        eprintln!("error: {f}");
    }
    Ok(if run.interrupted {
        EXIT_INTERRUPTED
    } else if !run.failures.is_empty() {
        crate::exit::INVALID
    } else if run.expectations.iter().any(|v| !v.pass) {
        crate::exit::EXPECT_FAILED
    } else {
        crate::exit::OK
    })
}
