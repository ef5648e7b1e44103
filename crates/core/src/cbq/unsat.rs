//! The unsatisfied set of one height: the classes at that height with a backlogged descendant,
//! each keyed by its `undertime` (0 while it has none), and the one question the guidelines ask
//! of it — is any member's key at or before `now` (an unsatisfied class: underlimit with
//! something to send; F&J 1995 §3, ALTQ's `rmc_tl_satisfied` and `rmc_under_limit`).
//!
//! Principles: only the smallest key is ever asked for, and a class's key changes on almost every
//! packet it sends while it is overlimit, so an ordered set (`BTreeSet`: a removal and an
//! insertion per change, ~35 % of CBQ's instructions per packet) does more than the question
//! needs. Here:
//! * members with key 0 (underlimit: always due) are only **counted**;
//! * the others are in a binary min-heap of `(key, class)` whose entries are never taken out
//!   when they go stale (the class left the set or got another key): a stale entry is dropped
//!   when it reaches the top. The **top is always current** (every change that can make it stale
//!   is followed by [`Unsat::settle`]), so the question is one comparison, O(1);
//! * a change is a push, O(log m) worst case and O(1) for the usual later key, and each stale
//!   entry is popped at most once; a push that finds the heap above twice the keyed members
//!   (plus a margin) rebuilds it from its current entries, O(m log m) amortised over the m
//!   pushes since the last rebuild, so the heap never holds more than twice the most members
//!   it ever had, plus the margin.
//!
//! Whether an entry is current is the caller's to say (the class record holds the truth: still a
//! member, same key), so this file holds no class state of its own.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Stale entries allowed beyond the current ones before a rebuild.
const SLACK: usize = 64;

#[derive(Clone, Debug, Default)]
pub(super) struct Unsat {
    /// Members with key 0.
    zero: usize,
    /// Members with a key above 0 (each has at least one current entry in `heap`).
    keyed: usize,
    /// `(key, class)` of the keyed members, and stale entries below the top.
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl Unsat {
    /// Class `c` becomes a member with key `k`.
    pub(super) fn insert(&mut self, k: u64, c: u32, current: impl Fn(u64, u32) -> bool) {
        if k == 0 {
            self.zero += 1;
        } else {
            self.keyed += 1;
            self.push(k, c, current);
        }
    }

    /// Class `c`, a member with key `k`, leaves (its record already says so).
    pub(super) fn remove(&mut self, k: u64, current: impl Fn(u64, u32) -> bool) {
        if k == 0 {
            self.zero = self.zero.saturating_sub(1);
        } else {
            self.keyed = self.keyed.saturating_sub(1);
            self.settle(current);
        }
    }

    /// Member `c`'s key changes from `old` to `new` (its record already holds `new`).
    pub(super) fn rekey(&mut self, old: u64, new: u64, c: u32, current: impl Fn(u64, u32) -> bool) {
        match (old == 0, new == 0) {
            (true, true) => {}
            (true, false) => {
                self.zero = self.zero.saturating_sub(1);
                self.keyed += 1;
                self.push(new, c, current);
            }
            (false, true) => {
                self.keyed = self.keyed.saturating_sub(1);
                self.zero += 1;
                self.settle(current);
            }
            (false, false) => {
                self.push(new, c, &current);
                self.settle(current);
            }
        }
    }

    /// Is some member due at `now` (key ≤ `now`)? O(1): the top is current.
    pub(super) fn any_due(&self, now: u64) -> bool {
        self.zero > 0 || self.heap.peek().is_some_and(|Reverse((k, _))| *k <= now)
    }

    /// Members.
    pub(super) fn len(&self) -> usize {
        self.zero + self.keyed
    }

    /// Members counted with key 0, and the heap's entries (current and stale): for the invariant
    /// check, which matches them against the class records in one pass.
    pub(super) fn filed(&self) -> (usize, impl Iterator<Item = (u64, u32)> + '_) {
        (self.zero, self.heap.iter().map(|Reverse(e)| *e))
    }

    /// Whether the top entry is current (the invariant [`Self::any_due`] relies on).
    pub(super) fn top_is_current(&self, current: impl Fn(u64, u32) -> bool) -> bool {
        self.heap
            .peek()
            .is_none_or(|Reverse((k, c))| current(*k, *c))
    }

    fn push(&mut self, k: u64, c: u32, current: impl Fn(u64, u32) -> bool) {
        self.heap.push(Reverse((k, c)));
        if self.heap.len() > 2 * self.keyed + SLACK {
            let mut v: Vec<(u64, u32)> = std::mem::take(&mut self.heap)
                .into_vec()
                .into_iter()
                .map(|Reverse(e)| e)
                .filter(|&(k, c)| current(k, c))
                .collect();
            v.sort_unstable();
            v.dedup();
            self.heap = v.into_iter().map(Reverse).collect();
        }
    }

    /// Drop stale entries from the top.
    fn settle(&mut self, current: impl Fn(u64, u32) -> bool) {
        while let Some(Reverse((k, c))) = self.heap.peek() {
            if current(*k, *c) {
                return;
            }
            self.heap.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn answers_as_an_ordered_set_does() {
        // Random membership and key changes against a BTreeSet of (key, class).
        let n = 40u32;
        let mut key: Vec<Option<u64>> = vec![None; n as usize]; // None: not a member
        let mut set = BTreeSet::new();
        let mut u = Unsat::default();
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for step in 0..100_000u64 {
            let c = (next() % n as u64) as u32;
            let new = if next() % 4 == 0 {
                0
            } else {
                1 + next() % 1000
            };
            let old = key[c as usize];
            match (old, next() % 3) {
                (None, _) => {
                    key[c as usize] = Some(new);
                    set.insert((new, c));
                    let kk = key.clone();
                    u.insert(new, c, |k, x| kk[x as usize] == Some(k));
                }
                (Some(o), 0) => {
                    key[c as usize] = None;
                    set.remove(&(o, c));
                    let kk = key.clone();
                    u.remove(o, |k, x| kk[x as usize] == Some(k));
                }
                (Some(o), _) => {
                    key[c as usize] = Some(new);
                    set.remove(&(o, c));
                    set.insert((new, c));
                    let kk = key.clone();
                    u.rekey(o, new, c, |k, x| kk[x as usize] == Some(k));
                }
            }
            let kk = key.clone();
            assert!(u.top_is_current(|k, x| kk[x as usize] == Some(k)));
            assert_eq!(u.len(), set.len(), "step {step}");
            let now = next() % 1100;
            let want = set.first().is_some_and(|&(k, _)| k <= now);
            assert_eq!(u.any_due(now), want, "step {step}, now {now}");
            // Only a push grows the heap, and a push past the bound rebuilds it: never more
            // than twice the most members there ever were, plus the slack.
            assert!(u.heap.len() <= 2 * n as usize + SLACK + 1, "step {step}");
        }
    }
}
