//! CBQ's reload: a new CBQ takes over the state of the one it replaces, class by class by name,
//! so a reload (or a `class change`) neither resets the counters `stat` shows nor restarts the
//! estimators at `maxidle` — which would hand every overlimit class a fresh burst of `maxburst`
//! packets on each change.
//!
//! Kept per class: the estimator's `avgidle` (bounded by the new class's `minidle`/`maxidle`), the
//! finish time and size of its last packet, its `undertime` (an overlimit class stays overlimit
//! until then), its counters, and a leaf qdisc's own counters. The link's expected finish time
//! `ifnow` carries over. Suspensions are not carried: a class still overlimit is suspended again
//! by its first dequeue attempt (ALTQ's delay action), to the same `undertime`.

use super::{Cbq, Leaf};
use crate::packet::Packet;
use crate::qdisc::adopt::AdoptReport;
use crate::qdisc::{Counter, Dropped};
use crate::units::Time;

impl<P: Packet> Cbq<P> {
    /// Take over the state of `old` (see the module docs). Packets of a class kept as a leaf move
    /// to it in order; packets of classes that are gone or no longer leaves go through the new
    /// filters. A packet the new leaf refuses is counted as dropped with the leaf's reason and
    /// handed out through `take_dropped`. The qdisc-wide counters continue from `old`'s, so
    /// `enqueued = dequeued + dropped + backlog` still holds. `old` is left empty.
    ///
    /// O(n + q·d log n) for `n` classes, `q` queued packets and depth `d`; for the control path.
    pub fn adopt(&mut self, old: &mut Cbq<P>, now: Time) -> AdoptReport {
        let mut report = AdoptReport::default();
        let (old_to_new, added) = crate::tree::match_names(
            old.classes.iter().map(|c| c.name.as_str()),
            self.classes.iter().map(|c| c.name.as_str()),
        );
        // Empty the old leaves first, so that what an AQM leaf drops while draining is in
        // `old`'s counters before they become ours.
        let drained: Vec<(usize, Vec<P>)> = (0..old.classes.len())
            .map(|c| (c, old.drain_leaf(c as u32, now)))
            .collect();
        for (c, n) in old_to_new.iter().enumerate() {
            let o = &old.classes[c];
            let Some(n) = *n else {
                report.removed.push(o.name.clone());
                continue;
            };
            report.kept.push(o.name.clone());
            let cl = &mut self.classes[n as usize];
            cl.est.avgidle = o.est.avgidle.clamp(cl.est.minidle, cl.est.maxidle);
            cl.est.last = o.est.last;
            cl.est.last_pkt_time = o.est.last_pkt_time;
            cl.est.last_len = o.est.last_len;
            cl.sent = o.sent;
            cl.drops = o.drops;
            cl.overlimits = o.overlimits;
            cl.borrows = o.borrows;
            cl.lends = o.lends;
            cl.delays = o.delays;
            let undertime = o.undertime.filter(|&u| u > now.0);
            self.set_undertime(n, undertime);
        }
        for c in added {
            report.added.push(self.classes[c as usize].name.clone());
        }
        self.ifnow = self.ifnow.max(old.ifnow);
        // Counters continue; the moved packets are already counted as enqueued and as backlog.
        // What `old` dropped and still holds is ours to hand out.
        self.books.take_over(&mut old.books);
        for (c, pkts) in drained {
            if pkts.is_empty() && !matches!(old.classes[c].leaf, Leaf::Boxed(_)) {
                continue;
            }
            let target =
                old_to_new[c].filter(|&n| !matches!(self.classes[n as usize].leaf, Leaf::Inner));
            let mut moved = Counter::default();
            pkts.iter().for_each(|p| moved.add(p.len()));
            // A leaf qdisc kept by name continues its own counters (drops by reason, marks).
            if let (Leaf::Boxed(o), Some(n)) = (&old.classes[c].leaf, target) {
                let cl = &mut self.classes[n as usize];
                if let Leaf::Boxed(b) = &mut cl.leaf {
                    b.stats_mut().continue_from(o.stats(), moved);
                    // Its marks are in the qdisc-wide count already (continued from `old`).
                    cl.marks_seen = b.stats().marked;
                }
            }
            for pkt in pkts {
                let to = match target {
                    Some(n) => n,
                    None => {
                        report.reclassified += 1;
                        let id = self.classifier.classify(pkt.meta());
                        match self.classes.get(id as usize) {
                            Some(cl) if !matches!(cl.leaf, Leaf::Inner) => id,
                            _ => self.default,
                        }
                    }
                };
                self.requeue(to, pkt, now, &mut report);
            }
        }
        report
    }

    /// Every packet queued at leaf `c`, in order, leaving it empty, out of its ring and awake;
    /// what a leaf qdisc drops while draining is counted and goes to `victims`. Not counted as
    /// dequeued (the caller decides).
    pub(super) fn drain_leaf(&mut self, c: u32, now: Time) -> Vec<P> {
        let had = self.leaf_backlog(c).packets > 0;
        let pkts: Vec<P> = match &mut self.classes[c as usize].leaf {
            Leaf::Fifo(q) => std::iter::from_fn(|| q.pop()).collect(),
            Leaf::Boxed(b) => b.drain(now),
            Leaf::Inner => Vec::new(),
        };
        self.collect_victims(c);
        self.note_idle(c, now);
        if had {
            self.leave_ring(c);
            self.unblock(c);
            self.funblock(c, false);
            self.unsleep(c);
            self.deactivate(c);
        }
        pkts
    }

    /// Put back a packet that was already counted as enqueued (by `adopt`).
    fn requeue(&mut self, c: u32, pkt: P, now: Time, report: &mut AdoptReport) {
        let was_empty = self.leaf_backlog(c).packets == 0;
        if was_empty {
            self.idle.busy(c);
        }
        let res = match &mut self.classes[c as usize].leaf {
            Leaf::Fifo(q) => q.push(pkt),
            Leaf::Boxed(b) => b.enqueue(pkt, now),
            Leaf::Inner => Err(Dropped {
                packet: pkt,
                reason: crate::qdisc::DropReason::QueueLimit,
            }),
        };
        match res {
            Ok(()) => report.moved_packets += 1,
            Err(d) => {
                report.dropped_packets += 1;
                self.classes[c as usize].drops += 1;
                self.books.drop_victim(d);
            }
        }
        self.collect_victims(c);
        self.note_idle(c, now);
        if was_empty && self.leaf_backlog(c).packets > 0 {
            self.activate(c);
        }
    }
}
