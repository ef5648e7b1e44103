//! The calling thread's CPU time and the process's resident set, for the benches that report
//! them beside the wall clock.

/// CPU time this thread has used, in seconds (Linux `CLOCK_THREAD_CPUTIME_ID`; 0 if unknown).
/// Beside the wall clock it shows what the run cost when other processes share the cores: time
/// the thread spent preempted counts in the wall time only.
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call writes only to it.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Resident set size of this process in bytes (Linux), 0 if unknown.
pub(crate) fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
