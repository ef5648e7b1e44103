//! One bound on the memory the queued packets hold, over every class of both directions.
//!
//! Principles:
//! * **By buffer, not by length.** A queued frame pins the whole buffer it was received into: a
//!   64-byte packet in a recycled 2 KiB buffer holds 2 KiB. Receive buffers are allocated at
//!   one size, [`FRAME_BUFFER`] (larger only for a frame that does not fit it, a jumbo MTU), so
//!   the memory queued is at most `packets × (largest buffer + the frame's own record)`: the
//!   packet count is the schedulers' own (`Qdisc::backlog`, O(1)), nothing is added up per
//!   frame and nothing can drift.
//! * **Per-leaf limits stay the policy's**; this bound is the one behind them, for when the sum
//!   of the leaves' limits is more than the machine has (a flood towards every subscriber of a
//!   large table): a burst of received frames that would go past it is dropped before it is
//!   offered, and counted (`stat`'s `memory_drops`). `linkshare check` prints the policy's
//!   worst case (every leaf full) to compare with it.
//! * **Workers split it**: with `--workers N` each worker holds at most 1/N of it.

use crate::Frame;

/// Bytes a receive buffer is allocated with: an Ethernet frame of a 1500-byte MTU with a VLAN
/// tag, rounded up to what an allocator hands out anyway.
pub const FRAME_BUFFER: usize = 2048;

/// The bound when `--queue-memory` is not given: a quarter of the machine's memory, at most
/// 1 GiB.
pub fn default_limit() -> u64 {
    let quarter = crate::sys::total_memory().map_or(u64::MAX, |m| m / 4);
    quarter.min(1 << 30)
}

/// What one queued frame holds at most with buffers of `buffer` bytes.
pub fn per_frame(buffer: usize) -> u64 {
    (buffer + std::mem::size_of::<Frame>()) as u64
}

/// The bound and its drops, for one shaper (or one worker of several).
#[derive(Clone, Debug)]
pub struct QueueMemory {
    limit: u64,
    /// The largest receive buffer handed out so far.
    buffer: usize,
    /// Frames dropped because the bound was reached.
    pub drops: u64,
}

impl QueueMemory {
    pub fn new(limit: u64) -> QueueMemory {
        QueueMemory {
            limit,
            buffer: FRAME_BUFFER,
            drops: 0,
        }
    }

    /// A buffer of `capacity` bytes now holds a received frame.
    #[inline]
    pub fn saw_buffer(&mut self, capacity: usize) {
        self.buffer = self.buffer.max(capacity);
    }

    /// How many more frames may be queued while `queued` are.
    pub fn room(&self, queued: u64) -> usize {
        let most = self.limit / per_frame(self.buffer);
        usize::try_from(most.saturating_sub(queued)).unwrap_or(usize::MAX)
    }

    /// The bound in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_counts_buffers_not_lengths() {
        let per = per_frame(FRAME_BUFFER);
        let mut m = QueueMemory::new(per * 100);
        assert_eq!(m.room(0), 100);
        assert_eq!(m.room(60), 40);
        assert_eq!(m.room(100), 0);
        assert_eq!(m.room(1000), 0);
        // A jumbo frame's buffer makes every queued frame count for that much.
        m.saw_buffer(4 * FRAME_BUFFER);
        assert!(m.room(0) < 100 / 3);
    }

    #[test]
    fn the_default_is_at_most_a_gibibyte() {
        let d = default_limit();
        assert!(d > 0 && d <= 1 << 30, "{d}");
    }
}
