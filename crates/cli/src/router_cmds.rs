//! `run`, `stat`, `class`, `reload`: the real shaper and its control socket. See docs/router.md.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use linkshare_router::control::{
    self, call, call_ok, ClassChange, Direction, PolicySource, Request, Response,
};
use linkshare_router::{default_control, Options, Shaper};

use crate::class_edit;
use crate::exit::{invalid, INVALID as EXIT_INVALID};
use crate::stat_view;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Policy shaping frames from the first --dev to the second.
    #[arg(long)]
    pub policy: PathBuf,
    /// The two interfaces: IN then OUT.
    #[arg(long = "dev", num_args = 1, required = true)]
    pub dev: Vec<String>,
    /// Policy for OUT -> IN (default: unshaped).
    #[arg(long)]
    pub reverse_policy: Option<PathBuf>,
    /// Control socket path (default /run/linkshare/<IN>-<OUT>.sock).
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// Bytes the modelled device buffer holds behind the frame on the wire, as a simulated
    /// [link]'s device_buffer (default: 4542, or 1 ms of the root rate plus a frame if more).
    #[arg(long)]
    pub device_buffer: Option<u64>,
    /// Link emulation: rate=..,delay=..,loss=..[%],seed=.. after the scheduler on OUT, and
    /// reverse_delay=.. on OUT -> IN
    #[arg(long)]
    pub emulate: Option<String>,
    /// Extra one-way delay for one IPv4 host, both directions: frames from ADDR on IN -> OUT,
    /// frames to ADDR on OUT -> IN (repeatable), e.g. --path-delay 10.1.0.5=20ms
    #[arg(long = "path-delay", value_name = "ADDR=DELAY")]
    pub path_delay: Vec<String>,
    /// Arm the timer this many microseconds before a paced departure and spin the rest (0: never
    /// spin); default: a margin learnt from the timer's own latency (10-200 us)
    #[arg(long, value_name = "US")]
    pub busy_poll_us: Option<u64>,
    /// When the loop wakes up late (a busy machine, a late timer), replay up to this many
    /// milliseconds of the missed time so the classes lose no rate (0: lose it, like the
    /// kernel's HTB with a late watchdog)
    #[arg(long, value_name = "MS", default_value_t = 10)]
    pub catch_up_ms: u64,
    /// Receive coalescing, like a NIC's rx-usecs: after a loop turn that received a few frames,
    /// sleep this many microseconds (never past a departure) so the next turn takes a batch;
    /// less CPU per frame under load, up to this much extra latency while traffic flows (0: off)
    #[arg(long, value_name = "US", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub rx_coalesce_us: u64,
    /// Receive ring: v2 hands each frame over at once (lowest latency, the default); v3 hands
    /// over blocks of frames (fewer wake-ups at very high packet rates, up to 1 ms extra latency)
    #[arg(long, value_name = "v2|v3", default_value = "v2")]
    pub rx_ring: linkshare_router::RxRingKind,
    /// Frame I/O: auto uses AF_XDP where the interface takes it and AF_PACKET otherwise (saying
    /// why); xdp insists on AF_XDP (native mode, else generic); xdp-native and xdp-generic pick
    /// the XDP mode; packet uses AF_PACKET rings
    #[arg(
        long,
        value_name = "auto|xdp|xdp-native|xdp-generic|packet",
        default_value = "auto"
    )]
    pub io: linkshare_router::IoKind,
    /// Line rate of the interfaces (tc units, e.g. 1gbit) when the drivers report none or the
    /// wrong one; the device buffer drains at the faster of this and the policy's root rate
    #[arg(long, value_name = "RATE")]
    pub line_rate: Option<String>,
    /// Serve OpenMetrics/Prometheus text at http://ADDR:PORT/metrics, e.g. 127.0.0.1:9469
    /// (a warning is printed when the address is not loopback)
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the live dashboard (class tree, rates, drops, backlog; updated every second) at
    /// http://ADDR:PORT/, e.g. 127.0.0.1:9470 (a warning is printed when not loopback)
    #[arg(long, value_name = "ADDR:PORT")]
    pub web: Option<std::net::SocketAddr>,
    /// Run the datapath thread under SCHED_FIFO at priority PRIO (1-99) with its memory locked:
    /// departures then leave on time even when the machine is busy (needs CAP_SYS_NICE)
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub realtime: Option<u8>,
    /// Run the datapath thread at this nice value (-20..19): negative values let it preempt
    /// ordinary tasks sooner, so paced departures are less late on a busy machine
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = clap::value_parser!(i8).range(-20..=19))]
    pub nice: Option<i8>,
    /// The datapath thread's time slice under the fair scheduler, in µs (the kernel keeps it
    /// within 100-100000; 0: the kernel's default). A short slice lets the loop preempt other
    /// tasks as soon as a packet or its timer wakes it (Linux 6.12 and later; older kernels
    /// ignore it), without changing its share of the CPU or needing a privilege. Not used with
    /// --realtime
    #[arg(long, value_name = "US", default_value_t = 100)]
    pub slice_us: u64,
    /// Pin the datapath threads to these CPUs (cpulist syntax: 1 or 0,2-3): the shaper, or
    /// worker i of --workers, runs on the i-th CPU of the list (wrapping around)
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,
    /// Datapath threads: with N > 1 the policy's HTB is cut below its root into N shards (its
    /// top-level classes dealt round robin), each run by its own thread with its own sockets,
    /// the root's rate shared between them without a lock (docs/router.md, "Workers")
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub workers: u16,
    /// Memory the buffers of queued packets may hold, both directions together (e.g. 256m):
    /// received frames that would go past it are dropped and counted (`stat`'s memory_drops);
    /// `linkshare check` prints a policy's worst case. Default: a quarter of RAM, at most 1g
    #[arg(long, value_name = "SIZE", value_parser = parse_queue_memory)]
    pub queue_memory: Option<u64>,
    /// Fail open: bridge IN and OUT in the kernel (unshaped) whenever the shaper is not running.
    /// The bridge is removed at start and made again at exit; after a kill the unit's
    /// ExecStopPost runs `linkshare fail-open` (docs/router.md, "Fail-open")
    #[arg(long)]
    pub fail_open: bool,
    /// How --workers deals the top-level classes to the workers: rr (round robin in policy
    /// order: balanced counts), hash (by a hash of the class name: a class stays on its
    /// worker when others are added or removed by a reload) or address (by the class's first
    /// address, and each received frame steered to that worker by its destination on the first
    /// interface and its source on the second: a subscriber stays on one worker, both
    /// directions, with nothing handed over; AF_PACKET)
    #[arg(long, value_name = "rr|hash|address", default_value = "rr")]
    pub placement: PlacementArg,
    /// Which worker receives what: flow (every worker on both interfaces, frames dealt by flow
    /// hash) or direction (with --workers 2: worker 0 receives on the first interface and
    /// worker 1 on the second, so a connection's two directions run on two cores)
    #[arg(long, value_name = "flow|direction", default_value = "flow")]
    pub rx_split: linkshare_router::RxSplit,
    /// Directory of the interface locks (one `<ifname>@<netns>.lock` per interface, holding the
    /// owner's pid; default /run/linkshare)
    #[arg(long, value_name = "DIR")]
    pub lock_dir: Option<PathBuf>,
    /// Keep the last policy accepted (at start and by each reload) in DIR, and start from it,
    /// with a warning, when --policy does not validate. Default under systemd
    /// (StateDirectory=): $STATE_DIRECTORY/<policy file stem>.last-good; `none`: keep nothing
    #[arg(long, value_name = "DIR|none")]
    pub last_good: Option<PathBuf>,
    /// The key of the flow hash that fq_codel, DRR, SFQ and CAKE bucket flows by (default:
    /// random at each start, so that nobody outside can pick ports that land in another flow's
    /// queue; give one only to reproduce a run)
    #[arg(long, value_name = "N")]
    pub flow_key: Option<u64>,
}

#[derive(clap::Args, Debug)]
pub struct StatArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Refresh every SECS seconds (default 1).
    #[arg(short = 'w', long = "watch", num_args = 0..=1, default_missing_value = "1")]
    pub watch: Option<f64>,
    /// Print what the shaper's control protocol offers (version, requests, features, limits)
    /// instead of the statistics
    #[arg(long, conflicts_with = "watch")]
    pub capabilities: bool,
    /// Print as `tc -s qdisc show` and `tc -s class show` would (handles as `export tc` writes
    /// them, rates in tc's units)
    #[arg(long, conflicts_with = "json")]
    pub tc: bool,
    /// Only the class NAME, or the subscriber whose circuit id is NAME (both directions)
    #[arg(long, value_name = "NAME")]
    pub class: Option<String>,
    /// Only the children of class NAME
    #[arg(long, value_name = "NAME")]
    pub parent: Option<String>,
    /// Only the N classes first by --by (highest first); chosen by the shaper, so a shaper of
    /// 100,000 classes sends N rows
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// What --top ranks by: rate, drops or backlog
    #[arg(long, default_value = "rate", value_parser = ["rate", "drops", "backlog"])]
    pub by: String,
    /// With --json: one page of at most N classes per direction from --offset (without it,
    /// every page of one snapshot is fetched and printed as one object)
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    #[arg(long, default_value_t = 0, requires = "limit")]
    pub offset: usize,
    #[arg(long)]
    pub control: Option<PathBuf>,
}

impl StatArgs {
    /// The classes asked for, as the shaper's `stat` selection.
    fn select(&self) -> control::Select {
        control::Select {
            class: self.class.clone(),
            parent: self.parent.clone(),
            search: None,
            top: self.top,
            by: control::TopBy::parse(&self.by).unwrap_or_default(),
            offset: self.offset,
            limit: self.limit,
            seq: None,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct ReloadArgs {
    /// The edited policy.
    pub file: PathBuf,
    /// Replace the reverse direction's policy (OUT -> IN) instead of the forward one.
    #[arg(long)]
    pub reverse: bool,
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// Print the outcome as one JSON object: the reload report or the shaper's error reply
    #[arg(long)]
    pub json: bool,
}

/// A `--cpus` list (one value holding several CPUs, so clap takes it as one argument).
#[derive(Clone, Debug)]
pub struct CpuList(pub Vec<usize>);

fn parse_queue_memory(s: &str) -> Result<u64, String> {
    use linkshare_router::membound::{per_frame, FRAME_BUFFER};
    match linkshare_core::units::Size::parse(s) {
        Ok(v) if v.0 >= per_frame(FRAME_BUFFER) => Ok(v.0),
        Ok(_) => Err(format!(
            "`{s}` holds not even one frame: give a size such as 64m or 1g"
        )),
        Err(e) => Err(format!("`{s}`: {e} (a size such as 64m or 1g)")),
    }
}

fn parse_cpus(s: &str) -> Result<CpuList, String> {
    linkshare_router::affinity::parse_list(s).map(CpuList)
}

pub fn run(a: &RunArgs) -> anyhow::Result<i32> {
    if a.dev.len() != 2 {
        return Err(invalid("give exactly two interfaces: --dev IN --dev OUT"));
    }
    if a.fail_open {
        return crate::fail_open::around(&a.dev[0], &a.dev[1], || shape(a));
    }
    shape(a)
}

/// `run` itself, between the fail-open bridge's removal and return with `--fail-open`.
fn shape(a: &RunArgs) -> anyhow::Result<i32> {
    a.rx_split.check(usize::from(a.workers)).map_err(invalid)?;
    if let Some(CpuList(cpus)) = &a.cpus {
        linkshare_router::affinity::check(cpus).map_err(|e| invalid(format!("--cpus: {e}")))?;
        if cpus.len() < usize::from(a.workers) {
            eprintln!(
                "linkshare: warning: --cpus lists {} CPU(s) for {} workers: some workers share a CPU",
                cpus.len(),
                a.workers
            );
        }
    }
    let control = a
        .control
        .clone()
        .unwrap_or_else(|| default_control(&a.dev[0], &a.dev[1]));
    let opts = Options {
        policy: a.policy.clone(),
        reverse_policy: a.reverse_policy.clone(),
        dev_in: a.dev[0].clone(),
        dev_out: a.dev[1].clone(),
        control,
        lock_dir: a
            .lock_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(linkshare_router::DEFAULT_RUN_DIR)),
        flow_key: match a.flow_key {
            Some(k) => k,
            None => linkshare_router::random_flow_key().ok_or_else(|| {
                anyhow::anyhow!("cannot draw a random flow-hash key (getrandom failed)")
            })?,
        },
        last_good: match &a.last_good {
            Some(d) if d.as_os_str() == "none" => None,
            Some(d) => Some(linkshare_router::last_good::LastGood::new(d.clone())),
            None => linkshare_router::last_good::LastGood::from_state_directory(&a.policy),
        },
        device_buffer: a.device_buffer,
        busy_poll_ns: a.busy_poll_us.map(|u| u.saturating_mul(1_000)),
        catch_up_ns: a.catch_up_ms.saturating_mul(1_000_000),
        rx_coalesce_ns: a.rx_coalesce_us * 1_000,
        rx_ring: a.rx_ring,
        io: a.io,
        metrics: a.metrics,
        web: a.web,
        realtime: a.realtime,
        nice: a.nice,
        slice_ns: (a.slice_us > 0).then(|| a.slice_us.saturating_mul(1_000)),
        cpus: a.cpus.clone().map(|c| c.0).unwrap_or_default(),
        workers: usize::from(a.workers),
        queue_memory: a
            .queue_memory
            .unwrap_or_else(linkshare_router::membound::default_limit),
        placement: match a.placement {
            PlacementArg::Rr => linkshare_core::shard::Placement::RoundRobin,
            PlacementArg::Hash | PlacementArg::Address => linkshare_core::shard::Placement::Hash,
        },
        by_address: matches!(a.placement, PlacementArg::Address),
        rx_split: a.rx_split,
        line_rate: match &a.line_rate {
            Some(t) => Some(
                linkshare_core::units::Rate::parse(t)
                    .map_err(|e| invalid(format!("--line-rate {t}: {e}")))?
                    .bits_per_sec(),
            ),
            None => None,
        },
        emulate: match &a.emulate {
            Some(t) => Some(
                linkshare_router::emulate::EmulateSpec::parse(t)
                    .map_err(|e| invalid(format!("--emulate: {e}")))?,
            ),
            None => None,
        },
        path_delays: a
            .path_delay
            .iter()
            .map(|t| linkshare_router::emulate::PathDelay::parse(t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("--path-delay: {e}")))?,
    };
    if let Some(dup) = opts.path_delays.iter().enumerate().find_map(|(i, p)| {
        opts.path_delays[..i]
            .iter()
            .any(|q| q.addr == p.addr)
            .then_some(p.addr)
    }) {
        return Err(invalid(format!("--path-delay: {dup} is given twice")));
    }
    // The single shaper warns from the policy it parses (Shaper::new): a second parse here
    // would double the start-up of a large policy.
    if opts.workers > 1 {
        if let Ok(p) = linkshare_config::Policy::load(&opts.policy) {
            let line = opts
                .line_rate
                .or_else(|| linkshare_router::sys::link_speed_bps(&opts.dev_out));
            if let Some(w) = linkshare_router::guard::root_above_line(&p, line, &opts.dev_out) {
                eprintln!("warning: {w}");
            }
        }
    }
    let started = if opts.workers > 1 {
        linkshare_router::run_workers(opts).map(Started::Done)
    } else {
        Shaper::new(opts).map(|s| Started::One(Box::new(s)))
    };
    let mut s = match started {
        Ok(Started::One(s)) => s,
        Ok(Started::Done(code)) => return Ok(code),
        Err(e)
            if e.downcast_ref::<linkshare_router::guard::Refused>()
                .is_some() =>
        {
            eprintln!("error: {e:#}");
            return Ok(1);
        }
        Err(e) => {
            let msg = format!("{e:#}");
            if msg.contains("policy is invalid") {
                eprintln!("{msg}");
                return Ok(EXIT_INVALID);
            }
            return Err(e);
        }
    };
    s.run()
}

/// `--placement`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum PlacementArg {
    Rr,
    Hash,
    Address,
}

/// A single-threaded shaper ready to run, or the exit code of a multi-threaded one.
enum Started {
    One(Box<Shaper>),
    Done(i32),
}

/// The control socket to talk to: the given one, or the only one in /run/linkshare.
fn find_control(given: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.clone());
    }
    let dir = Path::new("/run/linkshare");
    let socks: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| {
            format!(
                "no shaper running ({} unreadable); give --control",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    match socks.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "no shaper running (no socket in {}); give --control",
            dir.display()
        ),
        _ => Err(invalid(format!(
            "several shapers running in {}; give --control",
            dir.display()
        ))),
    }
}

pub fn stat(a: &StatArgs) -> anyhow::Result<i32> {
    let control = find_control(&a.control)?;
    if a.capabilities {
        let Response::Hello(h) = call_ok(&control, &Request::Hello {})? else {
            bail!("the shaper did not answer `hello`");
        };
        if a.json {
            println!("{}", serde_json::to_string(&h)?);
        } else {
            print!("{}", stat_view::render_hello(&h));
        }
        return Ok(0);
    }
    let select = a.select();
    loop {
        let st = control::stat_select(&control, &select)?;
        if a.json {
            println!("{}", serde_json::to_string(&st)?);
        } else {
            if a.watch.is_some() {
                print!("\x1b[H\x1b[2J");
            }
            if a.tc {
                print!("{}", crate::stat_tc::render(&st));
            } else {
                print!("{}", stat_view::render(&st));
            }
        }
        match a.watch {
            Some(s) => std::thread::sleep(std::time::Duration::from_secs_f64(s.max(0.05))),
            None => return Ok(0),
        }
    }
}

pub fn class(a: &class_edit::ClassArgs) -> anyhow::Result<i32> {
    if !matches!(a.action.as_str(), "add" | "change" | "del") {
        return Err(invalid(format!(
            "unknown action `{}`: use add, change or del",
            a.action
        )));
    }
    let control = find_control(&a.control)?;
    let what = format!("class {} {}", a.action, a.name);
    // New rates alone go by name: the shaper changes that class of the policy it runs, and
    // neither side sends the policy's text (the way a policy of any size is changed).
    let by_name = a.action == "change"
        && a.parent.is_none()
        && a.prio.is_none()
        && (a.rate.is_some() || a.ceil.is_some());
    if by_name {
        let r = call(
            &control,
            &Request::Reload {
                direction: Direction::Forward,
                source: PolicySource::Change(ClassChange {
                    class: a.name.clone(),
                    rate: a.rate.clone(),
                    ceil: a.ceil.clone(),
                }),
            },
        )?;
        // A shaper that does not hold its running policy (`--workers`) takes the text.
        let unsupported =
            matches!(&r, Response::Error(e) if e.kind == control::ErrorKind::Unsupported);
        if !unsupported {
            let path = match &r {
                Response::Reloaded(rep) => rep.path.clone(),
                _ => None,
            };
            return class_outcome(a, &r, path, &what);
        }
    }
    let Response::Policy(cur) = call_ok(
        &control,
        &Request::Policy {
            direction: Direction::Forward,
        },
    )?
    else {
        bail!("the shaper did not return its policy");
    };
    // The running policy is its text with the changes made by name since: send them too.
    let mut text = cur.text;
    for c in &cur.changes {
        let args = class_edit::ClassArgs {
            action: "change".into(),
            name: c.class.clone(),
            parent: None,
            rate: c.rate.clone(),
            ceil: c.ceil.clone(),
            prio: None,
            control: None,
            write: false,
            json: false,
        };
        text = class_edit::edit_policy_text(&text, &args).with_context(|| {
            format!(
                "the shaper runs `class change {}` that its policy text cannot hold; reload \
                 the policy file (with the change written into it) first",
                c.class
            )
        })?;
    }
    let edited = class_edit::edit_policy_text(&text, a)?;
    let path_text = cur.path.as_ref().map(|p| p.display().to_string());
    let r = call(
        &control,
        &Request::Reload {
            direction: Direction::Forward,
            source: PolicySource::Text {
                text: edited,
                origin: class_edit::change_origin(&cur.origin, path_text.as_deref()),
            },
        },
    )?;
    class_outcome(a, &r, cur.path, &what)
}

/// Report a class edit's reply and, when it was applied and `--write` asks, write the change
/// into `path` (the policy file the shaper runs; a subscriber's row of its table).
fn class_outcome(
    a: &class_edit::ClassArgs,
    r: &Response,
    path: Option<PathBuf>,
    what: &str,
) -> anyhow::Result<i32> {
    let applied = matches!(r, Response::Reloaded(_));
    let code = if a.json {
        reload_code(r, what)?
    } else {
        report_reload(r, what)?
    };
    let mut written = None;
    if applied && a.write {
        let Some(path) = path else {
            bail!("the shaper runs no policy file: nothing to --write (the change is applied)");
        };
        let w = class_edit::write_back(&path, a).with_context(|| {
            format!("the change is applied but {} is unchanged", path.display())
        })?;
        if !a.json {
            println!("wrote the change into {}", w.display());
        }
        written = Some(w);
    }
    if a.json {
        let mut v = serde_json::to_value(r)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("written".into(), serde_json::to_value(&written)?);
        }
        println!("{v}");
    }
    Ok(code)
}

/// The exit code of a reload's reply: 0 applied, 1 rejected (invalid input), an error otherwise.
fn reload_code(r: &Response, what: &str) -> anyhow::Result<i32> {
    match r {
        Response::Reloaded(_) => Ok(0),
        Response::Error(_) => Ok(EXIT_INVALID),
        other => bail!(
            "the shaper answered {what} with `{}`",
            control::reply_name(other)
        ),
    }
}

fn report_reload(r: &Response, what: &str) -> anyhow::Result<i32> {
    match r {
        Response::Reloaded(rep) => {
            println!("{what} {}", rep.summary());
            Ok(0)
        }
        Response::Error(e) => {
            if let Some(d) = &e.diagnostics {
                eprintln!("{d}");
            }
            eprintln!("{what} rejected: {}; the running policy stays", e.message);
            Ok(EXIT_INVALID)
        }
        other => bail!(
            "the shaper answered the reload with `{}`",
            control::reply_name(other)
        ),
    }
}

/// `reload FILE`: the shaper reads the file itself (its absolute path goes over the control
/// socket, so a policy of any size reloads, and SIGHUP reloads it again later).
pub fn reload(a: &ReloadArgs) -> anyhow::Result<i32> {
    let control = find_control(&a.control)?;
    // Refuse here what the shaper could not read either, with the caller's own path.
    let path = std::fs::canonicalize(&a.file)
        .with_context(|| format!("cannot read {}", a.file.display()))?;
    let r = call(
        &control,
        &Request::Reload {
            direction: if a.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            source: PolicySource::File { path },
        },
    )?;
    let what = format!("reloaded {}", a.file.display());
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return reload_code(&r, &what);
    }
    report_reload(&r, &what)
}
