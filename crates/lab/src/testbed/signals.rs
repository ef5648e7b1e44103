//! Signals and scheduling priority for a lab run.
//!
//! SIGINT and SIGTERM only set a flag ([`interrupted`]) that the run loops poll, so a stopped run
//! unwinds the ordinary way and every namespace and child goes through `Drop`; the handler does
//! nothing but an atomic store, which is async-signal-safe (signal-safety(7)). The lab raises
//! its own priority so that background load on the machine does not turn into lost link time.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::bail;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Nice value of the lab's threads and of the router it starts (they inherit it).
pub const LAB_NICE: i32 = -10;

/// Run the lab's traffic threads and its router ahead of whatever else the machine does: a
/// userspace shaper or a socket writer that waits for a CPU turns background load into lost link
/// time (a shaper starved on a busy 2-core machine sent 43.7 of 50 Mbit/s). Threads and processes
/// started afterwards inherit the nice value. Returns a note when it could not be raised.
pub fn raise_priority() -> Option<String> {
    // SAFETY: plain system call on the calling thread (Linux's per-thread nice).
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, LAB_NICE) };
    (r != 0).then(|| {
        format!(
            "the lab could not raise its priority (nice {LAB_NICE}: {}): other load on the machine can cost the real run link time",
            std::io::Error::last_os_error()
        )
    })
}

/// Make SIGINT and SIGTERM set the flag [`interrupted`] reads instead of killing the process, so
/// a run stops at its next check and cleans up through `Drop`.
pub fn install_signal_handlers() -> anyhow::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler only stores to an
        // atomic, which is async-signal-safe.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            bail!(
                "cannot install the signal handler: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived (after [`install_signal_handlers`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
