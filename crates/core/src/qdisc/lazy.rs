//! Per-flow state that follows traffic, not configuration: allocated when a leaf first sees a
//! packet, given back when it has stayed empty for a while.
//!
//! ## Principle
//! A per-flow leaf (fq_codel: 1,024 CoDel queues, ~128 KB; sfq: slots, hash tables and bucket
//! counters, ~45 KB; drr in flow-hash mode: 1,024 FIFOs) keeps its table only while it is in use.
//! The table is built at the first enqueue after the leaf was created or released, and
//! [`Qdisc::release_state`] frees it when the leaf holds no packet. What survives a release is
//! the leaf's parameters, its qdisc-wide counters ([`super::QdiscStats`]) and whatever is not
//! per flow (sfq's hash key and perturbation clock); per-flow counters (`flow_stats`) restart.
//! An ISP policy of 100,000 subscribers with fq_codel each thus costs a table per *active*
//! subscriber, not per configured one — as LibreQoS's "lazy queues" create a circuit's CAKE
//! only when it first sends.
//!
//! ## When a release is invisible
//! Each leaf says how long it must have been empty before freeing its table cannot change what
//! it does next ([`Qdisc::release_hold`]):
//! * fq_codel: `17 × interval`. A queue that empties leaves CoDel's dropping state; the only
//!   memory CoDel keeps across an empty spell is the drop count it resumes from when it enters
//!   the dropping state again within `16 × interval` of its last `drop_next` (RFC 8289 §5.6,
//!   Linux `codel_dequeue`), and `drop_next` is at most one `interval` after the queue emptied.
//!   After `17 × interval` a kept queue starts from count 1 exactly as a fresh one does. (Two
//!   traces remain, as in Linux after `tc qdisc replace`: a flow left on the old list by the
//!   last dequeue re-enters as a new flow with a full quantum, and a queue whose last packet was
//!   larger than one MTU forgets a pending "first above target" time.)
//! * sfq, drr (flow-hash mode): `0`. A slot or class that empties is unlinked and starts afresh
//!   (a full quantum) when it is used again; nothing per flow depends on time.
//!
//! A scheduler releases a leaf's table only after the longest of those holds and
//! [`DEFAULT_IDLE_HOLD`] (5 s): long enough that a subscriber pausing between bursts (a ping a
//! second, TCP idle between requests) keeps its table, so tables are rebuilt at most once per
//! hold per leaf, and CoDel's memory has long expired at the default 100 ms interval (1.7 s).
//!
//! ## Reclaim without walking the classes
//! The scheduler keeps its leaves that hold state and ran empty in an [`IdleLeaves`] queue, in
//! the order they first ran empty. Per packet it touches only the leaf's own entry: a leaf that
//! gets a packet is marked busy where it stands, and one that runs empty again while still
//! queued gets a new time stamp where it stands (no neighbour is touched, nothing is unlinked).
//! The driver calls [`Qdisc::reclaim_idle`] now and then (the simulator's sampling tick, the
//! router's 100 ms tick) with the current time and a budget; it takes leaves from the head:
//! a busy one leaves the queue (it joins again at the tail when it next runs empty), one empty
//! for the hold is released, one re-stamped since it joined moves to the tail with its new
//! stamp, and the first leaf that is none of these ends the call — every leaf behind it ran
//! empty later. Each leaf is taken from the head at most twice per time it runs empty, so the
//! work is O(released) amortised, never a walk over the classes, and at most
//! [`MAX_STEPS_PER_RELEASE`] steps per leaf released within one call. Counted: tables built and
//! released (scheduler's `extra_stats`: `leaf_states_live`, `leaf_states_built`,
//! `leaf_states_released`, `leaves_idle_holding`).

use crate::units::Duration;

/// The shortest time a scheduler lets a leaf sit empty before releasing its per-flow state.
pub const DEFAULT_IDLE_HOLD: Duration = Duration::from_secs(5);

/// Leaves a driver releases per [`super::Qdisc::reclaim_idle`] call, by default: a bounded pause
/// (a release is one `free` of the leaf's table) however many leaves went idle together.
pub const DEFAULT_RECLAIM_BUDGET: u32 = 1024;

/// Steps (leaves taken from the head) one [`IdleLeaves::pop_due`] may take.
pub const MAX_STEPS_PER_RELEASE: u32 = 64;

/// End of the queue.
const NIL: u32 = u32::MAX;

#[derive(Copy, Clone, Debug, Default)]
struct Link {
    next: u32,
    /// The leaf has releasable state at all.
    lazy: bool,
    /// In the queue.
    queued: bool,
    /// Holds packets (or is about to): not idle.
    busy: bool,
    /// Ran empty again after it joined the queue: `since` is later than its place says.
    restamped: bool,
    /// Its state was released and not built again since.
    released: bool,
    /// When the leaf last ran empty (ns).
    since: u64,
}

/// A scheduler's leaves with releasable state, those that ran empty queued in that order (see
/// the module docs). Indices are the scheduler's own numbering of those leaves.
#[derive(Debug, Default)]
pub struct IdleLeaves {
    links: Vec<Link>,
    head: u32,
    tail: u32,
    /// Queued and not busy.
    idle: u32,
    hold: u64,
    lazy: u32,
    released_now: u32,
    built: u64,
    released: u64,
}

impl IdleLeaves {
    /// One entry per leaf: its [`super::Qdisc::release_hold`] (`None`: no releasable state).
    /// Every lazy leaf starts released (its state is built at its first packet). The hold is the
    /// longest of theirs and [`DEFAULT_IDLE_HOLD`].
    pub fn new(holds: impl IntoIterator<Item = Option<Duration>>) -> IdleLeaves {
        let mut hold = DEFAULT_IDLE_HOLD.0;
        let mut lazy = 0;
        let links = holds
            .into_iter()
            .map(|h| {
                if let Some(h) = h {
                    hold = hold.max(h.0);
                    lazy += 1;
                }
                Link {
                    next: NIL,
                    lazy: h.is_some(),
                    released: h.is_some(),
                    ..Link::default()
                }
            })
            .collect();
        IdleLeaves {
            links,
            head: NIL,
            tail: NIL,
            idle: 0,
            hold,
            lazy,
            released_now: lazy,
            built: 0,
            released: 0,
        }
    }

    /// Room for `n` more leaves without growing ([`Self::push`]).
    pub fn reserve(&mut self, n: usize) {
        self.links.reserve(n);
    }

    /// One more leaf, numbered after the others (a class added in place): as [`Self::new`]
    /// makes each. O(1) amortised.
    pub fn push(&mut self, hold: Option<Duration>) {
        self.links.push(Link {
            next: NIL,
            ..Link::default()
        });
        let i = self.links.len() as u32 - 1;
        self.replace(i, hold);
    }

    /// Leaf `i` is another leaf from now on (its number reused by a class added in place): it
    /// starts released, as in [`Self::new`]. If the old leaf is still queued it stays linked
    /// (see below) and the queue takes it off when it gets there. O(1).
    pub fn replace(&mut self, i: u32, hold: Option<Duration>) {
        let Some(l) = self.links.get_mut(i as usize) else {
            return;
        };
        if l.lazy {
            self.lazy -= 1;
            if l.released {
                self.released_now -= 1;
            }
            if l.queued && !l.busy {
                self.idle -= 1;
            }
        }
        l.lazy = hold.is_some();
        l.released = l.lazy;
        l.restamped = false;
        // Still queued: an idle entry, due at once (its release finds nothing to free), or, for
        // a leaf with nothing to release, a busy one that the queue drops when it gets there.
        l.busy = l.queued && !l.lazy;
        if l.queued && l.lazy {
            l.since = 0;
            self.idle += 1;
        }
        if let Some(h) = hold {
            self.hold = self.hold.max(h.0);
            self.lazy += 1;
            self.released_now += 1;
        }
    }

    /// How long a leaf stays empty before its state is released.
    pub fn hold(&self) -> Duration {
        Duration(self.hold)
    }

    /// Set the hold, never below what the leaves need (their longest `release_hold`).
    pub fn set_hold(&mut self, hold: Duration, floor: Duration) {
        self.hold = hold.0.max(floor.0);
    }

    /// Leaf `i` is about to get a packet: marked busy where it stands; if its state had been
    /// released, the enqueue builds it again (counted). O(1), touches the leaf's entry only.
    #[inline]
    pub fn busy(&mut self, i: u32) {
        let Some(l) = self.links.get_mut(i as usize) else {
            return;
        };
        if !l.lazy || l.busy {
            return;
        }
        l.busy = true;
        if l.released {
            l.released = false;
            self.released_now -= 1;
            self.built += 1;
        }
        if l.queued {
            self.idle -= 1;
        }
    }

    /// Leaf `i` ran empty at `now` (ns): stamped where it stands if queued, else queued at the
    /// tail. O(1).
    #[inline]
    pub fn went_idle(&mut self, i: u32, now: u64) {
        let Some(l) = self.links.get_mut(i as usize) else {
            return;
        };
        if !l.lazy || l.released || (l.queued && !l.busy) {
            return;
        }
        l.busy = false;
        l.since = now;
        self.idle += 1;
        if l.queued {
            l.restamped = true;
        } else {
            self.push_tail(i);
        }
    }

    fn push_tail(&mut self, i: u32) {
        let l = &mut self.links[i as usize];
        l.queued = true;
        l.restamped = false;
        l.next = NIL;
        if self.tail == NIL {
            self.head = i;
        } else {
            self.links[self.tail as usize].next = i;
        }
        self.tail = i;
    }

    fn pop_head(&mut self) -> u32 {
        let h = self.head;
        let l = &mut self.links[h as usize];
        self.head = l.next;
        if self.head == NIL {
            self.tail = NIL;
        }
        l.queued = false;
        l.next = NIL;
        h
    }

    /// The next leaf, taken off the queue, that has been empty for the hold at `now`; `None`
    /// when there is none, or after [`MAX_STEPS_PER_RELEASE`] steps (the rest wait for the next
    /// call). Busy leaves met on the way leave the queue, re-stamped ones move to the tail.
    pub fn pop_due(&mut self, now: u64) -> Option<u32> {
        for _ in 0..MAX_STEPS_PER_RELEASE {
            if self.head == NIL {
                return None;
            }
            let l = self.links[self.head as usize];
            if l.busy {
                self.pop_head();
            } else if l.since.saturating_add(self.hold) <= now {
                self.idle -= 1;
                return Some(self.pop_head());
            } else if l.restamped {
                let h = self.pop_head();
                self.push_tail(h);
            } else {
                return None;
            }
        }
        None
    }

    /// Leaf `i`'s state was released (after [`Self::pop_due`]).
    pub fn on_released(&mut self, i: u32) {
        if let Some(l) = self.links.get_mut(i as usize) {
            if l.lazy && !l.released {
                l.released = true;
                self.released_now += 1;
                self.released += 1;
            }
        }
    }

    /// Gauges and counters, with stable names (module docs).
    pub fn report(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("leaf_states_live", self.live() as f64);
        f("leaf_states_built", self.built as f64);
        f("leaf_states_released", self.released as f64);
        f("leaves_idle_holding", self.idle as f64);
    }

    /// Leaves holding state now (built and not released).
    pub fn live(&self) -> u32 {
        self.lazy - self.released_now
    }

    /// Heap bytes of the queue.
    pub fn heap_bytes(&self) -> usize {
        self.links.capacity() * std::mem::size_of::<Link>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(l: &IdleLeaves) -> Vec<u32> {
        let mut v = Vec::new();
        let mut x = l.head;
        while x != NIL {
            v.push(x);
            x = l.links[x as usize].next;
        }
        v
    }

    #[test]
    fn leaves_are_released_in_the_order_they_went_idle_after_the_hold() {
        let s = Some(Duration::ZERO);
        let mut l = IdleLeaves::new([s, s, None, s]);
        assert_eq!(l.live(), 0);
        for i in [0, 1, 2, 3] {
            l.busy(i);
        }
        assert_eq!(l.live(), 3);
        let hold = l.hold().0;
        l.went_idle(1, 10);
        l.went_idle(2, 11); // no state: never queued
        l.went_idle(0, 12);
        l.went_idle(3, 13);
        assert_eq!(order(&l), vec![1, 0, 3]);
        l.busy(0); // a packet again: busy where it stands
        l.went_idle(0, 20); // and empty again: re-stamped where it stands
        assert_eq!(l.idle, 3);
        assert_eq!(l.pop_due(hold + 9), None);
        // 1 is due; 0 was re-stamped (20), so it moves behind 3, which is due.
        assert_eq!(l.pop_due(hold + 13), Some(1));
        l.on_released(1);
        assert_eq!(l.pop_due(hold + 13), Some(3));
        l.on_released(3);
        assert_eq!(order(&l), vec![0]);
        assert_eq!(l.pop_due(hold + 19), None);
        // A busy leaf at the head leaves the queue and is not released.
        l.busy(0);
        assert_eq!(l.pop_due(hold + 100), None);
        assert!(order(&l).is_empty());
        l.went_idle(0, 30);
        assert_eq!(order(&l), vec![0]);
        let mut g = std::collections::HashMap::new();
        l.report(&mut |k, v| {
            g.insert(k, v);
        });
        assert_eq!(g["leaf_states_live"], 1.0);
        assert_eq!(g["leaf_states_built"], 3.0);
        assert_eq!(g["leaf_states_released"], 2.0);
        assert_eq!(g["leaves_idle_holding"], 1.0);
        assert_eq!(l.pop_due(hold + 30), Some(0));
        // A released leaf used again is built again, and counted.
        l.busy(1);
        assert_eq!(l.live(), 2);
    }

    /// Leaves added and numbers reused in place keep the gauges what a queue built with the
    /// same leaves shows.
    #[test]
    fn leaves_added_or_replaced_count_as_new_ones() {
        let s = Some(Duration::ZERO);
        let mut l = IdleLeaves::new([s, s]);
        l.busy(0);
        l.went_idle(0, 5); // queued, holding its state
        l.push(s);
        l.push(None);
        assert_eq!((l.live(), l.links.len()), (1, 4));
        // Leaf 0's number goes to a new leaf while the old one is queued: the new one starts
        // released, and the queue lets go of the entry without releasing anything live.
        l.replace(0, s);
        assert_eq!((l.live(), l.idle), (0, 1));
        assert_eq!(l.pop_due(u64::MAX), Some(0));
        assert_eq!((l.live(), l.idle), (0, 0));
        l.busy(0);
        l.busy(2);
        assert_eq!(l.live(), 2);
        // A lazy leaf replaced by one with nothing to release.
        l.went_idle(2, 7);
        l.replace(2, None);
        assert_eq!((l.live(), l.idle), (1, 0));
        assert_eq!(l.pop_due(u64::MAX), None);
        assert!(order(&l).is_empty());
    }

    #[test]
    fn one_call_takes_a_bounded_number_of_steps() {
        let mut l = IdleLeaves::new(vec![Some(Duration::ZERO); 200]);
        for i in 0..200 {
            l.busy(i);
            l.went_idle(i, 0);
            l.busy(i); // all busy again: nothing to release
        }
        assert_eq!(l.pop_due(u64::MAX), None);
        assert_eq!(order(&l).len(), 200 - MAX_STEPS_PER_RELEASE as usize);
    }

    #[test]
    fn the_hold_is_the_longest_a_leaf_needs() {
        let long = DEFAULT_IDLE_HOLD.0 * 3;
        let mut l = IdleLeaves::new([Some(Duration(long)), Some(Duration::ZERO)]);
        assert_eq!(l.hold().0, long);
        l.set_hold(Duration(1), Duration(long));
        assert_eq!(l.hold().0, long);
    }
}
