//! The chunked copy: what the plane makes of it equals what `visit_classes` shows, each row is
//! one instant's numbers however the pieces interleave with traffic, and a reload during a copy
//! starts that direction over.

use linkshare_core::htb::Htb;
use linkshare_core::packet::PacketMeta;
use linkshare_core::qdisc::{Dequeued, Qdisc};
use linkshare_core::units::Time;

use super::*;
use crate::control::raw::Finisher;
use crate::control::snapshot::DirectionSnapshot;
use crate::control::stat::classes;
use crate::Frame;

/// Leaves per site in [`policy`]: enough classes for several [`BATCH`]es.
const PER_SITE: usize = 300;

/// An HTB of three sites of [`PER_SITE`] leaves each: pfifo leaves of 3 packets (drops come
/// quickly), every tenth an fq_codel (a boxed leaf) and every other 25th from the 5th a CAKE.
fn policy() -> String {
    let mut s = String::from(
        "qdisc = \"htb\"\ndefault = \"s0l0\"\n[[class]]\nname = \"root\"\nrate = \"1gbit\"\n",
    );
    for site in 0..3 {
        s.push_str(&format!(
            "[[class]]\nname = \"site{site}\"\nparent = \"root\"\nrate = \"300mbit\"\n"
        ));
        for l in 0..PER_SITE {
            let leaf = if l % 10 == 0 {
                "{ type = \"fq_codel\" }"
            } else if l % 25 == 5 {
                "{ type = \"cake\", diffserv = \"diffserv4\" }"
            } else {
                "{ type = \"pfifo\", limit = 3 }"
            };
            s.push_str(&format!(
                "[[class]]\nname = \"s{site}l{l}\"\nparent = \"site{site}\"\nrate = \"1mbit\"\n\
                 ceil = \"1gbit\"\nleaf = {leaf}\n"
            ));
        }
    }
    s
}

fn sched() -> Sched {
    match crate::load_sched(&policy(), "p.toml") {
        Ok((_, s)) => s,
        Err(e) => panic!("{e}"),
    }
}

fn htb(s: &mut Sched) -> &mut Htb<Frame> {
    match s {
        Sched::Htb(h) => h,
        _ => panic!("not an HTB"),
    }
}

/// Offer `n` packets of 100..1100 bytes to every `step`-th leaf from `first`, then send some.
fn traffic(h: &mut Htb<Frame>, first: u32, step: u32, n: u32, now: &mut u64) {
    for i in 0..n {
        for c in (first..h.len() as u32).step_by(step as usize) {
            if h.counter_view(c).is_some_and(|v| v.is_leaf) {
                let len = 100 + (i * 37 + c) % 1000;
                let f = Frame {
                    bytes: vec![0; len as usize],
                    meta: PacketMeta {
                        len,
                        src_port: i as u16,
                        ..PacketMeta::default()
                    },
                };
                let _ = h.enqueue_to(c, f, Time(*now));
            }
        }
        *now += 1_000_000;
        for _ in 0..50 {
            if !matches!(h.dequeue(Time(*now)), Dequeued::Packet(_)) {
                break;
            }
        }
    }
}

fn frame() -> Snapshot {
    Snapshot {
        directions: vec![DirectionSnapshot::default(), DirectionSnapshot::default()],
        ..Snapshot::default()
    }
}

/// Copy with a budget of 0 (one batch a turn), counting the turns.
fn copy_all(cp: &mut Copier, s: &Sched, gen: u64) -> (Raw, usize) {
    cp.start(frame());
    for turn in 1..10_000 {
        if let Some(raw) = cp.step([(Some(s), gen), (None, 0)], 0) {
            return (raw, turn);
        }
    }
    panic!("the copy never completed");
}

#[test]
fn the_finished_copy_equals_what_visit_classes_shows() {
    let mut s = sched();
    let mut now = 0;
    traffic(htb(&mut s), 0, 7, 20, &mut now);
    let h = htb(&mut s);
    assert!(
        h.stats().backlog.packets > 0,
        "the test wants queued packets"
    );
    assert!(h.stats().dropped.total().packets + h.stats().refused.total().packets > 0);
    let mut cp = Copier::default();
    let (raw, turns) = copy_all(&mut cp, &s, 1);
    let classes_n = 1 + 3 * (1 + PER_SITE);
    assert_eq!(
        turns,
        classes_n.div_ceil(BATCH as usize),
        "one batch a turn"
    );
    assert!(raw.dirs[0].own && raw.dirs[0].names.is_some());
    let snap = Finisher::default().finish(raw);
    let want = classes(&s);
    assert_eq!(want.len(), classes_n);
    assert_eq!(snap.directions[0].classes, want);
    assert_eq!(snap.directions[0].class_count, classes_n as u64);
    assert!(want
        .iter()
        .any(|c| !c.leaf && c.backlog_packets > 0 && c.sent_packets > 0));
    assert!(want.iter().any(|c| !c.drops_by_reason.is_empty()));
    // The next copy of the same generation carries no names and is named the same.
    let (raw, _) = copy_all(&mut cp, &s, 1);
    assert!(raw.dirs[0].names.is_none());
}

#[test]
fn each_row_is_one_instant_however_the_pieces_interleave_with_traffic() {
    let mut s = sched();
    let mut now = 0;
    traffic(htb(&mut s), 0, 3, 5, &mut now);
    let before: Vec<CounterView> = {
        let h = htb(&mut s);
        (0..h.len() as u32)
            .filter_map(|c| h.counter_view(c))
            .collect()
    };
    let mut cp = Copier::default();
    cp.start(frame());
    assert!(cp.step([(Some(&s), 1), (None, 0)], 0).is_none());
    // Traffic between the pieces, to classes of the first piece and of later ones.
    traffic(htb(&mut s), 1, 2, 5, &mut now);
    let after: Vec<CounterView> = {
        let h = htb(&mut s);
        (0..h.len() as u32)
            .filter_map(|c| h.counter_view(c))
            .collect()
    };
    let raw = loop {
        if let Some(r) = cp.step([(Some(&s), 1), (None, 0)], 0) {
            break r;
        }
    };
    let rows = &raw.dirs[0].classes;
    assert_eq!(rows.len(), before.len());
    let mut changed = [0, 0];
    for (i, r) in rows.iter().enumerate() {
        let piece = usize::from(i >= BATCH as usize);
        let want = if piece == 0 { &before[i] } else { &after[i] };
        assert_eq!(of_counters(want).stats, r.stats, "class {i}");
        assert_eq!(
            (want.backlog, want.tokens, want.mode),
            (r.backlog, r.tokens, r.mode)
        );
        if before[i].stats != after[i].stats {
            changed[piece] += 1;
        }
    }
    assert!(changed[0] > 0 && changed[1] > 0, "{changed:?}");
}

#[test]
fn a_reload_during_a_copy_starts_its_direction_over_with_names() {
    let s = sched();
    let mut cp = Copier::default();
    let _ = copy_all(&mut cp, &s, 1);
    cp.start(frame());
    assert!(cp.step([(Some(&s), 1), (None, 0)], 0).is_none());
    let other = sched();
    let raw = loop {
        if let Some(r) = cp.step([(Some(&other), 2), (None, 0)], 0) {
            break r;
        }
    };
    assert_eq!(raw.dirs[0].gen, 2);
    assert_eq!(raw.dirs[0].classes.len(), 1 + 3 * (1 + PER_SITE));
    let ids: Vec<u32> = raw.dirs[0].classes.iter().map(|r| r.id).collect();
    assert!(ids.iter().enumerate().all(|(i, id)| *id as usize == i));
    assert_eq!(raw.dirs[0].names.as_ref().map(Vec::len), Some(ids.len()));
}

/// Only CAKE leaves that have had a packet carry tins, four each (diffserv4) in tc's order,
/// through the piecewise copy as through `visit_classes`; an idle CAKE leaf carries none.
#[test]
fn tins_are_copied_for_the_cake_leaves_that_had_packets() {
    let mut s = sched();
    let mut now = 0;
    // Every other class gets traffic: some CAKE leaves do, the others stay idle.
    traffic(htb(&mut s), 0, 2, 5, &mut now);
    let mut cp = Copier::default();
    let (raw, _) = copy_all(&mut cp, &s, 1);
    assert!(!raw.dirs[0].tins.is_empty());
    let snap = Finisher::default().finish(raw);
    let rows = &snap.directions[0].classes;
    let cake: Vec<&str> = rows
        .iter()
        .filter(|c| c.cake.is_some())
        .map(|c| c.name.as_str())
        .collect();
    let want: Vec<String> = rows
        .iter()
        .filter(|c| {
            let l: usize = c
                .name
                .rsplit('l')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            c.leaf
                && l % 25 == 5
                && !l.is_multiple_of(10)
                && c.sent_packets + c.backlog_packets + c.drops > 0
        })
        .map(|c| c.name.clone())
        .collect();
    assert!(!want.is_empty());
    assert_eq!(cake, want);
    for c in rows.iter().filter_map(|c| c.cake.as_ref()) {
        let names: Vec<&str> = c.tins.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Bulk", "Best Effort", "Video", "Voice"]);
        let be = &c.tins[1];
        assert!(be.packets > 0 && be.bytes > 0, "{be:?}");
        // Unlimited: the kernel's 10240 MTUs.
        assert_eq!(c.memory_limit, 10240 * 1514);
    }
    assert_eq!(rows, &classes(&s));
}

/// An HTB of `n` subscribers from a subscriber table (the form `import libreqos` writes): one
/// plan, one site, a /32 each.
fn subscribers_sched(n: usize) -> Sched {
    let dir = std::env::temp_dir().join(format!("linkshare-copier-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let csv = dir.join("subscribers.csv");
    let mut table = String::from("name,parent,plan,addresses\n");
    for k in 0..n {
        let a = std::net::Ipv4Addr::from(0x6440_0000u32 + k as u32);
        table.push_str(&format!("sub{k},site,sub,{a}/32\n"));
    }
    std::fs::write(&csv, table).expect("the subscriber table written");
    let text = format!(
        "qdisc = \"htb\"\ndefault = \"other\"\nsubscribers = \"{}\"\n\
         [[class]]\nname = \"uplink\"\nrate = \"10gbit\"\n\
         [[class]]\nname = \"other\"\nparent = \"uplink\"\nrate = \"10mbit\"\n\
         [[class]]\nname = \"site\"\nparent = \"uplink\"\nrate = \"9gbit\"\n\
         [[plan]]\nname = \"sub\"\nrate = \"50kbit\"\nceil = \"100mbit\"\n\
         leaf = {{ type = \"pfifo\", limit = 10 }}\n",
        csv.display()
    );
    let s = crate::load_sched(&text, &dir.join("p.toml").display().to_string());
    let _ = std::fs::remove_dir_all(&dir);
    match s {
        Ok((_, s)) => s,
        Err(e) => panic!("{e}"),
    }
}

/// The rows (and names) the copy under way holds so far, and the capacity of its rows.
fn progress(cp: &Copier) -> (usize, usize, usize) {
    let d = &cp.job.as_ref().expect("a copy under way").raw.dirs[0];
    let names = d.names.as_ref().map_or(0, Vec::len);
    (d.classes.len(), names, d.classes.capacity())
}

#[test]
fn at_100k_subscribers_a_loop_turn_copies_one_batch_and_allocates_nothing() {
    let s = sched_len(subscribers_sched(100_000));
    let (s, n) = s;
    assert!(n > 100_000, "{n} classes");
    let mut cp = Copier::default();
    cp.start(frame());
    let (mut rows, mut names, mut turns) = (0, 0, 0);
    let mut capacity = None;
    let raw = loop {
        // A zero budget: what one turn copies when the clock says it is out of time at once.
        let done = cp.step([(Some(&s), 1), (None, 0)], 0);
        turns += 1;
        let (r, nm, cap) = match &done {
            Some(raw) => (
                raw.dirs[0].classes.len(),
                raw.dirs[0].names.as_ref().map_or(0, Vec::len),
                raw.dirs[0].classes.capacity(),
            ),
            None => progress(&cp),
        };
        assert!(
            r - rows <= BATCH as usize,
            "turn {turns} copied {} rows",
            r - rows
        );
        assert!(
            nm - names <= BATCH as usize,
            "turn {turns} copied {} names",
            nm - names
        );
        // Reserved once for every class: no piece moves (re-allocates) the rows.
        assert_eq!(
            *capacity.get_or_insert(cap),
            cap,
            "turn {turns} grew the rows"
        );
        (rows, names) = (r, nm);
        if let Some(raw) = done {
            break raw;
        }
        assert!(turns < 10 * n, "the copy never completed");
    };
    assert_eq!(turns, n.div_ceil(BATCH as usize));
    assert_eq!((raw.dirs[0].classes.len(), names), (n, n));
    assert!(capacity.is_some_and(|c| c >= n));
}

/// `s` and its number of classes.
fn sched_len(mut s: Sched) -> (Sched, usize) {
    let n = htb(&mut s).len();
    (s, n)
}
