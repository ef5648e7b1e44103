//! The wait queue of one HTB level: the classes of that level that are not `CanSend`, each
//! under the instant its mode ends, served smallest `(instant, class)` first.
//!
//! Principles (Linux net/sched/sch_htb.c `htb_add_to_wait_tree`, `htb_safe_rb_erase`,
//! `htb_do_events`: an rb-tree per level keyed by that instant). A throttled class's key changes
//! on almost every packet it sends (its debt grows), and the only question asked of the queue is
//! its smallest entry. An ordered set (a removal and an insertion per change: a `BTreeSet`
//! here before, 20–30 % of the borrowing bench's samples at 100,000 leaves) does more than that
//! needs. Here, as CBQ's unsatisfied set does (`cbq::unsat`):
//! * a class's entries are a 4-ary min-heap of `(key, class)` in one array, never taken out when
//!   they go stale (the class became `CanSend` or got another key); an entry is **current** iff
//!   the class is not `CanSend` and its key — a pure function of its buckets, `tokens::key_of` —
//!   is the entry's. So the set of current entries is exactly what the ordered set held, and
//!   the smallest current entry is the same;
//! * a change of key is a push: O(log₄ w) worst case and O(1) expected for the usual later key
//!   (it stops where its parent is smaller); a charge that leaves the key where it was (a class
//!   that borrowed: its own tokens are only refilled) pushes nothing (`Htb::change_mode`). Stale
//!   entries are dropped when they reach the top ([`WaitQ::settle`], called by every reader of
//!   the top), each once, O(log₄ w);
//! * a push that finds the heap at twice the current members plus [`SLACK`] rebuilds it from its
//!   current entries, sorted (O(w log w), amortised over the w or more pushes since the last
//!   rebuild), so it never holds more than about twice the most members it had;
//! * four children a node: a node's children are 64 bytes, one cache line, so a sift down over
//!   a heap larger than the caches misses once a level, over half as many levels as a binary
//!   heap's.
//!
//! Exactness: `do_events` pops current entries in the order the ordered set gave them (smallest
//! key, then smallest class id), so the mode changes — and what the scheduler does — are the
//! same; `check_invariants` checks every non-`CanSend` class has a current entry at its level,
//! that the count of members is right and that the heap is bounded. Whether an entry is current
//! is the caller's to say (the class record holds the truth), so this file holds no class state.

/// Stale entries allowed beyond twice the members before a rebuild.
pub(super) const SLACK: usize = 64;

/// Children per heap node.
const ARITY: usize = 4;

#[derive(Clone, Debug, Default)]
pub(super) struct WaitQ {
    /// `(key, class)`: a 4-ary min-heap, current and stale entries.
    heap: Vec<(u64, u32)>,
    /// Classes of this level that are not `CanSend` (each has a current entry).
    members: usize,
    /// The most members since the last rebuild: the heap holds at most twice that plus
    /// [`SLACK`].
    peak: usize,
}

impl WaitQ {
    /// A class of this level stopped being `CanSend` (its entry is pushed separately).
    #[inline]
    pub(super) fn joined(&mut self) {
        self.members += 1;
        self.peak = self.peak.max(self.members);
    }

    /// A class of this level became `CanSend` (its entries go stale).
    #[inline]
    pub(super) fn left(&mut self) {
        self.members = self.members.saturating_sub(1);
    }

    /// Members (classes not `CanSend`).
    pub(super) fn members(&self) -> usize {
        self.members
    }

    /// Entries, current and stale (for the invariant check).
    pub(super) fn entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.heap.iter().copied()
    }

    /// Number of entries, current and stale.
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether the heap is within its bound (for the invariant check): every push finds it
    /// below twice the members plus [`SLACK`] or rebuilds it first.
    pub(super) fn bounded(&self) -> bool {
        self.heap.len() <= 2 * self.peak + SLACK
    }

    pub(super) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The smallest entry, current or not: call [`Self::settle`] first.
    #[inline]
    pub(super) fn top(&self) -> Option<(u64, u32)> {
        self.heap.first().copied()
    }

    /// File `(key, c)`; rebuilds from the current entries when the heap is too large.
    pub(super) fn push(&mut self, key: u64, c: u32, current: impl Fn(u64, u32) -> bool) {
        if self.heap.len() >= 2 * self.members + SLACK {
            self.heap.retain(|&(k, x)| current(k, x));
            self.heap.sort_unstable();
            self.heap.dedup();
            // A sorted array is a heap.
            self.peak = self.members;
        }
        self.heap.push((key, c));
        self.sift_up(self.heap.len() - 1);
    }

    /// Drop stale entries from the top: afterwards the top, if any, is current.
    #[inline]
    pub(super) fn settle(&mut self, current: impl Fn(u64, u32) -> bool) {
        while let Some(&(k, c)) = self.heap.first() {
            if current(k, c) {
                return;
            }
            self.pop();
        }
    }

    /// Take the top entry out (call [`Self::settle`] first).
    pub(super) fn pop(&mut self) {
        let Some(last) = self.heap.pop() else {
            return;
        };
        if self.heap.is_empty() {
            return;
        }
        self.heap[0] = last;
        self.sift_down(0);
    }

    fn sift_up(&mut self, mut i: usize) {
        let x = self.heap[i];
        while i > 0 {
            let p = (i - 1) / ARITY;
            if self.heap[p] <= x {
                break;
            }
            self.heap[i] = self.heap[p];
            i = p;
        }
        self.heap[i] = x;
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        let x = self.heap[i];
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let end = (first + ARITY).min(n);
            let mut m = first;
            for j in first + 1..end {
                if self.heap[j] < self.heap[m] {
                    m = j;
                }
            }
            if self.heap[m] >= x {
                break;
            }
            self.heap[i] = self.heap[m];
            i = m;
        }
        self.heap[i] = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::cell::RefCell;
    use std::collections::{BTreeSet, HashMap};

    #[test]
    fn serves_what_an_ordered_set_serves() {
        // Random key changes, joins and leaves, against a BTreeSet of (key, class) and a map of
        // each class's current key (the "record").
        let truth: RefCell<HashMap<u32, u64>> = RefCell::new(HashMap::new());
        let mut set = BTreeSet::new();
        let mut q = WaitQ::default();
        let mut rng = rand_pcg::Pcg64::seed_from_u64(14);
        let mut rnd = move |m: u64| rng.gen_range(0..m);
        let mut now = 0u64;
        let mut max_len = 0;
        for step in 0..200_000 {
            let c = rnd(500) as u32;
            let cur = |k: u64, c: u32| truth.borrow().get(&c) == Some(&k);
            match rnd(10) {
                0..=5 => {
                    // A new key (later, usually), joining if it was not a member.
                    let k = now + rnd(1_000_000);
                    let old = truth.borrow_mut().insert(c, k);
                    match old {
                        Some(o) => {
                            set.remove(&(o, c));
                        }
                        None => q.joined(),
                    }
                    set.insert((k, c));
                    q.push(k, c, cur);
                }
                6 => {
                    if let Some(o) = truth.borrow_mut().remove(&c) {
                        set.remove(&(o, c));
                        q.left();
                    }
                }
                _ => {
                    // Serve what is due, as do_events does.
                    now += rnd(3_000);
                    loop {
                        q.settle(|k, c| truth.borrow().get(&c) == Some(&k));
                        let want = set.first().copied();
                        assert_eq!(q.top(), want, "step {step}");
                        match want {
                            Some((k, c)) if k <= now => {
                                q.pop();
                                set.remove(&(k, c));
                                truth.borrow_mut().remove(&c);
                                q.left();
                            }
                            _ => break,
                        }
                    }
                }
            }
            assert_eq!(q.members(), set.len());
            assert!(
                q.bounded(),
                "step {step}: {} entries for {}",
                q.len(),
                set.len()
            );
            max_len = max_len.max(q.len());
        }
        // Above twice the members plus the slack at times: rebuilds happened.
        assert!(max_len > 600, "the test never filled the heap ({max_len})");
    }
}
