//! The packet pool of the classful schedulers (HTB, HFSC): the slots every inline leaf FIFO is
//! threaded through, handed out by the cache line so that a leaf's packets sit side by side.
//!
//! Principles: a leaf's FIFO is a singly linked list of slots (`Slot::next`, first to last), so
//! any slot can follow any other and the FIFO logic (`queue.rs`) never depends on where a slot
//! lies. Where it lies decides what a dequeue waits for, though: under a standing backlog a leaf
//! the round robin reaches holds several packets (a million leaves with one packet each on
//! average, `linkshare bench sched --backlog 1`: 4.7 at each visit of the largest row), and a
//! list of slots scattered over tens of megabytes is a chain of cache misses that no prefetch
//! can run ahead of — the next address is in the line still on its way. librte_sched avoids it
//! with an array per queue (64 packets reserved for each of its queues); we keep the shared
//! pool, whose memory follows the packets actually queued, and allocate it by **line**:
//! [`LINE`] slots aligned to a cache line (a line spans 64 bytes when a slot is 16, as with a
//! packet handle of 8 bytes), given whole to one leaf. A leaf's next packet goes into the slot
//! after its last one when that slot is in the same line and vacant; otherwise it opens a
//! vacant line. Only the leaf whose last packet precedes a vacant slot can take it, so the
//! slots of a line are filled in order by one leaf and emptied in the same order by its
//! dequeues; a line whose slots are all vacant goes back on a stack of vacant lines (LIFO: the
//! line freed last, likely still cached, is reused first).
//!
//! Cost: push and pop are O(1), touching the slot's line alone (and the top of the stack).
//! Memory: one line per run of up to [`LINE`] packets a leaf received while its previous
//! packet was still queued — a slot per packet for leaves holding many, a line per packet at
//! worst (leaves holding one each).
//!
//! A leaf's FIFO is its two ends, its length and its bytes ([`LeafQ`], kept in the scheduler's
//! class record so that a packet reads no other per-leaf memory); [`Pool::push_back`] and
//! [`Pool::pop_front`] are the whole FIFO, the limits are the scheduler's.
use crate::packet::Packet;

/// "No slot".
pub(crate) const NIL: u32 = u32::MAX;

/// The queue state of a leaf's inline FIFO: `head` is its first slot and `tail` its last (both
/// NIL when empty), linked first to last through `Slot::next`. Both ends are in the record so
/// that a dequeue reads only the slot it takes and an enqueue only the slot it links after:
/// neither waits for one slot to learn where another is. `bytes` is at most `u32::MAX` (the
/// schedulers refuse a packet that would carry it beyond).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeafQ {
    pub(crate) head: u32,
    pub(crate) tail: u32,
    pub(crate) len: u32,
    pub(crate) bytes: u32,
}

impl LeafQ {
    pub(crate) const EMPTY: LeafQ = LeafQ {
        head: NIL,
        tail: NIL,
        len: 0,
        bytes: 0,
    };

    /// Whether `len` more bytes would carry it beyond what it can count.
    #[inline]
    pub(crate) fn bytes_full(&self, len: u32) -> bool {
        self.bytes as u64 + len as u64 > u32::MAX as u64
    }
}

/// Slots per line.
pub(crate) const LINE: usize = 4;

/// A slot: a packet and the next slot of its leaf's FIFO. A slot holding no packet is vacant.
pub(crate) struct Slot<P> {
    pub(crate) pkt: Option<P>,
    pub(crate) next: u32,
}

/// [`LINE`] slots, aligned to a cache line.
#[repr(C, align(64))]
struct Line<P> {
    slots: [Slot<P>; LINE],
}

impl<P> Line<P> {
    fn vacant() -> Self {
        Line {
            slots: std::array::from_fn(|_| Slot {
                pkt: None,
                next: NIL,
            }),
        }
    }

    fn is_vacant(&self) -> bool {
        self.slots.iter().all(|s| s.pkt.is_none())
    }
}

/// The pool (see the module documentation).
pub(crate) struct Pool<P> {
    lines: Vec<Line<P>>,
    /// Lines whose slots are all vacant, most recently freed last.
    vacant: Vec<u32>,
}

impl<P> Default for Pool<P> {
    fn default() -> Self {
        Pool {
            lines: Vec::new(),
            vacant: Vec::new(),
        }
    }
}

impl<P: Packet> Pool<P> {
    /// Append `pkt` to the FIFO `q` (the caller has checked its limit and [`LeafQ::bytes_full`]).
    /// O(1).
    #[inline]
    pub(crate) fn push_back(&mut self, q: &mut LeafQ, pkt: P) {
        let len = pkt.len();
        let slot = self.push_after(q.tail, pkt);
        if q.tail == NIL {
            q.head = slot;
        }
        q.tail = slot;
        q.len += 1;
        q.bytes += len;
    }

    /// Take the first packet of the FIFO `q`: reads and frees its slot alone. O(1).
    #[inline]
    pub(crate) fn pop_front(&mut self, q: &mut LeafQ) -> Option<P> {
        if q.head == NIL {
            return None;
        }
        let (pkt, next) = self.pop(q.head)?;
        q.head = next;
        if next == NIL {
            q.tail = NIL;
        }
        q.len -= 1;
        q.bytes -= pkt.len();
        Some(pkt)
    }

    /// The first packet of the FIFO `q`.
    #[inline]
    pub(crate) fn front(&self, q: &LeafQ) -> Option<&P> {
        self.get(q.head).and_then(|s| s.pkt.as_ref())
    }

    /// Check the FIFO `q` (for the schedulers' invariants): `len` slots from `head`, each
    /// holding a packet, their bytes `bytes`, the last of them `tail`; both ends NIL iff empty.
    /// Returns the number of slots. O(len).
    pub(crate) fn check_fifo(&self, q: &LeafQ) -> Result<u32, String> {
        if (q.head == NIL) != (q.len == 0) || (q.tail == NIL) != (q.len == 0) {
            return Err(format!(
                "head {} tail {} with {} packets",
                q.head, q.tail, q.len
            ));
        }
        let (mut s, mut last, mut bytes) = (q.head, NIL, 0u64);
        for i in 0..q.len {
            let Some(slot) = self.get(s) else {
                return Err(format!("slot {i} of its FIFO is {s}, outside the pool"));
            };
            let Some(p) = &slot.pkt else {
                return Err(format!("slot {s} of its FIFO holds no packet"));
            };
            bytes += p.len() as u64;
            last = s;
            s = slot.next;
        }
        if last != q.tail || bytes != q.bytes as u64 {
            return Err(format!(
                "its FIFO ends at slot {last} with {bytes} bytes, tail {} and {} bytes kept",
                q.tail, q.bytes
            ));
        }
        Ok(q.len)
    }
}

impl<P> Pool<P> {
    /// Slot `i`, if it is in the pool.
    #[inline(always)]
    pub(crate) fn get(&self, i: u32) -> Option<&Slot<P>> {
        let i = i as usize;
        self.lines.get(i / LINE).map(|l| &l.slots[i % LINE])
    }

    #[inline(always)]
    fn slot_mut(&mut self, i: u32) -> &mut Slot<P> {
        let i = i as usize;
        &mut self.lines[i / LINE].slots[i % LINE]
    }

    /// Store `pkt` in a slot after `last` (the last slot of a leaf's FIFO, or NIL for an empty
    /// one), link it there and return it: the slot after `last` if it is in the same line and
    /// vacant, else the first slot of a vacant line. O(1) amortised (the pool doubles when
    /// no line is vacant).
    #[inline]
    pub(crate) fn push_after(&mut self, last: u32, pkt: P) -> u32 {
        let slot = match self.neighbour(last) {
            Some(s) => s,
            None => self.open_line(),
        };
        *self.slot_mut(slot) = Slot {
            pkt: Some(pkt),
            next: NIL,
        };
        if last != NIL {
            self.slot_mut(last).next = slot;
        }
        slot
    }

    /// The slot after `last` in its line, if there is one: vacant, as every slot after a
    /// leaf's last in a line given to it.
    #[inline(always)]
    fn neighbour(&self, last: u32) -> Option<u32> {
        if last == NIL || (last as usize + 1).is_multiple_of(LINE) {
            return None;
        }
        debug_assert!(self.get(last + 1).is_some_and(|s| s.pkt.is_none()));
        Some(last + 1)
    }

    /// The first slot of a vacant line, taken off the stack or added to the pool.
    #[inline]
    fn open_line(&mut self) -> u32 {
        let line = match self.vacant.pop() {
            Some(l) => l,
            None => {
                if self.lines.len() == self.lines.capacity() {
                    self.grow();
                }
                self.lines.push(Line::vacant());
                (self.lines.len() - 1) as u32
            }
        };
        line * LINE as u32
    }

    /// Double the pool into a new allocation advised huge before it is written
    /// (`crate::hugepages`): the slots are read at random, and a vector grown in place keeps the
    /// small pages its old part was faulted in with (a reallocation moves them as they are).
    /// Amortised O(1) per line, as `Vec::push`.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let cap = (self.lines.capacity() * 2).max(256);
        let mut lines = crate::hugepages::with_capacity(cap);
        lines.append(&mut self.lines);
        crate::hugepages::collapse(&lines);
        self.lines = lines;
    }

    /// Take the packet out of slot `i` (the first of its leaf's FIFO) and return it with the
    /// slot's successor; the slot becomes vacant, and its line goes back on the stack if it was
    /// its last packet: the leaf's packets in a line are a run of consecutive slots, taken in
    /// order, so that is when the successor is in another line or there is none. O(1).
    #[inline]
    pub(crate) fn pop(&mut self, i: u32) -> Option<(P, u32)> {
        let s = self.slot_mut(i);
        let pkt = s.pkt.take()?;
        let next = std::mem::replace(&mut s.next, NIL);
        let line = i / LINE as u32;
        if next == NIL || next / LINE as u32 != line {
            debug_assert!(self.lines[line as usize].is_vacant());
            self.vacant.push(line);
        }
        Some((pkt, next))
    }

    /// Bytes allocated for slots.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.lines.capacity() * size_of::<Line<P>>() + self.vacant.capacity() * 4
    }

    /// Check the pool against the `in_fifos` slots the FIFOs were found to hold (for
    /// `check_invariants`): as many slots hold a packet, and the stack holds each line whose
    /// slots are all vacant, once, and nothing else. O(pool).
    pub(crate) fn check(&self, in_fifos: usize) -> Result<(), String> {
        let held = self
            .lines
            .iter()
            .flat_map(|l| l.slots.iter())
            .filter(|s| s.pkt.is_some())
            .count();
        if held != in_fifos {
            return Err(format!(
                "packet pool: {held} slots hold a packet, {in_fifos} in FIFOs"
            ));
        }
        let mut stacked = vec![false; self.lines.len()];
        for &l in &self.vacant {
            match stacked.get_mut(l as usize) {
                None => return Err(format!("packet pool: vacant line {l} outside the pool")),
                Some(true) => return Err(format!("packet pool: line {l} stacked twice")),
                Some(s) => *s = true,
            }
            if !self.lines[l as usize].is_vacant() {
                return Err(format!(
                    "packet pool: line {l} stacked while it holds packets"
                ));
            }
        }
        match (self.lines.iter().zip(&stacked)).position(|(l, &s)| l.is_vacant() && !s) {
            Some(l) => Err(format!("packet pool: line {l} is vacant but not stacked")),
            None => Ok(()),
        }
    }

    /// Forget the most recently freed vacant line (tests of `check`).
    #[cfg(test)]
    pub(crate) fn lose_vacant_line(&mut self) -> Option<u32> {
        self.vacant.pop()
    }

    /// Lines in the pool (tests).
    #[cfg(test)]
    pub(crate) fn line_capacity(&self) -> usize {
        self.lines.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leafs_packets_share_a_line_and_lines_come_back() {
        let mut p = Pool::<u64>::default();
        // Two leaves, interleaved: each fills its own line in order.
        let (mut a, mut b) = (NIL, NIL);
        let mut a_slots = Vec::new();
        for i in 0..6u64 {
            a = p.push_after(a, i);
            a_slots.push(a);
            b = p.push_after(b, 100 + i);
        }
        assert_eq!(a_slots[..4], [0, 1, 2, 3], "a's first four in line 0");
        assert_eq!(a_slots[4] / LINE as u32, a_slots[5] / LINE as u32);
        assert_ne!(a_slots[4] / LINE as u32, 0);
        p.check(12).unwrap();
        // Pop a's packets in order through the links: they come out as pushed.
        let mut s = a_slots[0];
        for i in 0..6u64 {
            let (x, next) = p.pop(s).unwrap();
            assert_eq!(x, i);
            s = next;
        }
        assert_eq!(s, NIL);
        // Both of a's lines are vacant again and stacked; b's are not.
        p.check(6).unwrap();
        assert_eq!(p.vacant.len(), 2);
        // The line freed last is reused first.
        let last = *p.vacant.last().unwrap();
        assert_eq!(p.push_after(NIL, 7) / LINE as u32, last);
        p.check(7).unwrap();
    }

    #[test]
    fn check_finds_lost_and_doubled_lines() {
        let mut p = Pool::<u64>::default();
        let s = p.push_after(NIL, 1);
        p.pop(s).unwrap();
        p.check(0).unwrap();
        assert!(p
            .check(1)
            .unwrap_err()
            .contains("0 slots hold a packet, 1 in FIFOs"));
        p.vacant.push(0);
        assert!(p.check(0).unwrap_err().contains("stacked twice"));
        p.vacant.clear();
        assert!(p.check(0).unwrap_err().contains("vacant but not stacked"));
        p.vacant.push(5);
        assert!(p.check(0).unwrap_err().contains("outside the pool"));
    }

    #[test]
    fn random_pushes_and_pops_keep_every_fifo_and_the_stack() {
        use std::collections::VecDeque;
        // Eight leaves against a model of eight deques, with a small LCG for the choices.
        let mut p = Pool::<u64>::default();
        let mut ends = [(NIL, NIL); 8];
        let mut model: [VecDeque<u64>; 8] = Default::default();
        let mut x = 12345u64;
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let leaf = (x >> 33) as usize % 8;
            let (head, tail) = &mut ends[leaf];
            if !(x >> 40).is_multiple_of(3) || model[leaf].is_empty() {
                *tail = p.push_after(*tail, step);
                if *head == NIL {
                    *head = *tail;
                }
                model[leaf].push_back(step);
            } else {
                let (v, next) = p.pop(*head).expect("a packet at the head");
                assert_eq!(Some(v), model[leaf].pop_front());
                *head = next;
                if next == NIL {
                    *tail = NIL;
                }
            }
            if step.is_multiple_of(97) {
                let held = model.iter().map(|m| m.len()).sum();
                p.check(held).unwrap_or_else(|e| panic!("step {step}: {e}"));
            }
        }
    }
}
