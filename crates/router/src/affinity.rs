//! `--cpus LIST`: the CPUs the datapath threads run on.
//!
//! Principles: a datapath thread the kernel moves between CPUs starts over with cold caches and,
//! on a busy machine, waits behind whatever runs where it lands; software schedulers that run at
//! line rate pin their threads (DPDK's lcores, LibreQoS's XDP CPU map), and an operator who
//! keeps a core for the shaper (`isolcpus=`, a cpuset) needs to say which. `LIST` is the
//! kernel's cpulist syntax (cpuset(7): `0,2-3`). Datapath thread `i` — the single shaper is
//! thread 0, worker `i` of `--workers N` is thread `i` — is pinned to the `i`-th CPU of the list,
//! wrapping around when there are more workers than CPUs. The single shaper's helper threads —
//! the stats plane and the policy builder — then run on the other CPUs the process may use
//! ([`helper_cpus`]; on all of them if the datapath took every one): a thread inherits the
//! affinity of the thread that starts it, and a helper on the datapath's CPU (rendering a
//! scrape, parsing a reload) would compete with it. The workers' control thread stays where the
//! kernel puts it. The list is
//! checked against the CPUs this process may use (`sched_getaffinity(2)`) before anything
//! starts, and a CPU outside that set is an error that names it and the allowed set.

use std::io;

/// The highest CPU number `sched_setaffinity` takes with a `cpu_set_t` (`CPU_SETSIZE` − 1).
pub const MAX_CPU: usize = 1023;

/// Parse a cpulist (`0,2-3`): CPU numbers in the order given, ranges expanded, no repeats.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::new();
    if s.trim().is_empty() {
        return Err("an empty CPU list (give CPU numbers, e.g. 1 or 0,2-3)".into());
    }
    for item in s.split(',') {
        let item = item.trim();
        let num = |t: &str| -> Result<usize, String> {
            let n: usize = t.trim().parse().map_err(|_| {
                format!("`{t}` in `{s}` is not a CPU number (the list looks like 0,2-3)")
            })?;
            if n > MAX_CPU {
                return Err(format!(
                    "CPU {n} is beyond the highest CPU number, {MAX_CPU}"
                ));
            }
            Ok(n)
        };
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(item)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(format!(
                "the range `{item}` runs backwards (write {hi}-{lo})"
            ));
        }
        for c in lo..=hi {
            if out.contains(&c) {
                return Err(format!("CPU {c} is listed twice in `{s}`"));
            }
            out.push(c);
        }
    }
    Ok(out)
}

/// Format CPU numbers as a cpulist (`0-3,6`), ascending.
pub fn format_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs the calling thread may run on.
pub fn allowed() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads the set within its size (MAX_CPU < CPU_SETSIZE).
    Ok((0..=MAX_CPU)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Check `cpus` against the CPUs this process may use; the error names the first one outside.
pub fn check(cpus: &[usize]) -> Result<(), String> {
    let ok = allowed().map_err(|e| format!("sched_getaffinity: {e}"))?;
    match cpus.iter().find(|c| !ok.contains(c)) {
        Some(c) => Err(format!(
            "CPU {c} is not one this process may run on (allowed: {}; see nproc, taskset -p $$)",
            format_list(&ok)
        )),
        None => Ok(()),
    }
}

/// The CPU datapath thread `index` runs on, if `cpus` names any.
pub fn cpu_for(cpus: &[usize], index: usize) -> Option<usize> {
    (!cpus.is_empty()).then(|| cpus[index % cpus.len()])
}

/// The CPUs for the shaper's helper threads (the stats plane, the policy builder) when the
/// datapath threads are pinned to `cpus`: those this process may use but the datapath's, so no
/// helper competes with a datapath thread for its CPU — a thread inherits the affinity of the
/// thread that starts it, and the stats thread is started by the pinned loop. Every CPU this
/// process may use when that leaves none; `None` when `cpus` is empty (nothing is pinned).
/// Call before the loop pins itself.
pub fn helper_cpus(cpus: &[usize]) -> Option<Vec<usize>> {
    if cpus.is_empty() {
        return None;
    }
    let all = allowed().ok()?;
    let rest: Vec<usize> = all.iter().copied().filter(|c| !cpus.contains(c)).collect();
    Some(if rest.is_empty() { all } else { rest })
}

/// Let the calling thread run on any of `cpus` (a helper thread: [`helper_cpus`]).
pub fn pin_set(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c <= MAX_CPU) {
        // SAFETY: CPU_SET writes within the set (c ≤ MAX_CPU < CPU_SETSIZE).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("sched_setaffinity(CPUs {}): {e}", format_list(cpus)),
        ));
    }
    Ok(())
}

/// A helper thread (`what`) moves to `cpus` when given ([`helper_cpus`]); a refusal is a
/// warning (it then runs where it is).
pub(crate) fn run_helper_on(cpus: Option<&[usize]>, what: &str) {
    if let Some(c) = cpus {
        if let Err(e) = pin_set(c) {
            eprintln!("linkshare: warning: {what}: {e}");
        }
    }
}

/// Pin the calling thread to `cpu`.
pub fn pin(cpu: usize) -> io::Result<()> {
    if cpu > MAX_CPU {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond {MAX_CPU}"),
        ));
    }
    // SAFETY: an all-zero cpu_set_t is a valid empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("sched_setaffinity(CPU {cpu}): {e}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_parse_like_the_kernels() {
        assert_eq!(parse_list("1"), Ok(vec![1]));
        assert_eq!(parse_list("0,2-4"), Ok(vec![0, 2, 3, 4]));
        assert_eq!(parse_list(" 3 , 1 "), Ok(vec![3, 1]));
        for (bad, says) in [
            ("", "empty"),
            ("a", "not a CPU number"),
            ("1,,2", "not a CPU number"),
            ("4-2", "backwards"),
            ("1,1", "twice"),
            ("0-2,2", "twice"),
            ("5000", "beyond"),
            ("-1", "not a CPU number"),
        ] {
            let e = parse_list(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn lists_format_as_ranges_and_threads_wrap_around() {
        assert_eq!(format_list(&[3, 0, 1, 2, 6]), "0-3,6");
        assert_eq!(format_list(&[5]), "5");
        assert_eq!(format_list(&[]), "");
        assert_eq!(cpu_for(&[2, 5], 0), Some(2));
        assert_eq!(cpu_for(&[2, 5], 3), Some(5));
        assert_eq!(cpu_for(&[], 0), None);
    }

    #[test]
    fn helper_threads_keep_off_the_datapaths_cpus() {
        let ok = allowed().unwrap();
        assert_eq!(helper_cpus(&[]), None, "nothing pinned: helpers stay put");
        // The datapath on every CPU: the helpers may use them all.
        assert_eq!(helper_cpus(&ok), Some(ok.clone()));
        if ok.len() >= 2 {
            let rest = ok[1..].to_vec();
            assert_eq!(helper_cpus(&ok[..1]), Some(rest.clone()));
            // A helper started by the pinned thread inherits its pin; it moves off it.
            let first = ok[0];
            std::thread::spawn(move || {
                pin(first).unwrap();
                std::thread::spawn(move || {
                    assert_eq!(allowed().unwrap(), vec![first]);
                    run_helper_on(Some(&rest), "test helper");
                    assert_eq!(allowed().unwrap(), rest);
                })
                .join()
                .unwrap();
            })
            .join()
            .unwrap();
        }
    }

    #[test]
    fn a_thread_pins_to_an_allowed_cpu_and_a_foreign_one_is_named() {
        let ok = allowed().unwrap();
        assert!(!ok.is_empty());
        let last = *ok.last().unwrap();
        std::thread::spawn(move || {
            pin(last).unwrap();
            assert_eq!(allowed().unwrap(), vec![last]);
        })
        .join()
        .unwrap();
        assert!(check(&ok).is_ok());
        let e = check(&[MAX_CPU]).unwrap_err();
        assert!(e.contains(&format!("CPU {MAX_CPU}")), "{e}");
        assert!(e.contains(&format_list(&ok)), "{e}");
    }
}
