//! `pfifo` and `bfifo`: first in, first out, tail drop.
//!
//! `pfifo` limits the number of packets, `bfifo` the number of bytes. A packet that would exceed
//! the limit is refused (tail drop) with [`DropReason::QueueLimit`] or [`DropReason::ByteLimit`].
//! Both operations are O(1).
//!
//! [`FifoQueue`] is the bare queue without counters; classful schedulers embed it in their leaves
//! so that a class costs no allocation until it holds packets. [`Fifo`] wraps it with
//! its [`Books`] as a stand-alone qdisc.

use std::collections::VecDeque;

use super::{Books, Dequeued, Discipline, DropReason, Dropped};
use crate::packet::Packet;
use crate::units::Time;

/// Default `pfifo` limit in packets, as tc uses the device's txqueuelen (1000 on Ethernet).
pub const DEFAULT_PFIFO_LIMIT: u32 = 1000;
/// Default `bfifo` limit in bytes (1000 full-size Ethernet packets).
pub const DEFAULT_BFIFO_LIMIT: u32 = 1000 * 1514;

/// What a FIFO's limit counts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FifoLimit {
    Packets(u32),
    Bytes(u32),
}

/// A FIFO queue with a limit, without counters.
#[derive(Debug)]
pub struct FifoQueue<P> {
    q: VecDeque<P>,
    bytes: u64,
    limit: FifoLimit,
}

impl<P: Packet> FifoQueue<P> {
    /// Heap bytes of the queue's buffer (its capacity, kept after it empties).
    pub fn heap_bytes(&self) -> usize {
        self.q.capacity() * std::mem::size_of::<P>()
    }
    pub fn new(limit: FifoLimit) -> Self {
        FifoQueue {
            q: VecDeque::new(),
            bytes: 0,
            limit,
        }
    }
    pub fn limit(&self) -> FifoLimit {
        self.limit
    }
    /// Tail-drop enqueue.
    #[inline]
    pub fn push(&mut self, pkt: P) -> Result<(), Dropped<P>> {
        let len = pkt.len() as u64;
        let refused = match self.limit {
            FifoLimit::Packets(n) => {
                (self.q.len() as u64 >= n as u64).then_some(DropReason::QueueLimit)
            }
            FifoLimit::Bytes(n) => (self.bytes + len > n as u64).then_some(DropReason::ByteLimit),
        };
        if let Some(reason) = refused {
            return Err(Dropped {
                packet: pkt,
                reason,
            });
        }
        self.bytes += len;
        self.q.push_back(pkt);
        Ok(())
    }
    #[inline]
    pub fn pop(&mut self) -> Option<P> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len() as u64;
        if self.q.is_empty() && self.q.capacity() > 64 {
            // Give back memory of a burst; a class costs nothing while idle.
            self.q.shrink_to(0);
        }
        Some(p)
    }
    pub fn peek(&self) -> Option<&P> {
        self.q.front()
    }
    pub fn len(&self) -> usize {
        self.q.len()
    }
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// The stand-alone `pfifo` / `bfifo` qdisc.
#[derive(Debug)]
pub struct Fifo<P> {
    queue: FifoQueue<P>,
    books: Books<P>,
}

impl<P: Packet> Fifo<P> {
    /// `pfifo` with a packet limit.
    pub fn pfifo(limit: u32) -> Self {
        Fifo {
            queue: FifoQueue::new(FifoLimit::Packets(limit)),
            books: Books::new(),
        }
    }
    /// `bfifo` with a byte limit.
    pub fn bfifo(limit: u32) -> Self {
        Fifo {
            queue: FifoQueue::new(FifoLimit::Bytes(limit)),
            books: Books::new(),
        }
    }
    pub fn new(limit: FifoLimit) -> Self {
        Fifo {
            queue: FifoQueue::new(limit),
            books: Books::new(),
        }
    }
}

impl<P: Packet> Discipline<P> for Fifo<P> {
    fn books(&self) -> &Books<P> {
        &self.books
    }
    fn books_mut(&mut self) -> &mut Books<P> {
        &mut self.books
    }
    fn enqueue_inner(&mut self, pkt: P, _now: Time) -> Result<(), Dropped<P>> {
        self.queue.push(pkt)
    }
    fn dequeue_inner(&mut self, _now: Time) -> Dequeued<P> {
        match self.queue.pop() {
            Some(p) => Dequeued::Packet(p),
            None => Dequeued::Empty,
        }
    }
    fn kind_inner(&self) -> &'static str {
        match self.queue.limit {
            FifoLimit::Packets(_) => "pfifo",
            FifoLimit::Bytes(_) => "bfifo",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketMeta;
    use crate::qdisc::Qdisc;

    fn pkt(len: u32) -> PacketMeta {
        PacketMeta {
            len,
            ..Default::default()
        }
    }

    #[test]
    fn pfifo_is_fifo_and_tail_drops() {
        let mut q = Fifo::pfifo(2);
        assert!(q.enqueue(pkt(100), Time(0)).is_ok());
        assert!(q.enqueue(pkt(200), Time(0)).is_ok());
        let d = q.enqueue(pkt(300), Time(0)).unwrap_err();
        assert_eq!(d.reason, DropReason::QueueLimit);
        assert_eq!(d.packet.len, 300);
        assert_eq!(q.dequeue(Time(0)).packet().map(|p| p.len), Some(100));
        assert_eq!(q.dequeue(Time(0)).packet().map(|p| p.len), Some(200));
        assert_eq!(q.dequeue(Time(0)), Dequeued::Empty);
        q.stats().check_conservation().unwrap();
        assert_eq!(q.stats().refused.get(DropReason::QueueLimit).packets, 1);
        assert_eq!(q.stats().enqueued.bytes, 300);
    }

    #[test]
    fn bfifo_limits_bytes() {
        let mut q = Fifo::bfifo(1000);
        assert!(q.enqueue(pkt(600), Time(0)).is_ok());
        assert_eq!(
            q.enqueue(pkt(500), Time(0)).unwrap_err().reason,
            DropReason::ByteLimit
        );
        assert!(q.enqueue(pkt(400), Time(0)).is_ok());
        assert_eq!(q.backlog().bytes, 1000);
        assert_eq!(q.kind(), "bfifo");
        q.stats().check_conservation().unwrap();
    }
}
