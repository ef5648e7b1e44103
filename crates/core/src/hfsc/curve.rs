//! Service curves: the two-piece linear curves of HFSC and the runtime curves built from them.
//!
//! Principles: a service curve `S(t)` says how many bytes a class is owed `t` after it became
//! backlogged: slope `m1` for the first `d`, then slope `m2` (Stoica, Zhang & Ng 1997, §3; Linux
//! `struct tc_service_curve`). `m1 > m2` is *concave* (a burst, then a rate: low delay without a
//! high rate), `m1 < m2` *convex* (a delay, then a rate). A **runtime curve** is such a curve
//! anchored at a point `(x, y)` of (time, cumulative bytes) and reshaped by [`Runtime::min`]
//! each time the class becomes active again: the deadline, eligible, virtual and upper-limit
//! curves of a class are runtime curves.
//!
//! ## Units and rounding
//! Times `x` are nanoseconds (`u64`), amounts `y` bytes (`u64`), slopes bits per second (`u64`).
//! Every product is taken in `u128` — `x · m` is below 2^128 for any `u64` pair — so nothing is
//! truncated: Linux keeps scaled slopes (`sm = m·2^20 / ticks`) and divided by a 32-bit `dsm` in
//! `rtsc_min`, which truncated `m1 − m2` and divided by zero for `m1` near 2^32 bit/s
//! (CVE-2026-31423); OpenBSD kept rates in 32 bits until 2026. Here `m1 = 4e9` or `u64::MAX` is
//! exact. Bytes from time round down ([`seg_x2y`]); time from bytes rounds up ([`seg_y2x`]): a
//! deadline is never earlier than the curve allows, and `seg_x2y(seg_y2x(y)) ≥ y`.
//! [`INF`] (`u64::MAX`) is "never" (a zero slope); sums saturate at it.

use crate::service_curve::NS_BITS_PER_BYTE;
pub use crate::service_curve::{inverse, seg_x2y, seg_y2x, seg_y2x_inv, ServiceCurve, INF};

/// A service curve anchored at `(x, y)`: `y` bytes at time `x`, then `m1` for `dx` ns (`dy`
/// bytes), then `m2` (Linux `struct runtime_sc`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct Runtime {
    pub x: u64,
    pub y: u64,
    pub m1: u64,
    pub dx: u64,
    pub dy: u64,
    pub m2: u64,
    /// [`inverse`] of `m1` and `m2`, kept with them.
    im1: u64,
    im2: u64,
}

impl Runtime {
    /// The curve `sc` starting at `(x, y)` (Linux `rtsc_init`).
    #[inline]
    pub fn new(sc: &ServiceCurve, x: u64, y: u64) -> Self {
        Runtime {
            x,
            y,
            m1: sc.m1,
            dx: sc.d,
            dy: sc.first_dy(),
            m2: sc.m2,
            im1: inverse(sc.m1),
            im2: inverse(sc.m2),
        }
    }

    /// The same curve without its first segment: linear at `m2` from `(x, y)` (the eligible
    /// curve of a convex real-time curve).
    #[inline]
    pub fn linear_part(mut self) -> Self {
        self.dx = 0;
        self.dy = 0;
        self
    }

    /// Bytes by time `t` (Linux `rtsc_x2y`).
    #[inline]
    pub fn x2y(&self, t: u64) -> u64 {
        if t <= self.x {
            self.y
        } else if t - self.x <= self.dx {
            self.y.saturating_add(seg_x2y(t - self.x, self.m1))
        } else {
            self.y
                .saturating_add(self.dy)
                .saturating_add(seg_x2y(t - self.x - self.dx, self.m2))
        }
    }

    /// The time by which `y` bytes are owed (Linux `rtsc_y2x`); [`INF`] if never.
    #[inline]
    pub fn y2x(&self, y: u64) -> u64 {
        if y < self.y {
            self.x
        } else if y - self.y <= self.dy {
            if self.dy == 0 {
                self.x.saturating_add(self.dx)
            } else {
                self.x
                    .saturating_add(seg_y2x_inv(y - self.y, self.m1, self.im1))
            }
        } else {
            self.x.saturating_add(self.dx).saturating_add(seg_y2x_inv(
                y - self.y - self.dy,
                self.m2,
                self.im2,
            ))
        }
    }

    /// Replace this curve by the minimum of itself and `sc` anchored at `(x, y)` (Linux and
    /// OpenBSD `rtsc_min`). For a convex `sc` the minimum is one of the two (the later start
    /// wins only if it is lower at `x`); for a concave one the new curve may cut the old one,
    /// and the first segment is shortened to end where they meet:
    /// `y + m1·dx = y1 + m2·dx`, so `dx = (y1 − y) / (m1 − m2)` — computed exactly in `u128`
    /// (`m1 − m2` is never truncated, the CVE-2026-31423 fix).
    #[inline]
    pub fn min(&mut self, sc: &ServiceCurve, x: u64, y: u64) {
        if sc.is_convex() {
            if self.x2y(x) < y {
                return;
            }
            self.x = x;
            self.y = y;
            return;
        }
        let y1 = self.x2y(x);
        if y1 <= y {
            return;
        }
        let y2 = self.x2y(x.saturating_add(sc.d));
        if y2 >= y.saturating_add(sc.first_dy()) {
            self.reset(sc, x, y);
            return;
        }
        // They cross: here m1 > m2 (concave), so the divisor is at least 1.
        let dsm = (sc.m1 - sc.m2) as u128;
        let mut dx = ((y1 - y) as u128 * NS_BITS_PER_BYTE / dsm).min(INF as u128) as u64;
        // The old curve may still be in its first segment at x: add what is left of it.
        let old_end = self.x.saturating_add(self.dx);
        if old_end > x {
            dx = dx.saturating_add(old_end - x);
        }
        self.set_slopes(sc);
        self.x = x;
        self.y = y;
        self.dx = dx;
        self.dy = seg_x2y(dx, sc.m1);
    }

    /// `sc` anchored at `(x, y)`, as [`Runtime::new`], without recomputing the inverses of
    /// slopes that did not change (a runtime curve is always reshaped by the same class curve).
    #[inline]
    fn reset(&mut self, sc: &ServiceCurve, x: u64, y: u64) {
        self.set_slopes(sc);
        self.x = x;
        self.y = y;
        self.dx = sc.d;
        self.dy = sc.first_dy();
    }

    #[inline]
    fn set_slopes(&mut self, sc: &ServiceCurve) {
        if self.m1 != sc.m1 || self.im1 == 0 {
            self.m1 = sc.m1;
            self.im1 = inverse(sc.m1);
        }
        if self.m2 != sc.m2 || self.im2 == 0 {
            self.m2 = sc.m2;
            self.im2 = inverse(sc.m2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn voip_curve_by_hand() {
        // 400 kbit/s for 30 ms = 1500 bytes, then 100 kbit/s.
        let sc = ServiceCurve {
            m1: 400_000,
            d: 30 * MS,
            m2: 100_000,
        };
        let rt = Runtime::new(&sc, 0, 0);
        assert_eq!(rt.dy, 1500);
        assert_eq!(rt.y2x(1500), 30 * MS);
        // 1500 more bytes at 100 kbit/s: 120 ms.
        assert_eq!(rt.y2x(3000), 150 * MS);
        assert_eq!(rt.x2y(150 * MS), 3000);
    }

    #[test]
    fn umax_dmax_forms() {
        // 1500 bytes in 30 ms then 100 kbit: concave, m1 = 400 kbit.
        let c = ServiceCurve::from_umax(1500, 30 * MS, 100_000).unwrap();
        assert_eq!((c.m1, c.d, c.m2), (400_000, 30 * MS, 100_000));
        // 1500 bytes in 30 ms at 1 Mbit (12 ms at rate): convex, 18 ms of nothing.
        let c = ServiceCurve::from_umax(1500, 30 * MS, 1_000_000).unwrap();
        assert_eq!((c.m1, c.d, c.m2), (0, 18 * MS, 1_000_000));
        assert_eq!(Runtime::new(&c, 0, 0).y2x(1500), 30 * MS);
        assert!(ServiceCurve::from_umax(1500, 0, 1).is_none());
    }

    #[test]
    fn min_at_the_32_bit_boundary_does_not_divide_by_zero() {
        // m1 − m2 = 2^32 exactly: a 32-bit divisor would be 0 (CVE-2026-31423).
        let sc = ServiceCurve {
            m1: 4_294_967_296 + 1_000,
            d: 10 * MS,
            m2: 1_000,
        };
        let mut rt = Runtime::new(&sc, 0, 0);
        // Re-anchor after the old curve's first segment, having served a little less than it
        // allowed: the new burst crosses the old m2 slope.
        let x = 20 * MS;
        let y1 = rt.x2y(x);
        rt.min(&sc, x, y1 - 1_000_000);
        assert!(rt.dx > 0 && rt.dx < 10 * MS, "{rt:?}");
        // Crossing point: y + m1·dx = y1 + m2·dx (to a byte).
        let lhs = rt.y + seg_x2y(rt.dx, sc.m1);
        let old = y1 + seg_x2y(rt.dx, sc.m2);
        assert!(lhs.abs_diff(old) <= 1, "{lhs} vs {old}");
    }

    fn curve() -> impl Strategy<Value = ServiceCurve> {
        let m = prop_oneof![
            0u64..2_000_000,
            Just(u32::MAX as u64),
            Just(u32::MAX as u64 + 1),
            Just(4_000_000_000u64),
            Just(u64::MAX),
            any::<u64>(),
        ];
        (m.clone(), 0u64..1_000_000_000_000, m).prop_map(|(m1, d, m2)| ServiceCurve { m1, d, m2 })
    }

    proptest! {
        /// y2x is the least time by which x2y reaches y (up to rounding of one ns).
        #[test]
        fn y2x_inverts_x2y(sc in curve(), x0 in 0u64..1u64<<62, y0 in 0u64..1u64<<62,
                           dy in 0u64..1u64<<40) {
            let rt = Runtime::new(&sc, x0, y0);
            let y = y0.saturating_add(dy);
            let t = rt.y2x(y);
            if t != INF {
                prop_assert!(rt.x2y(t) >= y, "x2y(y2x({y})) = {} < {y}", rt.x2y(t));
                if t > x0 && t - 1 > x0 {
                    prop_assert!(rt.x2y(t - 1) <= y);
                }
            }
        }

        /// The division steered by the reciprocal is the exact one, at every magnitude.
        #[test]
        fn y2x_with_the_inverse_is_exact(y in prop_oneof![0u64..1u64<<20, any::<u64>(), Just(u64::MAX / 8_000_000_000), Just(u64::MAX / 8_000_000_000 + 1)],
                                          m in prop_oneof![1u64..10, 1u64..1u64<<33, Just(u32::MAX as u64), Just(u64::MAX), any::<u64>()]) {
            prop_assert_eq!(seg_y2x_inv(y, m, inverse(m)), seg_y2x(y, m));
        }

        /// x2y's 64-bit path gives the exact value.
        #[test]
        fn x2y_fast_path_is_exact(x in any::<u64>(), m in prop_oneof![0u64..1u64<<34, any::<u64>()]) {
            let exact = (x as u128 * m as u128 / NS_BITS_PER_BYTE).min(u64::MAX as u128) as u64;
            prop_assert_eq!(seg_x2y(x, m), exact);
        }

        /// min never panics and, at its new anchor, is no higher than either curve.
        #[test]
        fn min_is_below_both_at_the_anchor(sc in curve(), x0 in 0u64..1u64<<50,
                                           y0 in 0u64..1u64<<40, gap in 0u64..1u64<<40,
                                           served in 0u64..1u64<<40) {
            let mut rt = Runtime::new(&sc, x0, y0);
            let old = rt;
            let x = x0 + gap;
            let y = y0 + served;
            rt.min(&sc, x, y);
            prop_assert!(rt.x2y(x) <= old.x2y(x).min(y), "{rt:?} above at {x}");
        }
    }
}
