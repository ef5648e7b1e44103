//! What the seed changes besides the UDP sources' own draws: small start offsets and receiver
//! processing jitter, so that runs of a TCP-only scenario under different seeds differ (one
//! sample each of a distribution) and a sweep over seeds gives a confidence interval.
//!
//! * **Start offsets**: each flow starts up to [`START_JITTER`] after its `start`, uniformly (a
//!   flow whose offset would reach its `stop` starts on time). Not the flows of an `arrivals`
//!   entry: their arrival process is already the seed's, and their completion time counts from
//!   the arrival.
//! * **ACK processing jitter**: each TCP ACK leaves the receiver up to [`ACK_JITTER`] after the
//!   segment that triggered it, uniformly, never before the flow's previous ACK (a receiver does
//!   not reorder its own ACKs).
//!
//! Seed 1, the default, has neither: its runs are exactly those of a simulator without jitter,
//! so every calibrated figure (`scripts/calibrate`, `linkshare fidelity --check`, the seed tests)
//! holds. Every other seed draws both from its own generator, independent of the UDP sources'
//! (the same seed gives the same run, event for event).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use linkshare_core::Duration;

/// The seed whose runs have no jitter (the default `seed`).
pub const NO_JITTER_SEED: u64 = 1;
/// Largest start offset.
pub const START_JITTER: Duration = Duration::from_millis(10);
/// Largest extra delay of an ACK at the receiver.
pub const ACK_JITTER: Duration = Duration::from_micros(50);

/// The jitter generator of flow `i` under `seed`; `None` for [`NO_JITTER_SEED`].
pub fn generator(seed: u64, i: usize) -> Option<Pcg64Mcg> {
    if seed == NO_JITTER_SEED {
        return None;
    }
    // A different mix from the UDP sources' generators, so the two streams are unrelated.
    let s = seed.wrapping_mul(0xA076_1D64_78BD_642F)
        ^ (i as u64 + 1).wrapping_mul(0xE703_7ED1_A0B4_28DB);
    Some(Pcg64Mcg::seed_from_u64(s))
}

/// Flow start time after its offset (ns).
pub fn start(rng: Option<&mut Pcg64Mcg>, start: u64, stop: u64) -> u64 {
    match rng {
        Some(r) => {
            let t = start.saturating_add(r.gen_range(0..START_JITTER.0));
            if t < stop {
                t
            } else {
                start
            }
        }
        None => start,
    }
}

/// Extra delay of the next ACK (ns), 0 without jitter.
pub fn ack_delay(rng: Option<&mut Pcg64Mcg>) -> u64 {
    rng.map(|r| r.gen_range(0..ACK_JITTER.0)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_one_has_no_jitter_and_others_are_bounded_and_repeatable() {
        assert!(generator(1, 0).is_none());
        assert_eq!(start(None, 5, 100), 5);
        assert_eq!(ack_delay(None), 0);
        let draws = |seed| {
            let mut g = generator(seed, 3);
            let s: Vec<u64> = (0..20)
                .map(|_| start(g.as_mut(), 1_000, u64::MAX))
                .collect();
            let a: Vec<u64> = (0..20).map(|_| ack_delay(g.as_mut())).collect();
            (s, a)
        };
        let (s, a) = draws(2);
        assert_eq!((s.clone(), a.clone()), draws(2));
        assert_ne!(s, draws(3).0);
        assert!(s
            .iter()
            .all(|&t| (1_000..1_000 + START_JITTER.0).contains(&t)));
        assert!(a.iter().all(|&d| d < ACK_JITTER.0));
        // An offset never moves a start to or past the flow's stop.
        let mut g = generator(2, 0);
        assert!((0..100).all(|_| start(g.as_mut(), 10, 11) == 10));
    }
}
