//! A policy's worst-case queue memory: what its queues hold when every leaf is full, as
//! `linkshare check` prints it beside the shaper's `--queue-memory` bound.
//!
//! A queued frame holds a whole receive buffer whatever its length, so the worst case is
//! counted in frames: a leaf limited in packets holds its `limit`; one limited in bytes (bfifo,
//! tbf, red, rio, cake's memory limit) holds `limit ÷ 60` frames (minimum-size Ethernet frames;
//! shorter frames, possible on a veth, hold more). Multiplied by what one frame holds in the
//! shaper (`linkshare_router::membound::per_frame`), given by the caller.

use crate::{LeafKind, Policy};

/// The smallest frame a byte-limited leaf is assumed to hold (an Ethernet minimum frame).
pub const MIN_FRAME: u64 = 60;

impl LeafKind {
    /// The most frames this leaf can hold.
    pub fn max_frames(&self) -> u64 {
        let bytes = |b: u64| b.div_ceil(MIN_FRAME);
        match self {
            LeafKind::Pfifo { limit } => u64::from(*limit),
            LeafKind::Bfifo { limit } => bytes(u64::from(*limit)),
            LeafKind::Sfq(p) => u64::from(p.limit),
            LeafKind::Drr(p) => u64::from(p.limit),
            LeafKind::Prio(p) => u64::from(p.limit) * u64::from(p.bands),
            LeafKind::Tbf(p) => bytes(p.effective_limit()),
            LeafKind::Red(p) => bytes(u64::from(p.limit)),
            LeafKind::Rio(p) => bytes(u64::from(p.limit)),
            LeafKind::Codel(p) => u64::from(p.limit),
            LeafKind::FqCodel(p) => u64::from(p.limit),
            LeafKind::Cake(p) => bytes(p.buffer_limit()),
        }
    }
}

impl Policy {
    /// Frames the policy's queues hold when every leaf is full, the upload side included.
    pub fn worst_case_frames(&self) -> u64 {
        let own: u64 = match self.root_leaf() {
            Some(leaf) => leaf.max_frames(),
            None => self
                .classes()
                .iter()
                .filter(|c| c.is_leaf)
                .map(|c| c.leaf.max_frames())
                .fold(0u64, u64::saturating_add),
        };
        own.saturating_add(self.upload().map_or(0, Policy::worst_case_frames))
    }
}

#[cfg(test)]
mod tests {
    use crate::Policy;

    #[test]
    fn every_leaf_full_counts_frames_not_bytes() {
        let text = "qdisc = \"htb\"\ndefault = \"a\"\n\
            [[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
            [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"5mbit\"\n\
            [[class]]\nname = \"b\"\nparent = \"root\"\nrate = \"5mbit\"\n\
            leaf = { type = \"bfifo\", limit = 6000 }\n";
        let p = Policy::parse(text, "p.toml").expect("policy");
        // a: the default pfifo of 1000 packets; b: 6000 bytes of 60-byte frames.
        assert_eq!(p.worst_case_frames(), 1000 + 100);
    }
}
