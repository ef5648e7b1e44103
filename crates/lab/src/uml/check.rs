//! Did the user-mode Linux guest get the CPU it asked for? A guest the host starves is frozen
//! while it waits: its qdisc watchdogs, its TCP timers and its senders all run late by as much,
//! and the "kernel's figures" it records are the host's load (a one-CPU guest at load 14–17
//! delivered 6.2 of 11 Mbit/s offered). This is the recorder's own check of the guest, from the
//! host's side; the lab's view from inside a run (timer lateness, steal, load) is separate.
//!
//! Principles:
//! * **The host scheduler's own accounting.** The guest is a handful of host tasks (the UML
//!   kernel's thread and one host process per guest address space, which it switches by
//!   ptrace). For each, `/proc/PID/task/TID/schedstat` gives the time it ran and the time it
//!   was runnable but waited on a run queue (Documentation/scheduler/sched-stats.rst). Summed
//!   over the guest's tasks and divided by the wall-clock time, these are the guest's **CPU
//!   share** and its **starvation**: about the fraction of real time in which the guest had
//!   work and was frozen (summed over tasks, several of which may wait at once, so a starved
//!   guest's share can pass 100 %). Its tasks come and go (every `tc` and `ip` inside is a host process), so each
//!   task's counters are followed by id and only their increases are summed.
//! * **One run, one verdict.** Starved when the whole run waited more than [`WAIT_LIMIT_PCT`]
//!   or any one second more than [`WINDOW_LIMIT_PCT`] (a phase of a scenario lasts seconds).
//!   Measured here: at load ~5 under nice −10 the guest waited 40–60 % of every second and its
//!   CAKE delivered 18.1 of 20 Mbit/s; under SCHED_FIFO at load ~8 it waited 1–3 % and
//!   delivered 20.0.
//! * **And from inside.** A guest the host did not starve may still not keep up: its one CPU
//!   pays a host round trip for every system call, and the lab's UDP sources then wake late
//!   and skip part of their schedules (`run::offered`). That note comes back from the guest beside its figures
//!   ([`GuestCheck::senders`]) and is starvation too.
//! * **Pure arithmetic, thin sampler.** [`parse_schedstat`] and [`Tally`] are functions of text
//!   and samples (unit tests); [`Sampler`] is the thread that reads `/proc` every
//!   [`SAMPLE_EVERY`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Starved when the guest waited for a host CPU more than this share of the run (percent).
pub const WAIT_LIMIT_PCT: f64 = 5.0;
/// … or more than this share of any one window of [`WINDOW`] (percent).
pub const WINDOW_LIMIT_PCT: f64 = 20.0;
/// The window of [`WINDOW_LIMIT_PCT`].
pub const WINDOW: Duration = Duration::from_secs(1);
/// How often the sampler reads the guest's tasks.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// One task's counters from its `schedstat`: nanoseconds on a CPU and waiting on a run queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskTimes {
    pub run_ns: u64,
    pub wait_ns: u64,
}

/// `schedstat` text: "run_ns wait_ns timeslices". `None` when it is not that.
pub fn parse_schedstat(text: &str) -> Option<TaskTimes> {
    let mut w = text.split_whitespace().map(str::parse::<u64>);
    let run_ns = w.next()?.ok()?;
    let wait_ns = w.next()?.ok()?;
    Some(TaskTimes { run_ns, wait_ns })
}

/// The guest's counters summed over its tasks' increases, and its worst window.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Each task's counters when last seen.
    last: HashMap<u32, TaskTimes>,
    started: bool,
    /// Wall-clock nanoseconds from the first sample to the last.
    wall_ns: u64,
    run_ns: u64,
    wait_ns: u64,
    /// The window being filled: its wall and wait nanoseconds.
    window: (u64, u64),
    /// The largest wait share of a full window, percent.
    worst_window_pct: f64,
    /// Whether any reading found a task (no `schedstat` on this kernel: nothing measured).
    any_task: bool,
}

impl Tally {
    /// One reading of every task of the guest, `dt_ns` after the previous one (ignored on the
    /// first: it only sets where each task's counters start). A task first seen later started
    /// after the previous reading, so all of its counters count.
    pub fn observe(&mut self, dt_ns: u64, tasks: &[(u32, TaskTimes)]) {
        let first = !self.started;
        self.started = true;
        self.any_task |= !tasks.is_empty();
        let (mut run, mut wait) = (0u64, 0u64);
        let mut seen = HashMap::with_capacity(tasks.len());
        for &(tid, t) in tasks {
            let before = match self.last.get(&tid) {
                Some(b) => *b,
                None if first => t,
                None => TaskTimes::default(),
            };
            run += t.run_ns.saturating_sub(before.run_ns);
            wait += t.wait_ns.saturating_sub(before.wait_ns);
            seen.insert(tid, t);
        }
        self.last = seen;
        if first {
            return;
        }
        self.wall_ns += dt_ns;
        self.run_ns += run;
        self.wait_ns += wait;
        self.window.0 += dt_ns;
        self.window.1 += wait;
        if self.window.0 >= WINDOW.as_nanos() as u64 {
            let pct = pct(self.window.1, self.window.0);
            self.worst_window_pct = self.worst_window_pct.max(pct);
            self.window = (0, 0);
        }
    }

    /// The guest's figures over what was observed.
    pub fn check(&self, policy: &str) -> GuestCheck {
        GuestCheck {
            policy: policy.to_string(),
            wall_s: self.wall_ns as f64 / 1e9,
            cpu_pct: pct(self.run_ns, self.wall_ns),
            wait_pct: pct(self.wait_ns, self.wall_ns),
            worst_window_pct: self.worst_window_pct,
            measured: self.any_task,
            senders: None,
        }
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// How the guest fared on the host, over its whole run (boot to power-off).
#[derive(Clone, Debug, PartialEq)]
pub struct GuestCheck {
    /// The host scheduling the guest ran under, e.g. "SCHED_FIFO 20" or "nice -10".
    pub policy: String,
    /// Seconds observed.
    pub wall_s: f64,
    /// Time the guest's tasks ran, percent of the wall clock (one CPU = 100).
    pub cpu_pct: f64,
    /// Time they were runnable but waited for a host CPU, percent of the wall clock.
    pub wait_pct: f64,
    /// The same in the worst window of [`WINDOW`], percent.
    pub worst_window_pct: f64,
    /// False when no task of the guest could be read (a host kernel without `schedstat`).
    pub measured: bool,
    /// Inside the guest, the lab's UDP sources woke late and skipped part of their schedules
    /// (its note): the guest could not keep up, however little the host made it wait.
    pub senders: Option<String>,
}

impl GuestCheck {
    /// Why the guest's figures are not a reference, or `None` when it got its CPU and its
    /// senders kept to their schedules.
    pub fn starved(&self) -> Option<String> {
        if let Some(s) = &self.senders {
            return Some(format!("in the user-mode Linux guest, {s}"));
        }
        let over_run = self.wait_pct > WAIT_LIMIT_PCT;
        let over_window = self.worst_window_pct > WINDOW_LIMIT_PCT;
        (over_run || over_window).then(|| {
            format!(
                "the user-mode Linux guest was starved: it waited for a host CPU {:.1} % of its \
                 {:.1} s (limit {WAIT_LIMIT_PCT} %), {:.1} % in its worst second (limit \
                 {WINDOW_LIMIT_PCT} %), under {}; the host is too busy for the kernel's figures \
                 to be a reference: run it again on a quiet machine",
                self.wait_pct, self.wall_s, self.worst_window_pct, self.policy
            )
        })
    }

    /// One line for the run's log.
    pub fn summary(&self) -> String {
        if !self.measured {
            return format!(
                "guest: {}, its CPU share not measured (no /proc/PID/task/TID/schedstat)",
                self.policy
            );
        }
        format!(
            "guest: {}, ran {:.0} % of {:.1} s, waited for a host CPU {:.1} % (worst second {:.1} %)",
            self.policy, self.cpu_pct, self.wall_s, self.wait_pct, self.worst_window_pct
        )
    }
}

/// The tasks of process `pid` and of all its descendants, with their counters. Tasks that
/// exit while being read are left out.
fn read_tree(pid: u32) -> Vec<(u32, TaskTimes)> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let path = e.path();
            if let Some(t) =
                read_to_string(&path.join("schedstat")).and_then(|s| parse_schedstat(&s))
            {
                out.push((tid, t));
            }
            if let Some(c) = read_to_string(&path.join("children")) {
                todo.extend(c.split_whitespace().filter_map(|w| w.parse::<u32>().ok()));
            }
        }
    }
    out
}

fn read_to_string(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// A thread that reads the guest's tasks every [`SAMPLE_EVERY`] until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Tally>,
}

impl Sampler {
    /// Follow process `pid` (the user-mode kernel) and its descendants.
    pub fn start(pid: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut tally = Tally::default();
            let mut at = Instant::now();
            loop {
                let last = flag.load(Ordering::Relaxed);
                let now = Instant::now();
                let tasks = read_tree(pid);
                tally.observe(now.duration_since(at).as_nanos() as u64, &tasks);
                at = now;
                if last {
                    return tally;
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        Sampler { stop, thread }
    }

    /// Stop (after one last reading) and judge under `policy`.
    pub fn stop(self, policy: &str) -> GuestCheck {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default().check(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(run_ms: u64, wait_ms: u64) -> TaskTimes {
        TaskTimes {
            run_ns: run_ms * 1_000_000,
            wait_ns: wait_ms * 1_000_000,
        }
    }
    const MS: u64 = 1_000_000;

    #[test]
    fn schedstat_is_run_and_wait() {
        assert_eq!(
            parse_schedstat("3506812 1776122 14\n"),
            Some(TaskTimes {
                run_ns: 3_506_812,
                wait_ns: 1_776_122
            })
        );
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("12 x 3"), None);
        assert_eq!(parse_schedstat("12"), None);
    }

    #[test]
    fn increases_are_summed_per_task_and_the_first_reading_is_the_baseline() {
        let mut tally = Tally::default();
        // Counters before the run began do not count.
        tally.observe(0, &[(1, t(5000, 4000)), (2, t(100, 100))]);
        tally.observe(500 * MS, &[(1, t(5200, 4050)), (2, t(150, 110))]);
        // Task 2 exits, task 3 appears: all of 3's counters are new.
        tally.observe(500 * MS, &[(1, t(5400, 4100)), (3, t(100, 40))]);
        let c = tally.check("SCHED_FIFO 20");
        assert_eq!(c.wall_s, 1.0);
        // run: 200 + 50 + 200 + 100 = 550 ms of 1000; wait: 50 + 10 + 50 + 40 = 150 ms.
        assert!((c.cpu_pct - 55.0).abs() < 1e-9, "{c:?}");
        assert!((c.wait_pct - 15.0).abs() < 1e-9, "{c:?}");
        // One full window of 1 s: 15 %.
        assert!((c.worst_window_pct - 15.0).abs() < 1e-9, "{c:?}");
        assert!(
            c.starved().is_some(),
            "15 % of the run is over the 5 % limit"
        );
    }

    #[test]
    fn a_counter_that_goes_back_counts_nothing() {
        // A task id reused by a new task reads lower than the old one's counters.
        let mut tally = Tally::default();
        tally.observe(0, &[(7, t(900, 900))]);
        tally.observe(1000 * MS, &[(7, t(10, 5))]);
        let c = tally.check("nice -10");
        assert_eq!((c.cpu_pct, c.wait_pct), (0.0, 0.0));
    }

    #[test]
    fn one_bad_second_in_a_quiet_run_is_starvation() {
        let mut tally = Tally::default();
        tally.observe(0, &[(1, t(0, 0))]);
        let (mut run, mut wait) = (0, 0);
        // Nine seconds with 1 % waiting, one with 30 %: 3.9 % of the run, under its limit.
        for s in 0..10 {
            let w = if s == 4 { 300 } else { 10 };
            for _ in 0..5 {
                run += 100;
                wait += w / 5;
                tally.observe(200 * MS, &[(1, t(run, wait))]);
            }
        }
        let c = tally.check("nice -10");
        assert!((c.wait_pct - 3.9).abs() < 1e-9, "{c:?}");
        assert!((c.worst_window_pct - 30.0).abs() < 1e-9, "{c:?}");
        assert!((c.cpu_pct - 50.0).abs() < 1e-9, "{c:?}");
        let why = c.starved().expect("the worst second is over 20 %");
        assert!(why.contains("30.0 % in its worst second"), "{why}");
    }

    #[test]
    fn a_guest_that_got_its_cpu_is_a_reference() {
        let c = GuestCheck {
            policy: "SCHED_FIFO 20".into(),
            wall_s: 17.0,
            cpu_pct: 48.0,
            wait_pct: 2.0,
            worst_window_pct: 6.0,
            measured: true,
            senders: None,
        };
        assert_eq!(c.starved(), None);
        assert!(c.summary().contains("waited for a host CPU 2.0 %"));
        // Exactly at a limit is not over it.
        let edge = GuestCheck {
            wait_pct: WAIT_LIMIT_PCT,
            worst_window_pct: WINDOW_LIMIT_PCT,
            ..c
        };
        assert_eq!(edge.starved(), None);
        // A guest the host did not starve whose own CPU could not keep its senders' rates.
        let busy = GuestCheck {
            senders: Some("UDP sources woke late and skipped …".into()),
            ..edge
        };
        assert!(busy.starved().is_some_and(|w| w.contains("UDP sources")));
    }

    #[test]
    fn nothing_observed_is_no_figure() {
        let c = Tally::default().check("nice -10");
        assert_eq!((c.wall_s, c.cpu_pct, c.wait_pct), (0.0, 0.0, 0.0));
        assert!(!c.measured);
        assert!(c.summary().contains("not measured"), "{}", c.summary());
    }

    #[test]
    fn this_process_is_read_from_proc() {
        // The sampler's reader on a live tree: this test process and its threads.
        let tasks = read_tree(std::process::id());
        assert!(
            tasks.iter().any(|(tid, _)| *tid == std::process::id()),
            "{tasks:?}"
        );
    }
}
