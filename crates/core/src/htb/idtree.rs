//! HTB's feeds kept in class-id order, as Linux keeps them (rows use the bitmaps of
//! [`super::rowbits`] for the same order).
//!
//! Principles (Linux net/sched/sch_htb.c: `htb_add_to_id_tree`, `htb_safe_rb_erase`,
//! `htb_next_rb_node`, `htb_id_find_next_upper`): every row `row[level][prio]` and every feed
//! `inner.feed[prio]` is a tree keyed by class id, and round robin walks it in id order. A class
//! that leaves a list and comes back finds its old place, so its turn in the round does not
//! depend on when it came back. (Arrival-order lists, which this replaced, let a class that left
//! just behind the cursor and came back at the tail take a second turn in the same round: with
//! exactly periodic traffic that happened every round and gave it all of the spare bandwidth.)
//! Class ids here are class indexes, which follow the tc class ids `linkshare export tc` gives
//! (`1:<i+1>`).
//!
//! Linux uses a red-black tree; here each feed is a treap over the intrusive [`Link`] every node
//! already has (a leaf's in its 64-byte record, an inner class's in `Htb::links`): two children,
//! heap priority a fixed hash of the node id, so the shape is deterministic and expected
//! O(log n) deep. No parent links and no thread: the successor of a node is the leftmost node of
//! its right subtree or, when it has none, found from the root, O(log n) like every other
//! operation; the list's `head` (its smallest id) is kept up to date so that rewinding is O(1).
//! Insert and remove need no recursion and no allocation.
use super::*;

/// Where a subtree hangs: the list's root, or a child link of a node.
#[derive(Copy, Clone)]
enum Edge {
    Root(usize),
    Left(u32),
    Right(u32),
}

/// The treap priority of a node: a bijective integer hash (Wellons' "lowbias32"), so distinct
/// nodes have distinct priorities and the tree's shape is a pure function of its members.
#[inline]
fn heap_prio(node: u32) -> u32 {
    let mut x = node;
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

impl<P: Packet> Htb<P> {
    fn edge(&self, e: Edge) -> u32 {
        match e {
            Edge::Root(lid) => self.lists[lid].root,
            Edge::Left(n) => self.link(n).left,
            Edge::Right(n) => self.link(n).right,
        }
    }

    fn set_edge(&mut self, e: Edge, v: u32) {
        match e {
            Edge::Root(lid) => self.lists[lid].root = v,
            Edge::Left(n) => self.link_mut(n).left = v,
            Edge::Right(n) => self.link_mut(n).right = v,
        }
    }

    /// Put `node` (not in any list) into feed `lid` at its place in class-id order.
    pub(super) fn id_insert(&mut self, lid: usize, node: u32) {
        let k = self.owner_of(node);
        let hp = heap_prio(node);
        // Down to where `node` belongs in the heap order.
        let mut e = Edge::Root(lid);
        loop {
            let t = self.edge(e);
            if t == NIL || heap_prio(t) < hp {
                break;
            }
            e = if self.owner_of(t) < k {
                Edge::Right(t)
            } else {
                Edge::Left(t)
            };
        }
        // Split the subtree found there into the ids below `k` (node's left) and above (right).
        let mut t = self.edge(e);
        self.set_edge(e, node);
        let mut l = Edge::Left(node);
        let mut r = Edge::Right(node);
        while t != NIL {
            if self.owner_of(t) < k {
                self.set_edge(l, t);
                l = Edge::Right(t);
                t = self.link(t).right;
            } else {
                self.set_edge(r, t);
                r = Edge::Left(t);
                t = self.link(t).left;
            }
        }
        self.set_edge(l, NIL);
        self.set_edge(r, NIL);
        let head = self.lists[lid].head;
        if head == NIL || k < self.owner_of(head) {
            self.lists[lid].head = node;
        }
    }

    /// Take `node` out of feed `lid`. A node that is not there is left alone.
    pub(super) fn id_remove(&mut self, lid: usize, node: u32) {
        let k = self.owner_of(node);
        if self.lists[lid].head == node {
            self.lists[lid].head = self.id_next_after(lid, node);
        }
        let mut e = Edge::Root(lid);
        loop {
            let t = self.edge(e);
            if t == node || t == NIL {
                break;
            }
            e = if self.owner_of(t) < k {
                Edge::Right(t)
            } else {
                Edge::Left(t)
            };
        }
        if self.edge(e) != node {
            debug_assert!(false, "node {node} not in list {lid}");
            return;
        }
        let Link { left, right } = self.link(node);
        // Merge its two subtrees in its place.
        let (mut a, mut b) = (left, right);
        loop {
            if a == NIL {
                self.set_edge(e, b);
                break;
            }
            if b == NIL {
                self.set_edge(e, a);
                break;
            }
            if heap_prio(a) > heap_prio(b) {
                self.set_edge(e, a);
                e = Edge::Right(a);
                a = self.link(a).right;
            } else {
                self.set_edge(e, b);
                e = Edge::Left(b);
                b = self.link(b).left;
            }
        }
        *self.link_mut(node) = Link::NONE;
    }

    /// The member of feed `lid` after `node` (a member) in id order, or NIL.
    pub(super) fn id_next_after(&self, lid: usize, node: u32) -> u32 {
        let mut n = self.link(node).right;
        if n != NIL {
            loop {
                let l = self.link(n).left;
                if l == NIL {
                    return n;
                }
                n = l;
            }
        }
        let k = self.owner_of(node);
        let mut n = self.lists[lid].root;
        let mut found = NIL;
        while n != NIL && n != node {
            if self.owner_of(n) > k {
                found = n;
                n = self.link(n).left;
            } else {
                n = self.link(n).right;
            }
        }
        found
    }

    /// The node of feed `lid` with the smallest class id ≥ `k`, or NIL
    /// (`htb_id_find_next_upper`).
    pub(super) fn id_next_upper(&self, lid: usize, k: u32) -> u32 {
        let mut n = self.lists[lid].root;
        let mut found = NIL;
        while n != NIL {
            let kn = self.owner_of(n);
            if kn == k {
                return n;
            }
            if k > kn {
                n = self.link(n).right;
            } else {
                found = n;
                n = self.link(n).left;
            }
        }
        found
    }

    /// Check feed `lid`: a treap (search order and heap order) whose smallest member is `head`.
    /// Returns its length.
    pub(super) fn id_check(&self, lid: usize) -> Result<usize, String> {
        // In order, with an explicit stack; heap order checked on the way.
        let mut len = 0usize;
        let mut prev_key: Option<u32> = None;
        let mut first = NIL;
        let mut stack = Vec::new();
        let mut n = self.lists[lid].root;
        loop {
            while n != NIL {
                if stack.len() > self.classes.len() + self.links.len() {
                    return Err(format!("list {lid}: cycle"));
                }
                stack.push(n);
                let Link { left, right } = self.link(n);
                for ch in [left, right] {
                    if ch != NIL && heap_prio(ch) > heap_prio(n) {
                        return Err(format!("list {lid}: heap order broken below node {n}"));
                    }
                }
                n = left;
            }
            let Some(x) = stack.pop() else { break };
            len += 1;
            if len > self.classes.len() + self.links.len() {
                return Err(format!("list {lid}: cycle"));
            }
            let k = self.owner_of(x);
            if prev_key.is_some_and(|p| p >= k) {
                return Err(format!("list {lid}: not in id order at node {x}"));
            }
            if first == NIL {
                first = x;
            }
            prev_key = Some(k);
            n = self.link(x).right;
        }
        if first != self.lists[lid].head {
            return Err(format!(
                "list {lid}: head {} is not its first member {first}",
                self.lists[lid].head
            ));
        }
        Ok(len)
    }
}
