//! The event engine: a virtual nanosecond clock and a heap of events ordered by `(time, seq)`.
//!
//! `seq` is a counter incremented on every push, so events scheduled for the same instant run in
//! the order they were scheduled: with the same scenario and seed, a run is the same sequence of
//! events, hence byte-identical outputs.
//!
//! Events are small (`Copy`, 24 bytes in the heap): they carry indices (a flow), never boxed data,
//! so scheduling costs no allocation.
//!
//! Packets in flight are not heap events: every path with a constant delay (the bottleneck's
//! propagation, each access path, each return path) is a FIFO *delay line* whose entries are
//! already in time order, and the wire has at most one end of transmission pending. Those entries
//! take a sequence number from [`Engine::next_seq`] and the world's loop picks the smallest
//! `(time, seq)` among the heap's top, the wire and the lines' fronts — the same order a single
//! heap would give, with a heap that holds only timers and sources (a few entries per flow).
//!
//! ## Bounds
//! A simulation must never hang. Two guards make a run that stops making progress fail with a
//! message:
//! * a **budget** of events for the whole run, derived from the scenario (the packets the link and
//!   the sources can produce in the simulated duration, times the events a packet may cause, plus a
//!   margin; see [`crate::world`]);
//! * a **stall detector**: more than [`STALL_LIMIT`] consecutive events at the same instant means
//!   something loops without time advancing (e.g. a scheduler that keeps answering `NotBefore(now)`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Consecutive events at one instant after which the run is declared stuck.
pub const STALL_LIMIT: u64 = 5_000_000;

/// What happens. Indices refer to the world's tables.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Ev {
    /// A flow starts sending.
    FlowStart(u32),
    /// A flow stops sending (end of its `stop` time).
    FlowStop(u32),
    /// A UDP or ping source emits its next packet.
    SourceSend(u32),
    /// The bottleneck wire finished serialising its packet (kept outside the heap, named here
    /// for messages).
    TxDone,
    /// A packet leaves delay line `n` (kept outside the heap, named here for messages).
    Line(u32),
    /// The throttled scheduler's wake-up timer (rounded to `timer_hz`).
    Wake,
    /// The same for the uplink's scheduler (`[uplink]`).
    UpWake,
    /// A TCP sender's transmission timer (RTO, RACK reordering timer or tail loss probe).
    Rto(u32),
    /// A TCP receiver's timer (delayed ACK or compressed SACK).
    DelAck(u32),
    /// A paced TCP sender may send again.
    Pacing(u32),
    /// A TCP receiver's ACK leaves after its processing jitter (`crate::jitter`).
    AckOut(u32),
    /// End of a sampling interval.
    Sample,
}

#[derive(Copy, Clone, Debug)]
struct Entry {
    time: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    /// Reversed: `BinaryHeap` is a max-heap and we want the earliest `(time, seq)` first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

/// Why the engine refused to go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineStop {
    /// The event budget is spent.
    Budget { events: u64, time_ns: u64 },
    /// Too many events without the clock advancing.
    Stalled { time_ns: u64, last: Ev },
}

/// The event queue and the clock.
#[derive(Debug)]
pub struct Engine {
    heap: BinaryHeap<Entry>,
    /// The heap's top was handed out ([`Engine::pop_event`]) but is still in the heap: the next
    /// [`Engine::at`] overwrites it in place (one sift down instead of a pop and a push; a source
    /// that schedules its next packet from its event is the common case), any other look at the
    /// heap removes it first. Keys are unique, so the order of events is the same either way.
    top_taken: bool,
    seq: u64,
    now: u64,
    processed: u64,
    budget: u64,
    same_instant: u64,
}

impl Engine {
    pub fn new(budget: u64) -> Self {
        Engine {
            heap: BinaryHeap::with_capacity(1024),
            top_taken: false,
            seq: 0,
            now: 0,
            processed: 0,
            budget,
            same_instant: 0,
        }
    }

    /// Current virtual time, in nanoseconds.
    #[inline]
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Schedule `ev` at `time` (never before now: an event in the past runs now).
    #[inline]
    pub fn at(&mut self, time: u64, ev: Ev) {
        let time = time.max(self.now);
        self.seq += 1;
        let e = Entry {
            time,
            seq: self.seq,
            ev,
        };
        if self.top_taken {
            self.top_taken = false;
            if let Some(mut top) = self.heap.peek_mut() {
                *top = e;
                return;
            }
        }
        self.heap.push(e);
    }

    /// Remove the top entry [`Engine::pop_event`] handed out, if it is still in the heap.
    #[inline]
    fn settle(&mut self) {
        if self.top_taken {
            self.top_taken = false;
            self.heap.pop();
        }
    }

    /// Schedule `ev` after `delay` nanoseconds.
    #[inline]
    pub fn after(&mut self, delay: u64, ev: Ev) {
        self.at(self.now.saturating_add(delay), ev);
    }

    /// Time of the next event, if any.
    pub fn peek_time(&mut self) -> Option<u64> {
        self.settle();
        self.heap.peek().map(|e| e.time)
    }

    /// Take the next event due at or before `until`, advancing the clock to it.
    #[inline]
    pub fn next(&mut self, until: u64) -> Result<Option<Ev>, EngineStop> {
        self.settle();
        let Some(top) = self.heap.peek() else {
            return Ok(None);
        };
        if top.time > until {
            return Ok(None);
        }
        let Some(e) = self.heap.pop() else {
            return Ok(None);
        };
        self.advance(e.time, e.ev)?;
        Ok(Some(e.ev))
    }

    /// `(time, seq)` of the next heap event.
    #[inline]
    pub fn peek_key(&mut self) -> Option<(u64, u64)> {
        self.settle();
        self.heap.peek().map(|e| (e.time, e.seq))
    }

    /// Remove the next heap event (after [`Engine::peek_key`] chose it and
    /// [`Engine::advance`] moved the clock).
    #[inline]
    pub fn pop_event(&mut self) -> Option<Ev> {
        self.settle();
        let ev = self.heap.peek()?.ev;
        self.top_taken = true;
        Some(ev)
    }

    /// A sequence number for an event kept outside the heap (a delay line, the wire), so that it
    /// is ordered with the heap's events by `(time, seq)` exactly as if it were in the heap.
    #[inline]
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Move the clock to `time` for one event (from the heap or outside it), counting it against
    /// the budget and the stall detector. `what` names the event in the error.
    #[inline]
    pub fn advance(&mut self, time: u64, what: Ev) -> Result<(), EngineStop> {
        if time <= self.now {
            self.same_instant += 1;
            if self.same_instant > STALL_LIMIT {
                return Err(EngineStop::Stalled {
                    time_ns: self.now,
                    last: what,
                });
            }
        } else {
            self.same_instant = 0;
            self.now = time;
        }
        self.processed += 1;
        if self.processed > self.budget {
            return Err(EngineStop::Budget {
                events: self.processed,
                time_ns: self.now,
            });
        }
        Ok(())
    }

    /// Events waiting.
    pub fn pending(&self) -> usize {
        self.heap.len() - usize::from(self.top_taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_time_events_run_in_schedule_order() {
        let mut e = Engine::new(100);
        e.at(10, Ev::FlowStart(2));
        e.at(5, Ev::FlowStart(1));
        e.at(10, Ev::FlowStart(3));
        e.at(10, Ev::FlowStart(4));
        let mut got = Vec::new();
        while let Some(ev) = e.next(u64::MAX).unwrap() {
            got.push((e.now(), ev));
        }
        assert_eq!(
            got,
            vec![
                (5, Ev::FlowStart(1)),
                (10, Ev::FlowStart(2)),
                (10, Ev::FlowStart(3)),
                (10, Ev::FlowStart(4))
            ]
        );
    }

    /// A handler that schedules from its event (the top overwritten in place) and one that does
    /// not (the top removed first) give the events in `(time, seq)` order, as a sorted list of
    /// everything scheduled does.
    #[test]
    fn events_come_out_in_key_order_whether_or_not_the_handler_schedules() {
        let mut e = Engine::new(u64::MAX);
        let mut all = Vec::new();
        let mut x = 12345u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..8 {
            let t = rnd() % 50;
            e.at(t, Ev::FlowStart(i));
            all.push((t, e.seq, Ev::FlowStart(i)));
        }
        let mut got = Vec::new();
        let mut n = 8;
        while let Some(k) = e.peek_key() {
            let Some(ev) = e.pop_event() else { break };
            e.advance(k.0, ev).unwrap();
            got.push((k.0, k.1, ev));
            // Schedule 0, 1 or 2 events, some at the same instant, while the run is young.
            for _ in 0..(rnd() % 3) {
                if n >= 2000 {
                    break;
                }
                let t = e.now() + rnd() % 20;
                e.at(t, Ev::FlowStart(n));
                all.push((t.max(e.now()), e.seq, Ev::FlowStart(n)));
                n += 1;
            }
            assert_eq!(e.pending(), all.len() - got.len());
        }
        all.sort_by_key(|a| (a.0, a.1));
        assert_eq!(got.len(), all.len());
        assert!(got == all, "events out of order");
    }

    #[test]
    fn budget_and_stall_stop_the_run() {
        let mut e = Engine::new(3);
        for t in 0..10 {
            e.at(t, Ev::Wake);
        }
        let mut n = 0;
        let err = loop {
            match e.next(u64::MAX) {
                Ok(Some(_)) => n += 1,
                Ok(None) => panic!("ran out"),
                Err(s) => break s,
            }
        };
        assert_eq!(n, 3);
        assert!(matches!(err, EngineStop::Budget { events: 4, .. }));

        let mut e = Engine::new(u64::MAX);
        e.at(7, Ev::Wake);
        let err = loop {
            match e.next(u64::MAX) {
                Ok(Some(_)) => e.at(7, Ev::Wake),
                Ok(None) => panic!("ran out"),
                Err(s) => break s,
            }
        };
        assert_eq!(
            err,
            EngineStop::Stalled {
                time_ns: 7,
                last: Ev::Wake
            }
        );
    }
}
