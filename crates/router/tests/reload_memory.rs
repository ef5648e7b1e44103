//! Memory after any number of reloads is what a fresh start of the same policy uses (issue 35
//! §6): the heap a running scheduler holds, counted by a global allocator, after 30 reloads
//! that add, remove and change classes (each new tree taking over the running one's state, the
//! replaced one dropped) against the heap of the last policy built afresh.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use linkshare_router::{adopt_state, load_sched};

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// `n` subscribers from `first` on (fq_codel leaves, one /32 each) under two sites; subscriber
/// `first + 1`'s rate is `kbit`.
fn policy(first: usize, n: usize, kbit: u64) -> String {
    let mut s = String::from(
        "qdisc = \"htb\"\ndefault = \"other\"\n[[class]]\nname = \"root\"\nrate = \"10gbit\"\n\
         [[class]]\nname = \"other\"\nparent = \"root\"\nrate = \"10mbit\"\n",
    );
    for site in 0..2 {
        s += &format!("[[class]]\nname = \"site{site}\"\nparent = \"root\"\nrate = \"4gbit\"\n");
    }
    for k in first..first + n {
        let rate = if k == first + 1 { kbit } else { 1000 };
        s += &format!(
            "[[class]]\nname = \"sub{k}\"\nparent = \"site{}\"\nrate = \"{rate}kbit\"\n\
             ceil = \"100mbit\"\nleaf = {{ type = \"fq_codel\" }}\n\
             [[filter]]\nclass = \"sub{k}\"\ndst = \"10.{}.{}.{}/32\"\n",
            k % 2,
            (k >> 16) & 255,
            (k >> 8) & 255,
            k & 255
        );
    }
    s
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The tests of this file one at a time: the count of live bytes is the process's.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn memory_after_many_reloads_is_a_fresh_starts() {
    let _one = alone();
    const N: usize = 2000;
    const RELOADS: usize = 30;
    let text = |i: usize| policy(i * 7, N + i % 3, 1000 + 100 * i as u64);
    let (_, mut running) = load_sched(&text(0), "p0.toml").expect("valid");
    let mut now = linkshare_core::Time(0);
    for i in 1..=RELOADS {
        let (_, mut new) = load_sched(&text(i), &format!("p{i}.toml")).expect("valid");
        now = linkshare_core::Time(now.0 + 1_000_000);
        let r = adopt_state(&mut new, &mut running, now);
        assert!(!r.added.is_empty() && !r.removed.is_empty(), "reload {i}");
        running = new;
    }
    // The heap the running scheduler holds: what is freed when it goes.
    let before = live();
    drop(running);
    let held = before - live();
    let before = live();
    let (_, fresh) = load_sched(&text(RELOADS), "fresh.toml").expect("valid");
    let fresh_held = live() - before;
    drop(fresh);
    eprintln!("after {RELOADS} reloads: {held} B held; a fresh start: {fresh_held} B");
    assert!(fresh_held > 0);
    // Within 2 % (a vector's spare capacity may differ with the order things were added).
    assert!(
        (held - fresh_held).abs() * 50 <= fresh_held,
        "after {RELOADS} reloads the scheduler holds {held} B, a fresh one {fresh_held} B"
    );
}

/// The same with the take-over in steps the shaper uses (`Htb::adopt_begin`, `adopt_step`,
/// 256 classes a step, the finished old tree dropped): nothing of the old trees is kept.
#[test]
fn memory_after_many_reloads_in_steps_is_a_fresh_starts() {
    let _one = alone();
    use linkshare_core::htb::AdoptMap;
    use linkshare_router::Sched;
    const N: usize = 2000;
    const RELOADS: usize = 30;
    let text = |i: usize| policy(i * 7, N + i % 3, 1000 + 100 * i as u64);
    let htb = |s: Sched| match s {
        Sched::Htb(h) => h,
        _ => panic!("an HTB policy built something else"),
    };
    let (_, running) = load_sched(&text(0), "p0.toml").expect("valid");
    let mut running = htb(running);
    let mut now = linkshare_core::Time(0);
    let mut times = Vec::new();
    for i in 1..=RELOADS {
        let (_, new) = load_sched(&text(i), &format!("p{i}.toml")).expect("valid");
        let mut new = htb(new);
        now = linkshare_core::Time(now.0 + 1_000_000);
        let to_new: Vec<_> = (0..running.len() as u32)
            .map(|c| running.class_name(c).and_then(|n| new.class_id(&n)))
            .collect();
        let map = AdoptMap::new(&to_new, new.len());
        assert!(
            map.kept() < running.len() && map.kept() < new.len(),
            "reload {i}"
        );
        let t0 = std::time::Instant::now();
        new.adopt_begin(running, map, now);
        times.push(t0.elapsed());
        let mut steps = 0;
        loop {
            let t0 = std::time::Instant::now();
            let done = new.adopt_step(now, 256);
            times.push(t0.elapsed());
            match done {
                Some(old) => {
                    // Freed where the shaper frees it (its builder thread), not in a step.
                    drop(old);
                    break;
                }
                None => steps += 1,
            }
        }
        assert!(steps >= N / 256, "reload {i}: {steps} steps");
        running = new;
    }
    let before = live();
    drop(running);
    let held = before - live();
    let before = live();
    let (_, fresh) = load_sched(&text(RELOADS), "fresh.toml").expect("valid");
    let fresh_held = live() - before;
    drop(fresh);
    times.sort();
    eprintln!(
        "after {RELOADS} reloads in steps: {held} B held; a fresh start: {fresh_held} B; \
         steps (and swaps) median {:?}, p99 {:?}, longest {:?} (figures, not bounds tested: \
         timing depends on the machine)",
        times[times.len() / 2],
        times[times.len() * 99 / 100],
        times[times.len() - 1]
    );
    assert!(fresh_held > 0);
    assert!(
        (held - fresh_held).abs() * 50 <= fresh_held,
        "after {RELOADS} reloads the scheduler holds {held} B, a fresh one {fresh_held} B"
    );
}
