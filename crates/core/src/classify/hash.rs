//! A fixed, deterministic hasher for the tuple tables.
//!
//! The classifier must behave identically on every run and every machine, so it cannot use std's
//! randomly keyed `RandomState`. This hasher folds each word in with a multiply–rotate step and
//! ends with the SplitMix64 finaliser, so that keys differing only in their high bits (subnets
//! such as `10.0.X.0/24`) still spread over the low bits the hash table indexes with.
//!
//! The table contents come from the (trusted) policy; packets only probe it. A packet can at worst
//! hit the longest probe sequence the policy's own keys produced, so a fixed hash does not let
//! traffic degrade lookups beyond what the configuration already allows.

use std::hash::{BuildHasherDefault, Hasher};

/// Odd multiplier (2^64 / golden ratio).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TupleHasher {
    h: u64,
}

impl TupleHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.h = (self.h.rotate_left(26) ^ word).wrapping_mul(K);
    }
}

impl Hasher for TupleHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }
    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.add(u64::from(v));
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    #[inline]
    fn write_u128(&mut self, v: u128) {
        self.add(v as u64);
        self.add((v >> 64) as u64);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // SplitMix64 finaliser: every input bit affects every output bit.
        let mut z = self.h;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `BuildHasher` for the tuple tables: no per-process key, so iteration and layout are repeatable.
pub(crate) type TupleBuildHasher = BuildHasherDefault<TupleHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn deterministic_and_spreads_high_bits() {
        let b = TupleBuildHasher::default();
        assert_eq!(b.hash_one(0x0a00_0100u128), b.hash_one(0x0a00_0100u128));
        // Keys that differ only in bits 8..16 must not collapse onto a few low-bit buckets.
        let mut low = std::collections::HashSet::new();
        for x in 0u128..256 {
            low.insert(b.hash_one(0x0a00_0000u128 | (x << 8)) & 0x3ff);
        }
        assert!(
            low.len() > 200,
            "only {} distinct low-bit buckets",
            low.len()
        );
    }
}
