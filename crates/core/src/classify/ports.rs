//! First-match lookup over (source port, destination port) rectangles.
//!
//! A bucket of the tuple space holds the filters that share every exact-match field (TOS bits,
//! protocol, masked addresses) and differ only in their port ranges. Each such filter is a
//! rectangle `[sp_lo, sp_hi] × [dp_lo, dp_hi]` with a priority (its filter index, lower wins);
//! a missing range is the full `0..=65535`. A lookup asks: among the rectangles containing the
//! point `(sp, dp)`, which has the lowest index?
//!
//! Small buckets (at most [`FEW`] rules) are scanned in index order: a constant bound.
//!
//! Larger buckets use a **persistent segment tree swept along the source-port axis**:
//!
//! * The range ends split each axis into elementary intervals (`xs` for source ports, `ys` for
//!   destination ports); at most `2k + 1` per axis for `k` rules.
//! * Sweep the source axis left to right. A rule is *active* in the source slabs its range covers.
//!   The active rules' destination ranges are kept in a segment tree over the `ys` intervals, each
//!   range stored at its `O(log k)` canonical nodes; a node's value is the lowest index stored at
//!   it. The lowest index covering leaf `y` is then the minimum along the root-to-leaf path.
//! * Entering or leaving a rule changes `O(log k)` nodes. With path copying every slab keeps its
//!   own root while sharing unchanged subtrees, so all `O(k)` versions together take
//!   `O(k log k)` nodes. (Deletions are why each node's *build-time* state is a set of indices, so
//!   that its minimum can be recomputed; only the minimum is kept in the tree.)
//!
//! Lookup: binary search for the source slab (`O(log k)`), binary search for the destination
//! leaf (`O(log k)`), one root-to-leaf walk (`O(log k)`): **`O(log k)` per bucket**, no
//! allocation. Build: `O(k log² k)` time (set operations at each touched node), `O(k log k)` space.

use std::collections::BTreeSet;

/// No filter: larger than every filter index.
pub(crate) const NONE: u32 = u32::MAX;

/// Buckets with at most this many rules are scanned linearly (a constant, independent of `n`).
pub(crate) const FEW: usize = 8;

/// One filter's port constraint inside a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PortRule {
    pub index: u32,
    /// Inclusive source-port range (`(0, 65535)` when the filter has none).
    pub sp: (u16, u16),
    /// Inclusive destination-port range.
    pub dp: (u16, u16),
}

impl PortRule {
    #[inline]
    pub fn contains(&self, sp: u16, dp: u16) -> bool {
        self.sp.0 <= sp && sp <= self.sp.1 && self.dp.0 <= dp && dp <= self.dp.1
    }
}

/// A node of the persistent tree; node 0 is the shared empty tree (its children are itself).
#[derive(Clone, Copy, Debug)]
struct Node {
    left: u32,
    right: u32,
    /// Lowest filter index among ranges whose canonical decomposition includes this node.
    best: u32,
}

const EMPTY: Node = Node {
    left: 0,
    right: 0,
    best: NONE,
};

/// The swept persistent segment tree (see the module comment).
#[derive(Clone, Debug)]
pub(crate) struct PortIndex {
    /// Start of each source-port slab; `xs[0] == 0`.
    xs: Vec<u16>,
    /// Tree root for each slab.
    roots: Vec<u32>,
    /// Start of each destination-port leaf interval; `ys[0] == 0`.
    ys: Vec<u16>,
    nodes: Vec<Node>,
}

/// Sorted, distinct starts of the elementary intervals that the given ranges cut `0..=65535` into.
fn breakpoints(ranges: impl Iterator<Item = (u16, u16)>) -> Vec<u16> {
    let mut v = vec![0u16];
    for (lo, hi) in ranges {
        v.push(lo);
        if hi < u16::MAX {
            v.push(hi + 1);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Index of the elementary interval containing `p` (`starts[0] == 0`, so it exists).
#[inline]
fn slot(starts: &[u16], p: u16) -> usize {
    starts.partition_point(|&s| s <= p).saturating_sub(1)
}

/// Half-open leaf range `[a, b)` covered by the inclusive port range `r`.
fn leaf_span(starts: &[u16], r: (u16, u16)) -> (usize, usize) {
    let a = slot(starts, r.0);
    let b = if r.1 == u16::MAX {
        starts.len()
    } else {
        slot(starts, r.1 + 1)
    };
    (a, b)
}

struct Builder {
    nodes: Vec<Node>,
    /// Build-time multiset (indices are distinct) per heap-numbered node of the segment tree.
    sets: Vec<BTreeSet<u32>>,
    /// Nodes at or above this index were created for the slab being built and may be mutated.
    version_start: u32,
}

impl Builder {
    /// Insert (or remove) `index` on the canonical nodes of leaf range `[ql, qh)` in the tree
    /// rooted at `node`, which spans `[lo, hi)` and has heap number `heap`. Returns the new root.
    #[allow(clippy::too_many_arguments)]
    fn update(
        &mut self,
        node: u32,
        lo: usize,
        hi: usize,
        ql: usize,
        qh: usize,
        heap: usize,
        index: u32,
        insert: bool,
    ) -> u32 {
        if qh <= lo || hi <= ql {
            return node;
        }
        let n = if node >= self.version_start {
            node
        } else {
            self.nodes.push(self.nodes[node as usize]);
            (self.nodes.len() - 1) as u32
        };
        if ql <= lo && hi <= qh {
            let set = &mut self.sets[heap];
            if insert {
                set.insert(index);
            } else {
                set.remove(&index);
            }
            self.nodes[n as usize].best = set.first().copied().unwrap_or(NONE);
            return n;
        }
        let mid = lo + (hi - lo) / 2;
        let Node { left, right, .. } = self.nodes[n as usize];
        let left = self.update(left, lo, mid, ql, qh, 2 * heap, index, insert);
        let right = self.update(right, mid, hi, ql, qh, 2 * heap + 1, index, insert);
        self.nodes[n as usize].left = left;
        self.nodes[n as usize].right = right;
        n
    }
}

impl PortIndex {
    /// Build from rules (any order; indices distinct).
    pub fn build(rules: &[PortRule]) -> Self {
        let xs = breakpoints(rules.iter().map(|r| r.sp));
        let ys = breakpoints(rules.iter().map(|r| r.dp));
        let m = ys.len();

        // (slab, rule, insert?) — a rule enters at the slab of sp.lo and leaves at that of sp.hi+1.
        let mut events: Vec<(usize, usize, bool)> = Vec::with_capacity(2 * rules.len());
        for (i, r) in rules.iter().enumerate() {
            let (enter, leave) = leaf_span(&xs, r.sp);
            events.push((enter, i, true));
            if leave < xs.len() {
                events.push((leave, i, false));
            }
        }
        events.sort_unstable();

        let mut b = Builder {
            nodes: vec![EMPTY],
            sets: vec![BTreeSet::new(); 4 * m],
            version_start: 1,
        };
        let mut root = 0u32;
        let mut roots = Vec::with_capacity(xs.len());
        let mut e = 0;
        for slab in 0..xs.len() {
            b.version_start = b.nodes.len() as u32;
            while let Some(&(s, i, insert)) = events.get(e) {
                if s != slab {
                    break;
                }
                let r = rules[i];
                let (ql, qh) = leaf_span(&ys, r.dp);
                root = b.update(root, 0, m, ql, qh, 1, r.index, insert);
                e += 1;
            }
            roots.push(root);
        }
        PortIndex {
            xs,
            roots,
            ys,
            nodes: b.nodes,
        }
    }

    /// Lowest index among rules containing `(sp, dp)`, or [`NONE`].
    #[inline]
    pub fn lookup(&self, sp: u16, dp: u16) -> u32 {
        let mut node = self.roots.get(slot(&self.xs, sp)).copied().unwrap_or(0);
        let leaf = slot(&self.ys, dp);
        let (mut lo, mut hi) = (0usize, self.ys.len());
        let mut best = NONE;
        while node != 0 {
            let Some(n) = self.nodes.get(node as usize) else {
                break;
            };
            best = best.min(n.best);
            if hi - lo <= 1 {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            if leaf < mid {
                node = n.left;
                hi = mid;
            } else {
                node = n.right;
                lo = mid;
            }
        }
        best
    }

    /// Number of tree nodes (memory diagnostics).
    #[cfg(test)]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(rules: &[PortRule], sp: u16, dp: u16) -> u32 {
        rules
            .iter()
            .filter(|r| r.contains(sp, dp))
            .map(|r| r.index)
            .min()
            .unwrap_or(NONE)
    }

    #[test]
    fn matches_naive_on_random_rectangles() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        for round in 0..40 {
            let k = 1 + round * 5;
            let mut rules = Vec::new();
            for i in 0..k {
                let range = |rng: &mut rand_pcg::Pcg64| {
                    if rng.gen_bool(0.2) {
                        (0, u16::MAX)
                    } else {
                        let a = rng.gen_range(0..40u16);
                        let b = rng.gen_range(0..40u16);
                        let (a, b) = (a.min(b), a.max(b));
                        // Sometimes touch the top of the port space.
                        if rng.gen_bool(0.1) {
                            (a, u16::MAX)
                        } else {
                            (a, b)
                        }
                    }
                };
                let sp = range(&mut rng);
                let dp = range(&mut rng);
                // Indices out of order, as a bucket may receive them.
                rules.push(PortRule {
                    index: (i as u32 * 7919) % 1000,
                    sp,
                    dp,
                });
            }
            rules.sort_by_key(|r| r.index);
            rules.dedup_by_key(|r| r.index);
            let idx = PortIndex::build(&rules);
            for sp in (0..45u16).chain([1000, u16::MAX - 1, u16::MAX]) {
                for dp in (0..45u16).chain([1000, u16::MAX]) {
                    assert_eq!(
                        idx.lookup(sp, dp),
                        naive(&rules, sp, dp),
                        "k={k} sp={sp} dp={dp}"
                    );
                }
            }
        }
    }

    #[test]
    fn empty_and_full() {
        let idx = PortIndex::build(&[]);
        assert_eq!(idx.lookup(0, 0), NONE);
        assert_eq!(idx.lookup(u16::MAX, u16::MAX), NONE);
        let full = PortRule {
            index: 3,
            sp: (0, u16::MAX),
            dp: (0, u16::MAX),
        };
        let idx = PortIndex::build(&[full]);
        assert_eq!(idx.lookup(0, 0), 3);
        assert_eq!(idx.lookup(u16::MAX, 12345), 3);
    }

    #[test]
    fn space_is_n_log_n() {
        // 4096 disjoint destination ranges, each with its own source range: nodes stay near
        // k·log k, far from the k² a grid would need.
        let rules: Vec<PortRule> = (0..4096u16)
            .map(|i| PortRule {
                index: u32::from(i),
                sp: (i * 8, i * 8 + 3),
                dp: (i * 4, i * 4 + 1),
            })
            .collect();
        let idx = PortIndex::build(&rules);
        assert!(
            idx.node_count() < 4096 * 2 * 4 * 14,
            "{} nodes",
            idx.node_count()
        );
        assert_eq!(idx.lookup(8 * 100 + 2, 401), 100);
        assert_eq!(idx.lookup(8 * 100 + 2, 402), NONE);
    }
}
