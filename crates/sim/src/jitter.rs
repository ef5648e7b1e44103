//! What the seed changes besides the UDP sources' own draws: receiver processing jitter and small
//! start offsets, so that runs of a TCP-only scenario under different seeds differ (one sample
//! each of a distribution) and a sweep over seeds gives a confidence interval.
//!
//! * **ACK processing jitter**, under every seed: each TCP ACK leaves the receiver up to
//!   [`ACK_JITTER`] after the segment that triggered it, uniformly, never before the flow's
//!   previous ACK (a receiver does not reorder its own ACKs). Real hosts are never exact; a
//!   simulator that is suffers drop-tail *phase effects* (Floyd & Jacobson, "On Traffic Phase
//!   Effects in Packet-Switched Gateways", 1992): flows whose packets reach a full FIFO at the
//!   same point of each service time keep losing there, and the split of a shared queue locks
//!   onto one pattern. Issue 37's RTT mix (four CUBIC flows, 10 and 70 ms, one 100-packet FIFO)
//!   gave the short pair 16.3 Mbit/s without this jitter and 13.3–14.7 with it, against 13.5–14.3
//!   in three lab runs.
//! * **Start offsets**, under every seed but [`ON_TIME_SEED`]: each flow starts up to
//!   [`START_JITTER`] after its `start`, uniformly (a flow whose offset would reach its `stop`
//!   starts on time). Not the flows of an `arrivals` entry: their arrival process is already the
//!   seed's, and their completion time counts from the arrival.
//!
//! Each flow draws from its own generator, independent of the UDP sources' (the same seed gives
//! the same run, event for event).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use linkshare_core::Duration;

/// The seed whose flows start on time (the default `seed`); its BBR flows also keep their
/// historical per-flow choices.
pub const ON_TIME_SEED: u64 = 1;
/// Largest start offset.
pub const START_JITTER: Duration = Duration::from_millis(10);
/// Largest extra delay of an ACK at the receiver.
pub const ACK_JITTER: Duration = Duration::from_micros(50);

/// The jitter generator of flow `i` under `seed`.
pub fn generator(seed: u64, i: usize) -> Pcg64Mcg {
    // A different mix from the UDP sources' generators, so the two streams are unrelated.
    let s = seed.wrapping_mul(0xA076_1D64_78BD_642F)
        ^ (i as u64 + 1).wrapping_mul(0xE703_7ED1_A0B4_28DB);
    Pcg64Mcg::seed_from_u64(s)
}

/// Flow start time after its offset (ns); on time under [`ON_TIME_SEED`].
pub fn start(rng: &mut Pcg64Mcg, seed: u64, start: u64, stop: u64) -> u64 {
    if seed == ON_TIME_SEED {
        return start;
    }
    let t = start.saturating_add(rng.gen_range(0..START_JITTER.0));
    if t < stop {
        t
    } else {
        start
    }
}

/// Extra delay of the next ACK (ns).
pub fn ack_delay(rng: &mut Pcg64Mcg) -> u64 {
    rng.gen_range(0..ACK_JITTER.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_jitters_acks_and_only_seed_one_starts_on_time() {
        let draws = |seed| {
            let mut g = generator(seed, 3);
            let s: Vec<u64> = (0..20)
                .map(|_| start(&mut g, seed, 1_000, u64::MAX))
                .collect();
            let a: Vec<u64> = (0..20).map(|_| ack_delay(&mut g)).collect();
            (s, a)
        };
        let (s1, a1) = draws(ON_TIME_SEED);
        assert!(s1.iter().all(|&t| t == 1_000), "seed 1 starts on time");
        assert!(a1.iter().all(|&d| d < ACK_JITTER.0));
        assert!(a1.iter().any(|&d| d > 0), "seed 1 jitters its ACKs");
        let (s, a) = draws(2);
        assert_eq!((s.clone(), a.clone()), draws(2));
        assert_ne!(s, draws(3).0);
        assert_ne!(a, a1);
        assert!(s
            .iter()
            .all(|&t| (1_000..1_000 + START_JITTER.0).contains(&t)));
        assert!(a.iter().all(|&d| d < ACK_JITTER.0));
        // An offset never moves a start to or past the flow's stop.
        let mut g = generator(2, 0);
        assert!((0..100).all(|_| start(&mut g, 2, 10, 11) == 10));
    }
}
