//! Axis ticks at "nice" round numbers: steps of 1, 2 or 5 × 10^k.
//!
//! For a span and a target number of intervals, the raw step `span / target` is rounded *up* to
//! the next nice number, so an axis never gets more than `target` intervals (plus the partial
//! ones at its ends). Tick values are computed as `k × step` from integers, never accumulated,
//! so they do not drift, and they print with exactly as many decimals as the step needs.

/// Hard cap on ticks per axis, whatever the input.
const MAX_TICKS: usize = 50;

/// The smallest step of the form 1, 2 or 5 × 10^k that is ≥ `span / target`.
pub fn nice_step(span: f64, target: usize) -> f64 {
    let target = target.max(1) as f64;
    let raw = span.abs() / target;
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let exp = raw.log10().floor();
    let mag = 10f64.powf(exp);
    let f = raw / mag;
    // `f` is in [1, 10); a hair of tolerance so that 2.0000000001 (from rounding) stays 2.
    let nice = if f <= 1.0 + 1e-9 {
        1.0
    } else if f <= 2.0 + 1e-9 {
        2.0
    } else if f <= 5.0 + 1e-9 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Tick values covering `[min, max]`: the first is ≤ `min`, the last ≥ `max`, spaced by
/// [`nice_step`]`(max - min, target)`. A degenerate or non-finite range becomes `[0, 1]`-ish.
pub fn nice_ticks(min: f64, max: f64, target: usize) -> Vec<f64> {
    let (lo, hi) = sane_range(min, max);
    let mut step = nice_step(hi - lo, target);
    loop {
        let first = (lo / step + 1e-9).floor() as i64;
        let last = (hi / step - 1e-9).ceil() as i64;
        if ((last - first) as usize) < MAX_TICKS {
            return (first..=last)
                .map(|k| clean(k as f64 * step, step))
                .collect();
        }
        step *= 10.0;
    }
}

/// Decimals needed to print ticks spaced by `step` (0 for steps ≥ 1).
pub fn decimals_for(step: f64) -> usize {
    if !step.is_finite() || step <= 0.0 || step >= 1.0 {
        return 0;
    }
    (-(step.log10()) - 1e-9).ceil().clamp(0.0, 12.0) as usize
}

/// A tick label: `value` with the decimals `step` needs.
pub fn format_tick(value: f64, step: f64) -> String {
    super::super::numfmt::fixed_pad(value, decimals_for(step))
}

/// Order the bounds and widen an empty range, so the axis always has a span.
pub fn sane_range(min: f64, max: f64) -> (f64, f64) {
    let (mut lo, mut hi) = if min.is_finite() && max.is_finite() {
        (min.min(max), min.max(max))
    } else {
        (0.0, 1.0)
    };
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        if lo == 0.0 {
            hi = 1.0;
        } else {
            let pad = lo.abs() * 0.5;
            lo -= pad;
            hi += pad;
        }
    }
    (lo, hi)
}

/// Snap values within a millionth of a step to the exact multiple (and -0 to 0).
fn clean(value: f64, step: f64) -> f64 {
    if value.abs() < step * 1e-6 {
        0.0
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_one_two_five() {
        assert_eq!(nice_step(9.7e6, 5), 2e6);
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(10.0, 4), 5.0);
        assert_eq!(nice_step(1.0, 5), 0.2);
        assert_eq!(nice_step(0.03, 3), 0.01);
        assert_eq!(nice_step(700.0, 6), 200.0);
        assert_eq!(nice_step(0.0, 5), 1.0);
    }

    #[test]
    fn ticks_cover_range() {
        assert_eq!(
            nice_ticks(0.0, 9.7e6, 5),
            vec![0.0, 2e6, 4e6, 6e6, 8e6, 10e6]
        );
        assert_eq!(
            nice_ticks(0.0, 30.0, 6),
            vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]
        );
        let t = nice_ticks(12.3, 47.9, 5);
        assert_eq!(t.first().copied(), Some(10.0));
        assert_eq!(t.last().copied(), Some(50.0));
        // Degenerate ranges still give an axis.
        assert!(nice_ticks(5.0, 5.0, 5).len() >= 2);
        assert!(nice_ticks(f64::NAN, 1.0, 5).len() >= 2);
        // Bounded whatever the target.
        assert!(nice_ticks(0.0, 1e12, 100_000).len() <= 50);
    }

    #[test]
    fn labels_have_the_decimals_of_the_step() {
        assert_eq!(decimals_for(2.0), 0);
        assert_eq!(decimals_for(0.5), 1);
        assert_eq!(decimals_for(0.2), 1);
        assert_eq!(decimals_for(0.05), 2);
        assert_eq!(decimals_for(0.01), 2);
        assert_eq!(format_tick(0.30000000000000004, 0.1), "0.3");
        assert_eq!(format_tick(10.0, 5.0), "10");
    }
}
