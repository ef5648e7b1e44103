//! The token exchange between shards: one [`SharedPool`] per shared ancestor (atomic, behind an
//! `Arc`) and one [`Gate`] per shard (plain fields, owned by the shard's thread).
//!
//! Principles (the bound they give is derived in [`super`]):
//! * **Tokens are minted only by the gates**, each at its share `ρ_s` of the ancestor's rate
//!   (`Σ ρ_s = R` exactly, integer bit/s), lazily: a gate credits `(now − t) · ρ_s` when its shard
//!   is polled. Time never enters the pool, so shards need no common clock and the pool needs no
//!   timestamp: it is one signed counter.
//! * **A gate holds at most one lease `Q`.** What it mints beyond `Q` is deposited in the pool
//!   (unused guarantee becomes spare for the others); when its own tokens run out it takes up to
//!   `Q` from the pool in one atomic step. So a busy shard touches the shared cache line about
//!   once per `Q` bytes it sends on borrowed tokens, and once per `Q` bytes an idle shard mints.
//! * **The pool is capped at `P` bytes**: deposits beyond the cap are lost (counted), as tokens
//!   beyond a bucket's size are in HTB.
//! * Units are nano-bits (a byte costs `8·10⁹`, a rate of `r` bit/s mints `r` per nanosecond), as
//!   in [`crate::htb`]: minting and charging are exact integers, so over a long run the gates
//!   mint exactly `R` per second.
//!
//! Lock-freedom: the pool is a single `AtomicI64` changed only by compare-and-swap loops
//! ([`AtomicI64::fetch_update`]); a thread whose CAS fails retries with the value it read, so some
//! thread always makes progress and none ever blocks. `Relaxed` ordering suffices: the counter
//! publishes no other data, and read-modify-write operations on one location are totally ordered.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::units::{Rate, Time, NS_PER_SEC};

/// Nano-bits per byte.
const NBITS_PER_BYTE: i64 = 8 * NS_PER_SEC as i64;
/// Largest amount credited or held at once (a quarter of `i64`, as HTB's `TOKEN_BOUND`), so that
/// no sum below can overflow.
const BOUND: i64 = i64::MAX / 4;

/// Bytes to nano-bits, saturating at [`BOUND`].
pub(super) fn nbits(bytes: u64) -> i64 {
    (bytes as i128 * NBITS_PER_BYTE as i128).min(BOUND as i128) as i64
}

/// The tokens of one shared ancestor, shared by every shard below it.
#[derive(Debug)]
pub struct SharedPool {
    /// Nano-bits, in `[−BOUND, cap]` (negative only transiently, never in practice: takes never
    /// go below zero).
    tokens: AtomicI64,
    cap: i64,
    /// Nano-bits lost to the cap (deposits while full).
    clipped: AtomicU64,
}

impl SharedPool {
    /// A pool of at most `cap_bytes`, starting full (as an HTB bucket starts full).
    pub fn new(cap_bytes: u64) -> Self {
        let cap = nbits(cap_bytes);
        SharedPool {
            tokens: AtomicI64::new(cap),
            cap,
            clipped: AtomicU64::new(0),
        }
    }

    /// Add `nb` nano-bits (`nb ≥ 0`), keeping at most the cap; returns what the cap cut off.
    pub fn deposit(&self, nb: i64) -> i64 {
        let nb = nb.clamp(0, BOUND);
        let mut lost = 0;
        let _ = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                let sum = t.saturating_add(nb);
                lost = sum.saturating_sub(self.cap).max(0);
                Some(sum.min(self.cap))
            });
        if lost > 0 {
            self.clipped.fetch_add(lost as u64, Ordering::Relaxed);
        }
        lost
    }

    /// Take up to `want` nano-bits (never below zero); returns what was taken.
    pub fn take(&self, want: i64) -> i64 {
        let want = want.clamp(0, BOUND);
        let mut got = 0;
        let _ = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                got = t.clamp(0, want);
                (got > 0).then_some(t - got)
            });
        got
    }

    /// The pool's level, in nano-bits.
    pub fn level(&self) -> i64 {
        self.tokens.load(Ordering::Relaxed)
    }

    /// The cap, in nano-bits.
    pub fn cap(&self) -> i64 {
        self.cap
    }

    /// Nano-bits lost to the cap so far.
    pub fn clipped(&self) -> u64 {
        self.clipped.load(Ordering::Relaxed)
    }
}

/// What a gate did, for statistics and the tests' conservation checks (nano-bits).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct GateStats {
    /// Minted by this gate's refill.
    pub minted: u64,
    /// Taken from the pool.
    pub leased: u64,
    /// Number of takes that got something.
    pub leases: u64,
    /// Deposited into the pool (including what the cap cut off).
    pub deposited: u64,
    /// Charged for packets sent.
    pub charged: u64,
}

/// One shard's side of the exchange with one [`SharedPool`].
#[derive(Debug)]
pub struct Gate {
    pool: Arc<SharedPool>,
    /// `ρ_s`, bit/s (= nano-bits per ns).
    rate: u64,
    /// Nano-bits, in `(−L·8·10⁹, Q·8·10⁹]` after a refill (`L` the largest packet).
    tokens: i64,
    /// `Q` in nano-bits: the most this gate holds, and what it asks the pool for.
    lease: i64,
    /// Instant of the last refill.
    t: u64,
    stats: GateStats,
}

impl Gate {
    /// A gate minting `rate` and holding at most `lease_bytes`, starting empty at time 0.
    pub fn new(pool: Arc<SharedPool>, rate: Rate, lease_bytes: u32) -> Self {
        Gate {
            pool,
            rate: rate.0,
            tokens: 0,
            lease: nbits(lease_bytes as u64).max(1),
            t: 0,
            stats: GateStats::default(),
        }
    }

    /// Mint what `[t, now]` brings at `ρ_s`; deposit what exceeds one lease. Time that stands
    /// still or goes backwards mints nothing.
    pub fn refill(&mut self, now: Time) {
        if now.0 <= self.t {
            return;
        }
        let gain = ((now.0 - self.t) as i128 * self.rate as i128).min(BOUND as i128) as i64;
        self.t = now.0;
        self.stats.minted = self.stats.minted.saturating_add(gain as u64);
        let t = self.tokens.saturating_add(gain);
        if t > self.lease {
            let extra = t - self.lease;
            self.pool.deposit(extra);
            self.stats.deposited = self.stats.deposited.saturating_add(extra as u64);
            self.tokens = self.lease;
        } else {
            self.tokens = t;
        }
    }

    /// May the shard send a packet now? Yes while it holds tokens; otherwise it takes up to one
    /// lease from the pool (one CAS loop) and answers from that.
    pub fn open(&mut self) -> bool {
        if self.tokens > 0 {
            return true;
        }
        let got = self.pool.take(self.lease - self.tokens.max(0));
        if got > 0 {
            self.tokens += got;
            self.stats.leased = self.stats.leased.saturating_add(got as u64);
            self.stats.leases += 1;
        }
        self.tokens > 0
    }

    /// Charge a sent packet of `len` bytes (the gate may go into debt by at most one packet).
    pub fn charge(&mut self, len: u32) {
        let c = nbits(len as u64);
        self.tokens = self.tokens.saturating_sub(c).max(-BOUND);
        self.stats.charged = self.stats.charged.saturating_add(c as u64);
    }

    /// When a closed gate opens on its own minting (`None` if it mints nothing). Deposits by
    /// other shards may open it earlier: a driver also retries after [`Self::retry_ns`].
    pub fn opens_at(&self, now: Time) -> Option<Time> {
        if self.tokens > 0 {
            return Some(now);
        }
        if self.rate == 0 {
            return None;
        }
        let debt = (1 - self.tokens as i128) as u128;
        let dt = debt.div_ceil(self.rate as u128).min(u64::MAX as u128) as u64;
        Some(Time(now.0.max(self.t).saturating_add(dt)))
    }

    /// Time for the ancestor's whole rate `r` to mint one lease: how long a closed gate waits
    /// before asking the pool again when its own minting is slower.
    pub fn retry_ns(&self, r: Rate) -> u64 {
        if r.0 == 0 {
            return NS_PER_SEC;
        }
        (self.lease as u64).div_ceil(r.0).max(1)
    }

    /// Tokens held, in nano-bits.
    pub fn tokens(&self) -> i64 {
        self.tokens
    }

    /// `ρ_s`.
    pub fn rate(&self) -> Rate {
        Rate(self.rate)
    }

    pub fn stats(&self) -> GateStats {
        self.stats
    }

    pub fn pool(&self) -> &Arc<SharedPool> {
        &self.pool
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_caps_deposits_and_never_goes_negative() {
        let p = SharedPool::new(1000);
        assert_eq!(p.level(), nbits(1000));
        assert_eq!(p.deposit(nbits(10)), nbits(10));
        assert_eq!(p.take(nbits(400)), nbits(400));
        assert_eq!(p.take(nbits(2000)), nbits(600));
        assert_eq!(p.take(nbits(1)), 0);
        assert_eq!(p.level(), 0);
        assert_eq!(p.clipped(), nbits(10) as u64);
    }

    #[test]
    fn gate_mints_its_rate_spills_beyond_a_lease_and_leases_back() {
        let pool = Arc::new(SharedPool::new(10_000));
        pool.take(pool.cap());
        // 8 Mbit/s = 1 byte per µs; lease 1000 bytes.
        let mut g = Gate::new(pool.clone(), Rate::mbit(8), 1000);
        g.refill(Time(500_000)); // 500 bytes
        assert_eq!(g.tokens(), nbits(500));
        g.refill(Time(2_000_000)); // +1500: 1000 kept, 1000 deposited
        assert_eq!(g.tokens(), nbits(1000));
        assert_eq!(pool.level(), nbits(1000));
        g.charge(1500);
        assert_eq!(g.tokens(), -nbits(500));
        assert!(g.open(), "the pool lends a lease");
        assert_eq!(g.tokens(), nbits(500));
        assert_eq!(pool.level(), 0);
        g.charge(600);
        assert!(!g.open(), "empty pool, gate in debt");
        // 100 bytes of debt + 1 nano-bit at 1 byte/µs.
        assert_eq!(
            g.opens_at(Time(2_000_000)),
            Some(Time(2_000_000 + 100_000 + 1))
        );
        let s = g.stats();
        // Conservation: what came in is what went out plus what is held.
        assert_eq!(
            s.minted as i128 + s.leased as i128 - s.charged as i128 - s.deposited as i128,
            g.tokens() as i128
        );
    }

    #[test]
    fn time_going_backwards_mints_nothing() {
        let pool = Arc::new(SharedPool::new(0));
        let mut g = Gate::new(pool, Rate::mbit(8), 1000);
        g.refill(Time(100_000));
        let t = g.tokens();
        g.refill(Time(50_000));
        g.refill(Time(100_000));
        assert_eq!(g.tokens(), t);
    }
}
