//! Ping: an echo request of `size` IP bytes every `interval`; the sink answers at once with a
//! reply of the same size over the uncongested return path, and the source records the RTT of
//! every probe (`now − sent_at` when the reply arrives).

use crate::scenario::PingSpec;

#[derive(Clone, Debug)]
pub struct PingSource {
    pub interval: u64,
    pub size: u32,
    pub seq: u64,
}

impl PingSource {
    pub fn new(spec: &PingSpec) -> Self {
        PingSource {
            interval: spec.interval.0,
            size: spec.size,
            seq: 0,
        }
    }
}
