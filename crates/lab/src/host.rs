//! How busy the host was while a lab run's traffic ran, so that a figure measured on a loaded
//! machine is not taken for the simulator's error (issue 37 §6, docs/lab.md "The host").
//!
//! The lab is real time: a sender, a shaper and a sink that wake late send, pace and count late.
//! Three independent witnesses are recorded over the run:
//! * **timer lateness**: a thread that asks to sleep [`INTERVAL`] in a loop and records how much
//!   longer each sleep took (actual − requested), in a histogram of [`BUCKET_NS`] buckets; its
//!   p50/p99/max are what any real-time thread of the lab saw (the sampler runs at the lab's
//!   priority, inheriting its nice value);
//! * **CPU steal and idle**: the `cpu` line of `/proc/stat` read at the start and at the end;
//!   steal is the time a hypervisor ran someone else while this guest wanted the CPU (proc(5));
//! * **load**: the 1-minute load average of `/proc/loadavg` at the start and its largest value,
//!   read once a second.
//!
//! The shaper's own lateness (its `stat`) is added by the run (`run::measure`).
//!
//! The parsing and the arithmetic are pure functions of the text and the samples (tested on
//! synthetic `/proc` text); [`HostSampler`] is the thin thread that feeds them. The thresholds
//! that turn these figures into "untrustworthy" live with the comparison
//! (`linkshare_sim::compare::trust`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linkshare_sim::model::HostFigures;

/// The sampler's requested sleep.
pub const INTERVAL: Duration = Duration::from_millis(1);
/// Width of a lateness bucket: 10 µs.
const BUCKET_NS: u64 = 10_000;
/// Buckets up to 100 ms; later wake-ups land in the last one (the maximum is kept exactly).
const BUCKETS: usize = 10_000;
/// How often the load average is read.
const LOAD_EVERY: Duration = Duration::from_secs(1);

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks (proc(5): user nice system idle
/// iowait irq softirq steal; guest time is already inside user and nice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub total: u64,
    pub idle: u64,
    pub steal: u64,
}

/// The `cpu` line of `/proc/stat` text and the number of `cpuN` lines; `None` if there is no
/// well-formed `cpu` line.
pub fn parse_proc_stat(text: &str) -> Option<(CpuTimes, u32)> {
    let mut times = None;
    let mut cpus = 0u32;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("cpu") => {
                let v: Vec<u64> = words.map_while(|w| w.parse().ok()).collect();
                if v.len() < 4 {
                    return None;
                }
                let at = |i: usize| v.get(i).copied().unwrap_or(0);
                // Fields 0..8: user nice system idle iowait irq softirq steal (guest and
                // guest_nice, 8 and 9, are counted in user and nice already).
                times = Some(CpuTimes {
                    total: (0..8).map(at).sum(),
                    idle: at(3) + at(4),
                    steal: at(7),
                });
            }
            Some(w) if w.starts_with("cpu") && w[3..].parse::<u32>().is_ok() => cpus += 1,
            _ => {}
        }
    }
    times.map(|t| (t, cpus))
}

impl CpuTimes {
    /// Steal and idle over the interval from `self` to `later`, percent of all CPU time; `None`
    /// when no time passed (or the counters went backwards).
    pub fn shares_until(&self, later: &CpuTimes) -> Option<(f64, f64)> {
        let total = later.total.checked_sub(self.total).filter(|&t| t > 0)? as f64;
        let steal = later.steal.saturating_sub(self.steal) as f64;
        let idle = later.idle.saturating_sub(self.idle) as f64;
        Some((steal / total * 100.0, idle / total * 100.0))
    }
}

/// The 1-minute load average from `/proc/loadavg` text.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite())
}

/// Wake-up lateness, bucketed: bounded memory however long the run.
#[derive(Clone, Debug)]
pub struct Lateness {
    buckets: Vec<u64>,
    count: u64,
    max_ns: u64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            buckets: vec![0; BUCKETS],
            count: 0,
            max_ns: 0,
        }
    }
}

impl Lateness {
    pub fn record(&mut self, late_ns: u64) {
        let i = ((late_ns / BUCKET_NS) as usize).min(BUCKETS - 1);
        self.buckets[i] += 1;
        self.count += 1;
        self.max_ns = self.max_ns.max(late_ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `q` quantile (0..=1) in ns: the upper edge of the bucket holding the ⌈q·n⌉-th
    /// smallest sample (never above the maximum); 0 without samples.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                // The last bucket holds everything later: only the maximum bounds it.
                if i == BUCKETS - 1 {
                    return self.max_ns;
                }
                return ((i as u64 + 1) * BUCKET_NS).min(self.max_ns);
            }
        }
        self.max_ns
    }

    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }
}

/// What the sampler thread gathered.
#[derive(Clone, Debug, Default)]
struct Gathered {
    late: Lateness,
    load_max: Option<f64>,
}

/// The figures from the samples and the `/proc` readings at the start and the end.
pub fn figures(
    late: &Lateness,
    start: Option<(CpuTimes, u32)>,
    end: Option<(CpuTimes, u32)>,
    load_start: Option<f64>,
    load_max: Option<f64>,
) -> HostFigures {
    let ms = |ns: u64| ns as f64 / 1e6;
    let shares = match (start, end) {
        (Some((a, _)), Some((b, _))) => a.shares_until(&b),
        _ => None,
    };
    HostFigures {
        cpus: end.or(start).map(|(_, n)| n).unwrap_or(0),
        interval_ms: INTERVAL.as_secs_f64() * 1e3,
        timer_samples: late.count(),
        timer_late_p50_ms: ms(late.quantile_ns(0.50)),
        timer_late_p99_ms: ms(late.quantile_ns(0.99)),
        timer_late_max_ms: ms(late.max_ns()),
        steal_pct: shares.map(|s| s.0),
        idle_pct: shares.map(|s| s.1),
        load_start,
        load_max: match (load_start, load_max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        },
        shaper_late_p99_ms: None,
    }
}

fn read_stat() -> Option<(CpuTimes, u32)> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn read_load() -> Option<f64> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The sampler thread, running from [`HostSampler::start`] to [`HostSampler::stop`].
pub struct HostSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Gathered>>,
    stat_start: Option<(CpuTimes, u32)>,
    load_start: Option<f64>,
}

impl HostSampler {
    /// Read `/proc` and start the sleeping thread. A thread that cannot be spawned leaves the
    /// timer figures empty (0 samples) rather than failing the run.
    pub fn start() -> HostSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("lab-host".into())
            .spawn(move || {
                let mut g = Gathered::default();
                let mut next_load = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    let before = Instant::now();
                    std::thread::sleep(INTERVAL);
                    let slept = before.elapsed();
                    g.late
                        .record(slept.saturating_sub(INTERVAL).as_nanos() as u64);
                    if before >= next_load {
                        if let Some(l) = read_load() {
                            g.load_max = Some(g.load_max.map_or(l, |m: f64| m.max(l)));
                        }
                        next_load = before + LOAD_EVERY;
                    }
                }
                g
            })
            .ok();
        HostSampler {
            stop,
            thread,
            stat_start: read_stat(),
            load_start: read_load(),
        }
    }

    /// Stop the thread and return the figures over the time it ran.
    pub fn stop(mut self) -> HostFigures {
        self.stop.store(true, Ordering::Relaxed);
        let g = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        figures(
            &g.late,
            self.stat_start,
            read_stat(),
            self.load_start,
            g.load_max,
        )
    }
}

impl Drop for HostSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  1000 0 500 8000 100 0 0 400 0 0\n\
cpu0 500 0 250 4000 50 0 0 200 0 0\n\
cpu1 500 0 250 4000 50 0 0 200 0 0\n\
intr 12345 0 0\nctxt 999\nbtime 1\n";
    const STAT_B: &str = "cpu  1600 0 700 8600 100 0 0 500 0 0\n\
cpu0 800 0 350 4300 50 0 0 250 0 0\n\
cpu1 800 0 350 4300 50 0 0 250 0 0\n";

    #[test]
    fn proc_stat_gives_the_cpu_line_and_the_cpu_count() {
        let (t, n) = parse_proc_stat(STAT_A).unwrap();
        assert_eq!(n, 2);
        // 1000 + 500 + 8000 + 100 + 400 (guest fields are not added twice).
        assert_eq!(t.total, 10_000);
        assert_eq!(t.idle, 8_100);
        assert_eq!(t.steal, 400);
        assert_eq!(parse_proc_stat("intr 1\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2\n"), None);
        // A kernel without the steal column (fewer than 8 fields): steal 0.
        let (old, _) = parse_proc_stat("cpu 10 0 10 80\n").unwrap();
        assert_eq!((old.total, old.idle, old.steal), (100, 80, 0));
    }

    #[test]
    fn steal_and_idle_are_shares_of_the_time_between_two_readings() {
        let (a, _) = parse_proc_stat(STAT_A).unwrap();
        let (b, _) = parse_proc_stat(STAT_B).unwrap();
        // Δtotal = 600 + 200 + 600 + 0 + 100 = 1500; Δsteal 100; Δidle 600.
        let (steal, idle) = a.shares_until(&b).unwrap();
        assert!((steal - 100.0 / 15.0).abs() < 1e-9, "{steal}");
        assert!((idle - 40.0).abs() < 1e-9, "{idle}");
        assert_eq!(a.shares_until(&a), None);
        assert_eq!(b.shares_until(&a), None);
    }

    #[test]
    fn loadavg_is_its_first_field() {
        assert_eq!(parse_loadavg("6.12 3.40 2.01 9/812 4242\n"), Some(6.12));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("x 1 2"), None);
    }

    #[test]
    fn lateness_quantiles_are_bucket_edges_capped_by_the_maximum() {
        let mut l = Lateness::default();
        assert_eq!(l.quantile_ns(0.99), 0);
        // 98 wake-ups 55 µs late, one 3 ms late, one 250 ms late (beyond the last bucket).
        for _ in 0..98 {
            l.record(55_000);
        }
        l.record(3_000_000);
        l.record(250_000_000);
        assert_eq!(l.count(), 100);
        assert_eq!(l.quantile_ns(0.50), 60_000);
        assert_eq!(l.quantile_ns(0.98), 60_000);
        assert_eq!(l.quantile_ns(0.99), 3_010_000);
        assert_eq!(l.quantile_ns(1.0), 250_000_000);
        assert_eq!(l.max_ns(), 250_000_000);
        let mut one = Lateness::default();
        one.record(7_000);
        assert_eq!(one.quantile_ns(0.5), 7_000);
    }

    #[test]
    fn figures_combine_the_readings() {
        let mut l = Lateness::default();
        for ns in [100_000, 200_000, 4_200_000] {
            l.record(ns);
        }
        let f = figures(
            &l,
            parse_proc_stat(STAT_A),
            parse_proc_stat(STAT_B),
            Some(1.5),
            Some(6.2),
        );
        assert_eq!(f.cpus, 2);
        assert_eq!(f.timer_samples, 3);
        assert!((f.timer_late_p50_ms - 0.21).abs() < 1e-9, "{f:?}");
        assert!((f.timer_late_p99_ms - 4.2).abs() < 1e-9, "{f:?}");
        assert!((f.timer_late_max_ms - 4.2).abs() < 1e-9);
        assert!((f.steal_pct.unwrap() - 100.0 / 15.0).abs() < 1e-9);
        assert_eq!(f.load_start, Some(1.5));
        assert_eq!(f.load_max, Some(6.2));
        // Unreadable /proc: no steal, no load, the timer figures still there.
        let g = figures(&l, None, None, None, None);
        assert_eq!((g.steal_pct, g.load_max, g.cpus), (None, None, 0));
        assert_eq!(g.timer_samples, 3);
    }

    #[test]
    fn the_sampler_measures_while_it_runs() {
        let s = HostSampler::start();
        std::thread::sleep(Duration::from_millis(30));
        let f = s.stop();
        assert!(f.timer_samples > 0, "{f:?}");
        assert!(f.timer_late_max_ms >= f.timer_late_p99_ms);
        assert!(f.timer_late_p99_ms >= f.timer_late_p50_ms);
    }
}
