//! CPU time around a measurement: the shaper process's and the whole machine's.
//!
//! Principles: neither figure may come from the tick-sampled counters alone. Linux built with
//! `CONFIG_TICK_CPU_ACCOUNTING` (Debian's kernels, and this testbed's: HZ = 250) charges each
//! whole tick (4 ms) to whatever runs when the tick fires (`account_process_tick`): the user,
//! system and softirq fields of `/proc/stat` and the utime/stime of `/proc/PID/stat` are
//! samples. Work that starts just after a tick and is done before the next one is never seen.
//! That is exactly what a `TPACKET_V3` ring makes: its block-retire timer is a jiffies timer
//! (`prb_retire_rx_blk_timer`), so the shaper wakes on a tick, drains the block and sleeps
//! again before the next — measured with the tick counters, the `--rx-ring v3` row once cost
//! less CPU than the floor row, which has no router at all (docs/benchmarks-history.md, "How to
//! measure on a shared VM").
//!
//! So both figures come from clocks instead:
//! * a process: the sum over its threads of the scheduler's run time
//!   (`/proc/PID/task/TID/schedstat`, first field, ns; `CONFIG_SCHED_INFO`), which includes the
//!   softirq work its system calls run (this kernel has no `CONFIG_IRQ_TIME_ACCOUNTING` to take
//!   it out), as the tick counters did;
//! * the machine: the online CPUs times the wall time, minus what `/proc/stat` calls idle and
//!   iowait (measured at idle entry and exit under `NO_HZ`, `get_cpu_idle_time_us`) and steal
//!   (time the hypervisor ran something else: not this machine's work).
//!
//! Where `schedstat` is missing the process figure falls back to the tick counters, and says
//! so once on stderr.

use std::sync::Once;
use std::time::Instant;

/// CPU time (user + system, softirq work in its calls included) of process `pid`, all its
/// threads, in seconds. A thread that exits between two readings takes its time with it; the
/// shaper's threads live as long as it does.
pub(super) fn proc_cpu(pid: u32) -> Option<f64> {
    match threads_run_time(pid) {
        Some(ns) => Some(ns as f64 / 1e9),
        None => {
            static SAID: Once = Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "lab bench: /proc/{pid}/task/*/schedstat unreadable; the shaper's CPU time \
                     comes from the tick-sampled /proc/{pid}/stat (4 ms samples)"
                )
            });
            proc_ticks(pid)
        }
    }
}

/// Sum of the first `schedstat` field (time on a CPU, ns) over the threads of `pid`.
fn threads_run_time(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    let mut any = false;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(entry) = entry else { continue };
        // A thread may exit between the listing and the read: skip it.
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        if let Some(ns) = text
            .split_whitespace()
            .next()
            .and_then(|x| x.parse::<u64>().ok())
        {
            total = total.saturating_add(ns);
            any = true;
        }
    }
    any.then_some(total)
}

/// The tick-sampled utime + stime of `pid`, in seconds.
fn proc_ticks(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / user_hz())
}

fn user_hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// One reading of the machine's CPU clocks (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(super) struct MachineClock {
    at: Instant,
    cpus: usize,
    /// idle + iowait + steal over all CPUs, seconds.
    not_ours: f64,
}

impl MachineClock {
    pub(super) fn now() -> MachineClock {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let at = Instant::now();
        let (cpus, not_ours) = parse_stat(&text);
        MachineClock { at, cpus, not_ours }
    }

    /// Busy CPU time of the whole machine since `earlier`, seconds (never negative).
    pub(super) fn busy_since(&self, earlier: &MachineClock) -> f64 {
        let wall = self.at.duration_since(earlier.at).as_secs_f64();
        let cpus = self.cpus.max(earlier.cpus) as f64;
        (cpus * wall - (self.not_ours - earlier.not_ours)).max(0.0)
    }
}

/// From `/proc/stat`: the number of CPUs (`cpuN` lines) and idle + iowait + steal summed over
/// them, in seconds.
fn parse_stat(text: &str) -> (usize, f64) {
    let mut lines = text.lines();
    let total = lines.next().unwrap_or_default();
    let cpus = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    // cpu user nice system idle iowait irq softirq steal guest guest_nice
    let v: Vec<f64> = total
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let field = |i: usize| v.get(i).copied().unwrap_or(0.0);
    (cpus.max(1), (field(3) + field(4) + field(7)) / user_hz())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_as_cpus_and_idle_iowait_steal() {
        let text = "cpu  100 5 50 1000 20 0 7 30 0 0\n\
                    cpu0 50 2 25 500 10 0 3 15 0 0\n\
                    cpu1 50 3 25 500 10 0 4 15 0 0\n\
                    intr 12345\n";
        let (cpus, not_ours) = parse_stat(text);
        assert_eq!(cpus, 2);
        assert!((not_ours - 1050.0 / user_hz()).abs() < 1e-9, "{not_ours}");
    }

    /// This thread's CPU time, seconds (`CLOCK_THREAD_CPUTIME_ID`: the same scheduler clock).
    fn thread_cpu() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for the call to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
    }

    #[test]
    fn a_busy_thread_is_counted_by_its_run_time() {
        // This thread runs for 50 ms of its own CPU time: the process's run time grows by at
        // least that, and the machine is busy at least about that much (its idle field has
        // USER_HZ resolution, 10 ms a reading).
        let pid = std::process::id();
        let (c0, m0, t0) = (proc_cpu(pid), MachineClock::now(), thread_cpu());
        let mut x = 0u64;
        while thread_cpu() - t0 < 0.050 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (c1, m1) = (proc_cpu(pid), MachineClock::now());
        let ran = c1.zip(c0).map(|(b, a)| b - a);
        assert!(
            ran.is_some_and(|s| s >= 0.049),
            "the spin's run time: {ran:?}"
        );
        let busy = m1.busy_since(&m0);
        assert!(busy > 0.025, "machine busy: {busy}");
    }
}
