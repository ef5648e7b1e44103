//! Changes applied to a running HTB in place: a class's rates, bursts, quantum or FIFO limit
//! ([`Htb::retune`]) and the filters ([`Htb::replace_classifier`]), each in time independent of
//! the number of classes, so that one subscriber's change among a million costs what one costs
//! among ten.
//!
//! Principles:
//! * **only the class changed is touched**: its buckets are brought up to `now` under the old
//!   parameters (what they would hold had it been charged now), capped at the new bursts, and
//!   its mode is recomputed under the new ones; no other class's record, counters, queue or list
//!   membership changes (a mode change moves the class in or out of its rows and its parent's
//!   feeds as a charge would). Its counters and queue stay; a smaller FIFO limit refuses new
//!   packets until the queue is below it, as Linux's `tc class change` does;
//! * **profiles stay shared and bounded**: a class's new parameters are looked up among the
//!   profiles in use (O(p) for `p` distinct profiles: a handful of plans), and a profile that no
//!   class uses any more is reused, so any number of changes leaves as many profiles as a tree
//!   built afresh with the same parameters needs, at most;
//! * **the tree's shape is not changed here**: classes added or removed are `reshape`'s; a new
//!   parent, prio or leaf kind is a rebuild whose state is taken over by [`Htb::adopt`]. The
//!   caller decides which one a change needs (the router diffs the two policies off its
//!   datapath thread).
//!
//! Linux's equivalent is `tc class change` (net/sched/sch_htb.c, `htb_change_class`: new rate
//! tables and buffers, tokens kept); here the buckets are settled first, so the exact
//! accounting (module docs, "Exact accounting") carries through the change.

use super::*;

/// A class's parameters that can change in place ([`Htb::retune`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ClassTune {
    pub rate: Rate,
    pub ceil: Rate,
    /// Bytes.
    pub burst: u32,
    pub cburst: u32,
    pub quantum: u32,
    /// The inline FIFO's limit, in packets or bytes as the leaf's FIFO counts; ignored for an
    /// inner class or a leaf with its own qdisc.
    pub fifo_limit: u32,
}

impl<P: Packet> Htb<P> {
    /// Give class `c` new parameters, keeping its counters, queue and buckets (as of `now`,
    /// capped at the new bursts). `Ok(false)` when nothing changes. O(p) for `p` profiles in use,
    /// plus O(log w) for its wait-queue entry; nothing else is touched.
    pub fn retune(&mut self, c: ClassId, t: &ClassTune, now: Time) -> Result<bool, HtbError> {
        let Some(cl) = self.classes.get(c as usize) else {
            return Err(HtbError::UnknownClass(c));
        };
        let old = *self.prof(c);
        let limit = match cl.kind {
            LeafKind::Pfifo | LeafKind::Bfifo => t.fifo_limit.min(LIMIT_MASK),
            LeafKind::None | LeafKind::Boxed => old.limit,
        };
        let new = Profile {
            rate: t.rate.0,
            ceil: t.ceil.0,
            buffer: nbits(t.burst as u64),
            cbuffer: nbits(t.cburst as u64),
            burst: t.burst,
            cburst: t.cburst,
            quantum: t.quantum,
            limit,
            prio: old.prio,
        };
        if new == old {
            return Ok(false);
        }
        self.check_tune(c, t)?;
        let old_key = self.wait_key(c);
        let cl = &mut self.classes[c as usize];
        let idle = now.0.saturating_sub(cl.t_c).min(MAX_IDLE_NS);
        let tokens = refill(cl.tokens, idle, old.rate, old.buffer).min(new.buffer);
        let ctokens = refill(cl.ctokens, idle, old.ceil, old.cbuffer).min(new.cbuffer);
        cl.tokens = clamp_debt(tokens, new.rate);
        cl.ctokens = clamp_debt(ctokens, new.ceil);
        cl.t_c = cl.t_c.max(now.0);
        self.set_profile(c, new);
        let (mode, until) = self.mode_at(c, now.0);
        // A change of parameters is not an overlimit event of the class.
        let overlimits = self.cold[c as usize].overlimits;
        self.change_mode(c, old_key, mode, until);
        self.cold[c as usize].overlimits = overlimits;
        Ok(true)
    }

    /// Run with other filters from now on; the old classifier is handed back (for its caller to
    /// free where freeing costs nothing: the router's builder thread). O(1): the new filters'
    /// targets need not be checked, because a packet classified to an unknown or inner class
    /// goes to the default class (`enqueue_to`); the default must be a leaf.
    pub fn replace_classifier(&mut self, new: Classifier) -> Result<Classifier, HtbError> {
        let d = new.default_class();
        match self.classes.get(d as usize) {
            Some(cl) if cl.is_leaf() => {
                self.default = d;
                Ok(std::mem::replace(&mut self.classifier, new))
            }
            _ => Err(HtbError::from_tree(
                crate::tree::TreeError::DefaultNotLeaf(d as usize),
                |i| {
                    self.class_name(i as ClassId)
                        .unwrap_or_else(|| format!("#{i}"))
                },
            )),
        }
    }

    /// The checks of [`HtbClassSpec::validate`] for new parameters of class `c`.
    fn check_tune(&self, c: ClassId, t: &ClassTune) -> Result<(), HtbError> {
        let class = || self.name(c);
        super::spec::check_rates(&class, t.rate, t.ceil, t.quantum, t.burst, t.cburst)
    }

    /// Point class `c` at a profile equal to `p`: one in use if there is one, else the slot
    /// of one no class uses any more (its own old one, when it was alone on it), else a new one.
    fn set_profile(&mut self, c: ClassId, p: Profile) {
        let old = self.classes[c as usize].profile as usize;
        self.profile_refs[old] -= 1;
        let id = self.intern_profile(p, Some(old));
        self.classes[c as usize].profile = id;
    }

    /// The index of a profile equal to `p`, counted as used once more: one in use if there is
    /// one, else `prefer` or another slot no class uses any more, else a new one. O(p).
    pub(super) fn intern_profile(&mut self, p: Profile, prefer: Option<usize>) -> u32 {
        let id = match self.profiles.iter().position(|q| *q == p) {
            Some(i) => i,
            None => match prefer
                .filter(|&o| self.profile_refs.get(o) == Some(&0))
                .or_else(|| self.profile_refs.iter().position(|&r| r == 0))
            {
                Some(i) => {
                    self.profiles[i] = p;
                    i
                }
                None => {
                    self.profiles.push(p);
                    self.profile_refs.push(0);
                    self.profiles.len() - 1
                }
            },
        };
        self.profile_refs[id] += 1;
        id as u32
    }

    /// Number of profiles held (in use or free for reuse), for tests and `memory`.
    pub fn profiles_held(&self) -> usize {
        self.profiles.len()
    }
}
