//! HTB taking over the HTB it replaces (a reload, a class added, changed or deleted at run time).
//!
//! Principles: classes are matched by name; a class kept keeps its counters and its buckets (as
//! of `now`, capped at the new bursts) and its packets, in order; the packets of classes that
//! are gone are classified again; the qdisc-wide books continue the old ones exactly (the moved
//! packets are neither counted twice nor lost), and what the old leaves drop while draining is
//! collected. Linux has no equivalent (`tc class change` keeps the class object, `tc qdisc
//! replace` loses everything); docs/router.md states the promise ("counters survive a reload").
use super::*;

impl<P: Packet> Htb<P> {
    /// Take over the state of the scheduler this one replaces (a reload, or a class added, changed
    /// or deleted at run time), so that nothing queued is lost and counters continue.
    ///
    /// Classes are matched by name. A class that exists in both keeps its counters and its
    /// buckets (as of `now`, capped at the new `burst`/`cburst`); its queued packets move to the
    /// new class in order. Packets of classes that are gone, or that are no longer leaves, are
    /// classified again by the new filters. A packet the new leaf refuses (a smaller `limit`) is
    /// counted as dropped with the leaf's reason and handed out through `take_dropped`. The
    /// qdisc-wide counters continue from `old`'s, so `enqueued = dequeued + dropped + backlog`
    /// still holds. `old` is left empty.
    ///
    /// O(n + q) for `n` classes and `q` queued packets; meant for the control path.
    pub fn adopt(&mut self, old: &mut Htb<P>, now: Time) -> AdoptReport {
        let mut report = AdoptReport::default();
        // What every class sent, kept by name (a class added starts from nothing, as in Linux):
        // an inner class's total is its subtree's sum (`Counters`), so it is set once the tree
        // is known rather than copied.
        let old_sent = old.sent_totals();
        let mut sent = vec![Counter::default(); self.classes.len()];
        let (old_names, new_names) = (old.names.all(), self.names.all());
        let (old_to_new, added) = crate::tree::match_names(
            old_names.iter().map(String::as_str),
            new_names.iter().map(String::as_str),
        );
        // Empty the old leaves first: an AQM leaf may drop while being drained, and those drops
        // must be in `old`'s counters before they become ours.
        let mut drained: Vec<(usize, Vec<P>)> = Vec::new();
        for c in 0..old.classes.len() {
            if old.classes[c].is_leaf() {
                drained.push((c, old.drain_leaf(c as u32, now)));
            }
        }
        for (c, n) in old_to_new.iter().enumerate() {
            let Some(n) = *n else {
                report.removed.push(old_names[c].clone());
                continue;
            };
            report.kept.push(old_names[c].clone());
            let o = &old.classes[c];
            let op = old.prof(c as u32);
            let idle = now.0.saturating_sub(o.t_c).min(MAX_IDLE_NS);
            let (tokens, rate, ctokens, ceil) = (o.tokens, op.rate, o.ctokens, op.ceil);
            let counters = old.cold[c];
            let old_key = self.wait_key(n);
            let np = *self.prof(n);
            let cl = &mut self.classes[n as usize];
            cl.tokens = clamp_debt(refill(tokens, idle, rate, np.buffer), np.rate);
            cl.ctokens = clamp_debt(refill(ctokens, idle, ceil, np.cbuffer), np.ceil);
            cl.t_c = now.0;
            self.cold[n as usize] = counters;
            sent[n as usize] = old_sent[c];
            match old.giants.get(&(c as u32)) {
                Some(&g) => self.giants.insert(n, g),
                None => self.giants.remove(&n),
            };
            let (mode, until) = self.mode_at(n, now.0);
            self.change_mode(n, old_key, mode, until);
            // Taking over a throttled class is not a new overlimit event.
            self.cold[n as usize].overlimits = counters.overlimits;
        }
        for c in added {
            report.added.push(new_names[c as usize].clone());
        }
        self.set_sent_totals(&sent);
        // Counters continue; the moved packets are already counted as enqueued and as backlog.
        // What `old` dropped and still holds is ours to hand out.
        self.books.take_over(&mut old.books);
        for (c, pkts) in drained {
            let target = old_to_new[c].filter(|&n| self.classes[n as usize].is_leaf());
            let mut moved = Counter::default();
            pkts.iter().for_each(|p| moved.add(p.len()));
            // A leaf qdisc kept by name continues its own counters (drops by reason, marks).
            let (oc, nc) = (&old.classes[c], target.map(|n| &self.classes[n as usize]));
            let (oq, nq) = (oc.q, nc.map(|n| (n.kind, n.q)));
            if let (LeafKind::Boxed, Some((nkind, nq))) = (oc.kind, nq) {
                if nkind == LeafKind::Boxed {
                    let prior = old.boxed[oq.tail as usize].stats().clone();
                    let leaf = &mut self.boxed[nq.tail as usize];
                    leaf.stats_mut().continue_from(&prior, moved);
                    // Its marks are in the qdisc-wide count already (continued from `old`).
                    self.marks_seen[nq.tail as usize] = leaf.stats().marked;
                }
            }
            for pkt in pkts {
                let to = match target {
                    Some(n) => n,
                    None => {
                        report.reclassified += 1;
                        let id = self.classifier.classify(pkt.meta());
                        match self.classes.get(id as usize) {
                            Some(cl) if cl.is_leaf() => id,
                            _ => self.default,
                        }
                    }
                };
                self.requeue(to, pkt, now, &mut report);
            }
        }
        report
    }

    /// Put back a packet that was already counted as enqueued (by `adopt`).
    pub(super) fn requeue(&mut self, c: u32, pkt: P, now: Time, report: &mut AdoptReport) {
        let was_empty = self.leaf_backlog(c).packets == 0;
        let res = if self.classes[c as usize].kind == LeafKind::Boxed {
            let b = self.classes[c as usize].boxed();
            self.idle.busy(b as u32);
            let r = self.boxed[b].enqueue(pkt, now);
            if self.boxed[b].backlog().packets == 0 {
                self.idle.went_idle(b as u32, now.0);
            }
            r
        } else {
            self.fifo_push(c, pkt)
        };
        match res {
            Ok(()) => {
                report.moved_packets += 1;
                if was_empty {
                    self.activate_leaf(c);
                }
            }
            Err(d) => {
                report.dropped_packets += 1;
                let k = &mut self.cold[c as usize];
                k.drops = k.drops.wrapping_add(1);
                self.books.drop_victim(d);
            }
        }
        self.collect_victims(c);
    }
}
