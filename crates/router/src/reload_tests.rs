//! A reload frees nothing on the loop that grows with the policy: installing a rebuilt HTB
//! (swap, O(1)) and every step of its take-over free at most a few temporaries on the loop's
//! thread; the old tree, its filters, the old policy's text and circuit ids go to the builder
//! thread. Counted by a global allocator that counts, per thread, what is freed while a flag is
//! up (the test's thread plays the loop).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};

use linkshare_config::Policy;
use linkshare_core::Time;

use crate::builder::{build_now_on, Plan, Source};
use crate::circuits::Circuits;
use crate::dir::{Dir, Sched, ADOPT_CHUNK, ADOPT_STEP_MAX};
use crate::patch::Base;
use crate::reload::install_ready;

/// The system allocator; while `WATCH` is up on a thread, what that thread frees (or moves by
/// `realloc`) is counted there.
struct PerThread;

thread_local! {
    static WATCH: Cell<bool> = const { Cell::new(false) };
    /// (frees, bytes freed, largest free).
    static FREED: Cell<(u64, u64, u64)> = const { Cell::new((0, 0, 0)) };
}

fn count_free(size: usize) {
    let _ = WATCH.try_with(|w| {
        if w.get() {
            let _ = FREED.try_with(|f| {
                let (n, b, m) = f.get();
                f.set((n + 1, b + size as u64, m.max(size as u64)));
            });
        }
    });
}

// SAFETY: every call goes to the system allocator unchanged; only thread-local counters (const
// initialised, no destructor, so never allocating) are kept.
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        count_free(l.size());
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count_free(l.size());
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: PerThread = PerThread;

/// What this thread freed while `f` ran: (frees, bytes, largest).
fn freed_by<T>(f: impl FnOnce() -> T) -> (T, (u64, u64, u64)) {
    FREED.with(|c| c.set((0, 0, 0)));
    WATCH.with(|w| w.set(true));
    let r = f();
    WATCH.with(|w| w.set(false));
    (r, FREED.with(|c| c.get()))
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lsreload-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// A policy of subscribers `range` (fq_codel leaves, a /32 and a circuit id each) under two
/// sites, from a subscriber table, written to `dir`, the default class `other` at `prio`; its
/// path.
fn write_policy(dir: &Path, range: std::ops::Range<usize>, prio: u8) -> PathBuf {
    let csv = dir.join("subs.csv");
    let mut t = String::from("name,parent,plan,addresses,id\n");
    for k in range {
        t += &format!(
            "sub{k},site{},plan,10.{}.{}.{}/32,C-{k}\n",
            k % 2,
            (k >> 16) & 255,
            (k >> 8) & 255,
            k & 255
        );
    }
    std::fs::write(&csv, t).expect("write csv");
    let p = dir.join("p.toml");
    let text = format!(
        "qdisc = \"htb\"\ndefault = \"other\"\nsubscribers = \"subs.csv\"\n\
                [[class]]\nname = \"root\"\nrate = \"10gbit\"\n\
                [[class]]\nname = \"other\"\nparent = \"root\"\nrate = \"10mbit\"\nprio = {prio}\n\
                [[class]]\nname = \"site0\"\nparent = \"root\"\nrate = \"4gbit\"\n\
                [[class]]\nname = \"site1\"\nparent = \"root\"\nrate = \"4gbit\"\n\
                [[plan]]\nname = \"plan\"\nrate = \"50kbit\"\nceil = \"100mbit\"\n\
                leaf = {{ type = \"fq_codel\" }}\n"
    );
    std::fs::write(&p, text).expect("write policy");
    p
}

/// A UDP frame to `dst`.
fn frame_to(dst: std::net::Ipv4Addr, port: u16) -> crate::Frame {
    use linkshare_core::wire::{self, BuildSpec};
    let mut spec = BuildSpec::udp(std::net::Ipv4Addr::new(192, 0, 2, 1), port, dst, 9);
    spec.payload_len = 100;
    let mut bytes = Vec::new();
    wire::build_ethernet(&mut bytes, &spec);
    match crate::frame::parse_frame(bytes) {
        crate::frame::Parsed::Ip(f) => f,
        other => panic!("test frame did not parse: {other:?}"),
    }
}

/// A direction running the policy at `path`, the circuit ids, and the policy as the builder
/// thread holds it.
fn start(path: &Path) -> (Dir, Circuits, Option<Base>) {
    let text = std::fs::read_to_string(path).expect("read");
    let policy = Policy::parse(&text, &path.display().to_string()).expect("valid");
    let sched = crate::builder::sched_of(&policy, &text).expect("built");
    let mut d = Dir::new(Some(sched), Some(path.to_path_buf()), 1, None);
    d.policy_text = Some((text, path.display().to_string()));
    let circuits = Circuits::default();
    circuits.set(0, crate::circuits::ids_of(&policy));
    (d, circuits, Some(Base::new(policy)))
}

/// Three frames to each of subscribers `ks`, queued (most of them stay queued).
fn queue_to(d: &mut Dir, ks: impl Iterator<Item = usize>, now: Time) {
    for k in ks {
        let dst = std::net::Ipv4Addr::new(10, (k >> 16) as u8, (k >> 8) as u8, k as u8);
        for port in 0..3 {
            assert!(d
                .handle_frame(frame_to(dst, port), now, &mut |_| {})
                .is_none());
        }
    }
    d.end_burst(now, &mut |_| {});
}

#[test]
fn nothing_of_a_reload_is_freed_on_the_loop() {
    const N: usize = 4000;
    let dir = scratch("free");
    let path = write_policy(&dir, 0..N, 0);
    let (mut d, circuits, mut base) = start(&path);
    // Traffic queued in many classes, the one to be removed among them: their fq_codel
    // tables are allocated, and the take-over moves their packets.
    let mut now = Time(1_000_000);
    queue_to(&mut d, (0..N).step_by(7).chain([N - 1]), now);
    let queued = d.backlog_packets();
    assert!(queued > 1000, "{queued} queued");
    // The next policy: the last subscriber gone, one added, and the default class at another
    // prio (not in place: a rebuild); built and compared off the loop.
    write_policy(&dir, 0..N - 1, 1);
    let mut t = std::fs::read_to_string(dir.join("subs.csv")).expect("read");
    t += &format!("sub{N},site0,plan,10.200.0.1/32,C-{N}\n");
    std::fs::write(dir.join("subs.csv"), t).expect("write");
    let ready = build_now_on(Source::File(path.clone()), Some(&mut base)).expect("built");
    assert!(ready.takeover.is_some(), "a rebuild with its take-over");
    now = Time(now.0 + 1_000_000);
    let mut bin: Vec<Box<dyn Send>> = Vec::new();
    // The install: O(1), frees nothing of the policy.
    let ((outcome, garbage), (n, bytes, largest)) =
        freed_by(|| install_ready(&mut d, &circuits, 0, ready, now));
    let report = outcome.expect("installed");
    assert_eq!((report.added.len(), report.removed.len()), (1, 1));
    assert!(
        bytes < 16 << 10,
        "the install freed {n} blocks, {bytes} B (largest {largest} B) on the loop"
    );
    assert!(garbage.len() >= 2, "the old text and ids go to the builder");
    bin.extend(garbage);
    // The steps (never out of time here: each takes ADOPT_STEP_MAX old classes); what one
    // frees on the loop is its temporaries (a packet list per class moved), never the old
    // tree's records or leaves.
    let mut steps = 0;
    let mut worst = (0, 0, 0);
    loop {
        now = Time(now.0 + 10_000);
        let ((done, _), f) = freed_by(|| d.adopt_step(now, &|| false));
        worst = (worst.0.max(f.0), worst.1.max(f.1), worst.2.max(f.2));
        steps += 1;
        if let Some(old) = done {
            bin.push(Box::new(old));
            break;
        }
        assert!(steps < 2 * N, "the take-over never ends");
    }
    assert!(steps >= N / ADOPT_STEP_MAX, "{steps} steps");
    assert_eq!(d.backlog_packets(), queued, "every packet moved, none lost");
    // What the builder thread frees is the bulk: the old tree and what the install replaced.
    let (_, (_, binned, _)) = freed_by(|| drop(bin));
    eprintln!(
        "install freed {bytes} B in {n} blocks on the loop; a step at most {} B in {} blocks \
         (largest {} B); the builder thread freed {binned} B",
        worst.1, worst.0, worst.2
    );
    // Per step: temporaries (a packet list per class taken over, a vector of the new tree
    // grown), never the old tree's records, leaves or queues: a small share of what goes.
    assert!(
        worst.1 * 50 < binned,
        "a step freed up to {} B in {} blocks (largest {} B) on the loop; the old tree {binned} B",
        worst.1,
        worst.0,
        worst.2
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// At 100,000 subscribers, a full rebuild's take-over is steps of bounded work: a step takes
/// [`ADOPT_CHUNK`] old classes between two looks at the clock and stops at the first look that
/// says its time is up, and never more than [`ADOPT_STEP_MAX`] classes whatever the clock says;
/// every class is taken over once and every queued packet moved. Counted in classes and
/// packets (the clock is the test's: how many looks a step gets before its time is up).
#[test]
fn at_100k_subscribers_no_take_over_step_takes_more_than_its_bound() {
    use std::cell::Cell;
    const N: usize = 100_000;
    let dir = scratch("steps");
    let path = write_policy(&dir, 0..N, 0);
    let text = std::fs::read_to_string(&path).expect("read");
    let policy = Policy::parse(&text, &path.display().to_string()).expect("valid");
    let sched = crate::builder::sched_of(&policy, &text).expect("built");
    let mut d = Dir::new(Some(sched), Some(path.clone()), 1, None);
    d.policy_text = Some((text, path.display().to_string()));
    let circuits = Circuits::default();
    let mut base = Some(Base::new(policy));
    let mut now = Time(1_000_000);
    for k in (0..N).step_by(997) {
        let dst = std::net::Ipv4Addr::new(10, (k >> 16) as u8, (k >> 8) as u8, k as u8);
        assert!(d.handle_frame(frame_to(dst, 1), now, &mut |_| {}).is_none());
    }
    d.end_burst(now, &mut |_| {});
    let queued = d.backlog_packets();
    assert!(queued >= 100, "{queued} queued");
    // The last subscriber gone and the default class at another prio: a new tree, taken over
    // in steps.
    write_policy(&dir, 0..N - 1, 1);
    let ready = build_now_on(Source::File(path.clone()), Some(&mut base)).expect("built");
    let total = match &d.sched {
        Some(crate::Sched::Htb(h)) => h.len(),
        _ => panic!("not an HTB"),
    };
    assert!(total > N, "{total} classes");
    let (outcome, garbage) = install_ready(&mut d, &circuits, 0, ready, now);
    assert_eq!(outcome.expect("installed").removed.len(), 1);
    // A step whose clock says "time is up" at its k-th look: k chunks, unless the classes left
    // are fewer; a clock that never says so: ADOPT_STEP_MAX classes.
    let mut taken = 0;
    let mut steps = 0;
    let mut old = None;
    for k in [1usize, 3, 40, usize::MAX].into_iter().cycle() {
        now = Time(now.0 + 50_000);
        let looks = Cell::new(0usize);
        let (done, n) = d.adopt_step(now, &|| {
            looks.set(looks.get() + 1);
            looks.get() >= k
        });
        steps += 1;
        let bound = ADOPT_STEP_MAX.min(k.saturating_mul(ADOPT_CHUNK));
        assert!(n <= bound, "step {steps} took {n} classes (bound {bound})");
        taken += n;
        if let Some(o) = done {
            old = Some(o);
            break;
        }
        assert_eq!(n, bound, "step {steps} stopped early: {n} classes");
        assert!(steps < total, "the take-over never ends");
    }
    assert_eq!(taken, total, "every old class taken over once");
    assert!(old.is_some() && !d.adopting());
    assert_eq!(d.backlog_packets(), queued, "every packet moved, none lost");
    drop((old, garbage));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Blocks this thread allocated and another thread frees (the builder freeing the policy built
/// at start) are coalesced by the thread that frees them: none is left parked in glibc's fast
/// bins for this thread's next allocation to coalesce (`sys::free_blocks_at_once`, set when the
/// builder starts). `fsmblks` is the bytes parked in fast bins, over every arena.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn frees_on_the_builder_leave_no_work_for_the_loop() {
    let b = crate::builder::Builder::start(false, None).expect("builder");
    let small: Vec<Box<[u8; 40]>> = (0..20_000).map(|i| Box::new([i as u8; 40])).collect();
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let parked = || unsafe { libc::mallinfo2() }.fsmblks;
    let before = parked();
    std::thread::spawn(move || drop(small))
        .join()
        .expect("the freeing thread");
    let after = parked();
    assert!(
        after <= before,
        "{} B parked in fast bins by another thread's frees",
        after - before
    );
    drop(b);
}

/// Every class's numbers, by slot (`None` for a slot retired in place).
fn views(d: &Dir) -> Vec<Option<linkshare_core::htb::CounterView>> {
    match &d.sched {
        Some(Sched::Htb(h)) => (0..h.len() as u32).map(|c| h.counter_view(c)).collect(),
        _ => panic!("not an HTB"),
    }
}

/// Subscribers `range` and `extra` written as the next policy.
fn next_policy(dir: &Path, range: std::ops::Range<usize>, extra: &[usize]) -> PathBuf {
    let p = write_policy(dir, range, 0);
    let mut t = std::fs::read_to_string(dir.join("subs.csv")).expect("read");
    for k in extra {
        t += &format!(
            "sub{k},site{},plan,10.200.{}.{}/32,C-{k}\n",
            k % 2,
            k >> 8 & 255,
            k & 255
        );
    }
    std::fs::write(dir.join("subs.csv"), t).expect("write");
    p
}

/// A reload that removes one subscriber among thousands and adds another is applied to the
/// running tree in place: the reply says so and names them; no other class changes (but the
/// default class, which takes the removed subscriber's packets, and its site, whose total keeps
/// what it sent); no packet is lost; the loop frees nothing that grows with the policy; and the
/// next such reload reuses the retired slot, so the tree does not grow.
#[test]
fn a_subscriber_added_and_removed_among_many_is_applied_in_place() {
    const N: usize = 4000;
    let dir = scratch("inplace");
    let path = write_policy(&dir, 0..N, 0);
    let (mut d, circuits, mut base) = start(&path);
    let mut now = Time(1_000_000);
    queue_to(&mut d, (0..N).step_by(7).chain([N - 1]), now);
    let queued = d.backlog_packets();
    let before = views(&d);
    // Slots: root, other, site0, site1, then the subscribers in order.
    let (gone, site) = (N - 1 + 4, 2 + (N - 1) % 2);
    let queued_gone = before[gone].as_ref().expect("live").backlog.packets;
    assert!(queued_gone > 0);
    next_policy(&dir, 0..N - 1, &[N]);
    let ready = build_now_on(Source::File(path.clone()), Some(&mut base)).expect("built");
    assert!(matches!(ready.plan, Plan::Patch(_)), "not in place");
    now = Time(now.0 + 1_000_000);
    let ((outcome, garbage), (n, bytes, largest)) =
        freed_by(|| install_ready(&mut d, &circuits, 0, ready, now));
    let r = outcome.expect("applied");
    assert!(r.in_place);
    assert_eq!(r.added, [format!("sub{N}")]);
    assert_eq!(r.removed, [format!("sub{}", N - 1)]);
    assert_eq!(r.kept, (N + 4 - 1) as u64);
    assert_eq!(
        (r.reclassified, r.moved_packets, r.dropped_packets),
        (queued_gone, queued_gone, 0)
    );
    assert_eq!(d.backlog_packets(), queued, "every packet kept");
    assert!(
        bytes < 16 << 10,
        "the patch freed {n} blocks, {bytes} B (largest {largest} B) on the loop"
    );
    assert!(
        garbage.len() >= 3,
        "the old filters, text and ids go to the builder"
    );
    drop(garbage);
    let after = views(&d);
    assert_eq!(after.len(), before.len() + 1, "one slot added");
    assert!(
        after[gone].is_none(),
        "the removed subscriber's slot is retired"
    );
    for (c, (b, a)) in before.iter().zip(&after).enumerate() {
        if c != 1 && c != site && c != gone {
            assert_eq!(b, a, "class {c} changed");
        }
    }
    // The next subscriber added takes the retired slot; the tree keeps its size.
    next_policy(&dir, 0..N - 2, &[N, N + 1]);
    let ready = build_now_on(Source::File(path.clone()), Some(&mut base)).expect("built");
    let (outcome, garbage) = install_ready(&mut d, &circuits, 0, ready, now);
    let r = outcome.expect("applied");
    assert!(r.in_place && r.added == [format!("sub{}", N + 1)]);
    let again = views(&d);
    assert_eq!(again.len(), after.len());
    assert!(again[gone].is_some() && again[gone - 1].is_none());
    // The fq_codel leaf of the slot reused comes back to be freed off the loop.
    assert!(garbage.len() >= 4, "{} things to free", garbage.len());
    let _ = std::fs::remove_dir_all(&dir);
}
