//! The datapath's part of a snapshot, and the rest done elsewhere.
//!
//! Principles: the datapath thread copies only numbers ([`RawClass`]: `Copy` fields, no string,
//! no map; the rare leaf with drops boxes its per-reason counts) — an HTB's a bounded piece per
//! loop turn, each class's own counters (copier.rs), other schedulers' in one `visit_classes`
//! pass ([`copy`]) — and class names only with the first copy of each policy (a direction's
//! `gen` changes on every install); the subtree sums and tree order ([`subtree_sums`]), names,
//! parents, reason maps and live rates are made from that copy off the datapath
//! ([`Namer::rows`], [`Rates::apply`]), by the stats plane (plane.rs). Nothing here runs
//! periodically: a copy is made when a reader asks for one.
//!
//! Live rates: [`Rates`] keeps each class's last counters and an exponentially weighted rate
//! (time constant 1 s, as `tc`'s default estimator averages) and updates them from each new
//! snapshot's counters and its time, so the rate between two snapshots is measured whatever
//! their spacing; a class whose counters went backwards (a reload) restarts at 0.

use std::collections::HashMap;

use linkshare_core::htb::Htb;
use linkshare_core::qdisc::cake::TinView;
use linkshare_core::qdisc::{Backlog, ClassMode, ClassStats, ClassView, Counter, DropCounts};
use linkshare_core::tree::depth_first_order;

use super::snapshot::{finite, CakeSnapshot, ClassSnapshot, HfscSnapshot, Snapshot};
use super::stat::by_reason;
use crate::Sched;

/// One class's numbers, as the datapath copies them.
#[derive(Clone, Debug)]
pub(crate) struct RawClass {
    pub id: u32,
    pub parent: Option<u32>,
    pub level: u8,
    pub leaf: bool,
    pub rate_bps: u64,
    pub ceil_bps: u64,
    pub prio: u8,
    pub mode: ClassMode,
    pub tokens: i64,
    pub ctokens: i64,
    pub stats: ClassStats,
    pub backlog: Backlog,
    /// Per-reason drops of the leaf queue, only when it dropped anything.
    pub leaf_drops: Option<Box<DropCounts>>,
    pub avgidle_ns: Option<i64>,
    /// HFSC's curves and state, for HFSC classes only.
    pub hfsc: Option<Box<linkshare_core::hfsc::HfscClassView>>,
}

/// One direction's classes as copied, with their names when `gen` is new to the reader.
#[derive(Debug, Default)]
pub(crate) struct RawDir {
    pub gen: u64,
    pub names: Option<Vec<(u32, String)>>,
    pub classes: Vec<RawClass>,
    /// The tins of the CAKE leaves that have had a packet, by class id, each leaf's together
    /// in tc's order (one vector per direction that grows as it needs: no allocation per class).
    pub tins: Vec<(u32, TinView)>,
    /// The rows hold each class's own sends and backlog, in id order (copier.rs): the
    /// subtrees' sums and the tree order are made by [`Finisher::finish`].
    pub own: bool,
}

/// A snapshot as the datapath hands it over: everything but the class rows, and both
/// directions' classes as numbers.
#[derive(Debug)]
pub(crate) struct Raw {
    pub snap: Snapshot,
    pub dirs: [RawDir; 2],
}

/// What the stats plane keeps between copies to finish them: names and rates.
#[derive(Debug, Default)]
pub(crate) struct Finisher {
    pub namers: [Namer; 2],
    pub rates: Rates,
}

impl Finisher {
    /// The whole snapshot from a copy: rows named, live rates measured.
    pub fn finish(&mut self, raw: Raw) -> Snapshot {
        let Raw { mut snap, dirs } = raw;
        for (i, mut rd) in dirs.into_iter().enumerate() {
            if rd.own {
                rd.classes = subtree_sums(std::mem::take(&mut rd.classes));
            }
            let rows = self.namers[i].rows(rd);
            if let Some(d) = snap.directions.get_mut(i) {
                d.class_count = rows.len() as u64;
                d.classes = rows;
            }
        }
        self.rates.apply(&mut snap);
        snap
    }
}

/// Rows of own counters (a class's sends and backlog alone, copier.rs) made into what
/// `visit_classes` shows: each class's sends and backlog its subtree's (wrapping sums, as the
/// core's), in tree order (depth first, parents first, siblings by id). O(n · depth), off the
/// datapath. A parent missing from the rows makes its child a root.
pub(crate) fn subtree_sums(rows: Vec<RawClass>) -> Vec<RawClass> {
    let top = rows.iter().map(|r| r.id as usize + 1).max().unwrap_or(0);
    let mut at = vec![usize::MAX; top];
    for (i, r) in rows.iter().enumerate() {
        at[r.id as usize] = i;
    }
    let pos = |id: Option<u32>| {
        id.and_then(|p| at.get(p as usize).copied())
            .filter(|&i| i != usize::MAX)
    };
    let parents: Vec<Option<usize>> = rows.iter().map(|r| pos(r.parent)).collect();
    let mut sums: Vec<(Counter, Backlog)> = vec![Default::default(); rows.len()];
    for (i, r) in rows.iter().enumerate() {
        let (sent, b) = (r.stats.sent, r.backlog);
        let mut x = Some(i);
        let mut steps = 0;
        while let Some(k) = x.filter(|_| steps <= rows.len()) {
            let s = &mut sums[k];
            s.0.packets = s.0.packets.wrapping_add(sent.packets);
            s.0.bytes = s.0.bytes.wrapping_add(sent.bytes);
            s.1.packets += b.packets;
            s.1.bytes += b.bytes;
            x = parents[k];
            steps += 1;
        }
    }
    let order = depth_first_order(
        &parents
            .iter()
            .map(|p| p.map(|i| i as u32))
            .collect::<Vec<_>>(),
    );
    let mut slots: Vec<Option<RawClass>> = rows.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|i| {
            let mut r = slots.get_mut(i as usize)?.take()?;
            r.stats.sent = sums[i as usize].0;
            r.backlog = sums[i as usize].1;
            Some(r)
        })
        .collect()
}

/// Copy the classes of `s` (one `visit_classes` pass); names too when `with_names`.
pub(crate) fn copy(s: &Sched, gen: u64, with_names: bool) -> RawDir {
    let mut out = RawDir {
        gen,
        names: with_names.then(Vec::new),
        ..RawDir::default()
    };
    s.qr().visit_classes(&mut |c: &ClassView<'_>| {
        if let Some(n) = &mut out.names {
            n.push((c.id, c.name.to_string()));
        }
        out.classes.push(RawClass {
            id: c.id,
            parent: c.parent,
            level: c.level,
            leaf: c.is_leaf,
            rate_bps: c.rate.bits_per_sec(),
            ceil_bps: c.ceil.bits_per_sec(),
            prio: c.prio,
            mode: c.mode,
            tokens: c.tokens,
            ctokens: c.ctokens,
            stats: c.stats,
            backlog: c.backlog,
            leaf_drops: (c.leaf_drops.total().packets > 0).then(|| Box::new(c.leaf_drops.clone())),
            avgidle_ns: c.avgidle_ns,
            hfsc: c.hfsc.map(Box::new),
        });
        if let Sched::Htb(h) = s {
            push_tins(h, c.id, &mut out.tins);
        }
    });
    out
}

/// Append the tins of class `c`'s leaf when it is a CAKE that has had a packet. O(tins), no
/// allocation but `out`'s own growth.
pub(crate) fn push_tins(h: &Htb<crate::Frame>, c: u32, out: &mut Vec<(u32, TinView)>) {
    if let Some(q) = h.leaf_qdisc(c) {
        if q.stats().enqueued.packets > 0 {
            q.visit_tins(&mut |t| out.push((c, *t)));
        }
    }
}

/// The names of one direction's classes by id, for the policy generation it last saw.
#[derive(Debug, Default)]
pub(crate) struct Namer {
    gen: Option<u64>,
    /// By class id (ids are dense: an HTB's are its positions).
    names: Vec<Option<String>>,
}

impl Namer {
    /// The rows of `raw`, in its order; learns its names when it carries them.
    pub fn rows(&mut self, raw: RawDir) -> Vec<ClassSnapshot> {
        if let Some(n) = raw.names {
            let top = n.iter().map(|(id, _)| *id as usize + 1).max().unwrap_or(0);
            self.names = vec![None; top];
            for (id, name) in n {
                self.names[id as usize] = Some(name);
            }
            self.gen = Some(raw.gen);
        }
        let name = |id: u32| match self.names.get(id as usize) {
            Some(Some(n)) => n.clone(),
            _ => format!("#{id}"),
        };
        let mut cakes: HashMap<u32, CakeSnapshot> = HashMap::new();
        for run in raw.tins.chunk_by(|a, b| a.0 == b.0) {
            let tins: Vec<TinView> = run.iter().map(|t| t.1).collect();
            if let (Some(&(id, _)), Some(c)) = (run.first(), CakeSnapshot::of(&tins)) {
                cakes.insert(id, c);
            }
        }
        raw.classes
            .into_iter()
            .map(|c| ClassSnapshot {
                name: name(c.id),
                circuit_id: None,
                id: c.id,
                parent: c.parent.map(name),
                parent_id: c.parent,
                leaf: c.leaf,
                level: c.level,
                rate_bps: c.rate_bps,
                ceil_bps: c.ceil_bps,
                prio: c.prio,
                mode: c.mode.name().to_string(),
                live_rate_bps: 0.0,
                live_pps: 0.0,
                sent_bytes: c.stats.sent.bytes,
                sent_packets: c.stats.sent.packets,
                drops: c.stats.drops,
                drops_by_reason: c.leaf_drops.map(|d| by_reason(&d)).unwrap_or_default(),
                marked: c.stats.marked,
                overlimits: c.stats.overlimits,
                lended: c.stats.lends,
                borrowed: c.stats.borrows,
                giants: c.stats.giants,
                backlog_packets: c.backlog.packets,
                backlog_bytes: c.backlog.bytes,
                tokens: c.tokens,
                ctokens: c.ctokens,
                avgidle_ns: c.avgidle_ns,
                hfsc: c.hfsc.as_deref().map(HfscSnapshot::of),
                cake: cakes.remove(&c.id),
            })
            .collect()
    }
}

/// One class's last counters and its rate estimate.
#[derive(Clone, Copy, Debug, Default)]
struct Est {
    bytes: u64,
    packets: u64,
    bps: f64,
    pps: f64,
}

/// A class's name as a number, to match rows of two snapshots without keeping or hashing
/// strings into a map (64 bits: two names of one tree agreeing is not a practical concern).
fn name_key(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}

/// Live rates of every class of both directions, from successive snapshots.
///
/// Rows are matched by name, first at the same position (a tree unchanged between two
/// snapshots keeps its order: no map, no string kept), and through a map of the last
/// snapshot's names only for the rows that moved (after a reload).
#[derive(Debug, Default)]
pub struct Rates {
    /// The uptime of the last snapshot applied.
    at_s: Option<f64>,
    /// Per direction, per row of the last snapshot: its name's key and its estimate.
    est: [Vec<(u64, Est)>; 2],
}

impl Rates {
    /// The estimate of row `i` named `key` in the last snapshot of direction `d`, if it was in
    /// it; `moved` is the map by name, made on the first row not found at its position.
    fn last(
        &self,
        d: usize,
        i: usize,
        key: u64,
        moved: &mut Option<HashMap<u64, Est>>,
    ) -> Option<Est> {
        let old = &self.est[d];
        match old.get(i) {
            Some((k, e)) if *k == key => Some(*e),
            _ => moved
                .get_or_insert_with(|| old.iter().copied().collect())
                .get(&key)
                .copied(),
        }
    }

    /// Set `s`'s classes' `live_rate_bps` and `live_pps` from the counters it carries and the
    /// time since the last snapshot applied (its `uptime_s`). The first snapshot gives 0.
    pub fn apply(&mut self, s: &mut Snapshot) {
        let dt = self.at_s.map(|t| s.uptime_s - t).filter(|dt| *dt > 0.0);
        let same_instant = self.at_s.is_some() && dt.is_none();
        if !same_instant {
            self.at_s = Some(s.uptime_s);
        }
        for (d, dir) in s.directions.iter_mut().take(2).enumerate() {
            let mut moved = None;
            let mut next = Vec::with_capacity(dir.classes.len());
            for (i, c) in dir.classes.iter_mut().enumerate() {
                let key = name_key(&c.name);
                let old = self.last(d, i, key, &mut moved);
                if same_instant {
                    // The same instant (or a clock that went back): keep the last estimates.
                    let e = old.unwrap_or_default();
                    c.live_rate_bps = finite(e.bps);
                    c.live_pps = finite(e.pps);
                    continue;
                }
                let mut e = Est {
                    bytes: c.sent_bytes,
                    packets: c.sent_packets,
                    ..Est::default()
                };
                if let (Some(dt), Some(o)) = (dt, old) {
                    let alpha = 1.0 - (-dt).exp();
                    let db = c.sent_bytes.saturating_sub(o.bytes) as f64 * 8.0 / dt;
                    let dp = c.sent_packets.saturating_sub(o.packets) as f64 / dt;
                    if c.sent_bytes >= o.bytes {
                        e.bps = o.bps + (db - o.bps) * alpha;
                        e.pps = o.pps + (dp - o.pps) * alpha;
                    }
                }
                c.live_rate_bps = finite(e.bps);
                c.live_pps = finite(e.pps);
                next.push((key, e));
            }
            if !same_instant {
                self.est[d] = next;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::snapshot::DirectionSnapshot;

    fn snap(t: f64, bytes: u64) -> Snapshot {
        Snapshot {
            uptime_s: t,
            directions: vec![DirectionSnapshot {
                classes: vec![ClassSnapshot {
                    name: "a".into(),
                    sent_bytes: bytes,
                    sent_packets: bytes / 1000,
                    ..ClassSnapshot::default()
                }],
                ..DirectionSnapshot::default()
            }],
            ..Snapshot::default()
        }
    }

    #[test]
    fn rates_follow_the_counters_whatever_the_spacing() {
        let mut r = Rates::default();
        let mut s = snap(1.0, 0);
        r.apply(&mut s);
        assert_eq!(s.directions[0].classes[0].live_rate_bps, 0.0);
        // 1 Mbit/s for many seconds, sampled every 0.5 s: the estimate converges to it.
        let mut last = 0.0;
        for i in 1..=20 {
            let t = 1.0 + 0.5 * i as f64;
            let mut s = snap(t, (125_000.0 * 0.5 * i as f64) as u64);
            r.apply(&mut s);
            last = s.directions[0].classes[0].live_rate_bps;
        }
        assert!((last - 1e6).abs() < 1e3, "{last}");
        // Then 10 s without a snapshot and no traffic: the next one says (almost) 0.
        let mut s = snap(21.0, 1_250_000);
        r.apply(&mut s);
        assert!(s.directions[0].classes[0].live_rate_bps < 1e2);
        // The same instant twice keeps the estimate; counters that went back restart at 0.
        let mut again = snap(21.0, 1_250_000);
        r.apply(&mut again);
        assert_eq!(
            again.directions[0].classes[0].live_rate_bps,
            s.directions[0].classes[0].live_rate_bps
        );
        let mut reset = snap(22.0, 10);
        r.apply(&mut reset);
        assert_eq!(reset.directions[0].classes[0].live_rate_bps, 0.0);
    }

    #[test]
    fn rates_follow_each_class_when_rows_move() {
        let two = |t: f64, order: [(&str, u64); 2]| Snapshot {
            uptime_s: t,
            directions: vec![DirectionSnapshot {
                classes: order
                    .iter()
                    .map(|(n, b)| ClassSnapshot {
                        name: n.to_string(),
                        sent_bytes: *b,
                        ..ClassSnapshot::default()
                    })
                    .collect(),
                ..DirectionSnapshot::default()
            }],
            ..Snapshot::default()
        };
        let mut r = Rates::default();
        r.apply(&mut two(1.0, [("a", 0), ("b", 0)]));
        // A reload put `b` first; `a` sent 1,000 bytes in the second, `b` 2,000.
        let mut s = two(2.0, [("b", 2000), ("a", 1000)]);
        r.apply(&mut s);
        let rate = |s: &Snapshot, n: &str| {
            s.directions[0]
                .classes
                .iter()
                .find(|c| c.name == n)
                .map(|c| c.live_rate_bps)
        };
        let alpha = 1.0 - (-1.0f64).exp();
        assert!((rate(&s, "b").unwrap_or(0.0) - 16_000.0 * alpha).abs() < 1e-6);
        assert!((rate(&s, "a").unwrap_or(0.0) - 8_000.0 * alpha).abs() < 1e-6);
        let mut s = two(3.0, [("a", 2000), ("b", 4000)]);
        r.apply(&mut s);
        assert!(rate(&s, "a").unwrap_or(0.0) > 8_000.0 * alpha);
        assert!(rate(&s, "b").unwrap_or(0.0) > 16_000.0 * alpha);
    }

    #[test]
    fn names_are_learnt_once_per_generation() {
        let text =
            "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
                    [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"5mbit\"\n";
        let (_, s) = match crate::load_sched(text, "p.toml") {
            Ok(x) => x,
            Err(d) => panic!("{d}"),
        };
        let mut n = Namer::default();
        let rows = n.rows(copy(&s, 1, true));
        assert_eq!(n.gen, Some(1));
        // A copy without names is named from what the first one taught.
        let again = n.rows(copy(&s, 1, false));
        assert_eq!(rows, again);
        let a = rows
            .iter()
            .find(|r| r.name == "a")
            .map(|r| r.parent.clone());
        assert_eq!(a, Some(Some("root".to_string())));
    }
}
