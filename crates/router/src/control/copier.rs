//! The datapath's copy of the class counters for the stats plane, made a bounded piece per loop
//! turn so that no copy, whatever the number of classes, pauses forwarding.
//!
//! Why chunks and not shared atomic counters: the scheduler's counters live in the core's
//! class records, written on the datapath thread with plain stores (the core is sans-IO and
//! single-threaded; making its hot counters atomics would tax every packet and every scheduler
//! for the sake of one reader). Reading them takes the datapath thread itself; what must not
//! grow with the number of classes is the time it spends in one go. So:
//!
//! * a copy is asked for by the plane (plane.rs) and started at the end of a loop turn; the
//!   loop then copies it a piece at a time ([`Copier::step`]: classes in id order —
//!   [`linkshare_core::htb::Htb::counter_view`]: O(1) a class, no name, no allocation but the
//!   rare boxed per-reason drop counts — until the piece's budget has passed, checked every
//!   [`BATCH`] classes), its pieces paced as the loop's other work besides forwarding
//!   (router/src/background.rs; packets are forwarded between the pieces);
//! * double-buffered: the copy grows in its own buffer (reserved at the start, so that no
//!   piece moves it) while the plane names, rates and serves the last finished one; it is
//!   handed over only when complete;
//! * each class's numbers are read at one instant (one call), so every row is consistent in
//!   itself; rows of different pieces are a few loop turns apart, as the subtree sums built
//!   from them off the datapath (raw.rs: a class's own counters, summed by the plane);
//! * a CAKE leaf that has had a packet adds its tins (at most 8 plain rows, [`raw::push_tins`])
//!   to one vector per direction; other leaves add nothing;
//! * names are copied with the first copy of each policy generation (and again when the number
//!   of classes changed), within the same budget; a direction whose generation changes during
//!   a copy is started over.
//!
//! Schedulers other than HTB (CBQ, HFSC, PRIO: tens of classes, not subscribers) are copied in
//! one piece through `visit_classes` (raw.rs, [`raw::copy`]).

use linkshare_core::htb::CounterView;

use super::raw::{self, Raw, RawClass, RawDir};
use super::snapshot::Snapshot;
use crate::{sys, Sched};

/// Classes copied between two looks at the clock (a look is a vDSO clock read, ~25 ns; a batch
/// of 64 rows is ~10 µs, more where its rows touch fresh pages, so a piece ends close to its
/// budget).
pub const BATCH: u32 = 64;

/// A copy under way, and what the plane was already told.
#[derive(Default)]
pub(crate) struct Copier {
    job: Option<Job>,
    /// Per direction, the generation and class count whose names the plane has.
    named: [Option<(u64, usize)>; 2],
    /// The classes the last [`Copier::step`] copied.
    last_piece: u64,
}

struct Job {
    raw: Raw,
    /// The direction being copied (2: done) and the next class id in it.
    dir: usize,
    next: u32,
}

/// What the copier needs of a direction: its scheduler and policy generation.
pub(crate) type DirRef<'a> = (Option<&'a Sched>, u64);

impl Copier {
    /// True while a copy is under way.
    pub fn busy(&self) -> bool {
        self.job.is_some()
    }

    /// The classes the last [`Copier::step`] copied.
    pub fn last_piece(&self) -> u64 {
        self.last_piece
    }

    /// Start a copy under way over from the first class (the policy changed during it, and
    /// every row must show the change).
    pub fn restart(&mut self) {
        if let Some(j) = &mut self.job {
            // Names this copy carried (and marked as sent) go again with the new start.
            for (d, out) in j.raw.dirs.iter().enumerate() {
                if out.names.is_some() {
                    self.named[d] = None;
                }
            }
            j.dir = 0;
            j.next = 0;
        }
    }

    /// Start a copy: `frame` is the snapshot without class rows (taken now).
    pub fn start(&mut self, frame: Snapshot) {
        self.job = Some(Job {
            raw: Raw {
                snap: frame,
                dirs: Default::default(),
            },
            dir: 0,
            next: 0,
        });
    }

    /// Copy batches until `budget_ns` has passed (one batch at least); the whole copy once it
    /// is complete.
    pub fn step(&mut self, dirs: [DirRef<'_>; 2], budget_ns: u64) -> Option<Raw> {
        let t0 = sys::monotonic_ns();
        self.last_piece = 0;
        let job = self.job.as_mut()?;
        let mut worked = false;
        while job.dir < 2 {
            let d = job.dir;
            let (sched, gen) = dirs[d];
            let out = &mut job.raw.dirs[d];
            if job.next == 0 {
                *out = RawDir {
                    gen,
                    ..RawDir::default()
                };
            } else if out.gen != gen {
                // A reload installed another tree: this direction starts over.
                job.next = 0;
                continue;
            }
            let Some(s) = sched else {
                job.dir += 1;
                job.next = 0;
                continue;
            };
            if worked && sys::monotonic_ns().saturating_sub(t0) >= budget_ns {
                break;
            }
            worked = true;
            let len = match s {
                Sched::Htb(h) => h.len(),
                _ => 0,
            };
            let named = self.named[d] == Some((gen, len));
            let Sched::Htb(h) = s else {
                *out = raw::copy(s, gen, !named);
                self.named[d] = Some((gen, len));
                job.dir += 1;
                job.next = 0;
                continue;
            };
            if h.adopting() {
                // A new tree still taking over the old one (reload.rs): its counters are whole
                // once it is done, within a few ms; copy it from the start then.
                job.next = 0;
                break;
            }
            if job.next == 0 {
                out.own = true;
                out.classes = Vec::with_capacity(h.len());
                out.names = (!named).then(|| Vec::with_capacity(h.len()));
            }
            let end = copy_batch(h, job.next, out);
            self.last_piece += u64::from(end.saturating_sub(job.next));
            job.next = end;
            if end as usize >= h.len() {
                // Names known for this count only if this copy carried them or they were
                // (classes added in place during the copy: the next copy sends the names).
                if out.names.is_some() || named {
                    self.named[d] = Some((gen, h.len()));
                }
                job.dir += 1;
                job.next = 0;
            }
        }
        if job.dir < 2 {
            return None;
        }
        self.job.take().map(|j| j.raw)
    }
}

/// Copy classes `from..from + BATCH` of `h` into `out` (names too when `out` takes them); the
/// next id to copy.
fn copy_batch(h: &linkshare_core::htb::Htb<crate::Frame>, from: u32, out: &mut RawDir) -> u32 {
    let end = from.saturating_add(BATCH).min(h.len() as u32);
    for c in from..end {
        // A slot retired by a class removed in place has no row.
        let Some(v) = h.counter_view(c) else {
            continue;
        };
        out.classes.push(of_counters(&v));
        raw::push_tins(h, c, &mut out.tins);
        // A name is decoded (and allocated) only when this copy carries names.
        if let Some(n) = &mut out.names {
            if let Some(name) = h.class_name(c) {
                n.push((c, name));
            }
        }
    }
    end
}

/// A class's row as the copy holds it: its own sends and backlog (raw.rs sums the subtrees).
pub(crate) fn of_counters(v: &CounterView) -> RawClass {
    RawClass {
        id: v.id,
        parent: v.parent,
        level: v.level,
        leaf: v.is_leaf,
        rate_bps: v.rate.bits_per_sec(),
        ceil_bps: v.ceil.bits_per_sec(),
        prio: v.prio,
        mode: v.mode,
        tokens: v.tokens,
        ctokens: v.ctokens,
        stats: v.stats,
        backlog: v.backlog,
        leaf_drops: (v.leaf_drops.total().packets > 0).then(|| Box::new(v.leaf_drops.clone())),
        avgidle_ns: None,
        // The piecewise copy is of HTB trees; HFSC's rows come from the whole snapshot.
        hfsc: None,
    }
}

#[cfg(test)]
#[path = "copier_tests.rs"]
mod tests;
