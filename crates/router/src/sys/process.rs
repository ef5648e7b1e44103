//! The calling thread and process: CLOCK_MONOTONIC and sleeping on it, scheduling (SCHED_FIFO,
//! nice, timer slack), memory (locking, giving freed pages back, the machine's total) and the
//! umask.
//!
//! ## Principles
//! * **One clock**: everything here that reads or waits for time uses CLOCK_MONOTONIC, the
//!   base of the shaper's `Time` (clock.rs).
//! * **Errors say what to grant**: a refused priority names the capability or limit that
//!   would allow it.

use std::io;

use super::cvt;

/// The machine's physical memory in bytes (`sysinfo`), `None` if it cannot be read.
// `totalram` is a c_ulong: u64 here, u32 on 32-bit targets.
#[allow(clippy::useless_conversion)]
pub fn total_memory() -> Option<u64> {
    // SAFETY: all-zero is a valid sysinfo.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `si` is a valid sysinfo for the kernel to fill.
    let r = unsafe { libc::sysinfo(&mut si) };
    (r == 0).then(|| u64::from(si.totalram).saturating_mul(u64::from(si.mem_unit.max(1))))
}

/// Set the process umask, returning the previous one.
pub fn umask(mask: u32) -> u32 {
    // SAFETY: umask cannot fail.
    unsafe { libc::umask(mask as libc::mode_t) as u32 }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID), in nanoseconds: what a
/// piece of work cost the thread itself, whatever else ran on its CPU meanwhile (a piece whose
/// wall time is well above it waited: preempted, or blocked on a lock or a page). A system call
/// (the vDSO serves only the wall clocks), so read around pieces of work, never per packet.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's context switches so far (`getrusage(RUSAGE_THREAD)`): (voluntary —
/// it blocked: a lock, a page read, a wait —, involuntary — the kernel preempted it). Zeros if
/// the call fails.
pub fn thread_switches() -> (u64, u64) {
    // SAFETY: all-zero is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid rusage for the kernel to fill.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if r != 0 {
        return (0, 0);
    }
    (ru.ru_nvcsw as u64, ru.ru_nivcsw as u64)
}

/// Sleep until CLOCK_MONOTONIC reaches `at_ns` (at once if it has). A signal cuts the sleep
/// short, which is harmless here: the caller's loop looks at its events next.
pub fn sleep_until_ns(at_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null with
    // TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Put the calling thread under `SCHED_FIFO` at `prio` (1–99): it then runs as soon as it
/// wakes, ahead of every ordinary task (the kernel's RT throttling, 95 % of each second by
/// default, still leaves the others a share if it spins).
pub fn set_fifo(prio: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: prio.into(),
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    cvt(r).map(|_| ()).map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EPERM) {
            " (needs CAP_SYS_NICE or an RLIMIT_RTPRIO of at least this priority; systemd: \
             AmbientCapabilities=CAP_SYS_NICE or CPUSchedulingPolicy=fifo)"
        } else {
            ""
        };
        io::Error::new(
            e.kind(),
            format!("sched_setscheduler(SCHED_FIFO, {prio}): {e}{hint}"),
        )
    })
}

/// `struct sched_attr` as far as its first version (include/uapi/linux/sched/types.h:
/// `SCHED_ATTR_SIZE_VER0`, 48 bytes).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Ask the fair scheduler for a time slice of `ns` for the calling thread (an ordinary thread;
/// its nice value is kept). Under EEVDF (Linux 6.12 and later; sched-eevdf.rst, "custom
/// slices") a task with a shorter slice gets an earlier virtual deadline, so when it wakes it
/// preempts a task running a longer slice at once instead of waiting for that slice to end;
/// its share of the CPU is unchanged. The kernel clamps the slice to 0.1–100 ms; older kernels
/// ignore it. Needs no privilege.
pub fn set_slice(ns: u64) -> io::Result<()> {
    // SAFETY: getpriority takes integers only; errno is cleared first, as -1 is a valid nice.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: ns,
        deadline: 0,
        period: 0,
    };
    // SAFETY: `attr` is a valid sched_attr of the size it states; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    cvt(r as i32)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("sched_setattr(slice {ns} ns): {e}")))
}

/// Put the calling thread under `SCHED_BATCH`: the fair scheduler's share, at the same weight,
/// but its wake-ups never preempt the running task (sched(7)). For threads whose latency does
/// not matter and that must not delay the datapath when they wake (the stats plane).
pub fn set_batch() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    cvt(r)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("sched_setscheduler(SCHED_BATCH): {e}")))
}

/// Set the calling thread's nice value (-20..=19; lower runs sooner under the fair scheduler).
pub fn set_nice(n: i8) -> io::Result<()> {
    // SAFETY: plain system call; `who` 0 with PRIO_PROCESS is the calling thread on Linux.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n.into()) };
    cvt(r).map(|_| ()).map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EACCES) {
            " (a negative value needs CAP_SYS_NICE or RLIMIT_NICE)"
        } else {
            ""
        };
        io::Error::new(e.kind(), format!("setpriority({n}): {e}{hint}"))
    })
}

/// Lock the process's pages in memory, present and future, so the datapath never waits for a
/// page fault.
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: mlockall takes flags only.
    let r = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    cvt(r)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("mlockall: {e}")))
}

/// Give the pages of freed heap memory back to the system (glibc's `malloc_trim(0)`, which also
/// releases whole free pages inside the heap, not only at its top). A build's temporaries (the
/// parsed document, the class specs, the classifier's sort buffers) are freed in between what
/// stays, so without it the resident set after start keeps them. Called at start, before the
/// loop runs, and nowhere else: `malloc_trim` holds each arena's lock while it walks that
/// arena's free blocks (milliseconds for a heap that held a 100,000-class tree), and the
/// loop's next allocation in that arena waits for it — on the builder thread, after a reload,
/// it did (the loop blocked on it for 388 ms on a loaded machine). Memory a reload frees stays
/// in the allocator's free lists and is reused by the next build.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a size only and touches only the allocator's free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Make every `free` coalesce the block at once, under its arena's lock, in the thread that
/// frees it (glibc's `mallopt(M_MXFAST, 0)`: no "fast bins"). With fast bins, a block freed is
/// only parked, and the coalescing of everything parked is done by the next allocation of a
/// block of 1 KiB or more *in that arena, by whichever thread makes it*: the builder thread
/// frees the running policy the loop's thread built at start (300,000 small blocks at 100,000
/// subscribers), and the loop's next such allocation then did that work, ~2-3 ms (the longest
/// pause of a full reload; docs/router.md, "Reload"). Process-wide; called when the builder
/// thread starts. Small blocks still come from each thread's own cache (tcache) first.
pub fn free_blocks_at_once() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and only changes the allocator's parameters.
    unsafe {
        libc::mallopt(libc::M_MXFAST, 0);
    }
}

/// Set this thread's timer slack to 1 ns (the default 50 µs would round every timer wake-up).
pub fn set_min_timer_slack() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    cvt(r)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("prctl(PR_SET_TIMERSLACK): {e}")))
}
