//! The machine's own floor under pacing lateness: how late *any* loop would be, measured with
//! nothing but a thread that reads the clock as fast as it can (like rt-tests' `hwlatdetect`).
//!
//! Principles: every gap between two clock reads longer than [`GAP_NS`] is time the thread did
//! not run (an interrupt, the tick, the hypervisor, another task). A departure due at a random
//! instant inside a gap of length g leaves when the gap ends, so its lateness is uniform on
//! [0, g]; over a run of length T, P(lateness > x) = Σ max(0, g − x) / T. The quantiles of that
//! distribution are what a perfect shaper loop (no work of its own, spinning through every
//! wait) would measure on this machine: a p99 above the target here means the target
//! cannot be met on this machine by any loop that shares its CPU with the kernel. O(gaps log
//! gaps) after the run; the run itself is one clock read per turn. The loop sleeps
//! [`REST_NS`] after every [`SPIN_NS`] of spinning (not counted): a real-time thread that never
//! sleeps is stopped for 50 ms a second by the kernel's fair server (or RT throttling), which
//! is a property of the spin, not of the machine.
//!
//! A loop that *sleeps* between departures (the shaper's default: it arms a timer a learnt
//! margin early and spins only the rest, `linkshare_router::wake`) has a second floor: how late
//! the timer wakes a sleeping thread. On a VM that is the host's latency in resuming a halted
//! vCPU, not the guest's. [`measure_sleeper`] arms an absolute `CLOCK_MONOTONIC` timerfd a fixed
//! period ahead and waits for it in `epoll_wait`, as the shaper's loop does, and records how
//! late each wake-up is: the margin a sleeping loop would need to cover a given quantile.

use std::os::fd::AsRawFd;
use std::time::Instant;

use linkshare_router::sys;

/// Gaps shorter than this are the loop's own turn, not time taken away.
const GAP_NS: u64 = 1_000;
/// Spin this long, then rest [`REST_NS`] (the rest is neither a gap nor run time).
const SPIN_NS: u64 = 10_000_000;
const REST_NS: u64 = 1_000_000;

/// Lateness quantiles (µs) a perfect loop would see: p50, p99, max, and the gaps per second
/// longer than 20 µs.
pub(super) struct Floor {
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    pub(super) max_us: f64,
    pub(super) gaps_over_20us_per_s: f64,
}

/// Spin for `secs` on a fresh thread, under `SCHED_FIFO` at priority `fifo` if given.
pub(super) fn measure(secs: f64, fifo: Option<i32>) -> anyhow::Result<Floor> {
    let h = std::thread::spawn(move || -> anyhow::Result<(Vec<u64>, u64)> {
        if let Some(prio) = fifo {
            let p = libc::sched_param {
                sched_priority: prio,
            };
            // SAFETY: a valid sched_param; pid 0 is this thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
                anyhow::bail!(
                    "sched_setscheduler(SCHED_FIFO): {}",
                    std::io::Error::last_os_error()
                );
            }
        }
        let total = (secs * 1e9) as u64;
        let mut gaps = Vec::new();
        let mut run = 0u64;
        while run < total {
            let t0 = Instant::now();
            let mut prev = 0u64;
            loop {
                let now = t0.elapsed().as_nanos() as u64;
                if now - prev > GAP_NS {
                    gaps.push(now - prev);
                }
                prev = now;
                if now >= SPIN_NS {
                    break;
                }
            }
            run += prev;
            std::thread::sleep(std::time::Duration::from_nanos(REST_NS));
        }
        Ok((gaps, run))
    });
    let (gaps, total) = h
        .join()
        .map_err(|_| anyhow::anyhow!("the spin thread panicked"))??;
    Ok(quantiles(gaps, total))
}

/// Timer wake-up lateness (µs) of a thread that sleeps `period_us` between wake-ups.
pub(super) struct Sleeper {
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    pub(super) p999_us: f64,
    pub(super) max_us: f64,
    pub(super) wakes: usize,
}

/// Sleep `period_us` at a time on a timerfd for `secs`, on a fresh thread.
pub(super) fn measure_sleeper(secs: f64, period_us: u64) -> anyhow::Result<Sleeper> {
    let h = std::thread::spawn(move || -> anyhow::Result<Vec<u64>> {
        let ep = sys::epoll_create()?;
        let timer = sys::timerfd_create()?;
        sys::epoll_add(ep.as_raw_fd(), timer.as_raw_fd(), 1)?;
        let end = sys::monotonic_ns() + (secs * 1e9) as u64;
        let mut late = Vec::new();
        let mut ready = Vec::new();
        loop {
            let at = sys::monotonic_ns() + period_us * 1_000;
            if at > end {
                break;
            }
            sys::timerfd_set_abs(timer.as_raw_fd(), at)?;
            loop {
                sys::epoll_wait(ep.as_raw_fd(), &mut ready, 1_000)?;
                if !ready.is_empty() {
                    break;
                }
            }
            late.push(sys::monotonic_ns().saturating_sub(at));
            sys::read_some(timer.as_raw_fd(), &mut [0u8; 8]);
        }
        Ok(late)
    });
    let late = h
        .join()
        .map_err(|_| anyhow::anyhow!("the sleeping thread panicked"))??;
    Ok(sleeper_quantiles(late))
}

fn sleeper_quantiles(mut late: Vec<u64>) -> Sleeper {
    late.sort_unstable();
    let q = |f: f64| {
        let i = ((late.len().max(1) - 1) as f64 * f).round() as usize;
        late.get(i).copied().unwrap_or(0) as f64 / 1e3
    };
    Sleeper {
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: late.last().copied().unwrap_or(0) as f64 / 1e3,
        wakes: late.len(),
    }
}

/// The lateness distribution of a random instant over a run of `total` ns with these gaps.
fn quantiles(mut gaps: Vec<u64>, total: u64) -> Floor {
    gaps.sort_unstable();
    let total = total.max(1) as f64;
    // P(lateness > x) = Σ max(0, g − x) / total, decreasing in x: bisect for each quantile.
    let tail = |x: f64| gaps.iter().map(|&g| (g as f64 - x).max(0.0)).sum::<f64>() / total;
    let max = gaps.last().copied().unwrap_or(0) as f64;
    let quantile = |q: f64| {
        if tail(0.0) <= 1.0 - q {
            return 0.0;
        }
        let (mut lo, mut hi) = (0.0, max);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if tail(mid) > 1.0 - q {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    };
    let over = gaps.iter().filter(|&&g| g > 20_000).count() as f64;
    Floor {
        p50_us: quantile(0.50) / 1e3,
        p99_us: quantile(0.99) / 1e3,
        max_us: max / 1e3,
        gaps_over_20us_per_s: over / (total / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_instant_is_late_by_what_is_left_of_its_gap() {
        // 1 s with ten 2 ms gaps: 2 % of instants fall in a gap, uniformly late 0-2 ms, so
        // P(late > x) = 10 · (2 ms − x) / 1 s, which is 1 % at x = 1 ms.
        let f = quantiles(vec![2_000_000; 10], 1_000_000_000);
        assert!((f.p99_us - 1_000.0).abs() < 1.0, "{}", f.p99_us);
        assert_eq!(f.p50_us, 0.0);
        assert_eq!(f.max_us, 2_000.0);
        assert_eq!(f.gaps_over_20us_per_s, 10.0);
        // No gap at all: never late.
        let f = quantiles(vec![], 1_000_000_000);
        assert_eq!((f.p50_us, f.p99_us, f.max_us), (0.0, 0.0, 0.0));
    }

    #[test]
    fn a_sleepers_quantiles_are_of_its_wake_ups() {
        // 1,000 wake-ups: 989 on time (1 µs late), ten 100 µs late, one 5 ms late.
        let mut late = vec![1_000u64; 989];
        late.extend([100_000; 10]);
        late.push(5_000_000);
        let s = sleeper_quantiles(late);
        assert_eq!((s.p50_us, s.p99_us, s.max_us), (1.0, 100.0, 5_000.0));
        assert_eq!(s.p999_us, 100.0);
        assert_eq!(s.wakes, 1_000);
    }
}
