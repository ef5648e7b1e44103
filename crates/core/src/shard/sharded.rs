//! All the shards of a tree in one thread: the deterministic form of the sharded scheduler, a
//! [`Qdisc`] like any other, which the simulator runs in place of one [`crate::htb::Htb`].
//!
//! Principles: it classifies with the whole tree's classifier, steers each packet through the
//! [`ShardMap`] to its shard, and on each dequeue first polls (mints) every shard at `now`, so the
//! lag `T` of the bound in [`super`] is zero. It then offers the turn to the shards in a fixed,
//! deterministic order: most gate tokens first (the shard furthest behind its share `ρ_s`), ties
//! broken round robin from the shard after the last one served. A link shared by all shards thus
//! serves each in proportion to its share, as separate transmit queues would. Statistics show one
//! tree: the whole tree's class ids and names, the root's counters summed over its copies.

use std::sync::Arc;

use super::plan::{split, ShardMap, ShardPlan};
use super::pool::SharedPool;
use super::worker::Shard;
use super::{ShardConfig, ShardError};
use crate::classify::{ClassId, Classifier};
use crate::htb::{HtbClassSpec, HtbParams};
use crate::packet::Packet;
use crate::qdisc::{
    Backlog, Books, ClassMode, ClassStats, ClassView, Dequeued, Discipline, DropCounts, Dropped,
    Qdisc,
};
use crate::units::{Rate, Time, NS_PER_SEC};

/// N shards served from one thread, deterministically (see the module documentation).
pub struct ShardedHtb<P: Packet> {
    shards: Vec<Shard<P>>,
    map: ShardMap,
    classifier: Classifier,
    pool: Option<Arc<SharedPool>>,
    root: Option<(ClassId, Rate, Rate)>,
    names: Vec<String>,
    parents: Vec<Option<ClassId>>,
    /// The shard after the last one served.
    cursor: usize,
    /// Scratch: the order of the current dequeue.
    turn: Vec<usize>,
    books: Books<P>,
}

impl<P: Packet> ShardedHtb<P> {
    /// Cut a tree (as for [`crate::htb::Htb::new`]) into shards as `cfg` says.
    pub fn new(
        params: HtbParams,
        specs: Vec<HtbClassSpec<P>>,
        classifier: Classifier,
        cfg: &ShardConfig,
    ) -> Result<Self, ShardError> {
        let plan = split(params, specs, cfg)?;
        Ok(Self::from_plan(plan, classifier))
    }

    /// Serve the shards of `plan` from one thread.
    pub fn from_plan(plan: ShardPlan<P>, classifier: Classifier) -> Self {
        let n = plan.shards.len();
        ShardedHtb {
            shards: plan.shards,
            map: plan.map,
            classifier,
            pool: plan.pool,
            root: plan.root,
            names: plan.names,
            parents: plan.parents,
            cursor: 0,
            turn: Vec::with_capacity(n),
            books: Books::new(),
        }
    }

    /// The shards, the map and the classifier, for a driver that gives each shard its own
    /// thread (`linkshare run --workers N`): the threads steer with the classifier and the map,
    /// and the root's pool stays shared through the shards' gates.
    pub fn into_parts(self) -> (Vec<Shard<P>>, ShardMap, Classifier) {
        (self.shards, self.map, self.classifier)
    }

    pub fn shards(&self) -> &[Shard<P>] {
        &self.shards
    }

    pub fn map(&self) -> &ShardMap {
        &self.map
    }

    /// The root's pool, if the tree has one root.
    pub fn pool(&self) -> Option<&Arc<SharedPool>> {
        self.pool.as_ref()
    }

    /// Id of a class of the whole tree by name.
    pub fn class_id(&self, name: &str) -> Option<ClassId> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| i as ClassId)
    }

    /// Enqueue into class `class` of the whole tree, bypassing the classifier.
    pub fn enqueue_to(&mut self, class: ClassId, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let len = pkt.len();
        self.books.offer(len);
        let r = self.route(class, pkt, now);
        self.books.settle(len, &r);
        r
    }

    fn route(&mut self, class: ClassId, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let (s, local) = self
            .map
            .locate(class)
            .or_else(|| self.map.locate(self.classifier.default_class()))
            .unwrap_or((0, 0));
        let Some(shard) = self.shards.get_mut(s) else {
            // `split` makes every mapped shard; unreachable, but refuse rather than panic.
            return Err(Dropped {
                packet: pkt,
                reason: crate::qdisc::DropReason::QueueLimit,
            });
        };
        let r = shard.enqueue_to(local, pkt, now);
        Self::collect(&mut self.books, shard);
        r
    }

    fn collect(books: &mut Books<P>, shard: &mut Shard<P>) {
        while let Some(d) = shard.take_dropped() {
            books.drop_victim(d);
        }
    }

    /// The root's view: its copies' counters summed, the tokens of the pool and the gates.
    fn root_view(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        let Some((id, rate, ceil)) = self.root else {
            return;
        };
        let mut stats = ClassStats::default();
        let mut backlog = Backlog::default();
        let (mut level, mut prio) = (0u8, 0u8);
        for s in &self.shards {
            s.visit_classes(&mut |v| {
                if v.id == 0 {
                    let c = &v.stats;
                    stats.sent.packets += c.sent.packets;
                    stats.sent.bytes += c.sent.bytes;
                    stats.drops += c.drops;
                    stats.overlimits += c.overlimits;
                    stats.lends += c.lends;
                    stats.borrows += c.borrows;
                    stats.giants += c.giants;
                    stats.marked += c.marked;
                    backlog.packets += v.backlog.packets;
                    backlog.bytes += v.backlog.bytes;
                    (level, prio) = (v.level, v.prio);
                }
            });
        }
        let nb = 8 * NS_PER_SEC as i64;
        let held: i64 = self.pool.as_ref().map_or(0, |p| p.level())
            + self
                .shards
                .iter()
                .filter_map(|s| s.gate().map(|g| g.tokens()))
                .sum::<i64>();
        let tokens = held / nb;
        f(&ClassView {
            name: self.names.get(id as usize).map_or("", |s| s.as_str()),
            parent: None,
            id,
            level,
            is_leaf: false,
            rate,
            ceil,
            prio,
            mode: if held > 0 {
                ClassMode::CanSend
            } else {
                ClassMode::CantSend
            },
            tokens,
            ctokens: tokens,
            stats,
            backlog,
            leaf_drops: DropCounts::default(),
            avgidle_ns: None,
            hfsc: None,
        });
    }
}

impl<P: Packet> Discipline<P> for ShardedHtb<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }

    fn enqueue_inner(&mut self, pkt: P, now: Time) -> Result<(), Dropped<P>> {
        let c = self.classifier.classify(pkt.meta());
        self.route(c, pkt, now)
    }

    fn dequeue_inner(&mut self, now: Time) -> Dequeued<P> {
        for s in &mut self.shards {
            s.tick(now);
        }
        let n = self.shards.len();
        self.turn.clear();
        self.turn.extend(0..n);
        let (shards, cursor) = (&self.shards, self.cursor);
        self.turn.sort_by_key(|&i| {
            let credit = shards[i].gate().map_or(0, |g| g.tokens());
            (std::cmp::Reverse(credit), (i + n - cursor) % n)
        });
        let mut next: Option<Time> = None;
        for k in 0..n {
            let i = self.turn[k];
            let shard = &mut self.shards[i];
            let r = shard.dequeue(now);
            Self::collect(&mut self.books, shard);
            match r {
                Dequeued::Packet(p) => {
                    self.cursor = (i + 1) % n;
                    return Dequeued::Packet(p);
                }
                Dequeued::NotBefore(t) => next = Some(next.map_or(t, |x| x.min(t))),
                Dequeued::Empty => {}
            }
        }
        match next {
            Some(t) => Dequeued::NotBefore(t),
            None => Dequeued::Empty,
        }
    }

    fn kind_inner(&self) -> &'static str {
        "htb"
    }

    /// The shards' leaves, shard by shard, within one budget.
    fn reclaim_idle_inner(&mut self, now: Time, budget: u32) -> u32 {
        let mut n = 0;
        for s in &mut self.shards {
            n += s.reclaim_idle(now, budget - n);
        }
        n
    }

    /// The shards' gauges and counters, summed.
    fn extra_stats_inner(&self, f: &mut dyn FnMut(&'static str, f64)) {
        let mut sums: Vec<(&'static str, f64)> = Vec::new();
        for s in &self.shards {
            s.extra_stats(&mut |k, v| match sums.iter_mut().find(|(n, _)| *n == k) {
                Some((_, x)) => *x += v,
                None => sums.push((k, v)),
            });
        }
        for (k, v) in sums {
            f(k, v);
        }
    }

    fn drain_inner(&mut self, now: Time) -> Vec<P> {
        let mut out = Vec::new();
        for s in &mut self.shards {
            out.extend(s.drain(now));
            Self::collect(&mut self.books, s);
        }
        out
    }

    /// One tree: the root first, then each shard's classes (parents before children), with the
    /// whole tree's ids and parents.
    fn visit_classes_inner(&self, f: &mut dyn FnMut(&ClassView<'_>)) {
        self.root_view(f);
        let shared = self.root.is_some();
        for (si, s) in self.shards.iter().enumerate() {
            s.visit_classes(&mut |v| {
                if shared && v.id == 0 {
                    return;
                }
                let Some(id) = self.map.global(si, v.id) else {
                    return;
                };
                let parent = self.parents.get(id as usize).copied().flatten();
                f(&ClassView {
                    name: v.name,
                    parent,
                    id,
                    ..v.clone()
                });
            });
        }
    }
}
